//! The send flags from the public API down to the control segment the
//! device model decodes with its own decoder (`struct mlx5_wqe_ctrl_seg`,
//! `fm_ce_se`), for every posting path (`post_send`, send batches and
//! typed sessions); the
//! gaps a mutation run found in the mlx5 send path (issue 29):
//!
//! - every combination of FENCE / SIGNALED / SOLICITED / inline, with the
//!   QP's `sq_sig_all` off and on: CQ_UPDATE is `SIGNALED || sq_sig_all`,
//!   SOLICITED and FENCE (`MLX5_WQE_CTRL_FENCE`, fence mode 4) as asked,
//!   inline data exactly when the request is inline (libmlx5's
//!   `_mlx5_post_send`: `fm_ce_se = sq_signal_bits | fence | signaled |
//!   solicited`);
//! - a solicited SEND wakes a peer CQ armed for solicited events only, an
//!   unsolicited one does not;
//! - a CQ filled to its real (rounded-up) depth again and again never
//!   overruns: a consumer index written one behind would (the model
//!   overruns when `pi - ci` reaches the ring's size, as the PRM says).

use std::time::Duration;

use uverbs::{
    testing::mlx5::fake_mlx5, AccessFlags, CompletionChannel, CompletionQueue, Context, CqOptions,
    MemoryRegion, ProtectionDomain, QpInitAttr, QueuePair, RecvWr, SendFlags, SendWr, WcStatus,
    WorkCompletion,
};

use uverbs_test_support::{
    mlx5_pair::{cap, connect, gid, open},
    typed_wr::{post_by, Path, PATHS},
};

/// An RC pair on the model whose sender has `sq_sig_all` as given and whose
/// receiver's CQ signals a completion channel.
struct Rig {
    model: std::sync::Arc<uverbs::testing::mlx5::Mlx5Model>,
    _ctx: Context,
    _pd: ProtectionDomain,
    channel: CompletionChannel,
    cq_a: CompletionQueue,
    cq_b: CompletionQueue,
    a: QueuePair,
    b: QueuePair,
    mr: MemoryRegion,
}

fn rig(sq_sig_all: bool, depth: u32) -> Rig {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let channel = ctx.create_comp_channel().unwrap();
    let cq_a = ctx.create_cq(depth * 2, CqOptions::default()).unwrap();
    let opts = CqOptions::new().channel(&channel);
    let cq_b = ctx.create_cq(depth * 2, opts).unwrap();
    let qp = |cq: &CompletionQueue, sq_sig_all| {
        pd.create_qp(
            &QpInitAttr::rc(cq, cq)
                .cap(cap(depth, 2, 64))
                .sq_sig_all(sq_sig_all),
        )
        .unwrap_or_else(|e| panic!("create_qp: {e}"))
    };
    let (a, b) = (qp(&cq_a, sq_sig_all), qp(&cq_b, false));
    let g = gid(&ctx);
    connect(&a, b.qp_num(), g, 7);
    connect(&b, a.qp_num(), g, 7);
    let mr = pd
        .alloc_mr(
            1 << 16,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        )
        .unwrap();
    model.log_wqes(true);
    Rig {
        model,
        _ctx: ctx,
        _pd: pd,
        channel,
        cq_a,
        cq_b,
        a,
        b,
        mr,
    }
}

fn post(qp: &mut QueuePair, path: Path, wr: &SendWr<'_>) {
    post_by(qp, path, std::slice::from_ref(wr));
}

/// Everything `cq` holds after the device ran.
fn drain(cq: &mut CompletionQueue) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut wc = [WorkCompletion::default(); 16];
    loop {
        let n = cq.poll(&mut wc);
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&wc[..n]);
    }
}

#[test]
fn every_flag_combination_reaches_the_control_segment_on_every_path() {
    for sq_sig_all in [false, true] {
        for path in PATHS {
            let mut r = rig(sq_sig_all, 32);
            for bits in 0u32..16 {
                let (fence, signaled, solicited, inline) =
                    (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, bits & 8 != 0);
                let what = format!(
                    "{path:?} sq_sig_all={sq_sig_all} fence={fence} signaled={signaled} \
                     solicited={solicited} inline={inline}"
                );
                let recv = [r.mr.sge(4096 + 64 * bits as usize, 64).unwrap()];
                r.b.post_recv(&[RecvWr::new(u64::from(bits), &recv)])
                    .unwrap();
                let mut flags = SendFlags::empty();
                flags.set(SendFlags::FENCE, fence);
                flags.set(SendFlags::SIGNALED, signaled);
                flags.set(SendFlags::SOLICITED, solicited);
                let sge = [r.mr.sge(0, 8).unwrap()];
                let wr = SendWr::send(u64::from(bits), &sge).flags(flags);
                let wr = if inline { wr.inline(b"8 bytes!") } else { wr };
                post(&mut r.a, path, &wr);
                r.model.process();
                let wqes = r.model.executed_wqes();
                let mine: Vec<_> = wqes.iter().filter(|w| w.qpn == r.a.qp_num()).collect();
                assert_eq!(mine.len(), 1, "{what}: {wqes:?}");
                let w = mine[0];
                assert_eq!(w.signaled(), signaled || sq_sig_all, "{what}: {w:?}");
                assert_eq!(w.solicited(), solicited, "{what}: {w:?}");
                assert_eq!(w.fence_mode(), if fence { 4 } else { 0 }, "{what}: {w:?}");
                assert_eq!(w.inline, inline, "{what}: {w:?}");
                let sent = drain(&mut r.cq_a);
                assert_eq!(
                    sent.len(),
                    usize::from(signaled || sq_sig_all),
                    "{what}: {sent:?}"
                );
                assert!(sent.iter().all(|c| c.status == WcStatus::SUCCESS), "{what}");
                let got = drain(&mut r.cq_b);
                assert_eq!(got.len(), 1, "{what}: {got:?}");
                assert_eq!((got[0].status, got[0].byte_len), (WcStatus::SUCCESS, 8));
            }
            assert!(
                r.model.violations().is_empty(),
                "{:?}",
                r.model.violations()
            );
        }
    }
}

