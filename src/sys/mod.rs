//! The kernel transport: the one place where uverbs talks to the kernel.
//!
//! Every system call the crate makes (open, ioctl, write, read, poll, mmap,
//! fcntl, netlink and the sysfs reads used for discovery) goes through the
//! [`Kernel`] trait. [`Linux`] is the real implementation; tests substitute a
//! fake (see `tests/` and the `fake` module) that plays the kernel's side of
//! the ABI from structured requests, so no test needs raw pointers.
//!
//! The requests are structured rather than raw byte buffers because the uverbs
//! ABI embeds user pointers: ioctl attributes point at input and output
//! buffers, and legacy `write()` commands carry a `response` pointer inside the
//! request. [`IoctlCmd`] and [`WriteCmd`] hold those buffers as Rust slices; only
//! [`Linux`] turns them into the kernel's pointer-carrying layout.

#[cfg(any(test, feature = "test-utils"))]
pub mod fake;
mod linux;
mod raw_write;

use std::{
    ffi::OsString,
    fmt,
    os::fd::{BorrowedFd, OwnedFd},
    path::Path,
    sync::Arc,
    time::Duration,
};

pub(crate) use linux::adopt_fd;
pub use linux::Linux;
pub use nix::errno::Errno;

pub use crate::ioctl::{Attr, AttrBuf, IoctlCmd};

/// A shared memory mapping created by [`Kernel::mmap`].
///
/// It is a raw mapping: no Rust reference into it is ever formed, because the
/// kernel or the device writes it concurrently. Access goes through atomics
/// or volatile reads and writes in the modules that own each ring.
pub type Mapping = memmap2::MmapRaw;

/// Memory protection of a [`Kernel::mmap`] mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// `PROT_READ | PROT_WRITE` (rxe rings; mlx5 UAR pages, which are only ever written).
    ReadWrite,
    /// `PROT_READ` only (mlx5 clock pages).
    ReadOnly,
}

/// A legacy `write()` command of the uverbs ABI (`ib_uverbs_cmd_hdr` framing).
///
/// The transport adds the header, and for commands with a response stores
/// the address of the response buffer into the first eight bytes of
/// `core_in` (every legacy request with a response starts with
/// `__aligned_u64 response`). For extended commands (`command` has
/// `IB_USER_VERBS_CMD_FLAG_EXTENDED`) it adds `ib_uverbs_ex_cmd_hdr` instead.
/// The kernel writes the core response followed directly by the driver's
/// response; the transport splits them into `core_out` and `driver_out`.
#[derive(Debug)]
pub struct WriteCmd<'a> {
    /// The command number (`IB_USER_VERBS_CMD_*`), with the extended flag for ex commands.
    pub command: u32,
    /// The core request, starting with the 8-byte response slot for legacy commands that answer.
    pub core_in: &'a [u8],
    /// Provider (driver, "UHW") request bytes that follow the core request.
    pub driver_in: &'a [u8],
    /// The core response buffer (may be empty).
    pub core_out: &'a mut [u8],
    /// The provider response buffer (may be empty).
    pub driver_out: &'a mut [u8],
}

impl WriteCmd<'_> {
    /// Whether this is an extended (`_ex`) command.
    pub fn is_extended(&self) -> bool {
        self.command & crate::abi::IB_USER_VERBS_CMD_FLAG_EXTENDED != 0
    }
}

/// A command on the rdma_cm device (`/dev/infiniband/rdma_cm`): the
/// transport frames `body` behind a `rdma_ucm_cmd_hdr {cmd, in, out}` and, for
/// commands that answer, stores the address of `response` into the `u64`
/// at `response_at` in the body (the kernel's `response` field) before the
/// `write()`. The kernel writes the answer into `response`.
#[derive(Debug)]
pub struct UcmaCmd<'a> {
    /// `RDMA_USER_CM_CMD_*`.
    pub cmd: u32,
    /// The request struct, with its `response` field (if any) left zero.
    pub body: &'a [u8],
    /// Offset of the `u64 response` field in `body` (`None`: no response).
    pub response_at: Option<usize>,
    /// The response buffer; its length is the header's `out`.
    pub response: &'a mut [u8],
}

