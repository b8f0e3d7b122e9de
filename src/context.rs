//! An open device context: the uverbs command fd, its async event fd, and
//! the provider state.
//!
//! Opening follows libibverbs (`libibverbs/device.c`, `verbs_open_device`):
//! open the `uverbsN` node read-write, create the ucontext with
//! `UVERBS_METHOD_GET_CONTEXT` (carrying the provider's driver data), falling
//! back to the `GET_CONTEXT` write command on kernels without the method, and
//! allocate the async event fd before any object exists: objects created
//! while the context has no async event file never report their events
//! (`ib_uverbs_get_async_event` in `drivers/infiniband/core/uverbs.h`).

use std::{
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    path::Path,
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc,
    },
};

use crate::abi;
use zerocopy::{FromZeros, IntoBytes};

use crate::{
    device_list::{self, DeviceInfo},
    error::{Context as _, Error, ErrorKind, Result},
    event_count::Registry,
    event_fd::EventFd,
    ioctl::{is_unsupported, IoctlCmd},
    providers::{
        context_fds::{Borrowed, Entered},
        AnyContext, Device, OpenRequest, ProviderKind, Transport,
    },
    sys::{self, Errno, Kernel, WriteCmd},
};

/// Verbs that have both an ioctl method and a write command; a kernel that
/// lacks the method (`ENOTTY`/`EPROTONOSUPPORT`) is remembered per verb so
/// the next call goes straight to `write()`, as libibverbs'
/// `unsupported_ioctls` bitmap does (`libibverbs/cmd_fallback.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Verb {
    GetContext = 0,
    QueryPort = 1,
    QueryGid = 2,
    DestroyPd = 3,
    DestroyMr = 4,
    DestroyAh = 5,
    CreateCq = 6,
    DestroyCq = 7,
    CreateQp = 8,
    DestroyQp = 9,
    CreateSrq = 10,
    DestroySrq = 11,
    DestroyMw = 12,
}

/// How commands reach the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandMode {
    /// ioctl methods where the kernel has them, `write()` commands otherwise
    /// (and for kernels that lack a method), as libibverbs does.
    #[default]
    Auto,
    /// Only `write()` commands, as libibverbs built with `IOCTL_MODE=write`;
    /// objects that only have ioctl methods are unavailable. For testing the
    /// fallback paths and for very old kernels.
    WriteOnly,
}

/// Which ioctl methods this kernel lacks.
#[derive(Debug, Default)]
pub(crate) struct Fallback {
    no_ioctl: AtomicBool,
    no_method: AtomicU32,
}

impl Fallback {
    /// Whether the verb should go straight to its write command.
    pub(crate) fn use_write(&self, verb: Verb) -> bool {
        self.no_ioctl.load(Ordering::Relaxed)
            || self.no_method.load(Ordering::Relaxed) & (1 << verb as u32) != 0
    }

    /// Records an ioctl failure; returns whether the write command should be tried.
    pub(crate) fn record(&self, verb: Verb, errno: Errno) -> bool {
        match errno {
            Errno::ENOTTY => self.no_ioctl.store(true, Ordering::Relaxed),
            Errno::EPROTONOSUPPORT => {
                self.no_method.fetch_or(1 << verb as u32, Ordering::Relaxed);
            }
            _ => return false,
        }
        debug_assert!(is_unsupported(errno));
        true
    }
}

/// Shared state of an open context; every object holds an `Arc` of it.
#[derive(Debug)]
pub(crate) struct ContextInner {
    pub(crate) kernel: Arc<dyn Kernel>,
    pub(crate) device: DeviceInfo,
    pub(crate) driver_id: u32,
    pub(crate) num_comp_vectors: u32,
    pub(crate) core_support: u64,
    pub(crate) provider: AnyContext,
    pub(crate) fallback: Fallback,
    /// Maps event `user_handle`s back to objects.
    pub(crate) events: Registry,
    /// Set once the device is gone (DEVICE_FATAL read, or EIO).
    pub(crate) removed: AtomicBool,
    /// Made by [`Context::import`] on another context's command fd: object
    /// creates that name the async event fd take no write fallback
    /// (libibverbs' `fallback_require_ioctl` for an imported context).
    pub(crate) imported: bool,
    /// The command fd and the async event fd (closed after the provider's
    /// mappings are dropped, async event fd first).
    pub(crate) transport: Transport,
}

