//! Soundness review (issue 27) on the fake kernels: what a caller or a
//! kernel answer could get wrong is refused before it reaches the kernel or
//! the provider's memory.
//!
//! - item 7: `create_qp` refuses an SRQ of another context, as it refuses a
//!   CQ of another context, before any command: the foreign SRQ's handle
//!   would name another object (or none) in this context, while the
//!   provider links the QP's receive completions to the foreign SRQ's queue
//!   (rxe fake and the mlx5 device model);
//! - item 6: an mlx5 `GET_CONTEXT` answer whose `num_uars_per_page`
//!   mlx5_ib never sends (not a power of two, or above 16), or with more
//!   static bfregs than it ever gives, opens no context: `Malformed`, not
//!   an overflow panic.
//!
//! The unit tests of `providers/mlx5/uar/` and `src/sys/linux.rs` cover
//! the rest of these items (page ids, the `write_cmd` fd sentinel).

use std::sync::Arc;

use uverbs::{
    abi,
    sys::{
        fake::{dummy_fd, Call, FakeKernel},
        Errno, Kernel,
    },
    testing::{mlx5::fake_mlx5, rxe::*},
    CompletionQueue, Context, CqOptions, ErrorKind, ProtectionDomain, QpCap, QpInitAttr, QueuePair,
    SharedReceiveQueue, SrqAttr,
};
use zerocopy::{FromZeros, IntoBytes};

const CAP: QpCap = QpCap::new(4, 4, 1, 1);

const SRQ: SrqAttr = SrqAttr::new(4, 1);

fn create_qp(
    pd: &ProtectionDomain,
    send_cq: &CompletionQueue,
    recv_cq: &CompletionQueue,
    srq: Option<&SharedReceiveQueue>,
) -> uverbs::Result<QueuePair> {
    pd.create_qp(&QpInitAttr::rc(send_cq, recv_cq).srq(srq).cap(CAP))
}

/// The QP creates (ioctl or write) `kernel` has seen.
fn qp_creates(kernel: &FakeKernel) -> usize {
    kernel
        .calls()
        .into_iter()
        .filter(|c| {
            matches!(
                c,
                Call::Ioctl {
                    object: abi::UVERBS_OBJECT_QP,
                    method: abi::UVERBS_METHOD_QP_CREATE,
                } | Call::Write(abi::IB_USER_VERBS_CMD_CREATE_QP)
            )
        })
        .count()
}

/// Two contexts on one kernel, a PD and a CQ on each, an SRQ on each.
struct Two {
    /// Context `a`'s objects, then context `b`'s.
    objects: [(ProtectionDomain, CompletionQueue, SharedReceiveQueue); 2],
    _contexts: [Context; 2],
}

fn two_contexts(kernel: &Arc<dyn Kernel>, name: Option<&str>) -> Two {
    let open = || Context::open_with(kernel.clone(), name).unwrap_or_else(|e| panic!("open: {e}"));
    let contexts = [open(), open()];
    let objects = contexts.each_ref().map(|ctx| {
        let pd = ctx.alloc_pd().unwrap_or_else(|e| panic!("alloc_pd: {e}"));
        let cq = ctx
            .create_cq(8, CqOptions::default())
            .unwrap_or_else(|e| panic!("create_cq: {e}"));
        let srq = pd
            .create_srq(SRQ)
            .unwrap_or_else(|e| panic!("create_srq: {e}"));
        (pd, cq, srq)
    });
    Two {
        objects,
        _contexts: contexts,
    }
}

/// A QP of context `a` on context `b`'s SRQ is `InvalidArgument`, naming
/// the SRQ, and no QP create reaches the kernel; `a`'s own SRQ is taken.
fn foreign_srq_is_refused(kernel: &FakeKernel, two: &Two) {
    let [(pd, cq, srq), (_, _, foreign)] = &two.objects;
    let before = qp_creates(kernel);
    let Err(err) = create_qp(pd, cq, cq, Some(foreign)) else {
        panic!("a QP was created on another context's SRQ");
    };
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("SRQ"), "{err}");
    assert_eq!(qp_creates(kernel), before, "a QP create reached the kernel");
    create_qp(pd, cq, cq, Some(srq)).unwrap_or_else(|e| panic!("own SRQ: {e}"));
    assert_eq!(qp_creates(kernel), before + 1);
}

/// Item 7 of issue 27 on the rxe fake.
#[test]
fn a_qp_on_another_contexts_srq_is_refused_before_the_kernel_sees_it() {
    let fake = fake_rxe();
    let two = two_contexts(&fake.dyn_kernel(), Some(DEV));
    foreign_srq_is_refused(&fake.kernel, &two);
}

