//! The conversions of `crate::marshall`, called as a C program calls them:
//! each field by field from distinct values.

use core::ptr::null_mut;

use super::*;

fn kern_ah(seed: u8) -> IbUverbsAhAttr {
    let mut a = IbUverbsAhAttr::default();
    a.grh.dgid = core::array::from_fn(|i| seed.wrapping_add(i as u8));
    a.grh.flow_label = 0x000a_bcde + u32::from(seed);
    a.grh.sgid_index = seed.wrapping_add(1);
    a.grh.hop_limit = seed.wrapping_add(2);
    a.grh.traffic_class = seed.wrapping_add(3);
    a.dlid = 0x1234 + u16::from(seed);
    a.sl = seed.wrapping_add(4);
    a.src_path_bits = seed.wrapping_add(5);
    a.static_rate = seed.wrapping_add(6);
    a.is_global = 1;
    a.port_num = seed.wrapping_add(7);
    a
}

fn check_ah(got: &ibv_ah_attr, want: &IbUverbsAhAttr) {
    // SAFETY: `raw` covers the whole union; every bit pattern is a byte.
    assert_eq!(unsafe { got.grh.dgid.raw }, want.grh.dgid);
    assert_eq!(got.grh.flow_label, want.grh.flow_label);
    assert_eq!(got.grh.sgid_index, want.grh.sgid_index);
    assert_eq!(got.grh.hop_limit, want.grh.hop_limit);
    assert_eq!(got.grh.traffic_class, want.grh.traffic_class);
    assert_eq!(got.dlid, want.dlid);
    assert_eq!(got.sl, want.sl);
    assert_eq!(got.src_path_bits, want.src_path_bits);
    assert_eq!(got.static_rate, want.static_rate);
    assert_eq!(got.is_global, want.is_global);
    assert_eq!(got.port_num, want.port_num);
}

/// A zeroed C struct (all of these are integers, arrays and unions of
/// them).
fn zeroed<T>() -> T {
    // SAFETY: only used for the plain C structs above, for which all-zero
    // is a valid value (as `memset(0)` makes it in C).
    unsafe { core::mem::zeroed() }
}

#[test]
fn ah_attr_is_copied_field_by_field() {
    let src = kern_ah(0x40);
    let mut dst: ibv_ah_attr = zeroed();
    // SAFETY: both point to live structs of the right types.
    unsafe { ibv_copy_ah_attr_from_kern(&mut dst, &src) };
    check_ah(&dst, &src);
}

