//! The command line of `uverbs perf`: perftest 4.5's options and defaults
//! (`perftest_parameters.c`), including its `force_dependecies` fix-ups.

use std::io::{self, Write};

use uverbs::Mtu;

use super::{
    clock::ClockKind,
    storm::{Storm, DEFAULT_STORMS},
    Test, PROG,
};

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
    /// `micro` only: the mlx5 data path on the device model (hidden; see
    /// benches/mlx5.sh).
    pub mlx5_model: bool,
    /// `destroy-storm` only: the storms to run, in order (`--storm`).
    pub storms: Vec<Storm>,
    /// `destroy-storm` only: how many times to run the list (`--rounds`).
    pub rounds: usize,
    /// `destroy-storm` only: unmeasured events before each run (`--warmup`).
    pub warmup: usize,
}

pub fn usage(out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Usage: {PROG} write-lat|send-lat|write-bw|micro|destroy-storm [options]\n\
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
         \x20     --two-contexts      bw, or lat with --threads: one device context and PD\n\
         \x20                         per side instead of one shared\n\
         \x20 -h, --help              this help\n\
         \n\
         destroy-storm: completion events on one QP (arm, post a signaled write, get_event,\n\
         ack, poll; latency from the post to the event) while another thread of the same\n\
         context creates and destroy()s objects; takes -d -i -x -s -n -m and:\n\
         \x20     --storm=LIST        comma-separated, run in order: none (baseline), cq (CQs on\n\
         \x20                         the same channel), qp (RC QPs), srq, pd (PDs: no events, a\n\
         \x20                         control) (default none,cq,qp)\n\
         \x20     --rounds=R          run the list R times, every other round reversed, then\n\
         \x20                         print medians (default 1)\n\
         \x20     --warmup=N          unmeasured events before each run (default 200)\n\
         \x20 (-n: measured events per run, default 10000)"
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
        Some("destroy-storm") => Test::DestroyStorm,
        Some("-h" | "--help") => return Ok(None),
        Some(other) => return Err(format!("unknown benchmark '{other}'")),
        None => {
            return Err("which benchmark: write-lat, send-lat, write-bw or destroy-storm?".into())
        }
    };
    let mut o = Opts {
        test,
        device: None,
        port: 1,
        gid_index: 0,
        size: if test.is_bw() { 65536 } else { 2 },
        iters: match test {
            Test::WriteBw => 5000,
            Test::DestroyStorm => 10000,
            _ => 1000,
        },
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
        mlx5_model: false,
        storms: DEFAULT_STORMS.to_vec(),
        rounds: 1,
        warmup: 200,
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
            "--mlx5-model" if o.test == Test::Micro => o.mlx5_model = true,
            "--storm" if o.test == Test::DestroyStorm => {
                o.storms = value()?
                    .split(',')
                    .map(|k| Storm::parse(k).ok_or(format!("--storm: unknown kind '{k}'")))
                    .collect::<Result<_, _>>()?;
            }
            "--rounds" if o.test == Test::DestroyStorm => {
                o.rounds = num(key, value()?)?;
                if o.rounds == 0 {
                    return Err("--rounds must be positive".into());
                }
            }
            "--warmup" if o.test == Test::DestroyStorm => o.warmup = num(key, value()?)?,
            _ => return Err(format!("unknown option '{a}'")),
        }
        i += 1;
    }
    let lat = matches!(o.test, Test::WriteLat | Test::SendLat);
    if lat && o.two_contexts && !o.threads {
        return Err(
            "--two-contexts goes with --threads: in its own process side B has its own context"
                .into(),
        );
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
        let a: Vec<String> = ["write-lat", "--two-contexts"].map(String::from).into();
        assert!(parse(&a).unwrap_err().contains("--threads"));
        assert!(p("write-bw --two-contexts").two_contexts);
    }

    #[test]
    fn destroy_storm_options() {
        let o = p("destroy-storm");
        assert_eq!(o.test, Test::DestroyStorm);
        assert_eq!((o.iters, o.rounds, o.warmup), (10000, 1, 200));
        assert_eq!(o.storms, DEFAULT_STORMS);
        let o = p("destroy-storm -d rxe0 -x 1 -n 500 --storm=qp,none,srq,pd --rounds 3 --warmup 0");
        assert_eq!(o.storms, [Storm::Qp, Storm::None, Storm::Srq, Storm::Pd]);
        assert_eq!((o.iters, o.rounds, o.warmup), (500, 3, 0));
        assert_eq!((o.device.as_deref(), o.gid_index), (Some("rxe0"), 1));
        let bad = |s: &str| {
            let v: Vec<String> = s.split_whitespace().map(String::from).collect();
            parse(&v).unwrap_err()
        };
        assert!(bad("destroy-storm --storm cq,mr").contains("'mr'"));
        assert!(bad("destroy-storm --rounds 0").contains("positive"));
        // The storm's options belong to destroy-storm only.
        assert!(bad("write-lat --storm cq").contains("unknown option"));
    }
}
