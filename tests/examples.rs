//! The examples as a user runs them, on a host without RDMA hardware:
//! `--help` and `-h` print the usage on stdout and exit 0, an unknown
//! option or a bad argument exits 2 with the usage on stderr, a failure is
//! one `error: MESSAGE` line (the error's `Display`, never a `Debug` dump)
//! with status 1, and every example that needs a device runs to completion
//! on a device model (`--model`, `UVERBS_MODEL`) and prints what it does on
//! a device (`examples/common/cli.rs`). The device tests run the same
//! programs on rxe (`tests/device/`: `example_*`, `async_examples_run`,
//! `cm_examples_*`).
//!
//! The programs are the ones cargo built: `cargo test` builds every example
//! (the tokio ones only with `--features tokio`, and then this test runs
//! them too; `smol_cq_events` with `stream`, which the crate's own tests
//! turn on) into `target/<profile>/examples`, beside the `deps` directory
//! of this test's binary; `UVERBS_EXAMPLES_DIR` names another directory.
//! Run alone (`cargo test --test examples`), cargo does not build the
//! examples: `cargo build --examples` first.

use std::{
    io::Read,
    path::PathBuf,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

/// Every example, and the feature it needs ("": none).
const EXAMPLES: &[(&str, &str)] = &[
    ("async_cm", "tokio"),
    ("async_cq_events", "tokio"),
    ("async_event", ""),
    ("async_event_nonblocking", ""),
    ("buffer_pool", ""),
    ("cm_client", ""),
    ("cm_server", ""),
    ("cq_events", ""),
    ("cq_events_nonblocking", ""),
    ("devx_events", ""),
    ("list_devices", ""),
    ("rc_loopback", ""),
    ("smol_cq_events", "stream"),
    ("typed_post", ""),
];

/// The rdma_cm examples: no model plays rdma_cm.
const NO_MODEL: &[&str] = &["async_cm", "cm_client", "cm_server"];

/// The examples this build has (those that need a feature with it).
fn built() -> impl Iterator<Item = &'static str> {
    EXAMPLES
        .iter()
        .filter(|(_, feature)| match *feature {
            "tokio" => cfg!(feature = "tokio"),
            "stream" => cfg!(feature = "stream"),
            _ => true,
        })
        .map(|(name, _)| *name)
}

fn path(name: &str) -> PathBuf {
    let dir = match std::env::var_os("UVERBS_EXAMPLES_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => std::env::current_exe()
            .expect("this test's path")
            .parent()
            .expect("its directory")
            .join("../examples"),
    };
    let p = dir.join(name);
    assert!(
        p.is_file(),
        "example {} not found: `cargo test` builds the examples; with `cargo test --test \
         examples` alone, run `cargo build --examples` first (or set UVERBS_EXAMPLES_DIR)",
        p.display()
    );
    p
}

/// Runs example `name` with `args` (and `env`), killing it after 60 s.
fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(path(name));
    cmd.args(args)
        .env_remove("UVERBS_MODEL")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
    // Read both pipes on threads, so a chatty child never blocks on them.
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the example") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name} {args:?} still ran after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs an example that must succeed; returns its stdout.
fn success(name: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = run(name, args, env);
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{name} {args:?}:\n{so}\nstderr:\n{se}"
    );
    assert!(se.is_empty(), "{name} {args:?} wrote to stderr:\n{se}");
    so
}

