//! Shared by the completion-event examples (a loopback RC pair on one
//! device whose CQ signals a completion channel) and `typed_post` (the
//! connection).

use uverbs::{
    AccessFlags, BringUp, CompletionChannel, CompletionQueue, Context, CqOptions, GidType,
    MemoryRegion, Mtu, QpCap, QpInitAttr, QueuePair, WcStatus, WorkCompletion,
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
    let cq = ctx.create_cq(depth, CqOptions::new().channel(&channel))?;
    let pd = ctx.alloc_pd()?;
    let cap = QpCap::new(depth, depth, 1, 1);
    let init = QpInitAttr::rc(&cq, &cq).cap(cap);
    let a = pd.create_qp(&init)?;
    let b = pd.create_qp(&init)?;
    connect_pair(ctx, &a, &b)?;
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

/// Connects `a` and `b` to each other on `ctx`'s port 1 (its RoCE v2 GID,
/// MTU 1024), each granting the other `access`: each QP's endpoint, then
/// one `bring_up` per QP.
pub fn connect_pair_with(
    ctx: &Context,
    a: &QueuePair,
    b: &QueuePair,
    access: AccessFlags,
) -> uverbs::Result<()> {
    let (gid_index, _) = pick_gid(ctx)?;
    let link = BringUp::new(1)
        .gid_index(gid_index)
        .mtu(Mtu::BYTES_1024)
        .access(access);
    let (to_a, to_b) = (a.endpoint(&link)?, b.endpoint(&link)?);
    a.bring_up(&link, &to_b)?;
    b.bring_up(&link, &to_a)
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
    QpCap::new(depth, depth, 1, 1)
}

/// Connects `a` and `b` to each other (loopback on `ctx`'s port 1).
pub fn connect_pair(ctx: &Context, a: &QueuePair, b: &QueuePair) -> uverbs::Result<()> {
    connect_pair_with(ctx, a, b, AccessFlags::LOCAL_WRITE)
}
