//! rdma_cm on the real kernel (rxe loopback on `UVERBS_TEST_IP`): our
//! `uverbs rping` against rdma-core's `rping` in both roles, UD against
//! `udaddy`, and the library's connection flows and edge cases.
//!
//! Every wait is bounded: CM events by `EV` (10 s), completions by the
//! 20 s of `support::wait`, child processes by `run_bounded`.

use std::{
    net::{IpAddr, SocketAddr},
    os::fd::AsFd,
    process::{Child, Command, Output, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc, Arc,
    },
    thread,
    time::{Duration, Instant},
};

use uverbs::{
    cm::{CmEvent, CmEventKind, CmId, ConnParam, EventChannel, PortSpace},
    AccessFlags, AsyncEventType, CompletionQueue, CqOptions, MemoryRegion, ProtectionDomain, QpCap,
    QpInitAttr, QpType, QueuePair, RecvWr, SendFlags, SendOp, SendWr, WcOpcode, WcStatus,
    WorkCompletion,
};

use crate::{support, test_env};

const EV: Option<Duration> = Some(Duration::from_secs(10));

fn ip() -> IpAddr {
    test_env("UVERBS_TEST_IP")
}

fn bin() -> String {
    test_env("UVERBS_BIN")
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::new(ip(), port)
}

#[track_caller]
fn next(ch: &EventChannel) -> CmEvent {
    ch.get_event_timeout(EV)
        .unwrap_or_else(|e| panic!("{e}"))
        .expect("a CM event within 10 s")
}

#[track_caller]
fn expect(ch: &EventChannel, kind: CmEventKind) -> CmEvent {
    let ev = ch
        .get_event_timeout(EV)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no {kind} within 10 s"));
    assert_eq!(ev.kind(), kind, "{ev:?}");
    ev
}

