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
#![allow(unsafe_code)]

use std::{
    collections::HashMap,
    ffi::OsString,
    os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd},
    path::Path,
    sync::{
        atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use zerocopy::{FromBytes, FromZeros, IntoBytes};

use crate::{
    abi,
    netlink::{self, Request},
    sys::{
        fake::{dummy_fd, FakeKernel},
        Errno, IoctlCmd, Kernel, Mapping, Protection, UcmaCmd, WriteCmd,
    },
};

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

/// The device's name, node GUID and device number.
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
    /// Destroys of CQs, QPs and SRQs fail with this errno (0: they do
    /// not), leaving the object in place, as a kernel that refuses.
    pub fail_destroy: AtomicI32,
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
    rings: Arc<Mutex<HashMap<u64, RxeRing>>>,
}

impl FakeRxe {
    /// This fake as the transport a context is opened with.
    pub fn dyn_kernel(&self) -> Arc<dyn Kernel> {
        self.kernel.clone()
    }

    /// The kernel's view of the ring of the CQ with kernel `handle`.
    pub fn cq_ring(&self, handle: u32) -> Option<RxeRing> {
        self.ring(ring_offset(handle))
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
        self.rings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&offset)
            .cloned()
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

/// Object kinds the fake creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Kind {
    Pd,
    Mr,
    Cq,
    Qp,
    Srq,
}

/// Objects created on the fake: handles, user handles, events reported.
#[derive(Debug, Default)]
pub struct Objects {
    state: Mutex<ObjState>,
}

#[derive(Debug, Default)]
struct ObjState {
    next_handle: u32,
    user_handles: HashMap<(Kind, u32), u64>,
    /// Async events read, by object kind and user handle.
    reported: HashMap<(Kind, u64), u32>,
    /// Completion events read, by CQ user handle.
    comp_reported: HashMap<u64, u32>,
    /// The completion channel fd of each CQ that has one.
    cq_channels: HashMap<u32, RawFd>,
    arms: u32,
    destroyed: Vec<(Kind, u32)>,
}

/// The kind of object an async event type is about (its `element` is then
/// that object's user handle), as `ib_uverbs_*_event_handler` file them.
fn about_object(event_type: u32) -> Option<Kind> {
    match event_type {
        0 => Some(Kind::Cq),
        1..=7 | 16 => Some(Kind::Qp),
        14 | 15 => Some(Kind::Srq),
        _ => None,
    }
}

impl Objects {
    fn lock(&self) -> std::sync::MutexGuard<'_, ObjState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn create(&self, kind: Kind, user_handle: u64) -> u32 {
        let mut s = self.lock();
        s.next_handle += 1;
        let h = s.next_handle;
        s.user_handles.insert((kind, h), user_handle);
        h
    }

    /// Counts a record a read took: an async event about an object (16
    /// bytes) or a completion event (8 bytes: the CQ's user handle).
    fn record_read(&self, fd: RawFd, bytes: &[u8]) {
        let mut s = self.lock();
        // A completion channel's records are completion events, any other
        // fd's (the context's async fd) async events: a record of the
        // other size on either is malformed and counts nowhere.
        let channel = s.cq_channels.values().any(|&c| c == fd);
        if channel {
            if let Ok(d) = abi::IbUverbsCompEventDesc::read_from_bytes(bytes) {
                *s.comp_reported.entry(d.cq_handle).or_default() += 1;
            }
        } else if let Ok(d) = abi::IbUverbsAsyncEventDesc::read_from_bytes(bytes) {
            // The kernel counts an event on the object it was raised for;
            // an element naming no such object (tests forge those) counts
            // nowhere.
            if let Some(kind) = about_object(d.event_type) {
                if s.user_handles
                    .iter()
                    .any(|(&(k, _), &uh)| k == kind && uh == d.element)
                {
                    *s.reported.entry((kind, d.element)).or_default() += 1;
                }
            }
        }
    }

    /// Destroys the object as the kernel does: its unread events are
    /// dropped from the queues, and the events read are returned (async,
    /// completion).
    fn destroy(
        &self,
        kernel: &std::sync::Weak<FakeKernel>,
        kind: Kind,
        handle: u32,
    ) -> Result<(u32, u32), Errno> {
        let (uh, channel) = {
            let s = self.lock();
            let uh = *s.user_handles.get(&(kind, handle)).ok_or(Errno::EINVAL)?;
            (
                uh,
                s.cq_channels
                    .get(&handle)
                    .copied()
                    .filter(|_| kind == Kind::Cq),
            )
        };
        let has_events = matches!(kind, Kind::Cq | Kind::Qp | Kind::Srq);
        if let Some(k) = kernel.upgrade().filter(|_| has_events) {
            // Before the counts are taken, under the fake's own lock: a read
            // either took an event and counted it, or finds it gone.
            k.discard_reads(None, |b| {
                abi::IbUverbsAsyncEventDesc::read_from_bytes(b)
                    .is_ok_and(|d| about_object(d.event_type) == Some(kind) && d.element == uh)
            });
            if let Some(fd) = channel {
                k.discard_reads(Some(fd), |b| b == uh.to_ne_bytes());
            }
        }
        let mut s = self.lock();
        s.user_handles.remove(&(kind, handle));
        if kind == Kind::Cq {
            s.cq_channels.remove(&handle);
        }
        s.destroyed.push((kind, handle));
        let reported = s.reported.remove(&(kind, uh)).unwrap_or(0);
        let comp = s.comp_reported.remove(&uh).unwrap_or(0);
        Ok((reported, comp))
    }
}

