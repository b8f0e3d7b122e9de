//! The latency ping-pongs (perftest's `run_iter_lat_write` and
//! `run_iter_lat_send`), side A as perftest's client, side B as its server,
//! each on its own thread.
//!
//! write-lat: each side RDMA-writes `size` bytes into the peer's buffer, the
//! last byte carrying the iteration number, and busy-polls the last byte of
//! its own buffer for the peer's write; every write is signaled and its
//! completion polled right after posting (tx depth 1).
//! send-lat: each side busy-polls its receive CQ, reposts the receive, then
//! sends and polls the send completion (`cq_mod` = tx depth = 1).
//! Both timestamp each post; consecutive posts of one side are a round trip.
//!
//! By default side B runs in a forked process ([`run_processes`]), as
//! perftest's server does; `--threads` runs both sides as threads of one
//! process ([`run`]).

use std::{
    io::{Read, Write},
    os::unix::net::UnixStream,
    sync::Barrier,
};

use uverbs::{Gid, RecvWr, SendOp, SendWr, WcStatus, WorkCompletion};

use super::{
    clock::{pin_to, Clock, Watchdog, STUCK},
    err,
    process::{self, Forked},
    report, Header, Local, Opts, Res, Setup, Side, Test,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Client,
    Server,
}

/// Where this side's writes land in the peer.
#[derive(Clone, Copy)]
struct Remote {
    addr: u64,
    rkey: u32,
}

/// What a side tells its peer before connecting: its QP, where the peer's
/// writes land, and its GID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Endpoint {
    qpn: u32,
    rkey: u32,
    addr: u64,
    gid: Gid,
}

impl Endpoint {
    const LEN: usize = 32;

    fn of(l: &Local) -> Endpoint {
        Endpoint {
            qpn: l.side.qp.qp_num(),
            rkey: l.side.mr.rkey(),
            addr: l.side.mr.addr() + l.side.half as u64,
            gid: l.gid,
        }
    }

    fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..4].copy_from_slice(&self.qpn.to_le_bytes());
        b[4..8].copy_from_slice(&self.rkey.to_le_bytes());
        b[8..16].copy_from_slice(&self.addr.to_le_bytes());
        b[16..32].copy_from_slice(&self.gid.0);
        b
    }

    fn decode(b: &[u8; Self::LEN]) -> Endpoint {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut addr = [0u8; 8];
        addr.copy_from_slice(&b[8..16]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[16..32]);
        Endpoint {
            qpn: u32_at(0),
            rkey: u32_at(4),
            addr: u64::from_le_bytes(addr),
            gid: Gid(gid),
        }
    }
}

/// The parent/child channel: fixed-size messages, every failure an error
/// that says the peer went away.
struct Channel(UnixStream);

impl Channel {
    fn send(&mut self, b: &[u8]) -> Res<()> {
        self.0
            .write_all(b)
            .map_err(|e| format!("to the other side: {e:#}"))
    }

    fn recv<const N: usize>(&mut self) -> Res<[u8; N]> {
        let mut b = [0u8; N];
        self.0
            .read_exact(&mut b)
            .map_err(|e| format!("from the other side (did it fail?): {e:#}"))?;
        Ok(b)
    }

    /// Both sides are ready: each says so and waits for the other.
    fn handshake(&mut self) -> Res<()> {
        self.send(b"R")?;
        match self.recv::<1>()? {
            [b'R'] => Ok(()),
            x => Err(format!("unexpected handshake byte {:#04x}", x[0])),
        }
    }
}

/// Sets up this side, trades endpoints with the peer and connects.
fn open_and_connect(o: &Opts, ch: &mut Channel) -> Res<(Local, Endpoint)> {
    let local = super::local(o)?;
    ch.send(&Endpoint::of(&local).encode())?;
    let peer = Endpoint::decode(&ch.recv::<{ Endpoint::LEN }>()?);
    super::connect(&local.side.qp, peer.qpn, o, local.mtu, peer.gid)?;
    Ok((local, peer))
}

/// Runs side A here and side B in a forked process, each with its own
/// context, as perftest's client and server; `header` is called with the
/// connection details before the measured loop. Returns A's and B's
/// reports.
pub fn run_processes(o: &Opts, header: impl FnOnce(&Header)) -> Res<(report::Lat, report::Lat)> {
    let (sa, sb) = UnixStream::pair().map_err(err("socketpair"))?;
    match process::fork()? {
        Forked::Child => {
            drop(sa);
            let status = match server(o, &mut Channel(sb)) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("{}: side B: {e:#}", super::PROG);
                    1
                }
            };
            process::exit(status)
        }
        Forked::Parent(child) => {
            drop(sb);
            let mut ch = Channel(sa);
            let r = client(o, &mut ch, header);
            drop(ch);
            match (r, child.wait()) {
                (Ok(r), Ok(())) => Ok(r),
                (Err(e), Err(c)) => Err(format!("{e:#} ({c})")),
                (Err(e), Ok(())) | (Ok(_), Err(e)) => Err(e),
            }
        }
    }
}

