//! The crate's error type.
//!
//! Every error names the operation that failed (the uverbs method, write
//! command, or system call, e.g. `"UVERBS_METHOD_QUERY_PORT"` or
//! `"open /dev/infiniband/uverbs0"`), carries the errno when the kernel
//! produced one, and says what to do about it where that is known.

use std::{borrow::Cow, fmt};

use crate::sys::Errno;

/// What kind of failure an [`Error`] is.
///
/// libibverbs has no counterpart: it returns a bare errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A system call failed; [`Error::errno`] says how.
    Os,
    /// No RDMA device matched the request.
    NoDevice,
    /// The device's driver has no provider compiled into this crate.
    UnsupportedProvider,
    /// The kernel speaks an ABI version this crate does not.
    AbiVersion,
    /// The kernel (or a file it exports) returned something malformed.
    Malformed,
    /// The caller asked for something invalid; the message says what.
    InvalidArgument,
    /// The device was removed (disassociated); only destroying objects still works.
    DeviceRemoved,
    /// The device's firmware failed a command (mlx5 DevX): [`Error::firmware`]
    /// has its status, syndrome and output mailbox when the kernel returned them.
    Firmware,
    /// The kernel dropped events it could not queue (a DevX channel's
    /// `EOVERFLOW`): resynchronise by querying; later events read normally.
    EventsLost,
    /// The call would have to wait and may not (`EAGAIN`): an event get on
    /// an fd the program made `O_NONBLOCK`, as libibverbs returns `EAGAIN`
    /// there; poll the fd and call again.
    WouldBlock,
    /// A signal handler ran while the call waited in the kernel (`EINTR`),
    /// as libibverbs' blocking gets return it: act on the signal or call
    /// again.
    Interrupted,
}

impl ErrorKind {
    /// The errno libibverbs, librdmacm and libmlx5 report for a failure of
    /// this kind when no system call gave one: what [`Error::errno`] says
    /// for an error the library found itself.
    ///
    /// | kind | errno | as in rdma-core |
    /// | --- | --- | --- |
    /// | `Os` | `EIO` | (never used: such an error carries the call's errno) |
    /// | `NoDevice` | `ENODEV` | librdmacm's "no device"; `ibv_open_device` of a gone device |
    /// | `UnsupportedProvider` | `EOPNOTSUPP` | a verb the provider lacks |
    /// | `AbiVersion` | `ENOSYS` | libibverbs `check_abi_version` (`init.c`) |
    /// | `Malformed` | `EPROTO` | an answer the library cannot parse |
    /// | `InvalidArgument` | `EINVAL` | bad input, checked before any call |
    /// | `DeviceRemoved` | `EIO` | what the kernel answers after disassociation |
    /// | `Firmware` | `EREMOTEIO` | mlx5 DevX commands since Linux 5.19 |
    /// | `EventsLost` | `EOVERFLOW` | `mlx5dv_devx_get_event` |
    /// | `WouldBlock` | `EAGAIN` | `ibv_get_cq_event` on an `O_NONBLOCK` channel |
    /// | `Interrupted` | `EINTR` | `ibv_get_async_event` interrupted by a signal |
    pub const fn errno(self) -> Errno {
        match self {
            ErrorKind::Os | ErrorKind::DeviceRemoved => Errno::EIO,
            ErrorKind::NoDevice => Errno::ENODEV,
            ErrorKind::UnsupportedProvider => Errno::EOPNOTSUPP,
            ErrorKind::AbiVersion => Errno::ENOSYS,
            ErrorKind::Malformed => Errno::EPROTO,
            ErrorKind::InvalidArgument => Errno::EINVAL,
            ErrorKind::Firmware => Errno::EREMOTEIO,
            ErrorKind::EventsLost => Errno::EOVERFLOW,
            ErrorKind::WouldBlock => Errno::EAGAIN,
            ErrorKind::Interrupted => Errno::EINTR,
        }
    }
}

/// What the firmware answered to a command it failed (mlx5's PRM output
/// mailbox: `status` at byte 0, `syndrome` big-endian at bytes 4..8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareStatus {
    /// `MLX5_CMD_STAT_*`.
    pub status: u8,
    /// The firmware's own reason code.
    pub syndrome: u32,
    /// The whole output mailbox.
    pub out: Vec<u8>,
}

