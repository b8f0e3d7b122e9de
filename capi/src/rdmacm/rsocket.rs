//! rsockets (`<rdma/rsocket.h>`): not provided. librdmacm's exports are
//! here because Debian's programs are linked `BIND_NOW` (rstream,
//! riostream, rcopy, udpong import them): `rsocket` fails with `ENOTSUP`,
//! librdmacm's answer for a socket it does not support, so no rsocket
//! ever exists, and the calls on one fail with `EBADF`, as on any
//! descriptor that is no socket of theirs. `rpoll` and `rselect` on plain
//! descriptors are `poll` and `select`, as librdmacm's are for
//! descriptors that are not rsockets.

#![allow(unsafe_code)]

use core::ffi::{c_int, c_void};

use uverbs::sys::Errno;

use crate::errno;

/// The failure of every call on an rsocket descriptor.
fn ebadf<T: From<i8>>() -> T {
    errno::set(Errno::EBADF);
    T::from(-1)
}

/// `rsocket`: `ENOTSUP` (see the module documentation).
///
/// # Safety
/// None.
#[export_name = "uverbs_rsocket"]
pub unsafe extern "C" fn rsocket(_domain: c_int, _type: c_int, _protocol: c_int) -> c_int {
    errno::minus_one(Errno::ENOTSUP)
}

/// `rbind`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rbind"]
pub unsafe extern "C" fn rbind(_socket: c_int, _addr: *const c_void, _addrlen: u32) -> c_int {
    ebadf()
}

/// `rlisten`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rlisten"]
pub unsafe extern "C" fn rlisten(_socket: c_int, _backlog: c_int) -> c_int {
    ebadf()
}

/// `raccept`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_raccept"]
pub unsafe extern "C" fn raccept(_socket: c_int, _addr: *mut c_void, _addrlen: *mut u32) -> c_int {
    ebadf()
}

/// `rconnect`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rconnect"]
pub unsafe extern "C" fn rconnect(_socket: c_int, _addr: *const c_void, _addrlen: u32) -> c_int {
    ebadf()
}

/// `rshutdown`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rshutdown"]
pub unsafe extern "C" fn rshutdown(_socket: c_int, _how: c_int) -> c_int {
    ebadf()
}

/// `rclose`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rclose"]
pub unsafe extern "C" fn rclose(_socket: c_int) -> c_int {
    ebadf()
}

/// `rrecv`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rrecv"]
pub unsafe extern "C" fn rrecv(
    _socket: c_int,
    _buf: *mut c_void,
    _len: usize,
    _flags: c_int,
) -> isize {
    ebadf()
}

/// `rrecvfrom`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rrecvfrom"]
pub unsafe extern "C" fn rrecvfrom(
    _socket: c_int,
    _buf: *mut c_void,
    _len: usize,
    _flags: c_int,
    _src: *mut c_void,
    _addrlen: *mut u32,
) -> isize {
    ebadf()
}

/// `rrecvmsg`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rrecvmsg"]
pub unsafe extern "C" fn rrecvmsg(_socket: c_int, _msg: *mut c_void, _flags: c_int) -> isize {
    ebadf()
}

/// `rsend`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rsend"]
pub unsafe extern "C" fn rsend(
    _socket: c_int,
    _buf: *const c_void,
    _len: usize,
    _flags: c_int,
) -> isize {
    ebadf()
}

/// `rsendto`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rsendto"]
pub unsafe extern "C" fn rsendto(
    _socket: c_int,
    _buf: *const c_void,
    _len: usize,
    _flags: c_int,
    _dest: *const c_void,
    _addrlen: u32,
) -> isize {
    ebadf()
}

/// `rsendmsg`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rsendmsg"]
pub unsafe extern "C" fn rsendmsg(_socket: c_int, _msg: *const c_void, _flags: c_int) -> isize {
    ebadf()
}

/// `rread`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rread"]
pub unsafe extern "C" fn rread(_socket: c_int, _buf: *mut c_void, _count: usize) -> isize {
    ebadf()
}

/// `rreadv`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rreadv"]
pub unsafe extern "C" fn rreadv(_socket: c_int, _iov: *const c_void, _iovcnt: c_int) -> isize {
    ebadf()
}

