//! Parent domains and thread domains (`ibv_alloc_parent_domain`,
//! `ibv_alloc_td`, `ibv_dealloc_td`).
//!
//! A parent domain is a [`ProtectionDomain`] in every use: objects made
//! from it (QPs, SRQs, MRs, AHs, MWs) live in the protection domain beneath
//! it, whose kernel handle it shares, as libibverbs'
//! `ibv_initialize_parent_domain` makes the new `ibv_pd` "completely
//! interchangeable" with the one it contains. What it adds is used when
//! the provider creates a QP, an SRQ, or a CQ given it
//! ([`crate::CqOptions::parent_domain`], `IBV_CQ_INIT_ATTR_MASK_PD`):
//!
//! - a [`QueueAllocator`]: the provider asks it for the queue memory it
//!   would allocate itself ([`crate::queue_alloc`]);
//! - a [`ThreadDomain`]: the program promises that one thread at a time
//!   uses the objects made in it; mlx5 gives such QPs the thread domain's
//!   own doorbell register (a dedicated blue-flame register, rung without
//!   a lock: libmlx5's `mlx5_alloc_td`). Posting in this crate takes
//!   `&mut` and needs no lock either way.
//!
//! Nothing here is a kernel object: the kernel never sees a parent domain,
//! and a thread domain is what its provider makes of it (mlx5: a bfreg of a
//! UAR page the context allocates). Both are reference counted: a parent
//! domain holds its protection domain and thread domain, and every object
//! made in it holds the parent domain, so its destroy fails with `EBUSY`
//! while they exist, as libmlx5's reference counts do.
//!
//! rxe has neither (rdma-core's rxe leaves `alloc_parent_domain` and
//! `alloc_td` unset): both fail with [`crate::ErrorKind::UnsupportedProvider`]
//! (`EOPNOTSUPP`, what libibverbs answers for a missing op).

use std::{fmt, sync::Arc};

use crate::{
    context::{Context, ContextInner},
    error::{DestroyError, Error, ErrorKind, Result},
    object,
    pd::ProtectionDomain,
    providers::{AnyDomain, AnyTd},
    queue_alloc::QueueAllocator,
};

/// A thread domain (`struct ibv_td`), from [`crate::Context::alloc_td`]: a
/// [`crate::ParentDomainAttr`] with it gives the parent domain's QPs a
/// doorbell of their own.
#[derive(Debug, Clone)]
pub struct ThreadDomain {
    pub(crate) inner: Arc<TdInner>,
}

/// A thread domain's provider state; parent domains hold an `Arc` of it.
#[derive(Debug)]
pub(crate) struct TdInner {
    pub(crate) ctx: Arc<ContextInner>,
    /// Released by its own `Drop` (mlx5 gives its bfreg back).
    pub(crate) driver: AnyTd,
}

/// What a parent domain adds to its protection domain; the objects made in
/// it hold an `Arc` of it.
pub(crate) struct DomainInner {
    pub(crate) td: Option<ThreadDomain>,
    pub(crate) allocator: Option<Arc<dyn QueueAllocator>>,
}

impl fmt::Debug for DomainInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DomainInner")
            .field("td", &self.td.is_some())
            .field("allocator", &self.allocator)
            .finish()
    }
}

impl DomainInner {
    /// The provider's view of it.
    pub(crate) fn as_any(&self) -> AnyDomain<'_> {
        AnyDomain {
            allocator: self.allocator.as_ref(),
            td: self.td.as_ref().map(|t| &t.inner.driver),
        }
    }
}

/// What [`ProtectionDomain::alloc_parent_domain`] takes
/// (`struct ibv_parent_domain_init_attr` without its protection domain).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ParentDomainAttr {
    /// The thread domain the objects made in the parent domain belong to
    /// (`td`).
    pub thread_domain: Option<ThreadDomain>,
    /// The allocator of their queue memory (`alloc`, `free` and
    /// `pd_context`, `IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS`).
    pub allocator: Option<Arc<dyn QueueAllocator>>,
}

