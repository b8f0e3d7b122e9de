//! Parent and thread domains through the C slots (verbs.h's inline
//! `ibv_alloc_td`, `ibv_dealloc_td`, `ibv_alloc_parent_domain`), on the
//! mlx5 device model (where they exist) and on the fake rxe kernel (where,
//! as with rdma-core's rxe, they do not).

use core::{
    ffi::{c_int, c_void},
    mem::transmute,
    ptr::null_mut,
};
use std::sync::Mutex;

use super::*;
use crate::{
    cq::{ibv_create_cq, ibv_destroy_cq},
    layout::{
        cq::{ibv_cq, ibv_cq_init_attr_ex},
        qp::{ibv_qp_cap, ibv_qp_init_attr, ibv_srq_attr, ibv_srq_init_attr},
    },
    pd::{ibv_alloc_pd, ibv_dealloc_pd},
    qp::{ibv_create_qp, ibv_destroy_qp},
    srq::{ibv_create_srq, ibv_destroy_srq},
};

/// mlx5dv.h's `MLX5DV_RES_TYPE_QP`, `_DBR`, `_SRQ`, `_CQ`.
const RES_QP: u64 = 1 << 32 | 1;
const RES_DBR: u64 = 1 << 32 | 3;
const RES_SRQ: u64 = 1 << 32 | 4;
const RES_CQ: u64 = 1 << 32 | 5;
/// `IBV_CQ_INIT_ATTR_MASK_PD`.
const CQ_MASK_PD: u32 = 1 << 1;

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// One `alloc` call: `(pd, size, alignment, resource_type, answer)`.
type Alloc = (usize, usize, usize, u64, usize);

/// What the program's callbacks saw: its `pd_context` points at one.
#[derive(Default)]
struct Seen {
    allocs: Mutex<Vec<Alloc>>,
    /// `(pd, ptr, resource_type)`.
    frees: Mutex<Vec<(usize, usize, u64)>>,
    /// 0: memory; 1: `IBV_ALLOCATOR_USE_DEFAULT`; 2: NULL with `EDQUOT`.
    mode: Mutex<u8>,
}

/// A program's `alloc`: `posix_memalign`-like memory from the global
/// allocator (freed by `free_cb`), or what `mode` says.
unsafe extern "C" fn alloc_cb(
    pd: *mut ibv_pd,
    ctx: *mut c_void,
    size: usize,
    alignment: usize,
    resource_type: u64,
) -> *mut c_void {
    // SAFETY: the tests pass a live `Seen` as `pd_context`.
    let seen = unsafe { &*ctx.cast::<Seen>() };
    let mode = *seen.mode.lock().unwrap();
    let answer = match mode {
        0 => {
            let l = std::alloc::Layout::from_size_align(size, alignment).unwrap();
            // SAFETY: a layout of non-zero size.
            unsafe { std::alloc::alloc(l) }.cast::<c_void>()
        }
        1 => usize::MAX as *mut c_void,
        _ => {
            Errno::set_raw(libc::EDQUOT);
            null_mut()
        }
    };
    seen.allocs.lock().unwrap().push((
        pd as usize,
        size,
        alignment,
        resource_type,
        answer as usize,
    ));
    answer
}

unsafe extern "C" fn free_cb(pd: *mut ibv_pd, ctx: *mut c_void, ptr: *mut c_void, rt: u64) {
    // SAFETY: the tests pass a live `Seen` as `pd_context`.
    let seen = unsafe { &*ctx.cast::<Seen>() };
    let allocs = seen.allocs.lock().unwrap();
    let (_, size, alignment, _, _) = *allocs
        .iter()
        .find(|a| a.4 == ptr as usize)
        .expect("freed what alloc_cb gave");
    drop(allocs);
    seen.frees
        .lock()
        .unwrap()
        .push((pd as usize, ptr as usize, rt));
    let l = std::alloc::Layout::from_size_align(size, alignment).unwrap();
    // SAFETY: given by `alloc_cb` with this layout, freed once (the
    // library's contract, checked by the test's counts).
    unsafe { std::alloc::dealloc(ptr.cast(), l) };
}

