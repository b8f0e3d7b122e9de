//! The destroy protocol of CQs, QPs and SRQs on the fake kernel
//! (`uverbs::testing::rxe`), whose destroy reports the events *read*, as the
//! kernel does, and drops the unread ones:
//!
//! - a destroy that fails gives the object back, usable and accounted for;
//! - a QP dropped while its CQ is destroyed never leaves the destroy asleep;
//! - an event read while its object is being destroyed is acknowledged by
//!   the reader: an explicit destroy waits for that, the last drop does not
//!   (completion channel and async fd), and the object's entry goes once
//!   the reader acknowledged;
//! - an event the program read from the fd itself never makes
//!   `try_destroy` or the last drop wait;
//! - `try_destroy` never waits for events other threads hold;
//! - completion channels: events, acknowledgements, arming, `cq_context`.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc, Arc, Mutex,
    },
    thread,
    time::Duration,
};

use uverbs::testing::rxe::*;
use uverbs::{
    sys::Errno, AsyncElement, AsyncEventType as T, CompletionChannel, CompletionQueue, Context,
    CqOptions, ProtectionDomain, QpCap, QpInitAttr, QueuePair, RecvWr, SharedReceiveQueue, SrqAttr,
};

use uverbs_test_support::bounded::{DESTROY_WAITS, PATIENCE};

struct Rig {
    fake: Arc<FakeRxe>,
    ctx: Context,
    pd: ProtectionDomain,
    ch: CompletionChannel,
}

fn rig() -> Rig {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    Rig { fake, ctx, pd, ch }
}

impl Rig {
    fn cq(&self, context: u64) -> CompletionQueue {
        let opts = CqOptions::new().channel(&self.ch).context(context);
        self.ctx.create_cq(8, opts).unwrap()
    }

    fn qp(&self, cq: &CompletionQueue, srq: Option<&SharedReceiveQueue>) -> QueuePair {
        self.pd
            .create_qp(&QpInitAttr::rc(cq, cq).srq(srq).cap(QpCap::new(4, 4, 1, 1)))
            .unwrap()
    }

    fn srq(&self) -> SharedReceiveQueue {
        self.pd.create_srq(SrqAttr::new(8, 1)).unwrap()
    }

    fn uh(&self, kind: Kind, handle: u32) -> u64 {
        self.fake.user_handle(kind, handle)
    }
}

/// The next completion event on `ch`, which the test queued: bounded.
fn comp_event(ch: &CompletionChannel) -> uverbs::CqEvent {
    ch.get_event_timeout(Some(PATIENCE.0))
        .unwrap()
        .unwrap_or_else(|| {
            panic!(
                "the completion event the test queued: none in {:?}",
                PATIENCE.0
            )
        })
}

#[test]
fn a_cq_in_use_comes_back_usable_from_a_refused_destroy() {
    let r = rig();
    let cq = r.cq(7);
    let qp = r.qp(&cq, None);
    let err = PATIENCE
        .within("destroy() of a CQ with a QP, refused at once", move || {
            cq.destroy()
        })
        .unwrap_err();
    assert_eq!(err.errno(), Errno::EBUSY, "{err}");
    assert!(err.to_string().contains("child object"), "{err}");
    let mut cq = err.into_inner();
    // Still a working CQ: polled, armed, signalling its channel.
    let mut wc = [uverbs::WorkCompletion::default(); 4];
    assert_eq!(cq.poll(&mut wc), 0);
    cq.req_notify(false).unwrap();
    assert!(r.fake.push_comp_event(cq.handle()));
    let ev = comp_event(&r.ch);
    assert!(ev.is_for(&cq));
    assert_eq!(ev.cq_context(), 7);
    ev.ack();
    assert!(r.fake.destroyed(Kind::Cq).is_empty());
    qp.destroy().unwrap();
    PATIENCE
        .destroy(
            "the CQ after one completion event, acknowledged",
            cq,
            CompletionQueue::destroy,
        )
        .unwrap();
    assert_eq!(r.fake.destroyed(Kind::Cq).len(), 1);
}

