//! `uverbs {rc,uc,ud,srq}-pingpong` against rdma-core's `ibv_*_pingpong`
//! (v44 in the test guest), in both roles: each test starts a server, runs
//! the client towards `UVERBS_TEST_IP`, and checks that both exit 0, print
//! the same byte count, and that each side's `remote address` lines are the
//! other side's `local address` lines (QPN, PSN, GID).
//!
//! Environment: `UVERBS_TEST_DEVICE`, `UVERBS_TEST_GID_INDEX`,
//! `UVERBS_TEST_IP` (exported by the guest), `UVERBS_BIN` (our CLI; default
//! the one Cargo built), rdma-core's tools on `PATH`. Every child is killed
//! after [`TIMEOUT`], so a hang fails the test instead of blocking the run.

use std::{
    path::PathBuf,
    process::Command,
    thread,
    time::{Duration, Instant},
};

use crate::cabi_run::{finish, spawn, Out};
use crate::{test_device, test_env};

/// How long a server or client may run.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Iterations per run (small: rxe under TCG takes 100-300 us per iteration).
const ITERS: u64 = 200;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Ours,
    RdmaCore,
}

/// The command line of one side: our subcommand or rdma-core's tool.
fn tool(side: Side, transport: &str) -> Command {
    match side {
        Side::Ours => {
            let bin = std::env::var_os("UVERBS_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_uverbs")));
            let mut c = Command::new(bin);
            c.arg(format!("{transport}-pingpong"));
            c
        }
        Side::RdmaCore => Command::new(format!("ibv_{transport}_pingpong")),
    }
}

/// `(QPN, PSN, GID)` of each `local address` / `remote address` line.
fn addresses(stdout: &str, label: &str) -> Vec<(String, String, String)> {
    stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix(label))
        .map(|rest| {
            let field = |name: &str| {
                let start = rest
                    .find(name)
                    .unwrap_or_else(|| panic!("no {name} in {rest:?}"))
                    + name.len();
                rest[start..]
                    .split([',', ':'])
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string()
            };
            let gid = rest
                .split_once("GID ")
                .map(|(_, g)| g.trim().to_string())
                .unwrap_or_else(|| panic!("no GID in {rest:?}"));
            (field("QPN "), field("PSN "), gid)
        })
        .collect()
}

/// The byte count of `%lld bytes in %.2f seconds = %.2f Mbit/sec`, checking
/// that the `%d iters in ... usec/iter` line follows.
fn summary_bytes(who: &str, out: &Out) -> u64 {
    let lines: Vec<&str> = out.stdout.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.contains(" bytes in ") && l.ends_with(" Mbit/sec"))
        .unwrap_or_else(|| panic!("{who}: no bytes line in {out:#?}"));
    let iters = lines.get(i + 1).copied().unwrap_or("");
    assert!(
        iters.starts_with(&format!("{ITERS} iters in ")) && iters.ends_with(" usec/iter"),
        "{who}: no iters line after the bytes line: {out:#?}"
    );
    lines[i]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{who}: bad bytes line {:?}", lines[i]))
}

/// Runs `server` and `client` of `transport` on `port` with `extra`
/// options on both, checks the exchange, and returns (server, client).
fn pingpong(
    transport: &str,
    server: Side,
    client: Side,
    port: u16,
    extra: &[&str],
    msg_size: u64,
) -> (Out, Out) {
    let gid_index: u8 = test_env("UVERBS_TEST_GID_INDEX");
    let ip: String = test_env("UVERBS_TEST_IP");
    let args = |cmd: &mut Command| {
        cmd.args(["-d", &test_device()])
            .args(["-g", &gid_index.to_string()])
            .args(["-p", &port.to_string()])
            .args(["-n", &ITERS.to_string()])
            .args(extra);
    };
    let deadline = Instant::now() + TIMEOUT;
    let mut cmd = tool(server, transport);
    args(&mut cmd);
    let srv = spawn(&mut cmd);
    // The server listens once its device setup is done; until then the
    // client fails with "Couldn't connect": retry a bounded number of times.
    let mut attempts = 0;
    let cli = loop {
        attempts += 1;
        let mut cmd = tool(client, transport);
        args(&mut cmd);
        cmd.arg(&ip);
        let out = finish(spawn(&mut cmd), deadline);
        let refused = !out.ok() && out.stderr.contains("Couldn't connect");
        if !refused || attempts >= 40 || Instant::now() >= deadline {
            break out;
        }
        thread::sleep(Duration::from_millis(250));
    };
    let srv = finish(srv, deadline);
    let what = format!("{transport} {extra:?}: server {server:?}, client {client:?}");
    assert!(
        srv.ok() && cli.ok(),
        "{what}: both must exit 0 (client after {attempts} attempt(s))\n\
         server: {srv:#?}\nclient: {cli:#?}"
    );
    let (sb, cb) = (summary_bytes("server", &srv), summary_bytes("client", &cli));
    assert_eq!(sb, cb, "{what}: byte counts differ");
    assert_eq!(sb, msg_size * ITERS * 2, "{what}: unexpected byte count");
    let (s_local, s_remote) = (
        addresses(&srv.stdout, "local address:"),
        addresses(&srv.stdout, "remote address:"),
    );
    let (c_local, c_remote) = (
        addresses(&cli.stdout, "local address:"),
        addresses(&cli.stdout, "remote address:"),
    );
    assert!(!s_local.is_empty(), "{what}: server printed no address");
    assert_eq!(
        s_remote, c_local,
        "{what}: server's remote != client's local"
    );
    assert_eq!(
        c_remote, s_local,
        "{what}: client's remote != server's local"
    );
    for (_, _, gid) in s_local.iter().chain(&c_local) {
        assert_eq!(
            gid,
            &format!("::ffff:{ip}"),
            "{what}: GID of -g {gid_index}"
        );
    }
    (srv, cli)
}

