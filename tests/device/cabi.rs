//! rdma-core's own programs (Debian's rdma-core 44, unmodified) over our
//! libibverbs.so.1 (capi/), compared with the same programs over the real
//! one in the same guest:
//! - `ibv_devinfo` (`-v`, plain, `-l`, an unknown device) and `ibv_devices`
//!   print byte-identical output and exit alike;
//! - `ibv_{rc,uc,ud,srq}_pingpong`, each also with `-e` (completion
//!   events), and `ibv_rc_pingpong -N` (`ibv_qp_ex` sends), between ours
//!   and real rdma-core in both directions;
//! - the C program `capi/tests/c/static_verbs.c` passes over both
//!   libraries (dynamic) and, in the musl run, as a fully static binary
//!   with no libibverbs at all;
//! - `capi/tests/c/close_device.c` (contexts closed with objects alive
//!   keep the fd count flat), `capi/tests/c/process.c` (signals, EINTR,
//!   fork, reads with no buffer, a PD in use) and `capi/tests/c/destroy.c`
//!   (a region under a bound window, completions of a destroyed or reset
//!   QP) pass alike over both;
//! - the programs resolve our library and stubs (`LD_TRACE_LOADED_OBJECTS`),
//!   and perftest's binaries start over them (every import bound).
//!
//! Environment: `UVERBS_CABI_DIR` (scripts/guest-test.sh), the guest's
//! `UVERBS_TEST_DEVICE`, `UVERBS_TEST_GID_INDEX`, `UVERBS_TEST_IP`;
//! `UVERBS_CABI_STATIC` (the static program) and `UVERBS_EXPECT_STATIC=1`
//! in the musl run. perftest is in `cabi_perftest.rs`.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use crate::cabi_run::{cabi_dir, command, first_difference, run, server_client, Lib, Out};
use crate::{test_device, test_env};

// static_cli.rs uses the same reader for the same check.
use uverbs_test_support::elf;

/// How long one program may run.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Pingpong iterations (rxe under TCG: 100-300 us each).
const ITERS: u64 = 100;

/// Runs `program args` over both libraries and requires the same exit
/// status, stdout and stderr.
fn same_over_both(program: &str, args: &[&str]) {
    let real = run(&mut command(Lib::RdmaCore, program, args), TIMEOUT);
    let ours = run(&mut command(Lib::Ours, program, args), TIMEOUT);
    let what = format!("{program} {}", args.join(" "));
    assert!(
        real.status.is_some(),
        "{what} over rdma-core hung: {real:#?}"
    );
    let both = || format!("--- over rdma-core\n{real:#?}\n--- over ours\n{ours:#?}");
    assert_eq!(ours.code(), real.code(), "{what}: exit status\n{}", both());
    if let Some((n, r, o)) = first_difference(&real.stdout, &ours.stdout) {
        panic!(
            "{what}: stdout differs at line {n}:\n  rdma-core: {r:?}\n  ours:      {o:?}\n{}",
            both()
        );
    }
    assert_eq!(ours.stderr, real.stderr, "{what}: stderr\n{}", both());
    assert!(
        !real.stdout.is_empty() || !real.stderr.is_empty(),
        "{what} printed nothing"
    );
}

#[test]
fn ibv_devinfo_verbose_is_identical() {
    same_over_both("ibv_devinfo", &["-v"]);
}

#[test]
fn ibv_devinfo_is_identical() {
    same_over_both("ibv_devinfo", &[]);
    same_over_both("ibv_devinfo", &["-d", &test_device(), "-i", "1"]);
}

#[test]
fn ibv_devinfo_list_and_unknown_device_are_identical() {
    same_over_both("ibv_devinfo", &["-l"]);
    same_over_both("ibv_devinfo", &["-d", "no_such_device_0"]);
}

#[test]
fn ibv_devices_is_identical() {
    same_over_both("ibv_devices", &[]);
}

/// The `N bytes in ...` count of a pingpong side, checking the `iters` line.
fn pingpong_bytes(who: &str, out: &Out) -> u64 {
    let lines: Vec<&str> = out.stdout.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.contains(" bytes in ") && l.ends_with(" Mbit/sec"))
        .unwrap_or_else(|| panic!("{who}: no bytes line in {out:#?}"));
    let iters = lines.get(i + 1).copied().unwrap_or("");
    assert!(
        iters.starts_with(&format!("{ITERS} iters in ")),
        "{who}: no iters line after the bytes line: {out:#?}"
    );
    lines[i]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{who}: bad bytes line {:?}", lines[i]))
}

