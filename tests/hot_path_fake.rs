//! The data path's promises, checked on the fake kernel: posting receives
//! and polling (`poll`, and extended polling sessions: `start_poll`,
//! `next`, the accessors (the wall-clock timestamp among them), an early
//! end and the `poll` that takes what it left) make no system call and allocate nothing; a batch of sends makes
//! exactly one system call (the rxe doorbell) and allocates nothing,
//! whether posted as a slice, as a send batch, through a typed session or
//! through the send session's non-borrowing calls.
// A counting global allocator needs `unsafe impl GlobalAlloc`.
#![allow(unsafe_code)]

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
};

use uverbs::testing::rxe::*;
use uverbs::{
    qp_ex::{Mlx5, Rc, Rxe},
    sys::fake::Call,
    testing::mlx5::Mlx5Model,
    AccessFlags, CompletionQueue, Context, CqOptions, QpAttr, QpCap, QpInitAttr, QpState,
    QueuePair, RecvWr, SendWr, SrqAttr, WcExFlags, WorkCompletion,
};

/// Counts the allocations of the current thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counter is a thread-local `Cell` with a const initializer, which neither
// allocates nor re-enters the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded with the caller's layout, per `GlobalAlloc::alloc`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded unchanged, per `GlobalAlloc::realloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

use uverbs_test_support::fake_rc;

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn post_and_poll_make_only_the_doorbell_syscall_and_never_allocate() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    let mut qp = fake_rc::rc_in_rts(&pd, &cq);
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();

    let sge = [mr.sge(0, 64).unwrap()];
    let recvs = [RecvWr::new(1, &sge), RecvWr::new(2, &sge)];
    let sends = [
        SendWr::send(10, &sge),
        SendWr::send(11, &sge).unsignaled(),
        SendWr::send(12, &[]).inline(b"hi"),
    ];
    let mut wc = [WorkCompletion::default(); 8];
    // Warm up once (the fake's own call log grows its buffer here).
    qp.post_send(&sends[..1]).unwrap();
    fake.kernel.clear_calls();

    let before = allocations();
    qp.post_recv(&recvs).unwrap();
    assert_eq!(cq.poll(&mut wc), 0);
    let after_recv_and_poll = allocations();
    assert!(
        fake.kernel.calls().is_empty(),
        "post_recv and poll made a call"
    );
    let before_send = allocations();
    qp.post_send(&sends).unwrap();
    let after_send = allocations();
    assert_eq!(
        fake.kernel.calls(),
        [Call::RawWrite(32)],
        "a batch of sends is one doorbell write"
    );
    assert_eq!(after_recv_and_poll - before, 0, "post_recv/poll allocated");
    assert_eq!(after_send - before_send, 0, "post_send allocated");

    // A send batch: no call while requests are pushed, one doorbell write
    // at complete, none for an aborted batch; no allocation.
    fake.kernel.clear_calls();
    let before_batch = allocations();
    let mut batch = qp.start_send().unwrap();
    for wr in &sends {
        batch.push(wr).unwrap();
    }
    assert!(fake.kernel.calls().is_empty(), "a push made a call");
    batch.complete().unwrap();
    let mut batch = qp.start_send().unwrap();
    batch.push(&sends[0]).unwrap();
    batch.abort();
    assert_eq!(allocations() - before_batch, 0, "a send batch allocated");
    assert_eq!(
        fake.kernel.calls(),
        [Call::RawWrite(32)],
        "a completed batch is one doorbell write, an aborted one none"
    );
    // A typed session (`start_wr`, the `ibv_wr_*` builders): the same.
    fake.kernel.clear_calls();
    let before_typed = allocations();
    let mut s = qp.start_wr::<Rc, Rxe>().unwrap();
    s.send().wr_id(10).sge(sge[0]).unwrap();
    s.send().wr_id(11).unsignaled().sge_list(&sge).unwrap();
    s.send_imm(7).wr_id(12).inline(b"hi").unwrap();
    assert!(
        fake.kernel.calls().is_empty(),
        "a typed request made a call"
    );
    s.complete().unwrap();
    let mut s = qp.start_wr::<Rc, Rxe>().unwrap();
    s.send().sge(sge[0]).unwrap();
    s.abort();
    assert_eq!(allocations() - before_typed, 0, "a typed session allocated");
    assert_eq!(
        fake.kernel.calls(),
        [Call::RawWrite(32)],
        "a completed typed session is one doorbell write, an aborted one none"
    );
    // The session through the non-borrowing calls (`begin_send`,
    // `push_send`, `complete_send`: the C library's `ibv_wr_*`): the same.
    fake.kernel.clear_calls();
    let before_calls = allocations();
    qp.begin_send().unwrap();
    for wr in &sends {
        qp.push_send(wr).unwrap();
    }
    assert_eq!(qp.send_pending(), Some(3));
    assert!(fake.kernel.calls().is_empty(), "a push_send made a call");
    qp.complete_send().unwrap();
    assert_eq!(qp.send_pending(), None);
    qp.begin_send().unwrap();
    qp.push_send(&sends[0]).unwrap();
    qp.abort_send();
    assert_eq!(
        allocations() - before_calls,
        0,
        "a session of calls allocated"
    );
    assert_eq!(
        fake.kernel.calls(),
        [Call::RawWrite(32)],
        "a completed session is one doorbell write, an aborted one none"
    );
    // A failing doorbell: the requests are in the queue, and the error's
    // index is how many (for a slice as for a batch).
    fake.kernel.on_raw_write(|_| Err(uverbs::sys::Errno::EIO));
    let e = qp.post_send(&sends[1..]).unwrap_err();
    assert_eq!(e.index, 2);
    assert!(matches!(e.kind, uverbs::PostErrorKind::Doorbell(_)), "{e}");
    let mut batch = qp.start_send().unwrap();
    batch.push(&sends[1]).unwrap();
    let e = batch.complete().unwrap_err();
    assert_eq!(e.index, 1);
    assert!(matches!(e.kind, uverbs::PostErrorKind::Doorbell(_)), "{e}");
    qp.begin_send().unwrap();
    qp.push_send(&sends[1]).unwrap();
    qp.push_send(&sends[2]).unwrap();
    let e = qp.complete_send().unwrap_err();
    assert_eq!(e.index, 2);
    assert!(matches!(e.kind, uverbs::PostErrorKind::Doorbell(_)), "{e}");
    assert_eq!(qp.send_pending(), None, "closed whatever the doorbell said");

    // Extended polling over 40 CQEs the kernel wrote: a session that ends
    // early, a poll of what it left, one that reads to the end, and a
    // session and a poll of the empty CQ.
    let ring = fake.cq_ring(cq.handle()).unwrap();
    let mut cqe = <uverbs::abi::IbUverbsWc as zerocopy::FromZeros>::new_zeroed();
    for i in 0..40 {
        cqe.wr_id = i;
        assert!(ring.post_cqe(&cqe));
    }
    fake.kernel.clear_calls();
    let before = allocations();
    let mut ids = 0;
    let mut s = cq.start_poll().unwrap();
    ids += s.wr_id();
    for _ in 0..2 {
        assert!(s.next());
        ids += s.wr_id();
    }
    drop(s);
    assert_eq!(cq.poll(&mut wc[..2]), 2);
    let mut s = cq.start_poll().unwrap();
    let mut n = 0;
    loop {
        ids += s.wr_id() + u64::from(s.byte_len()) + u64::from(s.imm_data().is_some());
        n += 1;
        if !s.next() {
            break;
        }
    }
    s.end();
    assert!(cq.start_poll().is_none());
    assert_eq!(cq.poll(&mut wc), 0);
    assert_eq!(allocations() - before, 0, "extended polling allocated");
    assert!(
        fake.kernel.calls().is_empty(),
        "extended polling made a call"
    );
    // 0..3 read in the first session, 3 and 4 polled, the rest read.
    assert_eq!((n, ids), (35, (0..3).sum::<u64>() + (5..40).sum::<u64>()));
}

