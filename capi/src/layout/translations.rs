//! Every value translation the C library keeps, checked name by name
//! against rdma-core 44's verbs.h: send flags and work request opcodes
//! (`ibv_post_send`), completion opcodes, statuses and flags (`ibv_poll_cq`,
//! `ibv_create_cq_ex`), access flags (`ibv_reg_mr`, `ibv_modify_qp`) and QP
//! attribute masks (`ibv_modify_qp`, `ibv_query_qp`).
//!
//! The input of each check is the value a C program compiled against
//! Debian's `<infiniband/verbs.h>` prints for the name (never a constant of
//! this crate, which is the code under test); the expected output is
//! uverbs' constant of the same meaning; what is checked is the library's
//! own translation function, the one its entry point calls. So a mapping
//! dropped or mistyped in a translation fails here, by its C name. The
//! headers come as for the layout probe (`probe.rs`): outside CI a missing
//! header or compiler skips with a note.

#![allow(unsafe_code)] // calls `ibv_post_send`'s translation, an unsafe fn

use std::{collections::HashMap, fmt::Write as _, sync::OnceLock};

use uverbs::{
    sys::Errno, AccessFlags, QpAttrMask, SendFlags, SendOp, WcExFlags, WcFlags, WcFlagsNumbering,
    WcOpcode, WcStatus, WorkCompletion,
};

use super::{
    cq::ibv_cq_init_attr_ex,
    probe::{headers, run_c},
    qp::{
        ibv_send_wr, ibv_send_wr_atomic, ibv_send_wr_ext, ibv_send_wr_imm, ibv_send_wr_qp_type,
        ibv_send_wr_rdma, ibv_send_wr_tso, ibv_send_wr_wr, ibv_send_wr_xrc,
    },
};
use crate::qp::{attr, post};

const SEND_FLAGS: &[(&str, SendFlags)] = &[
    ("IBV_SEND_FENCE", SendFlags::FENCE),
    ("IBV_SEND_SIGNALED", SendFlags::SIGNALED),
    ("IBV_SEND_SOLICITED", SendFlags::SOLICITED),
    ("IBV_SEND_INLINE", SendFlags::INLINE),
    ("IBV_SEND_IP_CSUM", SendFlags::IP_CSUM),
];

/// The request fields a translated operation must carry over.
const ADDR: u64 = 0x1122_3344_5566_7788;
const RKEY: u32 = 0x0abc_def1;
const COMPARE: u64 = 0x0101_0101_0202_0202;
const SWAP: u64 = 0x0303_0303_0404_0404;
/// An immediate in host order (the program writes it big-endian).
const IMM: u32 = 0x1234_5678;

/// Opcodes `ibv_post_send` posts, and what uverbs must be asked for.
fn send_ops() -> Vec<(&'static str, SendOp)> {
    vec![
        (
            "IBV_WR_RDMA_WRITE",
            SendOp::RdmaWrite {
                remote_addr: ADDR,
                rkey: RKEY,
            },
        ),
        (
            "IBV_WR_RDMA_WRITE_WITH_IMM",
            SendOp::RdmaWriteWithImm {
                remote_addr: ADDR,
                rkey: RKEY,
                imm: IMM,
            },
        ),
        ("IBV_WR_SEND", SendOp::Send),
        ("IBV_WR_SEND_WITH_IMM", SendOp::SendWithImm { imm: IMM }),
        (
            "IBV_WR_RDMA_READ",
            SendOp::RdmaRead {
                remote_addr: ADDR,
                rkey: RKEY,
            },
        ),
        (
            "IBV_WR_ATOMIC_CMP_AND_SWP",
            SendOp::CompareSwap {
                remote_addr: ADDR,
                rkey: RKEY,
                compare: COMPARE,
                swap: SWAP,
            },
        ),
        (
            "IBV_WR_ATOMIC_FETCH_AND_ADD",
            SendOp::FetchAdd {
                remote_addr: ADDR,
                rkey: RKEY,
                add: COMPARE,
            },
        ),
        ("IBV_WR_LOCAL_INV", SendOp::LocalInvalidate { rkey: RKEY }),
        (
            "IBV_WR_SEND_WITH_INV",
            SendOp::SendWithInvalidate { rkey: RKEY },
        ),
    ]
}

