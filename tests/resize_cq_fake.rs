//! `CompletionQueue::resize` (`ibv_resize_cq`) against the fake kernels.
//!
//! On rxe (`uverbs::testing::rxe`, which checks `RESIZE_CQ` as Linux 6.1
//! does and moves the waiting completions to a new ring): growing and
//! shrinking keep the completions waiting, in order, and new ones arrive
//! in the new ring; a size of 0, above the device's `max_cqe`, or below
//! the completions waiting is the kernel's `EINVAL` with the CQ as it was.
//! On mlx5 (`uverbs::testing::mlx5`) the resize is refused with
//! `EOPNOTSUPP` before any command.

use std::sync::Arc;

use uverbs::{
    abi::{self, IbUverbsWc},
    sys::Errno,
    testing::{kernel::Call, mlx5::fake_mlx5, rxe::*},
    CompletionQueue, Context, CqOptions, ErrorKind, WorkCompletion,
};
use zerocopy::FromZeros;

fn open() -> (Arc<FakeRxe>, Context) {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    (fake, ctx)
}

/// Posts completions `ids` into the CQ's current ring, as `rxe_cq_post`.
fn post(fake: &FakeRxe, cq: &CompletionQueue, ids: std::ops::Range<u64>) {
    let ring = fake.cq_ring(cq.handle()).expect("the CQ's ring");
    for id in ids {
        let mut c = IbUverbsWc::new_zeroed();
        c.wr_id = id;
        c.qp_num = 0x11;
        assert!(ring.post_cqe(&c), "the CQ is full at {id}");
    }
}

/// Polls everything waiting, in batches of 3, and returns the wr_ids.
fn drain(cq: &mut CompletionQueue) -> Vec<u64> {
    let mut out = Vec::new();
    let mut wc = [WorkCompletion::default(); 3];
    loop {
        let n = cq.poll(&mut wc);
        if n == 0 {
            return out;
        }
        out.extend(wc[..n].iter().map(|w| w.wr_id));
    }
}

fn resizes(fake: &FakeRxe) -> usize {
    fake.kernel
        .calls()
        .iter()
        .filter(|c| **c == Call::Write(abi::IB_USER_VERBS_CMD_RESIZE_CQ))
        .count()
}

#[test]
fn grow_keeps_the_waiting_completions_and_takes_new_ones() {
    let (fake, ctx) = open();
    let mut cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    assert_eq!(cq.cqe(), 63);
    post(&fake, &cq, 0..40);
    let mut wc = [WorkCompletion::default(); 5];
    assert_eq!(cq.poll(&mut wc), 5);
    cq.resize(200).unwrap();
    assert_eq!(cq.cqe(), 255, "the kernel's size: 2^n - 1 slots");
    assert_eq!(resizes(&fake), 1);
    assert_eq!(fake.cq_ring(cq.handle()).unwrap().slots(), 256);
    // More than the old ring held, after the 35 that were waiting.
    post(&fake, &cq, 40..240);
    assert_eq!(drain(&mut cq), (5..240).collect::<Vec<_>>());
    post(&fake, &cq, 240..250);
    assert_eq!(drain(&mut cq), (240..250).collect::<Vec<_>>());
}

#[test]
fn shrink_keeps_the_waiting_completions() {
    let (fake, ctx) = open();
    let mut cq = ctx.create_cq(63, CqOptions::default()).unwrap();
    post(&fake, &cq, 0..20);
    cq.resize(20).unwrap();
    assert_eq!(cq.cqe(), 31);
    assert_eq!(drain(&mut cq), (0..20).collect::<Vec<_>>());
    // And again from the resized ring, with its indices away from 0.
    post(&fake, &cq, 20..45);
    cq.resize(25).unwrap();
    assert_eq!(cq.cqe(), 31);
    post(&fake, &cq, 45..50);
    assert_eq!(drain(&mut cq), (20..50).collect::<Vec<_>>());
    assert_eq!(resizes(&fake), 2);
}

#[test]
fn a_size_the_kernel_refuses_leaves_the_cq_as_it_was() {
    let (fake, ctx) = open();
    let mut cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    post(&fake, &cq, 0..10);
    let ring = fake.cq_ring(cq.handle()).unwrap();
    let max_cqe = device_attr().base.max_cqe;
    // Below the 10 waiting, 0, and above the device's max_cqe.
    for cqe in [9, 0, max_cqe + 1] {
        let e = cq.resize(cqe).unwrap_err();
        assert_eq!(e.kernel_errno(), Some(Errno::EINVAL), "cqe {cqe}: {e}");
        assert_eq!(e.kind(), ErrorKind::Os);
        assert_eq!(cq.cqe(), 63);
    }
    assert_eq!(resizes(&fake), 3);
    // Still the same ring: what was waiting and what comes next.
    assert_eq!(fake.cq_ring(cq.handle()).unwrap().slots(), ring.slots());
    post(&fake, &cq, 10..12);
    assert_eq!(drain(&mut cq), (0..12).collect::<Vec<_>>());
    // Exactly the number waiting is enough.
    post(&fake, &cq, 12..22);
    cq.resize(10).unwrap();
    assert_eq!(cq.cqe(), 15);
    assert_eq!(drain(&mut cq), (12..22).collect::<Vec<_>>());
}

#[test]
fn mlx5_refuses_before_any_command() {
    let model = fake_mlx5();
    let ctx = Context::open_with(model.dyn_kernel(), None).unwrap();
    let mut cq = ctx.create_cq(64, CqOptions::default()).unwrap();
    let cqe = cq.cqe();
    let e = cq.resize(128).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnsupportedProvider, "{e}");
    assert_eq!(e.errno(), Errno::EOPNOTSUPP);
    assert_eq!(cq.cqe(), cqe);
    cq.destroy().unwrap();
}
