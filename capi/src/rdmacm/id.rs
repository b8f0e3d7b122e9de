//! CM ids: `rdma_create_id`, `rdma_destroy_id` and the id's commands
//! (`rdma_bind_addr`, `rdma_resolve_addr`, `rdma_resolve_route`,
//! `rdma_listen`, `rdma_connect`, `rdma_accept`, `rdma_reject`,
//! `rdma_disconnect`, `rdma_establish`, `rdma_notify`, `rdma_set_option`,
//! `rdma_migrate_id`), over `uverbs::cm::CmId`.
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
    cm::{CmId, CmOption, ConnParam, PortSpace},
    sys::Errno,
    AsyncEventType, QpType,
};

use super::{addr, channel::Channel, fail, multicast::Join, ret, verbs};
use crate::{
    handle::Handle,
    layout::{
        device::ibv_gid,
        rdmacm::{
            rdma_addr, rdma_cm_id, rdma_conn_param, rdma_event_channel, rdma_ib_addr,
            rdma_route,
        },
        unsupported::ibv_sa_path_rec,
    },
    qp::Qp,
};

/// `RDMA_MAX_RESP_RES` / `RDMA_MAX_INIT_DEPTH`: "the device's maximum".
pub(crate) const RDMA_MAX: u8 = 0xff;

/// What librdmacm keeps beside the C id (`struct cma_id_private`).
#[derive(Debug, Default)]
pub(crate) struct State {
    /// The uverbs id; `None` only while a destroy is in progress.
    pub(crate) uv: Option<CmId>,
    /// The connection failed while completing CONNECT_RESPONSE: the
    /// kernel's REJECTED / DISCONNECTED that follow are not the program's.
    pub(crate) connect_error: bool,
    /// The negotiated RDMA read resources (`id_priv->initiator_depth`,
    /// `responder_resources`).
    pub(crate) initiator_depth: u8,
    pub(crate) responder_resources: u8,
    /// Multicast groups joined.
    pub(crate) joins: Vec<Join>,
    /// ECE (`vendor_id`, `options`): the program's to offer, the peer's
    /// from its request or response.
    pub(crate) local_ece: (u32, u32),
    pub(crate) remote_ece: (u32, u32),
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
    /// Boxes a new C id for `uv` on `channel` with the program's
    /// `context`, registers it, and returns it.
    pub(crate) fn make(
        uv: CmId,
        channel: *mut rdma_event_channel,
        context: *mut c_void,
    ) -> *mut rdma_cm_id {
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

    /// The id's QP, or NULL.
    pub(crate) fn qp(&self) -> *mut crate::layout::qp::ibv_qp {
        // SAFETY: a plain read of a field this library writes.
        unsafe { (*self.c()).qp }
    }

    /// Whether the id's QP type is UD (`ucma_is_ud_qp`).
    pub(crate) fn is_ud(&self) -> bool {
        // SAFETY: a plain read of a field set at creation.
        unsafe { (*self.c()).qp_type == super::IBV_QPT_UD }
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
        unsafe { Id::free(p) };
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

/// Creates an id on `channel` (a live channel) in port space `ps`.
///
/// # Safety
/// `channel` is a live channel of this library.
pub(crate) unsafe fn create_on(
    channel: *mut rdma_event_channel,
    context: *mut c_void,
    ps: c_int,
) -> Result<*mut rdma_cm_id, Errno> {
    let ps = ps_from_c(ps)?;
    // SAFETY: the caller's contract.
    let ch = unsafe { Channel::from_c(channel) }?;
    let uv = ch.uv.create_id(ps).map_err(|e| super::of(&e))?;
    Ok(Id::make(uv, channel, context))
}

/// `rdma_create_id`: a new id on `channel` for `context` in port space
/// `ps`; 0 and `*id` set, or -1 and `errno`. A NULL channel (a
/// synchronous id, whose calls wait for their events) is `ENOSYS` here.
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
    if channel.is_null() {
        return fail(Errno::ENOSYS);
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
/// unchanged. The program destroys the id's QP first.
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
/// `verbs` when the address is a device's).
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
/// ADDR_ERROR follows on the channel. `dst_addr` is in the route at once.
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
        let st = i.state();
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        uv.resolve_addr(src, dst, timeout)
            .map_err(|e| super::of(&e))?;
        // SAFETY: the id's field, written under its lock.
        unsafe { (*i.c()).route.addr.dst_addr = addr::to_storage(Some(dst)) };
        Ok(())
    })())
}

/// `rdma_resolve_route`: ROUTE_RESOLVED or ROUTE_ERROR follows.
///
/// # Safety
/// `id` is NULL or a live id.
#[export_name = "uverbs_rdma_resolve_route"]
pub unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
    let timeout = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
    // SAFETY: the caller's contract.
    ret(unsafe { Id::from_c(id) }.and_then(|i| i.with(|uv| uv.resolve_route(timeout))))
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

