//! Typed posting: the extended verbs of `ibv_qp_ex` (`ibv_wr_start`,
//! `ibv_wr_rdma_write`, `ibv_wr_set_sge`, ..., `ibv_wr_complete`), with
//! what C checks on every request checked once, or by the compiler.
//!
//! A [`WrSession`] is a typed view of the QP's one send session (its
//! cursor lives in the provider's send queue: [`crate::send_session`]),
//! started on a QP with [`QueuePair::start_wr`], typed by the QP's
//! transport ([`Rc`], [`Uc`], [`Ud`]) and its provider ([`Mlx5`],
//! [`Rxe`]). The view costs nothing over the queue's own calls: it holds
//! the provider's queue directly, and (mlx5) the session's cursor in
//! registers while it lives.
//!
//! - the **QP type** is checked once, when the session starts; from then
//!   on an operation the type cannot carry does not compile (an RDMA read
//!   on a [`Uc`] session has no method, a [`Ud`] send has no form without
//!   a destination, a connected one none with);
//! - the **provider** is checked once too, and the session holds that
//!   provider's queue directly: no dispatch on the provider per request;
//! - the QP's **state** (and whether a RESET restarted its queues) is
//!   checked once per session, as [`QueuePair::post_send`] checks it once
//!   per call; a session borrows the QP, so no modify can happen during it;
//! - the queue's **room** is read once per session and read again only
//!   when that much has been written.
//!
//! What is left per request is what depends on its values: the SGE count
//! against the QP's `max_send_sge`, inline data against its
//! `max_inline_data`, and whether the queue is full. Each is a typed error
//! ([`crate::PostErrorKind`]) with nothing of the request written.
//!
//! Each operation method returns a builder ([`Wr`]) that takes the
//! request's id and flags and ends with its payload, which writes the WQE:
//!
//! ```no_run
//! # fn run(qp: &mut uverbs::QueuePair, mr: &uverbs::MemoryRegion) -> uverbs::Result<()> {
//! use uverbs::qp_ex::{Mlx5, Rc};
//! use uverbs::Sge;
//! let mut s = qp.start_wr::<Rc, Mlx5>()?; // ibv_wr_start
//! s.rdma_write(0x1234, 0x7000_0000) // ibv_wr_rdma_write(qpx, rkey, remote_addr)
//!     .wr_id(1) //                    qpx->wr_id = 1
//!     .sge(Sge::new(mr.addr(), 64, mr.lkey()))?; // ibv_wr_set_sge
//! s.send()
//!     .wr_id(2)
//!     .solicited() //                qpx->wr_flags |= IBV_SEND_SOLICITED
//!     .inline(b"done")?; //          ibv_wr_set_inline_data
//! s.complete()?; //                  ibv_wr_complete
//! # Ok(())
//! # }
//! ```
//!
//! What the transport cannot carry does not compile. An RDMA read on UC:
//!
//! ```compile_fail,E0599
//! # fn f(qp: &mut uverbs::QueuePair, sge: uverbs::Sge) -> Result<(), uverbs::PostError> {
//! let mut s = qp.start_wr::<uverbs::qp_ex::Uc, uverbs::qp_ex::Mlx5>()?;
//! s.rdma_read(0x1234, 0x7000_0000).sge(sge)?;
//! # Ok(()) }
//! ```
//!
//! A UD send without a destination (and a connected one with):
//!
//! ```compile_fail,E0599
//! # fn f(qp: &mut uverbs::QueuePair, sge: uverbs::Sge) -> Result<(), uverbs::PostError> {
//! let mut s = qp.start_wr::<uverbs::qp_ex::Ud, uverbs::qp_ex::Rxe>()?;
//! s.send().sge(sge)?;
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0599
//! # fn f(qp: &mut uverbs::QueuePair, d: uverbs::UdDest<'_>, sge: uverbs::Sge) -> Result<(), uverbs::PostError> {
//! let mut s = qp.start_wr::<uverbs::qp_ex::Rc, uverbs::qp_ex::Rxe>()?;
//! s.send_to(d).sge(sge)?;
//! # Ok(()) }
//! ```
//!
//! Inline data for a read, an SGE list for an atomic:
//!
//! ```compile_fail,E0599
//! # fn f(qp: &mut uverbs::QueuePair) -> Result<(), uverbs::PostError> {
//! let mut s = qp.start_wr::<uverbs::qp_ex::Rc, uverbs::qp_ex::Mlx5>()?;
//! s.rdma_read(0x1234, 0x7000_0000).inline(b"no")?;
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0599
//! # fn f(qp: &mut uverbs::QueuePair, sge: uverbs::Sge) -> Result<(), uverbs::PostError> {
//! let mut s = qp.start_wr::<uverbs::qp_ex::Rc, uverbs::qp_ex::Mlx5>()?;
//! s.atomic_fetch_add(0x1234, 0x7000_0000, 1).sge_list(&[sge, sge])?;
//! # Ok(()) }
//! ```
//!
//! The same programs with what the transport carries compile:
//!
//! ```no_run
//! # fn f(qp: &mut uverbs::QueuePair, d: uverbs::UdDest<'_>, sge: uverbs::Sge) -> Result<(), uverbs::PostError> {
//! use uverbs::qp_ex::{Mlx5, Rc, Rxe, Ud};
//! let mut s = qp.start_wr::<Rc, Mlx5>()?;
//! s.rdma_read(0x1234, 0x7000_0000).sge(sge)?;
//! s.send().inline(b"yes")?;
//! s.atomic_fetch_add(0x1234, 0x7000_0000, 1).sge(sge)?;
//! s.complete()?;
//! let mut s = qp.start_wr::<Ud, Rxe>()?;
//! s.send_to(d).sge(sge)?;
//! s.complete()?;
//! # Ok(()) }
//! ```
//!
//! Until [`WrSession::complete`] nothing of the session is visible to the
//! device or the kernel; [`WrSession::abort`] (or dropping the session)
//! takes every request back and none executes, as `ibv_wr_abort`. Code
//! that should run on either provider is generic over [`ProviderKind`]
//! (`fn post<P: ProviderKind>(s: &mut WrSession<'_, Rc, P>)`); it is
//! compiled once per provider, each without dispatch.
//!
//! | libibverbs (`ibv_qp_ex`) | uverbs |
//! |---|---|
//! | `ibv_qp_to_qp_ex(qp)`, `ibv_wr_start(qpx)` | [`QueuePair::start_wr::<Rc, Mlx5>()`](QueuePair::start_wr) |
//! | `qpx->wr_id = id` | [`Wr::wr_id`] |
//! | `qpx->wr_flags = IBV_SEND_SIGNALED \| ...` | signaled by default; [`Wr::unsignaled`], [`Wr::solicited`], [`Wr::fence`], [`Wr::flags`] |
//! | `ibv_wr_send`, `ibv_wr_send_imm` | [`WrSession::send`], [`WrSession::send_imm`] |
//! | `ibv_wr_send` + `ibv_wr_set_ud_addr` (UD) | [`WrSession::send_to`], [`WrSession::send_imm_to`] |
//! | `ibv_wr_rdma_write`, `ibv_wr_rdma_write_imm` | [`WrSession::rdma_write`], [`WrSession::rdma_write_imm`] |
//! | `ibv_wr_rdma_read` | [`WrSession::rdma_read`] |
//! | `ibv_wr_atomic_cmp_swp`, `ibv_wr_atomic_fetch_add` | [`WrSession::atomic_cmp_swp`], [`WrSession::atomic_fetch_add`] |
//! | `ibv_wr_set_sge`, `ibv_wr_set_sge_list` | [`Wr::sge`], [`Wr::sge_list`] |
//! | `ibv_wr_set_inline_data` | [`Wr::inline`] |
//! | `ibv_wr_complete`, `ibv_wr_abort` | [`WrSession::complete`], [`WrSession::abort`] or drop |
//!
//! Not here: the operations uverbs has no objects for (`ibv_wr_bind_mw`,
//! `ibv_wr_local_inv`, `ibv_wr_send_inv`, `ibv_wr_send_tso`,
//! `ibv_wr_set_xrc_srqn`), and `ibv_wr_set_inline_data_list` (gather the
//! pieces into one buffer, or use an SGE list).

