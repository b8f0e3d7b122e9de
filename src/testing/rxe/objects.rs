//! The objects created on the fake rxe kernel (PD, MR, MW, CQ, QP, SRQ, the
//! completion channels) and the events reported on them, as the kernel
//! counts them for a destroy's answer.

use std::{
    collections::HashMap,
    os::fd::{AsRawFd, RawFd},
    sync::{atomic::Ordering, Mutex},
};

use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::{
    copy_out,
    ring::{ring_mi, RING_SLOTS, RQ_OFFSET},
    Behaviour,
};
use crate::{
    abi,
    sys::{Errno, IoctlCmd, WriteCmd},
    testing::kernel::{dummy_fd, FakeKernel},
};

/// Object kinds the fake creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Kind {
    Pd,
    Mr,
    Mw,
    Cq,
    Qp,
    Srq,
}

/// Objects created on the fake: handles, user handles, events reported.
#[derive(Debug, Default)]
pub struct Objects {
    state: Mutex<ObjState>,
}

#[derive(Debug, Default)]
pub(super) struct ObjState {
    next_handle: u32,
    pub(super) user_handles: HashMap<(Kind, u32), u64>,
    /// Async events read, by object kind and user handle.
    reported: HashMap<(Kind, u64), u32>,
    /// Completion events read, by CQ user handle.
    comp_reported: HashMap<u64, u32>,
    /// The completion channel fd of each CQ that has one.
    pub(super) cq_channels: HashMap<u32, RawFd>,
    pub(super) arms: u32,
    pub(super) destroyed: Vec<(Kind, u32)>,
}

/// The kind of object an async event type is about (its `element` is then
/// that object's user handle), as `ib_uverbs_*_event_handler` file them.
fn about_object(event_type: u32) -> Option<Kind> {
    match event_type {
        0 => Some(Kind::Cq),
        1..=7 | 16 => Some(Kind::Qp),
        14 | 15 => Some(Kind::Srq),
        _ => None,
    }
}

impl Objects {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, ObjState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn create(&self, kind: Kind, user_handle: u64) -> u32 {
        let mut s = self.lock();
        s.next_handle += 1;
        let h = s.next_handle;
        s.user_handles.insert((kind, h), user_handle);
        h
    }

    /// Counts a record a read took: an async event about an object (16
    /// bytes) or a completion event (8 bytes: the CQ's user handle).
    pub(super) fn record_read(&self, fd: RawFd, bytes: &[u8]) {
        let mut s = self.lock();
        // A completion channel's records are completion events, any other
        // fd's (the context's async fd) async events: a record of the
        // other size on either is malformed and counts nowhere.
        let channel = s.cq_channels.values().any(|&c| c == fd);
        if channel {
            if let Ok(d) = abi::IbUverbsCompEventDesc::read_from_bytes(bytes) {
                *s.comp_reported.entry(d.cq_handle).or_default() += 1;
            }
        } else if let Ok(d) = abi::IbUverbsAsyncEventDesc::read_from_bytes(bytes) {
            // The kernel counts an event on the object it was raised for;
            // an element naming no such object (tests forge those) counts
            // nowhere.
            if let Some(kind) = about_object(d.event_type) {
                if s.user_handles
                    .iter()
                    .any(|(&(k, _), &uh)| k == kind && uh == d.element)
                {
                    *s.reported.entry((kind, d.element)).or_default() += 1;
                }
            }
        }
    }

    /// Destroys the object as the kernel does: its unread events are
    /// dropped from the queues, and the events read are returned (async,
    /// completion).
    fn destroy(
        &self,
        kernel: &std::sync::Weak<FakeKernel>,
        kind: Kind,
        handle: u32,
    ) -> Result<(u32, u32), Errno> {
        let (uh, channel) = {
            let s = self.lock();
            let uh = *s.user_handles.get(&(kind, handle)).ok_or(Errno::EINVAL)?;
            (
                uh,
                s.cq_channels
                    .get(&handle)
                    .copied()
                    .filter(|_| kind == Kind::Cq),
            )
        };
        let has_events = matches!(kind, Kind::Cq | Kind::Qp | Kind::Srq);
        if let Some(k) = kernel.upgrade().filter(|_| has_events) {
            // Before the counts are taken, under the fake's own lock: a read
            // either took an event and counted it, or finds it gone.
            k.discard_reads(None, |b| {
                abi::IbUverbsAsyncEventDesc::read_from_bytes(b)
                    .is_ok_and(|d| about_object(d.event_type) == Some(kind) && d.element == uh)
            });
            if let Some(fd) = channel {
                k.discard_reads(Some(fd), |b| b == uh.to_ne_bytes());
            }
        }
        let mut s = self.lock();
        s.user_handles.remove(&(kind, handle));
        if kind == Kind::Cq {
            s.cq_channels.remove(&handle);
        }
        s.destroyed.push((kind, handle));
        let reported = s.reported.remove(&(kind, uh)).unwrap_or(0);
        let comp = s.comp_reported.remove(&uh).unwrap_or(0);
        Ok((reported, comp))
    }
}

