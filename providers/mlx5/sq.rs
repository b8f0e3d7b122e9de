//! mlx5 send queues: WQE building and the send doorbell.
//!
//! Behaviour follows rdma-core `providers/mlx5/qp.c` (`_mlx5_post_send`,
//! `set_data_ptr_seg`, `set_data_ptr_seg_atomic`, `set_data_inl_seg`,
//! `post_send_db`, `mlx5_bf_copy`); segment bytes come from `wqe.rs`.
//!
//! A WQE is a ctrl segment, then by opcode a datagram segment (UD), a
//! remote-address segment (RDMA, atomics), an atomic segment, and the data:
//! inline bytes or data segments. It occupies whole 64-byte basic blocks
//! (WQEBBs); segments are written 16 bytes at a time at `(unit) mod (queue
//! units)`, so a WQE, an inline segment or a data list may wrap from the end
//! of the queue to its start, as the device reads it.
//!
//! The doorbell, once per posted batch: [`udma_to_device_barrier`], the
//! doorbell record (`db[1]`, in WQEBBs), [`mmio_wc_start`] (under the lock
//! of a shared bfreg), then either a BlueFlame copy of the single WQE (only
//! for one inline WQE of more than one 16-byte unit that fits half the BF
//! register; ascending 64-bit stores, 64 bytes at a time) or one 64-bit
//! store of the first 8 bytes of the **last** WQE's ctrl segment, then
//! [`mmio_flush_writes`], and the register half toggled on every ring.
//!
//! [`udma_to_device_barrier`]: crate::providers::barrier::udma_to_device_barrier
//! [`mmio_wc_start`]: crate::providers::barrier::mmio_wc_start
//! [`mmio_flush_writes`]: crate::providers::barrier::mmio_flush_writes

use std::sync::{
    atomic::{AtomicU32, AtomicU64, Ordering},
    Arc,
};

use super::{
    buf::QueueBuf,
    uar::Bfreg,
    wqe::{self, opcode, Av, DS, SEND_WQE_BB},
};
use crate::{
    providers::barrier,
    wr::{Payload, PostErrorKind, SendFlags, SendOp, SendWr},
    QpType,
};

/// The completion side of a send queue, shared with the CQ that polls it:
/// which work request each WQE was, and how far completions have freed the
/// queue. Written by the poster before the doorbell, read by the poller
/// after the device completed the WQE (atomics: the two may be on
/// different threads).
#[derive(Debug)]
pub(crate) struct SqTrack {
    mask: u32,
    wrid: Box<[AtomicU64]>,
    /// The poster's work-request counter when it wrote each WQE.
    wqe_head: Box<[AtomicU32]>,
    /// Work requests completed (freed) so far.
    pub(crate) tail: AtomicU32,
    /// How many times the QP went through RESET (the poster restarts its
    /// queues when it sees a new value).
    pub(crate) epoch: AtomicU32,
}

impl SqTrack {
    pub(crate) fn new(wqe_cnt: u32) -> Self {
        let n = wqe_cnt.max(1) as usize;
        SqTrack {
            mask: wqe_cnt.max(1) - 1,
            wrid: (0..n).map(|_| AtomicU64::new(0)).collect(),
            wqe_head: (0..n).map(|_| AtomicU32::new(0)).collect(),
            tail: AtomicU32::new(0),
            epoch: AtomicU32::new(0),
        }
    }

    /// The work request of the WQE at `wqe_counter`, and frees the queue up
    /// to it (a requester CQE completes every unsignaled WQE before it).
    #[inline]
    pub(crate) fn complete(&self, wqe_counter: u16) -> u64 {
        let idx = (u32::from(wqe_counter) & self.mask) as usize;
        let head = self.wqe_head[idx].load(Ordering::Relaxed);
        self.tail.store(head.wrapping_add(1), Ordering::Release);
        self.wrid[idx].load(Ordering::Relaxed)
    }

    /// Every WQE index from `from` (a counter) to `to`, for flushing.
    #[allow(dead_code)]
    pub(crate) fn mask(&self) -> u32 {
        self.mask
    }
}

