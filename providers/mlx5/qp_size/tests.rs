//! The sizing against values worked out by hand from libmlx5's formulas
//! (rdma-core 44 `providers/mlx5/verbs.c`), on the limits of the device
//! model's context (`max_sq_desc_sz` 1024, `max_rq_desc_sz` 512,
//! `max_send_wqebb` and `max_recv_wr` 2^15), boundaries included. Every
//! row was also checked against libmlx5 itself on the model
//! (`preload/tests/qp_sizing.c`, `scripts/qp-sizing.sh`), where the rows
//! that succeed here are created (raw packet ones refused by the model).

use super::*;

const LIM: QpLimits = QpLimits {
    max_sq_desc_sz: 1024,
    max_rq_desc_sz: 512,
    max_send_wqebb: 1 << 15,
    max_recv_wr: 1 << 15,
};

fn cap(send: u32, recv: u32, ssge: u32, rsge: u32, inline: u32) -> QpCap {
    QpCap {
        max_send_wr: send,
        max_recv_wr: recv,
        max_send_sge: ssge,
        max_recv_sge: rsge,
        max_inline_data: inline,
    }
}

/// `(type, srq, ops, asked, Some(reported) | None for EINVAL)`.
type Row = (QpType, bool, Option<u64>, QpCap, Option<QpCap>);