/// The rxe queue geometry the fake's mmaps describe: 64 slots of 2 KiB
/// after the 384-byte `rxe_queue_buf` header.
pub const RING_LOG2_STRIDE: u32 = 11;
/// Slots per ring.
pub const RING_SLOTS: u32 = 64;
/// Bytes per ring.
pub const RING_LEN: u32 = HEADER_LEN as u32 + (RING_SLOTS << RING_LOG2_STRIDE);

/// `sizeof(struct rxe_queue_buf)`: the header before the slots.
pub const HEADER_LEN: usize = 384;
/// Offsets of `producer_index` and `consumer_index` in the header (each on
/// its own cache line group, as `rxe_queue_buf` lays them out).
const PRODUCER: usize = 128;
const CONSUMER: usize = 256;

/// The mmap offset of the (first) ring of the object with kernel `handle`;
/// a QP's receive queue follows at [`RQ_OFFSET`].
fn ring_offset(handle: u32) -> u64 {
    u64::from(handle) << 20
}
const RQ_OFFSET: u64 = 1 << 12;

fn ring_mi(handle: u32) -> abi::Mminfo {
    let mut mi = abi::Mminfo::new_zeroed();
    mi.offset = ring_offset(handle);
    mi.size = RING_LEN;
    mi
}

/// The kernel's side of one rxe ring: the index words it owns and the slots
/// the protocol hands it. Cloning shares the ring.
#[derive(Debug, Clone)]
pub struct RxeRing {
    map: Arc<Mapping>,
    mask: u32,
    stride: usize,
}

impl RxeRing {
    /// A new ring of `slots` (a power of two) slots of `1 << log2_stride`
    /// bytes, its header written as `rxe_queue_init` writes it: the mapping
    /// for the library and the kernel's view of the same memory.
    pub fn new(log2_stride: u32, slots: u32) -> Result<(Mapping, RxeRing), Errno> {
        if !slots.is_power_of_two() || log2_stride > 16 {
            return Err(Errno::EINVAL);
        }
        let len = HEADER_LEN + ((slots as usize) << log2_stride);
        let fd = nix::sys::memfd::memfd_create(
            c"uverbs-fake-rxe-ring",
            nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
        )?;
        nix::unistd::ftruncate(&fd, len as i64)?;
        let map = |fd: &OwnedFd| {
            memmap2::MmapOptions::new()
                .len(len)
                .map_raw(fd)
                .map_err(|_| Errno::ENOMEM)
        };
        let (library, kernel) = (map(&fd)?, map(&fd)?);
        let ring = RxeRing {
            map: Arc::new(kernel),
            mask: slots - 1,
            stride: 1 << log2_stride,
        };
        ring.word(0).store(log2_stride, Ordering::Relaxed);
        ring.word(4).store(slots - 1, Ordering::Relaxed);
        Ok((library, ring))
    }