#[test]
fn an_srq_in_use_comes_back_usable_from_a_refused_destroy() {
    let r = rig();
    let cq = r.cq(0);
    let srq = r.srq();
    let qp = r.qp(&cq, Some(&srq));
    let err = srq.destroy().unwrap_err();
    assert_eq!(err.errno(), Errno::EBUSY, "{err}");
    let mut srq = err.into_inner();
    let mr =
        r.pd.alloc_mr(4096, uverbs::AccessFlags::LOCAL_WRITE)
            .unwrap();
    srq.post_recv(&[RecvWr::new(1, &[mr.sge(0, 64).unwrap()])])
        .expect("the SRQ can still be refilled");
    let posted = r.fake.srq_ring(srq.handle()).unwrap().consume();
    assert!(posted.is_some(), "the WQE reached the ring");
    qp.destroy().unwrap();
    srq.destroy().unwrap();
    cq.destroy().unwrap();
}

/// The kernel refuses a QP destroy: the QP comes back with its accounting
/// intact (it still counts as its CQ's child, its events still reach it);
/// before, the refusal skipped the bookkeeping and a later CQ destroy
/// reported EBUSY while destroying it anyway.
#[test]
fn a_qp_the_kernel_refuses_to_destroy_stays_whole() {
    let r = rig();
    let cq = r.cq(0);
    let qp = r.qp(&cq, None);
    r.fake
        .behaviour
        .fail_destroy
        .store(libc::EBUSY, Ordering::Relaxed);
    let err = qp.destroy().unwrap_err();
    assert_eq!(err.errno(), Errno::EBUSY, "{err}");
    let qp = err.into_inner();
    assert!(r.fake.destroyed(Kind::Qp).is_empty());
    // Its async events still resolve to it.
    r.fake
        .push_event(T::QP_FATAL.0, r.uh(Kind::Qp, qp.handle()));
    let ev = r.ctx.try_get_async_event().unwrap().unwrap();
    assert!(ev.is_for_qp(&qp), "{ev:?}");
    ev.ack();
    // It still counts as the CQ's child: the CQ refuses, and is not lost.
    r.fake.behaviour.fail_destroy.store(0, Ordering::Relaxed);
    let cq = cq.destroy().unwrap_err().into_inner();
    assert!(r.fake.destroyed(Kind::Cq).is_empty());
    PATIENCE
        .destroy(
            "the QP after one async event, acknowledged",
            qp,
            QueuePair::destroy,
        )
        .unwrap();
    PATIENCE
        .destroy("the CQ", cq, CompletionQueue::destroy)
        .unwrap();
    assert_eq!(r.fake.destroyed(Kind::Cq).len(), 1);
}

/// Dropped instead, a QP whose destroy the kernel refused is leaked with
/// everything it uses (the kernel QP lives on and still completes to its
/// CQ): it keeps counting as its CQ's child, so the CQ's destroy is refused
/// (and the CQ given back) instead of giving back memory the device writes.
#[test]
fn a_dropped_qp_the_kernel_refused_to_destroy_keeps_its_cq() {
    let r = rig();
    let cq = r.cq(0);
    let qp = r.qp(&cq, None);
    r.fake
        .behaviour
        .fail_destroy
        .store(libc::EBUSY, Ordering::Relaxed);
    drop(qp);
    r.fake.behaviour.fail_destroy.store(0, Ordering::Relaxed);
    let err = cq.destroy().unwrap_err();
    assert_eq!(err.errno(), Errno::EBUSY, "{err}");
    assert!(err.to_string().contains("child object"), "{err}");
    assert!(r.fake.destroyed(Kind::Cq).is_empty());
    assert!(r.fake.destroyed(Kind::Qp).is_empty());
}

/// Defect 3: one thread drops a QP while another destroys its CQ. The CQ's
/// child count must not reach zero before the QP released its reference,
/// or the destroy sleeps with nothing left to wake it.
#[test]
fn dropping_a_qp_while_its_cq_is_destroyed_never_hangs() {
    let r = rig();
    for _ in 0..2000 {
        let cq = r.cq(0);
        let qp = r.qp(&cq, None);
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let dropper = thread::spawn(move || {
            go_rx.recv().unwrap();
            drop(qp);
        });
        go_tx.send(()).unwrap();
        let refused = PATIENCE.within("the CQ destroy (asleep?)", move || {
            let mut cq = cq;
            let mut refused = 0u32;
            loop {
                match cq.destroy() {
                    Ok(()) => return refused,
                    Err(e) => {
                        assert_eq!(e.errno(), Errno::EBUSY, "{e}");
                        refused += 1;
                        cq = e.into_inner();
                        thread::yield_now();
                    }
                }
            }
        });
        PATIENCE.join("the QP's drop", dropper);
        let _ = refused;
    }
    assert_eq!(r.fake.destroyed(Kind::Cq).len(), 2000);
}

