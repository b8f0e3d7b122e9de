//! Send batches (`QueuePair::start_send`, rdma-core's `ibv_wr_start` ..
//! `ibv_wr_complete` / `ibv_wr_abort`) against the real kernel: a batch of
//! mixed opcodes executes at complete, an aborted batch never does (the
//! kernel never sees its WQEs) and its slots carry the next requests, and
//! batches wrap the send queue.

use std::time::Duration;

use uverbs::{
    PostErrorKind, QpType, RecvWr, SendOp, SendWr, UdDest, WcFlags, WcOpcode, WcStatus,
    WorkCompletion,
};

use crate::support::*;

#[test]
fn a_send_batch_of_mixed_opcodes_executes_at_complete() {
    let mut p = pair(QpType::Rc, 16, 7);
    let local = mr(&p.pd, 4096);
    let remote = mr(&p.pd, 4096);
    local.write(0, b"written by a batch").unwrap();
    remote.write(1024, b"read by a batch!").unwrap();
    remote.write(2048, &40u64.to_le_bytes()).unwrap();
    p.b.post_recv(&[RecvWr::new(9, &[remote.sge(3072, 64).unwrap()])])
        .unwrap();
    let (ra, rkey) = (remote.addr(), remote.rkey());
    let src = [local.sge(0, 18).unwrap()];
    let dst = [local.sge(512, 16).unwrap()];
    let old = [local.sge(768, 8).unwrap()];
    let mut batch = p.a.start_send().unwrap();
    let wrs = [
        SendWr::new(
            1,
            SendOp::RdmaWrite {
                remote_addr: ra,
                rkey,
            },
            &src,
        ),
        SendWr::new(
            2,
            SendOp::RdmaRead {
                remote_addr: ra + 1024,
                rkey,
            },
            &dst,
        ),
        SendWr::new(
            3,
            SendOp::FetchAdd {
                remote_addr: ra + 2048,
                rkey,
                add: 2,
            },
            &old,
        ),
        SendWr::new(4, SendOp::SendWithImm { imm: 77 }, &[]).inline(b"tail"),
    ];
    for wr in &wrs {
        batch.push(wr).unwrap();
    }
    batch.complete().unwrap();
    let s = wait(&mut p.cq_a, 4);
    let got: Vec<_> = s.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::SUCCESS, WcOpcode::RDMA_WRITE),
            (2, WcStatus::SUCCESS, WcOpcode::RDMA_READ),
            (3, WcStatus::SUCCESS, WcOpcode::FETCH_ADD),
            (4, WcStatus::SUCCESS, WcOpcode::SEND),
        ]
    );
    let mut buf = [0u8; 18];
    remote.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"written by a batch");
    let mut buf = [0u8; 16];
    local.read(512, &mut buf).unwrap();
    assert_eq!(&buf, b"read by a batch!");
    assert_eq!(local.read_u64(768).unwrap(), 40);
    assert_eq!(remote.read_u64(2048).unwrap(), 42);
    let r = wait(&mut p.cq_b, 1);
    assert_eq!((r[0].wr_id, r[0].byte_len, r[0].imm_data), (9, 4, 77));
    assert!(r[0].wc_flags.contains(WcFlags::WITH_IMM));
}

#[test]
fn an_aborted_send_batch_never_executes_and_batches_wrap_the_queue() {
    let mut p = pair(QpType::Rc, 8, 7);
    let local = mr(&p.pd, 4096);
    let remote = mr(&p.pd, 4096);
    local.write(0, &[0xaa; 64]).unwrap();
    let (ra, rkey) = (remote.addr(), remote.rkey());
    let src = [local.sge(0, 8).unwrap()];
    let mut next = 0u64;
    for lap in 0..12u64 {
        // A batch the size of the queue, taken back (dropped on odd laps).
        let mut batch = p.a.start_send().unwrap();
        for k in 0..8 {
            let wr = SendWr::new(
                1000 + k,
                SendOp::RdmaWrite {
                    remote_addr: ra + 2048 + 8 * k,
                    rkey,
                },
                &src,
            );
            batch.push(&wr).unwrap();
        }
        if lap % 2 == 0 {
            batch.abort();
        } else {
            drop(batch);
        }
        // The same slots carry a batch that does run: writes of their own
        // numbers, the last one signaled.
        let vals: Vec<[u8; 8]> = (0..8).map(|k| (next + k).to_le_bytes()).collect();
        let mut batch = p.a.start_send().unwrap();
        for (k, v) in vals.iter().enumerate() {
            let id = next + k as u64;
            let wr = SendWr::new(
                id,
                SendOp::RdmaWrite {
                    remote_addr: ra + 8 * (id % 256),
                    rkey,
                },
                &[],
            )
            .inline(v);
            batch
                .push(&if k == 7 { wr } else { wr.unsignaled() })
                .unwrap();
        }
        batch.complete().unwrap();
        let s = wait(&mut p.cq_a, 1);
        assert_eq!((s[0].wr_id, s[0].status), (next + 7, WcStatus::SUCCESS));
        for id in next..next + 8 {
            assert_eq!(remote.read_u64(8 * (id as usize % 256)).unwrap(), id);
        }
        next += 8;
    }
    // Nothing of the aborted batches ever ran.
    std::thread::sleep(Duration::from_millis(100));
    let mut wc = [WorkCompletion::default(); 4];
    assert_eq!(p.cq_a.poll(&mut wc), 0, "{wc:?}");
    let mut untouched = [0u8; 64];
    remote.read(2048, &mut untouched).unwrap();
    assert_eq!(untouched, [0; 64], "an aborted write reached remote memory");
}

