//! Wall-clock completion timestamps (`IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK`,
//! `ibv_wc_read_completion_wallclock_ns`: `CqPoll::completion_wallclock_ns`)
//! on the mlx5 device model, and the mlx5dv clock info
//! (`Mlx5Context::clock_info`, `ClockInfo::ts_to_ns`).
//!
//! The model keeps a clock info page the way mlx5_core does (its own
//! arithmetic, a test double): the expected times here are never computed
//! with it, nor with the library's converter, but read from the host's
//! real-time clock around the work. A completion's wall-clock time must
//! lie between `SystemTime::now()` taken before its work was posted and
//! after it was polled, allowing [`SLACK`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use uverbs::testing::mlx5::{fake_mlx5, fake_mlx5_with, Mlx5Model, Options};
use uverbs::{Context, CqOptions, ErrorKind, QpType, RecvWr, SendWr, WcExFlags};

use uverbs_test_support::mlx5_pair::*;

/// What the conversion may be off by, either way: the rounding of the
/// page's rate (mlx5_core's `mult`/`shift`: under 4 ns a second), the
/// anchor's read of the host clock (after its tick count), and a host
/// clock slewed by NTP against the monotonic clock the model's ticks come
/// from (at most 500 ppm over the second between two page updates).
const SLACK: Duration = Duration::from_millis(1);

/// A completion's `wr_id`, raw timestamp and wall-clock time.
type Stamped = (u64, Option<u64>, Option<u64>);

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Sends a SEND from `qp` to itself for each of `ids`, and returns, per
/// completion, its `wr_id`, raw timestamp and wall-clock time, with the
/// host's real time before posting and after polling.
fn round(
    model: &Mlx5Model,
    ctx: &Context,
    wc_flags: WcExFlags,
    ids: std::ops::Range<u64>,
) -> (u64, Vec<Stamped>, u64) {
    let pd = ctx.alloc_pd().unwrap();
    let opts = CqOptions::new().wc_flags(wc_flags);
    let mut cq = ctx.create_cq(64, opts).unwrap();
    let mut qp = create_qp(&pd, QpType::Rc, &cq, None, cap(32, 1, 16));
    connect(&qp, qp.qp_num(), gid(ctx), 7);
    let before = now_ns();
    let n = ids.clone().count() * 2;
    for id in ids {
        qp.post_recv(&[RecvWr::new(id, &[])]).unwrap();
        qp.post_send(&[SendWr::send(id, &[]).inline(b"")]).unwrap();
        model.process();
        // Time passes between completions (the ticks are 6.4 ns).
        std::thread::sleep(Duration::from_micros(50));
    }
    let mut got = Vec::new();
    let mut s = cq.start_poll().expect("completions");
    loop {
        got.push((s.wr_id(), s.completion_ts(), s.completion_wallclock_ns()));
        if !s.next() {
            break;
        }
    }
    drop(s);
    let after = now_ns();
    assert_eq!(got.len(), n);
    (before, got, after)
}

#[test]
fn wallclock_times_lie_between_posting_and_polling_and_increase() {
    let model = fake_mlx5();
    let ctx = open(&model);
    for flags in [
        WcExFlags::STANDARD | WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK,
        WcExFlags::STANDARD
            | WcExFlags::COMPLETION_TIMESTAMP
            | WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK,
    ] {
        let (before, got, after) = round(&model, &ctx, flags, 1..9);
        let slack = SLACK.as_nanos() as u64;
        let mut last = 0;
        for &(id, ts, wall) in &got {
            assert_eq!(
                ts.is_some(),
                flags.contains(WcExFlags::COMPLETION_TIMESTAMP),
                "{flags:?}"
            );
            let wall = wall.expect("a wall-clock time");
            assert!(
                wall + slack >= before && wall <= after + slack,
                "completion {id}: {wall} outside {before} ..= {after}"
            );
            assert!(wall > last, "completion {id}: {wall} not after {last}");
            last = wall;
        }
        // The sleeps between the sends show in the times (50 µs apart, the
        // slack aside).
        let (first, last) = (got[0].2.unwrap(), got[got.len() - 1].2.unwrap());
        assert!(
            last - first >= 7 * 50_000 - 2 * slack.min(100_000),
            "{first} .. {last}"
        );
    }
    assert_clean(&model);
}

