//! Async events from an event loop: poll(2) on the context's async event fd
//! (`Context::async_fd`, which also works with epoll or any reactor), then
//! drain it with `try_get_async_event` until it reports "would block"
//! (`Ok(None)`). Each event is printed with its object and acknowledged.
//!
//! ```sh
//! cargo run --example async_event_nonblocking -- [DEVICE] [COUNT]
//! cargo run --example async_event_nonblocking -- --model mlx5_0 2   # on the mlx5 model
//! ```

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::os::fd::AsRawFd;

#[path = "common/cli.rs"]
mod cli;

use cli::{Model, Spec};
use uverbs::AsyncElement;

const SPEC: Spec = Spec {
    name: "async_event_nonblocking",
    about: "The device's async events from an event loop: poll(2) on the context's async \
            event fd, then try_get_async_event until it would block; each event is \
            printed with its object and acknowledged. On a device model, the model takes \
            port 1 down and up a moment after the start.",
    args: &[
        ("DEVICE", "the device to open (default: the first)"),
        (
            "COUNT",
            "exit after COUNT events (default: run until killed)",
        ),
    ],
    required: 0,
    // Not rxe's: its async fd has no readiness for poll(2) to wait on.
    models: &[Model::Mlx5],
};

fn main() {
    let args = cli::parse(&SPEC);
    cli::finish(run(args));
}

fn run(args: cli::Args) -> Result<(), Box<dyn std::error::Error>> {
    let count: Option<u64> = args.parse(1);
    let device = args.device();
    let ctx = device.open(args.get(0))?;
    println!(
        "{}: polling async fd {} for events",
        ctx.device().name,
        ctx.async_fd().as_raw_fd()
    );
    device.flap_port(&ctx); // only on a model
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
