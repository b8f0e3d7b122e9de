//! `ibv_qp_ex` on the fake rxe kernel: what each `ibv_wr_*` writes into
//! the send ring, that a failed or aborted session writes nothing, which
//! `send_ops_flags` creation takes, and that two threads' sessions do not
//! interleave.

use core::{
    ffi::{c_int, c_void},
    mem::offset_of,
    ptr::null_mut,
    sync::atomic::Ordering,
};

use uverbs::{abi::RxeSendWqe, sys::Errno, testing::rxe::RxeRing};

use super::ibv_qp_to_qp_ex;
use crate::{
    layout::{
        context::ibv_context,
        cq::ibv_cq,
        pd::ibv_pd,
        qp::{ibv_data_buf, ibv_qp, ibv_qp_cap, ibv_qp_ex, ibv_qp_init_attr_ex, ibv_sge},
    },
    qp::{
        ibv_create_qp, ibv_destroy_qp,
        tests::{env, init_attr, to_rts, to_rts_at, Env},
    },
};

const RC: c_int = 2;
const UC: c_int = 3;
const UD: c_int = 4;
/// `IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
const PD_AND_OPS: u32 = 1 | (1 << 6);
/// `IBV_SEND_SIGNALED`, `IBV_SEND_INLINE`.
const SIGNALED: u32 = 2;
const INLINE: u32 = 8;

/// Creates a QP of `qp_type` through the `create_qp_ex` op with
/// `send_ops_flags` = `ops` (the errno on failure).
fn create(e: &Env, qp_type: c_int, ops: u64, max_send_wr: u32) -> Result<*mut ibv_qp, Errno> {
    create_on(e.ctx, e.pd, e.cq, qp_type, ops, max_send_wr)
}

/// [`create`] on any context, PD and CQ.
fn create_on(
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    cq: *mut ibv_cq,
    qp_type: c_int,
    ops: u64,
    max_send_wr: u32,
) -> Result<*mut ibv_qp, Errno> {
    // SAFETY: an all-zero struct of integers and pointers.
    let mut ex: ibv_qp_init_attr_ex = unsafe { core::mem::zeroed() };
    ex.send_cq = cq;
    ex.recv_cq = cq;
    ex.cap = ibv_qp_cap {
        max_send_wr,
        max_recv_wr: 4,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_inline_data: 16,
    };
    ex.qp_type = qp_type;
    ex.pd = pd;
    ex.comp_mask = PD_AND_OPS;
    ex.send_ops_flags = ops;
    // SAFETY: the verbs_context op, on live objects.
    let qp = unsafe { crate::qp::create_qp_ex(ctx, &mut ex) };
    if qp.is_null() {
        Err(Errno::last())
    } else {
        Ok(qp)
    }
}

/// An RC QP with every operation uverbs posts, in RTS, and its `ibv_qp_ex`.
fn rc(e: &Env) -> (*mut ibv_qp, &'static ibv_qp_ex, RxeRing) {
    let qp = create(e, RC, 0x7f, 32).unwrap();
    // SAFETY: the QP just made.
    let (handle, qp_num) = unsafe { ((*qp).handle, (*qp).qp_num) };
    to_rts(qp, qp_num);
    // SAFETY: a live QP of this library.
    let x = unsafe { ibv_qp_to_qp_ex(qp) };
    assert_eq!(x.cast::<ibv_qp>(), qp, "the same object");
    // SAFETY: live until the test destroys it (tests end with that).
    (qp, unsafe { &*x }, e.fake.sq_ring(handle).unwrap())
}

/// The C inlines of verbs.h: each `ibv_wr_*` calls its slot.
macro_rules! call {
    ($x:expr, $slot:ident $(, $arg:expr)* ; fn($($t:ty),*) $(-> $r:ty)?) => {{
        let x: &ibv_qp_ex = $x;
        let f = x.$slot.expect(stringify!($slot));
        type Sig = unsafe extern "C" fn(*mut ibv_qp_ex $(, $t)*) $(-> $r)?;
        // SAFETY: the slot holds a function of this signature.
        let f = unsafe { core::mem::transmute::<unsafe extern "C" fn(), Sig>(f) };
        // SAFETY: a live QP of this library and valid arguments.
        unsafe { f(core::ptr::from_ref(x).cast_mut() $(, $arg)*) }
    }};
}

