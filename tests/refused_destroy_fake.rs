//! A destroy that fails gives the object back, as it was (issue 39, items
//! 1 and 2), on the fake rxe kernel (`uverbs::testing::rxe`), whose
//! destroys of MRs, MWs and PDs fail while told to
//! (`Behaviour::fail_destroy`), as rxe refuses to deregister a region under
//! a bound memory window (`EINVAL`) and the kernel a PD another context's
//! objects use (`EBUSY`):
//!
//! - a region, a window or a PD the kernel refused comes back usable, and
//!   the retry destroys it (libibverbs' `ibv_dereg_mr`, `ibv_dealloc_mw`,
//!   `ibv_dealloc_pd` return the kernel's errno and leave the object);
//! - a PD that QPs, SRQs, MRs or MWs use comes back from its destroy
//!   (`EBUSY`), objects can still be made from it, and its destroy answers
//!   `EBUSY` until the last of them is gone.
//!
//! Address handles (which the fake has not) are refused on the mlx5 model:
//! `tests/failed_destroy_model.rs`.

use std::sync::atomic::Ordering;

use uverbs::testing::rxe::*;
use uverbs::{
    sys::Errno, AccessFlags, CompletionQueue, Context, CqOptions, MwType, ProtectionDomain, QpCap,
    QpInitAttr, QueuePair, SrqAttr,
};

struct Rig {
    fake: std::sync::Arc<FakeRxe>,
    ctx: Context,
    pd: ProtectionDomain,
}

fn rig() -> Rig {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    Rig { fake, ctx, pd }
}

impl Rig {
    /// Destroys of MRs, MWs, PDs (and CQs, QPs, SRQs) fail with `errno`
    /// from now on (0: they work again).
    fn refuse(&self, errno: i32) {
        self.fake
            .behaviour
            .fail_destroy
            .store(errno, Ordering::Relaxed);
    }

    fn cq(&self) -> CompletionQueue {
        self.ctx.create_cq(8, CqOptions::default()).unwrap()
    }
}

fn qp(pd: &ProtectionDomain, cq: &CompletionQueue) -> QueuePair {
    pd.create_qp(&QpInitAttr::rc(cq, cq).cap(QpCap::new(4, 4, 1, 1)))
        .unwrap()
}

const BIND: AccessFlags = AccessFlags::LOCAL_WRITE.union(AccessFlags::MW_BIND);

/// rxe's `EINVAL` for a region under a bound window: the region comes
/// back registered (same keys, its memory readable and writable), and the
/// kernel still has it; the retry deregisters it, and then the PD can go.
/// Before, the destroy consumed the handle and the retry was impossible.
#[test]
fn a_region_the_kernel_refuses_to_deregister_comes_back_registered() {
    let r = rig();
    let mr = r.pd.alloc_mr(4096, BIND).unwrap();
    mr.write(0, b"kept").unwrap();
    let (handle, lkey, rkey) = (mr.handle(), mr.lkey(), mr.rkey());
    r.refuse(libc::EINVAL);
    let e = mr.destroy().unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL, "{e}");
    assert_eq!(e.error().op(), "UVERBS_METHOD_MR_DESTROY");
    let mr = e.into_inner();
    assert_eq!((mr.handle(), mr.lkey(), mr.rkey()), (handle, lkey, rkey));
    let mut got = [0u8; 4];
    mr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"kept", "the region's memory is still mapped");
    assert!(r.fake.destroyed(Kind::Mr).is_empty());
    // Refused again: still given back.
    let mr = mr.destroy().unwrap_err().into_inner();
    r.refuse(0);
    mr.destroy().unwrap();
    assert_eq!(r.fake.destroyed(Kind::Mr), [handle]);
    let pd_handle = r.pd.handle();
    r.pd.destroy().unwrap();
    assert_eq!(r.fake.destroyed(Kind::Pd), [pd_handle]);
}