/// Asserts `stderr` is one readable `error: ...` line: the `Display` of an
/// error, not its `Debug` (`Error { op: .., errno: Some(..) }`, `Os {`).
fn assert_display_error(what: &str, stderr: &str) {
    assert!(stderr.starts_with("error: "), "{what}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
    for debug in ["Error {", "Os {", "kind:", "Some(", "Errno(", "\\\""] {
        assert!(
            !stderr.contains(debug),
            "{what} printed a Debug dump ({debug}): {stderr}"
        );
    }
}

#[test]
fn every_example_has_help_on_stdout_and_exits_zero() {
    for name in built() {
        for flag in ["--help", "-h"] {
            let help = success(name, &[flag], &[]);
            assert!(
                help.starts_with(&format!("Usage: {name} ")) || help == format!("Usage: {name}\n"),
                "{name} {flag}:\n{help}"
            );
            assert!(help.contains("-h, --help"), "{name} {flag}:\n{help}");
            assert!(
                help.contains("error: MESSAGE"),
                "{name} {flag} does not say how errors look:\n{help}"
            );
            let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
            if NO_MODEL.contains(&name) {
                assert!(
                    !help.contains("--model[=KIND]") && words.contains("no device model"),
                    "{name} {flag} must say it has no model:\n{help}"
                );
            } else {
                assert!(
                    help.contains("--model") && help.contains("UVERBS_MODEL"),
                    "{name} {flag}:\n{help}"
                );
            }
        }
    }
}

/// Usage errors exit 2 with a message and the usage on stderr, nothing on
/// stdout; the model never starts for them.
#[test]
fn usage_errors_exit_two_with_the_usage_on_stderr() {
    let mut cases: Vec<(&str, Vec<&str>, &str)> = Vec::new();
    for name in built() {
        cases.push((
            name,
            vec!["--no-such-option"],
            "unknown option \"--no-such-option\"",
        ));
    }
    for name in NO_MODEL.iter().filter(|n| built().any(|b| b == **n)) {
        cases.push((name, vec!["--model"], "has no device model"));
    }
    cases.extend([
        (
            "rc_loopback",
            vec!["--model=rxe"],
            "does not run on the rxe model",
        ),
        ("rc_loopback", vec!["--model=cx9"], "unknown model \"cx9\""),
        (
            "cq_events",
            vec!["--model", "mlx5_0", "many"],
            "MESSAGES \"many\"",
        ),
        (
            "list_devices",
            vec!["extra"],
            "unexpected argument \"extra\"",
        ),
        ("cm_client", vec![], "missing SERVER-IP"),
        ("cm_client", vec!["not-an-ip"], "SERVER-IP \"not-an-ip\""),
    ]);
    for (name, args, says) in cases {
        let out = run(name, &args, &[]);
        let (so, se) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{name} {args:?}:\n{so}{se}");
        assert!(so.is_empty(), "{name} {args:?} wrote to stdout:\n{so}");
        assert!(
            se.starts_with("error: ") && se.contains(says),
            "{name} {args:?}:\n{se}"
        );
        assert!(
            se.contains(&format!("Usage: {name}")),
            "{name} {args:?}:\n{se}"
        );
    }
    // An environment asking for a model the example lacks is refused too.
    let out = run("cm_server", &[], &[("UVERBS_MODEL", "mlx5")]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// The examples that need a device run on the mlx5 model (a software
/// ConnectX that executes their work requests) and print what they print
/// on rxe in the guest.
#[test]
fn the_device_examples_run_on_the_mlx5_model() {
    let out = success("rc_loopback", &["--model"], &[]);
    assert!(out.contains("\"hello, RDMA\" (11 bytes)"), "{out}");
    let out = success("buffer_pool", &["--model", "mlx5_0", "3"], &[]);
    assert!(out.contains("message 2 through a pooled buffer"), "{out}");
    assert!(
        out.contains("3 messages; 12 of 16 buffers free, 4 posted"),
        "{out}"
    );
    let out = success("typed_post", &["--model", "mlx5_0", "5"], &[]);
    assert!(
        out.contains(
            "mlx5: 5 RDMA writes and a SEND in one session; the peer got 4 bytes \
                      with immediate data 5 and slots [0, 1, 2, 3, 4]"
        ),
        "{out}"
    );
    for name in ["cq_events", "cq_events_nonblocking"] {
        let out = success(name, &["--model", "mlx5_0", "6"], &[]);
        assert!(out.contains("6 messages, 12 completions"), "{name}: {out}");
    }
    if cfg!(feature = "tokio") {
        let out = success("async_cq_events", &["--model=mlx5", "mlx5_0", "6"], &[]);
        assert!(out.contains("by hand: 6 messages, 12 completions"), "{out}");
        assert!(out.contains("AsyncCq: 6 messages, 12 completions"), "{out}");
    }
    if cfg!(feature = "stream") {
        let out = success("smol_cq_events", &["--model=mlx5", "mlx5_0", "6"], &[]);
        assert!(out.contains("by hand: 6 messages, 12 completions"), "{out}");
        assert!(
            out.contains("AsyncCq on smol: 6 messages, 12 completions"),
            "{out}"
        );
    }
    let out = success("list_devices", &["--model"], &[]);
    assert!(out.starts_with("mlx5_0 (uverbs0, node GUID "), "{out}");
    assert!(
        out.contains("  provider mlx5, fw 16.35.2000, 1 port(s)"),
        "{out}"
    );
    assert!(
        out.contains("  port 1: Active, Ethernet, active MTU 1024"),
        "{out}"
    );
    assert!(out.contains("::ffff:192.0.2.1 RoceV2"), "{out}");
}

/// The model plays a port going down and up; the async event examples
/// print both events with their port.
#[test]
fn the_async_event_examples_see_the_model_port_go_down_and_up() {
    for name in ["async_event", "async_event_nonblocking"] {
        let out = success(name, &["--model", "mlx5_0", "2"], &[]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{name}: {out}");
        assert!(lines[0].starts_with("mlx5_0: "), "{name}: {out}");
        assert!(
            lines[1].contains("PORT_ERR (10) on port 1"),
            "{name}: {out}"
        );
        assert!(
            lines[2].contains("PORT_ACTIVE (9) on port 1"),
            "{name}: {out}"
        );
    }
    let out = success("async_event", &["rxe0", "2"], &[("UVERBS_MODEL", "rxe")]);
    assert!(out.starts_with("rxe0: waiting for async events"), "{out}");
    assert!(
        out.contains("event PORT_ERR (10) on port 1: port error"),
        "{out}"
    );
    assert!(
        out.contains("event PORT_ACTIVE (9) on port 1: port active"),
        "{out}"
    );
}

/// DevX on the model: the CQ the example builds from PRM commands is
/// accepted by the model's firmware, and its port changes arrive.
#[test]
fn devx_events_runs_on_the_mlx5_model() {
    let out = success("devx_events", &["--model", "mlx5_0", "1"], &[]);
    assert!(
        out.starts_with("mlx5_0: DevX channel ready (CQ 0x"),
        "{out}"
    );
    assert!(
        out.contains("cookie 1 port change (type 0x09, sub-type 1)"),
        "{out}"
    );
    assert!(
        out.contains("cookie 1 port change (type 0x09, sub-type 4)"),
        "{out}"
    );
}

/// `UVERBS_MODEL` selects a model as `--model=KIND` does.
#[test]
fn the_environment_selects_the_model() {
    let out = success("list_devices", &[], &[("UVERBS_MODEL", "rxe")]);
    assert!(out.starts_with("rxe0 (uverbs0, "), "{out}");
    assert!(out.contains("  provider rxe, "), "{out}");
    let out = success(
        "list_devices",
        &["--model=mlx5"],
        &[("UVERBS_MODEL", "rxe")],
    );
    assert!(out.starts_with("mlx5_0 (uverbs0, "), "{out}");
}

/// A failure is one `error: MESSAGE` line with status 1: on the model, a
/// device that is not there; on this host's kernel, a device name nobody
/// has (the message names it, or says the host has no uverbs device).
#[test]
fn failures_print_the_error_with_display_and_exit_one() {
    let out = run("rc_loopback", &["--model", "mlx5_9"], &[]);
    let se = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        se,
        "error: find RDMA device failed: no RDMA device named \"mlx5_9\"; available: mlx5_0\n"
    );
    let bogus = "uverbs_no_such_device";
    for name in built().filter(|n| !NO_MODEL.contains(n) && *n != "list_devices") {
        let out = run(name, &[bogus], &[]);
        let (so, se) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{name}:\n{so}{se}");
        assert_display_error(name, &se.replace(&format!("{bogus:?}"), "DEV"));
    }
}
