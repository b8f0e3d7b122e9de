//! `uverbs perf micro`: the cost of the userspace-only data-path calls on
//! the real device (no system call in any of them), in ticks of the
//! benchmark clock and nanoseconds. Under TCG this shows what a few hundred
//! instructions of provider code cost next to perftest's round trip.

use std::sync::atomic::{fence, Ordering};

use uverbs::{RecvWr, WorkCompletion};

use super::{clock::Clock, err, Opts, Res, Setup};

pub fn run(o: &Opts, s: Setup) -> Res<()> {
    let Setup { mut a, .. } = s;
    let clock = Clock::start(o.clock);
    let n = 100_000u64;
    // 1. Timestamp.
    let t0 = clock.now();
    let mut x = 0u64;
    for _ in 0..n {
        x = x.wrapping_add(clock.now());
    }
    let t_clock = clock.now() - t0;
    std::hint::black_box(x);
    // 2. poll() on an empty CQ.
    let mut wc = [WorkCompletion::default(); 1];
    let t0 = clock.now();
    for _ in 0..n {
        std::hint::black_box(a.send_cq.poll(&mut wc));
    }
    let t_poll = clock.now() - t0;
    // 3. MemoryRegion::read of one byte (the write-lat spin).
    let mut b = [0u8; 1];
    let t0 = clock.now();
    for _ in 0..n {
        let _ = a.mr.read(a.half, &mut b);
        fence(Ordering::Acquire);
        std::hint::black_box(b);
    }
    let t_read = clock.now() - t0;
    // 3b. MemoryRegion::read_u8 (what the write-lat spin uses now).
    let t0 = clock.now();
    for _ in 0..n {
        let b = a.mr.read_u8(a.half).unwrap_or(0);
        fence(Ordering::Acquire);
        std::hint::black_box(b);
    }
    let t_read_u8 = clock.now() - t0;
    // 4. post_recv of one WR (a fresh QP's RQ, one slot per call).
    let depth = a.qp.cap().max_recv_wr as u64;
    let rsge = [a.mr.sge(a.half, o.size as u32).map_err(err("sge"))?];
    let k = depth.max(o.rx_depth as u64).saturating_sub(1).min(1000);
    // Each call timed alone (the clock's own cost subtracted) and the
    // median taken: 511 calls are too few to average away a host
    // preemption of the guest.
    let mut each = Vec::with_capacity(k as usize);
    for _ in 0..k {
        let t0 = clock.now();
        a.qp.post_recv(&[RecvWr::new(0, &rsge)])
            .map_err(err("post_recv"))?;
        each.push(clock.now() - t0);
    }
    each.sort_unstable();
    let med = each.get(each.len() / 2).copied().unwrap_or(0);
    let t_recv = med.saturating_sub(t_clock / n) * k;
    let hz = clock.hz();
    let ns = |t: u64, n: u64| t as f64 / n.max(1) as f64 / hz * 1e9;
    out!(" operation                        calls    ns/call");
    out!(
        " clock.now() (rdtsc)             {n:>7}    {:>8.1}",
        ns(t_clock, n)
    );
    out!(
        " CompletionQueue::poll (empty)   {n:>7}    {:>8.1}",
        ns(t_poll, n)
    );
    out!(
        " MemoryRegion::read 1 byte       {n:>7}    {:>8.1}",
        ns(t_read, n)
    );
    out!(
        " MemoryRegion::read_u8           {n:>7}    {:>8.1}",
        ns(t_read_u8, n)
    );
    out!(
        " QueuePair::post_recv 1 WR (med){k:>7}    {:>8.1}",
        ns(t_recv, k)
    );
    Ok(())
}
