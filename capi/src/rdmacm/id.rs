//! CM ids: `rdma_create_id`, `rdma_destroy_id` and the id's commands
//! (`rdma_bind_addr`, `rdma_resolve_addr`, `rdma_resolve_route`,
//! `rdma_listen`, `rdma_set_option`, `rdma_migrate_id`), over
//! `uverbs::cm::CmId`; its connection calls are in `conn.rs`.
//!
//! The C id's fields are kept as librdmacm keeps them: `verbs` and
//! `port_num` once the id is on a device, `route` (addresses, GIDs, path
//! records) after bind, listen and the address/route events, `qp`, `pd`,
//! the CQs after `rdma_create_qp`. The kernel names an id's events by its
//! uverbs uid; [`lookup`] maps it back to the C id.

#![allow(unsafe_code)]

use core::{
    cell::UnsafeCell,
    ffi::{c_int, c_void},
    ptr::null_mut,
};
use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use uverbs::{
    cm::{CmId, CmOption, PortSpace},
    sys::Errno,
    QpType,
};

use super::{addr, channel::Channel, fail, multicast::Join, ret, verbs};
use crate::device::kernel;
use crate::{
    handle::Handle,
    layout::{
        device::ibv_gid,
        qp::ibv_qp_init_attr,
        rdmacm::{
            rdma_addr, rdma_cm_event, rdma_cm_id, rdma_event_channel, rdma_ib_addr, rdma_route,
        },
        unsupported::ibv_sa_path_rec,
    },
};

/// What librdmacm keeps beside the C id (`struct cma_id_private`).
#[derive(Debug, Default)]
pub(crate) struct State {
    /// The uverbs id; `None` only while a destroy is in progress.
    pub(crate) uv: Option<CmId>,
    /// Multicast groups joined.
    pub(crate) joins: Vec<Join>,
    /// `id->channel` is the id's own (a synchronous id's private channel,
    /// `ucma_create_id` with a NULL channel): freed with the id.
    pub(crate) own_channel: bool,
    /// A passive endpoint's QP attributes (`rdma_create_ep`): each id
    /// `rdma_get_request` returns gets a QP made from them.
    pub(crate) ep_qp: Option<ibv_qp_init_attr>,
}

/// A CM id: what `rdma_create_id` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Id {
    /// The C part (the program's pointer is its address); written by this
    /// library, read by the program as librdmacm's is.
    pub c: UnsafeCell<rdma_cm_id>,
    /// The route's path records (`c.route.path_rec` points here).
    paths: UnsafeCell<[ibv_sa_path_rec; 2]>,
    /// The Rust state.
    pub(crate) st: Mutex<State>,
}

// SAFETY: the C part holds pointers to this library's objects and the
// program's context value; this library writes it under `st`'s lock (or
// before handing the id out), as librdmacm writes its ids.
unsafe impl Send for Id {}
// SAFETY: as for Send.
unsafe impl Sync for Id {}

crate::handle!(Id: rdma_cm_id = c);

/// Every live id by its uverbs uid (the address of the `Id`).
static IDS: Mutex<Option<HashMap<u64, usize>>> = Mutex::new(None);

fn ids() -> MutexGuard<'static, Option<HashMap<u64, usize>>> {
    IDS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The C id whose uverbs uid is `uid`.
pub(crate) fn lookup(uid: u64) -> Option<&'static Id> {
    let p = *ids().as_ref()?.get(&uid)?;
    // SAFETY: registered by `Id::new` and removed before the id is freed;
    // ids are freed only by `rdma_destroy_id`, which waits for the events
    // (the only callers) that name them.
    Some(unsafe { &*(p as *const Id) })
}

/// The C value of a port space.
fn ps_c(ps: PortSpace) -> c_int {
    c_int::from(ps.raw())
}

/// The port space of `ps` (`rdma_create_id`'s argument) with the QP type
/// librdmacm gives it (`ucma_get_qp_type`'s counterpart: UD for UDP and
/// IPoIB, RC for TCP and IB).
fn ps_from_c(ps: c_int) -> Result<PortSpace, Errno> {
    match ps {
        super::RDMA_PS_TCP => Ok(PortSpace::Tcp),
        super::RDMA_PS_UDP => Ok(PortSpace::Udp),
        super::RDMA_PS_IPOIB => Ok(PortSpace::Ipoib),
        super::RDMA_PS_IB => Ok(PortSpace::Ib(QpType::Rc)),
        _ => Err(Errno::EINVAL),
    }
}

