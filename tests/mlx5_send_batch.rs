//! Send batches (`QueuePair::start_send`, rdma-core's `ibv_wr_start` ..
//! `ibv_wr_complete` / `ibv_wr_abort`) on the mlx5 device model: nothing of
//! a batch reaches the device before `complete`, one doorbell then covers
//! all of it, an aborted (or dropped) batch never executes and its WQE
//! slots are reused, and a bad request is refused by its own push with the
//! rest of the batch intact. The model decodes the WQEs with its own
//! decoder (see `tests/mlx5_model.rs`) and checks every doorbell.

use uverbs::{
    PostErrorKind, QpAttr, QpState, QpType, RecvWr, SendOp, SendWr, WcOpcode, WcStatus,
    WorkCompletion,
};

use uverbs_test_support::mlx5_pair::*;

/// Polls `cq` once after running the model; what it gave.
fn run_and_poll_any(p: &mut Pair, n_max: usize) -> Vec<WorkCompletion> {
    p.model.process();
    let mut wc = vec![WorkCompletion::default(); n_max];
    let n = p.cq_a.poll(&mut wc);
    wc.truncate(n);
    wc
}

#[test]
fn a_batch_reaches_the_device_only_at_complete_and_every_request_executes() {
    let mut p = pair(QpType::Rc, 16);
    p.mr_a.write(0, b"0123456789abcdef").unwrap();
    p.mr_b.write(512, &7u64.to_le_bytes()).unwrap();
    p.mr_b.write(1024, b"read me!").unwrap();
    p.b.post_recv(&[RecvWr::new(70, &[p.mr_b.sge(2048, 64).unwrap()])])
        .unwrap();
    let (rb, rkey) = (p.mr_b.addr(), p.mr_b.rkey());
    let write_src = [p.mr_a.sge(0, 16).unwrap()];
    let read_dst = [p.mr_a.sge(256, 8).unwrap()];
    let old = [p.mr_a.sge(384, 8).unwrap()];
    let mut batch = p.a.start_send().unwrap();
    batch
        .push(&SendWr::new(
            1,
            SendOp::RdmaWrite {
                remote_addr: rb,
                rkey,
            },
            &write_src,
        ))
        .unwrap();
    batch
        .push(&SendWr::new(
            2,
            SendOp::RdmaRead {
                remote_addr: rb + 1024,
                rkey,
            },
            &read_dst,
        ))
        .unwrap();
    batch
        .push(&SendWr::new(
            3,
            SendOp::FetchAdd {
                remote_addr: rb + 512,
                rkey,
                add: 5,
            },
            &old,
        ))
        .unwrap();
    batch
        .push(&SendWr::new(4, SendOp::SendWithImm { imm: 0xfeed }, &[]).inline(b"inline!"))
        .unwrap();
    assert_eq!(batch.len(), 4);
    // Written, not rung: the device executes nothing.
    p.model.process();
    let mut got = [0u8; 16];
    p.mr_b.read(0, &mut got).unwrap();
    assert_eq!(got, [0; 16], "a pushed request reached the device early");
    batch.complete().unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, 4);
    let ids: Vec<_> = ca.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    assert_eq!(
        ids,
        [
            (1, WcStatus::SUCCESS, WcOpcode::RDMA_WRITE),
            (2, WcStatus::SUCCESS, WcOpcode::RDMA_READ),
            (3, WcStatus::SUCCESS, WcOpcode::FETCH_ADD),
            (4, WcStatus::SUCCESS, WcOpcode::SEND),
        ]
    );
    p.mr_b.read(0, &mut got).unwrap();
    assert_eq!(&got, b"0123456789abcdef");
    assert_eq!(
        p.mr_a.read_u64(256).unwrap(),
        u64::from_le_bytes(*b"read me!")
    );
    assert_eq!(
        p.mr_a.read_u64(384).unwrap(),
        7,
        "fetch-and-add's old value"
    );
    assert_eq!(p.mr_b.read_u64(512).unwrap(), 12);
    let cb = run_and_poll(&p.model, &mut p.cq_b, 1);
    assert_eq!(
        (cb[0].wr_id, cb[0].byte_len, cb[0].imm_data),
        (70, 7, 0xfeed)
    );
    assert_clean(&p.model);
}

