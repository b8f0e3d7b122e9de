//! Shared setup for the data-path tests: a context on the test device and
//! pairs of QPs connected to each other through rxe's loopback.

use uverbs::{
    AccessFlags, AhAttr, CompletionQueue, Context, CqOptions, Gid, GlobalRoute, MemoryRegion,
    ProtectionDomain, QpCap, QpInitAttr, QpType, QueuePair, WorkCompletion,
};

pub use crate::bounded::{Patience, DESTROY_WAITS};
use crate::{test_device, test_env};

/// How long the device tests wait for what must happen before they fail
/// naming it (`tests/support/src/bounded.rs`) instead of hanging the guest
/// until its boot's timeout: rxe under TCG takes milliseconds to seconds
/// for what hardware does in microseconds.
pub const PATIENCE: Patience = Patience(std::time::Duration::from_secs(30));

pub fn open() -> Context {
    Context::open(Some(&test_device())).unwrap_or_else(|e| panic!("{e}"))
}

pub fn gid_index() -> u8 {
    test_env("UVERBS_TEST_GID_INDEX")
}

pub fn local_gid(ctx: &Context) -> Gid {
    ctx.query_gid(1, u32::from(gid_index()))
        .unwrap()
        .expect("the test GID exists")
        .gid
}

pub fn cap(depth: u32) -> QpCap {
    QpCap::new(depth, depth, 4, 4).max_inline_data(64)
}

/// Everything two connected QPs need, on one context.
pub struct Pair {
    pub ctx: Context,
    pub pd: ProtectionDomain,
    pub cq_a: CompletionQueue,
    pub cq_b: CompletionQueue,
    pub a: QueuePair,
    pub b: QueuePair,
}

pub fn access_all() -> AccessFlags {
    AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC
}

/// Moves `qp` through INIT, RTR, RTS towards `remote_qpn` at `dgid`, through
/// the test GID (`qp_connect::to_rts`).
pub fn connect(qp: &QueuePair, remote_qpn: u32, dgid: Gid, access: AccessFlags, rnr_retry: u8) {
    crate::qp_connect::to_rts(qp, remote_qpn, dgid, gid_index(), access, rnr_retry);
}

/// Two QPs of `qp_type` connected to each other (RC/UC), or ready to talk (UD).
pub fn pair(qp_type: QpType, depth: u32, rnr_retry: u8) -> Pair {
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let cq_a = ctx.create_cq(depth * 2, CqOptions::default()).unwrap();
    let cq_b = ctx.create_cq(depth * 2, CqOptions::default()).unwrap();
    fn init(qp_type: QpType, cq: &CompletionQueue, depth: u32) -> QpInitAttr<'_> {
        QpInitAttr::new(qp_type, cq, cq).cap(cap(depth))
    }
    let a = pd
        .create_qp(&init(qp_type, &cq_a, depth))
        .unwrap_or_else(|e| panic!("{e}"));
    let b = pd
        .create_qp(&init(qp_type, &cq_b, depth))
        .unwrap_or_else(|e| panic!("{e}"));
    let gid = local_gid(&ctx);
    connect(&a, b.qp_num(), gid, access_all(), rnr_retry);
    connect(&b, a.qp_num(), gid, access_all(), rnr_retry);
    Pair {
        ctx,
        pd,
        cq_a,
        cq_b,
        a,
        b,
    }
}

/// Polls until `n` completions arrived (bounded: panics after ~20 s).
pub fn wait(cq: &mut CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::with_capacity(n);
    let mut buf = [WorkCompletion::default(); 16];
    let start = std::time::Instant::now();
    while got.len() < n {
        let k = cq.poll(&mut buf[..(n - got.len()).min(16)]);
        got.extend_from_slice(&buf[..k]);
        if k == 0 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(20),
                "only {} of {n} completions after 20 s: {got:?}",
                got.len()
            );
            std::thread::yield_now();
        }
    }
    got
}

pub fn mr(pd: &ProtectionDomain, len: usize) -> MemoryRegion {
    pd.alloc_mr(len, access_all())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// An address handle towards this device's test GID (UD loopback).
pub fn ah_to_own_gid(p: &Pair) -> uverbs::AddressHandle {
    p.pd.create_ah(
        &AhAttr::new(1).grh(GlobalRoute::new(local_gid(&p.ctx), gid_index()).hop_limit(1)),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A loopback RC pair whose receiving CQ signals a completion channel.
pub struct Loop {
    pub ctx: Context,
    pub _pd: ProtectionDomain,
    pub channel: uverbs::CompletionChannel,
    pub send_cq: CompletionQueue,
    pub recv_cq: CompletionQueue,
    pub tx: QueuePair,
    pub rx: QueuePair,
    pub buf: MemoryRegion,
}

/// [`Loop`]: the sender with `sq_sig_all` as given, the receiving CQ with
/// `recv_cq_context` as its context.
pub fn looped(sq_sig_all: bool, recv_cq_context: u64) -> Loop {
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let channel = ctx.create_comp_channel().unwrap();
    let send_cq = ctx.create_cq(64, CqOptions::default()).unwrap();
    let opts = CqOptions::new().channel(&channel).context(recv_cq_context);
    let recv_cq = ctx.create_cq(64, opts).unwrap();
    let qp = |cq: &CompletionQueue, sq_sig_all| {
        pd.create_qp(&QpInitAttr::rc(cq, cq).cap(cap(32)).sq_sig_all(sq_sig_all))
            .unwrap()
    };
    let (tx, rx) = (qp(&send_cq, sq_sig_all), qp(&recv_cq, false));
    let gid = local_gid(&ctx);
    connect(&tx, rx.qp_num(), gid, access_all(), 7);
    connect(&rx, tx.qp_num(), gid, access_all(), 7);
    let buf = mr(&pd, 4096);
    Loop {
        ctx,
        _pd: pd,
        channel,
        send_cq,
        recv_cq,
        tx,
        rx,
        buf,
    }
}