/// The C value of a QP type.
pub(crate) fn qpt_c(t: QpType) -> c_int {
    c_int::from(t.raw())
}

impl Id {
    /// Boxes a new C id for `uv` on `channel` (NULL: a synchronous id,
    /// whose `channel` is a C channel of its private one) with the
    /// program's `context`, registers it, and returns it.
    pub(crate) fn make(
        uv: CmId,
        channel: *mut rdma_event_channel,
        context: *mut c_void,
    ) -> *mut rdma_cm_id {
        let own_channel = channel.is_null();
        let channel = if own_channel {
            Channel::into_c_new(uv.event_channel())
        } else {
            channel
        };
        let uid = uv.uid();
        let ps = ps_c(uv.port_space());
        let qp_type = qpt_c(uv.qp_type());
        let c = rdma_cm_id {
            verbs: null_mut(),
            channel,
            context,
            qp: null_mut(),
            route: rdma_route {
                addr: rdma_addr {
                    src_addr: addr::to_storage(None),
                    dst_addr: addr::to_storage(None),
                    addr: rdma_ib_addr {
                        sgid: zero_gid(),
                        dgid: zero_gid(),
                        pkey: 0,
                    },
                },
                path_rec: null_mut(),
                num_paths: 0,
            },
            ps,
            port_num: 0,
            event: null_mut(),
            send_cq_channel: null_mut(),
            send_cq: null_mut(),
            recv_cq_channel: null_mut(),
            recv_cq: null_mut(),
            srq: null_mut(),
            pd: null_mut(),
            qp_type,
        };
        let b = Box::new(Id {
            c: UnsafeCell::new(c),
            paths: UnsafeCell::new([ibv_sa_path_rec::default(); 2]),
            st: Mutex::new(State {
                uv: Some(uv),
                own_channel,
                ..State::default()
            }),
        });
        let p = b.into_c();
        ids()
            .get_or_insert_with(HashMap::new)
            .insert(uid, p as usize);
        p
    }

    /// The program's pointer.
    pub(crate) fn as_c(&self) -> *mut rdma_cm_id {
        self.c.get()
    }

    /// The C part, read (a copy of the field the caller names).
    pub(crate) fn c(&self) -> *mut rdma_cm_id {
        self.c.get()
    }