#[test]
fn a_batch_of_one_inline_send_goes_by_blueflame_and_an_empty_batch_rings_nothing() {
    let mut p = pair(QpType::Rc, 8);
    for i in 0..6 {
        p.b.post_recv(&[RecvWr::new(i, &[p.mr_b.sge(64 * i as usize, 64).unwrap()])])
            .unwrap();
    }
    for i in 0..6u64 {
        let data = i.to_le_bytes();
        let mut batch = p.a.start_send().unwrap();
        batch.push(&SendWr::send(i, &[]).inline(&data)).unwrap();
        batch.complete().unwrap();
        // An empty batch: no doorbell (the model would flag a doorbell
        // whose record did not move as a repeat, and execute nothing).
        p.a.start_send().unwrap().complete().unwrap();
    }
    let ca = run_and_poll(&p.model, &mut p.cq_a, 6);
    assert!(ca.iter().all(|w| w.status == WcStatus::SUCCESS), "{ca:?}");
    let cb = run_and_poll(&p.model, &mut p.cq_b, 6);
    for (i, w) in cb.iter().enumerate() {
        assert_eq!((w.wr_id, w.byte_len), (i as u64, 8));
        assert_eq!(p.mr_b.read_u64(64 * i).unwrap(), i as u64);
    }
    // The model compares every BlueFlame copy with the WQE in the queue.
    assert_clean(&p.model);
}

#[test]
fn an_aborted_or_dropped_batch_never_executes_and_its_slots_are_reused() {
    let mut p = pair(QpType::Rc, 8);
    p.mr_a.write(0, b"AAAAAAAA").unwrap();
    p.mr_a.write(8, b"BBBBBBBB").unwrap();
    let (rb, rkey) = (p.mr_b.addr(), p.mr_b.rkey());
    let a_src = [p.mr_a.sge(0, 8).unwrap()];
    let b_src = [p.mr_a.sge(8, 8).unwrap()];
    let write = |id, off: u64, src| {
        SendWr::new(
            id,
            SendOp::RdmaWrite {
                remote_addr: rb + off,
                rkey,
            },
            src,
        )
    };
    for round in 0..20u64 {
        // A full queue's worth, then taken back.
        let mut batch = p.a.start_send().unwrap();
        for k in 0..8 {
            batch.push(&write(1000 + k, 64 * k, &a_src)).unwrap();
        }
        if round % 2 == 0 {
            batch.abort();
        } else {
            drop(batch);
        }
        // The queue is as it was: a full batch fits again.
        let mut batch = p.a.start_send().unwrap();
        for k in 0..8 {
            let wr = write(round * 8 + k, 1024 + 8 * k, &b_src);
            batch
                .push(&if k == 7 { wr } else { wr.unsignaled() })
                .unwrap();
        }
        batch.complete().unwrap();
        let ca = run_and_poll(&p.model, &mut p.cq_a, 1);
        assert_eq!(
            (ca[0].wr_id, ca[0].status),
            (round * 8 + 7, WcStatus::SUCCESS)
        );
    }
    assert!(
        run_and_poll_any(&mut p, 16).is_empty(),
        "an aborted request completed"
    );
    for k in 0..8 {
        assert_eq!(
            p.mr_b.read_u64(64 * k).unwrap(),
            0,
            "aborted write {k} executed"
        );
        assert_eq!(
            &p.mr_b.read_u64(1024 + 8 * k).unwrap().to_le_bytes(),
            b"BBBBBBBB"
        );
    }
    assert_clean(&p.model);
}

#[test]
fn a_bad_request_is_refused_by_its_push_and_the_rest_of_the_batch_completes() {
    let mut p = pair(QpType::Rc, 4);
    let one = [p.mr_a.sge(0, 8).unwrap()];
    let three = [p.mr_a.sge(0, 8).unwrap(); 3];
    for i in 0..3 {
        p.b.post_recv(&[RecvWr::new(i, &[p.mr_b.sge(64 * i as usize, 64).unwrap()])])
            .unwrap();
    }
    let mut batch = p.a.start_send().unwrap();
    batch.push(&SendWr::send(1, &one)).unwrap();
    let e = batch.push(&SendWr::send(2, &three)).unwrap_err();
    assert_eq!(e.index, 1);
    assert!(
        matches!(e.kind, PostErrorKind::TooManySges { given: 3, max: 2 }),
        "{e}"
    );
    let e = batch
        .push(&SendWr::send(3, &[]).inline(&[0; 200]))
        .unwrap_err();
    assert!(
        matches!(e.kind, PostErrorKind::InlineTooLong { given: 200, .. }),
        "{e}"
    );
    batch.push(&SendWr::send(4, &one)).unwrap();
    assert_eq!(batch.len(), 2);
    batch.complete().unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, 2);
    let ids: Vec<_> = ca.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, [(1, WcStatus::SUCCESS), (4, WcStatus::SUCCESS)]);

    // A full queue refuses the request that does not fit, at its index.
    let mut batch = p.a.start_send().unwrap();
    let mut refused = None;
    for i in 0..8 {
        if let Err(e) = batch.push(&SendWr::send(10 + i, &one).unsignaled()) {
            refused = Some(e);
            break;
        }
    }
    let e = refused.expect("a 4-deep queue took 8 requests");
    assert!(matches!(e.kind, PostErrorKind::QueueFull), "{e}");
    assert_eq!(e.index, batch.len());
    batch.abort();
    assert_clean(&p.model);
}

