//! Data movement and successful completions, with hand-built WQEs.

use std::time::{Duration, Instant};

use super::{aseg, assert_clean, av, connect, dseg, inl, op, pair, raddr, Rig, ALL, CE, QKEY, SE};
use crate::{testing::mlx5::Options, QpType, SrqAttr};

/// CQE opcodes (`MLX5_CQE_*`).
const REQ: u8 = 0;
const RESP_WR_IMM: u8 = 1;
const RESP_SEND: u8 = 2;
const RESP_SEND_IMM: u8 = 3;

#[test]
fn a_send_lands_in_the_receive_and_both_sides_complete() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let (mr, base) = (&p.mr, p.mr.addr());
    mr.write(0, b"hello, device").unwrap();
    p.b.recv(&[(base + 1000, 8, mr.lkey()), (base + 2000, 64, mr.lkey())]);
    let idx = p.a.post(op::SEND, CE, [0; 4], &dseg(13, mr.lkey(), base));
    p.a.ring(&p.rig, idx);
    assert_eq!(p.rig.model.process(), 1);
    let mut got = [0u8; 13];
    mr.read(1000, &mut got[..8]).unwrap();
    mr.read(2000, &mut got[8..]).unwrap();
    assert_eq!(&got, b"hello, device");
    let r = p.cb.poll().expect("receive CQE");
    assert_eq!(
        (r.opcode, r.byte_cnt, r.wqe_counter, r.qpn),
        (RESP_SEND, 13, 0, p.b.qpn)
    );
    let uidx = p.rig.model.qp(p.b.qpn).unwrap().uidx.unwrap();
    assert_eq!(r.srqn_uidx, uidx, "CQE v1 carries the QP's user index");
    assert!(!r.solicited);
    let s = p.ca.poll().expect("send CQE");
    assert_eq!(
        (s.opcode, s.wqe_counter, s.wqe_opcode, s.qpn),
        (REQ, idx, op::SEND, p.a.qpn)
    );
    assert!(p.ca.poll().is_none() && p.cb.poll().is_none());
    assert_clean(&p.rig.model);
}

#[test]
fn immediates_inline_data_and_the_solicited_bit_reach_the_receiver() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let (lkey, base) = (p.mr.lkey(), p.mr.addr());
    p.b.recv(&[(base, 64, lkey)]);
    let idx =
        p.a.post(op::SEND_IMM, CE | SE, [1, 2, 3, 4], &inl(b"inline bytes"));
    p.a.ring(&p.rig, idx);
    p.rig.model.process();
    let r = p.cb.poll().unwrap();
    assert_eq!(
        (r.opcode, r.imm, r.byte_cnt),
        (RESP_SEND_IMM, [1, 2, 3, 4], 12)
    );
    assert!(r.solicited);
    let mut got = [0u8; 12];
    p.mr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"inline bytes");
    // An unsignaled WQE completes silently; the next signaled one reports
    // its own index.
    p.b.recv(&[(base, 64, lkey)]);
    p.b.recv(&[(base, 64, lkey)]);
    p.a.post(op::SEND, 0, [0; 4], &inl(b"x"));
    let last = p.a.post(op::SEND, CE, [0; 4], &inl(b"y"));
    p.a.ring(&p.rig, last);
    assert_eq!(p.rig.model.process(), 2);
    let s = p.ca.drain();
    assert_eq!(s.len(), 2, "{s:?}");
    assert_eq!(s[1].wqe_counter, last);
    assert_eq!(p.cb.drain().len(), 2);
    assert_clean(&p.rig.model);
}