/// `rwrite`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rwrite"]
pub unsafe extern "C" fn rwrite(_socket: c_int, _buf: *const c_void, _count: usize) -> isize {
    ebadf()
}

/// `rwritev`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rwritev"]
pub unsafe extern "C" fn rwritev(_socket: c_int, _iov: *const c_void, _iovcnt: c_int) -> isize {
    ebadf()
}

/// `rgetpeername`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rgetpeername"]
pub unsafe extern "C" fn rgetpeername(
    _socket: c_int,
    _addr: *mut c_void,
    _addrlen: *mut u32,
) -> c_int {
    ebadf()
}

/// `rgetsockname`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rgetsockname"]
pub unsafe extern "C" fn rgetsockname(
    _socket: c_int,
    _addr: *mut c_void,
    _addrlen: *mut u32,
) -> c_int {
    ebadf()
}

/// `rsetsockopt`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rsetsockopt"]
pub unsafe extern "C" fn rsetsockopt(
    _socket: c_int,
    _level: c_int,
    _optname: c_int,
    _optval: *const c_void,
    _optlen: u32,
) -> c_int {
    ebadf()
}

/// `rgetsockopt`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rgetsockopt"]
pub unsafe extern "C" fn rgetsockopt(
    _socket: c_int,
    _level: c_int,
    _optname: c_int,
    _optval: *mut c_void,
    _optlen: *mut u32,
) -> c_int {
    ebadf()
}

/// `rfcntl`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rfcntl"]
pub unsafe extern "C" fn rfcntl(_socket: c_int, _cmd: c_int) -> c_int {
    ebadf()
}

/// `riomap`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_riomap"]
pub unsafe extern "C" fn riomap(
    _socket: c_int,
    _buf: *mut c_void,
    _len: usize,
    _prot: c_int,
    _flags: c_int,
    _offset: i64,
) -> i64 {
    ebadf()
}

/// `riounmap`: `EBADF` (no rsocket exists).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_riounmap"]
pub unsafe extern "C" fn riounmap(_socket: c_int, _buf: *mut c_void, _len: usize) -> c_int {
    ebadf()
}

/// `riowrite`: `EBADF`; its `size_t` result is `(size_t)-1`.
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_riowrite"]
pub unsafe extern "C" fn riowrite(
    _socket: c_int,
    _buf: *const c_void,
    _count: usize,
    _offset: i64,
    _flags: c_int,
) -> usize {
    errno::set(Errno::EBADF);
    usize::MAX
}

/// `rpoll`: `poll` (no descriptor is an rsocket).
///
/// # Safety
/// As `poll(2)`: `fds` holds `nfds` entries.
#[export_name = "uverbs_rpoll"]
pub unsafe extern "C" fn rpoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    // SAFETY: the caller's contract is poll's.
    unsafe { libc::poll(fds, nfds, timeout) }
}

/// `rselect`: `select` (no descriptor is an rsocket).
///
/// # Safety
/// As `select(2)`.
#[export_name = "uverbs_rselect"]
pub unsafe extern "C" fn rselect(
    nfds: c_int,
    readfds: *mut libc::fd_set,
    writefds: *mut libc::fd_set,
    exceptfds: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    // SAFETY: the caller's contract is select's.
    unsafe { libc::select(nfds, readfds, writefds, exceptfds, timeout) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsockets_fail_as_unsupported() {
        // SAFETY: no pointer is passed.
        assert_eq!(unsafe { rsocket(libc::AF_INET, libc::SOCK_STREAM, 0) }, -1);
        assert_eq!(Errno::last(), Errno::ENOTSUP);
        // SAFETY: as above.
        assert_eq!(unsafe { rclose(3) }, -1);
        assert_eq!(Errno::last(), Errno::EBADF);
        // SAFETY: as above.
        assert_eq!(unsafe { rsend(3, core::ptr::null(), 0, 0) }, -1);
        // SAFETY: no descriptors: a 0 ms wait.
        assert_eq!(unsafe { rpoll(core::ptr::null_mut(), 0, 0) }, 0);
    }
}
