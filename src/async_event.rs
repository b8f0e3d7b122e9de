//! Async events (`ibv_get_async_event`, `ibv_ack_async_event`).
//!
//! The context's async event fd delivers one 16-byte
//! `ib_uverbs_async_event_desc` per `read()`: the event type and an element,
//! which is the `user_handle` of the CQ, QP, SRQ or WQ the event concerns, or
//! the port number for port events (`drivers/infiniband/core/uverbs_main.c`,
//! `ib_uverbs_async_handler`). Reads go through `event_fd` (a blocking get is
//! one blocking `read`; timed and non-blocking gets poll); many threads can
//! wait at once and each event goes to exactly one of them (one `read`
//! dequeues one event).
//!
//! An event of a CQ, QP or SRQ holds that object alive and must be
//! acknowledged (on drop, or with [`AsyncEvent::ack`]); destroying the object
//! waits for events other threads hold, and fails with `EBUSY` for events the
//! calling thread holds (see `event_count`).
//!
//! After the device is gone (a `DEVICE_FATAL` event, or `EIO`), the events
//! still queued are read, as libibverbs reads them; once none is left,
//! reads fail with a `DeviceRemoved` error instead of blocking: after a
//! fatal error that is no removal the kernel never closes the async fd, so
//! without this a waiting thread would sleep forever.

use std::{
    fmt,
    os::fd::BorrowedFd,
    sync::{atomic::Ordering, Arc},
    time::Duration,
};

use crate::{
    abi,
    context::Context,
    cq::CqInner,
    error::{Error, ErrorKind, Result},
    event_count::{Held, Lookup, Registry, Stream},
    event_fd::{read_record, Wait},
    object::Owned,
    qp::QpInner,
    srq::SrqInner,
    sys::{Errno, Kernel, Readiness},
};

/// The type of an async event (`enum ibv_event_type`); values the crate does
/// not know are kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct AsyncEventType(pub u32);

