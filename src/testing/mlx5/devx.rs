//! DevX in the model: the kernel side of `drivers/infiniband/hw/mlx5/devx.c`
//! (Linux 6.1 and later) and a small firmware behind it.
//!
//! Kernel behaviour played here, method by method:
//! - every method's attributes are checked against its spec (kind and
//!   presence; an unknown mandatory attribute is `EPROTONOSUPPORT`);
//! - without a DevX uid (a context opened without `MLX5_IB_ALLOC_UCTX_DEVX`)
//!   object create/modify/query, UMEM registration and subscriptions are
//!   `EINVAL`, the general command accepts only the whitelisted
//!   `QUERY_HCA_CAP`; `QUERY_EQN`, `QUERY_UAR` and the fd allocations need
//!   no uid;
//! - a non-zero `vhca_tunnel_id` is `EINVAL`; each method takes only its own
//!   class of opcode (create, modify, query, general), others are `EINVAL`;
//!   modify and query take any object of the context whose PRM id is the
//!   command's (DevX objects and verbs QPs, CQs, SRQs);
//! - `OBJ_ASYNC_QUERY` queues its answer on the command fd (`wr_id` and
//!   `OUT_LEN` bytes of output), `EAGAIN` past 1 MiB waiting; reads follow
//!   `devx_async_cmd_event_read`: `ENOSPC` and the answer kept when the
//!   buffer is short, `EAGAIN` / blocking / `EIO` once destroyed;
//! - event channels follow `devx_async_event_read`: `EOVERFLOW` first (data
//!   mode, after a failed allocation), then `EAGAIN` / blocking / `EIO`
//!   once destroyed, a buffer shorter than the record is `EINVAL` and the
//!   event kept; `OMIT_DATA` coalesces the events of a subscription;
//! - subscriptions: the channel fd, an optional DevX object, 1 to 16 event
//!   types valid for the object (or unaffiliated), a cookie or an eventfd
//!   number (both: `EINVAL`); one entry per type;
//! - the firmware answers the commands below, and fails others with
//!   `BAD_OP_ERR`; a failed command is `EREMOTEIO` with the output mailbox
//!   copied back, or (`Options::legacy_devx_errors`, kernels before 5.19)
//!   an errno translated from the status and no mailbox;
//! - `UMEM_DEREG` is the firmware's `DESTROY_UMEM` and nothing else: the
//!   kernel keeps no count of a UMEM's users and unpins its pages only when
//!   firmware accepts (`devx_umem_cleanup` returns `mlx5_cmd_exec`'s error
//!   and leaves the UMEM registered), so the firmware's own reference is
//!   what keeps memory an object uses pinned. The model's firmware refuses
//!   to destroy a UMEM a DevX object's create command named (the UMEM ids
//!   of `CREATE_CQ` and `CREATE_QP`, `devx_fw::umem_ids`) until that object
//!   is destroyed, with `BAD_RES_STATE`, which `mlx5_cmd_exec` turns into
//!   `EINVAL` (`mlx5_cmd_check`, `cmd_status_to_err`; the deregistration
//!   has no output mailbox, so no kernel version returns `EREMOTEIO` here).
//!   The kernel's teardown is written for destroys firmware refuses while
//!   other objects depend on them (`rdma_core.c` `uverbs_destroy_ufile_hw`
//!   retries the context's objects until a pass makes no progress), and
//!   rdma-core's DevX tests destroy in dependency order ("Objects closure
//!   order is important, and must be done manually in DevX",
//!   `tests/mlx5_base.py`), but no public source shows `DESTROY_UMEM`
//!   refused or gives its status (see `devx_fw::BAD_RES_STATE`; the
//!   hardware suite reports the real answer, and the library does not rely
//!   on it: `providers/mlx5/devx/umem.rs`);
//! - a UAR object (`kernel.rs`, `UAR_OBJ_DESTROY`) is never refused, a
//!   DevX QP or CQ on it or not: `mmap_obj_cleanup` returns 0, and the
//!   firmware's `DEALLOC_UAR` waits for the last mapping of the page
//!   (`mlx5_ib_mmap_free`), its answer ignored.
//!
//! The fds handed out (command completion fds, event channels) are the read
//! ends of real pipes: the model writes a byte per queued record and closes
//! the write end when the queue is destroyed, so `poll` and `epoll` on them
//! behave as on the kernel's (readable while records wait, hung up once
//! destroyed); reads go to the model ([`FakeKernel::on_read_fd`]).
//!
//! Tests drive the firmware side with [`Mlx5Model::devx_raise_event`],
//! [`Mlx5Model::devx_fail_event_allocs`] and [`Mlx5Model::devx_destroy_fds`].
//!
//! [`FakeKernel::on_read_fd`]: crate::testing::kernel::FakeKernel::on_read_fd
//! [`Mlx5Model::devx_raise_event`]: super::Mlx5Model::devx_raise_event
//! [`Mlx5Model::devx_fail_event_allocs`]: super::Mlx5Model::devx_fail_event_allocs
//! [`Mlx5Model::devx_destroy_fds`]: super::Mlx5Model::devx_destroy_fds

use std::{
    collections::{HashMap, HashSet, VecDeque},
    fs::File,
    io::Write as _,
    os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
    sync::{Arc, Condvar, Mutex, MutexGuard},
};

use super::{
    devx_fw::{self, BAD_PARAM, BAD_QP_STATE, BAD_RES_STATE},
    hca_cap,
    kernel::{lock, Shared},
    objects,
};
use crate::{
    abi,
    ioctl::{AttrBuf, IoctlCmd},
    sys::Errno,
    testing::kernel::FakeKernel,
};

/// Most answer bytes an async command fd holds (`MAX_ASYNC_BYTES_IN_USE`).
const MAX_ASYNC_BYTES: usize = 1 << 20;
/// Most event types one subscription names (`MAX_NUM_EVENTS`).
const MAX_EVENTS: usize = 16;

