//! Async event and completion event records, read through the library's
//! real read paths from the fake rxe kernel (`uverbs::testing::rxe`).

use std::{
    os::fd::{AsFd, AsRawFd},
    sync::{Arc, Mutex},
};

use uverbs::{
    abi,
    sys::Errno,
    testing::rxe::{fake_rxe, FakeRxe, Kind, DEV},
    AsyncElement, AsyncEventType, CompletionChannel, CompletionQueue, Context, CqOptions,
    ErrorKind, ProtectionDomain, QpCap, QpInitAttr, QueuePair, SharedReceiveQueue, SrqAttr,
};
use zerocopy::{FromZeros, IntoBytes};

/// A context on the fake rxe kernel with one object of each kind an event
/// can name.
struct Objects {
    fake: Arc<FakeRxe>,
    ctx: Context,
    cq: CompletionQueue,
    qp: QueuePair,
    srq: SharedReceiveQueue,
    _pd: ProtectionDomain,
}

impl Objects {
    fn new() -> Self {
        let fake = fake_rxe();
        let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).expect("open the fake rxe0");
        let pd = ctx.alloc_pd().expect("alloc_pd");
        let cq = ctx.create_cq(4, CqOptions::default()).expect("create_cq");
        let srq = pd.create_srq(SrqAttr::new(8, 1)).expect("create_srq");
        let qp = pd
            .create_qp(&QpInitAttr::rc(&cq, &cq).cap(QpCap::new(8, 8, 1, 1)))
            .expect("create_qp");
        Objects {
            fake,
            ctx,
            cq,
            qp,
            srq,
            _pd: pd,
        }
    }

    fn user_handle(&self, kind: Kind) -> u64 {
        let handle = match kind {
            Kind::Cq => self.cq.handle(),
            Kind::Qp => self.qp.handle(),
            _ => self.srq.handle(),
        };
        self.fake.user_handle(kind, handle)
    }
}

/// The fixture, kept for the life of the process (a static is never
/// dropped: no teardown of fake-kernel objects at exit).
static ASYNC: Mutex<Option<Objects>> = Mutex::new(None);

/// The kind of object events of type `t` are about (`None`: a port or the
/// device).
fn affiliation(t: u32) -> Option<Kind> {
    match t {
        0 => Some(Kind::Cq),
        1..=7 | 16 => Some(Kind::Qp),
        14 | 15 => Some(Kind::Srq),
        _ => None,
    }
}

/// One async event record as the context's async fd returns it: the first
/// input byte's bit 0 aims the record's element at the object of its type
/// (user handles are not known before the run); the rest is the record (`ib_uverbs_async_event_desc` is 16 bytes; other lengths are the
/// short or long reads the reader must refuse).
pub fn async_event(data: &[u8]) {
    let Some((&mode, record)) = data.split_first() else {
        return;
    };
    {
        let mut cell = ASYNC.lock().unwrap_or_else(|p| p.into_inner());
        let o = cell.get_or_insert_with(Objects::new);
        let mut record = record.to_vec();
        let ty = |r: &[u8]| {
            r.get(8..12)
                .map(|t| u32::from_ne_bytes([t[0], t[1], t[2], t[3]]))
        };
        // The kernel names the object of the event's type: aim there.
        if mode % 2 == 1 {
            if let (Some(kind), true) = (ty(&record).and_then(affiliation), record.len() >= 8) {
                record[..8].copy_from_slice(&o.user_handle(kind).to_ne_bytes());
            }
        }
        o.fake.kernel.clear_calls();
        let element = record
            .get(..8)
            .map(|e| u64::from_ne_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]));
        let named = element.and_then(|e| {
            [Kind::Cq, Kind::Qp, Kind::Srq]
                .into_iter()
                .find(|&k| o.user_handle(k) == e)
        });
        match (record.len(), ty(&record), element) {
            // A well-sized record goes through the fake's own queueing,
            // which counts it against its object as the kernel does (a
            // destroy waits for exactly that many acknowledgements)...
            (16, Some(t), Some(e)) if named.is_none() || named == affiliation(t) => {
                o.fake.push_event(t, e);
            }
            // ...unless it names one of our objects with an event of
            // another kind of object, which no kernel sends: then it is
            // not counted, as the library does not count it either.
            _ => drop(o.fake.kernel.push_read(Ok(record.clone()))),
        }
        let got = o.ctx.try_get_async_event();
        // Nothing stays queued after one read of a well-sized record, and
        // a refused one is dropped here so that the next input starts clean.
        o.fake.kernel.discard_reads(None, |_| true);
        let mut removed = false;
        match got {
            Ok(Some(ev)) => {
                assert_eq!(
                    record.len(),
                    16,
                    "an event from a {}-byte read",
                    record.len()
                );
                let element = u64::from_ne_bytes(record[..8].try_into().unwrap_or_default());
                let ty = u32::from_ne_bytes(record[8..12].try_into().unwrap_or_default());
                assert_eq!(ev.event_type(), AsyncEventType(ty));
                let ours = |kind| element == o.user_handle(kind);
                match *ev.element() {
                    AsyncElement::Cq(h) => {
                        assert!(ty == 0 && ours(Kind::Cq) && h == o.cq.handle());
                        assert!(ev.is_for_cq(&o.cq));
                    }
                    AsyncElement::Qp(n) => {
                        assert!(ours(Kind::Qp) && n == o.qp.qp_num());
                        assert!(ev.is_for_qp(&o.qp));
                    }
                    AsyncElement::Srq(h) => {
                        assert!(ours(Kind::Srq) && h == o.srq.handle());
                        assert!(ev.is_for_srq(&o.srq));
                    }
                    AsyncElement::Port(p) => {
                        assert_eq!(p, element as u8);
                        assert_eq!(ev.port(), Some(p));
                    }
                    AsyncElement::Wq(w) => assert_eq!(w, element),
                    AsyncElement::Gone(g) => assert_eq!(g, element),
                    AsyncElement::Device => {
                        assert_eq!(ev.event_type(), AsyncEventType::DEVICE_FATAL);
                        removed = true;
                    }
                }
                let _ = (ev.event_type().name(), ev.event_type().description());
                let _ = format!("{ev:?}");
                ev.ack();
            }
            Ok(None) => panic!("a queued {}-byte record read as nothing", record.len()),
            Err(e) => {
                assert_ne!(record.len(), 16, "a 16-byte record refused: {e}");
                let want = if record.len() < 16 {
                    Errno::EBADMSG
                } else {
                    Errno::EINVAL
                };
                assert_eq!(e.errno(), want, "{e}");
            }
        }
        if removed {
            // The device is gone for this context: the next read says so,
            // and the next input gets a new context.
            let e = o
                .ctx
                .try_get_async_event()
                .expect_err("read after DEVICE_FATAL");
            assert_eq!(e.kind(), ErrorKind::DeviceRemoved, "{e}");
            *cell = None;
        } else {
            assert!(matches!(o.ctx.try_get_async_event(), Ok(None)));
        }
    }
}