/// Opcodes verbs.h has and this library refuses with `EOPNOTSUPP`.
const UNSUPPORTED_SEND_OPS: &[&str] = &["IBV_WR_TSO", "IBV_WR_DRIVER1", "IBV_WR_ATOMIC_WRITE"];

const WC_OPCODES: &[(&str, WcOpcode)] = &[
    ("IBV_WC_SEND", WcOpcode::SEND),
    ("IBV_WC_RDMA_WRITE", WcOpcode::RDMA_WRITE),
    ("IBV_WC_RDMA_READ", WcOpcode::RDMA_READ),
    ("IBV_WC_COMP_SWAP", WcOpcode::COMP_SWAP),
    ("IBV_WC_FETCH_ADD", WcOpcode::FETCH_ADD),
    ("IBV_WC_BIND_MW", WcOpcode::BIND_MW),
    ("IBV_WC_LOCAL_INV", WcOpcode::LOCAL_INV),
    ("IBV_WC_ATOMIC_WRITE", WcOpcode::ATOMIC_WRITE),
    ("IBV_WC_RECV", WcOpcode::RECV),
    ("IBV_WC_RECV_RDMA_WITH_IMM", WcOpcode::RECV_RDMA_WITH_IMM),
    ("IBV_WC_DRIVER2", WcOpcode::DRIVER2),
];

const WC_STATUSES: &[(&str, WcStatus)] = &[
    ("IBV_WC_SUCCESS", WcStatus::SUCCESS),
    ("IBV_WC_LOC_LEN_ERR", WcStatus::LOC_LEN_ERR),
    ("IBV_WC_LOC_QP_OP_ERR", WcStatus::LOC_QP_OP_ERR),
    ("IBV_WC_LOC_EEC_OP_ERR", WcStatus::LOC_EEC_OP_ERR),
    ("IBV_WC_LOC_PROT_ERR", WcStatus::LOC_PROT_ERR),
    ("IBV_WC_WR_FLUSH_ERR", WcStatus::WR_FLUSH_ERR),
    ("IBV_WC_MW_BIND_ERR", WcStatus::MW_BIND_ERR),
    ("IBV_WC_BAD_RESP_ERR", WcStatus::BAD_RESP_ERR),
    ("IBV_WC_LOC_ACCESS_ERR", WcStatus::LOC_ACCESS_ERR),
    ("IBV_WC_REM_INV_REQ_ERR", WcStatus::REM_INV_REQ_ERR),
    ("IBV_WC_REM_ACCESS_ERR", WcStatus::REM_ACCESS_ERR),
    ("IBV_WC_REM_OP_ERR", WcStatus::REM_OP_ERR),
    ("IBV_WC_RETRY_EXC_ERR", WcStatus::RETRY_EXC_ERR),
    ("IBV_WC_RNR_RETRY_EXC_ERR", WcStatus::RNR_RETRY_EXC_ERR),
    ("IBV_WC_LOC_RDD_VIOL_ERR", WcStatus::LOC_RDD_VIOL_ERR),
    ("IBV_WC_REM_INV_RD_REQ_ERR", WcStatus::REM_INV_RD_REQ_ERR),
    ("IBV_WC_REM_ABORT_ERR", WcStatus::REM_ABORT_ERR),
    ("IBV_WC_INV_EECN_ERR", WcStatus::INV_EECN_ERR),
    ("IBV_WC_INV_EEC_STATE_ERR", WcStatus::INV_EEC_STATE_ERR),
    ("IBV_WC_FATAL_ERR", WcStatus::FATAL_ERR),
    ("IBV_WC_RESP_TIMEOUT_ERR", WcStatus::RESP_TIMEOUT_ERR),
    ("IBV_WC_GENERAL_ERR", WcStatus::GENERAL_ERR),
];

