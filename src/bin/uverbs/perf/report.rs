//! perftest's result formulas and table lines (perftest 4.5,
//! `src/perftest_parameters.c`: `print_report_lat`, `print_report_bw`,
//! `get_median`; formats `RESULT_FMT_LAT`/`REPORT_FMT_LAT`,
//! `RESULT_FMT`/`REPORT_FMT` in `perftest_parameters.h`), quirks included,
//! so the numbers compare one to one.

/// `RESULT_LINE`.
pub const LINE: &str =
    "---------------------------------------------------------------------------------------";

/// perftest drops the two largest samples (`LAT_MEASURE_TAIL`).
const LAT_MEASURE_TAIL: usize = 2;

/// One latency result, in microseconds (one way: round trip / 2).
#[derive(Debug, Clone, PartialEq)]
pub struct Lat {
    pub bytes: usize,
    pub iters: u64,
    pub t_min: f64,
    pub t_max: f64,
    pub t_typical: f64,
    pub t_avg: f64,
    pub t_stdev: f64,
    pub p99: f64,
    pub p999: f64,
}

/// `get_median(n, delta)` on a sorted array.
fn median(n: usize, d: &[u64]) -> u64 {
    if (n - 1) % 2 == 1 {
        (d[n / 2] + d[n / 2 - 1]) / 2
    } else {
        d[n / 2]
    }
}

/// `print_report_lat` for `tst == LAT`: `tposted[i]` are the post
/// timestamps of one side; consecutive differences are round trips,
/// halved (`rtt_factor` 2 for write and send). `hz` is ticks per second.
pub fn latency(bytes: usize, tposted: &[u64], hz: f64) -> Option<Lat> {
    let iters = tposted.len();
    if iters < LAT_MEASURE_TAIL + 3 {
        return None;
    }
    let mut delta: Vec<u64> = tposted
        .windows(2)
        .map(|w| w[1].wrapping_sub(w[0]))
        .collect();
    delta.sort_unstable();
    let q = hz / 1e6 * 2.0; // cycles_rtt_quotient
    let n = delta.len() - LAT_MEASURE_TAIL; // measure_cnt
    let med = median(n, &delta);
    let avg = delta[..n].iter().map(|&d| d as f64 / q).sum::<f64>() / n as f64;
    // perftest's stdev goes through `int`: each deviation is truncated
    // (squared in 64 bits: an outlier of 46 ms would overflow `int`).
    let var = delta[..n]
        .iter()
        .map(|&d| {
            let dev = i64::from((avg - d as f64 / q) as i32);
            (dev * dev) as f64
        })
        .sum::<f64>()
        / n as f64;
    let at = |i: usize| delta[i.min(delta.len() - 1)] as f64 / q;
    Some(Lat {
        bytes,
        iters: iters as u64,
        t_min: at(0),
        t_max: at(n),
        t_typical: med as f64 / q,
        t_avg: avg,
        t_stdev: var.sqrt(),
        p99: at((n as f64 * 0.99).ceil() as usize),
        p999: at((n as f64 * 0.999).ceil() as usize),
    })
}

/// The latency table header (`RESULT_FMT_LAT`).
pub fn lat_header() -> String {
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    \
     t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
        .to_string()
}

/// One latency row (`REPORT_FMT_LAT`).
pub fn lat_row(l: &Lat) -> String {
    format!(
        " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
        l.bytes, l.iters, l.t_min, l.t_max, l.t_typical, l.t_avg, l.t_stdev, l.p99, l.p999
    )
}

/// One bandwidth result.
#[derive(Debug, Clone, PartialEq)]
pub struct Bw {
    pub bytes: usize,
    pub iters: u64,
    /// MB/sec, 1 MB = 2^20 bytes (perftest's default `MBS` format).
    pub peak: f64,
    pub avg: f64,
    /// Million messages per second.
    pub msg_rate: f64,
}