#[test]
fn a_ud_send_batch_carries_each_requests_destination() {
    let mut p = pair(QpType::Ud, 16, 7);
    let dst = mr(&p.pd, 4096);
    let ah = ah_to_own_gid(&p);
    for i in 0..3u64 {
        let off = 256 * i as usize;
        p.b.post_recv(&[RecvWr::new(10 + i, &[dst.sge(off, 40 + 64).unwrap()])])
            .unwrap();
    }
    let dest = UdDest::new(&ah, p.b.qp_num(), 0x1111_1111);
    let mut batch = p.a.start_send().unwrap();
    for (i, msg) in [b"first datagram", b"other datagram"].iter().enumerate() {
        batch
            .push(&SendWr::send(i as u64, &[]).inline(*msg).to(dest))
            .unwrap();
    }
    // No destination: refused by its push, the two before stay.
    let e = batch
        .push(&SendWr::send(9, &[]).inline(b"nowhere"))
        .unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadDestination(_)), "{e}");
    assert_eq!(e.index, 2);
    batch.complete().unwrap();
    let s = wait(&mut p.cq_a, 2);
    assert!(s.iter().all(|c| c.status == WcStatus::SUCCESS), "{s:?}");
    let r = wait(&mut p.cq_b, 2);
    for (i, (c, msg)) in r
        .iter()
        .zip([b"first datagram", b"other datagram"])
        .enumerate()
    {
        assert_eq!(
            (c.wr_id, c.status, c.byte_len),
            (10 + i as u64, WcStatus::SUCCESS, 40 + 14)
        );
        assert_eq!(c.src_qp, p.a.qp_num());
        let mut got = [0u8; 14];
        dst.read(256 * i + 40, &mut got).unwrap();
        assert_eq!(&got, msg);
    }
    ah.destroy().unwrap_or_else(|e| panic!("{e}"));
}

/// The send session through its non-borrowing calls (`begin_send`,
/// `push_send`, `complete_send`, `abort_send`: the session's cursor in
/// the kernel-mapped ring, as the C library's `ibv_wr_*` reach it): the
/// kernel sees nothing before complete, a modify between the calls leaves
/// the session as it was, an aborted session never runs and its slots
/// carry the next requests, and a post meets the open session.
#[test]
fn a_session_of_calls_executes_at_complete_and_an_aborted_one_never() {
    let mut p = pair(QpType::Rc, 8, 7);
    let local = mr(&p.pd, 4096);
    let remote = mr(&p.pd, 4096);
    local.write(0, &[0xaa; 64]).unwrap();
    let (ra, rkey) = (remote.addr(), remote.rkey());
    let src = [local.sge(0, 8).unwrap()];
    let mut next = 0u64;
    for lap in 0..6u64 {
        p.a.begin_send().unwrap();
        for k in 0..8 {
            let wr = SendWr::new(
                1000 + k,
                SendOp::RdmaWrite {
                    remote_addr: ra + 2048 + 8 * k,
                    rkey,
                },
                &src,
            );
            p.a.push_send(&wr).unwrap();
        }
        let e = p.a.post_send(&[SendWr::send(1, &src)]).unwrap_err();
        assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
        p.a.abort_send();
        let vals: Vec<[u8; 8]> = (0..8).map(|k| (next + k).to_le_bytes()).collect();
        p.a.begin_send().unwrap();
        for (k, v) in vals.iter().enumerate() {
            let id = next + k as u64;
            let wr = SendWr::new(
                id,
                SendOp::RdmaWrite {
                    remote_addr: ra + 8 * (id % 256),
                    rkey,
                },
                &[],
            )
            .inline(v);
            p.a.push_send(&if k == 7 { wr } else { wr.unsignaled() })
                .unwrap();
            if k == 3 && lap % 2 == 0 {
                // The QP is free between the calls: RTS to RTS.
                let attr = uverbs::QpAttr::with_state(uverbs::QpState::Rts);
                p.a.modify(&attr, uverbs::QpAttrMask::STATE).unwrap();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        let mut wc = [WorkCompletion::default(); 4];
        assert_eq!(p.cq_a.poll(&mut wc), 0, "a request ran before complete");
        p.a.complete_send().unwrap();
        let s = wait(&mut p.cq_a, 1);
        assert_eq!((s[0].wr_id, s[0].status), (next + 7, WcStatus::SUCCESS));
        for id in next..next + 8 {
            assert_eq!(remote.read_u64(8 * (id as usize % 256)).unwrap(), id);
        }
        next += 8;
    }
    std::thread::sleep(Duration::from_millis(100));
    let mut wc = [WorkCompletion::default(); 4];
    assert_eq!(p.cq_a.poll(&mut wc), 0, "{wc:?}");
    let mut untouched = [0u8; 64];
    remote.read(2048, &mut untouched).unwrap();
    assert_eq!(untouched, [0; 64], "an aborted write reached remote memory");
}