/// PRM opcodes (`mlx5_ifc.h`) the model's firmware knows, by class.
pub(crate) mod op {
    pub(crate) const QUERY_HCA_CAP: u16 = 0x100;
    pub(crate) const CREATE_MKEY: u16 = 0x200;
    pub(crate) const QUERY_MKEY: u16 = 0x201;
    pub(crate) const CREATE_CQ: u16 = 0x400;
    pub(crate) const QUERY_CQ: u16 = 0x402;
    pub(crate) const MODIFY_CQ: u16 = 0x403;
    pub(crate) const CREATE_QP: u16 = 0x500;
    pub(crate) const RST2INIT_QP: u16 = 0x502;
    pub(crate) const INIT2RTR_QP: u16 = 0x503;
    pub(crate) const RTR2RTS_QP: u16 = 0x504;
    pub(crate) const QP_2ERR: u16 = 0x507;
    pub(crate) const QP_2RST: u16 = 0x50a;
    pub(crate) const QUERY_QP: u16 = 0x50b;
    pub(crate) const CREATE_SRQ: u16 = 0x700;
    pub(crate) const QUERY_SRQ: u16 = 0x702;
    pub(crate) const ARM_RQ: u16 = 0x703;
    pub(crate) const ALLOC_PD: u16 = 0x800;
    pub(crate) const CREATE_GENERAL_OBJECT: u16 = 0xa00;
    pub(crate) const MODIFY_GENERAL_OBJECT: u16 = 0xa01;
    pub(crate) const QUERY_GENERAL_OBJECT: u16 = 0xa02;
}

/// The first CQN/QPN of the CQs and QPs the model runs for DevX
/// (`devx_fw.rs`), above those of verbs objects.
const EXECUTED_IDS: u32 = 0x00c0_0000;

/// `MLX5_CMD_STAT_BAD_OP_ERR` (the other statuses: `devx_fw.rs`).
const BAD_OP: u8 = 0x02;

/// `MLX5_EVENT_TYPE_*` the model's device reports.
pub(crate) mod ev {
    pub(crate) const COMP: u16 = 0x00;
    pub(crate) const PATH_MIG: u16 = 0x01;
    pub(crate) const COMM_EST: u16 = 0x02;
    pub(crate) const SQ_DRAINED: u16 = 0x03;
    pub(crate) const CQ_ERROR: u16 = 0x04;
    pub(crate) const WQ_CATAS_ERROR: u16 = 0x05;
    pub(crate) const PORT_CHANGE: u16 = 0x09;
    pub(crate) const SRQ_LAST_WQE: u16 = 0x13;
    pub(crate) const SRQ_RQ_LIMIT: u16 = 0x14;
    pub(crate) const PORT_MODULE: u16 = 0x16;
}

/// Affiliated events the device's `event_cap` lists (besides completions).
const AFFILIATED: &[u16] = &[
    ev::PATH_MIG,
    ev::COMM_EST,
    ev::SQ_DRAINED,
    ev::CQ_ERROR,
    ev::WQ_CATAS_ERROR,
    ev::SRQ_LAST_WQE,
    ev::SRQ_RQ_LIMIT,
];
/// Unaffiliated events the device's `event_cap` lists.
const UNAFFILIATED: &[u16] = &[ev::PORT_CHANGE, ev::PORT_MODULE];

/// The DevX state of the model's one user context.
#[derive(Debug, Default)]
pub(crate) struct Devx {
    /// DevX objects by kernel handle.
    objs: HashMap<u32, Obj>,
    /// UMEMs by kernel handle.
    umems: HashMap<u32, Umem>,
    cmd_fds: HashMap<RawFd, Arc<Queue>>,
    channels: HashMap<RawFd, Arc<Channel>>,
    subs: Vec<Sub>,
    next_id: u32,
    next_sub: usize,
    /// Data-mode event deliveries still to fail (each sets the channel's
    /// overflow flag instead of queuing).
    fail_allocs: u32,
}

/// A DevX object: the PRM create opcode that made it, its id, and the
/// UMEMs (by id) its create command named, which firmware will not destroy
/// before it.
#[derive(Debug, Clone)]
struct Obj {
    create: u16,
    obj_type: u16,
    id: u32,
    umems: Vec<u32>,
}

#[derive(Debug, Clone, Copy)]
#[allow(dead_code)] // kept for inspection in failures
struct Umem {
    id: u32,
    addr: u64,
    len: u64,
    access: u64,
}

/// A subscription.
#[derive(Debug)]
struct Sub {
    id: usize,
    channel: Arc<Channel>,
    /// The DevX object (kernel handle) it is for; `None`: unaffiliated.
    obj: Option<u32>,
    event: u16,
    cookie: u64,
    /// An eventfd signalled instead of queuing (a dup of the one given).
    eventfd: Option<Arc<OwnedFd>>,
}

/// A queue behind an fd the model handed out, with the pipe that carries
/// its readiness.
#[derive(Debug)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
    /// The pipe's write end: a byte per queued record; dropped when the
    /// queue is destroyed (the read end then polls hung up).
    pipe: Mutex<Option<File>>,
    /// The pipe's read end, as the model sees it (to take the bytes back).
    reader: File,
}

#[derive(Debug, Default)]
struct QueueState {
    records: VecDeque<Record>,
    /// Answer bytes waiting (command fds).
    bytes: usize,
    overflow: bool,
    destroyed: bool,
    /// Subscriptions with an event queued (OMIT_DATA coalescing).
    queued: HashSet<usize>,
}

#[derive(Debug, Clone)]
enum Record {
    /// Bytes as read (a command answer, or cookie + EQE), and the answer's
    /// output length (command fds).
    Bytes(Vec<u8>, usize),
    /// An OMIT_DATA event: the subscription and its cookie.
    Cookie(usize, u64),
}

#[derive(Debug)]
struct Channel {
    omit_data: bool,
    queue: Arc<Queue>,
}

