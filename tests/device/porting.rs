//! What a C programmer porting from libibverbs and librdmacm expects, on
//! the real kernel:
//!
//! - `O_NONBLOCK` set by the program on an event fd makes the blocking get
//!   return at once with `WouldBlock` (libibverbs' `read` answers `EAGAIN`),
//!   on the completion channel, the async fd and the rdma_cm channel; after
//!   a `poll` says readable, the same get returns the event;
//! - completion events counted in the loop and acknowledged by number at
//!   exit, from another thread (`ibv_rc_pingpong -e`'s shape).

use std::{
    net::SocketAddr,
    os::fd::{AsFd, AsRawFd, BorrowedFd},
    thread,
    time::{Duration, Instant},
};

use nix::{
    fcntl::{fcntl, FcntlArg, OFlag},
    poll::{poll, PollFd, PollFlags, PollTimeout},
};
use uverbs::{
    cm::{CmEventKind, CmId, EventChannel, PortSpace},
    CompletionQueue, CqOptions, ErrorKind, QpInitAttr, RecvWr, SendWr,
};

use crate::{support::*, test_env};

/// One message from `tx` to `rx`: a completion on the armed receive CQ.
fn send_one(l: &mut Loop) {
    let sge = [l.buf.sge(0, 64).unwrap()];
    l.rx.post_recv(&[RecvWr::new(1, &sge)]).unwrap();
    let sge = [l.buf.sge(64, 8).unwrap()];
    l.tx.post_send(&[SendWr::send(2, &sge)]).unwrap();
    wait(&mut l.send_cq, 1);
}

/// Sets `O_NONBLOCK` on `fd` as a C program does, and checks the library
/// had not (the fd is as the kernel made it).
fn make_nonblocking(fd: BorrowedFd<'_>) {
    let raw = fd.as_raw_fd();
    let flags = OFlag::from_bits_retain(fcntl(raw, FcntlArg::F_GETFL).unwrap());
    assert!(!flags.contains(OFlag::O_NONBLOCK), "the library set it");
    fcntl(raw, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).unwrap();
}

/// `poll(fd, POLLIN)` for up to 10 s, as the C examples do before a get.
fn poll_readable(fd: BorrowedFd<'_>) {
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    let n = poll(&mut fds, PollTimeout::from(10_000u16)).unwrap();
    assert_eq!(n, 1, "the fd did not become readable within 10 s");
}

/// Asserts `get` fails at once with `WouldBlock` (errno `EAGAIN`).
#[track_caller]
fn assert_would_block<T: std::fmt::Debug>(what: &str, get: impl FnOnce() -> uverbs::Result<T>) {
    let start = Instant::now();
    let err = get().expect_err(what);
    assert!(start.elapsed() < Duration::from_secs(2), "{what} waited");
    assert_eq!(err.kind(), ErrorKind::WouldBlock, "{what}: {err}");
    assert_eq!(err.errno(), uverbs::sys::Errno::EAGAIN, "{what}");
}

#[test]
fn a_program_set_o_nonblocking_makes_every_blocking_get_would_block() {
    let mut l = looped(false, 77);
    let cm = EventChannel::open().unwrap();
    make_nonblocking(l.channel.as_fd());
    make_nonblocking(l.ctx.async_fd());
    make_nonblocking(cm.as_fd());
    assert_would_block("get_event", || l.channel.get_event());
    assert_would_block("get_async_event", || l.ctx.get_async_event());
    assert_would_block("rdma_get_cm_event", || cm.get_event());
    // The C loop: arm, send, poll the fd, get.
    l.recv_cq.req_notify(false).unwrap();
    send_one(&mut l);
    poll_readable(l.channel.as_fd());
    let ev = l.channel.get_event().unwrap();
    assert!(ev.is_for(&l.recv_cq));
    assert_eq!(ev.cq_context(), 77);
    ev.ack();
    assert_would_block("get_event once drained", || l.channel.get_event());
    // rdma_cm: resolve an address, poll, get.
    let id = cm.create_id(PortSpace::Tcp).unwrap();
    let ip = test_env("UVERBS_TEST_IP");
    id.resolve_addr(None, SocketAddr::new(ip, 18620), Duration::from_secs(2))
        .unwrap();
    poll_readable(cm.as_fd());
    let ev = cm.get_event().unwrap();
    assert_eq!(ev.kind(), CmEventKind::AddrResolved, "{ev:?}");
    ev.ack();
    PATIENCE
        .destroy("the id after ADDR_RESOLVED", id, CmId::destroy)
        .unwrap();
}

