//! Parent and thread domains on real rxe: rdma-core's rxe has neither
//! (`EOPNOTSUPP` from libibverbs, its ops unset), so uverbs refuses both
//! before any command; and a CQ given a plain PD (`IBV_CQ_INIT_ATTR_MASK_PD`)
//! is made by the kernel as rxe makes it, the PD ignored.

use uverbs::{sys::Errno, CqOptions, ErrorKind, ParentDomainAttr};

use crate::support::*;

#[test]
fn rxe_refuses_parent_and_thread_domains_and_ignores_a_cqs_pd() {
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let e = ctx.alloc_td().unwrap_err();
    assert_eq!(
        (e.kind(), e.errno()),
        (ErrorKind::UnsupportedProvider, Errno::EOPNOTSUPP),
        "{e}"
    );
    let e = pd.alloc_parent_domain(ParentDomainAttr::new()).unwrap_err();
    assert_eq!(
        (e.kind(), e.errno()),
        (ErrorKind::UnsupportedProvider, Errno::EOPNOTSUPP),
        "{e}"
    );
    let opts = CqOptions::new().parent_domain(&pd);
    let cq = ctx.create_cq(16, opts).unwrap_or_else(|e| panic!("{e}"));
    cq.destroy().unwrap();
    pd.destroy().unwrap();
}
