//! Completion events, async (feature `tokio`): `cq_events`'s loop with the
//! channel awaited instead of blocking a thread:
//! `req_notify` → post → `next_event().await` → ack → re-arm → poll until
//! empty. Then the same messages again through [`uverbs::tokio::AsyncCq`],
//! which does that loop (and batches the acknowledgements) itself.
//!
//! ```sh
//! cargo run --features tokio --example async_cq_events -- [DEVICE] [MESSAGES]
//! cargo run --features tokio --example async_cq_events -- --model   # on the mlx5 model
//! ```

#[path = "common/cli.rs"]
mod cli;
#[path = "common/loopback.rs"]
mod loopback;

use cli::{Model, Spec};
use loopback::{poll_until_empty, Loopback};
use uverbs::{
    tokio::{AsyncCompletionChannel, AsyncCq, BusyPoll},
    AccessFlags, QpInitAttr, RecvWr, SendWr, WorkCompletion,
};

const SPEC: Spec = Spec {
    name: "async_cq_events",
    about: "Completion events awaited on tokio (feature tokio): cq_events' loop with the \
            completion channel awaited, then the same MESSAGES messages through \
            uverbs::tokio::AsyncCq, which runs that loop itself.",
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

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = cli::parse(&SPEC);
    cli::finish(run(args).await);
}

async fn run(args: cli::Args) -> Result<(), Box<dyn std::error::Error>> {
    let messages: usize = args.parse_or(1, 4);
    let device = args.device();
    let ctx = device.open(args.get(0))?;

    // 1. By hand: the blocking example's loop, awaited.
    let Loopback {
        channel,
        mut cq,
        mut a,
        mut b,
        buf,
        ..
    } = loopback::setup(&ctx, messages)?;
    let channel = AsyncCompletionChannel::new(channel)?;
    cq.req_notify(false)?;
    for i in 0..messages {
        b.post_recv(&[RecvWr::new(1000 + i as u64, &[buf.sge(64 * (i + 1), 64)?])])?;
        a.post_send(&[SendWr::send(i as u64, &[buf.sge(0, 4)?])])?;
    }
    let want = 2 * messages;
    let (mut completions, mut events) = (0, 0);
    while completions < want {
        let ev = channel.next_event().await?; // the task sleeps, the thread does not
        assert!(ev.is_for(&cq));
        ev.ack();
        events += 1;
        cq.req_notify(false)?; // re-arm BEFORE polling
        completions += poll_until_empty(&mut cq)?;
        println!("event {events}: {completions}/{want} completions so far");
    }
    println!("by hand: {messages} messages, {completions} completions, {events} events");

    // 2. The helper: a CQ with its own channel, awaited with `poll`.
    let mut cq = AsyncCq::create(&ctx, 2 * messages as u32 + 2, 0)?;
    cq.set_busy_poll(BusyPoll::For(std::time::Duration::from_micros(20)));
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
    println!("AsyncCq: {messages} messages, {completions} completions");
    drop((a, b));
    cq.destroy().map_err(|e| e.into_parts().1)?;
    Ok(())
}