use std::marker::PhantomData;

use crate::{
    wr::{Payload, PostError, SendFlags, SendOp, SendWr, Sge, UdDest},
    QpType,
};

#[cfg(doc)]
use crate::QueuePair;

/// The QP transports a session can be typed by ([`Rc`], [`Uc`], [`Ud`]).
pub trait QpKind: sealed::Kind {
    /// The QP type of this transport.
    const TYPE: QpType;
}

/// Transports whose sends go to the connected peer ([`Rc`], [`Uc`]).
pub trait Connected: QpKind {}

/// Transports that carry RDMA writes ([`Rc`], [`Uc`]).
pub trait Writes: QpKind {}

/// Transports that carry RDMA reads and atomics ([`Rc`]).
pub trait ReadsAndAtomics: Writes {}

/// Transports whose sends name their destination ([`Ud`]).
pub trait Datagram: QpKind {}

/// Reliable connected (`IBV_QPT_RC`): sends, RDMA writes, reads, atomics.
#[derive(Debug, Clone, Copy)]
pub enum Rc {}

/// Unreliable connected (`IBV_QPT_UC`): sends and RDMA writes.
#[derive(Debug, Clone, Copy)]
pub enum Uc {}

/// Unreliable datagram (`IBV_QPT_UD`): sends, each to an address handle.
#[derive(Debug, Clone, Copy)]
pub enum Ud {}

