//! Parent domains and thread domains on the mlx5 device model: the queue
//! memory of QPs, SRQs and CQs made in a parent domain comes from its
//! allocator exactly where libmlx5 calls `pd->alloc` (sizes, alignments and
//! resource types as `mlx5_alloc_qp_buf`, `mlx5_alloc_srq_buf`,
//! `mlx5_alloc_cq_buf` and `mlx5_alloc_dbrec` compute them, from the
//! geometry the model was given at create), goes back through its `free`
//! after the objects are destroyed, and carries traffic; a thread domain
//! gives its QPs a doorbell register of their own. rxe has neither
//! (`EOPNOTSUPP`, as rdma-core's rxe).

use std::{
    alloc::Layout,
    collections::HashMap,
    ptr::NonNull,
    sync::{Arc, Mutex},
};

use uverbs::testing::mlx5::fake_mlx5;
use uverbs::{
    sys::Errno, CompletionQueue, Context, CqOptions, ErrorKind, ParentDomainAttr, ProtectionDomain,
    QpType, QueueAllocRequest, QueueAllocator, QueueMemory, QueueResource, RecvWr, SendWr, SrqAttr,
    WcStatus,
};

use uverbs_test_support::mlx5_pair::*;

/// mlx5dv.h's `MLX5DV_RES_TYPE_*`: `(uint64_t)RDMA_DRIVER_MLX5 << 32 | n`
/// with `RDMA_DRIVER_MLX5` 1.
const RES_QP: u64 = 1 << 32 | 1;
const RES_DBR: u64 = 1 << 32 | 3;
const RES_SRQ: u64 = 1 << 32 | 4;
const RES_CQ: u64 = 1 << 32 | 5;

/// What the recording allocator does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Memory,
    Default,
    Fail,
    /// Memory one byte past an aligned block: misaligned.
    Misaligned,
}

/// An allocator that answers from the global allocator (or as told per
/// resource) and records every call.
#[derive(Debug, Default)]
struct Recorder {
    answers: Mutex<HashMap<QueueResource, Answer>>,
    allocs: Mutex<Vec<(QueueAllocRequest, Option<usize>)>>,
    frees: Mutex<Vec<(usize, QueueAllocRequest)>>,
    live: Mutex<HashMap<usize, (QueueAllocRequest, usize)>>,
}

impl Recorder {
    fn new() -> Arc<Self> {
        Arc::default()
    }

    fn answer(&self, r: QueueResource, a: Answer) {
        self.answers.lock().unwrap().insert(r, a);
    }

    fn allocs(&self) -> Vec<(QueueAllocRequest, Option<usize>)> {
        self.allocs.lock().unwrap().clone()
    }

    fn frees(&self) -> Vec<(usize, QueueAllocRequest)> {
        self.frees.lock().unwrap().clone()
    }

    fn live(&self) -> usize {
        self.live.lock().unwrap().len()
    }

    /// The memory answered for `resource`'s requests, in order.
    fn given(&self, resource: QueueResource) -> Vec<(QueueAllocRequest, usize)> {
        self.allocs()
            .into_iter()
            .filter(|(r, p)| r.resource == resource && p.is_some())
            .map(|(r, p)| (r, p.unwrap_or(0)))
            .collect()
    }
}

fn layout(req: &QueueAllocRequest) -> Layout {
    Layout::from_size_align(req.size + req.alignment, req.alignment).unwrap()
}

// The allocator a program writes: an `unsafe` trait's implementation.
#[allow(unsafe_code)]
// SAFETY: memory from the global allocator, `size` bytes at `alignment`
// (plus slack for the misaligned answer), lent until `free`, which gives it
// back once (checked by `live`).
unsafe impl QueueAllocator for Recorder {
    fn alloc(&self, req: &QueueAllocRequest) -> Result<QueueMemory, Errno> {
        let answer = *self
            .answers
            .lock()
            .unwrap()
            .get(&req.resource)
            .unwrap_or(&Answer::Memory);
        let out = match answer {
            Answer::Default => Ok(QueueMemory::UseDefault),
            Answer::Fail => Err(Errno::ENOMEM),
            Answer::Memory | Answer::Misaligned => {
                // SAFETY: a layout of non-zero size.
                let base = unsafe { std::alloc::alloc(layout(req)) };
                let skew = usize::from(answer == Answer::Misaligned);
                let p = base.wrapping_add(skew);
                self.live
                    .lock()
                    .unwrap()
                    .insert(p as usize, (*req, base as usize));
                Ok(QueueMemory::Memory(NonNull::new(p).unwrap()))
            }
        };
        let given = match out {
            Ok(QueueMemory::Memory(p)) => Some(p.as_ptr() as usize),
            _ => None,
        };
        self.allocs.lock().unwrap().push((*req, given));
        out
    }