/// Holds the reader of one record between its read and its use, so a
/// destroy can run in that gap; `release` lets it go on.
struct Gate {
    armed: Arc<AtomicBool>,
    read: mpsc::Receiver<()>,
    go: mpsc::Sender<()>,
}

impl Gate {
    fn install(fake: &FakeRxe) -> Gate {
        let armed = Arc::new(AtomicBool::new(false));
        let (read_tx, read) = mpsc::channel();
        let (go, go_rx) = mpsc::channel::<()>();
        let (a, read_tx, go_rx) = (armed.clone(), Mutex::new(read_tx), Mutex::new(go_rx));
        fake.kernel.on_after_read(move |_, _| {
            if a.swap(false, Ordering::SeqCst) {
                read_tx.lock().unwrap().send(()).unwrap();
                go_rx.lock().unwrap().recv().unwrap();
            }
        });
        Gate { armed, read, go }
    }

    fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    fn wait_read(&self) {
        PATIENCE.recv("the reader's read of the queued event", &self.read);
    }

    fn release(&self) {
        self.go.send(()).unwrap();
    }
}

/// An object (CQ, QP) destroyed on another thread while a reader holds the
/// event it read for it: explicitly (`destroy`, which the kernel tells of
/// that event, so it waits for it) or by its last drop (which must not
/// wait).
struct Destroyer {
    explicit: bool,
    done: mpsc::Receiver<bool>,
    thread: thread::JoinHandle<()>,
}

impl Destroyer {
    /// Starts the destroy (`destroy`, or the drop), and checks that an
    /// explicit one has not returned 200 ms later and that a drop has.
    fn start<O: Send + 'static>(
        object: O,
        explicit: bool,
        destroy: impl FnOnce(O) -> bool + Send + 'static,
    ) -> Destroyer {
        let (done_tx, done) = mpsc::channel();
        let thread = thread::spawn(move || {
            let ok = if explicit {
                destroy(object)
            } else {
                drop(object);
                true
            };
            done_tx.send(ok).unwrap();
        });
        if explicit {
            assert!(
                done.recv_timeout(Duration::from_millis(200)).is_err(),
                "the destroy returned before the event read meanwhile was acknowledged"
            );
        } else {
            assert!(
                PATIENCE.recv("the last drop (it must not wait for the reader)", &done),
                "the last drop does not wait for the reader"
            );
        }
        Destroyer {
            explicit,
            done,
            thread,
        }
    }

    /// Once the reader acknowledged the event: an explicit destroy returns,
    /// and succeeds.
    fn finish(self) {
        if self.explicit {
            assert!(PATIENCE.recv(
                format_args!(
                    "the destroy, once the reader acknowledged the event it read ({DESTROY_WAITS})"
                ),
                &self.done
            ));
        }
        PATIENCE.join("the destroyer", self.thread);
    }
}

/// A completion event read while its CQ is destroyed: an explicit destroy
/// (which the kernel tells of one event read) waits for it, the last drop
/// does not; the reader, finding the CQ destroyed, acknowledges it and gets
/// no event; the explicit destroy then returns, and the CQ's entry is gone.
#[test]
fn a_completion_event_read_during_the_destroy_is_acknowledged_by_the_reader() {
    for explicit in [true, false] {
        let r = rig();
        let entries = r.ctx.event_map_len();
        let gate = Gate::install(&r.fake);
        let cq = r.cq(0);
        cq.req_notify(false).unwrap();
        assert!(r.fake.push_comp_event(cq.handle()));
        gate.arm();
        let ch = r.ch.clone();
        let reader = thread::spawn(move || ch.try_get_event().map(|e| e.is_some()));
        gate.wait_read();
        // The kernel reported one event read: an explicit destroy waits for it.
        let destroyer = Destroyer::start(cq, explicit, |cq| cq.destroy().is_ok());
        if !explicit {
            assert_eq!(r.ctx.event_map_len(), entries + 1, "the entry is parked");
        }
        gate.release();
        assert!(
            !PATIENCE.join("the reader", reader).unwrap(),
            "no event for a destroyed CQ"
        );
        destroyer.finish();
        assert_eq!(r.fake.destroyed(Kind::Cq).len(), 1);
        assert_eq!(r.ctx.event_map_len(), entries, "the entry is gone");
    }
}

