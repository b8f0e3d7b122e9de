//! The handle a provider gets from the core: the kernel transport and the
//! command fd of one open context, and nothing else of the core.
//!
//! Providers issue their own commands through it (driver-specific ioctl
//! methods such as mlx5's UAR allocation or DevX, rxe's doorbell write,
//! legacy write commands such as `REQ_NOTIFY_CQ`) and map what the kernel
//! exports (rxe rings, mlx5 UAR pages).
#![allow(unsafe_code)] // the funnel into the transport's `unsafe fn`s

use std::{
    os::fd::{BorrowedFd, OwnedFd},
    sync::Arc,
};

use super::context_fds::{ContextFds, Entered};
use crate::{
    event_fd::EventFd,
    ioctl::IoctlCmd,
    sys::{Errno, Kernel, Mapping, Protection, WriteCmd},
};

/// The kernel transport of one open context: the transport and the
/// context's fds (the command fd, whose last close tears the kernel's
/// ucontext down, and the async event fd), which `Context::close` closes
/// while objects live on (`context_fds.rs`).
#[derive(Debug)]
pub(crate) struct Transport {
    kernel: Arc<dyn Kernel>,
    fds: ContextFds,
    driver_id: u32,
}

impl Transport {
    /// The transport of the context whose command fd is `cmd_fd`.
    pub(crate) fn new(kernel: Arc<dyn Kernel>, cmd_fd: OwnedFd, driver_id: u32) -> Self {
        Transport {
            kernel,
            fds: ContextFds::new(cmd_fd),
            driver_id,
        }
    }

    /// The context's fds.
    pub(crate) fn fds(&self) -> &ContextFds {
        &self.fds
    }

    /// Sets the async event fd, once the context is open.
    pub(crate) fn set_async_fd(&mut self, events: EventFd) {
        self.fds.set_events(events);
    }

    /// The context's fds for one command: `EBADF` once it is closed (the
    /// command is not sent).
    #[inline]
    pub(crate) fn enter(&self) -> Result<Entered<'_>, Errno> {
        self.fds.enter().ok_or(Errno::EBADF)
    }

    /// The providers' view of it.
    #[inline]
    pub(crate) fn device(&self) -> Device<'_> {
        Device { t: self }
    }
}

/// Runs one of the crate's ioctls on a uverbs command fd: the funnel of
/// every uverbs command into the transport's `unsafe fn`s.
///
/// Crate-private and safe to call: every command of the core and the
/// providers is built with the typed builders, and every address one
/// carries as a value names memory the object being created owns and keeps
/// until the kernel object is destroyed (a memory region pins its own
/// buffer, or one an `unsafe` constructor's caller vouched for; DevX UMEMs
/// likewise; mlx5 queue and doorbell buffers are freed only after their
/// destroy command succeeded). New code that puts an address into a command
/// must keep that, and say so where it builds the command.
pub(crate) fn ioctl_on(
    kernel: &dyn Kernel,
    fd: BorrowedFd<'_>,
    cmd: &mut IoctlCmd<'_>,
) -> Result<(), Errno> {
    // SAFETY: the crate's commands keep the contract of `Kernel::ioctl`
    // (above); `fd` is a command fd the crate opened.
    unsafe { kernel.ioctl(fd, cmd) }
}

/// [`ioctl_on`] for legacy and extended write commands.
pub(crate) fn write_cmd_on(
    kernel: &dyn Kernel,
    fd: BorrowedFd<'_>,
    cmd: &mut WriteCmd<'_>,
) -> Result<(), Errno> {
    // SAFETY: as in `ioctl_on`.
    unsafe { kernel.write_cmd(fd, cmd) }
}

/// A provider's view of an open device context: one pointer wide, so the
/// data path passes it at no cost.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Device<'a> {
    t: &'a Transport,
}

// The ioctl half is for driver methods (mlx5 UAR allocation, DevX); rxe
// uses only write and mmap.
#[allow(dead_code)]
impl Device<'_> {
    /// The `RDMA_DRIVER_*` id every ioctl carries.
    pub(crate) fn driver_id(&self) -> u32 {
        self.t.driver_id
    }

    /// A new ioctl command for this device.
    pub(crate) fn ioctl_cmd<'b>(&self, object: u16, method: u16) -> IoctlCmd<'b> {
        IoctlCmd::new(object, method, self.t.driver_id)
    }

    /// Runs an ioctl on the command fd (see [`ioctl_on`]); `EBADF` once
    /// the context is closed.
    pub(crate) fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        let fds = self.t.enter()?;
        ioctl_on(&*self.t.kernel, fds.cmd(), cmd)
    }

    /// Runs a legacy or extended write command on the command fd (see
    /// [`ioctl_on`]).
    pub(crate) fn write_cmd(&self, cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
        let fds = self.t.enter()?;
        write_cmd_on(&*self.t.kernel, fds.cmd(), cmd)
    }

    /// A raw `write()` of prebuilt command bytes (rxe's send doorbell: a
    /// `POST_SEND` command whose only address is its response slot, a
    /// buffer the doorbell owns and never reads; rxe's CQ arm: a
    /// `REQ_NOTIFY_CQ` command, which has no response and no address).
    #[inline]
    pub(crate) fn write(&self, bytes: &[u8]) -> Result<usize, Errno> {
        let fds = self.t.enter()?;
        // SAFETY: the raw commands are rxe's (above, in
        // `providers/rxe/doorbell.rs`): the doorbell's one address is a
        // heap buffer the `Doorbell` owns for as long as its bytes exist,
        // and the arm command carries no address at all.
        unsafe { self.t.kernel.write(fds.cmd(), bytes) }
    }

    /// Maps `len` bytes the kernel exports at `offset` of the command fd.
    pub(crate) fn mmap(&self, len: usize, offset: u64, prot: Protection) -> Result<Mapping, Errno> {
        let fds = self.t.enter()?;
        self.t.kernel.mmap(fds.cmd(), len, offset, prot)
    }
}
