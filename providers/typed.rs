//! The providers' side of typed posting sessions (`crate::qpx`,
//! `QueuePair::start_wr`): the public markers a session is typed by
//! ([`Mlx5`], [`Rxe`]), and for each the provider's send batch, held by the
//! session directly so that its requests are written without a dispatch on
//! the provider. The core's `qpx` re-exports the markers and is generic
//! over [`ProviderKind`]; like `dispatch.rs`, this is the one place that
//! names both providers for it.

use crate::{
    providers::{
        mlx5::{Mlx5 as Mlx5Provider, SqBatch},
        rxe::{Rxe as RxeProvider, RxeSendBatch},
        AnyQp, Device, Provider,
    },
    wr::{PostError, PostErrorKind, SendWr},
};

/// The providers a typed session can be typed by ([`Mlx5`], [`Rxe`]).
/// Sealed: only this crate's providers are.
pub trait ProviderKind: TypedProvider {
    /// The provider's name (`"mlx5"`), as `Context::provider_name` and
    /// errors give it.
    const NAME: &'static str;
}

/// ConnectX (mlx5): the session writes WQEs into the send queue and rings
/// the doorbell (BlueFlame for one small inline WQE) at complete.
#[derive(Debug, Clone, Copy)]
pub enum Mlx5 {}

/// Soft-RoCE (rxe): the session writes WQEs into the ring the kernel
/// mapped, and complete publishes them and makes the kernel's send call.
#[derive(Debug, Clone, Copy)]
pub enum Rxe {}

impl ProviderKind for Mlx5 {
    const NAME: &'static str = Mlx5Provider::NAME;
}

impl ProviderKind for Rxe {
    const NAME: &'static str = RxeProvider::NAME;
}

/// What a typed session needs of its provider: the provider's send batch
/// and its calls. Public (as a supertrait of [`ProviderKind`]) but not
/// nameable outside the crate, so it seals [`ProviderKind`].
pub trait TypedProvider: 'static {
    /// The provider's send batch.
    type Batch<'q>: Send;
    /// The batch on the QP's queues if they are this provider's.
    fn start(q: Queues<'_>) -> Option<Self::Batch<'_>>;
    /// Checks and writes one request of a typed session (`ud`: the
    /// session's QP is UD).
    fn push(b: &mut Self::Batch<'_>, wr: &SendWr<'_>, ud: bool) -> Result<(), PostErrorKind>;
    /// Ends the batch of `pushed` requests: one doorbell.
    fn complete(b: &mut Self::Batch<'_>, pushed: usize) -> Result<(), PostError>;
    /// Drops the batch: none of its requests executes.
    fn abort(b: &mut Self::Batch<'_>);
}

/// A QP's queues and the device their doorbells need (opaque).
#[derive(Debug)]
pub struct Queues<'q> {
    queues: &'q mut AnyQp,
    dev: Device<'q>,
}

impl<'q> Queues<'q> {
    #[inline(always)]
    pub(crate) fn new(queues: &'q mut AnyQp, dev: Device<'q>) -> Self {
        Queues { queues, dev }
    }
}

/// An mlx5 send batch (opaque).
#[derive(Debug)]
pub struct Mlx5Batch<'q>(SqBatch<'q>);

impl Mlx5Batch<'_> {
    /// A WQE the program built ([`crate::WrSession::raw_wqe`]).
    #[inline]
    pub(crate) fn push_raw(&mut self, wr_id: u64, wqe: &[u8]) -> Result<(), PostErrorKind> {
        self.0.push_raw(wr_id, wqe)
    }
}

/// An rxe send batch (opaque).
#[derive(Debug)]
pub struct RxeBatch<'q>(RxeSendBatch<'q>);

impl TypedProvider for Mlx5 {
    type Batch<'q> = Mlx5Batch<'q>;

    #[inline(always)]
    fn start(q: Queues<'_>) -> Option<Mlx5Batch<'_>> {
        match q.queues {
            AnyQp::Mlx5(qp) => Some(Mlx5Batch(Mlx5Provider::start_send_batch(qp, q.dev))),
            _ => None,
        }
    }

    #[inline(always)]
    fn push(b: &mut Mlx5Batch<'_>, wr: &SendWr<'_>, ud: bool) -> Result<(), PostErrorKind> {
        Mlx5Provider::push_send_typed(&mut b.0, wr, ud)
    }

    #[inline(always)]
    fn complete(b: &mut Mlx5Batch<'_>, pushed: usize) -> Result<(), PostError> {
        Mlx5Provider::complete_send_batch(&mut b.0, pushed)
    }

    #[inline(always)]
    fn abort(b: &mut Mlx5Batch<'_>) {
        Mlx5Provider::abort_send_batch(&mut b.0)
    }
}

impl TypedProvider for Rxe {
    type Batch<'q> = RxeBatch<'q>;

    #[inline(always)]
    fn start(q: Queues<'_>) -> Option<RxeBatch<'_>> {
        match q.queues {
            AnyQp::Rxe(qp) => Some(RxeBatch(RxeProvider::start_send_batch(qp, q.dev))),
            _ => None,
        }
    }

    #[inline(always)]
    fn push(b: &mut RxeBatch<'_>, wr: &SendWr<'_>, ud: bool) -> Result<(), PostErrorKind> {
        RxeProvider::push_send_typed(&mut b.0, wr, ud)
    }

    #[inline(always)]
    fn complete(b: &mut RxeBatch<'_>, pushed: usize) -> Result<(), PostError> {
        RxeProvider::complete_send_batch(&mut b.0, pushed)
    }

    #[inline(always)]
    fn abort(b: &mut RxeBatch<'_>) {
        RxeProvider::abort_send_batch(&mut b.0)
    }
}

/// A provider whose typed sessions take WQEs the program built itself
/// ([`crate::WrSession::raw_wqe`]): mlx5's `mlx5dv_wr_raw_wqe`. Sealed, as
/// [`ProviderKind`].
pub trait RawWqes: ProviderKind {
    /// Writes a raw WQE as the batch's next request.
    #[doc(hidden)]
    fn push_raw(b: &mut Self::Batch<'_>, wr_id: u64, wqe: &[u8]) -> Result<(), PostErrorKind>;
}

impl RawWqes for Mlx5 {
    #[inline]
    fn push_raw(b: &mut Mlx5Batch<'_>, wr_id: u64, wqe: &[u8]) -> Result<(), PostErrorKind> {
        b.push_raw(wr_id, wqe)
    }
}
