//! Acknowledgement by count and libibverbs' destroy order, on the fake
//! kernel (`uverbs::testing::rxe`), whose destroy reports the events read
//! and drops the unread ones, as the kernel does:
//!
//! - an event turned into a count (`defer_ack`) is acknowledged by number
//!   from any thread (`ack_events`, `ack_async_events`), as
//!   `ibv_ack_cq_events(cq, n)` does; `ibv_rc_pingpong -e`'s loop, which
//!   acknowledges everything at exit, works in that shape;
//! - a destroy refuses (`EBUSY`) counts nobody could acknowledge, and gives
//!   the object back;
//! - a destroy sends its command first and then waits for the events other
//!   threads hold (libibverbs' order), and while its command is in the
//!   kernel, events of every other object keep being delivered.

use std::{sync::mpsc, thread, time::Duration};

use uverbs::testing::rxe::*;
use uverbs::{
    sys::Errno, AsyncEvent, AsyncEventType as T, CompletionChannel, CompletionQueue, Context,
    CqEvent, CqOptions, ErrorKind, ProtectionDomain, QpCap, QpInitAttr, QueuePair,
    SharedReceiveQueue, SrqAttr,
};

use bounded::PATIENCE;
use uverbs_test_support::bounded;

struct Rig {
    fake: std::sync::Arc<FakeRxe>,
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

    fn qp(&self, cq: &CompletionQueue) -> QueuePair {
        self.pd
            .create_qp(&QpInitAttr::rc(cq, cq).cap(QpCap::new(4, 4, 1, 1)))
            .unwrap()
    }

    fn srq(&self) -> SharedReceiveQueue {
        self.pd.create_srq(SrqAttr::new(8, 1)).unwrap()
    }

    /// Queues a completion event for `cq` (armed first, as the kernel
    /// queues one only for an armed CQ).
    fn fire(&self, cq: &CompletionQueue) {
        cq.req_notify(false).unwrap();
        assert!(self.fake.push_comp_event(cq.handle()));
    }

    /// The next completion event, which the test queued: bounded.
    fn event(&self) -> CqEvent {
        comp_event(&self.ch)
    }

    /// The next async event, which the test queued: bounded.
    fn async_event(&self) -> AsyncEvent {
        self.ctx
            .get_async_event_timeout(Some(PATIENCE.0))
            .unwrap()
            .unwrap_or_else(|| panic!("the async event the test queued: none in {:?}", PATIENCE.0))
    }
}

/// The next completion event on `ch`, which the test queued: bounded.
fn comp_event(ch: &CompletionChannel) -> CqEvent {
    ch.get_event_timeout(Some(PATIENCE.0))
        .unwrap()
        .unwrap_or_else(|| {
            panic!(
                "the completion event the test queued: none in {:?}",
                PATIENCE.0
            )
        })
}

/// `ibv_rc_pingpong -e`'s shape: every event is checked, counted and left
/// unacknowledged; after the loop one `ibv_ack_cq_events(cq, n)` (here from
/// another thread) acknowledges them all, and the destroy then succeeds.
#[test]
fn events_counted_in_the_loop_are_acknowledged_at_exit_like_ibv_rc_pingpong_e() {
    let r = rig();
    let cq = r.cq(42);
    let mut num_cq_events = 0u32;
    for _ in 0..5 {
        r.fire(&cq);
        let ev = r.event();
        assert!(ev.is_for(&cq));
        assert_eq!(ev.cq_context(), 42);
        ev.defer_ack();
        num_cq_events += 1;
    }
    assert_eq!(cq.deferred_events(), 5);
    // Asking for more than was deferred acknowledges nothing.
    let err = cq.ack_events(6).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert_eq!(err.errno(), Errno::EINVAL);
    assert!(err.to_string().contains("5 are deferred"), "{err}");
    assert_eq!(cq.deferred_events(), 5);
    // A destroy now could only wait forever: EBUSY, the CQ comes back.
    let err = PATIENCE
        .within(
            "destroy() of a CQ with 5 deferred events, refused at once",
            || cq.destroy(),
        )
        .unwrap_err();
    assert_eq!(err.errno(), Errno::EBUSY, "{err}");
    assert!(err.to_string().contains("ack_events"), "{err}");
    let cq = err.into_inner();
    assert!(r.fake.destroyed(Kind::Cq).is_empty());
    // Acknowledged by count from another thread.
    thread::scope(|s| {
        s.spawn(|| cq.ack_events(num_cq_events).unwrap());
    });
    assert_eq!(cq.deferred_events(), 0);
    let entries = r.ctx.event_map_len();
    PATIENCE
        .destroy(
            "the CQ after its 5 deferred events were acknowledged by count",
            cq,
            CompletionQueue::destroy,
        )
        .unwrap();
    assert_eq!(r.fake.destroyed(Kind::Cq).len(), 1);
    assert_eq!(r.ctx.event_map_len(), entries - 1, "the CQ's entry is gone");
}

