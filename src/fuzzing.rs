//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`; hidden,
//! and not part of the supported API).
//!
//! Every function here is a thin wrapper that hands fuzzer bytes to a
//! decoder the crate runs on bytes written by the kernel, the device or a
//! network peer, where that decoder is private. The wrappers only adapt
//! the input (a byte slice becomes a mapping, a string or a zero-padded
//! response struct, as the real caller would have it) and return what the
//! decoder returned: the code under test is the code the library runs.
//! Decoders that are public already (`netlink::attrs`, `DevxEvent::parse`,
//! `CmdOut::read`, `Gid`'s formatting) and the read paths reachable through
//! the fake kernels of `uverbs::testing` (async, completion and rdma_cm
//! events, query responses, mlx5 CQEs) are fuzzed without a wrapper.
//!
//! The wrappers of provider decoders live in `providers/fuzzing.rs` (the
//! core never names a provider) and are re-exported here.
//!
//! `fuzz/README.md` lists the targets and what each asserts.

use zerocopy::{FromBytes, IntoBytes};

use crate::{
    abi,
    netlink::{self, DatagramEnd},
    qp_attr::{self, QpAttr, QpAttrMask, QpInitInfo},
    sys::Errno,
};

/// `netlink::walk_datagram`, the splitting of one received `NETLINK_RDMA`
/// datagram into messages (the `Linux` transport's receive loop): calls
/// `on_message` with each message; `Ok(None)` when the datagram ended the
/// reply (`NLMSG_DONE`, an acknowledgement), `Ok(Some(multi))` when every
/// message was handed on (`multi`: one had `NLM_F_MULTI`).
pub fn netlink_datagram(
    datagram: &[u8],
    on_message: &mut dyn FnMut(&[u8]),
) -> Result<Option<bool>, Errno> {
    Ok(match netlink::walk_datagram(datagram, on_message)? {
        DatagramEnd::Done => None,
        DatagramEnd::More { multi } => Some(multi),
    })
}

/// The sysfs `node_guid` parser of device discovery (`"xxxx:xxxx:xxxx:xxxx"`).
pub fn sysfs_node_guid(text: &str) -> Option<u64> {
    crate::device_list::parse_guid(text)
}

/// The sysfs `dev` parser of device discovery (`"231:192"`, a `dev_t`).
pub fn sysfs_dev(text: &str) -> Option<u64> {
    crate::device_list::parse_dev_t(text)
}

/// The sysfs GID parser of the GID query fallback (`ports/N/gids/I`).
pub fn sysfs_gid(text: &str) -> Option<[u8; 16]> {
    crate::query::parse_sysfs_gid(text)
}

/// A zero-padded copy of the prefix of `bytes` as a `T`: what a response
/// buffer holds when the kernel wrote `bytes.len()` bytes of it.
fn padded<T: FromBytes + IntoBytes>(bytes: &[u8]) -> T {
    let mut value = T::new_zeroed();
    let dst = value.as_mut_bytes();
    let n = dst.len().min(bytes.len());
    dst[..n].copy_from_slice(&bytes[..n]);
    value
}

/// `decode_query` on an `IB_USER_VERBS_CMD_QUERY_QP` response (`resp`: its
/// bytes, zero-padded to `struct ib_uverbs_query_qp_resp`).
pub fn qp_query_response(resp: &[u8]) -> (QpAttr, QpInitInfo) {
    qp_attr::decode_query(&padded::<abi::IbUverbsQueryQpResp>(resp))
}

/// `decode_init_qp_attr` on rdma_cm's `INIT_QP_ATTR` response (`resp`: its
/// bytes, zero-padded to `struct ib_uverbs_qp_attr`).
pub fn cm_init_qp_attr_response(resp: &[u8]) -> (QpAttr, QpAttrMask) {
    qp_attr::decode_init_qp_attr(&padded::<abi::IbUverbsQpAttr>(resp))
}

/// `encode_modify`: the `IB_USER_VERBS_CMD_MODIFY_QP` request for `attr`
/// and `mask` (for round trips of decoded attributes).
pub fn qp_modify_request(handle: u32, attr: &QpAttr, mask: QpAttrMask) -> abi::IbUverbsModifyQp {
    qp_attr::encode_modify(handle, attr, mask)
}

pub use crate::providers::fuzzing::*;
