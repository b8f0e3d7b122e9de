//! The virtual fabric (`uverbs::testing::mlx5::fabric`): two model HCAs,
//! each with its own identity, exchanging transport packets over a
//! fabric directory as two hosts would, each running its HCA on its own
//! thread. The library drives both ends through the public API; what is
//! checked is what reaches memory and the completions each side gets.
//!
//! The processes-apart version of the same (rdma-core's pingpongs and
//! perftest against ours) is `scripts/fabric-matrix.sh`.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use uverbs::testing::mlx5::{
    fabric, fake_mlx5, fake_mlx5_with, Faults, HcaThread, Mlx5Model, Options,
};
use uverbs::{
    AccessFlags, AddressHandle, AhAttr, BringUp, CompletionQueue, Context, CqOptions, Endpoint,
    Gid, GlobalRoute, MemoryRegion, ProtectionDomain, QpInitAttr, QpType, QueuePair, RecvWr,
    SendOp, SendWr, UdDest, WcOpcode, WcStatus, WorkCompletion,
};
use uverbs_test_support::mlx5_pair::{cap, gid, open};

const ALL: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

/// A fabric directory of this test's own.
fn fabric_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("uverbs-fabric-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// One host: a model on the fabric with its HCA thread, a context, a QP
/// with its CQ, and a 1 MiB MR.
struct Host {
    // Dropped in this order: the verbs objects, then the HCA thread, then
    // the model.
    qp: QueuePair,
    cq: CompletionQueue,
    mr: MemoryRegion,
    pd: ProtectionDomain,
    ctx: Context,
    _hca: HcaThread,
    model: Arc<Mlx5Model>,
    psn: u32,
}

const MR_LEN: usize = 1 << 21;

fn host_on(model: Arc<Mlx5Model>, qp_type: QpType) -> Host {
    let hca = model.spawn_hca();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(256, CqOptions::default()).unwrap();
    let qp = pd
        .create_qp(&QpInitAttr::new(qp_type, &cq, &cq).cap(cap(64, 2, 64)))
        .unwrap();
    let mr = pd.alloc_mr(MR_LEN, ALL).unwrap();
    let psn = 0x10_0000 + model.identity().n % 0x1000;
    Host {
        qp,
        cq,
        mr,
        pd,
        ctx,
        _hca: hca,
        model,
        psn,
    }
}

fn host(dir: &Path, qp_type: QpType) -> Host {
    let model = fake_mlx5_with(Options {
        fabric: Some(dir.to_path_buf()),
        ..Options::default()
    });
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    host_on(model, qp_type)
}

fn link(h: &Host, timeout: u8, retry_cnt: u8, rnr_retry: u8) -> BringUp {
    let mut l = BringUp::new(1).gid_index(1).psn(h.psn).access(ALL);
    l.timeout = timeout;
    l.retry_cnt = retry_cnt;
    l.rnr_retry = rnr_retry;
    l.max_rd_atomic = 4;
    l.max_dest_rd_atomic = 4;
    l.min_rnr_timer = 1;
    l
}

/// Connects `a` to `b` (one direction: `a`'s QP towards `b`'s).
fn connect_to(a: &Host, b: &Host, timeout: u8, retry_cnt: u8, rnr_retry: u8) {
    let peer = Endpoint::new(b.qp.qp_num(), b.psn, gid(&b.ctx));
    a.qp.bring_up(&link(a, timeout, retry_cnt, rnr_retry), &peer)
        .unwrap();
}

fn connect(a: &Host, b: &Host) {
    connect_to(a, b, 14, 7, 7);
    connect_to(b, a, 14, 7, 7);
}

/// Polls `cq` until `n` completions came (or 10 s passed).
fn poll(cq: &mut CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut wc = [WorkCompletion::default(); 16];
    let end = Instant::now() + Duration::from_secs(10);
    while out.len() < n && Instant::now() < end {
        let k = cq.poll(&mut wc);
        out.extend_from_slice(&wc[..k]);
        if k == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    assert_eq!(out.len(), n, "completions: {out:?}");
    out
}

/// No completion arrives on `cq` for `wait`.
fn quiet(cq: &mut CompletionQueue, wait: Duration) {
    std::thread::sleep(wait);
    let mut wc = [WorkCompletion::default(); 4];
    let n = cq.poll(&mut wc);
    assert_eq!(n, 0, "unexpected: {:?}", &wc[..n]);
}

fn clean(h: &Host) {
    assert!(
        h.model.violations().is_empty(),
        "{:?}",
        h.model.violations()
    );
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn each_hca_has_its_own_identity_and_a_lone_model_keeps_the_default() {
    let dir = fabric_dir("identity");
    let (a, b) = (host(&dir, QpType::Rc), host(&dir, QpType::Rc));
    let (ia, ib) = (a.model.identity(), b.model.identity());
    assert_ne!(ia, ib);
    assert_ne!(gid(&a.ctx), gid(&b.ctx));
    assert_eq!(gid(&a.ctx).0, ia.gids()[1]);
    assert_eq!(a.ctx.query_device().unwrap().node_guid, ia.node_guid());
    assert_eq!(
        fake_mlx5().identity(),
        uverbs::testing::mlx5::Identity::new(fabric::DEFAULT_ID)
    );
}

#[test]
fn rc_every_opcode_crosses_the_fabric() {
    let dir = fabric_dir("rc");
    let (mut a, mut b) = (host(&dir, QpType::Rc), host(&dir, QpType::Rc));
    connect(&a, &b);
    let big = 200 * 1024; // several packets
    let msg = pattern(big, 1);
    a.mr.write(0, &msg).unwrap();
    b.mr.write(0x80000, &pattern(big, 2)).unwrap();
    b.mr.write(0xf0000, &100u64.to_ne_bytes()).unwrap();
    b.mr.write(0xf0008, &5u64.to_ne_bytes()).unwrap();
    let r0 = [b.mr.sge(0x40000, big as u32).unwrap()];
    let r1 = [b.mr.sge(0x70000, 64).unwrap()];
    let r2 = [b.mr.sge(0x70040, 64).unwrap()];
    b.qp.post_recv(&[
        RecvWr::new(10, &r0),
        RecvWr::new(11, &r1),
        RecvWr::new(12, &r2),
    ])
    .unwrap();
    let (raddr, rkey) = (b.mr.addr(), b.mr.rkey());
    let src = [a.mr.sge(0, big as u32).unwrap()];
    let small = [a.mr.sge(0, 16).unwrap()];
    let dst = [a.mr.sge(0x40000, big as u32).unwrap()];
    let small_dst = [a.mr.sge(0x90000, 24).unwrap()];
    let old_cas = [a.mr.sge(0xa0000, 8).unwrap()];
    let old_fa = [a.mr.sge(0xa0008, 8).unwrap()];
    a.qp.post_send(&[
        SendWr::send(1, &src),
        SendWr::new(2, SendOp::SendWithImm { imm: 0xdead_beef }, &small),
        SendWr::new(
            3,
            SendOp::RdmaWrite {
                remote_addr: raddr + 0x10_0000,
                rkey,
            },
            &src,
        ),
        SendWr::new(
            4,
            SendOp::RdmaWriteWithImm {
                remote_addr: raddr + 0xe0000,
                rkey,
                imm: 7,
            },
            &small,
        ),
        SendWr::new(
            5,
            SendOp::RdmaRead {
                remote_addr: raddr + 0x80000,
                rkey,
            },
            &dst,
        ),
        SendWr::new(
            6,
            SendOp::RdmaRead {
                remote_addr: raddr + 0x80000,
                rkey,
            },
            &small_dst,
        ),
        SendWr::new(
            7,
            SendOp::CompareSwap {
                remote_addr: raddr + 0xf0000,
                rkey,
                compare: 100,
                swap: 200,
            },
            &old_cas,
        ),
        SendWr::new(
            8,
            SendOp::FetchAdd {
                remote_addr: raddr + 0xf0008,
                rkey,
                add: 10,
            },
            &old_fa,
        ),
    ])
    .unwrap();
    let ca = poll(&mut a.cq, 8);
    let got: Vec<(u64, WcStatus, WcOpcode)> =
        ca.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    let ok = WcStatus::SUCCESS;
    assert_eq!(
        got,
        [
            (1, ok, WcOpcode::SEND),
            (2, ok, WcOpcode::SEND),
            (3, ok, WcOpcode::RDMA_WRITE),
            (4, ok, WcOpcode::RDMA_WRITE),
            (5, ok, WcOpcode::RDMA_READ),
            (6, ok, WcOpcode::RDMA_READ),
            (7, ok, WcOpcode::COMP_SWAP),
            (8, ok, WcOpcode::FETCH_ADD),
        ]
    );
    assert_eq!((ca[4].byte_len, ca[5].byte_len), (big as u32, 24));
    let cb = poll(&mut b.cq, 3);
    let got: Vec<(u64, WcStatus, WcOpcode, u32)> = cb
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len))
        .collect();
    assert_eq!(
        got,
        [
            (10, ok, WcOpcode::RECV, big as u32),
            (11, ok, WcOpcode::RECV, 16),
            (12, ok, WcOpcode::RECV_RDMA_WITH_IMM, 16),
        ]
    );
    assert_eq!((cb[1].imm_data, cb[2].imm_data), (0xdead_beef, 7));
    let mut buf = vec![0u8; big];
    b.mr.read(0x40000, &mut buf).unwrap();
    assert!(buf == msg, "the multi-packet send");
    b.mr.read(0x10_0000, &mut buf).unwrap();
    assert!(buf == msg, "the multi-packet write");
    let mut s = [0u8; 16];
    b.mr.read(0x70000, &mut s).unwrap();
    assert_eq!(s[..], msg[..16]);
    b.mr.read(0xe0000, &mut s).unwrap();
    assert_eq!(s[..], msg[..16]);
    a.mr.read(0x40000, &mut buf).unwrap();
    assert!(buf == pattern(big, 2), "the multi-packet read");
    let mut s = [0u8; 24];
    a.mr.read(0x90000, &mut s).unwrap();
    assert_eq!(s[..], pattern(24, 2)[..]);
    assert_eq!(a.mr.read_u64(0xa0000).unwrap(), 100);
    assert_eq!(b.mr.read_u64(0xf0000).unwrap(), 200);
    assert_eq!(a.mr.read_u64(0xa0008).unwrap(), 5);
    assert_eq!(b.mr.read_u64(0xf0008).unwrap(), 15);
    clean(&a);
    clean(&b);
}

/// The false success: QPs with the same numbers on two HCAs that
/// do not share a fabric (two processes, each with its own model) must not
/// talk to themselves. A lone HCA sends to a foreign GID: the RC requester
/// times out, the QP with the destination's number on its own HCA sees
/// nothing.
#[test]
fn a_packet_for_a_gid_that_is_not_ours_never_loops_back() {
    let model = fake_mlx5();
    let mut h = host_on(model.clone(), QpType::Rc);
    // A second QP on the same HCA, which a looped-back packet would reach.
    let cq2 = h.ctx.create_cq(16, CqOptions::default()).unwrap();
    let mut qp2 =
        h.pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq2, &cq2).cap(cap(8, 1, 0)))
            .unwrap();
    let foreign = uverbs::testing::mlx5::Identity::new(0x4242).gids()[1];
    let peer = Endpoint::new(qp2.qp_num(), 0, Gid(foreign));
    h.qp.bring_up(&link(&h, 1, 2, 7), &peer).unwrap();
    let peer2 = Endpoint::new(h.qp.qp_num(), h.psn, gid(&h.ctx));
    qp2.bring_up(&link(&h, 14, 7, 7).psn(0), &peer2).unwrap();
    let sge = [h.mr.sge(0, 64).unwrap()];
    qp2.post_recv(&[RecvWr::new(9, &sge)]).unwrap();
    h.qp.post_send(&[SendWr::send(1, &sge), SendWr::send(2, &sge)])
        .unwrap();
    let wc = poll(&mut h.cq, 2);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[1].wr_id, wc[1].status),
        (1, WcStatus::RETRY_EXC_ERR, 2, WcStatus::WR_FLUSH_ERR)
    );
    let mut cq2 = cq2;
    quiet(&mut cq2, Duration::from_millis(20));
    clean(&h);
}

