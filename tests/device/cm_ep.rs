//! librdmacm's convenience layer on the real kernel (rxe loopback on
//! `UVERBS_TEST_IP`): `getaddrinfo`, `create_ep` with the QP and CQs it
//! makes, synchronous connect / accept / disconnect, `get_request`, the
//! refused connect, as rdma-core's `rdma_server` / `rdma_client` use them.
//!
//! The synchronous calls block in the kernel; each side runs on a thread
//! whose end is waited for at most `BOUND`, so a hang fails the test.

use std::{sync::mpsc, thread, time::Duration};

use uverbs::{
    cm::{create_ep, getaddrinfo, AddrHints, AiFlags, CmEventKind, ConnParam, EpQpInit},
    sys::Errno,
    AccessFlags, QpCap, QpState, QpType, RecvWr, SendFlags, SendWr, WcOpcode,
};

use crate::{support, test_env};

const BOUND: Duration = Duration::from_secs(60);

fn ip() -> String {
    test_env::<std::net::IpAddr>("UVERBS_TEST_IP").to_string()
}

fn param() -> ConnParam {
    ConnParam::new()
        .responder_resources(1)
        .initiator_depth(1)
        .retry_count(7)
        .rnr_retry_count(7)
}

fn init() -> EpQpInit {
    EpQpInit::new(QpCap::new(4, 4, 1, 1))
}

/// Runs `f` on a thread and returns its result, failing after `BOUND`.
fn bounded<T: Send + 'static>(what: &'static str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(BOUND) {
        Ok(v) => v,
        Err(_) => panic!("{what} did not finish within {BOUND:?} (a synchronous call hung)"),
    }
}

#[test]
fn cm_ep_getaddrinfo_create_ep_sync_connect_send_and_disconnect() {
    let port = "18240";
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = thread::spawn(move || {
        let hints = AddrHints::new().flags(AiFlags::PASSIVE);
        let info = getaddrinfo(Some(&ip()), Some(port), Some(&hints)).unwrap();
        assert!(info[0].is_passive());
        let listen = create_ep(&info[0], None, Some(&init()))
            .unwrap_or_else(|e| panic!("{e:#}"))
            .id;
        assert!(listen.is_sync());
        listen.listen(0).unwrap();
        ready_tx.send(()).unwrap();
        let conn = listen.get_request().unwrap_or_else(|e| panic!("{e:#}"));
        let req = conn.id.sync_event().unwrap();
        assert_eq!(req.kind(), CmEventKind::ConnectRequest);
        assert_eq!(req.private_data()[..8], *b"hello ep");
        let mut q = conn.qp.expect("get_request made the QP");
        assert_eq!(q.qp.qp_type(), QpType::Rc);
        assert_eq!(q.qp.state(), QpState::Init);
        let pd = conn.id.device_pd().unwrap();
        let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
        let sge = [mr.sge(0, 64).unwrap()];
        q.qp.post_recv(&[RecvWr::new(7, &sge)]).unwrap();
        conn.id
            .accept_qp(&q.qp, &param())
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(
            conn.id.sync_event().unwrap().kind(),
            CmEventKind::Established
        );
        let wc = support::wait(q.recv_cq.as_mut().unwrap(), 1);
        assert_eq!((wc[0].opcode, wc[0].byte_len), (WcOpcode::RECV, 13));
        let mut got = [0u8; 13];
        mr.read(0, &mut got).unwrap();
        assert_eq!(&got, b"over an ep qp");
        // The client disconnects first; this answers its DREQ and returns
        // with the DISCONNECTED already queued.
        conn.id.disconnect_qp(&q.qp).unwrap();
        assert_eq!(
            conn.id.sync_event().unwrap().kind(),
            CmEventKind::Disconnected
        );
        drop((mr, q));
        conn.id.destroy().unwrap();
        listen.destroy().unwrap();
    });
    ready_rx.recv_timeout(BOUND).expect("the server listens");

    bounded("the client", move || {
        let info = getaddrinfo(Some(&ip()), Some(port), None).unwrap();
        assert_eq!(info[0].dst_addr.unwrap().port(), 18240);
        let ep = create_ep(&info[0], None, Some(&init())).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(
            ep.id.sync_event().unwrap().kind(),
            CmEventKind::RouteResolved
        );
        let mut q = ep.qp.expect("an active ep with attributes has its QP");
        assert!(q.send_cq.is_some() && q.recv_cq.is_some());
        assert!(q.send_channel.is_some() && q.recv_channel.is_some());
        let pd = ep.id.device_pd().unwrap();
        let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
        ep.id
            .connect_qp(&q.qp, &param().private_data(b"hello ep"))
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(ep.id.sync_event().unwrap().kind(), CmEventKind::Established);
        assert_eq!(q.qp.state(), QpState::Rts);
        mr.write(0, b"over an ep qp").unwrap();
        let sge = [mr.sge(0, 13).unwrap()];
        q.qp.post_send(&[SendWr::send(1, &sge).flags(SendFlags::SIGNALED)])
            .unwrap();
        support::wait(q.send_cq.as_mut().unwrap(), 1);
        // Returns once the server answered the DREQ.
        ep.id.disconnect_qp(&q.qp).unwrap();
        assert_eq!(
            ep.id.sync_event().unwrap().kind(),
            CmEventKind::Disconnected
        );
        drop((mr, q));
        ep.id.destroy().unwrap();
    });
    bounded("the server", move || server.join().unwrap());
}

#[test]
fn cm_ep_sync_connect_to_a_closed_port_is_econnrefused() {
    bounded("the client", || {
        let info = getaddrinfo(Some(&ip()), Some("18241"), None).unwrap();
        let ep = create_ep(&info[0], None, Some(&init())).unwrap_or_else(|e| panic!("{e:#}"));
        let q = ep.qp.unwrap();
        let e = ep.id.connect_qp(&q.qp, &param()).unwrap_err();
        // The local CM rejects the REQ (reason 8, invalid service id):
        // librdmacm's ucma_complete makes REJECTED ECONNREFUSED.
        assert_eq!(e.errno(), Errno::ECONNREFUSED, "{e:#}");
        let kept = ep.id.sync_event().unwrap();
        assert_eq!((kept.kind(), kept.status()), (CmEventKind::Rejected, 8));
        drop(q);
        ep.id.destroy().unwrap();
    });
}

#[test]
fn cm_ep_sync_resolve_of_an_unreachable_address_fails_with_the_events_errno() {
    bounded("the resolve", || {
        // TEST-NET-3: no route from the guest (ADDR_ERROR, -ENETUNREACH or
        // -EADDRNOTAVAIL / -ETIMEDOUT depending on the kernel).
        let info = getaddrinfo(Some("203.0.113.9"), Some("18242"), None).unwrap();
        let e = create_ep(&info[0], None, None).unwrap_err();
        eprintln!("create_ep to an unreachable address: {e:#}");
        assert!(
            [
                Errno::ENETUNREACH,
                Errno::EHOSTUNREACH,
                Errno::EADDRNOTAVAIL,
                Errno::ETIMEDOUT,
                Errno::ENODEV,
            ]
            .contains(&e.errno()),
            "{e:#}"
        );
    });
}
