//! `uverbs rping -s|-c [-vVdqP] [-S size] [-C count] [-a addr] [-I addr] [-p port]`:
//! rdma-core v44's `rping` (`librdmacm/examples/rping.c`), wire-compatible
//! with it in both roles.
//!
//! The protocol, per ping: the client fills its start buffer with
//! `rdma-ping-N: ` and a rotating alphabet and SENDs a `struct
//! rping_rdma_info {__be64 buf; __be32 rkey; __be32 size}` naming it; the
//! server RDMA READs it and SENDs a go-ahead; the client SENDs the info of
//! its (empty) RDMA buffer; the server RDMA WRITEs the data back and SENDs
//! a go-ahead; the client (with -V) compares. After `-C count` pings the
//! client disconnects and the server sees DISCONNECTED.
//!
//! Unlike the C tool this runs in one thread: it polls the CQ and the CM
//! channel in turn instead of blocking in a CQ thread and a CM thread.

use std::{
    io::Write,
    net::{SocketAddr, ToSocketAddrs},
    thread,
    time::Duration,
};

use uverbs::{
    cm::{CmEvent, CmEventKind, CmId, ConnParam, EventChannel, PortSpace},
    AccessFlags, CompletionQueue, CqOptions, MemoryRegion, ProtectionDomain, QpCap, QpInitAttr,
    QueuePair, RecvWr, SendFlags, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion,
};

mod wire;

use wire::{ping_data, RdmaInfo, INFO_LEN};

const RPING_BUFSIZE: usize = 64 * 1024;
const RPING_SQ_DEPTH: u32 = 16;
/// `sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT)`.
const RPING_MIN_BUFSIZE: usize = 11 + 15;

#[derive(Debug, Clone)]
struct Opts {
    server: bool,
    addr: Option<SocketAddr>,
    source: Option<SocketAddr>,
    port: u16,
    count: u32,
    size: usize,
    verbose: bool,
    validate: bool,
    debug: bool,
    persistent: bool,
}

fn usage() {
    out!("rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]");
    out!("rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]");
    out!("\t-c\t\tclient side");
    out!("\t-I\t\tSource address to bind to for client.");
    out!("\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0");
    out!("\t-v\t\tdisplay ping data to stdout");
    out!("\t-V\t\tvalidate ping data");
    out!("\t-d\t\tdebug printfs");
    out!("\t-S size \tping data size");
    out!("\t-C count\tping count times");
    out!("\t-a addr\t\taddress");
    out!("\t-p port\t\tport");
    out!("\t-P\t\tpersistent server mode allowing multiple connections");
    out!("\t-q\t\tuse self-created, self-modified QP");
}

fn get_addr(s: &str) -> Option<SocketAddr> {
    let parsed = (s, 0u16).to_socket_addrs().ok()?.next();
    if parsed.is_none() {
        out!("getaddrinfo failed - invalid hostname or IP address");
    }
    parsed
}

/// getopt("a:I:Pp:C:S:t:scvVdq") over `args`.
fn parse(args: &[String]) -> Result<Opts, u8> {
    let mut o = Opts {
        server: false,
        addr: None,
        source: None,
        port: 7174,
        count: 0,
        size: 64,
        verbose: false,
        validate: false,
        debug: false,
        persistent: false,
    };
    let mut role: Option<bool> = None;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let Some(flags) = arg.strip_prefix('-').filter(|f| !f.is_empty()) else {
            usage();
            return Err(22);
        };
        let chars: Vec<char> = flags.chars().collect();
        let mut j = 0;
        while j < chars.len() {
            let c = chars[j];
            j += 1;
            if "aIpCSt".contains(c) {
                let value: String = if j < chars.len() {
                    let v = chars[j..].iter().collect();
                    j = chars.len();
                    v
                } else if i < args.len() {
                    i += 1;
                    args[i - 1].clone()
                } else {
                    usage();
                    return Err(22);
                };
                match c {
                    'a' => o.addr = Some(get_addr(&value).ok_or(22u8)?),
                    'I' => o.source = Some(get_addr(&value).ok_or(22u8)?),
                    'p' => o.port = value.parse().unwrap_or(0),
                    'C' => {
                        let n: i64 = value.parse().unwrap_or(0);
                        if n < 0 {
                            eprintln!("Invalid count {n}");
                            return Err(22);
                        }
                        o.count = n as u32;
                    }
                    'S' => {
                        let n: i64 = value.parse().unwrap_or(0);
                        if n < RPING_MIN_BUFSIZE as i64 || n > (RPING_BUFSIZE - 1) as i64 {
                            eprintln!(
                                "Invalid size {n} (valid range is {RPING_MIN_BUFSIZE} to {RPING_BUFSIZE})"
                            );
                            return Err(22);
                        }
                        o.size = n as usize;
                    }
                    _ => {} // -t tos: accepted and ignored, as v44 does not use it
                }
            } else {
                match c {
                    's' => role = Some(true),
                    'c' => role = Some(false),
                    'v' => o.verbose = true,
                    'V' => o.validate = true,
                    'd' => o.debug = true,
                    'q' => {} // our QPs are always self-created and self-modified
                    'P' => o.persistent = true,
                    _ => {
                        usage();
                        return Err(22);
                    }
                }
            }
        }
    }
    match role {
        Some(s) => o.server = s,
        None => {
            usage();
            return Err(22);
        }
    }
    Ok(o)
}

