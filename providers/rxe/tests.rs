//! Host tests of the rxe rings, against the kernel's side played by the
//! shared fake ([`RxeRing`] of `src/testing/rxe/ring.rs`: code independent
//! of `queue.rs`, so the two sides check each other).

use std::{
    sync::{atomic::Ordering, Arc},
    thread,
};

use zerocopy::{FromBytes, IntoBytes};

use super::{
    cq::RxeCq,
    doorbell,
    queue::Producer,
    recv::{RxeRq, RECV_WQE_LEN},
    send::{build_wqe, RxeSq, UdFields, SEND_WQE_LEN},
};
use crate::{
    abi::{
        IbUverbsPostSend, IbUverbsWc, RxeRecvWqe, RxeSendWqe, RxeSendWrAtomic, RxeSendWrRdma,
        RxeSendWrUd, RxeSge, IB_USER_VERBS_CMD_POST_SEND, IB_UVERBS_QPT_RC, IB_UVERBS_QPT_UC,
        IB_UVERBS_QPT_UD,
    },
    error::ErrorKind,
    sys::Mapping,
    testing::rxe::RxeRing,
    wc::{WcFlags, WcOpcode, WcStatus, WorkCompletion},
    wr::{Payload, PostError, PostErrorKind, RecvWr, SendFlags, SendOp, SendWr, Sge},
};

const RC: u8 = IB_UVERBS_QPT_RC as u8;
const UC: u8 = IB_UVERBS_QPT_UC as u8;
const UD: u8 = IB_UVERBS_QPT_UD as u8;

/// A mapping of `len` bytes whose header says `log2_elem_size`/`index_mask`.
fn mapping_with(len: usize, log2: u32, mask: u32) -> Mapping {
    let mut m = match memmap2::MmapOptions::new().len(len).map_anon() {
        Ok(m) => m,
        Err(e) => panic!("anonymous mapping: {e}"),
    };
    m[0..4].copy_from_slice(&log2.to_ne_bytes());
    m[4..8].copy_from_slice(&mask.to_ne_bytes());
    Mapping::from(m)
}

/// A well-formed ring of `slots` slots of `1 << log2` bytes, plus the
/// kernel's view of it (the shared fake's, `src/testing/rxe/ring.rs`).
fn ring(log2: u32, slots: u32) -> (Mapping, RxeRing) {
    match RxeRing::new(log2, slots) {
        Ok(pair) => pair,
        Err(e) => panic!("fake ring: {e}"),
    }
}

fn send_wqe(bytes: &[u8]) -> RxeSendWqe {
    match RxeSendWqe::read_from_prefix(bytes) {
        Ok((w, _)) => w,
        Err(e) => panic!("{e:?}"),
    }
}

fn sges_of(bytes: &[u8], n: usize) -> Vec<RxeSge> {
    (0..n)
        .map(|i| {
            let at = SEND_WQE_LEN + i * 16;
            match RxeSge::read_from_bytes(&bytes[at..at + 16]) {
                Ok(s) => s,
                Err(e) => panic!("{e:?}"),
            }
        })
        .collect()
}

fn rdma_of(w: &RxeSendWqe) -> RxeSendWrRdma {
    match RxeSendWrRdma::read_from_prefix(&w.wr.wr[..]) {
        Ok((m, _)) => m,
        Err(e) => panic!("{e:?}"),
    }
}

fn atomic_of(w: &RxeSendWqe) -> RxeSendWrAtomic {
    match RxeSendWrAtomic::read_from_prefix(&w.wr.wr[..]) {
        Ok((m, _)) => m,
        Err(e) => panic!("{e:?}"),
    }
}

/// An SQ of 8 slots of 1024 bytes (max_sge 4, max_inline 64).
fn sq(qp_type: u8) -> (RxeSq, RxeRing) {
    let (map, k) = ring(10, 8);
    match RxeSq::new(map, 4, 64, qp_type) {
        Ok(sq) => (sq, k),
        Err(e) => panic!("{e}"),
    }
}

/// Checks the fields every send WQE has, and that the kernel-owned ones are zero.
fn check_common(w: &RxeSendWqe, wr_id: u64, opcode: u32, flags: u32, length: u32, num_sge: u32) {
    assert_eq!(w.wr.wr_id, wr_id);
    assert_eq!(w.wr.reserved, 0);
    assert_eq!(w.wr.opcode, opcode);
    assert_eq!(w.wr.send_flags, flags);
    assert_eq!(
        (w.status, w.state, w.mask, w.first_psn, w.last_psn),
        (0, 0, 0, 0, 0)
    );
    assert_eq!((w.ack_length, w.ssn, w.has_rd_atomic), (0, 0, 0));
    assert_eq!(w.dma.length, length);
    assert_eq!(w.dma.resid, length);
    assert_eq!(w.dma.num_sge, num_sge);
    assert_eq!((w.dma.cur_sge, w.dma.sge_offset, w.dma.reserved), (0, 0, 0));
}

#[test]
fn send_and_send_with_imm() {
    let (mut sq, k) = sq(RC);
    let sges = [Sge::new(0x1000, 100, 7), Sge::new(0x2000, 28, 8)];
    let wrs = [
        SendWr::send(1, &sges),
        SendWr::new(2, SendOp::SendWithImm { imm: 0x1122_3344 }, &sges[..1])
            .flags(SendFlags::SIGNALED | SendFlags::SOLICITED),
    ];
    assert_eq!(sq.post(&wrs), Ok(()));

    let b = k.consume().expect("first WQE");
    let w = send_wqe(&b);
    check_common(&w, 1, 2, 2, 128, 2);
    assert_eq!(w.wr.ex, 0);
    assert_eq!(w.iova, 0);
    assert!(w.wr.wr.iter().all(|&x| x == 0));
    let s = sges_of(&b, 2);
    assert_eq!((s[0].addr, s[0].length, s[0].lkey), (0x1000, 100, 7));
    assert_eq!((s[1].addr, s[1].length, s[1].lkey), (0x2000, 28, 8));

    let b = k.consume().expect("second WQE");
    let w = send_wqe(&b);
    check_common(&w, 2, 3, 2 | 4, 100, 1);
    // `ex.imm_data` is big-endian in memory.
    assert_eq!(w.wr.ex.as_bytes(), &[0x11, 0x22, 0x33, 0x44]);
    assert!(k.consume().is_none());
}

