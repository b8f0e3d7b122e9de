//! `uverbs perf write-lat|send-lat|write-bw`: perftest's `ib_write_lat`,
//! `ib_send_lat` and `ib_write_bw` on uverbs, measured the way perftest 4.5
//! measures them (`src/perftest_resources.c`: `run_iter_lat_write`,
//! `run_iter_lat_send`, `run_iter_bw`) and reported in its units and table
//! shape (`report.rs`).
//!
//! perftest runs a server and a client process connected over TCP; here both
//! sides are QPs on the same device (rxe loopback, or a device's own
//! loopback), started by one command. For latency, side B runs in a forked
//! process with its own context, as perftest's server does (`--threads`: a
//! thread of this process instead); neither side is pinned, like perftest
//! (`--pin` pins them to CPUs 0 and 1). The reported figures are the
//! client's (side A), as perftest's client prints them. For bandwidth side B
//! is passive (the responder is in the kernel), so it stays in this process.
//!
//! `uverbs perf destroy-storm` (no perftest counterpart, `storm.rs`):
//! completion-event latency on one QP while another thread of the same
//! context creates and destroys CQs, QPs or SRQs.

mod args;
mod bw;
mod clock;
mod lat;
mod micro;
#[cfg(feature = "test-utils")]
mod micro_fake;
#[cfg(feature = "test-utils")]
mod micro_mlx5;
#[cfg(feature = "test-utils")]
mod micro_shared;
mod process;
mod report;
mod storm;

use std::io;

use uverbs::{
    AccessFlags, AhAttr, CompletionQueue, Context, CqOptions, Gid, GlobalRoute, MemoryRegion, Mtu,
    ProtectionDomain, QpAttr, QpCap, QpInitAttr, QpState, QueuePair,
};

pub use args::{parse, usage, Opts};

const PROG: &str = "uverbs perf";
/// perftest's nominal inline sizes (`DEF_INLINE_WRITE`, `DEF_INLINE_SEND_RC_UC`):
/// what the QP asks for by default.
const DEF_INLINE_WRITE: u32 = 220;
const DEF_INLINE_SEND: u32 = 236;

/// Which benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    WriteLat,
    SendLat,
    WriteBw,
    /// Costs of the userspace-only calls (no perftest counterpart).
    Micro,
    /// Completion events during a storm of destroys (no perftest counterpart).
    DestroyStorm,
}

impl Test {
    fn name(self) -> &'static str {
        match self {
            Test::WriteLat => "RDMA_Write Latency Test",
            Test::SendLat => "Send Latency Test",
            Test::WriteBw => "RDMA_Write BW Test",
            Test::Micro => "userspace data-path calls",
            Test::DestroyStorm => "completion events during a storm of destroys",
        }
    }
    fn is_bw(self) -> bool {
        self == Test::WriteBw
    }
}

/// Entry point: the process exit status.
pub fn main(args: &[String]) -> u8 {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            let _ = usage(&mut io::stdout());
            return 0;
        }
        Err(e) => {
            eprintln!("{PROG}: {e:#}");
            let _ = usage(&mut io::stderr());
            return 2;
        }
    };
    match run(&o) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{PROG}: {e:#}");
            1
        }
    }
}

/// An error message.
pub type Res<T> = Result<T, String>;

pub fn err<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> String {
    move |e| format!("{what}: {e:#}")
}

/// One side: a QP, its CQs and its buffer. The buffer has two halves of
/// `half` bytes: [0, half) is what this side sends from, [half, 2*half)
/// is where the peer writes or sends to.
pub struct Side {
    pub qp: QueuePair,
    pub send_cq: CompletionQueue,
    pub recv_cq: CompletionQueue,
    pub mr: MemoryRegion,
    pub half: usize,
}

/// Both sides, connected.
pub struct Setup {
    pub _ctx: Vec<Context>,
    pub _pd: Vec<ProtectionDomain>,
    pub a: Side,
    pub b: Side,
    pub mtu: Mtu,
    pub inline: u32,
}

