//! Every send opcode against the real kernel, checked by its effect on the
//! remote memory, plus error completions.

use uverbs::{
    AccessFlags, QpType, RecvWr, SendFlags, SendOp, SendWr, UdDest, WcFlags, WcOpcode, WcStatus,
};

use crate::support::*;

#[test]
fn rc_send_recv_moves_bytes_and_reports_lengths() {
    let mut p = pair(QpType::Rc, 16, 7);
    let src = mr(&p.pd, 4096);
    let dst = mr(&p.pd, 4096);
    let msg: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    src.write(0, &msg).unwrap();
    p.b.post_recv(&[RecvWr::new(77, &[dst.sge(0, 4096).unwrap()])])
        .unwrap();
    p.a.post_send(&[SendWr::send(5, &[src.sge(0, 1000).unwrap()])])
        .unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(
        (s[0].wr_id, s[0].status, s[0].opcode),
        (5, WcStatus::SUCCESS, WcOpcode::SEND)
    );
    let r = wait(&mut p.cq_b, 1);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].opcode),
        (77, WcStatus::SUCCESS, WcOpcode::RECV)
    );
    assert_eq!(r[0].byte_len, 1000);
    assert_eq!(r[0].qp_num, p.b.qp_num());
    let mut got = vec![0u8; 1000];
    dst.read(0, &mut got).unwrap();
    assert_eq!(got, msg);
}

#[test]
fn send_with_immediate_inline_and_several_sges() {
    let mut p = pair(QpType::Rc, 16, 7);
    let src = mr(&p.pd, 4096);
    let dst = mr(&p.pd, 4096);
    src.write(0, b"hello ").unwrap();
    src.write(100, b"world").unwrap();
    p.b.post_recv(&[
        RecvWr::new(1, &[dst.sge(0, 64).unwrap()]),
        RecvWr::new(2, &[dst.sge(64, 16).unwrap(), dst.sge(128, 64).unwrap()]),
    ])
    .unwrap();
    let sges = [src.sge(0, 6).unwrap(), src.sge(100, 5).unwrap()];
    p.a.post_send(&[
        SendWr::new(10, SendOp::SendWithImm { imm: 0xdead_beef }, &sges),
        SendWr::send(11, &[]).inline(b"inline payload of 20!"),
    ])
    .unwrap();
    let s = wait(&mut p.cq_a, 2);
    assert!(s.iter().all(|c| c.status == WcStatus::SUCCESS), "{s:?}");
    let r = wait(&mut p.cq_b, 2);
    assert_eq!(r[0].wr_id, 1);
    assert_eq!(r[0].byte_len, 11);
    assert!(r[0].wc_flags.contains(WcFlags::WITH_IMM));
    assert_eq!(r[0].imm_data, 0xdead_beef);
    let mut got = [0u8; 11];
    dst.read(0, &mut got).unwrap();
    assert_eq!(&got, b"hello world");
    // 21 bytes scattered over a 16-byte and a 64-byte element.
    assert_eq!(r[1].byte_len, 21);
    let (mut head, mut tail) = ([0u8; 16], [0u8; 5]);
    dst.read(64, &mut head).unwrap();
    dst.read(128, &mut tail).unwrap();
    assert_eq!([&head[..], &tail[..]].concat(), b"inline payload of 20!");
}

#[test]
fn rdma_write_and_write_with_immediate_land_in_remote_memory() {
    let mut p = pair(QpType::Rc, 16, 7);
    let src = mr(&p.pd, 8192);
    let dst = mr(&p.pd, 8192);
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    src.write(0, &data).unwrap();
    p.a.post_send(&[SendWr::new(
        1,
        SendOp::RdmaWrite {
            remote_addr: dst.addr() + 3000,
            rkey: dst.rkey(),
        },
        &[src.sge(0, 5000).unwrap()],
    )])
    .unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(
        (s[0].status, s[0].opcode),
        (WcStatus::SUCCESS, WcOpcode::RDMA_WRITE)
    );
    let mut got = vec![0u8; 5000];
    dst.read(3000, &mut got).unwrap();
    assert_eq!(got, data);
    // No receive is consumed by a plain write; one is by write-with-imm.
    p.b.post_recv(&[RecvWr::new(9, &[])]).unwrap();
    p.a.post_send(&[SendWr::new(
        2,
        SendOp::RdmaWriteWithImm {
            remote_addr: dst.addr(),
            rkey: dst.rkey(),
            imm: 42,
        },
        &[src.sge(0, 16).unwrap()],
    )])
    .unwrap();
    wait(&mut p.cq_a, 1);
    let r = wait(&mut p.cq_b, 1);
    assert_eq!(r[0].opcode, WcOpcode::RECV_RDMA_WITH_IMM);
    assert_eq!((r[0].wr_id, r[0].imm_data, r[0].byte_len), (9, 42, 16));
}