/// `(QPN, PSN, GID)` of the `label` lines (`  local address:  LID 0x0000,
/// QPN 0x000011, PSN 0x6b1cd3, GID ::ffff:192.0.2.1`; ud_pingpong puts a
/// `:` before the GID of its remote line).
fn addresses(stdout: &str, label: &str) -> Vec<(String, String, String)> {
    let field = |rest: &str, name: &str| {
        rest.split_once(name)
            .map(|(_, v)| v.split([',', ':']).next().unwrap_or("").trim().to_string())
            .unwrap_or_else(|| panic!("no {name} in {rest:?}"))
    };
    stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix(label))
        .map(|rest| {
            let gid = rest
                .split_once("GID ")
                .map_or("", |(_, g)| g)
                .trim()
                .to_string();
            (field(rest, "QPN "), field(rest, "PSN "), gid)
        })
        .collect()
}

/// One pingpong exchange: `ibv_<transport>_pingpong` as server over
/// `server`'s library and as client over `client`'s, on `port`, with
/// `extra` options on both; checks both finished, moved the same bytes,
/// and each one's remote addresses are the other's local ones.
fn pingpong(transport: &str, server: Lib, client: Lib, port: u16, extra: &[&str], size: u64) {
    let program = format!("ibv_{transport}_pingpong");
    let gid: u8 = test_env("UVERBS_TEST_GID_INDEX");
    let ip: String = test_env("UVERBS_TEST_IP");
    let (dev, gid, port_s, iters) = (
        test_device(),
        gid.to_string(),
        port.to_string(),
        ITERS.to_string(),
    );
    let mut args = vec!["-d", &dev, "-g", &gid, "-p", &port_s, "-n", &iters];
    args.extend_from_slice(extra);
    let refused_msg = format!("Couldn't connect to {ip}:{port}");
    let (srv, cli, attempts) = server_client(
        command(server, &program, &args),
        || {
            let mut c = command(client, &program, &args);
            c.arg(&ip);
            c
        },
        |o: &Out| o.stderr.contains(&refused_msg),
        Instant::now() + TIMEOUT,
    );
    let what = format!("{program} {extra:?}: server over {server:?}, client over {client:?}");
    assert!(
        srv.ok() && cli.ok(),
        "{what}: both must exit 0 (client after {attempts} attempt(s))\nserver: {srv:#?}\nclient: {cli:#?}"
    );
    let (sb, cb) = (
        pingpong_bytes("server", &srv),
        pingpong_bytes("client", &cli),
    );
    assert_eq!(
        (sb, cb),
        (size * ITERS * 2, size * ITERS * 2),
        "{what}: bytes moved"
    );
    let s_local = addresses(&srv.stdout, "local address:");
    assert!(!s_local.is_empty(), "{what}: the server printed no address");
    assert_eq!(
        addresses(&srv.stdout, "remote address:"),
        addresses(&cli.stdout, "local address:"),
        "{what}"
    );
    assert_eq!(addresses(&cli.stdout, "remote address:"), s_local, "{what}");
}

/// Each transport: ours as server against rdma-core's client, then the
/// other way round, without and with `-e`.
fn both_ways(transport: &str, base_port: u16, extra: &[&str], size: u64) {
    let mut with_e = extra.to_vec();
    with_e.push("-e");
    pingpong(transport, Lib::Ours, Lib::RdmaCore, base_port, extra, size);
    pingpong(
        transport,
        Lib::RdmaCore,
        Lib::Ours,
        base_port + 1,
        extra,
        size,
    );
    pingpong(
        transport,
        Lib::Ours,
        Lib::RdmaCore,
        base_port + 2,
        &with_e,
        size,
    );
    pingpong(
        transport,
        Lib::RdmaCore,
        Lib::Ours,
        base_port + 3,
        &with_e,
        size,
    );
}

#[test]
fn rc_pingpong_ours_and_rdma_core_both_ways() {
    both_ways("rc", 18700, &[], 4096);
}

