//! The real transport: system calls on the running kernel.
#![allow(unsafe_code)]

use std::{
    ffi::OsString,
    fs,
    os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd},
    path::Path,
    time::Duration,
};

use crate::abi;
use nix::{
    fcntl::{self, FcntlArg, OFlag},
    poll::{PollFd, PollFlags, PollTimeout},
    sys::{
        socket::{self, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType},
        stat::{self, Mode},
    },
};
use zerocopy::{FromBytes, IntoBytes};

use super::{Errno, Kernel, Mapping, Protection, Readiness, WriteCmd};
use crate::{
    ioctl::{AttrBuf, IoctlCmd, MAX_ATTRS},
    netlink::{self, DatagramEnd},
};

/// The running Linux kernel.
#[derive(Debug, Default, Clone, Copy)]
pub struct Linux;

/// Largest legacy write request built on the stack; larger ones use the heap.
const STACK_WRITE: usize = 512;
/// Legacy write requests up to this size are built in a buffer of this size.
const SMALL_WRITE: usize = 64;

/// The ioctl buffer: header and attributes, contiguous as the kernel expects.
#[repr(C)]
struct IoctlBuf {
    hdr: abi::IbUverbsIoctlHdr,
    attrs: [abi::IbUverbsAttr; MAX_ATTRS],
}

nix::ioctl_readwrite!(
    /// `RDMA_VERBS_IOCTL = _IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr)`.
    rdma_verbs_ioctl,
    0x1b,
    1,
    abi::IbUverbsIoctlHdr
);

// SAFETY: `mmap` is `mmap(2)` of the device's fd for exactly `len` bytes
// with the protection asked for (memmap2 fails rather than map less), and
// the mapping lives until the returned `MmapRaw` unmaps it. The kernel does
// not take a uverbs mapping away while it is mapped: after a device is
// removed it backs the range with zeroed pages instead of letting accesses
// fault (`rdma_umap_fault`, drivers/infiniband/core/uverbs_main.c). A char
// device cannot be truncated.
unsafe impl Kernel for Linux {
    fn open_rdwr(&self, path: &Path) -> Result<OwnedFd, Errno> {
        let fd = fcntl::open(path, OFlag::O_RDWR | OFlag::O_CLOEXEC, Mode::empty())?;
        // SAFETY: `open` returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn char_dev(&self, fd: BorrowedFd<'_>) -> Result<u64, Errno> {
        let st = stat::fstat(fd.as_raw_fd())?;
        if st.st_mode & libc::S_IFMT != libc::S_IFCHR {
            return Err(Errno::ENODEV);
        }
        Ok(st.st_rdev)
    }

