//! Command lines of the four pingpongs, parsed as rdma-core v44's
//! `ibv_{rc,uc,ud,srq}_pingpong` parse them: `getopt_long` with each tool's
//! option string (bundled short options, attached or separate arguments,
//! `--name=value`, unambiguous long prefixes, operands anywhere, `--`), C's
//! `strtol`/`strtoul(optarg, NULL, 0)` for numbers, and the same checks,
//! messages and usage text. `-h`/`--help` (usage on stdout, exit 0) is an
//! addition.

use crate::c_num::{strtol, strtoul_u32};
use std::io::Write;

use uverbs::Mtu;

/// Which tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Rc,
    Uc,
    Ud,
    Srq,
}

impl Transport {
    /// The name messages and the usage text use (argv[0] in the C tools).
    pub fn prog(self) -> &'static str {
        match self {
            Transport::Rc => "uverbs rc-pingpong",
            Transport::Uc => "uverbs uc-pingpong",
            Transport::Ud => "uverbs ud-pingpong",
            Transport::Srq => "uverbs srq-pingpong",
        }
    }

    /// Long options: name, short option, takes an argument.
    fn options(self) -> &'static [(&'static str, char, bool)] {
        match self {
            Transport::Rc => &[
                ("port", 'p', true),
                ("ib-dev", 'd', true),
                ("ib-port", 'i', true),
                ("size", 's', true),
                ("mtu", 'm', true),
                ("rx-depth", 'r', true),
                ("iters", 'n', true),
                ("sl", 'l', true),
                ("events", 'e', false),
                ("gid-idx", 'g', true),
                ("odp", 'o', false),
                ("iodp", 'O', false),
                ("prefetch", 'P', false),
                ("ts", 't', false),
                ("chk", 'c', false),
                ("dm", 'j', false),
                ("new_send", 'N', false),
                ("help", 'h', false),
            ],
            Transport::Uc => &[
                ("port", 'p', true),
                ("ib-dev", 'd', true),
                ("ib-port", 'i', true),
                ("size", 's', true),
                ("mtu", 'm', true),
                ("rx-depth", 'r', true),
                ("iters", 'n', true),
                ("sl", 'l', true),
                ("events", 'e', false),
                ("gid-idx", 'g', true),
                ("chk", 'c', false),
                ("help", 'h', false),
            ],
            Transport::Ud => &[
                ("port", 'p', true),
                ("ib-dev", 'd', true),
                ("ib-port", 'i', true),
                ("size", 's', true),
                ("rx-depth", 'r', true),
                ("iters", 'n', true),
                ("sl", 'l', true),
                ("events", 'e', false),
                ("gid-idx", 'g', true),
                ("chk", 'c', false),
                ("help", 'h', false),
            ],
            Transport::Srq => &[
                ("port", 'p', true),
                ("ib-dev", 'd', true),
                ("ib-port", 'i', true),
                ("size", 's', true),
                ("mtu", 'm', true),
                ("num-qp", 'q', true),
                ("rx-depth", 'r', true),
                ("iters", 'n', true),
                ("sl", 'l', true),
                ("events", 'e', false),
                ("odp", 'o', false),
                ("gid-idx", 'g', true),
                ("chk", 'c', false),
                ("help", 'h', false),
            ],
        }
    }
}

/// `MAX_QP` of `srq_pingpong.c`: the number of addresses exchanged.
pub const MAX_QP: usize = 256;

/// Everything the command line sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub port: u32,
    pub ib_dev: Option<String>,
    pub ib_port: i32,
    pub size: u32,
    pub mtu: Mtu,
    pub rx_depth: u32,
    pub iters: u32,
    pub sl: i32,
    pub use_event: bool,
    pub gidx: i32,
    pub validate: bool,
    pub num_qp: u32,
    pub odp: bool,
    pub implicit_odp: bool,
    pub prefetch: bool,
    pub ts: bool,
    pub dm: bool,
    pub new_send: bool,
    /// The operand: run as the client of this server.
    pub servername: Option<String>,
}

impl Options {
    /// The C tools' defaults.
    pub fn defaults(t: Transport) -> Self {
        Options {
            port: 18515,
            ib_dev: None,
            ib_port: 1,
            size: if t == Transport::Ud { 1024 } else { 4096 },
            mtu: Mtu(3),
            rx_depth: 500,
            iters: 1000,
            sl: 0,
            use_event: false,
            gidx: -1,
            validate: false,
            num_qp: 16,
            odp: false,
            implicit_odp: false,
            prefetch: false,
            ts: false,
            dm: false,
            new_send: false,
            servername: None,
        }
    }
}

/// What to do after parsing.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Run(Options),
    /// `-h`/`--help`: usage was printed; exit 0.
    Help,
    /// Messages and/or usage were printed; exit with this status.
    Exit(u8),
}

