//! What the mlx5 model tests share: a context on the device model, QPs
//! made and connected the way every test wants them, and the checks that
//! end each test. Used by the `tests/mlx5_*.rs` tests and the other model
//! tests (`tests/*_model.rs`); each uses part of it.

use uverbs::testing::mlx5::{fake_mlx5, Mlx5Model};
use uverbs::{
    AccessFlags, AddressHandle, AhAttr, CompletionQueue, Context, CqOptions, GlobalRoute,
    MemoryRegion, ProtectionDomain, QpCap, QpInitAttr, QpType, QueuePair, SharedReceiveQueue,
    WorkCompletion,
};

/// The Q_Key of the pairs' QPs (UD destinations name it).
pub use crate::qp_connect::QKEY;

pub fn open(model: &Mlx5Model) -> Context {
    Context::open_with(model.dyn_kernel(), None).unwrap_or_else(|e| panic!("open: {e}"))
}

pub fn gid(ctx: &Context) -> uverbs::Gid {
    ctx.query_gid(1, 1).unwrap().expect("GID 1").gid
}

pub fn cap(depth: u32, sge: u32, inline: u32) -> QpCap {
    QpCap::new(depth, depth, sge, sge).max_inline_data(inline)
}

pub fn create_qp<'a>(
    pd: &ProtectionDomain,
    qp_type: QpType,
    cq: &'a CompletionQueue,
    srq: Option<&'a SharedReceiveQueue>,
    cap: QpCap,
) -> QueuePair {
    pd.create_qp(&QpInitAttr::new(qp_type, cq, cq).srq(srq).cap(cap))
        .unwrap_or_else(|e| panic!("create_qp: {e}"))
}

/// RESET -> INIT -> RTR -> RTS towards `remote_qpn` (UD: no remote),
/// through the model's GID 1, every remote access allowed.
pub fn connect(qp: &QueuePair, remote_qpn: u32, dgid: uverbs::Gid, rnr_retry: u8) {
    let all = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    crate::qp_connect::to_rts(qp, remote_qpn, dgid, 1, all, rnr_retry);
}

/// Two connected QPs of `qp_type`, each with its own CQ, and an MR each.
#[derive(Debug)]
pub struct Pair {
    pub model: std::sync::Arc<Mlx5Model>,
    pub _ctx: Context,
    pub pd: ProtectionDomain,
    pub cq_a: CompletionQueue,
    pub cq_b: CompletionQueue,
    pub a: QueuePair,
    pub b: QueuePair,
    pub mr_a: MemoryRegion,
    pub mr_b: MemoryRegion,
}

pub fn pair_with(
    model: std::sync::Arc<Mlx5Model>,
    qp_type: QpType,
    depth: u32,
    rnr_retry: u8,
) -> Pair {
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let cq_a = ctx.create_cq(depth * 2, CqOptions::default()).unwrap();
    let cq_b = ctx.create_cq(depth * 2, CqOptions::default()).unwrap();
    let a = create_qp(&pd, qp_type, &cq_a, None, cap(depth, 2, 64));
    let b = create_qp(&pd, qp_type, &cq_b, None, cap(depth, 2, 64));
    let g = gid(&ctx);
    connect(&a, b.qp_num(), g, rnr_retry);
    connect(&b, a.qp_num(), g, rnr_retry);
    let access = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let mr_a = pd.alloc_mr(1 << 16, access).unwrap();
    let mr_b = pd.alloc_mr(1 << 16, access).unwrap();
    Pair {
        model,
        _ctx: ctx,
        pd,
        cq_a,
        cq_b,
        a,
        b,
        mr_a,
        mr_b,
    }
}

pub fn pair(qp_type: QpType, depth: u32) -> Pair {
    pair_with(fake_mlx5(), qp_type, depth, 7)
}

/// Runs the device, then polls `cq` until it has given `n` completions.
pub fn run_and_poll(model: &Mlx5Model, cq: &mut CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    model.process();
    let mut out = Vec::new();
    let mut wc = [WorkCompletion::default(); 16];
    for _ in 0..1000 {
        let k = cq.poll(&mut wc);
        out.extend_from_slice(&wc[..k]);
        if out.len() >= n {
            break;
        }
        model.process();
    }
    assert_eq!(
        out.len(),
        n,
        "completions after 1000 polls (fewer: a request or receive never completed): {out:?}"
    );
    out
}

pub fn assert_clean(model: &Mlx5Model) {
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    assert!(
        model.ignored_doorbells().is_empty(),
        "{:?}",
        model.ignored_doorbells()
    );
}

/// Two UD QPs ready to talk, each with its own CQ, an MR, and an address
/// handle towards the context's own GID.
#[derive(Debug)]
pub struct UdPair {
    pub model: std::sync::Arc<Mlx5Model>,
    pub _ctx: Context,
    pub pd: ProtectionDomain,
    pub cq_a: CompletionQueue,
    pub cq_b: CompletionQueue,
    pub a: QueuePair,
    pub b: QueuePair,
    pub mr: MemoryRegion,
    pub ah: AddressHandle,
}

pub fn ud_pair() -> UdPair {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let cq_a = ctx.create_cq(16, CqOptions::default()).unwrap();
    let cq_b = ctx.create_cq(16, CqOptions::default()).unwrap();
    let a = create_qp(&pd, QpType::Ud, &cq_a, None, cap(8, 1, 32));
    let b = create_qp(&pd, QpType::Ud, &cq_b, None, cap(8, 1, 32));
    let g = gid(&ctx);
    connect(&a, 0, g, 7);
    connect(&b, 0, g, 7);
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let ah = pd
        .create_ah(&AhAttr::new(1).grh(GlobalRoute::new(g, 1).hop_limit(64)))
        .unwrap();
    UdPair {
        model,
        _ctx: ctx,
        pd,
        cq_a,
        cq_b,
        a,
        b,
        mr,
        ah,
    }
}
