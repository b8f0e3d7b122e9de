//! rdma_cm: connection management over the kernel's ucma `write()` ABI
//! (`/dev/infiniband/rdma_cm`), what librdmacm does.
//!
//! - [`EventChannel`]: the open device (`rdma_create_event_channel`); events
//!   are read with [`EventChannel::get_event`] (blocking),
//!   [`EventChannel::try_get_event`] (non-blocking) or
//!   [`EventChannel::get_event_timeout`]; it is `AsFd` for event loops.
//! - [`CmId`]: an id (`rdma_create_id`) with bind, resolve, listen, connect,
//!   accept, reject, disconnect, notify, query, migrate, options
//!   ([`CmOption`]) and multicast join/leave; destroy waits until every
//!   event reported for the id was acknowledged.
//! - [`CmEvent`]: one event, acknowledged on drop; a CONNECT_REQUEST carries
//!   the new id of the connection ([`CmEvent::take_new_id`]).
//! - QPs: [`CmId::context`] opens the id's verbs device (matched by node
//!   GUID); [`CmId::create_qp`], [`CmId::complete_connect`],
//!   [`CmId::accept_qp`] and [`CmId::disconnect_qp`] move a QP through its
//!   states with the attributes the kernel's CM gives.
//! - UD: [`UdParam`] from ESTABLISHED (active) events.
//!
//! ```no_run
//! # fn main() -> uverbs::Result<()> {
//! use std::time::Duration;
//! use uverbs::cm::{CmEventKind, EventChannel, PortSpace};
//! let ch = EventChannel::open()?;
//! let id = ch.create_id(PortSpace::Tcp)?;
//! id.resolve_addr(None, "192.0.2.1:7174".parse().unwrap(), Duration::from_secs(2))?;
//! let ev = ch.get_event()?;
//! assert_eq!(ev.kind(), CmEventKind::AddrResolved);
//! drop(ev);
//! id.destroy()?;
//! # Ok(())
//! # }
//! ```

mod addr;
mod channel;
mod ece;
mod ep;
mod event;
mod getaddrinfo;
mod id;
mod id_channel;
mod qp;
mod resources;
mod sync;
mod ud;

pub use channel::{EventChannel, RDMA_CM_PATH};
pub use ece::{Ece, REJ_VENDOR_OPTION_NOT_SUPPORTED};
pub use ep::{create_ep, create_ep_with, CmEndpoint, EpQp, EpQpInit, EP_RESOLVE_TIMEOUT};
pub use event::{CmEvent, CmEventKind, ConnParam, UdParam};
pub use getaddrinfo::{getaddrinfo, AddrFamily, AddrHints, AiFlags, RdmaAddrInfo, EAI_ADDRFAMILY};
pub use id::{AddrInfo, CmId, CmOption, PathRecord, PortSpace, RouteInfo};
pub use resources::{RDMA_MAX_INIT_DEPTH, RDMA_MAX_RESP_RES};
pub use sync::SyncEvent;
pub use ud::{UdPeer, RDMA_UDP_QKEY};
