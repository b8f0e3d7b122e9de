//! Debian's perftest 4.5 (unmodified) over our libibverbs.so.1 (capi/):
//! `ib_write_bw`, `ib_read_bw`, `ib_send_bw`, `ib_write_lat`, `ib_send_lat`
//! on RC, and `ib_send_bw` / `ib_send_lat` on UD (`-c UD`), each with both
//! sides over ours, then with one side over real rdma-core (perftest's
//! handshake is the same program on both sides, so the library under each
//! side may differ). perftest links librdmacm (rdma-core's: it loads over
//! ours), libmlx5 and libefa (our stubs; on rxe perftest calls neither).
//!
//! Each run: server, then client towards `UVERBS_TEST_IP` (started again
//! while the server is not listening yet); both exit 0 and print one result
//! row for the size and iteration count asked, and each side's remote QPN
//! and PSN are the other's local ones. Small runs (`-n 200`, small sizes,
//! latency in cycles): this checks function under TCG, not speed.

use std::time::{Duration, Instant};

use crate::cabi_run::{command, server_client, Lib, Out};
use crate::{test_device, test_env};

/// How long one server/client run may take (TCG, debug library).
const TIMEOUT: Duration = Duration::from_secs(120);
/// Iterations per run.
const ITERS: u32 = 200;
/// Runs of both sides at most, when perftest's client loses its own race
/// ([`lost_listen_race`]).
const RUNS: usize = 3;

/// perftest -R's own race (`capi/README.md`, `scripts/guest-ready.sh`
/// `perftest_race`): after the control connection and both sides'
/// handshake the server listens again on the port for the test QPs while
/// the client connects at once; a REQ that arrives first is rejected
/// (reason 8, no listener), the client fails (or crashes) and the server
/// waits for good. Only a new run of both sides recovers. Either library
/// can lose it.
fn lost_listen_race(o: &Out) -> bool {
    let says = |s: &str| o.stderr.contains(s) || o.stdout.contains(s);
    says("RDMA_CM_EVENT_REJECTED; error: 8") && says("Failed to connect RDMA CM events")
}

/// The numbers of the result row under the `#bytes` header.
fn result_row(who: &str, out: &Out) -> Vec<f64> {
    let mut lines = out
        .stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"));
    assert!(lines.next().is_some(), "{who}: no #bytes header:\n{out:#?}");
    let row = lines.next().unwrap_or("");
    row.split_whitespace()
        .map(|f| {
            f.parse()
                .unwrap_or_else(|_| panic!("{who}: bad result row {row:?}:\n{out:#?}"))
        })
        .collect()
}

/// `QPN 0x.. PSN 0x..` of each `label` line.
fn qpn_psn(stdout: &str, label: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix(label))
        .map(|rest| {
            let from = rest.find("QPN").unwrap_or(0);
            let to = rest
                .find(" RKey")
                .or_else(|| rest.find(" GID"))
                .unwrap_or(rest.len());
            rest.get(from..to).unwrap_or(rest).trim().to_string()
        })
        .collect()
}

/// Runs `program` (`args` on both sides) with the server over `server`'s
/// library and the client over `client`'s, on `port`, and checks the run.
fn perftest(program: &str, args: &[&str], size: u32, server: Lib, client: Lib, port: u16) {
    let gid: u8 = test_env("UVERBS_TEST_GID_INDEX");
    let ip: String = test_env("UVERBS_TEST_IP");
    let (dev, gid, port_s) = (test_device(), gid.to_string(), port.to_string());
    let (size_s, iters) = (size.to_string(), ITERS.to_string());
    let mut all = vec!["-d", &dev, "-i", "1", "-x", &gid, "-p", &port_s];
    all.extend_from_slice(&["-n", &iters, "-s", &size_s, "-F"]);
    // Latency in cycles (`-C`, latency tests only): in usec perftest divides
    // by its CPU clock estimate, which is 0 (so every figure inf or NaN)
    // whenever its sampling under TCG correlates below r^2 0.9
    // (perftest src/get_clock.c sample_get_cpu_mhz, src/perftest_parameters.c
    // print_report_lat). Timing is not what these runs check.
    if program.ends_with("_lat") {
        all.push("-C");
    }
    all.extend_from_slice(args);
    let refused = format!("Couldn't connect to {ip}:{port}");
    let mut races = Vec::new();
    let (srv, cli, attempts) = loop {
        let (srv, cli, attempts) = server_client(
            command(server, program, &all),
            || {
                let mut c = command(client, program, &all);
                c.arg(&ip);
                c
            },
            // A client over rdma_cm (`-R`) that finds no listener yet is
            // rejected instead (perftest prints the event's number, 8:
            // RDMA_CM_EVENT_REJECTED); not when it lost the race with the
            // server's second listen, which a lone client cannot recover.
            |o: &Out| {
                (o.stderr.contains(&refused)
                    || o.stderr.contains("REJECTED")
                    || o.stderr.contains("Unexpected CM event bl blka 8"))
                    && !lost_listen_race(o)
            },
            Instant::now() + TIMEOUT,
        );
        if cli.ok() || !lost_listen_race(&cli) || races.len() + 1 == RUNS {
            break (srv, cli, attempts);
        }
        races.push(cli);
    };
    let what = format!("{program} {args:?}: server over {server:?}, client over {client:?}");
    assert!(
        srv.ok() && cli.ok(),
        "{what}: both must exit 0 (client after {attempts} attempt(s), after {} run(s) of \
         both sides lost perftest's listen race: {races:#?})\nserver: {srv:#?}\nclient: {cli:#?}",
        races.len()
    );
    for (who, out) in [("server", &srv), ("client", &cli)] {
        let row = result_row(&format!("{what}: {who}"), out);
        assert!(
            row.len() >= 5 && row[0] == f64::from(size) && row[1] == f64::from(ITERS),
            "{what}: {who}'s result row {row:?} is not for {size} B x {ITERS}:\n{out:#?}"
        );
        // A latency row's 7th column, t_stdev, is NaN in cycles under TCG:
        // perftest squares each deviation into an `int` (print_report_lat's
        // `int pow_var = pow(temp_var, 2)`), which overflows at deviations
        // of tens of thousands of cycles, and takes the root of the
        // negative sum. The other columns are checked.
        let stdev = if program.ends_with("_lat") {
            Some(6)
        } else {
            None
        };
        assert!(
            row.iter()
                .enumerate()
                .skip(2)
                .filter(|(i, _)| Some(*i) != stdev)
                .all(|(_, v)| v.is_finite() && *v >= 0.0),
            "{what}: {who}: {row:?}"
        );
    }
    let s_local = qpn_psn(&srv.stdout, "local address:");
    assert!(
        !s_local.is_empty(),
        "{what}: the server printed no address:\n{srv:#?}"
    );
    assert_eq!(qpn_psn(&cli.stdout, "remote address:"), s_local, "{what}");
    assert_eq!(
        qpn_psn(&srv.stdout, "remote address:"),
        qpn_psn(&cli.stdout, "local address:"),
        "{what}"
    );
}