    unsafe fn free(&self, ptr: NonNull<u8>, req: &QueueAllocRequest) {
        let at = ptr.as_ptr() as usize;
        self.frees.lock().unwrap().push((at, *req));
        let (asked, base) = self
            .live
            .lock()
            .unwrap()
            .remove(&at)
            .expect("freed memory this allocator gave and did not take back yet");
        assert_eq!(&asked, req, "free gets the request the memory answered");
        // SAFETY: `base` came from `alloc(layout(req))` and is freed once.
        unsafe { std::alloc::dealloc(base as *mut u8, layout(req)) };
    }
}

fn parent(pd: &ProtectionDomain, a: &Arc<Recorder>) -> ProtectionDomain {
    pd.alloc_parent_domain(ParentDomainAttr::new().with_allocator(a.clone()))
        .unwrap()
}

fn cq_in(ctx: &Context, pd: &ProtectionDomain, cqe: u32) -> CompletionQueue {
    ctx.create_cq(cqe, CqOptions::new().parent_domain(pd))
        .unwrap()
}

/// libmlx5's `mlx5_set_custom_qp_alignment`, from the model's view of the
/// QP: the buffer (RQ then SQ) rounded up to pages and to a power of two,
/// over `MLX5_QPC_PAGE_OFFSET_QUANTA` (64), or the largest stride.
fn qp_alignment(rq_bytes: usize, sq_bytes: usize, rq_stride: usize) -> usize {
    let buf = rq_bytes + sq_bytes;
    let pages = buf.div_ceil(4096).next_power_of_two() * 4096;
    (pages / 64).max(64).max(rq_stride)
}

#[test]
fn queue_memory_comes_from_the_allocator_as_libmlx5_asks_and_goes_back_after_destroy() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let a = Recorder::new();
    let pdom = parent(&pd, &a);
    assert!(pdom.is_parent_domain() && !pd.is_parent_domain());
    assert_eq!(pdom.handle(), pd.handle(), "the same kernel PD");
    let mut cq_a = cq_in(&ctx, &pdom, 64);
    let mut cq_b = cq_in(&ctx, &pdom, 64);
    let mut qa = create_qp(&pdom, QpType::Rc, &cq_a, None, cap(16, 2, 64));
    let mut qb = create_qp(&pdom, QpType::Rc, &cq_b, None, cap(16, 2, 64));
    let srq = pdom.create_srq(SrqAttr::new(32, 2)).unwrap();

    // CQs: whole pages of CQEs, page aligned; then their doorbell records.
    let cqs = a.given(QueueResource::Cq);
    assert_eq!(cqs.len(), 2);
    for (cq, (req, at)) in [&cq_a, &cq_b].into_iter().zip(&cqs) {
        let info = model.cq(model.cqn_of_handle(cq.handle()).unwrap()).unwrap();
        let bytes = info.ncqe as usize * info.cqe_size as usize;
        assert_eq!(
            (req.size, req.alignment, req.resource_type),
            (bytes.div_ceil(4096) * 4096, 4096, RES_CQ)
        );
        assert_eq!(info.buf, *at as u64, "the CQ's buffer is the allocator's");
    }
    // QPs: libmlx5's size and alignment.
    let qps = a.given(QueueResource::Qp);
    assert_eq!(qps.len(), 2);
    for (qp, (req, at)) in [&qa, &qb].into_iter().zip(&qps) {
        let info = model.qp(qp.qp_num()).unwrap();
        let rq = (info.rq_wqe_cnt as usize) << info.rq_wqe_shift;
        let sq = info.sq_wqe_cnt as usize * 64;
        let align = qp_alignment(rq, sq, 1 << info.rq_wqe_shift);
        assert_eq!(
            (req.size, req.alignment, req.resource_type),
            ((rq + sq).next_multiple_of(align), align, RES_QP)
        );
        assert_eq!(info.buf, *at as u64, "the QP's buffer is the allocator's");
    }
    // The SRQ: its WQEs' bytes, page aligned.
    let srqs = a.given(QueueResource::Srq);
    assert_eq!(srqs.len(), 1);
    let info = model
        .srq(model.srqn_of_handle(srq.handle()).unwrap())
        .unwrap();
    assert_eq!(
        (srqs[0].0.size, srqs[0].0.alignment, srqs[0].0.resource_type),
        (info.wqe_cnt as usize * info.stride as usize, 4096, RES_SRQ)
    );
    assert_eq!(info.buf, srqs[0].1 as u64);
    // Doorbell records: 8 bytes aligned to 8, one per object, each the one
    // the device was given.
    let dbrs = a.given(QueueResource::DoorbellRecord);
    assert_eq!(dbrs.len(), 5);
    for (req, _) in &dbrs {
        assert_eq!(
            (req.size, req.alignment, req.resource_type),
            (8, 8, RES_DBR)
        );
    }
    let dbr_at: Vec<u64> = dbrs.iter().map(|(_, p)| *p as u64).collect();
    let devices_dbrs = [
        model
            .cq(model.cqn_of_handle(cq_a.handle()).unwrap())
            .unwrap()
            .db,
        model
            .cq(model.cqn_of_handle(cq_b.handle()).unwrap())
            .unwrap()
            .db,
        model.qp(qa.qp_num()).unwrap().db,
        model.qp(qb.qp_num()).unwrap().db,
        info.db,
    ];
    assert_eq!(dbr_at, devices_dbrs);

    // Traffic over the allocator's memory.
    let g = gid(&ctx);
    connect(&qa, qb.qp_num(), g, 7);
    connect(&qb, qa.qp_num(), g, 7);
    let access = uverbs::AccessFlags::LOCAL_WRITE;
    let mr_a = pdom.alloc_mr(4096, access).unwrap();
    let mr_b = pdom.alloc_mr(4096, access).unwrap();
    mr_a.write(0, b"parent domain").unwrap();
    qb.post_recv(&[RecvWr::new(9, &[mr_b.sge(0, 64).unwrap()])])
        .unwrap();
    qa.post_send(&[SendWr::send(1, &[mr_a.sge(0, 13).unwrap()])])
        .unwrap();
    let ca = run_and_poll(&model, &mut cq_a, 1);
    let cb = run_and_poll(&model, &mut cq_b, 1);
    assert_eq!((ca[0].wr_id, ca[0].status), (1, WcStatus::SUCCESS));
    assert_eq!((cb[0].wr_id, cb[0].byte_len), (9, 13));
    let mut got = [0u8; 13];
    mr_b.read(0, &mut got).unwrap();
    assert_eq!(&got, b"parent domain");
    assert_clean(&model);

    // In use: neither the parent domain nor its PD can go, and both come
    // back as they were.
    let pdom = pdom.destroy().unwrap_err();
    assert_eq!(pdom.errno(), Errno::EBUSY);
    let pdom = pdom.into_inner();
    let pd = pd.destroy().unwrap_err().into_inner();
    assert_eq!(a.frees().len(), 0, "nothing freed while the objects live");

    // Destroyed: every piece goes back through free, once (the recorder
    // checks the request and that it gave the memory).
    drop((mr_a, mr_b));
    qa.destroy().unwrap();
    qb.destroy().unwrap();
    srq.destroy().unwrap();
    cq_a.destroy().unwrap();
    cq_b.destroy().unwrap();
    assert_eq!(a.frees().len(), 10);
    assert_eq!(a.live(), 0);
    pdom.destroy().unwrap();
    pd.destroy().unwrap();
}