    unsafe fn ioctl(&self, fd: BorrowedFd<'_>, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        cmd.check()?;
        let n = cmd.attrs().len();
        let mut buf = IoctlBuf {
            hdr: abi::IbUverbsIoctlHdr {
                length: (size_of::<abi::IbUverbsIoctlHdr>() + n * size_of::<abi::IbUverbsAttr>())
                    as u16,
                object_id: cmd.object_id,
                method_id: cmd.method_id,
                num_attrs: n as u16,
                reserved1: 0,
                driver_id: cmd.driver_id,
                reserved2: 0,
            },
            attrs: [abi::IbUverbsAttr::default(); MAX_ATTRS],
        };
        for (raw, attr) in buf.attrs.iter_mut().zip(cmd.attrs()) {
            attr.check_len()?;
            *raw = attr.to_raw();
        }
        // SAFETY: `buf` is a header immediately followed by `n` attributes, as
        // `hdr.length` says. Every pointer attribute points into a slice that
        // `cmd` borrows for longer than this call (`AttrBuf::In` shared,
        // `AttrBuf::Out` exclusive, so the kernel may write it), and its `len`
        // is at most that slice's length (`Attr::check_len`); an inline attribute
        // is at most 8 bytes, so the kernel reads it from `data` and never
        // takes `data` for an address. The kernel writes back only into
        // `buf` (flags, new handles and fds) and into the `Out` slices.
        // Addresses carried as values are the caller's (this method's
        // contract).
        unsafe { rdma_verbs_ioctl(fd.as_raw_fd(), &mut buf.hdr) }?;
        for (raw, attr) in buf.attrs.iter().zip(cmd.attrs_mut()) {
            attr.flags = raw.flags;
            match &mut attr.buf {
                AttrBuf::NewObject => attr.data = raw.data,
                AttrBuf::NewFd(slot) => {
                    attr.data = raw.data;
                    // An optional FD_NEW attribute the kernel does not know is
                    // ignored and keeps the -1 `to_raw` put there: no
                    // descriptor to take.
                    let raw_fd = raw.data as i64;
                    if (0..=i64::from(i32::MAX)).contains(&raw_fd) {
                        // SAFETY: on success the kernel installed a new
                        // descriptor for this FD_NEW attribute and stored
                        // its number over the sentinel; nobody else owns it.
                        *slot = Some(unsafe { OwnedFd::from_raw_fd(raw_fd as RawFd) });
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    unsafe fn write_cmd(&self, fd: BorrowedFd<'_>, cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
        if let Some(at) = cmd.fd_at {
            if at.checked_add(4).is_none_or(|end| end > cmd.core_out.len()) {
                return Err(Errno::EINVAL);
            }
            // Never a number the kernel did not write: a response too short
            // to hold the field leaves this sentinel.
            cmd.core_out[at..at + 4].copy_from_slice(&(-1i32).to_ne_bytes());
        }
        if cmd.is_extended() {
            write_ex(fd, cmd)?;
        } else {
            write_legacy(fd, cmd)?;
        }
        if let Some(at) = cmd.fd_at {
            let b = &cmd.core_out[at..at + 4];
            let raw_fd = i32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            if raw_fd >= 0 {
                // SAFETY: the command succeeded and its response names a
                // descriptor the kernel installed for it (the caller said
                // where, `fd_at`); nobody else in the process owns it yet.
                cmd.new_fd = Some(unsafe { OwnedFd::from_raw_fd(raw_fd) });
            }
        }
        Ok(())
    }

    unsafe fn write(&self, fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
        // The rxe doorbell's path: one `syscall` instruction, no libc.
        super::raw_write::write(fd, buf)
    }

    fn read(&self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
        // The C library's read(2), not a raw `syscall` as the doorbell's
        // write: the device model for unmodified programs (preload/) plays
        // the event fds (completion channels, async events, DevX event
        // channels) by interposing libc's `read`, and a raw system call on
        // such an fd blocks in the real kernel for good (rdma-core-on-model's
        // devx_events over our C library hung so).
        // libc's read directly: nix's wrapper cost 14 instructions a
        // call on the event path (benches/event-path.sh).
        // SAFETY: `buf` is valid for writes of its length, and `fd` is
        // open for as long as the borrow lives.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(Errno::last())
        } else {
            Ok(n.unsigned_abs())
        }
    }

    fn wait_readable(
        &self,
        fd: BorrowedFd<'_>,
        timeout: Option<Duration>,
    ) -> Result<Readiness, Errno> {
        // poll(2) counts whole milliseconds: round up, so a wait never ends
        // before the time asked (a caller with a deadline would otherwise
        // spin through its last millisecond with zero timeouts).
        let ms = match timeout {
            None => PollTimeout::NONE,
            Some(t) => {
                PollTimeout::try_from(t.as_nanos().div_ceil(1_000_000)).unwrap_or(PollTimeout::MAX)
            }
        };
        // POLLRDHUP (not in nix's PollFlags): a destroyed DevX fd reports it.
        let rdhup = PollFlags::from_bits_retain(libc::POLLRDHUP);
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN | rdhup)];
        // EINTR (a signal handler ran) is the caller's to decide (see the trait).
        match nix::poll::poll(&mut fds, ms)? {
            0 => Ok(Readiness::TimedOut),
            _ => {
                let gone = PollFlags::POLLERR | PollFlags::POLLHUP | rdhup | PollFlags::POLLNVAL;
                let revents = fds[0].revents().unwrap_or(PollFlags::empty());
                Ok(if revents.intersects(gone) {
                    Readiness::Closed
                } else {
                    Readiness::Readable
                })
            }
        }
    }

    fn set_nonblocking(&self, fd: BorrowedFd<'_>, nonblocking: bool) -> Result<bool, Errno> {
        let flags = OFlag::from_bits_retain(fcntl::fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)?);
        let was = flags.contains(OFlag::O_NONBLOCK);
        let flags = if nonblocking {
            flags | OFlag::O_NONBLOCK
        } else {
            flags & !OFlag::O_NONBLOCK
        };
        if was != nonblocking {
            fcntl::fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags))?;
        }
        Ok(was)
    }

    fn mmap(
        &self,
        fd: BorrowedFd<'_>,
        len: usize,
        offset: u64,
        prot: Protection,
    ) -> Result<Mapping, Errno> {
        let mut opts = memmap2::MmapOptions::new();
        opts.len(len).offset(offset);
        let map = match prot {
            Protection::ReadWrite => opts.map_raw(fd.as_raw_fd()),
            Protection::ReadOnly => opts.map_raw_read_only(fd.as_raw_fd()),
        };
        map.map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
    }

    fn netlink_rdma(&self, request: &[u8], on_message: &mut dyn FnMut(&[u8])) -> Result<(), Errno> {
        let sock = socket::socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkRDMA,
        )?;
        socket::bind(sock.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
        socket::sendto(
            sock.as_raw_fd(),
            request,
            &NetlinkAddr::new(0, 0),
            MsgFlags::empty(),
        )?;
        let dump = request.len() >= 8 && u16::from_ne_bytes([request[6], request[7]]) & 0x300 != 0;
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            let n = socket::recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty())?;
            let more = match netlink::walk_datagram(&buf[..n], on_message)? {
                DatagramEnd::Done => return Ok(()),
                DatagramEnd::More { multi } => multi,
            };
            if !dump && !more {
                return Ok(());
            }
        }
    }

    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        fs::read_to_string(path)
    }

    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<OsString>> {
        fs::read_dir(path)?
            .map(|e| e.map(|e| e.file_name()))
            .collect()
    }
}