/// Runs this side's loop once both sides are ready; returns its post
/// timestamps and its clock's rate.
fn measure(
    o: &Opts,
    ch: &mut Channel,
    local: Local,
    peer: Endpoint,
    role: Role,
) -> Res<(Vec<u64>, f64)> {
    let remote = Remote {
        addr: peer.addr,
        rkey: peer.rkey,
    };
    let clock = Clock::start(o.clock);
    let cpu = o.pin.then_some(if role == Role::Client { 0 } else { 1 });
    let inline = local.inline;
    let t = side(
        o,
        local.side,
        remote,
        role,
        inline,
        cpu,
        &mut || ch.handshake(),
        &clock,
    )?;
    Ok((t, clock.hz()))
}

/// Side A (perftest's client): runs, then takes B's timestamps and clock
/// rate to report B as well.
fn client(
    o: &Opts,
    ch: &mut Channel,
    header: impl FnOnce(&Header),
) -> Res<(report::Lat, report::Lat)> {
    let (local, peer) = open_and_connect(o, ch)?;
    header(&Header {
        mtu: local.mtu,
        inline: local.inline,
        local_qpn: local.side.qp.qp_num(),
        remote_qpn: peer.qpn,
        how: "side B in a second process",
    });
    let (ta, hz) = measure(o, ch, local, peer, Role::Client)?;
    let hz_b = f64::from_bits(u64::from_le_bytes(ch.recv::<8>()?));
    let mut tb = Vec::with_capacity(o.iters);
    for _ in 0..o.iters {
        tb.push(u64::from_le_bytes(ch.recv::<8>()?));
    }
    let la = report::latency(o.size, &ta, hz).ok_or("too few iterations")?;
    let lb = report::latency(o.size, &tb, hz_b).ok_or("too few iterations")?;
    Ok((la, lb))
}

/// Side B (perftest's server), in the child: runs, then sends its clock
/// rate and timestamps to A.
fn server(o: &Opts, ch: &mut Channel) -> Res<()> {
    let (local, peer) = open_and_connect(o, ch)?;
    let (tb, hz) = measure(o, ch, local, peer, Role::Server)?;
    ch.send(&hz.to_bits().to_le_bytes())?;
    let bytes: Vec<u8> = tb.iter().flat_map(|t| t.to_le_bytes()).collect();
    ch.send(&bytes)
}

/// Runs both sides as threads of this process (`--threads`); returns A's
/// and B's reports.
pub fn run(o: &Opts, s: Setup) -> Res<(report::Lat, report::Lat)> {
    let Setup { a, b, inline, .. } = s;
    let ra = Remote {
        addr: b.mr.addr() + b.half as u64,
        rkey: b.mr.rkey(),
    };
    let rb = Remote {
        addr: a.mr.addr() + a.half as u64,
        rkey: a.mr.rkey(),
    };
    let pin = o.pin && std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let barrier = Barrier::new(2);
    let clock = Clock::start(o.clock);
    let (ta, tb) = std::thread::scope(|sc| {
        let (barrier, clock) = (&barrier, &clock);
        let hb = sc.spawn(move || {
            let mut ready = || {
                barrier.wait();
                Ok(())
            };
            side(
                o,
                b,
                rb,
                Role::Server,
                inline,
                pin.then_some(1),
                &mut ready,
                clock,
            )
        });
        let mut ready = || {
            barrier.wait();
            Ok(())
        };
        let ta = side(
            o,
            a,
            ra,
            Role::Client,
            inline,
            pin.then_some(0),
            &mut ready,
            clock,
        );
        let tb = hb.join().unwrap_or_else(|_| Err("side B panicked".into()));
        (ta, tb)
    });
    let (ta, tb) = (ta?, tb?);
    let hz = clock.hz();
    let la = report::latency(o.size, &ta, hz).ok_or("too few iterations")?;
    let lb = report::latency(o.size, &tb, hz).ok_or("too few iterations")?;
    Ok((la, lb))
}

#[allow(clippy::too_many_arguments)]
fn side(
    o: &Opts,
    mut s: Side,
    remote: Remote,
    role: Role,
    inline: u32,
    cpu: Option<usize>,
    ready: &mut dyn FnMut() -> Res<()>,
    clock: &Clock,
) -> Res<Vec<u64>> {
    if let Some(cpu) = cpu {
        pin_to(cpu);
    }
    let mut tposted = vec![0u64; o.iters];
    // Touch the array so no page fault lands inside the measured loop.
    tposted.iter_mut().for_each(|t| *t = 1);
    let use_inline = o.size <= inline as usize;
    let sge = [s.mr.sge(0, o.size as u32).map_err(err("sge"))?];
    let mut data = vec![0u8; o.size];
    if o.test == Test::SendLat {
        let rsge = [s.mr.sge(s.half, o.size as u32).map_err(err("sge"))?];
        for _ in 0..o.rx_depth {
            s.qp.post_recv(&[RecvWr::new(0, &rsge)])
                .map_err(err("post_recv"))?;
        }
    }
    ready()?;
    match o.test {
        Test::WriteLat => write_lat(
            o,
            &mut s,
            remote,
            role,
            use_inline,
            &sge,
            &mut data,
            &mut tposted,
            clock,
        )?,
        _ => send_lat(
            o,
            &mut s,
            role,
            use_inline,
            &sge,
            &mut data,
            &mut tposted,
            clock,
        )?,
    }
    Ok(tposted)
}

