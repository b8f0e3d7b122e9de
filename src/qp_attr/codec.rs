//! [`QpAttr`](super::QpAttr) and its mask in the kernel's layouts: the
//! `MODIFY_QP` and `EX_MODIFY_QP` requests, the `QUERY_QP` response and
//! rdma_cm's `INIT_QP_ATTR` response (the uverbs `write()` ABI,
//! `include/uapi/rdma/ib_user_verbs.h`).

use super::{AhAttr, PathMigState, QpAttr, QpAttrMask, QpCap, QpInitInfo, QpState};
use crate::{abi, AccessFlags, Mtu};

/// Builds the `IB_USER_VERBS_CMD_MODIFY_QP` request, as libibverbs'
/// `copy_modify_qp_fields` does: each field is copied only when its bit is in
/// `mask`, the others stay zero. `RATE_LIMIT` has no field here: use
/// [`encode_ex_modify`] when [`QpAttrMask::needs_ex`].
pub(crate) fn encode_modify(handle: u32, attr: &QpAttr, mask: QpAttrMask) -> abi::IbUverbsModifyQp {
    use QpAttrMask as M;
    let has = |b: QpAttrMask| mask.contains(b);
    let mut c = abi::IbUverbsModifyQp {
        qp_handle: handle,
        attr_mask: mask.bits(),
        ..Default::default()
    };
    if has(M::STATE) {
        c.qp_state = attr.qp_state.raw();
    }
    if has(M::CUR_STATE) {
        c.cur_qp_state = attr.cur_qp_state.raw();
    }
    if has(M::EN_SQD_ASYNC_NOTIFY) {
        c.en_sqd_async_notify = u8::from(attr.en_sqd_async_notify);
    }
    if has(M::ACCESS_FLAGS) {
        c.qp_access_flags = attr.qp_access_flags.bits();
    }
    if has(M::PKEY_INDEX) {
        c.pkey_index = attr.pkey_index;
    }
    if has(M::PORT) {
        c.port_num = attr.port_num;
    }
    if has(M::QKEY) {
        c.qkey = attr.qkey;
    }
    if has(M::AV) {
        c.dest = attr.ah_attr.to_qp_dest();
    }
    if has(M::PATH_MTU) {
        c.path_mtu = attr.path_mtu.0;
    }
    if has(M::TIMEOUT) {
        c.timeout = attr.timeout;
    }
    if has(M::RETRY_CNT) {
        c.retry_cnt = attr.retry_cnt;
    }
    if has(M::RNR_RETRY) {
        c.rnr_retry = attr.rnr_retry;
    }
    if has(M::RQ_PSN) {
        c.rq_psn = attr.rq_psn;
    }
    if has(M::MAX_QP_RD_ATOMIC) {
        c.max_rd_atomic = attr.max_rd_atomic;
    }
    if has(M::ALT_PATH) {
        c.alt_pkey_index = attr.alt_pkey_index;
        c.alt_port_num = attr.alt_port_num;
        c.alt_timeout = attr.alt_timeout;
        c.alt_dest = attr.alt_ah_attr.to_qp_dest();
    }
    if has(M::MIN_RNR_TIMER) {
        c.min_rnr_timer = attr.min_rnr_timer;
    }
    if has(M::SQ_PSN) {
        c.sq_psn = attr.sq_psn;
    }
    if has(M::MAX_DEST_RD_ATOMIC) {
        c.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    }
    if has(M::PATH_MIG_STATE) {
        c.path_mig_state = attr.path_mig_state.raw();
    }
    if has(M::DEST_QPN) {
        c.dest_qp_num = attr.dest_qp_num;
    }
    c
}

/// Builds the `IB_USER_VERBS_EX_CMD_MODIFY_QP` request: the base request of
/// [`encode_modify`] plus `rate_limit` (when `RATE_LIMIT` is in `mask`).
pub(crate) fn encode_ex_modify(
    handle: u32,
    attr: &QpAttr,
    mask: QpAttrMask,
) -> abi::IbUverbsExModifyQp {
    abi::IbUverbsExModifyQp {
        base: encode_modify(handle, attr, mask),
        rate_limit: if mask.contains(QpAttrMask::RATE_LIMIT) {
            attr.rate_limit
        } else {
            0
        },
        reserved: 0,
    }
}

