//! Event channels: `rdma_create_event_channel`, `rdma_destroy_event_channel`.
//!
//! `struct rdma_event_channel` is only the fd, which programs poll and
//! make `O_NONBLOCK` (`fcntl(channel->fd, ...)`); it is uverbs'
//! `EventChannel`'s own fd, whose gets honour that flag.

#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd};

use uverbs::cm::EventChannel;

use crate::{device::kernel, errno, handle::Handle, layout::rdmacm::rdma_event_channel};

/// An event channel: what `rdma_create_event_channel` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Channel {
    /// The C part; programs hold its address.
    pub c: rdma_event_channel,
    /// The uverbs channel.
    pub uv: EventChannel,
}

crate::handle!(Channel: rdma_event_channel = c);

impl Channel {
    /// Boxes `uv` and returns the program's pointer.
    pub(crate) fn into_c_new(uv: EventChannel) -> *mut rdma_event_channel {
        let fd = uv.as_fd().as_raw_fd();
        Box::new(Channel {
            c: rdma_event_channel { fd },
            uv,
        })
        .into_c()
    }

    /// Opens a new channel (a sync id's private one, too).
    pub(crate) fn open() -> Result<*mut rdma_event_channel, uverbs::sys::Errno> {
        EventChannel::open_with(kernel())
            .map(Self::into_c_new)
            .map_err(|e| super::of(&e))
    }
}

/// `rdma_create_event_channel`: opens `/dev/infiniband/rdma_cm`; NULL and
/// `errno` on failure (`ENODEV` when rdma_ucm is not loaded, as the open
/// fails).
///
/// # Safety
/// None.
#[export_name = "uverbs_rdma_create_event_channel"]
pub unsafe extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    match Channel::open() {
        Ok(c) => c,
        Err(e) => errno::null(e),
    }
}

/// `rdma_destroy_event_channel`: closes the channel. As with librdmacm,
/// the program destroys the ids on it and acknowledges its events first.
///
/// # Safety
/// `channel` is NULL or a live channel of this library, not used after.
#[export_name = "uverbs_rdma_destroy_event_channel"]
pub unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    if channel.is_null() {
        return;
    }
    // SAFETY: the caller's contract: made by `into_c`, given up now.
    unsafe { Channel::free(channel) };
}