/// The same for a memory window: given back with its key, then
/// deallocated by the retry.
#[test]
fn a_window_the_kernel_refuses_to_deallocate_comes_back() {
    let r = rig();
    let mw = r.pd.alloc_mw(MwType::Type2).unwrap();
    let (handle, rkey) = (mw.handle(), mw.rkey());
    r.refuse(libc::EINVAL);
    let e = mw.destroy().unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL, "{e}");
    let mw = e.into_inner();
    assert_eq!((mw.handle(), mw.rkey()), (handle, rkey));
    assert!(r.fake.destroyed(Kind::Mw).is_empty());
    // Still usable: a bind to a region of the PD is built from it.
    let mr = r.pd.alloc_mr(4096, BIND).unwrap();
    let bind = mw.bind_to(&mr, 0, 64, AccessFlags::REMOTE_WRITE).unwrap();
    assert_eq!(bind.mw_rkey, rkey);
    r.refuse(0);
    mw.destroy().unwrap();
    assert_eq!(r.fake.destroyed(Kind::Mw), [handle]);
}

/// A PD whose deallocation the kernel refuses comes back: objects are
/// still made from it, and the retry deallocates it once they are gone.
#[test]
fn a_pd_the_kernel_refuses_to_deallocate_comes_back_usable() {
    let r = rig();
    let handle = r.pd.handle();
    r.refuse(libc::EBUSY);
    let e = r.pd.clone().destroy().unwrap_err();
    assert_eq!(e.errno(), Errno::EBUSY, "a clone lives: {e}");
    drop(e);
    let Rig { fake, pd, .. } = r;
    let e = pd.destroy().unwrap_err();
    assert_eq!(e.errno(), Errno::EBUSY, "{e}");
    assert_eq!(e.error().op(), "UVERBS_METHOD_PD_DESTROY");
    let pd = e.into_inner();
    assert_eq!(pd.handle(), handle);
    assert!(fake.destroyed(Kind::Pd).is_empty());
    fake.behaviour.fail_destroy.store(0, Ordering::Relaxed);
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    mr.destroy().unwrap();
    pd.destroy().unwrap();
    assert_eq!(fake.destroyed(Kind::Pd), [handle]);
}

/// Issue 39 item 2: a PD in use comes back from its destroy (`EBUSY`),
/// every kind of object is still made from it, and each later destroy
/// answers `EBUSY`, giving it back, until the last user is gone; the
/// kernel PD is deallocated only then, once.
#[test]
fn a_pd_in_use_stays_usable_and_busy_until_its_users_are_gone() {
    let r = rig();
    let cq = r.cq();
    let handle = r.pd.handle();
    let srq_attr = SrqAttr::new(4, 1);
    let mut users: Vec<Box<dyn FnOnce()>> = Vec::new();
    let mut pd = r.pd;
    for round in 0..5 {
        // One more user of each kind per round, made from the PD that
        // came back from the refused destroy before.
        match round {
            0 => {
                let q = qp(&pd, &cq);
                users.push(Box::new(move || q.destroy().unwrap()));
            }
            1 => {
                let s = pd.create_srq(srq_attr).unwrap();
                users.push(Box::new(move || s.destroy().unwrap()));
            }
            2 => {
                let m = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
                users.push(Box::new(move || m.destroy().unwrap()));
            }
            3 => {
                let w = pd.alloc_mw(MwType::Type1).unwrap();
                users.push(Box::new(move || w.destroy().unwrap()));
            }
            _ => {
                // A parent domain is no user the kernel sees, but holds
                // the PD all the same.
                let e = pd
                    .alloc_parent_domain(uverbs::ParentDomainAttr::new())
                    .unwrap_err();
                assert_eq!(e.errno(), Errno::EOPNOTSUPP, "rxe has none: {e}");
                let q = qp(&pd, &cq);
                users.push(Box::new(move || q.destroy().unwrap()));
            }
        }
        let e = pd.destroy().unwrap_err();
        assert_eq!(e.errno(), Errno::EBUSY, "round {round}: {e}");
        pd = e.into_inner();
        assert_eq!(pd.handle(), handle);
    }
    assert!(r.fake.destroyed(Kind::Pd).is_empty());
    // Gone one by one: busy until the last.
    while let Some(destroy) = users.pop() {
        let e = pd.destroy().unwrap_err();
        assert_eq!(
            e.errno(),
            Errno::EBUSY,
            "{} user(s) left: {e}",
            users.len() + 1
        );
        pd = e.into_inner();
        destroy();
    }
    pd.destroy().unwrap();
    assert_eq!(r.fake.destroyed(Kind::Pd), [handle]);
}
