//! Completion channels on the real kernel: blocking and non-blocking gets,
//! edge-triggered epoll, batched acknowledgement, and destroy waiting for
//! the acknowledgement of events held by other threads.

use std::{
    ffi::OsString,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    path::Path,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    thread,
    time::Duration,
};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use uverbs::sys::{Errno, IoctlCmd, Kernel, Linux, Mapping, Protection, WriteCmd};
use uverbs::{
    ack_cq_events, CompletionChannel, CompletionQueue, CqOptions, ProtectionDomain, QpInitAttr,
    QueuePair, RecvWr, SendFlags, SendWr, WorkCompletion,
};

use crate::support::*;

/// A loopback RC pair whose receive CQ signals `channel`.
struct Signalled {
    pd: ProtectionDomain,
    channel: CompletionChannel,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    tx: QueuePair,
    rx: QueuePair,
    buf: uverbs::MemoryRegion,
}

fn signalled() -> Signalled {
    signalled_on(open())
}

fn signalled_on(ctx: uverbs::Context) -> Signalled {
    let pd = ctx.alloc_pd().unwrap();
    let channel = ctx.create_comp_channel().unwrap();
    let send_cq = ctx.create_cq(64, CqOptions::default()).unwrap();
    let recv_cq = ctx
        .create_cq(64, CqOptions::new().channel(&channel))
        .unwrap();
    let tx = pd
        .create_qp(&QpInitAttr::rc(&send_cq, &send_cq).cap(cap(32)))
        .unwrap();
    let rx = pd
        .create_qp(&QpInitAttr::rc(&recv_cq, &recv_cq).cap(cap(32)))
        .unwrap();
    let gid = local_gid(&ctx);
    connect(&tx, rx.qp_num(), gid, access_all(), 7);
    connect(&rx, tx.qp_num(), gid, access_all(), 7);
    let buf = mr(&pd, 4096);
    Signalled {
        pd,
        channel,
        send_cq,
        recv_cq,
        tx,
        rx,
        buf,
    }
}

impl Signalled {
    fn send(&mut self, n: u64) {
        for i in 0..n {
            self.rx
                .post_recv(&[RecvWr::new(i, &[self.buf.sge(0, 64).unwrap()])])
                .unwrap();
        }
        let sge = [self.buf.sge(64, 8).unwrap()];
        for i in 0..n {
            self.tx.post_send(&[SendWr::send(i, &sge)]).unwrap();
        }
        wait(&mut self.send_cq, n as usize);
    }
}

fn drain(cq: &mut CompletionQueue) -> usize {
    let mut wc = [WorkCompletion::default(); 16];
    let mut n = 0;
    loop {
        let k = cq.poll(&mut wc);
        if k == 0 {
            return n;
        }
        n += k;
    }
}

/// The real kernel, counting the reads and polls of event fds.
#[derive(Debug, Default)]
struct CountingKernel {
    reads: AtomicUsize,
    polls: AtomicUsize,
    fcntls: AtomicUsize,
}

#[allow(unsafe_code)] // forwards the transport's `unsafe fn`s
                      // SAFETY: every mapping comes from `Linux`, which keeps the contract.
