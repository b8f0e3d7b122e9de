//! Async events through the fake kernel (`uverbs::testing::rxe`): every
//! event type decoded from the exact 16-byte record the kernel's
//! `ib_uverbs_async_event_desc` read returns, including the ones rxe cannot
//! raise (path migration, LID/P_Key/SM changes, client reregister, SRQ and
//! WQ errors, types this crate does not know), the accounting destroy relies
//! on, and the disassociate path as mlx5 produces it after a device removal:
//! a DEVICE_FATAL event, then EIO from every command.

use std::{
    sync::{atomic::Ordering, mpsc},
    thread,
    time::{Duration, Instant},
};

use uverbs::testing::rxe::*;
use uverbs::{
    abi, sys::Errno, AsyncElement, AsyncEventType as T, CompletionQueue, Context, CqOptions,
    ErrorKind, EventAffiliation, EventSeverity, ProtectionDomain, QpCap, QpInitAttr, QueuePair,
    SharedReceiveQueue, SrqAttr, SrqOptions,
};
use zerocopy::{FromZeros, IntoBytes};

use uverbs_test_support::bounded::PATIENCE;

/// A blocking `get_async_event` on `ctx`, bounded (on a thread of its
/// own: the event is acknowledged there); the event's type and port, or
/// the error's kind.
fn blocking_get(what: &str, ctx: &Context) -> Result<(T, Option<u8>, bool), ErrorKind> {
    let ctx = ctx.clone();
    PATIENCE.within(format!("a blocking get_async_event: {what}"), move || {
        ctx.get_async_event()
            .map(|ev| {
                let device = matches!(ev.element(), AsyncElement::Device);
                (ev.event_type(), ev.port(), device)
            })
            .map_err(|e| e.kind())
    })
}

/// Destroys `qp`, `srq` and `cq` (in that order) after events of theirs
/// were read and acknowledged: bounded.
fn destroy_three(after: &str, qp: QueuePair, srq: SharedReceiveQueue, cq: CompletionQueue) {
    PATIENCE
        .destroy(format!("the QP {after}"), qp, QueuePair::destroy)
        .unwrap();
    PATIENCE
        .destroy(format!("the SRQ {after}"), srq, SharedReceiveQueue::destroy)
        .unwrap();
    PATIENCE
        .destroy(format!("the CQ {after}"), cq, CompletionQueue::destroy)
        .unwrap();
}

struct Objs {
    fake: std::sync::Arc<FakeRxe>,
    ctx: Context,
    pd: ProtectionDomain,
    cq: CompletionQueue,
    qp: QueuePair,
    srq: SharedReceiveQueue,
}

fn cap() -> QpCap {
    QpCap::new(8, 8, 2, 2).max_inline_data(64)
}

/// The contexts the program gives its objects (`cq_context`,
/// `qp_context`, `srq_context`).
const CQ_CONTEXT: u64 = 0xc0;
const QP_CONTEXT: u64 = 0x9b;
const SRQ_CONTEXT: u64 = 0x5e;

fn objects() -> Objs {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx
        .create_cq(4, CqOptions::new().context(CQ_CONTEXT))
        .unwrap();
    let srq = pd
        .create_srq_with(SrqAttr::new(8, 1), SrqOptions::new().context(SRQ_CONTEXT))
        .unwrap();
    let qp = pd
        .create_qp(&QpInitAttr::rc(&cq, &cq).context(QP_CONTEXT).cap(cap()))
        .unwrap();
    Objs {
        fake,
        ctx,
        pd,
        cq,
        qp,
        srq,
    }
}

impl Objs {
    fn uh(&self, kind: Kind, handle: u32) -> u64 {
        self.fake.user_handle(kind, handle)
    }
}

#[test]
fn the_record_is_sixteen_bytes_element_then_type() {
    let mut d = abi::IbUverbsAsyncEventDesc::new_zeroed();
    d.element = 0x0102_0304_0506_0708;
    d.event_type = 10;
    let b = d.as_bytes();
    assert_eq!(b.len(), 16);
    assert_eq!(&b[..8], &0x0102_0304_0506_0708u64.to_ne_bytes());
    assert_eq!(&b[8..12], &10u32.to_ne_bytes());
    assert_eq!(&b[12..], &[0; 4]);
}

