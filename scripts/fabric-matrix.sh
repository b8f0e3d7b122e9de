#!/usr/bin/env bash
# scripts/fabric-matrix.sh — the two-host matrix of scripts/two-host.sh, on
# the mlx5 device model's virtual fabric instead of two rxe guests: every
# process runs under the LD_PRELOAD shim (scripts/on-model.sh) with an HCA
# of its own (its own node GUID, MAC and GIDs ::ffff:10.x.y.z), and the HCAs
# exchange transport packets over unix-domain sockets in a private fabric
# directory ($UVERBS_FABRIC, made here). No root, no kernel module, no guest.
#
#   scripts/fabric-matrix.sh [--iters N] [--only REGEX] [--keep]
#
# Stacks:
#   rdma-core  Debian's ibverbs-utils 44.0-2 over Debian's libibverbs + libmlx5
#   uverbs     our CLI (`uverbs rc-pingpong`, ...; `cargo build --bin uverbs`)
#   ours-c     Debian's ibverbs-utils over our libibverbs.so.1 + libmlx5.so.1
#              (scripts/on-model.sh --ours DIR)
# Exchanges, for each of rc, uc, ud, srq (server <- client):
#   uverbs   <- rdma-core  (-e)      rdma-core <- uverbs
#   ours-c   <- rdma-core            rdma-core <- ours-c  (-e)
# so ours is server and client against rdma-core, each with and without
# event mode (-e: completion channels, armed CQs, the model's events).
# DevX: tests/support/src/bin/devx-pingpong (an RC QP from PRM commands through
# uverbs::mlx5, its DevX CQ's completion events read through a DevX event
# channel with a cookie) as the client of rdma-core's ibv_rc_pingpong.
# perftest 4.5 between two rdma-core processes and two over ours (below).
# Then the faults, as processes:
#   lone HCAs: UVERBS_FABRIC=off on both sides (the issue's set-up before the
#     fabric: each process alone with its model): the RC client must fail
#     (its sends time out: "transport retry counter exceeded"), never report
#     its iterations;
#   a server killed mid-transfer (SIGKILL, rdma-core's ib_write_bw with many
#     iterations; clients rdma-core's and ours): the client's writes in
#     flight fail with status 12 (transport retry counter exceeded) within
#     its retries, and it does not hang.
# Checks per pingpong: both exit 0; each prints `<size*iters*2> bytes in`
# and `<iters> iters in`; each side's `remote address` (QPN, PSN, GID) is
# the other's `local address`; the two GIDs differ and are fabric GIDs
# (::ffff:10.x.y.z).
# Output: one line per exchange, then
#   fabric-matrix test result: ok. 32 passed; 0 failed; 0 ignored; ...
# (the shape scripts/test.sh totals). Exit status 0 when all passed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ITERS=100 ONLY= KEEP=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --iters) ITERS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) echo "usage: scripts/fabric-matrix.sh [--iters N] [--only REGEX] [--keep]" >&2; exit 2 ;;
  esac
done
log() { echo "fabric-matrix: $*" >&2; }
START=$(date +%s)

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
(cd "$ROOT" && cargo build -q --bin uverbs && cargo build -q -p uverbs-test-support --bin devx-pingpong) \
  || { log "cargo build --bin uverbs / --bin devx-pingpong failed"; exit 2; }
U=$TARGET/debug/uverbs
OURS=$TARGET/fabric-ours
"$ROOT/scripts/on-model.sh" --ours "$OURS" -- true || { log "assembling our C libraries failed"; exit 2; }
# Ours again when they were rebuilt since (on-model.sh copies only once).
cp "$TARGET/debug/libibverbs.so" "$OURS/libibverbs.so.1"
cp "$TARGET/debug/libmlx5.so" "$OURS/libmlx5.so.1"

