//! verbs.h's QP attributes and address vectors to uverbs' and back:
//! `ibv_qp_attr` + `IBV_QP_*` mask ↔ [`QpAttr`] + [`QpAttrMask`],
//! `ibv_ah_attr` ↔ [`AhAttr`], `ibv_qp_cap` ↔ [`QpCap`].
//!
//! Every field of `ibv_qp_attr` has its uverbs counterpart; a modify copies
//! only the fields its mask names (the others are not read, as libibverbs'
//! `copy_modify_qp_fields`), and a query writes what libibverbs'
//! `ibv_cmd_query_qp` writes: everything but `en_sqd_async_notify` and
//! `rate_limit`, which the kernel's query does not report.

use core::ffi::c_int;

use uverbs::sys::Errno;

use uverbs::{
    AccessFlags, AhAttr, Gid, GlobalRoute, Mtu, PathMigState, QpAttr, QpAttrMask, QpCap, QpState,
    QpType,
};

use crate::layout::{
    device::ibv_gid,
    qp::{ibv_ah_attr, ibv_global_route, ibv_qp_attr, ibv_qp_cap},
};

/// `IBV_QP_RATE_LIMIT`: the first mask bit libibverbs' query refuses.
pub(crate) const IBV_QP_RATE_LIMIT: c_int = 1 << 25;

/// A C enum value as the `u8` uverbs' enums hold; values out of range
/// become 255, which no enum knows, instead of wrapping onto a valid one.
fn narrow(v: c_int) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

/// The QP type of `enum ibv_qp_type`.
pub(crate) fn qp_type(v: c_int) -> QpType {
    QpType::from_raw(narrow(v))
}

/// `union ibv_gid` as uverbs' [`Gid`].
pub(crate) fn gid(g: &ibv_gid) -> Gid {
    // SAFETY: the union's members are plain bytes; every pattern is a
    // valid `[u8; 16]`.
    Gid(unsafe { g.raw })
}

/// uverbs' [`Gid`] as `union ibv_gid`.
pub(crate) fn c_gid(g: Gid) -> ibv_gid {
    ibv_gid { raw: g.0 }
}

/// `ibv_ah_attr` as [`AhAttr`]: the GRH counts only when `is_global`.
pub(crate) fn ah_attr(a: &ibv_ah_attr) -> AhAttr {
    AhAttr::new(a.port_num)
        .grh((a.is_global != 0).then(|| {
            GlobalRoute::new(gid(&a.grh.dgid), a.grh.sgid_index)
                .flow_label(a.grh.flow_label)
                .hop_limit(a.grh.hop_limit)
                .traffic_class(a.grh.traffic_class)
        }))
        .dlid(a.dlid)
        .sl(a.sl)
        .src_path_bits(a.src_path_bits)
        .static_rate(a.static_rate)
}

/// [`AhAttr`] as `ibv_ah_attr` (the GRH zeroed without one).
pub(crate) fn c_ah_attr(a: &AhAttr) -> ibv_ah_attr {
    let g = a.grh.unwrap_or_default();
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: c_gid(g.dgid),
            flow_label: g.flow_label,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: u8::from(a.grh.is_some()),
        port_num: a.port_num,
    }
}

/// `ibv_qp_cap` as [`QpCap`].
pub(crate) fn cap(c: &ibv_qp_cap) -> QpCap {
    QpCap::new(c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge)
        .max_inline_data(c.max_inline_data)
}

