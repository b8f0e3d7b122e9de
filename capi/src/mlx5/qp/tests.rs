//! `mlx5dv_create_qp` and `mlx5dv_wr_raw_wqe` through the C entry points
//! on the mlx5 device model: what capi/tests/c/mlx5dv.c cannot compare
//! with libmlx5 (the UMR and MMO operations libmlx5 takes and uverbs
//! refuses), the `mlx5dv_qp_ex` slots, and a raw WQE's failures inside a
//! session.

use core::{ffi::c_void, ptr::null_mut};

use uverbs::sys::Errno;

use super::{mlx5dv_create_qp, mlx5dv_qp_ex_from_ibv_qp_ex};
use crate::{
    cq::ibv_create_cq,
    layout::{
        mlx5::{mlx5dv_qp_ex, mlx5dv_qp_init_attr},
        qp::{ibv_qp, ibv_qp_ex, ibv_qp_init_attr_ex},
    },
    pd::ibv_alloc_pd,
    qp::{ibv_destroy_qp, tests::to_rts_at},
    qp_ex::ibv_qp_to_qp_ex,
};

/// `IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
const PD_AND_OPS: u32 = 1 | (1 << 6);
/// `MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS`.
const MASK_OPS: u64 = 1 << 2;

#[test]
fn mlx5dv_qps_refuse_umr_and_mmo_and_post_raw_wqes() {
    let model = uverbs::testing::mlx5::fake_mlx5();
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
    let create = |ops: u64| -> Result<*mut ibv_qp, Errno> {
        // SAFETY: an all-zero struct of integers and pointers.
        let mut ia: ibv_qp_init_attr_ex = unsafe { core::mem::zeroed() };
        (ia.send_cq, ia.recv_cq, ia.pd) = (cq, cq, pd);
        ia.qp_type = 2;
        ia.cap.max_send_wr = 4;
        ia.cap.max_recv_wr = 4;
        ia.cap.max_send_sge = 1;
        ia.cap.max_recv_sge = 1;
        ia.comp_mask = PD_AND_OPS;
        ia.send_ops_flags = 1 << 2; // IBV_QP_EX_WITH_SEND
        let mut da = mlx5dv_qp_init_attr {
            comp_mask: if ops == 0 { 0 } else { MASK_OPS },
            send_ops_flags: ops,
            ..mlx5dv_qp_init_attr::default()
        };
        Errno::set_raw(0);
        // SAFETY: live objects of this library, the program's attributes.
        let qp = unsafe { mlx5dv_create_qp(ctx, &mut ia, &mut da) };
        if qp.is_null() {
            Err(Errno::last())
        } else {
            Ok(qp)
        }
    };
    // MR_INTERLEAVED, MR_LIST, MKEY_CONFIGURE, MEMCPY, and with RAW_WQE:
    // EOPNOTSUPP (libmlx5 takes them on RC; uverbs builds no UMR or MMO).
    for ops in [1 << 0, 1 << 1, 1 << 2, 1 << 4, (1 << 1) | (1 << 3)] {
        assert_eq!(create(ops), Err(Errno::EOPNOTSUPP), "{ops:#x}");
    }
    // Without mlx5 operations every slot of its mlx5dv_qp_ex is NULL; with
    // RAW_WQE the raw WQE's is filled, the others stay NULL.
    let plain = create(0).unwrap();
    let raw = create(1 << 3).unwrap();
    // SAFETY: live QPs of this library, their ibv_qp_ex.
    let (dv_plain, dv_raw): (&mlx5dv_qp_ex, &mlx5dv_qp_ex) = unsafe {
        (
            &*mlx5dv_qp_ex_from_ibv_qp_ex(ibv_qp_to_qp_ex(plain)),
            &*mlx5dv_qp_ex_from_ibv_qp_ex(ibv_qp_to_qp_ex(raw)),
        )
    };
    assert!(dv_plain.wr_raw_wqe.is_none() && dv_plain.wr_mr_list.is_none());
    assert!(dv_raw.wr_raw_wqe.is_some());
    assert!(dv_raw.wr_mr_list.is_none() && dv_raw.wr_memcpy.is_none());
    assert!(dv_raw.wr_set_dc_addr.is_none());
    // SAFETY: NULL.
    assert!(unsafe { mlx5dv_qp_ex_from_ibv_qp_ex(null_mut()) }.is_null());

    // SAFETY: the QP just made.
    to_rts_at(raw, unsafe { (*raw).qp_num }, dgid);
    // SAFETY: a live QP of this library.
    let x: &ibv_qp_ex = unsafe { &*ibv_qp_to_qp_ex(raw) };
    type Raw = unsafe extern "C" fn(*mut mlx5dv_qp_ex, *const c_void);
    // SAFETY: the slot holds a function of this signature.
    let raw_wqe =
        unsafe { core::mem::transmute::<unsafe extern "C" fn(), Raw>(dv_raw.wr_raw_wqe.unwrap()) };
    let dv = core::ptr::from_ref(dv_raw).cast_mut();
    let call = |slot: crate::layout::AnyFn| {
        type F = unsafe extern "C" fn(*mut ibv_qp_ex);
        // SAFETY: wr_start/wr_abort have this signature; a live QP.
        unsafe {
            core::mem::transmute::<unsafe extern "C" fn(), F>(slot.unwrap())(
                core::ptr::from_ref(x).cast_mut(),
            )
        }
    };
    let complete = || {
        type F = unsafe extern "C" fn(*mut ibv_qp_ex) -> core::ffi::c_int;
        // SAFETY: wr_complete has this signature; a live QP.
        unsafe {
            core::mem::transmute::<unsafe extern "C" fn(), F>(x.wr_complete.unwrap())(
                core::ptr::from_ref(x).cast_mut(),
            )
        }
    };
    // A send WQE counting 0 units, then 63 (more than this queue's WQEs
    // are sized for): the session fails with EOPNOTSUPP, nothing posted.
    for ds in [0u8, 63] {
        let mut wqe = [0u8; 63 * 16];
        wqe[3] = 0x0a; // MLX5_OPCODE_SEND
        wqe[7] = ds;
        call(x.wr_start);
        // SAFETY: a live QP's mlx5dv_qp_ex and a whole WQE.
        unsafe { raw_wqe(dv, wqe.as_ptr().cast()) };
        assert_eq!(complete(), Errno::EOPNOTSUPP as core::ffi::c_int, "DS {ds}");
    }
    // Outside a session a raw WQE does nothing, and the next session is
    // clean.
    let wqe = [0u8; 16];
    // SAFETY: as above.
    unsafe { raw_wqe(dv, wqe.as_ptr().cast()) };
    call(x.wr_start);
    assert_eq!(complete(), 0);
    model.process();
    assert!(model.executed_wqes().is_empty());
    // SAFETY: live QPs, given up.
    unsafe {
        assert_eq!(ibv_destroy_qp(plain), 0);
        assert_eq!(ibv_destroy_qp(raw), 0);
    }
}