#[test]
fn rc_ours_server_rdma_core_client() {
    pingpong("rc", Side::Ours, Side::RdmaCore, 18601, &[], 4096);
}

#[test]
fn rc_rdma_core_server_ours_client() {
    pingpong("rc", Side::RdmaCore, Side::Ours, 18602, &[], 4096);
}

#[test]
fn rc_events_ours_server_rdma_core_client() {
    pingpong("rc", Side::Ours, Side::RdmaCore, 18603, &["-e"], 4096);
}

#[test]
fn rc_events_rdma_core_server_ours_client() {
    pingpong("rc", Side::RdmaCore, Side::Ours, 18604, &["-e"], 4096);
}

/// 16-byte messages fit rxe's inline limit: both tools send them inline.
#[test]
fn rc_inline_rdma_core_server_ours_client() {
    pingpong("rc", Side::RdmaCore, Side::Ours, 18614, &["-s", "16"], 16);
}

/// `-N` (`use_new_send`): rdma-core posts through `ibv_wr_*`, ours through
/// a typed session (`start_wr`); both directions, and inline.
#[test]
fn rc_new_send_api_both_ways() {
    pingpong("rc", Side::Ours, Side::RdmaCore, 18615, &["-N"], 4096);
    pingpong(
        "rc",
        Side::RdmaCore,
        Side::Ours,
        18616,
        &["-N", "-s", "16"],
        16,
    );
}

#[test]
fn uc_ours_server_rdma_core_client() {
    // -c: the client marks each page, the server checks it.
    let (srv, _) = pingpong("uc", Side::Ours, Side::RdmaCore, 18605, &["-c"], 4096);
    assert!(!srv.stdout.contains("invalid data"), "{srv:#?}");
}

#[test]
fn uc_rdma_core_server_ours_client() {
    let (srv, _) = pingpong("uc", Side::RdmaCore, Side::Ours, 18606, &["-c"], 4096);
    assert!(!srv.stdout.contains("invalid data"), "{srv:#?}");
}

#[test]
fn ud_ours_server_rdma_core_client() {
    pingpong("ud", Side::Ours, Side::RdmaCore, 18607, &[], 1024);
}

#[test]
fn ud_rdma_core_server_ours_client() {
    pingpong("ud", Side::RdmaCore, Side::Ours, 18608, &[], 1024);
}

#[test]
fn ud_events_rdma_core_server_ours_client() {
    pingpong("ud", Side::RdmaCore, Side::Ours, 18609, &["-e"], 1024);
}

#[test]
fn srq_ours_server_rdma_core_client() {
    let (srv, _) = pingpong("srq", Side::Ours, Side::RdmaCore, 18610, &[], 4096);
    assert_eq!(addresses(&srv.stdout, "local address:").len(), 16);
}

#[test]
fn srq_rdma_core_server_ours_client() {
    pingpong("srq", Side::RdmaCore, Side::Ours, 18611, &[], 4096);
}

#[test]
fn srq_events_ours_server_rdma_core_client() {
    pingpong(
        "srq",
        Side::Ours,
        Side::RdmaCore,
        18612,
        &["-e", "-q", "4"],
        4096,
    );
}

/// `-o`, `-t`, `-j` need what the library lacks: they fail before any
/// connection, with a message, as rdma-core does on a device without them.
#[test]
fn rc_unsupported_options_fail_cleanly() {
    for opt in ["-o", "-t", "-j"] {
        let mut cmd = tool(Side::Ours, "rc");
        cmd.args(["-d", &test_device(), "-p", "18613", opt]);
        let out = finish(spawn(&mut cmd), Instant::now() + TIMEOUT);
        assert_eq!(
            out.status.and_then(|s| s.code()),
            Some(1),
            "{opt}: {out:#?}"
        );
        assert!(!out.stderr.trim().is_empty(), "{opt}: no message: {out:#?}");
        assert!(!out.stdout.contains("local address"), "{opt}: {out:#?}");
    }
}