    /// The state, locked.
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the uverbs id; `EINVAL` while it is being destroyed.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&CmId) -> uverbs::Result<R>) -> Result<R, Errno> {
        let st = self.state();
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        f(uv).map_err(|e| super::of(&e))
    }

    /// Runs a call `f` of the uverbs id that a synchronous id completes
    /// (it waits for the event that answers it), then makes `id->event`
    /// the event the id kept, as librdmacm's `ucma_complete` leaves it,
    /// whether the call succeeded or not.
    pub(crate) fn call(
        &self,
        f: impl FnOnce(&Id, &CmId) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let st = self.state();
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        let r = f(self, uv);
        if uv.is_sync() {
            self.set_event(
                uv.sync_event()
                    .map(|ev| super::event::from_sync(self.as_c(), &ev)),
            );
        }
        r
    }

    /// Replaces `id->event` (a synchronous id's kept event), freeing the
    /// previous one.
    pub(crate) fn set_event(&self, ev: Option<*mut rdma_cm_event>) {
        let c = self.c();
        // SAFETY: the id's field, written under its lock (or by the thread
        // that owns a new id); the previous event was made by `from_sync`
        // and is the id's alone.
        unsafe {
            let old = core::mem::replace(&mut (*c).event, ev.unwrap_or(null_mut()));
            if !old.is_null() {
                super::event::rdma_ack_cm_event(old);
            }
        }
    }

    /// The id's QP, or NULL.
    pub(crate) fn qp(&self) -> *mut crate::layout::qp::ibv_qp {
        // SAFETY: a plain read of a field this library writes.
        unsafe { (*self.c()).qp }
    }

    /// Queries the route and fills `route`, and on first finding the
    /// device `verbs` and `port_num` (librdmacm's `ucma_query_route`).
    pub(crate) fn fill_route(&self, uv: &CmId) -> Result<(), Errno> {
        let r = uv.query_route().map_err(|e| super::of(&e))?;
        let c = self.c();
        let paths = self.paths.get();
        // SAFETY: `c` and `paths` are this id's, written under the state
        // lock the caller holds (it passed the id's `uv`), as librdmacm
        // writes them from the thread processing the id's event.
        unsafe {
            let route = &raw mut (*c).route;
            (*route).addr.src_addr = addr::to_storage(r.src);
            (*route).addr.dst_addr = addr::to_storage(r.dst);
            match r.paths.first() {
                Some(p) => {
                    (*route).addr.addr.sgid = gid(p.sgid.0);
                    (*route).addr.addr.dgid = gid(p.dgid.0);
                    (*route).addr.addr.pkey = p.pkey.to_be();
                }
                None => {
                    (*route).addr.addr.sgid = zero_gid();
                    (*route).addr.addr.dgid = zero_gid();
                    (*route).addr.addr.pkey = 0;
                }
            }
            let n = r.paths.len().min(2);
            for (i, p) in r.paths.iter().take(n).enumerate() {
                (*paths)[i] = path_rec(p);
            }
            if n > 0 {
                (*route).path_rec = paths.cast();
                (*route).num_paths = n as c_int;
            }
            if (*c).verbs.is_null() && r.node_guid != 0 {
                let (ctx, pd) = verbs::of_id(uv)?;
                (*c).verbs = ctx;
                (*c).pd = pd;
                (*c).port_num = r.port_num;
            }
        }
        Ok(())
    }

    /// Frees the id (after its uverbs id is destroyed).
    ///
    /// # Safety
    /// `p` is a live id of this library whose uverbs id is gone; nothing
    /// uses it after.
    unsafe fn free_c(p: *mut rdma_cm_id, uid: u64) {
        if let Some(m) = ids().as_mut() {
            m.remove(&uid);
        }
        // SAFETY: the caller's contract.
        let id = unsafe { Id::from_c_owned(p) };
        id.set_event(None);
        if id.state().own_channel {
            // SAFETY: the id's own channel, made in `make`; the program
            // never destroys it (librdmacm's `ucma_free_id` does).
            unsafe { Channel::free((*id.c()).channel) };
        }
    }
}

fn zero_gid() -> ibv_gid {
    gid([0; 16])
}

fn gid(raw: [u8; 16]) -> ibv_gid {
    crate::qp::attr::c_gid(uverbs::Gid(raw))
}

/// A path record as librdmacm gives it (`ibv_copy_path_rec_from_kern`),
/// from what `uverbs::cm` reports of it.
fn path_rec(p: &uverbs::cm::PathRecord) -> ibv_sa_path_rec {
    ibv_sa_path_rec {
        dgid: p.dgid.0,
        sgid: p.sgid.0,
        hop_limit: p.hop_limit,
        traffic_class: p.traffic_class,
        reversible: 1,
        numb_path: 1,
        pkey: p.pkey.to_be(),
        sl: p.sl,
        mtu_selector: 2,
        mtu: p.mtu as u8,
        rate_selector: 2,
        rate: p.rate,
        packet_life_time_selector: 2,
        packet_life_time: p.packet_life_time,
        ..ibv_sa_path_rec::default()
    }
}

/// Creates an id on `channel` (NULL: a synchronous id) in port space `ps`.
///
/// # Safety
/// `channel` is NULL or a live channel of this library.
pub(crate) unsafe fn create_on(
    channel: *mut rdma_event_channel,
    context: *mut c_void,
    ps: c_int,
) -> Result<*mut rdma_cm_id, Errno> {
    // SAFETY: the caller's contract.
    unsafe { create_with_type(channel, context, ps, 0) }
}

/// [`create_on`] with the QP type of an `RDMA_PS_IB` id (`rdma_create_id2`;
/// 0: RC).
///
/// # Safety
/// As [`create_on`].
pub(crate) unsafe fn create_with_type(
    channel: *mut rdma_event_channel,
    context: *mut c_void,
    ps: c_int,
    qp_type: c_int,
) -> Result<*mut rdma_cm_id, Errno> {
    let ps = match ps_from_c(ps)? {
        PortSpace::Ib(_) if qp_type != 0 => PortSpace::Ib(
            u8::try_from(qp_type)
                .map(QpType::from_raw)
                .map_err(|_| Errno::EINVAL)?,
        ),
        ps => ps,
    };
    let uv = if channel.is_null() {
        CmId::create_sync_with(kernel(), ps)
    } else {
        // SAFETY: the caller's contract.
        unsafe { Channel::from_c(channel) }?.uv.create_id(ps)
    }
    .map_err(|e| super::of(&e))?;
    Ok(Id::make(uv, channel, context))
}

