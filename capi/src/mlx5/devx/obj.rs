//! DevX objects and commands: `mlx5dv_devx_obj_create`, `_obj_query`,
//! `_obj_modify`, `_obj_destroy`, `_general_cmd`, the DevX queries and
//! modifies of verbs QPs, CQs and SRQs, `_query_eqn`.
//!
//! Each sends the program's mailboxes to the kernel as they are (libmlx5's
//! `_mlx5dv_devx_obj_create` and its kin): a firmware failure is
//! `EREMOTEIO` with the output mailbox filled (the status and syndrome in
//! its header), or on kernels before 5.19 an errno translated from the
//! status. uverbs refuses what the kernel would (`EINVAL`: a mailbox
//! shorter than the 16-byte header, a non-zero `vhca_tunnel_id`).
//!
//! `struct mlx5dv_devx_obj` is opaque: programs hold a pointer to an
//! [`Obj`]. An object keeps the UMEMs its create command names registered
//! while it lives (`uverbs::mlx5::Devx::obj_create`); a destroy the kernel
//! refuses leaves it as it was.

use crate::handle::Handle;
use core::ffi::{c_int, c_void};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use uverbs::{
    mlx5::{Devx, DevxObj},
    sys::Errno,
};

use super::{devx_of, input, of, output, positive};
use crate::{
    cq::Cq,
    errno,
    layout::{
        context::ibv_context,
        cq::ibv_cq,
        qp::{ibv_qp, ibv_srq},
    },
    qp::Qp,
    srq::Srq,
};

/// A DevX object: what `mlx5dv_devx_obj_create` returns a pointer to.
#[derive(Debug)]
pub(crate) struct Obj {
    obj: RwLock<Option<DevxObj>>,
}

crate::handle!(Obj: opaque);

impl Obj {
    /// The uverbs object, locked shared (a destroy waits); `EINVAL` once
    /// destroyed.
    pub(super) fn get(&self) -> Result<ObjGuard<'_>, Errno> {
        let g = self.obj.read().unwrap_or_else(PoisonError::into_inner);
        if g.is_none() {
            return Err(Errno::EINVAL);
        }
        Ok(ObjGuard(g))
    }
}

/// A live uverbs object, locked shared.
pub(super) struct ObjGuard<'a>(RwLockReadGuard<'a, Option<DevxObj>>);

impl core::ops::Deref for ObjGuard<'_> {
    type Target = DevxObj;
    fn deref(&self) -> &DevxObj {
        // `Obj::get` checked it is there, and the guard keeps it.
        self.0.as_ref().expect("checked by Obj::get")
    }
}

