//! Completion events from an event loop: poll(2) on the completion channel's
//! fd (`CompletionChannel` is `AsFd`; epoll works the same, edge-triggered
//! too), drain it with `try_get_event` until it reports "would block"
//! (`Ok(None)`), acknowledge, re-arm the CQ, then poll the CQ until empty.
//!
//! ```sh
//! cargo run --example cq_events_nonblocking -- [DEVICE] [MESSAGES]
//! cargo run --example cq_events_nonblocking -- --model   # on the mlx5 device model
//! ```

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::os::fd::AsFd;
#[path = "common/cli.rs"]
mod cli;
#[path = "common/loopback.rs"]
mod loopback;

use cli::{Model, Spec};
use loopback::{poll_until_empty, Loopback};
use uverbs::{ack_cq_events, RecvWr, SendWr};

const SPEC: Spec = Spec {
    name: "cq_events_nonblocking",
    about: "Completion events from an event loop: two RC QPs of one device exchange \
            MESSAGES messages; poll(2) waits on the completion channel's fd, \
            try_get_event drains it, the batch is acknowledged, the CQ re-armed and \
            polled empty.",
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

    // Nothing is queued yet: "would block".
    assert!(channel.try_get_event()?.is_none());
    cq.req_notify(false)?;
    for i in 0..messages {
        b.post_recv(&[RecvWr::new(1000 + i as u64, &[buf.sge(64 * (i + 1), 64)?])])?;
        a.post_send(&[SendWr::send(i as u64, &[buf.sge(0, 4)?])])?;
    }
    let want = 2 * messages;
    let (mut completions, mut events, mut wakeups) = (0, 0, 0);
    while completions < want {
        let mut fds = [PollFd::new(channel.as_fd(), PollFlags::POLLIN)];
        if poll(&mut fds, PollTimeout::from(10_000u16))? == 0 {
            return Err(format!("no completion event within 10 s ({completions}/{want})").into());
        }
        wakeups += 1;
        // Drain the channel, acknowledge the batch, re-arm, then poll.
        let mut batch = Vec::new();
        while let Some(ev) = channel.try_get_event()? {
            batch.push(ev);
        }
        events += batch.len();
        ack_cq_events(batch);
        cq.req_notify(false)?;
        completions += poll_until_empty(&mut cq)?;
        println!("wake-up {wakeups}: {completions}/{want} completions so far");
    }
    println!("{messages} messages, {completions} completions, {events} events");
    Ok(())
}