impl QpKind for Rc {
    const TYPE: QpType = QpType::Rc;
}
impl QpKind for Uc {
    const TYPE: QpType = QpType::Uc;
}
impl QpKind for Ud {
    const TYPE: QpType = QpType::Ud;
}
impl Connected for Rc {}
impl Connected for Uc {}
impl Writes for Rc {}
impl Writes for Uc {}
impl ReadsAndAtomics for Rc {}
impl Datagram for Ud {}

pub(crate) mod sealed {
    /// Only this module's transports are [`super::QpKind`]s.
    pub trait Kind {}
    impl Kind for super::Rc {}
    impl Kind for super::Uc {}
    impl Kind for super::Ud {}
}

// The providers' side of typed sessions lives with the providers
// (`providers/typed.rs`): the markers, and each one's batch.
#[cfg(feature = "mlx5")]
#[cfg_attr(docsrs, doc(cfg(feature = "mlx5")))]
pub use crate::providers::typed::Mlx5;
pub use crate::providers::typed::ProviderKind;
pub use crate::providers::typed::RawWqes;
#[cfg(feature = "rxe")]
#[cfg_attr(docsrs, doc(cfg(feature = "rxe")))]
pub use crate::providers::typed::Rxe;
use crate::providers::typed::{Queues, TypedProvider};

/// Send work requests being written to one QP of transport `K` and
/// provider `P`, rung with one doorbell by [`WrSession::complete`]: the
/// `ibv_qp_ex` posting session (`ibv_wr_start` .. `ibv_wr_complete`). Made
/// by [`QueuePair::start_wr`]; see [the module](self).
///
/// Dropping the session without `complete` aborts it: none of its requests
/// executes. A session passed to `mem::forget` is not completed either
/// (as for [`crate::SendBatch`], the untyped view of the same session:
/// mlx5 writes over its requests with the next ones, rxe sends them with
/// the next doorbell); nothing unsound happens.
#[must_use = "a session posts nothing until complete() is called"]
pub struct WrSession<'q, K: QpKind, P: ProviderKind> {
    view: <P as TypedProvider>::View<'q>,
    /// Requests written so far.
    pushed: usize,
    /// Completed or aborted (nothing left for `Drop` to do).
    closed: bool,
    kind: PhantomData<fn() -> K>,
}

impl<K: QpKind, P: ProviderKind> std::fmt::Debug for WrSession<'_, K, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrSession")
            .field("qp_type", &K::TYPE)
            .field("provider", &P::NAME)
            .field("pushed", &self.pushed)
            .finish()
    }
}

impl<'q, K: QpKind, P: ProviderKind> WrSession<'q, K, P> {
    /// The session on a QP's queues if they are `P`'s.
    #[inline(always)]
    pub(crate) fn start(queues: Queues<'q>) -> Option<Self> {
        Some(WrSession {
            view: P::start(queues)?,
            pushed: 0,
            closed: false,
            kind: PhantomData,
        })
    }