/// Runs a PRM command that creates an object (`MLX5_IB_METHOD_DEVX_OBJ_CREATE`);
/// NULL and `errno` on failure.
///
/// # Safety
/// `context` is NULL or an open context of this library; `in_` holds
/// `inlen` bytes, `out` room for `outlen`.
#[export_name = "uverbs_mlx5dv_devx_obj_create"]
pub unsafe extern "C" fn mlx5dv_devx_obj_create(
    context: *mut ibv_context,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> *mut c_void {
    let made = (|| {
        // SAFETY: the caller's contract.
        let (_, devx) = unsafe { devx_of(context) }?;
        // SAFETY: the caller's contract.
        let (cmd_in, cmd_out) = unsafe { (input(in_, inlen)?, output(out, outlen)?) };
        let obj = devx.obj_create(cmd_in, cmd_out).map_err(of)?;
        Ok(Box::new(Obj {
            obj: RwLock::new(Some(obj)),
        })
        .into_c())
    })();
    match made {
        Ok(p) => p.cast(),
        Err(e) => errno::null(e),
    }
}

/// Which command an object runs.
#[derive(Clone, Copy)]
enum Cmd {
    Query,
    Modify,
}

/// Runs a query or modify command on a DevX object.
///
/// # Safety
/// As [`mlx5dv_devx_obj_query`].
unsafe fn obj_cmd(
    obj: *mut c_void,
    c: Cmd,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let o = unsafe { Obj::from_c(obj) }?;
    // SAFETY: the caller's contract.
    let (cmd_in, cmd_out) = unsafe { (input(in_, inlen)?, output(out, outlen)?) };
    let g = o.get()?;
    match c {
        Cmd::Query => g.query(cmd_in, cmd_out),
        Cmd::Modify => g.modify(cmd_in, cmd_out),
    }
    .map_err(of)
}

/// Runs a PRM query command on a DevX object: 0 or the positive errno.
///
/// # Safety
/// `obj` is NULL or a live object of this library; the mailboxes as for
/// [`mlx5dv_devx_obj_create`].
#[export_name = "uverbs_mlx5dv_devx_obj_query"]
pub unsafe extern "C" fn mlx5dv_devx_obj_query(
    obj: *mut c_void,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    positive(unsafe { obj_cmd(obj, Cmd::Query, in_, inlen, out, outlen) })
}

/// Runs a PRM modify command on a DevX object: 0 or the positive errno.
///
/// # Safety
/// As [`mlx5dv_devx_obj_query`].
#[export_name = "uverbs_mlx5dv_devx_obj_modify"]
pub unsafe extern "C" fn mlx5dv_devx_obj_modify(
    obj: *mut c_void,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    positive(unsafe { obj_cmd(obj, Cmd::Modify, in_, inlen, out, outlen) })
}

/// Destroys a DevX object: 0, or the positive errno and the object as it
/// was (the firmware refuses while other objects use it).
///
/// # Safety
/// `obj` is NULL or a live object of this library.
#[export_name = "uverbs_mlx5dv_devx_obj_destroy"]
pub unsafe extern "C" fn mlx5dv_devx_obj_destroy(obj: *mut c_void) -> c_int {
    // SAFETY: the caller's contract.
    let o = match unsafe { Obj::from_c(obj) } {
        Ok(o) => o,
        Err(e) => return errno::positive(e),
    };
    {
        let mut g = o.obj.write().unwrap_or_else(PoisonError::into_inner);
        let Some(uv) = g.take() else {
            return errno::positive(Errno::EINVAL);
        };
        if let Err(e) = uv.destroy() {
            let (uv, e) = e.into_parts();
            *g = Some(uv);
            return errno::positive(of(e));
        }
    }
    // SAFETY: made by `into_c` in `mlx5dv_devx_obj_create`; the program
    // gives it up with this call.
    unsafe { Obj::free(obj.cast()) };
    0
}

/// Runs a general PRM command (`MLX5_IB_METHOD_DEVX_OTHER`): 0 or the
/// positive errno.
///
/// # Safety
/// As [`mlx5dv_devx_obj_create`].
#[export_name = "uverbs_mlx5dv_devx_general_cmd"]
pub unsafe extern "C" fn mlx5dv_devx_general_cmd(
    context: *mut ibv_context,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    positive((|| {
        // SAFETY: the caller's contract.
        let (_, devx) = unsafe { devx_of(context) }?;
        // SAFETY: the caller's contract.
        let (cmd_in, cmd_out) = unsafe { (input(in_, inlen)?, output(out, outlen)?) };
        devx.general_cmd(cmd_in, cmd_out).map_err(of)
    })())
}

/// The EQ number of completion vector `vector`, for a DevX CQ's context:
/// 0 or the positive errno.
///
/// # Safety
/// `context` is NULL or an open context of this library; `eqn` is
/// writable.
#[export_name = "uverbs_mlx5dv_devx_query_eqn"]
pub unsafe extern "C" fn mlx5dv_devx_query_eqn(
    context: *mut ibv_context,
    vector: u32,
    eqn: *mut u32,
) -> c_int {
    positive((|| {
        // SAFETY: the caller's contract.
        let (_, devx) = unsafe { devx_of(context) }?;
        let n = devx.query_eqn(vector).map_err(of)?;
        // SAFETY: the caller's contract; NULL is the kernel's EFAULT.
        let slot = unsafe { eqn.as_mut() }.ok_or(Errno::EFAULT)?;
        *slot = n;
        Ok(())
    })())
}

/// The DevX functions of a verbs object's context and the program's
/// mailboxes, for `run` (which names the object).
///
/// # Safety
/// `context` is the object's context (open while the object lives); the
/// mailboxes as for [`mlx5dv_devx_obj_create`].
unsafe fn verbs_cmd(
    context: *mut ibv_context,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
    run: impl FnOnce(&Devx, &[u8], &mut [u8]) -> Result<(), Errno>,
) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let (_, devx) = unsafe { devx_of(context) }?;
    // SAFETY: the caller's contract.
    let (cmd_in, cmd_out) = unsafe { (input(in_, inlen)?, output(out, outlen)?) };
    run(&devx, cmd_in, cmd_out)
}

/// Runs a PRM query command on a verbs QP: 0 or the positive errno.
///
/// # Safety
/// `qp` is NULL or a live QP of this library; the mailboxes as for
/// [`mlx5dv_devx_obj_create`].
#[export_name = "uverbs_mlx5dv_devx_qp_query"]
pub unsafe extern "C" fn mlx5dv_devx_qp_query(
    qp: *mut ibv_qp,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    positive(unsafe { qp_cmd(qp, Cmd::Query, in_, inlen, out, outlen) })
}