#[test]
fn a_batch_needs_a_qp_that_sends() {
    let p = pair(QpType::Rc, 4);
    let ctx = open(&p.model);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8, uverbs::CqOptions::default()).unwrap();
    let mut qp = create_qp(&pd, QpType::Rc, &cq, None, cap(4, 1, 0));
    let e = qp.start_send().unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
    qp.modify_to(&QpAttr::new().qp_state(QpState::Init).port_num(1))
        .unwrap();
    assert!(matches!(
        qp.start_send().unwrap_err().kind,
        PostErrorKind::BadState(_)
    ));
}

/// Thousands of writes in batches of 1 to 9 around an 8-deep queue (a
/// batch that does not fit is cut at the full queue and completed), each
/// write's bytes checked: no request lost or duplicated across wraparound.
#[test]
fn batches_of_every_size_wrap_the_ring_without_losing_a_request() {
    let mut p = pair(QpType::Rc, 8);
    let (rb, rkey) = (p.mr_b.addr(), p.mr_b.rkey());
    let total = 3000u64;
    let (mut next, mut done) = (0u64, 0u64);
    let mut wc = [WorkCompletion::default(); 16];
    let mut size = 1;
    let mut stalled = 0;
    while done < total {
        let vals: Vec<[u8; 8]> = (0..size).map(|k| (next + k).to_le_bytes()).collect();
        let mut batch = p.a.start_send().unwrap();
        for (k, v) in vals.iter().enumerate() {
            let id = next + k as u64;
            if id == total {
                break;
            }
            let wr = SendWr::new(
                id,
                SendOp::RdmaWrite {
                    remote_addr: rb + 8 * (id % 1024),
                    rkey,
                },
                &[],
            )
            .inline(v);
            match batch.push(&wr) {
                Ok(()) => {}
                Err(e) if matches!(e.kind, PostErrorKind::QueueFull) => break,
                Err(e) => panic!("{e}"),
            }
        }
        next += batch.len() as u64;
        batch.complete().unwrap();
        size = size % 9 + 1;
        p.model.process();
        let before = done;
        let n = p.cq_a.poll(&mut wc);
        for w in &wc[..n] {
            assert_eq!((w.wr_id, w.status), (done, WcStatus::SUCCESS));
            assert_eq!(p.mr_b.read_u64(8 * (done as usize % 1024)).unwrap(), done);
            done += 1;
        }
        stalled = if done == before { stalled + 1 } else { 0 };
        assert!(stalled < 100, "no progress after {done} writes");
    }
    assert_eq!(next, total);
    assert_clean(&p.model);
}

