use super::*;
use crate::{qp_attr::AhAttr, Mtu};

/// The kernel's qp_state_table (Linux 6.1.192, drivers/infiniband/core/
/// verbs.c), extracted mechanically from the source (not from the
/// implementation above): (cur, next, type, required, optional).
#[rustfmt::skip]
const KERNEL_TABLE: &[(&str, &str, &str, &str, &str)] = &[
    ("RESET", "RESET", "RC", "", ""),
    ("RESET", "RESET", "UC", "", ""),
    ("RESET", "RESET", "UD", "", ""),
    ("RESET", "RESET", "RAW_PACKET", "", ""),
    ("RESET", "RESET", "XRC_INI", "", ""),
    ("RESET", "RESET", "XRC_TGT", "", ""),
    ("RESET", "INIT", "RC", "PKEY_INDEX|PORT|ACCESS_FLAGS", ""),
    ("RESET", "INIT", "UC", "PKEY_INDEX|PORT|ACCESS_FLAGS", ""),
    ("RESET", "INIT", "UD", "PKEY_INDEX|PORT|QKEY", ""),
    ("RESET", "INIT", "RAW_PACKET", "PORT", ""),
    ("RESET", "INIT", "XRC_INI", "PKEY_INDEX|PORT|ACCESS_FLAGS", ""),
    ("RESET", "INIT", "XRC_TGT", "PKEY_INDEX|PORT|ACCESS_FLAGS", ""),
    ("INIT", "RESET", "RC", "", ""),
    ("INIT", "RESET", "UC", "", ""),
    ("INIT", "RESET", "UD", "", ""),
    ("INIT", "RESET", "RAW_PACKET", "", ""),
    ("INIT", "RESET", "XRC_INI", "", ""),
    ("INIT", "RESET", "XRC_TGT", "", ""),
    ("INIT", "ERR", "RC", "", ""),
    ("INIT", "ERR", "UC", "", ""),
    ("INIT", "ERR", "UD", "", ""),
    ("INIT", "ERR", "RAW_PACKET", "", ""),
    ("INIT", "ERR", "XRC_INI", "", ""),
    ("INIT", "ERR", "XRC_TGT", "", ""),
    ("INIT", "INIT", "RC", "", "PKEY_INDEX|PORT|ACCESS_FLAGS"),
    ("INIT", "INIT", "UC", "", "PKEY_INDEX|PORT|ACCESS_FLAGS"),
    ("INIT", "INIT", "UD", "", "PKEY_INDEX|PORT|QKEY"),
    ("INIT", "INIT", "RAW_PACKET", "", ""),
    ("INIT", "INIT", "XRC_INI", "", "PKEY_INDEX|PORT|ACCESS_FLAGS"),
    ("INIT", "INIT", "XRC_TGT", "", "PKEY_INDEX|PORT|ACCESS_FLAGS"),
    ("INIT", "RTR", "RC", "AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER", "ALT_PATH|ACCESS_FLAGS|PKEY_INDEX"),
    ("INIT", "RTR", "UC", "AV|PATH_MTU|DEST_QPN|RQ_PSN", "ALT_PATH|ACCESS_FLAGS|PKEY_INDEX"),
    ("INIT", "RTR", "UD", "", "PKEY_INDEX|QKEY"),
    ("INIT", "RTR", "RAW_PACKET", "", ""),
    ("INIT", "RTR", "XRC_INI", "AV|PATH_MTU|DEST_QPN|RQ_PSN", "ALT_PATH|ACCESS_FLAGS|PKEY_INDEX"),
    ("INIT", "RTR", "XRC_TGT", "AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER", "ALT_PATH|ACCESS_FLAGS|PKEY_INDEX"),
    ("RTR", "RESET", "RC", "", ""),
    ("RTR", "RESET", "UC", "", ""),
    ("RTR", "RESET", "UD", "", ""),
    ("RTR", "RESET", "RAW_PACKET", "", ""),
    ("RTR", "RESET", "XRC_INI", "", ""),
    ("RTR", "RESET", "XRC_TGT", "", ""),
    ("RTR", "ERR", "RC", "", ""),
    ("RTR", "ERR", "UC", "", ""),
    ("RTR", "ERR", "UD", "", ""),
    ("RTR", "ERR", "RAW_PACKET", "", ""),
    ("RTR", "ERR", "XRC_INI", "", ""),
    ("RTR", "ERR", "XRC_TGT", "", ""),
    ("RTR", "RTS", "RC", "TIMEOUT|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC", "CUR_STATE|ALT_PATH|ACCESS_FLAGS|MIN_RNR_TIMER|PATH_MIG_STATE"),
    ("RTR", "RTS", "UC", "SQ_PSN", "CUR_STATE|ALT_PATH|ACCESS_FLAGS|PATH_MIG_STATE"),
    ("RTR", "RTS", "UD", "SQ_PSN", "CUR_STATE|QKEY"),
    ("RTR", "RTS", "RAW_PACKET", "", "RATE_LIMIT"),
    ("RTR", "RTS", "XRC_INI", "TIMEOUT|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC", "CUR_STATE|ALT_PATH|ACCESS_FLAGS|PATH_MIG_STATE"),
    ("RTR", "RTS", "XRC_TGT", "TIMEOUT|SQ_PSN", "CUR_STATE|ALT_PATH|ACCESS_FLAGS|MIN_RNR_TIMER|PATH_MIG_STATE"),
    ("RTS", "RESET", "RC", "", ""),
    ("RTS", "RESET", "UC", "", ""),
    ("RTS", "RESET", "UD", "", ""),
    ("RTS", "RESET", "RAW_PACKET", "", ""),
    ("RTS", "RESET", "XRC_INI", "", ""),
    ("RTS", "RESET", "XRC_TGT", "", ""),
    ("RTS", "ERR", "RC", "", ""),
    ("RTS", "ERR", "UC", "", ""),
    ("RTS", "ERR", "UD", "", ""),
    ("RTS", "ERR", "RAW_PACKET", "", ""),
    ("RTS", "ERR", "XRC_INI", "", ""),
    ("RTS", "ERR", "XRC_TGT", "", ""),
    ("RTS", "RTS", "RC", "", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|PATH_MIG_STATE|MIN_RNR_TIMER"),
    ("RTS", "RTS", "UC", "", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|PATH_MIG_STATE"),
    ("RTS", "RTS", "UD", "", "CUR_STATE|QKEY"),
    ("RTS", "RTS", "RAW_PACKET", "", "RATE_LIMIT"),
    ("RTS", "RTS", "XRC_INI", "", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|PATH_MIG_STATE"),
    ("RTS", "RTS", "XRC_TGT", "", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|PATH_MIG_STATE|MIN_RNR_TIMER"),
    ("RTS", "SQD", "RC", "", "EN_SQD_ASYNC_NOTIFY"),
    ("RTS", "SQD", "UC", "", "EN_SQD_ASYNC_NOTIFY"),
    ("RTS", "SQD", "UD", "", "EN_SQD_ASYNC_NOTIFY"),
    ("RTS", "SQD", "RAW_PACKET", "", ""),
    ("RTS", "SQD", "XRC_INI", "", "EN_SQD_ASYNC_NOTIFY"),
    ("RTS", "SQD", "XRC_TGT", "", "EN_SQD_ASYNC_NOTIFY"),
    ("SQD", "RESET", "RC", "", ""),
    ("SQD", "RESET", "UC", "", ""),
    ("SQD", "RESET", "UD", "", ""),
    ("SQD", "RESET", "RAW_PACKET", "", ""),
    ("SQD", "RESET", "XRC_INI", "", ""),
    ("SQD", "RESET", "XRC_TGT", "", ""),
    ("SQD", "ERR", "RC", "", ""),
    ("SQD", "ERR", "UC", "", ""),
    ("SQD", "ERR", "UD", "", ""),
    ("SQD", "ERR", "RAW_PACKET", "", ""),
    ("SQD", "ERR", "XRC_INI", "", ""),
    ("SQD", "ERR", "XRC_TGT", "", ""),
    ("SQD", "RTS", "RC", "", "CUR_STATE|ALT_PATH|ACCESS_FLAGS|MIN_RNR_TIMER|PATH_MIG_STATE"),
    ("SQD", "RTS", "UC", "", "CUR_STATE|ALT_PATH|ACCESS_FLAGS|PATH_MIG_STATE"),
    ("SQD", "RTS", "UD", "", "CUR_STATE|QKEY"),
    ("SQD", "RTS", "RAW_PACKET", "", ""),
    ("SQD", "RTS", "XRC_INI", "", "CUR_STATE|ALT_PATH|ACCESS_FLAGS|PATH_MIG_STATE"),
    ("SQD", "RTS", "XRC_TGT", "", "CUR_STATE|ALT_PATH|ACCESS_FLAGS|MIN_RNR_TIMER|PATH_MIG_STATE"),
    ("SQD", "SQD", "RC", "", "PORT|AV|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|MAX_DEST_RD_ATOMIC|ALT_PATH|ACCESS_FLAGS|PKEY_INDEX|MIN_RNR_TIMER|PATH_MIG_STATE"),
    ("SQD", "SQD", "UC", "", "AV|ALT_PATH|ACCESS_FLAGS|PKEY_INDEX|PATH_MIG_STATE"),
    ("SQD", "SQD", "UD", "", "PKEY_INDEX|QKEY"),
    ("SQD", "SQD", "RAW_PACKET", "", ""),
    ("SQD", "SQD", "XRC_INI", "", "PORT|AV|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|ALT_PATH|ACCESS_FLAGS|PKEY_INDEX|PATH_MIG_STATE"),
    ("SQD", "SQD", "XRC_TGT", "", "PORT|AV|TIMEOUT|MAX_DEST_RD_ATOMIC|ALT_PATH|ACCESS_FLAGS|PKEY_INDEX|MIN_RNR_TIMER|PATH_MIG_STATE"),
    ("SQE", "RESET", "RC", "", ""),
    ("SQE", "RESET", "UC", "", ""),
    ("SQE", "RESET", "UD", "", ""),
    ("SQE", "RESET", "RAW_PACKET", "", ""),
    ("SQE", "RESET", "XRC_INI", "", ""),
    ("SQE", "RESET", "XRC_TGT", "", ""),
    ("SQE", "ERR", "RC", "", ""),
    ("SQE", "ERR", "UC", "", ""),
    ("SQE", "ERR", "UD", "", ""),
    ("SQE", "ERR", "RAW_PACKET", "", ""),
    ("SQE", "ERR", "XRC_INI", "", ""),
    ("SQE", "ERR", "XRC_TGT", "", ""),
    ("SQE", "RTS", "RC", "", ""),
    ("SQE", "RTS", "UC", "", "CUR_STATE|ACCESS_FLAGS"),
    ("SQE", "RTS", "UD", "", "CUR_STATE|QKEY"),
    ("SQE", "RTS", "RAW_PACKET", "", ""),
    ("SQE", "RTS", "XRC_INI", "", ""),
    ("SQE", "RTS", "XRC_TGT", "", ""),
    ("ERR", "RESET", "RC", "", ""),
    ("ERR", "RESET", "UC", "", ""),
    ("ERR", "RESET", "UD", "", ""),
    ("ERR", "RESET", "RAW_PACKET", "", ""),
    ("ERR", "RESET", "XRC_INI", "", ""),
    ("ERR", "RESET", "XRC_TGT", "", ""),
    ("ERR", "ERR", "RC", "", ""),
    ("ERR", "ERR", "UC", "", ""),
    ("ERR", "ERR", "UD", "", ""),
    ("ERR", "ERR", "RAW_PACKET", "", ""),
    ("ERR", "ERR", "XRC_INI", "", ""),
    ("ERR", "ERR", "XRC_TGT", "", ""),
];

const TYPES: [QpType; 6] = [
    QpType::Rc,
    QpType::Uc,
    QpType::Ud,
    QpType::RawPacket,
    QpType::XrcIni,
    QpType::XrcTgt,
];

fn state(s: &str) -> QpState {
    *QpState::ALL.iter().find(|x| x.to_string() == s).unwrap()
}

fn qp_type(s: &str) -> QpType {
    *TYPES.iter().find(|x| x.to_string() == s).unwrap()
}

fn mask(s: &str) -> QpAttrMask {
    s.split('|')
        .filter(|n| !n.is_empty())
        .map(|n| QpAttrMask::from_name(n).unwrap_or_else(|| panic!("{n}")))
        .collect()
}

/// Attributes whose values pass every value check, moving to `next`.
fn good_attr(cur: QpState, next: QpState) -> QpAttr {
    QpAttr {
        qp_state: next,
        cur_qp_state: cur,
        path_mtu: Mtu(3),
        port_num: 1,
        ah_attr: AhAttr {
            port_num: 1,
            ..AhAttr::default()
        },
        alt_port_num: 1,
        alt_ah_attr: AhAttr {
            port_num: 1,
            ..AhAttr::default()
        },
        ..QpAttr::default()
    }
}

fn err_detail(r: Result<QpState>) -> String {
    let e = r.expect_err("expected an error");
    assert_eq!(e.op(), "modify QP");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    e.detail().unwrap().to_string()
}

fn is_kernel_transition(cur: QpState, next: QpState) -> bool {
    KERNEL_TABLE
        .iter()
        .any(|r| state(r.0) == cur && state(r.1) == next)
}

#[test]
fn table_matches_the_kernel_and_every_entry_is_enforced() {
    assert_eq!(KERNEL_TABLE.len(), 22 * 6);
    for &(c, n, t, req, opt) in KERNEL_TABLE {
        let (cur, next, ty) = (state(c), state(n), qp_type(t));
        let (req, opt) = (mask(req), mask(opt));
        assert_eq!(
            required_attrs(ty, cur, next),
            Some((req, opt)),
            "{t} {c}->{n}"
        );
        let attr = good_attr(cur, next);

        // Exactly the required bits (and STATE) pass.
        assert_eq!(
            check_modify(ty, cur, &attr, req | M::STATE),
            Ok(next),
            "{t} {c}->{n}"
        );
        // Required plus all optional bits pass (except where AV is
        // optional but the PORT it implies is not: UC SQD->SQD).
        let implied_port_refused = opt.contains(M::AV) && !opt.contains(M::PORT);
        if !implied_port_refused {
            assert_eq!(
                check_modify(ty, cur, &attr, req | opt | M::STATE),
                Ok(next),
                "{t} {c}->{n} with optional"
            );
        }
        // Without STATE, only a "same state" transition can happen.
        if cur == next {
            assert_eq!(check_modify(ty, cur, &attr, req), Ok(next));
        }

        // Each required bit removed fails, naming it.
        for bit in req.iter() {
            let d = err_detail(check_modify(ty, cur, &attr, (req - bit) | M::STATE));
            let name = bit.joined();
            assert!(d.contains(&format!("missing {name}")), "{t} {c}->{n}: {d}");
        }

        // Each bit outside required + optional + STATE fails, naming it,
        // except the bits the kernel ignores for XRC QPs.
        for bit in (QpAttrMask::all() - req - opt - M::STATE - ignored_bits(ty)).iter() {
            let d = err_detail(check_modify(ty, cur, &attr, req | bit | M::STATE));
            let name = bit.joined();
            if bit == M::CUR_STATE
                && !matches!(
                    cur,
                    QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
                )
            {
                assert!(d.contains("CUR_STATE is accepted only"), "{d}");
            } else {
                let listed = d
                    .split("not allowed: ")
                    .nth(1)
                    .and_then(|s| s.split(" (").next())
                    .unwrap_or("");
                assert!(
                    listed.split(", ").any(|x| x == name),
                    "{t} {c}->{n} +{name}: {d}"
                );
            }
        }
    }
}

#[test]
fn transitions_the_kernel_does_not_have_fail() {
    for ty in TYPES {
        for cur in QpState::ALL {
            for next in QpState::ALL {
                if is_kernel_transition(cur, next) {
                    continue;
                }
                assert_eq!(required_attrs(ty, cur, next), None);
                let attr = good_attr(cur, next);
                let d = err_detail(check_modify(ty, cur, &attr, M::STATE));
                assert!(d.contains("this transition does not exist"), "{d}");
            }
        }
    }
    assert_eq!(
        err_detail(check_modify(
            QpType::Ud,
            QpState::Rts,
            &QpAttr::with_state(QpState::Rtr),
            M::STATE
        )),
        "UD RTS->RTR: this transition does not exist; from RTS a UD QP can go to \
         RESET, RTS, SQD, ERR"
    );
    let d = err_detail(check_modify(
        QpType::Uc,
        QpState::Rts,
        &QpAttr::with_state(QpState::Sqe),
        M::STATE,
    ));
    assert!(d.contains("only the device moves a QP to SQE"), "{d}");
    assert_eq!(next_states(QpState::Reset), [QpState::Reset, QpState::Init]);
    assert_eq!(
        next_states(QpState::Sqe),
        [QpState::Reset, QpState::Rts, QpState::Err]
    );
}

#[test]
fn error_message_says_what_to_fix() {
    let attr = good_attr(QpState::Reset, QpState::Init);
    let e = check_modify(
        QpType::Rc,
        QpState::Reset,
        &attr,
        M::STATE | M::ACCESS_FLAGS | M::QKEY,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "modify QP failed: RC RESET->INIT: missing PKEY_INDEX, PORT; not allowed: QKEY \
         (required: ACCESS_FLAGS, PKEY_INDEX, PORT; optional: none)"
    );
    // Forgetting STATE.
    let d = err_detail(check_modify(
        QpType::Rc,
        QpState::Reset,
        &attr,
        M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
    ));
    assert!(
        d.starts_with("RC RESET->RESET: not allowed: ACCESS_FLAGS, PKEY_INDEX, PORT"),
        "{d}"
    );
    assert!(
        d.ends_with("STATE is not in the mask, so the QP stays in RESET"),
        "{d}"
    );
}

/// The sequences `ibv_rc_pingpong`, `ibv_uc_pingpong` and `ibv_ud_pingpong` use.
#[test]
fn pingpong_sequences() {
    let mut a = good_attr(QpState::Reset, QpState::Init);
    a.qp_access_flags = crate::AccessFlags::REMOTE_WRITE | crate::AccessFlags::REMOTE_READ;
    let init = M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS;
    let rtr = M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN;
    let rc_rtr = rtr | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER;
    let rc_rts =
        M::STATE | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC;
    let ud_init = M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY;
    let seqs: [(QpType, [QpAttrMask; 3]); 3] = [
        (QpType::Rc, [init, rc_rtr, rc_rts]),
        (QpType::Uc, [init, rtr, M::STATE | M::SQ_PSN]),
        (QpType::Ud, [ud_init, M::STATE, M::STATE | M::SQ_PSN]),
    ];
    for (ty, masks) in seqs {
        let mut s = QpState::Reset;
        for (m, want) in masks
            .into_iter()
            .zip([QpState::Init, QpState::Rtr, QpState::Rts])
        {
            a.qp_state = want;
            s = check_modify(ty, s, &a, m).unwrap_or_else(|e| panic!("{ty} {want}: {e}"));
            assert_eq!(s, want);
        }
    }
    // UC has no MAX_DEST_RD_ATOMIC / MIN_RNR_TIMER.
    a.qp_state = QpState::Rtr;
    let d = err_detail(check_modify(QpType::Uc, QpState::Init, &a, rc_rtr));
    assert!(
        d.contains("not allowed: MIN_RNR_TIMER, MAX_DEST_RD_ATOMIC"),
        "{d}"
    );
}

#[test]
fn cur_state_rules() {
    // CUR_STATE overrides the tracked state: the device moved the QP to SQE.
    let mut a = good_attr(QpState::Sqe, QpState::Rts);
    assert_eq!(
        check_modify(QpType::Ud, QpState::Rts, &a, M::STATE | M::CUR_STATE),
        Ok(QpState::Rts)
    );
    // Without STATE, next = the asserted current state.
    assert_eq!(
        check_modify(QpType::Ud, QpState::Rtr, &a, M::CUR_STATE | M::QKEY),
        Err(check_modify(QpType::Ud, QpState::Sqe, &a, M::CUR_STATE | M::QKEY).unwrap_err())
    );
    a.cur_qp_state = QpState::Init;
    a.qp_state = QpState::Rtr;
    let d = err_detail(check_modify(
        QpType::Ud,
        QpState::Init,
        &a,
        M::STATE | M::CUR_STATE,
    ));
    assert!(
        d.contains("CUR_STATE is accepted only when the QP is in RTR, RTS, SQD or SQE"),
        "{d}"
    );
    a.cur_qp_state = QpState::Other(9);
    let d = err_detail(check_modify(QpType::Ud, QpState::Rts, &a, M::CUR_STATE));
    assert!(d.contains("cur_qp_state 9 is not a QP state"), "{d}");
    let d = err_detail(check_modify(QpType::Ud, QpState::Other(7), &a, M::STATE));
    assert!(d.contains("current state (7) is unknown"), "{d}");
}

#[test]
fn type_independent_checks() {
    let a = QpAttr::with_state(QpState::Other(8));
    let d = err_detail(check_modify(QpType::Rc, QpState::Reset, &a, M::STATE));
    assert!(d.contains("qp_state 8 is not a QP state"), "{d}");
    let d = err_detail(check_modify(
        QpType::Rc,
        QpState::Rts,
        &QpAttr::default(),
        QpAttrMask::from_bits_retain(1 << 22),
    ));
    assert!(d.contains("unknown attribute mask bits 0x400000"), "{d}");
    // Driver QP types: no table, but value checks still apply.
    let mut a = good_attr(QpState::Reset, QpState::Rtr);
    assert_eq!(
        check_modify(QpType::Driver, QpState::Reset, &a, M::STATE | M::QKEY),
        Ok(QpState::Rtr)
    );
    a.port_num = 0;
    let d = err_detail(check_modify(
        QpType::Driver,
        QpState::Reset,
        &a,
        M::STATE | M::PORT,
    ));
    assert!(d.contains("port_num 0 is not a port"), "{d}");
    assert_eq!(
        required_attrs(QpType::Driver, QpState::Reset, QpState::Init),
        None
    );
}

#[test]
fn xrc_ignored_bits_pass() {
    let a = good_attr(QpState::Init, QpState::Rtr);
    let base = M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN;
    assert_eq!(
        check_modify(
            QpType::XrcIni,
            QpState::Init,
            &a,
            base | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER
        ),
        Ok(QpState::Rtr)
    );
    let a = good_attr(QpState::Rtr, QpState::Rts);
    assert_eq!(
        check_modify(
            QpType::XrcTgt,
            QpState::Rtr,
            &a,
            M::STATE | M::TIMEOUT | M::SQ_PSN | M::MAX_QP_RD_ATOMIC | M::RETRY_CNT | M::RNR_RETRY
        ),
        Ok(QpState::Rts)
    );
}

#[test]
fn port_and_mtu_values() {
    // AV outside INIT->RTR implies PORT, which UC SQD->SQD does not accept.
    let mut a = good_attr(QpState::Sqd, QpState::Sqd);
    let d = err_detail(check_modify(QpType::Uc, QpState::Sqd, &a, M::AV));
    assert!(
        d.contains("not allowed: PORT (PORT is implied by AV"),
        "{d}"
    );
    assert_eq!(
        check_modify(QpType::Rc, QpState::Sqd, &a, M::AV),
        Ok(QpState::Sqd)
    );
    a.port_num = 2;
    let d = err_detail(check_modify(QpType::Rc, QpState::Sqd, &a, M::AV | M::PORT));
    assert!(
        d.contains("ah_attr.port_num (1) must equal port_num (2)"),
        "{d}"
    );

    let mut a = good_attr(QpState::Init, QpState::Rtr);
    let rtr = M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN;
    a.ah_attr.port_num = 0;
    let d = err_detail(check_modify(QpType::Uc, QpState::Init, &a, rtr));
    assert!(d.contains("ah_attr.port_num is 0"), "{d}");
    a.ah_attr.port_num = 1;
    a.path_mtu = Mtu(0);
    let d = err_detail(check_modify(QpType::Uc, QpState::Init, &a, rtr));
    assert!(d.contains("path_mtu 0 is not an MTU"), "{d}");
    a.path_mtu = Mtu(5);
    a.alt_ah_attr.port_num = 2;
    let d = err_detail(check_modify(
        QpType::Uc,
        QpState::Init,
        &a,
        rtr | M::ALT_PATH,
    ));
    assert!(
        d.contains("alt_port_num (1) and alt_ah_attr.port_num (2)"),
        "{d}"
    );

    assert!(check_rtr_av_port(1, &a, rtr).is_ok());
    let e = check_rtr_av_port(2, &a, rtr).unwrap_err();
    assert!(e.to_string().contains("must be the QP's port (2"), "{e}");
    assert!(check_rtr_av_port(2, &a, M::AV).is_ok());
}