#[test]
fn rdma_write_write_imm_and_read() {
    let (mut sq, k) = sq(UC);
    let sge = [Sge::new(0xdead_0000, 4096, 0x42)];
    let write = SendOp::RdmaWrite {
        remote_addr: 0x7f00_0000_1000,
        rkey: 0x99,
    };
    let write_imm = SendOp::RdmaWriteWithImm {
        remote_addr: 0x7f00_0000_2000,
        rkey: 0x98,
        imm: 0xcafe_babe,
    };
    assert_eq!(
        sq.post(&[
            SendWr::new(10, write, &sge).unsignaled(),
            SendWr::new(11, write_imm, &sge)
        ]),
        Ok(())
    );
    let w = send_wqe(&k.consume().expect("write"));
    check_common(&w, 10, 0, 0, 4096, 1);
    let r = rdma_of(&w);
    assert_eq!(
        (r.remote_addr, r.rkey, r.reserved),
        (0x7f00_0000_1000, 0x99, 0)
    );
    assert_eq!(w.iova, 0x7f00_0000_1000);
    assert!(w.wr.wr[16..].iter().all(|&x| x == 0));

    let w = send_wqe(&k.consume().expect("write imm"));
    check_common(&w, 11, 1, 2, 4096, 1);
    assert_eq!(rdma_of(&w).remote_addr, 0x7f00_0000_2000);
    assert_eq!(w.wr.ex.as_bytes(), &0xcafe_babe_u32.to_be_bytes());

    // UC has no reads; RC has.
    let read = SendOp::RdmaRead {
        remote_addr: 0x5000,
        rkey: 3,
    };
    let err = sq.post(&[SendWr::new(12, read, &sge)]);
    assert!(matches!(
        err,
        Err(PostError {
            index: 0,
            kind: PostErrorKind::OpNotSupported(_)
        })
    ));
    let (mut sq, k) = sq_rc();
    assert_eq!(sq.post(&[SendWr::new(12, read, &sge)]), Ok(()));
    let w = send_wqe(&k.consume().expect("read"));
    check_common(&w, 12, 4, 2, 4096, 1);
    assert_eq!(rdma_of(&w).rkey, 3);
    assert_eq!(w.iova, 0x5000);
}

fn sq_rc() -> (RxeSq, RxeRing) {
    sq(RC)
}

#[test]
fn atomics() {
    let (mut sq, k) = sq(RC);
    let sge = [Sge::new(0x8000, 8, 5)];
    let cas = SendOp::CompareSwap {
        remote_addr: 0x1_0000,
        rkey: 17,
        compare: 0x0102_0304_0506_0708,
        swap: 0x1112_1314_1516_1718,
    };
    let faa = SendOp::FetchAdd {
        remote_addr: 0x1_0008,
        rkey: 18,
        add: 77,
    };
    assert_eq!(
        sq.post(&[SendWr::new(20, cas, &sge), SendWr::new(21, faa, &sge)]),
        Ok(())
    );
    let w = send_wqe(&k.consume().expect("cas"));
    check_common(&w, 20, 5, 2, 8, 1);
    let a = atomic_of(&w);
    assert_eq!(
        (a.remote_addr, a.compare_add, a.swap, a.rkey, a.reserved),
        (
            0x1_0000,
            0x0102_0304_0506_0708,
            0x1112_1314_1516_1718,
            17,
            0
        )
    );
    assert_eq!(w.iova, 0x1_0000);
    let w = send_wqe(&k.consume().expect("faa"));
    check_common(&w, 21, 6, 2, 8, 1);
    let a = atomic_of(&w);
    assert_eq!(
        (a.remote_addr, a.compare_add, a.swap, a.rkey),
        (0x1_0008, 77, 0, 18)
    );

    // Misaligned, wrong local buffer, inline.
    let mut bad = |wr: SendWr<'_>| match sq.post(&[wr]) {
        Err(PostError {
            index: 0,
            kind: PostErrorKind::BadAtomic(_),
        }) => {}
        other => panic!("{other:?}"),
    };
    let misaligned = SendOp::FetchAdd {
        remote_addr: 0x1_0004,
        rkey: 1,
        add: 1,
    };
    bad(SendWr::new(1, misaligned, &sge));
    bad(SendWr::new(1, faa, &[Sge::new(0x8000, 16, 5)]));
    bad(SendWr::new(1, faa, &[sge[0], sge[0]]));
    bad(SendWr::new(1, faa, &[]));
    bad(SendWr::new(1, faa, &[]).inline(&[0; 8]));
    assert!(k.consume().is_none());
}

