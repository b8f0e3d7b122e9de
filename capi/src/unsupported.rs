//! The exported functions uverbs has nothing beneath, which programs
//! import all the same (capi/symbols/libibverbs.txt): device memory's
//! import (`ibv_import_dm`, `ibv_unimport_dm`) and enhanced connection
//! establishment (`ibv_query_ece`, `ibv_set_ece`) each fail with
//! `EOPNOTSUPP` in its function's convention, which is what rdma-core 44
//! answers on rxe too (its rxe provider has no import or ECE op);
//! `ibv_unimport_dm` has nothing to undo. (Contexts, PDs and MRs are
//! imported in `device.rs` and `pd.rs`; librdmacm's conversions are
//! `marshall.rs`.)

#![allow(unsafe_code)]

use core::ffi::c_int;

use uverbs::sys::Errno;

use crate::errno;
use crate::layout::context::ibv_context;
use crate::layout::qp::ibv_qp;
use crate::layout::unsupported::{ibv_dm, ibv_ece};

// ------------------------------------------------- import / unimport

/// `ibv_import_dm`: another process's device memory. Not supported: NULL
/// with `errno` `EOPNOTSUPP` (`EINVAL` for a NULL context).
///
/// # Safety
/// None: the pointer is only compared with NULL.
#[export_name = "uverbs_ibv_import_dm"]
pub unsafe extern "C" fn ibv_import_dm(context: *mut ibv_context, _dm_handle: u32) -> *mut ibv_dm {
    if context.is_null() {
        return errno::null(Errno::EINVAL);
    }
    errno::null(Errno::EOPNOTSUPP)
}

/// `ibv_unimport_dm`: nothing to undo (no device memory can be imported).
///
/// # Safety
/// None: the pointer is not used.
#[export_name = "uverbs_ibv_unimport_dm"]
pub unsafe extern "C" fn ibv_unimport_dm(_dm: *mut ibv_dm) {}

// ------------------------------------------------- ECE

/// `ibv_query_ece`: a QP's enhanced connection establishment options. Not
/// supported: returns `EOPNOTSUPP` (`EINVAL` for NULL arguments).
///
/// # Safety
/// None: the pointers are only compared with NULL.
#[export_name = "uverbs_ibv_query_ece"]
pub unsafe extern "C" fn ibv_query_ece(qp: *mut ibv_qp, ece: *mut ibv_ece) -> c_int {
    if qp.is_null() || ece.is_null() {
        return errno::positive(Errno::EINVAL);
    }
    errno::positive(Errno::EOPNOTSUPP)
}

/// `ibv_set_ece`: sets them. Not supported: returns `EOPNOTSUPP` and sets
/// `errno` (as libibverbs does for `vendor_id == 0`; `EINVAL` for NULL
/// arguments).
///
/// # Safety
/// None: the pointers are only compared with NULL.
#[export_name = "uverbs_ibv_set_ece"]
pub unsafe extern "C" fn ibv_set_ece(qp: *mut ibv_qp, ece: *mut ibv_ece) -> c_int {
    if qp.is_null() || ece.is_null() {
        return errno::positive(Errno::EINVAL);
    }
    errno::positive(Errno::EOPNOTSUPP)
}

#[cfg(test)]
mod tests;