/// An error from a uverbs operation.
///
/// libibverbs reports the same failures as an errno (in `errno` or as the return value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    op: Cow<'static, str>,
    kind: ErrorKind,
    errno: Option<Errno>,
    detail: Option<Cow<'static, str>>,
    firmware: Option<Box<FirmwareStatus>>,
}

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A failed system call or kernel command.
    pub fn sys(op: impl Into<Cow<'static, str>>, errno: Errno) -> Self {
        let kind = match errno {
            Errno::EIO => ErrorKind::DeviceRemoved,
            Errno::EAGAIN => ErrorKind::WouldBlock,
            Errno::EINTR => ErrorKind::Interrupted,
            _ => ErrorKind::Os,
        };
        Error {
            op: op.into(),
            kind,
            errno: Some(errno),
            detail: None,
            firmware: None,
        }
    }

    /// A failure that is not an errno.
    pub fn new(
        op: impl Into<Cow<'static, str>>,
        kind: ErrorKind,
        detail: impl Into<Cow<'static, str>>,
    ) -> Self {
        Error {
            op: op.into(),
            kind,
            errno: None,
            detail: Some(detail.into()),
            firmware: None,
        }
    }

    /// A command the firmware failed (the kernel answered `EREMOTEIO` and
    /// the output mailbox).
    pub fn firmware(op: impl Into<Cow<'static, str>>, status: FirmwareStatus) -> Self {
        Error {
            op: op.into(),
            kind: ErrorKind::Firmware,
            errno: Some(Errno::EREMOTEIO),
            detail: None,
            firmware: Some(Box::new(status)),
        }
    }

    /// Adds an explanation (what was being done, or what to fix).
    pub fn with_detail(mut self, detail: impl Into<Cow<'static, str>>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// The operation that failed.
    pub fn op(&self) -> &str {
        &self.op
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The errno a C program would see for this failure: the one the
    /// kernel (or a system call) returned, else the one rdma-core reports
    /// for the same kind of failure ([`ErrorKind::errno`]): `EINVAL` for
    /// bad input, `EOVERFLOW` for lost DevX events, and so on. Every error
    /// has one.
    pub fn errno(&self) -> Errno {
        self.errno.unwrap_or(self.kind.errno())
    }

    /// The errno the kernel or a system call returned, if this error came
    /// from one (`None` for what the library found itself).
    pub fn kernel_errno(&self) -> Option<Errno> {
        self.errno
    }

    /// The explanation attached to this error, if any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// What the firmware answered, for an [`ErrorKind::Firmware`] error.
    pub fn firmware_status(&self) -> Option<&FirmwareStatus> {
        self.firmware.as_deref()
    }

    /// A generic hint for an errno, used when no specific explanation is attached.
    fn hint(&self) -> Option<&'static str> {
        let errno = self.errno?;
        Some(match errno {
            Errno::EACCES | Errno::EPERM => {
                "check the permissions of /dev/infiniband/* (read-write access is needed); \
                 uverbs write() commands also fail with EACCES on an fd inherited by a process \
                 with other credentials"
            }
            Errno::ENOENT | Errno::ENXIO | Errno::ENODEV => {
                "the device node or device is gone: is the ib_uverbs module loaded and the \
                 device still registered (`rdma dev`)?"
            }
            Errno::EIO => {
                "the device was removed or disassociated; destroy the remaining objects \
                 and close the context"
            }
            Errno::ENOMEM => {
                "out of memory, or the locked-memory limit is too low for registering \
                 memory (raise it with `ulimit -l`)"
            }
            Errno::EOPNOTSUPP | Errno::EPROTONOSUPPORT | Errno::ENOTTY => {
                "the running kernel or the device does not support this operation"
            }
            Errno::EAGAIN => "no event is pending (non-blocking mode)",
            Errno::EBUSY => "the object is still in use by other objects; destroy those first",
            _ => return None,
        })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.op)?;
        match self.errno {
            Some(e) => write!(f, " failed: {e:?} ({})", e.desc())?,
            None => write!(f, " failed")?,
        }
        if let Some(detail) = &self.detail {
            write!(f, ": {detail}")?;
        } else if let Some(hint) = self.hint() {
            write!(f, ": {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// A `destroy()` that did not destroy: the error, and the object itself,
/// unchanged and still usable (a CQ can still be polled, an SRQ refilled).
///
/// `?` turns it into an [`Error`], dropping the object: it is then
/// destroyed when its last reference goes, as any dropped handle.
///
/// libibverbs' `ibv_destroy_*` return the errno and leave the object usable; this gives the object back with it.
pub struct DestroyError<T> {
    // Boxed: a `Result<(), DestroyError<_>>` stays small on the success path.
    object: Box<T>,
    error: Error,
}

impl<T> DestroyError<T> {
    pub(crate) fn new(object: T, error: Error) -> Self {
        DestroyError {
            object: Box::new(object),
            error,
        }
    }

    /// Why the destroy failed.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The errno, as [`Error::errno`] (`EBUSY`: still in use; `EAGAIN`:
    /// `try_destroy` found events other threads hold).
    pub fn errno(&self) -> Errno {
        self.error.errno()
    }

    /// The kind, as [`Error::kind`].
    pub fn kind(&self) -> ErrorKind {
        self.error.kind()
    }

    /// The object back, to use or to destroy again.
    pub fn into_inner(self) -> T {
        *self.object
    }

    /// The object and the error.
    pub fn into_parts(self) -> (T, Error) {
        (*self.object, self.error)
    }
}

impl<T> fmt::Debug for DestroyError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DestroyError")
            .field("object", &std::any::type_name::<T>())
            .field("error", &self.error)
            .finish()
    }
}

impl<T> fmt::Display for DestroyError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T> std::error::Error for DestroyError<T> {}

impl<T> From<DestroyError<T>> for Error {
    fn from(e: DestroyError<T>) -> Self {
        e.error
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        let kind = std::io::Error::from_raw_os_error(e.errno() as i32).kind();
        std::io::Error::new(kind, e)
    }
}

/// Attaches an operation name to a raw errno result.
pub(crate) trait Context<T> {
    fn op(self, op: &'static str) -> Result<T>;
}

impl<T> Context<T> for std::result::Result<T, Errno> {
    fn op(self, op: &'static str) -> Result<T> {
        self.map_err(|e| Error::sys(op, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_operation_the_errno_and_a_hint() {
        let e = Error::sys("open /dev/infiniband/uverbs0", Errno::EACCES);
        let s = e.to_string();
        assert!(
            s.starts_with("open /dev/infiniband/uverbs0 failed: EACCES"),
            "{s}"
        );
        assert!(s.contains("permissions"), "{s}");
    }

    #[test]
    fn detail_replaces_the_generic_hint() {
        let e = Error::sys("IB_USER_VERBS_CMD_MODIFY_QP", Errno::EINVAL)
            .with_detail("RESET->INIT needs PKEY_INDEX, PORT, ACCESS_FLAGS");
        assert_eq!(
            e.to_string(),
            "IB_USER_VERBS_CMD_MODIFY_QP failed: EINVAL (Invalid argument): \
             RESET->INIT needs PKEY_INDEX, PORT, ACCESS_FLAGS"
        );
    }

    #[test]
    fn eio_means_device_removed() {
        assert_eq!(
            Error::sys("UVERBS_METHOD_CQ_DESTROY", Errno::EIO).kind(),
            ErrorKind::DeviceRemoved
        );
    }

    #[test]
    fn converts_to_io_error_with_the_errno_kind() {
        let io: std::io::Error = Error::sys("read", Errno::EAGAIN).into();
        assert_eq!(io.kind(), std::io::ErrorKind::WouldBlock);
        let io: std::io::Error =
            Error::new("sge", ErrorKind::InvalidArgument, "past the end").into();
        assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    }

    #[test]
    fn every_error_has_the_errno_rdma_core_gives_its_kind() {
        use ErrorKind as K;
        for (kind, errno) in [
            (K::NoDevice, Errno::ENODEV),
            (K::UnsupportedProvider, Errno::EOPNOTSUPP),
            (K::AbiVersion, Errno::ENOSYS),
            (K::Malformed, Errno::EPROTO),
            (K::InvalidArgument, Errno::EINVAL),
            (K::DeviceRemoved, Errno::EIO),
            (K::Firmware, Errno::EREMOTEIO),
            (K::EventsLost, Errno::EOVERFLOW),
        ] {
            let e = Error::new("op", kind, "what");
            assert_eq!((e.errno(), e.kernel_errno()), (errno, None), "{kind:?}");
        }
        // The kernel's errno wins over the kind's.
        let e = Error::sys("DESTROY", Errno::EBUSY);
        assert_eq!(
            (e.errno(), e.kernel_errno()),
            (Errno::EBUSY, Some(Errno::EBUSY))
        );
        // The text of a library-found error names no errno it was not given.
        assert_eq!(
            Error::new("sge", ErrorKind::InvalidArgument, "past the end").to_string(),
            "sge failed: past the end"
        );
    }
}
