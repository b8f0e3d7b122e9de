//! Test-only C API: a uverbs [`Context`] on the shim's own model, next to
//! the libibverbs + libmlx5 the program loads, so that one process runs
//! both stacks on one device (`preload/tests/two_stacks.c`, issue 26).
//!
//! The program finds these functions with `dlsym(RTLD_DEFAULT, ...)`.
//! There is one uverbs side per process: a context, a PD, a CQ that every
//! QP shares for sends and receives, the MRs registered over the program's
//! memory, the QPs (by QP number) and one address handle (towards the GID
//! given at the first UD connect). Nothing here is an interface to build
//! on: it offers what that test needs and no more. Calls return 0 (or a
//! count, a QP number) on success and -1 on failure, printing why on stderr.
#![allow(unsafe_code)] // the C edge: raw pointers from the program

use std::{collections::HashMap, sync::Mutex};

use libc::{c_int, c_void, size_t};
use uverbs::{
    AccessFlags, AddressHandle, AhAttr, CompletionQueue, Context, CqOptions, Gid, GlobalRoute,
    MemoryRegion, Mtu, ProtectionDomain, QpAttr, QpCap, QpInitAttr, QpState, QpType, QueuePair,
    RecvWr, SendFlags, SendOp, SendWr, Sge, UdDest, WorkCompletion,
};

use crate::{lock, real::Guard, shim, signals::Critical};

/// The Q_Key every UD QP of the test uses.
const QKEY: u32 = 0x1111_1111;

/// A send work request, as the C program describes it (`struct
/// uverbs_ts_wr` in two_stacks.c): one SGE (none when `length` is 0),
/// inline when `send_flags` has `IBV_SEND_INLINE` (the bytes at `addr`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TsWr {
    wr_id: u64,
    /// `IBV_WR_*`.
    opcode: u32,
    /// `IBV_SEND_*`.
    send_flags: u32,
    addr: u64,
    length: u32,
    lkey: u32,
    remote_addr: u64,
    rkey: u32,
    /// Host order.
    imm: u32,
    compare_add: u64,
    swap: u64,
    /// UD: the destination QP (through the side's address handle).
    remote_qpn: u32,
    remote_qkey: u32,
}

/// A work completion (`struct uverbs_ts_wc`); `IBV_WC_*` values.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TsWc {
    wr_id: u64,
    status: u32,
    opcode: u32,
    byte_len: u32,
    /// Host order.
    imm: u32,
    qp_num: u32,
    src_qp: u32,
    wc_flags: u32,
    _pad: u32,
}

// The C program declares the same structs (two_stacks.c asserts the sizes).
const _: () = assert!(std::mem::size_of::<TsWr>() == 72 && std::mem::size_of::<TsWc>() == 40);

struct Side {
    // Dropped in this order: AH and QPs before the CQ, MRs before the PD.
    ah: Option<AddressHandle>,
    qps: HashMap<u32, QueuePair>,
    mrs: Vec<MemoryRegion>,
    cq: CompletionQueue,
    pd: ProtectionDomain,
    _ctx: Context,
}

static SIDE: Mutex<Option<Side>> = Mutex::new(None);

fn all_access() -> AccessFlags {
    AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC
}

/// Runs `f` on the side inside the shim (the model's own libc calls pass
/// through), turning errors into -1 and a line on stderr.
fn with_side(what: &str, f: impl FnOnce(&mut Side) -> Result<c_int, String>) -> c_int {
    let _g = Guard::enter();
    let mut s = lock(&SIDE);
    let Some(side) = s.as_mut() else {
        eprintln!("uverbs_ts: {what}: not open");
        return -1;
    };
    f(side).unwrap_or_else(|e| {
        eprintln!("uverbs_ts: {what}: {e}");
        -1
    })
}

/// Opens the uverbs side on the shim's model: context, PD, a CQ of 256.
#[no_mangle]
pub extern "C" fn uverbs_ts_open() -> c_int {
    let _g = Guard::enter();
    let Some(s) = shim() else { return -1 };
    let m = {
        let _c = Critical::enter();
        let m = s.model_or_new();
        s.start_hca(m);
        m
    };
    let r = (|| -> uverbs::Result<Side> {
        let ctx = Context::open_with(m.model.dyn_kernel(), None)?;
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(256, CqOptions::default())?;
        Ok(Side {
            ah: None,
            qps: HashMap::new(),
            mrs: Vec::new(),
            cq,
            pd,
            _ctx: ctx,
        })
    })();
    match r {
        Ok(side) => {
            *lock(&SIDE) = Some(side);
            0
        }
        Err(e) => {
            eprintln!("uverbs_ts_open: {e}");
            -1
        }
    }
}

/// Destroys everything the side made.
#[no_mangle]
pub extern "C" fn uverbs_ts_close() {
    let _g = Guard::enter();
    drop(lock(&SIDE).take());
}

