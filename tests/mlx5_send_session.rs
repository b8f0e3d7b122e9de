//! The send session's non-borrowing calls (`QueuePair::begin_send`,
//! `push_send`, `complete_send`, `abort_send`: the session's cursor in the
//! send queue, reached call by call, as the C library's `ibv_wr_*` reach
//! it) on the mlx5 device model: nothing reaches the device before
//! complete, the QP is free between the calls, a post or a second start
//! meets the open session as documented, a reset drops it, and sessions
//! of calls and of views (`start_send`, `start_wr`) interleave on one
//! queue without losing or duplicating a request. The model decodes the
//! WQEs and checks every doorbell.

use uverbs::{
    qp_ex::{Mlx5, Rc},
    PostErrorKind, QpAttr, QpAttrMask, QpState, QpType, RecvWr, SendOp, SendWr, WcOpcode, WcStatus,
    WorkCompletion,
};

use uverbs_test_support::mlx5_pair::*;

/// An inline RDMA WRITE of `id`'s bytes to slot `slot` of `p.mr_b`.
fn write<'a>(p: &Pair, id: u64, slot: u64, bytes: &'a [u8; 8]) -> SendWr<'a> {
    SendWr::new(
        id,
        SendOp::RdmaWrite {
            remote_addr: p.mr_b.addr() + 8 * slot,
            rkey: p.mr_b.rkey(),
        },
        &[],
    )
    .inline(bytes)
}

#[test]
fn a_session_of_calls_reaches_the_device_only_at_complete() {
    let mut p = pair(QpType::Rc, 16);
    p.mr_a.write(0, b"0123456789abcdef").unwrap();
    p.b.post_recv(&[RecvWr::new(70, &[p.mr_b.sge(2048, 64).unwrap()])])
        .unwrap();
    let src = [p.mr_a.sge(0, 16).unwrap()];
    let (rb, rkey) = (p.mr_b.addr(), p.mr_b.rkey());
    assert_eq!(p.a.send_pending(), None);
    p.a.begin_send().unwrap();
    assert_eq!(p.a.send_pending(), Some(0));
    p.a.push_send(&SendWr::new(
        1,
        SendOp::RdmaWrite {
            remote_addr: rb,
            rkey,
        },
        &src,
    ))
    .unwrap();
    // The QP is free between the calls: a query and a modify that keeps
    // it in RTS (the session is left as it was).
    let (attr, _) = p.a.query(QpAttrMask::STATE).unwrap();
    assert_eq!(attr.qp_state, QpState::Rts);
    p.a.modify(&QpAttr::new().qp_state(QpState::Rts), QpAttrMask::STATE)
        .unwrap();
    p.a.push_send(&SendWr::new(2, SendOp::SendWithImm { imm: 0xfeed }, &[]).inline(b"inline!"))
        .unwrap();
    assert_eq!(p.a.send_pending(), Some(2));
    p.model.process();
    let mut got = [0u8; 16];
    p.mr_b.read(0, &mut got).unwrap();
    assert_eq!(got, [0; 16], "a pushed request reached the device early");
    p.a.complete_send().unwrap();
    assert_eq!(p.a.send_pending(), None);
    let ca = run_and_poll(&p.model, &mut p.cq_a, 2);
    let ids: Vec<_> = ca.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    assert_eq!(
        ids,
        [
            (1, WcStatus::SUCCESS, WcOpcode::RDMA_WRITE),
            (2, WcStatus::SUCCESS, WcOpcode::SEND),
        ]
    );
    p.mr_b.read(0, &mut got).unwrap();
    assert_eq!(&got, b"0123456789abcdef");
    let cb = run_and_poll(&p.model, &mut p.cq_b, 1);
    assert_eq!(
        (cb[0].wr_id, cb[0].byte_len, cb[0].imm_data),
        (70, 7, 0xfeed)
    );
    // An empty session rings nothing (the model flags a doorbell whose
    // record did not move).
    p.a.begin_send().unwrap();
    p.a.complete_send().unwrap();
    assert_clean(&p.model);
}