    /// A request: signaled, wr_id 0, to be given its payload.
    #[inline(always)]
    fn wr<'s, 'a, D>(&'s mut self, op: SendOp, ud: Option<UdDest<'a>>) -> Wr<'s, 'q, 'a, K, P, D> {
        Wr {
            session: self,
            wr_id: 0,
            flags: SendFlags::SIGNALED,
            op,
            ud,
            payload: PhantomData,
        }
    }

    /// A SEND to the connected peer (`ibv_wr_send`).
    #[doc(alias = "ibv_wr_send")]
    #[inline(always)]
    pub fn send(&mut self) -> Wr<'_, 'q, 'static, K, P, Data>
    where
        K: Connected,
    {
        self.wr(SendOp::Send, None)
    }

    /// A SEND with immediate data (`ibv_wr_send_imm`; `imm` in host order).
    #[doc(alias = "ibv_wr_send_imm")]
    #[inline(always)]
    pub fn send_imm(&mut self, imm: u32) -> Wr<'_, 'q, 'static, K, P, Data>
    where
        K: Connected,
    {
        self.wr(SendOp::SendWithImm { imm }, None)
    }

    /// A SEND to `dest` (`ibv_wr_send` + `ibv_wr_set_ud_addr`).
    #[doc(alias = "ibv_wr_set_ud_addr")]
    #[inline(always)]
    pub fn send_to<'a>(&mut self, dest: UdDest<'a>) -> Wr<'_, 'q, 'a, K, P, Data>
    where
        K: Datagram,
    {
        self.wr(SendOp::Send, Some(dest))
    }

    /// A SEND with immediate data to `dest` (`ibv_wr_send_imm` +
    /// `ibv_wr_set_ud_addr`).
    #[inline(always)]
    pub fn send_imm_to<'a>(&mut self, dest: UdDest<'a>, imm: u32) -> Wr<'_, 'q, 'a, K, P, Data>
    where
        K: Datagram,
    {
        self.wr(SendOp::SendWithImm { imm }, Some(dest))
    }

    /// An RDMA WRITE to `remote_addr` of the peer's region `rkey`
    /// (`ibv_wr_rdma_write(qpx, rkey, remote_addr)`).
    #[doc(alias = "ibv_wr_rdma_write")]
    #[inline(always)]
    pub fn rdma_write(&mut self, rkey: u32, remote_addr: u64) -> Wr<'_, 'q, 'static, K, P, Data>
    where
        K: Writes,
    {
        self.wr(SendOp::RdmaWrite { remote_addr, rkey }, None)
    }

    /// An RDMA WRITE with immediate data (`ibv_wr_rdma_write_imm`).
    #[doc(alias = "ibv_wr_rdma_write_imm")]
    #[inline(always)]
    pub fn rdma_write_imm(
        &mut self,
        rkey: u32,
        remote_addr: u64,
        imm: u32,
    ) -> Wr<'_, 'q, 'static, K, P, Data>
    where
        K: Writes,
    {
        let op = SendOp::RdmaWriteWithImm {
            remote_addr,
            rkey,
            imm,
        };
        self.wr(op, None)
    }

    /// An RDMA READ of the peer's `remote_addr` into the SGEs given next
    /// (`ibv_wr_rdma_read`).
    #[doc(alias = "ibv_wr_rdma_read")]
    #[inline(always)]
    pub fn rdma_read(&mut self, rkey: u32, remote_addr: u64) -> Wr<'_, 'q, 'static, K, P, Read>
    where
        K: ReadsAndAtomics,
    {
        self.wr(SendOp::RdmaRead { remote_addr, rkey }, None)
    }

    /// An atomic compare-and-swap of the peer's 8 bytes at `remote_addr`;
    /// the old value lands in the SGE given next
    /// (`ibv_wr_atomic_cmp_swp`).
    #[doc(alias = "ibv_wr_atomic_cmp_swp")]
    #[inline(always)]
    pub fn atomic_cmp_swp(
        &mut self,
        rkey: u32,
        remote_addr: u64,
        compare: u64,
        swap: u64,
    ) -> Wr<'_, 'q, 'static, K, P, Atomic>
    where
        K: ReadsAndAtomics,
    {
        let op = SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        };
        self.wr(op, None)
    }

    /// An atomic fetch-and-add of `add` to the peer's 8 bytes at
    /// `remote_addr`; the old value lands in the SGE given next
    /// (`ibv_wr_atomic_fetch_add`).
    #[doc(alias = "ibv_wr_atomic_fetch_add")]
    #[inline(always)]
    pub fn atomic_fetch_add(
        &mut self,
        rkey: u32,
        remote_addr: u64,
        add: u64,
    ) -> Wr<'_, 'q, 'static, K, P, Atomic>
    where
        K: ReadsAndAtomics,
    {
        let op = SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        };
        self.wr(op, None)
    }

    /// A SEND that also invalidates the receiver's key `rkey`
    /// (`ibv_wr_send_inv`).
    #[doc(alias = "ibv_wr_send_inv")]
    #[inline(always)]
    pub fn send_inv(&mut self, rkey: u32) -> Wr<'_, 'q, 'static, K, P, Data>
    where
        K: Connected,
    {
        self.wr(SendOp::SendWithInvalidate { rkey }, None)
    }

    /// Binds a memory window (`ibv_wr_bind_mw`; the bind from
    /// [`crate::MemoryWindow::bind_to`]).
    #[doc(alias = "ibv_wr_bind_mw")]
    #[inline(always)]
    pub fn bind_mw(&mut self, bind: crate::MwBind) -> Wr<'_, 'q, 'static, K, P, NoData>
    where
        K: Connected,
    {
        self.wr(SendOp::BindMw(bind), None)
    }

    /// Invalidates the local key `rkey` (`ibv_wr_local_inv`).
    #[doc(alias = "ibv_wr_local_inv")]
    #[inline(always)]
    pub fn local_inv(&mut self, rkey: u32) -> Wr<'_, 'q, 'static, K, P, NoData>
    where
        K: ReadsAndAtomics,
    {
        self.wr(SendOp::LocalInvalidate { rkey }, None)
    }

    /// Writes the 8 bytes `data` at the peer's `remote_addr` as one atomic
    /// access (`ibv_wr_atomic_write`; kernels from 6.2).
    #[doc(alias = "ibv_wr_atomic_write")]
    #[inline(always)]
    pub fn atomic_write(
        &mut self,
        rkey: u32,
        remote_addr: u64,
        data: [u8; 8],
    ) -> Wr<'_, 'q, 'static, K, P, NoData>
    where
        K: ReadsAndAtomics,
    {
        let op = SendOp::AtomicWrite {
            remote_addr,
            rkey,
            data,
        };
        self.wr(op, None)
    }

    /// How many requests the session holds.
    pub fn len(&self) -> usize {
        self.pushed
    }

    /// Whether the session holds no request.
    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }

    /// Hands the session's requests to the device or kernel and rings the
    /// doorbell once (none for an empty session), like `ibv_wr_complete`.
    /// On rxe the doorbell is a system call; should it fail, the requests
    /// are in the queue and [`PostError::index`] is [`WrSession::len`].
    #[doc(alias = "ibv_wr_complete")]
    #[inline(always)]
    pub fn complete(mut self) -> Result<(), PostError> {
        self.closed = true;
        P::complete(&mut self.view, self.pushed)
    }

    /// Takes every request of the session back, like `ibv_wr_abort`: none
    /// of them executes, and the queue is as before the session started.
    #[doc(alias = "ibv_wr_abort")]
    pub fn abort(mut self) {
        self.close_aborted();
    }

    fn close_aborted(&mut self) {
        if !self.closed {
            self.closed = true;
            P::abort(&mut self.view);
        }
    }

    /// Writes one request of a provider's own kind through its view
    /// (`f`; mlx5's raw WQEs), counted as the session's; on an error
    /// nothing of it is taken.
    pub(crate) fn push_own(
        &mut self,
        f: impl FnOnce(&mut <P as TypedProvider>::View<'q>) -> Result<(), crate::PostErrorKind>,
    ) -> Result<(), PostError> {
        match f(&mut self.view) {
            Ok(()) => {
                self.pushed += 1;
                Ok(())
            }
            Err(kind) => Err(PostError {
                index: self.pushed,
                kind,
            }),
        }
    }

    /// Checks and writes one request; on an error nothing of it is taken.
    #[inline(always)]
    fn push(&mut self, wr: &SendWr<'_>) -> Result<(), PostError> {
        let ud = matches!(K::TYPE, QpType::Ud);
        match P::push(&mut self.view, wr, ud) {
            Ok(()) => {
                self.pushed += 1;
                Ok(())
            }
            Err(kind) => Err(PostError {
                index: self.pushed,
                kind,
            }),
        }
    }
}