    /// A 32-bit word of the header.
    pub fn word(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset % 4 == 0 && offset + 4 <= HEADER_LEN,
            "header word {offset}"
        );
        // SAFETY: the offset is a 4-aligned word inside the header of the
        // page-aligned mapping this view owns (checked above); header words
        // are only ever accessed atomically, by the library and by views.
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(offset).cast()) }
    }

    /// `producer_index`, as the kernel reads it (`smp_load_acquire`).
    pub fn producer(&self) -> u32 {
        self.word(PRODUCER).load(Ordering::Acquire)
    }

    /// Publishes `producer_index` of a queue the kernel fills (CQ), masked
    /// (`smp_store_release`).
    pub fn set_producer(&self, v: u32) {
        self.word(PRODUCER).store(v & self.mask, Ordering::Release);
    }

    /// `consumer_index` (`smp_load_acquire`).
    pub fn consumer(&self) -> u32 {
        self.word(CONSUMER).load(Ordering::Acquire)
    }

    /// Publishes `consumer_index` of a queue the kernel drains (SQ, RQ, SRQ).
    pub fn set_consumer(&self, v: u32) {
        self.word(CONSUMER).store(v & self.mask, Ordering::Release);
    }

    fn slot_ptr(&self, index: u32) -> *mut u8 {
        let at = HEADER_LEN + (index & self.mask) as usize * self.stride;
        // SAFETY: the masked index selects one of the mapping's slots, so
        // `at + stride` is within its length.
        unsafe { self.map.as_mut_ptr().add(at) }
    }

    /// A copy of slot `index` (masked).
    pub fn slot(&self, index: u32) -> Vec<u8> {
        let mut out = vec![0; self.stride];
        // SAFETY: the slot lies inside the mapping (`slot_ptr`); the bytes
        // are copied without forming a reference to shared memory, and the
        // protocol gives the slot to the kernel side at the call sites.
        unsafe {
            std::ptr::copy_nonoverlapping(self.slot_ptr(index), out.as_mut_ptr(), self.stride)
        };
        out
    }

    /// Writes `bytes` (at most a slot) to the start of slot `index`; the
    /// rest of the slot is filled with 0xa5, so a reader that looks past
    /// what was written sees garbage.
    pub fn write_slot(&self, index: u32, bytes: &[u8]) {
        let n = bytes.len().min(self.stride);
        let p = self.slot_ptr(index);
        // SAFETY: `n` and `stride - n` bytes stay inside the slot
        // (`slot_ptr`); raw copies, no references into shared memory.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, n);
            std::ptr::write_bytes(p.add(n), 0xa5, self.stride - n);
        }
    }

    /// Takes the next WQE of a queue the kernel drains, if any.
    pub fn consume(&self) -> Option<Vec<u8>> {
        let cons = self.consumer();
        if self.producer() == cons {
            return None;
        }
        let bytes = self.slot(cons);
        self.set_consumer(cons + 1);
        Some(bytes)
    }

    /// Drains everything posted (`consumer_index = producer_index`).
    #[inline(never)]
    pub fn consume_all(&self) {
        let prod = self.producer() & self.mask;
        self.set_consumer(prod);
    }

    /// Posts a CQE (`rxe_cq_post`); false when the CQ is full.
    #[inline(never)]
    pub fn post_cqe(&self, cqe: &abi::IbUverbsWc) -> bool {
        let prod = self.word(PRODUCER).load(Ordering::Relaxed);
        if (prod + 1) & self.mask == self.consumer() & self.mask {
            return false;
        }
        self.write_slot(prod, cqe.as_bytes());
        self.set_producer(prod + 1);
        true
    }
}

/// `Behaviour::fail_destroy`.
fn refuse_destroy(b: &Behaviour) -> Result<(), Errno> {
    match b.fail_destroy.load(Ordering::Relaxed) {
        0 => Ok(()),
        e => Err(Errno::from_raw(e)),
    }
}

