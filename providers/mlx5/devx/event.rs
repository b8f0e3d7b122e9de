//! DevX event channels (`MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD`,
//! `mlx5dv_devx_create_event_channel`, `mlx5dv_devx_subscribe_devx_event`,
//! `mlx5dv_devx_get_event`).
//!
//! Kernel side (`devx.c`):
//! - creation takes a mandatory flags attribute: 0, or `OMIT_DATA`;
//! - a subscription names a DevX object (or none, for unaffiliated events
//!   such as a port change), up to 16 event types, and either a cookie
//!   reported with each event or an eventfd to signal instead (never both:
//!   `EINVAL`); event type 0 (completion) fires for DevX CQs only. There is
//!   no unsubscribe: a subscription lives until its object or the channel
//!   is destroyed;
//! - each read returns one event: the 8-byte cookie and the 64-byte EQE
//!   (72 bytes), or with `OMIT_DATA` the cookie alone, where an event of a
//!   subscription already queued is not queued again (coalesced; order
//!   across subscriptions is not kept). A buffer shorter than the record is
//!   `EINVAL` and the event stays queued;
//! - when the kernel could not allocate an event (data mode only) it sets
//!   an overflow flag: the next read returns `EOVERFLOW`, ahead of events
//!   already queued, and clears it;
//! - empty: `EAGAIN` when non-blocking; after the channel's object is
//!   destroyed (device removed, context closed) a blocking read is `EIO`,
//!   a non-blocking one `EAGAIN` forever while `poll` reports `POLLRDHUP`.
//!
//! The reads here always offer a buffer large enough for the channel's
//! mode, report `EOVERFLOW` as [`ErrorKind::EventsLost`] (the next read goes
//! on normally) and a destroyed channel as [`ErrorKind::DeviceRemoved`] in
//! blocking and non-blocking use alike.
//!
//! With `epoll` in edge-triggered mode, drain the channel after each
//! wake-up: call [`DevxEventChannel::try_get_event`] until it returns
//! `Ok(None)`; an event that arrives during the drain makes the fd ready
//! again, so no wake-up is lost.

use std::{
    os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd},
    time::Duration,
};

use bitflags::bitflags;

use super::{obj::invalid, Devx, DevxObj};
use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    event_fd::{EventFd, Wait},
    sys::Errno,
};

/// Bytes of the cookie every record starts with.
const COOKIE: usize = 8;
/// Bytes of an EQE (`struct mlx5_eqe`).
pub const EQE_LEN: usize = 64;
/// Bytes of a record in data mode: the cookie and the EQE.
pub const DATA_RECORD_LEN: usize = COOKIE + EQE_LEN;
/// Most event types one subscription may name (`MAX_NUM_EVENTS`).
pub const MAX_SUBSCRIBE_TYPES: usize = 16;

bitflags! {
    /// Flags of [`Devx::create_event_channel`]
    /// (`enum mlx5dv_devx_create_event_channel_flags`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct EventChannelFlags: u32 {
        /// Events carry only their cookie, and events of one subscription
        /// are coalesced until read (`MLX5DV_DEVX_CREATE_EVENT_CHANNEL_FLAGS_OMIT_EV_DATA`).
        const OMIT_DATA = abi::MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA;
    }
}

/// Where the events of a subscription go.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// To the channel, with this cookie.
    Cookie(u64),
    /// To an eventfd (`eventfd(2)`), signalled once per event; these events
    /// never reach the channel. One event type per eventfd subscription.
    EventFd(BorrowedFd<'a>),
}

/// A DevX event channel (`struct mlx5dv_devx_event_channel`).
///
/// Overflow ([`EventsLost`](crate::ErrorKind::EventsLost)), removal,
/// `O_NONBLOCK` and `EINTR` follow [the event rules](crate::events) of
/// every event fd.
#[derive(Debug)]
pub struct DevxEventChannel {
    devx: Devx,
    fd: EventFd,
    omit_data: bool,
}

/// One event read from a channel (`struct mlx5dv_devx_async_event_hdr` and
/// its data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DevxEvent {
    /// The cookie of the subscription the event belongs to.
    pub cookie: u64,
    /// The event queue entry (`struct mlx5_eqe`); `None` on an
    /// `OMIT_DATA` channel.
    pub eqe: Option<[u8; EQE_LEN]>,
}