/// Runs a PRM modify command (a state transition) on a verbs QP: 0 or
/// the positive errno.
///
/// # Safety
/// As [`mlx5dv_devx_qp_query`].
#[export_name = "uverbs_mlx5dv_devx_qp_modify"]
pub unsafe extern "C" fn mlx5dv_devx_qp_modify(
    qp: *mut ibv_qp,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    positive(unsafe { qp_cmd(qp, Cmd::Modify, in_, inlen, out, outlen) })
}

/// # Safety
/// As [`mlx5dv_devx_qp_query`].
unsafe fn qp_cmd(
    qp: *mut ibv_qp,
    c: Cmd,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let q = unsafe { Qp::from_c(qp) }?;
    // SAFETY: the caller's contract: the QP and its context are live.
    unsafe {
        verbs_cmd((*qp).context, in_, inlen, out, outlen, |devx, i, o| {
            q.qp.with(|uv| match c {
                Cmd::Query => devx.qp_query(uv, i, o),
                Cmd::Modify => devx.qp_modify(uv, i, o),
            })?
            .map_err(of)
        })
    }
}

/// Runs a PRM query command on a verbs CQ: 0 or the positive errno.
///
/// # Safety
/// `cq` is NULL or a live CQ of this library; the mailboxes as for
/// [`mlx5dv_devx_obj_create`].
#[export_name = "uverbs_mlx5dv_devx_cq_query"]
pub unsafe extern "C" fn mlx5dv_devx_cq_query(
    cq: *mut ibv_cq,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    positive(unsafe { cq_cmd(cq, Cmd::Query, in_, inlen, out, outlen) })
}

/// Runs a PRM modify command on a verbs CQ: 0 or the positive errno.
///
/// # Safety
/// As [`mlx5dv_devx_cq_query`].
#[export_name = "uverbs_mlx5dv_devx_cq_modify"]
pub unsafe extern "C" fn mlx5dv_devx_cq_modify(
    cq: *mut ibv_cq,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    positive(unsafe { cq_cmd(cq, Cmd::Modify, in_, inlen, out, outlen) })
}

/// # Safety
/// As [`mlx5dv_devx_cq_query`].
unsafe fn cq_cmd(
    cq: *mut ibv_cq,
    c: Cmd,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let q = unsafe { Cq::from_c(cq) }?;
    // SAFETY: the caller's contract: the CQ and its context are live.
    unsafe {
        verbs_cmd((*cq).context, in_, inlen, out, outlen, |devx, i, o| {
            q.with(|uv| match c {
                Cmd::Query => devx.cq_query(uv, i, o),
                Cmd::Modify => devx.cq_modify(uv, i, o),
            })?
            .map_err(of)
        })
    }
}

/// Runs a PRM query command on a verbs SRQ: 0 or the positive errno.
///
/// # Safety
/// `srq` is NULL or a live SRQ of this library; the mailboxes as for
/// [`mlx5dv_devx_obj_create`].
#[export_name = "uverbs_mlx5dv_devx_srq_query"]
pub unsafe extern "C" fn mlx5dv_devx_srq_query(
    srq: *mut ibv_srq,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    positive(unsafe { srq_cmd(srq, Cmd::Query, in_, inlen, out, outlen) })
}

/// Runs a PRM modify command on a verbs SRQ: 0 or the positive errno.
///
/// # Safety
/// As [`mlx5dv_devx_srq_query`].
#[export_name = "uverbs_mlx5dv_devx_srq_modify"]
pub unsafe extern "C" fn mlx5dv_devx_srq_modify(
    srq: *mut ibv_srq,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    positive(unsafe { srq_cmd(srq, Cmd::Modify, in_, inlen, out, outlen) })
}

/// # Safety
/// As [`mlx5dv_devx_srq_query`].
unsafe fn srq_cmd(
    srq: *mut ibv_srq,
    c: Cmd,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let q = unsafe { Srq::from_c(srq) }?;
    // SAFETY: the caller's contract: the SRQ and its context are live.
    unsafe {
        verbs_cmd((*srq).context, in_, inlen, out, outlen, |devx, i, o| {
            q.with(|uv| match c {
                Cmd::Query => devx.srq_query(uv, i, o),
                Cmd::Modify => devx.srq_modify(uv, i, o),
            })?
            .map_err(of)
        })
    }
}
