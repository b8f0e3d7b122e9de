//! Fence modes and late reads and atomics (`order.rs`), with hand-built
//! WQEs: the fence mode is bits 7..5 of `fm_ce_se` (PRM "Send WQE Control
//! Segment"; Linux 6.1 `include/linux/mlx5/qp.h` `MLX5_FENCE_MODE_*`).

use super::{aseg, assert_clean, dseg, inl, op, pair, raddr, Pair, CE};
use crate::{testing::mlx5::Options, QpType};

const REQ: u8 = 0;
const REQ_ERR: u8 = 13;
const LOCAL_PROT: u8 = 0x04;
const LOCAL_QP_OP: u8 = 0x02;

/// Where the test keeps things in its one MR: the remote buffer a read
/// fetches, the local buffer it lands in, where the peer receives.
const REMOTE: usize = 0;
const LOCAL: usize = 4096;
const RECV: usize = 8192;
/// 64 bytes: more than a CQE could carry (none of these QPs scatters to
/// the CQE anyway).
const LEN: u32 = 64;

fn fm(mode: u8) -> u8 {
    mode << 5
}

/// A pair with `fresh` at REMOTE, `stale` at LOCAL, and a receive posted
/// at the peer.
fn rig(reorder: bool) -> Pair {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    p.rig.model.reorder_reads(reorder);
    p.mr.fill(REMOTE, LEN as usize, b'F').unwrap();
    p.mr.fill(LOCAL, LEN as usize, b's').unwrap();
    let (lkey, base) = (p.mr.lkey(), p.mr.addr());
    p.b.recv(&[(base + RECV as u64, LEN, lkey)]);
    p
}

/// Posts an RDMA READ of REMOTE into LOCAL, then a SEND of LOCAL with
/// fence mode `mode`, rung once; returns the byte the peer received and
/// the requester's CQEs (opcode, WQE opcode).
fn read_then_send(p: &mut Pair, mode: u8) -> (u8, Vec<(u8, u8)>) {
    let (lkey, rkey, base) = (p.mr.lkey(), p.mr.rkey(), p.mr.addr());
    let mut segs = raddr(base + REMOTE as u64, rkey);
    segs.extend(dseg(LEN, lkey, base + LOCAL as u64));
    p.a.post(op::RDMA_READ, CE, [0; 4], &segs);
    let send = p.a.post(
        op::SEND,
        CE | fm(mode),
        [0; 4],
        &dseg(LEN, lkey, base + LOCAL as u64),
    );
    p.a.ring(&p.rig, send);
    assert_eq!(p.rig.model.process(), 2);
    let got = p.cb.poll().expect("the peer's receive");
    assert_eq!(got.byte_cnt, LEN);
    let mut b = [0u8; 1];
    p.mr.read(RECV, &mut b).unwrap();
    let cqes =
        p.ca.drain()
            .iter()
            .map(|c| (c.opcode, c.wqe_opcode))
            .collect();
    (b[0], cqes)
}

#[test]
fn in_order_by_default_every_send_after_a_read_carries_the_read_data() {
    for mode in 0..=4 {
        let mut p = rig(false);
        let (byte, cqes) = read_then_send(&mut p, mode);
        assert_eq!(byte, b'F', "fence mode {mode}");
        assert_eq!(cqes, [(REQ, op::RDMA_READ), (REQ, op::SEND)]);
        assert_clean(&p.rig.model);
    }
}

/// With reordering, a SEND after a READ takes its data before the read
/// lands unless its fence mode waits for reads (2 fence, 3 strong
/// ordering, 4 fence and small fence); the CQEs keep the WQE order.
#[test]
fn reordered_only_fence_modes_2_3_and_4_wait_for_the_read() {
    for mode in 0..=4 {
        let mut p = rig(true);
        let (byte, cqes) = read_then_send(&mut p, mode);
        let waits = (2..=4).contains(&mode);
        assert_eq!(byte, if waits { b'F' } else { b's' }, "fence mode {mode}");
        assert_eq!(
            cqes,
            [(REQ, op::RDMA_READ), (REQ, op::SEND)],
            "fence mode {mode}: the send queue completes in order"
        );
        let mut landed = [0u8; 1];
        p.mr.read(LOCAL, &mut landed).unwrap();
        assert_eq!(landed[0], b'F', "the read landed by the end of the run");
        assert_clean(&p.rig.model);
    }
}

