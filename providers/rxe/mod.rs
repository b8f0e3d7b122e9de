//! The soft-RoCE (`rdma_rxe`) provider.
//!
//! rxe needs no driver data to open a context (`rxe_alloc_ucontext` is
//! trivial, `drivers/infiniband/sw/rxe/rxe_verbs.c`); its queues are rings
//! the kernel allocates and userspace maps (`include/uapi/rdma/rdma_user_rxe.h`).

/// Driver ABI versions rdma-core's rxe provider accepts (`providers/rxe/rxe.c`);
/// the kernel reports 2 (`RXE_UVERBS_ABI_VERSION`).
pub(crate) const ABI_VERSIONS: std::ops::RangeInclusive<u32> = 1..=2;

/// Per-context rxe state (none is needed yet).
#[derive(Debug, Default)]
pub(crate) struct RxeContext {}

mod cq;
mod doorbell;
mod queue;
mod recv;
mod send;
#[cfg(test)]
mod tests;

pub(crate) use cq::RxeCq;
pub(crate) use doorbell::Doorbell;
pub(crate) use recv::RxeRq;
pub(crate) use send::RxeSq;
