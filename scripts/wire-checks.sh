# scripts/wire-checks.sh: host-side checks shared by scripts/rdmacm-guest.sh
# and scripts/two-host.sh (sourced; bash).

# rping_lines PREFIX COUNT SIZE: the lines rping -v prints for pings 0..COUNT-1
# (rping.c: "rdma-ping-%d: " then letters from 'A'+ping, wrapping after 'z',
# up to SIZE-1 bytes)
rping_lines() {
  awk -v pre="$1" -v n="$2" -v size="$3" 'BEGIN {
    for (k = 0; k < n; k++) {
      s = "rdma-ping-" k ": "; c = 65 + k % 58
      for (i = length(s); i < size - 1; i++) { s = s sprintf("%c", c); c++; if (c > 122) c = 65 }
      print pre s
    } }'
}
# perf_row BYTES ITERS < output: the figures of perftest's result row
perf_row() { awk -v b="$1" -v n="$2" '$1 == b && $2 == n && NF >= 5 { print; exit }'; }

# check_perf CLIENT_OUTPUT bw|lat BYTES ITERS: the client's result row, its
# description in SUMMARY.
# perftest converts its cycle counts with a CPU clock it calibrates against
# gettimeofday (perftest's get_clock.c); under TCG a descheduled vCPU can spoil
# that fit ("Correlation coefficient r^2: ... < 0.9"). With -F the tool still
# exits 0 and prints its row (the transfer completed, which is what an
# exchange checks), but the row's times are then meaningless: only the size
# and iteration count are checked, and SUMMARY says why.
check_perf() {
  local out=$1 kind=$2 bytes=$3 iters=$4 row calib
  calib=$(grep -m1 -oE 'Correlation coefficient r\^2: [^ ]+ < 0\.9' <<<"$out" || true)
  row=$(perf_row "$bytes" "$iters" <<<"$out")
  if [[ $kind == bw ]]; then
    # #bytes #iterations BW_peak[MB/sec] BW_average[MB/sec] MsgRate[Mpps]
    [[ -n $row ]] && { [[ -n $calib ]] || awk '{ exit !($4 > 0) }' <<<"$row"; } \
      || problem "client: no '$bytes $iters ...' result row with a positive average"
    SUMMARY="$iters x $bytes B, BW average $(awk '{ print $4 }' <<<"$row") MB/s"
  else
    # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
    [[ -n $row ]] && { [[ -n $calib ]] || awk '{ exit !($3 > 0 && $5 >= $3) }' <<<"$row"; } \
      || problem "client: no '$bytes $iters ...' result row with 0 < t_min <= t_typical"
    SUMMARY="$iters x $bytes B, t_typical $(awk '{ print $5 }' <<<"$row") usec"
  fi
  [[ -z $calib ]] || SUMMARY="$SUMMARY (not a measurement: perftest's clock calibration failed, $calib)"
}
# problem TEXT: one reason the exchange being checked failed (PROBLEMS empty:
# it passed)
problem() { PROBLEMS+=("$*"); }

# bash scripts/wire-checks.sh: the checks above against perftest's and
# rping's own lines, pass and fail (scripts/test.sh runs it before the wire
# harnesses)
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -u
  fails=0
  expect() { # WHAT WANT GOT
    [[ $2 == "$3" ]] || { echo "wire-checks self-test: $1: want '$2', got '$3'" >&2; fails=$((fails + 1)); }
  }
  # rping.c's first payload, 16 bytes: "rdma-ping-0: " then letters from 'A'
  expect "rping_lines" "ping data: rdma-ping-0: ABC" "$(rping_lines 'ping data: ' 2 17 | head -1)"
  expect "rping_lines count" 2 "$(rping_lines '' 2 17 | wc -l)"
  bw=' #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      200              120.50             118.20               0.001891'
  lat=' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
 2       200          30.10        200.3        45.2     50.1   10.2  150.0  200.3'
  PROBLEMS=(); check_perf "$bw" bw 65536 200
  expect "bw row" "0 200 x 65536 B, BW average 118.20 MB/s" "${#PROBLEMS[@]} $SUMMARY"
  PROBLEMS=(); check_perf "${bw/118.20/0.00}" bw 65536 200
  expect "bw average 0" 1 "${#PROBLEMS[@]}"
  PROBLEMS=(); check_perf "$lat" lat 2 200
  expect "lat row" "0 200 x 2 B, t_typical 45.2 usec" "${#PROBLEMS[@]} $SUMMARY"
  PROBLEMS=(); check_perf "$lat" lat 2 100
  expect "lat iterations" 1 "${#PROBLEMS[@]}"
  PROBLEMS=(); check_perf "${lat/ 45.2 / 20.0 }" lat 2 200
  expect "lat t_typical < t_min" 1 "${#PROBLEMS[@]}"
  PROBLEMS=(); check_perf "Correlation coefficient r^2: 0.5 < 0.9
${lat/ 45.2 / 20.0 }" lat 2 200
  expect "calibration failed" "0 (not a measurement" "${#PROBLEMS[@]} $(grep -o '(not a measurement' <<<"$SUMMARY")"
  [[ $fails == 0 ]] && echo "wire-checks self-test: passed" || exit 1
fi
