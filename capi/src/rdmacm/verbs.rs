//! The verbs context of each device, as `id->verbs` names it:
//! `rdma_get_devices`, `rdma_free_devices`.
//!
//! librdmacm opens each device once for the process and every id on that
//! device points at that one `ibv_context` (`cma_dev_array`); here each is
//! a context of this library wrapping the `uverbs::Context` rdma_cm gives
//! the id (`CmId::context`, itself shared per device), made on first use
//! and kept for the life of the process, as librdmacm keeps its devices
//! open. So a program allocates PDs, CQs and MRs on `id->verbs` with this
//! library's verbs and mixes them with the id's QP.

#![allow(unsafe_code)]

use core::ffi::c_int;
use std::sync::{Mutex, MutexGuard, PoisonError};

use uverbs::{cm::CmId, sys::Errno};

use crate::{
    device::{self, kernel},
    errno,
    layout::{context::ibv_context, pd::ibv_pd},
};

/// One device's context and the PD of its ids.
#[derive(Debug, Clone, Copy)]
struct Dev {
    guid: u64,
    verbs: usize,
    /// The PD `id->pd` names (librdmacm's `cma_dev->pd`), made with the
    /// first id on the device; NULL until then.
    pd: usize,
}

/// Every device's context.
static VERBS: Mutex<Vec<Dev>> = Mutex::new(Vec::new());

fn verbs() -> MutexGuard<'static, Vec<Dev>> {
    VERBS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The device with `guid`, its context made from `open()` when none is.
fn get_or_make(
    all: &mut Vec<Dev>,
    guid: u64,
    open: impl FnOnce() -> Result<uverbs::Context, Errno>,
) -> Result<usize, Errno> {
    if let Some(at) = all.iter().position(|d| d.guid == guid) {
        return Ok(at);
    }
    let p = device::wrap_context(open()?)?;
    all.push(Dev {
        guid,
        verbs: p as usize,
        pd: 0,
    });
    Ok(all.len() - 1)
}

/// The context and PD `id->verbs` and `id->pd` are for `id` (bound or
/// resolved to a device): the device's one context, and its one PD for
/// ids (allocated on this library's context, as librdmacm's
/// `ucma_get_device` allocates it; kept for the process).
pub(crate) fn of_id(id: &CmId) -> Result<(*mut ibv_context, *mut ibv_pd), Errno> {
    let ctx = id.context().map_err(|e| super::of(&e))?;
    let mut all = verbs();
    let at = get_or_make(&mut all, ctx.device().node_guid, || Ok(ctx))?;
    let d = &mut all[at];
    if d.pd == 0 {
        // SAFETY: `d.verbs` is a context of this library, kept open.
        let pd = unsafe { crate::pd::ibv_alloc_pd(d.verbs as *mut ibv_context) };
        if pd.is_null() {
            return Err(Errno::last());
        }
        d.pd = pd as usize;
    }
    Ok((d.verbs as *mut ibv_context, d.pd as *mut ibv_pd))
}

/// `rdma_get_devices`: a NULL-terminated array of every device's context
/// (opened now if no id opened it yet), freed with `rdma_free_devices`;
/// `*num_devices` (when not NULL) is the count. NULL and `errno` on
/// failure.
///
/// # Safety
/// `num_devices` is NULL or a writable `int`.
#[export_name = "uverbs_rdma_get_devices"]
pub unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    let list = match device::present() {
        Ok(l) => l,
        Err(e) => return errno::null(e),
    };
    let mut ctxs = Vec::with_capacity(list.len());
    let mut all = verbs();
    for d in list {
        let made = get_or_make(&mut all, d.info.node_guid, || {
            uverbs::Context::open_device(kernel(), d.info.clone()).map_err(|e| super::of(&e))
        });
        match made {
            Ok(at) => ctxs.push(all[at].verbs as *mut ibv_context),
            Err(e) => return errno::null(e),
        }
    }
    drop(all);
    let slot = size_of::<*mut ibv_context>();
    // SAFETY: calloc of `len + 1` pointers; checked for NULL below.
    let array = unsafe { libc::calloc(ctxs.len() + 1, slot) }.cast::<*mut ibv_context>();
    if array.is_null() {
        return errno::null(Errno::ENOMEM);
    }
    for (i, c) in ctxs.iter().enumerate() {
        // SAFETY: `i < len`, inside the allocation; the last slot stays NULL.
        unsafe { array.add(i).write(*c) };
    }
    if !num_devices.is_null() {
        // SAFETY: the caller's contract.
        unsafe { num_devices.write(c_int::try_from(ctxs.len()).unwrap_or(c_int::MAX)) };
    }
    array
}

/// `rdma_free_devices`: frees the array (the contexts stay open).
///
/// # Safety
/// `list` is NULL or an array `rdma_get_devices` returned, not yet freed.
#[export_name = "uverbs_rdma_free_devices"]
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    // SAFETY: the array came from `calloc` in `rdma_get_devices`.
    unsafe { libc::free(list.cast()) };
}