impl ContextInner {
    /// The context's fds for one command (the async event fd a create
    /// command passes, an async event read): `EBADF` once the context is
    /// closed ([`Context::close`]).
    pub(crate) fn enter(&self) -> Result<Entered<'_>, Errno> {
        self.transport.enter()
    }

    /// The providers' view of this context: transport and command fd.
    #[inline]
    pub(crate) fn device(&self) -> Device<'_> {
        self.transport.device()
    }

    /// A new ioctl command for this device.
    pub(crate) fn ioctl_cmd<'a>(&self, object: u16, method: u16) -> IoctlCmd<'a> {
        IoctlCmd::new(object, method, self.driver_id)
    }

    /// Runs an ioctl (the crate's commands only: see `Device::ioctl` for
    /// the contract they keep).
    pub(crate) fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        self.device().ioctl(cmd)
    }

    /// Runs a write command (as [`ContextInner::ioctl`]).
    pub(crate) fn write_cmd(&self, cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
        self.device().write_cmd(cmd)
    }

    /// A legacy write command with a response: `req` must start with the
    /// 8-byte response slot.
    pub(crate) fn write_with_resp(
        &self,
        command: u32,
        req: &[u8],
        driver_in: &[u8],
        resp: &mut [u8],
        driver_out: &mut [u8],
    ) -> Result<(), Errno> {
        let mut cmd = WriteCmd {
            command,
            core_in: req,
            driver_in,
            core_out: resp,
            driver_out,
            ..WriteCmd::default()
        };
        self.write_cmd(&mut cmd)
    }

    /// Runs `ioctl` unless this kernel lacks it for `verb`; on `ENOTTY` /
    /// `EPROTONOSUPPORT` (remembered) or when it was known missing, runs
    /// `write` instead.
    /// `state` is what both forms fill (response buffers).
    pub(crate) fn ioctl_or_write<S: ?Sized, T>(
        &self,
        verb: Verb,
        state: &mut S,
        ioctl: impl FnOnce(&mut S) -> Result<T, Errno>,
        write: impl FnOnce(&mut S) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        if !self.fallback.use_write(verb) {
            match ioctl(state) {
                Err(e) if self.fallback.record(verb, e) => {}
                other => return other,
            }
        }
        // The write commands cannot name this context's async event fd:
        // the object's events would go to the exporter's
        // (cmd_cq.c / cmd_qp.c / cmd_srq.c: `fallback_require_ioctl`).
        if self.imported && matches!(verb, Verb::CreateCq | Verb::CreateQp | Verb::CreateSrq) {
            return Err(Errno::EOPNOTSUPP);
        }
        write(state)
    }

    /// Destroys an object that has a one-attribute ioctl destroy method and a
    /// `{u32 handle}` write command, such as PD, MR and AH.
    pub(crate) fn destroy_simple(
        &self,
        verb: Verb,
        (object, method, attr): (u16, u16, u16),
        write_command: u32,
        handle: u32,
    ) -> Result<(), Errno> {
        let result = self.ioctl_or_write(
            verb,
            &mut (),
            |_| {
                let mut cmd = self.ioctl_cmd(object, method);
                cmd.object(attr, handle);
                self.ioctl(&mut cmd)
            },
            |_| {
                let req = handle.to_ne_bytes();
                let mut cmd = WriteCmd {
                    command: write_command,
                    core_in: &req,
                    driver_in: &[],
                    core_out: &mut [],
                    driver_out: &mut [],
                    ..WriteCmd::default()
                };
                self.write_cmd(&mut cmd)
            },
        );
        disassociated_is_destroyed(result)
    }
}

/// The destroy method and write command of an object whose destroy response
/// reports how many events the kernel handed out for it (CQ, QP, SRQ).
#[derive(Debug)]
pub(crate) struct DestroyReporting {
    pub(crate) verb: Verb,
    pub(crate) op: &'static str,
    pub(crate) object: u16,
    pub(crate) method: u16,
    pub(crate) handle_attr: u16,
    pub(crate) resp_attr: u16,
    pub(crate) write_command: u32,
}

