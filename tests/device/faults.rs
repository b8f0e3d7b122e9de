//! Faults while the library is busy: the port going down and up, and the
//! device being deleted (`rdma link delete`), each while traffic and event
//! readers run. Nothing may hang or crash, every object must still be
//! destroyable, and what failed must say so. (A peer killed mid-transfer is
//! in `cm.rs`, next to the rdma_cm helpers it uses.)

use std::{
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc, Arc, Mutex,
    },
    thread,
    time::{Duration, Instant},
};

use uverbs::{
    AsyncEventType as T, CompletionQueue, Context, CqOptions, PortState, ProtectionDomain,
    QpInitAttr, QueuePair, RecvWr, SendFlags, SendWr, WcStatus, WorkCompletion,
};

use crate::support::*;

fn netdev() -> String {
    std::env::var("UVERBS_TEST_NETDEV").unwrap_or_else(|_| "dummy0".into())
}

fn link(up: bool) {
    let out = Command::new("/bin/ip")
        .args(["link", "set", &netdev(), if up { "up" } else { "down" }])
        .output()
        .expect("/bin/ip");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until port 1 is ACTIVE with the test GID back.
fn wait_port_ready(dev: &str) {
    let start = Instant::now();
    loop {
        if let Ok(ctx) = Context::open(Some(dev)) {
            let active = ctx
                .query_port(1)
                .is_ok_and(|p| p.state == PortState::Active);
            let gid = ctx.query_gid(1, u32::from(gid_index())).ok().flatten();
            if active && gid.is_some() {
                return;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{dev} port 1 not ACTIVE with its GID after 30 s"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// Brings the link back up however the test ends.
struct LinkGuard;

impl Drop for LinkGuard {
    fn drop(&mut self) {
        let _ = Command::new("/bin/ip")
            .args(["link", "set", &netdev(), "up"])
            .status();
        wait_port_ready(&crate::test_device());
    }
}

/// A loopback RC pair driven by a thread: one message at a time, each
/// send and receive completion awaited (bounded). The first failed
/// completion stops it; its statuses are kept.
struct Traffic {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    thread: thread::JoinHandle<(Lane, Vec<WcStatus>)>,
}

struct Lane {
    pd: ProtectionDomain,
    cq: CompletionQueue,
    a: QueuePair,
    b: QueuePair,
    buf: uverbs::MemoryRegion,
}

fn lane(ctx: &Context) -> Lane {
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64, CqOptions::default()).unwrap();
    let qp = || pd.create_qp(&QpInitAttr::rc(&cq, &cq).cap(cap(8))).unwrap();
    let (a, b) = (qp(), qp());
    let gid = local_gid(ctx);
    connect(&a, b.qp_num(), gid, access_all(), 7);
    connect(&b, a.qp_num(), gid, access_all(), 7);
    let buf = mr(&pd, 4096);
    Lane { pd, cq, a, b, buf }
}

impl Traffic {
    fn start(ctx: &Context) -> Traffic {
        let mut l = lane(ctx);
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let (s, d) = (stop.clone(), done.clone());
        let thread = thread::spawn(move || {
            let mut failed = Vec::new();
            let mut wc = [WorkCompletion::default(); 4];
            'run: while !s.load(Ordering::SeqCst) {
                let i = d.load(Ordering::SeqCst);
                l.b.post_recv(&[RecvWr::new(i, &[l.buf.sge(0, 64).unwrap()])])
                    .unwrap();
                l.a.post_send(&[
                    SendWr::send(i, &[l.buf.sge(64, 8).unwrap()]).flags(SendFlags::SIGNALED)
                ])
                .unwrap();
                let (mut got, start) = (0, Instant::now());
                while got < 2 {
                    let n = l.cq.poll(&mut wc);
                    for w in &wc[..n] {
                        if !w.status.is_success() {
                            failed.push(w.status);
                        }
                    }
                    got += n;
                    if !failed.is_empty() {
                        // Collect what the error flushed, then stop.
                        thread::sleep(Duration::from_millis(100));
                        while let n @ 1.. = l.cq.poll(&mut wc) {
                            failed.extend(wc[..n].iter().map(|w| w.status));
                        }
                        break 'run;
                    }
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "a message neither completed nor failed in 60 s"
                    );
                    if n == 0 {
                        thread::yield_now();
                    }
                }
                d.fetch_add(1, Ordering::SeqCst);
            }
            (l, failed)
        });
        Traffic { stop, done, thread }
    }

    fn finish(self) -> (Lane, Vec<WcStatus>, u64) {
        self.stop.store(true, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        let t = self.thread;
        thread::spawn(move || {
            let _ = tx.send(t.join());
        });
        let (lane, failed) = rx
            .recv_timeout(Duration::from_secs(90))
            .expect("the traffic thread hung")
            .expect("the traffic thread panicked");
        (lane, failed, self.done.load(Ordering::SeqCst))
    }
}

/// Reads async events on a thread until stopped.
struct Reader {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<T>>>,
    thread: thread::JoinHandle<()>,
}

impl Reader {
    fn start(ctx: &Context) -> Reader {
        let (stop, seen) = (
            Arc::new(AtomicBool::new(false)),
            Arc::<Mutex<Vec<T>>>::default(),
        );
        let (s, v, ctx) = (stop.clone(), seen.clone(), ctx.clone());
        let thread = thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match ctx.get_async_event_timeout(Some(Duration::from_millis(100))) {
                    Ok(Some(ev)) => v.lock().unwrap().push(ev.event_type()),
                    Ok(None) => {}
                    Err(e) => panic!("async event read failed: {e}"),
                }
            }
        });
        Reader { stop, seen, thread }
    }

    fn finish(self) -> Vec<T> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the event reader panicked");
        Arc::try_unwrap(self.seen).unwrap().into_inner().unwrap()
    }
}

