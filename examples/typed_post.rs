//! The extended verbs: a typed posting session (`ibv_qp_ex`'s `ibv_wr_*`
//! builders, `uverbs::qp_ex`) writes a run of RDMA writes and a SEND with
//! immediate data announcing them, rung with one doorbell, and the peer's
//! completions are read field by field (`ibv_cq_ex`'s `ibv_start_poll` /
//! `ibv_next_poll` / `ibv_end_poll` and the `ibv_wc_read_*` accessors).
//! The posting code is written once, generic over the provider, and runs
//! on rxe and on mlx5 alike.
//!
//! ```sh
//! cargo run --example typed_post -- [DEVICE] [WRITES]
//! cargo run --example typed_post -- --model    # on the mlx5 device model
//! ```

// The path also holds from src/lib.rs, whose docs compile this file.
#[path = "../examples/common/cli.rs"]
mod cli;
#[path = "../examples/common/loopback.rs"]
#[allow(dead_code)] // the connection only
mod loopback;

use cli::{Model, Spec};
use uverbs::{
    qp_ex::{Mlx5, ProviderKind, Rc, Rxe},
    AccessFlags, CompletionQueue, CqOptions, MemoryRegion, QpCap, QpInitAttr, QueuePair, RecvWr,
    WcOpcode, WcStatus,
};

/// Writes `n` slots of 8 bytes each into the peer's region and announces
/// them with a SEND whose immediate data is `n`: one session, one doorbell.
/// Generic over the provider: compiled once for each, without dispatch.
fn post_writes<P: ProviderKind>(
    qp: &mut QueuePair,
    mr: &MemoryRegion,
    n: u32,
) -> Result<(), uverbs::PostError> {
    let mut s = qp.start_wr::<Rc, P>()?; // ibv_wr_start
    for i in 0..n {
        s.rdma_write(mr.rkey(), mr.addr() + 2048 + 8 * u64::from(i)) // ibv_wr_rdma_write
            .wr_id(u64::from(i)) // qpx->wr_id
            .unsignaled() // qpx->wr_flags without IBV_SEND_SIGNALED
            .inline(&u64::from(i).to_le_bytes())?; // ibv_wr_set_inline_data
    }
    s.send_imm(n) // ibv_wr_send_imm
        .wr_id(u64::from(n))
        .solicited()
        .inline(b"done")?;
    s.complete() // ibv_wr_complete: one doorbell for all of them
}

/// Waits for `n` completions of `cq`, read field by field in polling
/// sessions (`ibv_start_poll` / `ibv_next_poll` / `ibv_end_poll`).
fn wait(cq: &mut CompletionQueue, n: usize) -> Result<Vec<Seen>, Box<dyn std::error::Error>> {
    let mut seen = Vec::new();
    let start = std::time::Instant::now();
    while seen.len() < n {
        // None: nothing completed yet (ibv_start_poll's ENOENT).
        if let Some(mut poll) = cq.start_poll() {
            loop {
                seen.push(Seen {
                    wr_id: poll.wr_id(),
                    status: poll.status(),
                    opcode: poll.opcode(),     // ibv_wc_read_opcode
                    byte_len: poll.byte_len(), // ibv_wc_read_byte_len
                    imm: poll.imm_data(),      // ibv_wc_read_imm_data, if WITH_IMM
                    qp_num: poll.qp_num(),     // ibv_wc_read_qp_num
                });
                if seen.len() == n || !poll.next() {
                    break; // the session ends as `poll` drops: ibv_end_poll
                }
            }
        }
        if start.elapsed().as_secs() > 10 {
            return Err(format!("{} of {n} completions after 10 s", seen.len()).into());
        }
    }
    Ok(seen)
}

/// What a completion said.
#[derive(Debug)]
struct Seen {
    wr_id: u64,
    status: WcStatus,
    opcode: WcOpcode,
    byte_len: u32,
    imm: Option<u32>,
    qp_num: u32,
}

const SPEC: Spec = Spec {
    name: "typed_post",
    about: "The extended verbs: RDMA writes and a SEND with immediate data posted \
            through a typed session (ibv_wr_*), completions read field by field.",
    args: &[
        ("DEVICE", "the device to open (default: the first)"),
        (
            "WRITES",
            "RDMA writes in the session (default 8, at most 16)",
        ),
    ],
    required: 0,
    models: &[Model::Mlx5],
};

fn main() {
    let args = cli::parse(&SPEC); // exits for --help and usage errors
    cli::finish(run(args)); // an error: `error: MESSAGE` on stderr, exit 1
}

fn run(args: cli::Args) -> Result<(), Box<dyn std::error::Error>> {
    let writes: u32 = args.parse_or(1, 8);
    if !(1..=16).contains(&writes) {
        return Err("WRITES must be 1 to 16".into());
    }
    let device = args.device(); // a model's device runs while this lives
    let ctx = device.open(args.get(0))?;
    let pd = ctx.alloc_pd()?;
    let mut send_cq = ctx.create_cq(32, CqOptions::default())?;
    let mut recv_cq = ctx.create_cq(32, CqOptions::default())?;
    let cap = QpCap::new(32, 4, 1, 1).max_inline_data(16);
    let init = |cq| QpInitAttr::rc(cq, cq).cap(cap);
    let mut a = pd.create_qp(&init(&send_cq))?;
    let mut b = pd.create_qp(&init(&recv_cq))?;
    // Port 1's RoCE v2 GID; the peer may write into our region.
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    loopback::connect_pair_with(&ctx, &a, &b, access)?;
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    b.post_recv(&[RecvWr::new(100, &[mr.sge(0, 64)?])])?;

    // The session's provider is the device's: one generic function.
    match ctx.provider_name() {
        "mlx5" => post_writes::<Mlx5>(&mut a, &mr, writes)?,
        "rxe" => post_writes::<Rxe>(&mut a, &mr, writes)?,
        other => return Err(format!("no typed sessions for provider {other}").into()),
    }

    // Only the SEND was signaled: one completion on each side.
    let sent = wait(&mut send_cq, 1)?;
    let got = wait(&mut recv_cq, 1)?;
    for c in sent.iter().chain(&got) {
        if c.status != WcStatus::SUCCESS {
            return Err(format!("work request {} failed: {}", c.wr_id, c.status).into());
        }
    }
    let r = &got[0];
    if r.opcode != WcOpcode::RECV || r.imm != Some(writes) || r.qp_num != b.qp_num() {
        return Err(format!("unexpected receive: {r:?}").into());
    }
    let mut slots = Vec::new();
    for i in 0..writes as usize {
        slots.push(mr.read_u64(2048 + 8 * i)?);
    }
    if slots.iter().enumerate().any(|(i, &v)| v != i as u64) {
        return Err(format!("the written slots hold {slots:?}").into());
    }
    println!(
        "{}: {writes} RDMA writes and a SEND in one session; the peer got {} bytes with \
         immediate data {} and slots {:?}",
        ctx.provider_name(),
        r.byte_len,
        writes,
        slots
    );
    Ok(())
}
