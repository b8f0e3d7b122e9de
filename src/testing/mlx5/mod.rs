//! A software ConnectX for tests (feature `test-utils`, public as
//! `uverbs::testing::mlx5`): the kernel side of `mlx5_ib` for the calls a
//! context makes (`kernel.rs`, `objects.rs`, `uar.rs`) and the HCA behind it
//! (`hca.rs`, `exec.rs`, `order.rs`, `cq.rs`, `memory.rs`), on the generic scripted
//! [`FakeKernel`].
//!
//! There is no mlx5 hardware here, so the mlx5 data path is run against
//! this model. It is a test oracle, so it shares no code with the provider:
//! it decodes WQEs and encodes CQEs with its own code (`layout.rs`) written
//! from the structs of rdma-core's public `mlx5dv.h`, and it plays the
//! kernel from the facts of Linux 6.1 `drivers/infiniband/hw/mlx5` (queue
//! geometry, UAR allocation, bfreg choice and mmap offsets, the driver data
//! of each command), each file naming the functions it follows.
//!
//! The HCA runs when a test calls [`Mlx5Model::process`] (or all the time,
//! on a thread of [`Mlx5Model::spawn_hca`]): it consumes the doorbells
//! written to the UAR pages since the last call (each page is a memfd mapped
//! twice, once for the library and once for the model), executes the WQEs
//! they announce between the model's QPs in host memory (checking keys,
//! access flags and QP states), and writes CQEs with the ownership bit the
//! library expects, raising completion events for armed CQs and CQ_ERR
//! instead of overrunning a CQ. What it finds wrong in the library's use of
//! the device is listed by [`Mlx5Model::violations`]; a doorbell rung on a
//! UAR the queue was not created with is ignored, as hardware ignores it,
//! and listed by [`Mlx5Model::ignored_doorbells`].
//!
//! Several models make a fabric ([`Options::fabric`]; `fabric.rs`,
//! `wire.rs`, `remote.rs`): each HCA has an identity of its own (node
//! GUID, MAC, GIDs), and a QP whose peer is another HCA's sends transport
//! packets over unix-domain sockets, RC with PSNs, ACKs, retries and RNR,
//! UC and UD, to models in this process or others (the preload's
//! processes, `preload/README.md`). A message for a GID that is not the
//! HCA's own never reaches one of its own QPs.
//!
//! DevX (`devx.rs`) plays the kernel's `devx.c`; its firmware side
//! (`devx_fw.rs`) runs the CQs and QPs that PRM `CREATE_CQ`/`CREATE_QP`
//! commands make on UMEMs like the verbs ones, moves QPs through the PRM
//! state transitions, and reports an overrun of such a CQ as a CQ_ERROR
//! EQE to the DevX event subscriptions. It decodes the mailboxes with its
//! own bit reader and refuses a field out of place with `BAD_PARAM` and a
//! syndrome naming the field (`0xdf00_0000 | bit offset`).
//!
//! Limits:
//! - The model reads a register's last value, where hardware sees every
//!   store. When QPs share a register (shared bfregs, the NC doorbell
//!   without write-combining) and several ring it between two `process`
//!   calls, only the last doorbell is left; a doorbell on a register
//!   therefore also runs the other QPs of that UAR whose doorbell record
//!   moved. QPs on dedicated bfregs are held to their own doorbells.
//! - The background thread does not compare BlueFlame copies with the WQE
//!   (it cannot tell a copy still being written from a wrong one).
//! - One user context: the fake kernel does not say which file a command
//!   came on, so the last GET_CONTEXT's settings apply to all.
//! - Scatter-to-CQE for QPs created with `MLX5_QP_FLAG_SCATTER_CQE`
//!   (libmlx5's default): messages and read/atomic answers that fit go in
//!   the CQE, as mlx5_ib configures the QP context (`objects.rs`
//!   `scatter_rooms`); DevX QPs' own `cs_res`/`cs_req` are not read.
//! - A send queue's WQEs execute one after the other, each to its end, so
//!   a fence changes nothing, unless a test asks for what InfiniBand allows
//!   ([`Mlx5Model::reorder_reads`]): reads and atomics then complete after
//!   later WQEs, and a fenced WQE waits for them (`order.rs`).
//! - Not modelled: CQE compression, WQE signatures, XRC,
//!   raw packet QPs, memory windows and UMR, SRQ limits, QP async events
//!   (a responder's access errors raise none; tests would have to
//!   acknowledge them before destroying the QP).
//!
//! Knobs ([`Options`]) select the paths hardware and kernels vary on:
//! dynamic or static UARs, write-combining or not (`bf_reg_size` 0), CQE
//! version 0 or 1, more than one UAR per system page, DevX refused.
#![allow(unsafe_code)]

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, MutexGuard,
    },
    thread::JoinHandle,
    time::Duration,
};

