//! An rdma_cm server: listens, accepts one connection, receives one message
//! and answers it, then waits for the client to disconnect.
//!
//! ```sh
//! cargo run --example cm_server -- 192.0.2.1 7471
//! cargo run --example cm_client -- 192.0.2.1 7471
//! ```
//!
//! rdma_cm has no device model (`uverbs::testing` models the verbs
//! devices, not `/dev/infiniband/rdma_cm`): it needs an RDMA device, rxe
//! or hardware.

use std::{net::SocketAddr, time::Duration};

#[path = "common/cli.rs"]
mod cli;

use cli::Spec;

use uverbs::{
    cm::{CmEventKind, ConnParam, EventChannel, PortSpace},
    AccessFlags, CqOptions, QpCap, QpInitAttr, RecvWr, SendFlags, SendWr, WorkCompletion,
};

const SPEC: Spec = Spec {
    name: "cm_server",
    about: "An rdma_cm server: listens, accepts one connection, receives one message and \
            answers it, then waits for the client to disconnect. rdma_cm has no device \
            model, so there is no --model: it needs an RDMA device (rxe or hardware).",
    args: &[
        ("IP", "the address to listen on (default: 0.0.0.0)"),
        ("PORT", "the port (default: 7471)"),
    ],
    required: 0,
    models: &[],
};

fn main() {
    let args = cli::parse(&SPEC);
    cli::finish(run(args));
}

fn run(args: cli::Args) -> Result<(), Box<dyn std::error::Error>> {
    let ip = args.parse_or(0, std::net::IpAddr::from([0, 0, 0, 0]));
    let port: u16 = args.parse_or(1, 7471);
    let local = SocketAddr::new(ip, port);

    let ch = EventChannel::open()?;
    let listener = ch.create_id(PortSpace::Tcp)?;
    listener.bind(local)?;
    listener.listen(8)?;
    println!("listening on {local}");

    let mut req = ch.get_event()?;
    if req.kind() != CmEventKind::ConnectRequest {
        return Err(format!("unexpected {}", req.kind()).into());
    }
    let asked = req.conn_param().unwrap_or_default();
    println!(
        "connection request, private data {:?}",
        String::from_utf8_lossy(&req.private_data())
    );
    let id = req.take_new_id().ok_or("no id")?;
    drop(req);

    let ctx = id.context()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(8, CqOptions::default())?;
    let mut qp = id.create_qp(&pd, &QpInitAttr::rc(&cq, &cq).cap(QpCap::new(4, 4, 1, 1)))?;
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    qp.post_recv(&[RecvWr::new(1, &[mr.sge(0, 1024)?])])?;
    id.accept_qp(
        &qp,
        &ConnParam::new()
            .responder_resources(asked.responder_resources)
            .initiator_depth(asked.initiator_depth)
            .rnr_retry_count(7)
            .private_data(b"welcome"),
    )?;
    let ev = ch
        .get_event_timeout(Some(Duration::from_secs(10)))?
        .ok_or("no ESTABLISHED")?;
    println!("{}", ev.kind());
    drop(ev);

    let mut wc = [WorkCompletion::default(); 2];
    let n = loop {
        let n = cq.poll(&mut wc);
        if n > 0 {
            break n;
        }
        std::thread::yield_now();
    };
    let mut msg = vec![0u8; wc[0].byte_len as usize];
    mr.read(0, &mut msg)?;
    println!(
        "received {:?} ({n} completion)",
        String::from_utf8_lossy(&msg)
    );
    mr.write(1024, b"pong")?;
    qp.post_send(&[SendWr::send(2, &[mr.sge(1024, 4)?]).flags(SendFlags::SIGNALED)])?;

    loop {
        let ev = ch.get_event()?;
        if ev.kind() == CmEventKind::Disconnected {
            println!("client disconnected");
            break;
        }
    }
    id.disconnect_qp(&qp).ok();
    drop((qp, cq, mr, pd));
    id.destroy()?;
    listener.destroy()?;
    Ok(())
}