#[test]
fn uc_and_ud_cross_the_fabric_and_ud_checks_the_qkey() {
    let dir = fabric_dir("ucud");
    let (mut a, mut b) = (host(&dir, QpType::Uc), host(&dir, QpType::Uc));
    connect(&a, &b);
    a.mr.write(0, b"unreliable, connected").unwrap();
    let r = [b.mr.sge(0x100, 64).unwrap()];
    b.qp.post_recv(&[RecvWr::new(5, &r)]).unwrap();
    let s = [a.mr.sge(0, 21).unwrap()];
    let (raddr, rkey) = (b.mr.addr(), b.mr.rkey());
    a.qp.post_send(&[
        SendWr::send(1, &s),
        SendWr::new(
            2,
            SendOp::RdmaWrite {
                remote_addr: raddr + 0x200,
                rkey,
            },
            &s,
        ),
    ])
    .unwrap();
    assert_eq!(poll(&mut a.cq, 2)[1].status, WcStatus::SUCCESS);
    let wc = poll(&mut b.cq, 1);
    assert_eq!((wc[0].wr_id, wc[0].byte_len), (5, 21));
    let mut got = [0u8; 21];
    b.mr.read(0x100, &mut got).unwrap();
    assert_eq!(&got, b"unreliable, connected");
    // The write lands too (no completion at the responder).
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        b.mr.read(0x200, &mut got).unwrap();
        if &got == b"unreliable, connected" || Instant::now() > end {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(&got, b"unreliable, connected");

    let dir = fabric_dir("ud");
    let (mut a, mut b) = (host(&dir, QpType::Ud), host(&dir, QpType::Ud));
    for h in [&a, &b] {
        h.qp.bring_up(&link(h, 14, 7, 7), &Endpoint::new(0, 0, Gid([0; 16])))
            .unwrap();
    }
    let ah: AddressHandle =
        a.pd.create_ah(&AhAttr::new(1).grh(GlobalRoute::new(gid(&b.ctx), 1).hop_limit(1)))
            .unwrap();
    let r = [b.mr.sge(0, 40 + 64).unwrap()];
    b.qp.post_recv(&[RecvWr::new(1, &r), RecvWr::new(2, &r)])
        .unwrap();
    a.mr.write(0x1000, b"datagram").unwrap();
    let s = [a.mr.sge(0x1000, 8).unwrap()];
    let qkey = uverbs_test_support::mlx5_pair::QKEY;
    a.qp.post_send(&[
        SendWr::send(1, &s).to(UdDest::new(&ah, b.qp.qp_num(), qkey ^ 1)),
        SendWr::send(2, &s).to(UdDest::new(&ah, b.qp.qp_num(), qkey)),
    ])
    .unwrap();
    assert_eq!(poll(&mut a.cq, 2)[1].status, WcStatus::SUCCESS);
    let wc = poll(&mut b.cq, 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].byte_len, wc[0].src_qp),
        (1, 48, a.qp.qp_num())
    );
    let mut grh = [0u8; 48];
    b.mr.read(0, &mut grh).unwrap();
    // The IPv4 header's source and destination: the two HCAs' addresses.
    assert_eq!(grh[20 + 12..20 + 16], gid(&a.ctx).0[12..]);
    assert_eq!(grh[20 + 16..20 + 20], gid(&b.ctx).0[12..]);
    assert_eq!(&grh[40..], b"datagram");
    quiet(&mut b.cq, Duration::from_millis(20));
    clean(&a);
    clean(&b);
}