unsafe impl Kernel for CountingKernel {
    fn open_rdwr(&self, path: &Path) -> Result<OwnedFd, Errno> {
        Linux.open_rdwr(path)
    }
    fn char_dev(&self, fd: BorrowedFd<'_>) -> Result<u64, Errno> {
        Linux.char_dev(fd)
    }
    unsafe fn ioctl(&self, fd: BorrowedFd<'_>, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        // SAFETY: forwarded with the caller's contract.
        unsafe { Linux.ioctl(fd, cmd) }
    }
    unsafe fn write_cmd(&self, fd: BorrowedFd<'_>, cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
        // SAFETY: forwarded with the caller's contract.
        unsafe { Linux.write_cmd(fd, cmd) }
    }
    unsafe fn write(&self, fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
        // SAFETY: forwarded with the caller's contract.
        unsafe { Linux.write(fd, buf) }
    }
    fn read(&self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        Linux.read(fd, buf)
    }
    fn wait_readable(
        &self,
        fd: BorrowedFd<'_>,
        t: Option<Duration>,
    ) -> Result<uverbs::sys::Readiness, Errno> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        Linux.wait_readable(fd, t)
    }
    fn set_nonblocking(&self, fd: BorrowedFd<'_>, nonblocking: bool) -> Result<bool, Errno> {
        self.fcntls.fetch_add(1, Ordering::Relaxed);
        Linux.set_nonblocking(fd, nonblocking)
    }
    fn mmap(
        &self,
        fd: BorrowedFd<'_>,
        len: usize,
        offset: u64,
        prot: Protection,
    ) -> Result<Mapping, Errno> {
        Linux.mmap(fd, len, offset, prot)
    }
    fn netlink_rdma(&self, req: &[u8], on: &mut dyn FnMut(&[u8])) -> Result<(), Errno> {
        Linux.netlink_rdma(req, on)
    }
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        Linux.read_to_string(path)
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<OsString>> {
        Linux.read_dir(path)
    }
}

impl CountingKernel {
    fn take(&self) -> (usize, usize, usize) {
        (
            self.reads.swap(0, Ordering::Relaxed),
            self.polls.swap(0, Ordering::Relaxed),
            self.fcntls.swap(0, Ordering::Relaxed),
        )
    }
}

/// A blocking get is what libibverbs' `ibv_get_cq_event` is: one blocking
/// read(2), whether the event is already queued or arrives while waiting;
/// the first non-blocking get switches the fd once; gets that must not
/// block poll first and read only what the poll showed.
#[test]
fn a_blocking_get_is_one_read_and_the_first_try_get_switches_once() {
    let k = Arc::new(CountingKernel::default());
    let ctx = uverbs::Context::open_with(k.clone(), Some(&crate::test_device())).unwrap();
    let mut s = signalled_on(ctx);
    let channel = s.channel.clone();

    s.recv_cq.req_notify(false).unwrap();
    s.send(1);
    k.take();
    // Blocking gets on a thread of their own, bounded (the event is
    // acknowledged there): an event that never comes fails the test.
    let ch = channel.clone();
    PATIENCE
        .within("a blocking get of a queued completion event", move || {
            ch.get_event().map(|ev| ev.ack())
        })
        .unwrap();
    assert_eq!(
        k.take(),
        (1, 0, 0),
        "(reads, polls, fcntls) of a queued event"
    );
    assert_eq!(drain(&mut s.recv_cq), 1);

    s.recv_cq.req_notify(false).unwrap();
    thread::scope(|sc| {
        sc.spawn(|| {
            thread::sleep(Duration::from_millis(200));
            s.send(1);
        });
        k.take();
        let ch = channel.clone();
        PATIENCE
            .within(
                "a blocking get of an event arriving while it waits",
                move || ch.get_event().map(|ev| ev.ack()),
            )
            .unwrap();
    });
    assert_eq!(k.take(), (1, 0, 0), "waiting is the read itself");
    assert_eq!(drain(&mut s.recv_cq), 1);

    assert!(channel.try_get_event().unwrap().is_none());
    assert_eq!(
        k.take(),
        (0, 1, 1),
        "one poll without waiting (it tells an idle channel from a removed device's), \
         no read, and the one O_NONBLOCK switch"
    );
    assert!(channel
        .get_event_timeout(Some(Duration::from_millis(30)))
        .unwrap()
        .is_none());
    let (reads, polls, fcntls) = k.take();
    assert_eq!(fcntls, 0, "switched once");
    assert_eq!(reads, 0, "nothing polled readable: nothing read");
    assert!(polls >= 1, "{polls}");
    // A queued event: one poll, one read.
    s.recv_cq.req_notify(false).unwrap();
    s.send(1);
    k.take();
    channel.try_get_event().unwrap().expect("the event").ack();
    assert_eq!(k.take(), (1, 1, 0));
    assert_eq!(drain(&mut s.recv_cq), 1);
}

