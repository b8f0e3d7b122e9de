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
    error::{DestroyError, Error, ErrorKind, Result},
    object::{self, Destroy, Owned},
    parent_domain::DomainInner,
    providers::{AnyDomain, AnyPd},
};

/// A protection domain's kernel object; children hold an `Arc` of it.
#[derive(Debug)]
pub(crate) struct PdInner {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) handle: u32,
    /// The provider's driver data (mlx5: the PD number).
    pub(crate) driver: AnyPd,
    /// Imported by handle ([`Context::import_pd`]): another context owns
    /// the kernel object.
    pub(crate) imported: bool,
}

impl Destroy for PdInner {
    fn owns_kernel_object(&self) -> bool {
        !self.imported
    }

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
///
/// A parent domain ([`ProtectionDomain::alloc_parent_domain`]) is one too:
/// the same kernel PD, with a thread domain and a queue allocator that the
/// QPs, SRQs and CQs made in it use (`crate::parent_domain`).
#[derive(Debug, Clone)]
pub struct ProtectionDomain {
    pub(crate) inner: Arc<Owned<PdInner>>,
    /// What a parent domain adds; the objects made in it hold it.
    pub(crate) domain: Option<Arc<DomainInner>>,
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
                imported: false,
            }),
            domain: None,
        })
    }

    /// The PD another context of the same kernel user context allocated,
    /// by its handle, like `ibv_import_pd` (see [`Context::import`]; the
    /// handle comes from [`ProtectionDomain::handle`] over there). Dropped
    /// or [`ProtectionDomain::unimport`]ed, it leaves the kernel PD to its
    /// owner.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` on a provider that imports nothing (rxe); the kernel's
    /// answer for a handle that names nothing (`ENOENT`) or no PD (`EINVAL`).
    #[doc(alias = "ibv_import_pd")]
    pub fn import_pd(&self, handle: u32) -> Result<ProtectionDomain> {
        let ctx = &self.inner;
        let driver = ctx.provider.import_pd(ctx.device(), handle)?;
        Ok(ProtectionDomain {
            inner: Owned::new(PdInner {
                ctx: ctx.clone(),
                handle,
                driver,
                imported: true,
            }),
            domain: None,
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

    /// Deallocates the PD now, like `ibv_dealloc_pd`, giving it back on
    /// any failure, as it was: `EBUSY` while other handles to it or objects
    /// made from it exist (for a parent domain: the QPs, SRQs and CQs made
    /// in it; for a protection domain: also the MRs, MWs and AHs, and the
    /// parent domains over it), or the kernel's refusal (`EBUSY` while
    /// another context's objects use an imported PD's kernel object,
    /// `uverbs_free_pd`). Given back, it keeps working: objects can still
    /// be made from it, and a later destroy answers `EBUSY` again until
    /// its users are gone, as libibverbs' `ibv_dealloc_pd` does. Dropped
    /// instead, it is deallocated when the last of its users goes.
    ///
    /// An imported PD is deallocated too, for its owner as well (as
    /// `ibv_dealloc_pd` does); to let go of it only, drop it or
    /// [`ProtectionDomain::unimport`] it.
    #[doc(alias = "ibv_dealloc_pd")]
    pub fn destroy(self) -> std::result::Result<(), DestroyError<Self>> {
        match self.domain {
            Some(domain) => match Arc::try_unwrap(domain) {
                // What it held (its thread domain, its allocator, its
                // protection domain) goes with it.
                Ok(_) => Ok(()),
                Err(domain) => {
                    let others = Arc::strong_count(&domain) - 1;
                    let e = object::busy("ibv_dealloc_pd", others, "destroy them first");
                    let pd = ProtectionDomain {
                        inner: self.inner,
                        domain: Some(domain),
                    };
                    Err(DestroyError::new(pd, e))
                }
            },
            None => object::try_destroy(self.inner, "ibv_dealloc_pd").map_err(|(inner, e)| {
                let pd = ProtectionDomain {
                    inner,
                    domain: None,
                };
                DestroyError::new(pd, e)
            }),
        }
    }

    /// The provider's view of what a parent domain adds (nothing for a
    /// plain PD).
    pub(crate) fn any_domain(&self) -> AnyDomain<'_> {
        self.domain
            .as_deref()
            .map(DomainInner::as_any)
            .unwrap_or_default()
    }

    /// Whether the PD was imported ([`Context::import_pd`]).
    pub fn is_imported(&self) -> bool {
        self.inner.imported
    }

    /// Lets go of an imported PD, like `ibv_unimport_pd`: the kernel PD
    /// stays its owner's (objects created from this handle keep it until
    /// they are gone). A PD this context allocated is given back
    /// (`EINVAL`): it owns its kernel object, [`ProtectionDomain::destroy`]
    /// or drop it.
    #[doc(alias = "ibv_unimport_pd")]
    pub fn unimport(self) -> std::result::Result<(), DestroyError<Self>> {
        if !self.inner.imported {
            let e = Error::new(
                "ibv_unimport_pd",
                ErrorKind::InvalidArgument,
                "the PD was allocated here, not imported",
            );
            return Err(DestroyError::new(self, e));
        }
        drop(self);
        Ok(())
    }
}