#[allow(missing_docs)] // the names are libibverbs'
impl AsyncEventType {
    /// `IBV_EVENT_CQ_ERR`.
    #[doc(alias = "IBV_EVENT_CQ_ERR")]
    pub const CQ_ERR: Self = Self(abi::IBV_EVENT_CQ_ERR);
    /// `IBV_EVENT_QP_FATAL`.
    #[doc(alias = "IBV_EVENT_QP_FATAL")]
    pub const QP_FATAL: Self = Self(abi::IBV_EVENT_QP_FATAL);
    /// `IBV_EVENT_QP_REQ_ERR`.
    #[doc(alias = "IBV_EVENT_QP_REQ_ERR")]
    pub const QP_REQ_ERR: Self = Self(abi::IBV_EVENT_QP_REQ_ERR);
    /// `IBV_EVENT_QP_ACCESS_ERR`.
    #[doc(alias = "IBV_EVENT_QP_ACCESS_ERR")]
    pub const QP_ACCESS_ERR: Self = Self(abi::IBV_EVENT_QP_ACCESS_ERR);
    /// `IBV_EVENT_COMM_EST`.
    #[doc(alias = "IBV_EVENT_COMM_EST")]
    pub const COMM_EST: Self = Self(abi::IBV_EVENT_COMM_EST);
    /// `IBV_EVENT_SQ_DRAINED`.
    #[doc(alias = "IBV_EVENT_SQ_DRAINED")]
    pub const SQ_DRAINED: Self = Self(abi::IBV_EVENT_SQ_DRAINED);
    /// `IBV_EVENT_PATH_MIG`.
    #[doc(alias = "IBV_EVENT_PATH_MIG")]
    pub const PATH_MIG: Self = Self(abi::IBV_EVENT_PATH_MIG);
    /// `IBV_EVENT_PATH_MIG_ERR`.
    #[doc(alias = "IBV_EVENT_PATH_MIG_ERR")]
    pub const PATH_MIG_ERR: Self = Self(abi::IBV_EVENT_PATH_MIG_ERR);
    /// `IBV_EVENT_DEVICE_FATAL`.
    #[doc(alias = "IBV_EVENT_DEVICE_FATAL")]
    pub const DEVICE_FATAL: Self = Self(abi::IBV_EVENT_DEVICE_FATAL);
    /// `IBV_EVENT_PORT_ACTIVE`.
    #[doc(alias = "IBV_EVENT_PORT_ACTIVE")]
    pub const PORT_ACTIVE: Self = Self(abi::IBV_EVENT_PORT_ACTIVE);
    /// `IBV_EVENT_PORT_ERR`.
    #[doc(alias = "IBV_EVENT_PORT_ERR")]
    pub const PORT_ERR: Self = Self(abi::IBV_EVENT_PORT_ERR);
    /// `IBV_EVENT_LID_CHANGE`.
    #[doc(alias = "IBV_EVENT_LID_CHANGE")]
    pub const LID_CHANGE: Self = Self(abi::IBV_EVENT_LID_CHANGE);
    /// `IBV_EVENT_PKEY_CHANGE`.
    #[doc(alias = "IBV_EVENT_PKEY_CHANGE")]
    pub const PKEY_CHANGE: Self = Self(abi::IBV_EVENT_PKEY_CHANGE);
    /// `IBV_EVENT_SM_CHANGE`.
    #[doc(alias = "IBV_EVENT_SM_CHANGE")]
    pub const SM_CHANGE: Self = Self(abi::IBV_EVENT_SM_CHANGE);
    /// `IBV_EVENT_SRQ_ERR`.
    #[doc(alias = "IBV_EVENT_SRQ_ERR")]
    pub const SRQ_ERR: Self = Self(abi::IBV_EVENT_SRQ_ERR);
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`.
    #[doc(alias = "IBV_EVENT_SRQ_LIMIT_REACHED")]
    pub const SRQ_LIMIT_REACHED: Self = Self(abi::IBV_EVENT_SRQ_LIMIT_REACHED);
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`.
    #[doc(alias = "IBV_EVENT_QP_LAST_WQE_REACHED")]
    pub const QP_LAST_WQE_REACHED: Self = Self(abi::IBV_EVENT_QP_LAST_WQE_REACHED);
    /// `IBV_EVENT_CLIENT_REREGISTER`.
    #[doc(alias = "IBV_EVENT_CLIENT_REREGISTER")]
    pub const CLIENT_REREGISTER: Self = Self(abi::IBV_EVENT_CLIENT_REREGISTER);
    /// `IBV_EVENT_GID_CHANGE`.
    #[doc(alias = "IBV_EVENT_GID_CHANGE")]
    pub const GID_CHANGE: Self = Self(abi::IBV_EVENT_GID_CHANGE);
    /// `IBV_EVENT_WQ_FATAL`.
    #[doc(alias = "IBV_EVENT_WQ_FATAL")]
    pub const WQ_FATAL: Self = Self(abi::IBV_EVENT_WQ_FATAL);
}

/// What an event type concerns: the affiliation libibverbs decodes the
/// element by (`libibverbs/device.c`), as the event table of the RDMA
/// programming guides lists it under `ibv_get_async_event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventAffiliation {
    /// A CQ (`element.cq`).
    Cq,
    /// A QP (`element.qp`).
    Qp,
    /// An SRQ (`element.srq`).
    Srq,
    /// A work queue (`element.wq`).
    Wq,
    /// A port (`element.port_num`).
    Port,
    /// The whole device (no element).
    Device,
}

/// Whether an event reports a failure or only news (the guides' table:
/// "error" events put the object, port or device out of service until the
/// program acts; "informational" ones need no recovery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventSeverity {
    /// `*_FATAL`, `*_ERR`, `PATH_MIG_ERR`, `PORT_ERR`, `DEVICE_FATAL`.
    Error,
    /// `COMM_EST`, `SQ_DRAINED`, `PATH_MIG`, `QP_LAST_WQE_REACHED`,
    /// `SRQ_LIMIT_REACHED`, `PORT_ACTIVE` and the port's changes.
    Informational,
}