/// A program clears `O_NONBLOCK` on the completion channel and the async
/// fd (the library had set it): `try_*` and timed gets still return at
/// once and at their deadline, and events still arrive.
#[test]
fn clearing_o_nonblocking_on_event_fds_is_harmless() {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let mut s = signalled();
    let ctx = open();
    assert!(s.channel.try_get_event().unwrap().is_none());
    assert!(ctx.try_get_async_event().unwrap().is_none());
    for fd in [s.channel.as_fd(), ctx.async_fd()] {
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let flags = OFlag::from_bits_retain(fcntl(raw, FcntlArg::F_GETFL).unwrap());
        assert!(flags.contains(OFlag::O_NONBLOCK), "the library set it");
        fcntl(raw, FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK)).unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let (channel, ctx2) = (s.channel.clone(), ctx.clone());
    let prober = thread::spawn(move || {
        let a = channel.try_get_event().unwrap().is_none();
        let b = ctx2.try_get_async_event().unwrap().is_none();
        let c = channel
            .get_event_timeout(Some(Duration::from_millis(50)))
            .unwrap()
            .is_none();
        let d = ctx2
            .get_async_event_timeout(Some(Duration::from_millis(50)))
            .unwrap()
            .is_none();
        tx.send([a, b, c, d]).unwrap();
    });
    let got = rx.recv_timeout(Duration::from_secs(10));
    if got.is_err() {
        // Wake the blocked reads so the test ends, then fail.
        s.recv_cq.req_notify(false).unwrap();
        s.send(1);
    }
    assert_eq!(got.expect("a get blocked in read"), [true; 4]);
    prober.join().unwrap();
    s.recv_cq.req_notify(false).unwrap();
    s.send(1);
    let ev = s
        .channel
        .get_event_timeout(Some(Duration::from_secs(10)))
        .unwrap()
        .expect("events still arrive");
    assert!(ev.is_for(&s.recv_cq));
}

#[test]
fn blocking_get_after_arming_reports_the_cq() {
    let mut s = signalled();
    s.recv_cq.req_notify(false).unwrap();
    s.send(1);
    let ev = s
        .channel
        .get_event_timeout(Some(Duration::from_secs(10)))
        .unwrap()
        .expect("a completion event");
    assert!(ev.is_for(&s.recv_cq));
    assert_eq!(ev.cq_handle(), s.recv_cq.handle());
    ev.ack();
    assert_eq!(drain(&mut s.recv_cq), 1);
    // Not re-armed: further completions raise no event.
    s.send(1);
    assert!(s.channel.try_get_event().unwrap().is_none());
    assert_eq!(drain(&mut s.recv_cq), 1);
}

/// `get_event_deferred` on the kernel's channel (a blocking `read`; the
/// arm is rxe's one `REQ_NOTIFY_CQ` write): the event names the CQ, is
/// counted by it, and is acknowledged by count before the destroy.
#[test]
fn deferred_get_after_arming_reports_and_counts_the_cq() {
    let mut s = signalled();
    for round in 1..=3 {
        s.recv_cq.req_notify(false).unwrap();
        s.send(1);
        let ev = s.channel.get_event_deferred().unwrap();
        assert!(ev.is_for(&s.recv_cq));
        assert_eq!(ev.cq_handle(), s.recv_cq.handle());
        assert_eq!(s.recv_cq.deferred_events(), round);
        assert_eq!(drain(&mut s.recv_cq), 1);
    }
    // Not re-armed: further completions raise no event.
    s.send(1);
    assert!(s.channel.try_get_event().unwrap().is_none());
    assert_eq!(drain(&mut s.recv_cq), 1);
    s.recv_cq.ack_events(3).unwrap();
    assert_eq!(s.recv_cq.deferred_events(), 0);
}

