//! Unit tests of the send doorbell: what reaches the doorbell record and the
//! UAR for each kind of batch, observed on memory standing in for the UAR
//! (the device model, `src/testing/mlx5/`, checks the WQEs themselves).

use std::sync::Arc;

use super::{
    buf::QueueBuf,
    sq::{Mlx5Sq, SqGeometry, SqTrack},
    uar::{Bfreg, UarPage},
};
use crate::{
    wr::{Payload, PostErrorKind, SendFlags, SendOp, SendWr, Sge},
    QpType,
};

struct Rig {
    buf: Arc<QueueBuf>,
    page: Arc<UarPage>,
    sq: Mlx5Sq,
}

/// An RC send queue of `wqe_cnt` WQEBBs (128-byte WQEs) on a bfreg at
/// 0x800 with a BlueFlame half of `bf_half` bytes.
fn rig(wqe_cnt: u32, bf_half: usize, shared: bool) -> Rig {
    let buf = Arc::new(QueueBuf::new(wqe_cnt as usize * 64, "test SQ").unwrap());
    let page = Arc::new(UarPage::anonymous(4096));
    let bf =
        Arc::new(Bfreg::new(page.clone(), 0x800, bf_half, shared, 7).expect("inside the page"));
    let g = SqGeometry {
        offset: 0,
        wqe_cnt,
        max_post: wqe_cnt / 2,
        max_gs: 2,
        max_inline: 76,
    };
    let track = Arc::new(SqTrack::new(wqe_cnt));
    let sq = Mlx5Sq::new(buf.clone(), g, 0x12345, QpType::Rc, false, bf, track);
    Rig {
        buf,
        page,
        sq: sq.expect("the geometry fits"),
    }
}

/// The address vectors of these RC queues: none (never called).
fn no_av<'w>(_: &SendWr<'w>) -> Result<&'w super::wqe::Av, PostErrorKind> {
    Err(PostErrorKind::BadDestination("no address handles here"))
}

fn send(payload: Payload<'_>) -> SendWr<'_> {
    SendWr {
        wr_id: 1,
        op: SendOp::Send,
        payload,
        flags: SendFlags::SIGNALED,
        ud: None,
    }
}

fn sq_bytes(r: &Rig, at: usize) -> [u8; 64] {
    r.buf.read::<64>(at).unwrap()
}

fn uar(r: &Rig, at: usize) -> [u8; 8] {
    r.page.load64(at).unwrap()
}

#[test]
fn a_single_inline_wqe_goes_by_blueflame_and_the_half_toggles() {
    let mut r = rig(8, 256, false);
    let data = [0x5au8; 20];
    r.sq.post(&[send(Payload::Inline(&data))], no_av).unwrap();
    // Counted in WQEBBs: one 48-byte WQE is one basic block.
    assert_eq!(r.buf.dbrec_value(1), 1);
    // The whole basic block was copied, 8 bytes at a time, in order.
    let wqe = sq_bytes(&r, 0);
    for w in 0..8 {
        assert_eq!(uar(&r, 0x800 + 8 * w), wqe[8 * w..8 * w + 8], "word {w}");
    }
    // The second ring uses the other half: an SGE send (not inline) rings
    // with 8 bytes there.
    let sge = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 3,
    }];
    r.sq.post(&[send(Payload::Sges(&sge))], no_av).unwrap();
    assert_eq!(r.buf.dbrec_value(1), 2);
    let second = sq_bytes(&r, 64);
    assert_eq!(uar(&r, 0x900), second[..8]);
    assert_eq!(uar(&r, 0x908), [0; 8], "8-byte doorbells copy nothing else");
    // And the third is back on the first half.
    r.sq.post(&[send(Payload::Sges(&sge))], no_av).unwrap();
    assert_eq!(uar(&r, 0x800), sq_bytes(&r, 128)[..8]);
}

#[test]
fn a_batch_rings_once_with_the_last_wqe() {
    let mut r = rig(16, 256, false);
    let data = [1u8; 8];
    let wrs = [
        send(Payload::Inline(&data)),
        send(Payload::Inline(&data)),
        send(Payload::Inline(&data)),
    ];
    r.sq.post(&wrs, no_av).unwrap();
    assert_eq!(r.buf.dbrec_value(1), 3);
    // No BlueFlame for a batch: the last WQE's first 8 bytes.
    assert_eq!(uar(&r, 0x800), sq_bytes(&r, 128)[..8]);
    assert_eq!(uar(&r, 0x808), [0; 8]);
    // Its ctrl segment carries WQE index 2 (bytes 1..3: pi, big-endian).
    assert_eq!(&sq_bytes(&r, 128)[1..3], &[0, 2]);
}

#[test]
fn without_blueflame_every_ring_is_eight_bytes_on_one_register() {
    let mut r = rig(8, 0, false);
    let data = [7u8; 30];
    r.sq.post(&[send(Payload::Inline(&data))], no_av).unwrap();
    assert_eq!(uar(&r, 0x800), sq_bytes(&r, 0)[..8]);
    assert_eq!(uar(&r, 0x808), [0; 8]);
    r.sq.post(&[send(Payload::Inline(&data))], no_av).unwrap();
    assert_eq!(uar(&r, 0x800), sq_bytes(&r, 64)[..8], "same register again");
}

