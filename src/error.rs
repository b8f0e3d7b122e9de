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
    /// A host or service name lookup failed (`getaddrinfo`, as
    /// `rdma_getaddrinfo` uses it): [`Error::gai_code`] has its `EAI_*` code.
    NameLookup,
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
    /// | `NameLookup` | `EADDRNOTAVAIL` | (`rdma_getaddrinfo` returns the `EAI_*` code, [`Error::gai_code`]) |
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
            ErrorKind::NameLookup => Errno::EADDRNOTAVAIL,
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

impl fmt::Display for FirmwareStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "firmware status {:#04x}, syndrome {:#010x}",
            self.status, self.syndrome
        )
    }
}

impl std::error::Error for FirmwareStatus {}

/// An error from a uverbs operation.
///
/// libibverbs reports the same failures as an errno (in `errno` or as the
/// return value).
///
/// The text is short and the rest is in fields and in the source chain, as
/// the standard library's errors are: `Display` says `"<op> failed"` (and
/// the library's own explanation, for an error no system call gave); the
/// kernel's errno is [`std::error::Error::source`], an [`std::io::Error`];
/// [`Error::op`], [`Error::kind`], [`Error::errno`], [`Error::detail`] and
/// [`Error::hint`] are what a program matches on. The alternate form
/// (`{:#}`) writes everything on one line, for a command-line tool:
///
/// ```
/// use uverbs::{Error, ErrorKind, sys::Errno};
///
/// let e = Error::sys("open /dev/infiniband/uverbs0", Errno::EACCES);
/// assert_eq!(e.to_string(), "open /dev/infiniband/uverbs0 failed");
/// let os = std::error::Error::source(&e).unwrap();
/// assert_eq!(os.to_string(), std::io::Error::from_raw_os_error(libc::EACCES).to_string());
/// assert_eq!((e.kind(), e.errno()), (ErrorKind::Os, Errno::EACCES));
/// assert!(e.hint().unwrap().contains("permissions"));
/// assert!(format!("{e:#}").starts_with("open /dev/infiniband/uverbs0 failed: EACCES ("));
/// ```
#[derive(Debug)]
pub struct Error {
    op: Cow<'static, str>,
    kind: ErrorKind,
    errno: Option<Errno>,
    detail: Option<Cow<'static, str>>,
    firmware: Option<Box<FirmwareStatus>>,
    /// The `EAI_*` code of a failed name lookup.
    gai: Option<i32>,
    // The kernel's errno as the standard library's error, the end of the
    // source chain: always `from_raw_os_error(errno)` (no allocation).
    os: Option<std::io::Error>,
}

impl Clone for Error {
    fn clone(&self) -> Self {
        Error {
            op: self.op.clone(),
            kind: self.kind,
            errno: self.errno,
            detail: self.detail.clone(),
            firmware: self.firmware.clone(),
            gai: self.gai,
            os: self.os.as_ref().and(self.errno).and_then(os_error),
        }
    }
}

/// Equal when the operation, kind, errno, detail and firmware answer are.
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.op == other.op
            && self.kind == other.kind
            && self.errno == other.errno
            && self.detail == other.detail
            && self.firmware == other.firmware
            && self.gai == other.gai
    }
}

impl Eq for Error {}

fn os_error(errno: Errno) -> Option<std::io::Error> {
    Some(std::io::Error::from_raw_os_error(errno as i32))
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
            gai: None,
            os: os_error(errno),
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
            gai: None,
            os: None,
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
            gai: None,
            os: os_error(Errno::EREMOTEIO),
        }
    }

    /// A failed name lookup ([`ErrorKind::NameLookup`]) with its `EAI_*`
    /// code (`libc::EAI_NONAME`, ...), as `getaddrinfo` returns it.
    pub fn name_lookup(
        op: impl Into<Cow<'static, str>>,
        gai_code: i32,
        detail: impl Into<Cow<'static, str>>,
    ) -> Self {
        let mut e = Error::new(op, ErrorKind::NameLookup, detail);
        e.gai = Some(gai_code);
        e
    }

    /// The `EAI_*` code of a failed name lookup ([`ErrorKind::NameLookup`]),
    /// what `rdma_getaddrinfo` returns for it.
    pub fn gai_code(&self) -> Option<i32> {
        self.gai
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

    /// What to do about a kernel errno, in general terms (permissions,
    /// locked-memory limit, a removed device, ...), if there is something
    /// to say. Not part of `Display`: the alternate form (`{:#}`) adds it.
    pub fn hint(&self) -> Option<&'static str> {
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

/// `"<op> failed"`, then `": <detail>"` if the error carries one. The
/// alternate form (`{:#}`) adds the errno's name and text, the firmware's
/// answer and the hint: everything on one line, for a tool to print.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed", self.op)?;
        if f.alternate() {
            if let Some(e) = self.errno {
                write!(f, ": {e:?} ({})", e.desc())?;
            }
            if let Some(fw) = &self.firmware {
                write!(f, ": {fw}")?;
            }
        }
        if let Some(detail) = &self.detail {
            write!(f, ": {detail}")?;
        } else if let Some(hint) = self.hint().filter(|_| f.alternate()) {
            write!(f, ": {hint}")?;
        }
        Ok(())
    }
}