/// The send queue of an mlx5 QP (the poster's side).
#[derive(Debug)]
pub(crate) struct Mlx5Sq {
    buf: Arc<QueueBuf>,
    /// Byte offset of the SQ in the QP buffer (after the RQ).
    offset: usize,
    /// WQEBBs in the queue (a power of two).
    wqe_cnt: u32,
    /// WQEBB counter of the next WQE.
    cur_post: u32,
    /// Work requests posted.
    head: u32,
    /// Most work requests outstanding at once.
    max_post: u32,
    max_gs: u32,
    max_inline: u32,
    qpn: u32,
    qp_type: QpType,
    sig_all: bool,
    bfreg: Arc<Bfreg>,
    pub(crate) track: Arc<SqTrack>,
}

/// What one WQE became, for the doorbell.
#[derive(Debug, Clone, Copy)]
struct Posted {
    /// WQEBB counter of its ctrl segment.
    at: u32,
    /// 16-byte units.
    ds: u32,
    inline: bool,
    ctrl: [u8; 8],
}

/// The queue geometry a send queue is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SqGeometry {
    pub(crate) offset: usize,
    pub(crate) wqe_cnt: u32,
    pub(crate) max_post: u32,
    pub(crate) max_gs: u32,
    pub(crate) max_inline: u32,
}

