//! `uverbs::event_stream`, the runtime-independent async layer, with no
//! runtime at all: a hand-rolled [`Readiness`] the test fires itself
//! (on the fake rxe kernel, whose event fds have no readiness of their own)
//! and a `poll(2)` thread (on the mlx5 model, whose event fds are readable
//! exactly while a record is queued), polled with a hand-rolled waker and
//! a ten-line `block_on`. Then the `Stream` impls (feature `stream`), and
//! tokio (feature `tokio`) on the model, which is this layer's tokio
//! instantiation.
//!
//! What every test checks besides its subject: each event read is handed
//! out once and acknowledged (the objects' `destroy()`, which waits until
//! every event the kernel reported is acknowledged, returns, bounded), and
//! a wait given up (a future or stream dropped) has read nothing.

use std::{
    future::Future,
    io,
    os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd},
    pin::{pin, Pin},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    task::{Context as TaskContext, Poll, Wake, Waker},
    thread,
    time::{Duration, Instant},
};

use futures_core::{FusedStream, Stream};
use uverbs::{
    event_stream::{AsyncCq, EventStream, Readiness, ReadyGuard},
    sys::Errno,
    testing::{mlx5::fake_mlx5, rxe::*},
    AccessFlags, AsyncEventType as T, CompletionChannel, CompletionQueue, Context, CqOptions,
    ErrorKind, QpType, RecvWr, SendFlags, SendWr, WorkCompletion,
};
use uverbs_test_support::{bounded::PATIENCE, mlx5_pair};

// ---- a waker and an executor, by hand --------------------------------------

/// A waker that counts its wake-ups and unparks the thread that made it.
struct Counting {
    wakes: AtomicUsize,
    thread: thread::Thread,
}

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

fn counting() -> (Arc<Counting>, Waker) {
    let c = Arc::new(Counting {
        wakes: AtomicUsize::new(0),
        thread: thread::current(),
    });
    (c.clone(), Waker::from(c))
}

/// Runs `f` to completion on this thread, parking between polls; fails
/// the test after the host tests' patience.
fn block_on<F: Future>(what: &str, f: F) -> F::Output {
    let mut f = pin!(f);
    let (_, waker) = counting();
    let mut cx = TaskContext::from_waker(&waker);
    let deadline = Instant::now() + PATIENCE.0;
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not done after {:?}",
            PATIENCE.0
        );
        thread::park_timeout(Duration::from_millis(100));
    }
}

// ---- a readiness the test fires --------------------------------------------

#[derive(Debug, Default)]
struct ManualState {
    /// The fd is ready (set by `fire`, cleared by a guard of the same
    /// generation).
    ready: bool,
    /// Bumped by every `fire`: a guard clears only the readiness it saw.
    generation: u64,
    waker: Option<Waker>,
    /// Guards cleared (the gets that found nothing).
    clears: u32,
    /// The next poll fails with this errno.
    fail: Option<i32>,
    /// Stays ready whatever is cleared (a broken reactor).
    stuck: bool,
}

/// An edge-triggered reactor as tokio's: ready from a `fire` until a
/// guard of that readiness is cleared.
#[derive(Debug, Default)]
struct Manual(Mutex<ManualState>);

impl Manual {
    fn state(&self) -> std::sync::MutexGuard<'_, ManualState> {
        self.0.lock().unwrap()
    }

    /// An edge: the fd became readable; the waiting task is woken.
    fn fire(&self) {
        let waker = {
            let mut s = self.state();
            s.ready = true;
            s.generation += 1;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

#[derive(Debug)]
struct ManualFd(Arc<Manual>);

struct ManualGuard<'a> {
    manual: &'a Manual,
    generation: u64,
}

impl ReadyGuard for ManualGuard<'_> {
    fn clear_ready(self) {
        let mut s = self.manual.state();
        s.clears += 1;
        if s.generation == self.generation && !s.stuck {
            s.ready = false;
        }
    }
}

