//! `uverbs asyncwatch [-d DEV]`: prints every async event of a device, as
//! rdma-core v44's `ibv_asyncwatch` (`libibverbs/examples/asyncwatch.c`)
//! prints it:
//!
//! ```text
//! rxe0: async event FD 4
//!   event_type IBV_EVENT_PORT_ERR (10), port 1
//! ```
//!
//! Port and device events are named; every other type (CQ, QP, SRQ, WQ and
//! unknown types) is printed as `unexpected`, as the C tool does. The C tool
//! prints `element.port_num` for every event, which for CQ/QP/SRQ events is
//! the low half of a pointer; this prints 0 for those instead (and 0 for
//! `DEVICE_FATAL`, whose element the kernel sends as 0). Output is flushed
//! per line (the C tool forces line buffering). Runs until killed, or exits 1
//! when reading an event fails (e.g. the device was removed).

use std::io::{self, Write};

use uverbs::{AsyncEventType as T, Context, DeviceInfo};

const PROG: &str = "uverbs asyncwatch";

fn usage(out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "Usage:")?;
    writeln!(out, "  {PROG}            start an asyncwatch process")?;
    writeln!(out)?;
    writeln!(out, "Options:")?;
    writeln!(
        out,
        "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)"
    )?;
    writeln!(out, "  -h, --help             print a help text and exit")
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Action {
    Help,
    Watch(Option<String>),
}

/// Parses like `getopt_long(argc, argv, "d:h", ...)`; `Err(status)` after
/// printing the usage (as the C tool does on a bad option).
fn parse_args(args: &[String], err: &mut dyn Write) -> Result<Action, i32> {
    let mut dev = None;
    let mut i = 0;
    let bad = |err: &mut dyn Write, msg: String| {
        let _ = writeln!(err, "{PROG}: {msg}");
        Err(1)
    };
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            // getopt_long accepts unambiguous prefixes.
            if !name.is_empty() && "ib-dev".starts_with(name) {
                match value.or_else(|| {
                    i += 1;
                    args.get(i - 1).cloned()
                }) {
                    Some(v) => dev = Some(v),
                    None => return bad(err, "option '--ib-dev' requires an argument".into()),
                }
            } else if !name.is_empty() && "help".starts_with(name) {
                return Ok(Action::Help);
            } else {
                return bad(err, format!("unrecognized option '--{name}'"));
            }
            continue;
        }
        let Some(shorts) = a.strip_prefix('-').filter(|s| !s.is_empty()) else {
            continue; // operands are ignored, as getopt leaves them
        };
        // Both options end the cluster: -h acts at once, -d takes the rest
        // (or the next argument) as its value.
        let mut chars = shorts.chars();
        match chars.next() {
            Some('h') => return Ok(Action::Help),
            Some('d') => {
                let rest = chars.as_str();
                if !rest.is_empty() {
                    dev = Some(rest.to_string());
                } else if let Some(v) = args.get(i) {
                    dev = Some(v.clone());
                    i += 1;
                } else {
                    return bad(err, "option requires an argument -- 'd'".into());
                }
            }
            Some(other) => return bad(err, format!("invalid option -- '{other}'")),
            None => {}
        }
    }
    Ok(Action::Watch(dev))
}

/// `event_name_str` of asyncwatch.c.
fn event_name(t: T) -> &'static str {
    match t {
        T::DEVICE_FATAL => "IBV_EVENT_DEVICE_FATAL",
        T::PORT_ACTIVE => "IBV_EVENT_PORT_ACTIVE",
        T::PORT_ERR => "IBV_EVENT_PORT_ERR",
        T::LID_CHANGE => "IBV_EVENT_LID_CHANGE",
        T::PKEY_CHANGE => "IBV_EVENT_PKEY_CHANGE",
        T::SM_CHANGE => "IBV_EVENT_SM_CHANGE",
        T::CLIENT_REREGISTER => "IBV_EVENT_CLIENT_REREGISTER",
        T::GID_CHANGE => "IBV_EVENT_GID_CHANGE",
        _ => "unexpected",
    }
}

/// One event line.
fn event_line(t: T, port: u8) -> String {
    format!(
        "  event_type {} ({}), port {}",
        event_name(t),
        t.0 as i32,
        port
    )
}

/// The device `-d` names, or the first one.
fn pick(list: Vec<DeviceInfo>, name: Option<&str>) -> Option<DeviceInfo> {
    match name {
        Some(n) => list.into_iter().find(|d| d.name == n),
        None => list.into_iter().next(),
    }
}

pub fn main(args: &[String]) -> u8 {
    let mut err = io::stderr();
    let dev = match parse_args(args, &mut err) {
        Ok(Action::Help) => {
            let _ = usage(&mut io::stdout());
            return 0;
        }
        Ok(Action::Watch(dev)) => dev,
        Err(code) => {
            let _ = usage(&mut io::stdout());
            return code as u8;
        }
    };
    let list = match uverbs::devices_with(&crate::transport::kernel()) {
        Ok(l) => l,
        Err(e) => {
            let _ = writeln!(err, "Failed to get IB devices list: {e:#}");
            return 1;
        }
    };
    let Some(info) = pick(list, dev.as_deref()) else {
        let _ = writeln!(err, "IB device {} not found", dev.as_deref().unwrap_or(""));
        return 1;
    };
    let name = info.name.clone();
    let ctx = match Context::open_device(crate::transport::kernel(), info) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(err, "Couldn't get context for {name}: {e:#}");
            return 1;
        }
    };
    use std::os::fd::AsRawFd;
    let mut out = io::stdout();
    let _ = writeln!(out, "{name}: async event FD {}", ctx.async_fd().as_raw_fd());
    let _ = out.flush();
    loop {
        let ev = match ctx.get_async_event() {
            Ok(ev) => ev,
            Err(e) => {
                let _ = writeln!(err, "{PROG}: {e:#}");
                return 1;
            }
        };
        let line = event_line(ev.event_type(), ev.port().unwrap_or(0));
        ev.ack();
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            return 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_parse_like_getopt() {
        let mut e = Vec::new();
        assert_eq!(parse_args(&args(&[]), &mut e), Ok(Action::Watch(None)));
        for a in [
            &["-d", "rxe0"][..],
            &["-drxe0"],
            &["--ib-dev", "rxe0"],
            &["--ib-dev=rxe0"],
            &["--ib=rxe0"],
        ] {
            assert_eq!(
                parse_args(&args(a), &mut e),
                Ok(Action::Watch(Some("rxe0".into()))),
                "{a:?}"
            );
        }
        assert_eq!(parse_args(&args(&["-h"]), &mut e), Ok(Action::Help));
        assert_eq!(parse_args(&args(&["--help"]), &mut e), Ok(Action::Help));
        assert_eq!(parse_args(&args(&["-x"]), &mut e), Err(1));
        assert_eq!(parse_args(&args(&["-d"]), &mut e), Err(1));
    }

    #[test]
    fn lines_are_asyncwatch_c_lines() {
        assert_eq!(
            event_line(T::PORT_ERR, 1),
            "  event_type IBV_EVENT_PORT_ERR (10), port 1"
        );
        assert_eq!(
            event_line(T::GID_CHANGE, 1),
            "  event_type IBV_EVENT_GID_CHANGE (18), port 1"
        );
        assert_eq!(
            event_line(T::CQ_ERR, 0),
            "  event_type unexpected (0), port 0"
        );
        assert_eq!(event_line(T(77), 3), "  event_type unexpected (77), port 3");
    }
}