#[test]
fn an_inline_wqe_larger_than_the_blueflame_half_rings_eight_bytes() {
    let mut r = rig(8, 64, false);
    let data = [9u8; 70]; // 4 + 70 bytes inline: 16 + 80 = 96 > 64
    r.sq.post(&[send(Payload::Inline(&data))], no_av).unwrap();
    assert_eq!(r.buf.dbrec_value(1), 2, "two basic blocks");
    assert_eq!(uar(&r, 0x800), sq_bytes(&r, 0)[..8]);
    assert_eq!(uar(&r, 0x808), [0; 8]);
}

#[test]
fn a_failure_mid_batch_rings_the_requests_before_it() {
    let mut r = rig(8, 256, true);
    let sges = [Sge::default(); 3];
    let data = [1u8; 4];
    let wrs = [send(Payload::Inline(&data)), send(Payload::Sges(&sges))];
    let err = r.sq.post(&wrs, no_av).unwrap_err();
    assert_eq!(err.0, 1);
    assert!(matches!(
        err.1,
        PostErrorKind::TooManySges { given: 3, max: 2 }
    ));
    assert_eq!(r.buf.dbrec_value(1), 1);
    // One WQE in the batch: BlueFlame (under the shared bfreg's lock).
    assert_eq!(uar(&r, 0x800), sq_bytes(&r, 0)[..8]);
    // Nothing of the refused request reached the queue.
    assert_eq!(sq_bytes(&r, 64), [0; 64]);
}

#[test]
fn a_full_queue_is_refused_before_anything_is_written() {
    let mut r = rig(4, 0, false); // 2 posts of 128-byte WQEs
    let data = [1u8; 4];
    let wrs = [
        send(Payload::Inline(&data)),
        send(Payload::Inline(&data)),
        send(Payload::Inline(&data)),
    ];
    let err = r.sq.post(&wrs, no_av).unwrap_err();
    assert_eq!(err.0, 2);
    assert!(matches!(err.1, PostErrorKind::QueueFull));
    assert_eq!(r.buf.dbrec_value(1), 2);
    assert_eq!(sq_bytes(&r, 128), [0; 64]);
}

#[test]
fn inline_data_wraps_from_the_end_of_the_queue_to_its_start() {
    let mut r = rig(4, 0, false);
    let small = [1u8; 4];
    // Three one-block WQEs, completed by hand so the queue has room.
    for i in 0..3 {
        r.sq.post(&[send(Payload::Inline(&small))], no_av).unwrap();
        r.sq.track().complete(i);
    }
    // The next WQE starts in the last block and takes two: its inline bytes
    // continue at the start of the queue.
    let data: Vec<u8> = (0..70).collect();
    r.sq.post(&[send(Payload::Inline(&data))], no_av).unwrap();
    assert_eq!(r.buf.dbrec_value(1), 5);
    let last = sq_bytes(&r, 192);
    // ctrl (16) | inline header (4) + 12 data bytes | 16 | 16
    assert_eq!(&last[20..32], &data[..12]);
    assert_eq!(&last[32..64], &data[12..44]);
    let first = sq_bytes(&r, 0);
    assert_eq!(&first[..26], &data[44..70], "the rest wrapped to the start");
}

#[test]
fn empty_sges_take_no_segment_and_nothing_is_written_past_the_wqes_room() {
    // 128-byte WQEs (RC, two SGEs), two posts: each WQE may use its own
    // two blocks and nothing else.
    let mut r = rig(4, 0, false);
    let sge = |addr: u64, length: u32| Sge {
        addr,
        length,
        lkey: 0x77,
    };
    // Empty, then full: the full SGE takes the first data segment.
    let a = [sge(0x1000, 0), sge(0x2000, 8)];
    // Both empty: a WQE of the ctrl segment alone.
    let b = [sge(0x3000, 0), sge(0x4000, 0)];
    r.sq.post(&[send(Payload::Sges(&a)), send(Payload::Sges(&b))], no_av)
        .unwrap();
    let first = sq_bytes(&r, 0);
    assert_eq!(first[7] & 0x3f, 2, "ctrl + one data segment");
    // The data segment: byte count, lkey, address (big-endian).
    assert_eq!(&first[16..20], &8u32.to_be_bytes());
    assert_eq!(&first[20..24], &0x77u32.to_be_bytes());
    assert_eq!(&first[24..32], &0x2000u64.to_be_bytes());
    // The second WQE is one block after the first (2 units fit one block).
    let second = sq_bytes(&r, 64);
    assert_eq!(&second[1..3], &[0, 1], "WQE index 1 in the next block");
    assert_eq!(second[7] & 0x3f, 1, "the ctrl segment alone");
    assert_eq!(r.buf.dbrec_value(1), 2);
    // Nothing past the two WQEs' blocks: an empty SGE's segment may be
    // written in its WQE's room (to be written over), never beyond.
    assert_eq!(sq_bytes(&r, 128), [0; 64]);
    assert_eq!(sq_bytes(&r, 192), [0; 64]);
}
