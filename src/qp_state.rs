//! The InfiniBand QP state machine, as the kernel enforces it on modify.
//!
//! The rules are the kernel's `qp_state_table` and `ib_modify_qp_is_ok`
//! (drivers/infiniband/core/verbs.c, checked against Linux 6.1), plus the
//! checks `modify_qp` in drivers/infiniband/core/uverbs_cmd.c makes before
//! it: mask bits the kernel does not know, state values, port numbers, the
//! XRC "ignored" bits, and `PORT` being implied by `AV` outside INIT→RTR.
//! Checking here first turns the kernel's bare `EINVAL` into a message that
//! says what to fix.
//!
//! Only the QP types that userspace can create and the table has rows for are
//! covered: RC, UC, UD, RAW_PACKET, XRC_INI and XRC_TGT. The table's SMI and
//! GSI columns (kernel-only QP types) are left out. Driver-specific types
//! ([`QpType::Driver`], e.g. mlx5 DCI/DCT) are checked by their drivers with
//! their own rules, so [`check_modify`] only makes the type-independent
//! checks for them.

use crate::{
    error::{Error, ErrorKind, Result},
    qp_attr::{QpAttr, QpAttrMask, QpState, QpType},
};

use QpAttrMask as M;

const OP: &str = "modify QP";

/// Required or optional bits of one transition, per QP type (a column of the
/// kernel's table; SMI and GSI left out).
#[derive(Clone, Copy, Default)]
struct PerType {
    rc: QpAttrMask,
    uc: QpAttrMask,
    ud: QpAttrMask,
    raw_packet: QpAttrMask,
    xrc_ini: QpAttrMask,
    xrc_tgt: QpAttrMask,
}

impl PerType {
    fn get(&self, t: QpType) -> Option<QpAttrMask> {
        Some(match t {
            QpType::Rc => self.rc,
            QpType::Uc => self.uc,
            QpType::Ud => self.ud,
            QpType::RawPacket => self.raw_packet,
            QpType::XrcIni => self.xrc_ini,
            QpType::XrcTgt => self.xrc_tgt,
            QpType::Driver | QpType::Other(_) => return None,
        })
    }
}

/// One valid transition: what it requires and what it also accepts.
#[derive(Clone, Copy, Default)]
struct Transition {
    req: PerType,
    opt: PerType,
}

