//! Memory windows (`ibv_alloc_mw`, `ibv_dealloc_mw`, and the `BIND_MW`
//! work request that binds one).
//!
//! A window is a remote key of its own over part of a memory region: bound
//! with [`SendOp::BindMw`](crate::SendOp::BindMw) on a send queue, it lets
//! peers access `length` bytes at `addr` of a region registered with
//! [`AccessFlags::MW_BIND`], with the window's access rights, until it is
//! invalidated ([`SendOp::LocalInvalidate`](crate::SendOp::LocalInvalidate),
//! a peer's [`SendOp::SendWithInvalidate`](crate::SendOp::SendWithInvalidate),
//! a bind of length 0 for type 1) or deallocated.
//!
//! Binding is memory-safe: the kernel (rxe: rxe_mw.c `rxe_check_bind_mw`)
//! or the device checks that the range lies in the region and that the
//! region allows binding, and a window only ever gives access to memory
//! already registered. A region with windows bound to it cannot be
//! deregistered (rxe refuses with `EINVAL`): [`MemoryRegion::destroy`]
//! gives the region back, still registered, to deregister again once the
//! windows are deallocated (or invalidated); dropped instead, its memory
//! stays mapped, as for any refused destroy (see [`crate::MemoryRegion`]).
//!
//! On rxe a window's key reaches its whole region, not only the window's
//! range: the responder checks an access against the region behind the
//! window (rxe_resp.c `check_rkey`, 6.1 and 6.12; seen in the guest,
//! `tests/device/memory_window.rs`). Bind windows to regions that hold
//! nothing else the peer must not reach.
//!
//! Allocation is the `ALLOC_MW` write command (the kernel has no ioctl
//! method for it, 6.1 and 6.12 uverbs_std_types_mw.c); deallocation is
//! `UVERBS_METHOD_MW_DESTROY`, falling back to `DEALLOC_MW`.

use std::sync::{
    atomic::{AtomicU32, Ordering},
    Arc,
};

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    context::Verb,
    error::{DestroyError, Error, ErrorKind, Result},
    mr::AccessFlags,
    object::{self, Destroy, Owned},
    pd::{PdInner, ProtectionDomain},
    MemoryRegion,
};

/// The type of a memory window (`enum ibv_mw_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MwType {
    /// `IBV_MW_TYPE_1`: bound by the kernel's bind verb (on rxe, a
    /// `BIND_MW` work request too), any QP of the PD; rebinding replaces
    /// the binding.
    Type1,
    /// `IBV_MW_TYPE_2`: bound by a `BIND_MW` work request of a QP of the
    /// same PD, to a new key; bound once until invalidated.
    Type2,
}

impl MwType {
    /// The `IB_MW_TYPE_*` value.
    pub fn raw(self) -> u8 {
        match self {
            MwType::Type1 => 1,
            MwType::Type2 => 2,
        }
    }
}

/// A memory window's kernel object.
#[derive(Debug)]
struct MwInner {
    pd: Arc<Owned<PdInner>>,
    handle: u32,
    mw_type: MwType,
    /// The current key: the allocation's, then what [`MemoryWindow::set_rkey`]
    /// records after a bind.
    rkey: AtomicU32,
}

impl Destroy for MwInner {
    fn destroy_kernel(&self) -> Result<()> {
        self.pd
            .ctx
            .destroy_simple(
                Verb::DestroyMw,
                (
                    abi::UVERBS_OBJECT_MW,
                    abi::UVERBS_METHOD_MW_DESTROY,
                    abi::UVERBS_ATTR_DESTROY_MW_HANDLE,
                ),
                abi::IB_USER_VERBS_CMD_DEALLOC_MW,
                self.handle,
            )
            .map_err(|e| Error::sys("UVERBS_METHOD_MW_DESTROY", e))
    }
}

/// A memory window (`struct ibv_mw`).
///
/// Holds its PD alive. Deallocating it (at [`MemoryWindow::destroy`] or
/// when the last handle is dropped) also ends any binding.
#[derive(Debug, Clone)]
pub struct MemoryWindow {
    inner: Arc<Owned<MwInner>>,
}

impl ProtectionDomain {
    /// Allocates a memory window of `mw_type`, like `ibv_alloc_mw`.
    ///
    /// Fails with `EOPNOTSUPP` where the device has no windows of that
    /// type (rxe has both; the kernel rejects other type numbers).
    #[doc(alias = "ibv_alloc_mw")]
    pub fn alloc_mw(&self, mw_type: MwType) -> Result<MemoryWindow> {
        let pd = &self.inner;
        let mut req = abi::IbUverbsAllocMw::new_zeroed();
        req.pd_handle = pd.handle;
        req.mw_type = mw_type.raw();
        let mut resp = abi::IbUverbsAllocMwResp::new_zeroed();
        // Neither rxe nor mlx5_ib needs driver data: mlx5_ib_alloc_mw reads
        // a zeroed `struct mlx5_ib_alloc_mw` from an empty udata (one
        // descriptor block) and answers nothing into an empty one.
        pd.ctx
            .write_with_resp(
                abi::IB_USER_VERBS_CMD_ALLOC_MW,
                req.as_bytes(),
                &[],
                resp.as_mut_bytes(),
                &mut [],
            )
            .map_err(|e| Error::sys("IB_USER_VERBS_CMD_ALLOC_MW", e))?;
        Ok(MemoryWindow {
            inner: Owned::new(MwInner {
                pd: pd.clone(),
                handle: resp.mw_handle,
                mw_type,
                rkey: AtomicU32::new(resp.rkey),
            }),
        })
    }
}

