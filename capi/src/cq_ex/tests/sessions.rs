//! The polling session: what it reads, where it starts and ends, and how
//! threads share it.

use std::{
    collections::BTreeSet,
    sync::{mpsc, Arc, Barrier},
    thread,
    time::Duration,
};

use uverbs::abi::IbUverbsWc;

use super::*;

/// Completions of every shape rxe's kernel writes.
fn cqes() -> Vec<IbUverbsWc> {
    vec![
        // RECV_RDMA_WITH_IMM: __be32 immediate, GRH | WITH_IMM.
        IbUverbsWc {
            wr_id: 1,
            opcode: 129,
            byte_len: 64,
            ex: 0x1122_3344u32.to_be(),
            qp_num: 17,
            src_qp: 18,
            wc_flags: 1 | 2,
            ..IbUverbsWc::default()
        },
        // A receive that invalidated an rkey (host order, kernel's bit 2).
        IbUverbsWc {
            wr_id: 2,
            opcode: 128,
            byte_len: 5,
            ex: 0xabcd,
            qp_num: 17,
            wc_flags: 4,
            ..IbUverbsWc::default()
        },
        // A failed send: status and vendor_err.
        IbUverbsWc {
            wr_id: 3,
            status: 10,
            vendor_err: 0x55,
            qp_num: 19,
            ..IbUverbsWc::default()
        },
        // A UD receive: source QP, SLID, SL, path bits.
        IbUverbsWc {
            wr_id: 4,
            opcode: 128,
            byte_len: 1064,
            qp_num: 20,
            src_qp: 0x00ab_cdef,
            wc_flags: 1,
            slid: 0xbeef,
            sl: 7,
            dlid_path_bits: 0x7f,
            ..IbUverbsWc::default()
        },
        // An RDMA read's completion with its length.
        IbUverbsWc {
            wr_id: u64::MAX,
            opcode: 2,
            byte_len: 4096,
            qp_num: 21,
            ..IbUverbsWc::default()
        },
    ]
}

#[test]
fn a_session_reads_what_poll_cq_reads_of_the_same_completions() {
    let r = Rig::new();
    let cq = Ex::std(&r);
    let ring = cq.ring(&r);
    let k = cqes();
    k.iter().for_each(|c| assert!(ring.post_cqe(c)));
    let polled = cq.poll(&r, 16);
    assert_eq!(polled.len(), k.len());
    k.iter().for_each(|c| assert!(ring.post_cqe(c)));
    let mut read = Vec::new();
    let mut rc = cq.start();
    while rc == 0 {
        read.push(cq.read());
        rc = cq.next();
    }
    assert_eq!((rc, last_errno()), (libc::ENOENT, libc::ENOENT));
    cq.end();
    let no_pkey: Vec<ibv_wc> = polled
        .iter()
        .map(|w| ibv_wc {
            pkey_index: 0,
            ..*w
        })
        .collect();
    assert_eq!(read, no_pkey);
    // As rdma-core's rxe reads them: imm_data as the kernel wrote it,
    // wc_flags in the kernel's numbering.
    assert_eq!(read[0].imm_data, 0x1122_3344u32.to_be());
    assert_eq!((read[1].imm_data, read[1].wc_flags), (0xabcd, 4));
    assert_eq!((read[2].status, read[2].vendor_err), (10, 0x55));
    assert_eq!(
        (read[3].src_qp, read[3].slid, read[3].sl),
        (0x00ab_cdef, 0xbeef, 7)
    );
    assert_eq!(read[3].dlid_path_bits, 0x7f);
    assert_eq!((read[4].wr_id, read[4].byte_len), (u64::MAX, 4096));
    cq.destroy();
}

#[test]
fn an_empty_cq_says_enoent_and_leaves_no_session_open() {
    let r = Rig::new();
    let cq = Ex::std(&r);
    assert_eq!((cq.start(), last_errno()), (libc::ENOENT, libc::ENOENT));
    // No session: next is refused, end does nothing, another thread's
    // start does not wait.
    assert_eq!(cq.next(), libc::EINVAL);
    cq.end();
    let other = thread::spawn(move || cq.start()).join().unwrap();
    assert_eq!(other, libc::ENOENT);
    post(&cq.ring(&r), [5]);
    assert_eq!(cq.start(), 0);
    cq.end();
    cq.destroy();
}

#[test]
fn start_poll_refuses_a_null_or_masked_attr() {
    let r = Rig::new();
    let cq = Ex::std(&r);
    post(&cq.ring(&r), [1]);
    type Start = unsafe extern "C" fn(P, *mut ibv_poll_cq_attr) -> c_int;
    let mut masked = ibv_poll_cq_attr { comp_mask: 1 };
    assert_eq!(call!(cq.0, start_poll: Start, null_mut()), libc::EINVAL);
    assert_eq!(call!(cq.0, start_poll: Start, &mut masked), libc::EINVAL);
    // SAFETY: NULL CQs, which the ops refuse or ignore.
    unsafe {
        assert_eq!(start_poll(null_mut(), &mut masked), libc::EINVAL);
        assert_eq!(next_poll(null_mut()), libc::EINVAL);
        end_poll(null_mut());
    }
    // Nothing was taken.
    assert_eq!(cq.start(), 0);
    assert_eq!(cq.read().wr_id, 1);
    cq.end();
    cq.destroy();
}