/// `-N`: rc_pingpong posts its sends through `ibv_qp_ex`
/// (`ibv_wr_start`, `ibv_wr_send`, `ibv_wr_set_sge`, `ibv_wr_complete`);
/// `-c`: each side checks the pages it receives.
#[test]
fn rc_pingpong_new_send_api_ours_and_rdma_core_both_ways() {
    both_ways("rc", 18750, &["-N", "-c"], 4096);
}

#[test]
fn uc_pingpong_ours_and_rdma_core_both_ways() {
    // -c: the client marks each page, the server checks it.
    both_ways("uc", 18710, &["-c"], 4096);
}

#[test]
fn ud_pingpong_ours_and_rdma_core_both_ways() {
    both_ways("ud", 18720, &["-s", "512"], 512);
}

#[test]
fn srq_pingpong_ours_and_rdma_core_both_ways() {
    both_ways("srq", 18730, &["-q", "4"], 4096);
}

/// rdma-core's `rping` (librdmacm over our libibverbs.so.1, `-v`, 10
/// pings) between `server` and `client` on `port`: both exit 0 and the
/// client printed each ping's data.
fn rping(server: Lib, client: Lib, port: u16) {
    let ip: String = crate::test_env("UVERBS_TEST_IP");
    let port_s = port.to_string();
    let args = |role: &'static str| vec![role, "-a", &ip, "-p", &port_s, "-C", "10", "-v"];
    let (srv, cli, attempts) = server_client(
        command(server, "rping", &args("-s")),
        || command(client, "rping", &args("-c")),
        |o: &Out| o.stdout.contains("REJECTED") || o.stderr.contains("REJECTED"),
        std::time::Instant::now() + TIMEOUT,
    );
    let what = format!("rping: server over {server:?}, client over {client:?}");
    assert!(
        srv.ok() && cli.ok(),
        "{what}: both must exit 0 (client after {attempts} attempt(s))\nserver: {srv:#?}\nclient: {cli:#?}"
    );
    let pings = cli
        .stdout
        .lines()
        .filter(|l| l.starts_with("ping data: rdma-ping-"))
        .count();
    assert_eq!(pings, 10, "{what}: the client's pings\n{cli:#?}");
}

/// `rping` through Debian's C librdmacm over ours, ours against rdma-core
/// both ways and ours against ours.
#[test]
fn rping_through_rdma_cm_over_ours() {
    rping(Lib::Ours, Lib::RdmaCore, 18740);
    rping(Lib::RdmaCore, Lib::Ours, 18741);
    rping(Lib::Ours, Lib::Ours, 18742);
}

/// The `PASS` lines of the C program, after checking it passed.
fn c_program_passes(what: &str, out: &Out) -> Vec<String> {
    assert!(
        out.ok() && out.stdout.lines().any(|l| l == "PASS all"),
        "{what} failed:\n{out:#?}"
    );
    out.stdout
        .lines()
        .filter(|l| l.starts_with("PASS "))
        .map(str::to_string)
        .collect()
}

#[test]
fn c_program_passes_over_rdma_core_and_ours() {
    let prog = cabi_dir().join("static_verbs_dyn");
    let prog = prog.to_str().expect("a UTF-8 path");
    let real = run(&mut command(Lib::RdmaCore, prog, &[]), TIMEOUT);
    let real = c_program_passes("static_verbs_dyn over rdma-core", &real);
    let ours = run(&mut command(Lib::Ours, prog, &[]), TIMEOUT);
    let ours = c_program_passes("static_verbs_dyn over ours", &ours);
    assert_eq!(ours, real, "the same steps pass");
}

/// Runs a C program of capi/tests/c over rdma-core and over ours (it prints
/// `PASS what` / `FAIL what` per check and exits with the number of FAILs):
/// ours passes every check and every check rdma-core passes; returns both
/// runs' PASS lines.
fn c_checks(name: &str, args: &[&str]) -> (Vec<String>, Vec<String>) {
    let prog = cabi_dir().join(name);
    let prog = prog.to_str().expect("a UTF-8 path");
    let passes = |out: &Out| -> Vec<String> {
        out.stdout
            .lines()
            .filter(|l| l.starts_with("PASS "))
            .map(str::to_string)
            .collect()
    };
    let real = run(&mut command(Lib::RdmaCore, prog, args), TIMEOUT);
    let ours = run(&mut command(Lib::Ours, prog, args), TIMEOUT);
    assert!(ours.ok(), "{name} over ours failed:\n{ours:#?}");
    let (r, o) = (passes(&real), passes(&ours));
    let lost: Vec<_> = r.iter().filter(|l| !o.contains(l)).collect();
    assert!(
        lost.is_empty(),
        "{name}: passes over rdma-core, not over ours: {lost:?}\n{ours:#?}"
    );
    assert!(o.len() >= 10, "{name} checked almost nothing:\n{ours:#?}");
    (r, o)
}

