//! `RESIZE_CQ` on the fake rxe kernel, checked and answered as Linux 6.1
//! does: `ib_uverbs_resize_cq` (`drivers/infiniband/core/uverbs_cmd.c`),
//! rxe's `rxe_resize_cq` and `rxe_cq_chk_attr` (`sw/rxe/rxe_verbs.c`,
//! `rxe_cq.c`) and `rxe_queue_resize` / `resize_finish`
//! (`sw/rxe/rxe_queue.c`): a new ring, the completions waiting in the old
//! one copied to its start, and the new ring's `mminfo` in the answer.

use std::sync::Mutex;

use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::{
    copy_out, device_attr,
    objects::{Kind, Objects},
    ring::{Rings, RING_LOG2_STRIDE},
    RxeRing,
};
use crate::{
    abi,
    sys::{Errno, WriteCmd},
};

/// Answers `IB_USER_VERBS_CMD_RESIZE_CQ`.
pub(super) fn resize_cq(
    objects: &Objects,
    rings: &Mutex<Rings>,
    cmd: &mut WriteCmd<'_>,
) -> Result<(), Errno> {
    // `uverbs_request`: the core request must be there whole.
    let (req, _) =
        abi::IbUverbsResizeCq::read_from_prefix(cmd.core_in).map_err(|_| Errno::EINVAL)?;
    // `uobj_get_obj_read`: the handle must name a CQ of this context.
    if !objects
        .lock()
        .user_handles
        .contains_key(&(Kind::Cq, req.cq_handle))
    {
        return Err(Errno::EINVAL);
    }
    // `rxe_resize_cq`: room for `struct rxe_resize_cq_resp` in the driver
    // response.
    if cmd.driver_out.len() < size_of::<abi::RxeResizeCqResp>() {
        return Err(Errno::EINVAL);
    }
    // `rxe_cq_chk_attr`: `cqe` is an `int` there.
    let cqe = req.cqe as i32;
    if cqe <= 0 || req.cqe > device_attr().base.max_cqe {
        return Err(Errno::EINVAL);
    }
    let mut rings = rings.lock().unwrap_or_else(|p| p.into_inner());
    let old = rings
        .views
        .get(&rings.cq_offset(req.cq_handle))
        .cloned()
        .ok_or(Errno::EINVAL)?;
    // `rxe_cq_chk_attr`: no fewer than the completions waiting.
    if req.cqe < old.count() {
        return Err(Errno::EINVAL);
    }
    // `rxe_queue_init`: a power of two of slots, one always free.
    let slots = (req.cqe + 1).next_power_of_two();
    let (mapping, new) = RxeRing::new(RING_LOG2_STRIDE, slots)?;
    // `resize_finish`: the waiting completions, from the consumer index the
    // library published, to the start of the new ring.
    let (mut cons, prod) = (old.consumer(), old.producer());
    let mut moved = 0;
    while cons != prod {
        new.write_slot(moved, &old.slot(cons));
        cons = (cons + 1) & (old.slots() - 1);
        moved += 1;
    }
    new.set_producer(moved);
    old.set_consumer(cons);
    let offset = rings.replace_cq(req.cq_handle, mapping, new);
    // `ib_uverbs_resize_cq`: `cq->cqe`, which rxe set to the slots less one.
    let mut resp = abi::IbUverbsResizeCqResp::new_zeroed();
    resp.cqe = slots - 1;
    copy_out(cmd.core_out, resp.as_bytes())?;
    let mut drv = abi::RxeResizeCqResp::new_zeroed();
    drv.mi.offset = offset;
    drv.mi.size = (super::HEADER_LEN as u32) + (slots << RING_LOG2_STRIDE);
    copy_out(cmd.driver_out, drv.as_bytes())
}