fn words(bytes: usize, unit: usize) -> Result<u16, Errno> {
    if bytes % unit != 0 {
        return Err(Errno::EINVAL);
    }
    u16::try_from(bytes / unit).map_err(|_| Errno::E2BIG)
}

/// A legacy command: `ib_uverbs_cmd_hdr | core_in | driver_in`, with the
/// response address patched into the first eight bytes of `core_in`
/// (`drivers/infiniband/core/uverbs_main.c`, `ib_uverbs_write`).
fn write_legacy(fd: BorrowedFd<'_>, cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
    let hdr_len = size_of::<abi::IbUverbsCmdHdr>();
    let total = hdr_len + cmd.core_in.len() + cmd.driver_in.len();
    let out_len = cmd.core_out.len() + cmd.driver_out.len();
    let hdr = abi::IbUverbsCmdHdr {
        command: cmd.command,
        in_words: words(total, 4)?,
        out_words: words(out_len, 4)?,
    };
    if out_len > 0 && cmd.core_in.len() < 8 {
        return Err(Errno::EINVAL);
    }
    // Only as much stack as the command needs is zeroed: most commands are
    // a few dozen bytes, and clearing all 512 cost more than the rest of
    // building them.
    let mut small: [u8; SMALL_WRITE];
    let mut stack: [u8; STACK_WRITE];
    let mut heap = Vec::new();
    let req: &mut [u8] = if total <= SMALL_WRITE {
        small = [0u8; SMALL_WRITE];
        &mut small[..total]
    } else if total <= STACK_WRITE {
        stack = [0u8; STACK_WRITE];
        &mut stack[..total]
    } else {
        heap.resize(total, 0);
        &mut heap
    };
    req[..hdr_len].copy_from_slice(hdr.as_bytes());
    req[hdr_len..hdr_len + cmd.core_in.len()].copy_from_slice(cmd.core_in);
    req[hdr_len + cmd.core_in.len()..].copy_from_slice(cmd.driver_in);

    if cmd.driver_out.is_empty() {
        // The common case (and the rxe send doorbell): the kernel can write
        // the core response straight into the caller's buffer.
        let resp = cmd.core_out.as_mut_ptr() as u64;
        if out_len > 0 {
            req[hdr_len..hdr_len + 8].copy_from_slice(&resp.to_ne_bytes());
        }
        return raw_write(fd, req);
    }
    let mut resp = [0u8; STACK_WRITE];
    let mut resp_heap = Vec::new();
    let resp: &mut [u8] = if out_len <= STACK_WRITE {
        &mut resp[..out_len]
    } else {
        resp_heap.resize(out_len, 0);
        &mut resp_heap
    };
    seed_response(resp, cmd);
    req[hdr_len..hdr_len + 8].copy_from_slice(&(resp.as_mut_ptr() as u64).to_ne_bytes());
    raw_write(fd, req)?;
    let (core, driver) = resp.split_at(cmd.core_out.len());
    cmd.core_out.copy_from_slice(core);
    cmd.driver_out.copy_from_slice(driver);
    Ok(())
}

