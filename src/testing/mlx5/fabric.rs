//! The virtual fabric: the identity of each model HCA (node GUID, MAC,
//! RoCE GIDs) and the local switch its packets (`wire.rs`) cross to the
//! HCAs of other models, in this process or others.
//!
//! The switch is a directory ([`default_dir`], or `Options::fabric`): each
//! HCA on it binds a unix-domain datagram socket named after its identity
//! number, `hca-XXXXXX` (6 hex digits), and a packet for a GID goes to the
//! socket of the identity the GID names, which every GID of a fabric HCA
//! encodes. Nothing else is shared: a peer's memory is touched only by
//! its own process, when its HCA handles the packet.
//!
//! Identities: number `n` (24 bits) gives the MAC `0c:42:a1:nn:nn:nn`,
//! the node GUID `0c42:a103:00nn:nnnn`, GID 0 `fe80::e42:a1ff:fenn:nnnn`
//! (the link-local GID mlx5_ib derives from the MAC) and GID 1, RoCE v2,
//! `::ffff:10.nn.nn.nn` (the IPv4 address of the HCA's netdev). The model
//! alone, without a fabric, has [`DEFAULT_ID`] with GID 1
//! `::ffff:192.0.2.1`, as it always had. A model joining a fabric takes
//! its process id (unique among live processes, and at most 2^22 on
//! Linux), plus 2^22 per collision with a live HCA of that number (a
//! fabric directory shared across pid namespaces, or several models in
//! one process); a socket left by a dead process is replaced.
//!
//! Delivery: the sockets are non-blocking; a packet the peer's queue
//! cannot take yet waits in the sender's queue (a link's flow control),
//! and one for a socket nobody reads any more (the peer exited) or no
//! socket at all is lost, which the RC requester sees as a timeout.
//!
//! Test knobs ([`Faults`]): drop the next N packets, or hold one back and
//! send it after the next (reordering), to show that the transport's PSN
//! checks and retries keep memory intact.

use std::{
    collections::VecDeque,
    io::ErrorKind,
    os::{fd::AsRawFd, unix::net::UnixDatagram},
    path::{Path, PathBuf},
};

use super::wire::Packet;

/// The identity number of a model without a fabric.
pub const DEFAULT_ID: u32 = 0x12_3456;

/// An HCA's identity ([`Mlx5Model::identity`](super::Mlx5Model::identity)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Identity {
    /// Its number (24 bits).
    pub n: u32,
}

impl Identity {
    /// The identity with number `n` (its low 24 bits).
    pub fn new(n: u32) -> Identity {
        Identity { n: n & 0xff_ffff }
    }

    fn low(&self) -> [u8; 3] {
        let b = self.n.to_be_bytes();
        [b[1], b[2], b[3]]
    }

    /// The MAC of its port's netdev.
    pub fn mac(&self) -> [u8; 6] {
        let l = self.low();
        [0x0c, 0x42, 0xa1, l[0], l[1], l[2]]
    }

    /// Its node GUID (also its system image GUID).
    pub fn node_guid(&self) -> u64 {
        0x0c42_a103_0000_0000 | u64::from(self.n)
    }

    /// The GIDs of port 1: the link-local GID from the MAC, and the RoCE
    /// v2 IPv4-mapped GID.
    pub fn gids(&self) -> [[u8; 16]; 2] {
        let l = self.low();
        let link_local = [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0e, 0x42, 0xa1, 0xff, 0xfe, l[0], l[1], l[2],
        ];
        let v4 = if self.n == DEFAULT_ID {
            [192, 0, 2, 1]
        } else {
            [10, l[0], l[1], l[2]]
        };
        let mut mapped = [0u8; 16];
        mapped[10] = 0xff;
        mapped[11] = 0xff;
        mapped[12..].copy_from_slice(&v4);
        [link_local, mapped]
    }

    /// The identity a GID belongs to, if it is a fabric GID.
    pub fn of_gid(gid: &[u8; 16]) -> Option<Identity> {
        let n = |l: &[u8]| u32::from(l[0]) << 16 | u32::from(l[1]) << 8 | u32::from(l[2]);
        if gid[..13] == [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0e, 0x42, 0xa1, 0xff, 0xfe] {
            return Some(Identity::new(n(&gid[13..])));
        }
        if gid[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
            if gid[12..] == [192, 0, 2, 1] {
                return Some(Identity::new(DEFAULT_ID));
            }
            if gid[12] == 10 {
                return Some(Identity::new(n(&gid[13..])));
            }
        }
        None
    }
}

/// The fabric directory processes share by default: `$UVERBS_FABRIC`, else
/// `$XDG_RUNTIME_DIR/uverbs-fabric`, else `/tmp/uverbs-fabric-<uid>`.
pub fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("UVERBS_FABRIC").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Path::new(&d).join("uverbs-fabric");
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    let uid = unsafe { libc::getuid() };
    PathBuf::from(format!("/tmp/uverbs-fabric-{uid}"))
}

