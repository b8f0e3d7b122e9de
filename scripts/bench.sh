#!/usr/bin/env bash
# scripts/bench.sh — uverbs vs perftest on rxe, in ONE boot of the test guest.
#
# Usage:
#   scripts/bench.sh [--kernel 6.1|6.12] [-n ITERS] [--bw-iters N] [--rounds R]
#                    [--ev-iters N] [--events-only]
#                    [--destroy-storm [--storm-iters N] [--storms LIST]]
#                    [--no-build] [--timeout S] [--keep-log FILE]
#   scripts/bench.sh --report FILE [--kernel K]   (the report of a kept log)
#
# Builds `uverbs` in release (cargo build --release --bin uverbs --features
# test-utils, for `perf micro --fake`), boots the
# rxe guest (guest/run-guest.sh) and, for R rounds (default 3), runs for each
# of ib_write_lat, ib_send_lat and ib_write_bw (perftest first in odd
# rounds, last in even ones): perftest (server in the
# background, client to 192.0.2.1, -d rxe0 -x $GID, same -s/-n), then
# `uverbs perf write-lat|send-lat|write-bw` with the same size, iterations and
# the inline size perftest reports using (0 on rxe), then, for the latency
# tests, `uverbs perf` with its defaults (row `uverbs+inline`: the QP asks
# for perftest's nominal inline size, 220 write / 236 send, and every message
# up to the max_inline_data it got goes inline; perftest does not inline on
# devices it does not recognize, rxe included). Prints every result row, the ratio ours/perftest per round
# (latency: t_typical and t_avg; bandwidth: BW average), and a summary of the
# per-metric medians over the rounds. A benchmark, not a test: it does not
# assert; it exits non-zero only if the guest or a tool failed.
#
# Defaults are perftest's: size 2 / 1000 iterations for latency, 65536 / 5000
# for bandwidth. -n sets the latency iterations, --bw-iters the bandwidth ones.
#
# Event mode: each round also runs rdma-core's `ibv_rc_pingpong -e` and
# `uverbs rc-pingpong -e` (each tool on both sides; 64 B, --ev-iters
# iterations, default 50000; order alternating as above) and reports the
# latency per iteration and the user and system CPU per iteration of both
# sides together (from the cutime/cstime of a wrapper shell, in 10 ms
# ticks), with the ratio ours/rdma-core. --events-only runs just that pair.
#
# --destroy-storm runs only `uverbs perf destroy-storm` (issue 28 item 5):
# the completion-event latency of one loopback RC QP (arm, post a signaled
# 2-byte write, blocking get_event, ack, poll) while another thread of the
# same context creates and destroy()s objects, once per kind in --storms
# (default none,cq,qp,srq,pd: no storm, CQs on the event CQ's channel, RC
# QPs, SRQs, and PDs as a control without events), --storm-iters events per
# run (default 10000, after 200 unmeasured), R rounds (every other one in
# reverse order). Prints events/s, p50/p90/p99/max/mean latency and the
# storm's destroys/s per run, then per storm the medians over the rounds,
# the figures of all rounds pooled, and the median ratio to the baseline of
# the same round. See benches/README.md, "Completion events during a storm
# of destroys".
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
log() { printf '[bench] %s\n' "$*" >&2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }

