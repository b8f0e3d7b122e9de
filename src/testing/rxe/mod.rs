//! rxe's kernel side, faked: the one simulation of a Linux 6.1 kernel with
//! an rxe device that the unit tests, the host tests (`tests/*_fake.rs`)
//! and `uverbs perf micro --fake` share (feature `test-utils`, public as
//! `uverbs::testing::rxe`).
//!
//! [`FakeRxe`] answers what the real kernel answers for the calls a context
//! makes (netlink discovery, GET_CONTEXT, ASYNC_EVENT_ALLOC, QUERY_PORT,
//! EX_QUERY_DEVICE, the GID queries, object create and destroy with the
//! events reported), with values taken from the rxe test guest, and can be
//! told to behave like older kernels (no ioctl at all, or no QUERY_PORT
//! method) or a removed device. Everything but the rings and the doorbell
//! goes through a [`FakeKernel`], which logs the calls.
//!
//! Ring memory is shared as the kernel shares it: each queue is a memfd
//! mapped twice, once for the library (the `mmap` answer) and once for the
//! fake's [`RxeRing`] view, which plays the kernel's side of the index
//! protocol (`drivers/infiniband/sw/rxe/rxe_queue.h`) with its own code,
//! independent of the provider's `queue.rs`, so the two check each other. A
//! view keeps its mapping alive, so it stays valid after the library has
//! destroyed the queue.
//!
//! [`FastDoorbell`] is the same fake with a doorbell `write` that only
//! returns, for instruction counts of the data path (`benches/callgrind.sh`).
//!
//! The code: this file holds the fake, its knobs and [`fake_rxe`];
//! `queries.rs` what the device answers that makes no object (netlink
//! discovery, GET_CONTEXT, the device, port and GID queries), `objects.rs`
//! the objects and their events, `ring.rs` the kernel's view of a ring
//! ([`RxeRing`]). The device, port and GID answers themselves are
//! `src/testing/device.rs`'s, which the mlx5 model shares.
#![allow(unsafe_code)]

mod objects;
mod queries;
mod resize;
mod ring;

use std::{
    ffi::OsString,
    os::fd::{BorrowedFd, OwnedFd},
    path::Path,
    sync::{
        atomic::{AtomicBool, AtomicI32, Ordering},
        Arc, Condvar, Mutex,
    },
    time::Duration,
};

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    sys::{Errno, IoctlCmd, Kernel, Mapping, Protection, UcmaCmd, WriteCmd},
    testing::kernel::FakeKernel,
};

pub use super::device::port_attr;
use super::device::sysfs_gid;
use objects::{objects_ioctl, objects_write};
pub use objects::{Kind, Objects};
use queries::{ioctl, netlink_reply, write};
use ring::{ring_offset, Rings, RQ_OFFSET};
pub use ring::{RxeRing, HEADER_LEN, RING_LEN, RING_LOG2_STRIDE, RING_SLOTS};

/// The device's name.
pub const DEV: &str = "rxe0";
/// Its node GUID (host order).
pub const NODE_GUID: u64 = 0x5054_00ff_fe12_3456;
/// The device number of its uverbs node.
pub const DEV_T: u64 = (231 << 8) | 192; // makedev(231, 192) on glibc/musl
/// GID 1: the IPv4-mapped address of the guest's netdev.
pub const IPV4_GID: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1];
/// GID 0: the link-local address.
pub const LINK_LOCAL_GID: [u8; 16] = [
    0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x52, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56,
];

/// Knobs for kernel behaviour.
#[derive(Debug, Default)]
pub struct Behaviour {
    /// Every ioctl fails with ENOTTY (a kernel without the ioctl interface).
    pub no_ioctl: AtomicBool,
    /// QUERY_PORT and the GID methods fail with EPROTONOSUPPORT.
    pub no_query_methods: AtomicBool,
    /// Netlink fails (discovery must use sysfs).
    pub no_netlink: AtomicBool,
    /// The device is gone (disassociated, as mlx5 after a removal): every
    /// command fails with EIO.
    pub removed: AtomicBool,
    /// Destroys of CQs, QPs, SRQs, MRs, MWs and PDs fail with this errno
    /// (0: they do not), leaving the object in place, as a kernel that
    /// refuses (rxe refuses to deregister an MR under a bound window with
    /// `EINVAL`, uverbs a PD in use with `EBUSY`).
    pub fail_destroy: AtomicI32,
    /// Holds destroy commands of CQs, QPs, SRQs, MRs, MWs and PDs in the
    /// kernel while held, as a slow kernel would.
    pub destroy_pause: Pause,
}