impl Queue {
    /// A queue and the fd to hand out for it.
    fn new() -> Result<(Arc<Queue>, OwnedFd), Errno> {
        use nix::fcntl::{fcntl, FcntlArg, OFlag};
        use std::os::unix::fs::OpenOptionsExt;
        // The fd handed out is blocking, as the kernel makes it; the
        // model's own ends never block: the write end, and a second open
        // file of the read end (its own O_NONBLOCK, unlike a dup's).
        let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        fcntl(w.as_raw_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(format!("/proc/self/fd/{}", r.as_raw_fd()))
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        let q = Arc::new(Queue {
            state: Mutex::new(QueueState::default()),
            ready: Condvar::new(),
            pipe: Mutex::new(Some(File::from(w))),
            reader,
        });
        Ok((q, r))
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        lock(&self.state)
    }

    /// Queues a record (and its readiness byte).
    fn push(&self, st: &mut QueueState, r: Record) {
        st.records.push_back(r);
        if let Some(w) = lock(&self.pipe).as_mut() {
            let _ = w.write_all(&[1]);
        }
        self.ready.notify_all();
    }

    /// Takes a record's readiness byte back.
    fn consumed(&self) {
        let mut b = [0u8; 1];
        let _ = std::io::Read::read(&mut &self.reader, &mut b);
    }

    /// Destroys the queue as the kernel does when the fd's object goes:
    /// queued records freed, readers woken, the fd hung up.
    fn destroy(&self) {
        let mut st = self.lock();
        st.destroyed = true;
        st.records.clear();
        st.queued.clear();
        st.bytes = 0;
        drop(st);
        lock(&self.pipe).take();
        while {
            let mut b = [0u8; 64];
            matches!(std::io::Read::read(&mut &self.reader, &mut b), Ok(n) if n > 0)
        } {}
        self.ready.notify_all();
    }

    /// Waits for a record as the kernel's read does; `Ok` with the guard
    /// when one is queued.
    fn wait<'a>(
        &'a self,
        mut st: MutexGuard<'a, QueueState>,
        nonblocking: bool,
    ) -> Result<MutexGuard<'a, QueueState>, Errno> {
        while st.records.is_empty() {
            if nonblocking {
                return Err(Errno::EAGAIN);
            }
            if st.destroyed {
                return Err(Errno::EIO);
            }
            st = self.ready.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        Ok(st)
    }
}

/// `devx_async_event_read`.
fn read_event(c: &Channel, buf: &mut [u8], nonblocking: bool) -> Result<usize, Errno> {
    let mut st = c.queue.lock();
    if st.overflow {
        st.overflow = false;
        return Err(Errno::EOVERFLOW);
    }
    let mut st = c.queue.wait(st, nonblocking)?;
    let size = if c.omit_data { 8 } else { 72 };
    if buf.len() < size {
        return Err(Errno::EINVAL);
    }
    let Some(r) = st.records.pop_front() else {
        return Err(Errno::EAGAIN);
    };
    let n = match r {
        Record::Cookie(sub, cookie) => {
            st.queued.remove(&sub);
            buf[..8].copy_from_slice(&cookie.to_ne_bytes());
            8
        }
        Record::Bytes(b, _) => {
            buf[..b.len()].copy_from_slice(&b);
            b.len()
        }
    };
    drop(st);
    c.queue.consumed();
    Ok(n)
}

/// `devx_async_cmd_event_read`.
fn read_answer(q: &Queue, buf: &mut [u8], nonblocking: bool) -> Result<usize, Errno> {
    let st = q.lock();
    let mut st = q.wait(st, nonblocking)?;
    let len = match st.records.front() {
        Some(Record::Bytes(b, _)) => b.len(),
        _ => return Err(Errno::EAGAIN),
    };
    if len > buf.len() {
        return Err(Errno::ENOSPC);
    }
    let Some(Record::Bytes(b, out_len)) = st.records.pop_front() else {
        return Err(Errno::EAGAIN);
    };
    st.bytes = st.bytes.saturating_sub(out_len);
    buf[..len].copy_from_slice(&b);
    drop(st);
    q.consumed();
    Ok(len)
}

/// What an attribute must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An object handle (`len` 0, inline).
    Idr,
    NewIdr,
    Fd,
    NewFd,
    /// `PTR_IN` of at least this many bytes.
    In(usize),
    /// `PTR_IN` of exactly this many bytes (`UVERBS_ATTR_TYPE`).
    InExact(usize),
    /// `CONST_IN`: exactly 8 bytes inline.
    Const,
    /// `FLAGS_IN`: 4 or 8 bytes inline. The kernel declares it a `PTR_IN` of
    /// `UVERBS_ATTR_SIZE(sizeof(u32), sizeof(u64))`
    /// (include/rdma/uverbs_ioctl.h:568) and `uverbs_get_flags64` reads
    /// either width (core/uverbs_ioctl.c:655-665); libmlx5 sends a u32
    /// (`fill_attr_in_uint32`, providers/mlx5/verbs.c:5561 at v44.0).
    Flags,
    /// `PTR_OUT` of at least this many bytes.
    Out(usize),
    /// `RAW_FD`: the fd number inline, length 0
    /// (drivers/infiniband/core/uverbs_ioctl.c `uverbs_process_attr`,
    /// `UVERBS_ATTR_TYPE_RAW_FD`; rdma-core's `fill_attr_in_fd`).
    FdNum,
}

/// Checks a command's attributes against a method's spec, as the uverbs
/// core does before the handler runs: a mandatory attribute missing, or an
/// attribute of the wrong kind, is `EINVAL`; an attribute the method does
/// not know is `EPROTONOSUPPORT` when marked mandatory, ignored otherwise.
fn check_attrs(cmd: &IoctlCmd<'_>, spec: &[(u16, Kind, bool)]) -> Result<(), Errno> {
    for a in cmd.attrs() {
        let Some(&(_, kind, _)) = spec.iter().find(|(id, _, _)| *id == a.id) else {
            if a.flags & abi::UVERBS_ATTR_F_MANDATORY != 0 {
                return Err(Errno::EPROTONOSUPPORT);
            }
            continue;
        };
        let len = usize::from(a.len);
        let ok = match (kind, &a.buf) {
            (Kind::Idr, AttrBuf::Inline) => len == 0,
            (Kind::NewIdr, AttrBuf::NewObject) => true,
            (Kind::Fd, AttrBuf::Fd(_)) => true,
            (Kind::NewFd, AttrBuf::NewFd(_)) => true,
            (Kind::In(min), AttrBuf::In(_) | AttrBuf::Inline) => len >= min && len > 0,
            (Kind::InExact(n), AttrBuf::In(_) | AttrBuf::Inline) => len == n,
            (Kind::Const, AttrBuf::Inline) => len == 8,
            (Kind::Flags, AttrBuf::Inline) => len == 4 || len == 8,
            (Kind::Out(min), AttrBuf::Out(_)) => len >= min,
            (Kind::FdNum, AttrBuf::Inline) => len == 0,
            _ => false,
        };
        if !ok {
            return Err(Errno::EINVAL);
        }
    }
    for &(id, _, mandatory) in spec {
        if mandatory && cmd.find(id).is_none() {
            return Err(Errno::EINVAL);
        }
    }
    Ok(())
}

