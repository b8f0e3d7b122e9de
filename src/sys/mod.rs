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
//!
//! # Safety of the raw commands
//!
//! A command can make the kernel, or the device behind it, write memory:
//! not only the response buffers the request borrows, but also memory named
//! by an address carried as a *value* (the address of a memory region,
//! mlx5's CQ, QP and doorbell buffers in the provider's request, a DevX
//! UMEM). No transport can tell such values from other numbers, so the
//! entry points that send commands ([`Kernel::ioctl`],
//! [`Kernel::write_cmd`], [`Kernel::write`], [`Kernel::ucma`]) are `unsafe`
//! to call. The crate calls them from a few wrappers whose callers build
//! every command with the typed builders and own the memory each carries;
//! a program that sends its own commands takes on the same contract. The
//! other entry points (open, read, poll, mmap, netlink, sysfs) are safe.

/// The scripted fake kernel ([`crate::testing::kernel`], where it lives
/// with the other test doubles; feature `test-utils`), under the path
/// tests, benchmarks, the fuzz targets and the CLI use.
#[cfg(any(test, feature = "test-utils"))]
pub use crate::testing::kernel as fake;
mod linux;
pub(crate) mod memory;
mod raw_write;

use std::{
    ffi::OsString,
    fmt,
    os::fd::{BorrowedFd, OwnedFd},
    path::Path,
    sync::Arc,
    time::Duration,
};

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
#[derive(Debug, Default)]
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
    /// For a command whose response carries a descriptor the kernel created
    /// (`GET_CONTEXT`'s `async_fd`, `CREATE_COMP_CHANNEL`'s `fd`): the byte
    /// offset of that `__u32` in `core_out`. The transport then takes
    /// ownership of the descriptor and stores it in `new_fd`; nothing else
    /// turns a number from a response into an [`OwnedFd`].
    pub fd_at: Option<usize>,
    /// The descriptor named by `fd_at`, once the command succeeded.
    pub new_fd: Option<OwnedFd>,
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
    ///
    /// Fails with `E2BIG` when the body or the response is longer than the
    /// header's `u16` sizes can say, and with `EINVAL` when `response_at`
    /// does not leave room for the `u64` inside the body.
    pub fn framed(&mut self) -> Result<Vec<u8>, Errno> {
        let body_len = u16::try_from(self.body.len()).map_err(|_| Errno::E2BIG)?;
        let out_len = u16::try_from(self.response.len()).map_err(|_| Errno::E2BIG)?;
        let slot = match self.response_at {
            Some(at) if at.checked_add(8).is_some_and(|end| end <= self.body.len()) => Some(at),
            Some(_) => return Err(Errno::EINVAL),
            None => None,
        };
        let mut buf = Vec::with_capacity(8 + self.body.len());
        buf.extend_from_slice(&self.cmd.to_ne_bytes());
        buf.extend_from_slice(&body_len.to_ne_bytes());
        buf.extend_from_slice(&out_len.to_ne_bytes());
        buf.extend_from_slice(self.body);
        if let Some(at) = slot {
            // The kernel writes the response through this address during the
            // write(); the pointer is derived from the `&mut` buffer we hold.
            let addr = self.response.as_mut_ptr() as u64;
            buf[8 + at..8 + at + 8].copy_from_slice(&addr.to_ne_bytes());
        }
        Ok(buf)
    }
}