use crate::{sys::Kernel, testing::kernel::FakeKernel};

mod cq;
mod devx;
mod devx_fw;
mod exec;
pub mod fabric;
mod hca;
mod hca_cap;
mod kernel;
mod layout;
mod memory;
mod objects;
mod order;
mod remote;
#[cfg(test)]
mod tests;
mod uar;
mod wire;

pub use fabric::{Faults, Identity};
pub use hca::Arm;
pub use kernel::netlink_reply;

/// The device's name.
pub const DEV: &str = "mlx5_0";

/// What kind of device and kernel the model plays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// A kernel without dynamic UARs: static bfregs mapped at fixed
    /// offsets, the kernel choosing each QP's bfreg; `UAR_OBJ_ALLOC` does
    /// not exist.
    pub static_uars: bool,
    /// BlueFlame register size; 0 is a host without write-combining.
    pub bf_reg_size: u32,
    /// CQE format version (0 or 1).
    pub cqe_version: u8,
    /// 4 KiB UARs per system page (16 on a 64 KiB-page host).
    pub num_uars_per_page: u32,
    /// Firmware that refuses a DevX user context (EINVAL).
    pub refuse_devx: bool,
    /// A kernel before 5.19: a DevX command the firmware fails is an errno
    /// translated from its status, and the output mailbox is not copied
    /// back (later kernels answer `EREMOTEIO` and the mailbox).
    pub legacy_devx_errors: bool,
    /// A kernel without the clock info page (`mlx5_core` without
    /// `clock_info`): `clock_info_versions` is 0 and its mmap refused, so
    /// the library cannot convert timestamps to wall-clock time.
    pub no_clock_info: bool,
    /// A device with raw Ethernet (a ConnectX with Ethernet ports, as root):
    /// QP_CREATE makes raw packet QPs, which the HCA never executes (no
    /// Ethernet datapath here), for testing what a library does with one.
    /// Off: they are refused (EOPNOTSUPP), the model's default device.
    pub raw_packet_qps: bool,
    /// Join the virtual fabric in this directory (`fabric.rs`,
    /// [`fabric::default_dir`]): the HCA takes an identity of its own
    /// (node GUID, MAC, GIDs) and exchanges packets with the other HCAs
    /// there, in this process or others. `None`: a lone HCA with the
    /// default identity, whose packets for other GIDs are lost.
    pub fabric: Option<std::path::PathBuf>,
    /// The identity number (24 bits) to ask the fabric for (`None`: the
    /// process id); without a fabric, the HCA's identity (`None`:
    /// [`fabric::DEFAULT_ID`]).
    pub identity: Option<u32>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            static_uars: false,
            bf_reg_size: 512,
            cqe_version: 1,
            num_uars_per_page: 1,
            refuse_devx: false,
            legacy_devx_errors: false,
            no_clock_info: false,
            raw_packet_qps: false,
            fabric: None,
            identity: None,
        }
    }
}

/// The model; see the module documentation.
#[derive(Debug)]
pub struct Mlx5Model {
    /// The scripted kernel: call log, queued reads (events), sysfs.
    pub kernel: Arc<FakeKernel>,
    /// What it plays.
    pub options: Options,
    hca: Arc<Mutex<hca::Hca>>,
    shared: Arc<kernel::Shared>,
}