/// `print_report_bw` for one QP, ITERATIONS, `post_list` 1 and peak on:
/// `tposted[i]` is taken before posting request `i`, `tcompleted[j]` when
/// the completion covering request `j` was polled (set for `j = k*cq_mod -
/// 1` and the last one).
pub fn bandwidth(
    bytes: usize,
    tposted: &[u64],
    tcompleted: &[u64],
    cq_mod: usize,
    post_list: usize,
    hz: f64,
) -> Bw {
    let n = tposted.len();
    let cq_mod = cq_mod.max(1);
    let post_list = post_list.max(1);
    let mut opt = tcompleted[0].wrapping_sub(tposted[0]);
    // The peak: the fastest average per message over any [i, j] window.
    let mut i = 0;
    while i < n {
        let mut j = (i + 1).div_ceil(cq_mod) * cq_mod - 1;
        while j < n {
            let t = tcompleted[j].wrapping_sub(tposted[i]) / (j - i + 1) as u64;
            opt = opt.min(t);
            j += cq_mod;
        }
        if n % cq_mod != 0 {
            let j = n - 1;
            let t = tcompleted[j].wrapping_sub(tposted[i]) / (j - i + 1) as u64;
            opt = opt.min(t);
        }
        i += post_list;
    }
    let cycles_to_units = hz;
    let format_factor = 1048576.0;
    let sum = tcompleted[n - 1].wrapping_sub(tposted[0]) as f64;
    let avg = bytes as f64 * n as f64 * cycles_to_units / (sum * format_factor);
    let msg_rate = n as f64 * cycles_to_units / (sum * 1e6);
    // peak_up / peak_down, as integers of cycles like perftest.
    let peak_up = (bytes as u64).saturating_mul(cycles_to_units as u64) as f64;
    let peak_down = (opt.max(1) as f64) * format_factor;
    Bw {
        bytes,
        iters: n as u64,
        peak: peak_up / peak_down,
        avg,
        msg_rate,
    }
}

/// The bandwidth table header (`RESULT_FMT`).
pub fn bw_header() -> String {
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]".to_string()
}

/// One bandwidth row (`REPORT_FMT`).
pub fn bw_row(b: &Bw) -> String {
    format!(
        " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}",
        b.bytes, b.iters, b.peak, b.avg, b.msg_rate
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_follows_perftest() {
        // 1 MHz clock: one tick = 1 us; round trips 2,4,...; one way = half.
        let mut t = vec![0u64];
        for rtt in [2u64, 4, 6, 8, 10, 100, 200] {
            t.push(t.last().unwrap() + rtt);
        }
        let l = latency(2, &t, 1e6).unwrap();
        // 7 deltas sorted, the 2 largest dropped: 2 4 6 8 10 -> one way 1..5.
        assert_eq!(l.iters, 8);
        assert_eq!(l.t_min, 1.0);
        assert_eq!(l.t_max, 50.0); // delta[measure_cnt], perftest's quirk
        assert_eq!(l.t_typical, 3.0);
        assert_eq!(l.t_avg, 3.0);
        // deviations -2,-1,0,1,2 -> var 2
        assert!((l.t_stdev - 2f64.sqrt()).abs() < 1e-12);
        // ceil(5*0.99) = 5 -> delta[5]
        assert_eq!(l.p99, 50.0);
    }

    /// An outlier of seconds (a descheduled run) does not overflow the
    /// variance (it did: `i32` squares).
    #[test]
    fn a_huge_outlier_is_reported_not_a_panic() {
        let mut t = vec![0u64];
        for rtt in [
            2u64,
            2,
            2,
            2,
            2,
            200_000_000,
            200_000_000,
            200_000_000,
            2,
            2,
        ] {
            t.push(t.last().unwrap() + rtt);
        }
        let l = latency(2, &t, 1e6).unwrap();
        assert!(l.t_stdev.is_finite() && l.t_stdev > 0.0);
    }

    #[test]
    fn median_of_even_count_averages() {
        assert_eq!(median(4, &[1, 3, 5, 7]), 4);
        assert_eq!(median(5, &[1, 3, 5, 7, 9]), 5);
    }

    #[test]
    fn bandwidth_follows_perftest() {
        // 4 messages of 1 MiB, 1 s apart at 1 Hz ticks... use 1e6 Hz.
        let tp = [0, 10, 20, 30];
        let tc = [100, 110, 120, 130];
        let b = bandwidth(1 << 20, &tp, &tc, 1, 1, 1e6);
        // 4 MiB in 130 us.
        assert!((b.avg - 4.0 * 1e6 / 130.0).abs() < 1e-6);
        assert!((b.msg_rate - 4.0 / 130.0).abs() < 1e-9);
        // best window: i=0, j=3: 130/4 = 32 (integer) -> 1 MiB / 32 us.
        assert!((b.peak - 1e6 / 32.0).abs() < 1e-6);
    }
}