/// `pp_mtu_to_enum`.
pub fn mtu_to_enum(mtu: i64) -> Option<Mtu> {
    match mtu {
        256 => Some(Mtu(1)),
        512 => Some(Mtu(2)),
        1024 => Some(Mtu(3)),
        2048 => Some(Mtu(4)),
        4096 => Some(Mtu(5)),
        _ => None,
    }
}

/// The usage text, byte for byte as the C tool prints it.
pub fn usage(t: Transport) -> String {
    let argv0 = t.prog();
    let mut s = String::new();
    s += "Usage:\n";
    s += &format!("  {argv0}            start a server and wait for connection\n");
    s += &format!("  {argv0} <host>     connect to server at <host>\n");
    s += "\n";
    s += "Options:\n";
    s += "  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n";
    s += "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n";
    s += "  -i, --ib-port=<port>   use port <port> of IB device (default 1)\n";
    match t {
        Transport::Ud => {
            s += "  -s, --size=<size>      size of message to exchange (default 2048)\n";
        }
        _ => {
            s += "  -s, --size=<size>      size of message to exchange (default 4096)\n";
            s += "  -m, --mtu=<size>       path MTU (default 1024)\n";
        }
    }
    if t == Transport::Srq {
        s += "  -q, --num-qp=<num>     number of QPs to use (default 16)\n";
    }
    s += "  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n";
    match t {
        Transport::Srq => {
            s += "  -n, --iters=<iters>    number of exchanges per QP(default 1000)\n";
        }
        _ => s += "  -n, --iters=<iters>    number of exchanges (default 1000)\n",
    }
    match t {
        Transport::Ud => {
            s += "  -l, --sl=<SL>          send messages with service level <SL> (default 0)\n"
        }
        _ => s += "  -l, --sl=<sl>          service level value\n",
    }
    s += "  -e, --events           sleep on CQ events (default poll)\n";
    s += "  -g, --gid-idx=<gid index> local port gid index\n";
    match t {
        Transport::Rc => {
            s += "  -o, --odp\t\t    use on demand paging\n";
            s += "  -O, --iodp\t\t    use implicit on demand paging\n";
            s += "  -P, --prefetch\t    prefetch an ODP MR\n";
            s += "  -t, --ts\t            get CQE with timestamp\n";
            s += "  -c, --chk\t            validate received buffer\n";
            s += "  -j, --dm\t            use device memory\n";
            s += "  -N, --new_send            use new post send WR API\n";
        }
        Transport::Srq => {
            s += "  -o, --odp\t\t    use on demand paging\n";
            s += "  -c, --chk              validate received buffer\n";
        }
        _ => s += "  -c, --chk              validate received buffer\n",
    }
    s
}