/// `get_event_deferred` is `get_event` then `defer_ack` in one step: each
/// event names its CQ (handle, context, `is_for`) and is counted by that
/// CQ, unacknowledged, for `ack_events`; the counts gate the destroy as
/// those of `defer_ack` do.
#[test]
fn get_event_deferred_counts_each_event_by_its_cq() {
    let r = rig();
    let (a, b) = (r.cq(7), r.cq(8));
    let get = || {
        let ch = r.ch.clone();
        PATIENCE.within(
            "get_event_deferred of an event the test queued",
            move || ch.get_event_deferred().unwrap(),
        )
    };
    let locks = (a.event_count_locks(), b.event_count_locks());
    for cq in [&a, &b, &a] {
        r.fire(cq);
        let ev = get();
        assert!(ev.is_for(cq));
        let other = if std::ptr::eq(cq, &a) { &b } else { &a };
        assert!(!ev.is_for(other));
        assert_eq!(ev.cq_handle(), cq.handle());
        assert_eq!(ev.cq_context(), cq.context());
    }
    assert_eq!(
        (a.event_count_locks(), b.event_count_locks()),
        locks,
        "counting a read event as deferred takes no lock of the counts"
    );
    assert_eq!((a.deferred_events(), b.deferred_events()), (2, 1));
    // Mixed with the value form: the same counts.
    r.fire(&b);
    r.event().defer_ack();
    assert_eq!(b.deferred_events(), 2);
    let err = a.destroy().unwrap_err();
    assert_eq!(err.errno(), Errno::EBUSY, "{err}");
    let a = err.into_inner();
    a.ack_events(2).unwrap();
    b.ack_events(2).unwrap();
    PATIENCE
        .destroy(
            "a CQ whose deferred events were acknowledged",
            a,
            CompletionQueue::destroy,
        )
        .unwrap();
    PATIENCE
        .destroy(
            "a CQ whose deferred events were acknowledged",
            b,
            CompletionQueue::destroy,
        )
        .unwrap();
    assert_eq!(r.fake.destroyed(Kind::Cq).len(), 2);
}

