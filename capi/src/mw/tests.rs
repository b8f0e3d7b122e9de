//! Memory windows through the C entry points on uverbs' fake rxe kernel:
//! the `alloc_mw`, `bind_mw` and `dealloc_mw` ops, and binds and
//! invalidations through `post_send` (what reaches the send ring).

use core::{ffi::c_void, mem::zeroed, ptr::null_mut};

use uverbs::testing::rxe::{Kind, RxeRing};

use super::*;
use crate::{
    layout::{context::ibv_context, pd::ibv_mr, qp::ibv_mw_bind_info},
    qp::{
        ibv_create_qp, ibv_destroy_qp,
        tests::{env, init_attr, to_rts, Env},
    },
};

/// The context's ops, as verbs.h's inlines call them.
struct Ops {
    alloc: AllocMwFn,
    dealloc: DeallocMwFn,
    bind: BindMwFn,
}

fn ops(ctx: *mut ibv_context) -> Ops {
    // SAFETY: a live context; each slot holds a function of its type.
    unsafe {
        let o = &(*ctx).ops;
        Ops {
            alloc: transmute::<unsafe extern "C" fn(), AllocMwFn>(o.alloc_mw.unwrap()),
            dealloc: transmute::<unsafe extern "C" fn(), DeallocMwFn>(o.dealloc_mw.unwrap()),
            bind: transmute::<unsafe extern "C" fn(), BindMwFn>(o.bind_mw.unwrap()),
        }
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// An RC QP in RTS and its send ring.
fn rc_qp(e: &Env) -> (*mut ibv_qp, RxeRing) {
    let mut ia = init_attr(e, 2, null_mut());
    // SAFETY: live objects.
    let qp = unsafe { ibv_create_qp(e.pd, &mut ia) };
    assert!(!qp.is_null());
    // SAFETY: a live QP.
    let (handle, qp_num) = unsafe { ((*qp).handle, (*qp).qp_num) };
    to_rts(qp, qp_num);
    (qp, e.fake.sq_ring(handle).unwrap())
}

/// An env, its ops, an RC QP in RTS with its ring, and a region with
/// `MW_BIND` over `buf` (which the test keeps until it deregisters it).
fn rig(buf: &mut [u64]) -> (Env, Ops, *mut ibv_qp, RxeRing, *mut ibv_mr) {
    let e = env();
    let o = ops(e.ctx);
    let (qp, ring) = rc_qp(&e);
    let mr = region(&e, buf);
    (e, o, qp, ring, mr)
}

/// A registered region of `buf` with `MW_BIND` (and local write).
fn region(e: &Env, buf: &mut [u64]) -> *mut ibv_mr {
    // SAFETY: a live PD; the caller keeps `buf` while registered.
    let mr = unsafe { crate::pd::ibv_reg_mr(e.pd, buf.as_mut_ptr().cast(), 4096, 1 | (1 << 4)) };
    assert!(!mr.is_null());
    mr
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
}

#[test]
fn windows_carry_what_programs_read_and_unknown_types_are_einval() {
    let e = env();
    let o = ops(e.ctx);
    // SAFETY: the env's live PD; windows given up below.
    unsafe {
        let one = (o.alloc)(e.pd, 1);
        let two = (o.alloc)(e.pd, 2);
        assert!(!one.is_null() && !two.is_null());
        for (mw, ty) in [(one, 1), (two, 2)] {
            let m = Mw::from_c(mw).unwrap();
            let uv = m.mw.lock().unwrap().clone().unwrap();
            assert_eq!(((*mw).context, (*mw).pd, (*mw).r#type), (e.ctx, e.pd, ty));
            assert_eq!(((*mw).handle, m.rkey()), (uv.handle(), uv.rkey()));
        }
        // The kernel knows types 1 and 2 only (ib_uverbs_alloc_mw).
        assert!((o.alloc)(e.pd, 3).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert!((o.alloc)(null_mut(), 1).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        let h = (*two).handle;
        assert_eq!((o.dealloc)(two), 0);
        assert!(e.fake.destroyed(Kind::Mw).contains(&h));
        // A window in use by another handle: uverbs answers EBUSY and
        // gives it back; the C object keeps it, and the next call, once
        // the other handle is gone, deallocates it.
        let held = Mw::from_c(one).unwrap().mw.lock().unwrap().clone().unwrap();
        assert_eq!((o.dealloc)(one), libc::EBUSY);
        let h = held.handle();
        drop(held);
        assert!(!e.fake.destroyed(Kind::Mw).contains(&h));
        assert_eq!((*one).handle, h, "the C object is as it was");
        assert_eq!((o.dealloc)(one), 0);
        assert!(e.fake.destroyed(Kind::Mw).contains(&h));
        assert_eq!((o.dealloc)(null_mut()), libc::EINVAL);
    }
}

/// `ibv_bind_mw` (type 1) posts a BIND_MW to the next key and stores it in
/// `mw->rkey`, as rdma-core's rxe `rxe_bind_mw`; ZERO_BASED is `EINVAL`
/// and posts nothing.
#[test]
fn bind_mw_posts_a_bind_to_the_next_key_and_records_it() {
    let mut buf = vec![0u64; 512];
    let (e, o, qp, ring, mr) = rig(&mut buf);
    // SAFETY: live objects of this library; all given up below.
    unsafe {
        let mw = (o.alloc)(e.pd, 1);
        (*mw).rkey.store(0x0000_37ff, Ordering::Relaxed);
        let mut bind = ibv_mw_bind {
            wr_id: 77,
            send_flags: 2,
            bind_info: ibv_mw_bind_info {
                mr: mr.cast(),
                addr: (*mr).addr as u64 + 8,
                length: 100,
                mw_access_flags: 4,
            },
        };
        assert_eq!((o.bind)(qp, mw, &mut bind), 0);
        // The key byte wraps, the index stays.
        assert_eq!((*mw).rkey.load(Ordering::Relaxed), 0x0000_3700);
        let w = ring.consume().expect("the bind");
        assert_eq!((u64_at(&w, 0), u32_at(&w, 12), u32_at(&w, 16)), (77, 8, 2));
        assert_eq!(
            (u64_at(&w, 24), u64_at(&w, 32), u32_at(&w, 40)),
            ((*mr).addr as u64 + 8, 100, (*mr).lkey)
        );
        assert_eq!(
            (u32_at(&w, 44), u32_at(&w, 48), u32_at(&w, 52)),
            (0x0000_37ff, 0x0000_3700, 4)
        );
        bind.bind_info.mw_access_flags |= 1 << 5;
        assert_eq!((o.bind)(qp, mw, &mut bind), libc::EINVAL);
        assert_eq!((*mw).rkey.load(Ordering::Relaxed), 0x0000_3700);
        assert!(ring.consume().is_none());
        assert_eq!((o.bind)(qp, mw, null_mut()), libc::EINVAL);
        assert_eq!((o.dealloc)(mw), 0);
        assert_eq!(crate::pd::ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_destroy_qp(qp), 0);
    }
    drop(buf);
}

/// `ibv_post_send` of IBV_WR_BIND_MW, IBV_WR_LOCAL_INV and
/// IBV_WR_SEND_WITH_INV: rdma-core's rxe `convert_send_wr` (the window's
/// key from the window object, the region's lkey from the region, the
/// invalidated key from the `imm_data`/`invalidate_rkey` union).
#[test]
fn post_send_converts_binds_and_invalidations() {
    let mut buf = vec![0u64; 512];
    let (e, o, qp, ring, mr) = rig(&mut buf);
    // SAFETY: live objects of this library; all given up below.
    unsafe {
        let mw = (o.alloc)(e.pd, 2);
        let mw_rkey = (*mw).rkey.load(Ordering::Relaxed);
        let mut wrs: [ibv_send_wr; 3] = zeroed();
        wrs[0].wr_id = 1;
        wrs[0].opcode = 8;
        wrs[0].send_flags = 2;
        wrs[0].bind_mw.bind_mw.mw = mw.cast();
        wrs[0].bind_mw.bind_mw.rkey = mw_rkey + 1;
        wrs[0].bind_mw.bind_mw.bind_info = ibv_mw_bind_info {
            mr: mr.cast(),
            addr: (*mr).addr as u64,
            length: 4096,
            mw_access_flags: 2,
        };
        wrs[1].wr_id = 2;
        wrs[1].opcode = 7;
        wrs[1].imm_data.invalidate_rkey = mw_rkey + 1;
        let mut sge = crate::layout::qp::ibv_sge {
            addr: (*mr).addr as u64,
            length: 8,
            lkey: (*mr).lkey,
        };
        wrs[2].wr_id = 3;
        wrs[2].opcode = 9;
        wrs[2].imm_data.invalidate_rkey = 0x0102_0304;
        wrs[2].sg_list = &mut sge;
        wrs[2].num_sge = 1;
        let p = wrs.as_mut_ptr();
        (*p).next = p.add(1);
        (*p.add(1)).next = p.add(2);
        let mut bad = null_mut();
        assert_eq!(crate::qp::post_send(qp, p, &mut bad), 0);
        let got: Vec<_> = core::iter::from_fn(|| ring.consume()).collect();
        assert_eq!(got.len(), 3);
        assert_eq!((u32_at(&got[0], 12), u32_at(&got[0], 44)), (8, mw_rkey));
        assert_eq!(
            (u32_at(&got[0], 48), u32_at(&got[0], 40)),
            (mw_rkey + 1, (*mr).lkey)
        );
        // A post does not change `mw->rkey` (the program tracks type 2 keys).
        assert_eq!((*mw).rkey.load(Ordering::Relaxed), mw_rkey);
        assert_eq!((u32_at(&got[1], 12), u32_at(&got[1], 20)), (7, mw_rkey + 1));
        assert_eq!((u32_at(&got[2], 12), u32_at(&got[2], 20)), (9, 0x0102_0304));
        // A bind with SGEs, or without window: EINVAL, `*bad_wr` on it.
        (*p).next = null_mut();
        (*p).sg_list = &mut sge;
        (*p).num_sge = 1;
        assert_eq!(crate::qp::post_send(qp, p, &mut bad), libc::EINVAL);
        assert_eq!(bad, p);
        (*p).num_sge = 0;
        (*p).bind_mw.bind_mw.mw = null_mut::<c_void>();
        assert_eq!(crate::qp::post_send(qp, p, &mut bad), libc::EINVAL);
        // ATOMIC_WRITE through ibv_post_send: no field for its bytes.
        (*p).opcode = 15;
        assert_eq!(crate::qp::post_send(qp, p, &mut bad), libc::EOPNOTSUPP);
        assert!(ring.consume().is_none());
        assert_eq!((o.dealloc)(mw), 0);
        assert_eq!(crate::pd::ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_destroy_qp(qp), 0);
    }
    drop(buf);
}