/// A CQ armed for solicited events only: an unsolicited SEND completes
/// without an event, a solicited one raises it (both posting paths).
#[test]
fn only_a_solicited_send_wakes_a_cq_armed_for_solicited_events() {
    for path in PATHS {
        let mut r = rig(false, 8);
        for i in 0..2 {
            let recv = [r.mr.sge(4096 + 64 * i, 64).unwrap()];
            r.b.post_recv(&[RecvWr::new(i as u64, &recv)]).unwrap();
        }
        let sge = [r.mr.sge(0, 8).unwrap()];
        r.cq_b.req_notify(true).unwrap();
        post(&mut r.a, path, &SendWr::send(1, &sge));
        r.model.process();
        assert_eq!(
            drain(&mut r.cq_b).len(),
            1,
            "{path:?}: the receive completed"
        );
        let none = r
            .channel
            .get_event_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        assert!(none.is_none(), "{path:?}: an unsolicited send woke the CQ");
        post(
            &mut r.a,
            path,
            &SendWr::send(2, &sge).flags(SendFlags::SIGNALED | SendFlags::SOLICITED),
        );
        r.model.process();
        let ev = r
            .channel
            .get_event_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert!(
            ev.as_ref().is_some_and(|e| e.is_for(&r.cq_b)),
            "{path:?}: the solicited send raised no event"
        );
        drop(ev);
        assert_eq!(drain(&mut r.cq_b).len(), 1);
        assert!(
            r.model.violations().is_empty(),
            "{:?}",
            r.model.violations()
        );
    }
}

/// The CQ is filled to its real depth (the ring's size: `cqe() + 1`), emptied, and filled again, many times: the device
/// sees the consumer index the library writes, so one written a CQE behind
/// would make the third fill overrun the ring (a CQ error, and a missing
/// completion).
#[test]
fn a_cq_filled_to_its_real_depth_again_and_again_never_overruns() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(5, CqOptions::default()).unwrap();
    assert!(cq.cqe() >= 5, "granted {}", cq.cqe());
    // The ring's real size: mlx5_ib rounds `cqe + 1` up to a power of two
    // and reports one less (`mlx5_ib_create_cq`), so the device holds one
    // CQE more than `cqe()` says before it overruns.
    let cqn = model.cqn_of_handle(cq.handle()).unwrap();
    let depth = model.cq(cqn).unwrap().ncqe;
    assert_eq!(depth, cq.cqe() + 1);
    let peer_cq = ctx.create_cq(depth, CqOptions::default()).unwrap();
    let qp = |cq: &CompletionQueue, sq_sig_all| {
        pd.create_qp(
            &QpInitAttr::rc(cq, cq)
                .cap(cap(depth, 1, 0))
                .sq_sig_all(sq_sig_all),
        )
        .unwrap()
    };
    let (mut a, b) = (qp(&cq, true), qp(&peer_cq, false));
    let g = gid(&ctx);
    connect(&a, b.qp_num(), g, 7);
    connect(&b, a.qp_num(), g, 7);
    let mr = pd
        .alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
        .unwrap();
    let (raddr, rkey) = (mr.addr(), mr.rkey());
    let sge = [mr.sge(0, 8).unwrap()];
    let mut id = 0u64;
    for fill in 0..4 {
        for _ in 0..depth {
            id += 1;
            let wr = SendWr::new(
                id,
                uverbs::SendOp::RdmaWrite {
                    remote_addr: raddr + 64,
                    rkey,
                },
                &sge,
            );
            a.post_send(&[wr]).unwrap();
        }
        model.process();
        let got = drain(&mut cq);
        assert_eq!(
            got.len(),
            depth as usize,
            "fill {fill}: {} of {depth} completions",
            got.len()
        );
        assert!(got.iter().all(|c| c.status == WcStatus::SUCCESS), "{got:?}");
        assert!(
            model.violations().is_empty(),
            "fill {fill}: {:?}",
            model.violations()
        );
        assert!(
            ctx.try_get_async_event().unwrap().is_none(),
            "fill {fill}: an async event (CQ_ERR: the ring overran)"
        );
    }
}
