//! Asynchronous DevX commands and events.
//!
//! - Command completion fds: `mlx5dv_devx_create_cmd_comp`,
//!   `_destroy_cmd_comp`, `mlx5dv_devx_obj_query_async`,
//!   `mlx5dv_devx_get_async_cmd_comp`.
//! - Event channels: `mlx5dv_devx_create_event_channel`,
//!   `_destroy_event_channel`, `mlx5dv_devx_subscribe_devx_event`,
//!   `_subscribe_devx_event_fd`, `mlx5dv_devx_get_event`.
//!
//! The gets are one `read(2)` of the fd the C struct shows, as libmlx5's
//! are (`_mlx5dv_devx_get_event`, `_mlx5dv_devx_get_async_cmd_comp`), so
//! the kernel's answer is the program's (`devx_async_event_read`,
//! `devx_async_cmd_event_read` in `drivers/infiniband/hw/mlx5/devx.c`):
//! - `mlx5dv_devx_get_event` returns the record's length: 72 bytes (the
//!   subscription's cookie and the 64-byte EQE) on a channel made without
//!   flags, 8 (the cookie) on an `OMIT_EV_DATA` one, where the events of
//!   one subscription are coalesced until read. `-1` and `errno`:
//!   `EOVERFLOW` once after the kernel lost events (data mode), ahead of
//!   the events still queued; `EINVAL` for a buffer shorter than the record
//!   (the event stays queued), or a read of fewer than 8 bytes; with
//!   nothing queued the call waits in the kernel, or fails with `EAGAIN`
//!   when the program made the fd `O_NONBLOCK`; once the channel's object
//!   is destroyed (the context closed, the device removed) a blocking
//!   read is `EIO` and a non-blocking one `EAGAIN` forever, while `poll`
//!   reports `POLLRDHUP`; `EINTR` when a signal interrupts the wait.
//! - `mlx5dv_devx_get_async_cmd_comp` returns 0 or the positive errno:
//!   `ENOSPC` (and the answer kept) when the buffer cannot hold the 8-byte
//!   header and the output length the query asked for, `EINVAL` for a
//!   read of fewer than 8 bytes, `EAGAIN`/`EIO` as above.
//! - Destroying a channel or a completion fd closes its fd: the
//!   subscriptions on it go with it.

use crate::handle::Handle;
use core::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, BorrowedFd};

use uverbs::{
    mlx5::{DevxCmdComp, DevxEventChannel, EventChannelFlags, Target},
    sys::Errno,
};

use super::{devx_of, input, obj::Obj, of, output, positive};
use crate::{
    errno,
    layout::{
        context::ibv_context,
        mlx5::{
            mlx5dv_devx_async_cmd_hdr, mlx5dv_devx_async_event_hdr, mlx5dv_devx_cmd_comp,
            mlx5dv_devx_event_channel,
        },
    },
};

/// The header every answer and event starts with: a `wr_id` or a cookie.
const HDR: usize = 8;

/// A command completion fd: what `mlx5dv_devx_create_cmd_comp` returns a
/// pointer to.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct CmdComp {
    /// The C part (`struct mlx5dv_devx_cmd_comp *` is this object's address).
    pub c: mlx5dv_devx_cmd_comp,
    comp: DevxCmdComp,
}

/// An event channel: what `mlx5dv_devx_create_event_channel` returns a
/// pointer to.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct EventChannel {
    /// The C part (`struct mlx5dv_devx_event_channel *` is this object's address).
    pub c: mlx5dv_devx_event_channel,
    ch: DevxEventChannel,
}

/// Creates a command completion fd; NULL and `errno` on failure.
///
/// # Safety
/// `context` is NULL or an open context of this library.
#[export_name = "uverbs_mlx5dv_devx_create_cmd_comp"]
pub unsafe extern "C" fn mlx5dv_devx_create_cmd_comp(
    context: *mut ibv_context,
) -> *mut mlx5dv_devx_cmd_comp {
    let made = (|| {
        // SAFETY: the caller's contract.
        let (_, devx) = unsafe { devx_of(context) }?;
        let comp = devx.create_cmd_comp().map_err(of)?;
        Ok(Box::into_raw(Box::new(CmdComp {
            c: mlx5dv_devx_cmd_comp {
                fd: comp.as_raw_fd(),
            },
            comp,
        })))
    })();
    match made {
        Ok(p) => p.cast(),
        Err(e) => errno::null(e),
    }
}

/// Destroys a command completion fd (closes it; answers not read are
/// dropped).
///
/// # Safety
/// `cmd_comp` is NULL or a live completion fd of this library.
#[export_name = "uverbs_mlx5dv_devx_destroy_cmd_comp"]
pub unsafe extern "C" fn mlx5dv_devx_destroy_cmd_comp(cmd_comp: *mut mlx5dv_devx_cmd_comp) {
    if !cmd_comp.is_null() {
        // SAFETY: made by `Box::into_raw` above; the program gives it up.
        drop(unsafe { Box::from_raw(cmd_comp.cast::<CmdComp>()) });
    }
}