/// Entry point of `uverbs rping`.
pub fn main(args: &[String]) -> u8 {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        usage();
        return 0;
    }
    let o = match parse(args) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let result = if o.server {
        run_server(&o)
    } else {
        run_client(&o)
    };
    let _ = std::io::stdout().flush();
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("rping: {e:#}");
            1
        }
    }
}

type Res<T> = Result<T, String>;

fn s<E: std::fmt::Display>(e: E) -> String {
    format!("{e:#}")
}

/// Waits for the next CM event (logging it), failing on error events.
fn next_event(o: &Opts, ch: &EventChannel) -> Res<CmEvent> {
    let ev = ch.get_event().map_err(s)?;
    if o.debug {
        out!("cma_event type {} status {}", ev.kind(), ev.status());
    }
    check_error_event(&ev)?;
    Ok(ev)
}

fn check_error_event(ev: &CmEvent) -> Res<()> {
    match ev.kind() {
        CmEventKind::AddrError
        | CmEventKind::RouteError
        | CmEventKind::ConnectError
        | CmEventKind::Unreachable
        | CmEventKind::Rejected => {
            eprintln!("cma event {}, error {}", ev.kind(), ev.status());
            Err(format!("connection failed: {}", ev.kind()))
        }
        CmEventKind::DeviceRemoval => {
            eprintln!("cma detected device removal!!!!");
            Err("device removed".into())
        }
        _ => Ok(()),
    }
}

/// The verbs resources of one connection.
struct Conn {
    pd: ProtectionDomain,
    cq: CompletionQueue,
    qp: QueuePair,
    recv_mr: MemoryRegion,
    send_mr: MemoryRegion,
    rdma_mr: MemoryRegion,
    start_mr: Option<MemoryRegion>,
    size: usize,
}

const WR_RECV: u64 = 1;
const WR_SEND: u64 = 2;
const WR_RDMA: u64 = 3;

impl Conn {
    fn setup(o: &Opts, id: &CmId) -> Res<Conn> {
        let ctx = id.context().map_err(s)?;
        let pd = ctx.alloc_pd().map_err(s)?;
        let cq = ctx
            .create_cq(RPING_SQ_DEPTH * 2, CqOptions::default())
            .map_err(s)?;
        let qp = id
            .create_qp(
                &pd,
                &QpInitAttr::rc(&cq, &cq).cap(QpCap::new(RPING_SQ_DEPTH, 2, 1, 1)),
            )
            .map_err(s)?;
        let remote =
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
        let recv_mr = pd.alloc_mr(INFO_LEN, AccessFlags::LOCAL_WRITE).map_err(s)?;
        let send_mr = pd.alloc_mr(INFO_LEN, AccessFlags::empty()).map_err(s)?;
        let rdma_mr = pd.alloc_mr(o.size, remote).map_err(s)?;
        let start_mr = if o.server {
            None
        } else {
            Some(pd.alloc_mr(o.size, remote).map_err(s)?)
        };
        if o.debug {
            out!(
                "created pd, cq, qp {:#x}; allocated & registered buffers",
                qp.qp_num()
            );
        }
        Ok(Conn {
            pd,
            cq,
            qp,
            recv_mr,
            send_mr,
            rdma_mr,
            start_mr,
            size: o.size,
        })
    }

    fn post_recv(&mut self) -> Res<()> {
        let sge = [self.recv_mr.sge(0, INFO_LEN as u32).map_err(s)?];
        self.qp
            .post_recv(&[RecvWr::new(WR_RECV, &sge)])
            .map_err(|e| format!("post recv error: {e:?}"))
    }