/// A read overtaken at the responder: an unfenced RDMA WRITE to the
/// buffer a read fetches gets there first; fenced, the read fetches the
/// old bytes.
#[test]
fn reordered_a_write_after_a_read_of_the_same_buffer_reaches_it_first_unless_fenced() {
    for mode in [0, 4] {
        let mut p = rig(true);
        let (lkey, rkey, base) = (p.mr.lkey(), p.mr.rkey(), p.mr.addr());
        let mut segs = raddr(base + REMOTE as u64, rkey);
        segs.extend(dseg(8, lkey, base + LOCAL as u64));
        p.a.post(op::RDMA_READ, 0, [0; 4], &segs);
        let mut segs = raddr(base + REMOTE as u64, rkey);
        segs.extend(inl(b"NEWBYTES"));
        let w = p.a.post(op::RDMA_WRITE, CE | fm(mode), [0; 4], &segs);
        p.a.ring(&p.rig, w);
        assert_eq!(p.rig.model.process(), 2);
        let mut got = [0u8; 8];
        p.mr.read(LOCAL, &mut got).unwrap();
        let want: &[u8; 8] = if mode == 0 { b"NEWBYTES" } else { b"FFFFFFFF" };
        assert_eq!(&got, want, "fence mode {mode}");
        assert_eq!(p.ca.drain().len(), 1, "the unsignaled read has no CQE");
        assert_clean(&p.rig.model);
    }
}

/// An atomic's original value lands late too: a SEND of the word it
/// fetches carries it only when fenced.
#[test]
fn reordered_a_send_of_an_atomics_result_waits_only_when_fenced() {
    for (mode, fetched) in [(0, false), (1, false), (2, true), (4, true)] {
        let mut p = rig(true);
        let (lkey, rkey, base) = (p.mr.lkey(), p.mr.rkey(), p.mr.addr());
        p.mr.write(REMOTE, &41u64.to_ne_bytes()).unwrap();
        p.mr.write(LOCAL, &7u64.to_ne_bytes()).unwrap();
        let mut segs = raddr(base + REMOTE as u64, rkey);
        segs.extend(aseg(1, 0));
        segs.extend(dseg(8, lkey, base + LOCAL as u64));
        p.a.post(op::ATOMIC_FA, CE, [0; 4], &segs);
        let s = p.a.post(
            op::SEND,
            CE | fm(mode),
            [0; 4],
            &dseg(8, lkey, base + LOCAL as u64),
        );
        p.a.ring(&p.rig, s);
        assert_eq!(p.rig.model.process(), 2);
        assert!(p.cb.poll().is_some(), "the peer's receive");
        let sent = p.mr.read_u64(RECV).unwrap();
        assert_eq!(sent, if fetched { 41 } else { 7 }, "fence mode {mode}");
        assert_eq!(p.mr.read_u64(REMOTE).unwrap(), 42);
        assert_eq!(p.mr.read_u64(LOCAL).unwrap(), 41);
        let c = p.ca.drain();
        assert_eq!(
            c.iter().map(|c| c.wqe_opcode).collect::<Vec<_>>(),
            [op::ATOMIC_FA, op::SEND]
        );
        assert_clean(&p.rig.model);
    }
}

/// A WQE that fails after an outstanding read: the read lands and
/// completes first, then the error and the flushes.
#[test]
fn reordered_an_error_after_a_read_lands_the_read_first() {
    let mut p = rig(true);
    let (lkey, rkey, base) = (p.mr.lkey(), p.mr.rkey(), p.mr.addr());
    let mut segs = raddr(base + REMOTE as u64, rkey);
    segs.extend(dseg(LEN, lkey, base + LOCAL as u64));
    let r = p.a.post(op::RDMA_READ, CE, [0; 4], &segs);
    let bad =
        p.a.post(op::SEND, CE, [0; 4], &dseg(8, lkey ^ 0x5500, base));
    p.a.ring(&p.rig, bad);
    p.rig.model.process();
    let c = p.ca.drain();
    assert_eq!(
        c.iter()
            .map(|c| (c.opcode, c.syndrome, c.wqe_counter))
            .collect::<Vec<_>>(),
        [(REQ, 0, r), (REQ_ERR, LOCAL_PROT, bad)]
    );
    let mut got = [0u8; 1];
    p.mr.read(LOCAL, &mut got).unwrap();
    assert_eq!(got[0], b'F');
    assert_clean(&p.rig.model);
}

/// Fence modes 5 to 7 are reserved: a violation, completed as a local QP
/// operation error.
#[test]
fn a_reserved_fence_mode_is_a_violation() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let i = p.a.post(op::NOP, CE | fm(5), [0; 4], &[]);
    p.a.ring(&p.rig, i);
    p.rig.model.process();
    let c = p.ca.poll().expect("an error CQE");
    assert_eq!((c.opcode, c.syndrome), (REQ_ERR, LOCAL_QP_OP));
    let v = p.rig.model.violations();
    assert!(
        v.len() == 1 && v[0].contains("fence mode 5"),
        "violations: {v:?}"
    );
}
