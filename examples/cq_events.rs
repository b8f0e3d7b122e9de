//! Completion events, blocking: a completion channel and a CQ on it, a
//! loopback RC pair, and the classic loop:
//! `req_notify` → post → `get_event` → ack → re-arm → poll until empty.
//!
//! ```sh
//! cargo run --example cq_events -- [DEVICE] [MESSAGES]
//! ```
//!
//! Re-arming before polling matters: a completion that arrives after the
//! last poll but before the next arm would raise no event and be missed.

#[path = "common/loopback.rs"]
mod loopback;

use loopback::{poll_until_empty, Loopback};
use uverbs::{RecvWr, SendWr};

fn main() {
    if let Err(e) = run() {
        eprintln!("cq_events: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dev = args.next();
    let messages: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(4);
    let Loopback {
        channel,
        mut cq,
        mut a,
        mut b,
        buf,
        ..
    } = loopback::setup(dev.as_deref(), messages)?;

    // Arm first, then work: the first completion raises an event.
    cq.req_notify(false)?;
    for i in 0..messages {
        b.post_recv(&[RecvWr::new(1000 + i as u64, &[buf.sge(64 * (i + 1), 64)?])])?;
        a.post_send(&[SendWr::send(i as u64, &[buf.sge(0, 4)?])])?;
    }
    let want = 2 * messages; // a send and a receive completion per message
    let (mut completions, mut events) = (0, 0);
    while completions < want {
        let ev = channel.get_event()?; // blocks
        assert!(ev.is_for(&cq));
        ev.ack(); // (or batch them with uverbs::ack_cq_events)
        events += 1;
        cq.req_notify(false)?; // re-arm BEFORE polling
        completions += poll_until_empty(&mut cq)?;
        println!("event {events}: {completions}/{want} completions so far");
    }
    println!("{messages} messages, {completions} completions, {events} events");
    Ok(())
}