/// The device's read/atomic limits (`max_qp_init_rd_atom`,
/// `max_qp_rd_atom`), librdmacm's `max_initiator_depth` and
/// `max_responder_resources`.
fn device_limits(i: &Id) -> Result<(u8, u8), Errno> {
    // SAFETY: a plain read of a field this library writes.
    let verbs = unsafe { (*i.c()).verbs };
    // SAFETY: `verbs` is NULL or a context of this library that lives for
    // the process (`verbs.rs`).
    let ctx = unsafe { crate::context::Context::from_c(verbs) }?;
    let a = ctx.uv.query_device().map_err(|e| super::of(&e))?;
    let clamp = |v: u32| u8::try_from(v).unwrap_or(u8::MAX);
    Ok((clamp(a.max_qp_init_rd_atom), clamp(a.max_qp_rd_atom)))
}

/// The kernel's connection parameters from the program's (librdmacm's
/// `ucma_copy_conn_param_to_kern`): the QP number and SRQ use from the
/// id's QP when it has one, the negotiated read resources, retries 7 when
/// the program gives no parameters.
///
/// # Safety
/// `p` is NULL or a readable `rdma_conn_param` whose private data is
/// readable.
unsafe fn conn_param(i: &Id, st: &State, p: *const rdma_conn_param) -> ConnParam {
    let mut c = ConnParam::new()
        .responder_resources(st.responder_resources)
        .initiator_depth(st.initiator_depth);
    // SAFETY: the caller's contract.
    match unsafe { p.as_ref() } {
        Some(p) => {
            c = c
                .flow_control(p.flow_control)
                .retry_count(p.retry_count)
                .rnr_retry_count(p.rnr_retry_count)
                .qp_num(p.qp_num)
                .srq(p.srq != 0);
            if !p.private_data.is_null() && p.private_data_len > 0 {
                // SAFETY: the caller's contract.
                let d = unsafe {
                    core::slice::from_raw_parts(
                        p.private_data.cast::<u8>(),
                        usize::from(p.private_data_len),
                    )
                };
                c = c.private_data(d);
            }
        }
        None => c = c.retry_count(7).rnr_retry_count(7),
    }
    let qp = i.qp();
    if !qp.is_null() {
        // SAFETY: `qp` is the id's live QP (this library's).
        let q = unsafe { &*qp };
        c = c.qp_num(q.qp_num).srq(!q.srq.is_null());
    }
    c
}

/// `ucma_valid_param`: a connected id without a QP needs parameters, and
/// the read resources asked may not exceed the device's.
///
/// # Safety
/// `p` is NULL or a readable `rdma_conn_param`.
unsafe fn valid_param(i: &Id, p: *const rdma_conn_param, limits: (u8, u8)) -> Result<(), Errno> {
    // SAFETY: a plain read of a field set at creation.
    if unsafe { (*i.c()).ps } != super::RDMA_PS_TCP {
        return Ok(());
    }
    // SAFETY: the caller's contract.
    let Some(p) = (unsafe { p.as_ref() }) else {
        return if i.qp().is_null() {
            Err(Errno::EINVAL)
        } else {
            Ok(())
        };
    };
    let (max_init, max_resp) = limits;
    if (p.responder_resources != RDMA_MAX && p.responder_resources > max_resp)
        || (p.initiator_depth != RDMA_MAX && p.initiator_depth > max_init)
    {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// `rdma_connect`: sends the connection request (UD: the SIDR request);
/// with a QP on the id its number goes in the request and its
/// CONNECT_RESPONSE is answered before the program sees ESTABLISHED
/// (`event.rs`).
///
/// # Safety
/// `id` is NULL or a live id; `conn_param` NULL or readable.
#[export_name = "uverbs_rdma_connect"]
pub unsafe extern "C" fn rdma_connect(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        let limits = device_limits(i).unwrap_or((RDMA_MAX, RDMA_MAX));
        // SAFETY: the caller's contract.
        unsafe { valid_param(i, conn_param, limits) }?;
        let mut st = i.state();
        // SAFETY: the caller's contract.
        let p = unsafe { conn_param.as_ref() };
        st.initiator_depth = match p {
            Some(p) if p.initiator_depth != RDMA_MAX => p.initiator_depth,
            _ => limits.0,
        };
        st.responder_resources = match p {
            Some(p) if p.responder_resources != RDMA_MAX => p.responder_resources,
            _ => limits.1,
        };
        // SAFETY: the caller's contract.
        let param = unsafe { super::id::conn_param(i, &st, conn_param) };
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        uv.connect(&param).map_err(|e| super::of(&e))
    })())
}

