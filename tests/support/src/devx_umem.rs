//! DevX UMEM lifetimes under the objects that use them, shared by the
//! hardware suite (`tests/device/devx.rs`, on a ConnectX) and the host tests
//! (`tests/mlx5_devx.rs`, on the device model). Builds on
//! [`crate::devx_overrun`] (its CQ and QP builders).
//!
//! The kernel counts no users of a UMEM: `MLX5_IB_METHOD_DEVX_UMEM_DEREG` is
//! the firmware's `DESTROY_UMEM`, and the kernel unpins the pages as soon as
//! firmware accepts it (`drivers/infiniband/hw/mlx5/devx.c`
//! `devx_umem_cleanup`). Whether firmware refuses while an object still
//! names the UMEM is not in any public source, so the library does not rely
//! on it (an object keeps the UMEMs its command names), and these scenarios
//! check both halves:
//!
//! - [`cq_keeps_the_umems_its_command_names`]: the safe API. A DevX CQ made
//!   with `Devx::obj_create`, its command naming its buffer and doorbell
//!   UMEMs by id only, and both UMEM handles dropped before the device
//!   writes: the memory stays mapped and receives the CQEs of NOPs a DevX
//!   QP completes there.
//! - [`umem_dereg_while_a_cq_uses_it`]: the firmware's own answer, and the
//!   library's leak when a deregistration fails. A CQ created by a raw
//!   `OBJ_CREATE` (an object the library never sees, as another library
//!   sharing the context would make) on a library UMEM and on a UMEM this
//!   program registers by hand: `UMEM_DEREG` of the latter while the CQ
//!   lives is the firmware's answer; then the library UMEM's handle is
//!   dropped, its deregistration refused the same way, and its memory must
//!   stay mapped (leaked) and receive the CQEs. Only then is anything
//!   written through it, so a firmware that accepts stops the scenario
//!   before the device could write into memory given back.

use std::{
    alloc::{self, Layout},
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant},
};

use uverbs::{
    abi,
    ioctl::IoctlCmd,
    mlx5::{CmdOut, Devx, UarKind, UmemAccess},
    sys::{Errno, Kernel},
};

use crate::devx_overrun::{create_cq_in, DevxQp};

/// CQEs of the scenarios' CQs (log 4), and the NOPs completed into them
/// (fewer: no overrun).
const LOG_NCQE: u32 = 4;
const NOPS: u32 = 4;

/// Whether `addr..addr + len` lies in one mapping of this process
/// (`/proc/self/maps`).
pub fn mapped(addr: *const u8, len: usize) -> bool {
    let (start, end) = (addr as usize, addr as usize + len);
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().any(|l| {
        let range = l.split_whitespace().next().unwrap_or("");
        let Some((a, b)) = range.split_once('-') else {
            return false;
        };
        let (a, b) = (
            usize::from_str_radix(a, 16).unwrap_or(usize::MAX),
            usize::from_str_radix(b, 16).unwrap_or(0),
        );
        a <= start && end <= b
    })
}

/// Word `at` (a byte offset, 4-aligned) of the CQ memory at `base`, as
/// the device wrote it (big-endian).
///
/// # Safety
///
/// `base..base + at + 4` must be mapped memory that stays mapped during
/// the call and that only the device and atomic loads access.
#[allow(unsafe_code)]
unsafe fn be32_at(base: *mut u8, at: usize) -> u32 {
    // SAFETY: the caller's range; 4-aligned (CQEs are 64-byte aligned in a
    // page-aligned buffer, `at` a multiple of 4 in it); the device writes it
    // by DMA, never through Rust references.
    let w = unsafe { AtomicU32::from_ptr(base.add(at).cast()) };
    u32::from_be(w.load(Ordering::Acquire))
}