    /// SENDs `struct rping_rdma_info` naming `mr` (client), or the
    /// untouched send buffer (server go-ahead).
    fn post_send_info(&mut self, mr: Option<&MemoryRegion>, o: &Opts) -> Res<()> {
        if let Some(mr) = mr {
            let info = RdmaInfo {
                addr: mr.addr(),
                rkey: mr.rkey(),
                size: self.size as u32,
            };
            self.send_mr.write(0, &info.encode()).map_err(s)?;
            if o.debug {
                out!(
                    "RDMA addr {:x} rkey {:x} len {}",
                    mr.addr(),
                    mr.rkey(),
                    self.size
                );
            }
        }
        let sge = [self.send_mr.sge(0, INFO_LEN as u32).map_err(s)?];
        let wr = SendWr::send(WR_SEND, &sge).flags(SendFlags::SIGNALED);
        self.qp
            .post_send(&[wr])
            .map_err(|e| format!("post send error {e:?}"))
    }

    fn post_rdma(&mut self, op: SendOp, len: u32) -> Res<()> {
        let sge = [self.rdma_mr.sge(0, len).map_err(s)?];
        let wr = SendWr::new(WR_RDMA, op, &sge).flags(SendFlags::SIGNALED);
        self.qp
            .post_send(&[wr])
            .map_err(|e| format!("post send error {e:?}"))
    }

    /// The ping text in the RDMA buffer (written or read by the peer).
    fn rdma_data(&self) -> Res<Vec<u8>> {
        let mut buf = vec![0u8; self.size];
        self.rdma_mr.read(0, &mut buf).map_err(s)?;
        Ok(ping_data(&buf).to_vec())
    }
}

/// What a wait ended with.
enum Got {
    /// A completion of this opcode (receives: after re-posting).
    Wc(WorkCompletion),
    /// The peer disconnected.
    Disconnected,
}

/// Polls the CQ and the CM channel until a completion other than a send
/// completion arrives, or DISCONNECTED.
fn wait(o: &Opts, conn: &mut Conn, ch: &EventChannel, id: &CmId) -> Res<Got> {
    let mut wc = [WorkCompletion::default(); 1];
    let mut idle = 0u32;
    loop {
        if conn.cq.poll(&mut wc) == 1 {
            idle = 0;
            let wc = wc[0];
            if wc.status == WcStatus::WR_FLUSH_ERR {
                continue;
            }
            if !wc.status.is_success() {
                return Err(format!("cq completion failed status {}", wc.status.0));
            }
            match wc.opcode {
                WcOpcode::SEND => {
                    if o.debug {
                        out!("send completion");
                    }
                    continue;
                }
                WcOpcode::RECV => {
                    if wc.byte_len as usize != INFO_LEN {
                        return Err(format!("Received bogus data, size {}", wc.byte_len));
                    }
                    if o.debug {
                        out!("recv completion");
                    }
                    // The next message is received into the same buffer only
                    // after the caller read it: it is the protocol's turn.
                    return Ok(Got::Wc(wc));
                }
                _ => return Ok(Got::Wc(wc)),
            }
        }
        if let Some(ev) = ch.try_get_event().map_err(s)? {
            if o.debug {
                out!("cma_event type {} status {}", ev.kind(), ev.status());
            }
            check_error_event(&ev)?;
            if ev.kind() == CmEventKind::Disconnected && ev.is_for(id) {
                eprintln!(
                    "{} DISCONNECT EVENT...",
                    if o.server { "server" } else { "client" }
                );
                return Ok(Got::Disconnected);
            }
            continue;
        }
        idle += 1;
        if idle > 1000 {
            thread::sleep(Duration::from_micros(200));
        } else {
            thread::yield_now();
        }
    }
}

/// The `struct rping_rdma_info` the peer sent.
fn read_info(conn: &Conn) -> Res<RdmaInfo> {
    let mut b = [0u8; INFO_LEN];
    conn.recv_mr.read(0, &mut b).map_err(s)?;
    Ok(RdmaInfo::decode(&b))
}

fn expect_wc(got: Got, what: &str, op: WcOpcode) -> Res<Option<WorkCompletion>> {
    match got {
        Got::Disconnected => Ok(None),
        Got::Wc(wc) if wc.opcode == op => Ok(Some(wc)),
        Got::Wc(wc) => Err(format!("wait for {what}: got opcode {}", wc.opcode.0)),
    }
}

