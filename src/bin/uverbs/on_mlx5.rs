//! The subcommands run unchanged on an mlx5 device: here the device model of
//! `uverbs::testing::mlx5` (its HCA on a thread of its own), chosen through
//! [`crate::transport`] for the test's threads. What a subcommand prints or
//! exchanges is its own business; these tests check that each completes on
//! the mlx5 provider: `devinfo` prints the device, `rc-`/`srq-`/`ud-`
//! `pingpong` (server and client in two threads over TCP on localhost, with
//! `-c` checking the received data) exchange every message, with and without
//! completion events and (`rc -N`) through typed sessions, and `perf`
//! measures.

use std::{sync::Arc, thread, time::Duration};

use uverbs::testing::mlx5::{fake_mlx5, Mlx5Model};

use crate::transport;

fn args(line: &str) -> Vec<String> {
    line.split_whitespace().map(String::from).collect()
}

/// Runs a pingpong server and client on `model`, each in its own thread.
fn pingpong(model: &Arc<Mlx5Model>, run: fn(&[String]) -> u8, port: u16, extra: &str) {
    let _hca = model.spawn_hca();
    let server = {
        let k = model.dyn_kernel();
        let a = args(&format!("-d mlx5_0 -g 1 -p {port} -n 200 -c {extra}"));
        thread::spawn(move || {
            transport::use_for_this_thread(k);
            run(&a)
        })
    };
    // The server listens before it answers; the client retries a refused
    // connection as the C tools do not, so give the server a moment.
    thread::sleep(Duration::from_millis(200));
    let k = model.dyn_kernel();
    let a = args(&format!(
        "-d mlx5_0 -g 1 -p {port} -n 200 -c {extra} localhost"
    ));
    let client = thread::spawn(move || {
        transport::use_for_this_thread(k);
        run(&a)
    });
    assert_eq!(client.join().expect("client thread"), 0, "client {extra}");
    assert_eq!(server.join().expect("server thread"), 0, "server {extra}");
    assert!(
        model.violations().is_empty(),
        "device model: {:?}",
        model.violations()
    );
}

#[test]
fn devinfo_prints_the_mlx5_device() {
    let model = fake_mlx5();
    transport::use_for_this_thread(model.dyn_kernel());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = crate::devinfo::run(&args("-d mlx5_0 -v"), &mut out, &mut err);
    let out = String::from_utf8(out).expect("utf-8");
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    assert!(out.starts_with("hca_id:\tmlx5_0\n"), "{out}");
    assert!(out.contains("\ttransport:\t\t\tInfiniBand (0)\n"), "{out}");
    assert!(out.contains("\tphys_port_cnt:\t\t\t1\n"), "{out}");
    // mlx5 prints the firmware's sub-minor with four digits.
    let fw = out
        .lines()
        .find_map(|l| l.strip_prefix("\tfw_ver:\t\t\t\t"))
        .expect("fw_ver line");
    let parts: Vec<&str> = fw.split('.').collect();
    assert!(parts.len() == 3 && parts[2].len() == 4, "{fw}");
    assert!(out.contains("GID[  1]:"), "{out}");
}

#[test]
fn rc_pingpong_runs_on_mlx5_busy_polling_and_with_events() {
    let model = fake_mlx5();
    pingpong(&model, crate::pingpong::rc_main, 18611, "");
    pingpong(&model, crate::pingpong::rc_main, 18612, "-e");
    // -N: the new post-send API, here a typed session (`start_wr`); with
    // 16-byte messages the sends go inline.
    pingpong(&model, crate::pingpong::rc_main, 18615, "-N");
    pingpong(&model, crate::pingpong::rc_main, 18616, "-N -s 16");
}

#[test]
fn srq_and_ud_pingpong_run_on_mlx5() {
    let model = fake_mlx5();
    pingpong(&model, crate::pingpong::srq_main, 18613, "");
    pingpong(&model, crate::pingpong::ud_main, 18614, "-s 256");
}

#[test]
fn perf_measures_on_mlx5() {
    let model = fake_mlx5();
    let _hca = model.spawn_hca();
    transport::use_for_this_thread(model.dyn_kernel());
    for test in ["write-lat", "send-lat", "write-bw"] {
        let a = args(&format!("{test} -d mlx5_0 -x 1 -n 500 --threads"));
        assert_eq!(crate::perf::main(&a), 0, "{test}");
    }
    assert!(
        model.violations().is_empty(),
        "device model: {:?}",
        model.violations()
    );
}