/// Binds, invalidations and atomic writes, field by field against the
/// layout of `rxe_send_wr` (abi/tests/layout.rs checks it against the C
/// header) and rdma-core's rxe.c (`convert_send_wr`, `wr_bind_mw`,
/// `wr_local_inv`, `wr_send_inv`, `wr_atomic_write`).
#[test]
fn memory_window_invalidate_and_atomic_write_wqes() {
    use crate::{abi::RxeSendWrMw, AccessFlags, MwBind};
    let (mut rc, k) = sq(RC);
    let bind = MwBind {
        mw_rkey: 0x1234_5601,
        rkey: 0x1234_5602,
        mr_lkey: 0x77,
        addr: 0x10_0040,
        length: 0x300,
        access: AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
    };
    let sges = [Sge::new(0x1000, 10, 7)];
    let wrs = [
        SendWr::new(1, SendOp::BindMw(bind), &[]),
        SendWr::new(2, SendOp::LocalInvalidate { rkey: 0xa1b2_c3d4 }, &[]).unsignaled(),
        SendWr::new(3, SendOp::SendWithInvalidate { rkey: 0x0506_0708 }, &sges),
        SendWr::new(
            4,
            SendOp::AtomicWrite {
                remote_addr: 0x2_0008,
                rkey: 0x99,
                data: *b"8 bytes!",
            },
            &[],
        ),
    ];
    // Over slots full of stale bytes: what the kernel reads must be written.
    for i in 0..wrs.len() as u32 {
        k.write_slot((k.producer() + i) & (k.slots() - 1), &[]);
    }
    assert_eq!(rc.post(&wrs), Ok(()));

    let bytes = k.consume().expect("bind");
    let w = send_wqe(&bytes);
    check_common(&w, 1, 8, 2, 0, 0);
    assert_eq!(w.wr.ex, 0);
    let m = match RxeSendWrMw::read_from_prefix(&w.wr.wr[..]) {
        Ok((m, _)) => m,
        Err(e) => panic!("{e:?}"),
    };
    assert_eq!(
        (m.addr, m.length, m.mr_lkey, m.mw_rkey, m.rkey, m.access),
        (0x10_0040, 0x300, 0x77, 0x1234_5601, 0x1234_5602, 6)
    );
    assert_eq!(w.iova, 0);

    let w = send_wqe(&k.consume().expect("local inv"));
    check_common(&w, 2, 7, 0, 0, 0);
    // `ex.invalidate_rkey` is a host-order __u32, unlike `imm_data`.
    assert_eq!(w.wr.ex, 0xa1b2_c3d4);

    let bytes = k.consume().expect("send with inv");
    let w = send_wqe(&bytes);
    check_common(&w, 3, 9, 2, 10, 1);
    assert_eq!(w.wr.ex, 0x0506_0708);
    let s = sges_of(&bytes, 1)[0];
    assert_eq!((s.addr, s.length, s.lkey), (0x1000, 10, 7));

    let bytes = k.consume().expect("atomic write");
    let w = send_wqe(&bytes);
    check_common(&w, 4, 15, 2, 8, 0);
    let r = rdma_of(&w);
    assert_eq!((r.remote_addr, r.rkey, r.reserved), (0x2_0008, 0x99, 0));
    assert_eq!(w.iova, 0x2_0008);
    // `dma.atomic_wr`: where the SGEs would be.
    assert_eq!(&bytes[SEND_WQE_LEN..SEND_WQE_LEN + 8], b"8 bytes!");
    assert!(k.consume().is_none());

    // No payload for these; atomic writes aligned, RC only; binds RC/UC;
    // local invalidates RC only; UD only sends.
    let aw = |remote_addr| SendOp::AtomicWrite {
        remote_addr,
        rkey: 1,
        data: [0; 8],
    };
    let refused = |qp_type: u8, wr: SendWr<'_>| -> PostErrorKind {
        let (mut q, k) = sq(qp_type);
        let e = match q.post(&[wr]) {
            Err(e) => e,
            Ok(()) => panic!("{wr:?} posted on QP type {qp_type}"),
        };
        assert!(k.consume().is_none());
        e.kind
    };
    let local = SendOp::LocalInvalidate { rkey: 1 };
    for op in [SendOp::BindMw(bind), local, aw(8)] {
        assert!(matches!(
            refused(RC, SendWr::new(5, op, &sges)),
            PostErrorKind::UnexpectedPayload(_)
        ));
        assert!(matches!(
            refused(RC, SendWr::new(5, op, &[]).inline(&[1])),
            PostErrorKind::UnexpectedPayload(_)
        ));
        assert!(matches!(
            refused(UD, SendWr::new(5, op, &[])),
            PostErrorKind::OpNotSupported(_) | PostErrorKind::BadDestination(_)
        ));
    }
    assert!(matches!(
        refused(RC, SendWr::new(5, aw(4), &[])),
        PostErrorKind::BadAtomic(_)
    ));
    for op in [local, aw(8)] {
        assert!(matches!(
            refused(UC, SendWr::new(5, op, &[])),
            PostErrorKind::OpNotSupported(_)
        ));
    }
    let (mut uc, k) = sq(UC);
    assert_eq!(
        uc.post(&[SendWr::new(6, SendOp::BindMw(bind), &[])]),
        Ok(())
    );
    check_common(&send_wqe(&k.consume().expect("UC bind")), 6, 8, 2, 0, 0);
}

#[test]
fn inline_payload() {
    let (mut sq, k) = sq(RC);
    let data: Vec<u8> = (0..64u8).collect();
    let one = [Sge::new(1, 1, 1)];
    // INLINE is set for inline payloads, and cleared for SGE payloads.
    let wrs = [
        SendWr::send(30, &[]).inline(&data),
        SendWr::send(31, &one).flags(SendFlags::INLINE),
    ];
    assert_eq!(sq.post(&wrs), Ok(()));
    let b = k.consume().expect("inline");
    let w = send_wqe(&b);
    check_common(&w, 30, 2, 2 | 8, 64, 0);
    assert_eq!(&b[SEND_WQE_LEN..SEND_WQE_LEN + 64], &data[..]);
    let w = send_wqe(&k.consume().expect("sge"));
    check_common(&w, 31, 2, 0, 1, 1);

    let too_long = [0u8; 65];
    assert_eq!(
        sq.post(&[SendWr::send(32, &[]).inline(&too_long)]),
        Err(PostError {
            index: 0,
            kind: PostErrorKind::InlineTooLong { given: 65, max: 64 }
        })
    );
    let read = SendOp::RdmaRead {
        remote_addr: 0,
        rkey: 0,
    };
    assert!(sq
        .post(&[SendWr::new(33, read, &[]).inline(&data)])
        .is_err());
}

