//! Asynchronous DevX commands: a command completion fd
//! (`MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD`, `mlx5dv_devx_create_cmd_comp`) on
//! which the answers of [`DevxObj::query_async`](super::DevxObj::query_async)
//! arrive.
//!
//! Kernel side (`devx.c` `devx_async_cmd_event_read`): each read returns
//! one answer, `struct mlx5_ib_uapi_devx_async_cmd_hdr` (the `wr_id`) and
//! then the output mailbox of the length the query asked for; a buffer too
//! small for it is `ENOSPC` and the answer stays queued; an empty fd is
//! `EAGAIN` when non-blocking, and `EIO` (blocking) or `EAGAIN` forever with
//! `POLLRDHUP` (non-blocking) once the fd's object is destroyed. The
//! firmware's status is inside the answer. A query that would put more
//! than 1 MiB of answers in waiting is refused with `EAGAIN`.
//!
//! This API sizes its own read buffer for the longest answer it asked for,
//! so a read never fails for want of room.

use std::{
    os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd},
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use super::{cmd::check_mailboxes, obj::invalid, Devx};
use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    event_fd::{EventFd, Wait},
    sys::Errno,
};

/// Bytes of the answer header (`struct mlx5_ib_uapi_devx_async_cmd_hdr`).
const HDR: usize = 8;

/// A command completion fd (`struct mlx5dv_devx_cmd_comp`).
#[derive(Debug)]
pub struct DevxCmdComp {
    devx: Devx,
    fd: EventFd,
    /// The longest output any query on this fd asked for.
    max_out: AtomicU32,
}

/// The answer of an asynchronous query.
///
/// rdma-core's `struct mlx5dv_devx_async_cmd_hdr` followed by the out data.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AsyncCmdResult {
    /// The `wr_id` the query was started with.
    pub wr_id: u64,
    /// The output mailbox (its header holds the firmware's status).
    pub out: Vec<u8>,
}

impl Devx {
    /// Creates a command completion fd, like `mlx5dv_devx_create_cmd_comp`.
    #[doc(alias = "mlx5dv_devx_create_cmd_comp")]
    pub fn create_cmd_comp(&self) -> Result<DevxCmdComp> {
        const OP: &str = "MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC";
        let dev = self.device();
        let mut cmd = dev.ioctl_cmd(
            abi::MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD,
            abi::MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC,
        );
        let at = cmd.new_fd(abi::MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE);
        dev.ioctl(&mut cmd).map_err(|e| Error::sys(OP, e))?;
        let fd = cmd
            .take_fd(at)
            .ok_or_else(|| Error::new(OP, ErrorKind::Malformed, "the kernel returned no fd"))?;
        Ok(DevxCmdComp {
            devx: self.clone(),
            fd: EventFd::new(self.kernel(), fd, "DevX command completion fd"),
            max_out: AtomicU32::new(0),
        })
    }
}

/// The fd, to `poll`/`epoll` for readiness before reading an answer.
///
/// Never `read` it yourself: an answer read that way is gone for the
/// library, and the query that asked for it never gets its result.
impl AsFd for DevxCmdComp {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for DevxCmdComp {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_fd().as_raw_fd()
    }
}

impl DevxCmdComp {
    /// `OBJ_ASYNC_QUERY` on the object with kernel handle `handle`.
    pub(super) fn query_async(
        &self,
        handle: u32,
        cmd_in: &[u8],
        out_len: u16,
        wr_id: u64,
    ) -> Result<()> {
        const OP: &str = "MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY";
        if usize::from(out_len) < super::cmd::HEADER_LEN {
            return Err(invalid(
                OP,
                format!("an output of {out_len} bytes cannot hold the 16-byte PRM header"),
            ));
        }
        check_mailboxes(OP, cmd_in, &[0; super::cmd::HEADER_LEN])?;
        self.max_out
            .fetch_max(u32::from(out_len), Ordering::Relaxed);
        let dev = self.devx.device();
        let mut cmd = dev.ioctl_cmd(
            abi::MLX5_IB_OBJECT_DEVX_OBJ,
            abi::MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY,
        );
        cmd.object(abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE, handle);
        cmd.input(abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN, cmd_in);
        cmd.const_in(
            abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN,
            u64::from(out_len),
        );
        cmd.fd(abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD, self.fd.as_fd());
        cmd.input_u64(abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID, wr_id);
        dev.ioctl(&mut cmd).map_err(|e| match e {
            Errno::EAGAIN => Error::sys(OP, e)
                .with_detail("more than 1 MiB of answers are waiting on this fd: read some first"),
            e => Error::sys(OP, e),
        })
    }