impl ContextInner {
    /// Destroys such an object: ioctl (or the write command with `write_req`,
    /// which must hold the handle), filling `resp` with the destroy response.
    /// Returns whether the device was already gone (`EIO`), in which case
    /// `resp` is not filled and no event will ever need acknowledging.
    pub(crate) fn destroy_reporting(
        &self,
        d: &DestroyReporting,
        handle: u32,
        write_req: &[u8],
        resp: &mut [u8],
    ) -> Result<bool> {
        let result = self.ioctl_or_write(
            d.verb,
            resp,
            |resp| {
                let mut cmd = self.ioctl_cmd(d.object, d.method);
                cmd.object(d.handle_attr, handle);
                cmd.output(d.resp_attr, resp);
                self.ioctl(&mut cmd)
            },
            |resp| self.write_with_resp(d.write_command, write_req, &[], resp, &mut []),
        );
        let gone = result == Err(Errno::EIO);
        disassociated_is_destroyed(result).map_err(|e| Error::sys(d.op, e))?;
        Ok(gone)
    }
}

/// After the device is gone (`EIO`: disassociated), the kernel already
/// destroyed every object, so a destroy counts as done; this is what
/// libibverbs does with `RDMAV_ALLOW_DISASSOC_DESTROY`, unconditionally.
pub(crate) fn disassociated_is_destroyed(result: Result<(), Errno>) -> Result<(), Errno> {
    match result {
        Err(Errno::EIO) => Ok(()),
        other => other,
    }
}

/// An open RDMA device (`struct ibv_context`).
///
/// Cloning is cheap and shares the context; it is closed, as
/// `ibv_close_device` closes it, when the last clone and the last object
/// created from it are gone, or earlier by [`Context::close`].
#[doc(alias = "ibv_close_device")]
#[derive(Debug)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl Clone for Context {
    fn clone(&self) -> Self {
        Context::from_inner(self.inner.clone())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        self.inner.transport.fds().release();
    }
}

impl Context {
    /// A handle on `inner`: every `Context` counts as a user of the
    /// context's fds for as long as it lives (`context_fds.rs`), as it may
    /// lend them out ([`Context::async_fd`], [`Context::cmd_fd`]).
    pub(crate) fn from_inner(inner: Arc<ContextInner>) -> Context {
        inner.transport.fds().register();
        Context { inner }
    }

    /// Closes the context now, as `ibv_close_device` does: its command fd
    /// and async event fd are closed even while objects made from it (or
    /// other clones of it) are alive, as soon as no command is in flight
    /// and no other clone lends them out (at once, when this is the last
    /// clone). The kernel then destroys what is left when it releases the
    /// command fd's file, which it does once no mapping of it remains
    /// either (an mlx5 UAR page or an rxe queue an object still maps keeps
    /// it until that object is gone).
    ///
    /// Afterwards every command of the context and of its objects fails
    /// with `EBADF` without reaching the kernel: a surviving object's
    /// `destroy()` reports that and gives the object back, and dropping it
    /// leaks its memory as for any refused destroy (the kernel object may
    /// still use it; see `object.rs`). Data-path calls that need no command
    /// (posting and polling on mlx5) still touch the object's own memory.
    /// [`Context::async_fd`] and [`Context::cmd_fd`] of a clone, or of a
    /// handle an object makes afterwards ([`ProtectionDomain::context`](crate::ProtectionDomain::context)),
    /// are a placeholder that never polls readable.
    ///
    /// Fails only when that placeholder cannot be made (the first close of
    /// the process opens it: `EMFILE`); the context is then left as it was
    /// and closes as if dropped.
    #[doc(alias = "ibv_close_device")]
    pub fn close(self) -> Result<()> {
        let placeholder = crate::providers::context_fds::placeholder()
            .map_err(|e| Error::sys("close the context", e))?;
        self.inner.transport.fds().close(placeholder);
        Ok(())
    }

    /// Whether [`Context::close`] was called on this context (through any
    /// clone).
    pub fn is_closed(&self) -> bool {
        self.inner.transport.fds().is_closed()
    }

    /// Opens a device by name (`None`: the first device), like `ibv_open_device`.
    #[doc(alias = "ibv_open_device")]
    pub fn open(name: Option<&str>) -> Result<Self> {
        Self::open_with(sys::linux(), name)
    }