#[test]
fn without_the_flag_there_is_no_wallclock_time() {
    let model = fake_mlx5();
    let ctx = open(&model);
    for flags in [
        WcExFlags::STANDARD,
        WcExFlags::STANDARD | WcExFlags::COMPLETION_TIMESTAMP,
    ] {
        let (_, got, _) = round(&model, &ctx, flags, 1..3);
        for (id, ts, wall) in got {
            assert_eq!(wall, None, "completion {id} of a CQ with {flags:?}");
            assert_eq!(
                ts.is_some(),
                flags.contains(WcExFlags::COMPLETION_TIMESTAMP)
            );
        }
    }
}

#[test]
fn a_kernel_without_the_clock_info_page_refuses_the_wallclock() {
    let model = fake_mlx5_with(Options {
        no_clock_info: true,
        ..Options::default()
    });
    let ctx = open(&model);
    let opts =
        CqOptions::new().wc_flags(WcExFlags::STANDARD | WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK);
    let e = ctx.create_cq(16, opts).expect_err("no clock info page");
    assert_eq!(e.kind(), ErrorKind::UnsupportedProvider, "{e}");
    assert_eq!(e.errno(), uverbs::sys::Errno::EOPNOTSUPP);
    assert!(e.to_string().contains("clock info page"), "{e}");
    // The raw timestamps still work.
    let (_, got, _) = round(
        &model,
        &ctx,
        WcExFlags::STANDARD | WcExFlags::COMPLETION_TIMESTAMP,
        1..2,
    );
    assert!(got
        .iter()
        .all(|&(_, ts, wall)| ts.is_some() && wall.is_none()));
    // mlx5dv: no clock info either.
    let mlx5 = ctx.mlx5().unwrap();
    let e = mlx5.clock_info().expect_err("no clock info page");
    assert_eq!(e.kind(), ErrorKind::UnsupportedProvider, "{e}");
    assert_eq!(mlx5.attr().max_clock_info_update_nsec, None);
}

#[test]
fn mlx5dv_clock_info_converts_raw_timestamps_to_the_same_times() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let mlx5 = ctx.mlx5().unwrap();
    assert!(mlx5.attr().max_clock_info_update_nsec.is_some());
    let (before, got, after) = round(
        &model,
        &ctx,
        WcExFlags::STANDARD
            | WcExFlags::COMPLETION_TIMESTAMP
            | WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK,
        1..4,
    );
    let info = mlx5.clock_info().unwrap();
    let slack = SLACK.as_nanos() as u64;
    for (id, ts, wall) in got {
        let ns = info.ts_to_ns(ts.unwrap());
        assert!(
            ns + slack >= before && ns <= after + slack,
            "completion {id}: {ns} outside {before} ..= {after}"
        );
        // Both conversions of one tick count, with copies of the page
        // taken at different times, agree but for the rounding of the
        // rate over the ticks between the copies.
        let wall = wall.unwrap();
        assert!(ns.abs_diff(wall) < 1_000, "{ns} vs {wall}");
    }
}

#[test]
fn conversions_stay_right_across_the_kernels_updates_of_the_page() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let mlx5 = ctx.mlx5().unwrap();
    let first = mlx5.clock_info().unwrap();
    std::thread::sleep(Duration::from_millis(2));
    model.update_clock_info();
    let second = mlx5.clock_info().unwrap();
    // A later anchor: at least the 2 ms slept, in ticks and in time.
    assert!(second.last_cycles - first.last_cycles >= 2 * 156_250);
    assert!(second.nsec - first.nsec >= 2_000_000);
    // CQs made before and after the update, and updates between rounds:
    // every time within its round's bounds.
    let flags = WcExFlags::STANDARD | WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK;
    let slack = SLACK.as_nanos() as u64;
    for i in 0..3 {
        let (before, got, after) = round(&model, &ctx, flags, 1..3);
        for (id, _, wall) in got {
            let wall = wall.unwrap();
            assert!(
                wall + slack >= before && wall <= after + slack,
                "round {i}, completion {id}: {wall} outside {before} ..= {after}"
            );
        }
        model.update_clock_info();
    }
}