impl Readiness for ManualFd {
    type Ready<'a> = ManualGuard<'a>;

    fn poll_read_ready<'a>(
        &'a self,
        cx: &mut TaskContext<'_>,
    ) -> Poll<io::Result<ManualGuard<'a>>> {
        let mut s = self.0.state();
        if let Some(errno) = s.fail.take() {
            return Poll::Ready(Err(io::Error::from_raw_os_error(errno)));
        }
        if s.ready {
            return Poll::Ready(Ok(ManualGuard {
                manual: &self.0,
                generation: s.generation,
            }));
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A completion channel on the fake rxe kernel, a CQ on it, and the
/// channel wrapped with a [`Manual`] readiness.
struct Channel {
    fake: Arc<FakeRxe>,
    _ctx: Context,
    cq: CompletionQueue,
    manual: Arc<Manual>,
    events: EventStream<CompletionChannel, ManualFd>,
}

fn channel() -> Channel {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let channel = ctx.create_comp_channel().unwrap();
    let cq = ctx
        .create_cq(8, CqOptions::new().channel(&channel))
        .unwrap();
    let manual = Arc::new(Manual::default());
    let raw = channel.as_fd().as_raw_fd();
    let m = manual.clone();
    let events = EventStream::register(channel, move |fd| {
        assert_eq!(fd.as_raw_fd(), raw, "register gets the channel's own fd");
        Ok(ManualFd(m))
    })
    .unwrap();
    Channel {
        fake,
        _ctx: ctx,
        cq,
        manual,
        events,
    }
}

impl Channel {
    /// Queues `n` completion events of the CQ and fires one edge.
    fn push(&self, n: usize) {
        for _ in 0..n {
            assert!(self.fake.push_comp_event(self.cq.handle()));
        }
        self.manual.fire();
    }

    /// Destroys the CQ, bounded: every event read was acknowledged once.
    fn destroy(self, after: &str) {
        let Channel { cq, events, .. } = self;
        PATIENCE
            .destroy(format!("the CQ {after}"), cq, CompletionQueue::destroy)
            .unwrap();
        drop(events);
    }
}

/// `poll_next_event` with no runtime: `Pending` with the waker kept until
/// the reactor fires, then each queued event once, in order; readiness is
/// cleared only by the get that found the queue empty.
#[test]
fn poll_next_event_waits_then_hands_out_each_event_once() {
    let ch = channel();
    let (count, waker) = counting();
    let mut cx = TaskContext::from_waker(&waker);
    assert!(ch.events.poll_next_event(&mut cx).is_pending());
    assert_eq!(count.wakes.load(Ordering::SeqCst), 0);
    assert_eq!(
        ch.manual.state().clears,
        0,
        "nothing was ready: nothing to clear"
    );
    ch.push(2);
    assert_eq!(
        count.wakes.load(Ordering::SeqCst),
        1,
        "the fire woke the waiter"
    );
    for i in 0..2 {
        let Poll::Ready(Ok(ev)) = ch.events.poll_next_event(&mut cx) else {
            panic!("event {i} was queued");
        };
        assert!(ev.is_for(&ch.cq));
        // The readiness stays while events are there: nothing cleared yet.
        assert_eq!(ch.manual.state().clears, 0);
        ev.ack();
    }
    assert!(ch.events.poll_next_event(&mut cx).is_pending());
    assert_eq!(ch.manual.state().clears, 1, "the empty get cleared it");
    assert!(!ch.manual.state().ready);
    assert!(ch.events.source().try_get_event().unwrap().is_none());
    // A later edge wakes the waiter registered by the last poll.
    ch.push(1);
    assert_eq!(count.wakes.load(Ordering::SeqCst), 2);
    let Poll::Ready(Ok(ev)) = ch.events.poll_next_event(&mut cx) else {
        panic!("the third event");
    };
    drop(ev);
    ch.destroy("after three events, each acknowledged");
}

/// A spurious wake-up (ready, nothing queued) is cleared and waited
/// again; a reactor that never clears does not spin the thread: the poll
/// yields (`Pending` and a wake-up of its own) after a bounded number of
/// empty gets.
#[test]
fn spurious_readiness_is_cleared_and_a_stuck_one_yields() {
    let ch = channel();
    let (count, waker) = counting();
    let mut cx = TaskContext::from_waker(&waker);
    ch.manual.fire();
    assert!(ch.events.poll_next_event(&mut cx).is_pending());
    assert_eq!(ch.manual.state().clears, 1);
    assert_eq!(count.wakes.load(Ordering::SeqCst), 0);
    ch.manual.state().stuck = true;
    ch.manual.fire();
    assert_eq!(
        count.wakes.load(Ordering::SeqCst),
        1,
        "the fire woke the waiter"
    );
    let start = Instant::now();
    assert!(ch.events.poll_next_event(&mut cx).is_pending());
    assert!(start.elapsed() < Duration::from_secs(1));
    let clears = ch.manual.state().clears;
    assert!(
        clears > 2 && clears < 100,
        "{clears} empty gets in one poll"
    );
    assert_eq!(
        count.wakes.load(Ordering::SeqCst),
        2,
        "the poll woke itself to come back"
    );
    // The future too.
    {
        let mut fut = pin!(ch.events.next_event());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(count.wakes.load(Ordering::SeqCst), 3, "the future yielded");
    }
    // Still correct: an event queued now is returned.
    ch.push(1);
    let Poll::Ready(Ok(ev)) = ch.events.poll_next_event(&mut cx) else {
        panic!("the event");
    };
    drop(ev);
    ch.destroy("after a spurious and a stuck readiness");
}

/// A future or stream dropped while it waits has read nothing: the event
/// that arrived meanwhile is still queued, for the next get.
#[test]
fn a_cancelled_wait_loses_no_event() {
    let mut ch = channel();
    let (count, waker) = counting();
    let mut cx = TaskContext::from_waker(&waker);
    {
        let mut fut = pin!(ch.events.next_event());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        ch.push(1);
        assert_eq!(count.wakes.load(Ordering::SeqCst), 1);
        // Dropped, woken but never polled again.
    }
    {
        let mut stream = Pin::new(&mut ch.events);
        let Poll::Ready(Some(Ok(ev))) = stream.as_mut().poll_next(&mut cx) else {
            panic!("the event the dropped future left");
        };
        assert!(ev.is_for(&ch.cq));
        drop(ev);
        assert!(stream.as_mut().poll_next(&mut cx).is_pending());
        ch.push(1);
        // The stream is dropped (with its channel's wrapper) below.
    }
    let Channel {
        fake,
        _ctx,
        cq,
        manual: _m,
        events,
    } = ch;
    let channel = events.into_inner();
    let ev = channel.try_get_event().unwrap().expect("still queued");
    assert!(ev.is_for(&cq));
    drop(ev);
    assert!(channel.try_get_event().unwrap().is_none());
    PATIENCE
        .destroy(
            "the CQ after two events, each read once after a cancelled wait",
            cq,
            CompletionQueue::destroy,
        )
        .unwrap();
    assert_eq!(fake.destroyed(Kind::Cq).len(), 1);
}

/// `next_event` is the same loop as a future: it waits through a spurious
/// wake-up and returns the event queued later.
#[test]
fn next_event_on_a_thread_of_its_own() {
    let ch = Arc::new(channel());
    let c = ch.clone();
    let pusher = thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        c.manual.fire(); // nothing queued yet
        thread::sleep(Duration::from_millis(30));
        c.push(1);
    });
    let ev = block_on("next_event", ch.events.next_event()).unwrap();
    assert!(ev.is_for(&ch.cq));
    drop(ev);
    PATIENCE.join("the pusher", pusher);
    assert!(
        ch.manual.state().clears >= 1,
        "the spurious wake-up was cleared"
    );
    Arc::try_unwrap(ch)
        .ok()
        .expect("the only owner")
        .destroy("after next_event");
}