impl ParentDomainAttr {
    /// Neither a thread domain nor an allocator.
    pub fn new() -> Self {
        ParentDomainAttr::default()
    }

    /// With thread domain `td`.
    pub fn with_thread_domain(mut self, td: &ThreadDomain) -> Self {
        self.thread_domain = Some(td.clone());
        self
    }

    /// With `allocator` for queue memory.
    pub fn with_allocator(mut self, allocator: Arc<dyn QueueAllocator>) -> Self {
        self.allocator = Some(allocator);
        self
    }
}

impl Context {
    /// Allocates a thread domain, like `ibv_alloc_td`.
    ///
    /// Fails with [`ErrorKind::UnsupportedProvider`] on a provider without
    /// thread domains (rxe).
    #[doc(alias = "ibv_alloc_td")]
    pub fn alloc_td(&self) -> Result<ThreadDomain> {
        let ctx = &self.inner;
        let driver = ctx.provider.alloc_td(ctx.device())?;
        Ok(ThreadDomain {
            inner: Arc::new(TdInner {
                ctx: ctx.clone(),
                driver,
            }),
        })
    }
}

impl ThreadDomain {
    /// The context it belongs to.
    pub fn context(&self) -> Context {
        Context {
            inner: self.inner.ctx.clone(),
        }
    }

    /// Deallocates it now, like `ibv_dealloc_td`.
    ///
    /// Fails with `EBUSY`, giving it back, while other handles to it or
    /// parent domains made with it exist.
    #[doc(alias = "ibv_dealloc_td")]
    pub fn destroy(self) -> Result<(), DestroyError<Self>> {
        let others = Arc::strong_count(&self.inner) - 1;
        if others > 0 {
            let e = object::busy(
                "ibv_dealloc_td",
                others,
                "destroy them first, or drop this handle",
            );
            return Err(DestroyError::new(self, e));
        }
        // The last reference: dropping it releases the provider's state.
        Ok(())
    }
}

impl ProtectionDomain {
    /// Allocates a parent domain over this protection domain, like
    /// `ibv_alloc_parent_domain`: a [`ProtectionDomain`] whose QPs, SRQs
    /// and CQs ([`crate::CqOptions::parent_domain`]) use `attr`'s thread
    /// domain and queue allocator. On a parent domain, the new one is made
    /// over its protection domain (as libmlx5's `to_mpd` does), without
    /// its thread domain or allocator.
    ///
    /// Fails with [`ErrorKind::UnsupportedProvider`] on a provider without
    /// parent domains (rxe), and with [`ErrorKind::InvalidArgument`] for a
    /// thread domain of another context.
    #[doc(alias = "ibv_alloc_parent_domain")]
    pub fn alloc_parent_domain(&self, attr: ParentDomainAttr) -> Result<ProtectionDomain> {
        let ctx = &self.inner.ctx;
        ctx.provider.check_parent_domain()?;
        if let Some(td) = &attr.thread_domain {
            if !Arc::ptr_eq(&td.inner.ctx, ctx) {
                return Err(Error::new(
                    "ibv_alloc_parent_domain",
                    ErrorKind::InvalidArgument,
                    "the thread domain belongs to another context",
                ));
            }
        }
        Ok(ProtectionDomain {
            inner: self.inner.clone(),
            domain: Some(Arc::new(DomainInner {
                td: attr.thread_domain,
                allocator: attr.allocator,
            })),
        })
    }

    /// Whether this is a parent domain
    /// ([`ProtectionDomain::alloc_parent_domain`]).
    pub fn is_parent_domain(&self) -> bool {
        self.domain.is_some()
    }

    /// The protection domain beneath a parent domain (itself for a plain
    /// one): the same kernel PD, without the thread domain and allocator.
    pub fn protection_domain(&self) -> ProtectionDomain {
        ProtectionDomain {
            inner: self.inner.clone(),
            domain: None,
        }
    }
}