/// A `FLAGS_IN` attribute's value: a u32 or a u64 (`uverbs_get_flags64`).
fn flags_value(cmd: &IoctlCmd<'_>, id: u16) -> Option<u64> {
    let a = cmd.find(id)?;
    let v = cmd.input_value(id)?;
    Some(if a.len == 4 { v & 0xffff_ffff } else { v })
}

fn fd_of(cmd: &IoctlCmd<'_>, id: u16) -> Option<RawFd> {
    cmd.find(id).map(|a| a.to_raw().data as RawFd)
}

impl Shared {
    fn devx(&self) -> MutexGuard<'_, Devx> {
        lock(&self.devx)
    }

    /// Whether the user context has a DevX uid.
    fn has_uid(&self) -> bool {
        lock(&self.hca).devx
    }

    fn fake(&self) -> Option<Arc<FakeKernel>> {
        self.kernel.upgrade()
    }

    /// What the capability pages describe.
    fn caps(&self) -> hca_cap::Caps {
        hca_cap::Caps {
            max_cqe_version: u32::from(self.options.cqe_version),
            bf_reg_size: self.options.bf_reg_size,
            log_max_qp_sz: objects::LOG_MAX_QP_SZ,
            log_max_cq_sz: objects::LOG_MAX_CQ_SZ,
            log_max_srq_sz: objects::LOG_MAX_SRQ_SZ,
        }
    }
}

/// Handles the DevX objects' methods.
pub(crate) fn ioctl(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    use Kind::*;
    const HDR: usize = 16;
    match (cmd.object_id, cmd.method_id) {
        (abi::MLX5_IB_OBJECT_DEVX, abi::MLX5_IB_METHOD_DEVX_OTHER) => {
            check_attrs(
                cmd,
                &[
                    (abi::MLX5_IB_ATTR_DEVX_OTHER_CMD_IN, In(HDR), true),
                    (abi::MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT, Out(HDR), true),
                ],
            )?;
            let cmd_in = input(cmd, abi::MLX5_IB_ATTR_DEVX_OTHER_CMD_IN)?;
            let opcode = header(&cmd_in)?;
            // The whitelist uid serves QUERY_HCA_CAP without a DevX uid.
            if !s.has_uid() && opcode != op::QUERY_HCA_CAP {
                return Err(Errno::EINVAL);
            }
            if opcode != op::QUERY_HCA_CAP {
                return Err(Errno::EINVAL); // not a general command
            }
            let mut out = vec![0u8; out_len(cmd, abi::MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT)];
            // `query_hca_cap_in`'s op_mod: bits 0x30..0x40 (`mlx5_ifc.h`).
            let op_mod = u16::from_be_bytes([cmd_in[6], cmd_in[7]]);
            hca_cap::answer(&s.caps(), op_mod, &mut out);
            cmd.write_output(abi::MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT, &out);
            Ok(())
        }
        (abi::MLX5_IB_OBJECT_DEVX, abi::MLX5_IB_METHOD_DEVX_QUERY_EQN) => {
            check_attrs(
                cmd,
                &[
                    (abi::MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC, InExact(4), true),
                    (abi::MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN, Out(4), true),
                ],
            )?;
            let vec = cmd
                .input_value(abi::MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC)
                .ok_or(Errno::EINVAL)? as u32;
            // One completion vector (the context's num_comp_vectors).
            if vec != 0 {
                return Err(Errno::EINVAL);
            }
            cmd.write_output(abi::MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN, &EQN.to_ne_bytes());
            Ok(())
        }
        (abi::MLX5_IB_OBJECT_DEVX, abi::MLX5_IB_METHOD_DEVX_QUERY_UAR) => {
            check_attrs(
                cmd,
                &[
                    (abi::MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX, InExact(4), true),
                    (abi::MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX, Out(4), true),
                ],
            )?;
            let idx = cmd
                .input_value(abi::MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX)
                .ok_or(Errno::EINVAL)? as u32;
            // The firmware UAR of the context's system page `idx`, if it
            // was allocated (static pages, and pages mapped with ALLOC_WC).
            let dev_idx = lock(&s.books)
                .uars
                .uctx
                .sys_pages
                .get(idx as usize)
                .copied()
                .flatten()
                .ok_or(Errno::EINVAL)?;
            cmd.write_output(
                abi::MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX,
                &dev_idx.to_ne_bytes(),
            );
            Ok(())
        }
        (abi::MLX5_IB_OBJECT_DEVX, abi::MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT) => subscribe(s, cmd),
        (abi::MLX5_IB_OBJECT_DEVX_OBJ, abi::MLX5_IB_METHOD_DEVX_OBJ_CREATE) => obj_create(s, cmd),
        (abi::MLX5_IB_OBJECT_DEVX_OBJ, abi::MLX5_IB_METHOD_DEVX_OBJ_DESTROY) => {
            check_attrs(
                cmd,
                &[(abi::MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE, Idr, true)],
            )?;
            let h = cmd
                .input_value(abi::MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE)
                .ok_or(Errno::EINVAL)? as u32;
            let mut d = s.devx();
            let o = d.objs.remove(&h).ok_or(Errno::EINVAL)?;
            // The object's subscriptions go with it.
            d.subs.retain(|sub| sub.obj != Some(h));
            if o.id >= EXECUTED_IDS {
                let mut hca = lock(&s.hca);
                hca.qps.remove(&o.id);
                hca.cqs.remove(&o.id);
            }
            Ok(())
        }
        (abi::MLX5_IB_OBJECT_DEVX_OBJ, abi::MLX5_IB_METHOD_DEVX_OBJ_QUERY) => {
            obj_run(s, cmd, Class::Query)
        }
        (abi::MLX5_IB_OBJECT_DEVX_OBJ, abi::MLX5_IB_METHOD_DEVX_OBJ_MODIFY) => {
            obj_run(s, cmd, Class::Modify)
        }
        (abi::MLX5_IB_OBJECT_DEVX_OBJ, abi::MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY) => {
            async_query(s, cmd)
        }
        (abi::MLX5_IB_OBJECT_DEVX_UMEM, abi::MLX5_IB_METHOD_DEVX_UMEM_REG) => umem_reg(s, cmd),
        (abi::MLX5_IB_OBJECT_DEVX_UMEM, abi::MLX5_IB_METHOD_DEVX_UMEM_DEREG) => {
            check_attrs(
                cmd,
                &[(abi::MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE, Idr, true)],
            )?;
            let h = cmd
                .input_value(abi::MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE)
                .ok_or(Errno::EINVAL)? as u32;
            let mut d = s.devx();
            let id = d.umems.get(&h).ok_or(Errno::EINVAL)?.id;
            if d.objs.values().any(|o| o.umems.contains(&id)) {
                // DESTROY_UMEM refused: the UMEM stays registered, its
                // pages pinned (`devx_umem_cleanup`).
                return Err(status_errno(BAD_RES_STATE));
            }
            d.umems.remove(&h);
            Ok(())
        }
        (abi::MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD, abi::MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC) => {
            check_attrs(
                cmd,
                &[(
                    abi::MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE,
                    NewFd,
                    true,
                )],
            )?;
            let (q, fd) = Queue::new()?;
            let raw = fd.as_raw_fd();
            let fake = s.fake().ok_or(Errno::EIO)?;
            let reader = q.clone();
            fake.on_read_fd(raw, move |buf, nonblocking| {
                read_answer(&reader, buf, nonblocking)
            });
            s.devx().cmd_fds.insert(raw, q);
            cmd.set_new_fd(abi::MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE, fd);
            Ok(())
        }
        (
            abi::MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD,
            abi::MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC,
        ) => {
            check_attrs(
                cmd,
                &[
                    (
                        abi::MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE,
                        NewFd,
                        true,
                    ),
                    (
                        abi::MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS,
                        Flags,
                        true,
                    ),
                ],
            )?;
            let flags = flags_value(cmd, abi::MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS)
                .ok_or(Errno::EINVAL)?;
            let omit = u64::from(abi::MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA);
            if flags & !omit != 0 {
                return Err(Errno::EINVAL);
            }
            let (queue, fd) = Queue::new()?;
            let raw = fd.as_raw_fd();
            let channel = Arc::new(Channel {
                omit_data: flags & omit != 0,
                queue,
            });
            let fake = s.fake().ok_or(Errno::EIO)?;
            let reader = channel.clone();
            fake.on_read_fd(raw, move |buf, nonblocking| {
                read_event(&reader, buf, nonblocking)
            });
            s.devx().channels.insert(raw, channel);
            cmd.set_new_fd(abi::MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE, fd);
            Ok(())
        }
        _ => Err(Errno::EPROTONOSUPPORT),
    }
}