impl<K: QpKind, P: RawWqes> WrSession<'_, K, P> {
    /// Posts a WQE the program built itself, like `mlx5dv_wr_raw_wqe`: the
    /// bytes of a whole send WQE (ctrl segment first, in the device's byte
    /// order), its size the ctrl segment's DS (`qpn_ds & 0x3f` 16-byte
    /// units). It is copied into the send queue as the session's next
    /// request, wrapping around the ring's end as needed, with the WQE
    /// index of its ctrl segment set to its position; the rest (opcode, QP
    /// number, flags: `MLX5_WQE_CTRL_CQ_UPDATE` for a completion) is the
    /// program's, unchecked, as libmlx5 takes it. Its completion carries
    /// `wr_id` and [`crate::WcOpcode::DRIVER2`] (`MLX5DV_WC_RAW_WQE`).
    ///
    /// Refused, nothing taken: a full queue ([`crate::PostErrorKind::QueueFull`]);
    /// a DS of 0, or more units than `wqe` holds or than the queue's WQEs
    /// were sized for ([`crate::PostErrorKind::OpNotSupported`]: the queue's room
    /// is counted in WQEs of that size).
    #[doc(alias = "mlx5dv_wr_raw_wqe")]
    pub fn raw_wqe(&mut self, wr_id: u64, wqe: &[u8]) -> Result<(), PostError> {
        self.push_own(|b| P::push_raw(b, wr_id, wqe))
    }
}