/// `MLX5_EVENT_TYPE_*` values of the events most users subscribe to
/// (`include/linux/mlx5/device.h`).
pub mod event_type {
    /// A completion on a DevX CQ.
    pub const COMP: u16 = 0x00;
    /// Communication established on a QP.
    pub const COMM_EST: u16 = 0x02;
    /// A CQ error (overrun, bad access).
    pub const CQ_ERROR: u16 = 0x04;
    /// A catastrophic error of a work queue.
    pub const WQ_CATAS_ERROR: u16 = 0x05;
    /// A port's state changed (unaffiliated).
    pub const PORT_CHANGE: u16 = 0x09;
    /// The SRQ's limit was reached.
    pub const SRQ_RQ_LIMIT: u16 = 0x14;
}

impl DevxEvent {
    /// The EQE's event type (`MLX5_EVENT_TYPE_*`, byte 1).
    pub fn event_type(&self) -> Option<u8> {
        self.eqe.map(|e| e[1])
    }

    /// The EQE's sub-type (byte 3).
    pub fn sub_type(&self) -> Option<u8> {
        self.eqe.map(|e| e[3])
    }

    /// The EQE's event data (`union ev_data`, bytes 32..60).
    pub fn data(&self) -> Option<&[u8]> {
        self.eqe.as_ref().map(|e| &e[32..60])
    }

    /// The CQ a completion (`struct mlx5_eqe_comp`: the CQN at data offset
    /// 24) or CQ error event (`struct mlx5_eqe_cq_err`: at offset 0) is for.
    pub fn cqn(&self) -> Option<u32> {
        let e = self.eqe.as_ref()?;
        let at = match u16::from(e[1]) {
            event_type::COMP => 56,
            event_type::CQ_ERROR => 32,
            _ => return None,
        };
        Some(u32::from_be_bytes([e[at], e[at + 1], e[at + 2], e[at + 3]]) & 0x00ff_ffff)
    }

    /// The syndrome of a CQ error event (`struct mlx5_eqe_cq_err`, data
    /// offset 11): 1 is an overrun, 2 an access violation.
    pub fn cq_error_syndrome(&self) -> Option<u8> {
        let e = self.eqe.as_ref()?;
        (u16::from(e[1]) == event_type::CQ_ERROR).then_some(e[43])
    }

    /// Decodes a record as a channel of either mode returns it.
    pub fn parse(record: &[u8], omit_data: bool) -> Option<Self> {
        let want = if omit_data { COOKIE } else { DATA_RECORD_LEN };
        if record.len() != want {
            return None;
        }
        let mut cookie = [0u8; COOKIE];
        cookie.copy_from_slice(&record[..COOKIE]);
        let eqe = (!omit_data).then(|| {
            let mut e = [0u8; EQE_LEN];
            e.copy_from_slice(&record[COOKIE..]);
            e
        });
        Some(DevxEvent {
            cookie: u64::from_ne_bytes(cookie),
            eqe,
        })
    }
}

impl Devx {
    /// Creates an event channel, like `mlx5dv_devx_create_event_channel`.
    #[doc(alias = "mlx5dv_devx_create_event_channel")]
    pub fn create_event_channel(&self, flags: EventChannelFlags) -> Result<DevxEventChannel> {
        const OP: &str = "MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC";
        let dev = self.device();
        let mut cmd = dev.ioctl_cmd(
            abi::MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD,
            abi::MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC,
        );
        let at = cmd.new_fd(abi::MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE);
        cmd.flags_in(
            abi::MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS,
            u64::from(flags.bits()),
        );
        dev.ioctl(&mut cmd).map_err(|e| Error::sys(OP, e))?;
        let fd = cmd
            .take_fd(at)
            .ok_or_else(|| Error::new(OP, ErrorKind::Malformed, "the kernel returned no fd"))?;
        Ok(DevxEventChannel {
            devx: self.clone(),
            fd: EventFd::new(self.kernel(), fd, "DevX event channel"),
            omit_data: flags.contains(EventChannelFlags::OMIT_DATA),
        })
    }
}

