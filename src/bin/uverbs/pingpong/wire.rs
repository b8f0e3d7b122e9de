//! The pingpongs' out-of-band exchange over TCP, as rdma-core v44 does it.
//!
//! Each QP address is one fixed-size message: `sprintf("%04x:%06x:%06x:%s",
//! lid, qpn, psn, wire_gid)` in a `char[52]` (the size of
//! `"0000:000000:000000:00000000000000000000000000000000"` with its NUL),
//! written whole, NUL included. `gid_to_wire_gid` prints the 16 GID bytes
//! as four big-endian 32-bit words, `%08x` each: on any host that is the
//! bytes in order, in lowercase hex. The client sends its message(s) first;
//! the server reads them, connects its QP(s), answers with its own, and the
//! client ends with `"done"` (5 bytes, NUL included). The SRQ tool always
//! sends [`MAX_QP`](super::args::MAX_QP) messages each way, zeros past its
//! QPs.

use std::{
    io::{Read, Write},
    net::{Ipv4Addr, Ipv6Addr, TcpListener, TcpStream, ToSocketAddrs},
};

use uverbs::Gid;

/// `sizeof "0000:000000:000000:00000000000000000000000000000000"`.
pub const MSG_LEN: usize = 52;
/// `sizeof "done"`.
const DONE: &[u8; 5] = b"done\0";

/// One QP's address (`struct pingpong_dest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dest {
    pub lid: u32,
    pub qpn: u32,
    pub psn: u32,
    pub gid: Gid,
}

/// `gid_to_wire_gid`: 32 lowercase hex digits.
pub fn gid_to_wire(gid: &Gid) -> String {
    gid.0.iter().map(|b| format!("{b:02x}")).collect()
}

/// What was wrong with a peer's address message ([`decode`]). The peer is
/// untrusted: every malformed message is one of these, never a panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The text before the NUL is not UTF-8 (rdma-core only sends ASCII).
    NotText {
        /// Where the invalid bytes start.
        at: usize,
    },
    /// Fewer than the four `:`-separated fields `LID:QPN:PSN:GID`.
    MissingField(&'static str),
    /// A LID, QPN or PSN field that is not a hexadecimal number of at most
    /// 32 bits.
    BadNumber {
        /// Which field.
        field: &'static str,
        /// The field as received.
        text: String,
    },
    /// A GID field that does not start with 32 hexadecimal digits.
    BadGid {
        /// The field as received.
        text: String,
    },
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::NotText { at } => write!(
                f,
                "the peer's address message is not text (invalid UTF-8 at byte {at})"
            ),
            WireError::MissingField(field) => write!(
                f,
                "the peer's address message has no {field} field (expected LID:QPN:PSN:GID)"
            ),
            WireError::BadNumber { field, text } => write!(
                f,
                "the peer's {field} {text:?} is not a hexadecimal number of at most 32 bits"
            ),
            WireError::BadGid { text } => write!(
                f,
                "the peer's GID {text:?} does not start with 32 hexadecimal digits"
            ),
        }
    }
}

impl std::error::Error for WireError {}

/// `wire_gid_to_gid`: four 8-digit hex words (characters after the 32nd are
/// ignored, as the C tool ignores them). Anything but 32 ASCII hex digits
/// is an error (the C tool would use garbage).
pub fn wire_to_gid(s: &str) -> Result<Gid, WireError> {
    let bad = || WireError::BadGid { text: s.into() };
    let digits = s.as_bytes().get(..32).ok_or_else(bad)?;
    if !digits.iter().all(u8::is_ascii_hexdigit) {
        return Err(bad());
    }
    let mut gid = [0u8; 16];
    for (byte, pair) in gid.iter_mut().zip(digits.chunks_exact(2)) {
        // Two ASCII hex digits (checked above): always a valid u8.
        let hex = std::str::from_utf8(pair).map_err(|_| bad())?;
        *byte = u8::from_str_radix(hex, 16).map_err(|_| bad())?;
    }
    Ok(Gid(gid))
}

/// The message for `d`, NUL-padded to [`MSG_LEN`].
pub fn encode(d: &Dest) -> [u8; MSG_LEN] {
    let text = format!(
        "{:04x}:{:06x}:{:06x}:{}",
        d.lid,
        d.qpn,
        d.psn,
        gid_to_wire(&d.gid)
    );
    let mut msg = [0u8; MSG_LEN];
    let n = text.len().min(MSG_LEN - 1);
    msg[..n].copy_from_slice(&text.as_bytes()[..n]);
    msg
}