#[test]
fn solicited_only_arming_waits_for_a_solicited_send() {
    let mut s = signalled();
    s.recv_cq.req_notify(true).unwrap();
    // An unsolicited send completes but raises no event.
    s.send(1);
    assert_eq!(drain(&mut s.recv_cq), 1);
    assert!(s
        .channel
        .get_event_timeout(Some(Duration::from_millis(300)))
        .unwrap()
        .is_none());
    // A solicited one does.
    s.rx.post_recv(&[RecvWr::new(9, &[s.buf.sge(0, 64).unwrap()])])
        .unwrap();
    let sge = [s.buf.sge(64, 8).unwrap()];
    s.tx.post_send(&[SendWr::send(9, &sge).flags(SendFlags::SIGNALED | SendFlags::SOLICITED)])
        .unwrap();
    wait(&mut s.send_cq, 1);
    let ev = s
        .channel
        .get_event_timeout(Some(Duration::from_secs(10)))
        .unwrap()
        .expect("an event for the solicited completion");
    assert!(ev.is_for(&s.recv_cq));
    ev.ack();
    assert_eq!(drain(&mut s.recv_cq), 1);
}

#[test]
fn nonblocking_get_would_block_when_empty_and_batched_acks_count() {
    let mut s = signalled();
    assert!(s.channel.try_get_event().unwrap().is_none(), "would block");
    let mut held = Vec::new();
    for _ in 0..3 {
        s.recv_cq.req_notify(false).unwrap();
        s.send(1);
        let ev = s
            .channel
            .get_event_timeout(Some(Duration::from_secs(10)))
            .unwrap()
            .expect("event");
        drain(&mut s.recv_cq);
        held.push(ev);
    }
    ack_cq_events(held);
    // With every event acknowledged the CQ can go (after its QP).
    s.rx.destroy().unwrap();
    PATIENCE
        .destroy(
            "the CQ after 3 events acknowledged in one batch",
            s.recv_cq,
            CompletionQueue::destroy,
        )
        .unwrap();
}

#[test]
fn edge_triggered_epoll_drains_until_would_block() {
    let mut s = signalled();
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).unwrap();
    epoll
        .add(
            s.channel.as_fd(),
            EpollEvent::new(EpollFlags::EPOLLIN | EpollFlags::EPOLLET, 7),
        )
        .unwrap();
    s.recv_cq.req_notify(false).unwrap();
    s.send(1);
    let mut events = [EpollEvent::empty(); 4];
    let n = epoll
        .wait(&mut events, EpollTimeout::try_from(10_000).unwrap())
        .unwrap();
    assert_eq!((n, events[0].data()), (1, 7));
    // Drain: one event, then "would block".
    let mut got = 0;
    while let Some(ev) = s.channel.try_get_event().unwrap() {
        ev.ack();
        got += 1;
    }
    assert_eq!(got, 1);
    // Re-arm, then poll: the re-arm may already raise an event for the
    // completion polled below (the "extra event"): handle it gracefully.
    s.recv_cq.req_notify(false).unwrap();
    assert_eq!(drain(&mut s.recv_cq), 1);
    // Nothing new arrived: edge-triggered epoll stays quiet.
    let n = epoll.wait(&mut events, EpollTimeout::ZERO).unwrap();
    if n == 1 {
        // An extra event with no completion behind it.
        let ev = s.channel.try_get_event().unwrap().expect("the extra event");
        ev.ack();
        assert_eq!(drain(&mut s.recv_cq), 0);
    }
    // The next completion wakes epoll again.
    s.send(1);
    let n = epoll
        .wait(&mut events, EpollTimeout::try_from(10_000).unwrap())
        .unwrap();
    assert_eq!(n, 1);
    while let Some(ev) = s.channel.try_get_event().unwrap() {
        ev.ack();
    }
    assert_eq!(drain(&mut s.recv_cq), 1);
}

#[test]
fn destroy_waits_for_an_event_held_by_another_thread() {
    let mut s = signalled();
    s.recv_cq.req_notify(false).unwrap();
    s.send(1);
    drain(&mut s.recv_cq);
    let channel = s.channel.clone();
    let (got_tx, got) = std::sync::mpsc::channel();
    let acked = Arc::new(AtomicBool::new(false));
    let a = acked.clone();
    let holder = thread::spawn(move || {
        let ev = channel
            .get_event_timeout(Some(Duration::from_secs(10)))
            .unwrap()
            .expect("event");
        got_tx.send(()).unwrap();
        thread::sleep(Duration::from_millis(300));
        a.store(true, Ordering::SeqCst);
        ev.ack();
    });
    PATIENCE.recv("the holder's completion event", &got);
    // The QP must go first; then the CQ's destroy blocks until the ack.
    let Signalled { rx, recv_cq, .. } = s;
    rx.destroy().unwrap();
    PATIENCE
        .destroy(
            "the CQ, once the holder acknowledged the one event it read",
            recv_cq,
            CompletionQueue::destroy,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        acked.load(Ordering::SeqCst),
        "destroy returned before the other thread acknowledged"
    );
    PATIENCE.join("the holder", holder);
}