/// What [`Kernel::wait_readable`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// The fd polled readable: a record is queued (unless another reader
    /// takes it first). A wait interrupted by a signal goes on with the
    /// time left.
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
/// Implementations must be cheap to call from several threads at once. The
/// command entry points are `unsafe` to call (see the module documentation);
/// an implementation may rely on their contracts, and a fake that answers
/// from its own state needs none of them.
///
/// # Safety
///
/// The providers' unsafe code stores into and loads from what an
/// implementation returns (rxe's rings, mlx5's doorbell and BlueFlame
/// registers and clock page), so implementing the trait is a promise that
/// [`Kernel::mmap`] keeps:
///
/// - on success the [`Mapping`] is at least `len` bytes long, readable,
///   and also writable when [`Protection::ReadWrite`] was asked for;
/// - it stays mapped, with that protection, until the `Mapping` is
///   dropped: nothing the implementation controls unmaps it, changes its
///   protection, or makes accesses to it fault (a file it later truncates
///   breaks the promise);
/// - it is not memory that the program accesses through Rust references
///   (a fresh mapping is; a view of a `Vec` is not).
///
/// [`Linux`] keeps this promise with `mmap(2)` of the device's fd. A fake
/// that returns its own memory must keep it too, which is why
/// `fake::FakeKernel::on_mmap` is `unsafe`.
///
/// Implementing the trait without `unsafe` does not compile:
///
/// ```compile_fail,E0200
/// # use std::{ffi::OsString, os::fd::{BorrowedFd, OwnedFd}, path::Path, time::Duration};
/// # use uverbs::sys::{Errno, IoctlCmd, Kernel, Mapping, Protection, Readiness, WriteCmd};
/// #[derive(Debug)]
/// struct Mine;
/// impl Kernel for Mine {
/// #   fn open_rdwr(&self, _: &Path) -> Result<OwnedFd, Errno> { Err(Errno::ENOSYS) }
/// #   fn char_dev(&self, _: BorrowedFd<'_>) -> Result<u64, Errno> { Err(Errno::ENOSYS) }
/// #   unsafe fn ioctl(&self, _: BorrowedFd<'_>, _: &mut IoctlCmd<'_>) -> Result<(), Errno> { Err(Errno::ENOSYS) }
/// #   unsafe fn write_cmd(&self, _: BorrowedFd<'_>, _: &mut WriteCmd<'_>) -> Result<(), Errno> { Err(Errno::ENOSYS) }
/// #   unsafe fn write(&self, _: BorrowedFd<'_>, _: &[u8]) -> Result<usize, Errno> { Err(Errno::ENOSYS) }
/// #   fn read(&self, _: BorrowedFd<'_>, _: &mut [u8]) -> Result<usize, Errno> { Err(Errno::ENOSYS) }
/// #   fn wait_readable(&self, _: BorrowedFd<'_>, _: Option<Duration>) -> Result<Readiness, Errno> { Err(Errno::ENOSYS) }
/// #   fn set_nonblocking(&self, _: BorrowedFd<'_>, _: bool) -> Result<bool, Errno> { Err(Errno::ENOSYS) }
///     fn mmap(&self, _: BorrowedFd<'_>, _: usize, _: u64, _: Protection) -> Result<Mapping, Errno> {
///         Err(Errno::ENOSYS)
///     }
/// #   fn netlink_rdma(&self, _: &[u8], _: &mut dyn FnMut(&[u8])) -> Result<(), Errno> { Err(Errno::ENOSYS) }
/// #   fn read_to_string(&self, _: &Path) -> std::io::Result<String> { Ok(String::new()) }
/// #   fn read_dir(&self, _: &Path) -> std::io::Result<Vec<OsString>> { Ok(Vec::new()) }
/// }
/// ```
#[allow(unsafe_code)] // an `unsafe trait` whose pointer-carrying methods are `unsafe fn`
pub unsafe trait Kernel: Send + Sync + fmt::Debug {
    /// `open(path, O_RDWR | O_CLOEXEC)` of a character device.
    fn open_rdwr(&self, path: &Path) -> Result<OwnedFd, Errno>;