/// Both sides over ours, then `mixed` (server, client) over the libraries
/// given (one of them rdma-core's).
fn ours_then_mixed(program: &str, args: &[&str], size: u32, port: u16, mixed: (Lib, Lib)) {
    perftest(program, args, size, Lib::Ours, Lib::Ours, port);
    perftest(program, args, size, mixed.0, mixed.1, port + 1);
}

#[test]
fn ib_write_bw_rc() {
    ours_then_mixed("ib_write_bw", &[], 4096, 18800, (Lib::Ours, Lib::RdmaCore));
}

#[test]
fn ib_read_bw_rc() {
    ours_then_mixed("ib_read_bw", &[], 4096, 18802, (Lib::RdmaCore, Lib::Ours));
}

#[test]
fn ib_send_bw_rc() {
    ours_then_mixed("ib_send_bw", &[], 4096, 18804, (Lib::Ours, Lib::RdmaCore));
}

#[test]
fn ib_send_bw_ud() {
    // UD messages fit the path MTU (1024 on rxe over dummy0).
    ours_then_mixed(
        "ib_send_bw",
        &["-c", "UD"],
        512,
        18806,
        (Lib::RdmaCore, Lib::Ours),
    );
}

#[test]
fn ib_write_lat_rc() {
    ours_then_mixed("ib_write_lat", &[], 64, 18808, (Lib::RdmaCore, Lib::Ours));
}

#[test]
fn ib_send_lat_rc() {
    ours_then_mixed("ib_send_lat", &[], 64, 18810, (Lib::Ours, Lib::RdmaCore));
}

#[test]
fn ib_send_lat_ud() {
    ours_then_mixed(
        "ib_send_lat",
        &["-c", "UD"],
        64,
        18812,
        (Lib::RdmaCore, Lib::Ours),
    );
}

/// perftest's connection through rdma_cm (`-R`): Debian's C librdmacm.so.1
/// over our libibverbs.so.1 (it imports only public symbols, with
/// rdma-core's versions) resolves the address, creates the QP
/// (`rdma_create_qp` → `ibv_create_qp_ex`) and connects; the same checks
/// as the TCP handshake's runs.
#[test]
fn ib_write_bw_and_send_lat_through_rdma_cm() {
    perftest("ib_write_bw", &["-R"], 4096, Lib::Ours, Lib::Ours, 18820);
    perftest(
        "ib_write_bw",
        &["-R"],
        4096,
        Lib::RdmaCore,
        Lib::Ours,
        18821,
    );
    perftest("ib_send_lat", &["-R"], 64, Lib::Ours, Lib::RdmaCore, 18822);
}

/// The race is told from perftest's own words on its test-QP connection
/// (what its client printed in the rxe guest, by hand and in CI), not from
/// a rejection of its control connection, which the client-only retry
/// handles.
#[test]
fn the_listen_race_is_told_from_the_test_qp_connection_only() {
    let out = |stderr: &str| Out {
        status: None,
        stdout: String::new(),
        stderr: stderr.to_string(),
    };
    let lost = " RDMA CM event error:\nEvent: RDMA_CM_EVENT_REJECTED; error: 8.\n\n\
                ERRNO: Operation not supported.\nFailed to handle RDMA CM event.\n\
                ERRNO: Operation not supported.\nFailed to connect RDMA CM events.\n";
    assert!(lost_listen_race(&out(lost)));
    assert!(!lost_listen_race(&out("Unexpected CM event bl blka 8\n")));
    assert!(!lost_listen_race(&out(
        " RDMA CM event error:\nEvent: RDMA_CM_EVENT_UNREACHABLE; error: -110.\n\
         Failed to connect RDMA CM events.\n"
    )));
}
