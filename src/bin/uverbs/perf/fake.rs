//! The fake rxe kernel of `uverbs perf micro --fake`: just enough of the
//! uverbs ABI to open a context and create a PD, MRs, CQs and a QP in RTS,
//! with the rings in anonymous memory (the `rxe_queue_buf` header written as
//! `rxe_queue_init` writes it), and a raw `write` (the rxe send doorbell)
//! that returns at once. [`RingView`] then plays the kernel's side of the
//! index protocol between the measured calls, so the host can count the
//! instructions of the userspace data path deterministically (callgrind):
//! no device, no system call in the measured code.
//!
//! The `unsafe` here is the kernel's side of the shared rings: atomic index
//! words and CQE copies through raw pointers into mappings the library owns.
#![allow(unsafe_code)]

use std::{
    collections::HashMap,
    ffi::OsString,
    fs::File,
    os::fd::{BorrowedFd, OwnedFd},
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use uverbs::{
    abi,
    sys::{Errno, IoctlCmd, Kernel, Mapping, Protection, WriteCmd},
    Context, DeviceInfo, NodeType,
};
use zerocopy::{FromZeros, IntoBytes};

/// `sizeof(struct rxe_queue_buf)` (the header before the slots).
const HEADER_LEN: usize = 384;
/// Slot size: 1 KiB holds a send WQE (208 bytes) with 256 bytes inline.
const LOG2_STRIDE: u32 = 10;
/// Slots per ring.
const SLOTS: u32 = 64;
const RING_LEN: usize = HEADER_LEN + ((SLOTS as usize) << LOG2_STRIDE);

/// The fake kernel. Mappings are recorded by mmap offset, so the bench can
/// find a queue's ring from the object's handle ([`FakeRxe::ring`]).
#[derive(Debug, Default)]
pub struct FakeRxe {
    next_handle: AtomicU32,
    /// mmap offset -> base address of the mapping handed to the library.
    rings: Mutex<HashMap<u64, usize>>,
}

fn dummy_fd() -> Result<OwnedFd, Errno> {
    File::open("/dev/null")
        .map(OwnedFd::from)
        .map_err(|_| Errno::ENOENT)
}

/// The mmap offsets of a CQ, an SQ and an RQ with kernel handle `h`.
fn cq_offset(h: u32) -> u64 {
    u64::from(h) << 20
}
fn sq_offset(h: u32) -> u64 {
    u64::from(h) << 20
}
fn rq_offset(h: u32) -> u64 {
    (u64::from(h) << 20) + 4096
}

fn mminfo(offset: u64) -> abi::Mminfo {
    let mut mi = abi::Mminfo::new_zeroed();
    mi.offset = offset;
    mi.size = RING_LEN as u32;
    mi
}

impl FakeRxe {
    /// Opens a context on a fake `rxe0`.
    pub fn open() -> Result<(Arc<FakeRxe>, Context), String> {
        let fake = Arc::new(FakeRxe::default());
        let device = DeviceInfo {
            name: "rxe0".into(),
            uverbs_name: "uverbs0".into(),
            path: PathBuf::from("/dev/null"),
            dev: None,
            node_guid: 0,
            node_type: NodeType::Ca,
            driver_id: Some(abi::RDMA_DRIVER_RXE),
            abi_version: 2,
            index: Some(0),
            port_count: Some(1),
        };
        let ctx = Context::open_device(fake.clone(), device).map_err(|e| e.to_string())?;
        Ok((fake, ctx))
    }

    fn handle(&self) -> u32 {
        self.next_handle.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The kernel's view of a CQ's ring (`handle` from `CompletionQueue::handle`).
    pub fn cq_ring(&self, handle: u32) -> Option<RingView> {
        self.view(cq_offset(handle))
    }

    /// The kernel's view of a QP's send queue.
    pub fn sq_ring(&self, qp_handle: u32) -> Option<RingView> {
        self.view(sq_offset(qp_handle))
    }

    /// The kernel's view of a QP's receive queue.
    pub fn rq_ring(&self, qp_handle: u32) -> Option<RingView> {
        self.view(rq_offset(qp_handle))
    }

    fn view(&self, offset: u64) -> Option<RingView> {
        let base = *self.rings.lock().ok()?.get(&offset)?;
        Some(RingView {
            base: base as *mut u8,
            mask: SLOTS - 1,
        })
    }

    fn ioctl_inner(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        match (cmd.object_id, cmd.method_id) {
            (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_GET_CONTEXT) => {
                cmd.write_output(
                    abi::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
                    &1u32.to_ne_bytes(),
                );
                cmd.write_output(
                    abi::UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT,
                    &1u64.to_ne_bytes(),
                );
                Ok(())
            }
            (abi::UVERBS_OBJECT_ASYNC_EVENT, abi::UVERBS_METHOD_ASYNC_EVENT_ALLOC) => {
                cmd.set_new_fd(abi::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, dummy_fd()?);
                Ok(())
            }
            (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_CREATE) => {
                let h = self.handle();
                cmd.set_new_object(abi::UVERBS_ATTR_CREATE_CQ_HANDLE, h);
                cmd.write_output(
                    abi::UVERBS_ATTR_CREATE_CQ_RESP_CQE,
                    &(SLOTS - 1).to_ne_bytes(),
                );
                let mut resp = abi::RxeCreateCqResp::new_zeroed();
                resp.mi = mminfo(cq_offset(h));
                cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
                Ok(())
            }
            (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_CREATE) => {
                let cap = cmd
                    .input_bytes(abi::UVERBS_ATTR_CREATE_QP_CAP)
                    .ok_or(Errno::EINVAL)?;
                let h = self.handle();
                cmd.set_new_object(abi::UVERBS_ATTR_CREATE_QP_HANDLE, h);
                cmd.write_output(abi::UVERBS_ATTR_CREATE_QP_RESP_CAP, &cap);
                cmd.write_output(
                    abi::UVERBS_ATTR_CREATE_QP_RESP_QP_NUM,
                    &(0x10 + h).to_ne_bytes(),
                );
                let mut resp = abi::RxeCreateQpResp::new_zeroed();
                resp.sq_mi = mminfo(sq_offset(h));
                resp.rq_mi = mminfo(rq_offset(h));
                cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
                Ok(())
            }
            (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_DESTROY) => {
                let resp = abi::IbUverbsDestroyCqResp::new_zeroed();
                cmd.write_output(abi::UVERBS_ATTR_DESTROY_CQ_RESP, resp.as_bytes());
                Ok(())
            }
            (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_DESTROY) => {
                let resp = abi::IbUverbsDestroyQpResp::new_zeroed();
                cmd.write_output(abi::UVERBS_ATTR_DESTROY_QP_RESP, resp.as_bytes());
                Ok(())
            }
            (abi::UVERBS_OBJECT_MR, abi::UVERBS_METHOD_MR_DESTROY) => Ok(()),
            _ => Err(Errno::EPROTONOSUPPORT),
        }
    }
}

impl Kernel for FakeRxe {
    fn open_rdwr(&self, _path: &Path) -> Result<OwnedFd, Errno> {
        dummy_fd()
    }

    fn char_dev(&self, _fd: BorrowedFd<'_>) -> Result<u64, Errno> {
        Err(Errno::ENODEV)
    }

    fn ioctl(&self, _fd: BorrowedFd<'_>, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        self.ioctl_inner(cmd)
    }

    fn write_cmd(&self, _fd: BorrowedFd<'_>, cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
        let out: Vec<u8> = match cmd.command {
            abi::IB_USER_VERBS_CMD_ALLOC_PD => {
                let mut resp = abi::IbUverbsAllocPdResp::new_zeroed();
                resp.pd_handle = self.handle();
                resp.as_bytes().to_vec()
            }
            abi::IB_USER_VERBS_CMD_REG_MR => {
                let h = self.handle();
                let mut resp = abi::IbUverbsRegMrResp::new_zeroed();
                resp.mr_handle = h;
                resp.lkey = 0x100 + h;
                resp.rkey = 0x100 + h;
                resp.as_bytes().to_vec()
            }
            _ => Vec::new(),
        };
        match cmd.core_out.get_mut(..out.len()) {
            Some(dst) => {
                dst.copy_from_slice(&out);
                Ok(())
            }
            None => Err(Errno::ENOSPC),
        }
    }

    /// The rxe send doorbell (and nothing else uses a raw write here):
    /// returns at once, as if the kernel's `rxe_post_send` were free.
    #[inline(never)]
    fn write(&self, _fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
        Ok(buf.len())
    }

    fn read(&self, _fd: BorrowedFd<'_>, _buf: &mut [u8]) -> Result<usize, Errno> {
        Err(Errno::EAGAIN)
    }

    fn wait_readable(&self, _fd: BorrowedFd<'_>, _t: Option<Duration>) -> Result<bool, Errno> {
        Ok(false)
    }

    fn set_nonblocking(&self, _fd: BorrowedFd<'_>, _nonblocking: bool) -> Result<(), Errno> {
        Ok(())
    }

    fn mmap(
        &self,
        _fd: BorrowedFd<'_>,
        len: usize,
        offset: u64,
        _prot: Protection,
    ) -> Result<Mapping, Errno> {
        let mut map = memmap2::MmapOptions::new()
            .len(len)
            .map_anon()
            .map_err(|_| Errno::ENOMEM)?;
        if len < RING_LEN {
            return Err(Errno::EINVAL);
        }
        map[0..4].copy_from_slice(&LOG2_STRIDE.to_ne_bytes());
        map[4..8].copy_from_slice(&(SLOTS - 1).to_ne_bytes());
        let map = Mapping::from(map);
        if let Ok(mut r) = self.rings.lock() {
            r.insert(offset, map.as_mut_ptr() as usize);
        }
        Ok(map)
    }

    fn netlink_rdma(&self, _req: &[u8], _on: &mut dyn FnMut(&[u8])) -> Result<(), Errno> {
        Err(Errno::EPROTONOSUPPORT)
    }

    fn read_to_string(&self, _path: &Path) -> std::io::Result<String> {
        Err(std::io::ErrorKind::NotFound.into())
    }

    fn read_dir(&self, _path: &Path) -> std::io::Result<Vec<OsString>> {
        Err(std::io::ErrorKind::NotFound.into())
    }
}

/// The kernel's side of one ring (what K61 rxe_queue.h does).
#[derive(Debug)]
pub struct RingView {
    base: *mut u8,
    mask: u32,
}

impl RingView {
    fn word(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: offsets 128 and 256 lie in the 384-byte header of a live,
        // page-aligned mapping that the library object (which the caller
        // keeps alive while using this view) owns; the word is only ever
        // accessed atomically, by the library and by this view.
        unsafe { AtomicU32::from_ptr(self.base.add(offset).cast()) }
    }

    /// Consumes everything posted to a queue we play the consumer of
    /// (SQ, RQ): `consumer_index = producer_index`.
    #[inline(never)]
    pub fn consume_all(&self) {
        let prod = self.word(128).load(Ordering::Acquire) & self.mask;
        self.word(256).store(prod, Ordering::Release);
    }

    /// Posts one successful CQE with `wr_id` to a CQ ring (`rxe_cq_post`).
    /// Returns false when the CQ is full.
    #[inline(never)]
    pub fn post_cqe(&self, wr_id: u64) -> bool {
        let prod = self.word(128).load(Ordering::Relaxed) & self.mask;
        let cons = self.word(256).load(Ordering::Acquire) & self.mask;
        if (prod + 1) & self.mask == cons {
            return false;
        }
        let mut wc = abi::IbUverbsWc::new_zeroed();
        wc.wr_id = wr_id;
        wc.byte_len = 2;
        wc.qp_num = 0x11;
        let bytes = wc.as_bytes();
        // SAFETY: slot `prod` (masked) lies inside the mapping (the header
        // said SLOTS slots of 1 << LOG2_STRIDE bytes and the mapping is
        // RING_LEN long); the consumer does not read it until the release
        // store below publishes it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.base.add(HEADER_LEN + ((prod as usize) << LOG2_STRIDE)),
                bytes.len(),
            );
        }
        self.word(128)
            .store((prod + 1) & self.mask, Ordering::Release);
        true
    }
}
