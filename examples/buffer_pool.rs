//! Zero-copy without `unsafe`: a registered `BufferPool` whose buffers
//! are moved into posted receives and sends and moved back out with the
//! completions that finished them. The program fills a send buffer
//! through `&mut [u8]` and reads a received one as `&[u8]`, in place, and
//! the compiler keeps it from touching a buffer while the device owns it.
//!
//! ```sh
//! cargo run --example buffer_pool -- [DEVICE [MESSAGES]]
//! cargo run --example buffer_pool -- --model    # on the mlx5 device model
//! ```

#[path = "../examples/common/cli.rs"]
mod cli;

use cli::{Model, Spec};
use uverbs::{BringUp, BufferPool, CqOptions, GidType, PoolCompletion, QpCap, QpType, WcStatus};

const SPEC: Spec = Spec {
    name: "buffer_pool",
    about: "Zero-copy without unsafe: two RC QPs of one device exchange MESSAGES messages \
            through the buffers of a registered pool, read and written in place.",
    args: &[
        ("DEVICE", "the device to open (default: the first)"),
        ("MESSAGES", "how many messages (default 4)"),
    ],
    required: 0,
    models: &[Model::Mlx5],
};

fn main() {
    let args = cli::parse(&SPEC);
    cli::finish(run(args));
}

fn run(args: cli::Args) -> Result<(), Box<dyn std::error::Error>> {
    let device = args.device(); // on --model, the device runs while this lives
    let ctx = device.open(args.get(0))?;
    let messages: usize = args.parse_or(1, 4);
    // 16 buffers of 1 KiB in one region, registered for local access only.
    let pool = BufferPool::new(&ctx, 16, 1024)?;
    let cap = QpCap::new(4, 4, 1, 1);
    // Each pooled QP polls a CQ of its own.
    let (mut cq_a, mut cq_b) = (
        ctx.create_cq(16, CqOptions::default())?,
        ctx.create_cq(16, CqOptions::default())?,
    );
    let (mut a, _) = pool.create_qp(QpType::Rc, cap, &mut cq_a)?;
    let (mut b, _) = pool.create_qp(QpType::Rc, cap, &mut cq_b)?;
    let gid = ctx
        .query_gid_table()?
        .into_iter()
        .find(|e| e.port == 1 && e.gid_type == GidType::RoceV2)
        .ok_or("port 1 has no RoCE v2 GID (is an IP address configured?)")?;
    let link = BringUp::new(1).gid_index(gid.index as u8);
    let (to_a, to_b) = (a.qp().endpoint(&link)?, b.qp().endpoint(&link)?);
    a.qp().bring_up(&link, &to_b)?;
    b.qp().bring_up(&link, &to_a)?;

    b.post_recvs_from_pool(4)?; // four buffers handed to the device
    let mut done = Vec::new();
    for i in 0..messages {
        let mut buf = pool.take().ok_or("the pool is empty")?;
        let text = format!("message {i} through a pooled buffer");
        buf.copy_from(text.as_bytes())?; // written in place
        a.post_send(buf)?; // moved: `buf` is the device's now
        let (mut sent, mut received) = (false, false);
        while !(sent && received) {
            a.poll(&mut cq_a, &mut done)?;
            b.poll(&mut cq_b, &mut done)?;
            for c in done.drain(..) {
                if c.wc().status != WcStatus::SUCCESS {
                    return Err(format!("work request failed: {}", c.wc().status).into());
                }
                match c {
                    PoolCompletion::Sent { .. } => sent = true, // its buffer drops: free again
                    PoolCompletion::Recv { buf, .. } => {
                        // The received bytes, in place: no copy.
                        println!("{}", String::from_utf8_lossy(&buf));
                        b.post_recv(buf)?; // and back to the device
                        received = true;
                    }
                    _ => {}
                }
            }
        }
    }
    println!(
        "{messages} messages; {} of {} buffers free, {} posted",
        pool.available(),
        pool.count(),
        b.posted()
    );
    Ok(())
}
