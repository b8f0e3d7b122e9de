//! Protection domains (`ibv_alloc_pd`, `ibv_dealloc_pd`).
//!
//! Allocation is the `ALLOC_PD` write command (6.1 has no ioctl method for
//! it); deallocation is `UVERBS_METHOD_PD_DESTROY`, falling back to the
//! `DEALLOC_PD` write command.

use std::sync::Arc;

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    context::{Context, ContextInner, Verb},
    error::{Error, Result},
    object::{self, Destroy, Owned},
    providers::AnyPd,
};

/// A protection domain's kernel object; children hold an `Arc` of it.
#[derive(Debug)]
pub(crate) struct PdInner {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) handle: u32,
    /// The provider's driver data (mlx5: the PD number).
    pub(crate) driver: AnyPd,
}

impl Destroy for PdInner {
    fn destroy_kernel(&self) -> Result<()> {
        self.ctx
            .destroy_simple(
                Verb::DestroyPd,
                (
                    abi::UVERBS_OBJECT_PD,
                    abi::UVERBS_METHOD_PD_DESTROY,
                    abi::UVERBS_ATTR_DESTROY_PD_HANDLE,
                ),
                abi::IB_USER_VERBS_CMD_DEALLOC_PD,
                self.handle,
            )
            .map_err(|e| Error::sys("UVERBS_METHOD_PD_DESTROY", e))
    }
}

/// A protection domain (`struct ibv_pd`).
///
/// Memory regions, queue pairs, SRQs and address handles created from it hold
/// it alive; it is deallocated when the last of them and this handle are gone.
#[derive(Debug, Clone)]
pub struct ProtectionDomain {
    pub(crate) inner: Arc<Owned<PdInner>>,
}

impl Context {
    /// Allocates a protection domain, like `ibv_alloc_pd`.
    #[doc(alias = "ibv_alloc_pd")]
    pub fn alloc_pd(&self) -> Result<ProtectionDomain> {
        let ctx = &self.inner;
        let req = abi::IbUverbsAllocPd::new_zeroed();
        let mut resp = abi::IbUverbsAllocPdResp::new_zeroed();
        let driver = ctx
            .provider
            .alloc_pd(&mut |driver_out| {
                ctx.write_with_resp(
                    abi::IB_USER_VERBS_CMD_ALLOC_PD,
                    req.as_bytes(),
                    &[],
                    resp.as_mut_bytes(),
                    driver_out,
                )
            })
            .map_err(|e| Error::sys("IB_USER_VERBS_CMD_ALLOC_PD", e))?;
        Ok(ProtectionDomain {
            inner: Owned::new(PdInner {
                ctx: ctx.clone(),
                handle: resp.pd_handle,
                driver,
            }),
        })
    }
}

impl ProtectionDomain {
    /// The context this PD belongs to.
    pub fn context(&self) -> Context {
        Context::from_inner(self.inner.ctx.clone())
    }

    /// The kernel's handle for this PD.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// Deallocates the PD now, like `ibv_dealloc_pd`, reporting errors.
    ///
    /// Fails with `EBUSY` while other handles to it or objects created from
    /// it exist; it is then deallocated when the last of them is dropped.
    #[doc(alias = "ibv_dealloc_pd")]
    pub fn destroy(self) -> Result<()> {
        object::destroy(self.inner, "ibv_dealloc_pd")
    }
}