/// The source is the firmware's answer for an [`ErrorKind::Firmware`]
/// error, else the kernel's errno as an [`std::io::Error`] (none for an
/// error the library found itself).
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        if let Some(fw) = &self.firmware {
            return Some(&**fw);
        }
        self.os
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

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

/// Delegates to the [`Error`] (same text, same source).
impl<T> fmt::Display for DestroyError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T> std::error::Error for DestroyError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.error)
    }
}

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
    fn display_is_short_and_the_errno_is_the_source() {
        let e = Error::sys("open /dev/infiniband/uverbs0", Errno::EACCES);
        assert_eq!(e.to_string(), "open /dev/infiniband/uverbs0 failed");
        let os = std::error::Error::source(&e).expect("the errno");
        let io = os.downcast_ref::<std::io::Error>().expect("an io::Error");
        assert_eq!(io.raw_os_error(), Some(libc::EACCES));
        assert!(os.source().is_none());
        assert!(e.hint().expect("a hint").contains("permissions"));
        // A clone keeps its source.
        let c = e.clone();
        let io = std::error::Error::source(&c)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the clone's errno");
        assert_eq!((io.raw_os_error(), c), (Some(libc::EACCES), e));
    }

    #[test]
    fn the_alternate_form_says_everything_on_one_line() {
        let e = Error::sys("open /dev/infiniband/uverbs0", Errno::EACCES);
        let s = format!("{e:#}");
        assert!(
            s.starts_with("open /dev/infiniband/uverbs0 failed: EACCES (Permission denied): "),
            "{s}"
        );
        assert!(s.ends_with(e.hint().unwrap()), "{s}");
        // A detail replaces the generic hint, in both forms.
        let e = Error::sys("IB_USER_VERBS_CMD_MODIFY_QP", Errno::EINVAL)
            .with_detail("RESET->INIT needs PKEY_INDEX, PORT, ACCESS_FLAGS");
        assert_eq!(
            e.to_string(),
            "IB_USER_VERBS_CMD_MODIFY_QP failed: RESET->INIT needs PKEY_INDEX, PORT, ACCESS_FLAGS"
        );
        assert_eq!(
            format!("{e:#}"),
            "IB_USER_VERBS_CMD_MODIFY_QP failed: EINVAL (Invalid argument): \
             RESET->INIT needs PKEY_INDEX, PORT, ACCESS_FLAGS"
        );
    }

    #[test]
    fn a_firmware_error_has_the_mailbox_as_its_source() {
        let status = FirmwareStatus {
            status: 0x3,
            syndrome: 0x1234_5678,
            out: vec![3, 0, 0, 0, 0x12, 0x34, 0x56, 0x78],
        };
        let e = Error::firmware("MLX5_CMD_OP_CREATE_CQ", status.clone());
        assert_eq!(e.to_string(), "MLX5_CMD_OP_CREATE_CQ failed");
        let src = std::error::Error::source(&e).expect("the firmware's answer");
        assert_eq!(src.downcast_ref::<FirmwareStatus>(), Some(&status));
        assert_eq!(src.to_string(), "firmware status 0x03, syndrome 0x12345678");
        assert_eq!(e.errno(), Errno::EREMOTEIO);
    }

    #[test]
    fn a_refused_destroy_has_its_error_s_text_and_source() {
        let d = DestroyError::new(7u32, Error::sys("UVERBS_METHOD_CQ_DESTROY", Errno::EBUSY));
        assert_eq!(d.to_string(), "UVERBS_METHOD_CQ_DESTROY failed");
        let io = std::error::Error::source(&d)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the errno");
        assert_eq!(io.raw_os_error(), Some(libc::EBUSY));
        assert_eq!(d.into_inner(), 7);
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