/// An event the program read from the channel's fd or the async fd itself
/// (through `AsFd`), which the kernel counts as reported and nobody can
/// acknowledge: `try_destroy` and the last drop return at once, for a CQ
/// and a QP; an explicit `destroy` would wait for it forever.
#[test]
fn an_event_read_from_the_fd_directly_never_blocks_try_destroy_or_drop() {
    use std::os::fd::AsFd;
    for try_destroy in [true, false] {
        let r = rig();
        let kernel = r.fake.dyn_kernel();
        let cq = r.cq(0);
        cq.req_notify(false).unwrap();
        assert!(r.fake.push_comp_event(cq.handle()));
        let mut record = [0u8; 16];
        assert_eq!(kernel.read(r.ch.as_fd(), &mut record[..8]), Ok(8));
        let qp = r.qp(&r.cq(0), None);
        r.fake
            .push_event(T::QP_FATAL.0, r.uh(Kind::Qp, qp.handle()));
        assert_eq!(kernel.read(r.ctx.async_fd(), &mut record), Ok(16));
        // Both move to the destroying thread, so that a destroy asleep there
        // fails the test instead of hanging the drops of its unwinding.
        PATIENCE.within(
            "destroying objects with events read behind the library (asleep?)",
            move || {
                if try_destroy {
                    qp.try_destroy().unwrap();
                    cq.try_destroy().unwrap();
                } else {
                    drop(qp);
                    drop(cq);
                }
            },
        );
        assert_eq!(r.fake.destroyed(Kind::Cq).len(), 2);
        assert_eq!(r.fake.destroyed(Kind::Qp).len(), 1);
    }
}

/// The same for an async event of a QP: the reader gets it as `Gone`.
#[test]
fn an_async_event_read_during_the_destroy_is_acknowledged_by_the_reader() {
    for explicit in [true, false] {
        let r = rig();
        let entries = r.ctx.event_map_len();
        let gate = Gate::install(&r.fake);
        let cq = r.cq(0);
        let qp = r.qp(&cq, None);
        let uh = r.uh(Kind::Qp, qp.handle());
        r.fake.push_event(T::QP_FATAL.0, uh);
        gate.arm();
        let ctx = r.ctx.clone();
        let reader =
            thread::spawn(move || ctx.try_get_async_event().map(|e| e.map(|e| *e.element())));
        gate.wait_read();
        let destroyer = Destroyer::start(qp, explicit, |qp| qp.destroy().is_ok());
        gate.release();
        let element = PATIENCE
            .join("the reader", reader)
            .unwrap()
            .expect("the event is returned");
        assert_eq!(element, AsyncElement::Gone(uh));
        destroyer.finish();
        PATIENCE
            .destroy("the QP's CQ", cq, CompletionQueue::destroy)
            .unwrap();
        assert_eq!(r.ctx.event_map_len(), entries, "the entries are gone");
    }
}

