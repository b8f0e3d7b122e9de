//! Netlink replies, device discovery, sysfs text, and the conversions of
//! numbers the kernel reports.

use std::{net::Ipv6Addr, path::Path, sync::Arc};

use uverbs::{
    abi,
    cm::CmEventKind,
    fuzzing,
    netlink::{self, Request, NLMSG_HDRLEN},
    sys::{fake::FakeKernel, Errno, Kernel},
    AsyncEventType, Gid, Mtu, PathMigState, PortState, QpState, WcOpcode, WcStatus,
};

/// `NLM_F_MULTI`.
const NLM_F_MULTI: u16 = 2;

/// The `RDMA_NLDEV_CMD_GET` dump reply of one device, as nldev writes it.
pub(crate) fn dev_reply(index: u32, name: &str, multi: bool) -> Vec<u8> {
    let flags = if multi { NLM_F_MULTI } else { 0 };
    let mut m = Request::nldev(abi::RDMA_NLDEV_CMD_GET, flags, 1);
    m.u32(abi::RDMA_NLDEV_ATTR_DEV_INDEX, index)
        .string(abi::RDMA_NLDEV_ATTR_DEV_NAME, name)
        .u32(abi::RDMA_NLDEV_ATTR_PORT_INDEX, 1)
        .u64(abi::RDMA_NLDEV_ATTR_NODE_GUID, 0x5054_00ff_fe12_3456)
        .u8(abi::RDMA_NLDEV_ATTR_DEV_NODE_TYPE, 1);
    m.finish().to_vec()
}

/// The `RDMA_NLDEV_CMD_GET_CHARDEV` reply naming `uverbs<n>`.
pub(crate) fn chardev_reply(n: u32) -> Vec<u8> {
    let mut m = Request::nldev(abi::RDMA_NLDEV_CMD_GET_CHARDEV, 0, 2);
    m.u64(
        abi::RDMA_NLDEV_ATTR_CHARDEV,
        (231 << 8) | u64::from(192 + n),
    )
    .u64(abi::RDMA_NLDEV_ATTR_CHARDEV_ABI, 1)
    .string(abi::RDMA_NLDEV_ATTR_CHARDEV_NAME, &format!("uverbs{n}"))
    .u32(abi::RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, abi::RDMA_DRIVER_RXE);
    m.finish().to_vec()
}

/// A message of type `kind` with no payload (`NLMSG_DONE`, 3).
fn bare(kind: u16) -> Vec<u8> {
    let mut m = vec![0u8; 16];
    m[..4].copy_from_slice(&16u32.to_ne_bytes());
    m[4..6].copy_from_slice(&kind.to_ne_bytes());
    m
}

/// `NLMSG_ERROR` with error code `code` and the request's header.
fn error_msg(code: i32) -> Vec<u8> {
    let mut m = vec![0u8; 36];
    m[..4].copy_from_slice(&36u32.to_ne_bytes());
    m[4..6].copy_from_slice(&2u16.to_ne_bytes());
    m[16..20].copy_from_slice(&code.to_ne_bytes());
    m[20..24].copy_from_slice(&16u32.to_ne_bytes());
    m
}

pub(crate) const NETLINK_DICT: &[&[u8]] = &[
    b"\x10\x00\x00\x00",
    b"\x08\x00\x01\x00",
    b"\x0c\x00\x06\x00",
    b"\x05\x00\x0e\x00\x01",
    b"\x0c\x00\x46\x00uverbs0\x00",
    b"\x09\x00\x02\x00rxe0\x00",
    b"\x03\x00",
    b"\x02\x00",
    b"\x00\x80",
    b"\x00\x40",
    b"\xff\xff",
];

// ---------------------------------------------------------------- attrs

/// `netlink::attrs`, `msg_type` and the attribute accessors on a reply.
pub fn netlink_attrs(data: &[u8]) {
    let _ = netlink::msg_type(data);
    let base = data.as_ptr() as usize;
    let declared = data
        .get(..4)
        .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let end = base + declared.min(data.len());
    let mut next = base + NLMSG_HDRLEN;
    for a in netlink::attrs(data) {
        let start = a.payload.as_ptr() as usize;
        // Each attribute starts 4-aligned after the previous one, inside
        // the message's declared length, with its 4-byte header first.
        assert!(start >= next + 4, "attribute overlaps the one before");
        assert_eq!((start - 4 - base) % 4, 0, "attribute not 4-aligned");
        assert!(start + a.payload.len() <= end, "payload beyond the message");
        assert!(a.kind < 0x4000, "NLA_F_* flag bits kept in the kind");
        next = start + a.payload.len();
        let p = a.payload;
        assert_eq!(a.u8(), p.first().copied());
        if let Some(v) = a.u32() {
            assert_eq!(v.to_ne_bytes(), p[..4]);
        } else {
            assert!(p.len() < 4);
        }
        if let Some(v) = a.u64() {
            assert_eq!(v.to_ne_bytes(), p[..8]);
        } else {
            assert!(p.len() < 8);
        }
        if let Some(s) = a.str() {
            assert!(s.len() <= p.len() && !s.contains('\0'));
            assert_eq!(s.as_bytes(), &p[..s.len()]);
        }
    }
}