/// `Behaviour::fail_destroy`.
fn refuse_destroy(b: &Behaviour) -> Result<(), Errno> {
    b.destroy_pause.pass();
    match b.fail_destroy.load(Ordering::Relaxed) {
        0 => Ok(()),
        e => Err(Errno::from_raw(e)),
    }
}

/// CQ, QP and SRQ create/destroy, MR and MW destroy (ioctl methods, as 6.1
/// has them).
pub(super) fn objects_ioctl(
    objects: &Objects,
    kernel: &std::sync::Weak<FakeKernel>,
    b: &Behaviour,
    cmd: &mut IoctlCmd<'_>,
) -> Option<Result<(), Errno>> {
    let handle_in = |cmd: &IoctlCmd<'_>, id| cmd.input_value(id).map(|v| v as u32);
    let r = match (cmd.object_id, cmd.method_id) {
        (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_CREATE) => (|| {
            let uh = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_CQ_USER_HANDLE)
                .ok_or(Errno::EINVAL)?;
            let cqe = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_CQ_CQE)
                .ok_or(Errno::EINVAL)? as u32;
            if cqe == 0 || cqe >= RING_SLOTS {
                return Err(Errno::EINVAL);
            }
            // `rxe_create_cq`: any create flag (completion timestamps,
            // ignore overrun) is EOPNOTSUPP (Linux 6.1 rxe_verbs.c:763).
            if cmd
                .input_value(abi::UVERBS_ATTR_CREATE_CQ_FLAGS)
                .is_some_and(|f| f != 0)
            {
                return Err(Errno::EOPNOTSUPP);
            }
            let h = objects.create(Kind::Cq, uh);
            if let Some(a) = cmd.find(abi::UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL) {
                if let crate::ioctl::AttrBuf::Fd(fd) = &a.buf {
                    objects.lock().cq_channels.insert(h, fd.as_raw_fd());
                }
            }
            cmd.set_new_object(abi::UVERBS_ATTR_CREATE_CQ_HANDLE, h);
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_CQ_RESP_CQE,
                &(RING_SLOTS - 1).to_ne_bytes(),
            );
            let mut resp = abi::RxeCreateCqResp::new_zeroed();
            resp.mi = ring_mi(h);
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_CQ_HANDLE).ok_or(Errno::EINVAL)?;
            refuse_destroy(b)?;
            let mut resp = abi::IbUverbsDestroyCqResp::new_zeroed();
            (resp.async_events_reported, resp.comp_events_reported) =
                objects.destroy(kernel, Kind::Cq, h)?;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_CQ_RESP, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_CREATE) => (|| {
            let uh = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_QP_USER_HANDLE)
                .ok_or(Errno::EINVAL)?;
            let cap = cmd
                .input_bytes(abi::UVERBS_ATTR_CREATE_QP_CAP)
                .ok_or(Errno::EINVAL)?;
            let on_srq = cmd.find(abi::UVERBS_ATTR_CREATE_QP_SRQ_HANDLE).is_some();
            let h = objects.create(Kind::Qp, uh);
            cmd.set_new_object(abi::UVERBS_ATTR_CREATE_QP_HANDLE, h);
            cmd.write_output(abi::UVERBS_ATTR_CREATE_QP_RESP_CAP, &cap);
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_QP_RESP_QP_NUM,
                &(0x10 + h).to_ne_bytes(),
            );
            let mut resp = abi::RxeCreateQpResp::new_zeroed();
            resp.sq_mi = ring_mi(h);
            if !on_srq {
                resp.rq_mi = ring_mi(h);
                resp.rq_mi.offset += RQ_OFFSET;
            }
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_QP_HANDLE).ok_or(Errno::EINVAL)?;
            refuse_destroy(b)?;
            let mut resp = abi::IbUverbsDestroyQpResp::new_zeroed();
            resp.events_reported = objects.destroy(kernel, Kind::Qp, h)?.0;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_QP_RESP, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_CREATE) => (|| {
            let uh = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_SRQ_USER_HANDLE)
                .ok_or(Errno::EINVAL)?;
            let max_wr = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_SRQ_MAX_WR)
                .ok_or(Errno::EINVAL)? as u32;
            let max_sge = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_SRQ_MAX_SGE)
                .ok_or(Errno::EINVAL)? as u32;
            let h = objects.create(Kind::Srq, uh);
            cmd.set_new_object(abi::UVERBS_ATTR_CREATE_SRQ_HANDLE, h);
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR,
                &max_wr.to_ne_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE,
                &max_sge.to_ne_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM,
                &(0x40 + h).to_ne_bytes(),
            );
            let mut resp = abi::RxeCreateSrqResp::new_zeroed();
            resp.mi = ring_mi(h);
            resp.srq_num = 0x40 + h;
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_SRQ_HANDLE).ok_or(Errno::EINVAL)?;
            refuse_destroy(b)?;
            let mut resp = abi::IbUverbsDestroySrqResp::new_zeroed();
            resp.events_reported = objects.destroy(kernel, Kind::Srq, h)?.0;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_SRQ_RESP, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_MR, abi::UVERBS_METHOD_MR_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_MR_HANDLE).ok_or(Errno::EINVAL)?;
            refuse_destroy(b)?;
            objects.destroy(kernel, Kind::Mr, h).map(|_| ())
        })(),
        (abi::UVERBS_OBJECT_MW, abi::UVERBS_METHOD_MW_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_MW_HANDLE).ok_or(Errno::EINVAL)?;
            refuse_destroy(b)?;
            objects.destroy(kernel, Kind::Mw, h).map(|_| ())
        })(),
        _ => return None,
    };
    Some(r)
}

