//! DevX objects (`MLX5_IB_OBJECT_DEVX_OBJ`): firmware objects created,
//! queried, modified and destroyed with PRM commands, the general command
//! (`DEVX_OTHER`), and queries and modifies of the verbs objects a context
//! made (`mlx5dv_devx_qp_query` and its kin).
//!
//! Kernel side (`drivers/infiniband/hw/mlx5/devx.c`): each method accepts
//! only its own class of opcode (create, modify, query, general) and fails
//! others with `EINVAL`; the kernel overwrites the uid; `MODIFY`/`QUERY`
//! take any object of the context whose PRM id matches the command (a
//! DevX object, or a verbs QP, CQ, SRQ, WQ, RWQ table), so the same two
//! methods serve both. The kernel keeps the destroy command it built at
//! create time and replays it when the object is destroyed, or when the
//! context goes.

use std::{
    any::Any,
    sync::{Arc, Mutex, PoisonError},
};

use super::{
    async_cmd::DevxCmdComp,
    cmd::{check_mailboxes, firmware_result},
    umem::named_by,
    Devx,
};
use crate::{
    abi,
    error::{DestroyError, Error, ErrorKind, Result},
    sys::Errno,
};

/// Something a DevX object may use that must outlive it ([`DevxUmem`],
/// [`DevxUar`]): passed to [`Devx::obj_create_using`], the object holds it
/// until it is destroyed.
///
/// [`DevxUmem`]: super::DevxUmem
/// [`DevxUar`]: super::DevxUar
///
/// rdma-core has no counterpart: there the caller keeps a UMEM
/// (`mlx5dv_devx_umem_reg`) or UAR (`mlx5dv_devx_alloc_uar`) alive by hand.
pub trait DevxResource: sealed::Sealed {
    /// A reference that keeps the resource alive.
    #[doc(hidden)]
    fn keep_alive(&self) -> Arc<dyn Any + Send + Sync>;
}

pub(super) mod sealed {
    pub trait Sealed {}
}

/// A DevX object (`struct mlx5dv_devx_obj`): created by a PRM create
/// command, destroyed by the kernel with the matching destroy command.
///
/// Dropping it destroys it, best effort; [`DevxObj::destroy`] reports a
/// failure (the firmware refuses to destroy an object others still use,
/// such as a CQ a QP completes to: destroy those first).
#[derive(Debug)]
pub struct DevxObj {
    devx: Devx,
    handle: u32,
    destroyed: bool,
    /// Held until the object is dropped, after its destruction.
    uses: Mutex<Uses>,
}

/// The resources an object keeps alive: those passed to
/// [`Devx::obj_create_using`], and the UMEMs its create and modify commands
/// name (`umem.rs`).
struct Uses(Vec<Arc<dyn Any + Send + Sync>>);

impl std::fmt::Debug for Uses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resources", self.0.len())
    }
}

impl Devx {
    /// Runs a PRM command that creates a firmware object, like
    /// `mlx5dv_devx_obj_create`: `cmd_in` is the command, `cmd_out` gets the
    /// firmware's answer (its header says the new object's id; see
    /// [`CmdOut`](super::CmdOut)).
    ///
    /// The object keeps registered every [`DevxUmem`](super::DevxUmem) of
    /// this context whose id the command names (a CQ's `cq_umem_id` and
    /// `dbr_umem_id`, a QP's `wq_umem_id`, ...: any big-endian 32-bit word
    /// of `cmd_in` past its header equal to a live UMEM's id), so dropping
    /// the UMEM's handle first never gives back memory the device writes.
    #[doc(alias = "mlx5dv_devx_obj_create")]
    pub fn obj_create(&self, cmd_in: &[u8], cmd_out: &mut [u8]) -> Result<DevxObj> {
        self.obj_create_using(cmd_in, cmd_out, &[])
    }

    /// [`Devx::obj_create`] for an object that uses `resources` (the UMEM
    /// holding its queue, the UAR it rings): the object keeps them alive
    /// until it is destroyed, so they are never released while the device
    /// may still use them.
    pub fn obj_create_using(
        &self,
        cmd_in: &[u8],
        cmd_out: &mut [u8],
        resources: &[&dyn DevxResource],
    ) -> Result<DevxObj> {
        const OP: &str = "MLX5_IB_METHOD_DEVX_OBJ_CREATE";
        check_mailboxes(OP, cmd_in, cmd_out)?;
        let dev = self.device();
        // Taken before the command: a UMEM it names cannot be deregistered
        // while the firmware creates the object.
        let mut uses = named_by(self, cmd_in);
        uses.extend(resources.iter().map(|r| r.keep_alive()));
        let mut cmd = dev.ioctl_cmd(
            abi::MLX5_IB_OBJECT_DEVX_OBJ,
            abi::MLX5_IB_METHOD_DEVX_OBJ_CREATE,
        );
        let at = cmd.new_object(abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE);
        cmd.input(abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN, cmd_in);
        cmd.output(abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT, cmd_out);
        let result = dev.ioctl(&mut cmd);
        let handle = cmd.new_handle(at);
        drop(cmd);
        firmware_result(OP, result, cmd_out)?;
        Ok(DevxObj {
            devx: self.clone(),
            handle,
            destroyed: false,
            uses: Mutex::new(Uses(uses)),
        })
    }