    /// The next answer, waiting for one; like `mlx5dv_devx_get_async_cmd_comp`.
    #[doc(alias = "mlx5dv_devx_get_async_cmd_comp")]
    pub fn get(&self) -> Result<AsyncCmdResult> {
        self.next(Wait::Forever)?.ok_or_else(|| {
            Error::new(
                "read DevX command completion fd",
                ErrorKind::Malformed,
                "no answer",
            )
        })
    }

    /// The next answer, waiting at most `timeout` (`None`: forever).
    pub fn get_timeout(&self, timeout: Option<Duration>) -> Result<Option<AsyncCmdResult>> {
        self.next(Wait::timeout(timeout))
    }

    /// The next answer if one is queued.
    pub fn try_get(&self) -> Result<Option<AsyncCmdResult>> {
        self.next(Wait::Never)
    }

    fn next(&self, wait: Wait) -> Result<Option<AsyncCmdResult>> {
        let len = HDR + self.max_out.load(Ordering::Relaxed).max(16) as usize;
        let mut buf = vec![0u8; len];
        let got = self.read_into_wait(&mut buf, wait)?;
        Ok(got.map(|(wr_id, n)| AsyncCmdResult {
            wr_id,
            out: buf[HDR..HDR + n].to_vec(),
        }))
    }

    /// Reads the next answer into `buf` (the 8-byte header, then the
    /// output mailbox), waiting at most `timeout` (`None`: forever); returns
    /// the `wr_id` and the length of the output. A `buf` too small for the
    /// answer is an error naming the size needed, and the answer stays
    /// queued.
    pub fn read_into(
        &self,
        buf: &mut [u8],
        timeout: Option<Duration>,
    ) -> Result<Option<(u64, usize)>> {
        self.read_into_wait(buf, Wait::timeout(timeout))
    }

    /// One `read(2)` of the fd into `buf`, answered as the kernel answers
    /// it, which is what `mlx5dv_devx_get_async_cmd_comp` does
    /// (`devx_async_cmd_event_read`): the answer's length (the 8-byte
    /// header and the output); `ENOSPC` and the answer kept when `buf` is
    /// too small; with nothing queued, a wait in the kernel, or `EAGAIN`
    /// when the fd is `O_NONBLOCK`; `EIO` (blocking) or `EAGAIN`
    /// (non-blocking) once the fd's object is destroyed. Nothing is
    /// checked or retried here: the error's [`Error::errno`] is the
    /// kernel's.
    pub fn read_once(&self, buf: &mut [u8]) -> Result<usize> {
        self.fd
            .kernel()
            .read(self.fd.as_fd(), buf)
            .map_err(|e| Error::sys("read DevX command completion fd", e))
    }

    fn read_into_wait(&self, buf: &mut [u8], wait: Wait) -> Result<Option<(u64, usize)>> {
        const OP: &str = "read DevX command completion fd";
        let needed = HDR + self.max_out.load(Ordering::Relaxed) as usize;
        let got = self.fd.next(wait, OP, |k, fd| k.read(fd, &mut *buf), Some);
        match got {
            Err(e) if e.kernel_errno() == Some(Errno::ENOSPC) => Err(e.with_detail(format!(
                "a buffer of {} bytes is too small for the answer (8 bytes of wr_id and the \
                 output length the query asked for: up to {needed} on this fd); the answer \
                 stays queued",
                buf.len()
            ))),
            Err(e) => Err(e),
            Ok(None) => Ok(None),
            Ok(Some(n)) => match buf.get(..n) {
                Some(answer) => decode_answer(answer).map(Some),
                None => Err(Error::new(
                    OP,
                    ErrorKind::Malformed,
                    format!("a read of {n} bytes into a buffer of {}", buf.len()),
                )),
            },
        }
    }
}

/// Decodes one answer as a read returned it: the `wr_id` of its header
/// (`struct mlx5_ib_uapi_devx_async_cmd_hdr`) and the length of the output
/// mailbox that follows it.
pub(crate) fn decode_answer(answer: &[u8]) -> Result<(u64, usize)> {
    match answer.split_first_chunk::<HDR>() {
        Some((wr_id, out)) => Ok((u64::from_ne_bytes(*wr_id), out.len())),
        None => Err(Error::new(
            "read DevX command completion fd",
            ErrorKind::Malformed,
            format!(
                "an answer of {} bytes, shorter than its {HDR}-byte header",
                answer.len()
            ),
        )),
    }
}