#[test]
fn rdma_read_fetches_remote_memory() {
    let mut p = pair(QpType::Rc, 16, 7);
    let local = mr(&p.pd, 4096);
    let remote = mr(&p.pd, 4096);
    remote.write(512, b"read me back, please").unwrap();
    p.a.post_send(&[SendWr::new(
        3,
        SendOp::RdmaRead {
            remote_addr: remote.addr() + 512,
            rkey: remote.rkey(),
        },
        &[local.sge(8, 20).unwrap()],
    )])
    .unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(
        (s[0].status, s[0].opcode),
        (WcStatus::SUCCESS, WcOpcode::RDMA_READ)
    );
    assert_eq!(s[0].byte_len, 20);
    let mut got = [0u8; 20];
    local.read(8, &mut got).unwrap();
    assert_eq!(&got, b"read me back, please");
}

#[test]
fn atomics_compare_swap_and_fetch_add() {
    let mut p = pair(QpType::Rc, 16, 7);
    let local = mr(&p.pd, 64);
    let remote = mr(&p.pd, 64);
    remote.write(8, &100u64.to_ne_bytes()).unwrap();
    let rkey = remote.rkey();
    let raddr = remote.addr() + 8;
    // Fetch-and-add: returns 100, leaves 105.
    p.a.post_send(&[SendWr::new(
        1,
        SendOp::FetchAdd {
            remote_addr: raddr,
            rkey,
            add: 5,
        },
        &[local.sge(0, 8).unwrap()],
    )])
    .unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(
        (s[0].status, s[0].opcode),
        (WcStatus::SUCCESS, WcOpcode::FETCH_ADD)
    );
    assert_eq!(local.read_u64(0).unwrap(), 100);
    assert_eq!(remote.read_u64(8).unwrap(), 105);
    // A failing compare leaves memory alone and returns the current value.
    p.a.post_send(&[SendWr::new(
        2,
        SendOp::CompareSwap {
            remote_addr: raddr,
            rkey,
            compare: 1,
            swap: 7,
        },
        &[local.sge(16, 8).unwrap()],
    )])
    .unwrap();
    wait(&mut p.cq_a, 1);
    assert_eq!(local.read_u64(16).unwrap(), 105);
    assert_eq!(remote.read_u64(8).unwrap(), 105);
    // A matching compare swaps.
    p.a.post_send(&[SendWr::new(
        3,
        SendOp::CompareSwap {
            remote_addr: raddr,
            rkey,
            compare: 105,
            swap: 0xfeed,
        },
        &[local.sge(24, 8).unwrap()],
    )])
    .unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(s[0].opcode, WcOpcode::COMP_SWAP);
    assert_eq!(local.read_u64(24).unwrap(), 105);
    assert_eq!(remote.read_u64(8).unwrap(), 0xfeed);
}

#[test]
fn unsignaled_sends_complete_silently_until_a_signaled_one() {
    let mut p = pair(QpType::Rc, 16, 7);
    let src = mr(&p.pd, 64);
    let dst = mr(&p.pd, 4096);
    for i in 0..4 {
        p.b.post_recv(&[RecvWr::new(i, &[dst.sge(i as usize * 64, 64).unwrap()])])
            .unwrap();
    }
    let sge = [src.sge(0, 8).unwrap()];
    let wrs = [
        SendWr::send(1, &sge).unsignaled(),
        SendWr::send(2, &sge).unsignaled(),
        SendWr::send(3, &sge).unsignaled(),
        SendWr::send(4, &sge).flags(SendFlags::SIGNALED | SendFlags::SOLICITED),
    ];
    p.a.post_send(&wrs).unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(s[0].wr_id, 4);
    assert_eq!(wait(&mut p.cq_b, 4).len(), 4);
    let mut more = [uverbs::WorkCompletion::default(); 4];
    assert_eq!(
        p.cq_a.poll(&mut more),
        0,
        "unsignaled sends must not complete"
    );
}

#[test]
fn a_bad_rkey_is_a_remote_access_error() {
    let mut p = pair(QpType::Rc, 16, 7);
    let src = mr(&p.pd, 64);
    let ro =
        p.pd.alloc_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ)
            .unwrap();
    // Writing to a read-only region: remote access error at the requester.
    p.a.post_send(&[SendWr::new(
        1,
        SendOp::RdmaWrite {
            remote_addr: ro.addr(),
            rkey: ro.rkey(),
        },
        &[src.sge(0, 8).unwrap()],
    )])
    .unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(s[0].status, WcStatus::REM_ACCESS_ERR, "{s:?}");
}

