//! PDs and MRs through the C entry points, on uverbs' fake rxe kernel.

use core::ptr::null_mut;

use uverbs::testing::rxe::Kind;

use super::*;
use crate::cq::tests::Rig;

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A page-aligned buffer the tests register.
fn buffer() -> Vec<u64> {
    vec![0u64; 512]
}

#[test]
fn a_pd_and_its_mr_carry_what_programs_read() {
    let r = Rig::new();
    let mut buf = buffer();
    let addr = buf.as_mut_ptr().cast::<c_void>();
    // SAFETY: the rig's context; `buf` outlives the registration.
    unsafe {
        let pd = ibv_alloc_pd(r.ctx);
        assert!(!pd.is_null());
        assert_eq!((*pd).context, r.ctx);
        let mr = ibv_reg_mr(pd, addr, 4096, 1 | 2 | 4);
        assert!(!mr.is_null(), "{}", std::io::Error::last_os_error());
        assert_eq!((*mr).context, r.ctx);
        assert_eq!((*mr).pd, pd);
        assert_eq!((*mr).addr, addr);
        assert_eq!((*mr).length, 4096);
        {
            let uv = (*mr.cast::<Mr>()).mr.lock().unwrap();
            let uv = uv.as_ref().unwrap();
            let keys = (uv.lkey(), uv.rkey(), uv.handle());
            assert_eq!(((*mr).lkey, (*mr).rkey, (*mr).handle), keys);
        }
        // A PD with a region is busy, and stays usable.
        assert_eq!(ibv_dealloc_pd(pd), libc::EBUSY);
        let mr2 = ibv_reg_mr_iova2(pd, addr, 4096, addr as u64, 1);
        assert!(!mr2.is_null());
        assert_eq!(ibv_dereg_mr(mr2), 0);
        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(r.fake.destroyed(Kind::Mr).len(), 2);
        assert_eq!(ibv_dealloc_pd(pd), 0);
        assert_eq!(r.fake.destroyed(Kind::Pd).len(), 1);
    }
    drop(buf);
}