/// `sscanf(msg, "%x:%x:%x:%s")` + `wire_gid_to_gid`, on a message the
/// peer sent: the text up to its first NUL (or all of it).
pub fn decode(msg: &[u8]) -> Result<Dest, WireError> {
    let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
    let text = std::str::from_utf8(&msg[..end]).map_err(|e| WireError::NotText {
        at: e.valid_up_to(),
    })?;
    let mut it = text.splitn(4, ':');
    let mut hex = |field: &'static str| {
        let text = it.next().ok_or(WireError::MissingField(field))?;
        u32::from_str_radix(text.trim(), 16).map_err(|_| WireError::BadNumber {
            field,
            text: text.into(),
        })
    };
    let (lid, qpn, psn) = (hex("LID")?, hex("QPN")?, hex("PSN")?);
    let gid = wire_to_gid(it.next().ok_or(WireError::MissingField("GID"))?)?;
    Ok(Dest { lid, qpn, psn, gid })
}

/// `  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s`
/// (`ud_pingpong` writes `PSN 0x%06x: GID` in its local line).
pub fn address_line(remote: bool, d: &Dest, ud_local: bool) -> String {
    let (label, sep) = match (remote, ud_local) {
        (true, _) => ("remote address: ", ","),
        (false, true) => ("local address:  ", ":"),
        (false, false) => ("local address:  ", ","),
    };
    format!(
        "  {label}LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}{sep} GID {}",
        d.lid, d.qpn, d.psn, d.gid
    )
}

fn read_dests(sock: &mut TcpStream, n: usize, who: &str) -> Option<Vec<Dest>> {
    let mut out = Vec::with_capacity(n);
    let mut msg = [0u8; MSG_LEN];
    for i in 0..n {
        if let Err(e) = sock.read_exact(&mut msg) {
            eprintln!("{who} read: {e}");
            eprintln!("Couldn't read remote address [{i}]");
            return None;
        }
        match decode(&msg) {
            Ok(d) => out.push(d),
            Err(e) => {
                eprintln!(
                    "Couldn't parse remote address [{i}] {:?}: {e}",
                    String::from_utf8_lossy(&msg)
                );
                return None;
            }
        }
    }
    Some(out)
}

fn write_dests(sock: &mut TcpStream, my: &[Dest]) -> bool {
    let mut all = Vec::with_capacity(my.len() * MSG_LEN);
    for d in my {
        all.extend_from_slice(&encode(d));
    }
    sock.write_all(&all).is_ok()
}

/// `pp_client_exch_dest`: connects to `host:port`, sends `my`, reads as
/// many addresses back, sends "done". Errors are printed.
pub fn client_exchange(host: &str, port: u32, my: &[Dest]) -> Option<Vec<Dest>> {
    let addrs = match (host, port as u16).to_socket_addrs() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e} for {host}:{port}");
            return None;
        }
    };
    let Some(mut sock) = addrs.into_iter().find_map(|a| TcpStream::connect(a).ok()) else {
        eprintln!("Couldn't connect to {host}:{port}");
        return None;
    };
    if !write_dests(&mut sock, my) {
        eprintln!("Couldn't send local address");
        return None;
    }
    let rem = read_dests(&mut sock, my.len(), "client")?;
    if let Err(e) = sock.write_all(DONE) {
        eprintln!("client write: {e}");
        eprintln!("Couldn't read/write remote address");
        return None;
    }
    Some(rem)
}

