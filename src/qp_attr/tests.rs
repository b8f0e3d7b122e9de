use super::*;
use zerocopy::{FromZeros, IntoBytes};

fn grh_av() -> AhAttr {
    AhAttr {
        grh: Some(GlobalRoute {
            dgid: Gid(std::array::from_fn(|i| 0xa0 + i as u8)),
            flow_label: 0x12345,
            sgid_index: 3,
            hop_limit: 64,
            traffic_class: 0x28,
        }),
        dlid: 0xbeef,
        sl: 5,
        src_path_bits: 1,
        static_rate: 7,
        port_num: 1,
    }
}

#[test]
fn raw_values_round_trip() {
    for v in 0..=255u8 {
        assert_eq!(QpType::from_raw(v).raw(), v);
        assert_eq!(QpState::from_raw(v).raw(), v);
        assert_eq!(PathMigState::from_raw(v).raw(), v);
    }
    assert_eq!(QpType::from_raw(2), QpType::Rc);
    assert_eq!(QpType::from_raw(0xff), QpType::Driver);
    assert_eq!(QpState::from_raw(6), QpState::Err);
    assert_eq!(QpState::from_raw(7), QpState::Other(7));
    assert_eq!(QpState::Rts.to_string(), "RTS");
    assert_eq!(QpType::XrcTgt.to_string(), "XRC_TGT");
}

#[test]
fn mask_bits_and_names() {
    assert_eq!(QpAttrMask::DEST_QPN.bits(), 1 << 20);
    assert_eq!(QpAttrMask::RATE_LIMIT.bits(), 1 << 25);
    let m = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::from_bits_retain(1 << 21);
    assert_eq!(
        m.names(),
        ["IBV_QP_STATE", "IBV_QP_PKEY_INDEX", "IBV_QP_0x200000"]
    );
    assert_eq!(m.joined(), "STATE, PKEY_INDEX, 0x200000");
    assert_eq!(QpAttrMask::empty().joined(), "none");
    assert!(QpAttrMask::RATE_LIMIT.needs_ex());
    assert!(!QpAttrMask::all()
        .difference(QpAttrMask::RATE_LIMIT)
        .needs_ex());
}

#[test]
fn ah_attr_round_trips_through_both_layouts() {
    for av in [
        grh_av(),
        AhAttr {
            grh: None,
            ..grh_av()
        },
    ] {
        assert_eq!(AhAttr::from_abi(&av.to_abi()), av);
        assert_eq!(AhAttr::from_qp_dest(&av.to_qp_dest()), av);
    }
}

#[test]
fn ah_attr_layouts_put_fields_at_their_offsets() {
    let av = grh_av();
    let d = av.to_qp_dest();
    let b = d.as_bytes();
    assert_eq!(b.len(), 32);
    assert_eq!(&b[0..16], &av.grh.unwrap().dgid.0);
    assert_eq!(&b[16..20], &0x12345u32.to_ne_bytes());
    assert_eq!(&b[20..22], &0xbeefu16.to_ne_bytes());
    assert_eq!(&b[22..24], &[0, 0]);
    assert_eq!(&b[24..32], &[3, 64, 0x28, 5, 1, 7, 1, 1]);

    let a = av.to_abi();
    let b = a.as_bytes();
    assert_eq!(b.len(), 32);
    assert_eq!(&b[0..16], &av.grh.unwrap().dgid.0);
    assert_eq!(&b[16..20], &0x12345u32.to_ne_bytes());
    assert_eq!(&b[20..24], &[3, 64, 0x28, 0]);
    assert_eq!(&b[24..26], &0xbeefu16.to_ne_bytes());
    assert_eq!(&b[26..32], &[5, 1, 7, 1, 1, 0]);
}

#[test]
fn no_grh_means_zero_grh_fields_and_is_global_0() {
    let av = AhAttr {
        grh: None,
        ..grh_av()
    };
    let d = av.to_qp_dest();
    assert_eq!(d.dgid, [0; 16]);
    assert_eq!(
        (d.flow_label, d.sgid_index, d.hop_limit, d.traffic_class),
        (0, 0, 0, 0)
    );
    assert_eq!(d.is_global, 0);
    // A dest with stale GRH bytes but is_global 0 decodes without a GRH.
    let mut d = grh_av().to_qp_dest();
    d.is_global = 0;
    assert_eq!(AhAttr::from_qp_dest(&d).grh, None);
}