    /// [`Context::open`] through a chosen transport.
    pub fn open_with(kernel: Arc<dyn Kernel>, name: Option<&str>) -> Result<Self> {
        let device = device_list::find_device(&kernel, name)?;
        Self::open_device(kernel, device)
    }

    /// Opens a device found by [`crate::devices`].
    pub fn open_device(kernel: Arc<dyn Kernel>, device: DeviceInfo) -> Result<Self> {
        Self::open_device_with_mode(kernel, device, CommandMode::Auto)
    }

    /// [`Context::open_device`] with a chosen [`CommandMode`].
    pub fn open_device_with_mode(
        kernel: Arc<dyn Kernel>,
        device: DeviceInfo,
        mode: CommandMode,
    ) -> Result<Self> {
        Self::open_with_request(kernel, device, mode, OpenRequest::default())
    }

    /// Opens `device` with provider-specific requests (`uverbs::mlx5::open_device`).
    pub(crate) fn open_with_request(
        kernel: Arc<dyn Kernel>,
        device: DeviceInfo,
        mode: CommandMode,
        request: OpenRequest,
    ) -> Result<Self> {
        // A device found without listing (`DeviceInfo` built by hand) still
        // honours RDMAV_FORK_SAFE before anything is allocated.
        crate::fork::init_from_env();
        let kind = provider_for(&device, "open device")?;
        let driver_id = device.driver_id.unwrap_or(abi::RDMA_DRIVER_UNKNOWN);
        let cmd_fd = open_node(kernel.as_ref(), &device)?;
        let fallback = Fallback::default();
        if mode == CommandMode::WriteOnly {
            fallback.no_ioctl.store(true, Ordering::Relaxed);
        }
        // The provider runs GET_CONTEXT with its driver data (and retries
        // with less if the kernel refuses); the core keeps the core answer.
        let mut transport = Transport::new(kernel.clone(), cmd_fd, driver_id);
        let mut opened = None;
        let provider = kind.open(
            transport.device(),
            &mut |driver_in, driver_out| {
                let fds = transport.enter().op("GET_CONTEXT")?;
                opened = Some(get_context(
                    kernel.as_ref(),
                    fds.cmd(),
                    driver_id,
                    &fallback,
                    driver_in,
                    driver_out,
                )?);
                Ok(())
            },
            &request,
        )?;
        let ctx = opened.ok_or_else(|| {
            Error::new(
                "GET_CONTEXT",
                ErrorKind::Malformed,
                format!("the {} provider opened no context", kind.name()),
            )
        })?;
        let async_fd: OwnedFd = match ctx.async_fd {
            Some(fd) => fd,
            None if mode == CommandMode::WriteOnly => {
                return Err(Error::new(
                    "IB_USER_VERBS_CMD_GET_CONTEXT",
                    ErrorKind::Malformed,
                    "the write command returned no async event fd",
                ))
            }
            None => {
                let fds = transport.enter().op("UVERBS_METHOD_ASYNC_EVENT_ALLOC")?;
                alloc_async_fd(kernel.as_ref(), fds.cmd(), driver_id)?
            }
        };
        transport.set_async_fd(EventFd::new(kernel.clone(), async_fd, "async event fd"));
        Ok(Context::from_inner(Arc::new(ContextInner {
            kernel,
            device,
            driver_id,
            num_comp_vectors: ctx.num_comp_vectors,
            core_support: ctx.core_support,
            provider,
            fallback,
            events: Registry::default(),
            removed: AtomicBool::new(false),
            imported: false,
            transport,
        })))
    }

    /// The device this context was opened on.
    pub fn device(&self) -> &DeviceInfo {
        &self.inner.device
    }

    /// The number of completion vectors (`ibv_context::num_comp_vectors`).
    pub fn num_comp_vectors(&self) -> u32 {
        self.inner.num_comp_vectors
    }

    /// The `IB_UVERBS_CORE_SUPPORT_*` bits the kernel reported (0 via write).
    pub fn core_support(&self) -> u64 {
        self.inner.core_support
    }

    /// The driver id the kernel expects in every ioctl.
    pub fn driver_id(&self) -> u32 {
        self.inner.driver_id
    }