/// The same C program with `--ours` over ours alone: what only this
/// crate's library answers (NULL arguments, refusals rdma-core would crash
/// on) on top of the common checks; every check passes, and there are
/// more than without `--ours`.
fn c_checks_ours_only(name: &str, common: &[String]) {
    let prog = cabi_dir().join(name);
    let prog = prog.to_str().expect("a UTF-8 path");
    let out = run(&mut command(Lib::Ours, prog, &["--ours"]), TIMEOUT);
    assert!(out.ok(), "{name} --ours over ours failed:\n{out:#?}");
    let passes = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("PASS "))
        .count();
    assert!(
        passes > common.len(),
        "{name} --ours added no check ({passes} PASS lines):\n{out:#?}"
    );
}

/// PDs, MRs, completion channels and CQs, call by call with each call's
/// return and errno convention (capi/tests/c/objects.c): the same checks
/// pass over both libraries, and rdma-core passes them all too.
#[test]
fn c_objects_conventions_match_rdma_core() {
    let (real, ours) = c_checks("objects", &[]);
    assert_eq!(ours, real, "the same checks pass over both");
    c_checks_ours_only("objects", &ours);
}

/// `ibv_cq_ex` (capi/tests/c/cq_ex.c): the same traffic polled with
/// `ibv_poll_cq` and with start/next/end and every reader, the create
/// refusals, events on an extended CQ, error completions: the same checks
/// pass over both libraries.
#[test]
fn c_cq_ex_sessions_match_rdma_core() {
    let (real, ours) = c_checks("cq_ex", &[]);
    assert_eq!(ours, real, "the same checks pass over both");
    c_checks_ours_only("cq_ex", &ours);
}

/// `ibv_qp_ex` (capi/tests/c/qp_ex.c): every supported `ibv_wr_*` op on RC,
/// UC and UD over rxe, aborts, and the refusals; over rdma-core 44 three
/// checks fail on its own rxe bugs (inline lists, IBV_SEND_INLINE with an
/// SGE: the program's header says which), so ours must pass a superset.
#[test]
fn c_qp_ex_ops_pass_over_ours_and_where_rdma_core_passes() {
    let (real, ours) = c_checks("qp_ex", &[]);
    assert!(ours.len() >= real.len());
    c_checks_ours_only("qp_ex", &ours);
}

/// Runs a C program of capi/tests/c over rdma-core and over ours, each
/// within `timeout`: every check passes over both, and the same ones.
fn c_all_pass_over_both(name: &str, timeout: Duration, min_checks: usize) {
    let prog = cabi_dir().join(name);
    let prog = prog.to_str().expect("a UTF-8 path");
    let passes = |lib: Lib| -> Vec<String> {
        let out = run(&mut command(lib, prog, &[]), timeout);
        assert!(out.ok(), "{name} over {lib:?} failed:\n{out:#?}");
        out.stdout
            .lines()
            .filter(|l| l.starts_with("PASS "))
            .map(str::to_string)
            .collect()
    };
    let real = passes(Lib::RdmaCore);
    let ours = passes(Lib::Ours);
    assert!(
        real.len() >= min_checks,
        "{name} checked almost nothing: {real:?}"
    );
    assert_eq!(ours, real, "{name}: the same checks pass over both");
}

/// `ibv_close_device` with objects alive (capi/tests/c/close_device.c,
/// issue 39 item 4): 2000 contexts opened and closed cleanly, leaving a
/// PD, and leaving a PD, MR, CQ and QP alive; the process has as many fds
/// afterwards, over rdma-core (whose verbs_uninit_context closes both fds
/// whatever is alive) and over ours.
#[test]
fn c_close_device_releases_the_fds_whatever_is_alive() {
    c_all_pass_over_both("close_device", Duration::from_secs(600), 7);
}