/// `enum ibv_wc_flags`, as libmlx5 numbers a completion's flags
/// ([`WcFlagsNumbering::Verbs`]).
const WC_FLAGS: &[(&str, WcFlags)] = &[
    ("IBV_WC_GRH", WcFlags::GRH),
    ("IBV_WC_WITH_IMM", WcFlags::WITH_IMM),
    ("IBV_WC_IP_CSUM_OK", WcFlags::IP_CSUM_OK),
    ("IBV_WC_WITH_INV", WcFlags::WITH_INVALIDATE),
];

/// `ibv_create_cq_ex`'s fields a CQ can report.
const WC_EX_FLAGS: &[(&str, WcExFlags)] = &[
    ("IBV_WC_EX_WITH_BYTE_LEN", WcExFlags::BYTE_LEN),
    ("IBV_WC_EX_WITH_IMM", WcExFlags::IMM),
    ("IBV_WC_EX_WITH_QP_NUM", WcExFlags::QP_NUM),
    ("IBV_WC_EX_WITH_SRC_QP", WcExFlags::SRC_QP),
    ("IBV_WC_EX_WITH_SLID", WcExFlags::SLID),
    ("IBV_WC_EX_WITH_SL", WcExFlags::SL),
    ("IBV_WC_EX_WITH_DLID_PATH_BITS", WcExFlags::DLID_PATH_BITS),
    (
        "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP",
        WcExFlags::COMPLETION_TIMESTAMP,
    ),
    (
        "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK",
        WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK,
    ),
];

/// The fields `ibv_create_cq_ex` refuses (`EOPNOTSUPP`, as rdma-core's rxe).
const WC_EX_UNSUPPORTED: &[&str] = &[
    "IBV_WC_EX_WITH_CVLAN",
    "IBV_WC_EX_WITH_FLOW_TAG",
    "IBV_WC_EX_WITH_TM_INFO",
];

const ACCESS_FLAGS: &[(&str, AccessFlags)] = &[
    ("IBV_ACCESS_LOCAL_WRITE", AccessFlags::LOCAL_WRITE),
    ("IBV_ACCESS_REMOTE_WRITE", AccessFlags::REMOTE_WRITE),
    ("IBV_ACCESS_REMOTE_READ", AccessFlags::REMOTE_READ),
    ("IBV_ACCESS_REMOTE_ATOMIC", AccessFlags::REMOTE_ATOMIC),
    ("IBV_ACCESS_MW_BIND", AccessFlags::MW_BIND),
    ("IBV_ACCESS_ZERO_BASED", AccessFlags::ZERO_BASED),
    ("IBV_ACCESS_ON_DEMAND", AccessFlags::ON_DEMAND),
    ("IBV_ACCESS_HUGETLB", AccessFlags::HUGETLB),
    ("IBV_ACCESS_RELAXED_ORDERING", AccessFlags::RELAXED_ORDERING),
];

