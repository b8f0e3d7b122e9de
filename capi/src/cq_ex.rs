//! ibv_cq_ex: ibv_create_cq_ex's op and the polling ops.

use crate::layout::AnyFn;

/// The op this module fills in (NULL until implemented).
pub(crate) const CREATE_CQ_EX: AnyFn = None;
