//! Completion events, async (feature `tokio`): `cq_events`'s loop with the
//! channel awaited instead of blocking a thread:
//! `req_notify` → post → `next_event().await` → ack → re-arm → poll until
//! empty. Then the same messages again through [`uverbs::tokio::AsyncCq`],
//! which does that loop (and batches the acknowledgements) itself.
//!
//! ```sh
//! cargo run --features tokio --example async_cq_events -- [DEVICE] [MESSAGES]
//! ```

#[path = "common/loopback.rs"]
mod loopback;

use loopback::{poll_until_empty, Loopback};
use uverbs::{
    tokio::{AsyncCompletionChannel, AsyncCq, BusyPoll},
    AccessFlags, Context, QpInitAttr, QpType, RecvWr, SendWr, WorkCompletion,
};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("async_cq_events: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dev = args.next();
    let messages: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(4);

    // 1. By hand: the blocking example's loop, awaited.
    let Loopback {
        channel,
        mut cq,
        mut a,
        mut b,
        buf,
        ..
    } = loopback::setup(dev.as_deref(), messages)?;
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
    let ctx = Context::open(dev.as_deref())?;
    let mut cq = AsyncCq::create(&ctx, 2 * messages as u32 + 2, 0)?;
    cq.set_busy_poll(BusyPoll::For(std::time::Duration::from_micros(20)));
    let pd = ctx.alloc_pd()?;
    let init = QpInitAttr {
        context: 0,
        qp_type: QpType::Rc,
        send_cq: cq.cq(),
        recv_cq: cq.cq(),
        srq: None,
        cap: loopback::cap(2 * messages as u32 + 2),
        sq_sig_all: false,
    };
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
