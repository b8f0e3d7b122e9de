//! The one place that dispatches on the provider.
//!
//! `providers!` takes the list of providers and generates, for each kind of
//! per-object provider state, an enum with one variant per provider (what
//! the core stores: [`AnyContext`], [`AnyCq`], ...), and methods that match
//! on it and call the provider's [`Provider`] function directly. Adding a
//! provider is one line in the list at the bottom.

// In a build with one provider, the `_` arms (another provider's state)
// match nothing.
#![cfg_attr(
    not(all(feature = "rxe", feature = "mlx5")),
    allow(unreachable_patterns)
)]

use std::{ops::RangeInclusive, sync::atomic::AtomicBool};

#[cfg(feature = "mlx5")]
use super::mlx5;
#[cfg(feature = "rxe")]
use super::rxe;
use super::{
    interface::{
        CqCreated, CqRequest, Domain, DriverData, GetContext, OpenRequest, Provider, QpCreated,
        QpLinks, QpRequest, QueryContext, RunWithIn, RunWithInOut, RunWithOut, SrqCreated,
        SrqRequest, SESSION_BATCH,
    },
    Device,
};
use crate::{
    error::{Error, ErrorKind, Result},
    sys::Errno,
    wc::WorkCompletion,
    wr::{PostError, PostErrorKind, RecvWr, SendWr},
    AhAttr, QpCap, QpState, QpType, SendOpsFlags,
};

/// The objects a new QP is attached to (see [`QpLinks`]).
pub(crate) struct AnyQpLinks<'a> {
    /// The send CQ's provider state.
    pub(crate) send_cq: &'a AnyCqShared,
    /// The receive CQ's provider state.
    pub(crate) recv_cq: &'a AnyCqShared,
    /// The SRQ's provider state.
    pub(crate) srq: Option<&'a AnySrqShared>,
}

/// The parent domain an object is created in (see [`Domain`]).
pub(crate) type AnyDomain<'a> = Domain<'a, AnyTd>;

/// A plan or data-path state reached a context of another provider: the
/// core never does this (every state comes from the context it is used with).
fn mismatch(op: &'static str) -> Error {
    Error::new(
        op,
        ErrorKind::InvalidArgument,
        "internal: provider state of one driver used with a context of another",
    )
}

/// Access to the variants of one provider, for provider-specific public
/// APIs (`uverbs::mlx5`) and for a provider reading its own state out of a
/// value the core passes on (an address handle in a UD work request).
#[cfg_attr(not(feature = "mlx5"), allow(dead_code))] // used by mlx5 only
pub(crate) trait Member: Provider {
    /// This provider's context state, if `ctx` is one of its contexts.
    fn context_of(ctx: &AnyContext) -> Option<&Self::Context>;
    /// This provider's AH data, if `ah` was created on one of its devices.
    fn ah_of(ah: &AnyAh) -> Option<&Self::Ah>;
    /// This provider's PD data, if `pd` was allocated on one of its devices.
    fn pd_of(pd: &AnyPd) -> Option<&Self::Pd>;
    /// This provider's CQ consumer side, if `cq` is one of its CQs.
    fn cq_of(cq: &AnyCq) -> Option<&Self::Cq>;
    /// This provider's QP state, if `qp` is one of its QPs.
    fn qp_shared_of(qp: &AnyQpShared) -> Option<&Self::QpShared>;
    /// This provider's SRQ producer side, if `srq` is one of its SRQs.
    fn srq_of(srq: &AnySrq) -> Option<&Self::Srq>;
    /// This provider's view of a send session, if `s` is one of its QPs'
    /// (mlx5's raw WQEs, written into the session as the C library's
    /// `mlx5dv_wr_raw_wqe` asks).
    fn send_session_of<'a, 'q>(
        s: &'a mut AnySendSession<'q>,
    ) -> Option<&'a mut Self::SendSession<'q>>;
}