#[test]
fn qp_attr_is_copied_and_keeps_the_callers_state_and_rate_limit() {
    let mut s = IbUverbsQpAttr {
        qp_attr_mask: 0xffff,
        qp_state: 3,
        cur_qp_state: 2,
        path_mtu: 5,
        path_mig_state: 1,
        qkey: 0x1111_2222,
        rq_psn: 0x33_4455,
        sq_psn: 0x66_7788,
        dest_qp_num: 0x99_aabb,
        qp_access_flags: 0xf,
        ah_attr: kern_ah(0x10),
        alt_ah_attr: kern_ah(0x80),
        max_send_wr: 101,
        max_recv_wr: 102,
        max_send_sge: 103,
        max_recv_sge: 104,
        max_inline_data: 105,
        pkey_index: 0x0102,
        alt_pkey_index: 0x0304,
        en_sqd_async_notify: 1,
        sq_draining: 1,
        max_rd_atomic: 11,
        max_dest_rd_atomic: 12,
        min_rnr_timer: 13,
        port_num: 14,
        timeout: 15,
        retry_cnt: 16,
        rnr_retry: 17,
        alt_port_num: 18,
        alt_timeout: 19,
        ..IbUverbsQpAttr::default()
    };
    s.reserved = [0xee; 5];
    let mut d: ibv_qp_attr = zeroed();
    d.qp_state = 4;
    d.rate_limit = 777;
    // SAFETY: both point to live structs of the right types.
    unsafe { ibv_copy_qp_attr_from_kern(&mut d, &s) };
    assert_eq!(d.qp_state, 4, "libibverbs leaves qp_state to the caller");
    assert_eq!(d.rate_limit, 777, "and rate_limit");
    assert_eq!((d.cur_qp_state, d.path_mtu, d.path_mig_state), (2, 5, 1));
    assert_eq!(
        (d.qkey, d.rq_psn, d.sq_psn, d.dest_qp_num, d.qp_access_flags),
        (s.qkey, s.rq_psn, s.sq_psn, s.dest_qp_num, s.qp_access_flags)
    );
    let c = d.cap;
    assert_eq!(
        (
            c.max_send_wr,
            c.max_recv_wr,
            c.max_send_sge,
            c.max_recv_sge,
            c.max_inline_data
        ),
        (101, 102, 103, 104, 105)
    );
    check_ah(&d.ah_attr, &s.ah_attr);
    check_ah(&d.alt_ah_attr, &s.alt_ah_attr);
    assert_eq!((d.pkey_index, d.alt_pkey_index), (0x0102, 0x0304));
    assert_eq!((d.en_sqd_async_notify, d.sq_draining), (1, 1));
    assert_eq!(
        [
            d.max_rd_atomic,
            d.max_dest_rd_atomic,
            d.min_rnr_timer,
            d.port_num,
            d.timeout,
            d.retry_cnt,
            d.rnr_retry,
            d.alt_port_num,
            d.alt_timeout
        ],
        [11, 12, 13, 14, 15, 16, 17, 18, 19]
    );
}

#[test]
fn path_rec_is_copied_with_big_endian_fields_untouched() {
    let s = IbUserPathRec {
        dgid: [0xd0; 16],
        sgid: core::array::from_fn(|i| i as u8),
        dlid: 0x0102_u16.to_be(),
        slid: 0x0304_u16.to_be(),
        raw_traffic: 1,
        flow_label: 0x000a_bcde_u32.to_be(),
        reversible: 1,
        mtu: 4,
        pkey: 0xffff_u16.to_be(),
        hop_limit: 64,
        traffic_class: 3,
        numb_path: 1,
        sl: 2,
        mtu_selector: 2,
        rate_selector: 2,
        rate: 7,
        packet_life_time_selector: 2,
        packet_life_time: 18,
        preference: 9,
    };
    let mut d = ibv_sa_path_rec::default();
    // SAFETY: both point to live structs of the right types.
    unsafe { ibv_copy_path_rec_from_kern(&mut d, &s) };
    assert_eq!((d.dgid, d.sgid), (s.dgid, s.sgid));
    assert_eq!(
        (d.dlid, d.slid, d.flow_label, d.pkey),
        (s.dlid, s.slid, s.flow_label, s.pkey)
    );
    assert_eq!((d.raw_traffic, d.reversible, d.mtu), (1, 1, 4));
    assert_eq!(
        [
            d.hop_limit,
            d.traffic_class,
            d.numb_path,
            d.sl,
            d.mtu_selector,
            d.rate_selector
        ],
        [64, 3, 1, 2, 2, 2]
    );
    assert_eq!(
        [
            d.rate,
            d.packet_life_time_selector,
            d.packet_life_time,
            d.preference
        ],
        [7, 2, 18, 9]
    );
}

#[test]
fn conversions_ignore_null_pointers() {
    let src = kern_ah(1);
    let mut dst: ibv_ah_attr = zeroed();
    // SAFETY: NULL is allowed and means "nothing to do".
    unsafe {
        ibv_copy_ah_attr_from_kern(null_mut(), &src);
        ibv_copy_ah_attr_from_kern(&mut dst, core::ptr::null());
        ibv_copy_qp_attr_from_kern(null_mut(), core::ptr::null());
        ibv_copy_path_rec_from_kern(null_mut(), core::ptr::null());
    }
    assert_eq!(dst.dlid, 0);
}