#[test]
fn rdma_write_read_and_write_with_immediate() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let (lkey, rkey, base) = (p.mr.lkey(), p.mr.rkey(), p.mr.addr());
    p.mr.write(0, b"0123456789abcdef").unwrap();
    let mut segs = raddr(base + 4096, rkey);
    segs.extend(dseg(16, lkey, base));
    let w = p.a.post(op::RDMA_WRITE, CE, [0; 4], &segs);
    let mut segs = raddr(base + 4096, rkey);
    segs.extend(dseg(10, lkey, base + 8192));
    let r = p.a.post(op::RDMA_READ, CE, [0; 4], &segs);
    p.a.ring(&p.rig, r);
    assert_eq!(p.rig.model.process(), 2);
    let mut got = [0u8; 16];
    p.mr.read(4096, &mut got).unwrap();
    assert_eq!(&got, b"0123456789abcdef");
    p.mr.read(8192, &mut got[..10]).unwrap();
    assert_eq!(&got[..10], b"0123456789");
    let c = p.ca.drain();
    assert_eq!((c[0].wqe_counter, c[0].wqe_opcode), (w, op::RDMA_WRITE));
    assert_eq!(
        (c[1].wqe_counter, c[1].wqe_opcode, c[1].byte_cnt),
        (r, op::RDMA_READ, 10)
    );
    assert!(p.cb.poll().is_none(), "a plain write consumes no receive");
    // Write with immediate: the data, then a receive completion without
    // scatter.
    p.b.recv(&[(base + 12288, 4, lkey)]);
    let mut segs = raddr(base + 16384, rkey);
    segs.extend(inl(b"immediately"));
    let i = p.a.post(op::RDMA_WRITE_IMM, CE, [9, 9, 9, 9], &segs);
    p.a.ring(&p.rig, i);
    p.rig.model.process();
    let rc = p.cb.poll().unwrap();
    assert_eq!(
        (rc.opcode, rc.imm, rc.byte_cnt),
        (RESP_WR_IMM, [9, 9, 9, 9], 11)
    );
    p.mr.read(16384, &mut got[..11]).unwrap();
    assert_eq!(&got[..11], b"immediately");
    assert_clean(&p.rig.model);
}

#[test]
fn atomics_work_on_host_endian_words_and_return_the_original() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let (lkey, rkey, base) = (p.mr.lkey(), p.mr.rkey(), p.mr.addr());
    p.mr.write(64, &41u64.to_ne_bytes()).unwrap();
    let mut segs = raddr(base + 64, rkey);
    segs.extend(aseg(1, 0));
    segs.extend(dseg(8, lkey, base + 128));
    p.a.post(op::ATOMIC_FA, CE, [0; 4], &segs);
    let mut segs = raddr(base + 64, rkey);
    segs.extend(aseg(7, 42));
    segs.extend(dseg(8, lkey, base + 136));
    let last = p.a.post(op::ATOMIC_CS, CE, [0; 4], &segs);
    p.a.ring(&p.rig, last);
    assert_eq!(p.rig.model.process(), 2);
    assert_eq!(p.mr.read_u64(64).unwrap(), 7);
    assert_eq!(p.mr.read_u64(128).unwrap(), 41);
    assert_eq!(p.mr.read_u64(136).unwrap(), 42);
    let c = p.ca.drain();
    assert_eq!(
        c.iter()
            .map(|c| (c.wqe_opcode, c.byte_cnt))
            .collect::<Vec<_>>(),
        [(op::ATOMIC_FA, 8), (op::ATOMIC_CS, 8)]
    );
    assert_clean(&p.rig.model);
}