    /// The provider's name (`"rxe"`, `"mlx5"`).
    pub fn provider_name(&self) -> &'static str {
        self.inner.provider.name()
    }

    /// How rdma-core's provider for this device numbers `struct ibv_wc`'s
    /// `wc_flags` ([`WcFlagsNumbering`](crate::WcFlagsNumbering)): what a C
    /// library over uverbs reports in place of [`WorkCompletion::wc_flags`]
    /// (the kernel's numbering) to be that provider's twin.
    ///
    /// [`WorkCompletion::wc_flags`]: crate::WorkCompletion::wc_flags
    pub fn wc_flags_numbering(&self) -> crate::WcFlagsNumbering {
        self.inner.provider.wc_flags_numbering()
    }

    /// The send operations this context's QPs of type `qp_type` post, the
    /// `send_ops_flags` such a QP may be created with
    /// ([`crate::QpCreateOptions::send_ops`]); `None` for a type with no
    /// send queue this crate posts to. rxe: rdma-core's rxe sets
    /// (`RXE_SUP_*_QP_SEND_OPS_FLAGS`); mlx5: libmlx5's without memory
    /// windows, invalidations and atomic writes, which its posts refuse.
    pub fn send_ops(&self, qp_type: crate::QpType) -> Option<crate::SendOpsFlags> {
        self.inner.provider.send_ops(qp_type)
    }

    /// The provider's state, for provider-specific APIs (`uverbs::mlx5`).
    #[cfg_attr(not(feature = "mlx5"), allow(dead_code))] // used by mlx5 only
    pub(crate) fn provider_state(&self) -> &AnyContext {
        &self.inner.provider
    }

    /// The provider's handle on the device (provider-specific APIs issue
    /// their own commands through it).
    #[cfg_attr(not(feature = "devx"), allow(dead_code))] // used by DevX only
    pub(crate) fn provider_device(&self) -> Device<'_> {
        self.inner.device()
    }

    /// The kernel transport the context was opened with.
    #[cfg_attr(not(feature = "devx"), allow(dead_code))] // used by DevX only
    pub(crate) fn kernel(&self) -> Arc<dyn Kernel> {
        self.inner.kernel.clone()
    }

    /// The command fd, for programs that send commands of their own (a
    /// driver method this crate lacks). To share the context, hand out
    /// [`Context::dup_cmd_fd`] instead ([`Context::import`]).
    ///
    /// # Safety
    ///
    /// Anything written to this fd, or sent to it as an ioctl, acts with
    /// the context's rights: the caller must keep the contract of
    /// [`Kernel::ioctl`](crate::sys::Kernel::ioctl) for every command (no
    /// address of memory it does not own), must not destroy, modify or
    /// reuse the handles of objects this crate created, and must not close
    /// the fd or change its flags.
    ///
    /// After [`Context::close`] it is a placeholder on which every command
    /// fails.
    #[allow(unsafe_code)] // an `unsafe fn`: the contract above
    pub unsafe fn cmd_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `self` is a registered handle (`from_inner`) for as long
        // as the borrow lives.
        match unsafe { self.inner.transport.fds().borrow() } {
            Borrowed::Open(fds) => fds.cmd.as_fd(),
            Borrowed::Closed(p) => p,
        }
    }

    /// How commands reach the kernel.
    pub fn command_mode(&self) -> CommandMode {
        if self.inner.fallback.no_ioctl.load(Ordering::Relaxed) {
            CommandMode::WriteOnly
        } else {
            CommandMode::Auto
        }
    }

    /// The async event fd, allocated when the context was opened: to
    /// `poll`/`epoll` it, then call [`Context::get_async_event`] or
    /// [`Context::try_get_async_event`].
    ///
    /// Never `read` it yourself: a record read that way is an event the
    /// kernel counts as delivered and the library never sees, so nobody can
    /// acknowledge it. An explicit `destroy()` of its CQ, QP or SRQ then
    /// waits for it forever, as `ibv_destroy_qp` does for an event never
    /// acknowledged; `try_destroy()` and dropping the object do not wait.
    ///
    /// After [`Context::close`] it is a placeholder that never polls
    /// readable.
    #[allow(unsafe_code)] // borrows through the handle's registration
    pub fn async_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `self` is a registered handle (`from_inner`) for as long
        // as the borrow lives.
        match unsafe { self.inner.transport.fds().borrow() } {
            Borrowed::Open(fds) => fds.async_fd(),
            Borrowed::Closed(p) => p,
        }
    }

    /// How many objects the context's event map holds: live CQs, QPs and
    /// SRQs, and destroyed ones whose reported events are not all
    /// acknowledged yet (feature `test-utils`).
    #[cfg(feature = "test-utils")]
    #[doc(hidden)]
    pub fn event_map_len(&self) -> usize {
        self.inner.events.len()
    }
}

