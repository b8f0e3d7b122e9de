//! Address handles: `ibv_create_ah`, `ibv_destroy_ah`,
//! `ibv_init_ah_from_wc` and `ibv_create_ah_from_wc` (IBVERBS_1.1).
//!
//! The uverbs handle lives in the C object unlocked: UD posts borrow it
//! (`qp/post.rs`) while the program keeps the AH, which verbs.h requires it
//! to do until its sends complete. `ibv_destroy_ah` takes it out for
//! uverbs' destroy, which gives it back when refused (the kernel's errno):
//! it goes back in, and the AH is as it was, as libibverbs leaves it.

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::{ffi::c_int, mem::ManuallyDrop};

use uverbs::{sys::Errno, AddressHandle, AhAttr, WcFlags, WorkCompletion};

use crate::{
    context::Context,
    errno,
    layout::{
        context::ibv_context,
        cq::ibv_wc,
        pd::ibv_pd,
        qp::{ibv_ah, ibv_ah_attr, ibv_grh},
    },
    pd::Pd,
    qp::attr,
};

/// An address handle: what `ibv_create_ah` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Ah {
    /// The C part.
    pub c: ibv_ah,
    /// Taken out and destroyed by `ibv_destroy_ah` alone, which frees the
    /// object after (so never dropped with it).
    ah: ManuallyDrop<AddressHandle>,
}

// SAFETY: the C part's pointers name the context and PD, which outlive the
// AH; `AddressHandle` is Send and Sync.
unsafe impl Send for Ah {}
// SAFETY: as for Send.
unsafe impl Sync for Ah {}

crate::handle!(Ah: ibv_ah = c);

impl Ah {
    /// The uverbs address handle.
    pub(crate) fn handle(&self) -> &AddressHandle {
        &self.ah
    }
}

/// Creates an AH for `attr` on the PD at `pd`.
///
/// # Safety
/// `pd` is NULL or a live PD of this library.
unsafe fn create(pd: *mut ibv_pd, attr: &AhAttr) -> Result<*mut ibv_ah, Errno> {
    // SAFETY: the caller's contract.
    let p = unsafe { Pd::from_c(pd) }?;
    let ah = p
        .with(|uv| uv.create_ah(attr))?
        .map_err(|e| errno::of(&e))?;
    let b = Box::new(Ah {
        c: ibv_ah {
            context: p.c.context,
            pd,
            handle: ah.handle(),
        },
        ah: ManuallyDrop::new(ah),
    });
    Ok(b.into_c())
}

/// `ibv_create_ah`: NULL and `errno` on failure. RoCE ports need
/// `is_global` and the GRH (rxe refuses an AH without).
///
/// # Safety
/// `pd` is NULL or a live PD of this library; `attr` NULL or readable.
#[export_name = "uverbs_ibv_create_ah"]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    // SAFETY: the caller's contract.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return errno::null(Errno::EINVAL);
    };
    // SAFETY: the caller's contract.
    unsafe { create(pd, &attr::ah_attr(a)) }.unwrap_or_else(errno::null)
}

/// `ibv_destroy_ah`: 0, or the positive errno with the AH as it was (the
/// kernel refused): a later call tries again.
///
/// # Safety
/// `ah` is NULL or a live AH of this library, which no other thread uses
/// during the call and the program uses no more once it returned 0.
#[export_name = "uverbs_ibv_destroy_ah"]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    if ah.is_null() {
        return errno::positive(Errno::EINVAL);
    }
    let p = ah.cast::<Ah>();
    // SAFETY: `p` is a live `Ah` (made by `into_c` in `create`),
    // which nothing else reaches during the call (the caller's contract):
    // the handle is taken out and either destroyed, after which only the
    // box is freed, or put back below.
    let uv = unsafe { ManuallyDrop::take(&mut (*p).ah) };
    match uv.destroy() {
        Ok(()) => {
            // SAFETY: as above; the program gives the AH up with this
            // call, and dropping the box leaves its (taken) handle alone.
            drop(unsafe { Box::from_raw(p) });
            0
        }
        Err(e) => {
            let (uv, e) = e.into_parts();
            // SAFETY: as above: the AH is the caller's again, as it was.
            unsafe { (*p).ah = ManuallyDrop::new(uv) };
            errno::positive(errno::of(&e))
        }
    }
}

/// The address vector replying to the sender of a UD receive.
///
/// # Safety
/// `context` NULL or a live context of this library; `wc`, `grh` NULL or
/// readable (`grh`: the receive buffer's first 40 bytes).
unsafe fn from_wc(
    context: *mut ibv_context,
    port_num: u8,
    wc: *const ibv_wc,
    grh: *const ibv_grh,
) -> Result<ibv_ah_attr, Errno> {
    // SAFETY: the caller's contract.
    let ctx = unsafe { Context::from_c(context) }?;
    // SAFETY: the caller's contract.
    let (Some(w), false) = (unsafe { wc.as_ref() }, grh.is_null()) else {
        return Err(Errno::EINVAL);
    };
    // SAFETY: the caller's contract: 40 readable bytes (`struct ibv_grh`).
    let bytes = unsafe { grh.cast::<[u8; 40]>().read_unaligned() };
    let uv_wc = {
        let mut v = WorkCompletion::default();
        v.wc_flags = WcFlags::from_bits_retain(w.wc_flags);
        v.slid = w.slid;
        v.sl = w.sl;
        v.dlid_path_bits = w.dlid_path_bits;
        v
    };
    let got = ctx
        .uv
        .init_ah_from_wc(port_num, &uv_wc, &bytes)
        .map_err(|e| errno::of(&e))?;
    let mut out = attr::c_ah_attr(&got);
    // libibverbs takes the flow label from the header's first word
    // whatever the header is.
    let first = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    out.grh.flow_label = first & 0xf_ffff;
    Ok(out)
}

/// `ibv_init_ah_from_wc`: 0, or -1 with `errno`.
///
/// # Safety
/// `context` NULL or a live context of this library; `wc`, `grh` NULL or
/// readable; `ah_attr` NULL or writable.
#[export_name = "uverbs_ibv_init_ah_from_wc"]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    context: *mut ibv_context,
    port_num: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    if ah_attr.is_null() {
        return errno::minus_one(Errno::EINVAL);
    }
    // SAFETY: the caller's contract.
    match unsafe { from_wc(context, port_num, wc, grh) } {
        Ok(a) => {
            // SAFETY: the caller's contract: writable.
            unsafe { ah_attr.write(a) };
            0
        }
        Err(e) => errno::minus_one(e),
    }
}

/// `ibv_create_ah_from_wc`: NULL and `errno` on failure.
///
/// # Safety
/// `pd` NULL or a live PD of this library; `wc`, `grh` NULL or readable.
#[export_name = "uverbs_ibv_create_ah_from_wc"]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> *mut ibv_ah {
    // SAFETY: the caller's contract.
    let context = match unsafe { Pd::from_c(pd) } {
        Ok(p) => p.c.context,
        Err(e) => return errno::null(e),
    };
    // SAFETY: the caller's contract.
    let a = match unsafe { from_wc(context, port_num, wc, grh) } {
        Ok(a) => a,
        Err(e) => return errno::null(e),
    };
    // SAFETY: the caller's contract.
    unsafe { create(pd, &attr::ah_attr(&a)) }.unwrap_or_else(errno::null)
}
