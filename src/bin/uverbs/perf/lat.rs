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

use std::{
    sync::{
        atomic::{fence, Ordering},
        Barrier,
    },
    time::{Duration, Instant},
};

use uverbs::{RecvWr, SendOp, SendWr, WcStatus, WorkCompletion};

use super::{
    clock::{pin_to, Clock},
    err, report, Opts, Res, Setup, Side, Test,
};

/// How long one wait may spin before the run is declared stuck.
const STUCK: Duration = Duration::from_secs(20);

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

/// Runs both sides; returns A's and B's reports.
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
            side(
                o,
                b,
                rb,
                Role::Server,
                inline,
                pin.then_some(1),
                barrier,
                clock,
            )
        });
        let ta = side(
            o,
            a,
            ra,
            Role::Client,
            inline,
            pin.then_some(0),
            barrier,
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
    barrier: &Barrier,
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
    barrier.wait();
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
    let mut spins = 0u32;
    let mut since: Option<Instant> = None;
    loop {
        if cq.poll(wc) == 1 {
            if wc[0].status != WcStatus::SUCCESS {
                return Err(format!("{what} completion failed: {:?}", wc[0]));
            }
            return Ok(());
        }
        spins = spins.wrapping_add(1);
        if spins & 0xf_ffff == 0 {
            let t = *since.get_or_insert_with(Instant::now);
            if t.elapsed() > STUCK {
                return Err(format!("no {what} completion for {STUCK:?}"));
            }
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
            let mut spins = 0u32;
            let mut since: Option<Instant> = None;
            loop {
                // A volatile byte load of memory the device writes, like
                // perftest's volatile read; the fence orders the data
                // before what follows.
                let byte = s.mr.read_u8(poll_off).map_err(err("buffer"))?;
                fence(Ordering::Acquire);
                if byte == want {
                    break;
                }
                spins = spins.wrapping_add(1);
                if spins & 0xf_ffff == 0 {
                    let t = *since.get_or_insert_with(Instant::now);
                    if t.elapsed() > STUCK {
                        return Err(format!("iteration {rcnt}: the peer's write did not arrive"));
                    }
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
            r.map_err(|e| format!("post_send (scnt={scnt}): {e}"))?;
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
                    .map_err(|e| format!("post_recv (rcnt={rcnt}): {e}"))?;
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
                .map_err(|e| format!("post_send (scnt={scnt}): {e}"))?;
            if signaled {
                poll_one(&mut s.send_cq, &mut swc, "send")?;
            }
        }
    }
    Ok(())
}