/// The provider of `device`, whose driver ABI version it must speak.
pub(crate) fn provider_for(device: &DeviceInfo, op: &'static str) -> Result<ProviderKind> {
    let kind = ProviderKind::for_driver(device.driver_id, &device.name)?;
    if !kind.abi_versions().contains(&device.abi_version) {
        return Err(Error::new(
            op,
            ErrorKind::AbiVersion,
            format!(
                "{} reports driver ABI version {}; the {} provider speaks {:?}",
                device.name,
                device.abi_version,
                kind.name(),
                kind.abi_versions()
            ),
        ));
    }
    Ok(kind)
}

fn open_node(kernel: &dyn Kernel, device: &DeviceInfo) -> Result<OwnedFd> {
    let op = "open uverbs device node";
    let fd = kernel
        .open_rdwr(&device.path)
        .map_err(|e| Error::sys(op, e).with_detail(open_hint(&device.path, e)))?;
    if let Some(expected) = device.dev {
        let actual = kernel.char_dev(fd.as_fd()).op(op)?;
        if actual != expected {
            return Err(Error::new(
                op,
                ErrorKind::NoDevice,
                format!(
                    "{} is not the character device of {} (device number changed: \
                     the device was removed or renamed while opening)",
                    device.path.display(),
                    device.name
                ),
            ));
        }
    }
    Ok(fd)
}

fn open_hint(path: &Path, e: Errno) -> String {
    match e {
        Errno::EACCES | Errno::EPERM => format!(
            "{} needs read-write access (check its mode and your groups)",
            path.display()
        ),
        Errno::ENOENT => format!(
            "{} does not exist: is devtmpfs mounted and ib_uverbs loaded?",
            path.display()
        ),
        _ => format!("opening {}", path.display()),
    }
}

/// What `GET_CONTEXT` produced.
#[derive(Debug)]
struct Opened {
    num_comp_vectors: u32,
    core_support: u64,
    /// The write command returns an async event fd; the ioctl does not.
    async_fd: Option<OwnedFd>,
}

/// `UVERBS_METHOD_GET_CONTEXT`, or the `GET_CONTEXT` write command.
fn get_context(
    kernel: &dyn Kernel,
    fd: BorrowedFd<'_>,
    driver_id: u32,
    fallback: &Fallback,
    driver_in: &[u8],
    driver_out: &mut [u8],
) -> Result<Opened> {
    if !fallback.use_write(Verb::GetContext) {
        let mut vectors = 0u32;
        let mut support = 0u64;
        let mut cmd = IoctlCmd::new(
            abi::UVERBS_OBJECT_DEVICE,
            abi::UVERBS_METHOD_GET_CONTEXT,
            driver_id,
        );
        let v = cmd.output(
            abi::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
            vectors.as_mut_bytes(),
        );
        cmd.optional();
        let s = cmd.output(
            abi::UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT,
            support.as_mut_bytes(),
        );
        cmd.optional();
        cmd.driver_in(driver_in).driver_out(&mut *driver_out);
        match crate::providers::ioctl_on(kernel, fd, &mut cmd) {
            Ok(()) => {
                let (has_v, has_s) = (cmd.is_valid_output(v), cmd.is_valid_output(s));
                drop(cmd);
                return Ok(Opened {
                    num_comp_vectors: if has_v { vectors } else { 0 },
                    core_support: if has_s { support } else { 0 },
                    async_fd: None,
                });
            }
            Err(e) if fallback.record(Verb::GetContext, e) => {}
            Err(e) => return Err(Error::sys("UVERBS_METHOD_GET_CONTEXT", e)),
        }
    }
    let req = abi::IbUverbsGetContext { response: 0 };
    let mut resp = abi::IbUverbsGetContextResp::new_zeroed();
    let op = "IB_USER_VERBS_CMD_GET_CONTEXT";
    let mut cmd = WriteCmd {
        command: abi::IB_USER_VERBS_CMD_GET_CONTEXT,
        core_in: req.as_bytes(),
        driver_in,
        core_out: resp.as_mut_bytes(),
        driver_out,
        fd_at: Some(std::mem::offset_of!(abi::IbUverbsGetContextResp, async_fd)),
        new_fd: None,
    };
    crate::providers::write_cmd_on(kernel, fd, &mut cmd).op(op)?;
    let async_fd = cmd
        .new_fd
        .take()
        .ok_or_else(|| Error::new(op, ErrorKind::Malformed, "the kernel returned no async fd"))?;
    drop(cmd);
    Ok(Opened {
        num_comp_vectors: resp.num_comp_vectors,
        core_support: 0,
        async_fd: Some(async_fd),
    })
}