#[test]
fn rnr_waits_for_a_receive_or_fails_after_the_retries() {
    let dir = fabric_dir("rnr");
    let (mut a, mut b) = (host(&dir, QpType::Rc), host(&dir, QpType::Rc));
    connect(&a, &b); // rnr_retry 7: forever
    a.mr.write(0, b"late").unwrap();
    let s = [a.mr.sge(0, 4).unwrap()];
    a.qp.post_send(&[SendWr::send(1, &s)]).unwrap();
    quiet(&mut a.cq, Duration::from_millis(30));
    let r = [b.mr.sge(0, 4).unwrap()];
    b.qp.post_recv(&[RecvWr::new(2, &r)]).unwrap();
    assert_eq!(poll(&mut a.cq, 1)[0].status, WcStatus::SUCCESS);
    assert_eq!(poll(&mut b.cq, 1)[0].byte_len, 4);

    let dir = fabric_dir("rnr2");
    let (mut a, b) = (host(&dir, QpType::Rc), host(&dir, QpType::Rc));
    connect_to(&a, &b, 14, 7, 2);
    connect_to(&b, &a, 14, 7, 2);
    a.qp.post_send(&[
        SendWr::send(1, &[a.mr.sge(0, 4).unwrap()]),
        SendWr::send(2, &[a.mr.sge(0, 4).unwrap()]),
    ])
    .unwrap();
    let wc = poll(&mut a.cq, 2);
    assert_eq!(
        (wc[0].status, wc[1].status),
        (WcStatus::RNR_RETRY_EXC_ERR, WcStatus::WR_FLUSH_ERR)
    );
    clean(&a);
    clean(&b);
}