#[test]
fn an_open_session_refuses_post_send_and_a_second_start_drops_it() {
    let mut p = pair(QpType::Rc, 8);
    let v: Vec<[u8; 8]> = (0..8u64).map(u64::to_le_bytes).collect();
    // No session: the calls say so, and abort does nothing.
    let e = p.a.push_send(&write(&p, 1, 1, &v[1])).unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
    assert!(matches!(
        p.a.complete_send().unwrap_err().kind,
        PostErrorKind::BadState(_)
    ));
    p.a.abort_send();
    // A post meets the open session; the session goes on.
    p.a.begin_send().unwrap();
    p.a.push_send(&write(&p, 1, 1, &v[1])).unwrap();
    let e = p.a.post_send(&[write(&p, 2, 2, &v[2])]).unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
    // Begin again: the open session is dropped (write 1 never executes).
    p.a.begin_send().unwrap();
    p.a.push_send(&write(&p, 3, 3, &v[3])).unwrap();
    // A view started now drops it too (write 3 never executes).
    let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
    s.rdma_write(p.mr_b.rkey(), p.mr_b.addr() + 8 * 4)
        .wr_id(4)
        .inline(&v[4])
        .unwrap();
    s.complete().unwrap();
    assert_eq!(p.a.send_pending(), None);
    // And post_send works again.
    p.a.post_send(&[write(&p, 5, 5, &v[5])]).unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, 2);
    let ids: Vec<_> = ca.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, [(4, WcStatus::SUCCESS), (5, WcStatus::SUCCESS)]);
    for slot in [1, 2, 3] {
        assert_eq!(p.mr_b.read_u64(8 * slot).unwrap(), 0, "write {slot}");
    }
    assert_eq!(p.mr_b.read_u64(32).unwrap(), 4);
    assert_eq!(p.mr_b.read_u64(40).unwrap(), 5);
    assert_clean(&p.model);
}

#[test]
fn a_bad_request_is_refused_at_its_index_and_a_full_queue_stops_the_session() {
    let mut p = pair(QpType::Rc, 4);
    let one = [p.mr_a.sge(0, 8).unwrap()];
    let three = [p.mr_a.sge(0, 8).unwrap(); 3];
    for i in 0..2 {
        p.b.post_recv(&[RecvWr::new(i, &[p.mr_b.sge(64 * i as usize, 64).unwrap()])])
            .unwrap();
    }
    p.a.begin_send().unwrap();
    p.a.push_send(&SendWr::send(1, &one)).unwrap();
    let e = p.a.push_send(&SendWr::send(2, &three)).unwrap_err();
    assert_eq!(e.index, 1);
    assert!(
        matches!(e.kind, PostErrorKind::TooManySges { given: 3, max: 2 }),
        "{e}"
    );
    p.a.push_send(&SendWr::send(3, &one)).unwrap();
    assert_eq!(p.a.send_pending(), Some(2));
    p.a.complete_send().unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, 2);
    let ids: Vec<_> = ca.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, [(1, WcStatus::SUCCESS), (3, WcStatus::SUCCESS)]);
    // A full queue refuses the request that does not fit, at its index;
    // aborted, the queue takes a full session again.
    for _ in 0..2 {
        p.a.begin_send().unwrap();
        let mut refused = None;
        for i in 0..8 {
            if let Err(e) = p.a.push_send(&SendWr::send(10 + i, &one).unsignaled()) {
                refused = Some(e);
                break;
            }
        }
        let e = refused.expect("a 4-deep queue took 8 requests");
        assert!(matches!(e.kind, PostErrorKind::QueueFull), "{e}");
        assert_eq!(Some(e.index), p.a.send_pending());
        p.a.abort_send();
    }
    assert_clean(&p.model);
}

#[test]
fn a_reset_during_the_session_drops_it() {
    let mut p = pair(QpType::Rc, 8);
    let v = 7u64.to_le_bytes();
    p.a.begin_send().unwrap();
    p.a.push_send(&write(&p, 1, 1, &v)).unwrap();
    p.a.modify(&QpAttr::with_state(QpState::Reset), QpAttrMask::STATE)
        .unwrap();
    let e = p.a.push_send(&write(&p, 2, 2, &v)).unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
    assert_eq!(p.a.send_pending(), None, "the session is closed");
    // In RESET a session cannot begin; connected again, the queue starts
    // over and none of the dropped session's requests executes.
    let e = p.a.begin_send().unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
    let g = gid(&p._ctx);
    connect(&p.a, p.b.qp_num(), g, 7);
    p.a.begin_send().unwrap();
    p.a.push_send(&write(&p, 3, 3, &v)).unwrap();
    p.a.complete_send().unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, 1);
    assert_eq!((ca[0].wr_id, ca[0].status), (3, WcStatus::SUCCESS));
    assert_eq!(p.mr_b.read_u64(8).unwrap(), 0, "the dropped write executed");
    assert_eq!(p.mr_b.read_u64(24).unwrap(), 7);
    assert_clean(&p.model);
}