fn rows() -> Vec<Row> {
    use QpType::{RawPacket as Raw, Rc, Uc, Ud};
    vec![
        // RC overhead: ctrl + UMR ctrl + mkey context + 64 (memory window
        // binds, in the default operations) = 192. 1 SGE: 208 -> a 256-byte
        // WQE, inline 256 - 192 - 4 = 60, 1 post in 4 WQEBBs. RQ: 16-byte
        // WQEs, 1 rounded up to 64 bytes = 4 WQEs.
        (
            Rc,
            false,
            None,
            cap(1, 1, 1, 1, 0),
            Some(cap(1, 4, 1, 1, 60)),
        ),
        // inline 64: 192 + align(68, 16) = 272 > 192 + 4 * 16 -> 320;
        // 16 * 320 = 5120 -> 8192 bytes, 8192 / 320 = 25 posts, inline 124.
        (
            Rc,
            false,
            None,
            cap(16, 16, 4, 4, 64),
            Some(cap(25, 16, 4, 4, 124)),
        ),
        // (1024 - 192) / 16 = 52 SGEs at most; 52 fill 1024 bytes.
        (
            Rc,
            false,
            None,
            cap(16, 16, 52, 4, 0),
            Some(cap(16, 16, 52, 4, 828)),
        ),
        (Rc, false, None, cap(16, 16, 53, 4, 0), None),
        // 192 + align(4 + 828, 16) = 1024; 829 makes 1040.
        (
            Rc,
            false,
            None,
            cap(16, 16, 1, 1, 828),
            Some(cap(16, 16, 1, 1, 828)),
        ),
        (Rc, false, None, cap(16, 16, 1, 1, 829), None),
        // 8192 * 256 bytes = 2^15 WQEBBs, the device's most; 8193 needs 2^16.
        (
            Rc,
            false,
            None,
            cap(8192, 1, 1, 1, 0),
            Some(cap(8192, 4, 1, 1, 60)),
        ),
        (Rc, false, None, cap(8193, 1, 1, 1, 0), None),
        // max_recv_wr up to the context's 2^15.
        (
            Rc,
            false,
            None,
            cap(1, 1 << 15, 1, 1, 0),
            Some(cap(1, 1 << 15, 1, 1, 60)),
        ),
        (Rc, false, None, cap(1, (1 << 15) + 1, 1, 1, 0), None),
        // 32 SGEs fill a 512-byte receive WQE; 33 do not fit.
        (
            Rc,
            false,
            None,
            cap(1, 1, 1, 32, 0),
            Some(cap(1, 1, 1, 32, 60)),
        ),
        (Rc, false, None, cap(1, 1, 1, 33, 0), None),
        // No send queue: nothing of the send side is checked, the inline
        // size is reported as asked.
        (
            Rc,
            false,
            None,
            cap(0, 1, 100, 1, 5000),
            Some(cap(0, 4, 100, 1, 5000)),
        ),
        // No receive queue.
        (
            Rc,
            false,
            None,
            cap(1, 0, 1, 100, 0),
            Some(cap(1, 0, 1, 0, 60)),
        ),
        // On an SRQ: max_recv_wr is still checked, then there is no RQ.
        (Rc, true, None, cap(1, 40000, 1, 100, 0), None),
        (
            Rc,
            true,
            None,
            cap(1, 5, 1, 100, 0),
            Some(cap(1, 0, 1, 0, 60)),
        ),
        // The C arithmetic: 192 + align(4 + 0xffffffff, 16) = 0x1000000d0,
        // 208 as an int; 0x7fffffff gives a negative int. Both: 256-byte WQEs.
        (
            Rc,
            false,
            None,
            cap(1, 1, 1, 1, u32::MAX),
            Some(cap(1, 4, 1, 1, 60)),
        ),
        (
            Rc,
            false,
            None,
            cap(1, 1, 1, 1, 0x7fff_ffff),
            Some(cap(1, 4, 1, 1, 60)),
        ),
        // 16 * (2^28 + 1) as a uint32_t is 16: one SGE.
        (
            Rc,
            false,
            None,
            cap(1, 1, 1, (1 << 28) + 1, 0),
            Some(cap(1, 4, 1, 1, 60)),
        ),
        // 0x7fffffff / 1024 = 2097151 passes the overflow check and needs
        // 2^23 WQEBBs; one more fails the check.
        (Rc, false, None, cap(2_097_151, 1, 1, 1, 0), None),
        (Rc, false, None, cap(2_097_152, 1, 1, 1, 0), None),
        (Rc, false, None, cap(u32::MAX, 1, 1, 1, 0), None),
        // SEND only: overhead 16, (1024 - 16) / 16 = 63 SGEs, inline up
        // to 1024 - 16 - 4.
        (
            Rc,
            false,
            Some(1 << 2),
            cap(16, 16, 63, 4, 0),
            Some(cap(16, 16, 63, 4, 1004)),
        ),
        (Rc, false, Some(1 << 2), cap(16, 16, 64, 4, 0), None),
        (
            Rc,
            false,
            Some(1 << 2),
            cap(16, 16, 1, 1, 1004),
            Some(cap(16, 16, 1, 1, 1004)),
        ),
        (Rc, false, Some(1 << 2), cap(16, 16, 1, 1, 1005), None),
        // RDMA WRITE: ctrl + raddr = 32, 62 SGEs.
        (
            Rc,
            false,
            Some(1 << 0),
            cap(16, 16, 62, 4, 0),
            Some(cap(16, 16, 62, 4, 988)),
        ),
        // Atomics: ctrl + raddr + atomic = 48, 61 SGEs; 60 make 1008 -> 1024.
        (
            Rc,
            false,
            Some(0x60),
            cap(16, 16, 60, 4, 0),
            Some(cap(16, 16, 60, 4, 972)),
        ),
        (
            Rc,
            false,
            Some(0x60),
            cap(16, 16, 61, 4, 0),
            Some(cap(16, 16, 61, 4, 972)),
        ),
        // UC: RC's default operations, RC's overhead.
        (
            Uc,
            false,
            None,
            cap(16, 16, 52, 4, 0),
            Some(cap(16, 16, 52, 4, 828)),
        ),
        (Uc, false, None, cap(16, 16, 53, 4, 0), None),
        // UD: ctrl + datagram = 64: 60 SGEs, inline up to 956.
        (
            Ud,
            false,
            None,
            cap(16, 16, 60, 4, 0),
            Some(cap(16, 16, 60, 4, 956)),
        ),
        (Ud, false, None, cap(16, 16, 61, 4, 0), None),
        (
            Ud,
            false,
            None,
            cap(16, 16, 1, 1, 956),
            Some(cap(16, 16, 1, 1, 956)),
        ),
        (Ud, false, None, cap(16, 16, 1, 1, 957), None),
        // 64 + 15 * 16 = 304 -> 320; 4096 * 320 -> 2 MiB = 2^15 WQEBBs,
        // 2 MiB / 320 = 6553 posts; 240 -> 256-byte receive WQEs, 16 SGEs.
        (
            Ud,
            false,
            None,
            cap(4096, 4096, 15, 15, 0),
            Some(cap(6553, 4096, 15, 16, 252)),
        ),
        // Raw packet: ctrl + eth segment (32) = 48, 61 SGEs.
        (
            Raw,
            false,
            None,
            cap(16, 16, 1, 1, 0),
            Some(cap(16, 16, 1, 1, 12)),
        ),
        (
            Raw,
            false,
            None,
            cap(16, 16, 61, 1, 0),
            Some(cap(16, 16, 61, 1, 972)),
        ),
        (Raw, false, None, cap(16, 16, 62, 1, 0), None),
    ]
}