impl AsyncEventType {
    /// What the event concerns. Types newer than this crate are port
    /// events (the kernel adds new types only for ports and the device).
    pub fn affiliation(self) -> EventAffiliation {
        match self {
            Self::CQ_ERR => EventAffiliation::Cq,
            Self::QP_FATAL
            | Self::QP_REQ_ERR
            | Self::QP_ACCESS_ERR
            | Self::COMM_EST
            | Self::SQ_DRAINED
            | Self::PATH_MIG
            | Self::PATH_MIG_ERR
            | Self::QP_LAST_WQE_REACHED => EventAffiliation::Qp,
            Self::SRQ_ERR | Self::SRQ_LIMIT_REACHED => EventAffiliation::Srq,
            Self::WQ_FATAL => EventAffiliation::Wq,
            Self::DEVICE_FATAL => EventAffiliation::Device,
            // Port events, and types newer than this crate (which the
            // kernel only adds as port or device events).
            _ => EventAffiliation::Port,
        }
    }

    /// Error or informational, as the guides' table has it; `None` for a
    /// type newer than this crate.
    pub fn severity(self) -> Option<EventSeverity> {
        use EventSeverity::{Error, Informational};
        Some(match self {
            Self::CQ_ERR
            | Self::QP_FATAL
            | Self::QP_REQ_ERR
            | Self::QP_ACCESS_ERR
            | Self::PATH_MIG_ERR
            | Self::DEVICE_FATAL
            | Self::PORT_ERR
            | Self::SRQ_ERR
            | Self::WQ_FATAL => Error,
            Self::COMM_EST
            | Self::SQ_DRAINED
            | Self::PATH_MIG
            | Self::PORT_ACTIVE
            | Self::LID_CHANGE
            | Self::PKEY_CHANGE
            | Self::SM_CHANGE
            | Self::SRQ_LIMIT_REACHED
            | Self::QP_LAST_WQE_REACHED
            | Self::CLIENT_REREGISTER
            | Self::GID_CHANGE => Informational,
            _ => return None,
        })
    }

    /// Whether the event reports a failure ([`EventSeverity::Error`]).
    pub fn is_error(self) -> bool {
        self.severity() == Some(EventSeverity::Error)
    }

    /// The `IBV_EVENT_*` name.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 20] = [
            "CQ_ERR",
            "QP_FATAL",
            "QP_REQ_ERR",
            "QP_ACCESS_ERR",
            "COMM_EST",
            "SQ_DRAINED",
            "PATH_MIG",
            "PATH_MIG_ERR",
            "DEVICE_FATAL",
            "PORT_ACTIVE",
            "PORT_ERR",
            "LID_CHANGE",
            "PKEY_CHANGE",
            "SM_CHANGE",
            "SRQ_ERR",
            "SRQ_LIMIT_REACHED",
            "QP_LAST_WQE_REACHED",
            "CLIENT_REREGISTER",
            "GID_CHANGE",
            "WQ_FATAL",
        ];
        NAMES.get(self.0 as usize).copied()
    }

    /// The description `ibv_event_type_str` gives.
    #[doc(alias = "ibv_event_type_str")]
    pub fn description(self) -> &'static str {
        const TEXT: [&str; 20] = [
            "CQ error",
            "local work queue catastrophic error",
            "invalid request local work queue error",
            "local access violation work queue error",
            "communication established",
            "send queue drained",
            "path migrated",
            "path migration request error",
            "local catastrophic error",
            "port active",
            "port error",
            "LID change",
            "P_Key change",
            "SM change",
            "SRQ catastrophic error",
            "SRQ limit reached",
            "last WQE reached",
            "client reregistration",
            "GID table change",
            "WQ fatal",
        ];
        TEXT.get(self.0 as usize).copied().unwrap_or("unknown")
    }
}