/// The kernel's `qp_state_table[cur][next]`, `None` where `.valid` is 0.
fn transition(cur: QpState, next: QpState) -> Option<Transition> {
    use QpState::*;
    let plain = Some(Transition::default());
    match (cur, next) {
        (Reset, Reset) => plain,
        (Reset, Init) => Some(Transition {
            req: PerType {
                ud: M::PKEY_INDEX | M::PORT | M::QKEY,
                raw_packet: M::PORT,
                uc: M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                rc: M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                xrc_ini: M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                xrc_tgt: M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
            },
            opt: PerType::default(),
        }),
        (Init, Reset) | (Init, Err) => plain,
        (Init, Init) => Some(Transition {
            req: PerType::default(),
            opt: PerType {
                ud: M::PKEY_INDEX | M::PORT | M::QKEY,
                uc: M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                rc: M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                xrc_ini: M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                xrc_tgt: M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                raw_packet: M::empty(),
            },
        }),
        (Init, Rtr) => Some(Transition {
            req: PerType {
                uc: M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN,
                rc: M::AV
                    | M::PATH_MTU
                    | M::DEST_QPN
                    | M::RQ_PSN
                    | M::MAX_DEST_RD_ATOMIC
                    | M::MIN_RNR_TIMER,
                xrc_ini: M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN,
                xrc_tgt: M::AV
                    | M::PATH_MTU
                    | M::DEST_QPN
                    | M::RQ_PSN
                    | M::MAX_DEST_RD_ATOMIC
                    | M::MIN_RNR_TIMER,
                ud: M::empty(),
                raw_packet: M::empty(),
            },
            opt: PerType {
                ud: M::PKEY_INDEX | M::QKEY,
                uc: M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
                rc: M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
                xrc_ini: M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
                xrc_tgt: M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
                raw_packet: M::empty(),
            },
        }),
        (Rtr, Reset) | (Rtr, Err) => plain,
        (Rtr, Rts) => Some(Transition {
            req: PerType {
                ud: M::SQ_PSN,
                uc: M::SQ_PSN,
                rc: M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC,
                xrc_ini: M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC,
                xrc_tgt: M::TIMEOUT | M::SQ_PSN,
                raw_packet: M::empty(),
            },
            opt: PerType {
                ud: M::CUR_STATE | M::QKEY,
                uc: M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE,
                rc: M::CUR_STATE
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::MIN_RNR_TIMER
                    | M::PATH_MIG_STATE,
                xrc_ini: M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE,
                xrc_tgt: M::CUR_STATE
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::MIN_RNR_TIMER
                    | M::PATH_MIG_STATE,
                raw_packet: M::RATE_LIMIT,
            },
        }),
        (Rts, Reset) | (Rts, Err) => plain,
        (Rts, Rts) => Some(Transition {
            req: PerType::default(),
            opt: PerType {
                ud: M::CUR_STATE | M::QKEY,
                uc: M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE,
                rc: M::CUR_STATE
                    | M::ACCESS_FLAGS
                    | M::ALT_PATH
                    | M::PATH_MIG_STATE
                    | M::MIN_RNR_TIMER,
                xrc_ini: M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE,
                xrc_tgt: M::CUR_STATE
                    | M::ACCESS_FLAGS
                    | M::ALT_PATH
                    | M::PATH_MIG_STATE
                    | M::MIN_RNR_TIMER,
                raw_packet: M::RATE_LIMIT,
            },
        }),
        (Rts, Sqd) => Some(Transition {
            req: PerType::default(),
            opt: PerType {
                ud: M::EN_SQD_ASYNC_NOTIFY,
                uc: M::EN_SQD_ASYNC_NOTIFY,
                rc: M::EN_SQD_ASYNC_NOTIFY,
                xrc_ini: M::EN_SQD_ASYNC_NOTIFY,
                xrc_tgt: M::EN_SQD_ASYNC_NOTIFY,
                raw_packet: M::empty(),
            },
        }),
        (Sqd, Reset) | (Sqd, Err) => plain,
        (Sqd, Rts) => Some(Transition {
            req: PerType::default(),
            opt: PerType {
                ud: M::CUR_STATE | M::QKEY,
                uc: M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE,
                rc: M::CUR_STATE
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::MIN_RNR_TIMER
                    | M::PATH_MIG_STATE,
                xrc_ini: M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE,
                xrc_tgt: M::CUR_STATE
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::MIN_RNR_TIMER
                    | M::PATH_MIG_STATE,
                raw_packet: M::empty(),
            },
        }),
        (Sqd, Sqd) => Some(Transition {
            req: PerType::default(),
            opt: PerType {
                ud: M::PKEY_INDEX | M::QKEY,
                uc: M::AV | M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PATH_MIG_STATE,
                rc: M::PORT
                    | M::AV
                    | M::TIMEOUT
                    | M::RETRY_CNT
                    | M::RNR_RETRY
                    | M::MAX_QP_RD_ATOMIC
                    | M::MAX_DEST_RD_ATOMIC
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::PKEY_INDEX
                    | M::MIN_RNR_TIMER
                    | M::PATH_MIG_STATE,
                xrc_ini: M::PORT
                    | M::AV
                    | M::TIMEOUT
                    | M::RETRY_CNT
                    | M::RNR_RETRY
                    | M::MAX_QP_RD_ATOMIC
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::PKEY_INDEX
                    | M::PATH_MIG_STATE,
                xrc_tgt: M::PORT
                    | M::AV
                    | M::TIMEOUT
                    | M::MAX_DEST_RD_ATOMIC
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::PKEY_INDEX
                    | M::MIN_RNR_TIMER
                    | M::PATH_MIG_STATE,
                raw_packet: M::empty(),
            },
        }),
        (Sqe, Reset) | (Sqe, Err) => plain,
        (Sqe, Rts) => Some(Transition {
            req: PerType::default(),
            opt: PerType {
                ud: M::CUR_STATE | M::QKEY,
                uc: M::CUR_STATE | M::ACCESS_FLAGS,
                ..PerType::default()
            },
        }),
        (Err, Reset) | (Err, Err) => plain,
        _ => None,
    }
}

/// The states the kernel lets a QP in `current` move to (whatever its type),
/// in numeric order. Staying in the same state counts where the kernel
/// allows it (it does for every state but SQE).
pub fn next_states(current: QpState) -> Vec<QpState> {
    QpState::ALL
        .into_iter()
        .filter(|&n| transition(current, n).is_some())
        .collect()
}

/// What the transition `cur` → `next` of a `qp_type` QP requires and what it
/// also accepts, as `(required, optional)` attribute masks, from the kernel's
/// `qp_state_table`. `STATE` is in neither (it is what selects `next`; any
/// transition accepts it).
///
/// `None` if the kernel has no such transition, or for QP types whose drivers
/// apply their own rules ([`QpType::Driver`], [`QpType::Other`]).
///
/// The kernel also ignores (removes before checking) `MAX_DEST_RD_ATOMIC` and
/// `MIN_RNR_TIMER` for XRC_INI and `MAX_QP_RD_ATOMIC`, `RETRY_CNT` and
/// `RNR_RETRY` for XRC_TGT; those are not listed as optional here, but
/// [`check_modify`] accepts them.
pub fn required_attrs(
    qp_type: QpType,
    cur: QpState,
    next: QpState,
) -> Option<(QpAttrMask, QpAttrMask)> {
    let t = transition(cur, next)?;
    Some((t.req.get(qp_type)?, t.opt.get(qp_type)?))
}