/// The informational events of the guides' table; the rest are errors.
const INFORMATIONAL: [&str; 11] = [
    "COMM_EST",
    "SQ_DRAINED",
    "PATH_MIG",
    "QP_LAST_WQE_REACHED",
    "SRQ_LIMIT_REACHED",
    "PORT_ACTIVE",
    "LID_CHANGE",
    "PKEY_CHANGE",
    "SM_CHANGE",
    "CLIENT_REREGISTER",
    "GID_CHANGE",
];

/// Every `IBV_EVENT_*` type, plus an unknown one, from a hand-built record:
/// typed, with its object, its name and description.
#[test]
fn every_event_type_decodes_with_its_object() {
    let o = objects();
    let cq_uh = o.uh(Kind::Cq, o.cq.handle());
    let qp_uh = o.uh(Kind::Qp, o.qp.handle());
    let srq_uh = o.uh(Kind::Srq, o.srq.handle());
    enum Want {
        Cq,
        Qp,
        Srq,
        Wq(u64),
        Port(u8),
        Device,
    }
    let cases: Vec<(T, u32, &str, u64, Want)> = vec![
        (T::CQ_ERR, 0, "CQ_ERR", cq_uh, Want::Cq),
        (T::QP_FATAL, 1, "QP_FATAL", qp_uh, Want::Qp),
        (T::QP_REQ_ERR, 2, "QP_REQ_ERR", qp_uh, Want::Qp),
        (T::QP_ACCESS_ERR, 3, "QP_ACCESS_ERR", qp_uh, Want::Qp),
        (T::COMM_EST, 4, "COMM_EST", qp_uh, Want::Qp),
        (T::SQ_DRAINED, 5, "SQ_DRAINED", qp_uh, Want::Qp),
        (T::PATH_MIG, 6, "PATH_MIG", qp_uh, Want::Qp),
        (T::PATH_MIG_ERR, 7, "PATH_MIG_ERR", qp_uh, Want::Qp),
        (T::PORT_ACTIVE, 9, "PORT_ACTIVE", 1, Want::Port(1)),
        (T::PORT_ERR, 10, "PORT_ERR", 2, Want::Port(2)),
        (T::LID_CHANGE, 11, "LID_CHANGE", 1, Want::Port(1)),
        (T::PKEY_CHANGE, 12, "PKEY_CHANGE", 1, Want::Port(1)),
        (T::SM_CHANGE, 13, "SM_CHANGE", 1, Want::Port(1)),
        (T::SRQ_ERR, 14, "SRQ_ERR", srq_uh, Want::Srq),
        (
            T::SRQ_LIMIT_REACHED,
            15,
            "SRQ_LIMIT_REACHED",
            srq_uh,
            Want::Srq,
        ),
        (
            T::QP_LAST_WQE_REACHED,
            16,
            "QP_LAST_WQE_REACHED",
            qp_uh,
            Want::Qp,
        ),
        (
            T::CLIENT_REREGISTER,
            17,
            "CLIENT_REREGISTER",
            1,
            Want::Port(1),
        ),
        (T::GID_CHANGE, 18, "GID_CHANGE", 1, Want::Port(1)),
        (T::WQ_FATAL, 19, "WQ_FATAL", 0xabcd, Want::Wq(0xabcd)),
        // Last: it marks the device removed.
        (T::DEVICE_FATAL, 8, "DEVICE_FATAL", 0, Want::Device),
    ];
    assert_eq!(cases.len(), 20, "every type of enum ibv_event_type");
    for (t, raw, name, element, want) in cases {
        assert_eq!(t.0, raw, "{name}");
        o.fake.push_event(raw, element);
        let ev = o
            .ctx
            .try_get_async_event()
            .unwrap()
            .unwrap_or_else(|| panic!("{name} was queued"));
        assert_eq!(ev.event_type(), t, "{name}");
        assert_eq!(ev.event_type().name(), Some(name));
        assert_eq!(format!("{:?}", ev.event_type()), name);
        assert_ne!(ev.event_type().description(), "unknown", "{name}");
        assert_eq!(ev.is_for_cq(&o.cq), matches!(want, Want::Cq), "{name}");
        assert_eq!(ev.is_for_qp(&o.qp), matches!(want, Want::Qp), "{name}");
        assert_eq!(ev.is_for_srq(&o.srq), matches!(want, Want::Srq), "{name}");
        // Affiliation and severity, as the guides' event table has them.
        let affiliation = match want {
            Want::Cq => EventAffiliation::Cq,
            Want::Qp => EventAffiliation::Qp,
            Want::Srq => EventAffiliation::Srq,
            Want::Wq(_) => EventAffiliation::Wq,
            Want::Port(_) => EventAffiliation::Port,
            Want::Device => EventAffiliation::Device,
        };
        assert_eq!(t.affiliation(), affiliation, "{name}");
        let informational = INFORMATIONAL.contains(&name);
        let severity = if informational {
            EventSeverity::Informational
        } else {
            EventSeverity::Error
        };
        assert_eq!(t.severity(), Some(severity), "{name}");
        assert_eq!(t.is_error(), !informational, "{name}");
        // The object's context, as `event.element.qp->qp_context`.
        let context = match want {
            Want::Cq => Some(CQ_CONTEXT),
            Want::Qp => Some(QP_CONTEXT),
            Want::Srq => Some(SRQ_CONTEXT),
            _ => None,
        };
        assert_eq!(ev.context(), context, "{name}");
        match (want, ev.element()) {
            (Want::Cq, AsyncElement::Cq(h)) => assert_eq!(*h, o.cq.handle()),
            (Want::Qp, AsyncElement::Qp(n)) => assert_eq!(*n, o.qp.qp_num()),
            (Want::Srq, AsyncElement::Srq(h)) => assert_eq!(*h, o.srq.handle()),
            (Want::Wq(w), AsyncElement::Wq(u)) => assert_eq!(*u, w),
            (Want::Port(p), AsyncElement::Port(q)) => {
                assert_eq!(*q, p);
                assert_eq!(ev.port(), Some(p));
            }
            (Want::Device, AsyncElement::Device) => assert_eq!(ev.port(), None),
            (_, other) => panic!("{name}: element {other:?}"),
        }
        ev.ack();
    }
    // Every object event was acknowledged: all destroys go through.
    let Objs {
        fake,
        pd,
        cq,
        qp,
        srq,
        ..
    } = o;
    destroy_three("after one event of each type, acknowledged", qp, srq, cq);
    pd.destroy().unwrap();
    assert_eq!(fake.destroyed(Kind::Qp).len(), 1);
}