fn destroy_all(l: Lane) {
    l.a.destroy().unwrap_or_else(|e| panic!("{e}"));
    l.b.destroy().unwrap_or_else(|e| panic!("{e}"));
    l.cq.destroy().unwrap_or_else(|e| panic!("{e}"));
    l.buf.destroy().unwrap_or_else(|e| panic!("{e}"));
    l.pd.destroy().unwrap_or_else(|e| panic!("{e}"));
}

/// The port goes down for a second and comes back while a pair exchanges
/// messages and a thread reads async events: PORT_ERR then PORT_ACTIVE are
/// read, the traffic either rides it out or ends with a completion that
/// names the failure (retries exhausted, or on rxe a packet with no route,
/// the rest flushed), nothing hangs
/// and everything is destroyed.
#[test]
fn port_down_and_up_under_traffic_and_event_readers() {
    let _guard = LinkGuard;
    let ctx = open();
    let reader = Reader::start(&ctx);
    let traffic = Traffic::start(&ctx);
    thread::sleep(Duration::from_millis(300));
    let before = traffic.done.load(Ordering::SeqCst);
    assert!(before > 0, "no traffic before the fault");
    link(false);
    thread::sleep(Duration::from_secs(1));
    link(true);
    wait_port_ready(&crate::test_device());
    thread::sleep(Duration::from_millis(500));
    let (lane, failed, done) = traffic.finish();
    let events = reader.finish();
    eprintln!(
        "{done} messages ({before} before the fault); failed: {failed:?}; events: {events:?}"
    );
    let err = events.iter().position(|e| *e == T::PORT_ERR);
    let active = events.iter().rposition(|e| *e == T::PORT_ACTIVE);
    assert!(
        matches!((err, active), (Some(e), Some(a)) if e < a),
        "PORT_ERR then PORT_ACTIVE: {events:?}"
    );
    if let Some((first, rest)) = failed.split_first() {
        // Retries exhausted while the port was down, or (rxe) a packet that
        // could not be built because the route was gone: rxe_req.c turns a
        // failed rxe_prepare/route lookup into LOC_QP_OP_ERR.
        assert!(
            matches!(
                *first,
                WcStatus::RETRY_EXC_ERR | WcStatus::WR_FLUSH_ERR | WcStatus::LOC_QP_OP_ERR
            ),
            "{failed:?}"
        );
        assert!(
            rest.iter().all(|s| *s == WcStatus::WR_FLUSH_ERR),
            "{failed:?}"
        );
    }
    destroy_all(lane);
}

/// `rdma link delete` while traffic and event readers run: rxe cannot take
/// the device away from open contexts, so the delete waits; meanwhile the
/// traffic goes on and nothing is reported. Once every object is destroyed
/// and the context closed, the delete finishes; rxe0 is then recreated.
#[test]
fn zz_rdma_link_delete_under_traffic_waits_for_the_last_close() {
    let dev = crate::test_device();
    let ctx = open();
    let reader = Reader::start(&ctx);
    let traffic = Traffic::start(&ctx);
    thread::sleep(Duration::from_millis(300));
    let mut child = Command::new("rdma")
        .args(["link", "delete", &dev])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rdma link delete");
    let at_delete = traffic.done.load(Ordering::SeqCst);
    thread::sleep(Duration::from_secs(1));
    let pending = child.try_wait().unwrap().is_none();
    let after = traffic.done.load(Ordering::SeqCst);
    let (lane, failed, done) = traffic.finish();
    let events = reader.finish();
    eprintln!(
        "{done} messages, {} while the delete waited; events: {events:?}",
        after - at_delete
    );
    assert!(pending, "the delete finished while the device was open");
    assert!(
        after > at_delete,
        "the traffic stopped while the delete waited"
    );
    assert!(failed.is_empty(), "{failed:?}");
    assert!(events.is_empty(), "{events:?}");
    destroy_all(lane);
    drop(ctx);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("rdma link delete did not finish within 30 s of the last close");
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "rdma link delete: {status}");
    let err = Context::open(Some(&dev)).expect_err("the device is gone");
    assert!(err.to_string().contains(&dev), "{err}");
    let out = Command::new("rdma")
        .args(["link", "add", &dev, "type", "rxe", "netdev", &netdev()])
        .output()
        .expect("rdma link add");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_port_ready(&dev);
}