/// `rdma_create_id`: a new id on `channel` for `context` in port space
/// `ps`; 0 and `*id` set, or -1 and `errno`. With a NULL channel the id is
/// synchronous: its calls wait for the event that answers them, which
/// stays in `id->event` (`uverbs::cm::CmId::create_sync`).
///
/// # Safety
/// `channel` is NULL or a live channel; `id` a writable pointer.
#[export_name = "uverbs_rdma_create_id"]
pub unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: c_int,
) -> c_int {
    if id.is_null() {
        return fail(Errno::EINVAL);
    }
    // SAFETY: the caller's contract.
    match unsafe { create_on(channel, context, ps) } {
        Ok(p) => {
            // SAFETY: the caller's contract.
            unsafe { id.write(p) };
            0
        }
        Err(e) => fail(e),
    }
}

/// `rdma_destroy_id`: destroys the id once every event reported for it is
/// acknowledged (it waits for other threads' acknowledgements, as
/// librdmacm does; `EBUSY` if the calling thread holds one, where
/// librdmacm would wait forever). -1 and `errno` on failure, the id
/// unchanged. The program destroys the id's QP first. A synchronous id's
/// kept event and channel go with it.
///
/// # Safety
/// `id` is NULL or a live id of this library, not used after success.
#[export_name = "uverbs_rdma_destroy_id"]
pub unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    // SAFETY: the caller's contract.
    let i = match unsafe { Id::from_c(id) } {
        Ok(i) => i,
        Err(e) => return fail(e),
    };
    // Taken out of the lock: the destroy waits for events other threads
    // hold, whose processing may need the lock.
    let Some(uv) = i.state().uv.take() else {
        return fail(Errno::EINVAL);
    };
    let uid = uv.uid();
    if let Err(e) = uv.destroy() {
        let err = e.errno();
        i.state().uv = Some(e.into_inner());
        return fail(err);
    }
    // SAFETY: the id is gone; the program gives its pointer up.
    unsafe { Id::free_c(id, uid) };
    0
}

/// `rdma_bind_addr`: binds to a local address and fills the route (and
/// `verbs`, `pd` when the address is a device's).
///
/// # Safety
/// `id` is NULL or a live id; `addr` NULL or a socket address.
#[export_name = "uverbs_rdma_bind_addr"]
pub unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut c_void) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        // SAFETY: the caller's contract.
        let a = unsafe { addr::from_c(addr) }?;
        let st = i.state();
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        uv.bind(a).map_err(|e| super::of(&e))?;
        i.fill_route(uv)
    })())
}

/// `rdma_resolve_addr`: resolves `dst_addr` (from `src_addr`, or any
/// local address that reaches it) within `timeout_ms`; ADDR_RESOLVED or
/// ADDR_ERROR follows on the channel (a synchronous id waits for it and
/// fills its route). `dst_addr` is in the route at once.
///
/// # Safety
/// `id` is NULL or a live id; the addresses NULL or socket addresses.
#[export_name = "uverbs_rdma_resolve_addr"]
pub unsafe extern "C" fn rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src_addr: *mut c_void,
    dst_addr: *mut c_void,
    timeout_ms: c_int,
) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        // SAFETY: the caller's contract.
        let dst = unsafe { addr::from_c(dst_addr) }?;
        // SAFETY: the caller's contract.
        let src = unsafe { addr::opt_from_c(src_addr) }?;
        let timeout = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
        i.call(|i, uv| {
            // SAFETY: the id's field, written under its lock (`call` holds it).
            unsafe { (*i.c()).route.addr.dst_addr = addr::to_storage(Some(dst)) };
            uv.resolve_addr(src, dst, timeout)
                .map_err(|e| super::of(&e))?;
            if uv.is_sync() {
                i.fill_route(uv)?;
            }
            Ok(())
        })
    })())
}

