//! `uverbs::event_stream` on the real kernel, on a second runtime (smol's
//! reactor, async-io): the example as a program, and an awaited CQ whose
//! waits are given up mid-way, armed, with nothing lost or seen twice.

use std::{
    future::Future,
    io,
    os::fd::{BorrowedFd, OwnedFd},
    pin::pin,
    task::{Context as TaskContext, Poll, Waker},
    time::Duration,
};

use smol::Async;
use uverbs::{
    event_stream::{AsyncCq, Readiness},
    QpInitAttr, RecvWr, SendFlags, SendWr, WorkCompletion,
};

use crate::support::*;

/// An event fd on smol's reactor (a duplicate of it), as the example has it.
struct SmolFd(Async<OwnedFd>);

impl Readiness for SmolFd {
    type Ready<'a> = ();

    fn poll_read_ready(&self, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        self.0.poll_readable(cx)
    }
}

fn smol_fd(fd: BorrowedFd<'_>) -> io::Result<SmolFd> {
    Async::new_nonblocking(fd.try_clone_to_owned()?).map(SmolFd)
}

/// `smol_cq_events` runs to completion on the device: the channel as a
/// `Stream` and `event_stream::AsyncCq`, both on smol.
#[test]
fn event_stream_smol_example_runs() {
    let dev = crate::test_device();
    let out = std::process::Command::new(crate::example("smol_cq_events"))
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
        text.contains("AsyncCq on smol: 6 messages, 12 completions"),
        "{text}"
    );
}

/// Thirty messages through an `AsyncCq` on smol; before every other one a
/// wait is started (the CQ armed, the task asleep on the channel) and
/// given up. Every completion arrives exactly once, and everything
/// destroys (every event read was acknowledged).
#[test]
fn event_stream_smol_cq_cancelled_waits_lose_nothing() {
    const MESSAGES: u64 = 30;
    let ctx = open();
    let mut cq = AsyncCq::create_with(&ctx, 16, 0, smol_fd).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let init = QpInitAttr::rc(cq.cq(), cq.cq()).cap(cap(8));
    let (mut a, mut b) = (pd.create_qp(&init).unwrap(), pd.create_qp(&init).unwrap());
    let gid = local_gid(&ctx);
    connect(&a, b.qp_num(), gid, access_all(), 7);
    connect(&b, a.qp_num(), gid, access_all(), 7);
    let buf = mr(&pd, 4096);
    let mut wc = [WorkCompletion::default(); 8];
    let mut seen = Vec::new();
    for i in 0..MESSAGES {
        if i % 2 == 1 {
            let mut cx = TaskContext::from_waker(Waker::noop());
            let mut fut = pin!(cq.poll(&mut wc));
            assert!(
                fut.as_mut().poll(&mut cx).is_pending(),
                "nothing posted yet"
            );
        }
        b.post_recv(&[RecvWr::new(1000 + i, &[buf.sge(64, 64).unwrap()])])
            .unwrap();
        buf.write(0, &i.to_ne_bytes()).unwrap();
        a.post_send(&[SendWr::send(i, &[buf.sge(0, 8).unwrap()]).flags(SendFlags::SIGNALED)])
            .unwrap();
        let mut got = 0;
        while got < 2 {
            let n = smol::block_on(async {
                smol::future::or(async { Some(cq.poll(&mut wc).await) }, async {
                    smol::Timer::after(Duration::from_secs(30)).await;
                    None
                })
                .await
            })
            .unwrap_or_else(|| panic!("message {i}: a completion was lost"))
            .unwrap();
            for c in &wc[..n] {
                assert!(c.status.is_success(), "{c:?}");
                seen.push(c.wr_id);
            }
            got += n;
        }
        assert_eq!(buf.read_u64(64).unwrap(), i);
    }
    seen.sort_unstable();
    let want: Vec<u64> = (0..MESSAGES).chain(1000..1000 + MESSAGES).collect();
    assert_eq!(seen, want, "every completion exactly once");
    assert_eq!(cq.try_poll(&mut wc), 0);
    a.destroy().unwrap();
    b.destroy().unwrap();
    PATIENCE
        .destroy("the AsyncCq on smol", cq, |cq| {
            cq.destroy().map_err(|e| e.into_parts().1)
        })
        .unwrap();
}