/// Types newer than this crate are kept as numbers (the kernel adds them as
/// port or device events: the element is read as the port).
#[test]
fn an_unknown_type_is_kept_as_its_number() {
    let o = objects();
    o.fake.push_event(77, 1);
    let ev = o.ctx.try_get_async_event().unwrap().unwrap();
    assert_eq!(ev.event_type(), T(77));
    assert_eq!(ev.event_type().0, 77);
    assert_eq!(ev.event_type().name(), None);
    assert_eq!(ev.event_type().description(), "unknown");
    assert_eq!(format!("{:?}", ev.event_type()), "AsyncEventType(77)");
    assert_eq!(ev.event_type().affiliation(), EventAffiliation::Port);
    assert_eq!(ev.event_type().severity(), None);
    assert!(!ev.event_type().is_error());
    assert_eq!(ev.port(), Some(1));
    assert!(!ev.is_for_cq(&o.cq) && !ev.is_for_qp(&o.qp) && !ev.is_for_srq(&o.srq));
}

#[test]
fn empty_is_would_block_and_a_short_record_is_an_error() {
    let o = objects();
    assert!(o.ctx.try_get_async_event().unwrap().is_none());
    assert!(o
        .ctx
        .get_async_event_timeout(Some(Duration::from_millis(10)))
        .unwrap()
        .is_none());
    o.fake.kernel.push_read(Ok(vec![0; 8]));
    let err = o.ctx.try_get_async_event().unwrap_err();
    assert_eq!(err.errno(), Errno::EBADMSG, "{err}");
    // EINTR is retried, EAGAIN is "would block".
    o.fake.kernel.push_read(Err(Errno::EINTR));
    o.fake.push_event(T::PORT_ACTIVE.0, 1);
    let ev = o.ctx.try_get_async_event().unwrap().unwrap();
    assert_eq!(ev.event_type(), T::PORT_ACTIVE);
    o.fake.kernel.push_read(Err(Errno::EAGAIN));
    assert!(o.ctx.try_get_async_event().unwrap().is_none());
}

