//! Completion events from an event loop: poll(2) on the completion channel's
//! fd (`CompletionChannel` is `AsFd`; epoll works the same, edge-triggered
//! too), drain it with `try_get_event` until it reports "would block"
//! (`Ok(None)`), acknowledge, re-arm the CQ, then poll the CQ until empty.
//!
//! ```sh
//! cargo run --example cq_events_nonblocking -- [DEVICE] [MESSAGES]
//! ```

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::os::fd::AsFd;
use uverbs::{
    ack_cq_events, AccessFlags, AhAttr, CompletionQueue, Context, CqOptions, GidType, GlobalRoute,
    Mtu, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, QueuePair, RecvWr, SendWr,
    WcStatus, WorkCompletion,
};

fn main() {
    if let Err(e) = run() {
        eprintln!("cq_events_nonblocking: {e}");
        std::process::exit(1);
    }
}

/// Port 1's RoCE v2 GID of an IPv4 address if there is one, else GID 0.
fn pick_gid(ctx: &Context) -> uverbs::Result<(u8, uverbs::Gid)> {
    let table = ctx.query_gid_table()?;
    let e = table
        .iter()
        .find(|e| {
            e.port == 1
                && e.gid_type == GidType::RoceV2
                && e.gid.0[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
        })
        .or_else(|| table.iter().find(|e| e.port == 1))
        .expect("port 1 has a GID");
    Ok((e.index as u8, e.gid))
}

/// Connects `qp` to `remote` through INIT, RTR and RTS.
fn connect(
    qp: &QueuePair,
    remote: u32,
    (sgid_index, dgid): (u8, uverbs::Gid),
) -> uverbs::Result<()> {
    let mut attr = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        qp_access_flags: AccessFlags::LOCAL_WRITE,
        ..QpAttr::default()
    };
    qp.modify(
        &attr,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )?;
    attr.qp_state = QpState::Rtr;
    attr.path_mtu = Mtu(3);
    attr.dest_qp_num = remote;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 1;
    attr.ah_attr = AhAttr {
        grh: Some(GlobalRoute {
            dgid,
            sgid_index,
            hop_limit: 1,
            ..GlobalRoute::default()
        }),
        port_num: 1,
        ..AhAttr::default()
    };
    qp.modify(
        &attr,
        QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER,
    )?;
    attr.qp_state = QpState::Rts;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = 1;
    qp.modify(
        &attr,
        QpAttrMask::STATE
            | QpAttrMask::SQ_PSN
            | QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::MAX_QP_RD_ATOMIC,
    )
}

fn poll_until_empty(cq: &mut CompletionQueue) -> Result<usize, String> {
    let mut wc = [WorkCompletion::default(); 8];
    let mut total = 0;
    loop {
        let n = cq.poll(&mut wc);
        for c in &wc[..n] {
            if c.status != WcStatus::SUCCESS {
                return Err(format!("completion {} failed: {:?}", c.wr_id, c.status));
            }
        }
        total += n;
        if n == 0 {
            return Ok(total);
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dev = args.next();
    let messages: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(4);
    let ctx = Context::open(dev.as_deref())?;
    let channel = ctx.create_comp_channel()?;
    let depth = 2 * messages as u32 + 2;
    let mut cq = ctx.create_cq(
        depth,
        CqOptions {
            channel: Some(&channel),
            comp_vector: 0,
        },
    )?;
    let pd = ctx.alloc_pd()?;
    let cap = QpCap {
        max_send_wr: depth,
        max_recv_wr: depth,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let init = QpInitAttr {
        qp_type: QpType::Rc,
        send_cq: &cq,
        recv_cq: &cq,
        srq: None,
        cap,
        sq_sig_all: false,
    };
    let mut a = pd.create_qp(&init)?;
    let mut b = pd.create_qp(&init)?;
    let gid = pick_gid(&ctx)?;
    connect(&a, b.qp_num(), gid)?;
    connect(&b, a.qp_num(), gid)?;
    let buf = pd.alloc_mr(64 * (messages + 1), AccessFlags::LOCAL_WRITE)?;
    buf.write(0, b"ping")?;

    // Nothing is queued yet: "would block".
    assert!(channel.try_get_event()?.is_none());
    cq.req_notify(false)?;
    for i in 0..messages {
        b.post_recv(&[RecvWr::new(1000 + i as u64, &[buf.sge(64 * (i + 1), 64)?])])?;
        a.post_send(&[SendWr::send(i as u64, &[buf.sge(0, 4)?])])?;
    }
    let want = 2 * messages;
    let (mut completions, mut events, mut wakeups) = (0, 0, 0);
    while completions < want {
        let mut fds = [PollFd::new(channel.as_fd(), PollFlags::POLLIN)];
        if poll(&mut fds, PollTimeout::from(10_000u16))? == 0 {
            return Err(format!("no completion event within 10 s ({completions}/{want})").into());
        }
        wakeups += 1;
        // Drain the channel, acknowledge the batch, re-arm, then poll.
        let mut batch = Vec::new();
        while let Some(ev) = channel.try_get_event()? {
            batch.push(ev);
        }
        events += batch.len();
        ack_cq_events(batch);
        cq.req_notify(false)?;
        completions += poll_until_empty(&mut cq)?;
        println!("wake-up {wakeups}: {completions}/{want} completions so far");
    }
    println!("{messages} messages, {completions} completions, {events} events");
    Ok(())
}