/// Parses `args` (after the subcommand name). Messages go to `err`, the
/// usage text to `out` (stdout in the C tools).
pub fn parse(t: Transport, args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> Parsed {
    let prog = t.prog();
    let table = t.options();
    let mut o = Options::defaults(t);
    let mut operands: Vec<String> = Vec::new();
    let bad = |out: &mut dyn Write, err: &mut dyn Write, msg: Option<String>| {
        if let Some(m) = msg {
            let _ = writeln!(err, "{prog}: {m}");
        }
        let _ = out.write_all(usage(t).as_bytes());
        Parsed::Exit(1)
    };
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            operands.extend(args[i..].iter().cloned());
            break;
        }
        let mut found: Vec<(char, Option<String>)> = Vec::new();
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let exact = table.iter().find(|o| o.0 == name);
            let prefixed: Vec<_> = table.iter().filter(|o| o.0.starts_with(name)).collect();
            let &(full, short, takes_arg) = match (exact, prefixed.as_slice()) {
                (Some(o), _) => o,
                (None, [o]) => o,
                (None, []) => {
                    return bad(out, err, Some(format!("unrecognized option '--{name}'")));
                }
                (None, many) => {
                    let names: Vec<String> = many.iter().map(|o| format!("'--{}'", o.0)).collect();
                    let msg = format!(
                        "option '--{name}' is ambiguous; possibilities: {}",
                        names.join(" ")
                    );
                    return bad(out, err, Some(msg));
                }
            };
            let value = match (takes_arg, inline) {
                (true, Some(v)) => Some(v),
                (true, None) if i < args.len() => {
                    i += 1;
                    Some(args[i - 1].clone())
                }
                (true, None) => {
                    let msg = format!("option '--{full}' requires an argument");
                    return bad(out, err, Some(msg));
                }
                (false, Some(_)) => {
                    let msg = format!("option '--{full}' doesn't allow an argument");
                    return bad(out, err, Some(msg));
                }
                (false, None) => None,
            };
            found.push((short, value));
        } else if let Some(shorts) = arg.strip_prefix('-').filter(|s| !s.is_empty()) {
            for (pos, c) in shorts.char_indices() {
                let Some(&(_, _, takes_arg)) = table.iter().find(|o| o.1 == c) else {
                    return bad(out, err, Some(format!("invalid option -- '{c}'")));
                };
                if !takes_arg {
                    found.push((c, None));
                    continue;
                }
                let rest = &shorts[pos + c.len_utf8()..];
                let value = if !rest.is_empty() {
                    rest.to_string()
                } else if i < args.len() {
                    i += 1;
                    args[i - 1].clone()
                } else {
                    let msg = format!("option requires an argument -- '{c}'");
                    return bad(out, err, Some(msg));
                };
                found.push((c, Some(value)));
                break;
            }
        } else {
            // GNU getopt permutes: operands may come before options.
            operands.push(arg.clone());
            continue;
        }
        for (c, value) in found {
            let v = value.unwrap_or_default();
            match c {
                'p' => {
                    o.port = strtoul_u32(&v);
                    if o.port > 65535 {
                        return bad(out, err, None);
                    }
                }
                'd' => o.ib_dev = Some(v),
                'i' => {
                    o.ib_port = strtol(&v) as i32;
                    if o.ib_port < 1 {
                        return bad(out, err, None);
                    }
                }
                's' => {
                    o.size = strtoul_u32(&v);
                    if t == Transport::Srq && o.size < 1 {
                        return bad(out, err, None);
                    }
                }
                'm' => match mtu_to_enum(strtol(&v)) {
                    Some(m) => o.mtu = m,
                    None => return bad(out, err, None),
                },
                'q' => o.num_qp = strtoul_u32(&v),
                'r' => o.rx_depth = strtoul_u32(&v),
                'n' => o.iters = strtoul_u32(&v),
                'l' => o.sl = strtol(&v) as i32,
                'e' => o.use_event = true,
                'g' => o.gidx = strtol(&v) as i32,
                'o' => o.odp = true,
                'O' => {
                    o.odp = true;
                    o.implicit_odp = true;
                }
                'P' => o.prefetch = true,
                't' => o.ts = true,
                'c' => o.validate = true,
                'j' => o.dm = true,
                'N' => o.new_send = true,
                'h' => {
                    let _ = out.write_all(usage(t).as_bytes());
                    return Parsed::Help;
                }
                _ => unreachable!("option table and match disagree on -{c}"),
            }
        }
    }
    match operands.len() {
        0 => {}
        1 => o.servername = operands.pop(),
        _ => return bad(out, err, None),
    }
    if o.odp && o.dm {
        let _ = writeln!(err, "DM memory region can't be on demand");
        return Parsed::Exit(1);
    }
    if !o.odp && o.prefetch {
        let _ = writeln!(err, "prefetch is valid only with on-demand memory region");
        return Parsed::Exit(1);
    }
    if t == Transport::Srq {
        if o.num_qp > o.rx_depth {
            let _ = writeln!(
                err,
                "rx_depth {} is too small for {} QPs -- must have at least one receive per QP.",
                o.rx_depth as i32, o.num_qp as i32
            );
            return Parsed::Exit(1);
        }
        if o.num_qp as usize >= MAX_QP {
            let _ = writeln!(
                err,
                "num_qp {} must be less than {}",
                o.num_qp as i32,
                MAX_QP - 1
            );
            return Parsed::Exit(1);
        }
    }
    Parsed::Run(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(t: Transport, args: &[&str]) -> (Parsed, String, String) {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let p = parse(t, &args, &mut out, &mut err);
        (
            p,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    fn opts(t: Transport, args: &[&str]) -> Options {
        match run(t, args) {
            (Parsed::Run(o), _, _) => o,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn defaults_match_the_c_tools() {
        let rc = opts(Transport::Rc, &[]);
        assert_eq!(
            (rc.port, rc.ib_port, rc.size, rc.mtu, rc.rx_depth, rc.iters),
            (18515, 1, 4096, Mtu(3), 500, 1000)
        );
        assert_eq!(
            (rc.sl, rc.gidx, rc.use_event, rc.servername),
            (0, -1, false, None)
        );
        assert_eq!(opts(Transport::Ud, &[]).size, 1024);
        assert_eq!(opts(Transport::Srq, &[]).num_qp, 16);
    }

    #[test]
    fn getopt_forms() {
        let o = opts(
            Transport::Rc,
            &[
                "-d",
                "rxe0",
                "-g1",
                "--port=1234",
                "--iters",
                "0x10",
                "-ec",
                "192.0.2.1",
                "--mtu=2048",
                "--rx=64",
            ],
        );
        assert_eq!(o.ib_dev.as_deref(), Some("rxe0"));
        assert_eq!((o.gidx, o.port, o.iters, o.rx_depth), (1, 1234, 16, 64));
        assert!(o.use_event && o.validate);
        assert_eq!(o.mtu, Mtu(4));
        assert_eq!(o.servername.as_deref(), Some("192.0.2.1"));
        let o = opts(Transport::Srq, &["-q", "4", "-s010", "--", "host"]);
        assert_eq!(
            (o.num_qp, o.size, o.servername.as_deref()),
            (4, 8, Some("host"))
        );
        assert!(opts(Transport::Rc, &["-N"]).new_send);
    }

    #[test]
    fn c_number_parsing() {
        assert_eq!(strtol("  42abc"), 42);
        assert_eq!(strtol("0x1f"), 31);
        assert_eq!(strtol("017"), 15);
        assert_eq!(strtol("-3"), -3);
        assert_eq!(strtol("x"), 0);
        assert_eq!(strtoul_u32("-1"), u32::MAX);
    }

    #[test]
    fn errors_print_getopt_messages_and_usage() {
        let (p, out, err) = run(Transport::Uc, &["-o"]);
        assert_eq!(p, Parsed::Exit(1));
        assert_eq!(err, "uverbs uc-pingpong: invalid option -- 'o'\n");
        assert_eq!(out, usage(Transport::Uc));
        let (_, _, err) = run(Transport::Ud, &["-m", "1024"]);
        assert_eq!(err, "uverbs ud-pingpong: invalid option -- 'm'\n");
        let (_, _, err) = run(Transport::Rc, &["--bogus"]);
        assert_eq!(err, "uverbs rc-pingpong: unrecognized option '--bogus'\n");
        let (_, _, err) = run(Transport::Rc, &["-p"]);
        assert_eq!(
            err,
            "uverbs rc-pingpong: option requires an argument -- 'p'\n"
        );
        let (_, _, err) = run(Transport::Rc, &["--events=1"]);
        assert_eq!(
            err,
            "uverbs rc-pingpong: option '--events' doesn't allow an argument\n"
        );
        for bad in [
            &["-p", "70000"][..],
            &["-m", "1000"],
            &["-i", "0"],
            &["a", "b"],
        ] {
            let (p, out, err) = run(Transport::Rc, bad);
            assert_eq!((p, err.as_str()), (Parsed::Exit(1), ""), "{bad:?}");
            assert_eq!(out, usage(Transport::Rc));
        }
        let (p, _, err) = run(Transport::Srq, &["-q", "600", "-r", "1000"]);
        assert_eq!(p, Parsed::Exit(1));
        assert_eq!(err, "num_qp 600 must be less than 255\n");
        let (_, _, err) = run(Transport::Srq, &["-q", "20", "-r", "10"]);
        assert_eq!(
            err,
            "rx_depth 10 is too small for 20 QPs -- must have at least one receive per QP.\n"
        );
        let (_, _, err) = run(Transport::Rc, &["-P"]);
        assert_eq!(err, "prefetch is valid only with on-demand memory region\n");
        let (_, _, err) = run(Transport::Rc, &["-o", "-j"]);
        assert_eq!(err, "DM memory region can't be on demand\n");
    }

    #[test]
    fn usage_text_is_rdma_cores() {
        assert_eq!(
            usage(Transport::Ud),
            "Usage:\n\
             \x20 uverbs ud-pingpong            start a server and wait for connection\n\
             \x20 uverbs ud-pingpong <host>     connect to server at <host>\n\
             \n\
             Options:\n\
             \x20 -p, --port=<port>      listen on/connect to port <port> (default 18515)\n\
             \x20 -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n\
             \x20 -i, --ib-port=<port>   use port <port> of IB device (default 1)\n\
             \x20 -s, --size=<size>      size of message to exchange (default 2048)\n\
             \x20 -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n\
             \x20 -n, --iters=<iters>    number of exchanges (default 1000)\n\
             \x20 -l, --sl=<SL>          send messages with service level <SL> (default 0)\n\
             \x20 -e, --events           sleep on CQ events (default poll)\n\
             \x20 -g, --gid-idx=<gid index> local port gid index\n\
             \x20 -c, --chk              validate received buffer\n"
        );
        assert!(usage(Transport::Srq)
            .contains("  -q, --num-qp=<num>     number of QPs to use (default 16)\n"));
        assert!(usage(Transport::Rc)
            .ends_with("  -N, --new_send            use new post send WR API\n"));
        let (p, out, _) = run(Transport::Rc, &["--help"]);
        assert_eq!((p, out), (Parsed::Help, usage(Transport::Rc)));
    }
}