#[test]
fn wqes_wrap_at_the_end_of_the_send_queue_and_cqes_flip_their_owner_bit() {
    let mut p = pair(Options::default(), QpType::Rc, 4, 7);
    let (lkey, base) = (p.mr.lkey(), p.mr.addr());
    let sq = p.a.sq_cnt;
    let ncqe = p.ca.ncqe;
    // Three rounds of the CQ and several of the SQ; WQEs of 2 WQEBBs
    // (48 bytes of inline data) straddle the end of the SQ buffer when
    // they start on its last WQEBB.
    let data: Vec<u8> = (0..48u8).collect();
    p.a.post(op::NOP, CE, [0; 4], &[]); // shift by one WQEBB
    p.a.ring(&p.rig, 0);
    p.rig.model.process();
    assert_eq!(p.ca.drain().len(), 1);
    for round in 0..(3 * ncqe) {
        p.b.recv(&[(base + 4096, 64, lkey)]);
        let idx = p.a.post(op::SEND, CE, [0; 4], &inl(&data));
        p.a.ring(&p.rig, idx);
        assert_eq!(p.rig.model.process(), 1, "round {round}");
        let s =
            p.ca.poll()
                .unwrap_or_else(|| panic!("send CQE, round {round}"));
        assert_eq!((s.opcode, s.wqe_counter), (REQ, idx));
        let r =
            p.cb.poll()
                .unwrap_or_else(|| panic!("receive CQE, round {round}"));
        assert_eq!(r.byte_cnt, 48);
        let mut got = [0u8; 48];
        p.mr.read(4096, &mut got).unwrap();
        assert_eq!(&got[..], &data[..], "round {round}");
        p.mr.fill(4096, 48, 0).unwrap();
    }
    assert!(p.a.pi > 2 * sq, "the SQ wrapped");
    assert!(p.ca.ci > 2 * ncqe, "the CQ wrapped");
    assert_clean(&p.rig.model);
}

#[test]
fn ud_sends_go_by_address_vector_with_a_grh_and_the_qkey() {
    let rig = Rig::new(Options::default());
    let cq = rig.cq(16);
    let mut rcq = rig.cq(16);
    let mut a = rig.qp(QpType::Ud, &cq, None, 8);
    let mut b = rig.qp(QpType::Ud, &rcq, None, 8);
    connect(&a.qp, 0, 7);
    connect(&b.qp, 0, 7);
    let mr = rig.mr(8192, ALL);
    let (lkey, base) = (mr.lkey(), mr.addr());
    b.recv(&[(base, 40 + 64, lkey)]);
    let gid = super::super::kernel::GIDS[1];
    let mut segs = av(QKEY, b.qpn, 1, gid);
    segs.extend(inl(b"datagram"));
    let idx = a.post(op::SEND, CE, [0; 4], &segs);
    a.ring(&rig, idx);
    rig.model.process();
    let r = rcq.poll().expect("UD receive");
    assert_eq!((r.opcode, r.byte_cnt), (RESP_SEND, 40 + 8));
    assert_eq!(r.flags_rqpn & 0xff_ffff, a.qpn, "source QP");
    assert_ne!((r.flags_rqpn >> 28) & 3, 0, "GRH present");
    assert_eq!(r.l3, 2, "IPv4");
    let mut grh = [0u8; 48];
    mr.read(0, &mut grh).unwrap();
    assert_eq!(grh[20], 0x45, "an IPv4 header in the GRH's last 20 bytes");
    assert_eq!(&grh[32..36], &[192, 0, 2, 1], "source address");
    assert_eq!(&grh[36..40], &[192, 0, 2, 1], "destination address");
    assert_eq!(&grh[40..48], b"datagram");
    // A wrong Q_Key is dropped; a Q_Key with bit 31 set means the sender's.
    b.recv(&[(base, 40 + 64, lkey)]);
    let mut segs = av(QKEY ^ 1, b.qpn, 1, gid);
    segs.extend(inl(b"lost"));
    a.post(op::SEND, 0, [0; 4], &segs);
    let mut segs = av(0x8000_0000, b.qpn, 1, gid);
    segs.extend(inl(b"own key"));
    let idx = a.post(op::SEND, 0, [0; 4], &segs);
    a.ring(&rig, idx);
    assert_eq!(rig.model.process(), 2);
    let r = rcq.poll().expect("the own-key datagram");
    assert_eq!(r.byte_cnt, 40 + 7);
    assert!(rcq.poll().is_none());
    assert_clean(&rig.model);
}