/// An extended command: `ib_uverbs_cmd_hdr | ib_uverbs_ex_cmd_hdr | core_in |
/// driver_in`, sizes in 8-byte words, the response address in the ex header.
fn write_ex(fd: BorrowedFd<'_>, cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
    let hdr_len = size_of::<abi::IbUverbsCmdHdr>() + size_of::<abi::IbUverbsExCmdHdr>();
    let total = hdr_len + cmd.core_in.len() + cmd.driver_in.len();
    let out_len = cmd.core_out.len() + cmd.driver_out.len();
    let mut resp_buf = vec![0u8; out_len];
    seed_response(&mut resp_buf, cmd);
    let hdr = abi::IbUverbsCmdHdr {
        command: cmd.command,
        in_words: words(cmd.core_in.len(), 8)?,
        out_words: words(cmd.core_out.len(), 8)?,
    };
    let ex = abi::IbUverbsExCmdHdr {
        response: if out_len > 0 {
            resp_buf.as_mut_ptr() as u64
        } else {
            0
        },
        provider_in_words: words(cmd.driver_in.len(), 8)?,
        provider_out_words: words(cmd.driver_out.len(), 8)?,
        cmd_hdr_reserved: 0,
    };
    let mut req = Vec::with_capacity(total);
    req.extend_from_slice(hdr.as_bytes());
    req.extend_from_slice(ex.as_bytes());
    req.extend_from_slice(cmd.core_in);
    req.extend_from_slice(cmd.driver_in);
    raw_write(fd, &req)?;
    let (core, driver) = resp_buf.split_at(cmd.core_out.len());
    cmd.core_out.copy_from_slice(core);
    cmd.driver_out.copy_from_slice(driver);
    Ok(())
}

/// Fills the bounce buffer of a command's response (`core_out` then
/// `driver_out`, `resp` as long as both) with what the caller's buffers
/// hold, so that a field the kernel does not write (it copies only as much
/// of its response as it has, and a driver may leave fields alone) keeps
/// its initial value after the copy back, as it does when the kernel
/// writes into `core_out` directly: above all the `-1` that `write_cmd`
/// put at `fd_at`, which a zeroed buffer would turn into fd 0.
fn seed_response(resp: &mut [u8], cmd: &WriteCmd<'_>) {
    let (core, driver) = resp.split_at_mut(cmd.core_out.len());
    core.copy_from_slice(cmd.core_out);
    driver.copy_from_slice(cmd.driver_out);
}

/// `write()` of a command whose response pointer (if any) addresses memory
/// that stays valid and exclusively borrowed until this returns.
fn raw_write(fd: BorrowedFd<'_>, req: &[u8]) -> Result<(), Errno> {
    let n = nix::unistd::write(fd.as_fd(), req)?;
    if n != req.len() {
        return Err(Errno::EIO);
    }
    Ok(())
}