/// The context's extension ops, called as verbs.h's inline functions call
/// them.
struct Ops {
    ctx: *mut ibv_context,
}

impl Ops {
    fn vctx(&self) -> &crate::layout::context::verbs_context {
        // SAFETY: the test's open context.
        &unsafe { Context::from_c(self.ctx) }.unwrap().vctx
    }

    fn alloc_td(&self, attr: *mut ibv_td_init_attr) -> Result<*mut ibv_td, i32> {
        type F = unsafe extern "C" fn(*mut ibv_context, *mut ibv_td_init_attr) -> *mut ibv_td;
        // SAFETY: the slot holds `alloc_td`, of that signature.
        let f = unsafe { transmute::<unsafe extern "C" fn(), F>(self.vctx().alloc_td.unwrap()) };
        // SAFETY: the test's context and attributes.
        let td = unsafe { f(self.ctx, attr) };
        if td.is_null() {
            Err(last_errno())
        } else {
            Ok(td)
        }
    }

    fn dealloc_td(&self, td: *mut ibv_td) -> c_int {
        type F = unsafe extern "C" fn(*mut ibv_td) -> c_int;
        // SAFETY: the slot holds `dealloc_td`, of that signature.
        let f = unsafe { transmute::<unsafe extern "C" fn(), F>(self.vctx().dealloc_td.unwrap()) };
        // SAFETY: a thread domain of the test.
        unsafe { f(td) }
    }

    fn parent(&self, attr: &mut ibv_parent_domain_init_attr) -> Result<*mut ibv_pd, i32> {
        type F =
            unsafe extern "C" fn(*mut ibv_context, *mut ibv_parent_domain_init_attr) -> *mut ibv_pd;
        // SAFETY: the slot holds `alloc_parent_domain`, of that signature.
        let f = unsafe {
            transmute::<unsafe extern "C" fn(), F>(self.vctx().alloc_parent_domain.unwrap())
        };
        // SAFETY: the test's context and attributes.
        let pd = unsafe { f(self.ctx, attr) };
        if pd.is_null() {
            Err(last_errno())
        } else {
            Ok(pd)
        }
    }

    fn cq_ex(&self, parent_domain: *mut ibv_pd) -> Result<*mut ibv_cq, i32> {
        type F = unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq;
        // SAFETY: the slot holds `create_cq_ex`, of that signature.
        let f =
            unsafe { transmute::<unsafe extern "C" fn(), F>(self.vctx().create_cq_ex.unwrap()) };
        let mut a = ibv_cq_init_attr_ex {
            cqe: 32,
            cq_context: null_mut(),
            channel: null_mut(),
            comp_vector: 0,
            wc_flags: 0x7f,
            comp_mask: CQ_MASK_PD,
            flags: 0,
            parent_domain,
        };
        // SAFETY: the test's context and attributes.
        let cq = unsafe { f(self.ctx, &mut a) };
        if cq.is_null() {
            Err(last_errno())
        } else {
            Ok(cq)
        }
    }
}

fn init(pd: *mut ibv_pd, td: *mut ibv_td, seen: &Seen, mask: u32) -> ibv_parent_domain_init_attr {
    ibv_parent_domain_init_attr {
        pd,
        td,
        comp_mask: mask,
        alloc: Some(alloc_cb),
        free: Some(free_cb),
        pd_context: (seen as *const Seen).cast_mut().cast(),
    }
}

