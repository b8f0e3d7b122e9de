//! Concurrency, ordering and load on the real kernel:
//!
//! - several threads reading one completion channel, and one async event
//!   fd: every event reaches exactly one of them;
//! - QPs dropped while another thread destroys their CQ, a few thousand
//!   times: no destroy sleeps (the race of a CQ seeing no children while a
//!   QP still held it);
//! - events read late come oldest first, and only to their own context;
//! - a thousand create/destroy cycles of every object: no growth in open
//!   fds, mappings or resident memory.

use std::{
    collections::HashMap,
    fs,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc, Arc, Mutex,
    },
    thread,
    time::{Duration, Instant},
};

use uverbs::{
    cm::{EventChannel, PortSpace},
    AccessFlags, AsyncElement, AsyncEventType as T, CompletionChannel, CompletionQueue, Context,
    CqOptions, ProtectionDomain, QpInitAttr, QueuePair, RecvWr, SendWr, SharedReceiveQueue,
    SrqAttr,
};

use crate::support::*;

/// How long any one step may take before the test fails instead of hanging
/// (longer than `support::PATIENCE`: thousands of rounds under TCG).
const STEP: Patience = Patience(Duration::from_secs(60));

fn rc_qp(
    pd: &ProtectionDomain,
    cq: &CompletionQueue,
    srq: Option<&SharedReceiveQueue>,
    depth: u32,
) -> QueuePair {
    pd.create_qp(&QpInitAttr::rc(cq, cq).srq(srq).cap(cap(depth)))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A loopback RC pair whose receiver's CQ signals a channel with `context`.
struct Lane {
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    tx: QueuePair,
    rx: QueuePair,
}

fn lane(ctx: &Context, pd: &ProtectionDomain, ch: &CompletionChannel, context: u64) -> Lane {
    let send_cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let recv_cq = ctx
        .create_cq(16, CqOptions::new().channel(ch).context(context))
        .unwrap();
    let tx = rc_qp(pd, &send_cq, None, 8);
    let rx = rc_qp(pd, &recv_cq, None, 8);
    let gid = local_gid(ctx);
    connect(&tx, rx.qp_num(), gid, access_all(), 7);
    connect(&rx, tx.qp_num(), gid, access_all(), 7);
    Lane {
        send_cq,
        recv_cq,
        tx,
        rx,
    }
}

impl Lane {
    /// Arms the receive CQ and delivers one message to it.
    fn fire(&mut self, buf: &uverbs::MemoryRegion) {
        self.recv_cq.req_notify(false).unwrap();
        self.rx
            .post_recv(&[RecvWr::new(1, &[buf.sge(0, 64).unwrap()])])
            .unwrap();
        self.tx
            .post_send(&[SendWr::send(2, &[buf.sge(64, 8).unwrap()])])
            .unwrap();
        wait(&mut self.send_cq, 1);
        wait(&mut self.recv_cq, 1);
    }
}

/// Four threads read one completion channel while eight CQs fire, round
/// after round: each event is delivered to exactly one thread (per CQ,
/// exactly one event per round).
#[test]
fn threads_sharing_a_completion_channel_each_get_distinct_events() {
    const THREADS: usize = 4;
    const CQS: u64 = 8;
    const ROUNDS: usize = 25;
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let buf = mr(&pd, 4096);
    let mut lanes: Vec<Lane> = (0..CQS).map(|i| lane(&ctx, &pd, &ch, i)).collect();
    let got: Arc<Mutex<Vec<(usize, u64)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (ch, got, stop) = (ch.clone(), got.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if let Some(ev) = ch
                        .get_event_timeout(Some(Duration::from_millis(50)))
                        .unwrap()
                    {
                        got.lock().unwrap().push((t, ev.cq_context()));
                    }
                }
            })
        })
        .collect();
    for round in 1..=ROUNDS {
        for l in &mut lanes {
            l.fire(&buf);
        }
        let start = Instant::now();
        while got.lock().unwrap().len() < round * CQS as usize {
            assert!(start.elapsed() < STEP.0, "round {round}: events missing");
            thread::sleep(Duration::from_millis(2));
        }
    }
    // Nothing more arrives: no event was delivered twice.
    thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    for r in readers {
        STEP.join("a reader (it stops at its next 50 ms get)", r);
    }
    let got = got.lock().unwrap();
    assert_eq!(got.len(), ROUNDS * CQS as usize);
    let mut per_cq: HashMap<u64, usize> = HashMap::new();
    let mut per_thread = [0usize; THREADS];
    for &(t, cq) in got.iter() {
        *per_cq.entry(cq).or_default() += 1;
        per_thread[t] += 1;
    }
    assert!(per_cq.values().all(|&n| n == ROUNDS), "{per_cq:?}");
    assert!(
        per_thread.iter().filter(|&&n| n > 0).count() > 1,
        "one thread took everything: {per_thread:?}"
    );
    drop(got);
    for l in lanes {
        l.rx.destroy().unwrap();
        l.tx.destroy().unwrap();
        STEP.destroy(
            format!("a receive CQ after its {ROUNDS} events"),
            l.recv_cq,
            CompletionQueue::destroy,
        )
        .unwrap();
        l.send_cq.destroy().unwrap();
    }
}