fn start(x: &ibv_qp_ex) {
    call!(x, wr_start; fn())
}
fn complete(x: &ibv_qp_ex) -> c_int {
    call!(x, wr_complete; fn() -> c_int)
}
fn abort(x: &ibv_qp_ex) {
    call!(x, wr_abort; fn())
}
fn ids(x: &ibv_qp_ex, wr_id: u64, flags: u32) {
    x.wr_id.store(wr_id, Ordering::Relaxed);
    x.wr_flags.store(flags, Ordering::Relaxed);
}
fn send(x: &ibv_qp_ex) {
    call!(x, wr_send; fn())
}
fn sge(x: &ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    call!(x, wr_set_sge, lkey, addr, length; fn(u32, u64, u32))
}

/// A WQE's fields, read at the offsets of `struct rxe_send_wqe`.
struct Wqe(Vec<u8>);

impl Wqe {
    fn u32(&self, at: usize) -> u32 {
        u32::from_ne_bytes(self.0[at..at + 4].try_into().unwrap())
    }
    fn u64(&self, at: usize) -> u64 {
        u64::from_ne_bytes(self.0[at..at + 8].try_into().unwrap())
    }
    fn wr_id(&self) -> u64 {
        self.u64(0)
    }
    fn opcode(&self) -> u32 {
        self.u32(12)
    }
    fn flags(&self) -> u32 {
        self.u32(16)
    }
    fn imm(&self) -> u32 {
        u32::from_be(self.u32(20))
    }
    /// `wr.rdma.remote_addr` / `wr.atomic.remote_addr`.
    fn remote_addr(&self) -> u64 {
        self.u64(24)
    }
    fn dma(&self) -> usize {
        offset_of!(RxeSendWqe, dma)
    }
    fn length(&self) -> u32 {
        self.u32(self.dma())
    }
    fn num_sge(&self) -> u32 {
        self.u32(self.dma() + 12)
    }
    /// SGE `i`: (addr, length, lkey).
    fn sge(&self, i: usize) -> (u64, u32, u32) {
        let at = self.dma() + 24 + 16 * i;
        (self.u64(at), self.u32(at + 8), self.u32(at + 12))
    }
    fn inline(&self) -> &[u8] {
        let at = self.dma() + 24;
        &self.0[at..at + self.length() as usize]
    }
}

fn drain(ring: &RxeRing) -> Vec<Wqe> {
    core::iter::from_fn(|| ring.consume()).map(Wqe).collect()
}

