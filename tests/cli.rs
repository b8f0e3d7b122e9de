//! The `uverbs` CLI as a shell sees it: `--help` on every subcommand, the
//! version, and the exit statuses the README documents (0 success; a
//! subcommand that mirrors an rdma-core tool exits as that tool does on a
//! usage error, so scripts written for rdma-core keep working; the others
//! and the dispatcher exit 2), and a closed stdout pipe ending the process
//! quietly. None of this needs a device.

use std::process::{Command, Output};

fn uverbs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uverbs"))
        .args(args)
        .env_remove("UVERBS_TEST_DEVICE")
        .output()
        .expect("run the uverbs binary")
}

/// Every subcommand, with its status on an unknown option and what its
/// usage text starts with.
const SUBCOMMANDS: &[(&str, i32, &str)] = &[
    // ibv_asyncwatch: usage() then return 1.
    ("asyncwatch", 1, "Usage:"),
    // ibv_devinfo: usage() then return -1.
    ("devinfo", 255, "Usage: uverbs devinfo"),
    ("devx-watch", 1, "Usage: uverbs devx-watch"),
    ("perf", 2, "Usage: uverbs perf"),
    // ibv_*_pingpong: usage() then return 1.
    ("rc-pingpong", 1, "Usage:"),
    ("uc-pingpong", 1, "Usage:"),
    ("ud-pingpong", 1, "Usage:"),
    ("srq-pingpong", 1, "Usage:"),
    // rping: usage() then ret = EINVAL.
    ("rping", 22, "rping -s"),
];

#[test]
fn every_subcommand_has_help_on_stdout_and_exits_zero() {
    let top = uverbs(&["--help"]);
    assert_eq!(top.status.code(), Some(0));
    let listing = String::from_utf8_lossy(&top.stdout);
    for (name, _, usage) in SUBCOMMANDS {
        assert!(
            listing.lines().any(|l| l.trim_start().starts_with(name)),
            "`uverbs --help` does not list {name}:\n{listing}"
        );
        for flag in ["--help", "-h"] {
            let out = uverbs(&[name, flag]);
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(0), "uverbs {name} {flag}: {out:?}");
            assert!(text.starts_with(usage), "uverbs {name} {flag}:\n{text}");
            assert!(out.stderr.is_empty(), "uverbs {name} {flag}: {out:?}");
        }
    }
    // No subcommand is missing from the table above.
    let listed = listing
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .count();
    assert_eq!(listed, SUBCOMMANDS.len(), "{listing}");
}

#[test]
fn unknown_options_fail_with_the_documented_status() {
    for (name, status, usage) in SUBCOMMANDS {
        let out = uverbs(&[name, "--no-such-option"]);
        assert_eq!(out.status.code(), Some(*status), "uverbs {name}: {out:?}");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            said.contains("--no-such-option") || said.starts_with(usage),
            "uverbs {name} says nothing useful:\n{said}"
        );
    }
}

#[test]
fn the_dispatcher_exits_two_on_misuse_and_prints_the_version() {
    let none = uverbs(&[]);
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).starts_with("Usage: uverbs"));
    let unknown = uverbs(&["frobnicate"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown command 'frobnicate'"));
    let v = uverbs(&["--version"]);
    assert_eq!(v.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        format!("uverbs {}", env!("CARGO_PKG_VERSION"))
    );
}

/// A reader that has gone (`uverbs ... | head`): the process ends quietly
/// with 141, the status a shell gives a tool that SIGPIPE ended, instead of
/// panicking on EPIPE (Rust runs programs with SIGPIPE ignored).
#[test]
fn a_closed_stdout_pipe_ends_the_process_quietly() {
    let (read_end, write_end) = nix::unistd::pipe().expect("pipe");
    drop(read_end);
    let out = Command::new(env!("CARGO_BIN_EXE_uverbs"))
        .arg("--version")
        .stdout(std::process::Stdio::from(write_end))
        .output()
        .expect("run the uverbs binary");
    assert_eq!(out.status.code(), Some(141), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The commands print their results with `out!` (above), never `println!`,
/// which panics when stdout is a closed pipe.
#[test]
fn the_cli_prints_through_out() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin");
    let mut dirs = vec![root];
    let mut files = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src/bin") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files += 1;
                let text = std::fs::read_to_string(&path).expect("read a source file");
                for (i, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or("");
                    assert!(
                        !code.replace("eprintln!", "").contains("println!"),
                        "{}:{}: println! in the CLI (use out!): {line}",
                        path.display(),
                        i + 1
                    );
                }
            }
        }
    }
    assert!(files > 10, "found only {files} source files under src/bin");
}