/// The EQN of completion vector 0.
pub(crate) const EQN: u32 = 0x19;

fn input(cmd: &IoctlCmd<'_>, id: u16) -> Result<Vec<u8>, Errno> {
    cmd.input_bytes(id).ok_or(Errno::EINVAL)
}

fn out_len(cmd: &IoctlCmd<'_>, id: u16) -> usize {
    cmd.find(id).map_or(0, |a| usize::from(a.len))
}

/// The opcode of a command, after the checks every method makes
/// (`vhca_tunnel_id` zero).
fn header(cmd_in: &[u8]) -> Result<u16, Errno> {
    if cmd_in.len() < 16 || cmd_in[4..6] != [0, 0] {
        return Err(Errno::EINVAL);
    }
    Ok(u16::from_be_bytes([cmd_in[0], cmd_in[1]]))
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Query,
    Modify,
}

/// The command class of an opcode, and the kind of object it is about.
fn class_of(opcode: u16) -> Option<(Class, u16)> {
    Some(match opcode {
        op::QUERY_CQ => (Class::Query, op::CREATE_CQ),
        op::MODIFY_CQ => (Class::Modify, op::CREATE_CQ),
        op::QUERY_QP => (Class::Query, op::CREATE_QP),
        op::RST2INIT_QP | op::INIT2RTR_QP | op::RTR2RTS_QP | op::QP_2ERR | op::QP_2RST => {
            (Class::Modify, op::CREATE_QP)
        }
        op::QUERY_SRQ => (Class::Query, op::CREATE_SRQ),
        op::ARM_RQ => (Class::Modify, op::CREATE_SRQ),
        op::QUERY_MKEY => (Class::Query, op::CREATE_MKEY),
        op::QUERY_GENERAL_OBJECT => (Class::Query, op::CREATE_GENERAL_OBJECT),
        op::MODIFY_GENERAL_OBJECT => (Class::Modify, op::CREATE_GENERAL_OBJECT),
        _ => return None,
    })
}

/// The errno the kernel makes of a firmware status when it translates one
/// (`mlx5_core` `cmd.c` `cmd_status_to_err`, through `mlx5_cmd_check`;
/// statuses `MLX5_CMD_STAT_*` of `include/linux/mlx5/device.h`).
fn status_errno(status: u8) -> Errno {
    match status {
        // BAD_OP, BAD_PARAM, BAD_RES, BAD_RES_STATE, IX, BAD_QP_STATE,
        // BAD_PKT, BAD_SIZE_OUTS_CQES.
        BAD_OP | BAD_PARAM | 0x05 | BAD_RES_STATE | 0x0a | BAD_QP_STATE | 0x30 | 0x40 => {
            Errno::EINVAL
        }
        0x06 => Errno::EBUSY,  // RES_BUSY
        0x08 => Errno::ENOMEM, // LIM
        0x0f => Errno::EAGAIN, // NO_RES
        // INT_ERR, BAD_SYS_STATE, BAD_INP_LEN, BAD_OUTP_LEN, unknown.
        _ => Errno::EIO,
    }
}

/// Answers a command the firmware fails: `EREMOTEIO` and the mailbox, or
/// (legacy kernels) a translated errno alone.
fn firmware_fail(
    s: &Shared,
    cmd: &mut IoctlCmd<'_>,
    out_id: u16,
    status: u8,
    syndrome: u32,
) -> Result<(), Errno> {
    if s.options.legacy_devx_errors {
        return Err(status_errno(status));
    }
    let mut out = vec![0u8; out_len(cmd, out_id)];
    out[0] = status;
    out[4..8].copy_from_slice(&syndrome.to_be_bytes());
    cmd.write_output(out_id, &out);
    Err(Errno::EREMOTEIO)
}