#[test]
fn capacities_are_accepted_refused_and_reported_as_libmlx5_does() {
    for (i, (t, srq, ops, asked, want)) in rows().into_iter().enumerate() {
        let ops = ops.map(SendOpsFlags::from_bits_retain);
        let got = geometry(t, &asked, srq, ops, &LIM);
        match (got, want) {
            (Ok(g), Some(w)) => assert_eq!(g.cap, w, "row {i}: {t} {asked:?}"),
            (Err(e), None) => {
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "row {i}: {e}");
                assert_eq!(e.errno(), crate::sys::Errno::EINVAL, "row {i}");
            }
            (got, want) => panic!("row {i}: {t} {asked:?}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn the_queues_sit_where_libmlx5_puts_them() {
    // RC (16, 16, 4, 4, 64): RQ 16 * 64 = 1024 bytes first, then 128
    // WQEBBs of SQ.
    let g = geometry(QpType::Rc, &cap(16, 16, 4, 4, 64), false, None, &LIM).unwrap();
    assert_eq!((g.rq_wqe_cnt, g.rq_wqe_shift), (16, 6));
    assert_eq!(
        (
            g.sq.offset,
            g.sq.wqe_cnt,
            g.sq.max_post,
            g.sq.max_gs,
            g.sq.max_inline
        ),
        (1024, 128, 25, 4, 124)
    );
    assert_eq!(g.buf_len, 1024 + 128 * 64);
    assert!(!g.separate_sq);
    // On an SRQ the SQ starts the buffer.
    let g = geometry(QpType::Rc, &cap(1, 8, 1, 1, 0), true, None, &LIM).unwrap();
    assert_eq!((g.rq_wqe_cnt, g.sq.offset), (0, 0));
    // Raw packet: the SQ is a buffer of its own (`sq_buf_addr`), here
    // from the next page of the same allocation.
    let g = geometry(QpType::RawPacket, &cap(16, 16, 1, 1, 0), false, None, &LIM).unwrap();
    assert!(g.separate_sq);
    assert_eq!((g.sq.offset, g.sq.wqe_cnt), (4096, 16));
    assert_eq!(g.buf_len, 4096 + 16 * 64);
}

#[test]
fn types_the_provider_does_not_create_are_named() {
    let e = geometry(QpType::XrcIni, &cap(1, 1, 1, 1, 0), false, None, &LIM).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnsupportedProvider, "{e}");
    let e = geometry(QpType::Other(7), &cap(1, 1, 1, 1, 0), false, None, &LIM).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn the_c_helpers_compute_what_util_h_does() {
    assert_eq!(roundup_pow_of_two(1), 1);
    assert_eq!(roundup_pow_of_two(3), 4);
    assert_eq!(roundup_pow_of_two(4096), 4096);
    assert_eq!(roundup_pow_of_two(0), 1, "x86-64's shift by 64");
    assert_eq!((ilog32(0), ilog32(1), ilog32(15), ilog32(16)), (0, 1, 4, 5));
    assert_eq!(align(68, 16), 80);
    assert_eq!(align(0x1_0000_0003, 16), 0x1_0000_0010);
}
