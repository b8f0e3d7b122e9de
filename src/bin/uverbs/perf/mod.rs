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

mod bw;
mod clock;
mod fake;
mod lat;
mod micro;
mod process;
mod report;

use std::io::{self, Write};

use uverbs::{
    AccessFlags, AhAttr, CompletionQueue, Context, CqOptions, Gid, GlobalRoute, MemoryRegion, Mtu,
    ProtectionDomain, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, QueuePair,
};

use clock::ClockKind;

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
}

impl Test {
    fn name(self) -> &'static str {
        match self {
            Test::WriteLat => "RDMA_Write Latency Test",
            Test::SendLat => "Send Latency Test",
            Test::WriteBw => "RDMA_Write BW Test",
            Test::Micro => "userspace data-path calls",
        }
    }
    fn is_bw(self) -> bool {
        self == Test::WriteBw
    }
}

/// The command line, with perftest's defaults applied.
#[derive(Debug, Clone)]
pub struct Opts {
    pub test: Test,
    pub device: Option<String>,
    pub port: u8,
    pub gid_index: u8,
    pub size: usize,
    pub iters: usize,
    /// `-I N`: request `max_inline_data` N and send messages of at most
    /// min(N, what the QP got) bytes inline. `None` (the default): request
    /// perftest's nominal size and inline everything up to what the QP
    /// got, as a user of this stack would.
    pub inline: Option<u32>,
    pub tx_depth: usize,
    pub rx_depth: usize,
    pub cq_mod: usize,
    /// Work requests per `post_send` call (one doorbell each).
    pub post_list: usize,
    pub mtu: Option<Mtu>,
    pub pin: bool,
    pub clock: ClockKind,
    /// Also print side B's latency (perftest's server prints its own).
    pub both: bool,
    /// Latency tests: both sides as threads of this process instead of side
    /// B in a forked process.
    pub threads: bool,
    /// With `threads`: one context (device fd) and PD per side, as
    /// perftest's two processes have; by default the threads share one.
    pub two_contexts: bool,
    /// `micro` only: a fake kernel on the host instead of a device (hidden;
    /// for counting instructions with callgrind, see benches/callgrind.sh).
    pub fake: bool,
}

fn usage(out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Usage: {PROG} write-lat|send-lat|write-bw|micro [options]\n\
         \n\
         perftest's ib_write_lat / ib_send_lat / ib_write_bw: two QPs on one device,\n\
         connected through its loopback; for latency, side B runs in a forked\n\
         process, as perftest's server does.\n\
         \n\
         Options (defaults as perftest 4.5):\n\
         \x20 -d, --ib-dev=DEV        device (default: the first one)\n\
         \x20 -i, --ib-port=PORT      port (default 1)\n\
         \x20 -x, --gid-index=N       source GID index (default 0)\n\
         \x20 -s, --size=BYTES        message size (default 2 for lat, 65536 for bw)\n\
         \x20 -n, --iters=N           iterations (default 1000 for lat, 5000 for bw)\n\
         \x20 -I, --inline=N          inline messages of up to N bytes (default: 220 for\n\
         \x20                         write-lat, 236 for send-lat, 0 for write-bw;\n\
         \x20                         perftest on rxe uses 0: pass -I 0 to match it)\n\
         \x20 -t, --tx-depth=N        send window (default 128 for bw, 1 for lat)\n\
         \x20 -r, --rx-depth=N        receives posted ahead (send-lat; default 512)\n\
         \x20 -Q, --cq-mod=N          completion every N sends (bw; default 100, or 1\n\
         \x20                         above 8192 bytes)\n\
         \x20 -l, --post-list=N       requests per post_send call (bw; default 1)\n\
         \x20 -m, --mtu=BYTES         path MTU (default: the port's active MTU)\n\
         \x20     --pin               pin the two sides to CPUs 0 and 1 (perftest does not)\n\
         \x20     --no-pin            do not pin (the default)\n\
         \x20     --clock=tsc|monotonic  timestamp source (default tsc, like perftest)\n\
         \x20 -B, --both              also print side B's latency figures\n\
         \x20     --threads           latency: both sides as threads of this process\n\
         \x20                         (every system call then pays for the shared\n\
         \x20                         descriptor table)\n\
         \x20     --two-contexts      with --threads: one device context and PD per side\n\
         \x20                         instead of one shared\n\
         \x20 -h, --help              this help"
    )
}

