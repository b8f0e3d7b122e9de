//! Sharing a context between processes (`ibv_import_device`): a context
//! made on a duplicate of another context's command fd, which names the
//! same kernel user context, so that its PDs and MRs can be imported by
//! handle ([`Context::import_pd`], [`crate::ProtectionDomain::import_mr`]) and
//! used with objects of its own.
//!
//! As libibverbs 44 (`libibverbs/device.c` `ibv_import_device`): the fd must
//! be the character device of a listed RDMA device (`EINVAL` when it is no
//! character device, `ENODEV` when no device has its number); the provider
//! sets its context up from `UVERBS_METHOD_QUERY_CONTEXT`, which answers
//! the completion vectors, the core support bits and the driver's context
//! response (mlx5: `mlx5_import_context`); the context gets an async event
//! fd of its own (`UVERBS_METHOD_ASYNC_EVENT_ALLOC`), and its CQs, QPs and
//! SRQs are created only with the ioctl methods, which name that fd.
//!
//! Which providers share: rdma-core's mlx5 does; its rxe has no import ops
//! (`EOPNOTSUPP`, answered here by the provider without asking the kernel,
//! whose rxe has no `query_ucontext` either: the kernel would answer
//! `QUERY_CONTEXT` with `EOPNOTSUPP`, uverbs_std_types_device.c).
//!
//! Imported objects are this process's handles on kernel objects another
//! context created: dropping one, or [`crate::ProtectionDomain::unimport`] /
//! [`MemoryRegion::unimport`](crate::MemoryRegion::unimport), releases the
//! handle only (`ibv_unimport_pd`, `ibv_unimport_mr`); `destroy()` destroys
//! the kernel object itself, for every context, as `ibv_dealloc_pd` and
//! `ibv_dereg_mr` do on an imported object.

use std::{
    os::fd::{BorrowedFd, OwnedFd},
    sync::{atomic::AtomicBool, Arc},
};

use zerocopy::IntoBytes;

use crate::{
    abi,
    context::{alloc_async_fd, provider_for, Context, ContextInner, Fallback},
    device_list,
    error::{Context as _, Error, ErrorKind, Result},
    event_count::Registry,
    event_fd::EventFd,
    ioctl::IoctlCmd,
    providers::Transport,
    sys::{Errno, Kernel},
};

impl Context {
    /// Imports the context whose command fd `cmd_fd` is (a duplicate of),
    /// like `ibv_import_device` (see the module documentation): the new
    /// context works on a duplicate of its own (closed when the context
    /// is; the caller keeps `cmd_fd`) and shares the kernel objects of the
    /// one it came from, in this process or another.
    ///
    /// # Errors
    ///
    /// `EINVAL` when `cmd_fd` is no character device; `ENODEV` when no
    /// listed RDMA device has its number; `EOPNOTSUPP` when the device's
    /// provider imports no contexts (rxe) or the kernel cannot answer
    /// `QUERY_CONTEXT`; mlx5: `EINVAL` for a context with static bfregs
    /// (libmlx5 imports only dynamic-UAR contexts).
    #[doc(alias = "ibv_import_device")]
    pub fn import(kernel: Arc<dyn Kernel>, cmd_fd: BorrowedFd<'_>) -> Result<Self> {
        let op = "ibv_import_device";
        crate::fork::init_from_env();
        let rdev = kernel
            .char_dev(cmd_fd)
            .map_err(|_| Error::sys(op, Errno::EINVAL).with_detail("not a character device"))?;
        // No device list is ENODEV too (libibverbs: `ibv_get_device_list`
        // failing).
        let devices = device_list::devices_with(&kernel).map_err(|e| {
            Error::new(op, ErrorKind::NoDevice, format!("listing the devices: {e}"))
        })?;
        let device = devices
            .into_iter()
            .find(|d| d.dev == Some(rdev))
            .ok_or_else(|| {
                Error::new(
                    op,
                    ErrorKind::NoDevice,
                    format!(
                        "no RDMA device has the character device {}:{}",
                        libc::major(rdev),
                        libc::minor(rdev)
                    ),
                )
            })?;
        let kind = provider_for(&device, op)?;
        let driver_id = device.driver_id.unwrap_or(abi::RDMA_DRIVER_UNKNOWN);
        let own = kernel.dup_fd(cmd_fd).op(op)?;
        let transport = Transport::new(kernel.clone(), own, driver_id);
        let mut queried = None;
        let provider = kind.import(transport.device(), &mut |driver_out| {
            queried = Some(query_context(
                kernel.as_ref(),
                &transport,
                driver_id,
                driver_out,
            )?);
            Ok(())
        })?;
        let (num_comp_vectors, core_support) = queried.ok_or_else(|| {
            Error::new(
                op,
                ErrorKind::Malformed,
                format!("the {} provider queried no context", kind.name()),
            )
        })?;
        let async_fd = alloc_async_fd(kernel.as_ref(), transport.fd(), driver_id)?;
        let async_fd = EventFd::new(kernel.clone(), async_fd, "async event fd");
        Ok(Context {
            inner: Arc::new(ContextInner {
                kernel,
                device,
                driver_id,
                num_comp_vectors,
                core_support,
                provider,
                fallback: Fallback::default(),
                events: Registry::default(),
                removed: AtomicBool::new(false),
                imported: true,
                async_fd,
                transport,
            }),
        })
    }

    /// A duplicate of the command fd (`dup(ctx->cmd_fd)`), to hand to
    /// [`Context::import`] here or, through `SCM_RIGHTS`, in another
    /// process. Whoever holds it can act on every object of this context
    /// (the kernel knows no owner within a user context): hand it only to
    /// whom you would hand the context.
    pub fn dup_cmd_fd(&self) -> Result<OwnedFd> {
        self.inner
            .kernel
            .dup_fd(self.inner.fd())
            .op("dup the command fd")
    }

    /// Whether the context was made by [`Context::import`].
    pub fn is_imported(&self) -> bool {
        self.inner.imported
    }
}

/// `UVERBS_METHOD_QUERY_CONTEXT` with the provider's driver attribute:
/// the completion vectors and the core support bits.
fn query_context(
    kernel: &dyn Kernel,
    transport: &Transport,
    driver_id: u32,
    driver_out: Option<(u16, &mut [u8])>,
) -> Result<(u32, u64)> {
    let op = "UVERBS_METHOD_QUERY_CONTEXT";
    let (mut vectors, mut support) = (0u32, 0u64);
    let mut cmd = IoctlCmd::new(
        abi::UVERBS_OBJECT_DEVICE,
        abi::UVERBS_METHOD_QUERY_CONTEXT,
        driver_id,
    );
    let v = cmd.output(
        abi::UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS,
        vectors.as_mut_bytes(),
    );
    let s = cmd.output(
        abi::UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT,
        support.as_mut_bytes(),
    );
    if let Some((id, buf)) = driver_out {
        cmd.output(id, buf);
    }
    crate::providers::ioctl_on(kernel, transport.fd(), &mut cmd).map_err(|e| {
        let err = Error::sys(op, e);
        match e {
            Errno::EOPNOTSUPP | Errno::EPROTONOSUPPORT | Errno::ENOTTY => {
                err.with_detail("the kernel's driver cannot describe a context to import")
            }
            _ => err,
        }
    })?;
    let (has_v, has_s) = (cmd.is_valid_output(v), cmd.is_valid_output(s));
    drop(cmd);
    Ok((
        if has_v { vectors } else { 0 },
        if has_s { support } else { 0 },
    ))
}
