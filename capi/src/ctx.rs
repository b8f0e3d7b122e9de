//! The context object: a [`verbs_context`] (which ends with the
//! `ibv_context` programs hold) followed by the uverbs [`uverbs::Context`].
//!
//! A program finds the extension ops by `ctx->abi_compat ==
//! __VERBS_ABI_IS_EXTENDED` and subtracts `offsetof(struct verbs_context,
//! context)` (`verbs_get_ctx`), so the `verbs_context` is the first field
//! of [`Context`] and the `ibv_context` pointer is
//! `&context.vctx.context`.

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::{any::Any, ptr::null_mut};
use std::sync::{Mutex, PoisonError};

use uverbs::sys::Errno;

use crate::layout::context::{
    ibv_context, ibv_context_ops, ibv_device, verbs_context, VERBS_ABI_IS_EXTENDED,
};
use crate::layout::{pthread_mutex_t, AnyFn};

/// An open device: what `ibv_open_device` returns a pointer into.
#[repr(C)]
#[derive(Debug)]
pub struct Context {
    /// The C part; programs hold `&vctx.context`.
    pub vctx: verbs_context,
    /// The device.
    pub uv: uverbs::Context,
    /// Objects that live as long as the context and are made on first use
    /// (one of each type; [`Context::attachment`]).
    attached: Mutex<Vec<Box<dyn Any + Send + Sync>>>,
}

// SAFETY: the C part is plain data (its pointers name this library's own
// objects, or are NULL); every mutation after `new` goes through the Rust
// state's own synchronisation (`uverbs::Context` is Send + Sync).
unsafe impl Send for Context {}
// SAFETY: as for Send.
unsafe impl Sync for Context {}

crate::handle!(Context: ibv_context = vctx.context);

impl Context {
    /// Boxes the context for `device` and returns the pointer programs
    /// hold. `cmd_fd` and `async_fd` are the uverbs fds the C struct
    /// exposes.
    pub fn create(
        uv: uverbs::Context,
        device: *mut ibv_device,
        cmd_fd: i32,
        async_fd: i32,
    ) -> *mut ibv_context {
        let num_comp_vectors = i32::try_from(uv.num_comp_vectors()).unwrap_or(i32::MAX);
        let ops = ibv_context_ops {
            _compat_query_device: crate::query::QUERY_DEVICE_COMPAT,
            _compat_query_port: crate::query::QUERY_PORT_COMPAT,
            _compat_alloc_pd: None,
            _compat_dealloc_pd: None,
            _compat_reg_mr: None,
            _compat_rereg_mr: None,
            _compat_dereg_mr: None,
            alloc_mw: crate::mw::ALLOC_MW,
            bind_mw: crate::mw::BIND_MW,
            dealloc_mw: crate::mw::DEALLOC_MW,
            _compat_create_cq: None,
            poll_cq: crate::cq::POLL_CQ,
            req_notify_cq: crate::cq::REQ_NOTIFY_CQ,
            _compat_cq_event: None,
            _compat_resize_cq: None,
            _compat_destroy_cq: None,
            _compat_create_srq: None,
            _compat_modify_srq: None,
            _compat_query_srq: None,
            _compat_destroy_srq: None,
            post_srq_recv: crate::srq::POST_SRQ_RECV,
            _compat_create_qp: None,
            _compat_query_qp: None,
            _compat_modify_qp: None,
            _compat_destroy_qp: None,
            post_send: crate::qp::POST_SEND,
            post_recv: crate::qp::POST_RECV,
            _compat_create_ah: None,
            _compat_destroy_ah: None,
            _compat_attach_mcast: None,
            _compat_detach_mcast: None,
            _compat_async_event: None,
        };
        let none: AnyFn = None;
        let ctx = Box::new(Context {
            vctx: verbs_context {
                query_port: crate::query::QUERY_PORT,
                advise_mr: none,
                alloc_null_mr: none,
                read_counters: none,
                attach_counters_point_flow: none,
                create_counters: none,
                destroy_counters: none,
                reg_dm_mr: none,
                alloc_dm: none,
                free_dm: none,
                modify_flow_action_esp: none,
                destroy_flow_action: none,
                create_flow_action_esp: none,
                modify_qp_rate_limit: none,
                alloc_parent_domain: crate::parent_domain::ALLOC_PARENT_DOMAIN,
                dealloc_td: crate::parent_domain::DEALLOC_TD,
                alloc_td: crate::parent_domain::ALLOC_TD,
                modify_cq: none,
                post_srq_ops: none,
                destroy_rwq_ind_table: none,
                create_rwq_ind_table: none,
                destroy_wq: none,
                modify_wq: none,
                create_wq: none,
                query_rt_values: crate::query::QUERY_RT_VALUES,
                create_cq_ex: crate::cq_ex::CREATE_CQ_EX,
                r#priv: null_mut(),
                query_device_ex: crate::query::QUERY_DEVICE_EX,
                ibv_destroy_flow: none,
                ABI_placeholder2: none,
                ibv_create_flow: none,
                ABI_placeholder1: none,
                open_qp: none,
                create_qp_ex: crate::qp::CREATE_QP_EX,
                get_srq_num: crate::srq::GET_SRQ_NUM,
                create_srq_ex: crate::srq::CREATE_SRQ_EX,
                open_xrcd: none,
                close_xrcd: none,
                _ABI_placeholder3: 0,
                sz: core::mem::size_of::<verbs_context>(),
                context: ibv_context {
                    device,
                    ops,
                    cmd_fd,
                    async_fd,
                    num_comp_vectors,
                    mutex: pthread_mutex_t([0; 40]),
                    abi_compat: VERBS_ABI_IS_EXTENDED,
                },
            },
            uv,
            attached: Mutex::new(Vec::new()),
        });
        ctx.into_c()
    }

