//! `srq_pingpong.c`: `-q` RC QPs (default 16) sharing one SRQ and one CQ,
//! one TCP connection exchanging [`MAX_QP`] addresses each way (zeros past
//! the QPs in use), and a loop where each QP keeps one SEND in flight. As
//! in the C tool, `-n` counts sends and receives over all QPs together, the
//! SRQ is refilled when at most `num_qp` receives are left, and every QP is
//! connected with the first remote address's GID.

use std::time::Instant;

use uverbs::{
    AccessFlags, BringUp, CompletionChannel, CqOptions, LinkLayer, MemoryRegion, ProtectionDomain,
    QpCap, QpInitAttr, QueuePair, RecvWr, SendFlags, SendWr, SharedReceiveQueue, SrqAttr, WcStatus,
    WorkCompletion,
};

use super::{
    ack_all_events,
    args::{Options, Transport, MAX_QP},
    fail, ib_port, link, local_gid, next_completions, open_device, refuse_unsupported, summary,
    validation_offsets,
    wire::{self, address_line, Dest},
    RECV_WRID, SEND_WRID,
};

struct Pp {
    mr: MemoryRegion,
    srq: SharedReceiveQueue,
    qps: Vec<QueuePair>,
    size: u32,
    inline: bool,
    pending: Vec<u64>,
}

impl Pp {
    /// `pp_post_recv` on the SRQ.
    fn post_recv(&mut self, n: i64) -> i64 {
        let Ok(sge) = self.mr.sge(0, self.size) else {
            return 0;
        };
        let mut i = 0;
        while i < n {
            if self
                .srq
                .post_recv(&[RecvWr::new(RECV_WRID, &[sge])])
                .is_err()
            {
                break;
            }
            i += 1;
        }
        i
    }

    /// `pp_post_send` on QP `i`.
    fn post_send(&mut self, i: usize) -> bool {
        let Ok(sge) = self.mr.sge(0, self.size) else {
            return false;
        };
        let sges = [sge];
        let mut data = Vec::new();
        let mut wr = SendWr::send(SEND_WRID, &sges).flags(SendFlags::SIGNALED);
        if self.inline {
            data.resize(self.size as usize, 0);
            if self.mr.read(0, &mut data).is_err() {
                return false;
            }
            wr = wr.inline(&data);
        }
        self.qps[i].post_send(&[wr]).is_ok()
    }

    fn find_qp(&self, qpn: u32) -> Option<usize> {
        self.qps.iter().position(|q| q.qp_num() == qpn)
    }
}

/// `pp_connect_ctx`: every QP to its peer, with `dest[0]`'s GID.
fn connect_all(qps: &[QueuePair], pd: &ProtectionDomain, links: &[BringUp], rem: &[Dest]) -> bool {
    for (i, (qp, settings)) in qps.iter().zip(links).enumerate() {
        let dest = Dest {
            gid: rem[0].gid,
            ..rem[i]
        };
        if let Err((step, e)) = link::connect(qp, pd, settings, &dest) {
            fail(&format!("Failed to modify QP[{i}] to {step}"), e);
            return false;
        }
    }
    true
}

/// Runs the SRQ tool; returns the exit status.
pub fn run(o: &Options) -> u8 {
    match run_inner(o) {
        Ok(()) => 0,
        Err(()) => 1,
    }
}