/// Polls `cq` until one completion arrives; checks its status.
#[inline]
fn poll_one(cq: &mut uverbs::CompletionQueue, wc: &mut [WorkCompletion; 1], what: &str) -> Res<()> {
    let mut watch = Watchdog::default();
    loop {
        if cq.poll(wc) == 1 {
            if wc[0].status != WcStatus::SUCCESS {
                return Err(format!("{what} completion failed: {:?}", wc[0]));
            }
            return Ok(());
        }
        if watch.stuck() {
            return Err(format!("no {what} completion for {STUCK:?}"));
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn write_lat(
    o: &Opts,
    s: &mut Side,
    remote: Remote,
    role: Role,
    use_inline: bool,
    sge: &[uverbs::Sge; 1],
    data: &mut [u8],
    tposted: &mut [u64],
    clock: &Clock,
) -> Res<()> {
    let iters = o.iters as u64;
    let last = o.size - 1;
    let poll_off = s.half + last;
    let (mut scnt, mut rcnt, mut ccnt) = (0u64, 0u64, 0u64);
    let mut wc = [WorkCompletion::default(); 1];
    while scnt < iters || ccnt < iters || rcnt < iters {
        if rcnt < iters && !(scnt < 1 && role == Role::Server) {
            rcnt += 1;
            let want = rcnt as u8;
            let mut watch = Watchdog::default();
            loop {
                // An acquire byte load of memory the device writes (perftest
                // spins on a volatile read): nothing after it is read early.
                let byte = s.mr.read_u8(poll_off).map_err(err("buffer"))?;
                if byte == want {
                    break;
                }
                if watch.stuck() {
                    return Err(format!("iteration {rcnt}: the peer's write did not arrive"));
                }
            }
        }
        if scnt < iters {
            tposted[scnt as usize] = clock.now();
            scnt += 1;
            let op = SendOp::RdmaWrite {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            };
            let r = if use_inline {
                data[last] = scnt as u8;
                s.qp.post_send(&[SendWr::new(scnt, op, &[]).inline(data)])
            } else {
                s.mr.write_u8(last, scnt as u8).map_err(err("buffer"))?;
                s.qp.post_send(&[SendWr::new(scnt, op, sge)])
            };
            r.map_err(|e| format!("post_send (scnt={scnt}): {e:#}"))?;
        }
        if ccnt < iters {
            poll_one(&mut s.send_cq, &mut wc, "send")?;
            ccnt += 1;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn send_lat(
    o: &Opts,
    s: &mut Side,
    role: Role,
    use_inline: bool,
    sge: &[uverbs::Sge; 1],
    data: &mut [u8],
    tposted: &mut [u64],
    clock: &Clock,
) -> Res<()> {
    let iters = o.iters as u64;
    let rx_depth = o.rx_depth as u64;
    let cq_mod = o.cq_mod as u64;
    let rsge = [s.mr.sge(s.half, o.size as u32).map_err(err("sge"))?];
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    let mut wc = [WorkCompletion::default(); 1];
    let mut swc = [WorkCompletion::default(); 1];
    while scnt < iters || rcnt < iters {
        if rcnt < iters && !(scnt < 1 && role == Role::Client) {
            poll_one(&mut s.recv_cq, &mut wc, "receive")?;
            rcnt += 1;
            if rcnt + rx_depth <= iters {
                s.qp.post_recv(&[RecvWr::new(0, &rsge)])
                    .map_err(|e| format!("post_recv (rcnt={rcnt}): {e:#}"))?;
            }
        }
        if scnt < iters {
            tposted[scnt as usize] = clock.now();
            scnt += 1;
            let signaled = scnt % cq_mod == 0 || scnt == iters;
            let mut wr = if use_inline {
                SendWr::send(scnt, &[]).inline(data)
            } else {
                SendWr::send(scnt, sge)
            };
            if !signaled {
                wr = wr.unsignaled();
            }
            s.qp.post_send(&[wr])
                .map_err(|e| format!("post_send (scnt={scnt}): {e:#}"))?;
            if signaled {
                poll_one(&mut s.send_cq, &mut swc, "send")?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_cross_the_channel_unchanged() {
        let e = Endpoint {
            qpn: 0x00ab_cdef,
            rkey: 0x1234_5678,
            addr: 0x7fff_0000_1000,
            gid: Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]),
        };
        let (a, b) = UnixStream::pair().unwrap();
        let (mut a, mut b) = (Channel(a), Channel(b));
        a.send(&e.encode()).unwrap();
        let got = Endpoint::decode(&b.recv::<{ Endpoint::LEN }>().unwrap());
        assert_eq!(got, e);
        // A peer that goes away is an error, not a hang or a panic.
        drop(a);
        assert!(b.recv::<1>().unwrap_err().contains("did it fail?"));
    }
}