/// Waits for a child, killing it after `secs`; returns its output.
fn wait_bounded(mut child: Child, secs: u64, what: &str) -> Output {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match child.try_wait().unwrap() {
            Some(_) => return child.wait_with_output().unwrap(),
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "{what} did not finish in {secs} s\nstdout:\n{}\nstderr:\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            None => thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn spawn(prog: &str, args: &[&str]) -> Child {
    Command::new(prog)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {prog}: {e}"))
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// Runs a client until it succeeds (the server may not listen yet), at most 5 tries.
fn client_with_retries(prog: &str, args: &[&str], secs: u64) -> Output {
    let mut last = None;
    for _ in 0..5 {
        let out = wait_bounded(spawn(prog, args), secs, prog);
        if out.status.success() {
            return out;
        }
        last = Some(out);
        thread::sleep(Duration::from_millis(500));
    }
    let out = last.unwrap();
    panic!(
        "{prog} {args:?} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn check_rping_pair(server: Output, client: Output, count: usize) {
    let (so, co) = (text(&server.stdout), text(&client.stdout));
    assert!(
        server.status.success(),
        "server {:?}\n{so}\n{}",
        server.status,
        text(&server.stderr)
    );
    for i in 0..count {
        assert!(co.contains(&format!("ping data: rdma-ping-{i}: ")), "{co}");
        assert!(
            so.contains(&format!("server ping data: rdma-ping-{i}: ")),
            "{so}"
        );
    }
    // The echoed data is exactly what rping generates for ping 0.
    assert!(
        co.contains("ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"),
        "{co}"
    );
}

/// `id.destroy()`, bounded: it waits until every event of the id that was
/// read is acknowledged, which an event acknowledged twice (or never)
/// would make endless.
#[track_caller]
fn destroy_id(name: &str, id: CmId) {
    support::PATIENCE
        .destroy(format!("CM id `{name}`"), id, CmId::destroy)
        .unwrap();
}

#[test]
fn cm_rping_ours_server_rdma_core_client() {
    let ip = ip().to_string();
    let server = spawn(&bin(), &["rping", "-s", "-a", &ip, "-p", "18201", "-v"]);
    thread::sleep(Duration::from_millis(300));
    let client = client_with_retries(
        "rping",
        &["-c", "-a", &ip, "-p", "18201", "-C", "10", "-v", "-V"],
        30,
    );
    let server = wait_bounded(server, 30, "uverbs rping -s");
    check_rping_pair(server, client, 10);
}

#[test]
fn cm_rping_rdma_core_server_our_client() {
    let ip = ip().to_string();
    let server = spawn("rping", &["-s", "-a", &ip, "-p", "18202", "-v"]);
    thread::sleep(Duration::from_millis(300));
    let client = client_with_retries(
        &bin(),
        &[
            "rping", "-c", "-a", &ip, "-p", "18202", "-C", "10", "-v", "-V",
        ],
        30,
    );
    let server = wait_bounded(server, 30, "rping -s");
    check_rping_pair(server, client, 10);
}

#[test]
fn cm_rping_ours_both_sides_with_a_larger_size() {
    let ip = ip().to_string();
    let server = spawn(
        &bin(),
        &["rping", "-s", "-a", &ip, "-p", "18203", "-v", "-S", "1000"],
    );
    thread::sleep(Duration::from_millis(300));
    let client = client_with_retries(
        &bin(),
        &[
            "rping", "-c", "-a", &ip, "-p", "18203", "-C", "5", "-v", "-V", "-S", "1000",
        ],
        30,
    );
    let server = wait_bounded(server, 30, "uverbs rping -s");
    check_rping_pair(server, client, 5);
}

/// The verbs resources of one side of a connection.
struct Side {
    pd: ProtectionDomain,
    cq: CompletionQueue,
    qp: QueuePair,
    mr: MemoryRegion,
}

fn side(id: &CmId, qp_type: QpType, depth: u32) -> Side {
    let ctx = id.context().unwrap_or_else(|e| panic!("{e}"));
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(depth * 2 + 2, CqOptions::default()).unwrap();
    let qp = id
        .create_qp(
            &pd,
            &QpInitAttr::new(qp_type, &cq, &cq).cap(QpCap::new(depth, depth, 1, 1)),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let mr = pd
        .alloc_mr(
            4096,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
        )
        .unwrap();
    Side { pd, cq, qp, mr }
}

fn resolve(ch: &EventChannel, id: &CmId, port: u16) {
    id.resolve_addr(None, addr(port), Duration::from_secs(2))
        .unwrap();
    drop(expect(ch, CmEventKind::AddrResolved));
    id.resolve_route(Duration::from_secs(2)).unwrap();
    drop(expect(ch, CmEventKind::RouteResolved));
}

fn listener(ch: &EventChannel, ps: PortSpace, port: u16) -> CmId {
    let l = ch.create_id(ps).unwrap();
    l.bind(addr(port)).unwrap_or_else(|e| panic!("{e}"));
    l.listen(64).unwrap();
    l
}

fn param() -> ConnParam {
    ConnParam::new()
        .responder_resources(1)
        .initiator_depth(1)
        .retry_count(7)
        .rnr_retry_count(7)
}

/// One established RC connection: (client id, client side, server id, server side).
fn connect_pair(sch: &EventChannel, cch: &EventChannel, port: u16) -> (CmId, Side, CmId, Side) {
    let cid = cch.create_id(PortSpace::Tcp).unwrap();
    resolve(cch, &cid, port);
    let cside = side(&cid, QpType::Rc, 4);
    cid.connect_qp(&cside.qp, &param()).unwrap();
    let mut req = expect(sch, CmEventKind::ConnectRequest);
    let sid = req.take_new_id().unwrap();
    drop(req);
    let sside = side(&sid, QpType::Rc, 4);
    sid.accept_qp(&sside.qp, &param()).unwrap();
    drop(expect(cch, CmEventKind::ConnectResponse));
    cid.complete_connect(&cside.qp).unwrap();
    drop(expect(sch, CmEventKind::Established));
    (cid, cside, sid, sside)
}

#[test]
fn cm_connect_send_and_disconnect_from_the_active_side() {
    let sch = EventChannel::open().unwrap();
    let cch = EventChannel::open().unwrap();
    let l = listener(&sch, PortSpace::Tcp, 18210);
    let (cid, mut c, sid, mut s) = connect_pair(&sch, &cch, 18210);
    // Data flows: a send from the client lands in the server's receive.
    let rsge = [s.mr.sge(0, 64).unwrap()];
    s.qp.post_recv(&[RecvWr::new(7, &rsge)]).unwrap();
    c.mr.write(0, b"over rdma_cm").unwrap();
    let ssge = [c.mr.sge(0, 12).unwrap()];
    c.qp.post_send(&[SendWr::send(1, &ssge).flags(SendFlags::SIGNALED)])
        .unwrap();
    let wc = support::wait(&mut s.cq, 1);
    assert_eq!((wc[0].opcode, wc[0].byte_len), (WcOpcode::RECV, 12));
    support::wait(&mut c.cq, 1);
    let mut got = [0u8; 12];
    s.mr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"over rdma_cm");
    let q = cid.query_addr().unwrap();
    assert_eq!(q.dst, Some(addr(18210)));
    assert_eq!(q.src.map(|a| a.ip()), Some(ip()));
    let route = cid.query_route().unwrap();
    assert_eq!(route.paths.len(), 1, "{route:?}");

    // The DREQ reaches the peer at once; the initiator's DISCONNECTED waits
    // for the peer's DREP, which the peer's CM sends only when the peer
    // disconnects too (rdma_disconnect answers a DREQ), as rping does.
    cid.disconnect_qp(&c.qp).unwrap();
    drop(expect(&sch, CmEventKind::Disconnected));
    assert!(cch.try_get_event().unwrap().is_none(), "no DREP yet");
    sid.disconnect_qp(&s.qp).unwrap();
    drop(expect(&cch, CmEventKind::Disconnected));
    drop((c, s));
    destroy_id("cid", cid);
    destroy_id("sid", sid);
    destroy_id("l", l);
}

#[test]
fn cm_disconnect_from_the_passive_side() {
    let sch = EventChannel::open().unwrap();
    let cch = EventChannel::open().unwrap();
    let l = listener(&sch, PortSpace::Tcp, 18211);
    let (cid, c, sid, s) = connect_pair(&sch, &cch, 18211);
    sid.disconnect_qp(&s.qp).unwrap();
    drop(expect(&cch, CmEventKind::Disconnected));
    cid.disconnect_qp(&c.qp).unwrap();
    drop(expect(&sch, CmEventKind::Disconnected));
    drop((c, s));
    destroy_id("cid", cid);
    destroy_id("sid", sid);
    destroy_id("l", l);
}

#[test]
fn cm_reject_carries_private_data_to_the_active_side() {
    let sch = EventChannel::open().unwrap();
    let cch = EventChannel::open().unwrap();
    let l = listener(&sch, PortSpace::Tcp, 18212);
    let cid = cch.create_id(PortSpace::Tcp).unwrap();
    resolve(&cch, &cid, 18212);
    let c = side(&cid, QpType::Rc, 2);
    let p = (param()).private_data(b"hello?");
    cid.connect_qp(&c.qp, &p).unwrap();
    let mut req = expect(&sch, CmEventKind::ConnectRequest);
    // The request's private data (56 bytes on RoCE: ours, zero padded).
    let pd = req.private_data();
    assert_eq!(&pd[..6], b"hello?", "{pd:?}");
    let sid = req.take_new_id().unwrap();
    drop(req);
    sid.reject(b"go away").unwrap();
    let rej = expect(&cch, CmEventKind::Rejected);
    assert_eq!(rej.status(), 28, "IB_CM_REJ_CONSUMER_DEFINED");
    let data = rej.private_data();
    assert_eq!(&data[..7], b"go away", "{data:?}");
    eprintln!(
        "REJECTED: status {}, {} bytes of private data",
        rej.status(),
        data.len()
    );
    drop(rej);
    drop(c);
    destroy_id("cid", cid);
    destroy_id("sid", sid);
    destroy_id("l", l);
}

#[test]
fn cm_connect_to_a_port_nobody_listens_on() {
    let cch = EventChannel::open().unwrap();
    let cid = cch.create_id(PortSpace::Tcp).unwrap();
    resolve(&cch, &cid, 18299);
    let c = side(&cid, QpType::Rc, 2);
    cid.connect_qp(&c.qp, &param()).unwrap();
    let ev = next(&cch);
    eprintln!(
        "connect to a closed port: {} status {}",
        ev.kind(),
        ev.status()
    );
    // rxe loopback: the local CM answers the REQ with a REJ, reason 8
    // (IB_CM_REJ_INVALID_SERVICE_ID): REJECTED, status 8.
    assert_eq!(ev.kind(), CmEventKind::Rejected, "{ev:?}");
    assert_eq!(ev.status(), 8, "{ev:?}");
    drop(ev);
    drop(c);
    destroy_id("cid", cid);
}

#[test]
fn cm_destroy_waits_for_an_event_held_by_another_thread() {
    let ch = EventChannel::open().unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.resolve_addr(None, addr(18213), Duration::from_secs(2))
        .unwrap();
    // The holding thread itself gets EBUSY, then another thread holds it.
    {
        let ev = expect(&ch, CmEventKind::AddrResolved);
        id.resolve_route(Duration::from_secs(2)).unwrap();
        drop(ev);
    }
    let acked = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let (ch2, acked2) = (ch.clone(), acked.clone());
    let holder = thread::spawn(move || {
        let ev = ch2.get_event_timeout(EV).unwrap().expect("ROUTE_RESOLVED");
        assert_eq!(ev.kind(), CmEventKind::RouteResolved);
        tx.send(()).unwrap();
        thread::sleep(Duration::from_millis(500));
        acked2.store(true, Ordering::SeqCst);
        ev.ack();
    });
    support::PATIENCE.recv("the holder's ROUTE_RESOLVED", &rx);
    let start = Instant::now();
    let (dtx, drx) = mpsc::channel();
    let destroyer = thread::spawn(move || dtx.send(id.destroy()).unwrap());
    let r = support::PATIENCE.recv(
        format_args!(
            "the id's destroy, once the holder acknowledged its ROUTE_RESOLVED ({})",
            support::DESTROY_WAITS
        ),
        &drx,
    );
    r.unwrap();
    assert!(
        acked.load(Ordering::SeqCst),
        "destroy returned before the ack"
    );
    assert!(start.elapsed() >= Duration::from_millis(300));
    support::PATIENCE.join("the holder", holder);
    support::PATIENCE.join("the destroyer", destroyer);

    // EBUSY from the thread that holds an event.
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.resolve_addr(None, addr(18213), Duration::from_secs(2))
        .unwrap();
    let ev = expect(&ch, CmEventKind::AddrResolved);
    let e = id.destroy().unwrap_err();
    assert_eq!(e.errno(), uverbs::sys::Errno::EBUSY, "{e}");
    drop(ev); // destroys the id
}

/// `rdma_notify` before the id has a connection: the kernel refuses
/// (`ucma_get_ctx_dev`/`rdma_notify`: no device or no IB CM id), and the
/// error says what the CM takes.
#[test]
fn cm_notify_without_a_connection_is_einval() {
    let ch = EventChannel::open().unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let e = id.notify(AsyncEventType::COMM_EST).unwrap_err();
    assert_eq!(e.errno(), uverbs::sys::Errno::EINVAL, "{e}");
    assert!(e.to_string().contains("connecting or connected"), "{e}");
    destroy_id("id", id);
}

#[test]
fn cm_notify_establishes_when_data_arrives_before_the_rtu() {
    let sch = EventChannel::open().unwrap();
    let cch = EventChannel::open().unwrap();
    let l = listener(&sch, PortSpace::Tcp, 18214);
    let cid = cch.create_id(PortSpace::Tcp).unwrap();
    resolve(&cch, &cid, 18214);
    let mut c = side(&cid, QpType::Rc, 4);
    cid.connect_qp(&c.qp, &param()).unwrap();
    let mut req = expect(&sch, CmEventKind::ConnectRequest);
    let sid = req.take_new_id().unwrap();
    drop(req);
    let mut s = side(&sid, QpType::Rc, 4);
    let rsge = [s.mr.sge(0, 64).unwrap()];
    s.qp.post_recv(&[RecvWr::new(1, &rsge)]).unwrap();
    sid.accept_qp(&s.qp, &param()).unwrap();
    // Active side: RTR and RTS but no RTU yet; send at once.
    drop(expect(&cch, CmEventKind::ConnectResponse));
    cid.modify_qp_to_rts(&c.qp).unwrap();
    c.mr.write(0, b"early").unwrap();
    let ssge = [c.mr.sge(0, 5).unwrap()];
    c.qp.post_send(&[SendWr::send(2, &ssge).flags(SendFlags::SIGNALED)])
        .unwrap();
    // Passive side: the data is here before any CM event was read.
    let wc = support::wait(&mut s.cq, 1);
    assert_eq!((wc[0].opcode, wc[0].byte_len), (WcOpcode::RECV, 5));
    assert!(
        sch.try_get_event().unwrap().is_none(),
        "no ESTABLISHED before notify: the RTU was never sent"
    );
    // Only COMM_EST and PATH_MIG reach the CM: anything else is EINVAL.
    let wrong = sid.notify(AsyncEventType::SQ_DRAINED).unwrap_err();
    assert_eq!(wrong.errno(), uverbs::sys::Errno::EINVAL, "{wrong}");
    assert!(wrong.to_string().contains("COMM_EST"), "{wrong}");
    sid.notify(AsyncEventType::COMM_EST).unwrap();
    drop(expect(&sch, CmEventKind::Established));
    // Already established: the kernel says EISCONN.
    let again = sid.notify(AsyncEventType::COMM_EST).unwrap_err();
    assert_eq!(again.errno(), uverbs::sys::Errno::EISCONN, "{again}");
    // The active side finishes (RTU) and both disconnect cleanly.
    cid.establish().unwrap();
    support::wait(&mut c.cq, 1);
    cid.disconnect_qp(&c.qp).unwrap();
    drop(expect(&sch, CmEventKind::Disconnected));
    sid.disconnect_qp(&s.qp).unwrap();
    drop(expect(&cch, CmEventKind::Disconnected));
    drop((c, s));
    destroy_id("cid", cid);
    destroy_id("sid", sid);
    destroy_id("l", l);
}

#[test]
fn cm_ud_client_against_udaddy_server() {
    let ip_s = ip().to_string();
    let count = 10usize;
    let server = spawn("udaddy", &["-b", &ip_s, "-C", "10"]);
    thread::sleep(Duration::from_millis(300));
    let ch = EventChannel::open().unwrap();
    let mut tries = 0;
    let (id, mut me, ud) = loop {
        let id = ch.create_id(PortSpace::Udp).unwrap();
        resolve(&ch, &id, 7174);
        let me = side(&id, QpType::Ud, count as u32 + 2);
        let mut me = me;
        // Receive buffers: 40-byte GRH + 100-byte message each.
        let sges: Vec<_> = (0..count)
            .map(|i| [me.mr.sge(256 * i, 140).unwrap()])
            .collect();
        for (i, sge) in sges.iter().enumerate() {
            me.qp.post_recv(&[RecvWr::new(i as u64, sge)]).unwrap();
        }
        id.connect_qp(&me.qp, &ConnParam::default()).unwrap();
        let ev = next(&ch);
        if ev.kind() == CmEventKind::Established {
            let ud = ev.ud_param().expect("UD parameters");
            drop(ev);
            break (id, me, ud);
        }
        // udaddy may not listen yet.
        tries += 1;
        assert!(tries < 10, "SIDR kept failing: {ev:?}");
        drop(ev);
        drop(me);
        destroy_id("id", id);
        thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(ud.qkey, uverbs::cm::RDMA_UDP_QKEY);
    assert!(ud.ah_attr.grh.is_some(), "RoCE address vectors are global");
    // udaddy replies to the QP number in the immediate data.
    let my_qpn = me.qp.qp_num();
    let peer = ud.peer(&me.pd).unwrap_or_else(|e| panic!("{e}"));
    me.mr.fill(2048, 100, b'x').unwrap();
    let ssge = [me.mr.sge(2048, 100).unwrap()];
    for i in 0..count {
        me.qp
            .post_send(&[
                SendWr::new(100 + i as u64, SendOp::SendWithImm { imm: my_qpn }, &ssge)
                    .flags(SendFlags::SIGNALED)
                    .to(peer.dest()),
            ])
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
    // Our sends complete and udaddy's 10 replies arrive.
    let wcs = support::wait(&mut me.cq, 2 * count);
    assert!(wcs.iter().all(|w| w.status.is_success()), "{wcs:?}");
    assert_eq!(wcs.iter().filter(|w| w.opcode.is_recv()).count(), count);
    let out = wait_bounded(server, 30, "udaddy -b");
    let so = text(&out.stdout);
    assert!(out.status.success(), "{so}\n{}", text(&out.stderr));
    assert!(so.contains("data transfers complete"), "{so}");
    drop(peer);
    drop(me);
    destroy_id("id", id);
}

#[test]
fn cm_many_connections_leak_no_ids_or_fds() {
    fn fds() -> usize {
        std::fs::read_dir("/proc/self/fd").unwrap().count()
    }
    let before = fds();
    {
        let sch = EventChannel::open().unwrap();
        let cch = EventChannel::open().unwrap();
        let l = listener(&sch, PortSpace::Tcp, 18215);
        let mut conns = Vec::new();
        for _ in 0..64 {
            conns.push(connect_pair(&sch, &cch, 18215));
        }
        for (cid, c, _, _) in &conns {
            cid.disconnect_qp(&c.qp).unwrap();
        }
        for _ in 0..64 {
            drop(expect(&sch, CmEventKind::Disconnected));
        }
        for (_, _, sid, s) in &conns {
            sid.disconnect_qp(&s.qp).unwrap();
        }
        for _ in 0..64 {
            drop(expect(&cch, CmEventKind::Disconnected));
        }
        for (cid, c, sid, s) in conns {
            drop((c, s));
            destroy_id("cid", cid);
            destroy_id("sid", sid);
        }
        destroy_id("l", l);
        assert!(cch.try_get_event().unwrap().is_none());
    }
    assert_eq!(fds(), before, "file descriptors leaked");
}

/// `try_get_event` (`rdma_get_cm_event` on an `O_NONBLOCK` channel) reads
/// every event the kernel has queued, one per call, also right after the
/// previous one was acknowledged: whenever the channel's fd polls readable
/// (`ucma_poll`: the file's event list is not empty) the try gives an
/// event.
#[test]
fn cm_try_get_event_reads_every_queued_event_one_by_one() {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    const IDS: usize = 4;
    let readable = |ch: &EventChannel| {
        let mut fds = [PollFd::new(ch.as_fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::ZERO).unwrap() == 1
    };
    let ch = EventChannel::open().unwrap();
    let ids: Vec<CmId> = (0..IDS)
        .map(|_| ch.create_id(PortSpace::Tcp).unwrap())
        .collect();
    for id in &ids {
        id.resolve_addr(None, addr(18216), Duration::from_secs(2))
            .unwrap();
    }
    // A local address resolves at once (in the kernel's address workqueue);
    // two seconds let the four events queue up under TCG before the first
    // is read.
    thread::sleep(Duration::from_secs(2));
    let end = Instant::now() + Duration::from_secs(10);
    let (mut uids, mut after_an_ack) = (Vec::new(), 0);
    while uids.len() < IDS {
        assert!(Instant::now() < end, "{} of {IDS} events", uids.len());
        let queued = readable(&ch);
        let Some(ev) = ch.try_get_event().unwrap() else {
            assert!(
                !queued,
                "the channel polled readable, yet the try gave nothing"
            );
            thread::sleep(Duration::from_millis(100));
            continue;
        };
        assert_eq!(ev.kind(), CmEventKind::AddrResolved, "{ev:?}");
        uids.push(ev.uid());
        if queued && uids.len() > 1 {
            after_an_ack += 1;
        }
        // Acknowledged before the next try.
        drop(ev);
    }
    assert!(
        after_an_ack > 0,
        "no event was queued behind an acknowledged one: nothing checked"
    );
    assert!(!readable(&ch) && ch.try_get_event().unwrap().is_none());
    uids.sort_unstable();
    uids.dedup();
    assert_eq!(uids.len(), IDS, "one event per id");
    for id in ids {
        destroy_id("id", id);
    }
}

#[test]
fn cm_set_option_is_applied_and_refused_where_the_kernel_refuses_it() {
    use uverbs::cm::CmOption;
    let ch = EventChannel::open().unwrap();
    let a = ch.create_id(PortSpace::Tcp).unwrap();
    for opt in [
        CmOption::Tos(0x20),
        CmOption::ReuseAddr(true),
        CmOption::AfOnly(false),
        CmOption::AckTimeout(14),
    ] {
        a.set_option(opt).unwrap_or_else(|e| panic!("{opt:?}: {e}"));
    }
    a.bind(addr(7391)).unwrap();
    a.listen(4).unwrap();
    // rdma_set_reuseaddr: turning reuse on for a listening id is EINVAL.
    let err = a.set_option(CmOption::ReuseAddr(true)).unwrap_err();
    assert_eq!(err.errno(), uverbs::sys::Errno::EINVAL, "{err}");
    assert!(err.to_string().contains("listening"), "{err}");
    destroy_id("a", a);
}

#[test]
fn cm_multicast_join_attach_send_receive_and_leave() {
    let group: SocketAddr = "239.1.2.3:0".parse().unwrap();
    let ch = EventChannel::open().unwrap();
    // Receiver: a UD id resolved towards the group, joined, its QP attached.
    let rid = ch.create_id(PortSpace::Udp).unwrap();
    rid.resolve_addr(Some(addr(0)), group, Duration::from_secs(2))
        .unwrap();
    drop(expect(&ch, CmEventKind::AddrResolved));
    let mut r = side(&rid, QpType::Ud, 4);
    r.qp.post_recv(&[RecvWr::new(7, &[r.mr.sge(0, 40 + 64).unwrap()])])
        .unwrap();
    rid.join_multicast(group, false)
        .unwrap_or_else(|e| panic!("{e}"));
    let ev = expect(&ch, CmEventKind::MulticastJoin);
    assert!(ev.is_for(&rid));
    let ud = ev
        .ud_param()
        .expect("the join carries the group's address vector");
    drop(ev);
    assert_eq!(ud.qp_num, 0xff_ffff, "multicast QPN");
    let mgid = ud.ah_attr.grh.expect("RoCE multicast is global").dgid;
    r.qp.attach_mcast(mgid, ud.ah_attr.dlid)
        .unwrap_or_else(|e| panic!("{e}"));
    // A second join of the same group by the same id is refused.
    let err = rid.join_multicast(group, false).unwrap_err();
    assert!(err.to_string().contains("already joined"), "{err}");

    // Sender: a second id joins send-only and sends to the group.
    let sid = ch.create_id(PortSpace::Udp).unwrap();
    sid.resolve_addr(Some(addr(0)), group, Duration::from_secs(2))
        .unwrap();
    drop(expect(&ch, CmEventKind::AddrResolved));
    let mut s = side(&sid, QpType::Ud, 4);
    sid.join_multicast(group, true).unwrap();
    let ev = expect(&ch, CmEventKind::MulticastJoin);
    assert!(ev.is_for(&sid));
    let sud = ev.ud_param().unwrap();
    drop(ev);
    let peer = sud.peer(&s.pd).unwrap_or_else(|e| panic!("{e}"));
    s.mr.write(1024, b"to the group").unwrap();
    s.qp.post_send(&[SendWr::send(1, &[s.mr.sge(1024, 12).unwrap()])
        .flags(SendFlags::SIGNALED)
        .to(peer.dest())])
        .unwrap();
    let sent = support::wait(&mut s.cq, 1);
    assert!(sent[0].status.is_success(), "{sent:?}");
    let got = support::wait(&mut r.cq, 1);
    assert!(got[0].status.is_success(), "{got:?}");
    assert_eq!(got[0].byte_len, 40 + 12);
    let mut data = [0u8; 12];
    r.mr.read(40, &mut data).unwrap();
    assert_eq!(&data, b"to the group");

    // Detach and leave; leaving twice is an error naming the group.
    r.qp.detach_mcast(mgid, ud.ah_attr.dlid).unwrap();
    rid.leave_multicast(group).unwrap();
    let err = rid.leave_multicast(group).unwrap_err();
    assert!(err.to_string().contains("was not joined"), "{err}");
    sid.leave_multicast(group).unwrap();
    drop(peer);
    drop((r, s));
    destroy_id("rid", rid);
    destroy_id("sid", sid);
}

#[test]
fn cm_ud_server_against_udaddy_client() {
    let count = 10usize;
    let ch = EventChannel::open().unwrap();
    // udaddy's port is fixed (7174).
    let l = listener(&ch, PortSpace::Udp, 7174);
    let client = spawn("udaddy", &["-s", &ip().to_string(), "-C", "10"]);
    let mut req = ch
        .get_event_timeout(Some(Duration::from_secs(20)))
        .unwrap()
        .expect("udaddy's SIDR request within 20 s");
    assert_eq!(req.kind(), CmEventKind::ConnectRequest, "{req:?}");
    let id = req.take_new_id().expect("the request carries a new id");
    drop(req);
    let mut me = side(&id, QpType::Ud, count as u32 + 2);
    // 40 bytes of GRH room + udaddy's 100-byte messages.
    for i in 0..count {
        let sge = [me.mr.sge(256 * i, 140).unwrap()];
        me.qp.post_recv(&[RecvWr::new(i as u64, &sge)]).unwrap();
    }
    id.accept_qp(&me.qp, &ConnParam::new().qkey(uverbs::cm::RDMA_UDP_QKEY))
        .unwrap_or_else(|e| panic!("{e}"));
    let got = support::wait(&mut me.cq, count);
    assert!(
        got.iter()
            .all(|w| w.status.is_success() && w.opcode.is_recv()),
        "{got:?}"
    );
    assert!(got.iter().all(|w| w.byte_len == 140), "{got:?}");
    // Reply as udaddy does: the AH from the first receive's header, the
    // client's QP number from its immediate data.
    let mut grh = [0u8; 40];
    me.mr.read(256 * got[0].wr_id as usize, &mut grh).unwrap();
    let ah = me
        .pd
        .create_ah_from_wc(1, &got[0], &grh)
        .unwrap_or_else(|e| panic!("{e}"));
    let dest = uverbs::UdDest::new(&ah, got[0].imm_data, uverbs::cm::RDMA_UDP_QKEY);
    me.mr.fill(3000, 100, b'r').unwrap();
    let sge = [me.mr.sge(3000, 100).unwrap()];
    let my_qpn = me.qp.qp_num();
    for i in 0..count {
        me.qp
            .post_send(&[
                SendWr::new(1000 + i as u64, SendOp::SendWithImm { imm: my_qpn }, &sge)
                    .flags(SendFlags::SIGNALED)
                    .to(dest),
            ])
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
    let sent = support::wait(&mut me.cq, count);
    assert!(sent.iter().all(|w| w.status.is_success()), "{sent:?}");
    let out = wait_bounded(client, 30, "udaddy -s");
    let so = text(&out.stdout);
    assert!(out.status.success(), "{so}\n{}", text(&out.stderr));
    assert!(so.contains("data transfers complete"), "{so}");
    drop(ah);
    drop(me);
    destroy_id("id", id);
    destroy_id("l", l);
}

#[test]
fn cm_examples_server_and_client_exchange_ping_and_pong() {
    let ip_s = ip().to_string();
    let server = Command::new(crate::example("cm_server"))
        .args([ip_s.as_str(), "7472"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cm_server");
    // The server listens within a moment; the client retries until then.
    let client_path = crate::example("cm_client");
    let client_path = client_path.to_string_lossy().into_owned();
    let client = client_with_retries(&client_path, &[ip_s.as_str(), "7472"], 20);
    let server = wait_bounded(server, 30, "cm_server");
    let (so, co) = (text(&server.stdout), text(&client.stdout));
    assert!(client.status.success(), "{co}\n{}", text(&client.stderr));
    assert!(server.status.success(), "{so}\n{}", text(&server.stderr));
    assert!(co.contains("received \"pong\""), "{co}");
    assert!(so.contains("received \"ping\""), "{so}");
    assert!(so.contains("client disconnected"), "{so}");
}

/// A peer killed mid-transfer: our sends are outstanding (the peer, the
/// `cm_server` example, posted no receive for them: RNR retries without
/// end) when its process is killed. The kernel tears its QP and CM id down;
/// we read DISCONNECTED, move the QP to ERR as `rdma_disconnect` does, and
/// every outstanding send completes with an error (flushed, or retries
/// exhausted first); nothing hangs and everything is destroyed.
#[test]
fn cm_a_peer_killed_mid_transfer_flushes_and_nothing_hangs() {
    let port = 18231;
    let ip_s = ip().to_string();
    let mut server = spawn(
        crate::example("cm_server").to_str().unwrap(),
        &[ip_s.as_str(), &port.to_string()],
    );
    let ch = EventChannel::open().unwrap();
    // Connect, retrying until the server listens.
    let mut tries = 0;
    let (id, mut c) = loop {
        let id = ch.create_id(PortSpace::Tcp).unwrap();
        resolve(&ch, &id, port);
        let c = side(&id, QpType::Rc, 8);
        id.connect_qp(&c.qp, &param()).unwrap();
        let ev = next(&ch);
        match ev.kind() {
            CmEventKind::ConnectResponse => {
                drop(ev);
                break (id, c);
            }
            CmEventKind::Rejected | CmEventKind::Unreachable if tries < 20 => {
                drop(ev);
                drop(c);
                destroy_id("id", id);
                tries += 1;
                thread::sleep(Duration::from_millis(250));
            }
            other => panic!("connecting to cm_server: {other}"),
        }
    };
    id.complete_connect(&c.qp).unwrap();
    // The server's one receive takes our ping; it answers "pong".
    let rsge = [c.mr.sge(0, 64).unwrap()];
    c.qp.post_recv(&[RecvWr::new(1, &rsge)]).unwrap();
    c.mr.write(1024, b"ping").unwrap();
    let ssge = [c.mr.sge(1024, 4).unwrap()];
    c.qp.post_send(&[SendWr::send(2, &ssge).flags(SendFlags::SIGNALED)])
        .unwrap();
    let wc = support::wait(&mut c.cq, 2);
    assert!(wc.iter().all(|w| w.status.is_success()), "{wc:?}");
    // A stream the peer will never receive: outstanding, RNR-retried.
    for i in 0..4 {
        c.qp.post_send(&[SendWr::send(10 + i, &ssge).flags(SendFlags::SIGNALED)])
            .unwrap();
    }
    thread::sleep(Duration::from_millis(300));
    let mut wc = [WorkCompletion::default(); 8];
    assert_eq!(c.cq.poll(&mut wc), 0, "the sends are still outstanding");
    server.kill().unwrap();
    let _ = server.wait();
    // The kernel destroys the dead peer's CM id, which sends a DREQ.
    let start = Instant::now();
    loop {
        let ev = ch
            .get_event_timeout(Some(Duration::from_secs(30)))
            .unwrap()
            .expect("DISCONNECTED within 30 s of the peer's death");
        if ev.kind() == CmEventKind::Disconnected {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{ev:?}");
    }
    // What rdma_disconnect does: the QP to ERR (flushing), then DREP/DREQ
    // (the kernel may find the connection already gone).
    let _ = id.disconnect_qp(&c.qp);
    let flushed = support::wait(&mut c.cq, 4);
    assert!(
        flushed.iter().all(|w| matches!(
            w.status,
            WcStatus::WR_FLUSH_ERR | WcStatus::RETRY_EXC_ERR | WcStatus::RNR_RETRY_EXC_ERR
        )),
        "{flushed:?}"
    );
    assert!(
        flushed.iter().any(|w| w.status == WcStatus::WR_FLUSH_ERR),
        "{flushed:?}"
    );
    assert_eq!(
        c.qp.query(uverbs::QpAttrMask::STATE).unwrap().0.qp_state,
        uverbs::QpState::Err
    );
    let Side { pd, cq, qp, mr } = c;
    qp.destroy().unwrap();
    cq.destroy().unwrap();
    mr.destroy().unwrap();
    pd.destroy().unwrap();
    destroy_id("id", id);
}
