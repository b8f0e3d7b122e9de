//! The wire formats: what a pingpong or rping peer sends over the network,
//! decoded by the CLI's own code (see `crate::pingpong_wire`), and the
//! library's `Endpoint` encoding a program sends its peer.

use uverbs::Gid;

use crate::{
    pingpong_wire::{decode, encode, gid_to_wire, wire_to_gid, Dest, WireError, MSG_LEN},
    rping_wire::{ping_data, RdmaInfo, INFO_LEN},
};

/// A peer's pingpong address message (rdma-core's
/// `"%04x:%06x:%06x:%s"` in 52 bytes, NUL included): decoded or refused
/// with an error that says what is wrong, never a panic; what decodes and
/// fits the format's field widths encodes back to the same address.
pub fn pingpong_wire(data: &[u8]) {
    match decode(data) {
        Ok(d) => {
            if d.lid <= 0xffff && d.qpn <= 0xff_ffff && d.psn <= 0xff_ffff {
                let msg = encode(&d);
                assert_eq!(msg.len(), MSG_LEN);
                assert_eq!(decode(&msg), Ok(d), "the address does not round-trip");
            }
        }
        Err(e) => {
            let text = e.to_string();
            assert!(text.starts_with("the peer's"), "{text}");
            if let WireError::NotText { at } = e {
                assert!(at < data.len());
            }
        }
    }
    // The GID field alone, as text.
    let text = String::from_utf8_lossy(data);
    if let Ok(g) = wire_to_gid(&text) {
        assert_eq!(
            gid_to_wire(&g).as_bytes(),
            text.as_bytes()[..32].to_ascii_lowercase()
        );
        assert_eq!(wire_to_gid(&gid_to_wire(&g)), Ok(g));
    }
    let mut raw = [0u8; 16];
    let n = data.len().min(16);
    raw[..n].copy_from_slice(&data[..n]);
    let d = Dest {
        lid: u32::from(raw[0]),
        qpn: u32::from(raw[1]) << 8,
        psn: u32::from(raw[2]),
        gid: Gid(raw),
    };
    assert_eq!(decode(&encode(&d)), Ok(d));
}

pub fn pingpong_wire_seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "rdma-core-roce",
            b"0000:000011:abcdef:00000000000000000000ffffc0000201\0".to_vec(),
        ),
        (
            "rdma-core-ib",
            b"00a1:0000ff:000001:fe800000000000000002c90300a1b2c3\0".to_vec(),
        ),
        (
            "srq-zeros",
            b"0000:000000:000000:00000000000000000000000000000000\0".to_vec(),
        ),
        (
            "defect-6-multibyte-gid",
            b"0000:000011:abcdef:0000000\xc3\xa90000000000000000000000000\0".to_vec(),
        ),
    ]
}

/// `uverbs::Endpoint`'s byte encoding, as a peer sends it: decoded or
/// refused as InvalidArgument with a reason, never a panic; what decodes
/// encodes back to the same first 36 bytes (with version 1's length) and
/// decodes again to the same endpoint.
pub fn endpoint(data: &[u8]) {
    match uverbs::Endpoint::decode(data) {
        Ok(e) => {
            let b = e.encode();
            assert_eq!(b.len(), uverbs::Endpoint::ENCODED_LEN);
            // Bytes 6..8 are written zero and ignored when read.
            assert_eq!(&b[2..6], &data[2..6], "fields move");
            assert_eq!(&b[6..8], &[0, 0]);
            assert_eq!(&b[8..], &data[8..b.len()], "fields move");
            assert_eq!(b[..2], [1, 36]);
            assert_eq!(uverbs::Endpoint::decode(&b), Ok(e));
        }
        Err(e) => {
            assert_eq!(e.kind(), uverbs::ErrorKind::InvalidArgument, "{e:#}");
            assert!(e.detail().is_some(), "{e:#}");
        }
    }
}

pub fn endpoint_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut e = uverbs::Endpoint::new(0x11, 0xab_cdef, Gid([0; 16]));
    e.gid.0[10..].copy_from_slice(&[0xff, 0xff, 192, 0, 2, 1]);
    let v1 = e.encode().to_vec();
    let mut longer = v1.clone();
    longer[1] = 40;
    longer.extend_from_slice(&[1, 2, 3, 4]);
    vec![("v1-roce", v1), ("v1-longer", longer)]
}

/// rping's `struct rping_rdma_info` (16 bytes, any value valid: it
/// round-trips exactly) and the ping text in a buffer the peer filled
/// (the bytes before the first NUL).
pub fn rping_wire(data: &[u8]) {
    let mut b = [0u8; INFO_LEN];
    let n = data.len().min(INFO_LEN);
    b[..n].copy_from_slice(&data[..n]);
    let info = RdmaInfo::decode(&b);
    assert_eq!(info.encode(), b);
    let text = ping_data(data);
    assert!(text.len() <= data.len() && !text.contains(&0));
    assert_eq!(text, &data[..text.len()]);
    assert!(text.len() == data.len() || data[text.len()] == 0);
}

pub fn rping_wire_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let info = RdmaInfo {
        addr: 0x7f00_1234_5000,
        rkey: 0x1234,
        size: 64,
    };
    let mut ping = b"rdma-ping-0: ABCDEFGHIJKLMNOP".to_vec();
    ping.push(0);
    vec![("rdma-info", info.encode().to_vec()), ("ping-text", ping)]
}