/// Item 7 of issue 27 on the mlx5 device model, where the QP's receive
/// completions would be taken from the foreign SRQ's free list.
#[test]
fn an_mlx5_qp_on_another_contexts_srq_is_refused_before_the_kernel_sees_it() {
    let model = fake_mlx5();
    let two = two_contexts(&model.dyn_kernel(), None);
    foreign_srq_is_refused(&model.kernel, &two);
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}

/// The check item 7 mirrors: a CQ of another context, as the send or the
/// receive CQ, is refused the same way.
#[test]
fn a_qp_on_another_contexts_cq_is_refused_before_the_kernel_sees_it() {
    let fake = fake_rxe();
    let two = two_contexts(&fake.dyn_kernel(), Some(DEV));
    let [(pd, cq, _), (_, foreign, _)] = &two.objects;
    let before = qp_creates(&fake.kernel);
    for (send, recv) in [(foreign, cq), (cq, foreign)] {
        let Err(err) = create_qp(pd, send, recv, None) else {
            panic!("a QP was created on another context's CQ");
        };
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("CQ"), "{err}");
    }
    assert_eq!(qp_creates(&fake.kernel), before);
}

// ------------------------------------------------------------ item 6

/// An mlx5 kernel whose GET_CONTEXT answers `num_uars_per_page` and
/// `tot_bfregs` (0: dynamic UARs, which it allocates, 4 KiB each).
fn mlx5_kernel(num_uars_per_page: u32, tot_bfregs: u32) -> Arc<FakeKernel> {
    let k = Arc::new(FakeKernel::new());
    k.char_dev(libc::makedev(231, 192));
    k.on_netlink(uverbs::testing::mlx5::netlink_reply);
    let mut uars = 0u32;
    k.on_ioctl(move |cmd| match (cmd.object_id, cmd.method_id) {
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_GET_CONTEXT) => {
            let mut resp = abi::Mlx5IbAllocUcontextResp::new_zeroed();
            resp.bf_reg_size = 512;
            resp.cqe_version = 1;
            resp.max_sq_desc_sz = 512;
            resp.num_uars_per_page = num_uars_per_page;
            resp.tot_bfregs = tot_bfregs;
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            cmd.write_output(
                abi::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
                &4u32.to_ne_bytes(),
            );
            Ok(())
        }
        (abi::UVERBS_OBJECT_ASYNC_EVENT, abi::UVERBS_METHOD_ASYNC_EVENT_ALLOC) => {
            cmd.set_new_fd(abi::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, dummy_fd());
            Ok(())
        }
        (abi::MLX5_IB_OBJECT_UAR, abi::MLX5_IB_METHOD_UAR_OBJ_ALLOC) => {
            uars += 1;
            cmd.set_new_object(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, uars);
            let offset = u64::from(uars) << 16;
            cmd.write_output(
                abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET,
                &offset.to_ne_bytes(),
            );
            cmd.write_output(
                abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH,
                &4096u32.to_ne_bytes(),
            );
            cmd.write_output(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, &uars.to_ne_bytes());
            Ok(())
        }
        _ => Err(Errno::EPROTONOSUPPORT),
    });
    k
}

/// Item 6 of issue 27, through `Context::open_with`: `num_uars_per_page`
/// 2^31 and up overflowed `num_uars_per_page * 2` (a panic; a division by
/// zero in release), other values mlx5_ib never sends were taken; now each
/// is `Malformed`, with static and with dynamic UARs. The values it does
/// send (0 from kernels before 4 KiB UARs, meaning 1) open a context.
#[test]
fn an_mlx5_context_answer_with_uar_numbers_mlx5_ib_never_sends_is_malformed() {
    for (n, tot) in [
        (1 << 31, 16),
        (1 << 31, 0),
        (u32::MAX, 16),
        (u32::MAX, 0),
        (3, 16),
        (3, 0),
        (32, 16),
        (32, 0),
        (1, 513),
        (1, u32::MAX),
    ] {
        let kernel: Arc<dyn Kernel> = mlx5_kernel(n, tot);
        match Context::open_with(kernel, None) {
            Ok(_) => panic!("{n} UARs per page, {tot} static bfregs: opened"),
            Err(e) => assert_eq!(e.kind(), ErrorKind::Malformed, "{n}, {tot}: {e}"),
        }
    }
    for (n, tot) in [(0, 16), (1, 16), (16, 0), (16, 32), (1, 512)] {
        let kernel: Arc<dyn Kernel> = mlx5_kernel(n, tot);
        if let Err(e) = Context::open_with(kernel, None) {
            panic!("{n} UARs per page, {tot} static bfregs: {e}");
        }
    }
}