#[test]
fn a_send_without_a_receive_exhausts_rnr_retries() {
    let mut p = pair(QpType::Rc, 16, 0);
    let src = mr(&p.pd, 64);
    p.a.post_send(&[SendWr::send(1, &[src.sge(0, 8).unwrap()])])
        .unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(s[0].status, WcStatus::RNR_RETRY_EXC_ERR, "{s:?}");
}

#[test]
fn uc_rdma_write_and_send() {
    let mut p = pair(QpType::Uc, 16, 7);
    let src = mr(&p.pd, 4096);
    let dst = mr(&p.pd, 4096);
    src.write(0, b"unreliable connected").unwrap();
    // On UC a send completion means "sent", not "arrived" (on 6.12 rxe's
    // responder runs later, on a work queue). A SEND after the write, whose
    // receive completes at the peer, orders it: UC delivers in order.
    p.b.post_recv(&[RecvWr::new(5, &[dst.sge(1024, 64).unwrap()])])
        .unwrap();
    p.a.post_send(&[
        SendWr::new(
            1,
            SendOp::RdmaWrite {
                remote_addr: dst.addr() + 64,
                rkey: dst.rkey(),
            },
            &[src.sge(0, 20).unwrap()],
        ),
        SendWr::send(2, &[src.sge(0, 4).unwrap()]),
    ])
    .unwrap();
    wait(&mut p.cq_a, 2);
    let r = wait(&mut p.cq_b, 1);
    assert_eq!((r[0].wr_id, r[0].status), (5, WcStatus::SUCCESS));
    let mut got = [0u8; 20];
    dst.read(64, &mut got).unwrap();
    assert_eq!(&got, b"unreliable connected");
    // Reads and atomics do not exist on UC: refused before posting.
    let err =
        p.a.post_send(&[SendWr::new(
            2,
            SendOp::RdmaRead {
                remote_addr: dst.addr(),
                rkey: dst.rkey(),
            },
            &[src.sge(0, 8).unwrap()],
        )])
        .unwrap_err();
    assert_eq!(err.index, 0);
}

#[test]
fn ud_send_through_an_address_handle_carries_a_grh() {
    let mut p = pair(QpType::Ud, 16, 7);
    let src = mr(&p.pd, 256);
    let dst = mr(&p.pd, 4096);
    src.write(0, b"datagram").unwrap();
    let ah = ah_to_own_gid(&p);
    p.b.post_recv(&[RecvWr::new(5, &[dst.sge(0, 40 + 64).unwrap()])])
        .unwrap();
    let sge = [src.sge(0, 8).unwrap()];
    let wr = SendWr::send(1, &sge).to(UdDest::new(&ah, p.b.qp_num(), 0x1111_1111));
    p.a.post_send(&[wr]).unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(s[0].status, WcStatus::SUCCESS);
    let r = wait(&mut p.cq_b, 1);
    assert_eq!(r[0].status, WcStatus::SUCCESS);
    assert_eq!(r[0].byte_len, 40 + 8, "a UD receive counts the 40-byte GRH");
    assert!(r[0].wc_flags.contains(WcFlags::GRH));
    assert_eq!(r[0].src_qp, p.a.qp_num());
    let mut got = [0u8; 8];
    dst.read(40, &mut got).unwrap();
    assert_eq!(&got, b"datagram");
    // A UD send without a destination is refused before posting.
    assert!(p.a.post_send(&[SendWr::send(2, &sge)]).is_err());
    // The AH is destroyed explicitly (no QP holds it).
    ah.destroy().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_send_queue_without_sges_refuses_payload_but_sends_empty_messages() {
    // max_send_sge 0 and max_inline_data 8: rxe sizes the slot by the larger
    // (8 bytes), so the SQ gets max_sge 0, and the kernel's requester fails
    // any WQE with payload on it and moves the QP to ERR (without the check
    // in uverbs: LOC_QP_OP_ERR on 6.1, WR_FLUSH_ERR on 6.12). uverbs refuses
    // such a post up front; an empty message is still fine.
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq_a = ctx.create_cq(8, uverbs::CqOptions::default()).unwrap();
    let mut cq_b = ctx.create_cq(8, uverbs::CqOptions::default()).unwrap();
    let init = |cq, cap| uverbs::QpInitAttr::rc(cq, cq).cap(cap);
    let small = cap(4).max_send_sge(0).max_inline_data(8);
    let mut a = pd
        .create_qp(&init(&cq_a, small))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut b = pd
        .create_qp(&init(&cq_b, cap(4)))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.cap().max_send_sge, 0, "{:?}", a.cap());
    let gid = local_gid(&ctx);
    connect(&a, b.qp_num(), gid, access_all(), 7);
    connect(&b, a.qp_num(), gid, access_all(), 7);
    let dst = mr(&pd, 64);
    b.post_recv(&[RecvWr::new(9, &[dst.sge(0, 64).unwrap()])])
        .unwrap();

    let err = a
        .post_send(&[SendWr::send(1, &[]).inline(b"abc")])
        .unwrap_err();
    assert!(err.to_string().contains("max_send_sge >= 1"), "{err}");
    a.post_send(&[SendWr::send(2, &[]).inline(&[])]).unwrap();
    let s = wait(&mut cq_a, 1);
    assert_eq!((s[0].wr_id, s[0].status), (2, WcStatus::SUCCESS));
    let r = wait(&mut cq_b, 1);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].byte_len),
        (9, WcStatus::SUCCESS, 0)
    );
}