    /// Runs a general PRM command (queries of the HCA's capabilities and
    /// state that create nothing), like `mlx5dv_devx_general_cmd`.
    #[doc(alias = "mlx5dv_devx_general_cmd")]
    pub fn general_cmd(&self, cmd_in: &[u8], cmd_out: &mut [u8]) -> Result<()> {
        const OP: &str = "MLX5_IB_METHOD_DEVX_OTHER";
        check_mailboxes(OP, cmd_in, cmd_out)?;
        let dev = self.device();
        let mut cmd = dev.ioctl_cmd(abi::MLX5_IB_OBJECT_DEVX, abi::MLX5_IB_METHOD_DEVX_OTHER);
        cmd.input(abi::MLX5_IB_ATTR_DEVX_OTHER_CMD_IN, cmd_in);
        cmd.output(abi::MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT, cmd_out);
        let result = dev.ioctl(&mut cmd);
        drop(cmd);
        firmware_result(OP, result, cmd_out)
    }

    /// Queries a verbs QP through a PRM `QUERY_QP` command, like
    /// `mlx5dv_devx_qp_query`.
    #[doc(alias = "mlx5dv_devx_qp_query")]
    pub fn qp_query(&self, qp: &crate::QueuePair, cmd_in: &[u8], cmd_out: &mut [u8]) -> Result<()> {
        self.run_on(qp.handle(), Method::Query, cmd_in, cmd_out)
    }

    /// Modifies a verbs QP through a PRM command, like `mlx5dv_devx_qp_modify`.
    #[doc(alias = "mlx5dv_devx_qp_modify")]
    pub fn qp_modify(
        &self,
        qp: &crate::QueuePair,
        cmd_in: &[u8],
        cmd_out: &mut [u8],
    ) -> Result<()> {
        self.run_on(qp.handle(), Method::Modify, cmd_in, cmd_out)
    }

    /// Queries a verbs CQ through a PRM command, like `mlx5dv_devx_cq_query`.
    #[doc(alias = "mlx5dv_devx_cq_query")]
    pub fn cq_query(
        &self,
        cq: &crate::CompletionQueue,
        cmd_in: &[u8],
        cmd_out: &mut [u8],
    ) -> Result<()> {
        self.run_on(cq.handle(), Method::Query, cmd_in, cmd_out)
    }

    /// Modifies a verbs CQ through a PRM command, like `mlx5dv_devx_cq_modify`.
    #[doc(alias = "mlx5dv_devx_cq_modify")]
    pub fn cq_modify(
        &self,
        cq: &crate::CompletionQueue,
        cmd_in: &[u8],
        cmd_out: &mut [u8],
    ) -> Result<()> {
        self.run_on(cq.handle(), Method::Modify, cmd_in, cmd_out)
    }

    /// Queries a verbs SRQ through a PRM command, like `mlx5dv_devx_srq_query`.
    #[doc(alias = "mlx5dv_devx_srq_query")]
    pub fn srq_query(
        &self,
        srq: &crate::SharedReceiveQueue,
        cmd_in: &[u8],
        cmd_out: &mut [u8],
    ) -> Result<()> {
        self.run_on(srq.handle(), Method::Query, cmd_in, cmd_out)
    }

    /// Modifies a verbs SRQ through a PRM command, like `mlx5dv_devx_srq_modify`.
    #[doc(alias = "mlx5dv_devx_srq_modify")]
    pub fn srq_modify(
        &self,
        srq: &crate::SharedReceiveQueue,
        cmd_in: &[u8],
        cmd_out: &mut [u8],
    ) -> Result<()> {
        self.run_on(srq.handle(), Method::Modify, cmd_in, cmd_out)
    }