/// `try_destroy` never waits for events another thread holds: `EAGAIN`
/// and the object back; once acknowledged, it destroys.
#[test]
fn try_destroy_refuses_instead_of_waiting() {
    let r = rig();
    let cq = r.cq(3);
    cq.req_notify(false).unwrap();
    assert!(r.fake.push_comp_event(cq.handle()));
    let (got_tx, got_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let ch = r.ch.clone();
    let holder = thread::spawn(move || {
        let ev = comp_event(&ch);
        got_tx.send(ev.cq_context()).unwrap();
        go_rx.recv().unwrap();
        drop(ev);
    });
    assert_eq!(PATIENCE.recv("the holder's event", &got_rx), 3);
    let err = cq.try_destroy().unwrap_err();
    assert_eq!(err.errno(), Errno::EAGAIN, "{err}");
    assert!(err.to_string().contains("other threads"), "{err}");
    assert!(r.fake.destroyed(Kind::Cq).is_empty());
    go_tx.send(()).unwrap();
    PATIENCE.join("the holder dropping its event", holder);
    err.into_inner().try_destroy().unwrap();
    assert_eq!(r.fake.destroyed(Kind::Cq).len(), 1);
}

/// Completion channels on the host: events arrive oldest first for the CQ
/// that fired, only after arming the kernel counts what was read, and a CQ
/// destroy waits for an event another thread holds and refuses (EBUSY) one
/// the calling thread holds.
#[test]
fn completion_events_are_counted_when_read_and_acknowledged_once() {
    let r = rig();
    let (a, b) = (r.cq(10), r.cq(20));
    a.req_notify(false).unwrap();
    b.req_notify(true).unwrap();
    assert_eq!(r.fake.arms(), 2);
    assert!(
        r.ch.try_get_event().unwrap().is_none(),
        "nothing queued yet"
    );
    for cq in [&a, &b, &a] {
        assert!(r.fake.push_comp_event(cq.handle()));
    }
    let first = r.ch.try_get_event().unwrap().unwrap();
    let second = r.ch.try_get_event().unwrap().unwrap();
    assert!(first.is_for(&a) && second.is_for(&b));
    assert_eq!((first.cq_context(), second.cq_context()), (10, 20));
    assert_eq!(first.cq_handle(), a.handle());
    // This thread holds an event of `a`: EBUSY, and `a` comes back.
    // (On this thread: the refusal is about the calling thread's events.)
    let a = a.destroy().unwrap_err().into_inner();
    // The third event stays unread: the destroy drops it and does not wait.
    first.ack();
    PATIENCE
        .destroy(
            "CQ a after one of its two events was read and acknowledged",
            a,
            CompletionQueue::destroy,
        )
        .unwrap();
    // Another thread holds `b`'s event: the destroy waits for it.
    second.ack();
    b.req_notify(false).unwrap();
    assert!(r.fake.push_comp_event(b.handle()));
    let (tx, rx) = mpsc::channel();
    let (got_tx, got_rx) = mpsc::channel();
    let ch = r.ch.clone();
    let holder = thread::spawn(move || {
        let held = comp_event(&ch);
        got_tx.send(held.cq_context()).unwrap();
        rx.recv().unwrap();
        drop(held);
    });
    assert_eq!(PATIENCE.recv("the holder's event", &got_rx), 20);
    let (done_tx, done_rx) = mpsc::channel();
    let destroyer = thread::spawn(move || done_tx.send(b.destroy().is_ok()).unwrap());
    assert!(done_rx.recv_timeout(Duration::from_millis(200)).is_err());
    tx.send(()).unwrap();
    PATIENCE.join("the holder dropping its event", holder);
    assert!(PATIENCE.recv(
        format_args!(
            "CQ b's destroy, once the holder dropped the second event read ({DESTROY_WAITS})"
        ),
        &done_rx
    ));
    PATIENCE.join("the destroyer", destroyer);
    assert_eq!(r.fake.destroyed(Kind::Cq).len(), 2);
}

/// `ack_cq_events` of events from two CQs takes each CQ's counts lock
/// once, and acknowledges exactly what was read (both destroys finish).
#[test]
fn a_batch_ack_locks_each_cq_once() {
    let r = rig();
    let (a, b) = (r.cq(1), r.cq(2));
    for h in [a.handle(), b.handle(), a.handle(), a.handle(), b.handle()] {
        assert!(r.fake.push_comp_event(h));
    }
    let events: Vec<_> = (0..5)
        .map(|_| r.ch.try_get_event().unwrap().unwrap())
        .collect();
    let contexts: Vec<u64> = events.iter().map(|e| e.cq_context()).collect();
    assert_eq!(
        contexts,
        [1, 2, 1, 1, 2],
        "oldest first, each with its CQ's context"
    );
    let before = (a.event_count_locks(), b.event_count_locks());
    uverbs::ack_cq_events(events);
    assert_eq!(
        (a.event_count_locks(), b.event_count_locks()),
        (before.0 + 1, before.1 + 1)
    );
    let acked = "after its events were acknowledged in one batch (ack_cq_events)";
    PATIENCE
        .destroy(format!("CQ a {acked}"), a, CompletionQueue::destroy)
        .unwrap();
    PATIENCE
        .destroy(format!("CQ b {acked}"), b, CompletionQueue::destroy)
        .unwrap();
}

/// A malformed record on the async fd (the 8 bytes of a completion event,
/// naming the CQ's user handle) is refused by the reader and counted by no
/// one: the kernel reads async records from the async fd only, so the CQ's
/// destroy has nothing to wait for. (Found by fuzz/async_event: the fake
/// once counted it as a completion event and the destroy hung.)
#[test]
fn a_malformed_record_on_the_async_fd_counts_for_no_object() {
    let r = rig();
    let cq = r.cq(0);
    let uh = r.uh(Kind::Cq, cq.handle());
    r.fake.kernel.push_read(Ok(uh.to_ne_bytes().to_vec()));
    let e = r.ctx.try_get_async_event().unwrap_err();
    assert_eq!(e.errno(), Errno::EBADMSG, "{e}");
    PATIENCE
        .destroy(
            "the CQ after a malformed record on the async fd",
            cq,
            CompletionQueue::destroy,
        )
        .unwrap();
}

/// A creation the kernel refuses gives back the event handle reserved for
/// it: the context's event map holds no more than before, and the next
/// object takes the freed slot (the same low half of the handle) under a
/// new handle.
#[test]
fn refused_creations_give_their_event_handles_back() {
    let r = rig();
    let cq = r.cq(1);
    let gone = r.cq(2);
    let freed = r.uh(Kind::Cq, gone.handle());
    gone.destroy().unwrap();
    let before = r.ctx.event_map_len();
    r.fake.behaviour.removed.store(true, Ordering::Relaxed);
    assert!(r.ctx.create_cq(8, CqOptions::new()).is_err());
    assert!(r
        .pd
        .create_qp(&QpInitAttr::rc(&cq, &cq).cap(QpCap::new(4, 4, 1, 1)))
        .is_err());
    assert!(r.pd.create_srq(SrqAttr::new(8, 1)).is_err());
    r.fake.behaviour.removed.store(false, Ordering::Relaxed);
    assert_eq!(
        r.ctx.event_map_len(),
        before,
        "no handle kept by a failed create"
    );
    let next = r.cq(3);
    let h = r.uh(Kind::Cq, next.handle());
    assert_eq!(h as u32, freed as u32, "the freed slot is taken again");
    assert_ne!(h, freed, "under a new handle");
}

/// The same with `get_event_deferred` (`ibv_get_cq_event`'s form, which
/// counts the event without a reference to the CQ): the reader finds the
/// CQ destroyed, acknowledges its event and returns the next one, of a live
/// CQ; the explicit destroy waits for that acknowledgement, the last drop
/// does not; the destroyed CQ's entry goes.
#[test]
fn a_deferred_completion_event_read_during_the_destroy_is_acknowledged_by_the_reader() {
    for explicit in [true, false] {
        let r = rig();
        let gate = Gate::install(&r.fake);
        let live = r.cq(7);
        let entries = r.ctx.event_map_len();
        let cq = r.cq(0);
        for c in [&cq, &live] {
            c.req_notify(false).unwrap();
            assert!(r.fake.push_comp_event(c.handle()));
        }
        gate.arm();
        let ch = r.ch.clone();
        let reader = thread::spawn(move || ch.get_event_deferred().unwrap());
        gate.wait_read();
        let destroyer = Destroyer::start(cq, explicit, |cq| cq.destroy().is_ok());
        gate.release();
        let ev = PATIENCE.join("the reader", reader);
        assert!(
            ev.is_for(&live),
            "the live CQ's event, not the destroyed one's"
        );
        assert_eq!(ev.cq_context(), 7);
        live.ack_events(1).unwrap();
        destroyer.finish();
        assert_eq!(r.fake.destroyed(Kind::Cq).len(), 1);
        assert_eq!(
            r.ctx.event_map_len(),
            entries,
            "the destroyed CQ's entry is gone"
        );
    }
}
