//! The `tokio` feature on the real kernel: many tasks on one runtime, each
//! with its own QPs, exchanging messages through awaited CQs; waits
//! cancelled mid-way; a runtime shut down while events are pending; async
//! events, rdma_cm events and the examples. No completion or event may be
//! lost or delivered twice, and everything must destroy afterwards.

use std::{
    collections::HashSet,
    fs,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use uverbs::{
    tokio::{AsyncCompletionChannel, AsyncCq, AsyncEvents, BusyPoll},
    AsyncElement, AsyncEventType as T, Context, CqOptions, ProtectionDomain, QpInitAttr, QueuePair,
    RecvWr, SendFlags, SendWr, SrqAttr, WcOpcode, WorkCompletion,
};

use crate::support::*;

fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// A connected loopback pair on one awaited CQ.
struct Pair {
    cq: AsyncCq,
    a: QueuePair,
    b: QueuePair,
    buf: uverbs::MemoryRegion,
    _pd: ProtectionDomain,
}

fn pair_on(ctx: &Context, depth: u32) -> Pair {
    let pd = ctx.alloc_pd().unwrap();
    let cq = AsyncCq::create(ctx, 4 * depth, 0).unwrap();
    let init = QpInitAttr::rc(cq.cq(), cq.cq()).cap(cap(depth));
    let (a, b) = (pd.create_qp(&init).unwrap(), pd.create_qp(&init).unwrap());
    let gid = local_gid(ctx);
    connect(&a, b.qp_num(), gid, access_all(), 7);
    connect(&b, a.qp_num(), gid, access_all(), 7);
    let buf = mr(&pd, 4096);
    Pair {
        cq,
        a,
        b,
        buf,
        _pd: pd,
    }
}

/// Sends `messages` numbered messages from `a` to `b`, each awaited
/// (its send and its receive completion), checking every payload; returns
/// the completions seen.
async fn exchange(p: &mut Pair, messages: u64) -> usize {
    let mut wc = [WorkCompletion::default(); 8];
    let mut seen = 0;
    for i in 0..messages {
        p.b.post_recv(&[RecvWr::new(i, &[p.buf.sge(0, 64).unwrap()])])
            .unwrap();
        p.buf.write(64, &i.to_ne_bytes()).unwrap();
        p.a.post_send(&[SendWr::send(i, &[p.buf.sge(64, 8).unwrap()]).flags(SendFlags::SIGNALED)])
            .unwrap();
        let (mut sent, mut got) = (false, false);
        while !(sent && got) {
            let n = p.cq.poll(&mut wc).await.unwrap();
            assert!(n > 0);
            for c in &wc[..n] {
                assert!(c.status.is_success(), "{c:?}");
                assert_eq!(c.wr_id, i, "a completion of another message: {c:?}");
                match c.opcode {
                    WcOpcode::SEND => {
                        assert!(!sent, "a send completion twice");
                        sent = true;
                    }
                    WcOpcode::RECV => {
                        assert!(!got, "a receive completion twice");
                        got = true;
                        assert_eq!(p.buf.read_u64(0).unwrap(), i, "payload");
                    }
                    other => panic!("{other:?}"),
                }
                seen += 1;
            }
        }
    }
    seen
}

/// Sixteen tasks on a two-thread runtime, each with its own pair and CQ,
/// 40 messages each: every completion arrives exactly once, in every task.
#[test]
fn many_tasks_exchange_messages_on_one_runtime() {
    const TASKS: u64 = 16;
    const MESSAGES: u64 = 40;
    let ctx = open();
    let rt = runtime(2);
    let total = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let (ctx, total) = (ctx.clone(), total.clone());
                tokio::spawn(async move {
                    let mut p = pair_on(&ctx, 8);
                    if t % 2 == 0 {
                        p.cq.set_busy_poll(BusyPoll::For(Duration::from_micros(50)));
                    }
                    let n = exchange(&mut p, MESSAGES).await;
                    total.fetch_add(n, Ordering::Relaxed);
                    let Pair { cq, a, b, .. } = p;
                    a.destroy().unwrap();
                    b.destroy().unwrap();
                    cq.destroy().unwrap_or_else(|e| panic!("{e}"));
                })
            })
            .collect();
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(120), t)
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "a task still runs after 120 s: its exchange lost a completion, or its \
                         CQ's destroy waits ({DESTROY_WAITS}?)"
                    )
                })
                .expect("a task panicked");
        }
    });
    assert_eq!(total.load(Ordering::Relaxed) as u64, TASKS * MESSAGES * 2);
}