/// The completion channel as a `Stream`: the queued events in order,
/// `Pending` once drained; not terminated.
#[test]
fn the_channel_is_a_stream_of_events() {
    let mut ch = channel();
    let (_, waker) = counting();
    let mut cx = TaskContext::from_waker(&waker);
    ch.push(3);
    let mut got = 0;
    while let Poll::Ready(item) = Pin::new(&mut ch.events).poll_next(&mut cx) {
        let ev = item.expect("not ended").unwrap();
        assert!(ev.is_for(&ch.cq));
        got += 1;
    }
    assert_eq!(got, 3);
    assert!(!ch.events.is_terminated());
    ch.destroy("after a stream of three events");
}

/// A reactor that fails: `poll_next_event` returns the error (the wait's
/// name, the errno) and the `Stream` yields it and ends.
#[test]
fn a_failing_reactor_is_an_error_and_ends_the_stream() {
    let mut ch = channel();
    let (_, waker) = counting();
    let mut cx = TaskContext::from_waker(&waker);
    ch.manual.state().fail = Some(libc::EBADF);
    let Poll::Ready(Err(e)) = ch.events.poll_next_event(&mut cx) else {
        panic!("the reactor's error");
    };
    assert_eq!(e.errno(), Errno::EBADF, "{e}");
    assert_eq!(e.op(), "await a completion event");
    ch.manual.state().fail = Some(libc::EBADF);
    let Poll::Ready(Some(Err(e))) = Pin::new(&mut ch.events).poll_next(&mut cx) else {
        panic!("the reactor's error, as an item");
    };
    assert_eq!(e.errno(), Errno::EBADF);
    assert!(ch.events.is_terminated());
    ch.push(1);
    assert!(matches!(
        Pin::new(&mut ch.events).poll_next(&mut cx),
        Poll::Ready(None)
    ));
    // The event is still there for whoever gets next.
    let ev = ch.events.source().try_get_event().unwrap().unwrap();
    drop(ev);
    ch.destroy("after the stream ended");
}

