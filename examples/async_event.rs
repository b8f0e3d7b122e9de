//! Waits for async events (port changes, GID changes, QP/CQ/SRQ errors, ...)
//! and prints each with the object it concerns, then acknowledges it: what
//! `ibv_get_async_event` + `ibv_ack_async_event` loops do in C.
//!
//! ```sh
//! cargo run --example async_event -- [DEVICE] [COUNT]
//! # in another shell: ip link set <netdev> down; ip link set <netdev> up
//! cargo run --example async_event -- --model mlx5_0 2   # the model plays the link change
//! ```
//!
//! Without COUNT it runs until killed; with it, it exits after COUNT events.

use std::os::fd::AsRawFd;

#[path = "common/cli.rs"]
mod cli;

use cli::{Model, Spec};
use uverbs::{AsyncElement, AsyncEvent};

const SPEC: Spec = Spec {
    name: "async_event",
    about: "Waits for the device's async events (port changes, QP/CQ/SRQ errors, ...) and \
            prints each with the object it concerns, then acknowledges it. Change the \
            link of the device's netdev to see port events; on a device model, the model \
            takes port 1 down and up a moment after the start.",
    args: &[
        ("DEVICE", "the device to open (default: the first)"),
        (
            "COUNT",
            "exit after COUNT events (default: run until killed)",
        ),
    ],
    required: 0,
    models: &[Model::Mlx5, Model::Rxe],
};

fn main() {
    let args = cli::parse(&SPEC);
    cli::finish(run(args));
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

fn run(args: cli::Args) -> uverbs::Result<()> {
    let count: Option<u64> = args.parse(1);
    let device = args.device();
    let ctx = device.open(args.get(0))?;
    println!(
        "{}: waiting for async events (async fd {})",
        ctx.device().name,
        ctx.async_fd().as_raw_fd()
    );
    device.flap_port(&ctx); // only on a model
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