/// An SRQ whose limit event can be fired again and again.
struct Limit {
    srq: SharedReceiveQueue,
    cq: CompletionQueue,
    tx: QueuePair,
    _rx: QueuePair,
}

fn limit_lane(ctx: &Context, pd: &ProtectionDomain) -> Limit {
    let cq = ctx.create_cq(64, CqOptions::default()).unwrap();
    let srq = pd.create_srq(SrqAttr::new(16, 1)).unwrap();
    let tx = rc_qp(pd, &cq, None, 16);
    let rx = rc_qp(pd, &cq, Some(&srq), 16);
    let gid = local_gid(ctx);
    connect(&tx, rx.qp_num(), gid, access_all(), 7);
    connect(&rx, tx.qp_num(), gid, access_all(), 7);
    Limit {
        srq,
        cq,
        tx,
        _rx: rx,
    }
}

impl Limit {
    /// Posts 4 receives, arms the limit at 3 and consumes 2: one
    /// SRQ_LIMIT_REACHED (rxe fires when fewer than the limit remain).
    fn fire(&mut self, buf: &uverbs::MemoryRegion) {
        for i in 0..4 {
            self.srq
                .post_recv(&[RecvWr::new(i, &[buf.sge(i as usize * 64, 64).unwrap()])])
                .unwrap();
        }
        self.srq.set_limit(3).unwrap();
        for i in 0..2 {
            self.tx
                .post_send(&[SendWr::send(i, &[buf.sge(2048, 8).unwrap()])])
                .unwrap();
        }
        wait(&mut self.cq, 4);
        // Consume the rest so the next round starts empty.
        for i in 0..2 {
            self.tx
                .post_send(&[SendWr::send(i, &[buf.sge(2048, 8).unwrap()])])
                .unwrap();
        }
        wait(&mut self.cq, 4);
    }
}

/// Four threads read the async fd while four SRQs raise their limit event,
/// round after round: each event reaches exactly one thread.
#[test]
fn threads_sharing_the_async_fd_each_get_distinct_events() {
    const THREADS: usize = 4;
    const SRQS: usize = 4;
    const ROUNDS: usize = 10;
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let buf = mr(&pd, 4096);
    let mut lanes: Vec<Limit> = (0..SRQS).map(|_| limit_lane(&ctx, &pd)).collect();
    let got: Arc<Mutex<Vec<(usize, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (ctx, got, stop) = (ctx.clone(), got.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let ev = ctx
                        .get_async_event_timeout(Some(Duration::from_millis(50)))
                        .unwrap();
                    if let Some(ev) = ev {
                        let what = format!("{:?} {:?}", ev.event_type(), ev.element());
                        got.lock().unwrap().push((t, what));
                    }
                }
            })
        })
        .collect();
    for round in 1..=ROUNDS {
        for l in &mut lanes {
            l.fire(&buf);
        }
        let start = Instant::now();
        while got.lock().unwrap().len() < round * SRQS {
            assert!(start.elapsed() < STEP.0, "round {round}: events missing");
            thread::sleep(Duration::from_millis(2));
        }
    }
    thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    for r in readers {
        STEP.join("a reader (it stops at its next 50 ms get)", r);
    }
    let got = got.lock().unwrap();
    let mut per_srq: HashMap<&str, usize> = HashMap::new();
    for (_, what) in got.iter() {
        *per_srq.entry(what.as_str()).or_default() += 1;
    }
    let want: Vec<String> = lanes
        .iter()
        .map(|l| {
            format!(
                "{:?} {:?}",
                T::SRQ_LIMIT_REACHED,
                AsyncElement::Srq(l.srq.handle())
            )
        })
        .collect();
    assert_eq!(per_srq.len(), SRQS, "{per_srq:?}");
    for w in &want {
        assert_eq!(per_srq.get(w.as_str()), Some(&ROUNDS), "{w}: {per_srq:?}");
    }
}

