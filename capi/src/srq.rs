//! Shared receive queues.

use crate::layout::AnyFn;

/// The op this module fills in (NULL until implemented).
pub(crate) const POST_SRQ_RECV: AnyFn = None;
/// The op this module fills in (NULL until implemented).
pub(crate) const GET_SRQ_NUM: AnyFn = None;
/// The op this module fills in (NULL until implemented).
pub(crate) const CREATE_SRQ_EX: AnyFn = None;