/// A registration that fails is an error with its errno.
#[test]
fn a_failed_registration_is_an_error() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let err = EventStream::register(ctx.create_comp_channel().unwrap(), |_| {
        Err::<ManualFd, _>(io::Error::from_raw_os_error(libc::EMFILE))
    })
    .unwrap_err();
    assert_eq!(err.errno(), Errno::EMFILE, "{err}");
    assert!(err.op().contains("register"), "{err}");
}

/// The async events of a context as a stream, through a device removal:
/// the events queued behind DEVICE_FATAL, then `DeviceRemoved` once, then
/// the end. `poll_next_event` itself keeps reporting the removal.
#[test]
fn async_events_stream_ends_after_the_removal() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let manual = Arc::new(Manual::default());
    let m = manual.clone();
    let mut events = EventStream::register(ctx.clone(), move |_| Ok(ManualFd(m))).unwrap();
    assert_eq!(events.context().device().name, DEV);
    let (_, waker) = counting();
    let mut cx = TaskContext::from_waker(&waker);
    fake.push_event(T::DEVICE_FATAL.0, 0);
    fake.push_event(T::PORT_ERR.0, 1);
    fake.behaviour.removed.store(true, Ordering::Relaxed);
    manual.fire();
    let mut types = Vec::new();
    loop {
        match Pin::new(&mut events).poll_next(&mut cx) {
            Poll::Ready(Some(Ok(ev))) => types.push(ev.event_type()),
            Poll::Ready(Some(Err(e))) => {
                assert_eq!(e.kind(), ErrorKind::DeviceRemoved, "{e}");
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(types, [T::DEVICE_FATAL, T::PORT_ERR]);
    assert!(events.is_terminated());
    assert!(matches!(
        Pin::new(&mut events).poll_next(&mut cx),
        Poll::Ready(None)
    ));
    let Poll::Ready(Err(e)) = events.poll_next_event(&mut cx) else {
        panic!("the removal, again");
    };
    assert_eq!(e.kind(), ErrorKind::DeviceRemoved);
}

// ---- real readiness: a poll(2) thread, on the mlx5 model -------------------

/// A reactor in a thread: `poll(2)` on a duplicate of the fd, waking the
/// waiting task while the fd is readable (level-triggered: nothing to
/// clear).
struct PollThread {
    shared: Arc<Watch>,
    thread: Option<thread::JoinHandle<()>>,
}

struct Watch {
    fd: OwnedFd,
    waker: Mutex<Option<Waker>>,
    stop: AtomicBool,
}

fn readable(fd: BorrowedFd<'_>, timeout_ms: u16) -> bool {
    use nix::poll::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    poll(&mut fds, timeout_ms).is_ok_and(|n| n > 0)
}

impl PollThread {
    fn register(fd: BorrowedFd<'_>) -> io::Result<PollThread> {
        let shared = Arc::new(Watch {
            fd: fd.try_clone_to_owned()?,
            waker: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = thread::spawn(move || {
            while !s.stop.load(Ordering::Acquire) {
                if readable(s.fd.as_fd(), 20) {
                    match s.waker.lock().unwrap().take() {
                        Some(w) => w.wake(),
                        None => thread::sleep(Duration::from_millis(1)),
                    }
                }
            }
        });
        Ok(PollThread {
            shared,
            thread: Some(thread),
        })
    }
}

impl Drop for PollThread {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Readiness for PollThread {
    type Ready<'a> = ();

    fn poll_read_ready(&self, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        *self.shared.waker.lock().unwrap() = Some(cx.waker().clone());
        if readable(self.shared.fd.as_fd(), 0) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

/// [`AsyncCq`] on the model with no runtime: messages exchanged and
/// awaited; a wait given up after the CQ was armed loses no completion and
/// leaves the CQ armed (the next wait takes its event); the model saw
/// every arm.
#[test]
fn async_cq_on_the_model_with_no_runtime() {
    let model = fake_mlx5();
    let _hca = model.spawn_hca();
    let ctx = mlx5_pair::open(&model);
    let mut cq = AsyncCq::create_with(&ctx, 32, 0, PollThread::register).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cap = mlx5_pair::cap(8, 1, 0);
    let a = mlx5_pair::create_qp(&pd, QpType::Rc, cq.cq(), None, cap);
    let b = mlx5_pair::create_qp(&pd, QpType::Rc, cq.cq(), None, cap);
    let g = mlx5_pair::gid(&ctx);
    mlx5_pair::connect(&a, b.qp_num(), g, 7);
    mlx5_pair::connect(&b, a.qp_num(), g, 7);
    let (mut a, mut b) = (a, b);
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let mut wc = [WorkCompletion::default(); 8];
    let mut exchange = |cq: &mut AsyncCq<PollThread>, i: u64, cancel_first: bool| {
        if cancel_first {
            // Armed and given up before anything is posted.
            let (_, waker) = counting();
            let mut cx = TaskContext::from_waker(&waker);
            let mut fut = pin!(cq.poll(&mut wc));
            assert!(fut.as_mut().poll(&mut cx).is_pending());
        }
        b.post_recv(&[RecvWr::new(100 + i, &[mr.sge(64, 64).unwrap()])])
            .unwrap();
        mr.write(0, &i.to_ne_bytes()).unwrap();
        a.post_send(&[SendWr::send(i, &[mr.sge(0, 8).unwrap()]).flags(SendFlags::SIGNALED)])
            .unwrap();
        let mut ids = Vec::new();
        while ids.len() < 2 {
            let n = block_on("the exchange's completions", cq.poll(&mut wc)).unwrap();
            assert!(n > 0);
            for c in &wc[..n] {
                assert!(c.status.is_success(), "{c:?}");
                ids.push(c.wr_id);
            }
        }
        ids.sort_unstable();
        assert_eq!(ids, [i, 100 + i]);
        assert_eq!(mr.read_u64(64).unwrap(), i);
    };
    for i in 0..4 {
        exchange(&mut cq, i, i % 2 == 1);
    }
    assert!(cq.try_poll(&mut wc) == 0);
    drop((a, b));
    mlx5_pair::assert_clean(&model);
    PATIENCE
        .destroy(
            "the AsyncCq after four exchanges (two after a cancelled wait)",
            cq,
            |cq| cq.destroy().map_err(|e| e.into_parts().1),
        )
        .unwrap();
}

/// tokio is this layer on its reactor: on the model, the tokio channel as
/// a `Stream`, the async events awaited, and `uverbs::tokio::AsyncCq`.
#[cfg(feature = "tokio")]
#[test]
fn tokio_on_the_model_is_the_same_layer() {
    use uverbs::tokio::{AsyncCompletionChannel, AsyncEvents};
    let model = fake_mlx5();
    let _hca = model.spawn_hca();
    let ctx = mlx5_pair::open(&model);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Outside a runtime: an error, not a panic.
    let err = AsyncEvents::new(&ctx).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    rt.block_on(async {
        // Async events: a port flap queued on the model's async fd.
        let events = AsyncEvents::new(&ctx).unwrap();
        for t in [T::PORT_ERR, T::PORT_ACTIVE] {
            let mut record = 1u64.to_ne_bytes().to_vec();
            record.extend_from_slice(&t.0.to_ne_bytes());
            record.extend_from_slice(&[0; 4]);
            model
                .kernel
                .push_read_to(ctx.async_fd().as_raw_fd(), Ok(record));
        }
        for t in [T::PORT_ERR, T::PORT_ACTIVE] {
            let ev = tokio::time::timeout(PATIENCE.0, events.next_event())
                .await
                .expect("a port event")
                .unwrap();
            assert_eq!(ev.event_type(), t);
        }
        // A completion channel as a Stream, with the CQ armed by hand.
        let mut channel = AsyncCompletionChannel::new(ctx.create_comp_channel().unwrap()).unwrap();
        let mut cq = ctx
            .create_cq(16, CqOptions::new().channel(channel.channel()))
            .unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let cap = mlx5_pair::cap(8, 1, 0);
        let a = mlx5_pair::create_qp(&pd, QpType::Rc, &cq, None, cap);
        let b = mlx5_pair::create_qp(&pd, QpType::Rc, &cq, None, cap);
        let g = mlx5_pair::gid(&ctx);
        mlx5_pair::connect(&a, b.qp_num(), g, 7);
        mlx5_pair::connect(&b, a.qp_num(), g, 7);
        let (mut a, mut b) = (a, b);
        let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
        cq.req_notify(false).unwrap();
        b.post_recv(&[RecvWr::new(7, &[mr.sge(64, 64).unwrap()])])
            .unwrap();
        a.post_send(&[SendWr::send(8, &[mr.sge(0, 8).unwrap()]).flags(SendFlags::SIGNALED)])
            .unwrap();
        let next = std::future::poll_fn(|cx| Pin::new(&mut channel).poll_next(cx));
        let ev = tokio::time::timeout(PATIENCE.0, next)
            .await
            .expect("a completion event")
            .expect("not ended")
            .unwrap();
        assert!(ev.is_for(&cq));
        ev.ack();
        let mut wc = [WorkCompletion::default(); 4];
        let mut n = 0;
        let deadline = Instant::now() + PATIENCE.0;
        while n < 2 {
            n += cq.poll(&mut wc[n..]);
            assert!(Instant::now() < deadline, "the two completions");
            tokio::task::yield_now().await;
        }
        drop((a, b));
        PATIENCE
            .destroy("the CQ after its event", cq, CompletionQueue::destroy)
            .unwrap();
    });
    mlx5_pair::assert_clean(&model);
}
