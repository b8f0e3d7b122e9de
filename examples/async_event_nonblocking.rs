//! Async events from an event loop: poll(2) on the context's async event fd
//! (`Context::async_fd`, which also works with epoll or any reactor), then
//! drain it with `try_get_async_event` until it reports "would block"
//! (`Ok(None)`). Each event is printed with its object and acknowledged.
//!
//! ```sh
//! cargo run --example async_event_nonblocking -- [DEVICE] [COUNT]
//! ```

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::os::fd::AsRawFd;

use uverbs::{AsyncElement, Context};

fn main() {
    if let Err(e) = run() {
        eprintln!("async_event_nonblocking: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dev = args.next();
    let count: Option<u64> = args.next().map(|n| n.parse()).transpose()?;
    let ctx = Context::open(dev.as_deref())?;
    println!(
        "{}: polling async fd {} for events",
        ctx.device().name,
        ctx.async_fd().as_raw_fd()
    );
    let mut seen = 0;
    let mut wakeups = 0;
    while count.is_none_or(|c| seen < c) {
        let mut fds = [PollFd::new(ctx.async_fd(), PollFlags::POLLIN)];
        // One second at a time: a real loop would serve other fds here.
        if poll(&mut fds, PollTimeout::from(1000u16))? == 0 {
            continue;
        }
        wakeups += 1;
        // Drain: every queued event, until "would block".
        while let Some(ev) = ctx.try_get_async_event()? {
            let what = match ev.element() {
                AsyncElement::Port(p) => format!("port {p}"),
                AsyncElement::Cq(h) => format!("CQ (handle {h})"),
                AsyncElement::Qp(n) => format!("QP {n:#x}"),
                AsyncElement::Srq(h) => format!("SRQ (handle {h})"),
                AsyncElement::Wq(u) => format!("WQ (user handle {u})"),
                AsyncElement::Device => "the device".into(),
                AsyncElement::Gone(u) => format!("a destroyed object (user handle {u})"),
            };
            println!(
                "wake-up {wakeups}: event {:?} ({}) on {what}",
                ev.event_type(),
                ev.event_type().0
            );
            ev.ack();
            seen += 1;
        }
    }
    Ok(())
}