/// `pp_server_exch_dest`: listens on `port` (all addresses, `SO_REUSEADDR`),
/// accepts one connection, reads the client's addresses, runs `connect` on
/// them (the QPs must be ready to receive before the client learns our
/// address), sends `my`, and waits for "done". Errors are printed.
pub fn server_exchange(
    port: u32,
    my: &[Dest],
    connect: impl FnOnce(&[Dest]) -> bool,
) -> Option<Vec<Dest>> {
    let port16 = port as u16;
    let listener = TcpListener::bind((Ipv6Addr::UNSPECIFIED, port16))
        .or_else(|_| TcpListener::bind((Ipv4Addr::UNSPECIFIED, port16)));
    let Ok(listener) = listener else {
        eprintln!("Couldn't listen to port {port}");
        return None;
    };
    let mut sock = match listener.accept() {
        Ok((s, _)) => s,
        Err(_) => {
            eprintln!("accept() failed");
            return None;
        }
    };
    drop(listener);
    let rem = read_dests(&mut sock, my.len(), "server")?;
    if !connect(&rem) {
        eprintln!("Couldn't connect to remote QP");
        return None;
    }
    let mut done = [0u8; DONE.len()];
    if !write_dests(&mut sock, my) || sock.read_exact(&mut done).is_err() {
        eprintln!("Couldn't send/recv local address");
        return None;
    }
    Some(rem)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roce_gid() -> Gid {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[192, 0, 2, 1]);
        Gid(g)
    }

    #[test]
    fn message_is_rdma_cores_text_with_its_nul() {
        let d = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xabcdef,
            gid: roce_gid(),
        };
        let msg = encode(&d);
        assert_eq!(
            &msg[..51],
            b"0000:000011:abcdef:00000000000000000000ffffc0000201"
        );
        assert_eq!(msg[51], 0);
        assert_eq!(decode(&msg), Ok(d));
        assert_eq!(
            encode(&Dest::default())[..],
            *b"0000:000000:000000:00000000000000000000000000000000\0"
        );
    }

    #[test]
    fn wire_gid_round_trips_in_byte_order() {
        let g = Gid([
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55,
        ]);
        assert_eq!(gid_to_wire(&g), "fe80000000000000021122fffe334455");
        assert_eq!(wire_to_gid("fe80000000000000021122fffe334455"), Ok(g));
        assert!(wire_to_gid("fe80").is_err());
        assert!(wire_to_gid("zz800000000000000211220ffffe3344").is_err());
    }

    #[test]
    fn decode_accepts_what_sscanf_accepts() {
        let d = decode(b"00a1:0000ff:000001:00000000000000000000ffffc0000201\0").unwrap();
        assert_eq!((d.lid, d.qpn, d.psn, d.gid), (0xa1, 0xff, 1, roce_gid()));
        assert_eq!(
            decode(b"garbage"),
            Err(WireError::BadNumber {
                field: "LID",
                text: "garbage".into()
            })
        );
    }

    #[test]
    fn address_lines() {
        let d = Dest {
            lid: 0,
            qpn: 0x12,
            psn: 0x3456,
            gid: roce_gid(),
        };
        assert_eq!(
            address_line(false, &d, false),
            "  local address:  LID 0x0000, QPN 0x000012, PSN 0x003456, GID ::ffff:192.0.2.1"
        );
        assert_eq!(
            address_line(false, &d, true),
            "  local address:  LID 0x0000, QPN 0x000012, PSN 0x003456: GID ::ffff:192.0.2.1"
        );
        assert_eq!(
            address_line(true, &d, true),
            "  remote address: LID 0x0000, QPN 0x000012, PSN 0x003456, GID ::ffff:192.0.2.1"
        );
    }

    #[test]
    fn exchange_over_loopback() {
        let port = {
            let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            l.local_addr().unwrap().port()
        };
        let server_dest = Dest {
            lid: 1,
            qpn: 2,
            psn: 3,
            gid: roce_gid(),
        };
        let client_dest = Dest {
            lid: 4,
            qpn: 5,
            psn: 6,
            gid: Gid::default(),
        };
        let srv = std::thread::spawn(move || {
            server_exchange(u32::from(port), &[server_dest], |rem| rem == [client_dest])
        });
        let mut got = None;
        for _ in 0..100 {
            got = client_exchange("127.0.0.1", u32::from(port), &[client_dest]);
            if got.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(got, Some(vec![server_dest]));
        assert_eq!(srv.join().unwrap(), Some(vec![client_dest]));
    }

    /// Defect 6: a multibyte character in the GID made the server panic
    /// (`wire_to_gid` sliced the text at fixed byte offsets).
    #[test]
    fn hostile_messages_are_errors_that_say_what_is_wrong() {
        // 'é' (2 bytes) straddles the end of the GID's first 8-digit word.
        let msg = b"0000:000011:abcdef:0000000\xc3\xa90000000000000000000000000\0";
        let e = decode(msg).unwrap_err();
        assert!(matches!(e, WireError::BadGid { .. }), "{e:?}");
        assert!(e.to_string().contains("32 hexadecimal digits"), "{e}");
        assert!(wire_to_gid("0000000\u{e9}0000000000000000000000000").is_err());
        // A sign is no hex digit, even where `from_str_radix` would take it.
        assert!(wire_to_gid("+0000000000000000000000000000000").is_err());
        let cases: [(&[u8], &str); 5] = [
            (b"00a1:0000ff\0", "no PSN field"),
            (b"00a1:0000ff:000001\0", "no GID field"),
            (b"00a1:1ffffffff:000001:0\0", "QPN \"1ffffffff\""),
            (b"\xff\xfe:0:0:0\0", "invalid UTF-8 at byte 0"),
            (b"1:2:3:fe80", "GID \"fe80\""),
        ];
        for (msg, why) in cases {
            let e = decode(msg).unwrap_err().to_string();
            assert!(e.contains(why), "{e:?} should say {why:?}");
        }
    }
}