/// A switch that holds the threads passing it until released; see
/// [`Behaviour::destroy_pause`].
#[derive(Debug, Default)]
pub struct Pause {
    /// (held, threads waiting in it).
    state: Mutex<(bool, u32)>,
    changed: Condvar,
}

impl Pause {
    /// From now on, threads passing wait.
    pub fn hold(&self) {
        self.lock().0 = true;
    }

    /// Lets every waiting and later thread pass.
    pub fn release(&self) {
        self.lock().0 = false;
        self.changed.notify_all();
    }

    /// Waits until `n` threads wait in the pause; false after `timeout`.
    pub fn wait_for_waiters(&self, n: u32, timeout: Duration) -> bool {
        let guard = self.lock();
        let (guard, result) = self
            .changed
            .wait_timeout_while(guard, timeout, |s| s.1 < n)
            .unwrap_or_else(|p| p.into_inner());
        drop(guard);
        !result.timed_out()
    }

    /// Waits while held.
    pub(crate) fn pass(&self) {
        let mut s = self.lock();
        if !s.0 {
            return;
        }
        s.1 += 1;
        self.changed.notify_all();
        while s.0 {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.1 -= 1;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (bool, u32)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The fake kernel with one rxe device; see the module documentation.
#[derive(Debug)]
pub struct FakeRxe {
    /// The scripted kernel behind everything but rings and the doorbell:
    /// its call log, its queued reads, its sysfs.
    pub kernel: Arc<FakeKernel>,
    /// Switches for kernel behaviour.
    pub behaviour: Arc<Behaviour>,
    /// The objects created so far.
    pub objects: Arc<Objects>,
    /// The kernel's view of every ring mapped, by mmap offset.
    rings: Arc<Mutex<Rings>>,
}

impl FakeRxe {
    /// This fake as the transport a context is opened with.
    pub fn dyn_kernel(&self) -> Arc<dyn Kernel> {
        self.kernel.clone()
    }

    /// The kernel's view of the ring of the CQ with kernel `handle` (the
    /// new one after a resize).
    pub fn cq_ring(&self, handle: u32) -> Option<RxeRing> {
        let offset = self.lock_rings().cq_offset(handle);
        self.ring(offset)
    }

    /// The kernel's view of the send queue of the QP with kernel `handle`.
    pub fn sq_ring(&self, handle: u32) -> Option<RxeRing> {
        self.ring(ring_offset(handle))
    }

    /// The kernel's view of the receive queue of the QP with kernel `handle`.
    pub fn rq_ring(&self, handle: u32) -> Option<RxeRing> {
        self.ring(ring_offset(handle) + RQ_OFFSET)
    }

    /// The kernel's view of the ring of the SRQ with kernel `handle`.
    pub fn srq_ring(&self, handle: u32) -> Option<RxeRing> {
        self.ring(ring_offset(handle))
    }

    fn ring(&self, offset: u64) -> Option<RxeRing> {
        self.lock_rings().views.get(&offset).cloned()
    }

    fn lock_rings(&self) -> std::sync::MutexGuard<'_, Rings> {
        self.rings.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `user_handle` the library gave the object with kernel `handle`.
    pub fn user_handle(&self, kind: Kind, handle: u32) -> u64 {
        let s = self.objects.lock();
        *s.user_handles
            .get(&(kind, handle))
            .unwrap_or_else(|| panic!("no {kind:?} with handle {handle}"))
    }

    /// Queues one async event record (what a `read` of the async fd
    /// returns). An event about an object counts as reported for it when it
    /// is read, as the kernel counts it (the count its destroy returns);
    /// the object's destroy drops its unread events.
    pub fn push_event(&self, event_type: u32, element: u64) {
        let mut d = abi::IbUverbsAsyncEventDesc::new_zeroed();
        d.element = element;
        d.event_type = event_type;
        self.kernel.push_read(Ok(d.as_bytes().to_vec()));
    }

    /// Queues a completion event of the CQ with kernel `handle` on its
    /// completion channel (counted when read, as [`FakeRxe::push_event`]);
    /// false when the CQ has no channel.
    pub fn push_comp_event(&self, handle: u32) -> bool {
        let (uh, fd) = {
            let s = self.objects.lock();
            let Some(&fd) = s.cq_channels.get(&handle) else {
                return false;
            };
            (s.user_handles[&(Kind::Cq, handle)], fd)
        };
        self.kernel.push_read_to(fd, Ok(uh.to_ne_bytes().to_vec()));
        true
    }

    /// How many times CQs were armed (`REQ_NOTIFY_CQ`).
    pub fn arms(&self) -> u32 {
        self.objects.lock().arms
    }

    /// Kernel handles destroyed so far, of `kind`.
    pub fn destroyed(&self, kind: Kind) -> Vec<u32> {
        self.objects
            .lock()
            .destroyed
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, h)| *h)
            .collect()
    }
}

/// The device attributes rxe reports (`EX_QUERY_DEVICE`).
pub fn device_attr() -> abi::IbUverbsExQueryDeviceResp {
    super::device::device_attr(NODE_GUID)
}

fn copy_out(out: &mut [u8], bytes: &[u8]) -> Result<(), Errno> {
    if out.len() < bytes.len() {
        return Err(Errno::ENOSPC);
    }
    out[..bytes.len()].copy_from_slice(bytes);
    Ok(())
}

/// A fake kernel with rxe0 (uverbs0) on a 6.1-like kernel.
pub fn fake_rxe() -> Arc<FakeRxe> {
    let kernel = Arc::new(FakeKernel::new());
    let behaviour = Arc::new(Behaviour::default());
    let sys = "/sys/class/infiniband_verbs/uverbs0";
    let ib = "/sys/class/infiniband/rxe0";
    kernel
        .file(format!("{sys}/ibdev"), "rxe0\n")
        .file(format!("{sys}/abi_version"), "2\n")
        .file(format!("{sys}/dev"), "231:192\n")
        .file(format!("{ib}/node_type"), "1: CA\n")
        .file(format!("{ib}/node_guid"), "5054:00ff:fe12:3456\n")
        .file(format!("{ib}/parent"), "dummy0\n")
        .file(format!("{ib}/ports/1/gids/0"), sysfs_gid(&LINK_LOCAL_GID))
        .file(format!("{ib}/ports/1/gids/1"), sysfs_gid(&IPV4_GID))
        .file(format!("{ib}/ports/1/gids/2"), sysfs_gid(&[0; 16]))
        .file(format!("{ib}/ports/1/gid_attrs/types/0"), "RoCE v2\n")
        .file(format!("{ib}/ports/1/gid_attrs/types/1"), "RoCE v2\n")
        .file(format!("{ib}/ports/1/gid_attrs/ndevs/0"), "dummy0\n")
        .file(format!("{ib}/ports/1/gid_attrs/ndevs/1"), "dummy0\n")
        .file("/sys/class/net/dummy0/ifindex", "2\n")
        .char_dev(libc::makedev(231, 192));
    // Empty slots beyond index 2 read as zero GIDs, as sysfs shows them.
    for i in 3..1024 {
        kernel.file(format!("{ib}/ports/1/gids/{i}"), sysfs_gid(&[0; 16]));
    }
    let b = behaviour.clone();
    kernel.on_netlink(move |req| {
        if b.no_netlink.load(Ordering::Relaxed) {
            return Err(Errno::EPROTONOSUPPORT);
        }
        netlink_reply(req)
    });
    let objects = Arc::new(Objects::default());
    let o = objects.clone();
    kernel.on_record_read(move |fd, bytes| o.record_read(fd, bytes));
    let (b, o, k) = (behaviour.clone(), objects.clone(), Arc::downgrade(&kernel));
    kernel.on_ioctl(move |cmd| {
        if b.removed.load(Ordering::Relaxed) {
            return Err(Errno::EIO);
        }
        objects_ioctl(&o, &k, &b, cmd).unwrap_or_else(|| ioctl(&b, cmd))
    });
    let rings = Arc::new(Mutex::new(Rings::default()));
    let (b, o, k) = (behaviour.clone(), objects.clone(), Arc::downgrade(&kernel));
    let r = rings.clone();
    kernel.on_write(move |cmd| {
        if b.removed.load(Ordering::Relaxed) {
            return Err(Errno::EIO);
        }
        if cmd.command == abi::IB_USER_VERBS_CMD_RESIZE_CQ {
            return resize::resize_cq(&o, &r, cmd);
        }
        objects_write(&o, &k, &b, cmd).unwrap_or_else(|| write(cmd))
    });
    // The rxe send doorbell (a 32-byte POST_SEND write) is accepted; a CQ
    // arm (a 16-byte REQ_NOTIFY_CQ write) is counted.
    let (b, o) = (behaviour.clone(), objects.clone());
    kernel.on_raw_write(move |buf| {
        if b.removed.load(Ordering::Relaxed) {
            return Err(Errno::EIO);
        }
        let command = buf
            .get(..4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
        if command == Some(abi::IB_USER_VERBS_CMD_REQ_NOTIFY_CQ) {
            o.lock().arms += 1;
        }
        Ok(buf.len())
    });
    // A ring: rxe's mmap offsets name queues; the fake keeps a view of each.
    // A resized CQ's ring was made by the resize and waits to be mapped.
    let (b, r) = (behaviour.clone(), rings.clone());
    // SAFETY: each mapping is a fresh read-write `RxeRing` (from here, or
    // from a resize) of the length asked for (checked), unmapped only when
    // dropped; the fake keeps a raw view of it and forms no reference into
    // it.
    unsafe {
        kernel.on_mmap(move |offset, len| {
            if b.removed.load(Ordering::Relaxed) {
                return Err(Errno::EIO);
            }
            let mut rings = r.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(pending) = rings.pending.remove(&offset) {
                // `rxe_mmap`: no longer than the queue.
                if len > pending.len() {
                    rings.pending.insert(offset, pending);
                    return Err(Errno::EINVAL);
                }
                return Ok(pending);
            }
            if len != RING_LEN as usize {
                return Err(Errno::EINVAL);
            }
            let (library, view) = RxeRing::new(RING_LOG2_STRIDE, RING_SLOTS)?;
            rings.views.insert(offset, view);
            Ok(library)
        })
    };
    Arc::new(FakeRxe {
        kernel,
        behaviour,
        objects,
        rings,
    })
}

/// [`FakeRxe`] with a doorbell that only returns (`rxe_post_send` for free,
/// nothing logged): the transport of `uverbs perf micro --fake`, so that
/// instruction counts of `post_send` include no fake bookkeeping (a hook in
/// [`FakeKernel`] would put its lock and log into them).
#[derive(Debug)]
pub struct FastDoorbell(pub Arc<FakeRxe>);

// SAFETY: every mapping comes from the wrapped `FakeKernel`, whose
// implementation keeps the contract.
unsafe impl Kernel for FastDoorbell {
    fn open_rdwr(&self, path: &Path) -> Result<OwnedFd, Errno> {
        self.0.kernel.open_rdwr(path)
    }
    fn char_dev(&self, fd: BorrowedFd<'_>) -> Result<u64, Errno> {
        Kernel::char_dev(&*self.0.kernel, fd)
    }
    unsafe fn ioctl(&self, fd: BorrowedFd<'_>, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        // SAFETY: forwarded with the caller's contract.
        unsafe { self.0.kernel.ioctl(fd, cmd) }
    }
    unsafe fn write_cmd(&self, fd: BorrowedFd<'_>, cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
        // SAFETY: forwarded with the caller's contract.
        unsafe { self.0.kernel.write_cmd(fd, cmd) }
    }
    #[inline(never)]
    unsafe fn write(&self, _fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
        Ok(buf.len())
    }
    unsafe fn ucma(&self, fd: BorrowedFd<'_>, cmd: &mut UcmaCmd<'_>) -> Result<(), Errno> {
        // SAFETY: forwarded with the caller's contract.
        unsafe { self.0.kernel.ucma(fd, cmd) }
    }
    fn read(&self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
        self.0.kernel.read(fd, buf)
    }
    fn wait_readable(
        &self,
        fd: BorrowedFd<'_>,
        t: Option<Duration>,
    ) -> Result<crate::sys::Readiness, Errno> {
        self.0.kernel.wait_readable(fd, t)
    }
    fn set_nonblocking(&self, fd: BorrowedFd<'_>, nonblocking: bool) -> Result<bool, Errno> {
        self.0.kernel.set_nonblocking(fd, nonblocking)
    }
    fn mmap(
        &self,
        fd: BorrowedFd<'_>,
        len: usize,
        offset: u64,
        prot: Protection,
    ) -> Result<Mapping, Errno> {
        self.0.kernel.mmap(fd, len, offset, prot)
    }
    fn netlink_rdma(&self, req: &[u8], on: &mut dyn FnMut(&[u8])) -> Result<(), Errno> {
        self.0.kernel.netlink_rdma(req, on)
    }
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        self.0.kernel.read_to_string(path)
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<OsString>> {
        self.0.kernel.read_dir(path)
    }
}
