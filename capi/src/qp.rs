//! Queue pairs: create, modify, query, destroy, and the posting ops.

use crate::layout::AnyFn;

/// The op this module fills in (NULL until implemented).
pub(crate) const POST_SEND: AnyFn = None;
/// The op this module fills in (NULL until implemented).
pub(crate) const POST_RECV: AnyFn = None;
/// The op this module fills in (NULL until implemented).
pub(crate) const CREATE_QP_EX: AnyFn = None;
