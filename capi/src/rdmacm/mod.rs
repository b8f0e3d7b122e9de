//! `librdmacm.so.1`'s functions: rdma-core 44's `<rdma/rdma_cma.h>` over
//! `uverbs::cm`.
//!
//! They live in this library, next to the verbs objects they hand out and
//! take (`id->verbs` is an `ibv_context` of ours, `id->qp` an `ibv_qp` of
//! ours, `id->pd`, `send_cq`, `recv_cq` too), and are exported privately as
//! `uverbs_rdma_*` (and `uverbs_r*` for rsockets); `librdmacm.so.1`
//! (`capi/rdmacm/`) is a library of stubs that give them librdmacm's names
//! and version nodes (`RDMACM_1.0` … `RDMACM_1.3`). The static archive
//! defines the plain names too (`capi/build.rs`), so a static program links
//! one archive for both libraries.
//!
//! Each function translates between rdma_cma.h's structs and `uverbs::cm`
//! and reports failure as librdmacm does: -1 with `errno` (NULL with
//! `errno` for the constructors). The CM behaviour is `uverbs::cm`'s; this
//! layer keeps what librdmacm keeps in its C objects (the id's fields,
//! each event's memory until `rdma_ack_cm_event`) and calls this
//! library's own verbs entry points where librdmacm calls libibverbs.
//!
//! - `channel.rs`: event channels; `event.rs`: getting, translating and
//!   acknowledging events; `id.rs`: ids and their commands; `conn.rs`:
//!   connecting, accepting, rejecting, disconnecting them; `qp.rs`: QPs
//!   and SRQs for ids; `verbs.rs`: the one `ibv_context` per device that
//!   every `id->verbs` is; `multicast.rs`, `addr.rs` (sockaddr
//!   conversions, ports), `rsocket.rs` (not supported).

pub(crate) mod addr;
pub(crate) mod addrinfo;
pub(crate) mod channel;
pub(crate) mod conn;
pub(crate) mod ep;
pub(crate) mod event;
pub(crate) mod id;
pub(crate) mod multicast;
pub(crate) mod qp;
pub(crate) mod rsocket;
pub(crate) mod verbs;

#[cfg(test)]
mod tests;

use core::ffi::c_int;

use uverbs::sys::Errno;

use crate::errno;

/// A librdmacm failure: -1 with `errno`.
pub(crate) fn fail(e: Errno) -> c_int {
    errno::minus_one(e)
}

/// 0, or -1 with `errno` set from a uverbs error.
pub(crate) fn ret(r: Result<(), Errno>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}

/// The errno of a uverbs error.
pub(crate) fn of(e: &uverbs::Error) -> Errno {
    errno::of(e)
}

/// `enum rdma_port_space` values.
pub(crate) const RDMA_PS_IPOIB: c_int = 0x0002;
pub(crate) const RDMA_PS_TCP: c_int = 0x0106;
pub(crate) const RDMA_PS_UDP: c_int = 0x0111;
pub(crate) const RDMA_PS_IB: c_int = 0x013F;

/// `enum ibv_qp_type` values the tests name.
#[cfg(test)]
pub(crate) const IBV_QPT_RC: c_int = 2;
#[cfg(test)]
pub(crate) const IBV_QPT_UD: c_int = 4;
