//! Scatter-to-CQE: small messages, read and atomic responses in the CQE
//! instead of memory, as rdma-core's libmlx5 expects on every QP it creates
//! (`MLX5_QP_FLAG_SCATTER_CQE` is its default, `providers/mlx5/verbs.c`).

use super::{aseg, assert_clean, dseg, op, pair, raddr, Pair, CE};
use crate::{
    abi,
    testing::mlx5::{hca::Transport, objects::scatter_rooms, Options},
    QpType,
};

/// `MLX5_INLINE_SCATTER_32` / `_64` in `op_own` (mlx5dv.h).
const SCATTER_32: u8 = 0x04;
const SCATTER_64: u8 = 0x08;

/// Gives `qpn` the rooms its QP context would have had (the library never
/// asks for scatter-to-CQE; libmlx5 does, see `rooms_follow_mlx5_ib`).
fn set_rooms(p: &Pair, qpn: u32, res: u8, req: u8) {
    let mut hca = p.rig.model.hca.lock().unwrap();
    let qp = hca.qps.get_mut(&qpn).unwrap();
    qp.scatter_res = res;
    qp.scatter_req = req;
}

#[test]
fn rooms_follow_mlx5_ib() {
    let sc = abi::MLX5_QP_FLAG_SCATTER_CQE;
    let allow = abi::MLX5_QP_FLAG_ALLOW_SCATTER_CQE;
    // Responder: RC and UC, 32 bytes in 64-byte CQEs, 64 in 128-byte ones.
    assert_eq!(scatter_rooms(Transport::Rc, sc, false, 64, 64), (32, 0));
    assert_eq!(scatter_rooms(Transport::Uc, sc, true, 128, 64), (64, 0));
    assert_eq!(scatter_rooms(Transport::Ud, sc, true, 64, 64), (0, 0));
    // Requester: RC only, and only with every WQE signaled or ALLOW.
    assert_eq!(scatter_rooms(Transport::Rc, sc, true, 64, 128), (32, 64));
    assert_eq!(
        scatter_rooms(Transport::Rc, sc | allow, false, 64, 64),
        (32, 32)
    );
    // ALLOW alone turns nothing on; no flag, nothing.
    assert_eq!(scatter_rooms(Transport::Rc, allow, true, 64, 64), (0, 0));
    assert_eq!(scatter_rooms(Transport::Rc, 0, true, 128, 128), (0, 0));
}

#[test]
fn a_small_message_lands_in_the_responders_cqe_and_not_in_its_buffer() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    set_rooms(&p, p.b.qpn, 32, 0);
    let (lkey, base) = (p.mr.lkey(), p.mr.addr());
    p.mr.write(0, b"thirty-two bytes fit in the CQE!").unwrap();
    p.mr.write(4096, &[0xee; 64]).unwrap();
    // 32 bytes: in the CQE, the receive buffer untouched.
    p.b.recv(&[(base + 4096, 64, lkey)]);
    let s = p.a.post(op::SEND, CE, [0; 4], &dseg(32, lkey, base));
    p.a.ring(&p.rig, s);
    p.rig.model.process();
    let r = p.cb.poll().expect("receive CQE");
    assert_eq!((r.opcode, r.byte_cnt), (2, 32), "RESP_SEND of 32 bytes");
    assert_eq!(r.raw[63] & (SCATTER_32 | SCATTER_64), SCATTER_32);
    assert_eq!(&r.raw[..32], b"thirty-two bytes fit in the CQE!");
    let mut buf = [0u8; 64];
    p.mr.read(4096, &mut buf).unwrap();
    assert_eq!(buf, [0xee; 64], "the device wrote the receive buffer");
    // 33 bytes: too long for the CQE, scattered to memory as usual.
    p.b.recv(&[(base + 4096, 64, lkey)]);
    let s = p.a.post(op::SEND, CE, [0; 4], &dseg(33, lkey, base));
    p.a.ring(&p.rig, s);
    p.rig.model.process();
    let r = p.cb.poll().expect("receive CQE");
    assert_eq!((r.byte_cnt, r.raw[63] & (SCATTER_32 | SCATTER_64)), (33, 0));
    p.mr.read(4096, &mut buf[..33]).unwrap();
    assert_eq!(&buf[..32], b"thirty-two bytes fit in the CQE!");
    assert_eq!(p.ca.drain().len(), 2);
    assert_clean(&p.rig.model);
}

#[test]
fn a_signaled_read_and_atomic_answer_in_the_requesters_cqe() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    set_rooms(&p, p.a.qpn, 0, 32);
    let (lkey, rkey, base) = (p.mr.lkey(), p.mr.rkey(), p.mr.addr());
    p.mr.write(8192, b"remote bytes, 20 b").unwrap();
    p.mr.write(8192 + 64, &41u64.to_ne_bytes()).unwrap();
    p.mr.write(0, &[0xee; 64]).unwrap();
    // A signaled read of 18 bytes: in the CQE, the local buffer untouched.
    let mut segs = raddr(base + 8192, rkey);
    segs.extend(dseg(18, lkey, base));
    let r = p.a.post(op::RDMA_READ, CE, [0; 4], &segs);
    // A fetch-and-add: the original value in the CQE.
    let mut segs = raddr(base + 8192 + 64, rkey);
    segs.extend(aseg(1, 0));
    segs.extend(dseg(8, lkey, base + 32));
    let f = p.a.post(op::ATOMIC_FA, CE, [0; 4], &segs);
    // An unsignaled read has no CQE to carry it: memory.
    let mut segs = raddr(base + 8192, rkey);
    segs.extend(dseg(18, lkey, base + 40));
    let u = p.a.post(op::RDMA_READ, 0, [0; 4], &segs);
    p.a.ring(&p.rig, u);
    assert_eq!(p.rig.model.process(), 3);
    let c = p.ca.drain();
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].wqe_counter, c[0].byte_cnt), (r, 18));
    assert_eq!(c[0].raw[63] & (SCATTER_32 | SCATTER_64), SCATTER_32);
    assert_eq!(&c[0].raw[..18], b"remote bytes, 20 b");
    assert_eq!((c[1].wqe_counter, c[1].byte_cnt), (f, 8));
    assert_eq!(c[1].raw[63] & SCATTER_32, SCATTER_32);
    assert_eq!(c[1].raw[..8], 41u64.to_ne_bytes());
    let mut local = [0u8; 64];
    p.mr.read(0, &mut local).unwrap();
    assert_eq!(
        local[..40],
        [0xee; 40],
        "the device wrote a CQE-scattered answer"
    );
    assert_eq!(&local[40..58], b"remote bytes, 20 b");
    let mut v = [0u8; 8];
    p.mr.read(8192 + 64, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 42, "the atomic ran at the responder");
    assert_clean(&p.rig.model);
}