/// `UVERBS_METHOD_ASYNC_EVENT_ALLOC`: the context's async event fd.
pub(crate) fn alloc_async_fd(
    kernel: &dyn Kernel,
    fd: BorrowedFd<'_>,
    driver_id: u32,
) -> Result<OwnedFd> {
    let op = "UVERBS_METHOD_ASYNC_EVENT_ALLOC";
    let mut cmd = IoctlCmd::new(
        abi::UVERBS_OBJECT_ASYNC_EVENT,
        abi::UVERBS_METHOD_ASYNC_EVENT_ALLOC,
        driver_id,
    );
    let at = cmd.new_fd(abi::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE);
    crate::providers::ioctl_on(kernel, fd, &mut cmd).op(op)?;
    cmd.take_fd(at)
        .ok_or_else(|| Error::new(op, ErrorKind::Malformed, "the kernel returned no fd"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_is_remembered_per_verb_and_globally() {
        let f = Fallback::default();
        assert!(!f.use_write(Verb::QueryPort));
        assert!(!f.record(Verb::QueryPort, Errno::EINVAL));
        assert!(!f.use_write(Verb::QueryPort));
        assert!(f.record(Verb::QueryPort, Errno::EPROTONOSUPPORT));
        assert!(f.use_write(Verb::QueryPort));
        assert!(!f.use_write(Verb::QueryGid));
        assert!(f.record(Verb::GetContext, Errno::ENOTTY));
        assert!(f.use_write(Verb::QueryGid));
    }

    /// A transport that answers `GET_CONTEXT` with the number of a
    /// descriptor it did not create: the library must not take it (before,
    /// it adopted any open number and closed it on drop).
    #[test]
    fn a_descriptor_number_the_transport_did_not_hand_over_is_not_taken() {
        use std::os::fd::AsRawFd;

        use crate::testing::kernel::{dummy_fd, FakeKernel};

        let (read_end, theirs) = nix::unistd::pipe().unwrap();
        let number = theirs.as_raw_fd() as u32;
        let kernel = FakeKernel::new();
        kernel.on_write(move |cmd| {
            let mut resp = abi::IbUverbsGetContextResp::new_zeroed();
            resp.async_fd = number;
            resp.num_comp_vectors = 1;
            cmd.core_out.copy_from_slice(resp.as_bytes());
            Ok(())
        });
        let fallback = Fallback::default();
        fallback.record(Verb::GetContext, Errno::ENOTTY);
        let cmd_fd = dummy_fd();
        let err = get_context(&kernel, cmd_fd.as_fd(), 0, &fallback, &[], &mut [])
            .expect_err("no fd was handed over");
        assert_eq!(err.kind(), ErrorKind::Malformed, "{err}");
        // Still open and still the same pipe.
        assert_eq!(nix::unistd::write(&theirs, b"ok"), Ok(2));
        let mut got = [0u8; 2];
        assert_eq!(nix::unistd::read(read_end.as_raw_fd(), &mut got), Ok(2));
        assert_eq!(&got, b"ok");

        // The transport that hands it over: taken.
        let kernel = FakeKernel::new();
        kernel.on_write(|cmd| {
            let fd = dummy_fd();
            let mut resp = abi::IbUverbsGetContextResp::new_zeroed();
            resp.async_fd = fd.as_raw_fd() as u32;
            cmd.core_out.copy_from_slice(resp.as_bytes());
            cmd.new_fd = Some(fd);
            Ok(())
        });
        let opened = get_context(&kernel, cmd_fd.as_fd(), 0, &fallback, &[], &mut []).unwrap();
        assert!(opened.async_fd.is_some());
    }
}