/// Registers `len` bytes at `addr` (every access) and returns its keys.
///
/// # Safety
///
/// `addr..addr + len` stays mapped until [`uverbs_ts_close`], and the
/// program touches it only while no work request uses it; `lkey` and
/// `rkey` are writable.
#[no_mangle]
pub unsafe extern "C" fn uverbs_ts_reg_mr(
    addr: *mut c_void,
    len: size_t,
    lkey: *mut u32,
    rkey: *mut u32,
) -> c_int {
    with_side("reg_mr", |s| {
        // SAFETY: the caller keeps the memory mapped for the region's life
        // and accesses it through raw pointers only (see above).
        let mr = unsafe { s.pd.register_raw(addr.cast(), len, all_access()) }
            .map_err(|e| e.to_string())?;
        // SAFETY: the caller passes writable pointers.
        unsafe {
            *lkey = mr.lkey();
            *rkey = mr.rkey();
        }
        s.mrs.push(mr);
        Ok(0)
    })
}

/// Creates an RC (`IBV_QPT_RC`, 2) or UD (`IBV_QPT_UD`, 4) QP on the side's
/// CQ, one SGE, and returns its number.
#[no_mangle]
pub extern "C" fn uverbs_ts_create_qp(qp_type: c_int, depth: u32, max_inline: u32) -> i64 {
    let _g = Guard::enter();
    let mut s = lock(&SIDE);
    let Some(s) = s.as_mut() else { return -1 };
    let qp_type = match qp_type {
        2 => QpType::Rc,
        4 => QpType::Ud,
        t => {
            eprintln!("uverbs_ts_create_qp: type {t}");
            return -1;
        }
    };
    let r = s.pd.create_qp(
        &QpInitAttr::new(qp_type, &s.cq, &s.cq)
            .cap(QpCap::new(depth, depth, 1, 1).max_inline_data(max_inline)),
    );
    match r {
        Ok(qp) => {
            let n = qp.qp_num();
            s.qps.insert(n, qp);
            i64::from(n)
        }
        Err(e) => {
            eprintln!("uverbs_ts_create_qp: {e}");
            -1
        }
    }
}

/// Moves QP `qpn` to RTS: RC towards `remote_qpn` at `gid` (through GID
/// index 1, MTU 1024, every remote access, 4 reads/atomics in flight); UD
/// with [`QKEY`], creating the side's address handle towards `gid` (hop
/// limit 64, `flow_label`: a nonzero one fixes the RoCE v2 UDP source port
/// the AH carries, which libmlx5 otherwise draws at random).
///
/// # Safety
///
/// `gid` points to 16 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn uverbs_ts_connect(
    qpn: u32,
    remote_qpn: u32,
    gid: *const u8,
    flow_label: u32,
) -> c_int {
    // SAFETY: the caller passes 16 readable bytes.
    let dgid = Gid(unsafe { gid.cast::<[u8; 16]>().read_unaligned() });
    with_side("connect", |s| {
        let qp = s.qps.get(&qpn).ok_or("no such QP")?;
        let ah_attr = AhAttr::new(1).grh(GlobalRoute::new(dgid, 1).hop_limit(1));
        let mut attr = QpAttr::new()
            .qp_state(QpState::Init)
            .port_num(1)
            .qp_access_flags(all_access())
            .qkey(QKEY);
        qp.modify_to(&attr).map_err(|e| format!("INIT: {e}"))?;
        attr.qp_state = QpState::Rtr;
        attr.path_mtu = Mtu(3);
        attr.dest_qp_num = remote_qpn;
        attr.max_dest_rd_atomic = 4;
        attr.min_rnr_timer = 12;
        attr.ah_attr = ah_attr;
        qp.modify_to(&attr).map_err(|e| format!("RTR: {e}"))?;
        attr.qp_state = QpState::Rts;
        attr.timeout = 14;
        attr.retry_cnt = 7;
        attr.rnr_retry = 7;
        attr.max_rd_atomic = 4;
        qp.modify_to(&attr).map_err(|e| format!("RTS: {e}"))?;
        if qp.qp_type() == QpType::Ud && s.ah.is_none() {
            let mut a = ah_attr;
            if let Some(g) = a.grh.as_mut() {
                g.hop_limit = 64;
                g.flow_label = flow_label;
            }
            s.ah = Some(s.pd.create_ah(&a).map_err(|e| format!("AH: {e}"))?);
        }
        Ok(0)
    })
}