/// The bits the uverbs `modify_qp` drops for a QP type before checking
/// (`modify_qp_mask` in uverbs_cmd.c): fields XRC QPs do not have.
fn ignored_bits(qp_type: QpType) -> QpAttrMask {
    match qp_type {
        QpType::XrcIni => M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER,
        QpType::XrcTgt => M::MAX_QP_RD_ATOMIC | M::RETRY_CNT | M::RNR_RETRY,
        _ => M::empty(),
    }
}

fn invalid(detail: String) -> Error {
    Error::new(OP, ErrorKind::InvalidArgument, detail)
}

fn list(states: &[QpState]) -> String {
    states
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a modify of a `qp_type` QP that is in `current` with `attr` and
/// `mask` as the kernel will, and returns the state it moves to.
///
/// The state the kernel checks from is `attr.cur_qp_state` when `mask` has
/// `CUR_STATE` (the caller asserts it, e.g. after the device moved the QP to
/// SQE), otherwise `current`. The next state is `attr.qp_state` with `STATE`,
/// otherwise the QP stays where it is (and only that state's "same state"
/// transition's attributes may be given).
///
/// What is checked, as the kernel does:
/// - no mask bits the kernel does not know (21..=24 are reserved);
/// - `qp_state`/`cur_qp_state` are real states when their bits are set;
/// - `CUR_STATE` only from RTR, RTS, SQD or SQE;
/// - the transition exists, every required attribute is in the mask and
///   nothing outside required + optional + `STATE` is (after dropping the XRC
///   ignored bits, and adding the `PORT` the kernel implies with `AV` outside
///   INIT→RTR);
/// - port numbers: `port_num` with `PORT`, `ah_attr.port_num` with `AV`,
///   `alt_port_num` = `alt_ah_attr.port_num` with `ALT_PATH` are not 0; with
///   `AV` and `PORT` outside INIT→RTR the two ports agree.
///
/// Also checked, although the kernel leaves it to the driver: `path_mtu` is a
/// valid MTU (1..=5) with `PATH_MTU`.
///
/// Not checked (the kernel knows, this function does not): that ports exist
/// on the device, that the INIT→RTR `ah_attr.port_num` equals the QP's port
/// (see `check_rtr_av_port`), device limits (MTU above the port's, atomics
/// depth), and the privileged Q_Key (high bit set) rule.
///
/// For [`QpType::Driver`] and [`QpType::Other`] only the type-independent
/// checks are made, and the next state is returned.
pub fn check_modify(
    qp_type: QpType,
    current: QpState,
    attr: &QpAttr,
    mask: QpAttrMask,
) -> Result<QpState> {
    let unknown = mask.difference(QpAttrMask::all());
    if !unknown.is_empty() {
        return Err(invalid(format!(
            "unknown attribute mask bits {:#x}: the kernel rejects them (bits 21-24 are reserved)",
            unknown.bits()
        )));
    }
    if mask.contains(M::STATE) && matches!(attr.qp_state, QpState::Other(_)) {
        return Err(invalid(format!(
            "qp_state {} is not a QP state (RESET=0 .. ERR=6)",
            attr.qp_state.raw()
        )));
    }
    if mask.contains(M::CUR_STATE) && matches!(attr.cur_qp_state, QpState::Other(_)) {
        return Err(invalid(format!(
            "cur_qp_state {} is not a QP state (RESET=0 .. ERR=6)",
            attr.cur_qp_state.raw()
        )));
    }

    let cur = if mask.contains(M::CUR_STATE) {
        attr.cur_qp_state
    } else {
        current
    };
    let next = if mask.contains(M::STATE) {
        attr.qp_state
    } else {
        cur
    };
    if let QpState::Other(v) = cur {
        return Err(invalid(format!(
            "the QP's current state ({v}) is unknown; query the QP, or give CUR_STATE"
        )));
    }
    let what = format!("{qp_type} {cur}->{next}");

    let user_mask = mask.difference(ignored_bits(qp_type));
    // Outside INIT->RTR, the kernel sets PORT from the AV when only AV is given.
    let to_rtr = mask.contains(M::STATE) && attr.qp_state == QpState::Rtr;
    let implied_port = mask.contains(M::AV) && !to_rtr && !mask.contains(M::PORT);
    let effective = if implied_port {
        user_mask | M::PORT
    } else {
        user_mask
    };

    let known_type = !matches!(qp_type, QpType::Driver | QpType::Other(_));
    if known_type {
        if mask.contains(M::CUR_STATE)
            && !matches!(
                cur,
                QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
            )
        {
            return Err(invalid(format!(
                "{what}: CUR_STATE is accepted only when the QP is in RTR, RTS, SQD or SQE \
                 (cur_qp_state is {cur}); remove it"
            )));
        }
        let Some((req, opt)) = required_attrs(qp_type, cur, next) else {
            let mut detail = format!(
                "{what}: this transition does not exist; from {cur} a {qp_type} QP can go to {}",
                list(&next_states(cur))
            );
            if next == QpState::Sqe {
                detail.push_str(" (only the device moves a QP to SQE, on a send error)");
            }
            return Err(invalid(detail));
        };
        let missing = req.difference(effective);
        let extra = effective.difference(req | opt | M::STATE);
        if !missing.is_empty() || !extra.is_empty() {
            let mut parts = Vec::new();
            if !missing.is_empty() {
                parts.push(format!("missing {}", missing.joined()));
            }
            if !extra.is_empty() {
                let mut s = format!("not allowed: {}", extra.joined());
                if implied_port && extra.contains(M::PORT) {
                    s.push_str(
                        " (PORT is implied by AV: outside INIT->RTR the kernel sets PORT \
                         from ah_attr.port_num)",
                    );
                }
                parts.push(s);
            }
            let mut detail = format!(
                "{what}: {} (required: {}; optional: {})",
                parts.join("; "),
                req.joined(),
                opt.joined()
            );
            if !mask.contains(M::STATE) && !extra.is_empty() {
                detail.push_str(&format!(
                    "; STATE is not in the mask, so the QP stays in {cur}"
                ));
            }
            return Err(invalid(detail));
        }
    }

    check_values(&what, attr, mask, to_rtr)?;
    Ok(next)
}

/// The value checks of uverbs `modify_qp` (ports) and the MTU range.
fn check_values(what: &str, attr: &QpAttr, mask: QpAttrMask, to_rtr: bool) -> Result<()> {
    if mask.contains(M::PORT) && attr.port_num == 0 {
        return Err(invalid(format!(
            "{what}: port_num 0 is not a port (ports are numbered from 1)"
        )));
    }
    if mask.contains(M::AV) {
        if attr.ah_attr.port_num == 0 {
            return Err(invalid(format!(
                "{what}: ah_attr.port_num is 0; set it to the QP's port (ports are numbered from 1)"
            )));
        }
        if !to_rtr && mask.contains(M::PORT) && attr.port_num != attr.ah_attr.port_num {
            return Err(invalid(format!(
                "{what}: with AV and PORT, ah_attr.port_num ({}) must equal port_num ({})",
                attr.ah_attr.port_num, attr.port_num
            )));
        }
    }
    if mask.contains(M::ALT_PATH)
        && (attr.alt_port_num == 0 || attr.alt_port_num != attr.alt_ah_attr.port_num)
    {
        return Err(invalid(format!(
            "{what}: with ALT_PATH, alt_port_num ({}) and alt_ah_attr.port_num ({}) must be \
             the same port (numbered from 1)",
            attr.alt_port_num, attr.alt_ah_attr.port_num
        )));
    }
    if mask.contains(M::PATH_MTU) && attr.path_mtu.bytes().is_none() {
        return Err(invalid(format!(
            "{what}: path_mtu {} is not an MTU (1=256, 2=512, 3=1024, 4=2048, 5=4096; \
             use Mtu::from_bytes or the port's active_mtu)",
            attr.path_mtu.0
        )));
    }
    Ok(())
}

/// The INIT→RTR check the kernel makes with the QP's port (set at
/// RESET→INIT): with `STATE` = RTR and `AV`, `ah_attr.port_num` must be
/// `qp_port`. For the QP object, which knows its port.
pub(crate) fn check_rtr_av_port(qp_port: u8, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
    if mask.contains(M::STATE | M::AV)
        && attr.qp_state == QpState::Rtr
        && attr.ah_attr.port_num != qp_port
    {
        return Err(invalid(format!(
            "INIT->RTR: ah_attr.port_num ({}) must be the QP's port ({qp_port}, set at RESET->INIT)",
            attr.ah_attr.port_num
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
                M::STATE
                    | M::TIMEOUT
                    | M::SQ_PSN
                    | M::MAX_QP_RD_ATOMIC
                    | M::RETRY_CNT
                    | M::RNR_RETRY
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
}