pub fn netlink_attrs_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut get_chardev = Request::nldev(abi::RDMA_NLDEV_CMD_GET_CHARDEV, 1, 2);
    get_chardev
        .u32(abi::RDMA_NLDEV_ATTR_DEV_INDEX, 3)
        .string(abi::RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs");
    vec![
        ("nldev-get-reply", dev_reply(3, "rxe0", false)),
        ("nldev-chardev-reply", chardev_reply(0)),
        ("nldev-get-chardev-request", get_chardev.finish().to_vec()),
    ]
}

// ------------------------------------------------------------- datagram

/// The `Linux` transport's splitting of a received datagram into messages.
pub fn netlink_datagram(data: &[u8]) {
    let base = data.as_ptr() as usize;
    let mut next = base;
    let mut count = 0usize;
    let result = fuzzing::netlink_datagram(data, &mut |m| {
        let start = m.as_ptr() as usize;
        assert!(start >= next, "messages overlap or go backwards");
        assert_eq!((start - base) % 4, 0, "message not 4-aligned");
        assert!(
            start + m.len() <= base + data.len(),
            "message beyond the datagram"
        );
        assert!(m.len() >= NLMSG_HDRLEN, "message shorter than its header");
        let len = u32::from_ne_bytes([m[0], m[1], m[2], m[3]]) as usize;
        assert_eq!(len, m.len(), "the message is what its header says");
        let kind = netlink::msg_type(m);
        assert!(kind != Some(2) && kind != Some(3), "DONE/ERROR handed on");
        next = start + m.len();
        count += 1;
        netlink_attrs(m);
    });
    assert!(count <= data.len() / NLMSG_HDRLEN);
    if let Err(e) = result {
        // EBADMSG for broken framing, else the errno of an NLMSG_ERROR
        // (`UnknownErrno` for numbers the errno table does not know).
        let _ = e.desc();
    }
}

pub fn netlink_datagram_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut dump = dev_reply(0, "rxe0", true);
    dump.extend(dev_reply(1, "mlx5_0", true));
    dump.extend(bare(3));
    let mut ack = chardev_reply(0);
    ack.extend(error_msg(0));
    vec![
        ("dump-two-devices-done", dump),
        ("chardev-then-ack", ack),
        ("error-enodev", error_msg(-19)),
        // Found by this target: the code was negated, which overflows for
        // i32::MIN (a panic in debug builds).
        ("regress-error-code-i32-min", error_msg(i32::MIN)),
        ("done", bare(3)),
    ]
}

// ------------------------------------------------------------ discovery

/// Splits the input into length-prefixed records (`u16` little-endian
/// length, then the bytes).
fn records(mut data: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while data.len() >= 2 {
        let n = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
        out.push(data[2..2 + n].to_vec());
        data = &data[2 + n..];
    }
    out
}

/// Joins records in the form [`records`] reads.
fn join_records(split: u8, records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![split];
    for r in records {
        out.extend_from_slice(&(r.len() as u16).to_le_bytes());
        out.extend_from_slice(r);
    }
    out
}