impl fmt::Debug for AsyncEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "AsyncEventType({})", self.0),
        }
    }
}

impl fmt::Display for AsyncEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// The object an async event concerns.
///
/// The `element` union of libibverbs' `struct ibv_async_event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncElement {
    /// A CQ (kernel handle).
    Cq(u32),
    /// A QP (its number).
    Qp(u32),
    /// An SRQ (kernel handle).
    Srq(u32),
    /// A work queue (its `user_handle`; WQs are not implemented yet).
    Wq(u64),
    /// A port.
    Port(u8),
    /// The whole device.
    Device,
    /// An object of this context that was already destroyed (its
    /// `user_handle`); the event was acknowledged automatically.
    Gone(u64),
}

/// What an event holds to keep its object alive.
#[derive(Debug)]
enum Hold {
    Cq(Held<Owned<CqInner>>),
    Qp(Held<Owned<QpInner>>),
    Srq(Held<Owned<SrqInner>>),
    None,
}

/// One async event (`struct ibv_async_event`).
///
/// An event of a CQ, QP or SRQ keeps that object alive and is acknowledged
/// in one of two ways, as a [`CqEvent`](crate::CqEvent) is: as a value,
/// when dropped (or with [`AsyncEvent::ack`]), on the thread that received
/// it (it is not `Send`; that thread's destroy of the object fails with
/// `EBUSY` instead of waiting on itself); or by count:
/// [`AsyncEvent::defer_ack`] leaves it counted by its object, and the
/// object's `ack_async_events(n)` acknowledges it later from any thread.
/// Port and device events need no acknowledgement. All the rules (gets,
/// `O_NONBLOCK`, `EINTR`, removal, acknowledgement) are in [the event
/// rules](crate::events).
#[must_use = "an event is acknowledged when dropped; inspect it first"]
pub struct AsyncEvent {
    event_type: AsyncEventType,
    element: AsyncElement,
    hold: Hold,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl fmt::Debug for AsyncEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncEvent")
            .field("event_type", &self.event_type)
            .field("element", &self.element)
            .finish()
    }
}

impl AsyncEvent {
    /// The context the program gave the event's object, as C programs
    /// find their state through `event.element.qp->qp_context`: a CQ's
    /// [`CqOptions::context`](crate::CqOptions::context), a QP's
    /// [`QpInitAttr::context`](crate::QpInitAttr::context), an SRQ's
    /// [`SrqOptions::context`](crate::SrqOptions::context). `None` for port
    /// and device events, and for an object already destroyed.
    pub fn context(&self) -> Option<u64> {
        match &self.hold {
            Hold::Cq(cq) => Some(cq.object().context),
            Hold::Qp(qp) => Some(qp.object().context),
            Hold::Srq(srq) => Some(srq.object().context),
            Hold::None => None,
        }
    }

    /// The event type.
    pub fn event_type(&self) -> AsyncEventType {
        self.event_type
    }

    /// The object it concerns.
    pub fn element(&self) -> &AsyncElement {
        &self.element
    }

    /// Whether the event is for this QP.
    pub fn is_for_qp(&self, qp: &crate::QueuePair) -> bool {
        matches!(&self.hold, Hold::Qp(q) if Arc::ptr_eq(q.object(), &qp.inner))
    }

    /// Whether the event is for this CQ.
    pub fn is_for_cq(&self, cq: &crate::CompletionQueue) -> bool {
        matches!(&self.hold, Hold::Cq(c) if Arc::ptr_eq(c.object(), &cq.inner))
    }

    /// Whether the event is for this SRQ.
    pub fn is_for_srq(&self, srq: &crate::SharedReceiveQueue) -> bool {
        matches!(&self.hold, Hold::Srq(s) if Arc::ptr_eq(s.object(), &srq.inner))
    }

