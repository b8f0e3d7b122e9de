//! rxe's shared rings: the header geometry the kernel writes once, the
//! index words it keeps moving, and the CQEs it copies into the slots.

use uverbs::{abi::IbUverbsWc, fuzzing, ErrorKind, WcFlags};
use zerocopy::{FromBytes, IntoBytes};

/// `struct rxe_queue_buf`: the header before the slots.
const HEADER: usize = 384;
const PRODUCER: usize = 128;
const CONSUMER: usize = 256;

fn word(ring: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = ring.get(at..at + 4) {
        w.copy_from_slice(s);
    }
    u32::from_ne_bytes(w)
}

/// A ring of `slots` slots of `1 << log2` bytes with the given indices.
fn ring(log2: u32, slots: u32, prod: u32, cons: u32, slot: impl Fn(u32) -> Vec<u8>) -> Vec<u8> {
    let stride = 1usize << log2;
    let mut r = vec![0u8; HEADER + slots as usize * stride];
    r[0..4].copy_from_slice(&log2.to_ne_bytes());
    r[4..8].copy_from_slice(&(slots - 1).to_ne_bytes());
    r[PRODUCER..PRODUCER + 4].copy_from_slice(&prod.to_ne_bytes());
    r[CONSUMER..CONSUMER + 4].copy_from_slice(&cons.to_ne_bytes());
    for i in 0..slots {
        let bytes = slot(i);
        let at = HEADER + i as usize * stride;
        let n = bytes.len().min(stride);
        r[at..at + n].copy_from_slice(&bytes[..n]);
    }
    r
}

/// The first input byte: bit 0 picks the consumer side (a CQ) or the
/// producer side (SQ/RQ/SRQ); bit 1 normalises the geometry to a valid one
/// (`log2_elem_size` 6..=9 from bits 2..4, 1..=16 slots from bits 4..8,
/// the mapping cut or padded to fit) so that the index and slot handling
/// run far more often than random headers allow. The rest is the mapping.
pub fn rxe_ring(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut ring = rest.to_vec();
    if mode & 2 != 0 {
        let log2 = 6 + u32::from((mode >> 2) & 3);
        let slots = 1u32 << ((mode >> 4) % 5);
        ring.resize(HEADER + ((slots as usize) << log2), 0);
        ring[0..4].copy_from_slice(&log2.to_ne_bytes());
        ring[4..8].copy_from_slice(&(slots - 1).to_ne_bytes());
    }
    let log2 = word(&ring, 0);
    let mask = word(&ring, 4);
    let fits = |stride_needed: usize| {
        // What every accepted geometry must satisfy (the mapping holds the
        // header and every slot; slots hold an element).
        let slots = u64::from(mask) + 1;
        assert!(ring.len() >= HEADER && (6..=16).contains(&log2));
        assert!(slots.is_power_of_two());
        assert!(HEADER as u64 + (slots << log2) <= ring.len() as u64);
        assert!(1usize << log2 >= stride_needed);
    };
    let prod = word(&ring, PRODUCER) & mask;
    let cons = word(&ring, CONSUMER) & mask;
    if mode & 1 == 0 {
        let batches: Vec<usize> = [1, 0, 3, 16, 64, 1]
            .iter()
            .map(|&b| b + usize::from(mode >> 5))
            .collect();
        match fuzzing::rxe_cq_poll(&ring, &batches) {
            Ok(polls) => {
                fits(size_of::<IbUverbsWc>());
                let waiting = prod.wrapping_sub(cons) & mask;
                let mut index = cons;
                let mut total = 0u64;
                for (wcs, &n) in polls.iter().zip(&batches) {
                    assert!(wcs.len() <= n, "{} completions into {n} slots", wcs.len());
                    for wc in wcs {
                        // The completion is the CQE of the next slot.
                        let at = HEADER + ((index as usize) << log2);
                        let cqe = IbUverbsWc::read_from_prefix(&ring[at..])
                            .expect("a slot holds a CQE")
                            .0;
                        assert_eq!(wc.wr_id, cqe.wr_id, "slot {index} skipped or reread");
                        assert_eq!((wc.status.0, wc.opcode.0), (cqe.status, cqe.opcode));
                        let flags = WcFlags::from_bits_retain(cqe.wc_flags);
                        assert_eq!(wc.wc_flags, flags);
                        let imm = if flags.contains(WcFlags::WITH_INVALIDATE) {
                            cqe.ex
                        } else {
                            u32::from_be(cqe.ex)
                        };
                        assert_eq!(wc.imm_data, imm);
                        index = index.wrapping_add(1) & mask;
                    }
                    total += wcs.len() as u64;
                }
                let room: u64 = batches.iter().map(|&b| b as u64).sum();
                assert_eq!(
                    total,
                    u64::from(waiting).min(room),
                    "completions lost or invented"
                );
            }
            Err(e) => assert_eq!(e.kind(), ErrorKind::Malformed, "{e}"),
        }
    } else {
        let min_slot = usize::from(mode >> 2) * 8;
        match fuzzing::rxe_producer_fill(&ring, min_slot, mode) {
            Ok(published) => {
                fits(min_slot);
                let free = mask - (prod.wrapping_sub(cons) & mask);
                assert_eq!(
                    published as u64,
                    u64::from(free),
                    "the ring is full at the wrong place"
                );
            }
            Err(e) => assert_eq!(e.kind(), ErrorKind::Malformed, "{e}"),
        }
    }
}

pub fn rxe_ring_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let cqe = |i: u32| {
        let wc = IbUverbsWc {
            wr_id: 0x1000 + u64::from(i),
            opcode: 128, // IB_WC_RECV
            byte_len: 64,
            qp_num: 0x11,
            ex: 0x0102_0304,
            wc_flags: if i.is_multiple_of(2) { 2 } else { 0 }, // WITH_IMM
            ..Default::default()
        };
        wc.as_bytes().to_vec()
    };
    let with = |mode: u8, r: Vec<u8>| {
        let mut v = vec![mode];
        v.extend(r);
        v
    };
    vec![
        ("cq-3-waiting", with(0, ring(7, 8, 5, 2, cqe))),
        ("cq-wrapped", with(0, ring(7, 4, 1, 3, cqe))),
        ("cq-empty", with(0, ring(6, 16, 9, 9, cqe))),
        (
            "sq-half-full",
            with(1 | (8 << 2), ring(7, 8, 6, 2, |_| Vec::new())),
        ),
        ("srq-full", with(1, ring(6, 4, 2, 3, |_| Vec::new()))),
        ("normalised", vec![0b0101_0110, 0, 0]),
    ]
}