#[test]
fn an_rc_session_writes_each_operation_as_rxe_would() {
    let e = env();
    let (qp, x, ring) = rc(&e);
    let a = [0u8; 64];
    let base = a.as_ptr() as u64;
    start(x);
    ids(x, 1, SIGNALED);
    send(x);
    sge(x, 7, base, 16);
    ids(x, 2, 0);
    call!(x, wr_send_imm, 0x1234u32.to_be(); fn(u32));
    let mut hello = *b"hello";
    call!(x, wr_set_inline_data, hello.as_mut_ptr().cast::<c_void>(), 5usize;
          fn(*mut c_void, usize));
    hello.fill(0); // copied by the setter: reusable at once
    ids(x, 3, SIGNALED | INLINE); // INLINE is the setter's to say
    call!(x, wr_rdma_write, 5u32, 0x1000u64; fn(u32, u64));
    let list = [
        ibv_sge {
            addr: base,
            length: 8,
            lkey: 7,
        },
        ibv_sge {
            addr: base + 32,
            length: 4,
            lkey: 7,
        },
    ];
    call!(x, wr_set_sge_list, 2usize, list.as_ptr(); fn(usize, *const ibv_sge));
    ids(x, 4, SIGNALED);
    call!(x, wr_rdma_write_imm, 5u32, 0x2000u64, 9u32.to_be(); fn(u32, u64, u32));
    let (mut p1, mut p2) = (*b"ab", *b"cde");
    let pieces = [
        ibv_data_buf {
            addr: p1.as_mut_ptr().cast(),
            length: 2,
        },
        ibv_data_buf {
            addr: p2.as_mut_ptr().cast(),
            length: 3,
        },
    ];
    call!(x, wr_set_inline_data_list, 2usize, pieces.as_ptr(); fn(usize, *const ibv_data_buf));
    ids(x, 5, SIGNALED);
    call!(x, wr_rdma_read, 5u32, 0x3000u64; fn(u32, u64));
    sge(x, 7, base, 32);
    ids(x, 6, SIGNALED);
    call!(x, wr_atomic_cmp_swp, 5u32, 0x4000u64, 1u64, 2u64; fn(u32, u64, u64, u64));
    sge(x, 7, base + 8, 8);
    ids(x, 7, SIGNALED);
    call!(x, wr_atomic_fetch_add, 5u32, 0x5000u64, 3u64; fn(u32, u64, u64));
    sge(x, 7, base + 16, 8);
    ids(x, 8, SIGNALED);
    send(x); // no data: a zero-length message
    assert_eq!(ring.producer(), 0, "nothing before complete");
    assert_eq!(complete(x), 0);
    let w = drain(&ring);
    assert_eq!(w.len(), 8);
    let got: Vec<_> = w.iter().map(|w| (w.wr_id(), w.opcode())).collect();
    assert_eq!(
        got,
        [
            (1, 2),
            (2, 3),
            (3, 0),
            (4, 1),
            (5, 4),
            (6, 5),
            (7, 6),
            (8, 2)
        ]
    );
    assert_eq!(
        (w[0].flags(), w[0].num_sge(), w[0].length()),
        (SIGNALED, 1, 16)
    );
    assert_eq!(w[0].sge(0), (base, 16, 7));
    assert_eq!(
        (w[1].flags(), w[1].imm(), w[1].inline()),
        (INLINE, 0x1234, &b"hello"[..])
    );
    assert_eq!(
        (w[2].flags(), w[2].remote_addr(), w[2].length()),
        (SIGNALED, 0x1000, 12)
    );
    assert_eq!(
        (w[2].sge(0), w[2].sge(1)),
        ((base, 8, 7), (base + 32, 4, 7))
    );
    assert_eq!((w[3].imm(), w[3].inline()), (9, &b"abcde"[..]));
    assert_eq!((w[4].remote_addr(), w[4].sge(0)), (0x3000, (base, 32, 7)));
    assert_eq!(
        (w[5].remote_addr(), w[5].sge(0)),
        (0x4000, (base + 8, 8, 7))
    );
    assert_eq!(
        (w[6].remote_addr(), w[6].sge(0)),
        (0x5000, (base + 16, 8, 7))
    );
    assert_eq!((w[7].num_sge(), w[7].length()), (0, 0));
    // SAFETY: a live QP, given up.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

/// `ibv_wr_bind_mw`, `ibv_wr_local_inv`, `ibv_wr_send_inv` and
/// `ibv_wr_atomic_write` write what rdma-core's rxe writes (rxe.c
/// `wr_bind_mw`, `wr_local_inv`, `wr_send_inv`, `wr_atomic_write`):
/// the window's current key and the region's local key read when the
/// builder ran, the invalidated key in host order in `ex`, the atomic
/// write's bytes where the SGEs would be.
#[test]
fn windows_invalidations_and_atomic_writes_are_written_as_rxe_writes_them() {
    use crate::layout::{pd::ibv_mw, qp::ibv_mw_bind_info};
    let e = env();
    let (qp, x, ring) = rc(&e);
    let mut buf = vec![0u64; 512];
    let addr = buf.as_mut_ptr().cast::<c_void>();
    // SAFETY: live objects; `buf` outlives the registration.
    let (mr, mw) = unsafe {
        let mr = crate::pd::ibv_reg_mr(e.pd, addr, 4096, 1 | (1 << 4));
        assert!(!mr.is_null());
        let ops = &(*e.ctx).ops;
        type Alloc = unsafe extern "C" fn(*mut ibv_pd, c_int) -> *mut ibv_mw;
        let alloc = core::mem::transmute::<unsafe extern "C" fn(), Alloc>(ops.alloc_mw.unwrap());
        let mw = alloc(e.pd, 2);
        assert!(!mw.is_null());
        (mr, mw)
    };
    // SAFETY: live objects of this library.
    let (lkey, mw_rkey) = unsafe { ((*mr).lkey, (*mw).rkey.load(Ordering::Relaxed)) };
    let info = ibv_mw_bind_info {
        mr: mr.cast(),
        addr: addr as u64 + 64,
        length: 256,
        mw_access_flags: 2,
    };
    let a = [0u8; 64];
    let base = a.as_ptr() as u64;
    start(x);
    ids(x, 1, SIGNALED);
    call!(x, wr_bind_mw, mw, mw_rkey + 1, &raw const info;
          fn(*mut ibv_mw, u32, *const ibv_mw_bind_info));
    ids(x, 2, 0);
    call!(x, wr_local_inv, 0xa1b2_c3d4u32; fn(u32));
    ids(x, 3, SIGNALED);
    call!(x, wr_send_inv, 0x0506_0708u32; fn(u32));
    sge(x, 7, base, 16);
    ids(x, 4, SIGNALED);
    let mut data = *b"8 bytes!";
    call!(x, wr_atomic_write, 5u32, 0x6000u64, data.as_ptr().cast::<c_void>();
          fn(u32, u64, *const c_void));
    data.fill(0); // copied by the builder
    assert_eq!(complete(x), 0);
    let w = drain(&ring);
    let got: Vec<_> = w
        .iter()
        .map(|w| (w.wr_id(), w.opcode(), w.flags()))
        .collect();
    assert_eq!(
        got,
        [
            (1, 8, SIGNALED),
            (2, 7, 0),
            (3, 9, SIGNALED),
            (4, 15, SIGNALED)
        ]
    );
    // `wr.mw`: addr, length, mr_lkey, mw_rkey, rkey, access.
    assert_eq!(
        (w[0].u64(24), w[0].u64(32), w[0].u32(40), w[0].u32(44)),
        (addr as u64 + 64, 256, lkey, mw_rkey)
    );
    assert_eq!(
        (w[0].u32(48), w[0].u32(52), w[0].length()),
        (mw_rkey + 1, 2, 0)
    );
    // `ex.invalidate_rkey`, host order.
    assert_eq!((w[1].u32(20), w[1].length()), (0xa1b2_c3d4, 0));
    assert_eq!((w[2].u32(20), w[2].sge(0)), (0x0506_0708, (base, 16, 7)));
    // `wr.rdma` and `dma.atomic_wr`.
    assert_eq!((w[3].remote_addr(), w[3].u32(32)), (0x6000, 5));
    assert_eq!((w[3].length(), w[3].num_sge()), (8, 0));
    let at = w[3].dma() + 24;
    assert_eq!(&w[3].0[at..at + 8], b"8 bytes!");
    // SAFETY: live objects, given up.
    unsafe {
        let ops = &(*e.ctx).ops;
        type Dealloc = unsafe extern "C" fn(*mut ibv_mw) -> c_int;
        let dealloc =
            core::mem::transmute::<unsafe extern "C" fn(), Dealloc>(ops.dealloc_mw.unwrap());
        assert_eq!(dealloc(mw), 0);
        assert_eq!(crate::pd::ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_destroy_qp(qp), 0);
    }
    drop(buf);
}

#[test]
fn a_failed_or_aborted_session_writes_nothing() {
    let e = env();
    let (qp, x, ring) = rc(&e);
    let a = [0u8; 64];
    let base = a.as_ptr() as u64;
    let eopnotsupp = Errno::EOPNOTSUPP as c_int;
    type Call = fn(&ibv_qp_ex);
    let unsupported: [(&str, Call); 3] = [
        (
            "send_tso",
            |x| call!(x, wr_send_tso, null_mut::<c_void>(), 0u16, 0u16; fn(*mut c_void, u16, u16)),
        ),
        ("set_xrc_srqn", |x| call!(x, wr_set_xrc_srqn, 1u32; fn(u32))),
        ("flush", |x| {
            // SAFETY: the slot right after the ibv_qp_ex, in the QP object.
            let q = unsafe { &*core::ptr::from_ref(x).cast::<crate::qp::Qp>() };
            let f = q.wr_flush.expect("wr_flush");
            type Flush = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, usize, u8, u8);
            // SAFETY: the slot holds a function of this signature.
            let f = unsafe { core::mem::transmute::<unsafe extern "C" fn(), Flush>(f) };
            // SAFETY: a live QP.
            unsafe { f(core::ptr::from_ref(x).cast_mut(), 1, 0, 8, 0, 0) }
        }),
    ];
    for (name, op) in unsupported {
        start(x);
        send(x);
        sge(x, 7, base, 8);
        op(x);
        send(x);
        assert_eq!(complete(x), eopnotsupp, "{name}");
        assert_eq!(ring.producer(), 0, "{name}: nothing of the session");
    }
    // A bind without window or bind info, an atomic write without its 8
    // bytes, data given to an operation that carries its own: EINVAL.
    let malformed: [(&str, Call); 4] = [
        ("bind_mw without window", |x| {
            call!(x, wr_bind_mw, null_mut::<c_void>(), 1u32, core::ptr::null::<c_void>();
                  fn(*mut c_void, u32, *const c_void))
        }),
        ("atomic_write without data", |x| {
            call!(x, wr_atomic_write, 1u32, 0u64, core::ptr::null::<c_void>();
                  fn(u32, u64, *const c_void))
        }),
        ("local_inv with an SGE", |x| {
            call!(x, wr_local_inv, 1u32; fn(u32));
            sge(x, 7, 0x1000, 8);
        }),
        ("atomic_write with inline data", |x| {
            let mut d = [0u8; 8];
            call!(x, wr_atomic_write, 1u32, 0u64, d.as_ptr().cast::<c_void>();
                  fn(u32, u64, *const c_void));
            call!(x, wr_set_inline_data, d.as_mut_ptr().cast::<c_void>(), 8usize;
                  fn(*mut c_void, usize));
        }),
    ];
    for (name, op) in malformed {
        start(x);
        send(x);
        sge(x, 7, base, 8);
        op(x);
        assert_eq!(complete(x), Errno::EINVAL as c_int, "{name}");
        assert_eq!(ring.producer(), 0, "{name}: nothing of the session");
    }
    // Too much inline data, too many SGEs: ENOSPC, as rxe's setters.
    let mut big = [0u8; 4096];
    start(x);
    send(x);
    call!(x, wr_set_inline_data, big.as_mut_ptr().cast::<c_void>(), big.len();
          fn(*mut c_void, usize));
    assert_eq!(complete(x), Errno::ENOSPC as c_int);
    let list = [ibv_sge {
        addr: base,
        length: 1,
        lkey: 7,
    }; 64];
    start(x);
    send(x);
    call!(x, wr_set_sge_list, 64usize, list.as_ptr(); fn(usize, *const ibv_sge));
    assert_eq!(complete(x), Errno::ENOSPC as c_int);
    // A setter before any builder; inline data for a read.
    start(x);
    sge(x, 7, base, 8);
    assert_eq!(complete(x), Errno::EINVAL as c_int);
    start(x);
    call!(x, wr_rdma_read, 5u32, 0x3000u64; fn(u32, u64));
    call!(x, wr_set_inline_data, big.as_mut_ptr().cast::<c_void>(), 4usize;
          fn(*mut c_void, usize));
    assert_eq!(complete(x), Errno::EINVAL as c_int);
    // A destination on a connected QP.
    start(x);
    send(x);
    call!(x, wr_set_ud_addr, 0x10 as *mut c_void, 1u32, 1u32; fn(*mut c_void, u32, u32));
    assert_eq!(complete(x), Errno::EINVAL as c_int);
    // More than the queue holds: ENOSPC when written, nothing left behind.
    start(x);
    for i in 0..100 {
        ids(x, i, SIGNALED);
        send(x);
    }
    assert_eq!(complete(x), Errno::ENOSPC as c_int);
    assert_eq!(ring.producer(), 0);
    // Aborted: nothing; a complete with no session open: EINVAL.
    start(x);
    send(x);
    abort(x);
    assert_eq!(complete(x), Errno::EINVAL as c_int);
    assert_eq!(ring.producer(), 0);
    // The next session is clean, and a thread starting again inside its
    // own session starts over.
    start(x);
    ids(x, 41, SIGNALED);
    send(x);
    start(x);
    ids(x, 42, SIGNALED);
    send(x);
    assert_eq!(complete(x), 0);
    let w = drain(&ring);
    assert_eq!(w.iter().map(Wqe::wr_id).collect::<Vec<_>>(), [42]);
    // SAFETY: a live QP, given up.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

#[test]
fn creation_takes_the_send_ops_rxe_takes_on_the_qp_type() {
    let e = env();
    // rxe's sets (rdma-core rxe.c RXE_SUP_*_QP_SEND_OPS_FLAGS): RC all
    // but TSO, UC sends, writes, BIND_MW and SEND_WITH_INV, UD sends.
    for (qp_type, ops) in [(RC, 0x13ff), (UC, 0x30f), (UD, 0x0c), (UD, 0)] {
        let qp = create(&e, qp_type, ops, 4).unwrap();
        // SAFETY: a live QP of this library.
        assert!(!unsafe { ibv_qp_to_qp_ex(qp) }.is_null());
        // SAFETY: given up.
        assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
    }
    // TSO, and what the type does not carry (rxe refuses those too).
    for (qp_type, ops) in [
        (RC, 1 << 10),
        (UC, 1 << 4),
        (UC, 1 << 7),
        (UC, 1 << 12),
        (UD, 1 << 0),
        (UD, 1 << 8),
        (8, 1 << 2),
    ] {
        assert_eq!(
            create(&e, qp_type, ops, 4),
            Err(Errno::EOPNOTSUPP),
            "{qp_type} {ops:#x}"
        );
    }
    // ibv_create_qp's QPs have no ibv_qp_ex (errno untouched, as
    // verbs.c), though every slot is filled.
    let mut ia = init_attr(&e, RC, null_mut());
    // SAFETY: live objects.
    let qp = unsafe { ibv_create_qp(e.pd, &mut ia) };
    assert!(!qp.is_null());
    Errno::set_raw(0);
    // SAFETY: a live QP of this library.
    assert!(unsafe { ibv_qp_to_qp_ex(qp) }.is_null());
    assert_eq!(Errno::last_raw(), 0);
    // SAFETY: a live QP of this library: its C part.
    let x = unsafe { &*qp.cast::<ibv_qp_ex>() };
    assert!(x.wr_start.is_some() && x.wr_atomic_write.is_some() && x.wr_set_sge_list.is_some());
    // SAFETY: NULL.
    assert!(unsafe { ibv_qp_to_qp_ex(null_mut()) }.is_null());
    assert_eq!(Errno::last(), Errno::EINVAL);
    // SAFETY: given up.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

#[test]
fn a_ud_send_needs_its_destination() {
    let e = env();
    let qp = create(&e, UD, 0x0c, 4).unwrap();
    // SAFETY: a live QP of this library.
    let x = unsafe { &*ibv_qp_to_qp_ex(qp) };
    let mut a = crate::qp::tests::blank_attr();
    a.qp_state = 1;
    a.port_num = 1;
    a.qkey = 0x1111;
    // SAFETY: live objects.
    unsafe {
        use crate::qp::ibv_modify_qp;
        assert_eq!(
            ibv_modify_qp(qp, &mut a, 1 | (1 << 4) | (1 << 5) | (1 << 6)),
            0
        );
        a.qp_state = 2;
        assert_eq!(ibv_modify_qp(qp, &mut a, 1), 0);
        a.qp_state = 3;
        assert_eq!(ibv_modify_qp(qp, &mut a, 1 | (1 << 16)), 0);
    }
    start(x);
    send(x);
    assert_eq!(complete(x), Errno::EINVAL as c_int);
    start(x);
    send(x);
    call!(x, wr_set_ud_addr, null_mut::<c_void>(), 1u32, 1u32; fn(*mut c_void, u32, u32));
    assert_eq!(complete(x), Errno::EINVAL as c_int);
    start(x);
    call!(x, wr_rdma_write, 5u32, 0x1000u64; fn(u32, u64));
    assert_eq!(complete(x), Errno::EOPNOTSUPP as c_int);
    // SAFETY: given up.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

/// `wr_start` .. `wr_complete` is a critical section: two threads posting
/// sessions of two sends each through one `ibv_qp_ex` (writing its shared
/// `wr_id` inside their sessions) never interleave their requests.
#[test]
fn two_threads_sessions_do_not_interleave() {
    let e = env();
    let (qp, x, ring) = rc(&e);
    const SESSIONS: u64 = 100;
    let mut seen = Vec::new();
    let addr = core::ptr::from_ref(x) as usize;
    std::thread::scope(|s| {
        for t in 0..2u64 {
            s.spawn(move || {
                // SAFETY: the QP lives until the threads are joined.
                let x = unsafe { &*(addr as *const ibv_qp_ex) };
                let mut i = 0;
                while i < SESSIONS {
                    start(x);
                    for k in 0..2 {
                        ids(x, (t << 32) | (i << 1) | k, 0);
                        send(x);
                    }
                    match complete(x) {
                        0 => i += 1,
                        rc => assert_eq!(rc, Errno::ENOSPC as c_int, "a full queue"),
                    }
                }
            });
        }
        while seen.len() < 2 * 2 * SESSIONS as usize {
            match ring.consume() {
                Some(w) => seen.push(Wqe(w).wr_id()),
                None => std::thread::yield_now(),
            }
        }
    });
    for pair in seen.chunks(2) {
        assert_eq!(pair[0] ^ 1, pair[1], "one session's requests together");
    }
    // SAFETY: a live QP, given up.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

/// On mlx5 (the device model) the session goes through mlx5's typed
/// session: the device executes what was built, in order.
#[test]
fn an_mlx5_session_reaches_the_device() {
    use crate::{
        cq::ibv_create_cq,
        pd::{ibv_alloc_pd, ibv_dereg_mr, ibv_reg_mr},
    };
    let model = uverbs::testing::mlx5::fake_mlx5();
    model.log_wqes(true);
    let uv = uverbs::Context::open_with(model.dyn_kernel(), None).unwrap();
    let dgid = uv.query_gid(1, 1).unwrap().expect("GID 1").gid.0;
    let ctx = crate::context::Context::create(uv, null_mut(), -1, -1);
    // SAFETY: a live context.
    let (pd, cq) = unsafe {
        (
            ibv_alloc_pd(ctx),
            ibv_create_cq(ctx, 16, null_mut(), null_mut(), 0),
        )
    };
    assert!(!pd.is_null() && !cq.is_null());
    let qp = create_on(ctx, pd, cq, RC, 0x7f, 8).unwrap();
    // SAFETY: the QP just made.
    to_rts_at(qp, unsafe { (*qp).qp_num }, dgid);
    let mut mem = vec![0u8; 4096];
    mem[..8].copy_from_slice(b"written!");
    // SAFETY: a live PD and a buffer that outlives the MR.
    let mr = unsafe { ibv_reg_mr(pd, mem.as_mut_ptr().cast(), mem.len(), 0x7) };
    assert!(!mr.is_null());
    // SAFETY: the MR just made.
    let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
    let base = mem.as_ptr() as u64;
    // The write with immediate data consumes a receive.
    let mut rs = ibv_sge {
        addr: base + 1024,
        length: 64,
        lkey,
    };
    let mut r = crate::layout::qp::ibv_recv_wr {
        wr_id: 9,
        next: null_mut(),
        sg_list: &mut rs,
        num_sge: 1,
    };
    let mut bad = null_mut();
    // SAFETY: a live QP and a valid request.
    assert_eq!(unsafe { crate::qp::post_recv(qp, &mut r, &mut bad) }, 0);
    // SAFETY: a live QP of this library.
    let x = unsafe { &*ibv_qp_to_qp_ex(qp) };
    start(x);
    ids(x, 1, SIGNALED);
    call!(x, wr_rdma_write, rkey, base + 64; fn(u32, u64));
    sge(x, lkey, base, 8);
    ids(x, 2, SIGNALED);
    call!(x, wr_rdma_write_imm, rkey, base + 128, 5u32.to_be(); fn(u32, u64, u32));
    let mut text = *b"inline";
    call!(x, wr_set_inline_data, text.as_mut_ptr().cast::<c_void>(), 6usize;
          fn(*mut c_void, usize));
    ids(x, 3, 0);
    call!(x, wr_atomic_fetch_add, rkey, base + 256, 2u64; fn(u32, u64, u64));
    sge(x, lkey, base + 512, 8);
    model.process();
    assert!(model.executed_wqes().is_empty(), "nothing before complete");
    assert_eq!(complete(x), 0);
    model.process();
    let w = model.executed_wqes();
    let got: Vec<_> = w
        .iter()
        .map(|w| (w.opcode, w.signaled(), w.inline))
        .collect();
    // MLX5_OPCODE_RDMA_WRITE, _RDMA_WRITE_IMM, _ATOMIC_FA.
    assert_eq!(
        got,
        [
            (0x08, true, false),
            (0x09, true, true),
            (0x12, false, false)
        ]
    );
    assert_eq!(&mem[64..72], b"written!");
    assert_eq!(&mem[128..134], b"inline");
    // SAFETY: live objects, given up.
    unsafe {
        assert_eq!(ibv_destroy_qp(qp), 0);
        assert_eq!(ibv_dereg_mr(mr), 0);
    }
}
