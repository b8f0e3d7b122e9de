//! Device, port, GID and P_Key queries.

use crate::layout::AnyFn;

/// The op this module fills in (NULL until implemented).
pub(crate) const QUERY_DEVICE_COMPAT: AnyFn = None;
/// The op this module fills in (NULL until implemented).
pub(crate) const QUERY_PORT: AnyFn = None;
/// The op this module fills in (NULL until implemented).
pub(crate) const QUERY_DEVICE_EX: AnyFn = None;
