//! rdma_cm, async (feature `tokio`): a server and a client in one program,
//! the counterparts of `cm_server` and `cm_client` with every CM event and
//! every completion awaited on one tokio runtime.
//!
//! ```sh
//! cargo run --features tokio --example async_cm -- server 192.0.2.1 7471
//! cargo run --features tokio --example async_cm -- client 192.0.2.1 7471
//! cargo run --features tokio --example async_cm -- both 192.0.2.1 7471
//! ```
//!
//! The client sends "ping", the server answers "pong", the client
//! disconnects. `both` runs the two as tasks of one process.
//!
//! rdma_cm has no device model (`uverbs::testing` models the verbs
//! devices, not `/dev/infiniband/rdma_cm`): it needs an RDMA device, rxe
//! or hardware.

use std::{net::SocketAddr, time::Duration};

#[path = "common/cli.rs"]
mod cli;

use cli::Spec;

use uverbs::{
    cm::{CmEvent, CmEventKind, CmId, ConnParam, EventChannel, PortSpace},
    tokio::{AsyncCmChannel, AsyncCq},
    AccessFlags, MemoryRegion, QpCap, QpInitAttr, QueuePair, RecvWr, SendFlags, SendWr, WcOpcode,
    WorkCompletion,
};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const SPEC: Spec = Spec {
    name: "async_cm",
    about: "rdma_cm on tokio (feature tokio): an rdma_cm server and client, every CM event \
            and completion awaited. The client sends \"ping\", the server answers \
            \"pong\", the client disconnects; `both` runs the two as tasks of one \
            process. rdma_cm has no device model, so there is no --model: it needs an \
            RDMA device (rxe or hardware).",
    args: &[
        ("MODE", "server, client or both"),
        ("IP", "the address the server listens on"),
        ("PORT", "its port (default: 7471)"),
    ],
    required: 2,
    models: &[],
};

#[tokio::main]
async fn main() {
    let args = cli::parse(&SPEC);
    let mode = args.get(0).unwrap_or_default().to_string();
    if !["server", "client", "both"].contains(&mode.as_str()) {
        SPEC.usage_error(format_args!("unknown MODE {mode:?}"));
    }
    let ip: std::net::IpAddr = args.parse(1).expect("required");
    let addr = SocketAddr::new(ip, args.parse_or(2, 7471));
    let result = match mode.as_str() {
        "server" => server(addr).await,
        "client" => client(addr).await,
        _ => {
            let s = tokio::spawn(server(addr));
            tokio::time::sleep(Duration::from_millis(200)).await;
            let c = client(addr).await;
            match s.await {
                Ok(r) => r.and(c),
                Err(e) => Err(e.into()),
            }
        }
    };
    cli::finish(result);
}

/// The next CM event, which must be `kind` (10 s at most).
async fn expect(ch: &AsyncCmChannel, kind: CmEventKind) -> Res<CmEvent> {
    let ev = tokio::time::timeout(Duration::from_secs(10), ch.next_event())
        .await
        .map_err(|_| format!("no {kind} within 10 s"))??;
    if ev.kind() != kind {
        return Err(format!(
            "expected {kind}, got {} (status {})",
            ev.kind(),
            ev.status()
        )
        .into());
    }
    Ok(ev)
}

/// A QP for `id` on a CQ of its own, and a buffer.
fn endpoint(id: &CmId) -> Res<(AsyncCq, QueuePair, MemoryRegion, uverbs::ProtectionDomain)> {
    let ctx = id.context()?;
    let pd = ctx.alloc_pd()?;
    let cq = AsyncCq::create(&ctx, 8, 0)?;
    let qp = id.create_qp(
        &pd,
        &QpInitAttr::rc(cq.cq(), cq.cq()).cap(QpCap::new(4, 4, 1, 1)),
    )?;
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    Ok((cq, qp, mr, pd))
}

