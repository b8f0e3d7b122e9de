//! Memory regions over buffers the program allocated
//! (`ProtectionDomain::register_owned`), against the real kernel: rxe
//! writes and reads a `Vec<u8>`, a `Box<[u8]>` and an anonymous
//! `memmap2::MmapMut` through their registrations, and the data is in the
//! buffer when the region gives it back.

use memmap2::MmapMut;
use uverbs::{
    CompletionQueue, MemoryRegion, OwnedMemoryRegion, QueuePair, RecvWr, RegionBuffer, SendOp,
    SendWr, WcOpcode, WcStatus,
};

use crate::support::*;

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 13 % 251) as u8).collect()
}

/// RDMA-writes `data` from `src` (offset 0) to `dst_addr` under `rkey`.
fn rdma_write(
    qp: &mut QueuePair,
    cq: &mut CompletionQueue,
    src: &MemoryRegion,
    data: &[u8],
    dst_addr: u64,
    rkey: u32,
) {
    src.write(0, data).unwrap();
    qp.post_send(&[SendWr::new(
        7,
        SendOp::RdmaWrite {
            remote_addr: dst_addr,
            rkey,
        },
        &[src.sge(0, data.len() as u32).unwrap()],
    )])
    .unwrap();
    let s = wait(cq, 1);
    assert_eq!(
        (s[0].status, s[0].opcode),
        (WcStatus::SUCCESS, WcOpcode::RDMA_WRITE),
        "{s:?}"
    );
}

/// Writes 5000 bytes at offset 3 of `dst` (an owned region of at least 5003
/// bytes), checks them through the region's copy, and returns the buffer.
fn write_into<B: RegionBuffer>(
    p: &mut Pair,
    src: &MemoryRegion,
    dst: OwnedMemoryRegion<B>,
    data: &[u8],
) -> B {
    rdma_write(&mut p.a, &mut p.cq_a, src, data, dst.addr() + 3, dst.rkey());
    let mut got = vec![0u8; data.len()];
    dst.read(3, &mut got).unwrap();
    assert_eq!(got, data, "read through the region");
    dst.into_inner().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn rdma_writes_land_in_an_owned_vec_and_an_anonymous_mapping() {
    let mut p = pair(uverbs::QpType::Rc, 16, 7);
    let src = mr(&p.pd, 8192);
    let data = pattern(5000);

    let v = vec![0u8; 8192];
    let addr = v.as_ptr() as u64;
    let dst = p.pd.register_owned(v, access_all()).unwrap();
    assert_eq!(dst.addr(), addr, "registered where the Vec is");
    let v = write_into(&mut p, &src, dst, &data);
    assert_eq!((v.as_ptr() as u64, v.len()), (addr, 8192));
    assert_eq!(&v[3..5003], &data[..], "in the Vec after into_inner");
    assert!(v[..3].iter().chain(&v[5003..]).all(|&b| b == 0));

    let m = MmapMut::map_anon(3 * 4096).unwrap();
    let addr = m.as_ptr() as u64;
    let dst = p.pd.register_owned(m, access_all()).unwrap();
    assert_eq!(dst.addr(), addr, "registered where the mapping is");
    let m = write_into(&mut p, &src, dst, &data);
    assert_eq!(m.as_ptr() as u64, addr);
    assert_eq!(&m[3..5003], &data[..], "in the mapping after into_inner");
    assert!(m[..3].iter().chain(&m[5003..]).all(|&b| b == 0));
}

#[test]
fn an_owned_buffer_is_read_remotely_and_receives_a_send() {
    let mut p = pair(uverbs::QpType::Rc, 16, 7);
    let local = mr(&p.pd, 4096);

    // RDMA read from an owned Box, written through the region.
    let b: Box<[u8]> = vec![0u8; 100].into_boxed_slice();
    let owned = p.pd.register_owned(b, access_all()).unwrap();
    owned.write(60, b"read me from a Box").unwrap();
    p.a.post_send(&[SendWr::new(
        1,
        SendOp::RdmaRead {
            remote_addr: owned.addr() + 60,
            rkey: owned.rkey(),
        },
        &[local.sge(0, 18).unwrap()],
    )])
    .unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(s[0].status, WcStatus::SUCCESS, "{s:?}");
    let mut got = [0u8; 18];
    local.read(0, &mut got).unwrap();
    assert_eq!(&got, b"read me from a Box");
    drop(owned); // deregistered, then freed

    // A send received into an owned Vec whose length is not a multiple of 8.
    let v = vec![0u8; 45];
    let owned = p.pd.register_owned(v, access_all()).unwrap();
    p.b.post_recv(&[RecvWr::new(2, &[owned.sge(0, 45).unwrap()])])
        .unwrap();
    let msg = pattern(45);
    local.write(0, &msg).unwrap();
    p.a.post_send(&[SendWr::new(3, SendOp::Send, &[local.sge(0, 45).unwrap()])])
        .unwrap();
    wait(&mut p.cq_a, 1);
    let r = wait(&mut p.cq_b, 1);
    assert_eq!((r[0].status, r[0].byte_len), (WcStatus::SUCCESS, 45));
    let v = owned.into_inner().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v, msg, "the received message, in the Vec");
}