/// `MLX5_IB_METHOD_DEVX_OBJ_CREATE`.
fn obj_create(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    use Kind::*;
    check_attrs(
        cmd,
        &[
            (abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE, NewIdr, true),
            (abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN, In(16), true),
            (abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT, Out(16), true),
        ],
    )?;
    let cmd_in = input(cmd, abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN)?;
    let opcode = header(&cmd_in)?;
    if !s.has_uid() {
        return Err(Errno::EINVAL);
    }
    let creates = [
        op::CREATE_CQ,
        op::CREATE_QP,
        op::CREATE_SRQ,
        op::CREATE_MKEY,
        op::ALLOC_PD,
        op::CREATE_GENERAL_OBJECT,
    ];
    if !creates.contains(&opcode) {
        return Err(Errno::EINVAL); // not a create command
    }
    let obj_type = u16::from_be_bytes([cmd_in[6], cmd_in[7]]);
    let out_id = abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT;
    // The firmware knows general objects of types below 0x100 only.
    if opcode == op::CREATE_GENERAL_OBJECT && obj_type >= 0x100 {
        return firmware_fail(s, cmd, out_id, BAD_PARAM, 0x7a4c_0000 | u32::from(obj_type));
    }
    let mut d = s.devx();
    d.next_id += 1;
    // CQs and QPs on UMEMs run on the model's HCA (`devx_fw.rs`), with
    // CQNs and QPNs of their own range; other objects are booked only.
    let executed = devx_fw::executes(opcode, &cmd_in);
    let id = if executed {
        EXECUTED_IDS + d.next_id
    } else {
        0x100 + d.next_id
    };
    // The UMEMs the command names (firmware reads the ids whatever the
    // caller set in the valid bits: `devx_set_umem_valid`).
    let mut umems: Vec<u32> = devx_fw::umem_ids(opcode, &cmd_in)
        .into_iter()
        .filter(|id| d.umems.values().any(|u| u.id == *id))
        .collect();
    umems.dedup();
    let mut books = lock(&s.books);
    let h = books.new_handle();
    if executed {
        // The context's PDs: verbs ones, and DevX ALLOC_PD objects (the
        // firmware's PDs either way; `alloc_pd_out.pd` is the id the
        // model answered, bits 0x48..0x60).
        let pdns: Vec<u32> = books
            .pds
            .iter()
            .map(|&p| super::kernel::pdn_of(p))
            .chain(
                d.objs
                    .values()
                    .filter(|o| o.create == op::ALLOC_PD)
                    .map(|o| o.id),
            )
            .collect();
        drop(books);
        let umems: Vec<(u32, u64, u64)> = d.umems.values().map(|u| (u.id, u.addr, u.len)).collect();
        let umem = |id: u32| umems.iter().find(|u| u.0 == id).map(|u| (u.1, u.2));
        let mut hca = lock(&s.hca);
        let made = if opcode == op::CREATE_CQ {
            devx_fw::create_cq(&hca, &cmd_in, h, &umem).map(|cq| {
                hca.cqs.insert(id, cq);
            })
        } else {
            devx_fw::create_qp(&hca, &cmd_in, h, &pdns, &umem).map(|qp| {
                hca.qps.insert(id, qp);
            })
        };
        drop(hca);
        if let Err((status, syndrome)) = made {
            drop(d);
            return firmware_fail(s, cmd, out_id, status, syndrome);
        }
    } else {
        drop(books);
    }
    d.objs.insert(
        h,
        Obj {
            create: opcode,
            obj_type,
            id,
            umems,
        },
    );
    drop(d);
    let mut out = vec![0u8; out_len(cmd, out_id)];
    out[8..12].copy_from_slice(&id.to_be_bytes());
    cmd.write_output(out_id, &out);
    cmd.set_new_object(abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE, h);
    Ok(())
}

/// The PRM id and creating opcode of the object a query or modify names:
/// a DevX object, or one of the context's verbs QPs, CQs, SRQs.
fn target(s: &Shared, handle: u32) -> Option<(u16, u16, u32)> {
    if let Some(o) = s.devx().objs.get(&handle) {
        return Some((o.create, o.obj_type, o.id));
    }
    let h = lock(&s.hca);
    if let Some((qpn, _)) = h.qps.iter().find(|(_, q)| q.handle == handle) {
        return Some((op::CREATE_QP, 0, *qpn));
    }
    if let Some((cqn, _)) = h.cqs.iter().find(|(_, c)| c.handle == handle) {
        return Some((op::CREATE_CQ, 0, *cqn));
    }
    if let Some((srqn, _)) = h.srqs.iter().find(|(_, q)| q.handle == handle) {
        return Some((op::CREATE_SRQ, 0, *srqn));
    }
    None
}

/// The checks of `OBJ_QUERY`/`OBJ_MODIFY`/`OBJ_ASYNC_QUERY`: the uid, the
/// opcode's class, and the object's PRM id in the command
/// (`devx_is_valid_obj_id`). Returns the answer the firmware gives.
fn run_checked(
    s: &Shared,
    handle: u32,
    cmd_in: &[u8],
    class: Class,
    len: usize,
) -> Result<Vec<u8>, Errno> {
    let opcode = header(cmd_in)?;
    if !s.has_uid() {
        return Err(Errno::EINVAL);
    }
    let Some((c, kind)) = class_of(opcode) else {
        return Err(Errno::EINVAL);
    };
    if c != class {
        return Err(Errno::EINVAL);
    }
    let (create, obj_type, id) = target(s, handle).ok_or(Errno::EINVAL)?;
    let named = if kind == op::CREATE_GENERAL_OBJECT {
        let t = u16::from_be_bytes([cmd_in[6], cmd_in[7]]);
        (t == obj_type).then(|| be32(cmd_in, 8))
    } else {
        Some(be32(cmd_in, 8) & 0x00ff_ffff)
    };
    if create != kind || named != Some(id) {
        return Err(Errno::EINVAL);
    }
    let mut out = vec![0u8; len];
    out[8..12].copy_from_slice(&id.to_be_bytes());
    Ok(out)
}