fn side(ctx: &Context, pd: &ProtectionDomain, o: &Opts) -> Res<Side> {
    let send_cq = ctx
        .create_cq(o.tx_depth as u32 + 1, CqOptions::default())
        .map_err(err("create send CQ"))?;
    let recv_cq = ctx
        .create_cq(o.rx_depth as u32 + 1, CqOptions::default())
        .map_err(err("create receive CQ"))?;
    let init = QpInitAttr::rc(&send_cq, &recv_cq).cap(
        QpCap::new(
            o.tx_depth as u32,
            match o.test {
                Test::SendLat | Test::Micro => o.rx_depth as u32,
                _ => 1,
            },
            1,
            1,
        )
        .max_inline_data(o.inline.unwrap_or(match o.test {
            Test::WriteLat => DEF_INLINE_WRITE,
            Test::SendLat => DEF_INLINE_SEND,
            // perftest's bandwidth default; bw posts SGEs only.
            Test::WriteBw | Test::Micro | Test::DestroyStorm => 0,
        })),
    );
    let qp = pd.create_qp(&init).map_err(err("create QP"))?;
    // perftest: BUFF_SIZE(size, cycle_buffer) = max(size, page size).
    let half = o.size.max(4096).next_multiple_of(4096);
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let mr = pd
        .alloc_mr(2 * half, access)
        .map_err(err("register memory"))?;
    Ok(Side {
        qp,
        send_cq,
        recv_cq,
        mr,
        half,
    })
}

/// INIT, RTR, RTS towards the peer, with perftest's attributes
/// (`ctx_modify_qp_to_init/rtr/rts`).
fn connect(qp: &QueuePair, remote_qpn: u32, o: &Opts, mtu: Mtu, dgid: uverbs::Gid) -> Res<()> {
    let mut attr = QpAttr::new()
        .qp_state(QpState::Init)
        .port_num(o.port)
        .qp_access_flags(
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
        );
    // Each step sends exactly the attributes the kernel requires for RC,
    // which are the ones perftest sets.
    qp.modify_to(&attr).map_err(err("modify QP to INIT"))?;
    attr.qp_state = QpState::Rtr;
    attr.path_mtu = mtu;
    attr.dest_qp_num = remote_qpn;
    attr.rq_psn = 0;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr = AhAttr::new(o.port).grh(GlobalRoute::new(dgid, o.gid_index).hop_limit(1));
    qp.modify_to(&attr).map_err(err("modify QP to RTR"))?;
    attr.qp_state = QpState::Rts;
    attr.sq_psn = 0;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = 1;
    qp.modify_to(&attr).map_err(err("modify QP to RTS"))
}

/// Opens the device; returns it with the path MTU to use and the source GID.
fn open(o: &Opts) -> Res<(Context, Mtu, Gid)> {
    let ctx = Context::open_with(crate::transport::kernel(), o.device.as_deref())
        .map_err(|e| format!("{e:#}"))?;
    let port = ctx.query_port(o.port).map_err(|e| format!("{e:#}"))?;
    let mtu = o.mtu.unwrap_or(port.active_mtu);
    let gid = ctx
        .query_gid(o.port, u32::from(o.gid_index))
        .map_err(|e| format!("{e:#}"))?
        .ok_or_else(|| format!("GID index {} is empty on port {}", o.gid_index, o.port))?
        .gid;
    Ok((ctx, mtu, gid))
}

/// The inline size messages use: what the QP got (rxe grants at least what
/// was asked, rounded up to its slot), capped by an explicit -I.
fn inline_of(o: &Opts, qp: &QueuePair) -> u32 {
    let got = qp.cap().max_inline_data;
    o.inline.map_or(got, |n| n.min(got))
}

/// One side with a context and PD of its own (a latency side in its own
/// process).
pub struct Local {
    pub side: Side,
    pub mtu: Mtu,
    pub gid: Gid,
    pub inline: u32,
    _pd: ProtectionDomain,
    _ctx: Context,
}

fn local(o: &Opts) -> Res<Local> {
    let (ctx, mtu, gid) = open(o)?;
    let pd = ctx.alloc_pd().map_err(err("allocate PD"))?;
    let side = side(&ctx, &pd, o)?;
    let inline = inline_of(o, &side.qp);
    Ok(Local {
        side,
        mtu,
        gid,
        inline,
        _pd: pd,
        _ctx: ctx,
    })
}

