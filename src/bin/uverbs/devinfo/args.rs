//! `uverbs devinfo` command line: getopt_long-compatible parsing and usage.
#![allow(unused_imports)]

use std::io::{self, Write};

use uverbs::{
    Context, DeviceAttr, DeviceInfo, Gid, GidEntry, GidType, LinkLayer, NodeType, PortAttr,
    PortState,
};

use super::*;
pub(super) use crate::c_num::strtol;

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// `-h`/`--help` (an addition: ibv_devinfo has no help option).
    Help,
    /// `-l`: list device names. Like getopt in the C tool, `-l` acts as soon
    /// as it is seen: options after it are not looked at.
    List,
    /// Print the devices' attributes.
    Show(Options),
}

#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Options {
    pub(super) device: Option<String>,
    /// 0: all ports.
    pub(super) port: u8,
    pub(super) verbose: bool,
}

/// A parse failure: the exit status, after the message and usage were printed.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Exit(pub(super) i32);

pub(super) fn usage(out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "Usage: {PROG}             print the ca attributes")?;
    writeln!(out)?;
    writeln!(out, "Options:")?;
    writeln!(
        out,
        "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)"
    )?;
    writeln!(
        out,
        "  -i, --ib-port=<port>   use port <port> of IB device (default all ports)"
    )?;
    writeln!(
        out,
        "  -l, --list             print only the IB devices names"
    )?;
    writeln!(
        out,
        "  -v, --verbose          print all the attributes of the IB device(s)"
    )?;
    writeln!(out, "  -h, --help             print this help")
}

/// Long options: name, short equivalent, whether it takes an argument.
pub(super) const LONG_OPTIONS: &[(&str, char, bool)] = &[
    ("ib-dev", 'd', true),
    ("ib-port", 'i', true),
    ("list", 'l', false),
    ("verbose", 'v', false),
    ("help", 'h', false),
];

/// Parses like `getopt_long(argc, argv, "d:i:lv", ...)`: bundled short
/// options (`-vd rxe0`), attached or separate arguments, `--name=value`,
/// unambiguous long-option prefixes, `--` ends the options, and operands
/// are ignored.
pub(super) fn parse_args(
    args: &[String],
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Action, Exit> {
    let mut opts = Options::default();
    let mut i = 0;
    let fail = |out: &mut dyn Write, err: &mut dyn Write, msg: String, code: i32| {
        let _ = writeln!(err, "{PROG}: {msg}");
        let _ = usage(out);
        Exit(code)
    };
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            break;
        }
        // Each element: (short option, its argument if it takes one).
        let mut found: Vec<(char, Option<String>)> = Vec::new();
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let exact = LONG_OPTIONS.iter().find(|o| o.0 == name);
            let matches: Vec<_> = LONG_OPTIONS
                .iter()
                .filter(|o| o.0.starts_with(name))
                .collect();
            let opt = match (exact, matches.as_slice()) {
                (Some(o), _) => *o,
                (None, [o]) => **o,
                (None, []) => {
                    return Err(fail(
                        out,
                        err,
                        format!("unrecognized option '--{name}'"),
                        EXIT_MINUS_ONE,
                    ))
                }
                (None, many) => {
                    let names: Vec<String> = many.iter().map(|o| format!("'--{}'", o.0)).collect();
                    let msg = format!(
                        "option '--{name}' is ambiguous; possibilities: {}",
                        names.join(" ")
                    );
                    return Err(fail(out, err, msg, EXIT_MINUS_ONE));
                }
            };
            let (full, short, takes_arg) = opt;
            let value = match (takes_arg, inline) {
                (true, Some(v)) => Some(v),
                (true, None) if i < args.len() => {
                    i += 1;
                    Some(args[i - 1].clone())
                }
                (true, None) => {
                    let msg = format!("option '--{full}' requires an argument");
                    return Err(fail(out, err, msg, EXIT_MINUS_ONE));
                }
                (false, Some(_)) => {
                    let msg = format!("option '--{full}' doesn't allow an argument");
                    return Err(fail(out, err, msg, EXIT_MINUS_ONE));
                }
                (false, None) => None,
            };
            found.push((short, value));
        } else if let Some(shorts) = arg.strip_prefix('-').filter(|s| !s.is_empty()) {
            for (pos, c) in shorts.char_indices() {
                let Some(&(_, _, takes_arg)) = LONG_OPTIONS.iter().find(|o| o.1 == c) else {
                    return Err(fail(
                        out,
                        err,
                        format!("invalid option -- '{c}'"),
                        EXIT_MINUS_ONE,
                    ));
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
                    return Err(fail(out, err, msg, EXIT_MINUS_ONE));
                };
                found.push((c, Some(value)));
                break;
            }
        } else {
            // An operand: ibv_devinfo ignores them.
            continue;
        }
        for (c, value) in found {
            match c {
                'd' => opts.device = value,
                'i' => {
                    // `strtol(optarg, NULL, 0)` into an int, rejected if <= 0,
                    // then passed on as a uint8_t.
                    let port = strtol(value.as_deref().unwrap_or("")) as i32;
                    if port <= 0 {
                        let _ = usage(out);
                        return Err(Exit(1));
                    }
                    opts.port = port as u8;
                }
                'v' => opts.verbose = true,
                'l' => return Ok(Action::List),
                'h' => return Ok(Action::Help),
                _ => unreachable!("option table and match disagree"),
            }
        }
    }
    Ok(Action::Show(opts))
}