/// [`QpCap`] as `ibv_qp_cap`.
pub(crate) fn c_cap(c: &QpCap) -> ibv_qp_cap {
    ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// The attributes and mask of an `ibv_modify_qp`: each field is read only
/// when its bit is in `mask`; unknown bits are kept (uverbs' transition
/// check and the kernel refuse them).
pub(crate) fn modify_attr(a: &ibv_qp_attr, mask: c_int) -> (QpAttr, QpAttrMask) {
    use QpAttrMask as M;
    let mask = QpAttrMask::from_bits_retain(mask as u32);
    let has = |b: QpAttrMask| mask.contains(b);
    let mut q = QpAttr::default();
    if has(M::STATE) {
        q.qp_state = QpState::from_raw(narrow(a.qp_state));
    }
    if has(M::CUR_STATE) {
        q.cur_qp_state = QpState::from_raw(narrow(a.cur_qp_state));
    }
    if has(M::EN_SQD_ASYNC_NOTIFY) {
        q.en_sqd_async_notify = a.en_sqd_async_notify != 0;
    }
    if has(M::ACCESS_FLAGS) {
        q.qp_access_flags = AccessFlags::from_bits_retain(a.qp_access_flags);
    }
    if has(M::PKEY_INDEX) {
        q.pkey_index = a.pkey_index;
    }
    if has(M::PORT) {
        q.port_num = a.port_num;
    }
    if has(M::QKEY) {
        q.qkey = a.qkey;
    }
    if has(M::AV) {
        q.ah_attr = ah_attr(&a.ah_attr);
    }
    if has(M::PATH_MTU) {
        q.path_mtu = Mtu(narrow(a.path_mtu));
    }
    if has(M::TIMEOUT) {
        q.timeout = a.timeout;
    }
    if has(M::RETRY_CNT) {
        q.retry_cnt = a.retry_cnt;
    }
    if has(M::RNR_RETRY) {
        q.rnr_retry = a.rnr_retry;
    }
    if has(M::RQ_PSN) {
        q.rq_psn = a.rq_psn;
    }
    if has(M::MAX_QP_RD_ATOMIC) {
        q.max_rd_atomic = a.max_rd_atomic;
    }
    if has(M::ALT_PATH) {
        q.alt_ah_attr = ah_attr(&a.alt_ah_attr);
        q.alt_pkey_index = a.alt_pkey_index;
        q.alt_port_num = a.alt_port_num;
        q.alt_timeout = a.alt_timeout;
    }
    if has(M::MIN_RNR_TIMER) {
        q.min_rnr_timer = a.min_rnr_timer;
    }
    if has(M::SQ_PSN) {
        q.sq_psn = a.sq_psn;
    }
    if has(M::MAX_DEST_RD_ATOMIC) {
        q.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if has(M::PATH_MIG_STATE) {
        q.path_mig_state = PathMigState::from_raw(narrow(a.path_mig_state));
    }
    if has(M::CAP) {
        q.cap = cap(&a.cap);
    }
    if has(M::DEST_QPN) {
        q.dest_qp_num = a.dest_qp_num;
    }
    if has(M::RATE_LIMIT) {
        q.rate_limit = a.rate_limit;
    }
    (q, mask)
}

/// The mask of an `ibv_query_qp` (`enum ibv_qp_attr_mask`) as uverbs'
/// mask; `EOPNOTSUPP` from `IBV_QP_RATE_LIMIT` up, as libibverbs'
/// `ibv_cmd_query_qp`.
pub(crate) fn query_mask(attr_mask: c_int) -> Result<QpAttrMask, Errno> {
    if attr_mask & !(IBV_QP_RATE_LIMIT - 1) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(QpAttrMask::from_bits_retain(attr_mask as u32))
}

/// Writes a query's attributes into the program's `ibv_qp_attr`, field by
/// field as `ibv_cmd_query_qp` does (`en_sqd_async_notify` and
/// `rate_limit` keep the program's values: the kernel reports neither).
pub(crate) fn write_query(q: &QpAttr, out: &mut ibv_qp_attr) {
    out.qp_state = c_int::from(q.qp_state.raw());
    out.cur_qp_state = c_int::from(q.cur_qp_state.raw());
    out.path_mtu = c_int::from(q.path_mtu.0);
    out.path_mig_state = c_int::from(q.path_mig_state.raw());
    out.qkey = q.qkey;
    out.rq_psn = q.rq_psn;
    out.sq_psn = q.sq_psn;
    out.dest_qp_num = q.dest_qp_num;
    out.qp_access_flags = q.qp_access_flags.bits();
    out.cap = c_cap(&q.cap);
    out.ah_attr = c_ah_attr(&q.ah_attr);
    out.alt_ah_attr = c_ah_attr(&q.alt_ah_attr);
    out.pkey_index = q.pkey_index;
    out.alt_pkey_index = q.alt_pkey_index;
    out.sq_draining = u8::from(q.sq_draining);
    out.max_rd_atomic = q.max_rd_atomic;
    out.max_dest_rd_atomic = q.max_dest_rd_atomic;
    out.min_rnr_timer = q.min_rnr_timer;
    out.port_num = q.port_num;
    out.timeout = q.timeout;
    out.retry_cnt = q.retry_cnt;
    out.rnr_retry = q.rnr_retry;
    out.alt_port_num = q.alt_port_num;
    out.alt_timeout = q.alt_timeout;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modify_reads_only_the_fields_its_mask_names() {
        let mut a = crate::qp::tests::blank_attr();
        a.qp_state = 2;
        a.path_mtu = 3;
        a.dest_qp_num = 0x11;
        a.rq_psn = 7;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.qkey = 0x1234; // not in the mask
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.sgid_index = 1;
        a.ah_attr.grh.hop_limit = 1;
        a.ah_attr.port_num = 1;
        let mut raw = [0u8; 16];
        raw[15] = 9;
        a.ah_attr.grh.dgid = ibv_gid { raw };
        let mask = (1 << 0) | (1 << 7) | (1 << 8) | (1 << 20) | (1 << 12) | (1 << 17) | (1 << 15);
        let (q, m) = modify_attr(&a, mask);
        assert_eq!(m.bits(), mask as u32);
        assert_eq!(q.qp_state, QpState::Rtr);
        assert_eq!(q.path_mtu, Mtu(3));
        assert_eq!((q.dest_qp_num, q.rq_psn), (0x11, 7));
        assert_eq!((q.max_dest_rd_atomic, q.min_rnr_timer), (1, 12));
        assert_eq!(q.qkey, 0);
        let grh = q.ah_attr.grh.expect("is_global");
        assert_eq!((grh.sgid_index, grh.hop_limit, grh.dgid.0[15]), (1, 1, 9));
        assert_eq!(q.ah_attr.port_num, 1);
    }

    #[test]
    fn address_vectors_round_trip() {
        let mut a = crate::qp::tests::blank_attr().ah_attr;
        a.is_global = 1;
        a.grh.flow_label = 0xabcde;
        a.grh.traffic_class = 3;
        a.grh.dgid.raw = [7; 16];
        a.dlid = 5;
        a.sl = 2;
        a.static_rate = 3;
        a.port_num = 1;
        let back = c_ah_attr(&ah_attr(&a));
        assert_eq!(gid(&back.grh.dgid), Gid([7; 16]));
        assert_eq!((back.grh.flow_label, back.grh.traffic_class), (0xabcde, 3));
        assert_eq!(
            (back.dlid, back.sl, back.static_rate, back.is_global),
            (5, 2, 3, 1)
        );
        a.is_global = 0;
        assert_eq!(c_ah_attr(&ah_attr(&a)).grh.flow_label, 0);
    }

    #[test]
    fn a_query_leaves_what_the_kernel_does_not_report() {
        let mut out = crate::qp::tests::blank_attr();
        out.en_sqd_async_notify = 1;
        out.rate_limit = 99;
        let q = QpAttr::new()
            .qp_state(QpState::Rts)
            .cur_qp_state(QpState::Rts)
            .sq_psn(5);
        write_query(&q, &mut out);
        assert_eq!((out.qp_state, out.cur_qp_state, out.sq_psn), (3, 3, 5));
        assert_eq!((out.en_sqd_async_notify, out.rate_limit), (1, 99));
    }
}