/// Decodes an `IB_USER_VERBS_CMD_QUERY_QP` response as libibverbs'
/// `ibv_cmd_query_qp` does. The kernel fills every field whatever the
/// requested mask; `en_sqd_async_notify` and `rate_limit` are not reported
/// (they stay zero). `cap` is in both results, as in libibverbs.
pub(crate) fn decode_query(r: &abi::IbUverbsQueryQpResp) -> (QpAttr, QpInitInfo) {
    let cap = QpCap {
        max_send_wr: r.max_send_wr,
        max_recv_wr: r.max_recv_wr,
        max_send_sge: r.max_send_sge,
        max_recv_sge: r.max_recv_sge,
        max_inline_data: r.max_inline_data,
    };
    let attr = QpAttr {
        qp_state: QpState::from_raw(r.qp_state),
        cur_qp_state: QpState::from_raw(r.cur_qp_state),
        path_mtu: Mtu(r.path_mtu),
        path_mig_state: PathMigState::from_raw(r.path_mig_state),
        qkey: r.qkey,
        rq_psn: r.rq_psn,
        sq_psn: r.sq_psn,
        dest_qp_num: r.dest_qp_num,
        qp_access_flags: AccessFlags::from_bits_retain(r.qp_access_flags),
        cap,
        ah_attr: AhAttr::from_qp_dest(&r.dest),
        alt_ah_attr: AhAttr::from_qp_dest(&r.alt_dest),
        pkey_index: r.pkey_index,
        alt_pkey_index: r.alt_pkey_index,
        en_sqd_async_notify: false,
        sq_draining: r.sq_draining != 0,
        max_rd_atomic: r.max_rd_atomic,
        max_dest_rd_atomic: r.max_dest_rd_atomic,
        min_rnr_timer: r.min_rnr_timer,
        port_num: r.port_num,
        timeout: r.timeout,
        retry_cnt: r.retry_cnt,
        rnr_retry: r.rnr_retry,
        alt_port_num: r.alt_port_num,
        alt_timeout: r.alt_timeout,
        rate_limit: 0,
    };
    let init = QpInitInfo {
        cap,
        sq_sig_all: r.sq_sig_all != 0,
    };
    (attr, init)
}

/// A `u32` enum value as the `u8` the typed enums hold; out-of-range values
/// become 255 (an `Other`/invalid value) instead of wrapping to a valid one.
fn narrow(v: u32) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

/// Decodes rdma_cm's `INIT_QP_ATTR` response (`struct ib_uverbs_qp_attr`,
/// address vectors in the `ib_uverbs_ah_attr` layout) into the attributes and
/// the mask to pass to a modify, as librdmacm's `ibv_copy_qp_attr_from_kern`.
/// Reserved mask bits (21..=24) are kept; librdmacm clears them on IB links.
#[allow(dead_code)] // for rdma_cm's INIT_QP_ATTR
pub(crate) fn decode_init_qp_attr(a: &abi::IbUverbsQpAttr) -> (QpAttr, QpAttrMask) {
    let attr = QpAttr {
        qp_state: QpState::from_raw(narrow(a.qp_state)),
        cur_qp_state: QpState::from_raw(narrow(a.cur_qp_state)),
        path_mtu: Mtu(narrow(a.path_mtu)),
        path_mig_state: PathMigState::from_raw(narrow(a.path_mig_state)),
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: AccessFlags::from_bits_retain(a.qp_access_flags),
        cap: QpCap {
            max_send_wr: a.max_send_wr,
            max_recv_wr: a.max_recv_wr,
            max_send_sge: a.max_send_sge,
            max_recv_sge: a.max_recv_sge,
            max_inline_data: a.max_inline_data,
        },
        ah_attr: AhAttr::from_abi(&a.ah_attr),
        alt_ah_attr: AhAttr::from_abi(&a.alt_ah_attr),
        pkey_index: a.pkey_index,
        alt_pkey_index: a.alt_pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify != 0,
        sq_draining: a.sq_draining != 0,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: a.alt_port_num,
        alt_timeout: a.alt_timeout,
        rate_limit: 0,
    };
    (attr, QpAttrMask::from_bits_retain(a.qp_attr_mask))
}