/// The same promise on mlx5 (the device model of `uverbs::testing::mlx5`):
/// posting sends and receives and polling make no system call at all (the
/// doorbell is a store to the UAR page) and allocate nothing.
#[test]
fn mlx5_post_and_poll_make_no_syscall_and_never_allocate() {
    use uverbs::testing::mlx5::fake_mlx5;

    let model = fake_mlx5();
    let ctx = Context::open_with(model.dyn_kernel(), None).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    // With timestamps: the sessions below take the timestamped poll.
    let opts = CqOptions::new().wc_flags(
        WcExFlags::STANDARD
            | WcExFlags::COMPLETION_TIMESTAMP
            | WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK,
    );
    let mut cq = ctx.create_cq(32, opts).unwrap();
    let mut qp = pd
        .create_qp(&QpInitAttr::rc(&cq, &cq).cap(QpCap::new(8, 8, 1, 1).max_inline_data(16)))
        .unwrap();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let gid = ctx.query_gid(1, 1).unwrap().unwrap().gid;
    // Connects a QP to itself.
    let loop_back = |qp: &mut QueuePair| {
        let mut attr = QpAttr::with_state(QpState::Init);
        attr.port_num = 1;
        attr.qp_access_flags = AccessFlags::LOCAL_WRITE;
        qp.modify_to(&attr).unwrap();
        attr.qp_state = QpState::Rtr;
        attr.path_mtu = uverbs::Mtu(3);
        attr.dest_qp_num = qp.qp_num();
        attr.ah_attr.port_num = 1;
        attr.ah_attr.grh = Some(uverbs::GlobalRoute::new(gid, 1));
        qp.modify_to(&attr).unwrap();
        attr.qp_state = QpState::Rts;
        qp.modify_to(&attr).unwrap();
    };
    loop_back(&mut qp);

    let sge = [mr.sge(0, 64).unwrap()];
    let recvs = [RecvWr::new(1, &sge), RecvWr::new(2, &sge)];
    let sends = [
        SendWr::send(10, &sge).unsignaled(),
        SendWr::send(12, &[]).inline(b"hi"),
    ];
    let mut wc = [WorkCompletion::default(); 16];
    // Warm up once: the first completion resolves and caches its QP.
    qp.post_recv(&recvs[..1]).unwrap();
    qp.post_send(&sends[1..]).unwrap();
    model.process();
    assert_eq!(cq.poll(&mut wc), 2);
    model.kernel.clear_calls();

    for how in [Take::Poll, Take::Sessions] {
        let n = mlx5_quiet_round(&model, &mut cq, &mut wc, how, "a QP", || {
            qp.post_recv(&recvs).unwrap();
            qp.post_send(&sends).unwrap();
            qp.post_recv(&recvs[..1]).unwrap();
            let mut batch = qp.start_send().unwrap();
            batch.push(&sends[0]).unwrap();
            batch.complete().unwrap();
            qp.post_recv(&recvs).unwrap();
            let mut s = qp.start_wr::<Rc, Mlx5>().unwrap();
            s.send().wr_id(13).unsignaled().sge(sge[0]).unwrap();
            s.send_imm(5).wr_id(14).inline(b"hi").unwrap();
            s.complete().unwrap();
            qp.post_recv(&recvs).unwrap();
            qp.begin_send().unwrap();
            qp.push_send(&sends[0]).unwrap();
            qp.push_send(&sends[1]).unwrap();
            qp.complete_send().unwrap();
        });
        // Seven receives and the three signaled inline sends (the batch's
        // send, the typed session's first and the calls' first are
        // unsignaled).
        assert_eq!(n, 10, "{how:?}: {:?}", &wc[..n]);
    }

    // A QP on an SRQ: its receives complete through the SRQ's free list,
    // under its lock.
    let mut srq = pd.create_srq(SrqAttr::new(4, 1)).unwrap();
    let mut on_srq = pd
        .create_qp(
            &QpInitAttr::rc(&cq, &cq)
                .srq(&srq)
                .cap(QpCap::new(8, 0, 1, 1).max_inline_data(16)),
        )
        .unwrap();
    loop_back(&mut on_srq);
    // Warm up: the CQ caches this QP.
    srq.post_recv(&recvs[..1]).unwrap();
    on_srq.post_send(&sends[1..]).unwrap();
    model.process();
    assert_eq!(cq.poll(&mut wc), 2);
    model.kernel.clear_calls();

    for how in [Take::Poll, Take::Sessions] {
        let what = "a QP on an SRQ";
        let n = mlx5_quiet_round(&model, &mut cq, &mut wc, how, what, || {
            srq.post_recv(&recvs).unwrap();
            on_srq
                .post_send(&[
                    SendWr::send(20, &[]).inline(b"a"),
                    SendWr::send(21, &[]).inline(b"b"),
                ])
                .unwrap();
        });
        // Two receives and two sends.
        assert_eq!(n, 4, "{how:?}: {:?}", &wc[..n]);
        let mut ids: Vec<u64> = wc[..n].iter().map(|w| w.wr_id).collect();
        ids.sort_unstable();
        assert_eq!(ids, [1, 2, 20, 21], "{how:?}");
    }
}