impl UcmaCmd<'_> {
    /// The bytes written to the device: header, then the body with the
    /// response address stored (the address of `response`).
    pub fn framed(&mut self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(8 + self.body.len());
        buf.extend_from_slice(&self.cmd.to_ne_bytes());
        buf.extend_from_slice(&(self.body.len() as u16).to_ne_bytes());
        buf.extend_from_slice(&(self.response.len() as u16).to_ne_bytes());
        buf.extend_from_slice(self.body);
        if let Some(at) = self.response_at {
            // The kernel writes the response through this address during the
            // write(); the pointer is derived from the `&mut` buffer we hold.
            let addr = self.response.as_mut_ptr() as u64;
            buf[8 + at..8 + at + 8].copy_from_slice(&addr.to_ne_bytes());
        }
        buf
    }
}

/// What [`Kernel::wait_readable`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// The fd polled readable, or the wait was interrupted by a signal: a
    /// read tells which.
    Readable,
    /// The timeout passed first.
    TimedOut,
    /// The fd's source is gone: `poll` reports `POLLERR`, `POLLHUP` or
    /// `POLLRDHUP`. The uverbs event queues of a removed device report
    /// `POLLERR` once empty, a destroyed mlx5 DevX channel or async command
    /// fd `POLLIN | POLLRDHUP`; their reads fail with `EIO` when blocking and
    /// `EAGAIN`, forever, when not, so only the poll tells the end.
    Closed,
}

/// One system call boundary; see the module documentation.
///
/// Implementations must be cheap to call from several threads at once.
pub trait Kernel: Send + Sync + fmt::Debug {
    /// `open(path, O_RDWR | O_CLOEXEC)` of a character device.
    fn open_rdwr(&self, path: &Path) -> Result<OwnedFd, Errno>;

    /// The device number (`st_rdev`) of an open character device.
    fn char_dev(&self, fd: BorrowedFd<'_>) -> Result<u64, Errno>;

    /// `ioctl(fd, RDMA_VERBS_IOCTL, ...)` with the attributes of `cmd`.
    ///
    /// On success the transport has stored new object handles and new file
    /// descriptors in the command's attributes and set `UVERBS_ATTR_F_VALID_OUTPUT`
    /// on the outputs the kernel filled.
    fn ioctl(&self, fd: BorrowedFd<'_>, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno>;

    /// A legacy or extended uverbs `write()` command.
    fn write_cmd(&self, fd: BorrowedFd<'_>, cmd: &mut WriteCmd<'_>) -> Result<(), Errno>;

    /// A raw `write()` (the rdma_cm character device frames its own commands).
    fn write(&self, fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno>;

    /// A command on the rdma_cm device (see [`UcmaCmd`]). The default frames
    /// it and calls [`Kernel::write`], which is what the real kernel needs;
    /// fakes override it to answer without raw pointers.
    fn ucma(&self, fd: BorrowedFd<'_>, cmd: &mut UcmaCmd<'_>) -> Result<(), Errno> {
        let buf = cmd.framed();
        self.write(fd, &buf).map(|_| ())
    }

    /// `read()` of one record from an event file descriptor.
    fn read(&self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno>;

    /// Waits until `fd` is readable; `None` waits forever. See [`Readiness`].
    fn wait_readable(
        &self,
        fd: BorrowedFd<'_>,
        timeout: Option<Duration>,
    ) -> Result<Readiness, Errno>;

    /// Sets or clears `O_NONBLOCK`.
    fn set_nonblocking(&self, fd: BorrowedFd<'_>, nonblocking: bool) -> Result<(), Errno>;

    /// `mmap(NULL, len, prot, MAP_SHARED, fd, offset)`.
    fn mmap(
        &self,
        fd: BorrowedFd<'_>,
        len: usize,
        offset: u64,
        prot: Protection,
    ) -> Result<Mapping, Errno>;

    /// Sends one `NETLINK_RDMA` request and calls `on_message` with every
    /// reply message (the `nlmsghdr` included) until the kernel signals the end:
    /// `NLMSG_DONE` for dump requests, or the first reply otherwise.
    fn netlink_rdma(&self, request: &[u8], on_message: &mut dyn FnMut(&[u8])) -> Result<(), Errno>;

    /// Reads a small text file (sysfs).
    fn read_to_string(&self, path: &Path) -> std::io::Result<String>;

    /// Lists the entries of a directory (sysfs), unsorted.
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<OsString>>;
}

/// The transport used when the caller does not choose one: the running kernel.
pub fn linux() -> Arc<dyn Kernel> {
    Arc::new(Linux)
}