/// CQ, QP and SRQ create/destroy (ioctl methods, as 6.1 has them).
fn objects_ioctl(
    objects: &Objects,
    kernel: &std::sync::Weak<FakeKernel>,
    b: &Behaviour,
    cmd: &mut IoctlCmd<'_>,
) -> Option<Result<(), Errno>> {
    let handle_in = |cmd: &IoctlCmd<'_>, id| cmd.input_value(id).map(|v| v as u32);
    let r = match (cmd.object_id, cmd.method_id) {
        (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_CREATE) => (|| {
            let uh = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_CQ_USER_HANDLE)
                .ok_or(Errno::EINVAL)?;
            let cqe = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_CQ_CQE)
                .ok_or(Errno::EINVAL)? as u32;
            if cqe == 0 || cqe >= RING_SLOTS {
                return Err(Errno::EINVAL);
            }
            let h = objects.create(Kind::Cq, uh);
            if let Some(a) = cmd.find(abi::UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL) {
                if let crate::ioctl::AttrBuf::Fd(fd) = &a.buf {
                    objects.lock().cq_channels.insert(h, fd.as_raw_fd());
                }
            }
            cmd.set_new_object(abi::UVERBS_ATTR_CREATE_CQ_HANDLE, h);
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_CQ_RESP_CQE,
                &(RING_SLOTS - 1).to_ne_bytes(),
            );
            let mut resp = abi::RxeCreateCqResp::new_zeroed();
            resp.mi = ring_mi(h);
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_CQ_HANDLE).ok_or(Errno::EINVAL)?;
            refuse_destroy(b)?;
            let mut resp = abi::IbUverbsDestroyCqResp::new_zeroed();
            (resp.async_events_reported, resp.comp_events_reported) =
                objects.destroy(kernel, Kind::Cq, h)?;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_CQ_RESP, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_CREATE) => (|| {
            let uh = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_QP_USER_HANDLE)
                .ok_or(Errno::EINVAL)?;
            let cap = cmd
                .input_bytes(abi::UVERBS_ATTR_CREATE_QP_CAP)
                .ok_or(Errno::EINVAL)?;
            let on_srq = cmd.find(abi::UVERBS_ATTR_CREATE_QP_SRQ_HANDLE).is_some();
            let h = objects.create(Kind::Qp, uh);
            cmd.set_new_object(abi::UVERBS_ATTR_CREATE_QP_HANDLE, h);
            cmd.write_output(abi::UVERBS_ATTR_CREATE_QP_RESP_CAP, &cap);
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_QP_RESP_QP_NUM,
                &(0x10 + h).to_ne_bytes(),
            );
            let mut resp = abi::RxeCreateQpResp::new_zeroed();
            resp.sq_mi = ring_mi(h);
            if !on_srq {
                resp.rq_mi = ring_mi(h);
                resp.rq_mi.offset += RQ_OFFSET;
            }
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_QP_HANDLE).ok_or(Errno::EINVAL)?;
            refuse_destroy(b)?;
            let mut resp = abi::IbUverbsDestroyQpResp::new_zeroed();
            resp.events_reported = objects.destroy(kernel, Kind::Qp, h)?.0;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_QP_RESP, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_CREATE) => (|| {
            let uh = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_SRQ_USER_HANDLE)
                .ok_or(Errno::EINVAL)?;
            let max_wr = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_SRQ_MAX_WR)
                .ok_or(Errno::EINVAL)? as u32;
            let max_sge = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_SRQ_MAX_SGE)
                .ok_or(Errno::EINVAL)? as u32;
            let h = objects.create(Kind::Srq, uh);
            cmd.set_new_object(abi::UVERBS_ATTR_CREATE_SRQ_HANDLE, h);
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR,
                &max_wr.to_ne_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE,
                &max_sge.to_ne_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM,
                &(0x40 + h).to_ne_bytes(),
            );
            let mut resp = abi::RxeCreateSrqResp::new_zeroed();
            resp.mi = ring_mi(h);
            resp.srq_num = 0x40 + h;
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_SRQ_HANDLE).ok_or(Errno::EINVAL)?;
            refuse_destroy(b)?;
            let mut resp = abi::IbUverbsDestroySrqResp::new_zeroed();
            resp.events_reported = objects.destroy(kernel, Kind::Srq, h)?.0;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_SRQ_RESP, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_MR, abi::UVERBS_METHOD_MR_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_MR_HANDLE).ok_or(Errno::EINVAL)?;
            objects.destroy(kernel, Kind::Mr, h).map(|_| ())
        })(),
        _ => return None,
    };
    Some(r)
}

