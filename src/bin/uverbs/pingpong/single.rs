//! The one-QP pingpong of `rc_pingpong.c`, `uc_pingpong.c` and
//! `ud_pingpong.c`: `main` and `pp_init_ctx` in the same order, the same
//! messages, and the same loop: `-r` receives posted up front and refilled
//! when at most one is left, one signaled SEND in flight (inline when the QP
//! allows `size` bytes inline), the next SEND posted once both the previous
//! send and a receive completed, until `-n` of each; `-e` waits on the
//! completion channel, re-arms and then polls once.

use std::time::Instant;

use uverbs::{
    qp_ex::{Mlx5, ProviderKind, Rc, Rxe},
    AccessFlags, AddressHandle, BringUp, CompletionChannel, CompletionQueue, CqOptions, LinkLayer,
    MemoryRegion, ProtectionDomain, QpCap, QpInitAttr, QpType, QueuePair, RecvWr, SendFlags,
    SendWr, Sge, UdDest, WcStatus, WorkCompletion,
};

use super::{
    ack_all_events,
    args::{Options, Transport},
    fail, ib_port, link, local_gid, next_completions, open_device, refuse_unsupported, summary,
    validation_offsets,
    wire::{self, address_line, Dest},
    RECV_WRID, SEND_WRID,
};

/// What the loop needs (`struct pingpong_context`).
/// UD: room for the 40-byte Global Routing Header the device puts in
/// front of each received message; sends carry the payload from this
/// offset of the buffer.
const GRH_LEN: u32 = 40;

struct Pp {
    t: Transport,
    mr: MemoryRegion,
    qp: QueuePair,
    ah: Option<AddressHandle>,
    remote_qpn: u32,
    size: u32,
    rx_depth: u32,
    inline: bool,
    pending: u64,
    /// `-N` (RC): sends through a typed session (`start_wr`, the
    /// `ibv_wr_*` API `use_new_send` selects), of the context's provider.
    new_send: Option<&'static str>,
}

impl Pp {
    /// Where sends read and receives write (UD: receives start 40 bytes
    /// earlier, for the GRH).
    fn send_offset(&self) -> usize {
        if self.t == Transport::Ud {
            GRH_LEN as usize
        } else {
            0
        }
    }

    /// `pp_post_recv`: posts up to `n` receives one by one; returns how
    /// many were posted.
    fn post_recv(&mut self, n: i64) -> i64 {
        let len = self.size + self.send_offset() as u32;
        let Ok(sge) = self.mr.sge(0, len) else {
            return 0;
        };
        let mut i = 0;
        while i < n {
            if self
                .qp
                .post_recv(&[RecvWr::new(RECV_WRID, &[sge])])
                .is_err()
            {
                break;
            }
            i += 1;
        }
        i
    }

    /// `pp_post_send`.
    #[inline(always)]
    fn post_send(&mut self) -> bool {
        let off = self.send_offset();
        let Ok(sge) = self.mr.sge(off, self.size) else {
            return false;
        };
        let sges = [sge];
        let mut data = Vec::new();
        let mut wr = SendWr::send(SEND_WRID, &sges).flags(SendFlags::SIGNALED);
        if self.inline {
            // IBV_SEND_INLINE with an SGE: the provider copies the bytes
            // into the WQE; the library takes them directly.
            data.resize(self.size as usize, 0);
            if self.mr.read(off, &mut data).is_err() {
                return false;
            }
            wr = wr.inline(&data);
        }
        if let Some(ah) = &self.ah {
            wr = wr.to(UdDest::new(ah, self.remote_qpn, link::QKEY));
        }
        let inline = self.inline.then_some(&data[..]);
        match self.new_send {
            Some("mlx5") => new_send::<Mlx5>(&mut self.qp, sge, inline),
            Some(_) => new_send::<Rxe>(&mut self.qp, sge, inline),
            None => self.qp.post_send(&[wr]).is_ok(),
        }
    }
}