/// The channel's fd, to `poll`/`epoll` for readiness before getting an
/// event.
///
/// Never `read` it yourself: an event read that way is gone for the
/// library (the kernel hands each record to one reader). DevX events need
/// no acknowledgement, so no destroy waits for it.
impl AsFd for DevxEventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for DevxEventChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_fd().as_raw_fd()
    }
}

impl DevxEventChannel {
    /// Whether the channel was created with `OMIT_DATA`.
    pub fn omits_data(&self) -> bool {
        self.omit_data
    }

    /// The size of the records this channel returns (8 or 72 bytes).
    pub fn record_len(&self) -> usize {
        if self.omit_data {
            COOKIE
        } else {
            DATA_RECORD_LEN
        }
    }

    /// Subscribes to events of `obj` (`None`: unaffiliated events, such as
    /// port changes), like `mlx5dv_devx_subscribe_devx_event` (a cookie) or
    /// `mlx5dv_devx_subscribe_devx_event_fd` (an eventfd, with exactly one
    /// event type). One subscription per type; it lives until the object
    /// or the channel is destroyed.
    #[doc(alias = "mlx5dv_devx_subscribe_devx_event")]
    #[doc(alias = "mlx5dv_devx_subscribe_devx_event_fd")]
    pub fn subscribe(
        &self,
        obj: Option<&DevxObj>,
        types: &[u16],
        target: Target<'_>,
    ) -> Result<()> {
        const OP: &str = "MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT";
        if types.is_empty() || types.len() > MAX_SUBSCRIBE_TYPES {
            return Err(invalid(
                OP,
                format!(
                    "a subscription names 1 to {MAX_SUBSCRIBE_TYPES} event types, not {}",
                    types.len()
                ),
            ));
        }
        if matches!(target, Target::EventFd(_)) && types.len() != 1 {
            return Err(invalid(
                OP,
                "an eventfd subscription names exactly one event type (as rdma-core's \
                 mlx5dv_devx_subscribe_devx_event_fd)",
            ));
        }
        let list: Vec<u8> = types.iter().flat_map(|t| t.to_ne_bytes()).collect();
        let dev = self.devx.device();
        let mut cmd = dev.ioctl_cmd(
            abi::MLX5_IB_OBJECT_DEVX,
            abi::MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT,
        );
        cmd.fd(
            abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE,
            self.fd.as_fd(),
        );
        if let Some(o) = obj {
            cmd.object(
                abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE,
                o.handle(),
            );
        }
        cmd.input(abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST, &list);
        match target {
            Target::Cookie(c) => {
                cmd.input_u64(abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE, c);
            }
            Target::EventFd(fd) => {
                let raw = u32::try_from(fd.as_raw_fd())
                    .map_err(|_| invalid(OP, "a negative fd is no eventfd"))?;
                cmd.input_u32(abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM, raw);
            }
        }
        dev.ioctl(&mut cmd).map_err(|e| match e {
            Errno::EINVAL => Error::sys(OP, e).with_detail(
                "the kernel refused the subscription: the context has no DevX uid, an event \
                 type is not one the device reports for this object (or, with no object, \
                 not an unaffiliated event), or the object is not a DevX object",
            ),
            e => Error::sys(OP, e),
        })
    }

    /// The next event, waiting for one, like `mlx5dv_devx_get_event`.
    #[doc(alias = "mlx5dv_devx_get_event")]
    pub fn get_event(&self) -> Result<DevxEvent> {
        self.next(Wait::Forever)?
            .ok_or_else(|| Error::new("read DevX event channel", ErrorKind::Malformed, "no event"))
    }

    /// The next event, waiting at most `timeout` (`None`: forever).
    pub fn get_event_timeout(&self, timeout: Option<Duration>) -> Result<Option<DevxEvent>> {
        self.next(Wait::timeout(timeout))
    }

    /// The next event if one is queued (for `poll`/`epoll` users).
    pub fn try_get_event(&self) -> Result<Option<DevxEvent>> {
        self.next(Wait::Never)
    }

    fn next(&self, wait: Wait) -> Result<Option<DevxEvent>> {
        let mut buf = [0u8; DATA_RECORD_LEN];
        let len = self.record_len();
        let Some(n) = self.read_wait(&mut buf[..len], wait)? else {
            return Ok(None);
        };
        DevxEvent::parse(&buf[..n], self.omit_data)
            .map(Some)
            .ok_or_else(|| {
                Error::new(
                    "read DevX event channel",
                    ErrorKind::Malformed,
                    format!("a record of {n} bytes (expected {len})"),
                )
            })
    }