/// PD allocation (write commands only, as on 6.1).
fn objects_write(
    objects: &Objects,
    kernel: &std::sync::Weak<FakeKernel>,
    cmd: &mut WriteCmd<'_>,
) -> Option<Result<(), Errno>> {
    match cmd.command {
        c if c == abi::IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL => {
            let fd = dummy_fd();
            let mut resp = abi::IbUverbsCreateCompChannelResp::new_zeroed();
            resp.fd = fd.as_raw_fd() as u32;
            if let Some(k) = kernel.upgrade() {
                // A new channel: nothing queued for its number yet.
                k.forget_fd(fd.as_raw_fd());
            }
            let r = copy_out(cmd.core_out, resp.as_bytes());
            cmd.new_fd = Some(fd);
            Some(r)
        }
        c if c == abi::IB_USER_VERBS_CMD_REQ_NOTIFY_CQ => {
            objects.lock().arms += 1;
            Some(Ok(()))
        }
        c if c == abi::IB_USER_VERBS_CMD_ALLOC_PD => {
            let h = objects.create(Kind::Pd, 0);
            let mut resp = abi::IbUverbsAllocPdResp::new_zeroed();
            resp.pd_handle = h;
            Some(copy_out(cmd.core_out, resp.as_bytes()))
        }
        c if c == abi::IB_USER_VERBS_CMD_DEALLOC_PD => {
            let h = u32::from_ne_bytes(cmd.core_in.get(..4)?.try_into().ok()?);
            Some(objects.destroy(kernel, Kind::Pd, h).map(|_| ()))
        }
        c if c == abi::IB_USER_VERBS_CMD_REG_MR => {
            let h = objects.create(Kind::Mr, 0);
            let mut resp = abi::IbUverbsRegMrResp::new_zeroed();
            resp.mr_handle = h;
            resp.lkey = 0x100 + h;
            resp.rkey = 0x200 + h;
            Some(copy_out(cmd.core_out, resp.as_bytes()))
        }
        // rxe accepts every transition the library lets through.
        c if c == abi::IB_USER_VERBS_CMD_MODIFY_QP => Some(Ok(())),
        _ => None,
    }
}

/// The device attributes rxe reports (`EX_QUERY_DEVICE`).
pub fn device_attr() -> abi::IbUverbsExQueryDeviceResp {
    let mut r = abi::IbUverbsExQueryDeviceResp::new_zeroed();
    let b = &mut r.base;
    b.fw_ver = 0;
    b.node_guid = NODE_GUID.to_be();
    b.sys_image_guid = NODE_GUID.to_be();
    b.max_mr_size = u64::MAX;
    b.page_size_cap = 0xffff_f000;
    b.vendor_id = 0xffffff;
    b.max_qp = 1_048_560;
    b.max_qp_wr = 1_048_576;
    b.device_cap_flags = 0x0122_3c76;
    b.max_sge = 32;
    b.max_sge_rd = 32;
    b.max_cq = 1_048_576;
    b.max_cqe = 32767;
    b.max_mr = 524_287;
    b.max_pd = 1_048_576;
    b.max_qp_rd_atom = 128;
    b.max_res_rd_atom = 258_048;
    b.max_qp_init_rd_atom = 128;
    b.atomic_cap = 1;
    b.max_mw = 524_287;
    b.max_srq = 917_503;
    b.max_srq_wr = 1_048_576;
    b.max_srq_sge = 27;
    b.max_pkeys = 64;
    b.local_ca_ack_delay = 15;
    b.phys_port_cnt = 1;
    r.device_cap_flags_ex = 0x0122_3c76;
    r.response_length = size_of::<abi::IbUverbsExQueryDeviceResp>() as u32;
    r
}

/// Port 1's attributes (`QUERY_PORT`).
pub fn port_attr() -> abi::IbUverbsQueryPortResp {
    let mut p = abi::IbUverbsQueryPortResp::new_zeroed();
    p.port_cap_flags = 0x0001_0000;
    p.max_msg_sz = 0x80_0000;
    p.gid_tbl_len = 1024;
    p.pkey_tbl_len = 1;
    p.state = 4;
    p.max_mtu = 5;
    p.active_mtu = 3;
    p.max_vl_num = 1;
    p.active_width = 1;
    p.active_speed = 1;
    p.phys_state = 5;
    p.link_layer = 2;
    p
}