/// Async events of a QP, a CQ and an SRQ deferred, and acknowledged by
/// count from a worker thread; a port event has nothing to count.
#[test]
fn deferred_async_events_are_acknowledged_by_count_from_any_thread() {
    let r = rig();
    let cq = r.cq(0);
    let qp = r.qp(&cq);
    let srq = r.srq();
    let uh = |kind, handle| r.fake.user_handle(kind, handle);
    r.fake.push_event(T::QP_FATAL.0, uh(Kind::Qp, qp.handle()));
    r.fake.push_event(T::COMM_EST.0, uh(Kind::Qp, qp.handle()));
    r.fake.push_event(T::CQ_ERR.0, uh(Kind::Cq, cq.handle()));
    r.fake
        .push_event(T::SRQ_LIMIT_REACHED.0, uh(Kind::Srq, srq.handle()));
    r.fake.push_event(T::PORT_ACTIVE.0, 1);
    for _ in 0..5 {
        r.async_event().defer_ack();
    }
    assert_eq!(qp.deferred_async_events(), 2);
    assert_eq!(cq.deferred_async_events(), 1);
    assert_eq!(srq.deferred_async_events(), 1);
    let qp = PATIENCE
        .within(
            "destroy() of a QP with 2 deferred events, refused at once",
            move || qp.destroy(),
        )
        .unwrap_err()
        .into_inner();
    thread::scope(|s| {
        s.spawn(|| {
            qp.ack_async_events(2).unwrap();
            cq.ack_async_events(1).unwrap();
            srq.ack_async_events(1).unwrap();
        });
    });
    assert_eq!(
        qp.ack_async_events(1).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let acked = "after its deferred async events were acknowledged by count";
    PATIENCE
        .destroy(format!("the QP {acked}"), qp, QueuePair::destroy)
        .unwrap();
    PATIENCE
        .destroy(format!("the SRQ {acked}"), srq, SharedReceiveQueue::destroy)
        .unwrap();
    PATIENCE
        .destroy(format!("the CQ {acked}"), cq, CompletionQueue::destroy)
        .unwrap();
    assert_eq!(r.fake.destroyed(Kind::Qp).len(), 1);
}

/// Dropping an object with deferred counts (nobody can acknowledge them
/// any more) neither hangs nor leaves its entry behind.
#[test]
fn dropping_an_object_gives_up_its_deferred_counts() {
    let r = rig();
    let entries = r.ctx.event_map_len();
    let cq = r.cq(0);
    r.fire(&cq);
    r.event().defer_ack();
    drop(cq);
    assert_eq!(r.fake.destroyed(Kind::Cq).len(), 1);
    assert_eq!(r.ctx.event_map_len(), entries);
}

/// libibverbs' order: with an event held by another thread, the destroy
/// command is sent at once and the destroy then waits for the
/// acknowledgement (it used to wait first and send the command after).
#[test]
fn a_destroy_sends_its_command_before_waiting_for_events_other_threads_hold() {
    let r = rig();
    let cq = r.cq(9);
    r.fire(&cq);
    let (got_tx, got_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let ch = r.ch.clone();
    let holder = thread::spawn(move || {
        let ev = comp_event(&ch);
        got_tx.send(ev.cq_context()).unwrap();
        go_rx.recv().unwrap();
        drop(ev);
    });
    assert_eq!(PATIENCE.recv("the holder's event", &got_rx), 9);
    let handle = cq.handle();
    let (done_tx, done_rx) = mpsc::channel();
    let destroyer = thread::spawn(move || done_tx.send(cq.destroy().is_ok()).unwrap());
    PATIENCE.until(
        "the destroy command was not sent while another thread held an event",
        || r.fake.destroyed(Kind::Cq) == [handle],
    );
    assert!(
        done_rx.recv_timeout(Duration::from_millis(100)).is_err(),
        "the destroy returned before the event it was told of was acknowledged"
    );
    go_tx.send(()).unwrap();
    PATIENCE.join("the holder dropping its event", holder);
    assert!(PATIENCE.recv(
        format_args!(
            "the destroy once the holder dropped the one event it read ({})",
            bounded::DESTROY_WAITS
        ),
        &done_rx
    ));
    PATIENCE.join("the destroyer", destroyer);
}

/// No context-wide pause: while a CQ's and then a QP's destroy command is
/// held in the kernel, completion events of another CQ and async events
/// of another QP are still delivered (they used to wait for the lock the
/// destroy held across its command).
#[test]
fn events_of_other_objects_flow_while_a_destroy_is_in_the_kernel() {
    let r = rig();
    let busy_cq = r.cq(1);
    let busy_qp = r.qp(&busy_cq);
    for victim_is_qp in [false, true] {
        let victim_cq = r.cq(2);
        let victim_qp = victim_is_qp.then(|| r.qp(&victim_cq));
        r.fake.behaviour.destroy_pause.hold();
        let destroyer = thread::spawn(move || match victim_qp {
            Some(qp) => {
                qp.destroy().unwrap();
                Some(victim_cq)
            }
            None => {
                victim_cq.destroy().unwrap();
                None
            }
        });
        assert!(
            r.fake
                .behaviour
                .destroy_pause
                .wait_for_waiters(1, PATIENCE.0),
            "the destroy reached the kernel"
        );
        r.fire(&busy_cq);
        let uh = r.fake.user_handle(Kind::Qp, busy_qp.handle());
        r.fake.push_event(T::COMM_EST.0, uh);
        // Read on another thread: a reader stuck behind the destroy fails
        // the test instead of hanging it.
        let (ch, ctx) = (r.ch.clone(), r.ctx.clone());
        let (cq_handle, qp_handle) = (busy_cq.handle(), busy_qp.qp_num());
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let comp = ch.get_event().map(|e| e.cq_handle() == cq_handle);
            let asy = ctx
                .get_async_event()
                .map(|e| *e.element() == uverbs::AsyncElement::Qp(qp_handle));
            let _ = tx.send((comp, asy));
        });
        let got = rx.recv_timeout(Duration::from_secs(5));
        r.fake.behaviour.destroy_pause.release();
        let (comp, asy) = got.expect("events of other objects waited for a destroy in the kernel");
        assert!(comp.unwrap(), "the completion event is the busy CQ's");
        assert!(asy.unwrap(), "the async event is the busy QP's");
        let what = format!(
            "the victim {}'s destroy, released from the kernel",
            if victim_is_qp { "QP" } else { "CQ" }
        );
        if let Some(cq) = PATIENCE.join(what, destroyer) {
            PATIENCE
                .destroy("the victim QP's CQ", cq, CompletionQueue::destroy)
                .unwrap();
        }
    }
    PATIENCE
        .destroy(
            "the busy QP after one async event",
            busy_qp,
            QueuePair::destroy,
        )
        .unwrap();
    PATIENCE
        .destroy(
            "the busy CQ after two completion events",
            busy_cq,
            CompletionQueue::destroy,
        )
        .unwrap();
}