fn rc_rtr_attr() -> QpAttr {
    QpAttr {
        qp_state: QpState::Rtr,
        cur_qp_state: QpState::Init,
        path_mtu: Mtu::BYTES_1024,
        path_mig_state: PathMigState::Armed,
        qkey: 0x1111,
        rq_psn: 0x123456,
        sq_psn: 0x654321,
        dest_qp_num: 0x17,
        qp_access_flags: AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
        ah_attr: grh_av(),
        alt_ah_attr: AhAttr {
            port_num: 2,
            dlid: 9,
            ..AhAttr::default()
        },
        pkey_index: 2,
        alt_pkey_index: 4,
        en_sqd_async_notify: true,
        max_rd_atomic: 8,
        max_dest_rd_atomic: 16,
        min_rnr_timer: 12,
        port_num: 1,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 6,
        alt_port_num: 2,
        alt_timeout: 18,
        rate_limit: 1000,
        ..QpAttr::default()
    }
}

#[test]
fn encode_modify_copies_exactly_the_masked_fields() {
    use QpAttrMask as M;
    let attr = rc_rtr_attr();
    let mask = M::STATE
        | M::AV
        | M::PATH_MTU
        | M::DEST_QPN
        | M::RQ_PSN
        | M::MAX_DEST_RD_ATOMIC
        | M::MIN_RNR_TIMER;
    let c = encode_modify(42, &attr, mask);
    assert_eq!(c.qp_handle, 42);
    assert_eq!(c.attr_mask, mask.bits());
    assert_eq!(c.qp_state, 2);
    assert_eq!(c.path_mtu, 3);
    assert_eq!(c.dest_qp_num, 0x17);
    assert_eq!(c.rq_psn, 0x123456);
    assert_eq!(c.max_dest_rd_atomic, 16);
    assert_eq!(c.min_rnr_timer, 12);
    assert_eq!(c.dest, grh_av().to_qp_dest());
    // Not in the mask: zero.
    assert_eq!(c.cur_qp_state, 0);
    assert_eq!(c.qkey, 0);
    assert_eq!(c.sq_psn, 0);
    assert_eq!(c.qp_access_flags, 0);
    assert_eq!(
        (c.port_num, c.timeout, c.retry_cnt, c.rnr_retry),
        (0, 0, 0, 0)
    );
    assert_eq!(c.alt_dest, abi::IbUverbsQpDest::default());

    // Byte offsets of ib_uverbs_modify_qp (112 bytes).
    let b = c.as_bytes();
    assert_eq!(b.len(), 112);
    assert_eq!(&b[64..68], &42u32.to_ne_bytes());
    assert_eq!(&b[68..72], &mask.bits().to_ne_bytes());
    assert_eq!(&b[76..80], &0x123456u32.to_ne_bytes());
    assert_eq!(&b[84..88], &0x17u32.to_ne_bytes());
    assert_eq!(b[96], 2); // qp_state
    assert_eq!(b[98], 3); // path_mtu
    assert_eq!(b[102], 16); // max_dest_rd_atomic
    assert_eq!(b[103], 12); // min_rnr_timer
    assert_eq!(&b[20..22], &0xbeefu16.to_ne_bytes()); // dest.dlid
    assert_eq!(b[31], 1); // dest.port_num
}

#[test]
fn encode_modify_all_fields() {
    let attr = QpAttr {
        cur_qp_state: QpState::Sqe,
        ..rc_rtr_attr()
    };
    let mask = QpAttrMask::all();
    let c = encode_ex_modify(7, &attr, mask);
    assert_eq!(c.rate_limit, 1000);
    let c = c.base;
    assert_eq!(c.attr_mask, mask.bits());
    assert_eq!(c.cur_qp_state, 5);
    assert_eq!(c.path_mig_state, 2);
    assert_eq!(c.qkey, 0x1111);
    assert_eq!(c.sq_psn, 0x654321);
    assert_eq!(c.qp_access_flags, 6);
    assert_eq!((c.pkey_index, c.alt_pkey_index), (2, 4));
    assert_eq!(c.en_sqd_async_notify, 1);
    assert_eq!((c.max_rd_atomic, c.port_num, c.timeout), (8, 1, 14));
    assert_eq!((c.retry_cnt, c.rnr_retry), (7, 6));
    assert_eq!((c.alt_port_num, c.alt_timeout), (2, 18));
    assert_eq!(c.alt_dest.port_num, 2);
    assert_eq!(c.alt_dest.dlid, 9);
    assert_eq!(c.alt_dest.is_global, 0);
    assert_eq!(c.reserved, [0, 0]);

    let ex = encode_ex_modify(7, &attr, QpAttrMask::STATE);
    assert_eq!(ex.rate_limit, 0);
    assert_eq!(ex.as_bytes().len(), 120);
    assert_eq!(&ex.as_bytes()[112..116], &[0; 4]);
    let ex = encode_ex_modify(7, &attr, QpAttrMask::RATE_LIMIT);
    assert_eq!(&ex.as_bytes()[112..116], &1000u32.to_ne_bytes());
}