/// libibverbs' destroy (`destroy_awaiting_acks`, what `ibv_destroy_cq`
/// of uverbs-cabi calls) on the real kernel: two completion events
/// deferred, the QP gone, the CQ's destroy waits until another thread has
/// acknowledged both by count (the kernel's `comp_events_reported`), and
/// returns once it has.
#[test]
fn destroy_awaiting_acks_waits_for_the_deferred_events_the_kernel_reported() {
    let mut s = signalled();
    for _ in 0..2 {
        s.recv_cq.req_notify(false).unwrap();
        s.send(1);
        s.channel
            .get_event_timeout(Some(Duration::from_secs(10)))
            .unwrap()
            .expect("event")
            .defer_ack();
        drain(&mut s.recv_cq);
    }
    let acks = s.recv_cq.event_acks();
    let Signalled { rx, recv_cq, .. } = s;
    rx.destroy().unwrap();
    let (done_tx, done) = std::sync::mpsc::channel();
    let destroyer = thread::spawn(move || {
        let _ = done_tx.send(recv_cq.destroy_awaiting_acks().map_err(|e| e.errno()));
    });
    for left in [2, 1] {
        thread::sleep(Duration::from_millis(300));
        assert!(
            done.try_recv().is_err(),
            "the destroy returned with {left} event(s) deferred"
        );
        acks.ack_events(1).unwrap();
    }
    assert_eq!(
        PATIENCE.recv("the destroy, both events acknowledged", &done),
        Ok(())
    );
    PATIENCE.join("the destroyer", destroyer);
}

#[test]
fn destroy_from_the_thread_holding_the_event_is_ebusy_not_a_deadlock() {
    let mut s = signalled();
    s.recv_cq.req_notify(false).unwrap();
    s.send(1);
    let ev = s
        .channel
        .get_event_timeout(Some(Duration::from_secs(10)))
        .unwrap()
        .expect("event");
    let Signalled {
        rx, recv_cq, pd, ..
    } = s;
    rx.destroy().unwrap();
    let err = recv_cq.destroy().unwrap_err();
    assert_eq!(err.errno(), uverbs::sys::Errno::EBUSY);
    assert!(err.to_string().contains("unacknowledged"), "{err}");
    // The CQ lives on in the event; acknowledging it lets it go.
    drop(ev);
    drop(pd);
}

/// The three event fds of the real kernel, empty: a timed get returns
/// `None` at its deadline, not before and not a scheduling quantum after.
#[test]
fn timed_gets_on_every_event_fd_end_at_their_deadline() {
    const QUANTUM: Duration = Duration::from_millis(20);
    let ctx = open();
    let channel = ctx.create_comp_channel().unwrap();
    let cm = uverbs::cm::EventChannel::open().unwrap();
    for ms in [5u64, 50] {
        let t = Duration::from_millis(ms);
        let timed = |name: &str, get: &dyn Fn() -> bool| {
            let start = std::time::Instant::now();
            assert!(!get(), "{name}: an event on an empty fd");
            let took = start.elapsed();
            assert!(
                took >= t && took <= t + QUANTUM,
                "{name}, {ms} ms: took {took:?}"
            );
        };
        timed("completion channel", &|| {
            channel.get_event_timeout(Some(t)).unwrap().is_some()
        });
        timed("async event fd", &|| {
            ctx.get_async_event_timeout(Some(t)).unwrap().is_some()
        });
        timed("rdma_cm channel", &|| {
            cm.get_event_timeout(Some(t)).unwrap().is_some()
        });
    }
}