/// Waits up to 10 s (the device writes on its own; on the model `settle`
/// already ran) for the CQEs of NOPs `0..n` of QP `qpn` in the CQ memory
/// at `base`: CQE `i` names the QP (`sop_drop_qpn`, byte 56; a NOP's
/// opcode is 0) and WQE `i` (`wqe_counter`, byte 60).
///
/// # Safety
///
/// As [`be32_at`], for the `64 * n` bytes at `base`.
#[allow(unsafe_code)]
unsafe fn wait_for_nop_cqes(base: *mut u8, n: u32, qpn: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for i in 0..n as usize {
        loop {
            // SAFETY: CQE `i < n` lies in the caller's range.
            let sop_qpn = unsafe { be32_at(base, 64 * i + 56) };
            if sop_qpn & 0x00ff_ffff == qpn {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "CQE {i} of QP {qpn:#x} within 10 s: sop_drop_qpn {sop_qpn:#x}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: as above.
        let counter = unsafe { be32_at(base, 64 * i + 60) } >> 16;
        assert_eq!(counter, i as u32, "CQE {i}'s wqe_counter");
    }
}

/// The safe API: a DevX CQ made with `Devx::obj_create`, whose command
/// names its buffer and doorbell UMEMs by id only, and both UMEM handles
/// dropped first. The CQ keeps them registered and allocated: the buffer
/// stays mapped and receives the CQEs of the NOPs a DevX QP completes to
/// the CQ. `alive` runs then, with the CQ and QP still alive (the host test
/// checks that no deregistration reached the kernel); both are destroyed
/// after it, which deregisters the UMEMs.
#[allow(unsafe_code)] // the CQEs are read from the CQ's memory
pub fn cq_keeps_the_umems_its_command_names(
    devx: &Devx,
    pdn: u32,
    settle: &dyn Fn(),
    alive: &dyn Fn(),
) {
    let buf = devx
        .umem_reg(64 << LOG_NCQE, UmemAccess::LOCAL_WRITE)
        .unwrap();
    let dbr = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE).unwrap();
    let uar = devx.alloc_uar(UarKind::NonCached).unwrap();
    let eqn = devx.query_eqn(0).unwrap();
    let cmd = create_cq_in(LOG_NCQE, buf.id(), dbr.id(), uar.page_id(), eqn);
    let mut out = vec![0u8; 16];
    let cq = devx
        .obj_create(&cmd, &mut out)
        .unwrap_or_else(|e| panic!("DevX CREATE_CQ: {e}"));
    let cqn = CmdOut::read(&out).unwrap().obj_id & 0x00ff_ffff;
    let (base, len) = (buf.as_ptr().expect("the UMEM's own memory"), buf.len());
    drop((buf, dbr));
    assert!(
        mapped(base, len),
        "the CQ's buffer was unmapped when its UMEM handle was dropped"
    );
    let qp = DevxQp::new(devx, pdn, cqn);
    qp.post_nops(NOPS);
    settle();
    // SAFETY: the CQ keeps its buffer's UMEM, and so its memory, until it
    // is destroyed below (checked mapped above); only the device writes it.
    unsafe { wait_for_nop_cqes(base, NOPS, qp.qpn) };
    alive();
    qp.destroy();
    cq.destroy().unwrap();
    drop(uar);
}

/// A UMEM this program registers by hand (`UMEM_REG` on the command fd),
/// on a page it allocates: the library knows nothing of it.
struct RawUmem {
    mem: *mut u8,
    handle: u32,
    id: u32,
}

const PAGE: Layout = match Layout::from_size_align(4096, 4096) {
    Ok(l) => l,
    Err(_) => panic!("a page layout"),
};

impl RawUmem {
    #[allow(unsafe_code)]
    fn reg(devx: &Devx, kernel: &dyn Kernel) -> Self {
        // SAFETY: a non-zero-sized layout.
        let mem = unsafe { alloc::alloc_zeroed(PAGE) };
        assert!(!mem.is_null());
        let mut id = [0u8; 4];
        let mut raw = IoctlCmd::new(
            abi::MLX5_IB_OBJECT_DEVX_UMEM,
            abi::MLX5_IB_METHOD_DEVX_UMEM_REG,
            abi::RDMA_DRIVER_MLX5,
        );
        let at = raw.new_object(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE);
        raw.input_u64(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR, mem as u64);
        raw.input_u64(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_LEN, PAGE.size() as u64);
        raw.flags_in(
            abi::MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS,
            u64::from(abi::IB_UVERBS_ACCESS_LOCAL_WRITE),
        );
        raw.output(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID, &mut id);
        // SAFETY: the one address the command carries is the page allocated
        // above, which this struct owns and frees only after a successful
        // deregistration (never, if that fails: see `dereg`); nothing forms
        // references to it. The context's command fd is used for a UMEM of
        // this program's own, and no handle of the library's is touched.
        let r = unsafe { kernel.ioctl(devx.context().cmd_fd(), &mut raw) };
        r.unwrap_or_else(|e| panic!("a UMEM registered by hand: {e}"));
        let handle = raw.new_handle(at);
        drop(raw);
        RawUmem {
            mem,
            handle,
            id: u32::from_ne_bytes(id),
        }
    }

    /// `UMEM_DEREG`: the firmware's `DESTROY_UMEM`. On success the page is
    /// freed; on failure the UMEM is still registered, its page kept.
    #[allow(unsafe_code)]
    fn dereg(&self, devx: &Devx, kernel: &dyn Kernel) -> Result<(), Errno> {
        let mut raw = IoctlCmd::new(
            abi::MLX5_IB_OBJECT_DEVX_UMEM,
            abi::MLX5_IB_METHOD_DEVX_UMEM_DEREG,
            abi::RDMA_DRIVER_MLX5,
        );
        raw.object(abi::MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE, self.handle);
        // SAFETY: no address; the handle is this program's own UMEM.
        unsafe { kernel.ioctl(devx.context().cmd_fd(), &mut raw) }?;
        // SAFETY: deregistered: neither the kernel nor the device uses the
        // page any more; allocated above with this layout, freed once (the
        // handle is gone, so a second `dereg` fails before this).
        unsafe { alloc::dealloc(self.mem, PAGE) };
        Ok(())
    }
}

/// `OBJ_CREATE` by hand: an object the library does not know. Returns its
/// handle and its id.
#[allow(unsafe_code)]
fn raw_obj_create(devx: &Devx, kernel: &dyn Kernel, cmd_in: &[u8]) -> (u32, u32) {
    let mut out = [0u8; 16];
    let mut raw = IoctlCmd::new(
        abi::MLX5_IB_OBJECT_DEVX_OBJ,
        abi::MLX5_IB_METHOD_DEVX_OBJ_CREATE,
        abi::RDMA_DRIVER_MLX5,
    );
    let at = raw.new_object(abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE);
    raw.input(abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN, cmd_in);
    raw.output(abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT, &mut out);
    // SAFETY: a PRM create command names UMEMs, a UAR page and an EQ by
    // number, no address; the new object is this program's own.
    let r = unsafe { kernel.ioctl(devx.context().cmd_fd(), &mut raw) };
    let handle = raw.new_handle(at);
    drop(raw);
    r.unwrap_or_else(|e| panic!("OBJ_CREATE by hand: {e}, out {out:02x?}"));
    (handle, CmdOut::read(&out).unwrap().obj_id & 0x00ff_ffff)
}

/// `OBJ_DESTROY` of an object [`raw_obj_create`] made.
#[allow(unsafe_code)]
fn raw_obj_destroy(devx: &Devx, kernel: &dyn Kernel, handle: u32) -> Result<(), Errno> {
    let mut raw = IoctlCmd::new(
        abi::MLX5_IB_OBJECT_DEVX_OBJ,
        abi::MLX5_IB_METHOD_DEVX_OBJ_DESTROY,
        abi::RDMA_DRIVER_MLX5,
    );
    raw.object(abi::MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE, handle);
    // SAFETY: no address; the handle is this program's own object.
    unsafe { kernel.ioctl(devx.context().cmd_fd(), &mut raw) }
}

/// The firmware's answer to `DESTROY_UMEM` of a UMEM a live CQ names, and
/// the library's leak when its own deregistration is refused. Returns the
/// errno `UMEM_DEREG` answered while the CQ lived.
///
/// A CQ created by a raw `OBJ_CREATE` (the library cannot know what it
/// names), its buffer a library UMEM, its doorbell record a UMEM
/// registered by hand:
/// 1. `UMEM_DEREG` of the hand-made UMEM while the CQ names it: the
///    firmware's answer. Accepted, the scenario stops there (the CQ is
///    destroyed, nothing was written) and fails: firmware does not protect
///    a UMEM in use, and the model's refusal is wrong.
/// 2. The library UMEM's handle dropped: its deregistration is refused the
///    same way, so the library must leak the memory: it stays mapped and
///    receives the CQEs of NOPs a DevX QP completes to the CQ.
/// 3. The QP and the CQ destroyed, the hand-made UMEM's deregistration
///    succeeds. The library UMEM stays registered, its memory leaked, until
///    the context is closed.
#[allow(unsafe_code)] // the CQEs are read from the leaked memory
pub fn umem_dereg_while_a_cq_uses_it(
    devx: &Devx,
    kernel: &dyn Kernel,
    pdn: u32,
    settle: &dyn Fn(),
) -> Errno {
    let buf = devx
        .umem_reg(64 << LOG_NCQE, UmemAccess::LOCAL_WRITE)
        .unwrap();
    let dbr = RawUmem::reg(devx, kernel);
    let uar = devx.alloc_uar(UarKind::NonCached).unwrap();
    let eqn = devx.query_eqn(0).unwrap();
    let cmd = create_cq_in(LOG_NCQE, buf.id(), dbr.id, uar.page_id(), eqn);
    let (cq, cqn) = raw_obj_create(devx, kernel, &cmd);

    // 1. The firmware's answer.
    let refused = match dbr.dereg(devx, kernel) {
        Err(e) => e,
        Ok(()) => {
            let destroyed = raw_obj_destroy(devx, kernel, cq);
            panic!(
                "UMEM_DEREG of a UMEM a live DevX CQ names was accepted (CQ destroyed \
                 after: {destroyed:?}): firmware does not refuse DESTROY_UMEM of a UMEM \
                 in use; the library's own protection is that an object keeps the UMEMs \
                 its command names, and the device model's refusal is wrong"
            );
        }
    };

    // 2. The library's deregistration, refused the same way: a leak.
    let (base, len) = (buf.as_ptr().expect("the UMEM's own memory"), buf.len());
    drop(buf);
    assert!(
        mapped(base, len),
        "the library gave back the memory of a UMEM whose deregistration failed"
    );
    let qp = DevxQp::new(devx, pdn, cqn);
    qp.post_nops(NOPS);
    settle();
    // SAFETY: the library leaked the memory (checked mapped above) when the
    // refused deregistration left the UMEM registered; nothing frees it, and
    // only the device writes it.
    unsafe { wait_for_nop_cqes(base, NOPS, qp.qpn) };

    // 3. Objects first, then the hand-made UMEM goes.
    qp.destroy();
    raw_obj_destroy(devx, kernel, cq).unwrap();
    dbr.dereg(devx, kernel)
        .unwrap_or_else(|e| panic!("UMEM_DEREG once the CQ is gone: {e}"));
    drop(uar);
    refused
}
