//! The send flags on the real kernel's rxe, for every posting path
//! (`post_send`, send batches and typed sessions): `sq_sig_all` makes every request
//! complete, SIGNALED alone otherwise; inline data arrives; a solicited
//! SEND wakes a receive CQ armed for solicited events only and an
//! unsolicited one does not. (The control-segment bits themselves are
//! checked on the mlx5 model: `tests/mlx5_send_flags.rs`.)

use std::time::Duration;

use uverbs::{CompletionQueue, QueuePair, RecvWr, SendFlags, SendWr, WcStatus, WorkCompletion};

use crate::{
    support::*,
    typed_wr::{post_by, Path, PATHS},
};

fn post(qp: &mut QueuePair, path: Path, wr: &SendWr<'_>) {
    post_by(qp, path, std::slice::from_ref(wr));
}

/// Polls `cq` for `settle` after the last completion; everything it gave.
fn settle(cq: &mut CompletionQueue, settle: Duration) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut wc = [WorkCompletion::default(); 16];
    let mut last = std::time::Instant::now();
    while last.elapsed() < settle {
        let n = cq.poll(&mut wc);
        if n > 0 {
            out.extend_from_slice(&wc[..n]);
            last = std::time::Instant::now();
        }
    }
    out
}

#[test]
fn sq_sig_all_signaled_and_inline_on_every_posting_path() {
    for sq_sig_all in [false, true] {
        for path in PATHS {
            let mut l = looped(sq_sig_all, 0);
            let what = format!("{path:?} sq_sig_all={sq_sig_all}");
            l.buf.write(0, b"gathered").unwrap();
            for i in 0..4u64 {
                let recv = [l.buf.sge(1024 + 64 * i as usize, 64).unwrap()];
                l.rx.post_recv(&[RecvWr::new(i, &recv)]).unwrap();
            }
            let sge = [l.buf.sge(0, 8).unwrap()];
            // Unsignaled, signaled, unsignaled inline, signaled inline.
            for i in 0..4u64 {
                let flags = if i % 2 == 1 {
                    SendFlags::SIGNALED
                } else {
                    SendFlags::empty()
                };
                let wr = SendWr::send(i, &sge).flags(flags);
                let wr = if i >= 2 { wr.inline(b"inline!!") } else { wr };
                post(&mut l.tx, path, &wr);
            }
            let got = wait(&mut l.recv_cq, 4);
            assert!(
                got.iter().all(|c| c.status == WcStatus::SUCCESS),
                "{what}: {got:?}"
            );
            for i in 0..4usize {
                let mut b = [0u8; 8];
                l.buf.read(1024 + 64 * i, &mut b).unwrap();
                let want: &[u8; 8] = if i >= 2 { b"inline!!" } else { b"gathered" };
                assert_eq!(&b, want, "{what}: message {i}");
            }
            let sent = settle(&mut l.send_cq, Duration::from_millis(200));
            let ids: Vec<u64> = sent.iter().map(|c| c.wr_id).collect();
            let want: &[u64] = if sq_sig_all { &[0, 1, 2, 3] } else { &[1, 3] };
            assert_eq!(ids, want, "{what}: the requests that completed");
        }
    }
}

#[test]
fn a_solicited_send_from_a_batch_or_session_wakes_a_cq_armed_for_solicited_events() {
    for path in [Path::Batch, Path::Typed] {
        let mut l = looped(false, 0);
        for i in 0..2 {
            let recv = [l.buf.sge(1024 + 64 * i, 64).unwrap()];
            l.rx.post_recv(&[RecvWr::new(i as u64, &recv)]).unwrap();
        }
        let sge = [l.buf.sge(0, 8).unwrap()];
        l.recv_cq.req_notify(true).unwrap();
        post(&mut l.tx, path, &SendWr::send(1, &sge));
        wait(&mut l.send_cq, 1);
        assert_eq!(wait(&mut l.recv_cq, 1).len(), 1);
        let none = l
            .channel
            .get_event_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        assert!(none.is_none(), "{path:?}: an unsolicited send woke the CQ");
        let solicited = SendWr::send(2, &sge).flags(SendFlags::SIGNALED | SendFlags::SOLICITED);
        post(&mut l.tx, path, &solicited);
        wait(&mut l.send_cq, 1);
        let ev = l
            .channel
            .get_event_timeout(Some(Duration::from_secs(10)))
            .unwrap()
            .expect("an event for the solicited completion");
        assert!(ev.is_for(&l.recv_cq));
        ev.ack();
        assert_eq!(wait(&mut l.recv_cq, 1).len(), 1);
    }
}