/// `pp_post_send` with `use_new_send`: `ibv_wr_start`, `ibv_wr_send` with
/// the signaled flag, the SGE (or the inline bytes), `ibv_wr_complete`.
fn new_send<P: ProviderKind>(qp: &mut QueuePair, sge: Sge, inline: Option<&[u8]>) -> bool {
    let Ok(mut s) = qp.start_wr::<Rc, P>() else {
        return false;
    };
    let send = s.send().wr_id(SEND_WRID);
    let written = match inline {
        Some(data) => send.inline(data),
        None => send.sge(sge),
    };
    written.is_ok() && s.complete().is_ok()
}

/// Runs the RC, UC or UD tool; returns the exit status.
pub fn run(t: Transport, o: &Options) -> u8 {
    match run_inner(t, o) {
        Ok(()) => 0,
        Err(()) => 1,
    }
}

fn run_inner(t: Transport, o: &Options) -> Result<(), ()> {
    let is_ud = t == Transport::Ud;
    let extra = if is_ud { GRH_LEN } else { 0 };
    let ctx = open_device(o).ok_or(())?;
    let port = ib_port(o).ok_or(())?;
    if is_ud {
        let pa = ctx.query_port(port).map_err(|e| {
            fail(&format!("Unable to query port info for port {port}"), e);
        })?;
        let mtu = pa.active_mtu.bytes().unwrap_or(0);
        if o.size > mtu {
            eprintln!("Requested size larger than port MTU ({mtu})");
            return Err(());
        }
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
    if t == Transport::Rc && refuse_unsupported(t, &ctx, o) {
        return Err(());
    }
    let buf_len = o.size as usize + extra as usize;
    let mr = pd
        .alloc_mr(buf_len.max(1), AccessFlags::LOCAL_WRITE)
        .map_err(|e| fail("Couldn't register MR", e))?;
    // "FIXME memset(ctx->buf, 0, size);" in the C tools.
    let _ = mr.fill(0, buf_len, 0x7b);
    let mut cq = ctx
        .create_cq(
            o.rx_depth.wrapping_add(1),
            CqOptions::new().channel(channel.as_ref()),
        )
        .map_err(|e| fail("Couldn't create CQ", e))?;
    let qp_type = match t {
        Transport::Rc => QpType::Rc,
        Transport::Uc => QpType::Uc,
        _ => QpType::Ud,
    };
    let qp = pd
        .create_qp(&QpInitAttr::new(qp_type, &cq, &cq).cap(QpCap::new(1, o.rx_depth, 1, 1)))
        .map_err(|e| fail("Couldn't create QP", e))?;
    let inline = qp.cap().max_inline_data >= o.size && !o.dm;
    let settings = link::settings(t, o, port);
    link::init(&qp, &settings).map_err(|e| fail("Failed to modify QP to INIT", e))?;

    let mut pp = Pp {
        t,
        mr,
        qp,
        ah: None,
        remote_qpn: 0,
        size: o.size,
        rx_depth: o.rx_depth,
        inline,
        pending: 0,
        new_send: (o.new_send && t == Transport::Rc).then(|| ctx.provider_name()),
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
    let mut my = Dest {
        lid: u32::from(portinfo.lid),
        qpn: pp.qp.qp_num(),
        psn: settings.psn,
        gid: Default::default(),
    };
    if !is_ud && portinfo.link_layer != LinkLayer::Ethernet && my.lid == 0 {
        eprintln!("Couldn't get local LID");
        return Err(());
    }
    let gid_err = if is_ud {
        "Could not get local gid for gid index"
    } else {
        "can't read sgid of index"
    };
    my.gid = local_gid(&ctx, port, o.gidx, gid_err).ok_or(())?;
    out!("{}", address_line(false, &my, is_ud));

    let rem = match &o.servername {
        Some(host) => wire::client_exchange(host, o.port, &[my]),
        None => wire::server_exchange(o.port, &[my], |rem| {
            connect(&pp.qp, &pd, &settings, &rem[0], &mut pp.ah)
        }),
    }
    .ok_or(())?;
    let rem = rem[0];
    out!("{}", address_line(true, &rem, false));
    if o.servername.is_some() && !connect(&pp.qp, &pd, &settings, &rem, &mut pp.ah) {
        return Err(());
    }
    pp.remote_qpn = rem.qpn;

    pp.pending = RECV_WRID;
    if o.servername.is_some() {
        if o.validate {
            for i in validation_offsets(o.size) {
                let _ = pp.mr.write(pp.send_offset() + i, &[0]);
            }
        }
        if !pp.post_send() {
            eprintln!("Couldn't post send");
            return Err(());
        }
        pp.pending |= SEND_WRID;
    }

    let start = Instant::now();
    let iters = i64::from(o.iters as i32);
    let (mut rcnt, mut scnt) = (0i64, 0i64);
    let mut num_cq_events = 0u32;
    let mut wc = [WorkCompletion::default(); 2];
    while rcnt < iters || scnt < iters {
        let ne = next_completions(channel.as_ref(), &mut cq, &mut wc, &mut num_cq_events)?;
        for c in &wc[..ne] {
            if parse_wc(&mut pp, c, &mut scnt, &mut rcnt, &mut routs, iters).is_err() {
                if t == Transport::Rc {
                    eprintln!("parse WC failed {ne}");
                }
                return Err(());
            }
        }
    }
    let end = Instant::now();
    ack_all_events(&cq, num_cq_events)?;
    for line in summary(o.size, o.iters, start, end) {
        out!("{line}");
    }
    if o.servername.is_none() && o.validate {
        let off = pp.send_offset();
        for i in validation_offsets(o.size) {
            let mut b = [0u8];
            if pp.mr.read(off + i, &mut b).is_err() || b[0] != 0 {
                out!("invalid data in page {}", i / super::PAGE_SIZE);
            }
        }
    }
    close(pp, cq, pd, channel)
}

/// `pp_connect_ctx` with its messages; keeps UD's address handle.
fn connect(
    qp: &QueuePair,
    pd: &ProtectionDomain,
    settings: &BringUp,
    rem: &Dest,
    ah: &mut Option<AddressHandle>,
) -> bool {
    match link::connect(qp, pd, settings, rem) {
        Ok(h) => {
            *ah = h;
            true
        }
        Err(("AH", e)) => {
            fail("Failed to create AH", e);
            false
        }
        Err((step, e)) => {
            fail(&format!("Failed to modify QP to {step}"), e);
            false
        }
    }
}

/// `parse_single_wc` (the loop body of the UC and UD tools).
#[inline(always)]
fn parse_wc(
    pp: &mut Pp,
    wc: &WorkCompletion,
    scnt: &mut i64,
    rcnt: &mut i64,
    routs: &mut i64,
    iters: i64,
) -> Result<(), ()> {
    if wc.status != WcStatus::SUCCESS {
        eprintln!(
            "Failed status {} ({}) for wr_id {}",
            wc.status.as_str(),
            wc.status.0,
            wc.wr_id as i32
        );
        return Err(());
    }
    match wc.wr_id {
        SEND_WRID => *scnt += 1,
        RECV_WRID => {
            *routs -= 1;
            if *routs <= 1 {
                let rx = i64::from(pp.rx_depth as i32);
                *routs += pp.post_recv(rx - *routs);
                if *routs < rx {
                    eprintln!("Couldn't post receive ({routs})");
                    return Err(());
                }
            }
            *rcnt += 1;
        }
        other => {
            eprintln!("Completion for unknown wr_id {}", other as i32);
            return Err(());
        }
    }
    pp.pending &= !wc.wr_id;
    if *scnt < iters && pp.pending == 0 {
        if !pp.post_send() {
            eprintln!("Couldn't post send");
            return Err(());
        }
        pp.pending = RECV_WRID | SEND_WRID;
    }
    Ok(())
}

/// `pp_close_ctx`: destroys in the C tool's order, with its messages.
fn close(
    pp: Pp,
    cq: CompletionQueue,
    pd: ProtectionDomain,
    channel: Option<CompletionChannel>,
) -> Result<(), ()> {
    let Pp { qp, mr, ah, .. } = pp;
    qp.destroy().map_err(|e| fail("Couldn't destroy QP", e))?;
    cq.destroy().map_err(|e| fail("Couldn't destroy CQ", e))?;
    mr.destroy()
        .map_err(|e| fail("Couldn't deregister MR", e))?;
    if let Some(ah) = ah {
        ah.destroy().map_err(|e| fail("Couldn't destroy AH", e))?;
    }
    pd.destroy()
        .map_err(|e| fail("Couldn't deallocate PD", e))?;
    drop(channel);
    Ok(())
}