/// `SendFlags::FENCE` reaches the kernel: the ring WQE's `send_flags`
/// has `IB_SEND_FENCE`, which rdma_rxe's requester reads from the WQE the
/// library wrote (K61 rxe_req.c `rxe_wqe_is_fenced`: `wqe->wr.send_flags &
/// IB_SEND_FENCE`, then `qp->req.wait_fence`), with every combination of
/// the other flags and on both posting paths; and on the RDMA READ and
/// atomic a fenced request usually follows.
#[test]
fn fence_reaches_the_ring_wqes_send_flags_on_both_paths() {
    // The kernel's values (include/rdma/ib_verbs.h `enum ib_send_flags`),
    // not the library's.
    const IB_SEND_FENCE: u32 = 1;
    const IB_SEND_SIGNALED: u32 = 1 << 1;
    const IB_SEND_SOLICITED: u32 = 1 << 2;
    const IB_SEND_INLINE: u32 = 1 << 3;
    let (mut sq, k) = sq_rc();
    let sge = [Sge::new(0x1000, 8, 7)];
    for batch in [false, true] {
        let post = |sq: &mut RxeSq, wr: &SendWr<'_>| {
            if batch {
                sq.begin();
                assert_eq!(sq.push(wr), Ok(()));
                assert!(sq.complete_session());
            } else {
                assert_eq!(sq.post(std::slice::from_ref(wr)), Ok(()));
            }
        };
        for bits in 0u32..16 {
            let (fence, signaled, solicited, inline) =
                (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, bits & 8 != 0);
            let mut flags = SendFlags::empty();
            flags.set(SendFlags::FENCE, fence);
            flags.set(SendFlags::SIGNALED, signaled);
            flags.set(SendFlags::SOLICITED, solicited);
            let wr = SendWr::send(u64::from(bits), &sge).flags(flags);
            let wr = if inline { wr.inline(b"8 bytes!") } else { wr };
            post(&mut sq, &wr);
            let w = send_wqe(&k.consume().expect("the WQE"));
            let mut want = 0;
            for (on, bit) in [
                (fence, IB_SEND_FENCE),
                (signaled, IB_SEND_SIGNALED),
                (solicited, IB_SEND_SOLICITED),
                (inline, IB_SEND_INLINE),
            ] {
                if on {
                    want |= bit;
                }
            }
            assert_eq!(
                w.wr.send_flags, want,
                "batch={batch} fence={fence} signaled={signaled} solicited={solicited} \
                 inline={inline}"
            );
        }
        let one = [Sge::new(0x3000, 8, 11)];
        let ops = [
            SendOp::RdmaRead {
                remote_addr: 0x5000,
                rkey: 3,
            },
            SendOp::FetchAdd {
                remote_addr: 0x9000,
                rkey: 8,
                add: 3,
            },
        ];
        for op in ops {
            post(&mut sq, &SendWr::new(9, op, &one).flags(SendFlags::FENCE));
            let w = send_wqe(&k.consume().expect("the WQE"));
            assert_eq!(w.wr.send_flags, IB_SEND_FENCE, "batch={batch} {op:?}");
        }
    }
    assert!(k.consume().is_none());
}

#[test]
fn payload_on_a_queue_without_sges_is_refused_at_post() {
    // max_send_sge 0 and max_inline_data 8: the kernel's SQ has max_sge 0.
    let (map, k) = ring(10, 8);
    let mut sq = RxeSq::new(map, 0, 8, RC).expect("sq");
    let e = sq
        .post(&[SendWr::send(1, &[]).inline(&[1, 2, 3])])
        .unwrap_err();
    assert_eq!(e.index, 0);
    assert!(
        matches!(e.kind, PostErrorKind::OpNotSupported(m) if m.contains("max_send_sge >= 1")),
        "{e}"
    );
    assert!(k.consume().is_none(), "nothing reached the ring");
    // A zero-length send carries no payload, so the kernel accepts it.
    assert_eq!(sq.post(&[SendWr::send(2, &[]).inline(&[])]), Ok(()));
    check_common(
        &send_wqe(&k.consume().expect("empty send")),
        2,
        2,
        2 | 8,
        0,
        0,
    );
}

#[test]
fn multi_sge_and_too_many() {
    let (mut sq, k) = sq(RC);
    let sges: Vec<Sge> = (0..4)
        .map(|i| Sge::new(0x1000 * i, 10 + i as u32, i as u32))
        .collect();
    assert_eq!(sq.post(&[SendWr::send(40, &sges)]), Ok(()));
    let b = k.consume().expect("wqe");
    check_common(&send_wqe(&b), 40, 2, 2, 10 + 11 + 12 + 13, 4);
    for (got, want) in sges_of(&b, 4).iter().zip(&sges) {
        assert_eq!(
            (got.addr, got.length, got.lkey),
            (want.addr, want.length, want.lkey)
        );
    }
    let five = [Sge::default(); 5];
    assert_eq!(
        sq.post(&[SendWr::send(41, &five)]),
        Err(PostError {
            index: 0,
            kind: PostErrorKind::TooManySges { given: 5, max: 4 }
        })
    );
    let huge = [Sge::new(0, u32::MAX, 1), Sge::new(0, 1, 1)];
    assert!(sq.post(&[SendWr::send(42, &huge)]).is_err());
}

