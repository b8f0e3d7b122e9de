//! Socket addresses between C (`struct sockaddr *`, the `sockaddr_storage`
//! unions of `struct rdma_addr`) and `std::net::SocketAddr`, and the port
//! getters (`rdma_get_src_port`, `rdma_get_dst_port`), which read the id's
//! route as librdmacm's do (`rdma_get_local_addr` and `rdma_get_peer_addr`
//! are `static inline` in rdma_cma.h: they read the same route).

#![allow(unsafe_code)]

use core::ffi::c_void;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use uverbs::sys::Errno;

use crate::layout::rdmacm::{rdma_cm_id, sockaddr_storage};

/// The address at `sa`; `EINVAL` for NULL, `EAFNOSUPPORT` for a family
/// other than IPv4 and IPv6 (`AF_IB` needs librdmacm's `af_ib_support`,
/// which this library does not claim).
///
/// # Safety
/// `sa` is NULL or points at a `struct sockaddr` of its family's size.
pub(crate) unsafe fn from_c(sa: *const c_void) -> Result<SocketAddr, Errno> {
    if sa.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: the caller's contract: a sockaddr begins with its family.
    let family = unsafe { sa.cast::<libc::sa_family_t>().read_unaligned() };
    match c_int_of(family) {
        libc::AF_INET => {
            // SAFETY: the caller's contract for an AF_INET address.
            let s = unsafe { sa.cast::<libc::sockaddr_in>().read_unaligned() };
            Ok(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
                u16::from_be(s.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the caller's contract for an AF_INET6 address.
            let s = unsafe { sa.cast::<libc::sockaddr_in6>().read_unaligned() };
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(s.sin6_addr.s6_addr),
                u16::from_be(s.sin6_port),
                u32::from_be(s.sin6_flowinfo),
                s.sin6_scope_id,
            )))
        }
        _ => Err(Errno::EAFNOSUPPORT),
    }
}

fn c_int_of(f: libc::sa_family_t) -> core::ffi::c_int {
    core::ffi::c_int::from(f)
}

/// The address at `sa`, or `None` for NULL.
///
/// # Safety
/// As [`from_c`].
pub(crate) unsafe fn opt_from_c(sa: *const c_void) -> Result<Option<SocketAddr>, Errno> {
    if sa.is_null() {
        Ok(None)
    } else {
        // SAFETY: the caller's contract.
        unsafe { from_c(sa) }.map(Some)
    }
}

/// `a` as the bytes of a `sockaddr_in` / `sockaddr_in6` in storage; all
/// zero (`AF_UNSPEC`) for `None`.
pub(crate) fn to_storage(a: Option<SocketAddr>) -> sockaddr_storage {
    let mut out = sockaddr_storage::default();
    match a {
        None => {}
        Some(SocketAddr::V4(v4)) => put(
            &mut out,
            &libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            },
        ),
        Some(SocketAddr::V6(v6)) => put(
            &mut out,
            &libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            },
        ),
    }
    out
}

/// Copies the C address `sa` (at most 128 bytes) into `out`.
fn put<T: Copy>(out: &mut sockaddr_storage, sa: &T) {
    const { assert!(size_of::<T>() <= 128) };
    // SAFETY: `out` is 128 bytes and `T` no larger (checked above); both
    // are plain data, and a write of `T` needs no alignment this way.
    unsafe { out.0.as_mut_ptr().cast::<T>().write_unaligned(*sa) };
}

/// The length of the C address `a` would be (`ucma_addrlen`).
pub(crate) fn c_len(a: &SocketAddr) -> u32 {
    match a {
        SocketAddr::V4(_) => size_of::<libc::sockaddr_in>() as u32,
        SocketAddr::V6(_) => size_of::<libc::sockaddr_in6>() as u32,
    }
}

/// The port (network order) in a stored address, 0 for another family
/// (librdmacm's `ucma_get_port`, which fails with `EINVAL` there).
fn port_of(s: &sockaddr_storage) -> u16 {
    let family = u16::from_ne_bytes([s.0[0], s.0[1]]);
    match core::ffi::c_int::from(family) {
        // sin_port and sin6_port are both at offset 2.
        libc::AF_INET | libc::AF_INET6 => u16::from_ne_bytes([s.0[2], s.0[3]]),
        _ => 0,
    }
}

/// `rdma_get_src_port`: the id's local port, network order.
///
/// # Safety
/// `id` is a live id of this library.
#[export_name = "uverbs_rdma_get_src_port"]
pub unsafe extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    if id.is_null() {
        return 0;
    }
    // SAFETY: the caller's contract; the route is plain data.
    port_of(unsafe { &(*id).route.addr.src_addr })
}

/// `rdma_get_dst_port`: the id's remote port, network order.
///
/// # Safety
/// `id` is a live id of this library.
#[export_name = "uverbs_rdma_get_dst_port"]
pub unsafe extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    if id.is_null() {
        return 0;
    }
    // SAFETY: the caller's contract.
    port_of(unsafe { &(*id).route.addr.dst_addr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_go_to_c_and_back() {
        for a in [
            "192.0.2.7:7174".parse::<SocketAddr>().unwrap(),
            "[fe80::1]:20000".parse().unwrap(),
        ] {
            let s = to_storage(Some(a));
            // SAFETY: `s` holds a sockaddr of the address's family.
            let back = unsafe { from_c((&raw const s).cast()) }.unwrap();
            assert_eq!(back, a);
            assert_eq!(port_of(&s), a.port().to_be());
        }
        let empty = to_storage(None);
        // SAFETY: `empty` is a zeroed sockaddr (AF_UNSPEC).
        assert_eq!(
            // SAFETY: as above.
            unsafe { from_c((&raw const empty).cast()) },
            Err(Errno::EAFNOSUPPORT)
        );
        // SAFETY: NULL is checked.
        assert_eq!(unsafe { from_c(core::ptr::null()) }, Err(Errno::EINVAL));
    }
}
