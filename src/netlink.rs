//! Minimal `NETLINK_RDMA` (nldev) messages: building requests and walking
//! reply attributes.
//!
//! RDMA netlink messages are a `struct nlmsghdr` followed directly by
//! `struct nlattr` TLVs (no generic-netlink header); the message type is
//! `RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op)` (`include/uapi/rdma/rdma_netlink.h`,
//! `drivers/infiniband/core/nldev.c`). Replies are parsed defensively: a
//! truncated or malformed attribute ends the walk instead of panicking.

use crate::{abi, sys::Errno};

/// `sizeof(struct nlmsghdr)`.
pub const NLMSG_HDRLEN: usize = 16;
/// `NLM_F_REQUEST`.
pub const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`).
pub const NLM_F_DUMP: u16 = 0x300;

/// A netlink request under construction.
#[derive(Debug, Clone)]
pub struct Request {
    buf: Vec<u8>,
}

impl Request {
    /// A message for nldev operation `op` with the given `NLM_F_*` flags
    /// (requests, and replies in tests that play the kernel).
    pub fn nldev(op: u16, flags: u16, seq: u32) -> Self {
        let kind = abi::rdma_nl_get_type(abi::RDMA_NL_NLDEV, op);
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, patched in `finish`
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
        Request { buf }
    }

    fn attr(&mut self, kind: u16, payload: &[u8]) -> &mut Self {
        let len = 4 + payload.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(payload);
        while self.buf.len() % 4 != 0 {
            self.buf.push(0);
        }
        self
    }

    /// Adds a `u32` attribute.
    pub fn u32(&mut self, kind: u16, value: u32) -> &mut Self {
        self.attr(kind, &value.to_ne_bytes())
    }

    /// Adds a `u8` attribute.
    pub fn u8(&mut self, kind: u16, value: u8) -> &mut Self {
        self.attr(kind, &[value])
    }

    /// Adds a `u64` attribute.
    pub fn u64(&mut self, kind: u16, value: u64) -> &mut Self {
        self.attr(kind, &value.to_ne_bytes())
    }

    /// Adds a NUL-terminated string attribute.
    pub fn string(&mut self, kind: u16, value: &str) -> &mut Self {
        let mut payload = Vec::with_capacity(value.len() + 1);
        payload.extend_from_slice(value.as_bytes());
        payload.push(0);
        self.attr(kind, &payload)
    }

    /// The finished message bytes.
    pub fn finish(&mut self) -> &[u8] {
        let len = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&len.to_ne_bytes());
        &self.buf
    }
}

/// One attribute of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NlAttr<'a> {
    /// The attribute type with the `NLA_F_*` flag bits removed.
    pub kind: u16,
    /// The payload.
    pub payload: &'a [u8],
}

impl<'a> NlAttr<'a> {
    /// The payload as a `u8`, if it has at least one byte.
    pub fn u8(&self) -> Option<u8> {
        self.payload.first().copied()
    }

    /// The payload as a native-endian `u32`.
    pub fn u32(&self) -> Option<u32> {
        Some(u32::from_ne_bytes(self.payload.get(..4)?.try_into().ok()?))
    }

    /// The payload as a native-endian `u64`.
    pub fn u64(&self) -> Option<u64> {
        Some(u64::from_ne_bytes(self.payload.get(..8)?.try_into().ok()?))
    }

    /// The payload as a string, without the trailing NUL.
    pub fn str(&self) -> Option<&'a str> {
        let bytes = self.payload;
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        std::str::from_utf8(&bytes[..end]).ok()
    }
}

/// The attributes of one reply message (the `nlmsghdr` included in `msg`).
pub fn attrs(msg: &[u8]) -> impl Iterator<Item = NlAttr<'_>> {
    let declared = msg
        .get(..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .unwrap_or(0);
    let end = declared.min(msg.len());
    let mut rest = msg.get(NLMSG_HDRLEN..end).unwrap_or(&[]);
    std::iter::from_fn(move || {
        if rest.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
        let kind = u16::from_ne_bytes([rest[2], rest[3]]) & 0x3fff;
        if len < 4 || len > rest.len() {
            rest = &[];
            return None;
        }
        let attr = NlAttr {
            kind,
            payload: &rest[4..len],
        };
        rest = rest.get((len + 3) & !3..).unwrap_or(&[]);
        Some(attr)
    })
}

/// The message type of a reply.
pub fn msg_type(msg: &[u8]) -> Option<u16> {
    Some(u16::from_ne_bytes(msg.get(4..6)?.try_into().ok()?))
}

/// `NLMSG_ERROR`, `NLMSG_DONE` (`include/uapi/linux/netlink.h`).
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// `NLM_F_MULTI`: more parts of a multipart reply follow.
const NLM_F_MULTI: u16 = 2;

/// How a datagram of reply messages ended ([`walk_datagram`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DatagramEnd {
    /// `NLMSG_DONE`, or an `NLMSG_ERROR` acknowledgement with code 0: the
    /// reply is complete.
    Done,
    /// Every message was handed on; `multi`: one of them had `NLM_F_MULTI`
    /// (more datagrams of the reply follow).
    More {
        /// Whether a message had `NLM_F_MULTI`.
        multi: bool,
    },
}

/// Splits one received datagram into its messages, as the kernel packs
/// them (each `nlmsghdr`-framed and 4-aligned): calls `on_message` with each
/// message (its header included) up to an `NLMSG_DONE` or `NLMSG_ERROR`.
/// A message whose length is shorter than its header or longer than what
/// is left is `EBADMSG`; an `NLMSG_ERROR` with a non-zero code is that
/// errno (`EBADMSG` when the code is not a negated errno). Bytes after the
/// last whole header (fewer than 16) are ignored.
pub(crate) fn walk_datagram(
    datagram: &[u8],
    on_message: &mut dyn FnMut(&[u8]),
) -> Result<DatagramEnd, Errno> {
    let mut rest = datagram;
    let mut multi = false;
    while rest.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let kind = u16::from_ne_bytes([rest[4], rest[5]]);
        let flags = u16::from_ne_bytes([rest[6], rest[7]]);
        if len < NLMSG_HDRLEN || len > rest.len() {
            return Err(Errno::EBADMSG);
        }
        match kind {
            NLMSG_DONE => return Ok(DatagramEnd::Done),
            NLMSG_ERROR => {
                let code = rest
                    .get(16..20)
                    .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .unwrap_or(-libc::EBADMSG);
                return match code {
                    0 => Ok(DatagramEnd::Done),
                    // A negated errno, as `netlink_ack` writes it.
                    -4095..=-1 => Err(Errno::from_raw(-code)),
                    // Anything else (a positive code, i32::MIN, which has
                    // no negation) is no acknowledgement the kernel sends.
                    _ => Err(Errno::EBADMSG),
                };
            }
            _ => on_message(&rest[..len]),
        }
        multi |= flags & NLM_F_MULTI != 0;
        rest = &rest[((len + 3) & !3).min(rest.len())..];
    }
    Ok(DatagramEnd::More { multi })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_is_framed_and_padded() {
        let mut r = Request::nldev(abi::RDMA_NLDEV_CMD_GET_CHARDEV, NLM_F_REQUEST, 7);
        r.u32(abi::RDMA_NLDEV_ATTR_DEV_INDEX, 3)
            .string(abi::RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs");
        let m = r.finish().to_vec();
        assert_eq!(m.len(), 16 + 8 + 12);
        assert_eq!(
            u32::from_ne_bytes(m[..4].try_into().unwrap()) as usize,
            m.len()
        );
        assert_eq!(msg_type(&m), Some((5 << 10) + 15));
        let got: Vec<_> = attrs(&m).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].u32(), Some(3));
        assert_eq!(got[1].str(), Some("uverbs"));
    }

    #[test]
    fn random_bytes_never_panic_or_escape_the_buffer() {
        // The property of the `netlink_attrs` fuzz target (fuzz/), on a fixed
        // pseudo-random corpus so it runs in every test run.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let len = (next() % 96) as usize;
            let mut buf: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if len >= 4 && next() % 2 == 0 {
                // A plausible header length, so the attribute walk runs.
                let declared = (next() % (len as u64 + 8)) as u32;
                buf[..4].copy_from_slice(&declared.to_ne_bytes());
            }
            let _ = msg_type(&buf);
            for a in attrs(&buf) {
                assert!(a.payload.len() <= buf.len());
                let _ = (a.u8(), a.u32(), a.u64(), a.str());
            }
        }
    }

    /// An `NLMSG_ERROR` of `code` (with the request's header after it).
    fn nlmsg_error(code: i32) -> Vec<u8> {
        let mut m = vec![0u8; 36];
        m[..4].copy_from_slice(&36u32.to_ne_bytes());
        m[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        m[16..20].copy_from_slice(&code.to_ne_bytes());
        m
    }

    #[test]
    fn datagrams_split_into_messages_and_end_at_done_or_an_error() {
        let mut r = Request::nldev(abi::RDMA_NLDEV_CMD_GET, NLM_F_MULTI, 1);
        r.u32(abi::RDMA_NLDEV_ATTR_DEV_INDEX, 1);
        let msg = r.finish().to_vec();
        let mut dgram = msg.clone();
        dgram.extend_from_slice(&msg);
        let mut seen = 0;
        assert_eq!(
            walk_datagram(&dgram, &mut |m| {
                assert_eq!(m, &msg[..]);
                seen += 1;
            }),
            Ok(DatagramEnd::More { multi: true })
        );
        assert_eq!(seen, 2);
        dgram.extend_from_slice(&nlmsg_error(0));
        assert_eq!(walk_datagram(&dgram, &mut |_| {}), Ok(DatagramEnd::Done));
        assert_eq!(
            walk_datagram(&nlmsg_error(-libc::ENODEV), &mut |_| {}),
            Err(Errno::ENODEV)
        );
        let mut short = msg.clone();
        short[..4].copy_from_slice(&200u32.to_ne_bytes());
        assert_eq!(walk_datagram(&short, &mut |_| {}), Err(Errno::EBADMSG));
    }

    /// Found by the `netlink_datagram` fuzz target: an error code of
    /// `i32::MIN` was negated (an overflow panic in debug builds); codes
    /// that are no negated errno are malformed replies.
    #[test]
    fn an_error_code_that_is_no_negated_errno_is_ebadmsg() {
        for code in [i32::MIN, -4096, 1, i32::MAX] {
            assert_eq!(
                walk_datagram(&nlmsg_error(code), &mut |_| {}),
                Err(Errno::EBADMSG),
                "code {code}"
            );
        }
    }

    #[test]
    fn malformed_attributes_end_the_walk_without_panicking() {
        let mut m = Request::nldev(1, 0, 0);
        m.u32(1, 9);
        let mut bytes = m.finish().to_vec();
        // An attribute that claims more bytes than the message has.
        bytes.extend_from_slice(&[200, 0, 2, 0, 1, 2]);
        let len = bytes.len() as u32;
        bytes[..4].copy_from_slice(&len.to_ne_bytes());
        let got: Vec<_> = attrs(&bytes).collect();
        assert_eq!(got.len(), 1);
        // Truncated and empty inputs.
        assert_eq!(attrs(&bytes[..10]).count(), 0);
        assert_eq!(attrs(&[]).count(), 0);
        let short = NlAttr {
            kind: 0,
            payload: &[1, 2],
        };
        assert_eq!(short.u32(), None);
        assert_eq!(short.u64(), None);
    }
}