/// Starts a PRM query of `obj` whose answer (`outlen` bytes of output and
/// `wr_id`) arrives on `cmd_comp`: 0 or the positive errno (`EAGAIN` when
/// more than 1 MiB of answers wait to be read).
///
/// # Safety
/// `obj` and `cmd_comp` are NULL or live objects of this library; `in_`
/// holds `inlen` bytes.
#[export_name = "uverbs_mlx5dv_devx_obj_query_async"]
pub unsafe extern "C" fn mlx5dv_devx_obj_query_async(
    obj: *mut c_void,
    in_: *const c_void,
    inlen: usize,
    outlen: usize,
    wr_id: u64,
    cmd_comp: *mut mlx5dv_devx_cmd_comp,
) -> c_int {
    positive((|| {
        // SAFETY: the caller's contract.
        let o = unsafe { Obj::from_c(obj) }?;
        // SAFETY: the caller's contract; `c` is the first field.
        let comp = unsafe { cmd_comp.cast::<CmdComp>().as_ref() }.ok_or(Errno::EINVAL)?;
        // SAFETY: the caller's contract.
        let cmd_in = unsafe { input(in_, inlen) }?;
        // A u16 constant for the kernel (`uverbs_get_const`): larger is EINVAL.
        let out_len = u16::try_from(outlen).map_err(|_| Errno::EINVAL)?;
        o.get()?
            .query_async(cmd_in, out_len, wr_id, &comp.comp)
            .map_err(of)
    })())
}

/// Reads the next answer into `cmd_resp` (`wr_id`, then the output): 0
/// or the positive errno (see the module documentation).
///
/// # Safety
/// `cmd_comp` is NULL or a live completion fd of this library;
/// `cmd_resp` has room for `cmd_resp_len` bytes.
#[export_name = "uverbs_mlx5dv_devx_get_async_cmd_comp"]
pub unsafe extern "C" fn mlx5dv_devx_get_async_cmd_comp(
    cmd_comp: *mut mlx5dv_devx_cmd_comp,
    cmd_resp: *mut mlx5dv_devx_async_cmd_hdr,
    cmd_resp_len: usize,
) -> c_int {
    positive((|| {
        // SAFETY: the caller's contract; `c` is the first field.
        let comp = unsafe { cmd_comp.cast::<CmdComp>().as_ref() }.ok_or(Errno::EINVAL)?;
        // SAFETY: the caller's contract.
        let buf = unsafe { output(cmd_resp.cast(), cmd_resp_len) }?;
        match comp.comp.read_once(buf).map_err(of)? {
            n if n < HDR => Err(Errno::EINVAL),
            _ => Ok(()),
        }
    })())
}

/// Creates an event channel (`flags`: 0 or
/// `MLX5DV_DEVX_CREATE_EVENT_CHANNEL_FLAGS_OMIT_EV_DATA`; the kernel
/// refuses others with `EINVAL`); NULL and `errno` on failure.
///
/// # Safety
/// `context` is NULL or an open context of this library.
#[export_name = "uverbs_mlx5dv_devx_create_event_channel"]
pub unsafe extern "C" fn mlx5dv_devx_create_event_channel(
    context: *mut ibv_context,
    flags: u32,
) -> *mut mlx5dv_devx_event_channel {
    let made = (|| {
        // SAFETY: the caller's contract.
        let (_, devx) = unsafe { devx_of(context) }?;
        let ch = devx
            .create_event_channel(EventChannelFlags::from_bits_retain(flags))
            .map_err(of)?;
        Ok(Box::into_raw(Box::new(EventChannel {
            c: mlx5dv_devx_event_channel { fd: ch.as_raw_fd() },
            ch,
        })))
    })();
    match made {
        Ok(p) => p.cast(),
        Err(e) => errno::null(e),
    }
}

/// Destroys an event channel: its fd is closed, its subscriptions and
/// queued events go with it.
///
/// # Safety
/// `event_channel` is NULL or a live channel of this library.
#[export_name = "uverbs_mlx5dv_devx_destroy_event_channel"]
pub unsafe extern "C" fn mlx5dv_devx_destroy_event_channel(
    event_channel: *mut mlx5dv_devx_event_channel,
) {
    if !event_channel.is_null() {
        // SAFETY: made by `Box::into_raw` above; the program gives it up.
        drop(unsafe { Box::from_raw(event_channel.cast::<EventChannel>()) });
    }
}