/// The race of a QP dropped by one thread while another destroys its CQ,
/// 2,000 times: the CQ destroy either sees the QP (EBUSY, CQ given back)
/// or finds it gone, and never sleeps.
#[test]
fn qps_dropped_while_their_cq_is_destroyed_never_hang_it() {
    const ROUNDS: usize = 2000;
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let refused = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    for _ in 0..ROUNDS {
        let cq = ctx.create_cq(4, CqOptions::default()).unwrap();
        let qp = rc_qp(&pd, &cq, None, 2);
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let dropper = thread::spawn(move || {
            go_rx.recv().unwrap();
            drop(qp);
        });
        let (done_tx, done_rx) = mpsc::channel();
        let r = refused.clone();
        let destroyer = thread::spawn(move || {
            let mut cq = cq;
            loop {
                match cq.destroy() {
                    Ok(()) => break,
                    Err(e) => {
                        assert_eq!(e.errno(), uverbs::sys::Errno::EBUSY, "{e}");
                        r.fetch_add(1, Ordering::Relaxed);
                        cq = e.into_inner();
                        thread::yield_now();
                    }
                }
            }
            done_tx.send(()).unwrap();
        });
        go_tx.send(()).unwrap();
        done_rx
            .recv_timeout(STEP.0)
            .expect("a CQ destroy is asleep while its QP was dropped");
        STEP.join("the destroyer", destroyer);
        STEP.join("the QP's dropper", dropper);
    }
    eprintln!(
        "{ROUNDS} rounds in {:?}; the CQ was refused (QP still there) {} times",
        start.elapsed(),
        refused.load(Ordering::Relaxed)
    );
}

/// Events read late come oldest first, and each context gets only its own:
/// three CQs of context A fire in turn and an SRQ of A raises its limit,
/// then A's channel and async fd give them in that order while B's, idle
/// throughout, stay empty.
#[test]
fn late_events_come_oldest_first_and_only_to_their_context() {
    let (a, b) = (open(), open());
    let pd = a.alloc_pd().unwrap();
    let ch_a = a.create_comp_channel().unwrap();
    let ch_b = b.create_comp_channel().unwrap();
    let _cq_b = b.create_cq(4, CqOptions::new().channel(&ch_b)).unwrap();
    let buf = mr(&pd, 4096);
    let mut lanes: Vec<Lane> = (0..3).map(|i| lane(&a, &pd, &ch_a, 100 + i)).collect();
    for i in [2usize, 0, 1] {
        lanes[i].fire(&buf);
    }
    let mut limits: Vec<Limit> = (0..2).map(|_| limit_lane(&a, &pd)).collect();
    limits[1].fire(&buf);
    limits[0].fire(&buf);
    let order: Vec<u64> = (0..3)
        .map(|_| {
            ch_a.get_event_timeout(Some(Duration::from_secs(10)))
                .unwrap()
                .expect("an event")
                .cq_context()
        })
        .collect();
    assert_eq!(order, [102, 100, 101], "oldest first");
    let srqs: Vec<AsyncElement> = (0..2)
        .map(|_| {
            *a.get_async_event_timeout(Some(Duration::from_secs(10)))
                .unwrap()
                .expect("a limit event")
                .element()
        })
        .collect();
    assert_eq!(
        srqs,
        [
            AsyncElement::Srq(limits[1].srq.handle()),
            AsyncElement::Srq(limits[0].srq.handle())
        ]
    );
    assert!(
        ch_b.try_get_event().unwrap().is_none(),
        "B's channel got A's events"
    );
    assert!(
        b.try_get_async_event().unwrap().is_none(),
        "B's async fd got A's events"
    );
    assert!(ch_a.try_get_event().unwrap().is_none());
}

fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd").unwrap().count()
}

/// This process's mappings, one `/proc/self/maps` line each.
fn mappings() -> Vec<String> {
    fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The mappings of a device file: the queues and doorbells the kernel maps.
fn device_mappings(maps: &[String]) -> usize {
    maps.iter()
        .filter(|l| l.contains("/dev/infiniband/"))
        .count()
}

/// How many anonymous mappings the allocator may hold more after the
/// cycles than before, without any of them being ours: musl's allocator
/// maps and unmaps groups of small allocations itself (seen once: 27 -> 28
/// on 6.12 musl). A per-cycle leak would show as hundreds, or, merged into
/// one anonymous region, in the RSS check.
const ALLOCATOR_SLACK: usize = 2;

fn rss_kib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Every object, created and destroyed in turn, twice 1,000 times (after
/// a warm-up): open fds and mappings return exactly to where they were, and
/// resident memory does not grow in both runs.
#[test]
fn a_thousand_create_destroy_cycles_leak_nothing() {
    let ctx = open();
    let cm = EventChannel::open().unwrap();
    let cycle = |probe: bool| {
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd
            .alloc_mr(8192, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
            .unwrap();
        let ch = ctx.create_comp_channel().unwrap();
        let cq = ctx.create_cq(16, CqOptions::new().channel(&ch)).unwrap();
        let srq = pd.create_srq(SrqAttr::new(8, 1)).unwrap();
        let qp = rc_qp(&pd, &cq, Some(&srq), 8);
        let id = cm.create_id(PortSpace::Tcp).unwrap();
        if probe {
            // The filter below sees the queues the kernel mapped for us.
            assert!(device_mappings(&mappings()) > 0, "no device mapping seen");
        }
        id.destroy().unwrap();
        qp.destroy().unwrap();
        srq.destroy().unwrap();
        cq.destroy().unwrap();
        drop(ch);
        mr.destroy().unwrap();
        pd.destroy().unwrap();
    };
    for i in 0..50 {
        cycle(i == 0);
    }
    let (fds, maps, rss) = (open_fds(), mappings(), rss_kib());
    let start = Instant::now();
    // Resident memory after each of two runs of 1,000 cycles.
    let mut rss_after = [0; 2];
    for after in &mut rss_after {
        for _ in 0..1000 {
            cycle(false);
        }
        *after = rss_kib();
    }
    let (fds2, maps2) = (open_fds(), mappings());
    eprintln!(
        "2 x 1000 cycles in {:?}: fds {fds} -> {fds2}, mappings {} -> {} (of a device: {} -> {}), \
         RSS {rss} -> {} -> {} KiB",
        start.elapsed(),
        maps.len(),
        maps2.len(),
        device_mappings(&maps),
        device_mappings(&maps2),
        rss_after[0],
        rss_after[1],
    );
    for line in maps2.iter().filter(|l| !maps.contains(l)) {
        eprintln!("  new mapping: {line}");
    }
    assert_eq!(fds2, fds, "open fds grew");
    assert_eq!(
        device_mappings(&maps2),
        device_mappings(&maps),
        "mappings of the device grew"
    );
    assert!(
        maps2.len() <= maps.len() + ALLOCATOR_SLACK,
        "mappings grew from {} to {}",
        maps.len(),
        maps2.len()
    );
    // A leak grows resident memory in both runs alike (over 1 KiB a cycle:
    // over 1 MiB a run). Once, on 6.1 in CI after the whole suite (84
    // mappings, 8.5 MiB resident), it grew by 2 MiB in one run with no new
    // mapping, a one-time step of the allocator's heap that the other run
    // does not repeat; alone the test stays flat for 3,000 cycles.
    let grew = [
        rss_after[0].saturating_sub(rss),
        rss_after[1].saturating_sub(rss_after[0]),
    ];
    assert!(
        grew.iter().any(|&g| g <= 1024),
        "RSS grew in both runs of 1,000 cycles: {rss} -> {} -> {} KiB",
        rss_after[0],
        rss_after[1]
    );
}
