//! Socket addresses as the rdma_cm ABI carries them: `struct sockaddr_in`
//! (16 bytes) and `struct sockaddr_in6` (28 bytes) inside a 128-byte
//! `__kernel_sockaddr_storage`, with the port and the IPv4 address in
//! network byte order and the family in host order (`AF_INET` 2, `AF_INET6`
//! 10). `AF_IB` (27) addresses are recognised but not decoded.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::abi;

/// `AF_INET`.
pub(crate) const AF_INET: u16 = 2;
/// `AF_INET6`.
pub(crate) const AF_INET6: u16 = 10;

#[cfg(test)]
pub(crate) const AF_IB: u16 = 27;

/// Encodes `addr` as raw sockaddr bytes; returns the storage and the
/// address size the kernel checks (`addr_size`, `src_size`, `dst_size`).
pub(crate) fn encode(addr: &SocketAddr) -> (abi::KernelSockaddrStorage, u16) {
    let mut raw = [0u8; 128];
    let size = encode_into(addr, &mut raw);
    let mut s = abi::KernelSockaddrStorage {
        ss_family: u16::from_ne_bytes([raw[0], raw[1]]),
        data: [0; 126],
    };
    s.data.copy_from_slice(&raw[2..]);
    (s, size)
}

/// Writes the sockaddr into `out` (at least 28 bytes); returns its size.
pub(crate) fn encode_into(addr: &SocketAddr, out: &mut [u8]) -> u16 {
    match addr {
        SocketAddr::V4(a) => {
            out[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
            out[2..4].copy_from_slice(&a.port().to_be_bytes());
            out[4..8].copy_from_slice(&a.ip().octets());
            16
        }
        SocketAddr::V6(a) => {
            out[0..2].copy_from_slice(&AF_INET6.to_ne_bytes());
            out[2..4].copy_from_slice(&a.port().to_be_bytes());
            out[4..8].copy_from_slice(&a.flowinfo().to_be_bytes());
            out[8..24].copy_from_slice(&a.ip().octets());
            out[24..28].copy_from_slice(&a.scope_id().to_ne_bytes());
            28
        }
    }
}

/// Decodes raw sockaddr bytes (`AF_INET`, `AF_INET6`); `None` for other
/// families (unbound: family 0; `AF_IB`) or short buffers.
pub(crate) fn decode(raw: &[u8]) -> Option<SocketAddr> {
    if raw.len() < 2 {
        return None;
    }
    let family = u16::from_ne_bytes([raw[0], raw[1]]);
    match family {
        AF_INET if raw.len() >= 8 => {
            let port = u16::from_be_bytes([raw[2], raw[3]]);
            let ip = Ipv4Addr::new(raw[4], raw[5], raw[6], raw[7]);
            Some(SocketAddr::V4(SocketAddrV4::new(ip, port)))
        }
        AF_INET6 if raw.len() >= 28 => {
            let port = u16::from_be_bytes([raw[2], raw[3]]);
            let flow = u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]);
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&raw[8..24]);
            let scope = u32::from_ne_bytes([raw[24], raw[25], raw[26], raw[27]]);
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                port,
                flow,
                scope,
            )))
        }
        _ => None,
    }
}

/// Decodes a `__kernel_sockaddr_storage`.
pub(crate) fn decode_storage(s: &abi::KernelSockaddrStorage) -> Option<SocketAddr> {
    let mut raw = [0u8; 128];
    raw[0..2].copy_from_slice(&s.ss_family.to_ne_bytes());
    raw[2..].copy_from_slice(&s.data);
    decode(&raw)
}

/// The unspecified address of the same family, port 0 (what an unbound source is).
#[allow(dead_code)]
pub(crate) fn any_like(addr: &SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_is_sockaddr_in() {
        let a: SocketAddr = "192.0.2.1:7174".parse().unwrap();
        let (s, size) = encode(&a);
        assert_eq!(size, 16);
        assert_eq!(s.ss_family, AF_INET);
        assert_eq!(&s.data[..6], &[0x1c, 0x06, 192, 0, 2, 1]);
        assert_eq!(decode_storage(&s), Some(a));
    }

    #[test]
    fn ipv6_round_trips() {
        let a: SocketAddr = "[fe80::1%3]:18515".parse().unwrap();
        let (s, size) = encode(&a);
        assert_eq!(size, 28);
        assert_eq!(decode_storage(&s), Some(a));
    }

    #[test]
    fn unbound_and_af_ib_are_none() {
        assert_eq!(decode(&[0u8; 28]), None);
        let mut ib = [0u8; 48];
        ib[0..2].copy_from_slice(&AF_IB.to_ne_bytes());
        assert_eq!(decode(&ib), None);
    }
}