/// An event for an object of another kind, or for a handle that names
/// nothing, holds nothing and is reported as `Gone`.
#[test]
fn an_element_that_names_no_object_is_gone() {
    let o = objects();
    let cq_uh = o.uh(Kind::Cq, o.cq.handle());
    // A QP event carrying the CQ's user handle.
    o.fake.kernel.push_read(Ok(record(T::QP_FATAL.0, cq_uh)));
    let ev = o.ctx.try_get_async_event().unwrap().unwrap();
    assert!(
        matches!(ev.element(), AsyncElement::Gone(u) if *u == cq_uh),
        "{ev:?}"
    );
    assert!(!ev.is_for_cq(&o.cq));
    drop(ev);
    o.fake.kernel.push_read(Ok(record(T::CQ_ERR.0, 999)));
    let ev = o.ctx.try_get_async_event().unwrap().unwrap();
    assert!(matches!(ev.element(), AsyncElement::Gone(999)));
    drop(ev);
    // Neither counted against the CQ: its destroy does not wait.
    let Objs { cq, qp, .. } = o;
    qp.destroy().unwrap();
    PATIENCE
        .destroy(
            "the CQ, named by two events that were not its own",
            cq,
            CompletionQueue::destroy,
        )
        .unwrap();
}

fn record(event_type: u32, element: u64) -> Vec<u8> {
    let mut d = abi::IbUverbsAsyncEventDesc::new_zeroed();
    d.element = element;
    d.event_type = event_type;
    d.as_bytes().to_vec()
}

/// An event keeps its object alive after the user's handle is dropped; the
/// kernel object is destroyed when the event is acknowledged.
#[test]
fn an_event_keeps_its_object_until_acknowledged() {
    let o = objects();
    let srq_uh = o.uh(Kind::Srq, o.srq.handle());
    let h = o.srq.handle();
    o.fake.push_event(T::SRQ_LIMIT_REACHED.0, srq_uh);
    let ev = o.ctx.try_get_async_event().unwrap().unwrap();
    let Objs { fake, srq, .. } = o;
    drop(srq);
    assert!(fake.destroyed(Kind::Srq).is_empty(), "the event holds it");
    assert!(matches!(ev.element(), AsyncElement::Srq(x) if *x == h));
    ev.ack();
    assert_eq!(fake.destroyed(Kind::Srq), vec![h]);
}

/// Destroy waits while another thread holds an event of the object, and
/// returns once it is acknowledged; the kernel reported one event and the
/// destroy found it acknowledged.
#[test]
fn destroy_waits_for_an_event_held_by_another_thread() {
    let o = objects();
    let qp_uh = o.uh(Kind::Qp, o.qp.handle());
    o.fake.push_event(T::QP_FATAL.0, qp_uh);
    let (got_tx, got_rx) = mpsc::channel();
    let ctx = o.ctx.clone();
    let holder = thread::spawn(move || {
        let ev = ctx.try_get_async_event().unwrap().unwrap();
        assert_eq!(ev.event_type(), T::QP_FATAL);
        got_tx.send(()).unwrap();
        thread::sleep(Duration::from_millis(300));
        let at = Instant::now();
        ev.ack();
        at
    });
    PATIENCE.recv("the holder's event", &got_rx);
    let start = Instant::now();
    PATIENCE
        .destroy(
            "the QP, once the holder acknowledged the one event it read",
            o.qp,
            QueuePair::destroy,
        )
        .unwrap();
    let done = Instant::now();
    let acked = PATIENCE.join("the holder", holder);
    assert!(done >= acked, "destroy returned before the acknowledgement");
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert_eq!(o.fake.destroyed(Kind::Qp).len(), 1);
}