#[test]
fn decode_query_response() {
    let mut r = abi::IbUverbsQueryQpResp::new_zeroed();
    r.dest = grh_av().to_qp_dest();
    r.alt_dest.port_num = 2;
    r.alt_dest.dlid = 77;
    r.max_send_wr = 64;
    r.max_recv_wr = 128;
    r.max_send_sge = 2;
    r.max_recv_sge = 3;
    r.max_inline_data = 60;
    r.qkey = 0x11223344;
    r.rq_psn = 10;
    r.sq_psn = 20;
    r.dest_qp_num = 0x99;
    r.qp_access_flags = 0x7;
    r.pkey_index = 1;
    r.alt_pkey_index = 5;
    r.qp_state = 3;
    r.cur_qp_state = 3;
    r.path_mtu = 5;
    r.path_mig_state = 1;
    r.sq_draining = 1;
    r.max_rd_atomic = 4;
    r.max_dest_rd_atomic = 8;
    r.min_rnr_timer = 12;
    r.port_num = 1;
    r.timeout = 14;
    r.retry_cnt = 7;
    r.rnr_retry = 7;
    r.alt_port_num = 2;
    r.alt_timeout = 9;
    r.sq_sig_all = 1;
    let (a, init) = decode_query(&r);
    let cap = QpCap {
        max_send_wr: 64,
        max_recv_wr: 128,
        max_send_sge: 2,
        max_recv_sge: 3,
        max_inline_data: 60,
    };
    assert_eq!(
        init,
        QpInitInfo {
            cap,
            sq_sig_all: true
        }
    );
    let want = QpAttr {
        qp_state: QpState::Rts,
        cur_qp_state: QpState::Rts,
        path_mtu: Mtu::BYTES_4096,
        path_mig_state: PathMigState::Rearm,
        qkey: 0x11223344,
        rq_psn: 10,
        sq_psn: 20,
        dest_qp_num: 0x99,
        qp_access_flags: AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ,
        cap,
        ah_attr: grh_av(),
        alt_ah_attr: AhAttr {
            port_num: 2,
            dlid: 77,
            ..AhAttr::default()
        },
        pkey_index: 1,
        alt_pkey_index: 5,
        en_sqd_async_notify: false,
        sq_draining: true,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 8,
        min_rnr_timer: 12,
        port_num: 1,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        alt_port_num: 2,
        alt_timeout: 9,
        rate_limit: 0,
    };
    assert_eq!(a, want);
}

#[test]
fn decode_query_keeps_unknown_values() {
    let mut r = abi::IbUverbsQueryQpResp::new_zeroed();
    r.qp_state = 9;
    r.path_mig_state = 7;
    r.qp_access_flags = 1 << 30;
    let (a, init) = decode_query(&r);
    assert_eq!(a.qp_state, QpState::Other(9));
    assert_eq!(a.path_mig_state, PathMigState::Other(7));
    assert_eq!(a.qp_access_flags.bits(), 1 << 30);
    assert!(!init.sq_sig_all);
    assert_eq!(a.ah_attr, AhAttr::default());
}

#[test]
fn decode_rdma_cm_init_qp_attr() {
    let mut k = abi::IbUverbsQpAttr::new_zeroed();
    k.qp_attr_mask = (QpAttrMask::STATE | QpAttrMask::AV | QpAttrMask::DEST_QPN).bits();
    k.qp_state = 2;
    k.path_mtu = 4;
    k.dest_qp_num = 0x42;
    k.ah_attr = grh_av().to_abi();
    k.max_dest_rd_atomic = 16;
    let (a, m) = decode_init_qp_attr(&k);
    assert_eq!(m, QpAttrMask::STATE | QpAttrMask::AV | QpAttrMask::DEST_QPN);
    assert_eq!(a.qp_state, QpState::Rtr);
    assert_eq!(a.path_mtu, Mtu::BYTES_2048);
    assert_eq!(a.dest_qp_num, 0x42);
    assert_eq!(a.ah_attr, grh_av());
    assert_eq!(a.max_dest_rd_atomic, 16);
    // Re-encoded for MODIFY_QP, the AV lands in the qp_dest layout.
    assert_eq!(encode_modify(1, &a, m).dest, grh_av().to_qp_dest());
}
