//! `uverbs devinfo` against rdma-core's `ibv_devinfo`, field by field.
//!
//! This file is a module of the device test binary: `tests/device/main.rs`
//! declares `mod devinfo;` and imports
//! `uverbs_test_support::devinfo_compare` (tests/support/), so
//! `crate::devinfo_compare` resolves.
//!
//! Environment:
//! - `UVERBS_TEST_DEVICE` (required): the device to inspect, e.g. `rxe0`.
//!   These tests run only in the test guest or on real hardware; without the
//!   variable they fail instead of skipping.
//! - `UVERBS_BIN`: path of the `uverbs` CLI (in the guest); defaults to the
//!   binary Cargo built next to this test.
//! - `UVERBS_IBV_DEVINFO`: the reference tool; defaults to `ibv_devinfo` on `PATH`.

use std::{
    env,
    path::PathBuf,
    process::{Command, Output},
};

use crate::devinfo_compare::*;

/// Keys `ibv_devinfo` prints that `uverbs devinfo` knowingly does not.
/// Keep it empty: every entry is a gap in what the library reports.
const KNOWN_UNPRINTED: &[&str] = &[];

fn test_device() -> String {
    env::var("UVERBS_TEST_DEVICE").unwrap_or_else(|_| {
        panic!(
            "UVERBS_TEST_DEVICE is not set: the device tests need an RDMA device \
             (run them in the rxe guest with guest/run-guest.sh, or set it to a \
             hardware device such as mlx5_0)"
        )
    })
}

fn uverbs_bin() -> PathBuf {
    env::var_os("UVERBS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_uverbs")))
}

fn ibv_devinfo_bin() -> PathBuf {
    env::var_os("UVERBS_IBV_DEVINFO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("ibv_devinfo"))
}

/// Runs a command; panics unless it exits 0. Returns stdout.
fn run(program: PathBuf, args: &[&str]) -> String {
    let shown = format!("{} {}", program.display(), args.join(" "));
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(&program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{shown}`: {e}"));
    let stdout =
        String::from_utf8(stdout).unwrap_or_else(|e| panic!("`{shown}`: stdout is not UTF-8: {e}"));
    let stderr = String::from_utf8_lossy(&stderr);
    assert!(
        status.success(),
        "`{shown}` failed with {status}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    );
    stdout
}

/// Runs both tools with `args` and fails on any difference.
fn assert_same_output(args: &[&str]) {
    let expected = run(ibv_devinfo_bin(), args);
    let mut ours_args = vec!["devinfo"];
    ours_args.extend_from_slice(args);
    let actual = run(uverbs_bin(), &ours_args);

    let both = || {
        format!(
            "--- ibv_devinfo {0} ---\n{expected}--- uverbs devinfo {0} ---\n{actual}",
            args.join(" ")
        )
    };
    let expected_entries = parse(&expected);
    assert!(
        !expected_entries.is_empty(),
        "ibv_devinfo printed nothing\n{}",
        both()
    );
    let comparison = compare(&expected_entries, &parse(&actual));
    if let Err(report) = comparison.check(KNOWN_UNPRINTED) {
        panic!(
            "uverbs devinfo {} differs from ibv_devinfo:\n{report}\n{}",
            args.join(" "),
            both()
        );
    }
    // With nothing allowed to be missing, the text must be identical, tabs included.
    if KNOWN_UNPRINTED.is_empty() {
        if let Some((line, e, a)) = first_line_difference(&expected, &actual) {
            panic!(
                "same fields but different text at line {line}:\n  ibv_devinfo: {e}\n  uverbs:      {a}\n{}",
                both()
            );
        }
    }
}

#[test]
fn devinfo_matches_ibv_devinfo() {
    let dev = test_device();
    assert_same_output(&["-v", "-d", &dev]);
}

#[test]
fn devinfo_brief_matches_ibv_devinfo() {
    let dev = test_device();
    assert_same_output(&["-d", &dev]);
}

#[test]
fn devinfo_port_selection_matches_ibv_devinfo() {
    let dev = test_device();
    assert_same_output(&["-v", "-d", &dev, "-i", "1"]);
}

#[test]
fn devinfo_list_matches() {
    let dev = test_device();
    let expected = run(ibv_devinfo_bin(), &["-l"]);
    assert!(
        expected.lines().any(|l| l.trim() == dev),
        "ibv_devinfo -l does not list {dev}:\n{expected}"
    );
    assert_same_output(&["-l"]);
}

#[test]
fn devinfo_unknown_device_fails_like_ibv_devinfo() {
    let _ = test_device();
    let name = "no_such_device_0";
    let reference = Command::new(ibv_devinfo_bin())
        .args(["-d", name])
        .output()
        .expect("run ibv_devinfo");
    let ours = Command::new(uverbs_bin())
        .args(["devinfo", "-d", name])
        .output()
        .expect("run uverbs");
    assert_eq!(ours.status.code(), reference.status.code(), "exit status");
    assert_eq!(
        String::from_utf8_lossy(&ours.stderr),
        String::from_utf8_lossy(&reference.stderr),
        "stderr"
    );
    assert!(ours.stdout.is_empty() && reference.stdout.is_empty());
}