/// Random sessions on one 16-deep queue, each through the calls, an
/// untyped view or a typed view, of inline writes to random slots mixed
/// with refused requests, then completed or aborted at random (a session
/// of calls sometimes left open for a post to meet, or started over),
/// compared with a reference: the remote memory holds exactly the writes
/// of completed sessions, and the completions name exactly those, in order.
#[test]
fn random_sessions_of_calls_and_views_match_a_reference() {
    let mut p = pair(QpType::Rc, 16);
    let three = [p.mr_a.sge(0, 8).unwrap(); 3];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut reference = vec![0u64; 256];
    let (mut expected, mut got) = (Vec::new(), Vec::new());
    let mut next_id = 1u64;
    let mut wc = [WorkCompletion::default(); 16];
    for _round in 0..600 {
        let n = rand(10);
        let vals: Vec<(u64, [u8; 8])> = (0..n)
            .map(|k| (rand(256), (next_id + k).to_le_bytes()))
            .collect();
        next_id += n;
        let how = rand(3);
        let mut taken = Vec::new();
        let complete = rand(4) != 0;
        match how {
            0 => {
                p.a.begin_send().unwrap();
                for (k, (slot, v)) in vals.iter().enumerate() {
                    let id = next_id - n + k as u64;
                    if rand(5) == 0 {
                        let e = p.a.push_send(&SendWr::send(id, &three)).unwrap_err();
                        assert_eq!(e.index, taken.len());
                        continue;
                    }
                    match p.a.push_send(&write(&p, id, *slot, v)) {
                        Ok(()) => taken.push((id, *slot)),
                        Err(e) if matches!(e.kind, PostErrorKind::QueueFull) => break,
                        Err(e) => panic!("{e}"),
                    }
                }
                assert_eq!(p.a.send_pending(), Some(taken.len()));
                if complete {
                    p.a.complete_send().unwrap();
                } else if rand(2) == 0 {
                    p.a.abort_send();
                } else {
                    // Left open: a post meets it, the next start drops it.
                    assert!(p.a.post_send(&[]).is_err());
                }
            }
            1 => {
                let pp = &p;
                let wrs: Vec<SendWr<'_>> = vals
                    .iter()
                    .enumerate()
                    .map(|(k, (slot, v))| write(pp, next_id - n + k as u64, *slot, v))
                    .collect();
                let mut b = p.a.start_send().unwrap();
                for (wr, (slot, _)) in wrs.iter().zip(&vals) {
                    match b.push(wr) {
                        Ok(()) => taken.push((wr.wr_id, *slot)),
                        Err(e) if matches!(e.kind, PostErrorKind::QueueFull) => break,
                        Err(e) => panic!("{e}"),
                    }
                }
                if complete {
                    b.complete().unwrap();
                } else {
                    drop(b);
                }
            }
            _ => {
                let (rb, rkey) = (p.mr_b.addr(), p.mr_b.rkey());
                let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
                for (k, (slot, v)) in vals.iter().enumerate() {
                    let id = next_id - n + k as u64;
                    match s.rdma_write(rkey, rb + 8 * slot).wr_id(id).inline(v) {
                        Ok(()) => taken.push((id, *slot)),
                        Err(e) if matches!(e.kind, PostErrorKind::QueueFull) => break,
                        Err(e) => panic!("{e}"),
                    }
                }
                if complete {
                    s.complete().unwrap();
                } else {
                    s.abort();
                }
            }
        }
        if complete {
            for &(id, slot) in &taken {
                reference[slot as usize] = id;
                expected.push(id);
            }
        }
        p.model.process();
        let k = p.cq_a.poll(&mut wc);
        for w in &wc[..k] {
            assert_eq!(w.status, WcStatus::SUCCESS, "{w:?}");
            got.push(w.wr_id);
        }
    }
    p.a.abort_send();
    for _ in 0..100 {
        p.model.process();
        let k = p.cq_a.poll(&mut wc);
        got.extend(wc[..k].iter().map(|w| w.wr_id));
        if got.len() >= expected.len() {
            break;
        }
    }
    assert!(expected.len() > 1000, "{} completed", expected.len());
    assert_eq!(got, expected, "the completions of the completed sessions");
    for (slot, want) in reference.iter().enumerate() {
        assert_eq!(p.mr_b.read_u64(8 * slot).unwrap(), *want, "slot {slot}");
    }
    assert_clean(&p.model);
}