W=$(mktemp -d "${TMPDIR:-/tmp}/uverbs-fabric-matrix.XXXXXX")
export UVERBS_FABRIC=$W/fabric
mkdir -p "$UVERBS_FABRIC"
cleanup() { if [[ $KEEP == 1 || ${FAILED:-0} != 0 ]]; then log "work directory kept: $W"; else rm -rf "$W"; fi; }
trap cleanup EXIT

# A TCP port range of this run's own (pingpong's address exchange).
PORT=$((20000 + $$ % 20000))

# cmd STACK PROG ARGS...: the command line of PROG (e.g. rc-pingpong) on STACK.
cmd() {
  local stack=$1 prog=$2; shift 2
  [[ $prog == perftest ]] || set -- "ibv_${prog/-/_}" "$@"
  case $stack in
    rdma-core) echo "$ROOT/scripts/on-model.sh -- $*" ;;
    uverbs) echo "$ROOT/scripts/on-model.sh -- $U $prog ${*:2}" ;;
    ours-c) echo "$ROOT/scripts/on-model.sh --ours $OURS -- $*" ;;
  esac
}

# wait_listen PORT: until something listens on the TCP port (20 s at most).
wait_listen() {
  local hex i
  hex=$(printf '%04X' "$1")
  for ((i = 0; i < 200; i++)); do
    grep -qE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# addrs LABEL < output: "QPN PSN GID" of the LABEL line
addrs() {
  awk -v l="$1" 'index($0, l) {
    q = $0; sub(/.*QPN /, "", q); sub(/[,:].*/, "", q)
    p = $0; sub(/.*PSN /, "", p); sub(/[,:].*/, "", p)
    g = $0; sub(/.*GID /, "", g); sub(/[ \t]+$/, "", g)
    print q, p, g; exit }'
}

PASSED=0 FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $*"; }