    /// `OBJ_QUERY` or `OBJ_MODIFY` on the object with kernel handle `handle`.
    fn run_on(&self, handle: u32, m: Method, cmd_in: &[u8], cmd_out: &mut [u8]) -> Result<()> {
        let (method, op, h, i, o) = match m {
            Method::Query => (
                abi::MLX5_IB_METHOD_DEVX_OBJ_QUERY,
                "MLX5_IB_METHOD_DEVX_OBJ_QUERY",
                abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE,
                abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN,
                abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT,
            ),
            Method::Modify => (
                abi::MLX5_IB_METHOD_DEVX_OBJ_MODIFY,
                "MLX5_IB_METHOD_DEVX_OBJ_MODIFY",
                abi::MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE,
                abi::MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN,
                abi::MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT,
            ),
        };
        check_mailboxes(op, cmd_in, cmd_out)?;
        let dev = self.device();
        let mut cmd = dev.ioctl_cmd(abi::MLX5_IB_OBJECT_DEVX_OBJ, method);
        cmd.object(h, handle);
        cmd.input(i, cmd_in);
        cmd.output(o, cmd_out);
        let result = dev.ioctl(&mut cmd);
        drop(cmd);
        firmware_result(op, result, cmd_out)
    }
}

#[derive(Debug, Clone, Copy)]
enum Method {
    Query,
    Modify,
}

impl DevxObj {
    /// The kernel's handle of the object.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Runs a PRM query command on the object, like `mlx5dv_devx_obj_query`.
    #[doc(alias = "mlx5dv_devx_obj_query")]
    pub fn query(&self, cmd_in: &[u8], cmd_out: &mut [u8]) -> Result<()> {
        self.devx
            .run_on(self.handle, Method::Query, cmd_in, cmd_out)
    }

    /// Runs a PRM modify command on the object, like `mlx5dv_devx_obj_modify`.
    /// A UMEM of this context the command names (a CQ moved to a new buffer
    /// by `MODIFY_CQ`) stays registered until the object is destroyed, as
    /// for [`Devx::obj_create`].
    #[doc(alias = "mlx5dv_devx_obj_modify")]
    pub fn modify(&self, cmd_in: &[u8], cmd_out: &mut [u8]) -> Result<()> {
        let named = named_by(&self.devx, cmd_in);
        self.devx
            .run_on(self.handle, Method::Modify, cmd_in, cmd_out)?;
        if !named.is_empty() {
            let mut uses = self.uses.lock().unwrap_or_else(PoisonError::into_inner);
            uses.0.extend(named);
        }
        Ok(())
    }

    /// Starts a PRM query whose answer (`out_len` bytes of output mailbox,
    /// with `wr_id`) arrives on `comp`, like `mlx5dv_devx_obj_query_async`.
    /// `EAGAIN` when more than 1 MiB of answers wait to be read.
    #[doc(alias = "mlx5dv_devx_obj_query_async")]
    pub fn query_async(
        &self,
        cmd_in: &[u8],
        out_len: u16,
        wr_id: u64,
        comp: &DevxCmdComp,
    ) -> Result<()> {
        comp.query_async(self.handle, cmd_in, out_len, wr_id)
    }

    /// Destroys the object, like `mlx5dv_devx_obj_destroy`. When the
    /// firmware or the kernel refuses (objects that use it still exist),
    /// the object comes back in the error, unchanged and usable, to
    /// destroy again once its users are gone.
    #[doc(alias = "mlx5dv_devx_obj_destroy")]
    pub fn destroy(mut self) -> Result<(), DestroyError<Self>> {
        match self.destroy_kernel() {
            Ok(()) => Ok(()),
            Err(e) => Err(DestroyError::new(self, e)),
        }
    }

    fn destroy_kernel(&mut self) -> Result<()> {
        if self.destroyed {
            return Ok(());
        }
        const OP: &str = "MLX5_IB_METHOD_DEVX_OBJ_DESTROY";
        let dev = self.devx.device();
        let mut cmd = dev.ioctl_cmd(
            abi::MLX5_IB_OBJECT_DEVX_OBJ,
            abi::MLX5_IB_METHOD_DEVX_OBJ_DESTROY,
        );
        cmd.object(abi::MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE, self.handle);
        match dev.ioctl(&mut cmd) {
            // EIO: the device is gone, and the kernel destroyed everything.
            Ok(()) | Err(Errno::EIO) => {
                self.destroyed = true;
                Ok(())
            }
            Err(e) => Err(Error::sys(OP, e).with_detail(
                "the firmware or the kernel refused to destroy the object; objects that \
                 use it (a QP on this CQ, an MKEY on this UMEM) must be destroyed first",
            )),
        }
    }
}

impl Drop for DevxObj {
    fn drop(&mut self) {
        // Best effort: an object the firmware refuses to destroy now is
        // destroyed by the kernel when the context is closed.
        let _ = self.destroy_kernel();
    }
}

/// An [`ErrorKind::InvalidArgument`] error of `op`.
pub(super) fn invalid(op: &'static str, detail: impl Into<String>) -> Error {
    Error::new(op, ErrorKind::InvalidArgument, detail.into())
}