/// Posts `n` send work requests on QP `qpn` in one call.
///
/// # Safety
///
/// `wrs` points to `n` requests; inline ones' `addr..addr + length` is
/// readable.
#[no_mangle]
pub unsafe extern "C" fn uverbs_ts_post_send(qpn: u32, wrs: *const TsWr, n: size_t) -> c_int {
    // SAFETY: the caller passes `n` requests.
    let wrs = unsafe { std::slice::from_raw_parts(wrs, n) };
    with_side("post_send", |s| {
        let sges: Vec<Sge> = wrs
            .iter()
            .map(|w| Sge::new(w.addr, w.length, w.lkey))
            .collect();
        let mut out = Vec::with_capacity(n);
        for (w, sge) in wrs.iter().zip(&sges) {
            let op = match w.opcode {
                0 => SendOp::RdmaWrite {
                    remote_addr: w.remote_addr,
                    rkey: w.rkey,
                },
                1 => SendOp::RdmaWriteWithImm {
                    remote_addr: w.remote_addr,
                    rkey: w.rkey,
                    imm: w.imm,
                },
                2 => SendOp::Send,
                3 => SendOp::SendWithImm { imm: w.imm },
                4 => SendOp::RdmaRead {
                    remote_addr: w.remote_addr,
                    rkey: w.rkey,
                },
                5 => SendOp::CompareSwap {
                    remote_addr: w.remote_addr,
                    rkey: w.rkey,
                    compare: w.compare_add,
                    swap: w.swap,
                },
                6 => SendOp::FetchAdd {
                    remote_addr: w.remote_addr,
                    rkey: w.rkey,
                    add: w.compare_add,
                },
                o => return Err(format!("opcode {o}")),
            };
            let flags = SendFlags::from_bits_truncate(w.send_flags);
            let sg = if w.length == 0 {
                &[][..]
            } else {
                std::slice::from_ref(sge)
            };
            let mut wr = SendWr::new(w.wr_id, op, sg).flags(flags - SendFlags::INLINE);
            if flags.contains(SendFlags::INLINE) {
                let data = if w.length == 0 {
                    &[][..]
                } else {
                    // SAFETY: the caller's inline bytes are readable; they
                    // are copied into the WQE before the call returns.
                    unsafe { std::slice::from_raw_parts(w.addr as *const u8, w.length as usize) }
                };
                wr = wr.inline(data);
            }
            if w.remote_qpn != 0 {
                let ah = s.ah.as_ref().ok_or("no address handle")?;
                wr = wr.to(UdDest::new(ah, w.remote_qpn, w.remote_qkey));
            }
            out.push(wr);
        }
        let qp = s.qps.get_mut(&qpn).ok_or("no such QP")?;
        qp.post_send(&out).map_err(|e| e.to_string())?;
        Ok(0)
    })
}

/// Posts one receive of `len` bytes at `addr` (`lkey`) on QP `qpn`.
#[no_mangle]
pub extern "C" fn uverbs_ts_post_recv(
    qpn: u32,
    wr_id: u64,
    addr: u64,
    len: u32,
    lkey: u32,
) -> c_int {
    with_side("post_recv", |s| {
        let qp = s.qps.get_mut(&qpn).ok_or("no such QP")?;
        let sge = [Sge::new(addr, len, lkey)];
        qp.post_recv(&[RecvWr::new(wr_id, &sge)])
            .map_err(|e| e.to_string())?;
        Ok(0)
    })
}

/// Polls the side's CQ once for up to `max` completions; returns how many.
///
/// # Safety
///
/// `out` has room for `max` completions.
#[no_mangle]
pub unsafe extern "C" fn uverbs_ts_poll(out: *mut TsWc, max: c_int) -> c_int {
    let max = usize::try_from(max).unwrap_or(0).min(64);
    with_side("poll", |s| {
        let mut wc = [WorkCompletion::default(); 64];
        let n = s.cq.poll(&mut wc[..max]);
        for (i, w) in wc[..n].iter().enumerate() {
            let c = TsWc {
                wr_id: w.wr_id,
                status: w.status.0,
                opcode: w.opcode.0,
                byte_len: w.byte_len,
                imm: w.imm_data,
                qp_num: w.qp_num,
                src_qp: w.src_qp,
                wc_flags: w.wc_flags.bits(),
                _pad: 0,
            };
            // SAFETY: the caller has room for `max` >= `n` completions.
            unsafe { out.add(i).write(c) };
        }
        Ok(n as c_int)
    })
}

/// Where the model sees QP `qpn`'s send queue: its first byte and its size
/// in 64-byte basic blocks (the receive queue comes first in the buffer).
///
/// # Safety
///
/// `buf` and `wqe_cnt` are writable.
#[no_mangle]
pub unsafe extern "C" fn uverbs_ts_sq(qpn: u32, buf: *mut *const u8, wqe_cnt: *mut u32) -> c_int {
    let _g = Guard::enter();
    let Some(q) = shim().and_then(|s| s.model()).and_then(|m| m.model.qp(qpn)) else {
        eprintln!("uverbs_ts_sq: the model has no QP {qpn:#x}");
        return -1;
    };
    let sq = q.buf + (u64::from(q.rq_wqe_cnt) << q.rq_wqe_shift);
    // SAFETY: the caller passes writable pointers.
    unsafe {
        *buf = sq as *const u8;
        *wqe_cnt = q.sq_wqe_cnt;
    }
    0
}