/// `rdma_accept`: accepts the connection request on the id of a
/// CONNECT_REQUEST; a connected id's QP goes to RTR and RTS first
/// (`uverbs::cm::CmId::accept_qp`), and to ERR if the accept fails.
///
/// # Safety
/// `id` is NULL or a live id; `conn_param` NULL or readable.
#[export_name = "uverbs_rdma_accept"]
pub unsafe extern "C" fn rdma_accept(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        let limits = device_limits(i).unwrap_or((RDMA_MAX, RDMA_MAX));
        // SAFETY: the caller's contract.
        unsafe { valid_param(i, conn_param, limits) }?;
        let mut st = i.state();
        // SAFETY: the caller's contract.
        let p = unsafe { conn_param.as_ref() };
        st.initiator_depth = match p {
            Some(p) if p.initiator_depth != RDMA_MAX => p.initiator_depth,
            _ => st.initiator_depth.min(limits.0),
        };
        st.responder_resources = match p {
            Some(p) if p.responder_resources != RDMA_MAX => p.responder_resources,
            _ => st.responder_resources.min(limits.1),
        };
        // SAFETY: the caller's contract.
        let param = unsafe { conn_param_for(i, &st, conn_param) };
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        let qp = i.qp();
        if qp.is_null() {
            return uv.accept(&param).map_err(|e| super::of(&e));
        }
        // SAFETY: `qp` is the id's live QP (this library's).
        let q = unsafe { Qp::from_c(qp) }?;
        q.qp.with(|q| uv.accept_qp(q, &param))?
            .map_err(|e| super::of(&e))
    })())
}

/// [`conn_param`] under another name, for the accept path's borrow.
///
/// # Safety
/// As [`conn_param`].
unsafe fn conn_param_for(i: &Id, st: &State, p: *const rdma_conn_param) -> ConnParam {
    // SAFETY: the caller's contract.
    unsafe { conn_param(i, st, p) }
}

/// `rdma_reject`: rejects a connection request, with private data.
///
/// # Safety
/// `id` is NULL or a live id; `private_data` readable for its length.
#[export_name = "uverbs_rdma_reject"]
pub unsafe extern "C" fn rdma_reject(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    let data: &[u8] = if private_data.is_null() || private_data_len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe {
            core::slice::from_raw_parts(private_data.cast(), usize::from(private_data_len))
        }
    };
    // SAFETY: the caller's contract.
    ret(unsafe { Id::from_c(id) }.and_then(|i| i.with(|uv| uv.reject(data))))
}

/// `rdma_disconnect`: the id's QP (if any) goes to ERR, flushing its work
/// requests, then the disconnect is sent; both sides see DISCONNECTED.
///
/// # Safety
/// `id` is NULL or a live id.
#[export_name = "uverbs_rdma_disconnect"]
pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        let st = i.state();
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        let qp = i.qp();
        if qp.is_null() {
            return uv.disconnect().map_err(|e| super::of(&e));
        }
        // SAFETY: `qp` is the id's live QP (this library's).
        let q = unsafe { Qp::from_c(qp) }?;
        q.qp.with(|q| uv.disconnect_qp(q))?
            .map_err(|e| super::of(&e))
    })())
}

/// `rdma_establish`: for an id without a QP, after CONNECT_RESPONSE (the
/// program moved its own QP to RTS): the RTU. `EINVAL` with a QP on the
/// id (librdmacm answers the response itself then).
///
/// # Safety
/// `id` is NULL or a live id.
#[export_name = "uverbs_rdma_establish"]
pub unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        if !i.qp().is_null() {
            return Err(Errno::EINVAL);
        }
        i.with(|uv| uv.establish())
    })())
}

/// `rdma_notify`: forwards a QP async event (`IBV_EVENT_COMM_EST`,
/// `IBV_EVENT_PATH_MIG`) to the CM.
///
/// # Safety
/// `id` is NULL or a live id.
#[export_name = "uverbs_rdma_notify"]
pub unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, event: c_int) -> c_int {
    let Ok(ev) = u32::try_from(event) else {
        return fail(Errno::EINVAL);
    };
    // SAFETY: the caller's contract.
    ret(unsafe { Id::from_c(id) }.and_then(|i| i.with(|uv| uv.notify(AsyncEventType(ev)))))
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

/// `rdma_migrate_id`: moves the id and its queued events to `channel`.
/// A NULL channel (librdmacm then makes the id synchronous) is `ENOSYS`
/// here.
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
        if channel.is_null() {
            return Err(Errno::ENOSYS);
        }
        // SAFETY: the caller's contract.
        let ch = unsafe { Channel::from_c(channel) }?;
        let st = i.state();
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        uv.migrate(&ch.uv).map_err(|e| super::of(&e))?;
        // SAFETY: the id's field, written under its lock.
        unsafe { (*i.c()).channel = channel };
        Ok(())
    })())
}
