//! FENCE as ordering, through the mlx5 provider on the device model: a
//! fenced WQE waits for the earlier RDMA reads and atomics of its QP (PRM
//! fence modes 2 to 4; libmlx5 sets `MLX5_WQE_CTRL_FENCE`, mode 4, for
//! `IBV_SEND_FENCE`). The model is told to do what InfiniBand allows
//! without a fence ([`Mlx5Model::reorder_reads`]): a read's or atomic's
//! data lands after the later WQEs of the same doorbell, unless one of
//! them is fenced.
//!
//! - a READ of the peer's buffer into a local one, then a SEND of that
//!   local buffer: fenced, the peer receives the read's data; unfenced,
//!   the stale bytes (so the model does reorder, and a provider that
//!   dropped FENCE fails the fenced case);
//! - the same with a fetch-and-add whose original value is sent on;
//! - every posting path (`post_send`, send batches and typed sessions),
//!   the two WQEs announced by one doorbell.

use uverbs::{testing::mlx5::Mlx5Model, RecvWr, SendFlags, SendOp, SendWr};

use uverbs_test_support::{
    mlx5_pair::{assert_clean, pair, run_and_poll, Pair},
    typed_wr::{post_by, Path, PATHS},
};

/// In `mr_b` (the peer's): what the read fetches, and where the peer
/// receives. In `mr_a`: where the read lands and the send takes its data.
const REMOTE: usize = 0;
const RECV: usize = 4096;
const LOCAL: usize = 0;
const LEN: usize = 64;