#[test]
fn bad_registrations_fail_with_the_kernels_errno() {
    let r = Rig::new();
    let mut buf = buffer();
    let addr = buf.as_mut_ptr().cast::<c_void>();
    // SAFETY: the rig's context; nothing is registered.
    unsafe {
        let pd = ibv_alloc_pd(r.ctx);
        // Remote write needs local write (ib_check_mr_access).
        assert!(ibv_reg_mr(pd, addr, 4096, 2).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        // A bit no kernel knows.
        assert!(ibv_reg_mr(pd, addr, 4096, 1 << 15).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert!(ibv_reg_mr(pd, addr, 4096, -1).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert!(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, 1).is_null());
        assert_eq!(last_errno(), libc::EBADF);
        assert!(ibv_reg_mr(null_mut(), addr, 4096, 1).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert!(ibv_alloc_pd(null_mut()).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert_eq!(ibv_dereg_mr(null_mut()), libc::EINVAL);
        assert_eq!(ibv_dealloc_pd(null_mut()), libc::EINVAL);
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
    drop(buf);
}

#[test]
fn rereg_checks_its_input_as_libibverbs_then_fails_as_without_provider_support() {
    let r = Rig::new();
    let mut buf = buffer();
    let addr = buf.as_mut_ptr().cast::<c_void>();
    // SAFETY: the rig's context; `buf` outlives the registration.
    unsafe {
        let pd = ibv_alloc_pd(r.ctx);
        let mr = ibv_reg_mr(pd, addr, 4096, 1);
        let rereg = |flags, a: *mut c_void, len, access| {
            let rc = ibv_rereg_mr(mr, flags, pd, a, len, access);
            (rc, last_errno())
        };
        assert_eq!(rereg(8, addr, 4096, 0), (-1, libc::EINVAL));
        assert_eq!(rereg(1, null_mut(), 4096, 0), (-1, libc::EINVAL));
        assert_eq!(rereg(1, addr, 0, 0), (-1, libc::EINVAL));
        assert_eq!(rereg(1, addr, 4096, 1), (-1, libc::EINVAL));
        assert_eq!(rereg(4, addr, 4096, 7), (-4, libc::EOPNOTSUPP));
        assert_eq!(rereg(1, addr, 4096, 0), (-4, libc::EOPNOTSUPP));
        assert_eq!(
            ibv_rereg_mr(null_mut(), 4, pd, addr, 4096, 1),
            REREG_ERR_INPUT
        );
        // Unchanged, and deregistered as usual.
        assert_eq!((*mr).addr, addr);
        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
    drop(buf);
}

#[test]
fn optional_access_bits_reach_the_kernel_only_when_it_takes_them() {
    let r = Rig::new();
    // SAFETY: the rig's context is open.
    let ctx = unsafe { Context::from_c(r.ctx) }.unwrap();
    let relaxed = 1 << 20;
    let got = access_flags(ctx, 1 | relaxed).unwrap().bits();
    if ctx.uv.core_support() & u64::from(IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS) != 0 {
        assert_eq!(got, 1 | relaxed);
    } else {
        assert_eq!(got, 1);
    }
    assert_eq!(access_flags(ctx, 1 << 10), Err(Errno::EINVAL));
    assert_eq!(access_flags(ctx, 1 << 30), Err(Errno::EINVAL));
    assert_eq!(access_flags(ctx, 0x3ff).map(|a| a.bits()), Ok(0x3ff));
}

#[test]
fn pd_with_reaches_the_uverbs_pd() {
    let r = Rig::new();
    // SAFETY: the rig's context.
    unsafe {
        let pd = ibv_alloc_pd(r.ctx);
        let p = Pd::from_c(pd).unwrap();
        assert_eq!(p.with(|uv| uv.handle()), Ok((*pd).handle));
        assert!(core::ptr::eq(p.context().as_c(), r.ctx));
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
}

#[test]
fn another_iova_names_the_region_for_work_requests() {
    let r = Rig::new();
    let mut buf = buffer();
    let addr = buf.as_mut_ptr().cast::<c_void>();
    // SAFETY: the rig's context; `buf` outlives the registrations.
    unsafe {
        let pd = ibv_alloc_pd(r.ctx);
        for mr in [
            ibv_reg_mr_iova2(pd, addr, 4096, 0x10000, 1),
            ibv_reg_mr_iova(pd, addr, 4096, 0x20000, 1),
        ] {
            assert!(!mr.is_null(), "{}", std::io::Error::last_os_error());
            // `mr->addr` is the program's address, as libibverbs sets it;
            // uverbs' region (what work requests use) starts at the iova.
            assert_eq!(((*mr).addr, (*mr).length), (addr, 4096));
            let uv = (*mr.cast::<Mr>()).mr.lock().unwrap().clone().unwrap();
            assert!([0x10000, 0x20000].contains(&uv.addr()));
            assert_eq!(uv.sge(8, 8).unwrap().addr, uv.addr() + 8);
            drop(uv);
            assert_eq!(ibv_dereg_mr(mr), 0);
        }
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
    drop(buf);
}

/// `ibv_import_device`, `ibv_import_pd`, `ibv_import_mr` on the mlx5
/// device model, and their unimports: the imported objects carry the
/// owner's handles and keys (`mr->addr` NULL, as libibverbs), letting go
/// of them leaves the owner's, which deregister and deallocate after.
#[test]
fn imported_pds_and_mrs_carry_the_owners_handles_and_keys() {
    use std::os::fd::AsRawFd;

    use crate::device::{ibv_close_device, ibv_import_device, test_kernel};

    let model = uverbs::testing::mlx5::fake_mlx5();
    test_kernel::with(model.dyn_kernel(), || {
        let uv = uverbs::Context::open_with(model.dyn_kernel(), None).unwrap();
        let ctx = Context::create(uv, null_mut(), -1, -1);
        let mut buf = buffer();
        let addr = buf.as_mut_ptr().cast::<c_void>();
        // A command fd to hand over: the model's are /dev/null (a
        // character device, which libibverbs' check wants).
        let fd = std::fs::File::open("/dev/null").unwrap();
        let raw = std::os::fd::OwnedFd::from(fd);
        // SAFETY: the context just made, a buffer that outlives the MR; the
        // imported objects are freed before the owner's.
        unsafe {
            let pd = ibv_alloc_pd(ctx);
            let mr = ibv_reg_mr(pd, addr, 4096, 1 | 2 | 4);
            assert!(!pd.is_null() && !mr.is_null());
            let ictx = ibv_import_device(raw.as_raw_fd());
            assert!(!ictx.is_null(), "{}", std::io::Error::last_os_error());
            // The library took the fd over.
            std::mem::forget(raw);
            assert!(!(*ictx).device.is_null());
            let ipd = ibv_import_pd(ictx, (*pd).handle);
            assert!(!ipd.is_null(), "{}", std::io::Error::last_os_error());
            assert_eq!(((*ipd).context, (*ipd).handle), (ictx, (*pd).handle));
            let imr = ibv_import_mr(ipd, (*mr).handle);
            assert!(!imr.is_null(), "{}", std::io::Error::last_os_error());
            assert_eq!(
                ((*imr).lkey, (*imr).rkey, (*imr).length, (*imr).handle),
                ((*mr).lkey, (*mr).rkey, 4096, (*mr).handle)
            );
            assert!((*imr).addr.is_null());
            assert_eq!(((*imr).pd, (*imr).context), (ipd, ictx));
            // Handles of nothing: the kernel's ENOENT.
            assert!(ibv_import_mr(ipd, 999).is_null());
            assert_eq!(last_errno(), libc::ENOENT);
            assert!(ibv_import_pd(ictx, 999).is_null());
            assert_eq!(last_errno(), libc::ENOENT);
            let regions = model.mr_count();
            ibv_unimport_mr(imr);
            ibv_unimport_pd(ipd);
            assert_eq!(model.mr_count(), regions, "the owner's region stays");
            assert_eq!(ibv_close_device(ictx), 0);
            assert_eq!(ibv_dereg_mr(mr), 0);
            assert_eq!(model.mr_count(), regions - 1);
            assert_eq!(ibv_dealloc_pd(pd), 0);
            crate::context::Context::destroy(ctx).unwrap();
        }
        drop(buf);
    });
}

/// rdma-core's rxe imports nothing: EOPNOTSUPP; NULL arguments: EINVAL.
#[test]
fn rxe_imports_nothing_and_null_is_einval() {
    let r = Rig::new();
    // SAFETY: the rig's context; NULL is checked.
    unsafe {
        assert!(ibv_import_pd(r.ctx, 1).is_null());
        assert_eq!(last_errno(), libc::EOPNOTSUPP);
        let pd = ibv_alloc_pd(r.ctx);
        let mut buf = buffer();
        let mr = ibv_reg_mr(pd, buf.as_mut_ptr().cast(), 4096, 1);
        assert!(ibv_import_mr(pd, (*mr).handle).is_null());
        assert_eq!(last_errno(), libc::EOPNOTSUPP);
        assert!(ibv_import_pd(null_mut(), 1).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert!(ibv_import_mr(null_mut(), 1).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        ibv_unimport_pd(null_mut());
        ibv_unimport_mr(null_mut());
        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
        drop(buf);
    }
}