impl Mlx5Sq {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        buf: Arc<QueueBuf>,
        g: SqGeometry,
        qpn: u32,
        qp_type: QpType,
        sig_all: bool,
        bfreg: Arc<Bfreg>,
        track: Arc<SqTrack>,
    ) -> Self {
        Mlx5Sq {
            buf,
            offset: g.offset,
            wqe_cnt: g.wqe_cnt,
            cur_post: 0,
            head: 0,
            max_post: g.max_post,
            max_gs: g.max_gs,
            max_inline: g.max_inline,
            qpn,
            qp_type,
            sig_all,
            bfreg,
            track,
        }
    }

    /// Restarts the queue (the QP went through RESET).
    pub(crate) fn reset(&mut self) {
        self.cur_post = 0;
        self.head = 0;
    }

    /// Writes one WQE per request and rings the doorbell once for those
    /// written. On a failure at `i`, WQEs before `i` are rung and
    /// `Err((i, kind))` returned; nothing of request `i` is published.
    #[inline]
    pub(crate) fn post(
        &mut self,
        wrs: &[SendWr<'_>],
        av_of: impl Fn(&SendWr<'_>) -> Result<Option<Av>, PostErrorKind>,
    ) -> Result<(), (usize, PostErrorKind)> {
        let mut last: Option<Posted> = None;
        for (i, wr) in wrs.iter().enumerate() {
            let av = match av_of(wr) {
                Ok(av) => av,
                Err(kind) => return self.fail(last, i, kind),
            };
            match self.post_one(wr, av) {
                Ok(p) => last = Some(p),
                Err(kind) => return self.fail(last, i, kind),
            }
        }
        if let Some(p) = last {
            self.ring(p, wrs.len());
        }
        Ok(())
    }

    #[cold]
    fn fail(
        &mut self,
        last: Option<Posted>,
        i: usize,
        kind: PostErrorKind,
    ) -> Result<(), (usize, PostErrorKind)> {
        if let Some(p) = last {
            self.ring(p, i);
        }
        Err((i, kind))
    }

    /// Units (16 bytes) in the queue.
    #[inline(always)]
    fn units(&self) -> u32 {
        self.wqe_cnt * (SEND_WQE_BB / DS) as u32
    }

    /// Writes a 16-byte segment at unit `u` (a counter, wrapped here).
    #[inline(always)]
    fn put(&self, u: u32, seg: &[u8; 16]) {
        let at = self.offset + ((u & (self.units() - 1)) as usize) * DS;
        self.buf.write(at, seg);
    }

    /// Validates, writes and counts one WQE; publishes nothing (the
    /// doorbell record does).
    #[inline]
    fn post_one(&mut self, wr: &SendWr<'_>, av: Option<Av>) -> Result<Posted, PostErrorKind> {
        let (op, opmod_imm) = self.validate(wr, av.is_some())?;
        let outstanding = self
            .head
            .wrapping_sub(self.track.tail.load(Ordering::Acquire));
        if outstanding >= self.max_post {
            return Err(PostErrorKind::QueueFull);
        }
        let first = self.cur_post.wrapping_mul((SEND_WQE_BB / DS) as u32);
        let mut u = first + 1; // after the ctrl segment
        if let Some(mut av) = av {
            if let Some(d) = wr.ud {
                av.dqp_dct = d.remote_qpn & 0x00ff_ffff;
                av.ext = true;
                av.key = u64::from(d.remote_qkey) << 32;
            }
            let bytes = av.encode();
            for c in bytes.chunks_exact(DS) {
                let mut seg = [0u8; 16];
                seg.copy_from_slice(c);
                self.put(u, &seg);
                u += 1;
            }
        }
        match wr.op {
            SendOp::RdmaWrite { remote_addr, rkey }
            | SendOp::RdmaWriteWithImm {
                remote_addr, rkey, ..
            }
            | SendOp::RdmaRead { remote_addr, rkey } => {
                self.put(u, &wqe::raddr(remote_addr, rkey));
                u += 1;
            }
            SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                self.put(u, &wqe::raddr(remote_addr, rkey));
                self.put(u + 1, &wqe::atomic(swap, compare));
                u += 2;
            }
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => {
                self.put(u, &wqe::raddr(remote_addr, rkey));
                self.put(u + 1, &wqe::atomic(add, 0));
                u += 2;
            }
            SendOp::Send | SendOp::SendWithImm { .. } => {}
        }
        let inline = matches!(wr.payload, Payload::Inline(_));
        match wr.payload {
            Payload::Inline(data) => u = self.put_inline(u, data),
            Payload::Sges(sges) if wr.op.is_atomic() => {
                // The local SGE of an atomic is always 8 bytes
                // (`set_data_ptr_seg_atomic`).
                let s = &sges[0];
                self.put(u, &wqe::data(8, s.lkey, s.addr));
                u += 1;
            }
            Payload::Sges(sges) => {
                for s in sges.iter().filter(|s| s.length != 0) {
                    self.put(u, &wqe::data(s.length, s.lkey, s.addr));
                    u += 1;
                }
            }
        }
        let ds = u.wrapping_sub(first);
        let mut fm_ce_se = 0u8;
        if wr.flags.contains(SendFlags::SIGNALED) || self.sig_all {
            fm_ce_se |= wqe::CTRL_CQ_UPDATE;
        }
        if wr.flags.contains(SendFlags::SOLICITED) {
            fm_ce_se |= wqe::CTRL_SOLICITED;
        }
        if wr.flags.contains(SendFlags::FENCE) {
            fm_ce_se |= wqe::CTRL_FENCE;
        }
        let pi = (self.cur_post & 0xffff) as u16;
        let ctrl = wqe::ctrl(pi, op, 0, self.qpn, ds as u8, fm_ce_se, opmod_imm);
        self.put(first, &ctrl);
        let idx = (self.cur_post & (self.wqe_cnt - 1)) as usize;
        self.track.wrid[idx].store(wr.wr_id, Ordering::Relaxed);
        self.track.wqe_head[idx].store(self.head, Ordering::Relaxed);
        let posted = Posted {
            at: self.cur_post,
            ds,
            inline,
            ctrl: ctrl[..8].try_into().unwrap_or([0; 8]),
        };
        self.head = self.head.wrapping_add(1);
        self.cur_post = self
            .cur_post
            .wrapping_add(ds.div_ceil((SEND_WQE_BB / DS) as u32));
        Ok(posted)
    }

    /// Writes an inline segment (header + data, padded to 16 bytes) from
    /// unit `u`; returns the unit after it. An empty payload writes nothing.
    #[inline]
    fn put_inline(&self, mut u: u32, data: &[u8]) -> u32 {
        if data.is_empty() {
            return u;
        }
        let mut seg = [0u8; 16];
        seg[..4].copy_from_slice(&wqe::inline_header(data.len() as u32));
        let head = data.len().min(12);
        seg[4..4 + head].copy_from_slice(&data[..head]);
        self.put(u, &seg);
        u += 1;
        for chunk in data[head..].chunks(16) {
            let mut seg = [0u8; 16];
            seg[..chunk.len()].copy_from_slice(chunk);
            self.put(u, &seg);
            u += 1;
        }
        u
    }

    /// RC `_mlx5_post_send`'s checks; returns the WQE opcode and the ctrl
    /// segment's immediate bytes.
    #[inline]
    fn validate(&self, wr: &SendWr<'_>, has_av: bool) -> Result<(u8, [u8; 4]), PostErrorKind> {
        let ud = self.qp_type == QpType::Ud;
        let (op, imm) = match wr.op {
            SendOp::Send => (opcode::SEND, [0; 4]),
            SendOp::SendWithImm { imm } => (opcode::SEND_IMM, imm.to_be_bytes()),
            SendOp::RdmaWrite { .. } => (opcode::RDMA_WRITE, [0; 4]),
            SendOp::RdmaWriteWithImm { imm, .. } => (opcode::RDMA_WRITE_IMM, imm.to_be_bytes()),
            SendOp::RdmaRead { .. } => (opcode::RDMA_READ, [0; 4]),
            SendOp::CompareSwap { .. } => (opcode::ATOMIC_CS, [0; 4]),
            SendOp::FetchAdd { .. } => (opcode::ATOMIC_FA, [0; 4]),
        };
        if ud {
            if !matches!(wr.op, SendOp::Send | SendOp::SendWithImm { .. }) {
                return Err(PostErrorKind::OpNotSupported(
                    "UD QPs support only SEND and SEND_WITH_IMM",
                ));
            }
            if wr.ud.is_none() || !has_av {
                return Err(PostErrorKind::BadDestination(
                    "a send on a UD QP needs a destination (SendWr::to)",
                ));
            }
        } else {
            if wr.ud.is_some() {
                return Err(PostErrorKind::BadDestination(
                    "a UD destination was given for a connected (RC/UC) QP",
                ));
            }
            if self.qp_type == QpType::Uc
                && (wr.op.is_atomic() || matches!(wr.op, SendOp::RdmaRead { .. }))
            {
                return Err(PostErrorKind::OpNotSupported(
                    "UC QPs support no RDMA read and no atomics",
                ));
            }
        }
        match wr.payload {
            Payload::Inline(data) => {
                if matches!(wr.op, SendOp::RdmaRead { .. }) || wr.op.is_atomic() {
                    return Err(PostErrorKind::OpNotSupported(
                        "inline data is for sends and RDMA writes, not reads or atomics",
                    ));
                }
                if data.len() > self.max_inline as usize {
                    return Err(PostErrorKind::InlineTooLong {
                        given: data.len(),
                        max: self.max_inline,
                    });
                }
            }
            Payload::Sges(sges) => {
                if sges.len() > self.max_gs as usize {
                    return Err(PostErrorKind::TooManySges {
                        given: sges.len(),
                        max: self.max_gs,
                    });
                }
                if wr.op.is_atomic() && sges.len() != 1 {
                    return Err(PostErrorKind::BadAtomic(
                        "an atomic needs exactly one 8-byte local SGE for the old value",
                    ));
                }
            }
        }
        Ok((op, imm))
    }

    /// Rings the doorbell for a batch of `nreq` WQEs ending with `last`.
    #[inline]
    fn ring(&mut self, last: Posted, nreq: usize) {
        barrier::udma_to_device_barrier();
        self.buf.set_dbrec(1, self.cur_post & 0xffff);
        let bf = &*self.bfreg;
        let (guard, reg) = bf.begin();
        barrier::mmio_wc_start();
        let bytes = (last.ds as usize * DS).next_multiple_of(SEND_WQE_BB);
        if nreq == 1 && bf.buf_size > 0 && last.inline && last.ds > 1 && bytes <= bf.buf_size {
            self.blueflame(last.at, bytes, reg);
        } else {
            bf.page.store64(reg, last.ctrl);
        }
        barrier::mmio_flush_writes();
        bf.toggle(&guard);
    }

    /// Copies the WQE at WQEBB counter `at` to the BlueFlame register:
    /// ascending 64-bit stores, 64 bytes at a time, wrapping the source at
    /// the end of the queue (`mlx5_bf_copy`).
    #[inline]
    fn blueflame(&self, at: u32, bytes: usize, reg: usize) {
        for bb in 0..bytes / SEND_WQE_BB {
            let idx = (at.wrapping_add(bb as u32) & (self.wqe_cnt - 1)) as usize;
            let src = self.offset + idx * SEND_WQE_BB;
            let Some(block) = self.buf.read::<SEND_WQE_BB>(src) else {
                return;
            };
            for (w, word) in block.chunks_exact(8).enumerate() {
                let mut b = [0u8; 8];
                b.copy_from_slice(word);
                self.bfreg.page.store64(reg + bb * SEND_WQE_BB + w * 8, b);
            }
        }
    }
}