/// Device discovery (`uverbs::devices_with`) on a kernel whose netlink
/// replies are the input: the first byte says how many of the records
/// that follow answer the `RDMA_NLDEV_CMD_GET` dump; each later record
/// answers one `GET_CHARDEV` (an empty record: the kernel refuses it;
/// 0xff: netlink itself fails, so discovery falls back to an empty sysfs).
pub fn nldev_discovery(data: &[u8]) {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let mut dump = records(rest);
    let n_dump = usize::from(split).min(dump.len());
    let mut chardevs = dump.split_off(n_dump).into_iter();
    let get = abi::rdma_nl_get_type(abi::RDMA_NL_NLDEV, abi::RDMA_NLDEV_CMD_GET);
    let kernel = Arc::new(FakeKernel::new());
    kernel.on_netlink(move |req| {
        if split == 0xff {
            return Err(Errno::EPROTONOSUPPORT);
        }
        if netlink::msg_type(req) == Some(get) {
            return Ok(dump.clone());
        }
        match chardevs.next() {
            Some(r) if r.is_empty() => Err(Errno::ENODEV),
            Some(r) => Ok(vec![r]),
            None => Ok(Vec::new()),
        }
    });
    let kernel: Arc<dyn Kernel> = kernel;
    match uverbs::devices_with(&kernel) {
        Ok(list) => {
            assert!(split != 0xff, "devices without netlink or sysfs");
            assert!(list.len() <= n_dump, "more devices than dump messages");
            for pair in list.windows(2) {
                assert!(pair[0].name <= pair[1].name, "not sorted by name");
            }
            for d in &list {
                assert_eq!(d.path, Path::new("/dev/infiniband").join(&d.uverbs_name));
                assert!(d.index.is_some() && d.port_count.is_some());
                let _ = (d.node_type.transport_name(), d.node_type.transport_number());
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

pub fn nldev_discovery_seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "one-rxe-device",
            join_records(1, &[dev_reply(3, "rxe0", false), chardev_reply(0)]),
        ),
        (
            "two-devices-one-refused",
            join_records(
                2,
                &[
                    dev_reply(0, "mlx5_0", true),
                    dev_reply(1, "rxe0", true),
                    Vec::new(),
                    chardev_reply(1),
                ],
            ),
        ),
    ]
}

// ---------------------------------------------------------------- sysfs

/// The sysfs text parsers: `node_guid`, `dev`, and a GID of `ports/N/gids/I`.
pub fn sysfs_text(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Some(g) = fuzzing::sysfs_node_guid(&text) {
        let canonical = format!(
            "{:04x}:{:04x}:{:04x}:{:04x}\n",
            g >> 48,
            (g >> 32) & 0xffff,
            (g >> 16) & 0xffff,
            g & 0xffff
        );
        assert_eq!(fuzzing::sysfs_node_guid(&canonical), Some(g), "{text:?}");
    }
    let _ = fuzzing::sysfs_dev(&text);
    if let Some(g) = fuzzing::sysfs_gid(&text) {
        let canonical: Vec<String> = g
            .chunks_exact(2)
            .map(|w| format!("{:02x}{:02x}", w[0], w[1]))
            .collect();
        let canonical = canonical.join(":");
        assert_eq!(fuzzing::sysfs_gid(&canonical), Some(g), "{text:?}");
    }
}

pub fn sysfs_text_seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("node-guid", b"5054:00ff:fe12:3456\n".to_vec()),
        ("dev", b"231:192\n".to_vec()),
        (
            "gid-link-local",
            b"fe80:0000:0000:0000:5054:00ff:fe12:3456\n".to_vec(),
        ),
        (
            "gid-ipv4-mapped",
            b"0000:0000:0000:0000:0000:ffff:c000:0201\n".to_vec(),
        ),
    ]
}

pub(crate) const TEXT_DICT: &[&[u8]] = &[
    b":",
    b"0000",
    b"ffff",
    b"fe80",
    b"\n",
    b" ",
    b"+",
    b"-",
    b"\xc3\xa9",
    b"\xe2\x82\xac",
    b"\xf0\x9f\x98\x80",
    b"\0",
    b"0x",
    b"4294967296",
];

// -------------------------------------------------------- kernel values

/// Conversions of numbers the kernel reports: a GID's text (which must
/// parse back to the same address), MTU, port, QP and path-migration
/// states, work completion status and opcode names, event kinds.
pub fn kernel_values(data: &[u8]) {
    let mut raw = [0u8; 16];
    let n = data.len().min(16);
    raw[..n].copy_from_slice(&data[..n]);
    let gid = Gid(raw);
    let text = gid.to_string();
    assert!(text.len() <= 45, "longer than INET6_ADDRSTRLEN: {text}");
    assert_eq!(
        text.parse::<Ipv6Addr>().map(|a| a.octets()),
        Ok(raw),
        "{text} is not the GID's address"
    );
    assert!(format!("{gid:?}").contains(&text));
    assert_eq!(gid.is_null(), raw[8..].iter().all(|&b| b == 0));
    assert_eq!(
        (u128::from(gid.subnet_prefix()) << 64) | u128::from(gid.interface_id()),
        u128::from_be_bytes(raw)
    );
    let (b, w) = (raw[0], u32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]]));
    let mtu = Mtu(b);
    match mtu.bytes() {
        Some(bytes) => assert_eq!(Mtu::from_bytes(bytes), Some(mtu)),
        None => assert!(!(1..=5).contains(&b)),
    }
    assert_eq!(PortState::from_raw(b).raw(), b);
    assert_eq!(QpState::from_raw(b).raw(), b);
    assert_eq!(PathMigState::from_raw(b).raw(), b);
    let _ = (QpState::from_raw(b).to_string(), WcStatus(w).to_string());
    let _ = (
        WcStatus(w).as_str(),
        WcStatus(w).is_success(),
        WcOpcode(w).is_recv(),
    );
    let _ = format!("{:?} {}", AsyncEventType(w), AsyncEventType(w));
    let kind = CmEventKind::from_raw(w);
    assert_eq!(kind.raw(), w);
    assert!(!kind.as_str().is_empty());
}

pub fn kernel_values_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut v4 = [0u8; 16];
    v4[10] = 0xff;
    v4[11] = 0xff;
    v4[12..].copy_from_slice(&[192, 0, 2, 1]);
    let mut compat = [0u8; 16];
    compat[12..].copy_from_slice(&[10, 0, 0, 1]);
    vec![
        (
            "gid-link-local",
            vec![
                0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x52, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56,
            ],
        ),
        ("gid-ipv4-mapped", v4.to_vec()),
        ("gid-ipv4-compatible", compat.to_vec()),
        (
            "gid-zero-runs",
            vec![0, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0],
        ),
    ]
}