#[test]
fn a_bad_rkey_is_a_remote_access_error() {
    let dir = fabric_dir("rkey");
    let (mut a, b) = (host(&dir, QpType::Rc), host(&dir, QpType::Rc));
    connect(&a, &b);
    let s = [a.mr.sge(0, 8).unwrap()];
    let raddr = b.mr.addr();
    a.qp.post_send(&[
        SendWr::new(
            1,
            SendOp::RdmaWrite {
                remote_addr: raddr,
                rkey: b.mr.rkey() ^ 0x100,
            },
            &s,
        ),
        SendWr::new(
            2,
            SendOp::RdmaRead {
                remote_addr: raddr,
                rkey: b.mr.rkey(),
            },
            &s,
        ),
    ])
    .unwrap();
    let wc = poll(&mut a.cq, 2);
    assert_eq!(
        (wc[0].status, wc[1].status),
        (WcStatus::REM_ACCESS_ERR, WcStatus::WR_FLUSH_ERR)
    );
    clean(&a);
    clean(&b);
}

/// Dropped and reordered packets (requests, data, acknowledgements):
/// retransmission fills the gaps, duplicates are not executed twice, and
/// memory ends up exactly as the work requests say, in order.
#[test]
fn dropped_and_reordered_packets_never_corrupt_memory() {
    for (name, faults_a, faults_b) in [
        ("drop", Faults::drop(3), Faults::drop(2)),
        ("reorder", Faults::reorder(4), Faults::reorder(2)),
    ] {
        let dir = fabric_dir(name);
        let (mut a, mut b) = (host(&dir, QpType::Rc), host(&dir, QpType::Rc));
        connect_to(&a, &b, 1, 7, 7);
        connect_to(&b, &a, 1, 7, 7);
        let n = 24usize;
        let len = 40 * 1024; // two packets each
        for i in 0..n {
            a.mr.write(i * len, &pattern(len, i as u8)).unwrap();
        }
        let r: Vec<_> = (0..n / 2)
            .map(|i| [b.mr.sge(0x80000 + i * len, len as u32).unwrap()])
            .collect();
        let recvs: Vec<RecvWr> = r
            .iter()
            .enumerate()
            .map(|(i, s)| RecvWr::new(i as u64, s))
            .collect();
        b.qp.post_recv(&recvs).unwrap();
        b.mr.write(0xfc000, &0u64.to_ne_bytes()).unwrap();
        a.model.fabric_faults(faults_a);
        b.model.fabric_faults(faults_b);
        let s: Vec<_> = (0..n)
            .map(|i| [a.mr.sge(i * len, len as u32).unwrap()])
            .collect();
        let old = [a.mr.sge(0xf8000, 8).unwrap()];
        let mut wrs = Vec::new();
        for (i, sge) in s.iter().enumerate() {
            wrs.push(if i % 2 == 0 {
                SendWr::send(i as u64, sge)
            } else {
                // Each write lands where the previous send's data went
                // next: later writes overwrite earlier ones in order.
                SendWr::new(
                    i as u64,
                    SendOp::RdmaWrite {
                        remote_addr: b.mr.addr() + 0x40000,
                        rkey: b.mr.rkey(),
                    },
                    sge,
                )
            });
        }
        for _ in 0..4 {
            wrs.push(SendWr::new(
                100,
                SendOp::FetchAdd {
                    remote_addr: b.mr.addr() + 0xfc000,
                    rkey: b.mr.rkey(),
                    add: 1,
                },
                &old,
            ));
        }
        for chunk in wrs.chunks(16) {
            a.qp.post_send(chunk).unwrap();
        }
        let wc = poll(&mut a.cq, n + 4);
        assert!(
            wc.iter().all(|w| w.status == WcStatus::SUCCESS),
            "{name}: {wc:?}"
        );
        let ids: Vec<u64> = wc[..n].iter().map(|w| w.wr_id).collect();
        assert_eq!(ids, (0..n as u64).collect::<Vec<_>>(), "{name}: in order");
        let wb = poll(&mut b.cq, n / 2);
        for (k, w) in wb.iter().enumerate() {
            assert_eq!((w.wr_id, w.byte_len), (k as u64, len as u32), "{name}");
            let mut got = vec![0u8; len];
            b.mr.read(0x80000 + k * len, &mut got).unwrap();
            assert!(got == pattern(len, (2 * k) as u8), "{name}: receive {k}");
        }
        let mut got = vec![0u8; len];
        b.mr.read(0x40000, &mut got).unwrap();
        assert!(
            got == pattern(len, (n - 1) as u8),
            "{name}: the last write is last"
        );
        assert_eq!(
            b.mr.read_u64(0xfc000).unwrap(),
            4,
            "{name}: each atomic once"
        );
        assert!(a.model.fabric_counts().1 > 0 || name == "reorder");
        clean(&a);
        clean(&b);
    }
}

