//! mlx5 DevX: firmware objects driven by raw PRM commands, user memory
//! (UMEM), asynchronous commands and DevX event channels; the counterpart
//! of rdma-core's `mlx5dv_devx_*` (`providers/mlx5/verbs.c`, `mlx5dv.h`).
//! The kernel side is `drivers/infiniband/hw/mlx5/devx.c`.
//!
//! DevX needs a DevX user context: the context must be opened with
//! `MLX5_IB_ALLOC_UCTX_DEVX` and the kernel must grant it (firmware with
//! `log_max_uctx`, and `CAP_NET_RAW`). [`Context::open`] asks for it and
//! falls back to a context without it, as rdma-core's `ibv_open_device`
//! does; [`open_device`] requires it and fails when the kernel refuses.
//! [`Mlx5Context::devx`] hands out the DevX functions of a context that has
//! it, and says why when it does not.
//!
//! ```no_run
//! use uverbs::mlx5::{self, EventChannelFlags, Target};
//!
//! # fn main() -> uverbs::Result<()> {
//! let dev = uverbs::find_device(&uverbs::sys::linux(), Some("mlx5_0"))?;
//! let ctx = mlx5::open_device(uverbs::sys::linux(), dev, mlx5::OpenFlags::DEVX)?;
//! let devx = ctx.mlx5()?.devx()?;
//! let channel = devx.create_event_channel(EventChannelFlags::empty())?;
//! // Unaffiliated events: port changes.
//! channel.subscribe(None, &[mlx5::event_type::PORT_CHANGE], Target::Cookie(1))?;
//! let ev = channel.get_event()?;
//! println!("cookie {} type {:?}", ev.cookie, ev.event_type());
//! # Ok(())
//! # }
//! ```
//!
//! [`Context::open`]: crate::Context::open
//! [`Mlx5Context::devx`]: super::dv::Mlx5Context::devx

pub(crate) mod async_cmd;
pub(crate) mod cmd;
mod event;
mod obj;
mod uar;
mod umem;

use std::sync::Arc;

use bitflags::bitflags;

pub use async_cmd::{AsyncCmdResult, DevxCmdComp};
pub use cmd::{devx_get, devx_set, status_name, CmdIn, CmdOut, HEADER_LEN};
pub use event::{
    event_type, DevxEvent, DevxEventChannel, EventChannelFlags, Target, DATA_RECORD_LEN, EQE_LEN,
    MAX_SUBSCRIBE_TYPES,
};
pub use obj::{DevxObj, DevxResource};
pub use uar::{DevxUar, UarKind};
pub use umem::{DevxUmem, UmemAccess, UmemIn};

use super::Mlx5;
use crate::{
    error::{Error, ErrorKind, Result},
    providers::{Device, DevxRequest, Member, OpenRequest},
    sys::Kernel,
    CommandMode, Context, DeviceInfo,
};

bitflags! {
    /// How [`open_device`] opens the context (`mlx5dv_context_attr.flags`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct OpenFlags: u32 {
        /// Require a DevX user context (`MLX5DV_CONTEXT_FLAGS_DEVX`): fail
        /// rather than fall back to a context without DevX.
        const DEVX = 1;
    }
}

/// Opens an mlx5 device, like `mlx5dv_open_device`: with
/// [`OpenFlags::DEVX`] the context has DevX or the open fails with the
/// kernel's answer (no silent fallback).
#[doc(alias = "mlx5dv_open_device")]
pub fn open_device(
    kernel: Arc<dyn Kernel>,
    device: DeviceInfo,
    flags: OpenFlags,
) -> Result<Context> {
    let request = OpenRequest {
        devx: if flags.contains(OpenFlags::DEVX) {
            DevxRequest::Require
        } else {
            DevxRequest::Prefer
        },
    };
    let ctx = Context::open_with_request(kernel, device, CommandMode::Auto, request)?;
    // A device of another driver: the flags mean nothing to it.
    ctx.mlx5()?;
    Ok(ctx)
}

/// The DevX functions of an mlx5 context that has a DevX user context.
/// Cheap to clone; it keeps the context open.
///
/// rdma-core's counterpart is the `mlx5dv_devx_*` family on a context opened with `MLX5DV_CONTEXT_FLAGS_DEVX`.
#[derive(Debug, Clone)]
pub struct Devx {
    ctx: Context,
    /// The kernel allocates UAR objects (`MLX5_IB_METHOD_UAR_OBJ_ALLOC`).
    dynamic_uars: bool,
}

impl Devx {
    /// The DevX functions of `ctx`, or why it has none.
    pub(crate) fn of(ctx: &Context) -> Result<Self> {
        Self::of_checked(ctx, true)
    }

    /// The DevX functions of an mlx5 context, with a DevX uid or not
    /// ([`Mlx5Context::devx_any`](super::dv::Mlx5Context::devx_any)).
    pub(crate) fn of_any(ctx: &Context) -> Result<Self> {
        Self::of_checked(ctx, false)
    }

    fn of_checked(ctx: &Context, require_uid: bool) -> Result<Self> {
        let Some(state) = Mlx5::context_of(ctx.provider_state()) else {
            return Err(Error::new(
                "mlx5 DevX",
                ErrorKind::UnsupportedProvider,
                format!(
                    "device {} is driven by the {} provider; DevX is mlx5's",
                    ctx.device().name,
                    ctx.provider_name()
                ),
            ));
        };
        if require_uid && !state.state.devx {
            return Err(Error::new(
                "mlx5 DevX",
                ErrorKind::UnsupportedProvider,
                "the context has no DevX user context: the kernel refused one (firmware \
                 without log_max_uctx, or no CAP_NET_RAW) and the context was opened without \
                 it; open it with uverbs::mlx5::open_device(.., OpenFlags::DEVX) to get the \
                 kernel's reason",
            ));
        }
        Ok(Devx {
            ctx: ctx.clone(),
            dynamic_uars: state.state.resp.tot_bfregs == 0,
        })
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    fn device(&self) -> Device<'_> {
        self.ctx.provider_device()
    }

    fn kernel(&self) -> Arc<dyn Kernel> {
        self.ctx.kernel()
    }
}