/// The channel behind a program's pointer.
///
/// # Safety
/// `p` is NULL or a live channel of this library.
unsafe fn channel<'a>(p: *mut mlx5dv_devx_event_channel) -> Result<&'a EventChannel, Errno> {
    // SAFETY: the caller's contract; `c` is the first field.
    unsafe { p.cast::<EventChannel>().as_ref() }.ok_or(Errno::EINVAL)
}

/// Subscribes `event_channel` to the events `events_num` lists
/// (`events_sz` bytes of `u16` event types) of `obj`, or with `obj` NULL
/// to unaffiliated events, each reported with `cookie`: 0 or the positive
/// errno (the kernel's `EINVAL` for a type the object does not raise, a
/// list of more than 16, an odd size).
///
/// # Safety
/// `event_channel` is NULL or a live channel of this library, `obj` NULL
/// or a live DevX object; `events_num` holds `events_sz` bytes.
#[export_name = "uverbs_mlx5dv_devx_subscribe_devx_event"]
pub unsafe extern "C" fn mlx5dv_devx_subscribe_devx_event(
    event_channel: *mut mlx5dv_devx_event_channel,
    obj: *mut c_void,
    events_sz: u16,
    events_num: *mut u16,
    cookie: u64,
) -> c_int {
    positive((|| {
        // SAFETY: the caller's contract.
        let ch = unsafe { channel(event_channel) }?;
        // SAFETY: the caller's contract.
        let bytes = unsafe { input(events_num.cast(), usize::from(events_sz)) }?;
        // `uverbs_attr_ptr_get_array_size`: a whole number of u16s.
        if bytes.len() % 2 != 0 {
            return Err(Errno::EINVAL);
        }
        let types: Vec<u16> = bytes
            .chunks_exact(2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
            .collect();
        subscribe(ch, obj, &types, Target::Cookie(cookie))
    })())
}

/// Subscribes `event_channel` to event `event_num` of `obj` (NULL:
/// unaffiliated), signalling the eventfd `fd` instead of queuing on the
/// channel: 0 or the positive errno (`EBADF` for an fd that is not open,
/// `EINVAL` for one that is no eventfd).
///
/// # Safety
/// As [`mlx5dv_devx_subscribe_devx_event`].
#[export_name = "uverbs_mlx5dv_devx_subscribe_devx_event_fd"]
pub unsafe extern "C" fn mlx5dv_devx_subscribe_devx_event_fd(
    event_channel: *mut mlx5dv_devx_event_channel,
    fd: c_int,
    obj: *mut c_void,
    event_num: u16,
) -> c_int {
    positive((|| {
        // SAFETY: the caller's contract.
        let ch = unsafe { channel(event_channel) }?;
        // eventfd_ctx_fdget of a negative number.
        if fd < 0 {
            return Err(Errno::EBADF);
        }
        // SAFETY: not -1; the kernel looks the number up (EBADF when it is
        // not open) and the borrow ends with this call.
        let efd = unsafe { BorrowedFd::borrow_raw(fd) };
        subscribe(ch, obj, &[event_num], Target::EventFd(efd))
    })())
}

/// A subscription, with the object locked shared while the kernel takes it.
///
/// # Safety
/// `obj` is NULL or a live DevX object of this library.
fn subscribe(
    ch: &EventChannel,
    obj: *mut c_void,
    types: &[u16],
    target: Target<'_>,
) -> Result<(), Errno> {
    if obj.is_null() {
        return ch.ch.subscribe(None, types, target).map_err(of);
    }
    // SAFETY: the caller's contract (checked not NULL above).
    let o = unsafe { Obj::from_c(obj) }?;
    let g = o.get()?;
    ch.ch.subscribe(Some(&g), types, target).map_err(of)
}

/// Reads the next event into `event_data` (see the module documentation):
/// the bytes read, or -1 and `errno`.
///
/// # Safety
/// `event_channel` is NULL or a live channel of this library;
/// `event_data` has room for `event_resp_len` bytes.
#[export_name = "uverbs_mlx5dv_devx_get_event"]
pub unsafe extern "C" fn mlx5dv_devx_get_event(
    event_channel: *mut mlx5dv_devx_event_channel,
    event_data: *mut mlx5dv_devx_async_event_hdr,
    event_resp_len: usize,
) -> isize {
    let got = (|| {
        // SAFETY: the caller's contract.
        let ch = unsafe { channel(event_channel) }?;
        // SAFETY: the caller's contract.
        let buf = unsafe { output(event_data.cast(), event_resp_len) }?;
        match ch.ch.read_once(buf).map_err(of)? {
            // The cookie is always there (libmlx5's check).
            n if n < HDR => Err(Errno::EINVAL),
            n => Ok(n),
        }
    })();
    match got {
        Ok(n) => n as isize,
        Err(e) => errno::minus_one(e) as isize,
    }
}