/// An event the program reads from the channel's fd itself (through
/// `AsFd`): the real kernel counts it in the CQ's `comp_events_reported`,
/// and nobody can acknowledge it. `try_destroy` and the last drop of the CQ
/// still return (issue 27 item 5; before, both waited for it forever).
#[test]
fn an_event_read_from_the_channel_fd_directly_never_blocks_try_destroy_or_drop() {
    for try_destroy in [true, false] {
        let mut s = signalled();
        s.recv_cq.req_notify(false).unwrap();
        s.send(1);
        // The read(2) a program would make, behind the library's back.
        let fd = s.channel.as_fd();
        assert_eq!(
            Linux.wait_readable(fd, Some(Duration::from_secs(10))),
            Ok(uverbs::sys::Readiness::Readable)
        );
        let mut record = [0u8; 8];
        assert_eq!(Linux.read(fd, &mut record), Ok(8), "one completion event");
        let Signalled { rx, recv_cq, .. } = s;
        rx.destroy().unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let r = if try_destroy {
                recv_cq.try_destroy().map_err(|e| e.to_string())
            } else {
                drop(recv_cq);
                Ok(())
            };
            let _ = done_tx.send(r);
        });
        done_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the CQ's destroy is asleep on an event read from its channel's fd")
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// A CQ, a QP and an SRQ the kernel refuses (each one above the device's
/// limit: rxe's `rxe_cq_chk_attr`, `rxe_qp_chk_cap`, `rxe_srq_chk_attr`
/// answer `EINVAL`) give back the event handle reserved for their create
/// command: the context's event map holds no more than before, and a CQ
/// made afterwards gets its completion events.
#[test]
fn refused_creations_give_their_event_handles_back() {
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let attr = ctx.query_device().unwrap();
    let channel = ctx.create_comp_channel().unwrap();
    let cq = ctx
        .create_cq(8, CqOptions::new().channel(&channel))
        .unwrap();
    let before = ctx.event_map_len();
    let e = ctx
        .create_cq(attr.max_cqe + 1, CqOptions::new())
        .unwrap_err();
    assert_eq!(e.kernel_errno(), Some(Errno::EINVAL), "the CQ: {e}");
    let cap = uverbs::QpCap::new(attr.max_qp_wr + 1, 1, 1, 1);
    let e = pd
        .create_qp(&QpInitAttr::rc(&cq, &cq).cap(cap))
        .unwrap_err();
    assert_eq!(e.kernel_errno(), Some(Errno::EINVAL), "the QP: {e}");
    let e = pd
        .create_srq(uverbs::SrqAttr::new(attr.max_srq_wr + 1, 1))
        .unwrap_err();
    assert_eq!(e.kernel_errno(), Some(Errno::EINVAL), "the SRQ: {e}");
    assert_eq!(
        ctx.event_map_len(),
        before,
        "a refused create kept its handle"
    );
    // The map still routes: a CQ made now gets its event.
    let mut next = ctx
        .create_cq(8, CqOptions::new().channel(&channel))
        .unwrap();
    assert_eq!(ctx.event_map_len(), before + 1);
    let mut qp = pd
        .create_qp(&QpInitAttr::rc(&next, &next).cap(uverbs::QpCap::new(4, 4, 1, 1)))
        .unwrap();
    let gid = local_gid(&ctx);
    connect(&qp, qp.qp_num(), gid, access_all(), 7);
    let buf = mr(&pd, 64);
    qp.post_recv(&[RecvWr::new(1, &[buf.sge(0, 8).unwrap()])])
        .unwrap();
    next.req_notify(false).unwrap();
    qp.post_send(&[SendWr::send(2, &[buf.sge(8, 8).unwrap()]).flags(SendFlags::SIGNALED)])
        .unwrap();
    let ev = PATIENCE.within("the new CQ's completion event", {
        let ch = channel.clone();
        move || ch.get_event_deferred().unwrap()
    });
    assert!(ev.is_for(&next), "the event is the new CQ's");
    next.ack_events(1).unwrap();
    wait(&mut next, 2);
    drop(cq);
}
