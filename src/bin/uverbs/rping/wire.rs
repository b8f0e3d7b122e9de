//! What rping peers send each other (`librdmacm/examples/rping.c`): the
//! `struct rping_rdma_info` SENT to name a buffer, and the ping text in the
//! buffers the peer RDMA-reads or RDMA-writes. Everything here comes from
//! the peer, so nothing here may panic on its bytes.

/// `sizeof(struct rping_rdma_info)`.
pub const INFO_LEN: usize = 16;

/// `struct rping_rdma_info {__be64 buf; __be32 rkey; __be32 size}`: the
/// buffer a peer offers to RDMA READ from or WRITE to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RdmaInfo {
    /// The buffer's address.
    pub addr: u64,
    /// Its rkey.
    pub rkey: u32,
    /// Its length in bytes (the receiver clamps it to its own buffer).
    pub size: u32,
}

impl RdmaInfo {
    /// The message bytes (big-endian fields, as the C tool sends them).
    pub fn encode(&self) -> [u8; INFO_LEN] {
        let mut b = [0u8; INFO_LEN];
        b[0..8].copy_from_slice(&self.addr.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b
    }

    /// A received message (any 16 bytes are a valid one).
    pub fn decode(b: &[u8; INFO_LEN]) -> Self {
        let (mut addr, mut rkey, mut size) = ([0u8; 8], [0u8; 4], [0u8; 4]);
        addr.copy_from_slice(&b[0..8]);
        rkey.copy_from_slice(&b[8..12]);
        size.copy_from_slice(&b[12..16]);
        RdmaInfo {
            addr: u64::from_be_bytes(addr),
            rkey: u32::from_be_bytes(rkey),
            size: u32::from_be_bytes(size),
        }
    }
}

/// The ping text in a buffer the peer filled: the bytes before the first
/// NUL, or the whole buffer when the peer sent none (the C tool's `strlen`
/// would run past its end).
pub fn ping_data(buf: &[u8]) -> &[u8] {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    &buf[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdma_info_is_big_endian_on_the_wire() {
        let i = RdmaInfo {
            addr: 0x0102_0304_0506_0708,
            rkey: 0x0a0b_0c0d,
            size: 64,
        };
        let b = i.encode();
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 0, 0, 0, 64]);
        assert_eq!(RdmaInfo::decode(&b), i);
    }

    #[test]
    fn ping_data_stops_at_the_nul_or_the_end() {
        assert_eq!(ping_data(b"rdma-ping-0: AB\0junk"), b"rdma-ping-0: AB");
        assert_eq!(ping_data(b"no terminator"), b"no terminator");
        assert_eq!(ping_data(b""), b"");
    }
}