/// The thread holding the event gets EBUSY instead of waiting for itself.
#[test]
fn destroy_while_this_thread_holds_an_event_is_ebusy() {
    let o = objects();
    let cq_uh = o.uh(Kind::Cq, o.cq.handle());
    o.fake.push_event(T::CQ_ERR.0, cq_uh);
    let ev = o.ctx.try_get_async_event().unwrap().unwrap();
    assert!(ev.is_for_cq(&o.cq));
    let Objs { fake, cq, qp, .. } = o;
    qp.destroy().unwrap();
    let err = cq.destroy().unwrap_err();
    assert_eq!(err.errno(), Errno::EBUSY, "{err}");
    assert!(err.to_string().contains("unacknowledged"), "{err}");
    assert!(fake.destroyed(Kind::Cq).is_empty());
    // The CQ comes back usable; once the event is acknowledged it goes.
    let mut cq = err.into_inner();
    let mut wc = [uverbs::WorkCompletion::default(); 4];
    assert_eq!(cq.poll(&mut wc), 0);
    ev.ack();
    assert!(fake.destroyed(Kind::Cq).is_empty());
    PATIENCE
        .destroy(
            "the CQ after its one event was acknowledged",
            cq,
            CompletionQueue::destroy,
        )
        .unwrap();
    assert_eq!(fake.destroyed(Kind::Cq).len(), 1);
}

/// Dropping the handle while this thread holds an event defers the destroy
/// to the acknowledgement, which releases the last reference.
#[test]
fn a_dropped_handle_is_destroyed_by_its_last_events_acknowledgement() {
    let o = objects();
    let cq_uh = o.uh(Kind::Cq, o.cq.handle());
    o.fake.push_event(T::CQ_ERR.0, cq_uh);
    let ev = o.ctx.try_get_async_event().unwrap().unwrap();
    let Objs { fake, cq, qp, .. } = o;
    qp.destroy().unwrap();
    drop(cq);
    assert!(fake.destroyed(Kind::Cq).is_empty());
    ev.ack();
    assert_eq!(fake.destroyed(Kind::Cq).len(), 1);
}

/// Several threads reading one context: each event goes to exactly one.
#[test]
fn each_event_goes_to_exactly_one_thread() {
    let o = objects();
    const M: u64 = 200;
    for i in 0..M {
        o.fake.push_event(T::GID_CHANGE.0, 1 + i % 2);
    }
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let ctx = o.ctx.clone();
            thread::spawn(move || {
                let mut n = Vec::new();
                while let Some(ev) = ctx.try_get_async_event().unwrap() {
                    n.push(ev.port().unwrap());
                }
                n
            })
        })
        .collect();
    let all: Vec<u8> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(all.len() as u64, M);
    assert_eq!(all.iter().filter(|&&p| p == 1).count() as u64, M / 2);
}