const QP_ATTR_MASK: &[(&str, QpAttrMask)] = &[
    ("IBV_QP_STATE", QpAttrMask::STATE),
    ("IBV_QP_CUR_STATE", QpAttrMask::CUR_STATE),
    (
        "IBV_QP_EN_SQD_ASYNC_NOTIFY",
        QpAttrMask::EN_SQD_ASYNC_NOTIFY,
    ),
    ("IBV_QP_ACCESS_FLAGS", QpAttrMask::ACCESS_FLAGS),
    ("IBV_QP_PKEY_INDEX", QpAttrMask::PKEY_INDEX),
    ("IBV_QP_PORT", QpAttrMask::PORT),
    ("IBV_QP_QKEY", QpAttrMask::QKEY),
    ("IBV_QP_AV", QpAttrMask::AV),
    ("IBV_QP_PATH_MTU", QpAttrMask::PATH_MTU),
    ("IBV_QP_TIMEOUT", QpAttrMask::TIMEOUT),
    ("IBV_QP_RETRY_CNT", QpAttrMask::RETRY_CNT),
    ("IBV_QP_RNR_RETRY", QpAttrMask::RNR_RETRY),
    ("IBV_QP_RQ_PSN", QpAttrMask::RQ_PSN),
    ("IBV_QP_MAX_QP_RD_ATOMIC", QpAttrMask::MAX_QP_RD_ATOMIC),
    ("IBV_QP_ALT_PATH", QpAttrMask::ALT_PATH),
    ("IBV_QP_MIN_RNR_TIMER", QpAttrMask::MIN_RNR_TIMER),
    ("IBV_QP_SQ_PSN", QpAttrMask::SQ_PSN),
    ("IBV_QP_MAX_DEST_RD_ATOMIC", QpAttrMask::MAX_DEST_RD_ATOMIC),
    ("IBV_QP_PATH_MIG_STATE", QpAttrMask::PATH_MIG_STATE),
    ("IBV_QP_CAP", QpAttrMask::CAP),
    ("IBV_QP_DEST_QPN", QpAttrMask::DEST_QPN),
    ("IBV_QP_RATE_LIMIT", QpAttrMask::RATE_LIMIT),
];

/// Every name above, as verbs.h defines it (one C program, compiled once
/// for all the tests); `None` when the headers or a compiler are missing
/// outside CI.
fn verbs_h() -> Option<&'static HashMap<String, u64>> {
    static VALUES: OnceLock<Option<HashMap<String, u64>>> = OnceLock::new();
    VALUES
        .get_or_init(|| {
            let dir = headers("translation checks")?;
            let mut names: Vec<&str> = Vec::new();
            names.extend(SEND_FLAGS.iter().map(|(n, _)| *n));
            names.extend(send_ops().iter().map(|(n, _)| *n));
            names.push("IBV_WR_BIND_MW");
            names.extend(UNSUPPORTED_SEND_OPS);
            names.extend(WC_OPCODES.iter().map(|(n, _)| *n));
            names.extend(WC_STATUSES.iter().map(|(n, _)| *n));
            names.extend(WC_FLAGS.iter().map(|(n, _)| *n));
            names.extend(WC_EX_FLAGS.iter().map(|(n, _)| *n));
            names.extend(WC_EX_UNSUPPORTED);
            names.extend(ACCESS_FLAGS.iter().map(|(n, _)| *n));
            names.extend(QP_ATTR_MASK.iter().map(|(n, _)| *n));
            let mut c = String::from(
                "#include <stdio.h>\n#include <infiniband/verbs.h>\nint main(void) {\n",
            );
            for n in &names {
                let _ = writeln!(
                    c,
                    "  printf(\"%s %llu\\n\", \"{n}\", (unsigned long long){n});"
                );
            }
            c.push_str("  return 0;\n}\n");
            let text = run_c(&dir, "translations", &c)?;
            let values: HashMap<String, u64> = text
                .lines()
                .map(|l| {
                    let (n, v) = l.split_once(' ').expect("NAME VALUE");
                    (n.to_string(), v.parse().expect("a number"))
                })
                .collect();
            assert_eq!(values.len(), names.len(), "every name printed once");
            Some(values)
        })
        .as_ref()
}

/// verbs.h's value of `name` (which the list above holds).
fn c(values: &HashMap<String, u64>, name: &str) -> u64 {
    values[name]
}

fn narrow(v: u64) -> u32 {
    u32::try_from(v).expect("verbs.h's value fits 32 bits")
}

#[test]
fn post_send_translates_every_send_flag() {
    let Some(v) = verbs_h() else { return };
    let mut all = 0;
    for &(name, want) in SEND_FLAGS {
        let raw = narrow(c(v, name));
        assert_eq!(post::send_flags(raw), want, "{name} = {raw:#x}");
        all |= raw;
    }
    let want = SEND_FLAGS
        .iter()
        .fold(SendFlags::empty(), |acc, (_, f)| acc | *f);
    assert_eq!(post::send_flags(all), want, "all of them together");
}