/// Random batches: pushes of inline writes (each to its own remote slot)
/// mixed with refused requests, then `complete` or `abort` at random,
/// compared with a reference: the remote memory holds exactly the writes of
/// completed batches, and the completions name exactly those, in order.
#[test]
fn random_pushes_aborts_and_completes_match_a_reference() {
    let mut p = pair(QpType::Rc, 16);
    let (rb, rkey) = (p.mr_b.addr(), p.mr_b.rkey());
    let three = [p.mr_a.sge(0, 8).unwrap(); 3];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut reference = vec![0u64; 512];
    let (mut expected, mut got) = (Vec::new(), Vec::new());
    let mut next_id = 1u64;
    let mut wc = [WorkCompletion::default(); 16];
    for _round in 0..400 {
        let n = rand(12);
        let vals: Vec<(u64, [u8; 8])> = (0..n)
            .map(|k| (rand(512), (next_id + k).to_le_bytes()))
            .collect();
        let mut batch = p.a.start_send().unwrap();
        let mut taken = Vec::new();
        for (k, (slot, v)) in vals.iter().enumerate() {
            let id = next_id + k as u64;
            if rand(5) == 0 {
                let e = batch.push(&SendWr::send(id, &three)).unwrap_err();
                assert_eq!(e.index, taken.len());
                continue;
            }
            let wr = SendWr::new(
                id,
                SendOp::RdmaWrite {
                    remote_addr: rb + 8 * slot,
                    rkey,
                },
                &[],
            )
            .inline(v);
            match batch.push(&wr) {
                Ok(()) => taken.push((id, *slot)),
                Err(e) if matches!(e.kind, PostErrorKind::QueueFull) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(batch.len(), taken.len());
        next_id += n;
        if rand(4) == 0 {
            batch.abort();
        } else {
            batch.complete().unwrap();
            for &(id, slot) in &taken {
                reference[slot as usize] = id;
                expected.push(id);
            }
        }
        p.model.process();
        let k = p.cq_a.poll(&mut wc);
        for w in &wc[..k] {
            assert_eq!(w.status, WcStatus::SUCCESS);
            got.push(w.wr_id);
        }
    }
    for _ in 0..100 {
        p.model.process();
        let k = p.cq_a.poll(&mut wc);
        got.extend(wc[..k].iter().map(|w| w.wr_id));
        if got.len() >= expected.len() {
            break;
        }
    }
    assert_eq!(
        got, expected,
        "completions differ from the completed batches"
    );
    for (slot, &id) in reference.iter().enumerate() {
        assert_eq!(p.mr_b.read_u64(8 * slot).unwrap(), id, "remote slot {slot}");
    }
    assert!(expected.len() > 1000, "only {} writes ran", expected.len());
    assert_clean(&p.model);
}

/// A batch passed to `mem::forget` is neither completed nor aborted. On
/// mlx5 the queue's counters live in the batch until it completes, so the
/// queue never took its requests: they were written past the doorbell
/// record, the next post writes over them, and they never execute (no
/// completion, no data at the peer), whether the next post is a
/// `post_send` (BlueFlame for one inline send) or another batch.
#[test]
fn a_forgotten_batch_never_executes() {
    let mut p = pair(QpType::Rc, 8);
    for i in 0..4 {
        p.b.post_recv(&[RecvWr::new(i, &[p.mr_b.sge(64 * i as usize, 64).unwrap()])])
            .unwrap();
    }
    let mut batch = p.a.start_send().unwrap();
    batch.push(&SendWr::send(1, &[]).inline(b"forgot")).unwrap();
    batch
        .push(&SendWr::send(9, &[]).inline(b"forgot too"))
        .unwrap();
    std::mem::forget(batch);
    p.model.process();
    assert!(run_and_poll_any(&mut p, 4).is_empty());
    p.a.post_send(&[SendWr::send(2, &[]).inline(b"posted")])
        .unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, 1);
    let ids: Vec<_> = ca.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, [(2, WcStatus::SUCCESS)]);
    // And before a batch.
    let mut batch = p.a.start_send().unwrap();
    batch.push(&SendWr::send(3, &[]).inline(b"forgot")).unwrap();
    std::mem::forget(batch);
    let mut batch = p.a.start_send().unwrap();
    batch.push(&SendWr::send(4, &[]).inline(b"batch")).unwrap();
    batch.complete().unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, 1);
    let ids: Vec<_> = ca.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, [(4, WcStatus::SUCCESS)]);
    // The peer received exactly the two sends that were posted.
    let cb = run_and_poll(&p.model, &mut p.cq_b, 2);
    let got: Vec<_> = cb.iter().map(|w| (w.wr_id, w.byte_len)).collect();
    assert_eq!(got, [(0, 6), (1, 5)]);
    let mut buf = [0u8; 6];
    p.mr_b.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"posted");
    p.mr_b.read(64, &mut buf[..5]).unwrap();
    assert_eq!(&buf[..5], b"batch");
    assert!(run_and_poll_any(&mut p, 4).is_empty());
    assert_clean(&p.model);
}

/// A UD send batch: each request's address vector goes into its WQE, and a
/// request without a destination is refused by its push.
#[test]
fn a_ud_send_batch_carries_each_requests_address_vector() {
    use uverbs::{UdDest, WcFlags};

    let UdPair {
        model,
        mut cq_a,
        mut cq_b,
        mut a,
        mut b,
        mr,
        ah,
        ..
    } = ud_pair();
    for i in 0..2u64 {
        b.post_recv(&[RecvWr::new(
            10 + i,
            &[mr.sge(256 * i as usize, 104).unwrap()],
        )])
        .unwrap();
    }
    let dest = UdDest::new(&ah, b.qp_num(), QKEY);
    let mut batch = a.start_send().unwrap();
    batch
        .push(&SendWr::send(1, &[]).inline(b"datagram").to(dest))
        .unwrap();
    let e = batch.push(&SendWr::send(2, &[]).inline(b"x")).unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadDestination(_)), "{e}");
    batch
        .push(&SendWr::send(3, &[]).inline(b"second!!").to(dest))
        .unwrap();
    batch.complete().unwrap();
    let ca = run_and_poll(&model, &mut cq_a, 2);
    assert!(ca.iter().all(|w| w.status == WcStatus::SUCCESS), "{ca:?}");
    let cb = run_and_poll(&model, &mut cq_b, 2);
    for (i, (w, msg)) in cb.iter().zip([b"datagram", b"second!!"]).enumerate() {
        assert_eq!(
            (w.wr_id, w.byte_len, w.src_qp),
            (10 + i as u64, 48, a.qp_num())
        );
        assert!(w.wc_flags.contains(WcFlags::GRH));
        assert_eq!(&mr.read_u64(256 * i + 40).unwrap().to_le_bytes(), msg);
    }
    assert_clean(&model);
}
