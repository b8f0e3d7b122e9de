//! `uverbs perf destroy-storm`: completion-event delivery on one QP while
//! another thread of the same context creates and destroys objects as fast
//! as it can (issue 28 item 5: how much a storm of explicit `destroy()`s
//! holds up event delivery for the rest of the context).
//!
//! One context and PD, two RC QPs connected through the device's loopback
//! (side A and side B, as the other `perf` tests). Side A's send CQ is on a
//! completion channel. The event loop (this thread) repeats: arm the CQ
//! (`req_notify`), post one signaled RDMA write of `-s` bytes into B's
//! buffer, block in `get_event` on the channel, acknowledge the event, poll
//! the completion. It records the time from the post to the event's return
//! (`Instant`): the latency of one completion event.
//!
//! Meanwhile the storm thread, on the same context, loops over one kind of
//! object, creating it and destroying it with an explicit `destroy()`:
//! - `none`: no storm (the baseline);
//! - `cq`: CQs on the same completion channel (never armed: they raise no
//!   event);
//! - `qp`: RC QPs (left in RESET) on a CQ of the storm's own, created once
//!   per run (so only QPs are destroyed in the loop);
//! - `srq`: SRQs;
//! - `pd`: PDs, a control: the same kind of command traffic on the context
//!   from another thread, but PDs have no events, so their destroy shares
//!   no lock with event delivery (what the storms cost besides that lock:
//!   CPU, the device fd, the kernel's own locks).
//!
//! Each run reports the events, events per second, the latency's
//! p50/p90/p99/max and mean in microseconds, and the storm's destroys per
//! second, all over the measured window only (after a warm-up of the event
//! loop, with the storm already running). `--rounds R` repeats the list of
//! storms R times, every other round in reverse order, and then prints the
//! median of each figure per storm, the figures of all rounds' events
//! pooled per storm, and the median of each storm's figures over the
//! baseline's of the same round. A benchmark: it asserts nothing about
//! the figures.
//!
//! Only the public API is used, so the same source measures the stack
//! before and after a change to how destroys and event delivery interact.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Mutex,
    },
    thread,
    time::{Duration, Instant},
};

use uverbs::{
    AccessFlags, CompletionChannel, CompletionQueue, Context, CqOptions, MemoryRegion,
    ProtectionDomain, QpCap, QpInitAttr, QueuePair, SendOp, SendWr, SrqAttr, WcStatus,
    WorkCompletion,
};

use super::{clock::Watchdog, connect, err, open, report, Opts, Res};

/// What the storm thread creates and destroys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storm {
    None,
    Cq,
    Qp,
    Srq,
    Pd,
}