#[test]
fn ud_wqe_carries_ah_num() {
    let (mut sq, k) = sq(UD);
    let dest = UdFields {
        remote_qpn: 0x12_3456,
        remote_qkey: 0x1111_1111,
        ah_num: 9,
    };
    let sge = [Sge::new(0x100, 256, 4)];
    let wr = SendWr::new(50, SendOp::SendWithImm { imm: 5 }, &sge);
    assert_eq!(sq.post_one(&wr, Some(dest)), Ok(()));
    let w = send_wqe(&k.consume().expect("ud"));
    check_common(&w, 50, 3, 2, 256, 1);
    let ud = match RxeSendWrUd::read_from_bytes(&w.wr.wr[..]) {
        Ok(u) => u,
        Err(e) => panic!("{e:?}"),
    };
    assert_eq!(
        (
            ud.remote_qpn,
            ud.remote_qkey,
            ud.pkey_index,
            ud.reserved,
            ud.ah_num
        ),
        (0x12_3456, 0x1111_1111, 0, 0, 9)
    );
    assert_eq!(ud.pad, [0; 4]);
    assert!(ud.av.as_bytes().iter().all(|&x| x == 0));
    assert_eq!(w.wr.ex.as_bytes(), &5u32.to_be_bytes());

    // No destination; RDMA on UD; ah_num 0 (pre-5.10 kernels).
    assert!(matches!(
        sq.post_one(&SendWr::send(51, &sge), None),
        Err(PostErrorKind::BadDestination(_))
    ));
    let write = SendOp::RdmaWrite {
        remote_addr: 0,
        rkey: 0,
    };
    assert!(matches!(
        sq.post_one(&SendWr::new(52, write, &sge), Some(dest)),
        Err(PostErrorKind::OpNotSupported(_))
    ));
    let no_ah = UdFields { ah_num: 0, ..dest };
    assert!(matches!(
        sq.post_one(&SendWr::send(53, &sge), Some(no_ah)),
        Err(PostErrorKind::BadDestination(_))
    ));
    // A destination on a connected QP.
    let (mut rc, _k) = sq_rc();
    assert!(matches!(
        rc.post_one(&SendWr::send(54, &sge), Some(dest)),
        Err(PostErrorKind::BadDestination(_))
    ));
    // The WQE builder alone puts the same bytes.
    let built = build_wqe(&wr, Some(dest), 256);
    assert_eq!(built.wr.wr, w.wr.wr);
}

#[test]
fn full_queue_and_partial_failure() {
    let (mut sq, k) = sq(RC);
    assert_eq!(sq.capacity(), 7);
    let wrs: Vec<SendWr<'_>> = (0..10).map(|i| SendWr::send(i, &[])).collect();
    // 7 fit (one slot stays free); the 8th is reported, the first 7 stay posted.
    assert_eq!(
        sq.post(&wrs),
        Err(PostError {
            index: 7,
            kind: PostErrorKind::QueueFull
        })
    );
    assert_eq!(k.producer(), 7);
    // The kernel frees two; a bad WR in the middle stops the batch there.
    for want in 0..2 {
        assert_eq!(send_wqe(&k.consume().expect("wqe")).wr.wr_id, want);
    }
    let five = [Sge::default(); 5];
    let batch = [
        SendWr::send(100, &[]),
        SendWr::send(101, &five),
        SendWr::send(102, &[]),
    ];
    assert!(matches!(
        sq.post(&batch),
        Err(PostError {
            index: 1,
            kind: PostErrorKind::TooManySges { .. }
        })
    ));
    assert_eq!(k.producer(), 0);
    let ids: Vec<u64> = std::iter::from_fn(|| k.consume())
        .map(|b| send_wqe(&b).wr.wr_id)
        .collect();
    assert_eq!(ids, [2, 3, 4, 5, 6, 100]);
}

/// A send batch (`ibv_wr_start` .. `ibv_wr_complete` / `ibv_wr_abort`):
/// its WQEs are written but the producer index the kernel reads moves only
/// at complete; an abort leaves the ring as it was and the next WQEs take
/// the same slots; a refused push takes nothing, and a full ring refuses
/// the push that does not fit.
#[test]
fn send_batch_publishes_at_complete_and_abort_takes_back() {
    let (mut sq, k) = sq(RC);
    for lap in 0..6u64 {
        sq.begin();
        for i in 0..5 {
            assert_eq!(sq.push(&SendWr::send(1000 + i, &[])), Ok(()));
        }
        assert_eq!(
            k.producer(),
            k.consumer(),
            "lap {lap}: a push was published"
        );
        sq.abort_session();
        assert!(!sq.complete_session(), "an aborted batch left WQEs");

        sq.begin();
        let five = [Sge::default(); 5];
        assert_eq!(sq.push(&SendWr::send(lap * 10, &[])), Ok(()));
        assert!(matches!(
            sq.push(&SendWr::send(999, &five)),
            Err(PostErrorKind::TooManySges { .. })
        ));
        assert_eq!(sq.push(&SendWr::send(lap * 10 + 1, &[])), Ok(()));
        assert_eq!(k.producer(), k.consumer());
        assert!(sq.complete_session());
        let ids: Vec<u64> = std::iter::from_fn(|| k.consume())
            .map(|b| send_wqe(&b).wr.wr_id)
            .collect();
        assert_eq!(ids, [lap * 10, lap * 10 + 1], "lap {lap}");
    }
    // Seven slots: the eighth push is refused, the seven are published.
    sq.begin();
    for i in 0..7 {
        assert_eq!(sq.push(&SendWr::send(i, &[])), Ok(()));
    }
    assert_eq!(
        sq.push(&SendWr::send(7, &[])),
        Err(PostErrorKind::QueueFull)
    );
    assert!(sq.complete_session());
    assert_eq!(std::iter::from_fn(|| k.consume()).count(), 7);
}