# pingpong T SRV_STACK CLI_STACK EVENT: one exchange, checked.
pingpong() {
  local t=$1 ss=$2 cs=$3 ev=$4 name size args s c sst=0 cst=0 problems=() side out bytes sl sr cl cr
  name="$t-pingpong $ss <- $cs${ev:+ (-e)}"
  [[ -z $ONLY || $name =~ $ONLY ]] || return 0
  size=4096; [[ $t == ud ]] && size=1024
  PORT=$((PORT + 1))
  args="-g 1 -n $ITERS -s $size -p $PORT${ev:+ -e}"
  s=$W/$t-$ss-$cs.srv c=$W/$t-$ss-$cs.cli
  timeout 120 bash -c "$(cmd "$ss" "$t-pingpong" "$args")" >"$s" 2>&1 &
  local spid=$!
  if ! wait_listen "$PORT"; then
    kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true
    fail "$name: the server never listened"; sed 's/^/  srv: /' "$s"; return 0
  fi
  timeout 120 bash -c "$(cmd "$cs" "$t-pingpong" "$args localhost")" >"$c" 2>&1 || cst=$?
  wait "$spid" || sst=$?
  [[ $sst == 0 ]] || problems+=("server exit $sst")
  [[ $cst == 0 ]] || problems+=("client exit $cst")
  for side in server client; do
    out=$s; [[ $side == client ]] && out=$c
    bytes=$(grep -m1 -E '^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$' "$out" | cut -d' ' -f1 || true)
    [[ $bytes == $((size * ITERS * 2)) ]] || problems+=("$side: bytes line '${bytes:-none}', want $((size * ITERS * 2))")
    grep -qE "^$ITERS iters in [0-9.]+ seconds = [0-9.]+ usec/iter$" "$out" \
      || problems+=("$side: no '$ITERS iters in ...' line")
  done
  sl=$(addrs 'local address:' <"$s"); sr=$(addrs 'remote address:' <"$s")
  cl=$(addrs 'local address:' <"$c"); cr=$(addrs 'remote address:' <"$c")
  [[ -n $sl && $sr == "$cl" && $cr == "$sl" ]] || problems+=("addresses do not cross: srv '$sl' / '$sr', cli '$cl' / '$cr'")
  [[ ${sl##* } != "${cl##* }" ]] || problems+=("both sides have GID ${sl##* }: one HCA, not two")
  [[ ${sl##* } =~ ^::ffff:10\. && ${cl##* } =~ ^::ffff:10\. ]] || problems+=("not fabric GIDs: '${sl##* }', '${cl##* }'")
  if [[ ${#problems[@]} == 0 ]]; then
    pass "$name: $ITERS x $size B, $(grep -m1 -oE '[0-9.]+ usec/iter' "$c")"
  else
    fail "$name: ${problems[*]}"
    sed 's/^/  srv: /' "$s"; sed 's/^/  cli: /' "$c"
  fi
}

for t in rc uc ud srq; do
  pingpong "$t" uverbs rdma-core e
  pingpong "$t" rdma-core uverbs ""
  pingpong "$t" ours-c rdma-core ""
  pingpong "$t" rdma-core ours-c e
done

# DevX across the fabric: tests/support/src/bin/devx-pingpong.rs, an RC QP made
# from PRM commands through uverbs::mlx5 (its DevX CQ's completions read
# through a DevX event channel with a cookie), as the client of Debian's
# ibv_rc_pingpong (a libmlx5 verbs QP) in another process.
devx_pair() {
  local name="rc-pingpong rdma-core <- DevX QP (uverbs::mlx5, events by cookie)" s=$W/devx.srv c=$W/devx.cli sst=0 cst=0 problems=() side out
  [[ -z $ONLY || $name =~ $ONLY ]] || return 0
  PORT=$((PORT + 1))
  timeout 120 bash -c "$(cmd rdma-core rc-pingpong "-g 1 -n $ITERS -s 4096 -p $PORT")" >"$s" 2>&1 &
  local spid=$!
  if ! wait_listen "$PORT"; then
    kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true
    fail "$name: the server never listened"; return 0
  fi
  timeout 120 "$ROOT/scripts/on-model.sh" -- "$TARGET/debug/devx-pingpong" localhost "$PORT" "$ITERS" 4096 >"$c" 2>&1 || cst=$?
  wait "$spid" || sst=$?
  [[ $sst == 0 && $cst == 0 ]] || problems+=("server exit $sst, client exit $cst")
  for side in server client; do
    out=$s; [[ $side == client ]] && out=$c
    grep -q "^$((4096 * ITERS * 2)) bytes in " "$out" || problems+=("$side: no '$((4096 * ITERS * 2)) bytes in' line")
    grep -qE "^$ITERS iters in " "$out" || problems+=("$side: no '$ITERS iters in' line")
  done
  if [[ ${#problems[@]} == 0 ]]; then
    pass "$name: $ITERS x 4096 B, $(grep -m1 -oE '[0-9.]+ usec/iter' "$c")"
  else
    fail "$name: ${problems[*]}"; sed 's/^/  srv: /' "$s"; sed 's/^/  cli: /' "$c"
  fi
}
devx_pair

# perftest 4.5 (Debian's perftest 4.5+0.17-1, libpci3 and libibumad3, fetched once
# with `apt-get download` into a cache of their own; the rest of rdma-core
# comes from on-model.sh's).
PT_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-perftest-4.5
PT_STAMP="perftest=4.5+0.17-1 libpci3 libibumad3=44.0-2"
fetch_perftest() {
  [[ -f $PT_CACHE/.done && $(<"$PT_CACHE/.done") == "$PT_STAMP" ]] && return 0
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/uverbs-perftest.XXXXXX")
  # shellcheck disable=SC2086
  (cd "$work" && apt-get download $PT_STAMP >&2 2>/dev/null) \
    || { apt-get update -qq >&2 && (cd "$work" && apt-get download $PT_STAMP >&2); } || return 1
  mkdir -p "$work/root"
  for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
  rm -rf "$PT_CACHE"; mkdir -p "$(dirname "$PT_CACHE")"; mv "$work/root" "$PT_CACHE"
  rm -rf "$work"
  echo "$PT_STAMP" >"$PT_CACHE/.done"
}

BW_ITERS=${BW_ITERS:-500} LAT_ITERS=${LAT_ITERS:-200}
PERF_ROWS=()
# perftest TEST STACK: server and client of TEST (ib_write_bw, ...) on STACK
# (rdma-core or ours-c), checked: both exit 0, the client's result row has
# the iterations asked for and positive figures.
perftest() {
  local t=$1 stack=$2 name n args s c sst=0 cst=0 row
  name="$t $stack <- $stack"
  [[ -z $ONLY || $name =~ $ONLY ]] || return 0
  n=$BW_ITERS; [[ $t == *_lat ]] && n=$LAT_ITERS
  PORT=$((PORT + 1))
  args="-d mlx5_0 -x 1 -F -n $n -p $PORT"
  s=$W/$t-$stack.srv c=$W/$t-$stack.cli
  local pre=(env "LD_LIBRARY_PATH=$PT_CACHE/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  timeout 300 "${pre[@]}" bash -c "$(cmd "$stack" perftest "$PT_CACHE/usr/bin/$t $args")" >"$s" 2>&1 &
  local spid=$!
  if ! wait_listen "$PORT"; then
    kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true
    fail "$name: the server never listened"; sed 's/^/  srv: /' "$s"; return 0
  fi
  timeout 300 "${pre[@]}" bash -c "$(cmd "$stack" perftest "$PT_CACHE/usr/bin/$t $args localhost")" >"$c" 2>&1 || cst=$?
  wait "$spid" || sst=$?
  row=$(awk -v n="$n" '$2 == n && $1 ~ /^[0-9]+$/ && NF >= 5 { print; exit }' "$c")
  if [[ $sst == 0 && $cst == 0 && -n $row ]] && awk '{ exit !($4 > 0 && $5 > 0) }' <<<"$row"; then
    pass "$name: $(tr -s ' \t' ' ' <<<"$row")"
    PERF_ROWS+=("$t|$stack|$(tr -s ' \t' ' ' <<<"$row")")
  else
    fail "$name: server exit $sst, client exit $cst, row '${row}'"
    sed 's/^/  srv: /' "$s" | tail -20; sed 's/^/  cli: /' "$c" | tail -20
  fi
}

if [[ -z $ONLY || ib_ =~ $ONLY || $ONLY =~ ib_ ]]; then
  if fetch_perftest; then
    for t in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_send_lat; do
      for stack in rdma-core ours-c; do perftest "$t" "$stack"; done
    done
  else
    fail "perftest: apt-get download $PT_STAMP failed"
  fi
fi

# The issue's false success: each process alone on its model (no fabric).
lone() {
  local name="rc-pingpong rdma-core <- ours-c, each HCA alone (UVERBS_FABRIC=off): the client fails"
  [[ -z $ONLY || $name =~ $ONLY ]] || return 0
  PORT=$((PORT + 1))
  local s=$W/lone.srv c=$W/lone.cli cst=0 args="-g 1 -n $ITERS -p $PORT"
  UVERBS_FABRIC=off timeout 60 bash -c "$(cmd rdma-core rc-pingpong "$args")" >"$s" 2>&1 &
  local spid=$!
  wait_listen "$PORT" || true
  UVERBS_FABRIC=off timeout 60 bash -c "$(cmd ours-c rc-pingpong "$args localhost")" >"$c" 2>&1 || cst=$?
  kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true
  if [[ $cst != 0 && $cst != 124 ]] && ! grep -q 'iters in' "$c" && grep -q 'transport retry counter exceeded' "$c"; then
    pass "$name (exit $cst: $(grep -m1 -o 'Failed status.*' "$c"))"
  else
    fail "$name: client exit $cst"; sed 's/^/  cli: /' "$c"
  fi
}
lone

# descendant PID COMM: the first descendant of PID whose comm is COMM.
descendant() {
  local p kids k
  kids=$(pgrep -P "$1" || true)
  for k in $kids; do
    [[ $(cat "/proc/$k/comm" 2>/dev/null) == "$2" ]] && { echo "$k"; return 0; }
    p=$(descendant "$k" "$2") && { echo "$p"; return 0; }
  done
  return 1
}

# A server killed mid-transfer: the client's RC QP fails after its retries.
# perftest's ib_write_bw, not ibv_rc_pingpong: a pingpong client whose last
# send was acknowledged waits for the server's reply and has nothing in
# flight, so a server killed in that window leaves it waiting for good (as
# on hardware: RC has no keepalive); CI hit that window once. A write_bw
# client always has writes in flight, so the kill always ends them with
# IBV_WC_RETRY_EXC_ERR (12) after the retries.
killed() {
  local name="ib_write_bw rdma-core server killed mid-transfer <- $1: the client fails with retry exceeded"
  [[ -z $ONLY || $name =~ $ONLY ]] || return 0
  PORT=$((PORT + 1))
  local s=$W/kill.srv c=$W/kill-$1.cli cst=0 t0
  local args="-d mlx5_0 -x 1 -F -n 100000000 -p $PORT"
  local pre=(env "LD_LIBRARY_PATH=$PT_CACHE/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  timeout 120 "${pre[@]}" bash -c "exec $(cmd rdma-core perftest "$PT_CACHE/usr/bin/ib_write_bw $args")" >"$s" 2>&1 &
  local spid=$!
  if ! wait_listen "$PORT"; then
    kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true
    fail "$name: the server never listened"; sed 's/^/  srv: /' "$s"; return 0
  fi
  timeout 120 "${pre[@]}" bash -c "$(cmd "$1" perftest "$PT_CACHE/usr/bin/ib_write_bw $args localhost")" >"$c" 2>&1 &
  local cpid=$! victim= i
  # The server's ib_write_bw (the descendant of the job started above),
  # once both HCAs are on the fabric and the client's runs; then two
  # seconds of traffic.
  for ((i = 0; i < 300; i++)); do
    victim=$(descendant "$spid" ib_write_bw) || true
    [[ -n $victim ]] && descendant "$cpid" ib_write_bw >/dev/null \
      && [[ $(find "$UVERBS_FABRIC" -name 'hca-*' | wc -l) -ge 2 ]] && break
    victim=
    sleep 0.1
  done
  if [[ -z $victim ]]; then
    kill "$cpid" "$spid" 2>/dev/null || true; wait "$cpid" "$spid" 2>/dev/null || true
    fail "$name: the two ib_write_bw did not start"; return 0
  fi
  sleep 2
  kill -KILL "$victim"
  t0=$(date +%s)
  wait "$cpid" || cst=$?
  wait "$spid" 2>/dev/null || true
  # perftest 4.5: "Completion with error at client" and the status, 12.
  if [[ $cst != 0 && $cst != 124 ]] && grep -q 'Completion with error' "$c" \
     && grep -qE 'Failed status[^0-9]*(12\b|.*\(12\))' "$c"; then
    pass "$name (after $(( $(date +%s) - t0 )) s: $(grep -m1 -o 'Failed status.*' "$c"))"
  else
    fail "$name: client exit $cst"; tail -8 "$c" | sed 's/^/  cli: /'
  fi
}
if fetch_perftest; then
  killed rdma-core
  killed ours-c
fi

if [[ ${#PERF_ROWS[@]} -gt 0 ]]; then
  echo "perftest rows (model figures): test|stack|bytes iterations ..."
  printf '  %s\n' "${PERF_ROWS[@]}"
fi
wall=$(( $(date +%s) - START ))
result=ok; [[ $FAILED == 0 ]] || result=FAILED
echo "fabric-matrix test result: $result. $PASSED passed; $FAILED failed; 0 ignored; 0 measured; 0 filtered out; finished in ${wall}.00s"
[[ $FAILED == 0 ]]
