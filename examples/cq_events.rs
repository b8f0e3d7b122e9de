//! Completion events, blocking: a completion channel and a CQ on it, a
//! loopback RC pair, and the classic loop:
//! `req_notify` → post → `get_event` → ack → re-arm → poll until empty.
//!
//! ```sh
//! cargo run --example cq_events -- [DEVICE] [MESSAGES]
//! cargo run --example cq_events -- --model     # on the mlx5 device model
//! ```
//!
//! Re-arming before polling matters: a completion that arrives after the
//! last poll but before the next arm would raise no event and be missed.

#[path = "common/cli.rs"]
mod cli;
#[path = "common/loopback.rs"]
mod loopback;

use cli::{Model, Spec};
use loopback::{poll_until_empty, Loopback};
use uverbs::{RecvWr, SendWr};

const SPEC: Spec = Spec {
    name: "cq_events",
    about: "Completion events, blocking: two RC QPs of one device exchange MESSAGES \
            messages; the program sleeps in get_event until the CQ's completion \
            channel has an event, acknowledges it, re-arms the CQ and polls it empty.",
    args: &[
        ("DEVICE", "the device to open (default: the first)"),
        ("MESSAGES", "how many messages to send (default: 4)"),
    ],
    required: 0,
    models: &[Model::Mlx5],
};

fn main() {
    let args = cli::parse(&SPEC);
    cli::finish(run(args));
}

fn run(args: cli::Args) -> Result<(), Box<dyn std::error::Error>> {
    let messages: usize = args.parse_or(1, 4);
    let device = args.device();
    let ctx = device.open(args.get(0))?;
    let Loopback {
        channel,
        mut cq,
        mut a,
        mut b,
        buf,
        ..
    } = loopback::setup(&ctx, messages)?;

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