/// A request of `opcode` whose fields are the ones the operation reads:
/// the RDMA or the atomic member of `wr`, the immediate or the rkey to
/// invalidate.
fn request(opcode: i32, atomic: bool, imm: Option<u32>) -> ibv_send_wr {
    let wr = if atomic {
        ibv_send_wr_wr {
            atomic: ibv_send_wr_atomic {
                remote_addr: ADDR,
                compare_add: COMPARE,
                swap: SWAP,
                rkey: RKEY,
            },
        }
    } else {
        ibv_send_wr_wr {
            rdma: ibv_send_wr_rdma {
                remote_addr: ADDR,
                rkey: RKEY,
            },
        }
    };
    ibv_send_wr {
        wr_id: 0,
        next: core::ptr::null_mut(),
        sg_list: core::ptr::null_mut(),
        num_sge: 0,
        opcode,
        send_flags: 0,
        imm_data: match imm {
            Some(host) => ibv_send_wr_imm {
                imm_data: host.to_be(),
            },
            None => ibv_send_wr_imm {
                invalidate_rkey: RKEY,
            },
        },
        wr,
        qp_type: ibv_send_wr_qp_type {
            xrc: ibv_send_wr_xrc { remote_srqn: 0 },
        },
        bind_mw: ibv_send_wr_ext {
            tso: ibv_send_wr_tso {
                hdr: core::ptr::null_mut(),
                hdr_sz: 0,
                mss: 0,
            },
        },
    }
}

#[test]
fn post_send_translates_every_opcode_with_its_fields() {
    let Some(v) = verbs_h() else { return };
    for (name, want) in send_ops() {
        let opcode = i32::try_from(c(v, name)).expect("an int");
        let atomic = name.starts_with("IBV_WR_ATOMIC");
        let imm = name.ends_with("WITH_IMM").then_some(IMM);
        let wr = request(opcode, atomic, imm);
        // SAFETY: no bind request: nothing the translation dereferences.
        let got = unsafe { post::send_op(&wr) };
        assert_eq!(got, Ok(want), "{name} = {opcode}");
    }
    for name in UNSUPPORTED_SEND_OPS {
        let opcode = i32::try_from(c(v, name)).expect("an int");
        // SAFETY: as above.
        let got = unsafe { post::send_op(&request(opcode, false, None)) };
        assert_eq!(got, Err(Errno::EOPNOTSUPP), "{name} = {opcode}");
    }
    // IBV_WR_BIND_MW reads the window: with none, the window's check
    // answers, not the unknown-opcode one (EINVAL both; the bind itself is
    // posted in mw/tests.rs).
    let bind = i32::try_from(c(v, "IBV_WR_BIND_MW")).expect("an int");
    // SAFETY: a NULL window, which the translation checks for.
    let got = unsafe { post::send_op(&request(bind, false, None)) };
    assert_eq!(got, Err(Errno::EINVAL), "IBV_WR_BIND_MW with no window");
}

fn completion(f: impl FnOnce(&mut WorkCompletion)) -> WorkCompletion {
    let mut w = WorkCompletion::default();
    f(&mut w);
    w
}

#[test]
fn poll_cq_reports_every_opcode_status_and_flag_in_verbs_h_values() {
    let Some(v) = verbs_h() else { return };
    let n = WcFlagsNumbering::Verbs;
    for &(name, op) in WC_OPCODES {
        let wc = crate::cq::to_c(&completion(|w| w.opcode = op), n);
        assert_eq!(u64::from(wc.opcode), c(v, name), "{name}");
    }
    for &(name, status) in WC_STATUSES {
        let wc = crate::cq::to_c(&completion(|w| w.status = status), n);
        assert_eq!(u64::from(wc.status), c(v, name), "{name}");
    }
    let mut all = 0;
    for &(name, flag) in WC_FLAGS {
        let wc = crate::cq::to_c(&completion(|w| w.wc_flags = flag), n);
        assert_eq!(u64::from(wc.wc_flags), c(v, name), "{name}");
        all |= c(v, name);
    }
    let every = completion(|w| w.wc_flags = WC_FLAGS.iter().fold(WcFlags::empty(), |a, f| a | f.1));
    assert_eq!(u64::from(crate::cq::to_c(&every, n).wc_flags), all);
}

