//! The model's CQs: writing CQEs with the ownership bit rdma-core expects,
//! refusing to overrun, and arming.
//!
//! Facts (rdma-core `providers/mlx5/cq.c`): a CQE is valid for the library
//! when its opcode is not `MLX5_CQE_INVALID` (15) and its owner bit equals
//! `!!(ci & ncqe)` (`get_sw_cqe`); the library writes its consumer index to
//! doorbell record word 0 (`update_cons_index`, 24 bits) and arms with
//! `dbrec[1] = sn << 28 | cmd | ci` and the same word, followed by the CQN,
//! at `uar + 0x20` (`mlx5_arm_cq`). In a 128-byte CQE the CQE64 is the
//! second half. The device never writes over a CQE the library has not
//! consumed: an overrun raises `IB_EVENT_CQ_ERR` (mlx5_ib `cq.c`
//! `mlx5_ib_cq_event`) and the CQ stops. Completion events reach the
//! CQ's completion channel; without one the kernel drops them (core
//! `uverbs_main.c` `ib_uverbs_comp_handler`).
#![allow(unsafe_code)]

use super::{
    hca::{Arm, Hca},
    layout::{self, be32, cqe_op},
    memory::{self, dbrec},
};

/// `IB_EVENT_CQ_ERR`.
pub(crate) const IB_EVENT_CQ_ERR: u32 = 0;

impl Hca {
    /// Writes a CQE (body, then `op_own` with the owner bit, release), or
    /// on an overrun raises CQ_ERR once and writes nothing. Returns whether
    /// it was written.
    /// A CQE that is not an error CQE gets the device clock's timestamp
    /// (`mlx5_cqe64.timestamp`, bytes 48..56, big-endian).
    pub(crate) fn post_cqe(&mut self, cqn: u32, cqe: layout::Cqe) -> bool {
        let mut bytes = cqe.encode();
        if !matches!(cqe.opcode, cqe_op::REQ_ERR | cqe_op::RESP_ERR) {
            bytes[48..56].copy_from_slice(&self.clock.stamp().to_be_bytes());
        }
        let fires_solicited =
            cqe.solicited || matches!(cqe.opcode, cqe_op::REQ_ERR | cqe_op::RESP_ERR);
        let front = cqe.in_cqe.as_ref().and_then(layout::InCqe::front);
        self.write_cqe_with(cqn, front, &bytes, fires_solicited)
    }

    /// Writes 64 CQE bytes at the CQ's next slot with the right owner bit.
    pub(crate) fn write_cqe(&mut self, cqn: u32, bytes: &[u8; 64], solicited: bool) -> bool {
        self.write_cqe_with(cqn, None, bytes, solicited)
    }

    /// [`write_cqe`](Self::write_cqe), and `front` (data scattered to a
    /// 128-byte CQE) into the slot's first 64 bytes.
    fn write_cqe_with(
        &mut self,
        cqn: u32,
        front: Option<&[u8; 64]>,
        bytes: &[u8; 64],
        solicited: bool,
    ) -> bool {
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return false;
        };
        if cq.in_error {
            return false;
        }
        let ci = dbrec(cq.db, 0) & 0xff_ffff;
        if cq.pi.wrapping_sub(ci) & 0xff_ffff >= cq.ncqe {
            cq.in_error = true;
            cq.async_events += 1;
            if cq.devx {
                self.out_eqes.push(super::devx_fw::cq_overrun_eqe(cqn));
            } else {
                self.out_events
                    .push((None, async_event(cq.user_handle, IB_EVENT_CQ_ERR)));
            }
            return false;
        }
        let idx = u64::from(cq.pi & (cq.ncqe - 1));
        let at = cq.buf + idx * u64::from(cq.cqe_size) + u64::from(cq.cqe_size) - 64;
        let owner = u8::from(cq.pi & cq.ncqe != 0);
        // SAFETY: the CQE slot is inside the CQ buffer the library gave at
        // create time (live until the CQ is destroyed, which removes it
        // here first). The body is written first, then `op_own` with a
        // release store: the library reads `op_own` first, with acquire.
        // The library polls `op_own` with 1-byte atomic loads while this
        // runs, so no access here spans it: the words before byte 56 are
        // written whole (`memory::write`, 8-byte atomics), the 7 bytes that
        // share `op_own`'s word one byte at a time. In a 128-byte CQE the
        // slot's first half (`at - 64`) is inside the slot too.
        unsafe {
            if let (Some(f), 128) = (front, cq.cqe_size) {
                memory::write(at - 64, f);
            }
            memory::write(at, &bytes[..56]);
            for (i, &b) in bytes[56..63].iter().enumerate() {
                memory::store_u8(at + 56 + i as u64, b);
            }
            memory::store_release_u8(at + 63, (bytes[63] & !1) | owner);
        }
        cq.pi = cq.pi.wrapping_add(1);
        let fires = match cq.armed {
            Some(solicited_only) => !solicited_only || solicited,
            None => false,
        };
        if fires {
            cq.armed = None;
            if cq.devx {
                // A DevX CQ's completion goes to the DevX subscriptions
                // as a completion EQE (`MLX5_EVENT_TYPE_COMP`).
                self.out_eqes.push(super::devx_fw::comp_eqe(cqn));
            } else if let Some(fd) = cq.channel {
                cq.comp_events += 1;
                self.out_events.push((Some(fd), comp_event(cq.user_handle)));
            }
        }
        true
    }

    /// The CQ arm doorbell (8 bytes at `+0x20`) on sub-UAR `uar`.
    pub(crate) fn arm(&mut self, uar: u32, bytes: [u8; 8]) {
        let v = be32(&bytes, 0);
        let cqn = be32(&bytes, 4) & 0xff_ffff;
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            self.ignored.push(format!("arm for unknown CQ {cqn:#x}"));
            return;
        };
        if cq.uar != uar {
            self.ignored.push(format!(
                "arm for CQ {cqn:#x} on UAR {uar}, created on {}",
                cq.uar
            ));
            return;
        }
        let a = Arm {
            sn: v >> 28 & 3,
            solicited: v >> 24 & 1 == 1,
            ci: v & 0xff_ffff,
        };
        if dbrec(cq.db, 1) != v {
            self.violations.push(format!(
                "CQ {cqn:#x}: arm doorbell {v:#x} without its doorbell record"
            ));
        }
        cq.arms.push(a);
        if cq.in_error {
            return;
        }
        cq.armed = Some(a.solicited);
        // CQEs already past the consumer index the arm reports fire at once.
        if cq.pi & 0xff_ffff != a.ci {
            cq.armed = None;
            if cq.devx {
                self.out_eqes.push(super::devx_fw::comp_eqe(cqn));
            } else if let Some(fd) = cq.channel {
                cq.comp_events += 1;
                self.out_events.push((Some(fd), comp_event(cq.user_handle)));
            }
        }
    }
}

/// An `ib_uverbs_comp_event_desc`.
pub(crate) fn comp_event(user_handle: u64) -> Vec<u8> {
    user_handle.to_ne_bytes().to_vec()
}

/// An `ib_uverbs_async_event_desc`.
pub(crate) fn async_event(element: u64, event_type: u32) -> Vec<u8> {
    let mut v = element.to_ne_bytes().to_vec();
    v.extend_from_slice(&event_type.to_ne_bytes());
    v.extend_from_slice(&0u32.to_ne_bytes());
    v
}