#[test]
fn use_default_falls_back_per_piece() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let a = Recorder::new();
    let pdom = parent(&pd, &a);
    // Everything asked, nothing taken: the default memory of each piece.
    for r in [
        QueueResource::Qp,
        QueueResource::Cq,
        QueueResource::DoorbellRecord,
    ] {
        a.answer(r, Answer::Default);
    }
    let cq = cq_in(&ctx, &pdom, 16);
    let qp = create_qp(&pdom, QpType::Rc, &cq, None, cap(8, 1, 0));
    let asked: Vec<QueueResource> = a.allocs().iter().map(|(r, _)| r.resource).collect();
    assert_eq!(
        asked,
        [
            QueueResource::Cq,
            QueueResource::DoorbellRecord,
            QueueResource::Qp,
            QueueResource::DoorbellRecord
        ],
        "each piece asked once, in libmlx5's order"
    );
    assert_eq!(a.live(), 0);
    let info = model.qp(qp.qp_num()).unwrap();
    assert_eq!(info.buf % 4096, 0, "the default buffer: anonymous pages");
    // The queue from the allocator, the record the default's.
    a.answer(QueueResource::Qp, Answer::Memory);
    let qp2 = create_qp(&pdom, QpType::Rc, &cq, None, cap(8, 1, 0));
    let info2 = model.qp(qp2.qp_num()).unwrap();
    let given = a.given(QueueResource::Qp);
    assert_eq!(given.len(), 1);
    assert_eq!(info2.buf, given[0].1 as u64);
    assert!(a.given(QueueResource::DoorbellRecord).is_empty());
    drop(qp2);
    assert_eq!(a.live(), 0, "the queue went back with its QP");
    drop((qp, cq));
    assert_eq!(a.frees().len(), 1);
}