    /// The port of a port event.
    pub fn port(&self) -> Option<u8> {
        match self.element {
            AsyncElement::Port(p) => Some(p),
            _ => None,
        }
    }

    /// Acknowledges the event, like `ibv_ack_async_event`.
    #[doc(alias = "ibv_ack_async_event")]
    pub fn ack(self) {
        drop(self);
    }

    /// Leaves an event of a CQ, QP or SRQ unacknowledged, counted by its
    /// object, for a later `ack_async_events(n)` of that object
    /// ([`QueuePair::ack_async_events`](crate::QueuePair::ack_async_events),
    /// [`CompletionQueue::ack_async_events`](crate::CompletionQueue::ack_async_events),
    /// [`SharedReceiveQueue::ack_async_events`](crate::SharedReceiveQueue::ack_async_events))
    /// from any thread. The object's destroy fails with `EBUSY` while such
    /// counts are unacknowledged. Port and device events need no
    /// acknowledgement: for them this is [`AsyncEvent::ack`].
    pub fn defer_ack(self) {
        match self.hold {
            Hold::Cq(h) => h.defer(),
            Hold::Qp(h) => h.defer(),
            Hold::Srq(h) => h.defer(),
            Hold::None => {}
        }
    }
}

impl Context {
    /// Waits for the next async event, like `ibv_get_async_event`.
    ///
    /// On an async fd the program made `O_NONBLOCK`, returns a
    /// [`WouldBlock`](crate::ErrorKind::WouldBlock) error at once when
    /// nothing is queued; a signal handler interrupts it with
    /// [`Interrupted`](crate::ErrorKind::Interrupted); after
    /// `DEVICE_FATAL` and the events queued behind it, it fails with
    /// [`DeviceRemoved`](crate::ErrorKind::DeviceRemoved) (see [the event
    /// rules](crate::events)).
    #[doc(alias = "ibv_get_async_event")]
    pub fn get_async_event(&self) -> Result<AsyncEvent> {
        loop {
            if let Some(ev) = self.read_async_event(Wait::Forever)? {
                return Ok(ev);
            }
        }
    }

    /// The next async event if one is queued; `Ok(None)` when there is none
    /// ("would block").
    pub fn try_get_async_event(&self) -> Result<Option<AsyncEvent>> {
        self.read_async_event(Wait::Never)
    }

    /// Waits at most `timeout` (`None`: forever) for the next async event.
    pub fn get_async_event_timeout(&self, timeout: Option<Duration>) -> Result<Option<AsyncEvent>> {
        self.read_async_event(Wait::timeout(timeout))
    }