/// Awaits the first completion of `opcode`, checking every one.
async fn until(cq: &mut AsyncCq, opcode: WcOpcode) -> Res<WorkCompletion> {
    let mut wc = [WorkCompletion::default(); 4];
    loop {
        let n = cq.poll(&mut wc).await?;
        for c in &wc[..n] {
            if !c.status.is_success() {
                return Err(format!("work request {} failed: {}", c.wr_id, c.status).into());
            }
            if c.opcode == opcode {
                return Ok(*c);
            }
        }
    }
}

async fn server(addr: SocketAddr) -> Res<()> {
    let ch = AsyncCmChannel::new(EventChannel::open()?)?;
    let listener = ch.channel().create_id(PortSpace::Tcp)?;
    listener.bind(addr)?;
    listener.listen(8)?;
    println!("server: listening on {addr}");
    // Events are not `Send`: keep them in a block that ends before the next
    // `.await`, so the task can move between threads.
    let (id, asked) = {
        let mut req = expect(&ch, CmEventKind::ConnectRequest).await?;
        let asked = req.conn_param().unwrap_or_default();
        (req.take_new_id().ok_or("no id")?, asked)
    };
    let (mut cq, mut qp, mr, _pd) = endpoint(&id)?;
    qp.post_recv(&[RecvWr::new(1, &[mr.sge(0, 1024)?])])?;
    id.accept_qp(
        &qp,
        &ConnParam::new()
            .responder_resources(asked.responder_resources)
            .initiator_depth(asked.initiator_depth)
            .rnr_retry_count(7),
    )?;
    drop(expect(&ch, CmEventKind::Established).await?);
    let got = until(&mut cq, WcOpcode::RECV).await?;
    let mut msg = vec![0u8; got.byte_len as usize];
    mr.read(0, &mut msg)?;
    println!("server: received {:?}", String::from_utf8_lossy(&msg));
    mr.write(1024, b"pong")?;
    qp.post_send(&[SendWr::send(2, &[mr.sge(1024, 4)?]).flags(SendFlags::SIGNALED)])?;
    until(&mut cq, WcOpcode::SEND).await?;
    drop(expect(&ch, CmEventKind::Disconnected).await?);
    println!("server: client disconnected");
    id.disconnect_qp(&qp).ok();
    drop(qp);
    cq.destroy().map_err(|e| e.into_parts().1)?;
    id.destroy()?;
    listener.destroy()?;
    Ok(())
}

async fn client(addr: SocketAddr) -> Res<()> {
    let ch = AsyncCmChannel::new(EventChannel::open()?)?;
    let id = ch.channel().create_id(PortSpace::Tcp)?;
    id.resolve_addr(None, addr, Duration::from_secs(2))?;
    drop(expect(&ch, CmEventKind::AddrResolved).await?);
    id.resolve_route(Duration::from_secs(2))?;
    drop(expect(&ch, CmEventKind::RouteResolved).await?);
    let (mut cq, mut qp, mr, _pd) = endpoint(&id)?;
    qp.post_recv(&[RecvWr::new(1, &[mr.sge(0, 1024)?])])?;
    id.connect_qp(
        &qp,
        &ConnParam::new()
            .responder_resources(1)
            .initiator_depth(1)
            .retry_count(7)
            .rnr_retry_count(7),
    )?;
    drop(expect(&ch, CmEventKind::ConnectResponse).await?);
    id.complete_connect(&qp)?;
    mr.write(2048, b"ping")?;
    qp.post_send(&[SendWr::send(2, &[mr.sge(2048, 4)?]).flags(SendFlags::SIGNALED)])?;
    let got = until(&mut cq, WcOpcode::RECV).await?;
    let mut msg = vec![0u8; got.byte_len as usize];
    mr.read(0, &mut msg)?;
    println!("client: received {:?}", String::from_utf8_lossy(&msg));
    id.disconnect_qp(&qp)?;
    drop(expect(&ch, CmEventKind::Disconnected).await?);
    drop(qp);
    cq.destroy().map_err(|e| e.into_parts().1)?;
    id.destroy()?;
    Ok(())
}