impl Storm {
    pub fn parse(s: &str) -> Option<Storm> {
        Some(match s {
            "none" => Storm::None,
            "cq" => Storm::Cq,
            "qp" => Storm::Qp,
            "srq" => Storm::Srq,
            "pd" => Storm::Pd,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Storm::None => "none",
            Storm::Cq => "cq",
            Storm::Qp => "qp",
            Storm::Srq => "srq",
            Storm::Pd => "pd",
        }
    }
}

/// The default list: the baseline, then CQ and QP destroys.
pub const DEFAULT_STORMS: [Storm; 3] = [Storm::None, Storm::Cq, Storm::Qp];

/// One run's figures.
#[derive(Debug, Clone)]
struct Run {
    storm: Storm,
    round: usize,
    events: usize,
    events_per_s: f64,
    /// p50, p90, p99, max, mean, in microseconds.
    lat: [f64; 5],
    destroys: u64,
    destroys_per_s: f64,
    /// The measured window, in seconds.
    secs: f64,
    /// Every latency, in nanoseconds (for the pooled figures).
    samples: Vec<u64>,
}

/// The event side: A's QP with its send CQ on the channel, and where its
/// writes land in B.
struct EventSide {
    qp: QueuePair,
    cq: CompletionQueue,
    mr: MemoryRegion,
    remote_addr: u64,
    rkey: u32,
}

/// Everything the runs share; dropped in field order.
struct Bench {
    a: EventSide,
    _b_qp: QueuePair,
    _b_cqs: (CompletionQueue, CompletionQueue),
    _a_recv_cq: CompletionQueue,
    _b_mr: MemoryRegion,
    channel: CompletionChannel,
    pd: ProtectionDomain,
    ctx: Context,
}

fn rc_qp(
    pd: &ProtectionDomain,
    send_cq: &CompletionQueue,
    recv_cq: &CompletionQueue,
) -> uverbs::Result<QueuePair> {
    pd.create_qp(&QpInitAttr::rc(send_cq, recv_cq).cap(QpCap::new(1, 1, 1, 1)))
}

fn setup(o: &Opts) -> Res<Bench> {
    let (ctx, mtu, gid) = open(o)?;
    let pd = ctx.alloc_pd().map_err(err("allocate PD"))?;
    let channel = ctx
        .create_comp_channel()
        .map_err(err("create completion channel"))?;
    let a_cq = ctx
        .create_cq(2, CqOptions::new().channel(&channel))
        .map_err(err("create event CQ"))?;
    let a_recv_cq = ctx
        .create_cq(2, CqOptions::default())
        .map_err(err("create CQ"))?;
    let b_send = ctx
        .create_cq(2, CqOptions::default())
        .map_err(err("create CQ"))?;
    let b_recv = ctx
        .create_cq(2, CqOptions::default())
        .map_err(err("create CQ"))?;
    let a_qp = rc_qp(&pd, &a_cq, &a_recv_cq).map_err(err("create QP"))?;
    let b_qp = rc_qp(&pd, &b_send, &b_recv).map_err(err("create QP"))?;
    let len = o.size.max(4096).next_multiple_of(4096);
    let a_mr = pd
        .alloc_mr(len, AccessFlags::LOCAL_WRITE)
        .map_err(err("register memory"))?;
    let b_mr = pd
        .alloc_mr(len, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
        .map_err(err("register memory"))?;
    connect(&a_qp, b_qp.qp_num(), o, mtu, gid)?;
    connect(&b_qp, a_qp.qp_num(), o, mtu, gid)?;
    let a = EventSide {
        remote_addr: b_mr.addr(),
        rkey: b_mr.rkey(),
        qp: a_qp,
        cq: a_cq,
        mr: a_mr,
    };
    Ok(Bench {
        a,
        _b_qp: b_qp,
        _b_cqs: (b_send, b_recv),
        _a_recv_cq: a_recv_cq,
        _b_mr: b_mr,
        channel,
        pd,
        ctx,
    })
}

/// One iteration of the event loop: arm, post, wait for the event,
/// acknowledge it, poll the completion. Returns the time from the post to
/// the event.
fn one_event(
    a: &mut EventSide,
    channel: &CompletionChannel,
    sge: &[uverbs::Sge; 1],
    wr_id: u64,
    wc: &mut [WorkCompletion; 1],
) -> Res<Duration> {
    a.cq.req_notify(false).map_err(err("req_notify"))?;
    let op = SendOp::RdmaWrite {
        remote_addr: a.remote_addr,
        rkey: a.rkey,
    };
    let t0 = Instant::now();
    a.qp.post_send(&[SendWr::new(wr_id, op, sge)])
        .map_err(|e| format!("post_send: {e:#}"))?;
    let ev = channel.get_event().map_err(err("get_event"))?;
    let dt = t0.elapsed();
    if !ev.is_for(&a.cq) {
        return Err(format!("event for an unknown CQ {:#x}", ev.cq_handle()));
    }
    ev.ack();
    // The event comes after the completion is in the CQ: the first poll
    // finds it (the watchdog only guards against a broken device).
    let mut watch = Watchdog::default();
    loop {
        if a.cq.poll(wc) == 1 {
            if wc[0].status != WcStatus::SUCCESS || wc[0].wr_id != wr_id {
                return Err(format!("write completion failed: {:?}", wc[0]));
            }
            return Ok(dt);
        }
        if watch.stuck() {
            return Err("an event came but no completion".into());
        }
    }
}

/// The storm thread's loop: create and destroy `kind` until `stop`,
/// counting destroys in `done`.
fn storm(
    kind: Storm,
    ctx: &Context,
    pd: &ProtectionDomain,
    channel: &CompletionChannel,
    stop: &AtomicBool,
    done: &AtomicU64,
) -> Res<()> {
    let with_channel = CqOptions::new().channel(channel);
    let destroyed = |r: Result<(), String>| -> Res<()> {
        r?;
        done.fetch_add(1, Ordering::Release);
        Ok(())
    };
    match kind {
        Storm::None => Ok(()),
        Storm::Cq => {
            while !stop.load(Ordering::Acquire) {
                let cq = ctx
                    .create_cq(2, with_channel)
                    .map_err(err("storm: create CQ"))?;
                destroyed(
                    cq.destroy()
                        .map_err(|e| format!("storm: destroy CQ: {e:#}")),
                )?;
            }
            Ok(())
        }
        Storm::Qp => {
            let cq = ctx
                .create_cq(4, CqOptions::default())
                .map_err(err("storm: create CQ"))?;
            while !stop.load(Ordering::Acquire) {
                let qp = rc_qp(pd, &cq, &cq).map_err(err("storm: create QP"))?;
                destroyed(
                    qp.destroy()
                        .map_err(|e| format!("storm: destroy QP: {e:#}")),
                )?;
            }
            cq.destroy()
                .map_err(|e| format!("storm: destroy its CQ: {e:#}"))
        }
        Storm::Srq => {
            while !stop.load(Ordering::Acquire) {
                let srq = pd
                    .create_srq(SrqAttr::new(4, 1))
                    .map_err(err("storm: create SRQ"))?;
                destroyed(
                    srq.destroy()
                        .map_err(|e| format!("storm: destroy SRQ: {e:#}")),
                )?;
            }
            Ok(())
        }
        Storm::Pd => {
            while !stop.load(Ordering::Acquire) {
                let pd = ctx.alloc_pd().map_err(err("storm: allocate PD"))?;
                destroyed(
                    pd.destroy()
                        .map_err(|e| format!("storm: destroy PD: {e:#}")),
                )?;
            }
            Ok(())
        }
    }
}

/// p-th percentile (nearest rank) of sorted nanoseconds, in microseconds.
fn pct(sorted: &[u64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1e3
}

/// The figures of `lat_ns` (unsorted nanoseconds): p50, p90, p99, max, mean.
fn summarize(lat_ns: &[u64]) -> [f64; 5] {
    let mut lat_ns = lat_ns.to_vec();
    lat_ns.sort_unstable();
    let mean = lat_ns.iter().sum::<u64>() as f64 / lat_ns.len() as f64 / 1e3;
    [
        pct(&lat_ns, 50.0),
        pct(&lat_ns, 90.0),
        pct(&lat_ns, 99.0),
        *lat_ns.last().unwrap_or(&0) as f64 / 1e3,
        mean,
    ]
}

/// One run: the storm of `kind` (if any) on a thread, the event loop here.
fn run_one(o: &Opts, b: &mut Bench, kind: Storm, round: usize, wr_id: &mut u64) -> Res<Run> {
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let failed: Mutex<Option<String>> = Mutex::new(None);
    let Bench {
        a,
        channel,
        ctx,
        pd,
        ..
    } = b;
    let (ctx, pd, channel_ref) = (&*ctx, &*pd, &*channel);
    let sge = [a.mr.sge(0, o.size as u32).map_err(err("sge"))?];
    let mut wc = [WorkCompletion::default(); 1];
    let mut lat = vec![0u64; o.iters];
    let result = thread::scope(|s| -> Res<(Duration, u64)> {
        let storm_thread = s.spawn(|| {
            if let Err(e) = storm(kind, ctx, pd, channel_ref, &stop, &done) {
                *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            }
        });
        let mut body = || -> Res<(Duration, u64)> {
            // The storm is running before anything is measured.
            if kind != Storm::None {
                let since = Instant::now();
                while done.load(Ordering::Acquire) == 0 {
                    if storm_thread.is_finished() {
                        return Err("the storm thread stopped before its first destroy".into());
                    }
                    if since.elapsed() > Duration::from_secs(20) {
                        return Err("no destroy in 20 s".into());
                    }
                    thread::sleep(Duration::from_millis(1));
                }
            }
            for _ in 0..o.warmup {
                *wr_id += 1;
                one_event(a, channel_ref, &sge, *wr_id, &mut wc)?;
            }
            let d0 = done.load(Ordering::Acquire);
            let t0 = Instant::now();
            for l in lat.iter_mut() {
                *wr_id += 1;
                *l = one_event(a, channel_ref, &sge, *wr_id, &mut wc)?.as_nanos() as u64;
                if storm_thread.is_finished() && kind != Storm::None {
                    return Err("the storm thread stopped during the run".into());
                }
            }
            let elapsed = t0.elapsed();
            Ok((elapsed, done.load(Ordering::Acquire) - d0))
        };
        let r = body();
        stop.store(true, Ordering::Release);
        let _ = storm_thread.join();
        r
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let (elapsed, destroys) = result?;
    let secs = elapsed.as_secs_f64();
    Ok(Run {
        storm: kind,
        round,
        events: o.iters,
        events_per_s: o.iters as f64 / secs,
        lat: summarize(&lat),
        destroys,
        destroys_per_s: destroys as f64 / secs,
        secs,
        samples: lat,
    })
}

const HEADER: &str = " storm  round  events    events/s   p50[us]   p90[us]   p99[us]    max[us]   mean[us]   destroys  destroys/s";

fn row(r: &Run, round: &str) -> String {
    format!(
        " {:<6} {:>5} {:>7} {:>11.1} {:>9.2} {:>9.2} {:>9.2} {:>10.2} {:>10.2} {:>10} {:>11.1}",
        r.storm.name(),
        round,
        r.events,
        r.events_per_s,
        r.lat[0],
        r.lat[1],
        r.lat[2],
        r.lat[3],
        r.lat[4],
        r.destroys,
        r.destroys_per_s
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn run(o: &Opts) -> Res<()> {
    let mut b = setup(o)?;
    out!("{}", report::LINE);
    out!("                    completion events during a storm of destroys");
    out!(
        " Device         : {}\t\tConnection type : RC (loopback)",
        o.device.as_deref().unwrap_or("(first)")
    );
    out!(
        " Events per run : {} (+{} warm-up)\tMessage size    : {}[B] RDMA write",
        o.iters,
        o.warmup,
        o.size
    );
    out!(
        " Storms         : {}\tRounds          : {}",
        o.storms
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(","),
        o.rounds
    );
    out!(" latency: post of a signaled write -> its completion event returned by get_event");
    out!("{}", report::LINE);
    out!("{}", HEADER);
    let mut runs = Vec::new();
    let mut wr_id = 0;
    for round in 1..=o.rounds {
        let mut order = o.storms.clone();
        if round % 2 == 0 {
            order.reverse();
        }
        for kind in order {
            let r = run_one(o, &mut b, kind, round, &mut wr_id)?;
            out!("{}", row(&r, &r.round.to_string()));
            runs.push(r);
        }
    }
    if o.rounds > 1 {
        out!("{}", report::LINE);
        out!(" median over {} rounds:", o.rounds);
        out!("{}", HEADER);
        let mut kinds: Vec<Storm> = Vec::new();
        for &k in &o.storms {
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        for &kind in &kinds {
            let of: Vec<&Run> = runs.iter().filter(|r| r.storm == kind).collect();
            let m = |f: &dyn Fn(&Run) -> f64| median(of.iter().map(|r| f(r)).collect());
            let r = Run {
                storm: kind,
                round: 0, // not printed
                events: o.iters,
                events_per_s: m(&|r| r.events_per_s),
                lat: [
                    m(&|r| r.lat[0]),
                    m(&|r| r.lat[1]),
                    m(&|r| r.lat[2]),
                    m(&|r| r.lat[3]),
                    m(&|r| r.lat[4]),
                ],
                destroys: m(&|r| r.destroys as f64) as u64,
                destroys_per_s: m(&|r| r.destroys_per_s),
                secs: 0.0,
                samples: Vec::new(),
            };
            out!("{}", row(&r, "med"));
        }
        // Every event of every round of a storm together: with the storms
        // interleaved, whatever disturbs the guest meanwhile (the host's
        // load, under TCG) falls on every storm alike.
        out!(" all rounds pooled (events/s and destroys/s: totals over the measured time):");
        for &kind in &kinds {
            let of: Vec<&Run> = runs.iter().filter(|r| r.storm == kind).collect();
            let samples: Vec<u64> = of.iter().flat_map(|r| r.samples.iter().copied()).collect();
            let secs: f64 = of.iter().map(|r| r.secs).sum();
            let destroys: u64 = of.iter().map(|r| r.destroys).sum();
            let r = Run {
                storm: kind,
                round: 0, // not printed
                events: samples.len(),
                events_per_s: samples.len() as f64 / secs,
                lat: summarize(&samples),
                destroys,
                destroys_per_s: destroys as f64 / secs,
                secs,
                samples: Vec::new(),
            };
            out!("{}", row(&r, "all"));
        }
        // Each storm against the baseline of the same round: what drifts
        // between rounds (the host's load, under TCG) cancels out.
        if kinds.contains(&Storm::None) {
            out!(" median over the rounds of (storm / baseline of the same round):");
            out!(" storm   events/s       p50       p90       p99      mean");
            for &kind in kinds.iter().filter(|&&k| k != Storm::None) {
                let ratios = |f: &dyn Fn(&Run) -> f64| {
                    let v: Vec<f64> = (1..=o.rounds)
                        .filter_map(|round| {
                            let of =
                                |k: Storm| runs.iter().find(|r| r.round == round && r.storm == k);
                            let (s, n) = (of(kind)?, of(Storm::None)?);
                            Some(f(s) / f(n))
                        })
                        .collect();
                    median(v)
                };
                out!(
                    " {:<6} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                    kind.name(),
                    ratios(&|r| r.events_per_s),
                    ratios(&|r| r.lat[0]),
                    ratios(&|r| r.lat[1]),
                    ratios(&|r| r.lat[2]),
                    ratios(&|r| r.lat[4])
                );
            }
        }
    }
    out!("{}", report::LINE);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).rev().map(|x| x * 1000).collect();
        let s = summarize(&v);
        assert_eq!(s, [50.0, 90.0, 99.0, 100.0, 50.5]);
        assert_eq!(summarize(&[7000]), [7.0, 7.0, 7.0, 7.0, 7.0]);
    }

    /// Every storm runs (and destroys what it creates) on the mlx5 device
    /// model, the way `on_mlx5` runs the other subcommands.
    #[test]
    fn every_storm_runs_on_the_mlx5_model() {
        let model = uverbs::testing::mlx5::fake_mlx5();
        let _hca = model.spawn_hca();
        crate::transport::use_for_this_thread(model.dyn_kernel());
        let a: Vec<String> =
            "destroy-storm -d mlx5_0 -x 1 -n 50 --warmup 5 --storm none,cq,qp,srq,pd --rounds 2"
                .split_whitespace()
                .map(String::from)
                .collect();
        assert_eq!(crate::perf::main(&a), 0);
        assert!(
            model.violations().is_empty(),
            "device model: {:?}",
            model.violations()
        );
    }
}