/// A send WQE the device took ([`Mlx5Model::executed_wqes`]): its control
/// segment as the model decodes it (`struct mlx5_wqe_ctrl_seg`, PRM
/// "Send WQE Format") and whether its data was inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecutedWqe {
    /// The QP.
    pub qpn: u32,
    /// The WQE index of its control segment.
    pub index: u16,
    /// `MLX5_OPCODE_*`.
    pub opcode: u8,
    /// Byte 11 of the control segment: fence mode (bits 7..5), completion
    /// request (bits 3..2), solicited event (bit 1).
    pub fm_ce_se: u8,
    /// Its size in 16-byte units.
    pub ds: u32,
    /// It carried an inline data segment (`MLX5_INLINE_SEG`).
    pub inline: bool,
}

impl ExecutedWqe {
    /// A completion was requested (`MLX5_WQE_CTRL_CQ_UPDATE`, 2 << 2).
    pub fn signaled(&self) -> bool {
        self.fm_ce_se & (2 << 2) != 0
    }

    /// A solicited event was requested (`MLX5_WQE_CTRL_SOLICITED`, 1 << 1).
    pub fn solicited(&self) -> bool {
        self.fm_ce_se & (1 << 1) != 0
    }

    /// The fence mode (bits 7..5: 0 none, 1 initiator small fence
    /// (`MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE`), 2 fence, 3 strong
    /// ordering, 4 fence and initiator small fence (`MLX5_WQE_CTRL_FENCE`,
    /// what libmlx5 sets for `IBV_SEND_FENCE`).
    pub fn fence_mode(&self) -> u8 {
        self.fm_ce_se >> 5
    }
}

/// A QP as the device sees it ([`Mlx5Model::qp`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QpInfo {
    /// The QP number.
    pub qpn: u32,
    /// The kernel handle.
    pub handle: u32,
    /// `IB_QPS_*`.
    pub state: u8,
    /// The 4 KiB UAR its doorbells must use.
    pub uar: u32,
    /// The static bfreg the kernel chose (gross numbering), if it chose.
    pub bfreg_index: Option<u32>,
    /// The queue buffer's address (as given at create).
    pub buf: u64,
    /// The doorbell record's address.
    pub db: u64,
    /// Send queue size in 64-byte WQE basic blocks.
    pub sq_wqe_cnt: u32,
    /// Receive queue size in WQEs (0: none, or an SRQ).
    pub rq_wqe_cnt: u32,
    /// log2 of the receive WQE size.
    pub rq_wqe_shift: u32,
    /// Send WQE basic blocks executed (free-running).
    pub sq_executed: u32,
    /// Receive WQEs taken (free-running).
    pub rq_taken: u32,
    /// Its send CQ.
    pub send_cqn: u32,
    /// Its receive CQ.
    pub recv_cqn: u32,
    /// Its SRQ.
    pub srqn: Option<u32>,
    /// Its user index (CQE version 1).
    pub uidx: Option<u32>,
    /// The remote QP (RC, UC), from MODIFY_QP.
    pub dest_qpn: u32,
    /// Its Q_Key (UD), from MODIFY_QP.
    pub qkey: u32,
    /// RNR retries (7: forever), from MODIFY_QP.
    pub rnr_retry: u8,
    /// `IB_ACCESS_*` of MODIFY_QP.
    pub access: u32,
    /// Its next WQE waits for a receive at the responder.
    pub rnr_waiting: bool,
}

/// A CQ as the device sees it ([`Mlx5Model::cq`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CqInfo {
    /// The CQ number.
    pub cqn: u32,
    /// The kernel handle.
    pub handle: u32,
    /// CQEs it holds.
    pub ncqe: u32,
    /// CQE size (64 or 128).
    pub cqe_size: u32,
    /// The 4 KiB UAR its arm doorbell must use.
    pub uar: u32,
    /// The queue buffer's address (as given at create).
    pub buf: u64,
    /// The doorbell record's address.
    pub db: u64,
    /// CQEs written (free-running).
    pub produced: u32,
    /// Overrun: CQ_ERR raised, nothing written since.
    pub in_error: bool,
    /// Armed: `Some(solicited_only)`.
    pub armed: Option<bool>,
    /// Completion events raised.
    pub comp_events: u32,
    /// Async events raised (CQ_ERR).
    pub async_events: u32,
    /// The `IB_UVERBS_CQ_FLAGS_*` it was created with
    /// (`UVERBS_ATTR_CREATE_CQ_FLAGS`; timestamps are written whatever
    /// they say, as a ConnectX writes them).
    pub create_flags: u32,
}