/// `OBJ_QUERY` / `OBJ_MODIFY`.
fn obj_run(s: &Shared, cmd: &mut IoctlCmd<'_>, class: Class) -> Result<(), Errno> {
    use Kind::*;
    let (h_id, in_id, out_id) = match class {
        Class::Query => (
            abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE,
            abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN,
            abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT,
        ),
        Class::Modify => (
            abi::MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE,
            abi::MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN,
            abi::MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT,
        ),
    };
    check_attrs(
        cmd,
        &[
            (h_id, Idr, true),
            (in_id, In(16), true),
            (out_id, Out(16), true),
        ],
    )?;
    let handle = cmd.input_value(h_id).ok_or(Errno::EINVAL)? as u32;
    let cmd_in = input(cmd, in_id)?;
    let out = run_checked(s, handle, &cmd_in, class, out_len(cmd, out_id))?;
    let opcode = header(&cmd_in)?;
    // The firmware refuses to move a QP to RESET from the model's side
    // (a failure the tests can provoke): BAD_QP_STATE.
    if opcode == op::QP_2RST {
        return firmware_fail(s, cmd, out_id, BAD_QP_STATE, 0x5aa5_0001);
    }
    // Other transitions move the QP (a DevX one or a verbs one) on the
    // HCA, checked as firmware checks them.
    if matches!(
        opcode,
        op::RST2INIT_QP | op::INIT2RTR_QP | op::RTR2RTS_QP | op::QP_2ERR
    ) {
        let qpn = be32(&cmd_in, 8) & 0x00ff_ffff;
        let made = devx_fw::modify_qp(&mut lock(&s.hca), qpn, opcode, &cmd_in);
        if let Err((status, syndrome)) = made {
            return firmware_fail(s, cmd, out_id, status, syndrome);
        }
    }
    cmd.write_output(out_id, &out);
    Ok(())
}

/// `OBJ_ASYNC_QUERY`.
fn async_query(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    use Kind::*;
    check_attrs(
        cmd,
        &[
            (abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE, Idr, true),
            (abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN, In(16), true),
            (abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD, Fd, true),
            (
                abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID,
                InExact(8),
                true,
            ),
            (abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN, Const, true),
        ],
    )?;
    let handle = cmd
        .input_value(abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE)
        .ok_or(Errno::EINVAL)? as u32;
    let cmd_in = input(cmd, abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN)?;
    let out_len = cmd
        .input_value(abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN)
        .ok_or(Errno::EINVAL)?;
    // A u16 constant (`uverbs_get_const`): larger is EINVAL.
    let out_len = u16::try_from(out_len).map_err(|_| Errno::EINVAL)? as usize;
    let wr_id = cmd
        .input_value(abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID)
        .ok_or(Errno::EINVAL)?;
    let fd = fd_of(cmd, abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD).ok_or(Errno::EINVAL)?;
    let q = s.devx().cmd_fds.get(&fd).cloned().ok_or(Errno::EINVAL)?;
    let out = run_checked(s, handle, &cmd_in, Class::Query, out_len.max(16))?;
    let mut st = q.lock();
    if st.bytes + out_len > MAX_ASYNC_BYTES {
        return Err(Errno::EAGAIN);
    }
    st.bytes += out_len;
    let mut rec = wr_id.to_ne_bytes().to_vec();
    rec.extend_from_slice(&out[..out_len]);
    q.push(&mut st, Record::Bytes(rec, out_len));
    Ok(())
}

/// `UMEM_REG`.
fn umem_reg(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    use Kind::*;
    check_attrs(
        cmd,
        &[
            (abi::MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE, NewIdr, true),
            (abi::MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR, InExact(8), true),
            (abi::MLX5_IB_ATTR_DEVX_UMEM_REG_LEN, InExact(8), true),
            (abi::MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS, Flags, false),
            (abi::MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID, Out(4), true),
            (abi::MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP, Const, false),
            (abi::MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD, FdNum, false),
        ],
    )?;
    if !s.has_uid() {
        return Err(Errno::EINVAL);
    }
    let v = |id| cmd.input_value(id).ok_or(Errno::EINVAL);
    let (addr, len) = (
        v(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR)?,
        v(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_LEN)?,
    );
    let access = flags_value(cmd, abi::MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS).unwrap_or(0);
    // `uverbs_get_flags32` with these bits (hw/mlx5/devx.c:2348-2353),
    // then `ib_check_mr_access` (devx.c:2211, include/rdma/ib_verbs.h:4296):
    // remote write needs local write.
    let allowed = u64::from(
        abi::IB_UVERBS_ACCESS_LOCAL_WRITE
            | abi::IB_UVERBS_ACCESS_REMOTE_WRITE
            | abi::IB_UVERBS_ACCESS_REMOTE_READ
            | abi::IB_UVERBS_ACCESS_RELAXED_ORDERING,
    );
    let lw = u64::from(abi::IB_UVERBS_ACCESS_LOCAL_WRITE);
    let rw = u64::from(abi::IB_UVERBS_ACCESS_REMOTE_WRITE);
    if access & !allowed != 0 || (access & rw != 0 && access & lw == 0) || len == 0 {
        return Err(Errno::EINVAL);
    }
    if let Some(p) = cmd.input_value(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP) {
        // The memory must be mappable with one of the page sizes offered.
        if p & 0x1000 == 0 && p & !0xfff == 0 {
            return Err(Errno::EINVAL);
        }
    }
    // A dma-buf registration: `ib_umem_dmabuf_get_pinned` takes the
    // address as the offset in the dma-buf, and `dma_buf_get` refuses an fd
    // that is not open (`EBADF`) or not a dma-buf (`EINVAL`).
    if let Some(a) = cmd.find(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD) {
        let fd = a.to_raw().data as i64 as RawFd;
        match std::fs::read_link(format!("/proc/self/fd/{fd}")) {
            Err(_) => return Err(Errno::EBADF),
            Ok(l) if !l.to_string_lossy().contains("dmabuf") => return Err(Errno::EINVAL),
            Ok(_) => {}
        }
    }
    let mut d = s.devx();
    d.next_id += 1;
    let id = 0x200 + d.next_id;
    let h = lock(&s.books).new_handle();
    d.umems.insert(
        h,
        Umem {
            id,
            addr,
            len,
            access,
        },
    );
    drop(d);
    cmd.write_output(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID, &id.to_ne_bytes());
    cmd.set_new_object(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE, h);
    Ok(())
}

/// Whether `eventfd_ctx_fdget` takes `fd`: `EBADF` for a number that is
/// not an open fd (`fdget`), `EINVAL` for a file that is no eventfd
/// (`eventfd_ctx_fileget`), fs/eventfd.c.
fn check_eventfd(fd: RawFd) -> Result<(), Errno> {
    match std::fs::read_link(format!("/proc/self/fd/{fd}")) {
        Err(_) => Err(Errno::EBADF),
        Ok(p) if p.to_string_lossy() == "anon_inode:[eventfd]" => Ok(()),
        Ok(_) => Err(Errno::EINVAL),
    }
}