/// `ibv_rc_pingpong -e`: each event is checked, counted and left
/// unacknowledged; the CQ's destroy refuses while they are (nobody else
/// could acknowledge them); one acknowledgement by count, here from another
/// thread, and the destroy succeeds.
#[test]
fn completion_events_counted_in_the_loop_are_acknowledged_at_exit() {
    let mut l = looped(false, 77);
    let mut num_cq_events = 0u32;
    for _ in 0..20 {
        l.recv_cq.req_notify(false).unwrap();
        send_one(&mut l);
        // The blocking get on a thread of its own, bounded (the event is
        // checked and deferred there).
        let ch = l.channel.clone();
        let context = PATIENCE.within("a blocking get of the completion event", move || {
            ch.get_event().map(|ev| {
                let context = ev.cq_context();
                ev.defer_ack();
                context
            })
        });
        assert_eq!(context.unwrap(), 77, "the receive CQ's event");
        num_cq_events += 1;
        wait(&mut l.recv_cq, 1);
    }
    assert_eq!(l.recv_cq.deferred_events(), 20);
    let Loop {
        recv_cq, rx, tx, ..
    } = l;
    rx.destroy().unwrap();
    tx.destroy().unwrap();
    let err = recv_cq.destroy().unwrap_err();
    assert_eq!(err.errno(), uverbs::sys::Errno::EBUSY, "{err}");
    let recv_cq = err.into_inner();
    thread::scope(|s| {
        s.spawn(|| recv_cq.ack_events(num_cq_events).unwrap());
    });
    PATIENCE
        .destroy(
            format!("the CQ after its {num_cq_events} events were acknowledged by count"),
            recv_cq,
            CompletionQueue::destroy,
        )
        .unwrap();
}

/// librdmacm's `id->verbs`: ids on two channels resolved to the same device
/// get the same verbs context, so the async events of every QP created for
/// them arrive on one fd.
#[test]
fn rdma_cm_ids_on_two_channels_share_one_verbs_context() {
    let ip = test_env("UVERBS_TEST_IP");
    let (ch1, ch2) = (EventChannel::open().unwrap(), EventChannel::open().unwrap());
    let resolved = |ch: &EventChannel, port| {
        let id = ch.create_id(PortSpace::Tcp).unwrap();
        id.resolve_addr(None, SocketAddr::new(ip, port), Duration::from_secs(2))
            .unwrap();
        let ev = ch
            .get_event_timeout(Some(Duration::from_secs(10)))
            .unwrap()
            .expect("ADDR_RESOLVED within 10 s");
        assert_eq!(ev.kind(), CmEventKind::AddrResolved, "{ev:?}");
        ev.ack();
        id
    };
    let (id1, id2) = (resolved(&ch1, 18621), resolved(&ch2, 18622));
    let (c1, c2) = (id1.context().unwrap(), id2.context().unwrap());
    assert_eq!(
        c1.async_fd().as_raw_fd(),
        c2.async_fd().as_raw_fd(),
        "one verbs context (one async fd) for the device"
    );
    // A PD of one id's context serves QPs of the other's: they are one.
    let pd = c1.alloc_pd().unwrap();
    let cq = c2.create_cq(4, CqOptions::default()).unwrap();
    let qp = pd.create_qp(&QpInitAttr::rc(&cq, &cq).cap(cap(4))).unwrap();
    qp.destroy().unwrap();
    cq.destroy().unwrap();
    pd.destroy().unwrap();
    for (name, id) in [("id1", id1), ("id2", id2)] {
        PATIENCE
            .destroy(format!("{name} after ADDR_RESOLVED"), id, CmId::destroy)
            .unwrap();
    }
}
