//! mlx5-only functions: the counterpart of rdma-core's `mlx5dv` (exported as
//! `uverbs::mlx5`).
//!
//! [`Context::mlx5`] gives the mlx5 view of a context whose device is driven
//! by `mlx5_ib` (ConnectX); on another driver it fails with
//! [`ErrorKind::UnsupportedProvider`] naming the driver. DevX objects and
//! event channels, and the direct-verbs queries, live here as they are
//! written.
//!
//! ```no_run
//! # fn main() -> uverbs::Result<()> {
//! let ctx = uverbs::Context::open(Some("mlx5_0"))?;
//! let mlx5 = ctx.mlx5()?;
//! let attr = mlx5.attr();
//! println!("CQE v{}, BlueFlame {} bytes, DevX {}", attr.cqe_version, attr.bf_reg_size, attr.devx);
//! # Ok(())
//! # }
//! ```

pub use super::clock::ClockInfo;
#[cfg(feature = "devx")]
#[cfg_attr(docsrs, doc(cfg(feature = "devx")))]
pub use super::devx::*;
pub use super::dv_create::{cqe_comp_format, Mlx5CqAttr};
pub use super::dv_obj::{CqView, QpView, SrqView, WqView};
pub use super::dv_qp::{push_raw_wqe, DcType, Mlx5QpAttr, Mlx5QpCreateFlags, Mlx5SendOps};
pub use super::dv_query::{
    CqeCompCaps, CryptoCaps, DciStreamsCaps, Mlx5DeviceAttr, Mlx5DeviceFlags, SigCaps,
    StridingRqCaps, SwParsingCaps,
};
use super::{
    clock::{ClockPage, CoreClockPage},
    Mlx5, Mlx5State,
};
use crate::{
    error::{Error, ErrorKind, Result},
    providers::Member,
    Context, ProtectionDomain,
};

/// The mlx5 view of an open context (`mlx5dv_*` functions take the
/// `ibv_context`; here they are methods of this view).
#[derive(Debug, Clone, Copy)]
pub struct Mlx5Context<'a> {
    ctx: &'a Context,
    pub(super) state: &'a Mlx5State,
    clock: Option<&'a ClockPage>,
    core_clock: Option<&'a CoreClockPage>,
}

/// What an mlx5 context reports about the device, like
/// `mlx5dv_query_device` (from `mlx5_ib_alloc_ucontext_resp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Mlx5Attr {
    /// Whether the context has a DevX user context (`MLX5_IB_ALLOC_UCTX_DEVX`
    /// was granted); DevX calls need it.
    pub devx: bool,
    /// CQE format version (0 or 1).
    pub cqe_version: u8,
    /// BlueFlame register size in bytes; 0 means no write-combining
    /// (doorbells only).
    pub bf_reg_size: u32,
    /// Largest send WQE in bytes.
    pub max_sq_desc_sz: u16,
    /// Largest receive WQE in bytes.
    pub max_rq_desc_sz: u16,
    /// The cache line size the device aligns buffers to.
    pub cache_line_size: u32,
    /// 4 KiB UARs per system page (more than 1 on 64 KiB-page hosts).
    pub num_uars_per_page: u32,
    /// Dynamic bfregs the kernel can allocate (0: static bfregs only).
    pub num_dyn_bfregs: u32,
    /// How often, in ns, the kernel refreshes its clock info page at
    /// least (its `overflow_period`; `mlx5dv_context`'s
    /// `max_clock_info_update_nsec`); `None` when the context has no
    /// clock info page ([`Mlx5Context::clock_info`]).
    pub max_clock_info_update_nsec: Option<u64>,
}

/// Whether the mlx5 provider drives `device` (a ConnectX of the `mlx5_ib`
/// driver), like `mlx5dv_is_supported`: the mlx5 functions
/// ([`Context::mlx5`], [`open_device`](super::devx::open_device)) work on
/// a context of it.
#[doc(alias = "mlx5dv_is_supported")]
pub fn is_supported(device: &crate::DeviceInfo) -> bool {
    device.driver_id == Some(<Mlx5 as crate::providers::Provider>::DRIVER_ID)
}

impl Context {
    /// The mlx5 functions of this context; an error when its device is not
    /// driven by mlx5.
    pub fn mlx5(&self) -> Result<Mlx5Context<'_>> {
        match Mlx5::context_of(self.provider_state()) {
            Some(c) => Ok(Mlx5Context {
                ctx: self,
                state: &c.state,
                clock: c.clock.as_deref(),
                core_clock: c.core_clock.as_ref(),
            }),
            None => Err(Error::new(
                "mlx5 direct verbs",
                ErrorKind::UnsupportedProvider,
                format!(
                    "device {} is driven by the {} provider; mlx5 functions need a device of \
                     the mlx5_ib driver (ConnectX)",
                    self.device().name,
                    self.provider_name()
                ),
            )),
        }
    }
}

