//! The providers' side of typed posting sessions (`crate::qp_ex`,
//! `QueuePair::start_wr`): the public markers a session is typed by
//! ([`Mlx5`], [`Rxe`]), and for each the provider's view of the QP's send
//! session, held by the typed view directly so that its requests are
//! written without a dispatch on the provider. The core's `qp_ex` re-exports the markers and is generic
//! over [`ProviderKind`]; like `dispatch.rs`, this is the one place that
//! names both providers for it.

// In a build with one provider, the `_` arms below match nothing.
#![cfg_attr(
    not(all(feature = "rxe", feature = "mlx5")),
    allow(unreachable_patterns)
)]

#[cfg(feature = "mlx5")]
use crate::providers::mlx5::{Mlx5 as Mlx5Provider, SqSession};
#[cfg(feature = "rxe")]
use crate::providers::rxe::{Rxe as RxeProvider, RxeSendSession};
use crate::{
    providers::{AnyQp, Device, Provider},
    wr::{PostError, PostErrorKind, SendWr},
};

/// The providers a typed session can be typed by ([`Mlx5`], [`Rxe`]).
/// Sealed: only this crate's providers are.
pub trait ProviderKind: TypedProvider {
    /// The provider's name (`"mlx5"`), as `Context::provider_name` and
    /// errors give it.
    const NAME: &'static str;
}

#[cfg(feature = "mlx5")]
#[cfg_attr(docsrs, doc(cfg(feature = "mlx5")))]
/// ConnectX (mlx5): the session writes WQEs into the send queue and rings
/// the doorbell (BlueFlame for one small inline WQE) at complete.
#[derive(Debug, Clone, Copy)]
pub enum Mlx5 {}

#[cfg(feature = "rxe")]
#[cfg_attr(docsrs, doc(cfg(feature = "rxe")))]
/// Soft-RoCE (rxe): the session writes WQEs into the ring the kernel
/// mapped, and complete publishes them and makes the kernel's send call.
#[derive(Debug, Clone, Copy)]
pub enum Rxe {}

#[cfg(feature = "mlx5")]
impl ProviderKind for Mlx5 {
    const NAME: &'static str = Mlx5Provider::NAME;
}

#[cfg(feature = "rxe")]
impl ProviderKind for Rxe {
    const NAME: &'static str = RxeProvider::NAME;
}

/// What a typed session needs of its provider: the provider's view of the
/// send session and its calls. Public (as a supertrait of [`ProviderKind`]) but not
/// nameable outside the crate, so it seals [`ProviderKind`].
pub trait TypedProvider: 'static {
    /// The provider's view of the send session.
    type View<'q>: Send;
    /// Opens the send session on the QP's queues and views it, if they are
    /// this provider's.
    fn start(q: Queues<'_>) -> Option<Self::View<'_>>;
    /// Checks and writes one request of a typed session (`ud`: the
    /// session's QP is UD).
    fn push(v: &mut Self::View<'_>, wr: &SendWr<'_>, ud: bool) -> Result<(), PostErrorKind>;
    /// Ends the session of `pushed` requests: one doorbell.
    fn complete(v: &mut Self::View<'_>, pushed: usize) -> Result<(), PostError>;
    /// Ends the session: none of its requests executes.
    fn abort(v: &mut Self::View<'_>);
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

#[cfg(feature = "mlx5")]
#[cfg_attr(docsrs, doc(cfg(feature = "mlx5")))]
/// A view of an mlx5 send session (opaque).
#[derive(Debug)]
pub struct Mlx5View<'q>(SqSession<'q>);

#[cfg(feature = "mlx5")]
impl Mlx5View<'_> {
    /// A WQE the program built ([`crate::WrSession::raw_wqe`]).
    #[inline]
    pub(crate) fn push_raw(&mut self, wr_id: u64, wqe: &[u8]) -> Result<(), PostErrorKind> {
        self.0.push_raw(wr_id, wqe)
    }
}

#[cfg(feature = "rxe")]
#[cfg_attr(docsrs, doc(cfg(feature = "rxe")))]
/// A view of an rxe send session (opaque).
#[derive(Debug)]
pub struct RxeView<'q>(RxeSendSession<'q>);

#[cfg(feature = "mlx5")]
impl TypedProvider for Mlx5 {
    type View<'q> = Mlx5View<'q>;

    #[inline(always)]
    fn start(q: Queues<'_>) -> Option<Mlx5View<'_>> {
        match q.queues {
            AnyQp::Mlx5(qp) => Some(Mlx5View(Mlx5Provider::start_send(qp, q.dev))),
            _ => None,
        }
    }

    #[inline(always)]
    fn push(b: &mut Mlx5View<'_>, wr: &SendWr<'_>, ud: bool) -> Result<(), PostErrorKind> {
        Mlx5Provider::push_send_typed(&mut b.0, wr, ud)
    }

    #[inline(always)]
    fn complete(b: &mut Mlx5View<'_>, pushed: usize) -> Result<(), PostError> {
        Mlx5Provider::complete_send(&mut b.0, pushed)
    }

    #[inline(always)]
    fn abort(b: &mut Mlx5View<'_>) {
        Mlx5Provider::abort_send(&mut b.0)
    }
}

#[cfg(feature = "rxe")]
impl TypedProvider for Rxe {
    type View<'q> = RxeView<'q>;

    #[inline(always)]
    fn start(q: Queues<'_>) -> Option<RxeView<'_>> {
        match q.queues {
            AnyQp::Rxe(qp) => Some(RxeView(RxeProvider::start_send(qp, q.dev))),
            _ => None,
        }
    }

    #[inline(always)]
    fn push(b: &mut RxeView<'_>, wr: &SendWr<'_>, ud: bool) -> Result<(), PostErrorKind> {
        RxeProvider::push_send_typed(&mut b.0, wr, ud)
    }

    #[inline(always)]
    fn complete(b: &mut RxeView<'_>, pushed: usize) -> Result<(), PostError> {
        RxeProvider::complete_send(&mut b.0, pushed)
    }

    #[inline(always)]
    fn abort(b: &mut RxeView<'_>) {
        RxeProvider::abort_send(&mut b.0)
    }
}

/// A provider whose typed sessions take WQEs the program built itself
/// ([`crate::WrSession::raw_wqe`]): mlx5's `mlx5dv_wr_raw_wqe`. Sealed, as
/// [`ProviderKind`].
pub trait RawWqes: ProviderKind {
    /// Writes a raw WQE as the session's next request.
    #[doc(hidden)]
    fn push_raw(v: &mut Self::View<'_>, wr_id: u64, wqe: &[u8]) -> Result<(), PostErrorKind>;
}

#[cfg(feature = "mlx5")]
impl RawWqes for Mlx5 {
    #[inline]
    fn push_raw(b: &mut Mlx5View<'_>, wr_id: u64, wqe: &[u8]) -> Result<(), PostErrorKind> {
        b.push_raw(wr_id, wqe)
    }
}