impl<K: QpKind, P: ProviderKind> Drop for WrSession<'_, K, P> {
    fn drop(&mut self) {
        self.close_aborted();
    }
}

/// The payload a [`Wr`] of a SEND or RDMA WRITE takes: SGEs or inline data.
#[derive(Debug)]
pub enum Data {}
/// The payload a [`Wr`] of an RDMA READ takes: the SGEs it scatters to.
#[derive(Debug)]
pub enum Read {}
/// The payload a [`Wr`] of an atomic takes: one SGE for the old value.
#[derive(Debug)]
pub enum Atomic {}
/// The payload of a [`Wr`] whose operation carries its data itself (a
/// bind, a local invalidate, an atomic write): none.
#[derive(Debug)]
pub enum NoData {}

/// One work request of a [`WrSession`] being built: its id and flags, then
/// its payload, which writes it (`ibv_wr_set_sge`, `ibv_wr_set_sge_list`,
/// `ibv_wr_set_inline_data`). `D` is the payload its operation takes
/// ([`Data`], [`Read`], [`Atomic`]): inline data for a read, or two SGEs
/// for an atomic, do not compile. A request dropped before its payload is
/// not written (nothing of it is in the queue).
#[must_use = "a work request is written by its payload method (sge, sge_list, inline)"]
pub struct Wr<'s, 'q, 'a, K: QpKind, P: ProviderKind, D> {
    session: &'s mut WrSession<'q, K, P>,
    wr_id: u64,
    flags: SendFlags,
    op: SendOp,
    ud: Option<UdDest<'a>>,
    payload: PhantomData<D>,
}

impl<K: QpKind, P: ProviderKind, D> std::fmt::Debug for Wr<'_, '_, '_, K, P, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wr")
            .field("wr_id", &self.wr_id)
            .field("flags", &self.flags)
            .field("op", &self.op)
            .finish()
    }
}

impl<'a, K: QpKind, P: ProviderKind, D> Wr<'_, '_, 'a, K, P, D> {
    /// The id its completion carries (`qpx->wr_id`); 0 unless set.
    #[inline(always)]
    pub fn wr_id(mut self, wr_id: u64) -> Self {
        self.wr_id = wr_id;
        self
    }

    /// No completion unless the QP signals all (`sq_sig_all`): clears
    /// `IBV_SEND_SIGNALED`, which is set by default as for
    /// [`SendWr::new`].
    #[inline(always)]
    pub fn unsignaled(mut self) -> Self {
        self.flags.remove(SendFlags::SIGNALED);
        self
    }