impl<'a> Mlx5Context<'a> {
    /// The context.
    pub fn context(&self) -> &'a Context {
        self.ctx
    }

    #[cfg(feature = "devx")]
    #[cfg_attr(docsrs, doc(cfg(feature = "devx")))]
    /// The DevX functions of the context (`mlx5dv_devx_*`); an error naming
    /// the cause when the context has no DevX user context.
    pub fn devx(&self) -> Result<Devx> {
        Devx::of(self.ctx)
    }

    #[cfg(feature = "devx")]
    #[cfg_attr(docsrs, doc(cfg(feature = "devx")))]
    /// The DevX functions of the context whether or not it has a DevX user
    /// context, as libmlx5 offers them on every mlx5 context: without one
    /// the kernel answers each command itself (`devx.c`): the commands
    /// that need the uid (objects, UMEMs, subscriptions, general commands
    /// other than the whitelisted queries) fail with `EINVAL`, while UARs,
    /// EQNs, command completion fds and event channels work. Prefer
    /// [`Mlx5Context::devx`], whose error names the cause up front.
    pub fn devx_any(&self) -> Result<Devx> {
        Devx::of_any(self.ctx)
    }

    /// The PD number of `pd` (`mlx5dv_init_obj` with `MLX5DV_OBJ_PD`: the
    /// `pdn` of `struct mlx5dv_pd`), which PRM contexts name a PD by: a DevX
    /// QP or memory key on a verbs PD. An error if `pd` belongs to another
    /// context.
    #[doc(alias = "mlx5dv_init_obj")]
    pub fn pd_number(&self, pd: &ProtectionDomain) -> Result<u32> {
        let inner = &pd.inner;
        match Mlx5::pd_of(&inner.driver) {
            Some(p) if std::sync::Arc::ptr_eq(&inner.ctx, &self.ctx.inner) => Ok(p.pdn),
            _ => Err(Error::new(
                "mlx5dv_init_obj",
                ErrorKind::InvalidArgument,
                "the protection domain belongs to another context",
            )),
        }
    }

    /// The device attributes the context reported, like `mlx5dv_query_device`.
    #[doc(alias = "mlx5dv_query_device")]
    pub fn attr(&self) -> Mlx5Attr {
        let s = self.state;
        Mlx5Attr {
            devx: s.devx,
            cqe_version: s.cqe_version,
            bf_reg_size: s.bf_reg_size,
            max_sq_desc_sz: s.max_sq_desc_sz,
            max_rq_desc_sz: s.max_rq_desc_sz,
            cache_line_size: s.cache_line_size,
            num_uars_per_page: s.num_uars_per_page,
            num_dyn_bfregs: s.num_dyn_bfregs,
            max_clock_info_update_nsec: self.clock.map(ClockPage::overflow_period),
        }
    }

    /// The device's free-running clock now, in device ticks (what
    /// [`Context::query_rt_values`] reads on mlx5). Fails with
    /// [`ErrorKind::UnsupportedProvider`] when the kernel maps no core
    /// clock (libmlx5's `EOPNOTSUPP`).
    pub fn read_core_clock(&self) -> Result<u64> {
        self.core_clock.map(CoreClockPage::read).ok_or_else(|| {
            Error::new(
                "mlx5 core clock",
                ErrorKind::UnsupportedProvider,
                "the kernel maps no core clock page for this context (its response lacks \
                 MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET, or the mmap failed)",
            )
        })
    }

    /// The address of the device's free-running clock in this process
    /// (`mlx5dv_context`'s `hca_core_clock`), for programs that read it
    /// themselves: two big-endian 32-bit words, high first, to be read
    /// with volatile loads (high, low, high again; retry if the high words
    /// differ). Valid while the context is open. `None` without the page.
    pub fn core_clock_ptr(&self) -> Option<*const u8> {
        self.core_clock.map(CoreClockPage::as_ptr)
    }

    /// A consistent copy of the kernel's clock info page, like
    /// `mlx5dv_get_clock_info`: convert completion timestamps (device
    /// ticks, [`crate::CqPoll::completion_ts`]) to the kernel's real time
    /// with [`ClockInfo::ts_to_ns`] (`mlx5dv_ts_to_ns`). Reading it is a
    /// few atomic loads of the page the context mapped when it was opened
    /// (no system call).
    ///
    /// Fails with [`ErrorKind::UnsupportedProvider`] when the kernel maps
    /// no clock info page (its `clock_info_versions` lacks
    /// `MLX5_IB_CLOCK_INFO_V1`, or the mmap failed; libmlx5 answers
    /// `EINVAL`), and with `EBUSY` ([`ErrorKind::Os`]) when the kernel
    /// was updating the page on each of ten tries, as libmlx5.
    #[doc(alias = "mlx5dv_get_clock_info")]
    pub fn clock_info(&self) -> Result<ClockInfo> {
        let page = self.clock.ok_or_else(|| {
            Error::new(
                "mlx5dv_get_clock_info",
                ErrorKind::UnsupportedProvider,
                "the kernel maps no mlx5 clock info page for this context \
                 (clock_info_versions lacks MLX5_IB_CLOCK_INFO_V1, or its mmap failed)",
            )
        })?;
        page.read()
            .ok_or_else(|| Error::sys("mlx5dv_get_clock_info", crate::sys::Errno::EBUSY))
    }
}