/// Faults the switch injects into what this HCA sends
/// ([`Mlx5Model::fabric_faults`](super::Mlx5Model::fabric_faults)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Faults {
    /// Drop this many of the next packets.
    pub drop: u32,
    /// This many times, hold a packet back and send it after the next one.
    pub reorder: u32,
    /// Drop only requests and responses carrying data (not
    /// acknowledgements).
    pub data_only: bool,
}

impl Faults {
    /// Drop the next `n` packets.
    pub fn drop(n: u32) -> Faults {
        Faults {
            drop: n,
            ..Faults::default()
        }
    }

    /// Swap the next `n` pairs of packets.
    pub fn reorder(n: u32) -> Faults {
        Faults {
            reorder: n,
            ..Faults::default()
        }
    }
}

/// This HCA's port on the switch.
#[derive(Debug)]
pub(crate) struct Port {
    pub(crate) dir: PathBuf,
    pub(crate) identity: Identity,
    sock: UnixDatagram,
    path: PathBuf,
    /// Packets the peer's queue could not take yet: (destination, bytes).
    queue: VecDeque<(PathBuf, Vec<u8>)>,
    held: Option<(PathBuf, Vec<u8>)>,
    pub(crate) faults: Faults,
    pub(crate) sent: u64,
    pub(crate) dropped: u64,
    buf: Vec<u8>,
}