    fn read_async_event(&self, wait: Wait) -> Result<Option<AsyncEvent>> {
        let op = "read async event";
        let ctx = &self.inner;
        let removed = || {
            Error::new(
                op,
                ErrorKind::DeviceRemoved,
                "the device was removed (DEVICE_FATAL was reported): destroy the \
                 remaining objects and close the context",
            )
        };
        // After DEVICE_FATAL the events still queued are read, as
        // libibverbs reads them (the kernel answers EIO only once the queue
        // is empty: `ib_uverbs_event_read`); then the removal is reported
        // in every mode instead of a wait that may never end.
        let removed_now = || ctx.removed.load(Ordering::Acquire);
        let wait = if removed_now() { Wait::Never } else { wait };
        let read = |k: &dyn Kernel, fd: BorrowedFd<'_>| {
            if removed_now() && k.wait_readable(fd, Some(Duration::ZERO)) != Ok(Readiness::Readable)
            {
                // A DEVICE_FATAL event was decoded meanwhile and nothing
                // more is queued.
                return Err(Errno::EIO);
            }
            read_record::<abi::IbUverbsAsyncEventDesc>(k, fd)
        };
        let decode =
            |desc: abi::IbUverbsAsyncEventDesc| Some(self.decode(desc.element, desc.event_type));
        // The fds stay open while this read waits, even if another handle
        // closes the context meanwhile (as a read in the kernel keeps the
        // file); a closed context answers EBADF.
        let fds = ctx.enter().map_err(|e| Error::sys(op, e))?;
        let Some(events) = fds.fds().events.as_ref() else {
            return Err(Error::sys(op, Errno::EBADF));
        };
        match events.next(wait, op, read, decode) {
            Ok(None) if removed_now() => Err(removed()),
            Err(e) if e.kernel_errno() == Some(Errno::EIO) => {
                ctx.removed.store(true, Ordering::Release);
                Err(e)
            }
            r => r,
        }
    }

    /// Decodes one event record (also used by tests through the fake kernel).
    fn decode(&self, element: u64, event_type: u32) -> AsyncEvent {
        let ctx = &self.inner;
        let event_type = AsyncEventType(event_type);
        let event = |element, hold| AsyncEvent {
            event_type,
            element,
            hold,
            _not_send: std::marker::PhantomData,
        };
        let events = &ctx.events;
        // An object found: its claim; one being destroyed: the event is
        // acknowledged here (its destroy may be waiting for it) and reported
        // as `Gone`, as is an element naming no object of ours.
        fn resolve<T>(events: &Registry, element: u64, lookup: Lookup<T>) -> Option<Held<T>> {
            match lookup {
                Lookup::Live(held) => Some(held),
                Lookup::Detached(counts) => {
                    events.ack_detached(element, &counts, Stream::Async);
                    None
                }
                Lookup::Unknown => None,
            }
        }
        let gone = || event(AsyncElement::Gone(element), Hold::None);
        match event_type.affiliation() {
            EventAffiliation::Port => event(AsyncElement::Port(element as u8), Hold::None),
            EventAffiliation::Device => {
                ctx.removed.store(true, Ordering::Release);
                event(AsyncElement::Device, Hold::None)
            }
            EventAffiliation::Wq => event(AsyncElement::Wq(element), Hold::None),
            EventAffiliation::Cq => {
                let found = events.lookup::<Owned<CqInner>>(element, Stream::Async);
                match resolve(events, element, found) {
                    Some(h) => event(AsyncElement::Cq(h.object().handle), Hold::Cq(h)),
                    None => gone(),
                }
            }
            EventAffiliation::Qp => {
                let found = events.lookup::<Owned<QpInner>>(element, Stream::Async);
                match resolve(events, element, found) {
                    Some(h) => event(AsyncElement::Qp(h.object().qp_num), Hold::Qp(h)),
                    None => gone(),
                }
            }
            EventAffiliation::Srq => {
                let found = events.lookup::<Owned<SrqInner>>(element, Stream::Async);
                match resolve(events, element, found) {
                    Some(h) => event(AsyncElement::Srq(h.object().handle), Hold::Srq(h)),
                    None => gone(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_affiliations_follow_libibverbs() {
        assert_eq!(AsyncEventType::GID_CHANGE.name(), Some("GID_CHANGE"));
        assert_eq!(AsyncEventType(99).name(), None);
        assert_eq!(AsyncEventType(99).description(), "unknown");
        assert_eq!(format!("{:?}", AsyncEventType(99)), "AsyncEventType(99)");
        assert_eq!(
            AsyncEventType::SQ_DRAINED.affiliation(),
            EventAffiliation::Qp
        );
        assert_eq!(AsyncEventType::CQ_ERR.affiliation(), EventAffiliation::Cq);
        assert_eq!(
            AsyncEventType::SRQ_LIMIT_REACHED.affiliation(),
            EventAffiliation::Srq
        );
        assert_eq!(
            AsyncEventType::PORT_ERR.affiliation(),
            EventAffiliation::Port
        );
        assert_eq!(AsyncEventType(20).affiliation(), EventAffiliation::Port);
        assert_eq!(
            AsyncEventType::DEVICE_FATAL.affiliation(),
            EventAffiliation::Device
        );
    }
}