    /// The context's one object of type `T`, made by `make` on first use
    /// and kept until the context is closed (a per-context singleton a C
    /// function hands out, such as libmlx5's non-cached DevX UAR). The
    /// pointer stays valid until then.
    pub(crate) fn attachment<T: Any + Send + Sync, E>(
        &self,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Result<*const T, E> {
        let mut all = self.attached.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = all.iter().find_map(|b| b.downcast_ref::<T>()) {
            return Ok(t);
        }
        let boxed = Box::new(make()?);
        // The box's contents never move, whatever the vector does.
        let at: *const T = &*boxed;
        all.push(boxed);
        Ok(at)
    }

    /// The program's pointer to this context.
    pub fn as_c(&self) -> *mut ibv_context {
        (&raw const self.vctx.context).cast_mut()
    }

    /// Frees the context behind `p` (`ibv_close_device`) and closes the
    /// uverbs context's command fd and async event fd whatever objects made
    /// from it are still alive, as libibverbs' `verbs_uninit_context` does
    /// (`uverbs::Context::close`): the kernel destroys what the program
    /// left when it releases the file. The objects the program leaked stay
    /// allocated; their commands would fail (`EBADF`), but the program may
    /// not use them any more than with libibverbs, where they point at the
    /// freed context.
    ///
    /// # Safety
    /// As [`Context::from_c`], and the program uses `p` no more.
    pub unsafe fn destroy(p: *mut ibv_context) -> Result<(), Errno> {
        if p.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: the caller's contract: made by `into_c` in `create`, and
        // the program gives up its pointer.
        let ctx = unsafe { Context::from_c_owned(p) };
        let Context { uv, attached, .. } = *ctx;
        // What the context made on first use goes first, while its
        // commands still reach the kernel.
        drop(attached);
        // rdma-core's close never fails: neither does this one. Should the
        // placeholder fd of closed contexts not be made (EMFILE), the fds
        // close when the last object goes, as a dropped context's do.
        let _ = uv.close();
        Ok(())
    }
}