fn run_inner(o: &Options) -> Result<(), ()> {
    let num_qp = o.num_qp as usize;
    let ctx = open_device(o).ok_or(())?;
    let port = ib_port(o).ok_or(())?;
    if refuse_unsupported(Transport::Srq, &ctx, o) {
        return Err(());
    }
    let channel: Option<CompletionChannel> = if o.use_event {
        Some(
            ctx.create_comp_channel()
                .map_err(|e| fail("Couldn't create completion channel", e))?,
        )
    } else {
        None
    };
    let pd = ctx
        .alloc_pd()
        .map_err(|e| fail("Couldn't allocate PD", e))?;
    // srq_pingpong zeroes its buffer (the others fill it with 0x7b).
    let mr = pd
        .alloc_mr((o.size as usize).max(1), AccessFlags::LOCAL_WRITE)
        .map_err(|e| fail("Couldn't register MR", e))?;
    let mut cq = ctx
        .create_cq(
            o.rx_depth + o.num_qp,
            CqOptions::new().channel(channel.as_ref()),
        )
        .map_err(|e| fail("Couldn't create CQ", e))?;
    let srq = pd
        .create_srq(SrqAttr::new(o.rx_depth, 1))
        .map_err(|e| fail("Couldn't create SRQ", e))?;
    let mut qps = Vec::with_capacity(num_qp);
    let mut inline = false;
    for i in 0..num_qp {
        let qp = pd
            .create_qp(
                &QpInitAttr::rc(&cq, &cq)
                    .srq(&srq)
                    .cap(QpCap::new(1, 0, 1, 0)),
            )
            .map_err(|e| fail(&format!("Couldn't create QP[{i}]"), e))?;
        inline |= qp.cap().max_inline_data >= o.size;
        qps.push(qp);
    }
    let links: Vec<BringUp> = (0..num_qp)
        .map(|_| link::settings(Transport::Rc, o, port))
        .collect();
    for (i, (qp, settings)) in qps.iter().zip(&links).enumerate() {
        link::init(qp, settings)
            .map_err(|e| fail(&format!("Failed to modify QP[{i}] to INIT"), e))?;
    }
    let mut pp = Pp {
        mr,
        srq,
        qps,
        size: o.size,
        inline,
        pending: vec![0; num_qp],
    };
    let rx_depth = i64::from(o.rx_depth as i32);
    let mut routs = pp.post_recv(rx_depth);
    if routs < rx_depth {
        eprintln!("Couldn't post receive ({routs})");
        return Err(());
    }
    if channel.is_some() {
        cq.req_notify(false)
            .map_err(|e| fail("Couldn't request CQ notification", e))?;
    }

    let portinfo = ctx
        .query_port(port)
        .map_err(|e| fail("Couldn't get port info", e))?;
    let mut my = vec![Dest::default(); MAX_QP];
    for (i, d) in my.iter_mut().enumerate().take(num_qp) {
        d.qpn = pp.qps[i].qp_num();
        d.psn = links[i].psn;
        d.lid = u32::from(portinfo.lid);
        if portinfo.link_layer != LinkLayer::Ethernet && d.lid == 0 {
            eprintln!("Couldn't get local LID");
            return Err(());
        }
        d.gid = local_gid(&ctx, port, o.gidx, "Could not get local gid for gid index").ok_or(())?;
        out!("{}", address_line(false, d, false));
    }

    let rem = match &o.servername {
        Some(host) => wire::client_exchange(host, o.port, &my),
        None => wire::server_exchange(o.port, &my, |rem| connect_all(&pp.qps, &pd, &links, rem)),
    }
    .ok_or(())?;
    for d in &rem[..num_qp] {
        out!("{}", address_line(true, d, false));
    }
    if o.servername.is_some() && !connect_all(&pp.qps, &pd, &links, &rem) {
        return Err(());
    }

    if o.servername.is_some() {
        if o.validate {
            for i in validation_offsets(o.size) {
                let _ = pp.mr.write(i, &[0]);
            }
        }
        for i in 0..num_qp {
            if !pp.post_send(i) {
                eprintln!("Couldn't post send");
                return Err(());
            }
            pp.pending[i] = SEND_WRID | RECV_WRID;
        }
    } else {
        pp.pending.fill(RECV_WRID);
    }

    let start = Instant::now();
    let iters = i64::from(o.iters as i32);
    let num_qp_i = num_qp as i64;
    let (mut rcnt, mut scnt) = (0i64, 0i64);
    let mut num_cq_events = 0u32;
    let mut wc = vec![WorkCompletion::default(); num_qp + o.rx_depth as usize];
    while rcnt < iters || scnt < iters {
        let ne = next_completions(channel.as_ref(), &mut cq, &mut wc, &mut num_cq_events)?;
        for c in &wc[..ne] {
            if c.status != WcStatus::SUCCESS {
                eprintln!(
                    "Failed status {} ({}) for wr_id {}",
                    c.status.as_str(),
                    c.status.0,
                    c.wr_id as i32
                );
                return Err(());
            }
            let Some(qi) = pp.find_qp(c.qp_num) else {
                eprintln!("Couldn't find QPN {:06x}", c.qp_num);
                return Err(());
            };
            match c.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    routs -= 1;
                    if routs <= num_qp_i {
                        routs += pp.post_recv(rx_depth - routs);
                        if routs < rx_depth {
                            eprintln!("Couldn't post receive ({routs})");
                            return Err(());
                        }
                    }
                    rcnt += 1;
                }
                other => {
                    eprintln!("Completion for unknown wr_id {}", other as i32);
                    return Err(());
                }
            }
            pp.pending[qi] &= !c.wr_id;
            if scnt < iters && pp.pending[qi] == 0 {
                if !pp.post_send(qi) {
                    eprintln!("Couldn't post send");
                    return Err(());
                }
                pp.pending[qi] = RECV_WRID | SEND_WRID;
            }
        }
    }
    let end = Instant::now();
    ack_all_events(&cq, num_cq_events)?;
    for line in summary(o.size, o.iters, start, end) {
        out!("{line}");
    }
    if o.servername.is_none() && o.validate {
        for i in validation_offsets(o.size) {
            let mut b = [0u8];
            if pp.mr.read(i, &mut b).is_err() || b[0] != 0 {
                out!("invalid data in page {}", i / super::PAGE_SIZE);
            }
        }
    }

    // pp_close_ctx.
    let Pp { mr, srq, qps, .. } = pp;
    for (i, qp) in qps.into_iter().enumerate() {
        qp.destroy()
            .map_err(|e| fail(&format!("Couldn't destroy QP[{i}]"), e))?;
    }
    srq.destroy().map_err(|e| fail("Couldn't destroy SRQ", e))?;
    cq.destroy().map_err(|e| fail("Couldn't destroy CQ", e))?;
    mr.destroy()
        .map_err(|e| fail("Couldn't deregister MR", e))?;
    pd.destroy()
        .map_err(|e| fail("Couldn't deallocate PD", e))?;
    drop(channel);
    Ok(())
}
