//! libmlx5's allocation-type variables on the mlx5 device model:
//! `MLX_QP_ALLOC_TYPE`, `MLX_CQ_ALLOC_TYPE`, `MLX_SRQ_ALLOC_TYPE` (and the
//! older `HUGE_RC`-style switches) choose huge pages, the device's
//! contiguous pages or anonymous memory, failing or falling back as
//! `mlx5_alloc_prefered_buf` does. One test, in a binary of its own: it
//! sets the process's environment.
//!
//! Huge pages succeed only on a host with free 2 MiB pages; without them
//! (the project's machines and CI) the test checks the failure and the
//! fallbacks, with them the huge-page buffers. The model answers the
//! contiguous-pages mmap as mlx5_ib does (`ENOSYS`).

use uverbs::testing::mlx5::fake_mlx5;
use uverbs::{
    sys::Errno, CqOptions, ParentDomainAttr, QueueAllocRequest, QueueAllocator, QueueMemory,
    SrqAttr,
};

use uverbs_test_support::mlx5_pair::*;

const VARS: [&str; 3] = [
    "MLX_QP_ALLOC_TYPE",
    "MLX_CQ_ALLOC_TYPE",
    "MLX_SRQ_ALLOC_TYPE",
];
const HUGE: u64 = 2 << 20;

/// Free 2 MiB huge pages on this host.
fn free_huge_pages() -> u64 {
    std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn set_all(value: &str) {
    for v in VARS {
        std::env::set_var(v, value);
    }
}

/// An allocator that always answers `IBV_ALLOCATOR_USE_DEFAULT`.
#[derive(Debug)]
struct Defaults;

// The allocator a program writes: an `unsafe` trait's implementation.
#[allow(unsafe_code)]
// SAFETY: it never answers memory.
unsafe impl QueueAllocator for Defaults {
    fn alloc(&self, _: &QueueAllocRequest) -> Result<QueueMemory, Errno> {
        Ok(QueueMemory::UseDefault)
    }

    unsafe fn free(&self, _: std::ptr::NonNull<u8>, _: &QueueAllocRequest) {
        unreachable!("no memory was given");
    }
}

#[test]
fn allocation_types_fail_and_fall_back_as_libmlx5s() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let srq_attr = SrqAttr::new(16, 1);
    // What each type does to a CQ, a QP and an SRQ: Ok(buffer addresses)
    // or the errno of the first create that failed.
    let objects = |pd: &uverbs::ProtectionDomain| -> Result<[u64; 3], Errno> {
        let cq = ctx
            .create_cq(100, CqOptions::default())
            .map_err(|e| e.errno())?;
        let qp = pd
            .create_qp(&uverbs::QpInitAttr::rc(&cq, &cq).cap(cap(100, 1, 0)))
            .map_err(|e| e.errno())?;
        let srq = pd.create_srq(srq_attr).map_err(|e| e.errno())?;
        let cqn = model.cqn_of_handle(cq.handle()).unwrap();
        let srqn = model.srqn_of_handle(srq.handle()).unwrap();
        Ok([
            model.cq(cqn).unwrap().buf,
            model.qp(qp.qp_num()).unwrap().buf,
            model.srq(srqn).unwrap().buf,
        ])
    };
    let huge = free_huge_pages() >= 3;

    set_all("HUGE");
    match objects(&pd) {
        Ok(bufs) => {
            assert!(huge, "HUGE without free huge pages succeeded");
            assert!(bufs.iter().all(|b| b % HUGE == 0), "{bufs:x?}");
        }
        // mmap(MAP_HUGETLB) without huge pages: ENOMEM (libmlx5's shmget
        // fails the same way).
        Err(e) => {
            assert!(!huge, "HUGE failed with free huge pages: {e}");
            assert_eq!(e, Errno::ENOMEM);
        }
    }
    // Each variable on its own: only its object fails.
    if !huge {
        for (i, v) in VARS.iter().enumerate() {
            set_all("ANON");
            std::env::set_var(v, "huge");
            let cq = ctx.create_cq(8, CqOptions::default());
            assert_eq!(cq.is_err(), *v == "MLX_CQ_ALLOC_TYPE", "{v}");
            let srq = pd.create_srq(srq_attr);
            assert_eq!(srq.is_err(), *v == "MLX_SRQ_ALLOC_TYPE", "{v}");
            let qp_fails = i == 0;
            if let Ok(cq) = cq {
                let qp = pd.create_qp(&uverbs::QpInitAttr::ud(&cq, &cq).cap(cap(4, 1, 0)));
                assert_eq!(qp.is_err(), qp_fails, "{v}");
            }
        }
    }
    // The fallbacks: huge pages if there are, else anonymous pages.
    for t in ["PREFER_HUGE", "ALL", "PREFER_CONTIG", "ANON", "nonsense"] {
        set_all(t);
        let bufs = objects(&pd).unwrap_or_else(|e| panic!("{t}: {e}"));
        let on_huge = bufs.iter().all(|b| b % HUGE == 0);
        if !huge || !matches!(t, "PREFER_HUGE" | "ALL") {
            assert!(bufs.iter().all(|b| b % 4096 == 0), "{t}: {bufs:x?}");
        } else {
            assert!(on_huge, "{t}: {bufs:x?}");
        }
    }
    // CONTIG: mlx5_ib maps no contiguous pages (ENOSYS for every order).
    set_all("CONTIG");
    assert_eq!(objects(&pd).unwrap_err(), Errno::ENOSYS);
    // The older switch makes HUGE the default; the variable overrides it.
    for v in VARS {
        std::env::remove_var(v);
    }
    std::env::set_var("HUGE_RC", "y");
    let rc = objects(&pd);
    assert_eq!(rc.is_ok(), huge, "HUGE_RC=y: {rc:?}");
    std::env::set_var("MLX_QP_ALLOC_TYPE", "ANON");
    objects(&pd).expect("MLX_QP_ALLOC_TYPE=ANON over HUGE_RC=y");
    std::env::remove_var("HUGE_RC");
    // In a parent domain with an allocator the variables are not read:
    // its USE_DEFAULT is anonymous memory, HUGE or not.
    set_all("HUGE");
    let pdom = pd
        .alloc_parent_domain(ParentDomainAttr::new().with_allocator(std::sync::Arc::new(Defaults)))
        .unwrap();
    let cq = ctx
        .create_cq(8, CqOptions::new().parent_domain(&pdom))
        .expect("a parent domain's CQ ignores MLX_CQ_ALLOC_TYPE");
    pdom.create_srq(srq_attr)
        .expect("a parent domain's SRQ ignores MLX_SRQ_ALLOC_TYPE");
    drop(cq);
    for v in VARS {
        std::env::remove_var(v);
    }
    assert_clean(&model);
}
