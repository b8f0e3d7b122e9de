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
use core::any::Any;
use std::sync::{Mutex, PoisonError};

use uverbs::sys::Errno;

use crate::layout::context::{ibv_context, verbs_context};

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
    /// Boxes the context `uv`, whose C part (with the op tables the
    /// program calls, `crate::ops`) is `vctx`, and returns the pointer
    /// programs hold.
    pub fn boxed(uv: uverbs::Context, vctx: verbs_context) -> *mut ibv_context {
        Box::new(Context {
            vctx,
            uv,
            attached: Mutex::new(Vec::new()),
        })
        .into_c()
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