/// The disassociate path (mlx5 after a device removal, or a fatal error):
/// DEVICE_FATAL with element 0 is read, and the events queued behind it
/// still are, as libibverbs reads them (the kernel answers EIO only once
/// its queue is empty); then every get reports the removal instead of
/// blocking, every command fails with EIO, and every object can still be
/// destroyed.
#[test]
fn device_fatal_then_eio_nothing_hangs_everything_destroys() {
    let o = objects();
    let qp_uh = o.uh(Kind::Qp, o.qp.handle());
    o.fake.push_event(T::DEVICE_FATAL.0, 0);
    o.fake.push_event(T::PORT_ERR.0, 1);
    o.fake.push_event(T::QP_FATAL.0, qp_uh);
    o.fake.behaviour.removed.store(true, Ordering::Relaxed);
    let got = blocking_get("DEVICE_FATAL, queued", &o.ctx);
    assert_eq!(got, Ok((T::DEVICE_FATAL, None, true)));
    // The queue drains first, through a blocking get and a try ...
    let got = blocking_get("PORT_ERR, queued behind DEVICE_FATAL", &o.ctx);
    assert_eq!(got, Ok((T::PORT_ERR, Some(1), false)));
    let ev = o
        .ctx
        .try_get_async_event()
        .unwrap()
        .expect("QP_FATAL, queued");
    assert!(ev.is_for_qp(&o.qp), "{ev:?}");
    drop(ev);
    // ... then blocking reads return an error instead of waiting forever,
    // and keep doing so.
    for _ in 0..3 {
        let start = Instant::now();
        let got = blocking_get("after the removal, with nothing queued", &o.ctx);
        assert_eq!(got, Err(ErrorKind::DeviceRemoved));
        assert!(start.elapsed() < Duration::from_secs(1));
    }
    let err = o.ctx.try_get_async_event().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceRemoved);
    // Commands fail with EIO ...
    let err = o.ctx.query_port(1).unwrap_err();
    assert_eq!(err.errno(), Errno::EIO, "{err}");
    assert_eq!(err.kind(), ErrorKind::DeviceRemoved);
    assert_eq!(
        o.ctx.alloc_pd().unwrap_err().kind(),
        ErrorKind::DeviceRemoved
    );
    assert!(o.ctx.create_cq(2, CqOptions::default()).is_err());
    // ... but destroying succeeds: the kernel already destroyed the objects.
    let Objs {
        fake,
        ctx,
        pd,
        cq,
        qp,
        srq,
    } = o;
    destroy_three("after the removal", qp, srq, cq);
    pd.destroy().unwrap();
    assert!(
        fake.destroyed(Kind::Cq).is_empty(),
        "EIO: the fake destroyed nothing"
    );
    drop(ctx);
}

/// A read failing with EIO (the device went away without a DEVICE_FATAL
/// this context saw) also marks it removed: later reads with nothing
/// queued fail at once, blocking or not.
#[test]
fn an_eio_read_marks_the_device_removed() {
    let o = objects();
    o.fake.kernel.push_read(Err(Errno::EIO));
    let err = o.ctx.get_async_event().unwrap_err();
    assert_eq!(err.errno(), Errno::EIO);
    assert_eq!(err.kind(), ErrorKind::DeviceRemoved);
    let start = Instant::now();
    let got = blocking_get("after an EIO read, with nothing queued", &o.ctx);
    assert_eq!(got, Err(ErrorKind::DeviceRemoved));
    let err = o.ctx.try_get_async_event().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceRemoved, "{err}");
    assert!(start.elapsed() < Duration::from_secs(1), "no wait");
    o.fake.behaviour.removed.store(true, Ordering::Relaxed);
    let Objs {
        cq, qp, srq, pd, ..
    } = o;
    qp.destroy().unwrap();
    cq.destroy().unwrap();
    srq.destroy().unwrap();
    pd.destroy().unwrap();
}

/// After a removal, an event held by the calling thread still makes its
/// object's destroy EBUSY (no deadlock), and acknowledging it lets the
/// object go (its kernel destroy then reports EIO, which counts as done).
#[test]
fn after_removal_a_held_event_still_gives_ebusy_then_drops_cleanly() {
    let o = objects();
    let qp_uh = o.uh(Kind::Qp, o.qp.handle());
    o.fake.push_event(T::QP_FATAL.0, qp_uh);
    let ev = o.ctx.try_get_async_event().unwrap().unwrap();
    o.fake.push_event(T::DEVICE_FATAL.0, 0);
    o.fake.behaviour.removed.store(true, Ordering::Relaxed);
    assert_eq!(
        o.ctx.try_get_async_event().unwrap().unwrap().event_type(),
        T::DEVICE_FATAL
    );
    let Objs { qp, cq, .. } = o;
    let err = qp.destroy().unwrap_err();
    assert_eq!(err.errno(), Errno::EBUSY, "{err}");
    ev.ack();
    PATIENCE
        .destroy(
            "the QP after the removal and its one event's acknowledgement",
            err.into_inner(),
            QueuePair::destroy,
        )
        .unwrap();
    cq.destroy().unwrap();
}