/// Waits cancelled mid-way (a timeout drops the future while it sleeps on
/// the channel, armed): the next wait still gets every completion, once.
#[test]
fn a_cancelled_wait_loses_no_completion() {
    let ctx = open();
    let rt = runtime(1);
    rt.block_on(async {
        let mut p = pair_on(&ctx, 8);
        let mut wc = [WorkCompletion::default(); 8];
        for i in 0..10u64 {
            let idle = tokio::time::timeout(Duration::from_millis(20), p.cq.poll(&mut wc)).await;
            assert!(idle.is_err(), "nothing was posted, yet: {idle:?}");
            p.b.post_recv(&[RecvWr::new(i, &[p.buf.sge(0, 64).unwrap()])])
                .unwrap();
            p.a.post_send(&[
                SendWr::send(i, &[p.buf.sge(64, 8).unwrap()]).flags(SendFlags::SIGNALED)
            ])
            .unwrap();
            let mut got = HashSet::new();
            while got.len() < 2 {
                let n = tokio::time::timeout(Duration::from_secs(20), p.cq.poll(&mut wc))
                    .await
                    .expect("the completions woke the next wait")
                    .unwrap();
                for c in &wc[..n] {
                    assert_eq!(c.wr_id, i);
                    assert!(got.insert(c.opcode), "twice: {c:?}");
                }
            }
        }
        // The channel's own wait, cancelled, then an event: it arrives.
        let ch = AsyncCompletionChannel::new(ctx.create_comp_channel().unwrap()).unwrap();
        let mut cq = ctx
            .create_cq(8, CqOptions::new().channel(ch.channel()).context(77))
            .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(20), ch.next_event())
                .await
                .is_err()
        );
        let pd = ctx.alloc_pd().unwrap();
        let init = QpInitAttr::rc(&cq, &cq).cap(cap(4));
        let (mut a, mut b) = (pd.create_qp(&init).unwrap(), pd.create_qp(&init).unwrap());
        let gid = local_gid(&ctx);
        connect(&a, b.qp_num(), gid, access_all(), 7);
        connect(&b, a.qp_num(), gid, access_all(), 7);
        let buf = mr(&pd, 4096);
        cq.req_notify(false).unwrap();
        b.post_recv(&[RecvWr::new(1, &[buf.sge(0, 64).unwrap()])])
            .unwrap();
        a.post_send(&[SendWr::send(2, &[buf.sge(64, 8).unwrap()])])
            .unwrap();
        let context = {
            let ev = tokio::time::timeout(Duration::from_secs(20), ch.next_event())
                .await
                .expect("the event")
                .unwrap();
            ev.cq_context()
        };
        assert_eq!(context, 77);
        assert_eq!(wait(&mut cq, 2).len(), 2);
        a.destroy().unwrap();
        b.destroy().unwrap();
        PATIENCE
            .destroy(
                "the CQ after its one awaited event",
                cq,
                uverbs::CompletionQueue::destroy,
            )
            .unwrap();
    });
}

fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd").unwrap().count()
}

