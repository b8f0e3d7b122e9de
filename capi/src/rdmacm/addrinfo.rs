//! `rdma_getaddrinfo`, `rdma_freeaddrinfo` over `uverbs::cm::getaddrinfo`.
//!
//! The answer is a list of `struct rdma_addrinfo` in `malloc`ed memory,
//! its addresses, names and route/connect data too, as librdmacm's (a
//! program may free it only with `rdma_freeaddrinfo`). Failures as
//! librdmacm: a lookup the resolver refuses returns its `EAI_*` code (a
//! negative number, `errno` set for `EAI_SYSTEM`); anything else -1 and
//! `errno` (`EINVAL` with neither node, service nor hints).

#![allow(unsafe_code)]

use core::{
    ffi::{c_char, c_int, c_void, CStr},
    ptr::null_mut,
};
use std::net::SocketAddr;

use uverbs::{
    cm::{getaddrinfo, AddrFamily, AddrHints, AiFlags, PortSpace, RdmaAddrInfo},
    sys::Errno,
    QpType,
};

use super::{addr, fail, id::qpt_c};
use crate::layout::rdmacm::rdma_addrinfo;

/// The hints of the C struct.
///
/// # Safety
/// `h`'s addresses are NULL or socket addresses of their lengths.
unsafe fn hints(h: &rdma_addrinfo) -> Result<AddrHints, Errno> {
    let qp_type = (h.ai_qp_type != 0)
        .then(|| u8::try_from(h.ai_qp_type).map(QpType::from_raw))
        .transpose()
        .map_err(|_| Errno::EINVAL)?;
    let port_space = match h.ai_port_space {
        0 => None,
        super::RDMA_PS_TCP => Some(PortSpace::Tcp),
        super::RDMA_PS_UDP => Some(PortSpace::Udp),
        super::RDMA_PS_IPOIB => Some(PortSpace::Ipoib),
        super::RDMA_PS_IB => Some(PortSpace::Ib(qp_type.unwrap_or(QpType::Rc))),
        _ => return Err(Errno::EINVAL),
    };
    let addr_of = |p: *mut c_void, len: u32| -> Result<Option<SocketAddr>, Errno> {
        if p.is_null() || len == 0 {
            return Ok(None);
        }
        // SAFETY: the caller's contract.
        unsafe { addr::from_c(p) }.map(Some)
    };
    Ok(AddrHints::new()
        .flags(AiFlags::from_bits_retain(h.ai_flags as u32))
        .family(AddrFamily::from_raw(h.ai_family))
        .qp_type(qp_type)
        .port_space(port_space)
        .src_addr(addr_of(h.ai_src_addr, h.ai_src_len)?)
        .dst_addr(addr_of(h.ai_dst_addr, h.ai_dst_len)?))
}

/// `len` bytes of `malloc`ed memory holding `bytes` (NULL for none).
fn malloc_copy(bytes: &[u8], nul: bool) -> Result<*mut c_void, Errno> {
    if bytes.is_empty() && !nul {
        return Ok(null_mut());
    }
    let n = bytes.len() + usize::from(nul);
    // SAFETY: a plain allocation, checked for NULL.
    let p = unsafe { libc::calloc(1, n) };
    if p.is_null() {
        return Err(Errno::ENOMEM);
    }
    // SAFETY: `p` holds `n >= bytes.len()` bytes.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), p.cast::<u8>(), bytes.len()) };
    Ok(p)
}

/// A `malloc`ed C address of `a` and its length.
fn malloc_addr(a: Option<SocketAddr>) -> Result<(*mut c_void, u32), Errno> {
    let Some(a) = a else {
        return Ok((null_mut(), 0));
    };
    let s = addr::to_storage(Some(a));
    let len = addr::c_len(&a);
    Ok((malloc_copy(&s.0[..len as usize], false)?, len))
}

/// One C entry for `r`, fields `malloc`ed (freed by [`rdma_freeaddrinfo`]
/// on failure too).
fn to_c(r: &RdmaAddrInfo) -> Result<*mut rdma_addrinfo, Errno> {
    // SAFETY: a zeroed `rdma_addrinfo` is all NULL pointers and zeros.
    let p = unsafe { libc::calloc(1, size_of::<rdma_addrinfo>()) }.cast::<rdma_addrinfo>();
    if p.is_null() {
        return Err(Errno::ENOMEM);
    }
    let fill = || -> Result<(), Errno> {
        // SAFETY: `p` is the zeroed entry just allocated, ours alone.
        let c = unsafe { &mut *p };
        c.ai_flags = r.flags.bits() as c_int;
        c.ai_family = r.family.raw();
        c.ai_qp_type = qpt_c(r.qp_type);
        c.ai_port_space = c_int::from(r.port_space.raw());
        (c.ai_src_addr, c.ai_src_len) = malloc_addr(r.src_addr)?;
        (c.ai_dst_addr, c.ai_dst_len) = malloc_addr(r.dst_addr)?;
        if let Some(n) = &r.src_canonname {
            c.ai_src_canonname = malloc_copy(n.as_bytes(), true)?.cast();
        }
        if let Some(n) = &r.dst_canonname {
            c.ai_dst_canonname = malloc_copy(n.as_bytes(), true)?.cast();
        }
        c.ai_route = malloc_copy(&r.route, false)?;
        c.ai_route_len = r.route.len();
        c.ai_connect = malloc_copy(&r.connect, false)?;
        c.ai_connect_len = r.connect.len();
        Ok(())
    };
    if let Err(e) = fill() {
        // SAFETY: the entry is ours, its fields NULL or allocated above.
        unsafe { rdma_freeaddrinfo(p) };
        return Err(e);
    }
    Ok(p)
}

