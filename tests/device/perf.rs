//! `uverbs perf` (the benchmark behind `scripts/bench.sh`) against the real
//! kernel: each test runs, its report has perftest's shape with figures
//! that make sense, and the latency tests run side B in a second process
//! (reaped, its figures reported with `-B`) or, with `--threads`, in a
//! thread. Small iteration counts: this checks behaviour, not speed.

use std::process::{Command, Output};

use crate::{test_device, test_env};

fn uverbs() -> Command {
    let bin = std::env::var_os("UVERBS_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_uverbs").into());
    Command::new(bin)
}

fn perf(args: &[&str]) -> Output {
    let gid: u8 = test_env("UVERBS_TEST_GID_INDEX");
    let out = uverbs()
        .arg("perf")
        .args(args)
        .args(["-d", &test_device(), "-x", &gid.to_string()])
        .output()
        .expect("run uverbs perf");
    out
}

fn stdout_of(args: &[&str]) -> String {
    let out = perf(args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "uverbs perf {args:?} failed: {}\nstdout:\n{text}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The numeric rows after the `#bytes` header line.
fn rows(text: &str) -> Vec<Vec<f64>> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"));
    assert!(lines.next().is_some(), "no #bytes header in:\n{text}");
    lines
        .take_while(|l| !l.trim_start().starts_with("---"))
        .map(|l| {
            l.split_whitespace()
                .map(|f| {
                    f.parse()
                        .unwrap_or_else(|_| panic!("bad figure {f:?} in {l:?}"))
                })
                .collect()
        })
        .collect()
}

/// A latency row: bytes, iterations, then t_min <= t_typical <= t_max
/// (perftest's t_max is the third largest sample), all positive.
fn check_lat_row(r: &[f64], bytes: f64, iters: f64) {
    assert_eq!(r.len(), 9, "{r:?}");
    assert_eq!((r[0], r[1]), (bytes, iters), "{r:?}");
    let (min, max, typical, avg) = (r[2], r[3], r[4], r[5]);
    assert!(min > 0.0 && min <= typical && typical <= max, "{r:?}");
    assert!(min <= avg, "{r:?}");
}

#[test]
fn write_latency_runs_side_b_in_a_second_process() {
    let text = stdout_of(&["write-lat", "-n", "300", "-B"]);
    assert!(text.contains("side B in a second process"), "{text}");
    let rows = rows(&text);
    // -B: A's row, then B's (from the child's timestamps and clock).
    assert_eq!(rows.len(), 2, "{text}");
    for r in &rows {
        check_lat_row(r, 2.0, 300.0);
    }
}

#[test]
fn send_latency_runs_in_both_modes() {
    for (mode, how) in [
        (None, "side B in a second process"),
        (Some("--threads"), "side B a thread of this process"),
    ] {
        let mut args = vec!["send-lat", "-n", "300", "-s", "64"];
        args.extend(mode);
        let text = stdout_of(&args);
        assert!(text.contains(how), "{args:?}: {text}");
        let rows = rows(&text);
        assert_eq!(rows.len(), 1, "{text}");
        check_lat_row(&rows[0], 64.0, 300.0);
    }
}

#[test]
fn latency_without_inline_reports_max_inline_zero() {
    let text = stdout_of(&["write-lat", "-n", "100", "-I", "0"]);
    assert!(text.contains("Max inline data : 0[B]"), "{text}");
    check_lat_row(&rows(&text)[0], 2.0, 100.0);
}

#[test]
fn write_bandwidth_reports_a_positive_rate() {
    let text = stdout_of(&["write-bw", "-n", "200", "-s", "4096"]);
    let rows = rows(&text);
    assert_eq!(rows.len(), 1, "{text}");
    let r = &rows[0];
    // bytes, iterations, BW peak, BW average (MB/s), MsgRate (Mpps).
    assert_eq!(r.len(), 5, "{r:?}");
    assert_eq!((r[0], r[1]), (4096.0, 200.0), "{r:?}");
    assert!(r[2] > 0.0 && r[3] > 0.0 && r[4] > 0.0, "{r:?}");
    // The message rate is the average bandwidth in messages.
    let mpps = r[3] * 1_048_576.0 / 4096.0 / 1e6;
    assert!((r[4] - mpps).abs() <= 0.01 * mpps + 1e-6, "{r:?}: {mpps}");
}

#[test]
fn a_failing_side_fails_the_run_without_hanging() {
    // Both processes fail to find GID index 200; the parent reports its
    // error, reaps the child and exits 1 (a hang would time the test out).
    let out = uverbs()
        .args([
            "perf",
            "write-lat",
            "-n",
            "100",
            "-d",
            &test_device(),
            "-x",
            "200",
        ])
        .output()
        .expect("run uverbs perf");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("GID index 200"), "{err}");
}