#[test]
fn an_srq_is_taken_in_next_pointer_order_and_reported_by_its_index() {
    let rig = Rig::new(Options::default());
    let mut cq = rig.cq(32);
    let srq = rig
        .pd
        .create_srq(SrqAttr {
            max_wr: 7,
            max_sge: 1,
            srq_limit: 0,
        })
        .expect("SRQ");
    let srqn = rig.model.srqn_of_handle(srq.handle()).expect("srqn");
    let info = rig.model.srq(srqn).unwrap();
    assert_eq!((info.wqe_cnt, info.stride), (8, 32));
    let mut a = rig.qp(QpType::Rc, &cq, None, 8);
    let b = rig.qp(QpType::Rc, &cq, Some(&srq), 8);
    assert_eq!(rig.model.qp(b.qpn).unwrap().rq_wqe_cnt, 0);
    connect(&a.qp, b.qpn, 7);
    connect(&b.qp, a.qpn, 7);
    let mr = rig.mr(8192, ALL);
    // WQEs 0 -> 5 -> 2 -> ...: the device follows next_wqe_index.
    let order = [0u16, 5, 2];
    for (k, &i) in order.iter().enumerate() {
        let mut w = vec![0u8; 32];
        let next = order.get(k + 1).copied().unwrap_or(7);
        w[2..4].copy_from_slice(&next.to_be_bytes());
        w[16..32].copy_from_slice(&dseg(64, mr.lkey(), mr.addr() + 256 * u64::from(i)));
        // SAFETY: inside the SRQ buffer.
        unsafe { super::memory::write(info.buf + 32 * u64::from(i), &w) };
    }
    super::set_dbrec(info.db, 0, 3);
    for m in [b"one", b"two", b"six"] {
        let idx = a.post(op::SEND, 0, [0; 4], &inl(m));
        a.ring(&rig, idx);
    }
    assert_eq!(rig.model.process(), 3);
    let c = cq.drain();
    assert_eq!(
        c.iter().map(|c| c.wqe_counter).collect::<Vec<_>>(),
        [0, 5, 2]
    );
    assert!(c.iter().all(|c| c.qpn == b.qpn));
    let mut got = [0u8; 3];
    mr.read(256 * 5, &mut got).unwrap();
    assert_eq!(&got, b"two");
    assert_clean(&rig.model);
}

#[test]
fn wqes_rung_before_rts_run_once_the_qp_gets_there() {
    let rig = Rig::new(Options::default());
    let mut cq = rig.cq(16);
    let mut a = rig.qp(QpType::Rc, &cq, None, 8);
    let mut b = rig.qp(QpType::Rc, &cq, None, 8);
    connect(&b.qp, a.qpn, 7);
    let mut attr = crate::QpAttr::with_state(crate::QpState::Init);
    attr.port_num = 1;
    attr.qp_access_flags = ALL;
    a.qp.modify_to(&attr).unwrap();
    let mr = rig.mr(4096, ALL);
    b.recv(&[(mr.addr(), 64, mr.lkey())]);
    let idx = a.post(op::SEND, CE, [0; 4], &inl(b"early"));
    a.ring(&rig, idx);
    assert_eq!(rig.model.process(), 0, "held in INIT");
    assert!(cq.poll().is_none());
    connect(&a.qp, b.qpn, 7);
    assert_eq!(rig.model.process(), 1, "run in RTS");
    assert_eq!(cq.drain().len(), 2);
    let mut got = [0u8; 5];
    mr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"early");
    assert_clean(&rig.model);
}

#[test]
fn a_background_hca_completes_without_process_calls() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let (lkey, base) = (p.mr.lkey(), p.mr.addr());
    let hca = p.rig.model.spawn_hca();
    for k in 0..20u32 {
        p.b.recv(&[(base, 64, lkey)]);
        let idx = p.a.post(op::SEND, CE, [0; 4], &inl(&k.to_ne_bytes()));
        p.a.ring_bf(&p.rig, idx, false);
        let deadline = Instant::now() + Duration::from_secs(10);
        let c = loop {
            if let Some(c) = p.ca.poll() {
                break c;
            }
            assert!(Instant::now() < deadline, "no completion for {k}");
            std::thread::yield_now();
        };
        assert_eq!(c.wqe_counter, idx);
        while p.cb.poll().is_none() {
            assert!(
                Instant::now() < deadline,
                "send {k} completed, its receive did not"
            );
            std::thread::yield_now();
        }
    }
    drop(hca);
    assert_eq!(p.rig.model.process(), 0);
    assert_clean(&p.rig.model);
}