fn run_server(o: &Opts) -> Res<()> {
    let ch = EventChannel::open().map_err(s)?;
    let listener = ch.create_id(PortSpace::Tcp).map_err(s)?;
    let ip = o
        .addr
        .map(|a| a.ip())
        .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
    listener
        .bind(SocketAddr::new(ip, o.port))
        .map_err(|e| format!("rdma_bind_addr: {e:#}"))?;
    listener
        .listen(3)
        .map_err(|e| format!("rdma_listen: {e:#}"))?;
    loop {
        let mut ev = next_event(o, &ch)?;
        if ev.kind() != CmEventKind::ConnectRequest {
            return Err(format!("wait for CONNECT_REQUEST: got {}", ev.kind()));
        }
        let req = ev.conn_param().unwrap_or_default();
        let child = ev
            .take_new_id()
            .ok_or_else(|| "CONNECT_REQUEST without an id".to_string())?;
        drop(ev);
        let result = serve_one(o, &ch, &child, &req);
        drop(child);
        result?;
        if !o.persistent {
            break;
        }
    }
    drop(listener);
    Ok(())
}

fn serve_one(o: &Opts, ch: &EventChannel, child: &CmId, req: &ConnParam) -> Res<()> {
    let mut conn = Conn::setup(o, child)?;
    conn.post_recv()?;
    let param = ConnParam::new()
        .responder_resources(req.responder_resources)
        .initiator_depth(req.initiator_depth)
        .retry_count(7)
        .rnr_retry_count(7);
    if o.debug {
        out!("accepting client connection request");
    }
    child
        .accept_qp(&conn.qp, &param)
        .map_err(|e| format!("rdma_accept: {e:#}"))?;
    let result = server_loop(o, &mut conn, ch, child);
    if let Err(e) = &result {
        eprintln!("rping server failed: {e:#}");
    }
    let _ = child.disconnect_qp(&conn.qp);
    let Conn { pd, cq, qp, .. } = conn;
    drop(qp);
    drop(cq);
    drop(pd);
    result
}

fn server_loop(o: &Opts, conn: &mut Conn, ch: &EventChannel, child: &CmId) -> Res<()> {
    loop {
        // The client's start buffer.
        let got = wait(o, conn, ch, child)?;
        if expect_wc(got, "RDMA_READ_ADV", WcOpcode::RECV)?.is_none() {
            return Ok(());
        }
        let RdmaInfo {
            addr,
            rkey,
            size: len,
        } = read_info(conn)?;
        conn.post_recv()?;
        if o.debug {
            out!("Received rkey {rkey:x} addr {addr:x} len {len} from peer");
        }
        let len = len.min(conn.size as u32);
        conn.post_rdma(
            SendOp::RdmaRead {
                remote_addr: addr,
                rkey,
            },
            len,
        )?;
        let got = wait(o, conn, ch, child)?;
        if expect_wc(got, "RDMA_READ_COMPLETE", WcOpcode::RDMA_READ)?.is_none() {
            return Ok(());
        }
        let data = conn.rdma_data()?;
        if o.verbose {
            out!("server ping data: {}", String::from_utf8_lossy(&data));
        }
        conn.post_send_info(None, o)?;
        // The client's RDMA buffer.
        let got = wait(o, conn, ch, child)?;
        if expect_wc(got, "RDMA_WRITE_ADV", WcOpcode::RECV)?.is_none() {
            return Ok(());
        }
        let RdmaInfo { addr, rkey, .. } = read_info(conn)?;
        conn.post_recv()?;
        conn.post_rdma(
            SendOp::RdmaWrite {
                remote_addr: addr,
                rkey,
            },
            (data.len() + 1).min(conn.size) as u32,
        )?;
        let got = wait(o, conn, ch, child)?;
        if expect_wc(got, "RDMA_WRITE_COMPLETE", WcOpcode::RDMA_WRITE)?.is_none() {
            return Ok(());
        }
        conn.post_send_info(None, o)?;
    }
}

/// The text of ping `ping`: `rdma-ping-N: ` and the alphabet from `start`.
fn ping_text(ping: u32, start: u8, size: usize) -> Vec<u8> {
    let mut buf = format!("rdma-ping-{ping}: ").into_bytes();
    buf.truncate(size);
    let mut c = start;
    while buf.len() < size {
        buf.push(c);
        c += 1;
        if c > 122 {
            c = 65;
        }
    }
    buf[size - 1] = 0;
    buf
}