    /// The device number (`st_rdev`) of an open character device.
    fn char_dev(&self, fd: BorrowedFd<'_>) -> Result<u64, Errno>;

    /// `ioctl(fd, RDMA_VERBS_IOCTL, ...)` with the attributes of `cmd`.
    ///
    /// On success the transport has stored new object handles and new file
    /// descriptors in the command's attributes and set `UVERBS_ATTR_F_VALID_OUTPUT`
    /// on the outputs the kernel filled.
    ///
    /// # Safety
    ///
    /// The kernel acts on what the command names. The caller guarantees
    /// that every address `cmd` carries as a value (an inline attribute or
    /// bytes of an input buffer, such as `REG_MR`'s address or a provider's
    /// queue and doorbell buffers) refers to memory the caller owns, that
    /// stays mapped and is not accessed through Rust references for as long
    /// as the kernel or the device may access it (until the object the
    /// command creates is destroyed), and that `fd` and the command's object
    /// handles belong to the caller. The buffers `cmd` borrows need no
    /// promise: the transport passes only their lengths.
    unsafe fn ioctl(&self, fd: BorrowedFd<'_>, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno>;

    /// A legacy or extended uverbs `write()` command.
    ///
    /// # Safety
    ///
    /// As for [`Kernel::ioctl`]: addresses carried as values in `core_in` or
    /// `driver_in` must name memory the caller owns for as long as the
    /// kernel or the device may access it. The response address the
    /// transport stores is its own.
    unsafe fn write_cmd(&self, fd: BorrowedFd<'_>, cmd: &mut WriteCmd<'_>) -> Result<(), Errno>;

    /// A raw `write()` (the rdma_cm character device frames its own
    /// commands; rxe's send doorbell is a prebuilt uverbs command).
    ///
    /// # Safety
    ///
    /// Written to a uverbs or rdma_cm device, `buf` is a command: every
    /// address in it (response pointers included) must name memory the
    /// caller owns and keeps valid, and unaliased by Rust references while
    /// the kernel may write it, as for [`Kernel::ioctl`].
    unsafe fn write(&self, fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno>;

    /// A command on the rdma_cm device (see [`UcmaCmd`]). The default frames
    /// it and calls [`Kernel::write`], which is what the real kernel needs;
    /// fakes override it to answer without raw pointers.
    ///
    /// # Safety
    ///
    /// As for [`Kernel::write`], for the addresses in `cmd.body` (the
    /// response address is the transport's own, derived from
    /// `cmd.response`).
    unsafe fn ucma(&self, fd: BorrowedFd<'_>, cmd: &mut UcmaCmd<'_>) -> Result<(), Errno> {
        let buf = cmd.framed()?;
        // SAFETY: the caller's contract covers the body; the one address
        // `framed` adds is `cmd.response`'s, exclusively borrowed by `cmd`
        // for this call, and the header's `out` is its length.
        unsafe { self.write(fd, &buf) }.map(|_| ())
    }

    /// `read()` of one record from an event file descriptor.
    fn read(&self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno>;

    /// Waits until `fd` is readable; `None` waits forever. See [`Readiness`].
    /// A signal handler that runs meanwhile ends the wait with `EINTR`
    /// (poll(2) is never restarted); the caller decides whether to wait
    /// again.
    fn wait_readable(
        &self,
        fd: BorrowedFd<'_>,
        timeout: Option<Duration>,
    ) -> Result<Readiness, Errno>;

    /// Sets or clears `O_NONBLOCK`; returns whether it was set before.
    fn set_nonblocking(&self, fd: BorrowedFd<'_>, nonblocking: bool) -> Result<bool, Errno>;

    /// `mmap(NULL, len, prot, MAP_SHARED, fd, offset)`: a mapping as the
    /// trait's safety section promises.
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

    /// `fcntl(fd, F_DUPFD_CLOEXEC, 0)`: a new descriptor for the same open
    /// file (a context's command fd, for `ibv_import_device`). The default
    /// asks the running kernel, which duplicates whatever `fd` is; a fake
    /// that tracks its fds overrides it.
    fn dup_fd(&self, fd: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
        fd.try_clone_to_owned()
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EBADF)))
    }

    /// Reads a small text file (sysfs).
    fn read_to_string(&self, path: &Path) -> std::io::Result<String>;

    /// Lists the entries of a directory (sysfs), unsorted.
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<OsString>>;
}

/// A new epoll instance with nothing in it (`epoll_create1`): an fd that
/// never polls readable and fails every read, write and ioctl, which closed
/// contexts hand out in place of theirs (`context_fds.rs`).
pub(crate) fn empty_epoll() -> Result<OwnedFd, Errno> {
    nix::sys::epoll::Epoll::new(nix::sys::epoll::EpollCreateFlags::EPOLL_CLOEXEC).map(|e| e.0)
}

/// The transport used when the caller does not choose one: the running
/// kernel, one shared `Arc` for the process (rdma_cm shares a verbs context
/// per device and transport, and tells transports apart by this `Arc`).
pub fn linux() -> Arc<dyn Kernel> {
    static LINUX: std::sync::OnceLock<Arc<dyn Kernel>> = std::sync::OnceLock::new();
    LINUX.get_or_init(|| Arc::new(Linux)).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_transport_is_one_arc_for_the_process() {
        assert!(Arc::ptr_eq(&linux(), &linux()));
    }

    #[test]
    fn a_ucma_command_frames_or_fails_without_panicking() {
        let body = [0u8; 24];
        let mut resp = [0u8; 16];
        let mut cmd = UcmaCmd {
            cmd: 7,
            body: &body,
            response_at: Some(16),
            response: &mut resp,
        };
        let framed = cmd.framed().unwrap();
        assert_eq!(framed.len(), 8 + 24);
        assert_eq!(&framed[4..8], &[24, 0, 16, 0]);
        let addr = u64::from_ne_bytes(framed[24..32].try_into().unwrap());
        assert_eq!(addr, cmd.response.as_ptr() as u64);
        // The response slot must lie inside the body.
        cmd.response_at = Some(17);
        assert_eq!(cmd.framed(), Err(Errno::EINVAL));
        cmd.response_at = Some(usize::MAX - 3);
        assert_eq!(cmd.framed(), Err(Errno::EINVAL));
        // Sizes the header's u16 fields cannot say are refused, not cut.
        let big = vec![0u8; 70_000];
        let mut cmd = UcmaCmd {
            cmd: 7,
            body: &big,
            response_at: None,
            response: &mut [],
        };
        assert_eq!(cmd.framed(), Err(Errno::E2BIG));
        let mut big_out = vec![0u8; 65_536];
        let mut cmd = UcmaCmd {
            cmd: 7,
            body: &body,
            response_at: Some(0),
            response: &mut big_out,
        };
        assert_eq!(cmd.framed(), Err(Errno::E2BIG));
    }
}
