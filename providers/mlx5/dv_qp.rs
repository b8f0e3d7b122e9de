//! mlx5 QPs beyond the verbs: the raw WQE of `mlx5dv_wr_raw_wqe` written
//! into the QP's send session call by call.

use super::Mlx5;
use crate::{
    providers::Member,
    wr::{PostError, PostErrorKind},
    QueuePair,
};

/// Writes a WQE the program built into `qp`'s open send session (opened
/// by [`QueuePair::begin_send`]), like `mlx5dv_wr_raw_wqe` between
/// `ibv_wr_start` and `ibv_wr_complete`: the call-by-call form of
/// [`WrSession::raw_wqe`](crate::WrSession::raw_wqe), whose rules it
/// follows (the WQE's size its ctrl segment's DS, its WQE index set to
/// its place, its completion `wr_id` with [`crate::WcOpcode::DRIVER2`]).
/// Refused, nothing taken: no session open
/// ([`PostErrorKind::BadState`]), a QP of another provider
/// ([`PostErrorKind::WrongProvider`]), and what `raw_wqe` refuses.
#[doc(alias = "mlx5dv_wr_raw_wqe")]
pub fn push_raw_wqe(qp: &mut QueuePair, wr_id: u64, wqe: &[u8]) -> Result<(), PostError> {
    let provider = qp.inner.ctx.provider.name();
    qp.push_open_with(|s| match Mlx5::send_session_of(s) {
        Some(s) => s.push_raw(wr_id, wqe),
        None => Err(PostErrorKind::WrongProvider {
            qp: provider,
            session: <Mlx5 as crate::providers::Provider>::NAME,
        }),
    })
}