/// Parses `args` (after the subcommand's name).
pub fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut it = args.iter();
    let test = match it.next().map(String::as_str) {
        Some("write-lat") => Test::WriteLat,
        Some("send-lat") => Test::SendLat,
        Some("write-bw") => Test::WriteBw,
        Some("micro") => Test::Micro,
        Some("-h" | "--help") => return Ok(None),
        Some(other) => return Err(format!("unknown benchmark '{other}'")),
        None => return Err("which benchmark: write-lat, send-lat or write-bw?".into()),
    };
    let mut o = Opts {
        test,
        device: None,
        port: 1,
        gid_index: 0,
        size: if test.is_bw() { 65536 } else { 2 },
        iters: if test.is_bw() { 5000 } else { 1000 },
        inline: None,
        tx_depth: if test.is_bw() { 128 } else { 1 },
        rx_depth: 512,
        cq_mod: 100,
        post_list: 1,
        mtu: None,
        pin: false,
        clock: ClockKind::Tsc,
        both: false,
        threads: false,
        two_contexts: false,
        fake: false,
    };
    let mut cq_mod_set = false;
    let args: Vec<&String> = it.collect();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let (key, inline_val) = match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v.to_string())),
            _ => (a, None),
        };
        let mut value = || -> Result<String, String> {
            if let Some(v) = inline_val.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i)
                .map(|s| s.to_string())
                .ok_or_else(|| format!("{key} needs a value"))
        };
        fn num<T: std::str::FromStr>(key: &str, v: String) -> Result<T, String> {
            v.parse().map_err(|_| format!("{key}: bad number '{v}'"))
        }
        match key {
            "-h" | "--help" => return Ok(None),
            "-d" | "--ib-dev" => o.device = Some(value()?),
            "-i" | "--ib-port" => o.port = num(key, value()?)?,
            "-x" | "--gid-index" => o.gid_index = num(key, value()?)?,
            "-s" | "--size" => o.size = num(key, value()?)?,
            "-n" | "--iters" => o.iters = num(key, value()?)?,
            "-I" | "--inline" | "--inline_size" => o.inline = Some(num(key, value()?)?),
            "-t" | "--tx-depth" => o.tx_depth = num(key, value()?)?,
            "-r" | "--rx-depth" => o.rx_depth = num(key, value()?)?,
            "-Q" | "--cq-mod" => {
                o.cq_mod = num(key, value()?)?;
                cq_mod_set = true;
            }
            "-l" | "--post-list" => o.post_list = num(key, value()?)?,
            "-m" | "--mtu" => {
                let b: u32 = num(key, value()?)?;
                o.mtu = Some(Mtu::from_bytes(b).ok_or(format!("bad MTU {b}"))?);
            }
            "--no-pin" => o.pin = false,
            "--pin" => o.pin = true,
            "--clock" => {
                o.clock = match value()?.as_str() {
                    "tsc" => ClockKind::Tsc,
                    "monotonic" => ClockKind::Monotonic,
                    v => return Err(format!("--clock: '{v}' is not tsc or monotonic")),
                }
            }
            "-B" | "--both" => o.both = true,
            "--threads" => o.threads = true,
            "--two-contexts" => o.two_contexts = true,
            "--fake" if o.test == Test::Micro => o.fake = true,
            _ => return Err(format!("unknown option '{a}'")),
        }
        i += 1;
    }
    if o.size == 0 || o.iters < 5 || o.tx_depth == 0 || o.post_list == 0 || o.cq_mod == 0 {
        return Err(
            "size, tx depth, post list and cq mod must be positive, iterations >= 5".into(),
        );
    }
    if o.size > u32::MAX as usize {
        return Err("size must fit in 32 bits".into());
    }
    // perftest's force_dependecies.
    o.tx_depth = o.tx_depth.min(o.iters);
    o.rx_depth = o.rx_depth.min(o.iters);
    if o.rx_depth % 2 == 1 {
        o.rx_depth += 1;
    }
    if o.test.is_bw() {
        if o.post_list > 1 && !cq_mod_set {
            o.cq_mod = o.post_list;
        } else if o.size > 8192 && !cq_mod_set {
            o.cq_mod = 1;
        }
        o.tx_depth = o.tx_depth.max(o.post_list);
    }
    o.cq_mod = o.cq_mod.min(o.tx_depth);
    Ok(Some(o))
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
            eprintln!("{PROG}: {e}");
            let _ = usage(&mut io::stderr());
            return 2;
        }
    };
    match run(&o) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{PROG}: {e}");
            1
        }
    }
}

/// An error message.
pub type Res<T> = Result<T, String>;

