//! `uverbs`: command-line tools over the uverbs library.
//!
//! Subcommands:
//! - `devinfo`: prints device and port attributes like rdma-core's `ibv_devinfo`.
//! - `rc-pingpong`, `uc-pingpong`, `ud-pingpong`, `srq-pingpong`: rdma-core's
//!   `ibv_*_pingpong`, wire-compatible with them.
//! - `perf`: perftest's write/send latency and write bandwidth, in one process.
//! - `devx-watch`: an mlx5 device's DevX events, as they come.
//!
//! Argument parsing is hand-written (no dependencies): `main` picks the
//! subcommand and hands it the remaining arguments; each subcommand parses
//! its own options and returns the process exit status.

/// `println!` for the commands' results: when stdout is a pipe whose
/// reader has gone (`uverbs perf micro --fake | head`) the process ends
/// quietly with status 141, as a shell reports a tool that SIGPIPE ended
/// (rdma-core's tools end that way). `println!` would panic instead: Rust
/// starts programs with SIGPIPE ignored, so the write fails with EPIPE.
/// Another write error is reported on stderr and ends the process with 1.
macro_rules! out {
    ($($arg:tt)+) => {
        $crate::stdout_line(::std::format_args!($($arg)+))
    };
}

mod asyncwatch;
mod c_num;
mod devinfo;
mod devx_watch;
#[cfg(test)]
mod on_mlx5;
mod perf;
mod pingpong;
mod rping;
mod transport;

use std::{
    io::{self, Write},
    process::ExitCode,
};

/// One subcommand: its name, a one-line summary, and its entry point.
struct Command {
    name: &'static str,
    summary: &'static str,
    run: fn(&[String]) -> u8,
}

const COMMANDS: &[Command] = &[
    Command {
        name: "asyncwatch",
        summary: "print the device's async events (like ibv_asyncwatch)",
        run: asyncwatch::main,
    },
    Command {
        name: "devinfo",
        summary: "print device and port attributes (like ibv_devinfo)",
        run: devinfo::main,
    },
    Command {
        name: "devx-watch",
        summary: "print an mlx5 device's DevX events (unaffiliated: port, module)",
        run: devx_watch::main,
    },
    Command {
        name: "perf",
        summary: "write-lat, send-lat, write-bw benchmarks (like perftest's ib_*), destroy-storm",
        run: perf::main,
    },
    Command {
        name: "rc-pingpong",
        summary: "RC send/recv ping-pong (like ibv_rc_pingpong)",
        run: pingpong::rc_main,
    },
    Command {
        name: "uc-pingpong",
        summary: "UC send/recv ping-pong (like ibv_uc_pingpong)",
        run: pingpong::uc_main,
    },
    Command {
        name: "ud-pingpong",
        summary: "UD send/recv ping-pong (like ibv_ud_pingpong)",
        run: pingpong::ud_main,
    },
    Command {
        name: "srq-pingpong",
        summary: "RC ping-pong over a shared receive queue (like ibv_srq_pingpong)",
        run: pingpong::srq_main,
    },
    Command {
        name: "rping",
        summary: "RDMA ping over rdma_cm, wire-compatible with rdma-core's rping",
        run: rping::main,
    },
];

fn usage(out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "Usage: uverbs <command> [options]")?;
    writeln!(out)?;
    writeln!(out, "Commands:")?;
    for c in COMMANDS {
        writeln!(out, "  {:<12} {}", c.name, c.summary)?;
    }
    writeln!(out)?;
    writeln!(out, "Options:")?;
    writeln!(out, "  -h, --help     print this help")?;
    writeln!(out, "  -V, --version  print the version")?;
    writeln!(out)?;
    writeln!(
        out,
        "`uverbs <command> --help` describes a command's options."
    )
}

/// Writes one line to stdout for [`out!`].
fn stdout_line(args: std::fmt::Arguments<'_>) {
    let mut o = io::stdout().lock();
    let res = o.write_fmt(args).and_then(|()| o.write_all(b"\n"));
    match res {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(141),
        Err(e) => {
            eprintln!("uverbs: writing to stdout: {e:#}");
            std::process::exit(1);
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(first) = args.first() else {
        let _ = usage(&mut io::stderr());
        return ExitCode::from(2);
    };
    match first.as_str() {
        "-h" | "--help" | "help" => {
            let _ = usage(&mut io::stdout());
            ExitCode::SUCCESS
        }
        "-V" | "--version" => {
            out!("uverbs {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        name => match COMMANDS.iter().find(|c| c.name == name) {
            Some(c) => ExitCode::from((c.run)(&args[1..])),
            None => {
                eprintln!("uverbs: unknown command '{name}'");
                let _ = usage(&mut io::stderr());
                ExitCode::from(2)
            }
        },
    }
}