/// Removes the sockets in `dir` that nobody reads any more (left by
/// processes that were killed, or that exec'd without running the
/// preload's exit hook): a connect to them is refused.
fn prune(dir: &Path, own: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let Ok(probe) = UnixDatagram::unbound() else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let hca = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("hca-"));
        if hca && p != own {
            if let Err(err) = probe.connect(&p) {
                if err.kind() == ErrorKind::ConnectionRefused {
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
    }
}

fn sock_path(dir: &Path, id: Identity) -> PathBuf {
    dir.join(format!("hca-{:06x}", id.n))
}

impl Port {
    /// Joins the fabric at `dir` with identity `want` (or, if `None`, the
    /// process id's); another number when a live HCA holds it.
    pub(crate) fn join(dir: &Path, want: Option<u32>) -> std::io::Result<Port> {
        std::fs::create_dir_all(dir)?;
        let base = want.unwrap_or_else(std::process::id) & 0x3f_ffff;
        for k in 0..4u32 {
            let id = Identity::new(base | k << 22);
            if id.n == 0 {
                continue;
            }
            let path = sock_path(dir, id);
            match UnixDatagram::bind(&path) {
                Ok(sock) => return Port::made(dir, id, sock, path),
                Err(e) if e.kind() == ErrorKind::AddrInUse => {
                    // A live HCA answers a connect; a dead one's socket
                    // refuses it and is replaced.
                    let probe = UnixDatagram::unbound()?;
                    if probe.connect(&path).is_ok() {
                        continue;
                    }
                    let _ = std::fs::remove_file(&path);
                    if let Ok(sock) = UnixDatagram::bind(&path) {
                        return Port::made(dir, id, sock, path);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::new(
            ErrorKind::AddrInUse,
            "no free identity on the fabric",
        ))
    }

    fn made(
        dir: &Path,
        identity: Identity,
        sock: UnixDatagram,
        path: PathBuf,
    ) -> std::io::Result<Port> {
        sock.set_nonblocking(true)?;
        prune(dir, &path);
        Ok(Port {
            dir: dir.to_path_buf(),
            identity,
            sock,
            path,
            queue: VecDeque::new(),
            held: None,
            faults: Faults::default(),
            sent: 0,
            dropped: 0,
            buf: vec![0; super::wire::SEGMENT + 4096],
        })
    }

    /// Sends a packet towards the HCA its destination GID names (lost if
    /// it names none).
    pub(crate) fn send(&mut self, p: &Packet) {
        let Some(to) = Identity::of_gid(&p.header.dst_gid) else {
            self.dropped += 1;
            return;
        };
        let carries_data = !matches!(p.body, super::wire::Body::Ack(_));
        if self.faults.drop > 0 && (carries_data || !self.faults.data_only) {
            self.faults.drop -= 1;
            self.dropped += 1;
            return;
        }
        let item = (sock_path(&self.dir, to), p.encode());
        if self.faults.reorder > 0 && (carries_data || !self.faults.data_only) {
            match self.held.take() {
                None => {
                    self.held = Some(item);
                    return;
                }
                Some(held) => {
                    self.faults.reorder -= 1;
                    self.queue.push_back(item);
                    self.queue.push_back(held);
                }
            }
        } else {
            self.queue.push_back(item);
        }
        self.flush();
    }

    /// Sends what waits; returns whether packets are still waiting.
    pub(crate) fn flush(&mut self) -> bool {
        while let Some((to, bytes)) = self.queue.front() {
            match self.sock.send_to(bytes, to) {
                Ok(_) => self.sent += 1,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                // The peer is gone (ECONNREFUSED, ENOENT) or the packet
                // cannot be sent: lost.
                Err(e) => {
                    if super::remote::trace() {
                        eprintln!("fabric: a packet to {} lost: {e}", to.display());
                    }
                    self.dropped += 1;
                }
            }
            self.queue.pop_front();
        }
        false
    }

    /// Whether packets this HCA sent have not been taken by their
    /// receivers yet: waiting in this port's queue, or in a peer's socket
    /// (the socket's `SIOCOUTQ`, which for a unix-domain datagram socket
    /// counts what sits unread in the receivers' queues). A peer process
    /// that is not running (descheduled on a loaded host) leaves them
    /// there; a dead peer's queue is freed when its socket closes.
    pub(crate) fn undelivered(&self) -> bool {
        if !self.queue.is_empty() {
            return true;
        }
        let mut n: libc::c_int = 0;
        // SAFETY: SIOCOUTQ (TIOCOUTQ) on a socket fd this port owns writes
        // one int to the pointer, which points at `n`.
        #[allow(unsafe_code)]
        let r = unsafe { libc::ioctl(self.sock.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
        r == 0 && n > 0
    }

    /// The next packet received, if any (malformed ones are skipped).
    pub(crate) fn recv(&mut self) -> Option<Packet> {
        loop {
            match self.sock.recv(&mut self.buf) {
                Ok(n) => {
                    if let Some(p) = Packet::decode(&self.buf[..n]) {
                        return Some(p);
                    }
                    if super::remote::trace() {
                        eprintln!("fabric: a malformed packet of {n} bytes dropped");
                    }
                }
                Err(_) => return None,
            }
        }
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_round_trip_through_their_gids() {
        for n in [1, 0x42, 0x3f_ffff, 0x40_0001, 0xff_fffe, DEFAULT_ID] {
            let id = Identity::new(n);
            for g in id.gids() {
                assert_eq!(Identity::of_gid(&g), Some(id), "{n:#x} {g:02x?}");
            }
        }
        let d = Identity::new(DEFAULT_ID);
        assert_eq!(d.gids()[1][12..], [192, 0, 2, 1]);
        assert_eq!(d.mac(), [0x0c, 0x42, 0xa1, 0x12, 0x34, 0x56]);
        assert_eq!(d.node_guid(), 0x0c42_a103_0012_3456);
        assert_eq!(
            Identity::new(0x0a_0b0c).gids()[1][12..],
            [10, 0x0a, 0x0b, 0x0c]
        );
        assert_eq!(Identity::of_gid(&[0; 16]), None);
        let mut other = [0u8; 16];
        other[10] = 0xff;
        other[11] = 0xff;
        other[12] = 172;
        assert_eq!(Identity::of_gid(&other), None);
    }

    #[test]
    fn a_live_identity_is_not_taken_twice_and_a_dead_one_is_reused() {
        let dir = std::env::temp_dir().join(format!("uverbs-fabric-test-{}", std::process::id()));
        let a = Port::join(&dir, Some(0x1234)).unwrap();
        let b = Port::join(&dir, Some(0x1234)).unwrap();
        assert_eq!(a.identity.n, 0x1234);
        assert_eq!(b.identity.n, 0x1234 | 1 << 22);
        // A socket whose owner is gone (bound, then closed without unlink).
        let stale = sock_path(&dir, Identity::new(0x777));
        drop(UnixDatagram::bind(&stale).unwrap());
        let c = Port::join(&dir, Some(0x777)).unwrap();
        assert_eq!(c.identity.n, 0x777);
        drop((a, b, c));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn packets_cross_and_faults_drop_or_swap_them() {
        use super::super::wire::{Aeth, Body, Header};
        let dir = std::env::temp_dir().join(format!("uverbs-fabric-x-{}", std::process::id()));
        let mut a = Port::join(&dir, Some(0x10)).unwrap();
        let mut b = Port::join(&dir, Some(0x20)).unwrap();
        let pkt = |psn| Packet {
            header: Header {
                src_gid: a.identity.gids()[1],
                dst_gid: b.identity.gids()[1],
                src_qpn: 1,
                dst_qpn: 2,
                psn,
            },
            body: Body::Ack(Aeth::Ack),
        };
        let (p1, p2, p3, p4) = (pkt(1), pkt(2), pkt(3), pkt(4));
        a.send(&p1);
        assert_eq!(b.recv(), Some(p1));
        assert_eq!(b.recv(), None);
        a.faults = Faults::drop(1);
        a.send(&p2);
        a.send(&p3);
        assert_eq!(b.recv(), Some(p3.clone()));
        a.faults = Faults::reorder(1);
        a.send(&p2);
        assert_eq!(b.recv(), None);
        a.send(&p4);
        assert_eq!(b.recv(), Some(p4));
        assert_eq!(b.recv(), Some(p2));
        // A GID that names no HCA of the fabric: lost.
        let mut nowhere = p3;
        nowhere.header.dst_gid = [0; 16];
        a.send(&nowhere);
        assert_eq!(a.dropped, 2);
        drop((a, b));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
