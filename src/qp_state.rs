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
mod tests;