KERNEL=6.1 ITERS=1000 BW_ITERS=5000 ROUNDS=3 BUILD=1 TIMEOUT=1200 KEEP= REPORT=
LAT_SIZE=2 BW_SIZE=65536 EV_SIZE=64 EV_ITERS=50000 EVENTS_ONLY=0
DESTROY_STORM=0 STORM_ITERS=10000 STORMS=none,cq,qp,srq,pd
while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel) [[ $# -ge 2 ]] || usage; KERNEL=$2; shift 2 ;;
    -n) [[ $# -ge 2 ]] || usage; ITERS=$2; shift 2 ;;
    --bw-iters) [[ $# -ge 2 ]] || usage; BW_ITERS=$2; shift 2 ;;
    --rounds) [[ $# -ge 2 ]] || usage; ROUNDS=$2; shift 2 ;;
    --ev-iters) [[ $# -ge 2 ]] || usage; EV_ITERS=$2; shift 2 ;;
    --events-only) EVENTS_ONLY=1; shift ;;
    --destroy-storm) DESTROY_STORM=1; shift ;;
    --storm-iters) [[ $# -ge 2 ]] || usage; STORM_ITERS=$2; shift 2 ;;
    --storms) [[ $# -ge 2 ]] || usage; STORMS=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --timeout) [[ $# -ge 2 ]] || usage; TIMEOUT=$2; shift 2 ;;
    --keep-log) [[ $# -ge 2 ]] || usage; KEEP=$2; shift 2 ;;
    --report) [[ $# -ge 2 ]] || usage; REPORT=$2; shift 2 ;;
    -h|--help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
[[ $KERNEL == 6.1 || $KERNEL == 6.12 ]] || { log "--kernel 6.1|6.12"; exit 2; }
[[ $STORMS =~ ^[a-z]+(,[a-z]+)*$ ]] || { log "bad --storms: $STORMS"; exit 2; }
for v in ITERS BW_ITERS EV_ITERS STORM_ITERS ROUNDS; do
  [[ ${!v} =~ ^[0-9]+$ && ${!v} -ge 5 || $v == ROUNDS && ${!v} =~ ^[1-9][0-9]*$ ]] \
    || { log "bad $v: ${!v}"; exit 2; }
done

cd "$REPO"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/uverbs-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
rc=0
if [[ -n $REPORT ]]; then
  [[ -f $REPORT ]] || { log "no such log: $REPORT"; exit 2; }
  LOG=$REPORT
else
if [[ $BUILD == 1 ]]; then
  log "cargo build --release --bin uverbs --features test-utils"
  cargo build --release --bin uverbs --features test-utils >&2
fi
BIN=$REPO/target/release/uverbs
[[ -x $BIN ]] || { log "no $BIN (drop --no-build)"; exit 2; }

# A private copy: concurrent builds must not swap the binary under us.
cp "$BIN" "$WORK/uverbs"

# cputime.sh OUT CMD...: runs CMD, then writes the user and system CPU ticks
# of everything it waited for (fields 16-17 of /proc/<this shell>/stat,
# cutime and cstime) to OUT.
cat > "$WORK/cputime.sh" <<'CPUTIME'
out=$1; shift
"$@"
rc=$?
read -r stat < /proc/$$/stat
set -- $stat
shift 15
echo "$1 $2" > "$out"
exit $rc
CPUTIME

cat > "$WORK/guest.sh" <<GUEST
G=\$UVERBS_TEST_GID_INDEX
ROUNDS=$ROUNDS
echo "BENCH-INFO kernel=\$(uname -r) gid=\$G cpus=\$(grep -c ^processor /proc/cpuinfo) clocksource=\$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
row() { grep -A1 '#bytes' "\$1" | tail -1; }
if [ $DESTROY_STORM = 1 ]; then
  t0=\$(date +%s)
  /guest/uverbs perf destroy-storm -d rxe0 -x \$G -n $STORM_ITERS --storm $STORMS --rounds $ROUNDS > /tmp/storm.txt 2>&1
  rc=\$?
  sed 's/^/BENCH-STORM /' /tmp/storm.txt
  echo "BENCH-STORM-TIME \$((\$(date +%s) - t0))"
  [ \$rc = 0 ] || echo "BENCH-FAIL destroy-storm (exit \$rc)"
  exit \$rc
fi
# perftest TEST SIZE ITERS ROUND: server in the background, client to 192.0.2.1
perftest() {
  \$1 -d rxe0 -x \$G -s \$2 -n \$3 > /tmp/srv.txt 2>&1 &
  sp=\$!
  sleep 1
  if ! \$1 -d rxe0 -x \$G -s \$2 -n \$3 192.0.2.1 > /tmp/cli.txt 2>&1; then
    echo "BENCH-FAIL \$1 perftest"; cat /tmp/cli.txt /tmp/srv.txt; kill \$sp 2>/dev/null; wait \$sp; return 1
  fi
  wait \$sp
  INLINE=\$(sed -n 's/.*Max inline data : \([0-9]*\).*/\1/p' /tmp/cli.txt | head -1)
  echo "BENCH-ROW \$1 perftest \$4 \$(row /tmp/cli.txt)"
}
# ours NAME TEST SIZE ITERS ROUND ARGS...
ours() {
  name=\$1 t=\$2 s=\$3 n=\$4 r=\$5; shift 5
  if ! /guest/uverbs perf \$t -d rxe0 -x \$G -s \$s -n \$n "\$@" > /tmp/ours.txt 2>&1; then
    echo "BENCH-FAIL \$t \$name"; cat /tmp/ours.txt; return 1
  fi
  echo "BENCH-ROW ib_\$(echo \$t | tr - _) \$name \$r \$(row /tmp/ours.txt)"
}
# lat T ROUND: perftest and ours for T (write or send), perftest first in
# odd rounds and last in even ones, so neither always runs on the other's
# heels (INLINE comes from round 1's perftest).
lat() {
  if [ \$((\$2 % 2)) -eq 1 ]; then
    perftest ib_\$1_lat $LAT_SIZE $ITERS \$2 || fail=1
    ours uverbs \$1-lat $LAT_SIZE $ITERS \$2 -I \${INLINE:-0} || fail=1
    ours uverbs+inline \$1-lat $LAT_SIZE $ITERS \$2 || fail=1
  else
    ours uverbs+inline \$1-lat $LAT_SIZE $ITERS \$2 || fail=1
    ours uverbs \$1-lat $LAT_SIZE $ITERS \$2 -I \${INLINE:-0} || fail=1
    perftest ib_\$1_lat $LAT_SIZE $ITERS \$2 || fail=1
  fi
}
# evpp NAME ROUND CMD...: event-mode RC pingpong, CMD on both sides; prints
# usec/iter of the client and the CPU ticks (user sys) of server and client.
evpp() {
  name=\$1 r=\$2; shift 2
  sh /guest/cputime.sh /tmp/evs.cpu "\$@" -d rxe0 -g \$G -e -s $EV_SIZE -n $EV_ITERS > /tmp/evs.txt 2>&1 &
  sp=\$!
  sleep 1
  if ! sh /guest/cputime.sh /tmp/evc.cpu "\$@" -d rxe0 -g \$G -e -s $EV_SIZE -n $EV_ITERS 192.0.2.1 > /tmp/evc.txt 2>&1; then
    echo "BENCH-FAIL rc-pingpong-e \$name"; cat /tmp/evc.txt /tmp/evs.txt; kill \$sp 2>/dev/null; wait \$sp; return 1
  fi
  wait \$sp
  echo "BENCH-EV \$name \$r \$(sed -n 's/.* = \([0-9.]*\) usec\/iter.*/\1/p' /tmp/evc.txt | head -1) \$(cat /tmp/evs.cpu) \$(cat /tmp/evc.cpu)"
}
events() {
  if [ \$((\$1 % 2)) -eq 1 ]; then
    evpp rdma-core \$1 ibv_rc_pingpong || fail=1
    evpp uverbs \$1 /guest/uverbs rc-pingpong || fail=1
  else
    evpp uverbs \$1 /guest/uverbs rc-pingpong || fail=1
    evpp rdma-core \$1 ibv_rc_pingpong || fail=1
  fi
}
fail=0
r=1
while [ \$r -le \$ROUNDS ]; do
  events \$r
  if [ $EVENTS_ONLY = 1 ]; then r=\$((r + 1)); continue; fi
  lat write \$r
  lat send \$r
  if [ \$((r % 2)) -eq 1 ]; then
    perftest ib_write_bw $BW_SIZE $BW_ITERS \$r || fail=1
    ours uverbs write-bw $BW_SIZE $BW_ITERS \$r -I \${INLINE:-0} || fail=1
  else
    ours uverbs write-bw $BW_SIZE $BW_ITERS \$r -I \${INLINE:-0} || fail=1
    perftest ib_write_bw $BW_SIZE $BW_ITERS \$r || fail=1
  fi
  r=\$((r + 1))
done
if [ $EVENTS_ONLY = 0 ]; then
/guest/uverbs perf micro -d rxe0 -x \$G -n $ITERS 2>&1 | sed 's/^/BENCH-MICRO /'
/guest/uverbs perf micro --fake -n 100000 -s $LAT_SIZE 2>&1 | sed 's/^/BENCH-FAKE /'
fi
exit \$fail
GUEST

LOG=$WORK/console.log
if [[ $DESTROY_STORM == 1 ]]; then
  log "booting the $KERNEL guest: destroy-storm, $ROUNDS round(s) of $STORMS, $STORM_ITERS events per run"
else
  log "booting the $KERNEL guest: $ROUNDS round(s); lat -s $LAT_SIZE -n $ITERS, bw -s $BW_SIZE -n $BW_ITERS"
fi
# The guest is emulated (TCG) on the host's CPUs: whatever else the host
# runs meanwhile shows in the figures, so the host's load goes in the log.
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
set +e
"$REPO/guest/run-guest.sh" --kernel "$KERNEL" --quiet --timeout "$TIMEOUT" \
  --add "$WORK/uverbs:uverbs" --add "$WORK/cputime.sh:cputime.sh" --script "$WORK/guest.sh" --log "$LOG" >&2
rc=$?
set -e
echo "BENCH-HOST load average before: $LOAD0, after: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)" >> "$LOG"
[[ -n $KEEP && -f $LOG ]] && cp "$LOG" "$KEEP"
fi
[[ -f $LOG ]] || { log "no console log (run-guest.sh exit $rc)"; exit 1; }
tr -d '\r' < "$LOG" > "$WORK/clean.log"
grep -A30 '^BENCH-FAIL' "$WORK/clean.log" >&2 || true

# ---- report: rows, per-round ratios, summary of medians
awk -v kernel="$KERNEL" -v BW_SIZE="$BW_SIZE" -v EV_ITERS="$EV_ITERS" -v EV_SIZE="$EV_SIZE" '
# ci(list): "lo hi", a distribution-free interval for the median of the
# per-round values (order statistics j and n+1-j, j from the normal
# approximation of the binomial: at least 95% coverage for n >= 5; with
# fewer rounds, the whole range).
function ci(list,   n, a, i, j, t) {
  n = split(list, a, " ")
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  if (n == 0) return ""
  j = int((n - 1.96 * sqrt(n)) / 2); if (j < 1) j = 1
  return a[j] " " a[n + 1 - j]
}
function med(list,   n, a, i, j, t) {
  n = split(list, a, " ")
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  if (n == 0) return "";
  return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
/^BENCH-MICRO/ { sub(/^BENCH-MICRO /, ""); if ($0 !~ /^-+$/) micro = micro "  " $0 "\n"; next }
/^BENCH-INFO/ { sub(/^BENCH-INFO /, ""); info = $0; next }
/^BENCH-STORM-TIME/ { stormtime = $2; next }
/^BENCH-HOST/ { sub(/^BENCH-HOST /, ""); host = $0; next }
/^BENCH-STORM/ { sub(/^BENCH-STORM /, ""); storm = storm $0 "\n"; next }
/^BENCH-EV/ {
  # BENCH-EV tool round usec/iter srv_user srv_sys cli_user cli_sys (ticks of 10 ms)
  t = $2
  evrow[t, $3] = $0; if ($3 > evmax) evmax = $3
  evlat[t] = evlat[t] " " $4
  evusr[t] = evusr[t] " " ($5 + $7) * 10000 / EV_ITERS
  evsys[t] = evsys[t] " " ($6 + $8) * 10000 / EV_ITERS
  next
}
/^BENCH-FAKE/ { sub(/^BENCH-FAKE /, ""); fake = fake "  " $0 "\n"; if ($NF ~ /^[0-9.]+$/) ns[$1] = $NF; next }
/^BENCH-ROW/ && /inf|nan/ {
  # the clock calibration of perftest (get_cpu_mhz) can fail under TCG
  # ("Correlation coefficient r^2 < 0.9") and report inf: drop the row.
  skipped = skipped sprintf("  dropped (no valid figures): %s %s round %s\n", $2, $3, $4); next
}
/^BENCH-ROW/ {
  test = $2; tool = $3; round = $4
  if (test ~ /_lat$/) { m1 = "t_typical"; v1 = $9; m2 = "t_avg"; v2 = $10 }
  else { m1 = "BW_average"; v1 = $8; m2 = "BW_peak"; v2 = $7 }
  row[test, tool, round] = $0
  val[test, m1, tool, round] = v1; val[test, m2, tool, round] = v2
  all[test, m1, tool] = all[test, m1, tool] " " v1
  all[test, m2, tool] = all[test, m2, tool] " " v2
  if (!((test, tool) in seen)) { seen[test, tool] = 1; tools[test] = tools[test] " " tool }
  if (round > maxr) maxr = round
  next
}
END {
  printf "# kernel %s: %s\n", kernel, info
  if (host != "") printf "# host: %s\n", host
  if (storm != "") {
    printf "\n== destroy-storm (uverbs perf destroy-storm; %s s in the guest)\n%s", stormtime, storm
  }
  if (evmax > 0) {
    printf "\n== rc-pingpong -e  (%d B, %d iterations, each tool on both sides; per iteration: latency of the client, CPU of both sides together)\n", EV_SIZE, EV_ITERS
    for (r = 1; r <= evmax; r++) {
      split("rdma-core uverbs", evt, " ")
      for (i = 1; i <= 2; i++) if ((evt[i], r) in evrow) {
        split(evrow[evt[i], r], f, " ")
        printf "  round %d %-10s %8.2f usec/iter  user %6.2f usec/iter  sys %6.2f usec/iter  (ticks srv %s/%s cli %s/%s)\n", r, evt[i], f[4], (f[5] + f[7]) * 10000 / EV_ITERS, (f[6] + f[8]) * 10000 / EV_ITERS, f[5], f[6], f[7], f[8]
      }
    }
    pl = med(evlat["rdma-core"]); ol = med(evlat["uverbs"])
    pu = med(evusr["rdma-core"]); ou = med(evusr["uverbs"])
    ps = med(evsys["rdma-core"]); os = med(evsys["uverbs"])
    if (pl != "" && ol != "") {
      printf "  median     rdma-core %.2f usec/iter, user %.2f, sys %.2f\n", pl, pu, ps
      printf "  median     uverbs    %.2f usec/iter, user %.2f, sys %.2f\n", ol, ou, os
      printf "  ratio uverbs/rdma-core: latency %.3f  user CPU %s  sys CPU %s  (target: <= 1)\n", ol / pl, (pu > 0) ? sprintf("%.3f", ou / pu) : "-", (ps > 0) ? sprintf("%.3f", os / ps) : "-"
    }
  }
  nt = split("ib_write_lat ib_send_lat ib_write_bw", tests, " ")
  for (k = 1; k <= nt; k++) {
    t = tests[k]; lat = (t ~ /_lat$/)
    if (tools[t] == "") continue
    printf "\n== %s  (%s)\n", t, lat ? "usec, lower is better; ratio = ours/perftest, target <= 0.95" : "MB/sec, higher is better; ratio = ours/perftest, target >= 1.05"
    n = split(tools[t], tl, " ")
    for (r = 1; r <= maxr; r++) {
      for (i = 1; i <= n; i++) if ((t, tl[i], r) in row) {
        split(row[t, tl[i], r], f, " "); line = ""
        for (j = 5; j in f; j++) line = line sprintf(" %9s", f[j])
        printf "  round %d %-14s%s\n", r, tl[i], line
      }
      for (i = 1; i <= n; i++) if (tl[i] != "perftest" && (t, tl[i], r) in row && (t, "perftest", r) in row) {
        if (lat) printf "  round %d ratio %-14s t_typical %.3f  t_avg %.3f\n", r, tl[i], val[t, "t_typical", tl[i], r] / val[t, "t_typical", "perftest", r], val[t, "t_avg", tl[i], r] / val[t, "t_avg", "perftest", r]
        else printf "  round %d ratio %-14s BW_average %.3f  BW_peak %.3f\n", r, tl[i], val[t, "BW_average", tl[i], r] / val[t, "BW_average", "perftest", r], val[t, "BW_peak", tl[i], r] / val[t, "BW_peak", "perftest", r]
      }
    }
  }
  if (micro != "") printf "\n== userspace-only calls of uverbs (uverbs perf micro)\n%s", micro
  if (fake != "") printf "\n== the same calls on a fake kernel in this guest (uverbs perf micro --fake)\n%s", fake
  # Userspace time of one message per tool (ns), from the --fake rows: the
  # whole per-iteration loop body, not just the part on the critical path,
  # so it over-states our userspace and the bound below is conservative.
  user["ib_write_lat", "uverbs"] = ns["write_sge"] + ns["poll_one"] + ns["mr_read_u8"] + ns["clock"]
  user["ib_write_lat", "uverbs+inline"] = ns["write_inline"] + ns["poll_one"] + ns["mr_read_u8"] + ns["clock"]
  user["ib_send_lat", "uverbs"] = ns["send_sge"] + ns["recv"] + 2 * ns["poll_one"] + ns["clock"]
  user["ib_send_lat", "uverbs+inline"] = ns["send_inline"] + ns["recv"] + 2 * ns["poll_one"] + ns["clock"]
  user["ib_write_bw", "uverbs"] = ns["write_sge"] + ns["poll_one"] + 2 * ns["clock"]
  havefake = ("write_sge" in ns) && ("poll_one" in ns) && ("clock" in ns)
  if (skipped != "") printf "\n%s", skipped
  if (maxr == 0) exit
  printf "\n== summary (kernel %s): median over %d round(s)\n", kernel, maxr
  printf "%-13s %-11s %10s %-14s %10s %7s %13s %7s %s\n", "test", "metric", "perftest", "ours", "value", "ratio", "round CI", "bound", "verdict"
  for (k = 1; k <= nt; k++) {
    t = tests[k]; lat = (t ~ /_lat$/)
    if (tools[t] == "") continue
    split(lat ? "t_typical t_avg" : "BW_average BW_peak", ms, " ")
    n = split(tools[t], tl, " ")
    for (mi = 1; mi <= 2; mi++) {
      m = ms[mi]; p = med(all[t, m, "perftest"])
      for (i = 1; i <= n; i++) if (tl[i] != "perftest") {
        o = med(all[t, m, tl[i]])
        if (p == "" || o == "" || p == 0) continue
        ratio = o / p
        # The per-round ratios and the interval of their median: the
        # verdict is "met" or "missed" only when the whole interval is on
        # one side of the target, else "within noise".
        rr = ""
        for (r = 1; r <= maxr; r++) if ((t, tl[i], r) in row && (t, "perftest", r) in row && val[t, m, "perftest", r] > 0)
          rr = rr " " val[t, m, tl[i], r] / val[t, m, "perftest", r]
        split(ci(rr), lh, " "); lo = lh[1]; hi = lh[2]
        cis = (lo == "") ? "-" : sprintf("%.3f-%.3f", lo, hi)
        if (lo == "") ok = "-"
        else if (lat) ok = (hi <= 0.95) ? "met (<= 0.95)" : (lo > 0.95) ? "missed (<= 0.95)" : "within noise (0.95)"
        else ok = (lo >= 1.05) ? "met (>= 1.05)" : (hi < 1.05) ? "missed (>= 1.05)" : "within noise (1.05)"
        if (m == "BW_peak") ok = "(info)"
        # bound: the ratio a stack whose userspace cost nothing would reach
        # with the same work requests (so the same kernel work): our figure
        # minus our userspace time per message.
        b = "-"
        if (havefake && (t, tl[i]) in user && m != "BW_peak") {
          u = user[t, tl[i]] / 1000
          if (lat) b = sprintf("%.3f", (o - u) / p)
          else { tm = BW_SIZE / (o * 1.048576); b = sprintf("%.3f", BW_SIZE / ((tm - u) * 1.048576) / p) }
        }
        printf "%-13s %-11s %10.2f %-14s %10.2f %7.3f %13s %7s %s\n", t, m, p, tl[i], o, ratio, cis, b, ok
      }
    }
  }
}' "$WORK/clean.log"
if [[ $rc != 0 ]]; then
  log "guest exit status $rc (a tool failed or the guest did not finish; see above)"
  exit 1
fi