/// Reads a kernel-written struct from the front of a byte buffer.
#[allow(dead_code)]
fn read_struct<T: FromBytes>(bytes: &[u8]) -> Option<T> {
    T::read_from_prefix(bytes).ok().map(|(v, _)| v)
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use super::*;
    use crate::ioctl::AttrBuf;

    fn dev_null() -> File {
        File::options()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap()
    }

    fn ioctl(cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        let f = dev_null();
        // SAFETY: the commands carry no address as a value, and /dev/null
        // answers RDMA_VERBS_IOCTL with ENOTTY when the checks let it through.
        unsafe { Linux.ioctl(f.as_fd(), cmd) }
    }

    #[test]
    fn lengths_beyond_their_buffers_are_refused_before_the_kernel_sees_them() {
        // A well-formed command reaches the device (/dev/null: ENOTTY).
        let mut out = [0u8; 4];
        let mut cmd = IoctlCmd::new(0, 0, 0);
        cmd.output(1, &mut out);
        assert_eq!(ioctl(&mut cmd), Err(Errno::ENOTTY));
        // An output whose length outgrew its buffer does not.
        cmd.attrs_mut()[0].len = 64;
        assert_eq!(ioctl(&mut cmd), Err(Errno::EINVAL));

        let input = [1u8; 16];
        let mut cmd = IoctlCmd::new(0, 0, 0);
        cmd.input(1, &input);
        cmd.attrs_mut()[0].len = 17;
        assert_eq!(ioctl(&mut cmd), Err(Errno::EINVAL));

        // Inline data longer than 8 bytes would make `data` an address.
        let mut cmd = IoctlCmd::new(0, 0, 0);
        cmd.input_u64(1, 0x7fff_0000_0000);
        cmd.attrs_mut()[0].len = 4096;
        assert_eq!(ioctl(&mut cmd), Err(Errno::EINVAL));

        // Handles and fds carry no length.
        let mut cmd = IoctlCmd::new(0, 0, 0);
        cmd.new_object(1);
        cmd.attrs_mut()[0].len = 8;
        assert_eq!(ioctl(&mut cmd), Err(Errno::EINVAL));
        let mut cmd = IoctlCmd::new(0, 0, 0);
        cmd.new_fd(1);
        assert!(matches!(cmd.attrs()[0].buf, AttrBuf::NewFd(None)));
        cmd.attrs_mut()[0].len = 4;
        assert_eq!(ioctl(&mut cmd), Err(Errno::EINVAL));
    }

    #[test]
    fn a_new_fd_attribute_goes_out_as_minus_one() {
        // A kernel that ignores an optional FD_NEW attribute leaves its data
        // as sent; -1 is never taken for a descriptor (0 would be stdin).
        let mut cmd = IoctlCmd::new(0, 0, 0);
        let at = cmd.new_fd(7);
        cmd.optional();
        assert_eq!(cmd.attrs()[0].to_raw().data as i64, -1);
        assert!(cmd.take_fd(at).is_none());
    }

    /// Item 9 of issue 27: a command with driver output goes through a
    /// bounce buffer; one the kernel answers without writing the fd field
    /// (here /dev/null, which takes the write and writes nothing) leaves
    /// the `-1` sentinel there, so no descriptor is adopted. A zeroed
    /// buffer made it fd 0, which the command then owned (and closed).
    #[test]
    fn an_unwritten_response_fd_stays_minus_one_behind_driver_output() {
        let f = dev_null();
        for (command, core_in, out) in [
            // Legacy GET_CONTEXT: the response address slot, `async_fd` at 4.
            (abi::IB_USER_VERBS_CMD_GET_CONTEXT, &[0u8; 8][..], 8),
            // An extended command, sizes in 8-byte words.
            (
                abi::IB_USER_VERBS_CMD_FLAG_EXTENDED | abi::IB_USER_VERBS_EX_CMD_CREATE_QP,
                &[0u8; 16][..],
                16,
            ),
        ] {
            let mut core_out = vec![0x5au8; out];
            let mut driver_out = [0xa5u8; 24];
            let mut cmd = WriteCmd {
                command,
                core_in,
                driver_in: &[0u8; 8],
                core_out: &mut core_out,
                driver_out: &mut driver_out,
                fd_at: Some(4),
                ..WriteCmd::default()
            };
            // SAFETY: /dev/null reads nothing of the request and writes
            // nothing to the response address; the bounce buffer lives
            // across the write anyway.
            let r = unsafe { Linux.write_cmd(f.as_fd(), &mut cmd) };
            // Never close a descriptor this test does not own (fd 0 when
            // the sentinel was lost).
            let adopted = cmd.new_fd.take().map(std::os::fd::IntoRawFd::into_raw_fd);
            assert_eq!(r, Ok(()), "{command:#x}");
            assert_eq!(
                adopted, None,
                "{command:#x}: a descriptor from an unwritten field"
            );
            assert_eq!(core_out[4..8], (-1i32).to_ne_bytes(), "{command:#x}");
            // The other bytes the kernel left alone are the caller's too.
            assert!(core_out[..4].iter().all(|&b| b == 0x5a), "{command:#x}");
            assert!(core_out[8..].iter().all(|&b| b == 0x5a), "{command:#x}");
            assert_eq!(driver_out, [0xa5; 24], "{command:#x}");
        }
    }

    /// The bounce buffer starts as the caller's buffers, core then driver.
    #[test]
    fn a_response_bounce_buffer_starts_as_the_callers_buffers() {
        let (mut core, mut driver) = ([1u8, 2, 3, 4], [5u8, 6]);
        let cmd = WriteCmd {
            core_out: &mut core,
            driver_out: &mut driver,
            ..WriteCmd::default()
        };
        let mut resp = [0u8; 6];
        seed_response(&mut resp, &cmd);
        assert_eq!(resp, [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn a_response_fd_outside_the_response_is_refused() {
        let f = dev_null();
        let mut resp = [0u8; 8];
        let mut cmd = WriteCmd {
            command: abi::IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL,
            core_in: &[0u8; 8],
            core_out: &mut resp,
            fd_at: Some(6),
            ..WriteCmd::default()
        };
        // SAFETY: refused before any write (and /dev/null keeps nothing).
        let r = unsafe { Linux.write_cmd(f.as_fd(), &mut cmd) };
        assert_eq!(r, Err(Errno::EINVAL));
        assert!(cmd.new_fd.is_none());
    }
}