/// The text of a C string argument (`EINVAL` when not UTF-8).
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn text<'a>(s: *const c_char) -> Result<Option<&'a str>, Errno> {
    if s.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map(Some)
        .map_err(|_| Errno::EINVAL)
}

/// `rdma_getaddrinfo`: see the module documentation.
///
/// # Safety
/// `node` and `service` are NULL or NUL-terminated strings; `hints` NULL or
/// a readable `rdma_addrinfo`; `res` writable.
#[export_name = "uverbs_rdma_getaddrinfo"]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    let run = || -> Result<Result<*mut rdma_addrinfo, c_int>, Errno> {
        if res.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: the caller's contract.
        let (node, service) = unsafe { (text(node)?, text(service)?) };
        // SAFETY: the caller's contract.
        let h = match unsafe { hints.as_ref() } {
            // SAFETY: the caller's contract.
            Some(h) => Some(unsafe { self::hints(h) }?),
            None => None,
        };
        let list = match getaddrinfo(node, service, h.as_ref()) {
            Ok(l) => l,
            Err(e) => match e.gai_code() {
                Some(code) => {
                    if code == libc::EAI_SYSTEM {
                        crate::errno::set(super::of(&e));
                    }
                    return Ok(Err(code));
                }
                None => return Err(super::of(&e)),
            },
        };
        let mut head: *mut rdma_addrinfo = null_mut();
        let mut tail: *mut rdma_addrinfo = null_mut();
        for r in &list {
            let c = match to_c(r) {
                Ok(c) => c,
                Err(e) => {
                    // SAFETY: the entries made so far, ours alone.
                    unsafe { rdma_freeaddrinfo(head) };
                    return Err(e);
                }
            };
            if tail.is_null() {
                head = c;
            } else {
                // SAFETY: `tail` is the last entry made, ours alone.
                unsafe { (*tail).ai_next = c };
            }
            tail = c;
        }
        Ok(Ok(head))
    };
    match run() {
        Ok(Ok(list)) => {
            // SAFETY: the caller's contract (checked non-NULL above).
            unsafe { res.write(list) };
            0
        }
        Ok(Err(code)) => code,
        Err(e) => fail(e),
    }
}

/// `rdma_freeaddrinfo`: frees a list `rdma_getaddrinfo` returned.
///
/// # Safety
/// `res` is NULL or a list `rdma_getaddrinfo` returned, not yet freed.
#[export_name = "uverbs_rdma_freeaddrinfo"]
pub unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    let mut p = res;
    while !p.is_null() {
        // SAFETY: the caller's contract: every entry and field was
        // `calloc`ed by this module (or is NULL).
        unsafe {
            let next = (*p).ai_next;
            libc::free((*p).ai_connect);
            libc::free((*p).ai_route);
            libc::free((*p).ai_src_canonname.cast());
            libc::free((*p).ai_dst_canonname.cast());
            libc::free((*p).ai_src_addr);
            libc::free((*p).ai_dst_addr);
            libc::free(p.cast());
            p = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passive_numeric_lookup_is_one_c_entry() {
        let mut h: rdma_addrinfo =
            // SAFETY: all-zero is a valid rdma_addrinfo.
            unsafe { core::mem::zeroed() };
        h.ai_flags = 1 | 2; // RAI_PASSIVE | RAI_NUMERICHOST
        h.ai_port_space = super::super::RDMA_PS_TCP;
        let mut res = null_mut();
        // SAFETY: valid strings, hints and result pointer.
        let rc = unsafe { rdma_getaddrinfo(c"127.0.0.1".as_ptr(), c"7471".as_ptr(), &h, &mut res) };
        assert_eq!(rc, 0);
        // SAFETY: one entry was returned.
        let r = unsafe { &*res };
        assert!(r.ai_next.is_null());
        assert_eq!(r.ai_flags & 1, 1);
        assert_eq!(r.ai_port_space, super::super::RDMA_PS_TCP);
        assert_eq!(r.ai_qp_type, super::super::IBV_QPT_RC);
        assert_eq!(r.ai_src_len as usize, size_of::<libc::sockaddr_in>());
        // SAFETY: the entry's source address.
        let a = unsafe { addr::from_c(r.ai_src_addr) }.unwrap();
        assert_eq!(a, "127.0.0.1:7471".parse().unwrap());
        // SAFETY: the list just returned.
        unsafe { rdma_freeaddrinfo(res) };
        // Nothing at all is EINVAL.
        // SAFETY: NULL arguments are checked.
        let rc = unsafe {
            rdma_getaddrinfo(
                core::ptr::null(),
                core::ptr::null(),
                core::ptr::null(),
                &mut res,
            )
        };
        assert_eq!(rc, -1);
        assert_eq!(Errno::last(), Errno::EINVAL);
    }
}