fn setup(o: &Opts) -> Res<Setup> {
    let (ctx, mtu, gid) = open(o)?;
    let pd = ctx.alloc_pd().map_err(err("allocate PD"))?;
    let a = side(&ctx, &pd, o)?;
    let mut ctxs = vec![ctx];
    let mut pds = vec![pd];
    if o.two_contexts {
        let ctx = Context::open_with(crate::transport::kernel(), o.device.as_deref())
            .map_err(|e| format!("{e:#}"))?;
        let pd = ctx.alloc_pd().map_err(err("allocate PD"))?;
        ctxs.push(ctx);
        pds.push(pd);
    }
    let b = side(ctxs.last().unwrap(), pds.last().unwrap(), o)?;
    connect(&a.qp, b.qp.qp_num(), o, mtu, gid)?;
    connect(&b.qp, a.qp.qp_num(), o, mtu, gid)?;
    let inline = inline_of(o, &a.qp);
    Ok(Setup {
        _ctx: ctxs,
        _pd: pds,
        a,
        b,
        mtu,
        inline,
    })
}

/// What the report header shows of a connection.
pub struct Header {
    pub mtu: Mtu,
    pub inline: u32,
    pub local_qpn: u32,
    pub remote_qpn: u32,
    /// Where side B runs.
    pub how: &'static str,
}

impl Setup {
    fn header(&self, how: &'static str) -> Header {
        Header {
            mtu: self.mtu,
            inline: self.inline,
            local_qpn: self.a.qp.qp_num(),
            remote_qpn: self.b.qp.qp_num(),
            how,
        }
    }
}

fn print_header(o: &Opts, s: &Header) {
    out!("{}", report::LINE);
    out!("                    {}", o.test.name());
    out!(
        " Device         : {}\t\tConnection type : RC",
        o.device.as_deref().unwrap_or("(first)")
    );
    out!(" Number of qps   : 1\t\tTX depth        : {}", o.tx_depth);
    if o.test.is_bw() {
        out!(
            " CQ Moderation   : {}\t\tPost List       : {}",
            o.cq_mod,
            o.post_list
        );
    }
    if o.test == Test::SendLat {
        out!(" RX depth        : {}", o.rx_depth);
    }
    out!(
        " Mtu             : {}[B]\t\tGID index       : {}",
        s.mtu.bytes().unwrap_or(0),
        o.gid_index
    );
    out!(
        " Max inline data : {}[B]\t\tClock           : {:?}{}",
        s.inline,
        o.clock,
        if o.pin && !o.test.is_bw() {
            ", sides pinned to CPUs 0/1"
        } else {
            ""
        }
    );
    out!(
        " local QPN {:#06x}  remote QPN {:#06x}  ({}, loopback)",
        s.local_qpn,
        s.remote_qpn,
        s.how
    );
    out!("{}", report::LINE);
}

fn run(o: &Opts) -> Res<()> {
    if o.mlx5_model {
        #[cfg(feature = "test-utils")]
        return micro_mlx5::run(o);
        #[cfg(not(feature = "test-utils"))]
        return Err(
            "--mlx5-model needs the device model: build uverbs with `--features test-utils`".into(),
        );
    }
    if o.fake {
        #[cfg(feature = "test-utils")]
        return micro_fake::run(o);
        #[cfg(not(feature = "test-utils"))]
        return Err(
            "--fake needs the fake kernel: build uverbs with `--features test-utils`".into(),
        );
    }
    if o.test == Test::DestroyStorm {
        return storm::run(o);
    }
    let lat = matches!(o.test, Test::WriteLat | Test::SendLat);
    if lat && !o.threads {
        let (a, b) = lat::run_processes(o, |h| print_header(o, h))?;
        print_lat(o, &a, &b);
        return Ok(());
    }
    let s = setup(o)?;
    let how = if lat {
        "side B a thread of this process"
    } else {
        "same process"
    };
    print_header(o, &s.header(how));
    match o.test {
        Test::WriteLat | Test::SendLat => {
            let (a, b) = lat::run(o, s)?;
            print_lat(o, &a, &b);
        }
        Test::DestroyStorm => unreachable!("run by storm::run"),
        Test::Micro => {
            micro::run(o, s)?;
            out!("{}", report::LINE);
        }
        Test::WriteBw => {
            let r = bw::run(o, s)?;
            out!("{}", report::bw_header());
            out!("{}", report::bw_row(&r));
            out!("{}", report::LINE);
        }
    }
    Ok(())
}

fn print_lat(o: &Opts, a: &report::Lat, b: &report::Lat) {
    out!("{}", report::lat_header());
    out!("{}", report::lat_row(a));
    if o.both {
        out!("{}", report::lat_row(b));
    }
    out!("{}", report::LINE);
}