/// `DEVX_SUBSCRIBE_EVENT`.
fn subscribe(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    use Kind::*;
    check_attrs(
        cmd,
        &[
            (abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE, Fd, true),
            (
                abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE,
                Idr,
                false,
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST,
                In(2),
                true,
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM,
                InExact(4),
                false,
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE,
                InExact(8),
                false,
            ),
        ],
    )?;
    if !s.has_uid() {
        return Err(Errno::EINVAL);
    }
    let channel_fd =
        fd_of(cmd, abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE).ok_or(Errno::EINVAL)?;
    let obj = cmd.input_value(abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE);
    let redirect = cmd.input_value(abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM);
    let cookie = cmd.input_value(abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE);
    if redirect.is_some() && cookie.is_some() {
        return Err(Errno::EINVAL);
    }
    let list = input(cmd, abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST)?;
    if list.len() % 2 != 0 {
        return Err(Errno::EINVAL);
    }
    let types: Vec<u16> = list
        .chunks_exact(2)
        .map(|c| u16::from_ne_bytes([c[0], c[1]]))
        .collect();
    if types.len() > MAX_EVENTS {
        return Err(Errno::EINVAL);
    }
    let mut d = s.devx();
    let channel = d.channels.get(&channel_fd).cloned().ok_or(Errno::EINVAL)?;
    let obj = match obj {
        Some(h) => {
            let h = h as u32;
            // The handle must be a DevX object (`MLX5_IB_OBJECT_DEVX_OBJ`).
            d.objs.get(&h).ok_or(Errno::EINVAL)?;
            Some(h)
        }
        None => None,
    };
    for &t in &types {
        let valid = match obj {
            Some(_) => t == ev::COMP || AFFILIATED.contains(&t),
            None => UNAFFILIATED.contains(&t),
        };
        if !valid || t > 255 {
            return Err(Errno::EINVAL);
        }
    }
    let eventfd = match redirect {
        Some(fd) => {
            let fd = fd as RawFd;
            check_eventfd(fd)?;
            // A dup keeps the eventfd for the subscription's life, as the
            // kernel's reference to it does.
            Some(Arc::new(owned(nix::unistd::dup(fd)?)))
        }
        None => None,
    };
    for t in types {
        d.next_sub += 1;
        let id = d.next_sub;
        d.subs.push(Sub {
            id,
            channel: channel.clone(),
            obj,
            event: t,
            cookie: cookie.unwrap_or(0),
            eventfd: eventfd.clone(),
        });
    }
    Ok(())
}

/// Takes ownership of an fd number `dup` returned.
fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by `dup`, is open, and nothing else
    // owns it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// The PRM id of the object an event is about (`devx_get_obj_id_from_event`),
/// and the create opcode of the kind of object it is.
fn event_object(eqe: &[u8; 64]) -> Option<(u32, u16)> {
    let t = u16::from(eqe[1]);
    Some(match t {
        ev::COMP => (be32(eqe, 56) & 0x00ff_ffff, op::CREATE_CQ),
        ev::CQ_ERROR => (be32(eqe, 32) & 0x00ff_ffff, op::CREATE_CQ),
        ev::PATH_MIG | ev::COMM_EST | ev::SQ_DRAINED | ev::WQ_CATAS_ERROR => {
            (be32(eqe, 56) & 0x00ff_ffff, op::CREATE_QP)
        }
        ev::SRQ_LAST_WQE | ev::SRQ_RQ_LIMIT => (be32(eqe, 56) & 0x00ff_ffff, op::CREATE_SRQ),
        _ => return None,
    })
}

impl Devx {
    /// Dispatches a device event as `devx_event_notifier` does; returns
    /// how many subscriptions it reached.
    pub(crate) fn raise(&mut self, eqe: [u8; 64]) -> usize {
        let t = u16::from(eqe[1]);
        let unaffiliated = UNAFFILIATED.contains(&t);
        let target = if unaffiliated {
            None
        } else {
            event_object(&eqe)
        };
        if !unaffiliated && target.is_none() {
            return 0;
        }
        let mut reached = 0;
        let mut fail = self.fail_allocs;
        for sub in self.subs.iter().filter(|s| s.event == t) {
            let matches = match (sub.obj, target) {
                (None, None) => true,
                (Some(h), Some((id, kind))) => self
                    .objs
                    .get(&h)
                    .is_some_and(|o| o.id == id && o.create == kind),
                _ => false,
            };
            if !matches {
                continue;
            }
            reached += 1;
            if let Some(efd) = &sub.eventfd {
                // eventfd_signal(ctx, 1).
                let _ = nix::unistd::write(&**efd, &1u64.to_ne_bytes());
                continue;
            }
            let q = &sub.channel.queue;
            let mut st = q.lock();
            if st.destroyed {
                continue;
            }
            if sub.channel.omit_data {
                // Coalesced: queued once until read.
                if st.queued.insert(sub.id) {
                    q.push(&mut st, Record::Cookie(sub.id, sub.cookie));
                }
            } else if fail > 0 {
                // The GFP_ATOMIC allocation failed: the event is lost.
                fail -= 1;
                st.overflow = true;
                q.ready.notify_all();
            } else {
                let mut rec = sub.cookie.to_ne_bytes().to_vec();
                rec.extend_from_slice(&eqe);
                q.push(&mut st, Record::Bytes(rec, 0));
            }
        }
        self.fail_allocs = fail;
        reached
    }

    /// The next `n` data-mode deliveries fail to allocate.
    pub(crate) fn fail_allocs(&mut self, n: u32) {
        self.fail_allocs = n;
    }

    /// Destroys every command fd and event channel (device removal, or the
    /// context's teardown): their readers see `EIO`, or `EAGAIN` forever
    /// and a hung-up fd.
    pub(crate) fn destroy_fds(&mut self) {
        for q in self.cmd_fds.values() {
            q.destroy();
        }
        for c in self.channels.values() {
            c.queue.destroy();
        }
        self.subs.clear();
    }

    /// The subscriptions (for tests): `(object handle, event type, cookie,
    /// to an eventfd)`.
    pub(crate) fn subscriptions(&self) -> Vec<(Option<u32>, u16, u64, bool)> {
        self.subs
            .iter()
            .map(|s| (s.obj, s.event, s.cookie, s.eventfd.is_some()))
            .collect()
    }

    /// The DevX objects and UMEMs alive.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.objs.len(), self.umems.len())
    }
}
