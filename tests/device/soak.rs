//! Soak: 10^6 messages over 16 QPs (8 connected pairs, both directions),
//! every send and receive completion accounted for, none lost or duplicated,
//! every payload in order. `UVERBS_SOAK_MESSAGES` and `UVERBS_SOAK_QPS` (an
//! even number) override the count and the QPs: `scripts/soak.sh` runs the
//! long mode, 10^7 messages over 64 QPs.

use std::collections::HashMap;

use uverbs::{
    CompletionQueue, CqOptions, QpInitAttr, QueuePair, RecvWr, SendWr, WcOpcode, WcStatus,
    WorkCompletion,
};

use crate::support::*;

/// QPs unless `UVERBS_SOAK_QPS` says otherwise.
const DEFAULT_QPS: usize = 16;
const DEPTH: u32 = 128;
const BATCH: usize = 16;
const MSG: usize = 8;

struct Lane {
    qp: QueuePair,
    /// Next sequence number to send / expected to receive.
    sent: u64,
    send_done: u64,
    recv_expect: u64,
    recv_posted: u64,
    quota: u64,
}

#[test]
fn a_million_messages_over_sixteen_qps() {
    let total: u64 = std::env::var("UVERBS_SOAK_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let qps_n: usize = std::env::var("UVERBS_SOAK_QPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &usize| *n >= 2 && n % 2 == 0)
        .unwrap_or(DEFAULT_QPS);
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    // Room for every QP's whole queue: a completion never finds the CQ full.
    let cqe = (qps_n as u32 * DEPTH).max(4096);
    let mut send_cq: CompletionQueue = ctx.create_cq(cqe, CqOptions::default()).unwrap();
    let mut recv_cq: CompletionQueue = ctx.create_cq(cqe, CqOptions::default()).unwrap();
    let gid = local_gid(&ctx);
    let mut qps: Vec<QueuePair> = (0..qps_n)
        .map(|_| {
            pd.create_qp(
                &QpInitAttr::rc(&send_cq, &recv_cq)
                    .cap(uverbs::QpCap::new(DEPTH, DEPTH, 1, 1).max_inline_data(MSG as u32))
                    .sq_sig_all(true),
            )
            .unwrap()
        })
        .collect();
    for i in (0..qps_n).step_by(2) {
        let (a, b) = (qps[i].qp_num(), qps[i + 1].qp_num());
        connect(&qps[i], b, gid, access_all(), 7);
        connect(&qps[i + 1], a, gid, access_all(), 7);
    }
    // One receive slot of MSG bytes per (QP, ring position).
    let rbuf = mr(&pd, qps_n * DEPTH as usize * MSG);
    let mut lanes: Vec<Lane> = qps
        .drain(..)
        .enumerate()
        .map(|(i, qp)| Lane {
            qp,
            sent: 0,
            send_done: 0,
            recv_expect: 0,
            recv_posted: 0,
            quota: total / qps_n as u64 + u64::from((i as u64) < total % qps_n as u64),
        })
        .collect();
    let index: HashMap<u32, usize> = lanes
        .iter()
        .enumerate()
        .map(|(i, l)| (l.qp.qp_num(), i))
        .collect();
    let peer = |i: usize| i ^ 1;
    let slot =
        |lane: usize, seq: u64| (lane * DEPTH as usize + (seq % u64::from(DEPTH)) as usize) * MSG;

    let post_recvs = |lane: &mut Lane, i: usize, limit: u64| {
        while lane.recv_posted < limit && lane.recv_posted - lane.recv_expect < u64::from(DEPTH) {
            let seq = lane.recv_posted;
            let sge = [rbuf.sge(slot(i, seq), MSG as u32).unwrap()];
            lane.qp
                .post_recv(&[RecvWr::new(seq, &sge)])
                .unwrap_or_else(|e| panic!("post_recv: {e}"));
            lane.recv_posted += 1;
        }
    };
    for i in 0..qps_n {
        let limit = lanes[peer(i)].quota;
        post_recvs(&mut lanes[i], i, limit);
    }

    let mut wc = [WorkCompletion::default(); 64];
    let (mut sends, mut recvs) = (0u64, 0u64);
    let start = std::time::Instant::now();
    let mut idle_since = std::time::Instant::now();
    while sends < total || recvs < total {
        let mut progress = false;
        for i in 0..qps_n {
            // Send while the peer has receives posted and our SQ has room.
            let peer_posted = lanes[peer(i)].recv_posted;
            let lane = &mut lanes[i];
            let room = u64::from(DEPTH) - (lane.sent - lane.send_done);
            let can = (lane.quota - lane.sent)
                .min(room)
                .min(peer_posted - lane.sent.min(peer_posted));
            let n = can.min(BATCH as u64) as usize;
            if n > 0 {
                let payloads: Vec<[u8; MSG]> = (0..n as u64)
                    .map(|k| (lane.sent + k).to_le_bytes())
                    .collect();
                let wrs: Vec<SendWr<'_>> = payloads
                    .iter()
                    .enumerate()
                    .map(|(k, p)| SendWr::send(lane.sent + k as u64, &[]).inline(p))
                    .collect();
                lane.qp
                    .post_send(&wrs)
                    .unwrap_or_else(|e| panic!("post_send: {e}"));
                lane.sent += n as u64;
                progress = true;
            }
        }
        let n = send_cq.poll(&mut wc);
        for c in &wc[..n] {
            assert_eq!(c.status, WcStatus::SUCCESS, "send {c:?}");
            assert_eq!(c.opcode, WcOpcode::SEND);
            let lane = &mut lanes[index[&c.qp_num]];
            assert_eq!(
                c.wr_id, lane.send_done,
                "send completions in order, none lost"
            );
            lane.send_done += 1;
            sends += 1;
        }
        progress |= n > 0;
        let n = recv_cq.poll(&mut wc);
        for c in &wc[..n] {
            assert_eq!(c.status, WcStatus::SUCCESS, "recv {c:?}");
            let i = index[&c.qp_num];
            let expect = lanes[i].recv_expect;
            assert_eq!(c.wr_id, expect, "receive completions in order, none lost");
            assert_eq!(c.byte_len as usize, MSG);
            let got = rbuf.read_u64(slot(i, expect)).unwrap();
            assert_eq!(
                u64::from_le(got),
                expect,
                "payload of message {expect} on lane {i}"
            );
            lanes[i].recv_expect += 1;
            recvs += 1;
        }
        progress |= n > 0;
        for i in 0..qps_n {
            let limit = lanes[peer(i)].quota;
            post_recvs(&mut lanes[i], i, limit);
        }
        if progress {
            idle_since = std::time::Instant::now();
        } else {
            assert!(
                idle_since.elapsed() < std::time::Duration::from_secs(30),
                "no progress for 30 s: {sends} sends and {recvs} receives of {total} completed"
            );
        }
    }
    // Exactly `total` of each, and nothing extra arrives.
    assert_eq!((sends, recvs), (total, total));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(
        send_cq.poll(&mut wc) + recv_cq.poll(&mut wc),
        0,
        "duplicates"
    );
    for (i, l) in lanes.iter().enumerate() {
        assert_eq!(l.send_done, l.quota, "lane {i}");
        assert_eq!(l.recv_expect, lanes[peer(i)].quota, "lane {i}");
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "soak: {total} messages over {qps_n} QPs in {secs:.1} s ({:.0} msg/s)",
        total as f64 / secs
    );
}
