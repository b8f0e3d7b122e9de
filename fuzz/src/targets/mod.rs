//! Every fuzz target: its body, its seeds and its dictionary.
//!
//! A body is a plain `fn(&[u8])` that panics when an invariant breaks. The
//! stable harness (`uverbs-fuzz`) and the libFuzzer entry points
//! (`fuzz_targets/`) run the same bodies.

mod cm;
mod events;
mod mlx5;
mod netlink;
mod rxe;
mod verbs;
mod wire;

pub use self::{
    cm::{cm_event, cm_query},
    events::{async_event, comp_event},
    mlx5::{devx_async, devx_cmd, devx_event, mlx5_context, mlx5_cqe},
    netlink::{kernel_values, netlink_attrs, netlink_datagram, nldev_discovery, sysfs_text},
    rxe::rxe_ring,
    verbs::{ah_from_wc, qp_attr, verbs_responses},
    wire::{endpoint, pingpong_wire, rping_wire},
};
use crate::engine::Target;

/// Bytes that binary kernel records are full of.
const BINARY: &[&[u8]] = &[
    b"\x00\x00\x00\x00",
    b"\xff\xff\xff\xff",
    b"\x01\x00\x00\x00",
    b"\x00\x00\x00\x80",
    b"\xff\xff\xff\x7f",
    b"\x00\x00\x00\x00\x00\x00\x00\x00",
];

/// Tokens of the pingpong address text.
const PINGPONG: &[&[u8]] = &[
    b":",
    b"0000",
    b"000000",
    b"fe800000",
    b"ffffffff",
    b"\0",
    b" ",
    b"+",
    b"0x",
    b"\xc3\xa9",
    b"\xe2\x82\xac",
    b"\xf0\x9f\x98\x80",
    b"\xff",
];

macro_rules! target {
    ($name:ident, $seeds:path, $dict:expr, $max:expr, $checks:expr) => {
        Target {
            name: stringify!($name),
            checks: $checks,
            run: $name,
            seeds: $seeds,
            dict: $dict,
            max_len: $max,
        }
    };
}