fn qp_on(pd: *mut ibv_pd, cq: *mut ibv_cq) -> Result<*mut crate::layout::qp::ibv_qp, i32> {
    let mut a = ibv_qp_init_attr {
        qp_context: null_mut(),
        send_cq: cq,
        recv_cq: cq,
        srq: null_mut(),
        cap: ibv_qp_cap {
            max_send_wr: 8,
            max_recv_wr: 8,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: 2,
        sq_sig_all: 0,
    };
    // SAFETY: a live PD and CQ of the test.
    let qp = unsafe { ibv_create_qp(pd, &mut a) };
    if qp.is_null() {
        Err(last_errno())
    } else {
        Ok(qp)
    }
}

/// `ALLOCATORS | PD_CONTEXT`.
const BOTH: u32 = 3;

#[test]
fn a_parent_domain_is_a_pd_whose_queues_the_programs_callbacks_allocate() {
    let model = uverbs::testing::mlx5::fake_mlx5();
    let uv = uverbs::Context::open_with(model.dyn_kernel(), None).unwrap();
    let ctx = Context::create(uv, null_mut(), -1, -1);
    let ops = Ops { ctx };
    // SAFETY: a live context.
    let pd = unsafe { ibv_alloc_pd(ctx) };
    let mut td_attr = ibv_td_init_attr { comp_mask: 0 };
    let td = ops.alloc_td(&mut td_attr).unwrap();
    // SAFETY: the thread domain just made.
    assert_eq!(unsafe { (*td).context }, ctx);
    let seen = Seen::default();
    let pdom = ops.parent(&mut init(pd, td, &seen, BOTH)).unwrap();
    // SAFETY: both live PDs.
    unsafe {
        assert_eq!((*pdom).context, ctx);
        assert_eq!((*pdom).handle, (*pd).handle, "the same kernel PD");
    }
    let cq = ops.cq_ex(pdom).unwrap();
    let qp = qp_on(pdom, cq).unwrap();
    // SAFETY: the QP just made.
    let qp_pd = unsafe { (*qp).pd };
    assert_eq!(qp_pd, pdom, "the QP's PD is the parent domain");
    let mut sa = ibv_srq_init_attr {
        srq_context: null_mut(),
        attr: ibv_srq_attr {
            max_wr: 16,
            max_sge: 1,
            srq_limit: 0,
        },
    };
    // SAFETY: a live PD.
    let srq = unsafe { ibv_create_srq(pdom, &mut sa) };
    assert!(!srq.is_null());
    let allocs = seen.allocs.lock().unwrap().clone();
    let kinds: Vec<u64> = allocs.iter().map(|a| a.3).collect();
    assert_eq!(
        kinds,
        [RES_CQ, RES_DBR, RES_QP, RES_DBR, RES_SRQ, RES_DBR],
        "libmlx5's order: each buffer, then its doorbell record"
    );
    assert!(
        allocs.iter().all(|a| a.0 == pdom as usize),
        "pd: the parent domain"
    );
    assert!(allocs
        .iter()
        .all(|a| a.4 != 0 && a.4 % a.2 == 0 && a.2.is_power_of_two()));
    assert!(allocs
        .iter()
        .filter(|a| a.3 == RES_DBR)
        .all(|a| (a.1, a.2) == (8, 8)));
    // The QP's memory is the allocator's: the device was given it.
    // SAFETY: the QP just made.
    let qpn = unsafe { (*qp).qp_num };
    assert_eq!(model.qp(qpn).unwrap().buf, allocs[2].4 as u64);
    assert_eq!(model.qp(qpn).unwrap().db, allocs[3].4 as u64);

    // In use: every deallocation refused, and nothing freed.
    // SAFETY: live objects of the test.
    unsafe {
        assert_eq!(ibv_dealloc_pd(pdom), libc::EBUSY);
        assert_eq!(ibv_dealloc_pd(pd), libc::EBUSY);
    }
    assert_eq!(ops.dealloc_td(td), libc::EBUSY);
    assert!(seen.frees.lock().unwrap().is_empty());
    // SAFETY: live objects of the test, destroyed once.
    unsafe {
        assert_eq!(ibv_destroy_qp(qp), 0);
        assert_eq!(ibv_destroy_srq(srq), 0);
        assert_eq!(ibv_dealloc_pd(pdom), libc::EBUSY, "the CQ holds it");
        assert_eq!(ibv_destroy_cq(cq), 0);
    }
    let mut frees = seen.frees.lock().unwrap().clone();
    let mut given: Vec<_> = allocs.iter().map(|a| (a.0, a.4, a.3)).collect();
    frees.sort_unstable();
    given.sort_unstable();
    assert_eq!(frees, given, "each piece freed once, with its type");
    // SAFETY: the PDs, now unused, deallocated once each.
    unsafe {
        assert_eq!(ibv_dealloc_pd(pdom), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
    assert_eq!(ops.dealloc_td(td), 0);
    // SAFETY: the test's context, closed once.
    unsafe { Context::destroy(ctx) }.unwrap();
}

#[test]
fn callbacks_answers_and_attribute_checks_are_libmlx5s() {
    let model = uverbs::testing::mlx5::fake_mlx5();
    let uv = uverbs::Context::open_with(model.dyn_kernel(), None).unwrap();
    let ctx = Context::create(uv, null_mut(), -1, -1);
    let ops = Ops { ctx };
    // SAFETY: a live context.
    let (pd, cq) = unsafe {
        (
            ibv_alloc_pd(ctx),
            ibv_create_cq(ctx, 8, null_mut(), null_mut(), 0),
        )
    };
    let seen = Seen::default();
    // Attributes libmlx5 refuses with EINVAL.
    let mut td_attr = ibv_td_init_attr { comp_mask: 1 };
    assert_eq!(ops.alloc_td(&mut td_attr), Err(libc::EINVAL));
    assert_eq!(ops.alloc_td(null_mut()), Err(libc::EINVAL));
    assert_eq!(
        ops.parent(&mut init(null_mut(), null_mut(), &seen, BOTH)),
        Err(libc::EINVAL)
    );
    assert_eq!(
        ops.parent(&mut init(pd, null_mut(), &seen, 4)),
        Err(libc::EINVAL)
    );
    // A CQ given a plain PD: EINVAL, as libmlx5.
    assert_eq!(ops.cq_ex(pd), Err(libc::EINVAL));
    // USE_DEFAULT: asked, nothing freed.
    *seen.mode.lock().unwrap() = 1;
    let pdom = ops.parent(&mut init(pd, null_mut(), &seen, BOTH)).unwrap();
    let qp = qp_on(pdom, cq).unwrap();
    assert_eq!(seen.allocs.lock().unwrap().len(), 2);
    // NULL: the create fails with the errno the callback left.
    *seen.mode.lock().unwrap() = 2;
    assert_eq!(qp_on(pdom, cq), Err(libc::EDQUOT));
    // SAFETY: live objects of the test, destroyed once.
    unsafe {
        assert_eq!(ibv_destroy_qp(qp), 0);
        assert_eq!(ibv_dealloc_pd(pdom), 0);
    }
    assert!(seen.frees.lock().unwrap().is_empty());
    // Without the ALLOCATORS bit, or with only one callback, the callbacks
    // are not used (libmlx5's mlx5_is_custom_alloc).
    let before = seen.allocs.lock().unwrap().len();
    let mut no_bit = init(pd, null_mut(), &seen, 2);
    let mut no_free = init(pd, null_mut(), &seen, BOTH);
    no_free.free = None;
    for a in [&mut no_bit, &mut no_free] {
        let p = ops.parent(a).unwrap();
        let qp = qp_on(p, cq).unwrap();
        // SAFETY: live objects of the test, destroyed once.
        unsafe {
            assert_eq!(ibv_destroy_qp(qp), 0);
            assert_eq!(ibv_dealloc_pd(p), 0);
        }
    }
    assert_eq!(seen.allocs.lock().unwrap().len(), before);
    // SAFETY: live objects of the test, destroyed once.
    unsafe {
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
        Context::destroy(ctx).unwrap();
    }
}

#[test]
fn rxe_answers_eopnotsupp_as_libibverbs_for_rdma_cores_rxe() {
    let r = crate::cq::tests::Rig::new();
    let ops = Ops { ctx: r.ctx };
    // SAFETY: a live context.
    let pd = unsafe { ibv_alloc_pd(r.ctx) };
    let mut td_attr = ibv_td_init_attr { comp_mask: 0 };
    assert_eq!(ops.alloc_td(&mut td_attr), Err(libc::EOPNOTSUPP));
    let seen = Seen::default();
    assert_eq!(
        ops.parent(&mut init(pd, null_mut(), &seen, BOTH)),
        Err(libc::EOPNOTSUPP)
    );
    // rdma-core's rxe ignores a CQ's PD.
    let cq = ops.cq_ex(pd).unwrap();
    // SAFETY: live objects of the test, destroyed once.
    unsafe {
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
}
