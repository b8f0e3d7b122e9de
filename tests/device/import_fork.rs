//! Sharing a context (`ibv_import_device`, `ibv_import_pd`,
//! `ibv_import_mr`) and fork safety (`ibv_is_fork_initialized`) on the
//! real kernel, answered as rdma-core 44 answers on the same device.

use std::os::fd::AsFd;

use uverbs::{sys::Errno, AccessFlags, Context, ErrorKind, ForkStatus};

use crate::support::open;

/// rxe: rdma-core's rxe provider has no import ops, so `ibv_import_device`
/// is EOPNOTSUPP there (pyverbs' test_shared_pd skips), and so are the PD
/// and MR imports; the kernel's rxe could not describe the context anyway
/// (no `query_ucontext`). On mlx5 (a host with one) the imports work and
/// carry the owner's handles and keys.
#[test]
fn imports_are_answered_as_rdma_core_answers_on_this_device() {
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let fd = ctx.dup_cmd_fd().unwrap();
    let imported = Context::import(uverbs::sys::linux(), fd.as_fd());
    if ctx.provider_name() == "rxe" {
        let e = imported.unwrap_err();
        assert_eq!(
            (e.kind(), e.errno()),
            (ErrorKind::UnsupportedProvider, Errno::EOPNOTSUPP)
        );
        assert_eq!(
            ctx.import_pd(pd.handle()).unwrap_err().errno(),
            Errno::EOPNOTSUPP
        );
        assert_eq!(
            pd.import_mr(mr.handle()).unwrap_err().errno(),
            Errno::EOPNOTSUPP
        );
    } else {
        let imported = imported.unwrap_or_else(|e| panic!("{e}"));
        let ipd = imported
            .import_pd(pd.handle())
            .unwrap_or_else(|e| panic!("{e}"));
        let imr = ipd.import_mr(mr.handle()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (imr.lkey(), imr.rkey(), imr.len(), imr.addr()),
            (mr.lkey(), mr.rkey(), mr.len(), mr.addr())
        );
        imr.unimport().unwrap_or_else(|e| panic!("{}", e.error()));
        ipd.unimport().unwrap_or_else(|e| panic!("{}", e.error()));
    }
    // The caller's duplicate is still its own, and the owner's objects go.
    drop(fd);
    mr.destroy().unwrap();
    pd.destroy().unwrap();
}

/// The guest kernels (6.1, 6.12) copy pinned pages at fork (Linux 5.13+,
/// `RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK`): protection is unneeded, which is
/// what libibverbs' `ibv_is_fork_initialized` answers there.
#[test]
fn fork_protection_is_unneeded_on_a_copy_on_fork_kernel() {
    assert!(uverbs::copy_on_fork(uverbs::sys::linux().as_ref()));
    assert_eq!(uverbs::fork_status(), ForkStatus::Unneeded);
}
