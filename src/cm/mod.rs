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
//! - Multicast: [`CmId::join_multicast`] (full or send-only member),
//!   [`CmEvent::multicast_group`], [`CmId::leave_multicast`].
//!
//! librdmacm's convenience layer, which its C API (`rdma_cma.h`) needs:
//!
//! - [`getaddrinfo`]: `rdma_getaddrinfo` without ibacm ([`AddrHints`],
//!   [`RdmaAddrInfo`], [`AiFlags`]; lookup failures carry the `EAI_*` code,
//!   [`crate::Error::gai_code`]).
//! - Synchronous ids ([`CmId::create_sync`], `rdma_create_id` with no
//!   channel): their calls wait for the answering event and fail as
//!   librdmacm's do; the event is kept ([`CmId::sync_event`], C's
//!   `id->event`); [`CmId::get_request`] takes a listener's connections.
//! - [`create_ep`]: `rdma_create_ep`, with the QP and the CQs and
//!   completion channels librdmacm makes when none are named
//!   ([`CmId::create_ep_qp`], [`EpQp`]), handed back owned.
//! - Event processing for ids with a QP ([`CmEvent::process_qp`]:
//!   CONNECT_RESPONSE completed into ESTABLISHED, REJECTED moves the QP to
//!   ERR, a multicast join attaches it), the read/atomic resource
//!   negotiation ([`RDMA_MAX_RESP_RES`], [`ConnParam::max_resources`]) and
//!   ECE ([`Ece`], [`CmId::set_local_ece`], [`CmId::remote_ece`],
//!   [`CmId::reject_ece`]).
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
//!
//! The same with a synchronous endpoint, as `rdma_client` does:
//!
//! ```no_run
//! # fn main() -> uverbs::Result<()> {
//! use uverbs::{cm::{create_ep, getaddrinfo, ConnParam, EpQpInit}, QpCap};
//! let info = getaddrinfo(Some("192.0.2.1"), Some("7471"), None)?;
//! let ep = create_ep(&info[0], None, Some(&EpQpInit::new(QpCap::new(16, 16, 1, 1))))?;
//! let qp = ep.qp.as_ref().expect("QP attributes were given");
//! ep.id.connect_qp(&qp.qp, &ConnParam::max_resources())?; // returns ESTABLISHED
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
mod multicast;
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