macro_rules! providers {
    ($($v:ident => $p:ty),+ $(,)?) => {
        /// The provider chosen for a device before its context exists.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum ProviderKind { $($v),+ }

        impl ProviderKind {
            /// The provider for a driver id, or an error naming the driver.
            pub(crate) fn for_driver(driver_id: Option<u32>, device: &str) -> Result<Self> {
                $(if driver_id == Some(<$p as Provider>::DRIVER_ID) {
                    return Ok(ProviderKind::$v);
                })+
                Err(super::unsupported_driver(driver_id, device))
            }

            /// The provider that recognises a device seen only through sysfs.
            pub(crate) fn from_sysfs(name: &str, has_parent: bool) -> Option<Self> {
                $(if <$p as Provider>::claims_sysfs_device(name, has_parent) {
                    return Some(ProviderKind::$v);
                })+
                None
            }

            /// The `RDMA_DRIVER_*` id of the provider's kernel driver.
            pub(crate) fn driver_id(self) -> u32 {
                match self { $(ProviderKind::$v => <$p as Provider>::DRIVER_ID),+ }
            }

            /// The providers and their driver ids, for messages.
            pub(crate) fn supported() -> String {
                [$(format!("{} ({})", <$p as Provider>::NAME, <$p as Provider>::DRIVER_ID)),+]
                    .join(", ")
            }

            /// The provider's name.
            pub(crate) fn name(self) -> &'static str {
                match self { $(ProviderKind::$v => <$p as Provider>::NAME),+ }
            }

            /// The driver ABI versions the provider speaks.
            pub(crate) fn abi_versions(self) -> RangeInclusive<u32> {
                match self { $(ProviderKind::$v => <$p as Provider>::ABI_VERSIONS),+ }
            }

            /// Sets up the state of an imported context.
            pub(crate) fn import(
                self,
                dev: Device<'_>,
                query: &mut QueryContext<'_>,
            ) -> Result<AnyContext> {
                match self {
                    $(ProviderKind::$v => Ok(AnyContext::$v(<$p>::import(dev, query)?))),+
                }
            }

            /// Opens the provider's context state.
            pub(crate) fn open(
                self,
                dev: Device<'_>,
                get_context: &mut GetContext<'_>,
                request: &OpenRequest,
            ) -> Result<AnyContext> {
                match self {
                    $(ProviderKind::$v => {
                        Ok(AnyContext::$v(<$p>::open(dev, get_context, request)?))
                    }),+
                }
            }
        }

        providers!(@enum AnyContext, Context, "Per-context provider state." $(, $v => $p)+);
        providers!(@enum AnyPd, Pd, "Per-PD driver data." $(, $v => $p)+);
        providers!(@enum AnyAh, Ah, "Per-AH driver data." $(, $v => $p)+);
        providers!(@enum AnyTd, Td, "A thread domain's provider state." $(, $v => $p)+);
        providers!(@enum AnyCqPlan, CqPlan, "A CQ create in progress." $(, $v => $p)+);
        providers!(@enum AnyCqShared, CqShared, "CQ state kept with the kernel CQ." $(, $v => $p)+);
        providers!(@enum AnyCq, Cq, "A CQ's consumer side." $(, $v => $p)+);
        providers!(@enum AnyQpPlan, QpPlan, "A QP create in progress." $(, $v => $p)+);
        providers!(@enum AnyQpShared, QpShared, "QP state kept with the kernel QP." $(, $v => $p)+);
        providers!(@enum AnyQp, Qp, "A QP's send and receive queues." $(, $v => $p)+);
        providers!(@enum AnyRq, Rq, "A QP's receive queue, split off." $(, $v => $p)+);
        providers!(@enum AnySrqPlan, SrqPlan, "An SRQ create in progress." $(, $v => $p)+);
        providers!(@enum AnySrqShared, SrqShared, "SRQ state kept with the kernel SRQ." $(, $v => $p)+);
        providers!(@enum AnySrq, Srq, "An SRQ's producer side." $(, $v => $p)+);
        providers!(@driver_data AnyCqPlan $(, $v)+);
        providers!(@driver_data AnyQpPlan $(, $v)+);
        providers!(@driver_data AnySrqPlan $(, $v)+);

        $(impl Member for $p {
            #[allow(unreachable_patterns)]
            fn context_of(ctx: &AnyContext) -> Option<&Self::Context> {
                match ctx { AnyContext::$v(c) => Some(c), _ => None }
            }
            #[allow(unreachable_patterns)]
            fn ah_of(ah: &AnyAh) -> Option<&Self::Ah> {
                match ah { AnyAh::$v(a) => Some(a), _ => None }
            }
            #[allow(unreachable_patterns)]
            fn pd_of(pd: &AnyPd) -> Option<&Self::Pd> {
                match pd { AnyPd::$v(p) => Some(p), _ => None }
            }
            #[allow(unreachable_patterns)]
            fn cq_of(cq: &AnyCq) -> Option<&Self::Cq> {
                match cq { AnyCq::$v(c) => Some(c), _ => None }
            }
            #[allow(unreachable_patterns)]
            fn qp_shared_of(qp: &AnyQpShared) -> Option<&Self::QpShared> {
                match qp { AnyQpShared::$v(q) => Some(q), _ => None }
            }
            #[allow(unreachable_patterns)]
            fn srq_of(srq: &AnySrq) -> Option<&Self::Srq> {
                match srq { AnySrq::$v(s) => Some(s), _ => None }
            }
            #[allow(unreachable_patterns)]
            fn send_session_of<'a, 'q>(
                s: &'a mut AnySendSession<'q>,
            ) -> Option<&'a mut Self::SendSession<'q>> {
                match s { AnySendSession::$v(s) => Some(s), _ => None }
            }
        })+

        impl AnyContext {
            /// The provider's name.
            pub(crate) fn name(&self) -> &'static str {
                match self { $(AnyContext::$v(_) => <$p as Provider>::NAME),+ }
            }

            /// The send operations the provider posts on a QP of `qp_type`.
            pub(crate) fn send_ops(&self, qp_type: QpType) -> Option<SendOpsFlags> {
                match self { $(AnyContext::$v(_) => <$p as Provider>::send_ops(qp_type)),+ }
            }

            /// How the provider's rdma-core counterpart numbers `ibv_wc.wc_flags`.
            pub(crate) fn wc_flags_numbering(&self) -> crate::WcFlagsNumbering {
                match self { $(AnyContext::$v(_) => <$p as Provider>::WC_FLAGS_NUMBERING),+ }
            }

            /// The firmware version as the provider formats it.
            pub(crate) fn fw_ver(&self, raw: u64) -> String {
                match self { $(AnyContext::$v(_) => <$p>::fw_ver(raw)),+ }
            }

            /// The device's free-running clock, when the provider reads it.
            pub(crate) fn read_raw_clock(&self) -> Option<u64> {
                match self { $(AnyContext::$v(c) => <$p>::read_raw_clock(c)),+ }
            }

            /// The driver data of an imported PD.
            pub(crate) fn import_pd(&self, dev: Device<'_>, handle: u32) -> Result<AnyPd> {
                match self {
                    $(AnyContext::$v(c) => Ok(AnyPd::$v(<$p>::import_pd(c, dev, handle)?))),+
                }
            }

            /// Whether the provider imports memory regions.
            pub(crate) fn imports_mrs(&self) -> bool {
                match self { $(AnyContext::$v(_) => <$p as Provider>::IMPORTS_MRS),+ }
            }

            /// `ALLOC_PD`'s driver data; `run` executes the command.
            pub(crate) fn alloc_pd(&self, run: &mut RunWithOut<'_>) -> Result<AnyPd, Errno> {
                match self { $(AnyContext::$v(c) => Ok(AnyPd::$v(<$p>::alloc_pd(c, run)?))),+ }
            }

            /// Whether the provider has parent domains.
            pub(crate) fn check_parent_domain(&self) -> Result<()> {
                match self { $(AnyContext::$v(c) => <$p>::check_parent_domain(c)),+ }
            }

            /// A thread domain's provider state.
            pub(crate) fn alloc_td(&self, dev: Device<'_>) -> Result<AnyTd> {
                match self { $(AnyContext::$v(c) => Ok(AnyTd::$v(<$p>::alloc_td(c, dev)?))),+ }
            }

            /// `CREATE_AH`'s driver data; `run` executes the command.
            pub(crate) fn create_ah(
                &self,
                attr: &AhAttr,
                run: &mut RunWithOut<'_>,
            ) -> Result<AnyAh, Errno> {
                match self {
                    $(AnyContext::$v(c) => Ok(AnyAh::$v(<$p>::create_ah(c, attr, run)?))),+
                }
            }

            /// Step 1 of a CQ create.
            #[allow(unreachable_patterns)]
            pub(crate) fn plan_cq(
                &self,
                dev: Device<'_>,
                req: &CqRequest,
                domain: AnyDomain<'_>,
            ) -> Result<(AnyCqPlan, AnyCqShared)> {
                match self {
                    $(AnyContext::$v(c) => {
                        let td = match domain.td {
                            None => None,
                            Some(AnyTd::$v(td)) => Some(td),
                            Some(_) => return Err(mismatch("ibv_create_cq")),
                        };
                        let domain = Domain { allocator: domain.allocator, td };
                        let (plan, shared) = <$p>::plan_cq(c, dev, req, domain)?;
                        Ok((AnyCqPlan::$v(plan), AnyCqShared::$v(shared)))
                    })+
                }
            }

            /// Step 3 of a CQ create.
            #[allow(unreachable_patterns)]
            pub(crate) fn finish_cq(
                &self,
                dev: Device<'_>,
                plan: AnyCqPlan,
                shared: &AnyCqShared,
                created: &CqCreated,
            ) -> Result<AnyCq> {
                match (self, plan, shared) {
                    $((AnyContext::$v(c), AnyCqPlan::$v(p), AnyCqShared::$v(s)) => {
                        Ok(AnyCq::$v(<$p>::finish_cq(c, dev, p, s, created)?))
                    })+
                    _ => Err(mismatch("ibv_create_cq")),
                }
            }

            /// Step 1 of a QP create.
            #[allow(unreachable_patterns)]
            pub(crate) fn plan_qp(
                &self,
                dev: Device<'_>,
                pd: &AnyPd,
                req: &QpRequest,
                domain: AnyDomain<'_>,
            ) -> Result<(AnyQpPlan, AnyQpShared)> {
                match (self, pd) {
                    $((AnyContext::$v(c), AnyPd::$v(pd)) => {
                        let td = match domain.td {
                            None => None,
                            Some(AnyTd::$v(td)) => Some(td),
                            Some(_) => return Err(mismatch("ibv_create_qp")),
                        };
                        let domain = Domain { allocator: domain.allocator, td };
                        let (plan, shared) = <$p>::plan_qp(c, dev, pd, req, domain)?;
                        Ok((AnyQpPlan::$v(plan), AnyQpShared::$v(shared)))
                    })+
                    _ => Err(mismatch("ibv_create_qp")),
                }
            }

            /// Step 3 of a QP create.
            #[allow(unreachable_patterns)]
            pub(crate) fn finish_qp(
                &self,
                dev: Device<'_>,
                plan: AnyQpPlan,
                shared: &AnyQpShared,
                req: &QpRequest,
                created: &QpCreated,
                links: AnyQpLinks<'_>,
            ) -> Result<AnyQp> {
                match (self, plan, shared, links.send_cq, links.recv_cq) {
                    $((
                        AnyContext::$v(c),
                        AnyQpPlan::$v(p),
                        AnyQpShared::$v(s),
                        AnyCqShared::$v(send_cq),
                        AnyCqShared::$v(recv_cq),
                    ) => {
                        let srq = match links.srq {
                            None => None,
                            Some(AnySrqShared::$v(srq)) => Some(srq),
                            Some(_) => return Err(mismatch("ibv_create_qp")),
                        };
                        let links = QpLinks::<$p> { send_cq, recv_cq, srq };
                        Ok(AnyQp::$v(<$p>::finish_qp(c, dev, p, s, req, created, links)?))
                    })+
                    _ => Err(mismatch("ibv_create_qp")),
                }
            }

            /// Step 1 of an SRQ create.
            #[allow(unreachable_patterns)]
            pub(crate) fn plan_srq(
                &self,
                dev: Device<'_>,
                pd: &AnyPd,
                req: &SrqRequest,
                domain: AnyDomain<'_>,
            ) -> Result<(AnySrqPlan, AnySrqShared)> {
                match (self, pd) {
                    $((AnyContext::$v(c), AnyPd::$v(pd)) => {
                        let td = match domain.td {
                            None => None,
                            Some(AnyTd::$v(td)) => Some(td),
                            Some(_) => return Err(mismatch("ibv_create_srq")),
                        };
                        let domain = Domain { allocator: domain.allocator, td };
                        let (plan, shared) = <$p>::plan_srq(c, dev, pd, req, domain)?;
                        Ok((AnySrqPlan::$v(plan), AnySrqShared::$v(shared)))
                    })+
                    _ => Err(mismatch("ibv_create_srq")),
                }
            }

            /// Step 3 of an SRQ create: the data path and the SRQ number.
            #[allow(unreachable_patterns)]
            pub(crate) fn finish_srq(
                &self,
                dev: Device<'_>,
                plan: AnySrqPlan,
                shared: &AnySrqShared,
                created: &SrqCreated,
            ) -> Result<(AnySrq, u32)> {
                match (self, plan, shared) {
                    $((AnyContext::$v(c), AnySrqPlan::$v(p), AnySrqShared::$v(s)) => {
                        let (srq, num) = <$p>::finish_srq(c, dev, p, s, created)?;
                        Ok((AnySrq::$v(srq), num))
                    })+
                    _ => Err(mismatch("ibv_create_srq")),
                }
            }
        }

        impl AnyCq {
            /// Polls completions (no syscall, no allocation).
            #[inline]
            pub(crate) fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
                match self { $(AnyCq::$v(cq) => <$p>::poll_cq(cq, out)),+ }
            }

            /// One batch of a polling session, and the timestamps with
            /// `stamps` (no syscall, no allocation).
            #[inline]
            pub(crate) fn poll_batch(
                &mut self,
                out: &mut [WorkCompletion; SESSION_BATCH],
                stamps: Option<&mut [u64; SESSION_BATCH]>,
            ) -> usize {
                match self { $(AnyCq::$v(cq) => <$p>::poll_cq_batch(cq, out, stamps)),+ }
            }

            /// Takes the QPs destroyed or reset whose completions a polling
            /// session must drop ([`AnyCqShared::clean_flag`]), reporting
            /// each QP number to `stale`.
            #[cold]
            pub(crate) fn take_cleans(&mut self, stale: &mut dyn FnMut(u32)) {
                match self { $(AnyCq::$v(cq) => <$p>::take_cq_cleans(cq, stale)),+ }
            }

            /// Refreshes the CQ's wall-clock conversion (no syscall, no
            /// allocation).
            #[inline]
            pub(crate) fn refresh_clock(&mut self) {
                match self { $(AnyCq::$v(cq) => <$p>::refresh_cq_clock(cq)),+ }
            }

            /// Device ticks to real-time nanoseconds, if the provider can.
            #[inline]
            pub(crate) fn ts_to_ns(&self, ticks: u64) -> Option<u64> {
                match self { $(AnyCq::$v(cq) => <$p>::cq_ts_to_ns(cq, ticks)),+ }
            }

            /// Arms the CQ.
            #[allow(unreachable_patterns)]
            pub(crate) fn req_notify(
                &self,
                shared: &AnyCqShared,
                dev: Device<'_>,
                handle: u32,
                solicited_only: bool,
            ) -> Result<(), Errno> {
                match (self, shared) {
                    $((AnyCq::$v(cq), AnyCqShared::$v(s)) => {
                        <$p>::req_notify_cq(cq, s, dev, handle, solicited_only)
                    })+
                    _ => Err(Errno::EINVAL),
                }
            }

            /// Resizes the CQ; `run` executes the `RESIZE_CQ` command.
            #[allow(unreachable_patterns)]
            pub(crate) fn resize(
                &mut self,
                shared: &AnyCqShared,
                dev: Device<'_>,
                run: &mut RunWithInOut<'_>,
            ) -> Result<()> {
                match (self, shared) {
                    $((AnyCq::$v(cq), AnyCqShared::$v(s)) => <$p>::resize_cq(cq, s, dev, run),)+
                    _ => Err(mismatch("ibv_resize_cq")),
                }
            }
        }

        impl AnyCqShared {
            /// The flag set while QPs destroyed or reset have completions a
            /// polling session must drop ([`Provider::cq_clean_flag`]); one
            /// never set for a provider without.
            pub(crate) fn clean_flag(&self) -> std::sync::Arc<AtomicBool> {
                let flag = match self { $(AnyCqShared::$v(s) => <$p>::cq_clean_flag(s)),+ };
                flag.unwrap_or_default()
            }

            /// The step for every completion event read.
            pub(crate) fn completion_hook(&self) -> Option<super::CompletionHook> {
                match self { $(AnyCqShared::$v(s) => <$p>::completion_hook(s)),+ }
            }
        }

        impl AnyQpShared {
            /// The hook run after a modify set the QP's state.
            pub(crate) fn on_state(&self, state: QpState) {
                match self { $(AnyQpShared::$v(s) => <$p>::on_qp_state(s, state)),+ }
            }

            /// The hook run after the kernel destroyed the QP.
            pub(crate) fn on_destroyed(&self) {
                match self { $(AnyQpShared::$v(s) => <$p>::on_qp_destroyed(s)),+ }
            }

            /// The capacities the created QP reports.
            pub(crate) fn granted_cap(&self, kernel: &QpCap) -> QpCap {
                match self { $(AnyQpShared::$v(s) => <$p>::qp_cap(s, kernel)),+ }
            }
        }

        impl AnyQp {
            /// Posts send WQEs and rings the doorbell once.
            #[inline]
            pub(crate) fn post_send(
                &mut self,
                dev: Device<'_>,
                wrs: &[SendWr<'_>],
            ) -> Result<(), PostError> {
                match self { $(AnyQp::$v(qp) => <$p>::post_send(qp, dev, wrs)),+ }
            }

            /// Restarts the poster's side of the queues after a reset.
            #[inline]
            pub(crate) fn restart(&mut self) {
                match self { $(AnyQp::$v(qp) => <$p>::restart_queues(qp)),+ }
            }

            /// Opens the send session and views it (`ibv_wr_start`).
            #[inline(always)]
            pub(crate) fn start_send<'q>(&'q mut self, dev: Device<'q>) -> AnySendSession<'q> {
                match self {
                    $(AnyQp::$v(qp) => AnySendSession::$v(<$p>::start_send(qp, dev))),+
                }
            }

            /// Opens the send session, its cursor in the queue.
            #[inline]
            pub(crate) fn begin_send(&mut self) {
                match self { $(AnyQp::$v(qp) => <$p>::begin_send(qp)),+ }
            }

            /// One request into the open send session, called on its own.
            #[inline(always)]
            pub(crate) fn push_send_open(
                &mut self,
                dev: Device<'_>,
                wr: &SendWr<'_>,
            ) -> Result<(), PostErrorKind> {
                match self { $(AnyQp::$v(qp) => <$p>::push_send_open(qp, dev, wr)),+ }
            }

            /// The open send session as a view.
            #[inline(always)]
            pub(crate) fn resume_send<'q>(&'q mut self, dev: Device<'q>) -> AnySendSession<'q> {
                match self {
                    $(AnyQp::$v(qp) => AnySendSession::$v(<$p>::resume_send(qp, dev))),+
                }
            }

            /// Posts receive WQEs.
            #[inline]
            pub(crate) fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
                match self { $(AnyQp::$v(qp) => <$p>::post_recv(qp, wrs)),+ }
            }

            /// Takes the QP's own receive queue out.
            pub(crate) fn take_rq(&mut self) -> Option<AnyRq> {
                match self { $(AnyQp::$v(qp) => <$p>::take_rq(qp).map(AnyRq::$v)),+ }
            }

            /// Puts a receive queue taken with [`AnyQp::take_rq`] back
            /// (the queue back if it is another provider's).
            #[allow(unreachable_patterns)]
            pub(crate) fn put_rq(&mut self, rq: AnyRq) -> Result<(), AnyRq> {
                match (self, rq) {
                    $((AnyQp::$v(qp), AnyRq::$v(rq)) => {
                        <$p>::put_rq(qp, rq);
                        Ok(())
                    })+
                    (_, rq) => Err(rq),
                }
            }
        }

        impl AnyRq {
            /// Posts receive WQEs.
            #[inline]
            pub(crate) fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
                match self { $(AnyRq::$v(rq) => <$p>::post_rq(rq, wrs)),+ }
            }

            /// Restarts the queue after a reset.
            pub(crate) fn restart(&mut self) {
                match self { $(AnyRq::$v(rq) => <$p>::restart_rq(rq)),+ }
            }
        }

        /// A view of a QP's send session, of the QP's provider.
        #[derive(Debug)]
        pub(crate) enum AnySendSession<'q> { $($v(<$p as Provider>::SendSession<'q>)),+ }

        impl AnySendSession<'_> {
            /// Writes one send WQE at the session's cursor.
            ///
            /// Each arm passes on a copy of the request made in that arm.
            /// Were an arm to pass the caller's `wr` to a call that is not
            /// inlined (rxe's push), its address would escape, and the
            /// caller would store the whole request to memory before the
            /// match, for the arms that read it from registers too (mlx5's
            /// inlined push: 12 stores per request). An inlined arm's copy
            /// costs nothing; an out-of-line arm stores what it stored
            /// before (`benches/callgrind.sh`: rxe's `batch_write_sge`
            /// unchanged).
            #[inline(always)]
            pub(crate) fn push(&mut self, wr: &SendWr<'_>) -> Result<(), PostErrorKind> {
                match self {
                    $(AnySendSession::$v(s) => {
                        let wr = *wr;
                        <$p>::push_send(s, &wr)
                    }),+
                }
            }

            /// Hands the session's WQEs over and rings the doorbell once.
            #[inline(always)]
            pub(crate) fn complete(&mut self, pushed: usize) -> Result<(), PostError> {
                match self { $(AnySendSession::$v(s) => <$p>::complete_send(s, pushed)),+ }
            }

            /// Drops the session's WQEs.
            #[inline]
            pub(crate) fn abort(&mut self) {
                match self { $(AnySendSession::$v(s) => <$p>::abort_send(s)),+ }
            }

            /// Puts the view's cursor back into the queue (the session
            /// stays open).
            #[inline(always)]
            #[cfg_attr(not(feature = "mlx5"), allow(dead_code))] // used by mlx5 only
            pub(crate) fn suspend(self) {
                match self { $(AnySendSession::$v(s) => <$p>::suspend_send(s)),+ }
            }
        }

        impl AnySrq {
            /// Posts receive WQEs.
            #[inline]
            pub(crate) fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
                match self { $(AnySrq::$v(srq) => <$p>::post_srq_recv(srq, wrs)),+ }
            }

            /// `MODIFY_SRQ`'s driver data; `run` executes the command.
            pub(crate) fn modify(&self, run: &mut RunWithIn<'_>) -> Result<(), Errno> {
                match self { $(AnySrq::$v(srq) => <$p>::modify_srq(srq, run)),+ }
            }
        }
    };

    (@enum $name:ident, $assoc:ident, $doc:literal $(, $v:ident => $p:ty)+) => {
        #[doc = $doc]
        #[derive(Debug)]
        pub(crate) enum $name { $($v(<$p as Provider>::$assoc)),+ }
    };

    (@driver_data $name:ident $(, $v:ident)+) => {
        impl DriverData for $name {
            fn driver_bufs(&mut self) -> (&[u8], &mut [u8]) {
                match self { $($name::$v(p) => p.driver_bufs()),+ }
            }
        }
    };
}

// The providers this build has (features `rxe` and `mlx5`; src/lib.rs
// refuses a build with neither). One invocation per combination keeps the
// macro free of per-arm `cfg`s; a third provider would thread the `cfg`
// through the macro's arms instead.
#[cfg(all(feature = "rxe", feature = "mlx5"))]
providers! {
    Rxe => rxe::Rxe,
    Mlx5 => mlx5::Mlx5,
}
#[cfg(all(feature = "rxe", not(feature = "mlx5")))]
providers! {
    Rxe => rxe::Rxe,
}
#[cfg(all(feature = "mlx5", not(feature = "rxe")))]
providers! {
    Mlx5 => mlx5::Mlx5,
}