fn post(p: &mut Pair, path: Path, wrs: &[SendWr<'_>]) {
    post_by(&mut p.a, path, wrs);
}

/// A reordering RC pair with a receive posted at `b`.
fn rig() -> Pair {
    let mut p = pair(uverbs::QpType::Rc, 8);
    p.model.reorder_reads(true);
    p.model.log_wqes(true);
    let recv = [p.mr_b.sge(RECV, LEN as u32).unwrap()];
    p.b.post_recv(&[RecvWr::new(100, &recv)]).unwrap();
    p
}

/// The fence mode of the `n`th WQE `qpn` executed since the last call.
fn fence_mode_of(model: &Mlx5Model, qpn: u32, n: usize) -> u8 {
    let wqes = model.executed_wqes();
    let mine: Vec<_> = wqes.iter().filter(|w| w.qpn == qpn).collect();
    assert!(mine.len() > n, "{wqes:?}");
    mine[n].fence_mode()
}

/// A READ of `b`'s REMOTE into `a`'s LOCAL, then a SEND of LOCAL to `b`,
/// fenced or not; returns what `b` received and the SEND's fence mode as
/// the model decoded it.
fn read_then_send(path: Path, fence: bool) -> (Vec<u8>, u8) {
    let mut p = rig();
    p.mr_b.fill(REMOTE, LEN, b'R').unwrap();
    p.mr_a.fill(LOCAL, LEN, b's').unwrap();
    let local = [p.mr_a.sge(LOCAL, LEN as u32).unwrap()];
    let read = SendOp::RdmaRead {
        remote_addr: p.mr_b.addr() + REMOTE as u64,
        rkey: p.mr_b.rkey(),
    };
    let flags = if fence {
        SendFlags::SIGNALED | SendFlags::FENCE
    } else {
        SendFlags::SIGNALED
    };
    let wrs = [
        SendWr::new(1, read, &local).flags(SendFlags::SIGNALED),
        SendWr::send(2, &local).flags(flags),
    ];
    post(&mut p, path, &wrs);
    let sent = run_and_poll(&p.model, &mut p.cq_a, 2);
    assert_eq!(
        sent.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        [1, 2],
        "{path:?}: the send queue completes in order: {sent:?}"
    );
    let mode = fence_mode_of(&p.model, p.a.qp_num(), 1);
    let got = run_and_poll(&p.model, &mut p.cq_b, 1);
    assert_eq!(got[0].byte_len as usize, LEN, "{got:?}");
    let mut landed = vec![0u8; LEN];
    p.mr_a.read(LOCAL, &mut landed).unwrap();
    assert_eq!(landed, [b'R'; LEN], "{path:?}: the read landed in the end");
    assert_clean(&p.model);
    let mut received = vec![0u8; LEN];
    p.mr_b.read(RECV, &mut received).unwrap();
    (received, mode)
}

/// With FENCE the peer receives what the read fetched; this
/// fails if the provider drops the flag (the model then sends the stale
/// buffer, as the next test shows it does without FENCE).
#[test]
fn a_fenced_send_after_an_rdma_read_carries_the_read_data() {
    for path in PATHS {
        let (received, mode) = read_then_send(path, true);
        assert!(
            received == [b'R'; LEN],
            "{path:?}: the fenced SEND did not wait for the READ: the peer got {:?} (FENCE lost \
             on the way to the control segment? fence mode {mode})",
            String::from_utf8_lossy(&received)
        );
        assert_eq!(mode, 4, "{path:?}: MLX5_WQE_CTRL_FENCE");
    }
}

/// The counterpart: without FENCE the reordering model really does let
/// the SEND overtake the READ (else the fenced test would prove nothing).
#[test]
fn without_fence_a_send_after_an_rdma_read_may_carry_stale_data() {
    for path in PATHS {
        let (received, mode) = read_then_send(path, false);
        assert!(
            received == [b's'; LEN],
            "{path:?}: the model did not reorder an unfenced SEND after a READ: the peer got {:?}",
            String::from_utf8_lossy(&received)
        );
        assert_eq!(mode, 0, "{path:?}: no fence asked for");
    }
}

/// A fetch-and-add on `b`'s word, its original value landing in `a`'s
/// LOCAL, then a SEND of LOCAL; returns the value `b` received and the
/// SEND's fence mode.
fn fetch_add_then_send(path: Path, fence: bool) -> (u64, u8) {
    let mut p = rig();
    p.mr_b.write(REMOTE, &41u64.to_ne_bytes()).unwrap();
    p.mr_a.write(LOCAL, &7u64.to_ne_bytes()).unwrap();
    let local = [p.mr_a.sge(LOCAL, 8).unwrap()];
    let add = SendOp::FetchAdd {
        remote_addr: p.mr_b.addr() + REMOTE as u64,
        rkey: p.mr_b.rkey(),
        add: 1,
    };
    let flags = if fence {
        SendFlags::FENCE
    } else {
        SendFlags::empty()
    };
    let wrs = [
        SendWr::new(1, add, &local).unsignaled(),
        SendWr::send(2, &local).flags(flags | SendFlags::SIGNALED),
    ];
    post(&mut p, path, &wrs);
    let sent = run_and_poll(&p.model, &mut p.cq_a, 1);
    assert_eq!(sent[0].wr_id, 2, "{sent:?}");
    let mode = fence_mode_of(&p.model, p.a.qp_num(), 1);
    run_and_poll(&p.model, &mut p.cq_b, 1);
    assert_eq!(p.mr_b.read_u64(REMOTE).unwrap(), 42, "{path:?}");
    assert_eq!(p.mr_a.read_u64(LOCAL).unwrap(), 41, "{path:?}: landed");
    assert_clean(&p.model);
    (p.mr_b.read_u64(RECV).unwrap(), mode)
}

/// The same for an atomic: fenced, the SEND carries the value the
/// fetch-and-add returned; unfenced, what the buffer held before.
#[test]
fn a_fenced_send_after_an_atomic_carries_its_original_value() {
    for path in PATHS {
        let (value, mode) = fetch_add_then_send(path, true);
        assert_eq!(
            value, 41,
            "{path:?}: the fenced SEND did not wait for the atomic (FENCE lost? fence mode {mode})"
        );
        assert_eq!(mode, 4, "{path:?}: MLX5_WQE_CTRL_FENCE");
        let (value, mode) = fetch_add_then_send(path, false);
        assert_eq!(
            value, 7,
            "{path:?}: the model did not reorder an unfenced SEND after an atomic"
        );
        assert_eq!(mode, 0, "{path:?}: no fence asked for");
    }
}