/// A peer that disappears mid-transfer (its HCA and port gone, as when its
/// process dies): the survivor's RC QP completes the outstanding request
/// with a transport retry error after its retries, and flushes the rest.
#[test]
fn a_peer_that_dies_makes_the_survivor_fail_with_retries_exceeded() {
    let dir = fabric_dir("death");
    let (mut a, b) = (host(&dir, QpType::Rc), host(&dir, QpType::Rc));
    connect_to(&a, &b, 1, 3, 7);
    connect_to(&b, &a, 1, 3, 7);
    let sge = [a.mr.sge(0, 4096).unwrap()];
    let (raddr, rkey) = (b.mr.addr(), b.mr.rkey());
    a.qp.post_send(&[SendWr::new(
        1,
        SendOp::RdmaWrite {
            remote_addr: raddr,
            rkey,
        },
        &sge,
    )])
    .unwrap();
    assert_eq!(poll(&mut a.cq, 1)[0].status, WcStatus::SUCCESS);
    drop(b);
    let start = Instant::now();
    let wrs: Vec<SendWr> = (2..6)
        .map(|i| {
            SendWr::new(
                i,
                SendOp::RdmaWrite {
                    remote_addr: raddr,
                    rkey,
                },
                &sge,
            )
        })
        .collect();
    a.qp.post_send(&wrs).unwrap();
    let wc = poll(&mut a.cq, 4);
    let st: Vec<WcStatus> = wc.iter().map(|w| w.status).collect();
    assert_eq!(
        st,
        [
            WcStatus::RETRY_EXC_ERR,
            WcStatus::WR_FLUSH_ERR,
            WcStatus::WR_FLUSH_ERR,
            WcStatus::WR_FLUSH_ERR
        ]
    );
    // Four timeouts (the first send and three retries) of at least 10 ms.
    assert!(
        start.elapsed() >= Duration::from_millis(40),
        "{:?}",
        start.elapsed()
    );
    clean(&a);
}