#[test]
fn after_next_says_enoent_the_session_goes_on_until_end() {
    let r = Rig::new();
    let cq = Ex::std(&r);
    let ring = cq.ring(&r);
    post(&ring, [1]);
    assert_eq!(cq.start(), 0);
    assert_eq!(cq.next(), libc::ENOENT);
    // The fields still describe the last completion.
    assert_eq!(cq.read().wr_id, 1);
    post(&ring, [2]);
    assert_eq!(cq.next(), 0);
    assert_eq!((cq.read().wr_id, cq.read().byte_len), (2, 6));
    cq.end();
    assert_eq!(cq.start(), libc::ENOENT);
    cq.destroy();
}

#[test]
fn completions_a_session_did_not_reach_stay_for_poll_cq_and_the_next_session() {
    let r = Rig::new();
    let cq = Ex::std(&r);
    post(&cq.ring(&r), 1..=5);
    assert_eq!(cq.start(), 0);
    assert_eq!(cq.next(), 0);
    assert_eq!(cq.read().wr_id, 2);
    cq.end();
    let polled = cq.poll(&r, 1);
    assert_eq!(polled[0].wr_id, 3);
    assert_eq!(cq.start(), 0);
    assert_eq!(cq.read().wr_id, 4);
    assert_eq!(cq.next(), 0);
    assert_eq!(cq.read().wr_id, 5);
    assert_eq!(cq.next(), libc::ENOENT);
    cq.end();
    assert!(cq.poll(&r, 4).is_empty());
    cq.destroy();
}

#[test]
fn a_session_runs_across_uverbs_batches_in_order() {
    let r = Rig::new();
    let cq = Ex::std(&r);
    let ring = cq.ring(&r);
    // The fake ring holds 63; uverbs takes up to 64 off it at a time.
    post(&ring, 0..63);
    assert_eq!(cq.start(), 0);
    for i in 1..63 {
        assert_eq!(cq.next(), 0);
        assert_eq!(cq.read().wr_id, i);
    }
    post(&ring, 63..120);
    for i in 63..120 {
        assert_eq!(cq.next(), 0);
        let w = cq.read();
        assert_eq!(
            (w.wr_id, w.byte_len, w.imm_data),
            (i, i as u32 * 3, (i as u32).to_be())
        );
    }
    assert_eq!(cq.next(), libc::ENOENT);
    cq.end();
    cq.destroy();
}

#[test]
fn sessions_of_two_threads_take_turns_and_misuse_is_an_error() {
    let r = Rig::new();
    let cq = Ex::std(&r);
    post(&cq.ring(&r), 1..=3);
    assert_eq!(cq.start(), 0);
    // A second start in the same thread would spin forever on rxe.
    assert_eq!(cq.start(), libc::EDEADLK);
    let (tx, rx) = mpsc::channel();
    let other = thread::spawn(move || {
        // Not this thread's session: refused, and its end ends nothing.
        let refused = cq.next();
        cq.end();
        let rc = cq.start();
        let got = cq.read().wr_id;
        cq.end();
        tx.send((refused, rc, got)).unwrap();
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(300)),
        Err(mpsc::RecvTimeoutError::Timeout)
    );
    assert_eq!(cq.read().wr_id, 1);
    assert_eq!(cq.next(), 0);
    assert_eq!(cq.read().wr_id, 2);
    cq.end();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)),
        Ok((libc::EINVAL, 0, 3))
    );
    other.join().unwrap();
    cq.destroy();
}

/// Sessions in four threads at once, while completions arrive: each
/// session's reads must all be of one completion (rxe's lock gives that;
/// without the session's owner word they mix), and every completion is
/// read exactly once.
#[test]
fn threads_polling_in_sessions_each_read_whole_completions_once() {
    const N: u64 = 3000;
    const THREADS: usize = 4;
    let r = Rig::new();
    let cq = Ex::std(&r);
    let ring = cq.ring(&r);
    let start = Arc::new(Barrier::new(THREADS + 1));
    let (tx, rx) = mpsc::channel();
    let pollers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (start, tx) = (start.clone(), tx.clone());
            thread::spawn(move || {
                start.wait();
                // Each stops at the first end marker it reads (one each).
                let mut seen = Vec::new();
                'sessions: loop {
                    if cq.start() != 0 {
                        thread::yield_now();
                        continue;
                    }
                    loop {
                        let w = cq.read();
                        let i = w.wr_id;
                        if i == u64::MAX {
                            cq.end();
                            break 'sessions;
                        }
                        assert_eq!(w.byte_len, (i as u32).wrapping_mul(3));
                        assert_eq!(w.imm_data, (i as u32).to_be());
                        assert_eq!(w.qp_num, i as u32 ^ 0x5a5a);
                        seen.push(i);
                        if cq.next() != 0 {
                            break;
                        }
                    }
                    cq.end();
                }
                tx.send(seen).unwrap();
            })
        })
        .collect();
    drop(tx);
    start.wait();
    for i in (0..N).chain([u64::MAX; THREADS]) {
        let k = IbUverbsWc {
            wr_id: i,
            byte_len: (i as u32).wrapping_mul(3),
            ex: (i as u32).to_be(),
            qp_num: i as u32 ^ 0x5a5a,
            ..IbUverbsWc::default()
        };
        while !ring.post_cqe(&k) {
            thread::yield_now();
        }
    }
    let mut all = Vec::new();
    for seen in rx {
        all.extend(seen);
    }
    pollers.into_iter().for_each(|t| t.join().unwrap());
    let unique: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(all.len(), unique.len(), "a completion was read twice");
    assert_eq!(unique, (0..N).collect());
    cq.destroy();
}