/// A process around the verbs on the kernel itself
/// (capi/tests/c/process.c, issue 39 items 5-9; the same program runs on
/// the mlx5 model through the LD_PRELOAD shim, scripts/rdma-core-on-model.sh
/// step b3): a signal handler's async-signal-safe calls, read(fd, NULL, 0)
/// of the event fds, EINTR and SA_RESTART on blocking gets, children
/// forked after the parent used the device, DEALLOC_PD while the PD is in
/// use. The kernel's answers are the reference of the shim's.
#[test]
fn c_process_signals_fork_and_busy_pd_match_rdma_core() {
    c_all_pass_over_both("process", Duration::from_secs(300), 15);
}

/// Refused destroys and the completions of a destroyed or reset QP on the
/// kernel itself (capi/tests/c/destroy.c, issue 39 items 1 and 3; the same
/// program runs on the mlx5 model, scripts/rdma-core-on-model.sh step b4):
/// rxe refuses `ibv_dereg_mr` of a region under a bound window (`EINVAL`),
/// which stays registered and deregisters after the window; sessions of an
/// `ibv_cq_ex` after a QP's destroy or reset return what rdma-core's rxe
/// returns (its completions left in the CQ: rxe removes none).
#[test]
fn c_refused_destroys_and_stale_completions_match_rdma_core() {
    c_all_pass_over_both("destroy", Duration::from_secs(300), 10);
}

/// The static program is built for musl (capi/build-static.sh) in the
/// musl run of scripts/guest-test.sh, whose tests are musl binaries too: it
/// runs there and is ignored (shown as such) in the glibc run.
#[test]
#[cfg_attr(
    not(target_env = "musl"),
    ignore = "the fully static musl program runs in the musl guest run (--musl)"
)]
fn static_c_program_passes_with_no_libibverbs() {
    let path = std::env::var("UVERBS_CABI_STATIC")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "the musl run must test the static static_verbs, but UVERBS_CABI_STATIC is \
                 not set: capi/build-static.sh failed (see scripts/guest-test.sh's log)"
            )
        });
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let info = elf::parse(&bytes).unwrap_or_else(|e| panic!("{path}: {e:?}"));
    assert!(info.is_static(), "{path} is not static: {info:?}");
    // No library path at all: nothing could be loaded even if it tried.
    let mut cmd = Command::new(&path);
    cmd.env_clear()
        .env("UVERBS_TEST_DEVICE", test_device())
        .env(
            "UVERBS_TEST_GID_INDEX",
            test_env::<u8>("UVERBS_TEST_GID_INDEX").to_string(),
        );
    let out = run(&mut cmd, TIMEOUT);
    let steps = c_program_passes(&path, &out);
    assert!(steps.len() >= 10, "{out:#?}");
}

#[test]
fn programs_resolve_our_library_and_stubs() {
    let dir = cabi_dir();
    let ours = |lib: &str| format!("{lib} => {}", dir.join(lib).display());
    for (program, want) in [
        ("ibv_devinfo", vec![ours("libibverbs.so.1")]),
        ("ibv_rc_pingpong", vec![ours("libibverbs.so.1")]),
        (
            "ib_write_bw",
            vec![
                ours("libibverbs.so.1"),
                ours("libmlx5.so.1"),
                ours("libefa.so.1"),
            ],
        ),
        ("rping", vec![ours("libibverbs.so.1")]),
    ] {
        let mut cmd = command(Lib::Ours, program, &[]);
        cmd.env("LD_TRACE_LOADED_OBJECTS", "1");
        let out = run(&mut cmd, TIMEOUT);
        assert!(out.ok(), "{program}: {out:#?}");
        for w in &want {
            assert!(
                out.stdout.contains(w.as_str()),
                "{program} does not load {w}:\n{}",
                out.stdout
            );
        }
    }
}

/// perftest's binaries link libibverbs, librdmacm (rdma-core's, which
/// loads over ours), libmlx5 and libefa (our stubs), and bind every import
/// at start: `-h` gets as far as printing the usage.
#[test]
fn perftest_binaries_start_over_ours() {
    for program in [
        "ib_write_bw",
        "ib_read_bw",
        "ib_send_bw",
        "ib_write_lat",
        "ib_send_lat",
    ] {
        let out = run(&mut command(Lib::Ours, program, &["-h"]), TIMEOUT);
        assert!(out.status.is_some(), "{program} -h hung");
        assert!(
            out.stdout.contains("Usage:") && !out.stderr.contains("error"),
            "{program} -h over ours did not start:\n{out:#?}"
        );
    }
}