    /// Reads the next record (the cookie, then the EQE unless the channel
    /// omits data) into `buf`, waiting at most `timeout` (`None`: forever);
    /// returns its length. A `buf` shorter than [`record_len`] is refused
    /// here, naming the size needed (the kernel would refuse it with
    /// `EINVAL` and keep the event queued, so a retry loop would spin).
    ///
    /// [`record_len`]: DevxEventChannel::record_len
    pub fn read_raw(&self, buf: &mut [u8], timeout: Option<Duration>) -> Result<Option<usize>> {
        let len = self.record_len();
        if buf.len() < len {
            return Err(invalid(
                "read DevX event channel",
                format!(
                    "a buffer of {} bytes is too small: this channel's records are {len} bytes",
                    buf.len()
                ),
            ));
        }
        self.read_wait(buf, Wait::timeout(timeout))
    }

    /// One `read(2)` of the channel's fd into `buf`, answered as the
    /// kernel answers it, which is what `mlx5dv_devx_get_event` does
    /// (`devx_async_event_read`): the record's length; `EOVERFLOW` first
    /// when events were lost; with nothing queued, a wait in the kernel,
    /// or `EAGAIN` when the fd is `O_NONBLOCK` (the program's flag, or this
    /// library's once a timed or `try_` get has run); `EINVAL` and the
    /// event kept when `buf` is shorter than the record; `EIO` (blocking)
    /// or `EAGAIN` (non-blocking) once the channel's object is destroyed;
    /// `EINTR` when a signal interrupts the wait. Nothing is checked or
    /// retried here: the error's [`Error::errno`] is the kernel's.
    pub fn read_once(&self, buf: &mut [u8]) -> Result<usize> {
        self.fd
            .kernel()
            .read(self.fd.as_fd(), buf)
            .map_err(|e| Error::sys("read DevX event channel", e))
    }

    fn read_wait(&self, buf: &mut [u8], wait: Wait) -> Result<Option<usize>> {
        const OP: &str = "read DevX event channel";
        self.fd
            .next(wait, OP, |k, fd| k.read(fd, &mut *buf), Some)
            .map_err(|e| match e.kernel_errno() {
                Some(Errno::EOVERFLOW) => Error::new(
                    OP,
                    ErrorKind::EventsLost,
                    "the kernel could not queue some events and dropped them: resynchronise \
                     by querying the objects; later events read normally",
                ),
                _ => e,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_decode_in_both_modes() {
        let mut rec = [0u8; DATA_RECORD_LEN];
        rec[..8].copy_from_slice(&0x1122_3344_5566_7788u64.to_ne_bytes());
        rec[8 + 1] = event_type::CQ_ERROR as u8;
        rec[8 + 32..8 + 36].copy_from_slice(&0xab00_0042u32.to_be_bytes());
        rec[8 + 43] = 1;
        let e = DevxEvent::parse(&rec, false).unwrap();
        assert_eq!(e.cookie, 0x1122_3344_5566_7788);
        assert_eq!(e.event_type(), Some(4));
        assert_eq!(e.cqn(), Some(0x42));
        assert_eq!(e.cq_error_syndrome(), Some(1));
        let mut comp = [0u8; DATA_RECORD_LEN];
        comp[8 + 56..8 + 60].copy_from_slice(&0x0000_0777u32.to_be_bytes());
        let c = DevxEvent::parse(&comp, false).unwrap();
        assert_eq!(
            (c.event_type(), c.cqn(), c.cq_error_syndrome()),
            (Some(0), Some(0x777), None)
        );
        let o = DevxEvent::parse(&rec[..8], true).unwrap();
        assert_eq!(
            (o.cookie, o.eqe, o.cqn()),
            (0x1122_3344_5566_7788, None, None)
        );
        assert!(DevxEvent::parse(&rec[..8], false).is_none());
        assert!(DevxEvent::parse(&rec, true).is_none());
        assert!(DevxEvent::parse(&rec[..71], false).is_none());
    }
}