/// PD allocation (write commands only, as on 6.1).
pub(super) fn objects_write(
    objects: &Objects,
    kernel: &std::sync::Weak<FakeKernel>,
    b: &Behaviour,
    cmd: &mut WriteCmd<'_>,
) -> Option<Result<(), Errno>> {
    match cmd.command {
        c if c == abi::IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL => {
            let fd = dummy_fd();
            let mut resp = abi::IbUverbsCreateCompChannelResp::new_zeroed();
            resp.fd = fd.as_raw_fd() as u32;
            if let Some(k) = kernel.upgrade() {
                // A new channel: nothing queued for its number yet.
                k.forget_fd(fd.as_raw_fd());
            }
            let r = copy_out(cmd.core_out, resp.as_bytes());
            cmd.new_fd = Some(fd);
            Some(r)
        }
        c if c == abi::IB_USER_VERBS_CMD_REQ_NOTIFY_CQ => {
            objects.lock().arms += 1;
            Some(Ok(()))
        }
        c if c == abi::IB_USER_VERBS_CMD_ALLOC_PD => {
            let h = objects.create(Kind::Pd, 0);
            let mut resp = abi::IbUverbsAllocPdResp::new_zeroed();
            resp.pd_handle = h;
            Some(copy_out(cmd.core_out, resp.as_bytes()))
        }
        c if c == abi::IB_USER_VERBS_CMD_DEALLOC_PD => {
            let h = u32::from_ne_bytes(cmd.core_in.get(..4)?.try_into().ok()?);
            Some(refuse_destroy(b).and_then(|()| objects.destroy(kernel, Kind::Pd, h).map(|_| ())))
        }
        c if c == abi::IB_USER_VERBS_CMD_REG_MR => {
            let h = objects.create(Kind::Mr, 0);
            let mut resp = abi::IbUverbsRegMrResp::new_zeroed();
            resp.mr_handle = h;
            resp.lkey = 0x100 + h;
            resp.rkey = 0x200 + h;
            Some(copy_out(cmd.core_out, resp.as_bytes()))
        }
        c if c == abi::IB_USER_VERBS_CMD_ALLOC_MW => {
            let req = abi::IbUverbsAllocMw::read_from_prefix(cmd.core_in).ok()?.0;
            // The kernel's check (uverbs_cmd.c `ib_uverbs_alloc_mw`).
            if !matches!(req.mw_type, 1 | 2) {
                return Some(Err(Errno::EINVAL));
            }
            let h = objects.create(Kind::Mw, 0);
            let mut resp = abi::IbUverbsAllocMwResp::new_zeroed();
            resp.mw_handle = h;
            // rxe: the pool index above a key byte (rxe_mw.c `rxe_alloc_mw`).
            resp.rkey = (h << 8) | 0x3c;
            Some(copy_out(cmd.core_out, resp.as_bytes()))
        }
        c if c == abi::IB_USER_VERBS_CMD_DEALLOC_MW => {
            let h = u32::from_ne_bytes(cmd.core_in.get(..4)?.try_into().ok()?);
            Some(refuse_destroy(b).and_then(|()| objects.destroy(kernel, Kind::Mw, h).map(|_| ())))
        }
        // rxe accepts every transition the library lets through.
        c if c == abi::IB_USER_VERBS_CMD_MODIFY_QP => Some(Ok(())),
        _ => None,
    }
}