/// How a round takes its completions.
#[derive(Debug, Clone, Copy)]
enum Take {
    /// `poll`.
    Poll,
    /// Extended polling sessions: the first ends after one completion (the
    /// next session starts with what it left), the others read to the end.
    Sessions,
}

/// One round on the mlx5 model: `post` posts, the model runs, and four
/// polls take what completed into `wc`; neither posting nor polling may
/// make a call or allocate (`what` names the round in failures). Returns
/// how many completions were taken.
fn mlx5_quiet_round(
    model: &Mlx5Model,
    cq: &mut CompletionQueue,
    wc: &mut [WorkCompletion],
    how: Take,
    what: &str,
    post: impl FnOnce(),
) -> usize {
    let before = allocations();
    post();
    let after_post = allocations();
    assert!(
        model.kernel.calls().is_empty(),
        "{what}: posting made a call"
    );
    model.process();
    let before_poll = allocations();
    let mut n = 0;
    for round in 0..4 {
        match how {
            Take::Poll => n += cq.poll(&mut wc[n..]),
            Take::Sessions => {
                if let Some(mut s) = cq.start_poll() {
                    loop {
                        assert!(s.completion_ts().is_some_and(|t| t > 0), "{what}: {s:?}");
                        assert!(s.completion_wallclock_ns().is_some(), "{what}: {s:?}");
                        wc[n] = s.work_completion();
                        n += 1;
                        if round == 0 || !s.next() {
                            break;
                        }
                    }
                }
            }
        }
    }
    let after_poll = allocations();
    assert!(
        model.kernel.calls().is_empty(),
        "{what}: polling made a call"
    );
    assert_eq!(after_post - before, 0, "{what}: posting allocated");
    assert_eq!(after_poll - before_poll, 0, "{what}: polling allocated");
    assert!(
        model.violations().is_empty(),
        "{what}: {:?}",
        model.violations()
    );
    n
}
