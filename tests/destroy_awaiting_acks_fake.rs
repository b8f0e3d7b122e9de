//! libibverbs' destroy in uverbs (`destroy_awaiting_acks`, `EventAcks`) on
//! the fake kernel (`uverbs::testing::rxe`), whose destroy reports the
//! events read: the command first, then the wait for the deferred counts
//! that another thread acknowledges meanwhile, as `ibv_destroy_cq` waits
//! for `ibv_ack_cq_events` (libibverbs/cmd_cq.c `ibv_cmd_destroy_cq`).

use std::{sync::mpsc, thread, time::Duration};

use uverbs::testing::rxe::{fake_rxe, Kind, DEV};
use uverbs::{
    sys::Errno, AsyncEventType, CompletionQueue, Context, CqOptions, ErrorKind, QpCap, QpInitAttr,
    SrqAttr,
};
use uverbs_test_support::bounded;

/// Long enough for a destroy that is not waiting to have returned.
const SETTLE: Duration = Duration::from_millis(100);
/// The bound on what must happen (the host tests' [`bounded::PATIENCE`]).
const PATIENCE: Duration = bounded::PATIENCE.0;

/// Runs `f` on a thread of its own; its result comes on the receiver.
fn spawn<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> mpsc::Receiver<R> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx
}

#[test]
fn a_cq_destroy_sends_its_command_then_waits_for_deferred_counts() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let opts = CqOptions::new().channel(&ch);
    let cq = ctx.create_cq(8, opts).unwrap();
    for _ in 0..2 {
        cq.req_notify(false).unwrap();
        assert!(fake.push_comp_event(cq.handle()));
        let ev = ch.get_event_timeout(Some(PATIENCE)).unwrap().unwrap();
        ev.defer_ack();
    }
    let acks = cq.event_acks();
    let done = spawn(move || cq.destroy_awaiting_acks().map_err(|e| e.errno()));
    bounded::PATIENCE.until("the destroy command", || {
        fake.destroyed(Kind::Cq).len() == 1
    });
    assert!(
        done.recv_timeout(SETTLE).is_err(),
        "returned with 2 events deferred"
    );
    acks.ack_events(1).unwrap();
    assert!(
        done.recv_timeout(SETTLE).is_err(),
        "returned with 1 event deferred"
    );
    acks.clone().ack_events(1).unwrap();
    assert_eq!(done.recv_timeout(PATIENCE), Ok(Ok(())));
    let err = acks.ack_events(1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

#[test]
fn a_qp_destroy_waits_for_its_deferred_async_event() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    let qp = pd
        .create_qp(&QpInitAttr::rc(&cq, &cq).cap(QpCap::new(4, 4, 1, 1)))
        .unwrap();
    // While the QP uses it, the CQ's destroy is refused before its
    // command and the CQ comes back.
    let cq = cq.destroy_awaiting_acks().unwrap_err();
    assert_eq!(cq.error().errno(), Errno::EBUSY);
    let cq: CompletionQueue = cq.into_inner();
    assert!(fake.destroyed(Kind::Cq).is_empty());
    let uh = fake.user_handle(Kind::Qp, qp.handle());
    fake.push_event(AsyncEventType::QP_FATAL.0, uh);
    ctx.get_async_event_timeout(Some(PATIENCE))
        .unwrap()
        .unwrap()
        .defer_ack();
    let acks = qp.event_acks();
    let done = spawn(move || qp.destroy_awaiting_acks().map_err(|e| e.errno()));
    bounded::PATIENCE.until("the destroy command", || {
        fake.destroyed(Kind::Qp).len() == 1
    });
    assert!(
        done.recv_timeout(SETTLE).is_err(),
        "returned with an event deferred"
    );
    assert_eq!(
        acks.ack_events(1).unwrap_err().kind(),
        ErrorKind::InvalidArgument,
        "a QP has no completion events"
    );
    acks.ack_async_events(1).unwrap();
    assert_eq!(done.recv_timeout(PATIENCE), Ok(Ok(())));
    cq.destroy_awaiting_acks().map_err(|e| e.errno()).unwrap();
}

#[test]
fn an_srq_destroy_waits_for_its_deferred_async_event() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let srq = pd.create_srq(SrqAttr::new(8, 1)).unwrap();
    let uh = fake.user_handle(Kind::Srq, srq.handle());
    fake.push_event(AsyncEventType::SRQ_LIMIT_REACHED.0, uh);
    ctx.get_async_event_timeout(Some(PATIENCE))
        .unwrap()
        .unwrap()
        .defer_ack();
    let acks = srq.event_acks();
    let done = spawn(move || srq.destroy_awaiting_acks().map_err(|e| e.errno()));
    bounded::PATIENCE.until("the destroy command", || {
        fake.destroyed(Kind::Srq).len() == 1
    });
    assert!(
        done.recv_timeout(SETTLE).is_err(),
        "returned with an event deferred"
    );
    acks.ack_async_events(1).unwrap();
    assert_eq!(done.recv_timeout(PATIENCE), Ok(Ok(())));
}

/// A destroy refused before its command (a QP uses the CQ) keeps the
/// deferred counts: they are acknowledged through the same `EventAcks`
/// while the CQ is back with its owner, and the next destroy waits for
/// nothing.
#[test]
fn a_refused_destroy_keeps_the_counts_acknowledgeable() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let opts = CqOptions::new().channel(&ch);
    let cq = ctx.create_cq(8, opts).unwrap();
    let qp = pd
        .create_qp(&QpInitAttr::ud(&cq, &cq).cap(QpCap::new(4, 4, 1, 1)))
        .unwrap();
    cq.req_notify(false).unwrap();
    assert!(fake.push_comp_event(cq.handle()));
    ch.get_event_timeout(Some(PATIENCE))
        .unwrap()
        .unwrap()
        .defer_ack();
    let acks = cq.event_acks();
    let cq: CompletionQueue = cq.destroy_awaiting_acks().unwrap_err().into_inner();
    assert!(fake.destroyed(Kind::Cq).is_empty());
    assert_eq!(cq.deferred_events(), 1);
    acks.ack_events(1).unwrap();
    assert_eq!(cq.deferred_events(), 0);
    qp.destroy().map_err(|e| e.errno()).unwrap();
    cq.destroy_awaiting_acks().map_err(|e| e.errno()).unwrap();
    assert_eq!(fake.destroyed(Kind::Cq).len(), 1);
}