/// `rdma_resolve_route`: ROUTE_RESOLVED or ROUTE_ERROR follows (a
/// synchronous id waits for it and fills its route).
///
/// # Safety
/// `id` is NULL or a live id.
#[export_name = "uverbs_rdma_resolve_route"]
pub unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
    let timeout = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        i.call(|i, uv| {
            uv.resolve_route(timeout).map_err(|e| super::of(&e))?;
            if uv.is_sync() {
                i.fill_route(uv)?;
            }
            Ok(())
        })
    })())
}

/// `rdma_listen`: listens (backlog 0: the kernel's default) and fills the
/// route, as librdmacm does.
///
/// # Safety
/// `id` is NULL or a live id.
#[export_name = "uverbs_rdma_listen"]
pub unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        let st = i.state();
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        uv.listen(u32::try_from(backlog).unwrap_or(0))
            .map_err(|e| super::of(&e))?;
        i.fill_route(uv)
    })())
}

/// `RDMA_OPTION_ID` / `RDMA_OPTION_IB`, and the options of each.
const RDMA_OPTION_ID: c_int = 0;
const RDMA_OPTION_ID_TOS: c_int = 0;
const RDMA_OPTION_ID_REUSEADDR: c_int = 1;
const RDMA_OPTION_ID_AFONLY: c_int = 2;
const RDMA_OPTION_ID_ACK_TIMEOUT: c_int = 3;

/// `rdma_set_option`: `RDMA_OPTION_ID_TOS` (a `uint8_t`),
/// `RDMA_OPTION_ID_REUSEADDR` and `RDMA_OPTION_ID_AFONLY` (an `int`),
/// `RDMA_OPTION_ID_ACK_TIMEOUT` (a `uint8_t`); `EINVAL` for a value of
/// another size. `RDMA_OPTION_IB_PATH` and unknown options fail with
/// `ENOSYS`, the kernel's answer to an option it does not know.
///
/// # Safety
/// `id` is NULL or a live id; `optval` readable for `optlen` bytes.
#[export_name = "uverbs_rdma_set_option"]
pub unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        if optval.is_null() {
            return Err(Errno::EINVAL);
        }
        let byte = || -> Result<u8, Errno> {
            if optlen != 1 {
                return Err(Errno::EINVAL);
            }
            // SAFETY: the caller's contract: one readable byte.
            Ok(unsafe { optval.cast::<u8>().read() })
        };
        let int = || -> Result<bool, Errno> {
            if optlen != size_of::<c_int>() {
                return Err(Errno::EINVAL);
            }
            // SAFETY: the caller's contract: a readable int.
            Ok(unsafe { optval.cast::<c_int>().read_unaligned() } != 0)
        };
        let opt = match (level, optname) {
            (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) => CmOption::Tos(byte()?),
            (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR) => CmOption::ReuseAddr(int()?),
            (RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY) => CmOption::AfOnly(int()?),
            (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT) => CmOption::AckTimeout(byte()?),
            _ => return Err(Errno::ENOSYS),
        };
        i.with(|uv| uv.set_option(opt))
    })())
}

/// `rdma_migrate_id`: moves the id and its queued events to `channel`;
/// with a NULL channel the id becomes synchronous on a private channel of
/// its own (`uverbs::cm::CmId::migrate_to`). A synchronous id's kept event
/// is dropped.
///
/// # Safety
/// `id` is NULL or a live id; `channel` NULL or a live channel.
#[export_name = "uverbs_rdma_migrate_id"]
pub unsafe extern "C" fn rdma_migrate_id(
    id: *mut rdma_cm_id,
    channel: *mut rdma_event_channel,
) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        let ch = if channel.is_null() {
            None
        } else {
            // SAFETY: the caller's contract.
            Some(unsafe { Channel::from_c(channel) }?)
        };
        let mut st = i.state();
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        uv.migrate_to(ch.map(|c| &c.uv))
            .map_err(|e| super::of(&e))?;
        let new = match ch {
            Some(_) => channel,
            None => Channel::into_c_new(uv.event_channel()),
        };
        let c = i.c();
        // SAFETY: the id's fields, written under its lock; an own channel
        // was made by `make` or here and is the id's alone.
        unsafe {
            let old = core::mem::replace(&mut (*c).channel, new);
            if st.own_channel {
                Channel::free(old);
            }
        }
        st.own_channel = channel.is_null();
        drop(st);
        i.set_event(None);
        Ok(())
    })())
}