fn run_client(o: &Opts) -> Res<()> {
    let Some(dst) = o.addr else {
        usage();
        return Err("-a addr is required with -c".into());
    };
    let dst = SocketAddr::new(dst.ip(), o.port);
    let ch = EventChannel::open().map_err(s)?;
    let id = ch.create_id(PortSpace::Tcp).map_err(s)?;
    id.resolve_addr(o.source, dst, Duration::from_millis(2000))
        .map_err(|e| format!("rdma_resolve_addr: {e:#}"))?;
    let ev = next_event(o, &ch)?;
    if ev.kind() != CmEventKind::AddrResolved {
        return Err(format!("waiting for addr resolution: got {}", ev.kind()));
    }
    drop(ev);
    id.resolve_route(Duration::from_millis(2000))
        .map_err(|e| format!("rdma_resolve_route: {e:#}"))?;
    let ev = next_event(o, &ch)?;
    if ev.kind() != CmEventKind::RouteResolved {
        return Err(format!("waiting for route resolution: got {}", ev.kind()));
    }
    drop(ev);
    let mut conn = Conn::setup(o, &id)?;
    conn.post_recv()?;
    let param = ConnParam::new()
        .responder_resources(1)
        .initiator_depth(1)
        .retry_count(7)
        .rnr_retry_count(7);
    id.connect_qp(&conn.qp, &param)
        .map_err(|e| format!("rdma_connect: {e:#}"))?;
    let ev = next_event(o, &ch)?;
    match ev.kind() {
        CmEventKind::ConnectResponse => {
            drop(ev);
            id.complete_connect(&conn.qp)
                .map_err(|e| format!("rdma_establish: {e:#}"))?;
        }
        CmEventKind::Established => {}
        k => return Err(format!("wait for CONNECTED: got {k}")),
    }
    if o.debug {
        out!("rdma_connect successful");
    }
    let result = client_loop(o, &mut conn, &ch, &id);
    if let Err(e) = &result {
        eprintln!("rping client failed: {e:#}");
    }
    let _ = id.disconnect_qp(&conn.qp);
    drop(conn);
    result
}

fn client_loop(o: &Opts, conn: &mut Conn, ch: &EventChannel, id: &CmId) -> Res<()> {
    let mut start = 65u8;
    let mut ping = 0u32;
    while o.count == 0 || ping < o.count {
        let text = ping_text(ping, start, conn.size);
        start += 1;
        if start > 122 {
            start = 65;
        }
        let start_mr = conn.start_mr.clone().ok_or("no start buffer")?;
        start_mr.write(0, &text).map_err(s)?;
        conn.post_send_info(Some(&start_mr), o)?;
        let got = wait(o, conn, ch, id)?;
        if expect_wc(got, "RDMA_WRITE_ADV", WcOpcode::RECV)?.is_none() {
            return Ok(());
        }
        conn.post_recv()?;
        let rdma_mr = conn.rdma_mr.clone();
        conn.post_send_info(Some(&rdma_mr), o)?;
        let got = wait(o, conn, ch, id)?;
        if expect_wc(got, "RDMA_WRITE_COMPLETE", WcOpcode::RECV)?.is_none() {
            return Ok(());
        }
        conn.post_recv()?;
        let mut back = vec![0u8; conn.size];
        conn.rdma_mr.read(0, &mut back).map_err(s)?;
        if o.validate && back != text {
            eprintln!("data mismatch!");
            return Err("data mismatch".into());
        }
        if o.verbose {
            out!("ping data: {}", String::from_utf8_lossy(&conn.rdma_data()?));
        }
        ping += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_parse_like_getopt() {
        let o = parse(&args("-c -a 127.0.0.1 -C10 -vV -S 100 -p 9999")).unwrap();
        assert!(!o.server);
        assert_eq!(o.count, 10);
        assert_eq!(o.size, 100);
        assert_eq!(o.port, 9999);
        assert!(o.verbose && o.validate);
        assert!(parse(&args("-v")).is_err(), "-s or -c is required");
        assert!(parse(&args("-s -S 10")).is_err(), "size below the minimum");
        assert!(parse(&args("-s -x")).is_err());
    }

    #[test]
    fn ping_text_matches_rping() {
        let t = ping_text(0, 65, 30);
        assert_eq!(&t[..], b"rdma-ping-0: ABCDEFGHIJKLMNOP\0");
        let t = ping_text(3, 122, 17);
        assert_eq!(&t[..], b"rdma-ping-3: zAB\0");
    }
}