#[test]
fn a_ud_message_longer_than_the_mtu_completes_but_is_never_delivered() {
    // IB C10-93.1.1, as rxe implements it (K61 rxe_req.c): a UD message
    // longer than the port's MTU is not sent and completes successfully.
    // The documentation of SendWr::to warns about it; this pins it down.
    let mut p = pair(QpType::Ud, 16, 7);
    let mtu = p
        .ctx
        .query_port(1)
        .unwrap()
        .active_mtu
        .bytes()
        .expect("a valid active MTU") as usize;
    let src = mr(&p.pd, 2 * mtu);
    let dst = mr(&p.pd, 40 + 2 * mtu);
    src.write(0, &vec![0x5a; 2 * mtu]).unwrap();
    let ah = ah_to_own_gid(&p);
    let to = UdDest::new(&ah, p.b.qp_num(), 0x1111_1111);
    p.b.post_recv(&[RecvWr::new(
        5,
        &[dst.sge(0, (40 + 2 * mtu) as u32).unwrap()],
    )])
    .unwrap();
    let too_long = [src.sge(0, mtu as u32 + 1).unwrap()];
    p.a.post_send(&[SendWr::send(1, &too_long).to(to)]).unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!((s[0].wr_id, s[0].status), (1, WcStatus::SUCCESS));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut wc = [uverbs::WorkCompletion::default(); 1];
    assert_eq!(p.cq_b.poll(&mut wc), 0, "delivered after all: {:?}", wc[0]);
    // Exactly one MTU goes through, into the same receive.
    let fits = [src.sge(0, mtu as u32).unwrap()];
    p.a.post_send(&[SendWr::send(2, &fits).to(to)]).unwrap();
    assert_eq!(wait(&mut p.cq_a, 1)[0].status, WcStatus::SUCCESS);
    let r = wait(&mut p.cq_b, 1);
    assert_eq!((r[0].wr_id, r[0].byte_len), (5, 40 + mtu as u32));
    drop(p);
    ah.destroy().unwrap_or_else(|e| panic!("{e}"));
}

/// A region registered at another I/O virtual address
/// (`register_raw_iova`, `ibv_reg_mr_iova2`): peers name its bytes by the
/// iova, and rxe writes the memory behind it.
#[test]
#[allow(unsafe_code)] // register_raw_iova's contract, kept below
fn a_region_at_another_iova_is_reached_through_the_iova() {
    let mut p = pair(QpType::Rc, 16, 7);
    let src = mr(&p.pd, 4096);
    let mut map = memmap2::MmapMut::map_anon(8192).unwrap();
    let iova = 0x7000_0000_0000u64;
    let base = map.as_mut_ptr();
    // SAFETY: the mapping stays mapped, and is not referenced until the
    // region is deregistered below.
    let region = unsafe { p.pd.register_raw_iova(base, 8192, iova, access_all()) }.unwrap();
    assert_eq!((region.addr(), region.len()), (iova, 8192));
    let data: Vec<u8> = (0..64u8).map(|i| i ^ 0x5a).collect();
    src.write(0, &data).unwrap();
    p.a.post_send(&[SendWr::new(
        1,
        SendOp::RdmaWrite {
            remote_addr: iova + 5000,
            rkey: region.rkey(),
        },
        &[src.sge(0, 64).unwrap()],
    )])
    .unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(s[0].status, WcStatus::SUCCESS, "{s:?}");
    // The address itself is no iova of the region.
    p.a.post_send(&[SendWr::new(
        2,
        SendOp::RdmaWrite {
            remote_addr: base as u64,
            rkey: region.rkey(),
        },
        &[src.sge(0, 8).unwrap()],
    )])
    .unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(s[0].status, WcStatus::REM_ACCESS_ERR, "{s:?}");
    region.destroy().unwrap();
    assert_eq!(&map[5000..5064], &data[..]);
    assert!(map[..5000].iter().all(|&b| b == 0));
}
