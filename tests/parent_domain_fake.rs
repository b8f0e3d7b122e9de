//! Parent and thread domains on the fake rxe kernel: rdma-core's rxe has
//! neither (its `verbs_context_ops` leave `alloc_parent_domain` and
//! `alloc_td` unset, so libibverbs answers `EOPNOTSUPP`), and neither
//! reaches the kernel; a CQ given a plain PD is made as rxe makes it (it
//! ignores the PD).

use uverbs::testing::rxe::*;
use uverbs::{sys::fake::Call, sys::Errno, Context, CqOptions, ErrorKind, ParentDomainAttr};

#[test]
fn rxe_has_no_parent_or_thread_domains() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    fake.kernel.clear_calls();
    let e = ctx.alloc_td().unwrap_err();
    assert_eq!(
        (e.kind(), e.errno()),
        (ErrorKind::UnsupportedProvider, Errno::EOPNOTSUPP)
    );
    let e = pd.alloc_parent_domain(ParentDomainAttr::new()).unwrap_err();
    assert_eq!(
        (e.kind(), e.errno()),
        (ErrorKind::UnsupportedProvider, Errno::EOPNOTSUPP)
    );
    let calls: Vec<Call> = fake.kernel.calls();
    assert!(calls.is_empty(), "no command: {calls:?}");
    let cq = ctx
        .create_cq(8, CqOptions::new().parent_domain(&pd))
        .expect("rxe ignores the CQ's PD");
    drop(cq);
    pd.destroy().unwrap();
}
