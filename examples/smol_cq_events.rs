//! Completion events on smol (feature `stream`): the runtime-independent
//! layer (`uverbs::event_stream`) on a second runtime. smol's reactor
//! (async-io's `Async`) becomes a `Readiness` in a few lines; the
//! completion channel is then a `futures_core::Stream` of `CqEvent`s,
//! consumed with `cq_events`' loop: `req_notify` → post → next event →
//! ack → re-arm → poll until empty. Then the same messages again through
//! `event_stream::AsyncCq` on smol, which runs that loop itself.
//!
//! ```sh
//! cargo run --features stream --example smol_cq_events -- [DEVICE] [MESSAGES]
//! cargo run --features stream --example smol_cq_events -- --model   # on the mlx5 model
//! ```

#[path = "common/cli.rs"]
mod cli;
#[path = "common/loopback.rs"]
mod loopback;

use std::{
    io,
    os::fd::OwnedFd,
    task::{Context as TaskContext, Poll},
};

use cli::{Model, Spec};
use loopback::{poll_until_empty, Loopback};
use smol::{stream::StreamExt, Async};
use uverbs::{
    event_stream::{AsyncCq, EventStream, Readiness},
    AccessFlags, QpInitAttr, RecvWr, SendWr, WorkCompletion,
};

const SPEC: Spec = Spec {
    name: "smol_cq_events",
    about: "Completion events on smol (feature stream): the completion channel as a Stream \
            of events on smol's reactor, consumed with cq_events' loop, then the same MESSAGES \
            messages through uverbs::event_stream::AsyncCq on smol.",
    args: &[
        ("DEVICE", "the device to open (default: the first)"),
        (
            "MESSAGES",
            "how many messages to send each time (default: 4)",
        ),
    ],
    required: 0,
    models: &[Model::Mlx5],
};

/// An event fd on smol's reactor: a duplicate of the channel's fd (the same
/// open file), registered with async-io and deregistered when dropped.
struct SmolFd(Async<OwnedFd>);

impl SmolFd {
    fn register(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<SmolFd> {
        // `new_nonblocking`: the library switches the fd to O_NONBLOCK
        // itself with its first non-blocking get.
        Async::new_nonblocking(fd.try_clone_to_owned()?).map(SmolFd)
    }
}

impl Readiness for SmolFd {
    // async-io registers interest anew on every poll after a `Ready`:
    // there is no readiness to clear.
    type Ready<'a> = ();

    fn poll_read_ready(&self, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        self.0.poll_readable(cx)
    }
}

fn main() {
    let args = cli::parse(&SPEC);
    cli::finish(smol::block_on(run(args)));
}

async fn run(args: cli::Args) -> Result<(), Box<dyn std::error::Error>> {
    let messages: usize = args.parse_or(1, 4);
    let device = args.device();
    let ctx = device.open(args.get(0))?;

    // 1. By hand: the blocking example's loop, the channel a Stream.
    let Loopback {
        channel,
        mut cq,
        mut a,
        mut b,
        buf,
        ..
    } = loopback::setup(&ctx, messages)?;
    let mut events = EventStream::register(channel, SmolFd::register)?;
    cq.req_notify(false)?;
    for i in 0..messages {
        b.post_recv(&[RecvWr::new(1000 + i as u64, &[buf.sge(64 * (i + 1), 64)?])])?;
        a.post_send(&[SendWr::send(i as u64, &[buf.sge(0, 4)?])])?;
    }
    let want = 2 * messages;
    let (mut completions, mut events_seen) = (0, 0);
    while completions < want {
        let Some(ev) = events.next().await else {
            return Err("the event stream ended".into());
        };
        let ev = ev?; // the task sleeps on smol's reactor
        assert!(ev.is_for(&cq));
        ev.ack();
        events_seen += 1;
        cq.req_notify(false)?; // re-arm BEFORE polling
        completions += poll_until_empty(&mut cq)?;
        println!("event {events_seen}: {completions}/{want} completions so far");
    }
    println!("by hand: {messages} messages, {completions} completions, {events_seen} events");

    // 2. The helper: a CQ with its own channel on smol, awaited with `poll`.
    let mut cq = AsyncCq::create_with(&ctx, 2 * messages as u32 + 2, 0, SmolFd::register)?;
    let pd = ctx.alloc_pd()?;
    let init = QpInitAttr::rc(cq.cq(), cq.cq()).cap(loopback::cap(2 * messages as u32 + 2));
    let (mut a, mut b) = (pd.create_qp(&init)?, pd.create_qp(&init)?);
    loopback::connect_pair(&ctx, &a, &b)?;
    let buf = pd.alloc_mr(64 * (messages + 1), AccessFlags::LOCAL_WRITE)?;
    buf.write(0, b"ping")?;
    for i in 0..messages {
        b.post_recv(&[RecvWr::new(1000 + i as u64, &[buf.sge(64 * (i + 1), 64)?])])?;
        a.post_send(&[SendWr::send(i as u64, &[buf.sge(0, 4)?])])?;
    }
    let mut wc = [WorkCompletion::default(); 8];
    let mut completions = 0;
    while completions < want {
        let n = cq.poll(&mut wc).await?;
        for c in &wc[..n] {
            if !c.status.is_success() {
                return Err(format!("work request {} failed: {}", c.wr_id, c.status).into());
            }
        }
        completions += n;
    }
    println!("AsyncCq on smol: {messages} messages, {completions} completions");
    drop((a, b));
    cq.destroy().map_err(|e| e.into_parts().1)?;
    Ok(())
}