#[test]
fn send_wraps_over_laps() {
    let (mut sq, k) = sq(RC);
    let mut next = 0u64;
    for lap in 0..40u64 {
        let n = 1 + lap % 7;
        let wrs: Vec<SendWr<'_>> = (0..n).map(|i| SendWr::send(next + i, &[])).collect();
        assert_eq!(sq.post(&wrs), Ok(()));
        for _ in 0..n {
            let w = send_wqe(&k.consume().expect("wqe"));
            assert_eq!(w.wr.wr_id, next);
            next += 1;
        }
        assert!(k.producer() <= 7 && k.consumer() <= 7);
    }
    assert!(next > 5 * 8);
}

#[test]
fn recv_wqes_and_wrap() {
    // 40 + 3 * 16 = 88 bytes: slots of 128.
    let (map, k) = ring(7, 4);
    let mut rq = match RxeRq::new(map, 3) {
        Ok(rq) => rq,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(rq.capacity(), 3);
    let sges = [
        Sge::new(0xa000, 64, 1),
        Sge::new(0xb000, 32, 2),
        Sge::new(0xc000, 16, 3),
    ];
    for lap in 0..20u64 {
        let wrs = [
            RecvWr::new(lap * 10, &sges),
            RecvWr::new(lap * 10 + 1, &sges[..1]),
        ];
        assert_eq!(rq.post(&wrs), Ok(()));
        let b = k.consume().expect("recv wqe");
        let w = match RxeRecvWqe::read_from_prefix(&b[..]) {
            Ok((w, _)) => w,
            Err(e) => panic!("{e:?}"),
        };
        assert_eq!((w.wr_id, w.reserved, w.padding), (lap * 10, 0, 0));
        assert_eq!((w.dma.length, w.dma.resid, w.dma.num_sge), (112, 112, 3));
        assert_eq!((w.dma.cur_sge, w.dma.sge_offset, w.dma.reserved), (0, 0, 0));
        for (i, want) in sges.iter().enumerate() {
            let at = RECV_WQE_LEN + 16 * i;
            let s = match RxeSge::read_from_bytes(&b[at..at + 16]) {
                Ok(s) => s,
                Err(e) => panic!("{e:?}"),
            };
            assert_eq!(
                (s.addr, s.length, s.lkey),
                (want.addr, want.length, want.lkey)
            );
        }
        let w = match RxeRecvWqe::read_from_prefix(&k.consume().expect("second")[..]) {
            Ok((w, _)) => w,
            Err(e) => panic!("{e:?}"),
        };
        assert_eq!(
            (w.wr_id, w.dma.num_sge, w.dma.length),
            (lap * 10 + 1, 1, 64)
        );
    }
    // Full and partial failure.
    let wrs: Vec<RecvWr<'_>> = (0..5).map(|i| RecvWr::new(i, &[])).collect();
    assert_eq!(
        rq.post(&wrs),
        Err(PostError {
            index: 3,
            kind: PostErrorKind::QueueFull
        })
    );
    assert!(k.consume().is_some());
    let four = [Sge::default(); 4];
    assert_eq!(
        rq.post(&[RecvWr::new(9, &four)]),
        Err(PostError {
            index: 0,
            kind: PostErrorKind::TooManySges { given: 4, max: 3 }
        })
    );
}

fn cqe(i: u32) -> IbUverbsWc {
    IbUverbsWc {
        wr_id: u64::from(i) << 8,
        status: i % 3,
        opcode: if i % 2 == 0 { 128 } else { 0 },
        vendor_err: i ^ 0x55,
        byte_len: i * 2,
        ex: (i | 0x0100_0000).to_be(),
        qp_num: 17,
        src_qp: i + 1,
        wc_flags: 1 | 2,
        pkey_index: 3,
        slid: 4,
        sl: 5,
        dlid_path_bits: 6,
        port_num: 1,
        reserved: 0,
    }
}

fn check_wc(wc: &WorkCompletion, i: u32) {
    let want = WorkCompletion {
        wr_id: u64::from(i) << 8,
        status: WcStatus(i % 3),
        opcode: if i % 2 == 0 {
            WcOpcode::RECV
        } else {
            WcOpcode::SEND
        },
        vendor_err: i ^ 0x55,
        byte_len: i * 2,
        imm_data: i | 0x0100_0000,
        qp_num: 17,
        src_qp: i + 1,
        wc_flags: WcFlags::GRH | WcFlags::WITH_IMM,
        pkey_index: 3,
        slid: 4,
        sl: 5,
        dlid_path_bits: 6,
    };
    assert_eq!(*wc, want);
}

fn cq_ring(slots: u32) -> (RxeCq, RxeRing) {
    let (map, k) = ring(6, slots);
    match RxeCq::new(map) {
        Ok(cq) => (cq, k),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn cq_batches_across_wrap() {
    let (mut cq, k) = cq_ring(8);
    assert_eq!(cq.capacity(), 7);
    assert!(cq.is_empty());
    let mut out = [WorkCompletion::default(); 3];
    assert_eq!(cq.poll(&mut out), 0);
    let (mut produced, mut seen) = (0u32, 0u32);
    while seen < 100 {
        while produced - seen < 7 && k.post_cqe(&cqe(produced)) {
            produced += 1;
        }
        // The ring is full: the kernel cannot post more until we poll.
        assert!(!k.post_cqe(&cqe(produced)));
        assert!(!cq.is_empty());
        let n = cq.poll(&mut out);
        assert!(n > 0);
        for wc in &out[..n] {
            check_wc(wc, seen);
            seen += 1;
        }
        assert_eq!(k.consumer(), seen & 7);
    }
    while cq.poll(&mut out) > 0 {}
    assert!(cq.is_empty());
    assert_eq!(cq.poll(&mut []), 0);
}

#[test]
fn cq_invalidate_rkey_stays_host_order() {
    let (mut cq, k) = cq_ring(4);
    let mut c = cqe(0);
    c.wc_flags = 1 | 4; // GRH | IB_WC_WITH_INVALIDATE (kernel value)
    c.ex = 0x1234_5678;
    assert!(k.post_cqe(&c));
    let mut out = [WorkCompletion::default(); 2];
    assert_eq!(cq.poll(&mut out), 1);
    assert_eq!(out[0].imm_data, 0x1234_5678);
    assert!(out[0].wc_flags.contains(WcFlags::WITH_INVALIDATE));
}

#[test]
fn cq_two_threads() {
    const N: u32 = 100_000;
    let (mut cq, k) = cq_ring(64);
    let kernel = thread::spawn(move || {
        let mut i = 0;
        while i < N {
            if k.post_cqe(&cqe(i)) {
                i += 1;
            } else {
                thread::yield_now();
            }
        }
    });
    let mut out = [WorkCompletion::default(); 16];
    let mut seen = 0;
    while seen < N {
        let n = cq.poll(&mut out);
        if n == 0 {
            thread::yield_now();
        }
        for wc in &out[..n] {
            check_wc(wc, seen);
            seen += 1;
        }
    }
    if kernel.join().is_err() {
        panic!("kernel thread panicked");
    }
    assert!(cq.is_empty());
}

#[test]
fn sq_two_threads() {
    const N: u64 = 50_000;
    let (mut sq, k) = sq(RC);
    let kernel = thread::spawn(move || {
        let mut want = 0;
        while want < N {
            match k.consume() {
                Some(b) => {
                    assert_eq!(send_wqe(&b).wr.wr_id, want);
                    want += 1;
                }
                None => thread::yield_now(),
            }
        }
    });
    let mut next = 0;
    while next < N {
        match sq.post(&[SendWr::send(next, &[])]) {
            Ok(()) => next += 1,
            Err(PostError {
                kind: PostErrorKind::QueueFull,
                ..
            }) => thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
    if kernel.join().is_err() {
        panic!("kernel thread panicked");
    }
}

#[test]
fn malformed_headers_are_errors() {
    let malformed = |map: Mapping| match Producer::new(map, "test ring", 64) {
        Err(e) => assert_eq!(e.kind(), ErrorKind::Malformed, "{e}"),
        Ok(p) => panic!("accepted {p:?}"),
    };
    // Mask + 1 not a power of two; all-ones mask (2^32 slots).
    malformed(mapping_with(4096, 6, 5));
    malformed(mapping_with(1 << 20, 6, u32::MAX));
    // Absurd and too small log2.
    malformed(mapping_with(4096, 40, 1));
    malformed(mapping_with(4096, 200, 1));
    malformed(mapping_with(4096, 5, 1));
    // Slots past the end of the mapping.
    malformed(mapping_with(4096, 6, 63));
    malformed(mapping_with(4096, 12, 1));
    // Smaller than the header.
    malformed(mapping_with(256, 6, 0));
    // Exactly fitting is fine: 384 + 8 * 64 = 896.
    assert!(Producer::new(mapping_with(896, 6, 7), "test ring", 64).is_ok());
    // A mask of 0 is one slot: always full.
    let (map, _k) = ring(6, 1);
    let mut p = match Producer::new(map, "test ring", 64) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    assert!(p.is_full() && p.next_slot().is_none());

    // Slots too small for the caps the queue was created with.
    let (map, _k) = ring(8, 4);
    assert!(RxeSq::new(map, 4, 0, RC).is_err()); // 208 + 64 > 256
    let (map, _k) = ring(8, 4);
    assert!(RxeSq::new(map, 2, 48, RC).is_ok()); // 208 + 48 = 256
    let (map, _k) = ring(6, 4);
    assert!(RxeRq::new(map, 2).is_err()); // 40 + 32 > 64
    let (map, _k) = ring(10, 4);
    assert!(matches!(
        RxeSq::new(map, 1, 0, 9),
        Err(e) if e.kind() == ErrorKind::InvalidArgument
    ));
}

#[test]
fn kernel_indices_are_masked() {
    let (mut sq, k) = sq(RC);
    // A garbage consumer index from the kernel is masked, never used raw.
    k.word(256).store(0xffff_fff8, Ordering::Release);
    assert_eq!(sq.post(&[SendWr::send(1, &[])]), Ok(()));
    let (mut cq, k) = cq_ring(4);
    assert!(k.post_cqe(&cqe(0)));
    k.word(128).store(0x8000_0001, Ordering::Release);
    let mut out = [WorkCompletion::default(); 8];
    assert_eq!(cq.poll(&mut out), 1);
}

#[test]
fn the_doorbell_is_one_prebuilt_post_send_write() {
    use std::sync::Mutex;

    use crate::{
        abi::{IbUverbsCmdHdr, RDMA_DRIVER_RXE},
        providers::Transport,
        testing::kernel::{dummy_fd, Call, FakeKernel},
    };

    let fake = Arc::new(FakeKernel::new());
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let log = Arc::clone(&seen);
    fake.on_raw_write(move |buf| {
        if let Ok(mut l) = log.lock() {
            l.push(buf.to_vec());
        }
        Ok(buf.len())
    });
    let transport = Transport::new(fake.clone(), dummy_fd(), RDMA_DRIVER_RXE);
    let dev = transport.device();
    let db = doorbell::Doorbell::new(0x2a);
    fake.clear_calls();
    assert_eq!(db.ring(dev), Ok(()));
    assert_eq!(db.ring(dev), Ok(()));
    assert_eq!(fake.calls(), [Call::RawWrite(32), Call::RawWrite(32)]);
    let seen = match seen.lock() {
        Ok(s) => s.clone(),
        Err(e) => panic!("{e}"),
    };
    // The legacy framing exactly as the kernel parses it (uverbs_main.c
    // `ib_uverbs_write`): header with in_words counting the header, then the
    // core request whose first field is the response address.
    let hdr = IbUverbsCmdHdr {
        command: IB_USER_VERBS_CMD_POST_SEND,
        in_words: 8,
        out_words: 1,
    };
    assert_eq!(&seen[0][..8], hdr.as_bytes());
    let body = IbUverbsPostSend::read_from_bytes(&seen[0][8..]).unwrap();
    assert_ne!(body.response, 0);
    assert_eq!(
        (body.qp_handle, body.wr_count, body.sge_count, body.wqe_size),
        (0x2a, 0, 0, 128)
    );
    assert_eq!(seen[0], db.bytes());
    assert_eq!(seen[0], seen[1]);
}

/// A CQ arm is one 16-byte `REQ_NOTIFY_CQ` write, framed as the kernel
/// parses a legacy command with no response (uverbs_main.c
/// `ib_uverbs_write`; rdma-core `ibv_cmd_req_notify_cq` writes the same
/// bytes): header, then `struct ib_uverbs_req_notify_cq`.
#[test]
fn an_arm_is_one_req_notify_cq_write() {
    use std::sync::Mutex;

    use crate::{
        abi::{
            IbUverbsCmdHdr, IbUverbsReqNotifyCq, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, RDMA_DRIVER_RXE,
        },
        providers::Transport,
        sys::Errno,
        testing::kernel::{dummy_fd, Call, FakeKernel},
    };

    let fake = Arc::new(FakeKernel::new());
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let log = Arc::clone(&seen);
    fake.on_raw_write(move |buf| {
        if let Ok(mut l) = log.lock() {
            l.push(buf.to_vec());
        }
        Ok(buf.len())
    });
    let transport = Transport::new(fake.clone(), dummy_fd(), RDMA_DRIVER_RXE);
    let dev = transport.device();
    fake.clear_calls();
    assert_eq!(doorbell::arm(dev, 0x2b, false), Ok(()));
    assert_eq!(doorbell::arm(dev, 0x2c, true), Ok(()));
    assert_eq!(fake.calls(), [Call::RawWrite(16), Call::RawWrite(16)]);
    let seen = match seen.lock() {
        Ok(s) => s.clone(),
        Err(e) => panic!("{e}"),
    };
    let hdr = IbUverbsCmdHdr {
        command: IB_USER_VERBS_CMD_REQ_NOTIFY_CQ,
        in_words: 4,
        out_words: 0,
    };
    for (bytes, (handle, solicited)) in seen.iter().zip([(0x2b, 0), (0x2c, 1)]) {
        assert_eq!(&bytes[..8], hdr.as_bytes());
        let body = IbUverbsReqNotifyCq::read_from_bytes(&bytes[8..]).unwrap();
        assert_eq!((body.cq_handle, body.solicited_only), (handle, solicited));
    }
    // A short write is an error, not a silent partial arm.
    fake.on_raw_write(|_| Ok(8));
    assert_eq!(doorbell::arm(dev, 0x2b, false), Err(Errno::EIO));
}

/// The WQE is written field by field into a slot that is not cleared
/// first: over a slot full of stale bytes, every field the kernel reads
/// (K61 rxe_req.c: everything but the union tail beyond the opcode's
/// member) equals what the reference builder produces from a zeroed WQE.
#[test]
fn direct_wqe_writes_over_stale_slots_match_the_builder() {
    let (mut sq, k) = sq(RC);
    let sges = [Sge::new(0x1000, 24, 7), Sge::new(0x2000, 8, 9)];
    let one = [Sge::new(0x3000, 8, 11)];
    let data = [0x5au8; 40];
    let wrs = [
        SendWr::send(1, &sges),
        SendWr::new(2, SendOp::SendWithImm { imm: 0x0102_0304 }, &sges[..1]),
        SendWr::new(
            3,
            SendOp::RdmaWrite {
                remote_addr: 0xdead_0000,
                rkey: 5,
            },
            &sges,
        )
        .unsignaled(),
        SendWr::new(
            4,
            SendOp::RdmaRead {
                remote_addr: 0xbeef_0000,
                rkey: 6,
            },
            &sges,
        ),
        SendWr::new(
            5,
            SendOp::CompareSwap {
                remote_addr: 0x8000,
                rkey: 7,
                compare: 1,
                swap: 2,
            },
            &one,
        ),
        SendWr::new(
            6,
            SendOp::FetchAdd {
                remote_addr: 0x9000,
                rkey: 8,
                add: 3,
            },
            &one,
        ),
        SendWr::new(
            7,
            SendOp::RdmaWrite {
                remote_addr: 0xabc0,
                rkey: 9,
            },
            &[],
        )
        .inline(&data),
        SendWr::send(8, &[])
            .inline(&data[..3])
            .flags(SendFlags::SOLICITED),
    ];
    for wr in &wrs {
        let prod = k.producer();
        k.write_slot(prod, &[]); // the whole slot 0xa5
        assert_eq!(sq.post(std::slice::from_ref(wr)), Ok(()));
        let bytes = match k.consume() {
            Some(b) => b,
            None => panic!("wr {} not published", wr.wr_id),
        };
        let got = send_wqe(&bytes);
        let want = build_wqe(wr, None, wr.length());
        let member = match wr.op {
            SendOp::Send | SendOp::SendWithImm { .. } => 0,
            SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => 32,
            _ => 16,
        };
        assert_eq!(got.wr.wr[..member], want.wr.wr[..member], "wr {}", wr.wr_id);
        let mut got_rest = got;
        got_rest.wr.wr = want.wr.wr;
        assert_eq!(got_rest.as_bytes(), want.as_bytes(), "wr {}", wr.wr_id);
        match wr.payload {
            Payload::Sges(s) => {
                let written = sges_of(&bytes, s.len());
                for (w, s) in written.iter().zip(s) {
                    assert_eq!((w.addr, w.length, w.lkey), (s.addr, s.length, s.lkey));
                }
            }
            Payload::Inline(d) => assert_eq!(&bytes[SEND_WQE_LEN..SEND_WQE_LEN + d.len()], d),
        }
    }
}