/// An SRQ as the device sees it ([`Mlx5Model::srq`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SrqInfo {
    /// The SRQ number.
    pub srqn: u32,
    /// The kernel handle.
    pub handle: u32,
    /// WQEs it holds.
    pub wqe_cnt: u32,
    /// WQE size in bytes.
    pub stride: u32,
    /// The queue buffer's address (as given at create).
    pub buf: u64,
    /// The doorbell record's address.
    pub db: u64,
    /// WQEs taken (16 bits, as the doorbell record counts).
    pub taken: u16,
    /// The WQE the device takes next.
    pub head: u32,
}

/// A model with the default [`Options`] (ConnectX-5 like, current kernel).
pub fn fake_mlx5() -> Arc<Mlx5Model> {
    fake_mlx5_with(Options::default())
}

/// A model with the given [`Options`].
///
/// With [`Options::fabric`], a directory the model cannot join (it cannot
/// be made, or every identity of its number is taken) leaves the HCA
/// alone with the default identity, and says why in
/// [`Mlx5Model::violations`].
pub fn fake_mlx5_with(options: Options) -> Arc<Mlx5Model> {
    let kernel = Arc::new(FakeKernel::new());
    let mut violations = Vec::new();
    let port = options.fabric.as_ref().and_then(|dir| {
        fabric::Port::join(dir, options.identity)
            .map_err(|e| violations.push(format!("joining the fabric at {}: {e}", dir.display())))
            .ok()
    });
    let identity = match (&port, options.identity) {
        (Some(p), _) => p.identity,
        (None, Some(n)) => Identity::new(n),
        (None, None) => Identity::new(fabric::DEFAULT_ID),
    };
    let hca = Arc::new(Mutex::new(hca::Hca {
        cqe_v1: options.cqe_version == 1,
        bf_reg_size: options.bf_reg_size as usize,
        fabric: port,
        violations,
        ..hca::Hca::default()
    }));
    let shared = kernel::install(&kernel, &hca, &options, identity);
    Arc::new(Mlx5Model {
        kernel,
        options,
        hca,
        shared,
    })
}

fn lock(hca: &Mutex<hca::Hca>) -> MutexGuard<'_, hca::Hca> {
    hca.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the device once and queues its events. They are queued under the
/// HCA's lock, so a destroy (which drops an object's unread events under
/// the same lock) finds each event either still in the HCA or queued.
fn run(hca: &Mutex<hca::Hca>, kernel: &FakeKernel, shared: &kernel::Shared) -> usize {
    let mut h = lock(hca);
    let n = h.process();
    kernel::deliver(kernel, std::mem::take(&mut h.out_events));
    let eqes = std::mem::take(&mut h.out_eqes);
    drop(h);
    // The DevX lock goes before the HCA's: taken after it is released.
    if !eqes.is_empty() {
        let mut d = kernel::lock(&shared.devx);
        for e in eqes {
            d.raise(e);
        }
    }
    n
}