    /// The peer's CQ raises an event for it if armed for solicited events
    /// only (`IBV_SEND_SOLICITED`).
    #[inline(always)]
    pub fn solicited(mut self) -> Self {
        self.flags.insert(SendFlags::SOLICITED);
        self
    }

    /// Waits for the QP's earlier RDMA reads and atomics to complete
    /// before it executes (`IBV_SEND_FENCE`).
    #[inline(always)]
    pub fn fence(mut self) -> Self {
        self.flags.insert(SendFlags::FENCE);
        self
    }

    /// Sets the flags whole (`qpx->wr_flags`): `SIGNALED`, `SOLICITED`,
    /// `FENCE`. `INLINE` is chosen by the payload method ([`Wr::inline`]).
    #[inline(always)]
    pub fn flags(mut self, flags: SendFlags) -> Self {
        self.flags = flags;
        self
    }

    /// Writes the request with `payload`.
    #[inline(always)]
    fn write(self, payload: Payload<'_>) -> Result<(), PostError> {
        let wr = SendWr {
            wr_id: self.wr_id,
            op: self.op,
            payload,
            flags: self.flags,
            ud: self.ud,
        };
        self.session.push(&wr)
    }
}

impl<K: QpKind, P: ProviderKind> Wr<'_, '_, '_, K, P, Data> {
    /// Writes the request with one SGE as its data (`ibv_wr_set_sge`).
    #[doc(alias = "ibv_wr_set_sge")]
    #[inline(always)]
    pub fn sge(self, sge: Sge) -> Result<(), PostError> {
        self.write(Payload::Sges(&[sge]))
    }

    /// Writes the request with SGEs as its data, at most the QP's
    /// `max_send_sge` (`ibv_wr_set_sge_list`); none sends zero bytes.
    #[doc(alias = "ibv_wr_set_sge_list")]
    #[inline(always)]
    pub fn sge_list(self, sges: &[Sge]) -> Result<(), PostError> {
        self.write(Payload::Sges(sges))
    }

    /// Writes the request with `data` copied into the WQE, at most the
    /// QP's `max_inline_data` bytes (`ibv_wr_set_inline_data`): the buffer
    /// is free again when this returns, and needs no registration.
    #[doc(alias = "ibv_wr_set_inline_data")]
    #[inline(always)]
    pub fn inline(mut self, data: &[u8]) -> Result<(), PostError> {
        self.flags.insert(SendFlags::INLINE);
        self.write(Payload::Inline(data))
    }
}

impl<K: QpKind, P: ProviderKind> Wr<'_, '_, '_, K, P, Read> {
    /// Writes the read with one SGE to scatter into (`ibv_wr_set_sge`).
    #[inline(always)]
    pub fn sge(self, sge: Sge) -> Result<(), PostError> {
        self.write(Payload::Sges(&[sge]))
    }

    /// Writes the read with SGEs to scatter into, at most the QP's
    /// `max_send_sge` (`ibv_wr_set_sge_list`).
    #[inline(always)]
    pub fn sge_list(self, sges: &[Sge]) -> Result<(), PostError> {
        self.write(Payload::Sges(sges))
    }
}

impl<K: QpKind, P: ProviderKind> Wr<'_, '_, '_, K, P, Atomic> {
    /// Writes the atomic with the SGE its old value lands in: 8 bytes at
    /// `sge.addr` of region `sge.lkey` (`ibv_wr_set_sge`; the length is 8
    /// whatever `sge.length` says, as the device writes 8).
    #[inline(always)]
    pub fn sge(self, sge: Sge) -> Result<(), PostError> {
        self.write(Payload::Sges(&[Sge { length: 8, ..sge }]))
    }
}

impl<K: QpKind, P: ProviderKind> Wr<'_, '_, '_, K, P, NoData> {
    /// Writes the request (it takes no payload).
    #[inline(always)]
    pub fn post(self) -> Result<(), PostError> {
        self.write(Payload::Sges(&[]))
    }
}

// A session may be held across an `.await` in a `Send` future.
#[allow(dead_code)]
const _: fn() = || {
    fn send<T: Send>() {}
    // For every provider (checked generically: each one's batch is `Send`).
    fn sessions<K: QpKind, P: ProviderKind>() {
        send::<WrSession<'static, K, P>>();
    }
};