/// A runtime shut down while its tasks sleep on armed CQs whose events are
/// already queued: the tasks are dropped, nothing blocks, every object
/// left destroys, and no fd stays open.
#[test]
fn shutdown_with_events_pending_blocks_nothing_and_leaks_nothing() {
    let ctx = open();
    let before = open_fds();
    let rt = runtime(2);
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..4 {
        let (ctx, tx) = (ctx.clone(), tx.clone());
        rt.spawn(async move {
            let mut p = pair_on(&ctx, 4);
            let mut wc = [WorkCompletion::default(); 4];
            // Arm by waiting once, briefly.
            let _ = tokio::time::timeout(Duration::from_millis(10), p.cq.poll(&mut wc)).await;
            // Completions (and so an event) arrive while nobody waits.
            p.b.post_recv(&[RecvWr::new(1, &[p.buf.sge(0, 64).unwrap()])])
                .unwrap();
            p.a.post_send(&[
                SendWr::send(2, &[p.buf.sge(64, 8).unwrap()]).flags(SendFlags::SIGNALED)
            ])
            .unwrap();
            tx.send(()).unwrap();
            // Never polled again: the runtime goes away first, dropping
            // `p` with this future.
            let _keep = &p;
            std::future::pending::<()>().await
        });
    }
    for _ in 0..4 {
        rx.recv_timeout(Duration::from_secs(60))
            .expect("a task started");
    }
    std::thread::sleep(Duration::from_millis(200));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        rt.shutdown_timeout(Duration::from_secs(10));
        done_tx.send(()).unwrap();
    });
    done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the runtime shut down");
    assert_eq!(open_fds(), before, "fds left open");
    // The context still works.
    ctx.query_port(1).unwrap();
}

/// Async events and the async fd: an SRQ's limit event is awaited.
#[test]
fn async_events_are_awaited() {
    let ctx = open();
    let rt = runtime(1);
    rt.block_on(async {
        let events = AsyncEvents::new(&ctx).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mut cq = ctx.create_cq(64, CqOptions::default()).unwrap();
        let mut srq = pd.create_srq(SrqAttr::new(16, 1)).unwrap();
        let init = |srq| QpInitAttr::rc(&cq, &cq).srq(srq).cap(cap(8));
        let mut a = pd.create_qp(&init(None)).unwrap();
        let b = pd.create_qp(&init(Some(&srq))).unwrap();
        let gid = local_gid(&ctx);
        connect(&a, b.qp_num(), gid, access_all(), 7);
        connect(&b, a.qp_num(), gid, access_all(), 7);
        let buf = mr(&pd, 4096);
        for i in 0..4 {
            srq.post_recv(&[RecvWr::new(i, &[buf.sge(i as usize * 64, 64).unwrap()])])
                .unwrap();
        }
        srq.set_limit(3).unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), events.next_event())
                .await
                .is_err(),
            "nothing yet"
        );
        for i in 0..2 {
            a.post_send(&[SendWr::send(i, &[buf.sge(2048, 8).unwrap()])])
                .unwrap();
        }
        let (kind, element) = {
            let ev = tokio::time::timeout(Duration::from_secs(20), events.next_event())
                .await
                .expect("the limit event")
                .unwrap();
            (ev.event_type(), *ev.element())
        };
        assert_eq!(kind, T::SRQ_LIMIT_REACHED);
        assert_eq!(element, AsyncElement::Srq(srq.handle()));
        wait(&mut cq, 4);
    });
}

/// The async examples run to completion: `async_cq_events` (both halves)
/// and `async_cm both` (server and client tasks over rdma_cm).
#[test]
fn async_examples_run() {
    let dev = crate::test_device();
    let out = std::process::Command::new(crate::example("async_cq_events"))
        .args([dev.as_str(), "6"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("by hand: 6 messages, 12 completions"),
        "{text}"
    );
    assert!(
        text.contains("AsyncCq: 6 messages, 12 completions"),
        "{text}"
    );
    let ip: String = crate::test_env("UVERBS_TEST_IP");
    let out = std::process::Command::new(crate::example("async_cm"))
        .args(["both", ip.as_str(), "18241"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("server: received \"ping\""), "{text}");
    assert!(text.contains("client: received \"pong\""), "{text}");
    assert!(text.contains("server: client disconnected"), "{text}");
}