pub(crate) fn gid_entry(index: u32, gid: [u8; 16]) -> abi::IbUverbsGidEntry {
    let mut e = abi::IbUverbsGidEntry::new_zeroed();
    e.gid = [
        u64::from_ne_bytes(gid[..8].try_into().unwrap()),
        u64::from_ne_bytes(gid[8..].try_into().unwrap()),
    ];
    e.gid_index = index;
    e.port_num = 1;
    e.gid_type = 2; // RoCE v2
    e.netdev_ifindex = 2;
    e
}

fn gids() -> Vec<abi::IbUverbsGidEntry> {
    vec![gid_entry(0, LINK_LOCAL_GID), gid_entry(1, IPV4_GID)]
}

pub(crate) fn sysfs_gid(gid: &[u8; 16]) -> String {
    let groups: Vec<String> = gid
        .chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect();
    format!("{}\n", groups.join(":"))
}

fn netlink_reply(request: &[u8]) -> Result<Vec<Vec<u8>>, Errno> {
    let kind = netlink::msg_type(request).ok_or(Errno::EINVAL)?;
    let op = kind & 0x3ff;
    if op == abi::RDMA_NLDEV_CMD_GET {
        let mut m = Request::nldev(abi::RDMA_NLDEV_CMD_GET, 0, 1);
        m.u32(abi::RDMA_NLDEV_ATTR_DEV_INDEX, 3)
            .string(abi::RDMA_NLDEV_ATTR_DEV_NAME, DEV)
            .u32(abi::RDMA_NLDEV_ATTR_PORT_INDEX, 1)
            .u64(abi::RDMA_NLDEV_ATTR_NODE_GUID, NODE_GUID)
            .u8(abi::RDMA_NLDEV_ATTR_DEV_NODE_TYPE, 1);
        return Ok(vec![m.finish().to_vec()]);
    }
    if op == abi::RDMA_NLDEV_CMD_GET_CHARDEV {
        let index = netlink::attrs(request)
            .find(|a| a.kind == abi::RDMA_NLDEV_ATTR_DEV_INDEX)
            .and_then(|a| a.u32());
        if index != Some(3) {
            return Err(Errno::EINVAL);
        }
        let mut m = Request::nldev(abi::RDMA_NLDEV_CMD_GET_CHARDEV, 0, 2);
        m.u64(abi::RDMA_NLDEV_ATTR_CHARDEV, DEV_T)
            .u64(abi::RDMA_NLDEV_ATTR_CHARDEV_ABI, 2)
            .string(abi::RDMA_NLDEV_ATTR_CHARDEV_NAME, "uverbs0")
            .u32(abi::RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, abi::RDMA_DRIVER_RXE);
        return Ok(vec![m.finish().to_vec()]);
    }
    Err(Errno::EOPNOTSUPP)
}

fn ioctl(b: &Behaviour, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    if b.no_ioctl.load(Ordering::Relaxed) {
        return Err(Errno::ENOTTY);
    }
    if cmd.driver_id != abi::RDMA_DRIVER_RXE {
        return Err(Errno::EINVAL);
    }
    match (cmd.object_id, cmd.method_id) {
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_GET_CONTEXT) => {
            if cmd.find(abi::UVERBS_ATTR_UHW_IN).is_some() {
                return Err(Errno::EINVAL); // rxe takes no driver data
            }
            cmd.write_output(
                abi::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
                &2u32.to_ne_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT,
                &1u64.to_ne_bytes(),
            );
            Ok(())
        }
        (abi::UVERBS_OBJECT_ASYNC_EVENT, abi::UVERBS_METHOD_ASYNC_EVENT_ALLOC) => {
            cmd.set_new_fd(abi::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, dummy_fd());
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_PORT) => {
            if b.no_query_methods.load(Ordering::Relaxed) {
                return Err(Errno::EPROTONOSUPPORT);
            }
            if cmd.input_value(abi::UVERBS_ATTR_QUERY_PORT_PORT_NUM) != Some(1) {
                return Err(Errno::EINVAL);
            }
            let mut resp = abi::IbUverbsQueryPortRespEx::new_zeroed();
            resp.legacy_resp = port_attr();
            resp.port_cap_flags2 = 0x20;
            cmd.write_output(abi::UVERBS_ATTR_QUERY_PORT_RESP, resp.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_GID_TABLE) => {
            if b.no_query_methods.load(Ordering::Relaxed) {
                return Err(Errno::EPROTONOSUPPORT);
            }
            let entries = gids();
            let bytes = entries.as_slice().as_bytes();
            cmd.write_output(abi::UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, bytes)
                .ok_or(Errno::EINVAL)?;
            cmd.write_output(
                abi::UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES,
                &(entries.len() as u64).to_ne_bytes(),
            );
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_GID_ENTRY) => {
            if b.no_query_methods.load(Ordering::Relaxed) {
                return Err(Errno::EPROTONOSUPPORT);
            }
            let index = cmd
                .input_value(abi::UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX)
                .ok_or(Errno::EINVAL)?;
            if index >= 1024 {
                return Err(Errno::EINVAL);
            }
            let entry = gids()
                .into_iter()
                .find(|e| u64::from(e.gid_index) == index)
                .ok_or(Errno::ENODATA)?;
            cmd.write_output(
                abi::UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY,
                entry.as_bytes(),
            );
            Ok(())
        }
        _ => Err(Errno::EPROTONOSUPPORT),
    }
}