/// A packet for a QP that no longer exists is dropped: the requester's
/// retries run out, the responder's HCA is unharmed and its new QPs work.
#[test]
fn a_stale_packet_for_a_destroyed_qp_is_dropped() {
    let dir = fabric_dir("stale");
    let (mut a, mut b) = (host(&dir, QpType::Rc), host(&dir, QpType::Rc));
    connect_to(&a, &b, 1, 2, 7);
    connect_to(&b, &a, 1, 2, 7);
    let gone = b.qp.qp_num();
    let fresh =
        b.pd.create_qp(&QpInitAttr::new(QpType::Rc, &b.cq, &b.cq).cap(cap(8, 1, 0)))
            .unwrap();
    let old = std::mem::replace(&mut b.qp, fresh);
    drop(old);
    let sge = [a.mr.sge(0, 64).unwrap()];
    a.qp.post_send(&[SendWr::new(
        1,
        SendOp::RdmaWrite {
            remote_addr: b.mr.addr(),
            rkey: b.mr.rkey(),
        },
        &sge,
    )])
    .unwrap();
    assert_eq!(poll(&mut a.cq, 1)[0].status, WcStatus::RETRY_EXC_ERR);
    quiet(&mut b.cq, Duration::from_millis(10));
    assert_ne!(b.qp.qp_num(), gone);
    clean(&b);
}