fn async_record(element: u64, event_type: u32) -> Vec<u8> {
    let mut d = abi::IbUverbsAsyncEventDesc::new_zeroed();
    d.element = element;
    d.event_type = event_type;
    d.as_bytes().to_vec()
}

pub fn async_event_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let with = |mode: u8, rec: Vec<u8>| {
        let mut v = vec![mode];
        v.extend(rec);
        v
    };
    vec![
        ("cq-err", with(1, async_record(0, 0))),
        ("qp-fatal", with(1, async_record(0, 1))),
        ("comm-est", with(1, async_record(0, 4))),
        ("srq-limit", with(1, async_record(0, 15))),
        ("port-active-1", with(0, async_record(1, 9))),
        ("gid-change", with(0, async_record(1, 18))),
        ("unknown-type", with(0, async_record(7, 99))),
        ("device-fatal", with(0, async_record(0, 8))),
        ("short-read", with(0, async_record(1, 9)[..12].to_vec())),
    ]
}

// ------------------------------------------------------------ completion

/// A context with a completion channel and a CQ attached to it (the fake
/// rxe kernel answers `CREATE_COMP_CHANNEL` with a dummy fd whose records
/// the target queues).
struct Channel {
    fake: Arc<FakeRxe>,
    channel: CompletionChannel,
    cq: CompletionQueue,
    _ctx: Context,
}

impl Channel {
    fn new() -> Self {
        let fake = fake_rxe();
        let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).expect("open the fake rxe0");
        let channel = ctx.create_comp_channel().expect("create_comp_channel");
        let cq = ctx
            .create_cq(4, CqOptions::new().channel(&channel))
            .expect("create_cq on the channel");
        Channel {
            fake,
            channel,
            cq,
            _ctx: ctx,
        }
    }
}

/// The fixture, kept for the life of the process (a static is never
/// dropped: no teardown of fake-kernel objects at exit).
static COMP: Mutex<Option<Channel>> = Mutex::new(None);

/// One completion event record as a completion channel returns it: the
/// first input byte says whether to aim the record at the channel's CQ;
/// the rest is the record (`ib_uverbs_comp_event_desc`, 8 bytes).
pub fn comp_event(data: &[u8]) {
    let Some((&mode, record)) = data.split_first() else {
        return;
    };
    {
        let mut cell = COMP.lock().unwrap_or_else(|p| p.into_inner());
        let c = cell.get_or_insert_with(Channel::new);
        let uh = c.fake.user_handle(Kind::Cq, c.cq.handle());
        let mut record = record.to_vec();
        if mode % 2 == 1 {
            if let Some(h) = record.get_mut(..8) {
                h.copy_from_slice(&uh.to_ne_bytes());
            }
        }
        let fd = c.channel.as_fd().as_raw_fd();
        c.fake.kernel.clear_calls();
        c.fake.kernel.push_read_to(fd, Ok(record.clone()));
        let got = c.channel.try_get_event();
        c.fake.kernel.discard_reads(Some(fd), |_| true);
        match got {
            Ok(Some(ev)) => {
                assert_eq!(record.len(), 8);
                assert_eq!(record[..8], uh.to_ne_bytes(), "an event for another CQ");
                assert!(ev.is_for(&c.cq));
                ev.ack();
            }
            Ok(None) => {
                // Only a record naming no CQ of the context is dropped.
                assert_eq!(record.len(), 8, "a {}-byte read accepted", record.len());
                assert_ne!(record[..8], uh.to_ne_bytes(), "the CQ's event was dropped");
            }
            Err(e) => {
                assert_ne!(record.len(), 8, "an 8-byte record refused: {e}");
                let want = if record.len() < 8 {
                    Errno::EBADMSG
                } else {
                    Errno::EINVAL
                };
                assert_eq!(e.errno(), want, "{e}");
            }
        }
        assert!(matches!(c.channel.try_get_event(), Ok(None)));
    }
}

pub fn comp_event_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut ours = vec![1u8];
    ours.extend_from_slice(&[0; 8]);
    let mut other = vec![0u8];
    other.extend_from_slice(&0x1234u64.to_ne_bytes());
    vec![
        ("our-cq", ours),
        ("unknown-cq", other),
        ("short", vec![1, 0, 0, 0]),
    ]
}