/// The attributes of an `ibv_create_cq_ex` asking for `wc_flags`.
fn cq_attr(wc_flags: u64) -> ibv_cq_init_attr_ex {
    ibv_cq_init_attr_ex {
        cqe: 4,
        cq_context: core::ptr::null_mut(),
        channel: core::ptr::null_mut(),
        comp_vector: 0,
        wc_flags,
        comp_mask: 0,
        flags: 0,
        parent_domain: core::ptr::null_mut(),
    }
}

#[test]
fn create_cq_ex_translates_every_field_it_reports() {
    let Some(v) = verbs_h() else { return };
    for &(name, want) in WC_EX_FLAGS {
        let got = crate::cq_ex::create_args(&cq_attr(c(v, name))).map(|a| a.wc_flags);
        assert_eq!(got, Ok(want), "{name}");
    }
    for name in WC_EX_UNSUPPORTED {
        let got = crate::cq_ex::create_args(&cq_attr(c(v, name))).map(|a| a.wc_flags);
        assert_eq!(got, Err(Errno::EOPNOTSUPP), "{name}");
    }
}

#[test]
fn reg_mr_and_modify_qp_translate_every_access_flag() {
    let Some(v) = verbs_h() else { return };
    let mut qp_attr = crate::qp::tests::blank_attr();
    let access_mask = i32::try_from(c(v, "IBV_QP_ACCESS_FLAGS")).expect("an int");
    for &(name, want) in ACCESS_FLAGS {
        let raw = narrow(c(v, name));
        assert_eq!(crate::pd::mr_access(raw, true), Ok(want), "{name}");
        qp_attr.qp_access_flags = raw;
        let (q, _) = attr::modify_attr(&qp_attr, access_mask);
        assert_eq!(q.qp_access_flags, want, "ibv_modify_qp's {name}");
    }
}

#[test]
fn modify_and_query_qp_translate_every_mask_bit() {
    let Some(v) = verbs_h() else { return };
    // Every field set, so that each bit's field is seen to be read.
    let mut a = crate::qp::tests::blank_attr();
    a.qp_state = 2;
    a.cur_qp_state = 1;
    a.en_sqd_async_notify = 1;
    a.qp_access_flags = 1;
    a.pkey_index = 3;
    a.port_num = 1;
    a.qkey = 0x1111;
    a.ah_attr.dlid = 7;
    a.path_mtu = 3;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 6;
    a.rq_psn = 0x22;
    a.max_rd_atomic = 4;
    a.alt_pkey_index = 5;
    a.alt_ah_attr.dlid = 9;
    a.min_rnr_timer = 12;
    a.sq_psn = 0x33;
    a.max_dest_rd_atomic = 2;
    a.path_mig_state = 1;
    a.cap.max_send_wr = 8;
    a.dest_qp_num = 0x44;
    a.rate_limit = 100;
    let (none, _) = attr::modify_attr(&a, 0);
    for &(name, want) in QP_ATTR_MASK {
        let bit = i32::try_from(c(v, name)).expect("an int");
        let (q, mask) = attr::modify_attr(&a, bit);
        assert_eq!(mask, want, "ibv_modify_qp's {name}");
        assert_ne!(q, none, "ibv_modify_qp reads no field for {name}");
        if want == QpAttrMask::RATE_LIMIT {
            // libibverbs' query refuses it and every bit above.
            assert_eq!(attr::query_mask(bit), Err(Errno::EOPNOTSUPP), "{name}");
        } else {
            assert_eq!(attr::query_mask(bit), Ok(want), "ibv_query_qp's {name}");
        }
    }
}