/// DevX across the fabric: an RC QP made with PRM commands through
/// `uverbs::mlx5` (its CQ a DevX CQ on a UMEM, armed by hand, its
/// completion event read through a DevX event channel with a cookie) on
/// one HCA, and a verbs QP on another. The DevX QP writes into the verbs
/// side's memory and sends to it; the verbs side writes into memory
/// behind the DevX QP. Layouts: `mlx5_ifc.h` (`create_qp_in`, `qpc`,
/// `ads`), `mlx5dv.h` (`mlx5_wqe_ctrl_seg`, `mlx5_wqe_raddr_seg`,
/// `mlx5_wqe_data_seg`, `mlx5_cqe64`).
#[test]
#[allow(unsafe_code)] // WQEs and CQEs live in UMEMs the device reads and writes
fn a_devx_rc_qp_trades_with_a_verbs_qp_on_another_hca() {
    use uverbs::mlx5::{
        self, event_type, CmdOut, EventChannelFlags, OpenFlags, Target, UarKind, UmemAccess,
    };
    use uverbs_test_support::{
        devx_overrun::create_cq_in,
        devx_rc::{create_rc_qp_in, rc_bring_up, RcPeer, RcQp},
    };
    const LOG_NCQE: u32 = 4;
    const LOG_SQ: u32 = 6;

    let dir = fabric_dir("devx");
    let model = fake_mlx5_with(Options {
        fabric: Some(dir.clone()),
        ..Options::default()
    });
    let hca = model.spawn_hca();
    let k = model.dyn_kernel();
    let dev = uverbs::find_device(&k, Some("mlx5_0")).unwrap();
    let ctx = mlx5::open_device(k, dev, OpenFlags::DEVX).unwrap();
    let mx = ctx.mlx5().unwrap();
    let devx = mx.devx().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let pdn = mx.pd_number(&pd).unwrap();
    let mr = pd.alloc_mr(1 << 16, ALL).unwrap();
    let mut b = host(&dir, QpType::Rc);

    // The DevX CQ, every CQE invalid (op_own 0xf0) until the device writes it.
    let cq_buf = devx
        .umem_reg(64 << LOG_NCQE, UmemAccess::LOCAL_WRITE)
        .unwrap();
    let cq_dbr = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE).unwrap();
    let cqes = cq_buf.as_ptr().unwrap();
    for i in 0..1usize << LOG_NCQE {
        // SAFETY: byte 63 of CQE i, inside the UMEM; the device has no CQ
        // on it yet.
        unsafe { cqes.add(64 * i + 63).write_volatile(0xf0) };
    }
    let uar = devx.alloc_uar(UarKind::NonCached).unwrap();
    let eqn = devx.query_eqn(0).unwrap();
    let cmd = create_cq_in(LOG_NCQE, cq_buf.id(), cq_dbr.id(), uar.page_id(), eqn);
    let mut out = vec![0u8; 16];
    let cq = devx
        .obj_create_using(&cmd, &mut out, &[&cq_buf, &cq_dbr, &uar])
        .unwrap();
    let cqn = CmdOut::read(&out).unwrap().obj_id & 0xff_ffff;

    // The DevX RC QP: a send queue, no receive queue.
    let sq = devx
        .umem_reg(64 << LOG_SQ, UmemAccess::LOCAL_WRITE)
        .unwrap();
    let qp_dbr = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE).unwrap();
    let cmd = create_rc_qp_in(&RcQp {
        pdn,
        uar_page: uar.page_id(),
        cqn,
        log_sq: LOG_SQ,
        rq: None,
        dbr_umem: qp_dbr.id(),
        wq_umem: sq.id(),
    });
    let mut out = vec![0u8; 16];
    let qp = devx
        .obj_create_using(&cmd, &mut out, &[&sq, &qp_dbr, &uar])
        .unwrap();
    let qpn = CmdOut::read(&out).unwrap().obj_id & 0xff_ffff;

    // Connected to B's verbs QP, through GID 1 towards B's GID 1; B's QP
    // towards the DevX QP.
    let (my_psn, b_gid) = (0x00a0_0000u32, gid(&b.ctx));
    let bring_up = rc_bring_up(
        qpn,
        &RcPeer {
            remote_qpn: b.qp.qp_num(),
            rgid: b_gid.0,
            rq_psn: b.psn,
            sq_psn: my_psn,
            min_rnr_nak: 1,
            remote_access: true,
        },
    );
    for (opcode, c) in bring_up {
        let mut out = vec![0u8; 16];
        qp.modify(&c, &mut out)
            .unwrap_or_else(|e| panic!("modify {opcode:#x}: {e}"));
    }
    let peer = Endpoint::new(qpn, my_psn, Gid(model.identity().gids()[1]));
    b.qp.bring_up(&link(&b, 14, 7, 7), &peer).unwrap();

    // Completions of the DevX CQ by cookie: subscribe, then arm it
    // (`mlx5_arm_cq`: the arm doorbell record, then the UAR's 0x20).
    let ch = devx
        .create_event_channel(EventChannelFlags::empty())
        .unwrap();
    ch.subscribe(Some(&cq), &[event_type::COMP], Target::Cookie(0x4004))
        .unwrap();
    // sn 0 (bits 29..28), any completion (bit 24 clear), ci 0.
    let arm = 0u32;
    let dbr = cq_dbr.as_ptr().unwrap();
    // SAFETY: word 1 of the CQ's doorbell record, inside its UMEM.
    unsafe {
        dbr.add(4)
            .cast::<[u8; 4]>()
            .write_volatile(arm.to_be_bytes())
    };
    let mut ring = [0u8; 8];
    ring[..4].copy_from_slice(&arm.to_be_bytes());
    ring[4..].copy_from_slice(&cqn.to_be_bytes());
    uar.write64(0x20, ring).unwrap();

    // An RDMA WRITE into B's MR and a SEND to B's receive, one doorbell.
    mr.write(0, b"written by a DevX QP").unwrap();
    mr.write(64, b"sent by a DevX QP").unwrap();
    let r = [b.mr.sge(0x100, 64).unwrap()];
    b.qp.post_recv(&[RecvWr::new(77, &r)]).unwrap();
    let wqes = sq.as_ptr().unwrap();
    let mut last = [0u8; 8];
    let post = |idx: u32, opcode: u32, segs: &[u8], last: &mut [u8; 8]| {
        let mut w = [0u8; 64];
        let ds = 1 + segs.len() as u32 / 16;
        w[0..4].copy_from_slice(&(idx << 8 | opcode).to_be_bytes());
        w[4..8].copy_from_slice(&(qpn << 8 | ds).to_be_bytes());
        w[11] = 0x08; // CQ_UPDATE
        w[16..16 + segs.len()].copy_from_slice(segs);
        // SAFETY: WQE `idx` of the 2^LOG_SQ basic blocks of the SQ UMEM.
        unsafe {
            wqes.add(64 * idx as usize)
                .cast::<[u8; 64]>()
                .write_volatile(w)
        };
        last.copy_from_slice(&w[..8]);
    };
    let mut raddr = (b.mr.addr() + 0x40).to_be_bytes().to_vec();
    raddr.extend_from_slice(&b.mr.rkey().to_be_bytes());
    raddr.extend_from_slice(&[0; 4]);
    let dseg = |len: u32, addr: u64| {
        let mut d = len.to_be_bytes().to_vec();
        d.extend_from_slice(&mr.lkey().to_be_bytes());
        d.extend_from_slice(&addr.to_be_bytes());
        d
    };
    let write = [raddr, dseg(20, mr.addr())].concat();
    post(0, 0x08, &write, &mut last); // MLX5_OPCODE_RDMA_WRITE
    post(1, 0x0a, &dseg(17, mr.addr() + 64), &mut last); // MLX5_OPCODE_SEND
    uverbs::barrier::udma_to_device_barrier();
    let qdb = qp_dbr.as_ptr().unwrap();
    // SAFETY: word 1 (MLX5_SND_DBR) of the QP's doorbell record.
    unsafe {
        qdb.add(4)
            .cast::<[u8; 4]>()
            .write_volatile(2u32.to_be_bytes())
    };
    uverbs::barrier::udma_to_device_barrier();
    uar.write64(0x800, last).unwrap();
    uverbs::barrier::mmio_flush_writes();

    let ev = ch
        .get_event_timeout(Some(Duration::from_secs(10)))
        .unwrap()
        .expect("a completion event within 10 s");
    assert_eq!(
        (ev.cookie, ev.event_type(), ev.cqn()),
        (0x4004, Some(event_type::COMP as u8), Some(cqn))
    );
    // Both requester CQEs (opcode 0, owner 0, the WQE counters 0 and 1).
    let end = Instant::now() + Duration::from_secs(10);
    let cqe = |i: usize| {
        let mut c = [0u8; 64];
        for (k, byte) in c.iter_mut().enumerate() {
            // SAFETY: CQE i of the CQ's UMEM, read byte by byte.
            *byte = unsafe { cqes.add(64 * i + k).read_volatile() };
        }
        c
    };
    while cqe(1)[63] >> 4 == 0xf && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    for i in 0..2 {
        let c = cqe(i);
        assert_eq!(
            c[63], 0x00,
            "CQE {i}: a requester completion, owner 0: {c:02x?}"
        );
        assert_eq!(u16::from_be_bytes([c[60], c[61]]), i as u16);
        assert_eq!(
            u32::from_be_bytes([c[56], c[57], c[58], c[59]]) & 0xff_ffff,
            qpn
        );
    }
    let wb = poll(&mut b.cq, 1);
    assert_eq!(
        (wb[0].wr_id, wb[0].status, wb[0].byte_len),
        (77, WcStatus::SUCCESS, 17)
    );
    let mut got = [0u8; 20];
    b.mr.read(0x40, &mut got).unwrap();
    assert_eq!(&got, b"written by a DevX QP");
    let mut got = [0u8; 17];
    b.mr.read(0x100, &mut got).unwrap();
    assert_eq!(&got, b"sent by a DevX QP");

    // B writes into the memory behind the DevX QP (its PD's MR).
    b.mr.write(0x200, b"a verbs QP wrote this").unwrap();
    let s = [b.mr.sge(0x200, 21).unwrap()];
    b.qp.post_send(&[SendWr::new(
        5,
        SendOp::RdmaWrite {
            remote_addr: mr.addr() + 0x400,
            rkey: mr.rkey(),
        },
        &s,
    )])
    .unwrap();
    assert_eq!(poll(&mut b.cq, 1)[0].status, WcStatus::SUCCESS);
    let mut got = [0u8; 21];
    mr.read(0x400, &mut got).unwrap();
    assert_eq!(&got, b"a verbs QP wrote this");
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    clean(&b);
    qp.destroy().unwrap();
    cq.destroy().unwrap();
    drop(hca);
}
