//! `write(2)` as one `syscall` instruction, without the C library.
//!
//! The rxe send doorbell is a `write()` of 32 bytes on every send batch, so
//! its userspace cost is on every message's critical path. The C library's
//! `write` is a cancellation point: in a process with more than one thread,
//! glibc and musl switch the thread's cancellation state around the system
//! call (two atomic read-modify-writes), and the call goes through the PLT
//! and sets `errno` on failure. None of that is wanted here. Measured in the
//! TCG test guest (kernel 6.1, a 32-byte write to `/dev/null`, 200 000
//! calls): 824 ns through glibc against 700 ns raw with two threads, 602
//! against 579 ns with one. rustix's `linux_raw` backend and liburing's
//! `arch/*/syscall.h` make the same choice.
//!
//! x86_64 issues the instruction itself; other architectures call the C
//! library (the same raw call for aarch64 is a few lines more, left until it
//! can be tested on such a machine).
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd};

use super::Errno;

/// Writes `buf` to `fd`; returns the byte count written.
#[inline]
pub(crate) fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
    let ret = raw(fd.as_raw_fd(), buf);
    // The kernel returns -errno in [-4095, -1] (`IS_ERR_VALUE`), otherwise
    // the count, which is at most `buf.len()`.
    if ret < 0 {
        Err(Errno::from_raw((-ret) as i32))
    } else {
        Ok(ret as usize)
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn raw(fd: i32, buf: &[u8]) -> isize {
    let ret: isize;
    // SAFETY: the x86_64 Linux system call convention: number in rax,
    // arguments in rdi, rsi, rdx; the kernel returns in rax and clobbers
    // rcx and r11 (declared). write(2) only reads `buf.len()` bytes at
    // `buf.as_ptr()`, which `buf` borrows for the duration of the call; the
    // asm block is not `nomem`, so the compiler keeps `buf`'s contents
    // written before it. `fd` is a descriptor the caller borrows, so it is
    // open. The kernel restores RFLAGS from r11 on return
    // (`preserves_flags`) and does not touch the user stack (`nostack`).
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_write as isize => ret,
            in("rdi") fd as isize,
            in("rsi") buf.as_ptr(),
            in("rdx") buf.len(),
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack, preserves_flags),
        );
    }
    ret
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn raw(fd: i32, buf: &[u8]) -> isize {
    // SAFETY: write(2) reads `buf.len()` bytes at `buf.as_ptr()`, which `buf`
    // borrows for the call; `fd` is borrowed, so open.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        -(Errno::last_raw() as isize)
    } else {
        n
    }
}

#[cfg(test)]
mod tests {
    use std::{
        fs::File,
        io::Read,
        os::fd::{AsFd, OwnedFd},
    };

    use super::*;

    fn pipe() -> (File, OwnedFd) {
        let (r, w) = nix::unistd::pipe().expect("pipe");
        (File::from(r), w)
    }

    #[test]
    fn writes_the_bytes_and_returns_the_count() {
        let (mut r, w) = pipe();
        assert_eq!(write(w.as_fd(), b"doorbell"), Ok(8));
        assert_eq!(write(w.as_fd(), b""), Ok(0));
        drop(w);
        let mut got = Vec::new();
        r.read_to_end(&mut got).expect("read");
        assert_eq!(got, b"doorbell");
    }

    #[test]
    fn errors_come_back_as_errno() {
        // A pipe whose read end is closed: EPIPE (SIGPIPE is ignored by the
        // Rust runtime, so the process survives).
        let (r, w) = pipe();
        drop(r);
        assert_eq!(write(w.as_fd(), b"x"), Err(Errno::EPIPE));
        // The read end of a pipe is not writable: EBADF.
        let (r, _w) = pipe();
        assert_eq!(write(r.as_fd(), b"x"), Err(Errno::EBADF));
    }
}