impl Mlx5Model {
    fn hca(&self) -> MutexGuard<'_, hca::Hca> {
        lock(&self.hca)
    }

    /// This model as the transport a context is opened with.
    pub fn dyn_kernel(&self) -> Arc<dyn Kernel> {
        self.kernel.clone()
    }

    /// Runs the HCA until it is idle: consumes the doorbells written since
    /// the last call and executes what they announce. Returns the number
    /// of WQEs executed.
    pub fn process(&self) -> usize {
        run(&self.hca, &self.kernel, &self.shared)
    }

    /// Runs the HCA on a thread until the returned guard is dropped (for
    /// threaded tests and benchmarks; [`Mlx5Model::process`] still works).
    pub fn spawn_hca(&self) -> HcaThread {
        lock(&self.hca).threaded += 1;
        let stop = Arc::new(AtomicBool::new(false));
        let (hca, kernel, shared, flag) = (
            self.hca.clone(),
            self.kernel.clone(),
            self.shared.clone(),
            stop.clone(),
        );
        let thread = std::thread::Builder::new()
            .name("mlx5-model-hca".into())
            .spawn(move || {
                let mut idle = 0u32;
                let mut last = std::time::Instant::now();
                while !flag.load(Ordering::Acquire) {
                    let gap = last.elapsed();
                    if gap > Duration::from_millis(30) && remote::trace() {
                        eprintln!("fabric: the HCA thread did not run for {gap:?}");
                    }
                    let t0 = std::time::Instant::now();
                    let n = run(&hca, &kernel, &shared);
                    if t0.elapsed() > Duration::from_millis(30) && remote::trace() {
                        eprintln!("fabric: one HCA pass took {:?}", t0.elapsed());
                    }
                    last = std::time::Instant::now();
                    if n > 0 {
                        idle = 0;
                        continue;
                    }
                    idle = idle.saturating_add(1);
                    if idle < 64 {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                }
            })
            .ok();
        HcaThread {
            stop,
            thread,
            hca: self.hca.clone(),
            kernel: self.kernel.clone(),
            shared: self.shared.clone(),
        }
    }

    /// The HCA's identity: its node GUID, MAC and GIDs.
    pub fn identity(&self) -> Identity {
        self.shared.identity
    }

    /// The fabric directory the HCA joined, if any.
    pub fn fabric_dir(&self) -> Option<std::path::PathBuf> {
        self.hca().fabric.as_ref().map(|p| p.dir.clone())
    }

    /// Leaves the fabric: the HCA's port closes (its socket is removed),
    /// and what it sends from now on is lost, as for a lone HCA.
    pub fn leave_fabric(&self) {
        self.hca().fabric = None;
    }

    /// Makes the fabric lose or reorder what this HCA sends next
    /// ([`Faults`]); nothing without a fabric.
    pub fn fabric_faults(&self, faults: Faults) {
        if let Some(p) = self.hca().fabric.as_mut() {
            p.faults = faults;
        }
    }

    /// Packets this HCA sent to the fabric, and packets lost on the way
    /// (dropped by [`Faults`], for no HCA, or for one that is gone).
    pub fn fabric_counts(&self) -> (u64, u64) {
        self.hca()
            .fabric
            .as_ref()
            .map_or((0, 0), |p| (p.sent, p.dropped))
    }

    /// Protocol violations seen so far (empty when the library drove the
    /// device as the PRM and rdma-core do).
    pub fn violations(&self) -> Vec<String> {
        self.hca().violations.clone()
    }

    /// Starts (or stops, dropping it) the log of the send WQEs the device
    /// takes, for [`Mlx5Model::executed_wqes`]. Off by default: a
    /// benchmark's millions of WQEs would fill it.
    pub fn log_wqes(&self, on: bool) {
        self.hca().wqe_log = on.then(Vec::new);
    }

    /// While `on`, RDMA reads and atomics complete late, as InfiniBand
    /// allows without a fence: their responder's memory access and the
    /// landing of their data come after the later WQEs of the same run of
    /// the send queue, unless one of those has a fence mode that waits for
    /// them (2, 3 or 4; `IBV_SEND_FENCE` is 4), before which they land.
    /// Requester CQEs stay in WQE order. Off by default: each WQE then
    /// executes to its end before the next. See `order.rs` for the rules.
    pub fn reorder_reads(&self, on: bool) {
        self.hca().reorder_reads = on;
    }

    /// Rewrites the clock info page now (`sign` odd, the fields from the
    /// model's clock and the host's real time, `sign` + 2), as mlx5_core
    /// does when its timecounter moves on; the model also does it on its
    /// own once a second of CQE stamps. Nothing happens before a context
    /// mapped the page.
    pub fn update_clock_info(&self) {
        self.hca().clock.update_info();
    }

    /// The send WQEs taken since logging started or the last call, oldest
    /// first, as the device decoded their control segments.
    pub fn executed_wqes(&self) -> Vec<ExecutedWqe> {
        self.hca()
            .wqe_log
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Doorbells the device ignored (rung on a UAR their queue was not
    /// created with, or naming no queue).
    pub fn ignored_doorbells(&self) -> Vec<String> {
        self.hca().ignored.clone()
    }

    /// The arm doorbells CQ `cqn` received, oldest first.
    pub fn arms(&self, cqn: u32) -> Vec<Arm> {
        self.hca()
            .cqs
            .get(&cqn)
            .map(|c| c.arms.clone())
            .unwrap_or_default()
    }

    /// The CQ number of the CQ with kernel handle `handle`.
    pub fn cqn_of_handle(&self, handle: u32) -> Option<u32> {
        self.hca()
            .cqs
            .iter()
            .find(|(_, c)| c.handle == handle)
            .map(|(n, _)| *n)
    }

    /// The QP number of the QP with kernel handle `handle`.
    pub fn qpn_of_handle(&self, handle: u32) -> Option<u32> {
        self.hca()
            .qps
            .iter()
            .find(|(_, q)| q.handle == handle)
            .map(|(n, _)| *n)
    }

    /// The SRQ number of the SRQ with kernel handle `handle`.
    pub fn srqn_of_handle(&self, handle: u32) -> Option<u32> {
        self.hca()
            .srqs
            .iter()
            .find(|(_, s)| s.handle == handle)
            .map(|(n, _)| *n)
    }

    /// The state (`IB_QPS_*`) of QP `qpn`.
    pub fn qp_state(&self, qpn: u32) -> Option<u8> {
        self.hca().qps.get(&qpn).map(|q| q.state)
    }

    /// QP `qpn` as the device sees it.
    pub fn qp(&self, qpn: u32) -> Option<QpInfo> {
        let h = self.hca();
        let q = h.qps.get(&qpn)?;
        Some(QpInfo {
            qpn,
            handle: q.handle,
            state: q.state,
            uar: q.uar,
            bfreg_index: q.bfreg.map(uar::gross),
            buf: q.buf,
            db: q.db,
            sq_wqe_cnt: q.sq_cnt,
            rq_wqe_cnt: q.rq_cnt,
            rq_wqe_shift: q.rq_shift,
            sq_executed: q.sq_ci,
            rq_taken: q.rq_ci,
            send_cqn: q.send_cq,
            recv_cqn: q.recv_cq,
            srqn: q.srq,
            uidx: q.uidx,
            dest_qpn: q.dest_qpn,
            qkey: q.qkey,
            rnr_retry: q.rnr_retry,
            access: q.access,
            rnr_waiting: q.rnr_wait,
        })
    }

    /// CQ `cqn` as the device sees it.
    pub fn cq(&self, cqn: u32) -> Option<CqInfo> {
        let h = self.hca();
        let c = h.cqs.get(&cqn)?;
        Some(CqInfo {
            cqn,
            handle: c.handle,
            ncqe: c.ncqe,
            cqe_size: c.cqe_size,
            uar: c.uar,
            buf: c.buf,
            db: c.db,
            produced: c.pi,
            in_error: c.in_error,
            armed: c.armed,
            comp_events: c.comp_events,
            async_events: c.async_events,
            create_flags: c.create_flags,
        })
    }

    /// SRQ `srqn` as the device sees it.
    pub fn srq(&self, srqn: u32) -> Option<SrqInfo> {
        let h = self.hca();
        let s = h.srqs.get(&srqn)?;
        Some(SrqInfo {
            srqn,
            handle: s.handle,
            wqe_cnt: s.wqe_cnt,
            stride: s.stride,
            buf: s.buf,
            db: s.db,
            taken: s.taken,
            head: s.head,
        })
    }

    /// Whether the last context asked for, and got, a DevX user context
    /// (`MLX5_IB_ALLOC_UCTX_DEVX`).
    pub fn devx(&self) -> bool {
        self.hca().devx
    }

    /// Raises a device event for DevX subscribers, as the firmware's EQ
    /// would report it: `eqe` is the 64-byte `struct mlx5_eqe` (event type
    /// at byte 1; the object's number where the event type puts it, e.g.
    /// a CQ error's CQN at byte 32, a completion's at byte 56). Returns how
    /// many subscriptions it reached (eventfd subscriptions are signalled,
    /// the others queue on their channels).
    pub fn devx_raise_event(&self, eqe: [u8; 64]) -> usize {
        kernel::lock(&self.shared.devx).raise(eqe)
    }

    /// Makes the next `n` event deliveries to data-mode channels fail as a
    /// failed `GFP_ATOMIC` allocation does: the event is lost and the
    /// channel's next read is `EOVERFLOW`.
    pub fn devx_fail_event_allocs(&self, n: u32) {
        kernel::lock(&self.shared.devx).fail_allocs(n);
    }

    /// While `on`, CQ, QP, SRQ, MR, PD, AH and DevX object destroys (ioctl
    /// and write) fail with `EBUSY` and leave the objects in place, as the
    /// kernel answers for an object something else still uses (a DevX QP on
    /// a verbs CQ, a PD a DevX object uses; for a DevX object, firmware
    /// refusing its destroy command with `RES_BUSY`, which `mlx5_cmd_exec`
    /// turns into `EBUSY`): the device keeps using them.
    pub fn refuse_destroys(&self, on: bool) {
        self.shared
            .refuse_destroys
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Destroys every DevX command fd and event channel, as device removal
    /// or the context's teardown does.
    pub fn devx_destroy_fds(&self) {
        kernel::lock(&self.shared.devx).destroy_fds();
    }

    /// The live DevX subscriptions: `(object handle, event type, cookie,
    /// signals an eventfd)`.
    pub fn devx_subscriptions(&self) -> Vec<(Option<u32>, u16, u64, bool)> {
        kernel::lock(&self.shared.devx).subscriptions()
    }

    /// The live DevX objects and UMEMs.
    pub fn devx_counts(&self) -> (usize, usize) {
        kernel::lock(&self.shared.devx).counts()
    }

    /// The raw packet QPs that exist ([`Options::raw_packet_qps`]).
    pub fn raw_packet_qp_count(&self) -> usize {
        kernel::lock(&self.shared.books).raw_qps.len()
    }

    /// The memory regions the device knows.
    pub fn mr_count(&self) -> usize {
        self.hca().mrs.len()
    }

    /// Writes an arbitrary CQE (the 64 bytes of a `mlx5_cqe64`; the owner
    /// bit of the last byte is replaced by the right one) at CQ `cqn`'s next
    /// position, as the device would: for testing the library's parsing of
    /// error and unusual CQEs. It counts as solicited for an armed CQ when
    /// its solicited bit is set or its opcode is an error. Returns false
    /// when the CQ is unknown, in error, or full (which raises CQ_ERR).
    pub fn inject_cqe(&self, cqn: u32, bytes: [u8; 64]) -> bool {
        let ok = {
            let mut h = self.hca();
            let op = bytes[63] >> 4;
            let solicited = bytes[63] & 2 != 0
                || op == layout::cqe_op::REQ_ERR
                || op == layout::cqe_op::RESP_ERR;
            h.write_cqe(cqn, &bytes, solicited)
        };
        self.process_events();
        ok
    }

    fn process_events(&self) {
        let mut h = self.hca();
        kernel::deliver(&self.kernel, std::mem::take(&mut h.out_events));
    }
}

/// The HCA running on a thread ([`Mlx5Model::spawn_hca`]); dropping it
/// stops the thread after a last pass and clears what BlueFlame copies left
/// in the registers, so [`Mlx5Model::process`] compares only new ones.
#[derive(Debug)]
pub struct HcaThread {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    hca: Arc<Mutex<hca::Hca>>,
    kernel: Arc<FakeKernel>,
    shared: Arc<kernel::Shared>,
}

impl Drop for HcaThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        run(&self.hca, &self.kernel, &self.shared);
        let mut h = lock(&self.hca);
        h.threaded -= 1;
        if h.threaded == 0 {
            h.clear_registers();
        }
    }
}
