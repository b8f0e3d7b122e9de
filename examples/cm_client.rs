//! An rdma_cm client for `cm_server`: resolves, connects, sends "ping",
//! waits for "pong", and disconnects.
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
    AccessFlags, CqOptions, QpCap, QpInitAttr, RecvWr, SendFlags, SendWr, WcOpcode, WorkCompletion,
};

const SPEC: Spec = Spec {
    name: "cm_client",
    about: "An rdma_cm client for cm_server: resolves the server's address, connects, \
            sends \"ping\", waits for \"pong\" and disconnects. rdma_cm has no device \
            model, so there is no --model: it needs an RDMA device (rxe or hardware).",
    args: &[
        ("SERVER-IP", "the address cm_server listens on"),
        ("PORT", "its port (default: 7471)"),
    ],
    required: 1,
    models: &[],
};

fn main() {
    let args = cli::parse(&SPEC);
    cli::finish(run(args));
}

fn run(args: cli::Args) -> Result<(), Box<dyn std::error::Error>> {
    let ip: std::net::IpAddr = args.parse(0).expect("required");
    let port: u16 = args.parse_or(1, 7471);
    let server = SocketAddr::new(ip, port);
    let timeout = Duration::from_secs(2);

    let ch = EventChannel::open()?;
    let id = ch.create_id(PortSpace::Tcp)?;
    id.resolve_addr(None, server, timeout)?;
    let expect = |kind: CmEventKind| -> Result<uverbs::cm::CmEvent, Box<dyn std::error::Error>> {
        let ev = ch
            .get_event_timeout(Some(Duration::from_secs(10)))?
            .ok_or("timeout")?;
        if ev.kind() != kind {
            return Err(format!(
                "expected {kind}, got {} (status {})",
                ev.kind(),
                ev.status()
            )
            .into());
        }
        Ok(ev)
    };
    drop(expect(CmEventKind::AddrResolved)?);
    id.resolve_route(timeout)?;
    drop(expect(CmEventKind::RouteResolved)?);

    let ctx = id.context()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(8, CqOptions::default())?;
    let mut qp = id.create_qp(&pd, &QpInitAttr::rc(&cq, &cq).cap(QpCap::new(4, 4, 1, 1)))?;
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    qp.post_recv(&[RecvWr::new(1, &[mr.sge(0, 1024)?])])?;
    id.connect_qp(
        &qp,
        &ConnParam::new()
            .responder_resources(1)
            .initiator_depth(1)
            .retry_count(7)
            .rnr_retry_count(7)
            .private_data(b"hello from cm_client"),
    )?;
    let rep = expect(CmEventKind::ConnectResponse)?;
    println!(
        "accepted, private data {:?}",
        String::from_utf8_lossy(&rep.private_data())
    );
    drop(rep);
    id.complete_connect(&qp)?;

    mr.write(2048, b"ping")?;
    qp.post_send(&[SendWr::send(2, &[mr.sge(2048, 4)?]).flags(SendFlags::SIGNALED)])?;
    let mut wc = [WorkCompletion::default(); 1];
    loop {
        if cq.poll(&mut wc) == 1 && wc[0].opcode == WcOpcode::RECV {
            break;
        }
        std::thread::yield_now();
    }
    let mut msg = vec![0u8; wc[0].byte_len as usize];
    mr.read(0, &mut msg)?;
    println!("received {:?}", String::from_utf8_lossy(&msg));

    id.disconnect_qp(&qp)?;
    drop(expect(CmEventKind::Disconnected)?);
    drop((qp, cq, mr, pd));
    id.destroy()?;
    Ok(())
}