/// What a `BIND_MW` work request binds: the window (by its current key),
/// the key it gets, and the range of a region it opens with which rights.
///
/// `struct ibv_mw_bind_info` plus the keys of `ibv_send_wr.bind_mw`, as
/// rxe's send WQE carries them (`rxe_send_wr.wr.mw`).
///
/// [`MemoryWindow::bind_to`] makes one from a window and a region; by hand:
/// `MwBind::new(mw_rkey, rkey).mr_lkey(lkey).addr(addr).length(len).access(rights)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MwBind {
    /// The window's current key.
    pub mw_rkey: u32,
    /// The key the window gets: the current one with its low byte (the
    /// consumer-owned "key" part) changed, as [`MemoryWindow::next_rkey`].
    pub rkey: u32,
    /// The local key of the region bound to (0 with `length` 0).
    pub mr_lkey: u32,
    /// First address of the range (the region's address space).
    pub addr: u64,
    /// Length of the range; 0 unbinds a type 1 window.
    pub length: u64,
    /// The window's rights: `REMOTE_READ`, `REMOTE_WRITE`, `REMOTE_ATOMIC`
    /// (`ZERO_BASED` is refused by rxe).
    pub access: AccessFlags,
}

impl MwBind {
    /// A bind that moves the window keyed `mw_rkey` to key `rkey` over no
    /// range with no rights (an unbind of a type 1 window); the setters give
    /// it a range and rights.
    #[inline]
    pub const fn new(mw_rkey: u32, rkey: u32) -> Self {
        MwBind {
            mw_rkey,
            rkey,
            mr_lkey: 0,
            addr: 0,
            length: 0,
            access: AccessFlags::empty(),
        }
    }

    crate::setters::setters! {
        /// Sets the window's current key.
        mw_rkey: u32,
        /// Sets the key the window gets.
        rkey: u32,
        /// Sets the local key of the region bound to.
        mr_lkey: u32,
        /// Sets the first address of the range.
        addr: u64,
        /// Sets the length of the range.
        length: u64,
        /// Sets the window's rights.
        access: AccessFlags,
    }
}

impl MemoryWindow {
    /// The window's current key (what peers use once it is bound).
    pub fn rkey(&self) -> u32 {
        self.inner.rkey.load(Ordering::Acquire)
    }

    /// Records the key a bind gave the window, as libibverbs' providers
    /// store it in `ibv_mw.rkey` when they post the bind (rdma-core
    /// providers/rxe/rxe.c `rxe_bind_mw`); undo it if the bind completes
    /// in error.
    pub fn set_rkey(&self, rkey: u32) {
        self.inner.rkey.store(rkey, Ordering::Release);
    }

    /// The current key with its low byte incremented (wrapping within the
    /// byte): the key the next bind gives, as rdma-core's `next_rkey`.
    pub fn next_rkey(&self) -> u32 {
        let rkey = self.rkey();
        (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
    }

    /// The window's type.
    pub fn mw_type(&self) -> MwType {
        self.inner.mw_type
    }

    /// The kernel's handle.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// The PD the window belongs to.
    pub fn pd(&self) -> ProtectionDomain {
        ProtectionDomain {
            domain: None,
            inner: self.inner.pd.clone(),
        }
    }

    /// A bind of `len` bytes at `offset` of `mr` with `access`, to the key
    /// [`MemoryWindow::next_rkey`]; post it as
    /// [`SendOp::BindMw`](crate::SendOp::BindMw) and record the new key
    /// with [`MemoryWindow::set_rkey`] (what `ibv_bind_mw` does for a type
    /// 1 window in one call).
    ///
    /// Checks what needs no kernel: the range lies in the region, the
    /// region and the window share their PD, the rights are remote ones.
    #[doc(alias = "ibv_bind_mw")]
    pub fn bind_to(
        &self,
        mr: &MemoryRegion,
        offset: usize,
        len: usize,
        access: AccessFlags,
    ) -> Result<MwBind> {
        let op = "MemoryWindow::bind_to";
        crate::mr::check_range(op, offset, len, mr.len())?;
        if !Arc::ptr_eq(mr.pd_inner(), &self.inner.pd) {
            return Err(Error::new(
                op,
                ErrorKind::InvalidArgument,
                "the region and the window belong to different protection domains",
            ));
        }
        let allowed = AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_ATOMIC
            | AccessFlags::LOCAL_WRITE;
        if !allowed.contains(access) {
            return Err(Error::new(
                op,
                ErrorKind::InvalidArgument,
                "a window's rights are REMOTE_READ, REMOTE_WRITE and REMOTE_ATOMIC \
                 (LOCAL_WRITE is ignored)",
            ));
        }
        Ok(MwBind {
            mw_rkey: self.rkey(),
            rkey: self.next_rkey(),
            mr_lkey: mr.lkey(),
            addr: mr.addr() + offset as u64,
            length: len as u64,
            access,
        })
    }

    /// Deallocates the window now, like `ibv_dealloc_mw`, giving it back
    /// on any failure: `EBUSY` while other handles to it exist, or the
    /// kernel's refusal, after which it is as it was (still bound, if it
    /// was): deallocate it again, or drop it (the last drop tries once
    /// more).
    #[doc(alias = "ibv_dealloc_mw")]
    pub fn destroy(self) -> Result<(), DestroyError<Self>> {
        object::try_destroy(self.inner, "ibv_dealloc_mw")
            .map_err(|(inner, e)| DestroyError::new(MemoryWindow { inner }, e))
    }
}
