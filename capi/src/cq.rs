//! Completion queues: ibv_create_cq, ibv_poll_cq's op, arming.

use crate::layout::AnyFn;

/// The op this module fills in (NULL until implemented).
pub(crate) const POLL_CQ: AnyFn = None;
/// The op this module fills in (NULL until implemented).
pub(crate) const REQ_NOTIFY_CQ: AnyFn = None;
