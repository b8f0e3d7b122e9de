//! Shared by the completion-event examples (a loopback RC pair on one
//! device whose CQ signals a completion channel) and `typed_post` (the
//! connection).

use uverbs::{
    AccessFlags, AhAttr, CompletionChannel, CompletionQueue, Context, CqOptions, GidType,
    GlobalRoute, MemoryRegion, Mtu, QpAttr, QpCap, QpInitAttr, QpState, QpType, QueuePair,
    WcStatus, WorkCompletion,
};

/// The pieces the examples use (the context and PD stay alive through them).
pub struct Loopback {
    pub channel: CompletionChannel,
    pub cq: CompletionQueue,
    pub a: QueuePair,
    pub b: QueuePair,
    /// Byte 0.. holds the message; receive slot i is at 64 * (i + 1).
    pub buf: MemoryRegion,
}

/// Connects two RC QPs of `ctx` sharing one CQ on a new completion
/// channel, with room for `messages` round trips.
pub fn setup(ctx: &Context, messages: usize) -> uverbs::Result<Loopback> {
    let channel = ctx.create_comp_channel()?;
    let depth = 2 * messages as u32 + 2;
    let cq = ctx.create_cq(
        depth,
        CqOptions {
            channel: Some(&channel),
            ..CqOptions::default()
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
        context: 0,
        qp_type: QpType::Rc,
        send_cq: &cq,
        recv_cq: &cq,
        srq: None,
        cap,
        sq_sig_all: false,
    };
    let a = pd.create_qp(&init)?;
    let b = pd.create_qp(&init)?;
    let gid = pick_gid(ctx)?;
    connect(&a, b.qp_num(), gid)?;
    connect(&b, a.qp_num(), gid)?;
    let buf = pd.alloc_mr(64 * (messages + 1), AccessFlags::LOCAL_WRITE)?;
    buf.write(0, b"ping")?;
    Ok(Loopback {
        channel,
        cq,
        a,
        b,
        buf,
    })
}

/// Port 1's RoCE v2 GID of an IPv4 address if there is one, else GID 0.
pub fn pick_gid(ctx: &Context) -> uverbs::Result<(u8, uverbs::Gid)> {
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

/// Connects `qp` to `remote` through INIT, RTR and RTS, each with the
/// attributes the transition requires (`QueuePair::modify_to`).
pub fn connect(qp: &QueuePair, remote: u32, gid: (u8, uverbs::Gid)) -> uverbs::Result<()> {
    connect_with(qp, remote, gid, AccessFlags::LOCAL_WRITE)
}

/// [`connect`] with the remote access `access` grants the peer.
pub fn connect_with(
    qp: &QueuePair,
    remote: u32,
    (sgid_index, dgid): (u8, uverbs::Gid),
    access: AccessFlags,
) -> uverbs::Result<()> {
    let mut attr = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        qp_access_flags: access,
        ..QpAttr::default()
    };
    qp.modify_to(&attr)?;
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
    qp.modify_to(&attr)?;
    attr.qp_state = QpState::Rts;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = 1;
    qp.modify_to(&attr)
}

/// Polls until the CQ is empty; checks and counts the completions.
pub fn poll_until_empty(cq: &mut CompletionQueue) -> Result<usize, String> {
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

/// The QP capabilities of the examples' pairs: `depth` work requests of one
/// scatter/gather entry each way.
#[allow(dead_code)] // not every example uses it
pub fn cap(depth: u32) -> QpCap {
    QpCap {
        max_send_wr: depth,
        max_recv_wr: depth,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}

/// Connects `a` and `b` to each other (loopback on `ctx`'s port 1).
#[allow(dead_code)] // not every example uses it
pub fn connect_pair(ctx: &Context, a: &QueuePair, b: &QueuePair) -> uverbs::Result<()> {
    let gid = pick_gid(ctx)?;
    connect(a, b.qp_num(), gid)?;
    connect(b, a.qp_num(), gid)
}