/// All targets, in the order the harness runs them.
pub const TARGETS: &[Target] = &[
    target!(netlink_attrs, netlink::netlink_attrs_seeds, netlink::NETLINK_DICT, 512,
        "netlink::attrs/msg_type/NlAttr accessors: attributes stay inside the declared message, 4-aligned, in order, accessors agree with the payload"),
    target!(netlink_datagram, netlink::netlink_datagram_seeds, netlink::NETLINK_DICT, 512,
        "the Linux transport's datagram splitting (netlink::walk_datagram): messages inside the datagram, aligned, as long as their headers say, DONE/ERROR never handed on"),
    target!(nldev_discovery, netlink::nldev_discovery_seeds, netlink::NETLINK_DICT, 1024,
        "devices_with on fuzzed RDMA_NLDEV_CMD_GET / GET_CHARDEV replies: no more devices than dump messages, sorted, node paths under /dev/infiniband"),
    target!(sysfs_text, netlink::sysfs_text_seeds, netlink::TEXT_DICT, 128,
        "sysfs node_guid, dev and GID parsers: what parses re-parses identically from its canonical text"),
    target!(kernel_values, netlink::kernel_values_seeds, BINARY, 32,
        "Gid Display (parses back to the same address, <= 45 chars), Mtu/PortState/QpState/PathMigState/CmEventKind round trips, status and event names"),
    target!(async_event, events::async_event_seeds, BINARY, 40,
        "async event records through Context::try_get_async_event (fake rxe): 16-byte records decode to their type and object, other sizes are EBADMSG/EINVAL, DEVICE_FATAL removes the device, nothing stays queued"),
    target!(comp_event, events::comp_event_seeds, BINARY, 24,
        "completion event records through CompletionChannel::try_get_event (fake rxe): only the channel's CQ gets an event, other sizes are refused"),
    target!(cm_event, cm::cm_event_seeds, BINARY, 400,
        "rdma_cm GET_EVENT responses through EventChannel::try_get_event (fake ucma): events reach their id, kind/status/uid/private data/conn or UD params match the bytes, CONNECT_REQUEST brings exactly one new id"),
    target!(cm_query, cm::cm_query_seeds, BINARY, 400,
        "rdma_cm QUERY (addr), QUERY_ROUTE and INIT_QP_ATTR responses (fake ucma): sockaddrs decode to the bytes they came from, at most 2 paths, mask and state as sent"),
    target!(rxe_ring, rxe::rxe_ring_seeds, BINARY, 2048,
        "rxe ring header validation and index protocol (RxeCq poll, Producer fill) on a fuzzed mapping: accepted geometry fits the mapping, polls return exactly the waiting CQEs in slot order, a producer fills exactly the free slots"),
    target!(verbs_responses, verbs::verbs_responses_seeds, BINARY, 1024,
        "query_device/query_port/query_gid_table/query_gid/QueuePair::query on scripted ioctl and write responses and errors (fake rxe): values or errors, with every fallback path"),
    target!(qp_attr, verbs::qp_attr_seeds, BINARY, 160,
        "QUERY_QP and rdma_cm INIT_QP_ATTR response decoding: decoded attributes encode back into MODIFY_QP with the response's fields (GRH only when is_global)"),
    target!(ah_from_wc, verbs::ah_from_wc_seeds, BINARY, 48,
        "init_ah_from_wc on a peer's GRH / IPv4 header (fake rxe): a reply route comes from a local GID the header names, to the header's source; bad headers are InvalidArgument"),
    target!(mlx5_cqe, mlx5::mlx5_cqe_seeds, BINARY, 65 * 24,
        "mlx5 CQEs written by the device model, polled by the provider: exactly the CQEs of live QPs surface, in order, with their QP number, status class and byte count; no CQ overrun"),
    target!(mlx5_context, mlx5::mlx5_context_seeds, BINARY, 272,
        "mlx5 GET_CONTEXT driver response decoding: refused iff short, fields as sent, num_uars_per_page never 0; then a context opened with it on a fake mlx5_ib with fuzzed UAR page ids, lengths and static bfreg choices, and QPs created: UAR counts mlx5_ib never sends are Malformed (never an overflow), QPs name UARs of the pages the kernel gave"),
    target!(devx_event, mlx5::devx_event_seeds, BINARY, 80,
        "DevxEvent::parse in both channel modes: accepted iff the size is the mode's, cookie/EQE/type/CQN/syndrome from the right bytes"),
    target!(devx_cmd, mlx5::devx_cmd_seeds, BINARY, 64,
        "DevX mailboxes: CmdOut/CmdIn headers (CmdIn round-trips), status names, firmware_result: firmware errors carry status, syndrome and the whole mailbox"),
    target!(devx_async, mlx5::devx_async_seeds, BINARY, 64,
        "DevX async command answers: wr_id and output length, short answers Malformed"),
    target!(pingpong_wire, wire::pingpong_wire_seeds, PINGPONG, 80,
        "the CLI pingpong address message (defect 6): decoded or refused with an error naming the bad field, never a panic; encodes back when fields fit"),
    target!(endpoint, wire::endpoint_seeds, BINARY, 64,
        "uverbs::Endpoint::decode on a peer's bytes: decoded or refused as InvalidArgument with a reason, never a panic; what decodes encodes back to the same fields and decodes again to the same endpoint"),
    target!(rping_wire, wire::rping_wire_seeds, BINARY, 64,
        "the CLI rping_rdma_info and ping text: the info round-trips exactly, ping text stops at the first NUL"),
];

/// The target called `name`.
pub fn by_name(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::TARGETS;

    /// Every seed passes its target, and the committed corpus holds every
    /// seed as written by `uverbs-fuzz write-seeds`.
    #[test]
    fn seeds_pass_and_the_corpus_holds_them() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
        for t in TARGETS {
            for (name, bytes) in (t.seeds)() {
                (t.run)(&bytes);
                let path = corpus.join(t.name).join(name);
                let committed = std::fs::read(&path).unwrap_or_default();
                assert!(
                    committed == bytes,
                    "{} differs from the seed: run `uverbs-fuzz write-seeds`",
                    path.display()
                );
            }
        }
    }

    #[test]
    fn names_are_unique() {
        for (i, t) in TARGETS.iter().enumerate() {
            assert!(TARGETS[..i].iter().all(|u| u.name != t.name), "{}", t.name);
        }
    }
}