pub fn err<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> String {
    move |e| format!("{what}: {e}")
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
    let init = QpInitAttr {
        qp_type: QpType::Rc,
        send_cq: &send_cq,
        recv_cq: &recv_cq,
        srq: None,
        cap: QpCap {
            max_send_wr: o.tx_depth as u32,
            max_recv_wr: match o.test {
                Test::SendLat | Test::Micro => o.rx_depth as u32,
                _ => 1,
            },
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: o.inline.unwrap_or(match o.test {
                Test::WriteLat => DEF_INLINE_WRITE,
                Test::SendLat => DEF_INLINE_SEND,
                // perftest's bandwidth default; bw posts SGEs only.
                Test::WriteBw | Test::Micro => 0,
            }),
        },
        sq_sig_all: false,
    };
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
    let mut attr = QpAttr {
        qp_state: QpState::Init,
        pkey_index: 0,
        port_num: o.port,
        qp_access_flags: AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ,
        ..QpAttr::default()
    };
    qp.modify(
        &attr,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
    .map_err(err("modify QP to INIT"))?;
    attr.qp_state = QpState::Rtr;
    attr.path_mtu = mtu;
    attr.dest_qp_num = remote_qpn;
    attr.rq_psn = 0;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr = AhAttr {
        grh: Some(GlobalRoute {
            dgid,
            sgid_index: o.gid_index,
            hop_limit: 1,
            ..GlobalRoute::default()
        }),
        port_num: o.port,
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
    )
    .map_err(err("modify QP to RTR"))?;
    attr.qp_state = QpState::Rts;
    attr.sq_psn = 0;
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
    .map_err(err("modify QP to RTS"))
}

/// Opens the device; returns it with the path MTU to use and the source GID.
fn open(o: &Opts) -> Res<(Context, Mtu, Gid)> {
    let ctx = Context::open(o.device.as_deref()).map_err(|e| e.to_string())?;
    let port = ctx.query_port(o.port).map_err(|e| e.to_string())?;
    let mtu = o.mtu.unwrap_or(port.active_mtu);
    let gid = ctx
        .query_gid(o.port, u32::from(o.gid_index))
        .map_err(|e| e.to_string())?
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
        let ctx = Context::open(o.device.as_deref()).map_err(|e| e.to_string())?;
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
    println!("{}", report::LINE);
    println!("                    {}", o.test.name());
    println!(
        " Device         : {}\t\tConnection type : RC",
        o.device.as_deref().unwrap_or("(first)")
    );
    println!(" Number of qps   : 1\t\tTX depth        : {}", o.tx_depth);
    if o.test.is_bw() {
        println!(
            " CQ Moderation   : {}\t\tPost List       : {}",
            o.cq_mod, o.post_list
        );
    }
    if o.test == Test::SendLat {
        println!(" RX depth        : {}", o.rx_depth);
    }
    println!(
        " Mtu             : {}[B]\t\tGID index       : {}",
        s.mtu.bytes().unwrap_or(0),
        o.gid_index
    );
    println!(
        " Max inline data : {}[B]\t\tClock           : {:?}{}",
        s.inline,
        o.clock,
        if o.pin && !o.test.is_bw() {
            ", sides pinned to CPUs 0/1"
        } else {
            ""
        }
    );
    println!(
        " local QPN {:#06x}  remote QPN {:#06x}  ({}, loopback)",
        s.local_qpn, s.remote_qpn, s.how
    );
    println!("{}", report::LINE);
}

fn run(o: &Opts) -> Res<()> {
    if o.fake {
        return micro::run_fake(o);
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
        Test::Micro => {
            micro::run(o, s)?;
            println!("{}", report::LINE);
        }
        Test::WriteBw => {
            let r = bw::run(o, s)?;
            println!("{}", report::bw_header());
            println!("{}", report::bw_row(&r));
            println!("{}", report::LINE);
        }
    }
    Ok(())
}

fn print_lat(o: &Opts, a: &report::Lat, b: &report::Lat) {
    println!("{}", report::lat_header());
    println!("{}", report::lat_row(a));
    if o.both {
        println!("{}", report::lat_row(b));
    }
    println!("{}", report::LINE);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Opts {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse(&v).unwrap().unwrap()
    }

    #[test]
    fn perftest_defaults() {
        let o = p("write-lat");
        assert_eq!((o.size, o.iters, o.inline, o.tx_depth), (2, 1000, None, 1));
        let o = p("send-lat -n 100");
        assert_eq!((o.inline, o.rx_depth, o.cq_mod), (None, 100, 1));
        assert_eq!(p("send-lat -I 0").inline, Some(0));
        let o = p("write-bw");
        assert_eq!(
            (o.size, o.iters, o.tx_depth, o.cq_mod, o.inline),
            (65536, 5000, 128, 1, None)
        );
        let o = p("write-bw -s 64");
        assert_eq!(o.cq_mod, 100);
        let o = p("write-bw -s 64 --post-list 16 -d rxe0 -x 1");
        assert_eq!(
            (o.cq_mod, o.device.as_deref(), o.gid_index),
            (16, Some("rxe0"), 1)
        );
        // Latency: side B in a second process unless --threads.
        assert!(!p("write-lat").threads);
        assert!(p("send-lat --threads --two-contexts").threads);
    }
}