fn write(cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
    let ex = abi::IB_USER_VERBS_CMD_FLAG_EXTENDED;
    match cmd.command {
        c if c == abi::IB_USER_VERBS_CMD_GET_CONTEXT => {
            let fd = dummy_fd();
            let mut resp = abi::IbUverbsGetContextResp::new_zeroed();
            resp.async_fd = fd.as_raw_fd() as u32;
            resp.num_comp_vectors = 2;
            copy_out(cmd.core_out, resp.as_bytes())?;
            cmd.new_fd = Some(fd);
            Ok(())
        }
        c if c == ex | abi::IB_USER_VERBS_EX_CMD_QUERY_DEVICE => {
            if !cmd.driver_in.is_empty() || !cmd.driver_out.is_empty() {
                return Err(Errno::EINVAL); // rxe_query_device refuses udata
            }
            abi::IbUverbsExQueryDevice::read_from_bytes(cmd.core_in).map_err(|_| Errno::EINVAL)?;
            copy_out(cmd.core_out, device_attr().as_bytes())
        }
        c if c == abi::IB_USER_VERBS_CMD_QUERY_PORT => {
            let req =
                abi::IbUverbsQueryPort::read_from_bytes(cmd.core_in).map_err(|_| Errno::EINVAL)?;
            if req.port_num != 1 {
                return Err(Errno::EINVAL);
            }
            copy_out(cmd.core_out, port_attr().as_bytes())
        }
        _ => Err(Errno::EOPNOTSUPP),
    }
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
    let (b, o, k) = (behaviour.clone(), objects.clone(), Arc::downgrade(&kernel));
    kernel.on_write(move |cmd| {
        if b.removed.load(Ordering::Relaxed) {
            return Err(Errno::EIO);
        }
        objects_write(&o, &k, cmd).unwrap_or_else(|| write(cmd))
    });
    // The rxe send doorbell (a 32-byte POST_SEND write) is accepted.
    let b = behaviour.clone();
    kernel.on_raw_write(move |buf| {
        if b.removed.load(Ordering::Relaxed) {
            return Err(Errno::EIO);
        }
        Ok(buf.len())
    });
    // A ring: rxe's mmap offsets name queues; the fake keeps a view of each.
    let rings = Arc::new(Mutex::new(HashMap::new()));
    let (b, r) = (behaviour.clone(), rings.clone());
    // SAFETY: each mapping is a fresh anonymous read-write `RxeRing` of
    // `RING_LEN` bytes (`len` is checked), unmapped only when dropped; the
    // fake keeps a raw view of it and forms no reference into it.
    unsafe {
        kernel.on_mmap(move |offset, len| {
            if b.removed.load(Ordering::Relaxed) {
                return Err(Errno::EIO);
            }
            if len != RING_LEN as usize {
                return Err(Errno::EINVAL);
            }
            let (library, view) = RxeRing::new(RING_LOG2_STRIDE, RING_SLOTS)?;
            r.lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(offset, view);
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
    fn set_nonblocking(&self, fd: BorrowedFd<'_>, nonblocking: bool) -> Result<(), Errno> {
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
