//! A QP's receive queue split off into a handle of its own
//! (`QueuePair::split_recv`) against the real kernel: one thread posts
//! receives while another posts the QP's sends, neither waiting for the
//! other, and everything completes as posted; the split queue follows the
//! QP through RESET and back.

use uverbs::{PostErrorKind, QpAttr, QpState, QpType, RecvWr, SendWr, WcOpcode, WcStatus};

use crate::support::*;

const N: u64 = 32;

#[test]
fn receives_and_sends_of_one_qp_posted_from_two_threads() {
    let mut p = pair(QpType::Rc, 64, 7);
    let ma = mr(&p.pd, 1 << 14);
    let mb = mr(&p.pd, 1 << 14);
    for i in 0..N {
        let sge = [ma.sge(4096 + 64 * i as usize, 64).unwrap()];
        p.a.post_recv(&[RecvWr::new(1000 + i, &sge)]).unwrap();
        mb.write(64 * i as usize, &i.to_le_bytes()).unwrap();
    }
    let mut rq_b = p.b.split_recv().unwrap();
    let (mbr, b) = (&mb, &mut p.b);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..N {
                let sge = [mbr.sge(8192 + 64 * i as usize, 64).unwrap()];
                rq_b.post_recv(&[RecvWr::new(2000 + i, &sge)]).unwrap();
            }
        });
        s.spawn(|| {
            for i in 0..N {
                let sge = [mbr.sge(64 * i as usize, 8).unwrap()];
                b.post_send(&[SendWr::send(3000 + i, &sge)]).unwrap();
            }
        });
    });
    let ra = wait(&mut p.cq_a, N as usize);
    for (i, wc) in ra.iter().enumerate() {
        assert_eq!((wc.wr_id, wc.status), (1000 + i as u64, WcStatus::SUCCESS));
        assert_eq!(ma.read_u64(4096 + 64 * i).unwrap(), i as u64);
    }
    for i in 0..N {
        ma.write(64 * i as usize, &(100 + i).to_le_bytes()).unwrap();
        let sge = [ma.sge(64 * i as usize, 8).unwrap()];
        p.a.post_send(&[SendWr::send(4000 + i, &sge).unsignaled()])
            .unwrap();
    }
    let cb = wait(&mut p.cq_b, 2 * N as usize);
    let recvs: Vec<u64> = cb
        .iter()
        .filter(|c| c.opcode == WcOpcode::RECV)
        .map(|c| c.wr_id)
        .collect();
    let sends: Vec<u64> = cb
        .iter()
        .filter(|c| c.opcode == WcOpcode::SEND)
        .map(|c| c.wr_id)
        .collect();
    assert_eq!(recvs, (2000..2000 + N).collect::<Vec<_>>());
    assert_eq!(sends, (3000..3000 + N).collect::<Vec<_>>());
    assert!(cb.iter().all(|c| c.status == WcStatus::SUCCESS), "{cb:?}");
    for i in 0..N as usize {
        assert_eq!(mb.read_u64(8192 + 64 * i).unwrap(), 100 + i as u64);
    }
}

#[test]
fn a_split_receive_queue_follows_the_qp_through_reset() {
    let mut p = pair(QpType::Rc, 8, 7);
    let ma = mr(&p.pd, 4096);
    let mb = mr(&p.pd, 4096);
    let mut rq_b = p.b.split_recv().unwrap();
    p.b.modify_to(&QpAttr::with_state(QpState::Reset)).unwrap();
    p.a.modify_to(&QpAttr::with_state(QpState::Reset)).unwrap();
    let sge = [mb.sge(0, 64).unwrap()];
    let e = rq_b.post_recv(&[RecvWr::new(1, &sge)]).unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
    let gid = local_gid(&p.ctx);
    connect(&p.a, p.b.qp_num(), gid, access_all(), 7);
    connect(&p.b, p.a.qp_num(), gid, access_all(), 7);
    for i in 0..4u64 {
        let sge = [mb.sge(64 * i as usize, 64).unwrap()];
        rq_b.post_recv(&[RecvWr::new(10 + i, &sge)]).unwrap();
        ma.write(64 * i as usize, &(7 + i).to_le_bytes()).unwrap();
        let s = [ma.sge(64 * i as usize, 8).unwrap()];
        p.a.post_send(&[SendWr::send(20 + i, &s).unsignaled()])
            .unwrap();
    }
    let cb = wait(&mut p.cq_b, 4);
    for (i, wc) in cb.iter().enumerate() {
        assert_eq!((wc.wr_id, wc.status), (10 + i as u64, WcStatus::SUCCESS));
        assert_eq!(mb.read_u64(64 * i).unwrap(), 7 + i as u64);
    }
}
