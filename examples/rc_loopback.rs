//! An RC exchange from nothing: open a device, build a PD, a CQ and two RC
//! QPs, connect them to each other (RESET -> INIT -> RTR -> RTS, one
//! `bring_up` call each), send a message from one to the other and read it
//! back from the receive buffer. Between two hosts only the endpoints'
//! bytes would travel over a side channel (a TCP socket), or rdma_cm
//! (`uverbs::cm`) would set the QPs up.
//!
//! ```sh
//! cargo run --example rc_loopback -- [DEVICE]
//! cargo run --example rc_loopback -- --model    # on the mlx5 device model
//! ```
//!
//! The command line (`--help`, `--model`, errors printed as `error:
//! MESSAGE`) is `examples/common/cli.rs`, which every example shares.

// The path also holds from src/lib.rs, whose docs compile this file.
#[path = "../examples/common/cli.rs"]
mod cli;

use cli::{Model, Spec};
use uverbs::{
    AccessFlags, BringUp, CqOptions, Endpoint, GidType, QpCap, QpInitAttr, RecvWr, SendWr,
    WcOpcode, WcStatus, WorkCompletion,
};

const SPEC: Spec = Spec {
    name: "rc_loopback",
    about: "An RC exchange from nothing: two RC QPs of one device, connected to each \
            other, send a message from one to the other.",
    args: &[("DEVICE", "the device to open (default: the first)")],
    required: 0,
    models: &[Model::Mlx5],
};

fn main() {
    let args = cli::parse(&SPEC); // exits for --help and usage errors
    cli::finish(run(args)); // an error: `error: MESSAGE` on stderr, exit 1
}

fn run(args: cli::Args) -> Result<(), Box<dyn std::error::Error>> {
    // `Context::open(name)` on a real device; `--model` opens the same way
    // through the device model's kernel (`Context::open_with`).
    let device = args.device();
    let ctx = device.open(args.get(0))?; // the first device without a name
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(16, CqOptions::default())?;
    let init = QpInitAttr::rc(&cq, &cq)
        .cap(QpCap::new(4, 4, 1, 1))
        .sq_sig_all(true);
    let mut a = pd.create_qp(&init)?;
    let mut b = pd.create_qp(&init)?;

    // RoCE addresses ports by GID: take port 1's RoCE v2 GID (rxe has one
    // per IP address of its interface).
    let gids = ctx.query_gid_table()?;
    let gid = gids
        .iter()
        .find(|e| e.port == 1 && e.gid_type == GidType::RoceV2)
        .ok_or("port 1 has no RoCE v2 GID (is an IP address configured?)")?;
    // What a peer needs to reach a QP (its number, GID, PSN, MTU) is its
    // endpoint; between two hosts its bytes (`encode`, `decode`) travel
    // over a side channel. One call then takes a QP to RTS against it,
    // through INIT and RTR, each transition with exactly the attributes it
    // requires.
    let link = BringUp::new(1).gid_index(gid.index as u8);
    let (to_a, to_b) = (a.endpoint(&link)?, b.endpoint(&link)?);
    let to_b = Endpoint::decode(&to_b.encode())?; // as it would arrive
    a.bring_up(&link, &to_b)?;
    b.bring_up(&link, &to_a)?;

    // Registered memory is copied in and out, never borrowed: the device
    // may write it at any time.
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    let message = b"hello, RDMA";
    mr.write(0, message)?;
    b.post_recv(&[RecvWr::new(1, &[mr.sge(2048, 2048)?])])?;
    a.post_send(&[SendWr::send(2, &[mr.sge(0, message.len() as u32)?])])?;

    // Two completions: the send on `a` and the receive on `b`. Polling
    // makes no system call; a program that would rather sleep arms the CQ
    // on a completion channel (examples/cq_events.rs).
    let mut wc = [WorkCompletion::default(); 4];
    let mut done = Vec::new();
    while done.len() < 2 {
        let n = cq.poll(&mut wc);
        done.extend_from_slice(&wc[..n]);
    }
    for c in &done {
        if c.status != WcStatus::SUCCESS {
            return Err(format!("work request {} failed: {}", c.wr_id, c.status).into());
        }
    }
    let recv = done
        .iter()
        .find(|c| c.opcode == WcOpcode::RECV)
        .ok_or("no receive completed")?;
    let mut got = vec![0u8; recv.byte_len as usize];
    mr.read(2048, &mut got)?;
    println!(
        "QP {} -> QP {}: {:?} ({} bytes)",
        a.qp_num(),
        b.qp_num(),
        String::from_utf8_lossy(&got),
        recv.byte_len
    );
    Ok(()) // the objects are destroyed in the right order as they drop
}
