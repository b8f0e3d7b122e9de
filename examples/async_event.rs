//! Waits for async events (port changes, GID changes, QP/CQ/SRQ errors, ...)
//! and prints each with the object it concerns, then acknowledges it: what
//! `ibv_get_async_event` + `ibv_ack_async_event` loops do in C.
//!
//! ```sh
//! cargo run --example async_event -- [DEVICE] [COUNT]
//! # in another shell: ip link set <netdev> down; ip link set <netdev> up
//! ```
//!
//! Without COUNT it runs until killed; with it, it exits after COUNT events.

use std::os::fd::AsRawFd;

use uverbs::{AsyncElement, AsyncEvent, Context};

fn main() {
    if let Err(e) = run() {
        eprintln!("async_event: {e}");
        std::process::exit(1);
    }
}

/// The object an event is about, as text.
fn object(ev: &AsyncEvent) -> String {
    match ev.element() {
        AsyncElement::Port(p) => format!("port {p}"),
        AsyncElement::Cq(h) => format!("CQ (handle {h})"),
        AsyncElement::Qp(n) => format!("QP {n:#x}"),
        AsyncElement::Srq(h) => format!("SRQ (handle {h})"),
        AsyncElement::Wq(u) => format!("WQ (user handle {u})"),
        AsyncElement::Device => "the device".into(),
        AsyncElement::Gone(u) => format!("an already destroyed object (user handle {u})"),
    }
}

fn run() -> uverbs::Result<()> {
    let mut args = std::env::args().skip(1);
    let dev = args.next();
    let count: Option<u64> = args.next().map(|n| n.parse().expect("COUNT is a number"));
    let ctx = Context::open(dev.as_deref())?;
    println!(
        "{}: waiting for async events (async fd {})",
        ctx.device().name,
        ctx.async_fd().as_raw_fd()
    );
    let mut seen = 0;
    while count.is_none_or(|c| seen < c) {
        // Blocks until the kernel queues an event; each read returns one.
        let ev = ctx.get_async_event()?;
        let t = ev.event_type();
        println!(
            "event {} ({}) on {}: {}",
            t.name().unwrap_or("unknown"),
            t.0,
            object(&ev),
            t
        );
        // Acknowledge it (dropping does the same): a destroy of its object
        // waits until this happened.
        ev.ack();
        seen += 1;
    }
    Ok(())
}