#[test]
fn refusals_fail_the_create_and_give_back_what_was_taken() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let a = Recorder::new();
    let pdom = parent(&pd, &a);
    let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    // The record refused after the queue was given: the queue goes back.
    a.answer(QueueResource::DoorbellRecord, Answer::Fail);
    let e = pdom
        .create_qp(&uverbs::QpInitAttr::rc(&cq, &cq).cap(cap(8, 1, 0)))
        .unwrap_err();
    assert_eq!(e.errno(), Errno::ENOMEM, "{e}");
    assert_eq!(a.given(QueueResource::Qp).len(), 1);
    assert_eq!(a.live(), 0, "the QP buffer was given back");
    // Misaligned memory is refused and given back.
    a.answer(QueueResource::DoorbellRecord, Answer::Memory);
    a.answer(QueueResource::Cq, Answer::Misaligned);
    let e = ctx
        .create_cq(16, CqOptions::new().parent_domain(&pdom))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(a.live(), 0);
    // A CQ given a PD that is no parent domain: EINVAL, as libmlx5.
    let e = ctx
        .create_cq(16, CqOptions::new().parent_domain(&pd))
        .unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL);
    assert_clean(&model);
}

#[test]
fn a_thread_domain_gives_its_qps_their_own_doorbell_register() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let td = ctx.alloc_td().unwrap();
    let pdom = pd
        .alloc_parent_domain(ParentDomainAttr::new().with_thread_domain(&td))
        .unwrap();
    let mut cq = ctx.create_cq(64, CqOptions::default()).unwrap();
    let plain: Vec<_> = (0..6)
        .map(|_| create_qp(&pd, QpType::Rc, &cq, None, cap(8, 1, 0)))
        .collect();
    let in_td: Vec<_> = (0..2)
        .map(|_| create_qp(&pdom, QpType::Rc, &cq, None, cap(8, 1, 0)))
        .collect();
    let uar = |qp: &uverbs::QueuePair| model.qp(qp.qp_num()).unwrap().uar;
    let td_uar = uar(&in_td[0]);
    assert_eq!(uar(&in_td[1]), td_uar, "one register for the thread domain");
    assert!(
        plain.iter().all(|q| uar(q) != td_uar),
        "no other QP rings the thread domain's UAR"
    );
    // Sends ring it, without a violation.
    let g = gid(&ctx);
    let (a, b) = (&in_td[0], &in_td[1]);
    connect(a, b.qp_num(), g, 7);
    connect(b, a.qp_num(), g, 7);
    let mr = pdom
        .alloc_mr(4096, uverbs::AccessFlags::LOCAL_WRITE)
        .unwrap();
    let mut in_td = in_td;
    in_td[1]
        .post_recv(&[RecvWr::new(2, &[mr.sge(1024, 64).unwrap()])])
        .unwrap();
    in_td[0]
        .post_send(&[SendWr::send(1, &[mr.sge(0, 8).unwrap()])])
        .unwrap();
    let got = run_and_poll(&model, &mut cq, 2);
    assert!(got.iter().all(|c| c.status == WcStatus::SUCCESS), "{got:?}");
    assert_clean(&model);
    // Held by its parent domain: not deallocated, and given back.
    let td = td.destroy().unwrap_err();
    assert_eq!(td.errno(), Errno::EBUSY);
    let td = td.into_inner();
    drop((in_td, mr));
    pdom.destroy().unwrap();
    td.destroy().unwrap();
    // Its register goes to the next thread domain, not to plain QPs.
    let td2 = ctx.alloc_td().unwrap();
    let pdom2 = pd
        .alloc_parent_domain(ParentDomainAttr::new().with_thread_domain(&td2))
        .unwrap();
    let again = create_qp(&pdom2, QpType::Rc, &cq, None, cap(8, 1, 0));
    assert_eq!(uar(&again), td_uar);
    let more = create_qp(&pd, QpType::Rc, &cq, None, cap(8, 1, 0));
    assert_ne!(uar(&more), td_uar);
    drop(plain);
}

#[test]
fn a_parent_domain_over_a_parent_domain_is_over_its_protection_domain() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let a = Recorder::new();
    let outer = parent(&pd, &a);
    let inner = outer.alloc_parent_domain(ParentDomainAttr::new()).unwrap();
    assert_eq!(inner.handle(), pd.handle());
    let cq = cq_in(&ctx, &inner, 16);
    assert!(
        a.allocs().is_empty(),
        "the outer allocator is not the inner's"
    );
    // The inner one holds the PD, not the outer parent domain.
    drop(cq);
    outer.destroy().unwrap();
    let pd = pd.destroy().unwrap_err().into_inner();
    inner.destroy().unwrap();
    pd.destroy().unwrap();
    assert_clean(&model);
}
