#!/usr/bin/env bash
# scripts/two-host.sh — wire compatibility between two hosts: two rxe test
# guests (guest/run-guest.sh --nic) joined by a virtual Ethernet wire, our
# `uverbs` CLI on host A and rdma-core's tools on host B, in both roles.
#
# Usage:
#   scripts/two-host.sh [--kernel 6.1|6.12] [--musl] [--uverbs BIN]
#                       [--rdmacm DIR [--debian-rdmacm] [--known-gaps FILE]]
#                       [--timeout S] [--keep]
#
# Builds `cargo build --bin uverbs` (--musl: `scripts/musl.sh cargo build
# --release --bin uverbs`, static; --uverbs BIN: use BIN, build nothing), then
# boots two guests at once, -smp 1 each (4 vCPUs on 2 cores are slower):
#   host A  192.0.2.1  52:54:00:00:00:0a  rxe0 on eth0   runs `uverbs ...`
#   host B  192.0.2.2  52:54:00:00:00:0b  rxe0 on eth0   runs rdma-core's tools
# The wire is QEMU's dgram netdev over two unix datagram sockets in a private
# temporary directory (one Ethernet frame per datagram), so concurrent runs
# share no port or path; 192.0.2.0/24 exists only on that wire.
#
# Both guests run the same generated script: exchanges in a fixed order, each
# with the server on one host and the client on the other; the server starts
# first, the client retries (at most 45 s) until the server listens. Every
# run is bounded (busybox `timeout`), and each exchange ends with two TCP
# barriers between the hosts (busybox nc): a server still running 10 s after
# its client ended is stopped, and the next exchange starts on both hosts
# together, so a failure or hang costs one exchange, not the run. A perftest
# -R client that lost perftest's own race with its server's second listen
# (scripts/guest-ready.sh perftest_race) makes both sides run again, three
# runs at most; the exchange's line says how many were lost.
#   rc-pingpong  ours(A) srv <- rdma-core(B) cli;  rdma-core(B) srv <- ours(A) cli;
#                ours(B) srv <- ours(A) cli          (-n 200, 4096 B)
#   ud-pingpong  the same three pairs                 (-n 200, -s 1024)
#   rping        the same three pairs                 (-C 20 -V, 64 B)
#   perftest     ib_write_bw (A) srv <- (B) cli, ib_send_lat (B) srv <- (A) cli:
#                rdma-core on both sides, a sanity check of the wire only:
#                `uverbs perf` runs both of its sides on one device (loopback)
#                and does not speak perftest's TCP handshake.
# With --rdmacm DIR (our librdmacm.so.1, libibverbs.so.1, libmlx5.so.1 and
# the stub libefa.so.1, put at /guest/ours on both hosts): Debian's rdma_cm
# programs across the wire, each side over our librdmacm (O: LD_LIBRARY_PATH=
# /guest/ours) or rdma-core's (R), in three pairs each: O(A) server <- R(B)
# client, R(B) server <- O(A) client, O(B) server <- O(A) client:
#   rping -C 20 -V, udaddy -C 10, mckey -C 10 (239.1.2.N; receiver = server),
#   ucmatose -c 2 -C 10, rdma_server/rdma_client, rdma_xserver/rdma_xclient
#   (RC), ib_send_bw -R, ib_write_lat -R (perftest over rdma_cm).
#   The server host waits until the kernel shows its listener (`rdma res show
#   cm_id`; mckey: its IGMP group joined and the receiver busy-polling its CQ,
#   so attached), then meets the client host at a
#   barrier, so the client starts once. --debian-rdmacm: DIR has no
#   librdmacm.so.1 and O is Debian's librdmacm over our libibverbs (development).
#   --known-gaps FILE: `GLOB  reason` lines (bash globs on exchange names, e.g.
#   cm-rdma-server-*, or on KERNEL/NAME; capi/rdmacm-known-gaps.txt): a failed exchange there is
#   listed with its reason and counted ignored.
# What is checked (on this host, from both guests' consoles):
#   every exchange: both sides exit 0 (a client's retries are only for
#     "server not listening yet" failures);
#   pingpongs: each side prints `<size*n*2> bytes in ...` followed by
#     `<n> iters in ...`; each side's `remote address` (QPN, PSN, GID) is the
#     other side's `local address`; the server's GID is ::ffff:<its IP> and the
#     client's ::ffff:<its IP> (so each side ran on its own host's rxe0);
#   rping: the client (-v -V) prints exactly the 20 `ping data:` lines and the
#     server the 20 `server ping data:` lines that rping's pattern gives for
#     pings 0..19, in order (the data went client -> server by RDMA READ and
#     back by RDMA WRITE);
#   rdma_cm programs: rping as above; udaddy, mckey and ucmatose print
#     "data transfers complete" and "return status 0" on both sides;
#     rdma_server/rdma_client and rdma_xserver/rdma_xclient print "end 0";
#   perftest (run with -F): the client's result row has the size and
#     iteration count asked for and a positive bandwidth / latency; when
#     perftest's own CPU clock calibration failed (it says so: r^2 < 0.9, seen
#     once under TCG) its times are meaningless and only the row is checked.
# Output: one line per exchange and a summary on stdout,
#   two-host [6.1]: 11 passed, 0 failed (... s)
#   [6.1] two-host test result: ok. 11 passed; 0 failed; 0 ignored; ...
# (the shape scripts/test.sh totals); a failed exchange prints both sides'
# output. Progress and both guests' consoles go to stderr.
#
# Options: --kernel (default 6.1), --timeout S per guest (default 300),
# --keep (keep the work directory with both consoles; it is kept on failure
# anyway, under target/two-host/). $UVERBS_GUEST_CACHE etc. as for run-guest.sh.
# Needs QEMU >= 7.2 (the dgram netdev), which guest/build-image.sh fetches.
# Exit status: 0 all exchanges passed; 1 an exchange failed or a guest did not
# finish (setup failure, crash, timeout, lost the other host); 2 usage or
# build failure; 130 interrupted (both guests are stopped first).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)

log() { printf '[two-host] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }

KERNEL=6.1 MUSL=0 UVERBS= TIMEOUT=300 KEEP=0 RDMACM= DEBIAN_RDMACM=0 GAPS=
while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel) [[ $# -ge 2 ]] || usage; KERNEL=$2; shift 2 ;;
    --musl) MUSL=1; shift ;;
    --uverbs) [[ $# -ge 2 ]] || usage; UVERBS=$2; shift 2 ;;
    --timeout) [[ $# -ge 2 ]] || usage; TIMEOUT=$2; shift 2 ;;
    --rdmacm) [[ $# -ge 2 ]] || usage; RDMACM=$2; shift 2 ;;
    --debian-rdmacm) DEBIAN_RDMACM=1; shift ;;
    --known-gaps) [[ $# -ge 2 ]] || usage; GAPS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
[[ $KERNEL == 6.1 || $KERNEL == 6.12 ]] || die "--kernel 6.1|6.12"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout takes seconds"
[[ -z $RDMACM || $TIMEOUT -ge 600 ]] || TIMEOUT=600   # 24 more exchanges
GAP_GLOB=() GAP_WHY=()
if [[ -n $GAPS ]]; then
  [[ -f $GAPS ]] || die "--known-gaps $GAPS: no such file"
  while read -r g why; do
    [[ -z $g || $g == \#* ]] && continue
    GAP_GLOB+=("$g") GAP_WHY+=("$why")
  done < "$GAPS"
fi
# gap NAME: a glob matches NAME, or KERNEL/NAME (an entry for one kernel)
gap() { local i; for i in "${!GAP_GLOB[@]}"; do [[ $1 == ${GAP_GLOB[$i]} || $KERNEL/$1 == ${GAP_GLOB[$i]} ]] && { echo "${GAP_WHY[$i]}"; return 0; }; done; return 0; }
START=$(date +%s)

# Iterations: small (two TCG guests share 2 cores; an RC round trip of 4 KiB
# across the wire takes 2-16 ms), still 400 messages per pingpong, the RC
# ones 4 packets each (MTU 1024), and 20 READ + WRITE rounds per rping.
PP_ITERS=200 RC_SIZE=4096 UD_SIZE=1024 RPING_COUNT=20 RPING_SIZE=64
BW_ITERS=100 BW_SIZE=65536 LAT_ITERS=200 LAT_SIZE=2
A_IP=192.0.2.1 B_IP=192.0.2.2

# ---------------------------------------------------------------- build
if [[ -z $UVERBS ]]; then
  cd "$REPO"
  CARGO=(cargo build --bin uverbs)
  [[ $MUSL == 1 ]] && CARGO=("$REPO/scripts/musl.sh" cargo build --release --bin uverbs)
  log "building the uverbs CLI: ${CARGO[*]}"
  UVERBS=$("${CARGO[@]}" --message-format=json-render-diagnostics | python3 -c '
import json, sys
exe = ""
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and t.get("name") == "uverbs" and "bin" in t.get("kind", []):
        exe = m.get("executable") or exe
print(exe)') || die "cargo build --bin uverbs failed"
fi
[[ -n $UVERBS && -x $UVERBS ]] || die "no uverbs executable (${UVERBS:-cargo reported none})"
[[ $MUSL == 1 ]] && { "$REPO/scripts/musl.sh" check "$UVERBS" >&2 || die "$UVERBS is not static"; }
"$REPO/guest/build-image.sh" --kernel "$KERNEL" || die "guest/build-image.sh failed"

# ---------------------------------------------------------------- work dir
mkdir -p "$REPO/target/two-host"
W=$(mktemp -d "$REPO/target/two-host/$KERNEL-$(date +%Y%m%d-%H%M%S)-XXXXXX")
# The wire's sockets live in a short private directory: sun_path holds 107
# bytes, and a comma would end QEMU's option value.
WIRE=$(mktemp -d "${TMPDIR:-/tmp}/uverbs-wire.XXXXXX")
[[ $WIRE != *,* && ${#WIRE} -lt 90 ]] || die "TMPDIR unsuitable for unix sockets: $WIRE"
# --rdmacm: our libraries, stripped, for /guest/ours on both hosts
OURS_ADD=()
if [[ -n $RDMACM ]]; then
  [[ -d $RDMACM ]] || die "--rdmacm $RDMACM: not a directory"
  mkdir -p "$W/ours"
  libs=(libibverbs.so.1 libmlx5.so.1 libefa.so.1)
  if [[ $DEBIAN_RDMACM == 1 ]]; then
    [[ ! -e $RDMACM/librdmacm.so.1 ]] || die "--debian-rdmacm, but $RDMACM has a librdmacm.so.1"
  else
    libs+=(librdmacm.so.1)
  fi
  for n in "${libs[@]}"; do
    [[ -e $RDMACM/$n ]] || die "--rdmacm $RDMACM has no $n"
    objcopy --strip-debug "$RDMACM/$n" "$W/ours/$n" 2>/dev/null || cp -L "$RDMACM/$n" "$W/ours/$n"
  done
  OURS_ADD=(--add "$W/ours:/guest/ours")
fi
# PID: the run-guest.sh of each host still running (unset once reaped)
declare -A PID=()
STATUS=1
cleanup() {
  local p
  # run-guest.sh stops its QEMU on SIGTERM and waits for it.
  for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PID[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WIRE"
  if [[ $STATUS == 0 && $KEEP == 0 ]]; then rm -rf "$W"; else log "work directory kept: $W"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- the exchanges
# NAME SERVER_HOST KIND SERVER_CMD CLIENT_CMD (run by the guest's sh -c, with
# $U our CLI, $D the device, $G the RoCE v2 GID index, $ME this host's IP and
# $PEER the other's exported; the client gets the server's address).
# An optional 7th field READY (listen:PORT or mcast:HEXGROUP) makes the
# client wait until the server host saw its server get there.
EX_NAME=() EX_SRV=() EX_KIND=() EX_SCMD=() EX_CCMD=() EX_DESC=() EX_READY=()
ex() { EX_NAME+=("$1") EX_SRV+=("$2") EX_KIND+=("$3") EX_SCMD+=("$4") EX_CCMD+=("$5") EX_DESC+=("$6") EX_READY+=("${7:-}"); }
pp_args() { echo "-d \$D -g \$G -p $1 -n $PP_ITERS${2:+ $2}"; }
port=18700
for t in rc ud; do
  size=$RC_SIZE extra=
  [[ $t == ud ]] && size=$UD_SIZE extra="-s $UD_SIZE"
  ex "$t-ours-srv-A" A "$t/$size" "\$U $t-pingpong $(pp_args $((port + 1)) "$extra")" \
     "ibv_${t}_pingpong $(pp_args $((port + 1)) "$extra") \$PEER" \
     "$t-pingpong  ours(A) server <- rdma-core(B) client"
  ex "$t-ours-cli-A" B "$t/$size" "ibv_${t}_pingpong $(pp_args $((port + 2)) "$extra")" \
     "\$U $t-pingpong $(pp_args $((port + 2)) "$extra") \$PEER" \
     "$t-pingpong  rdma-core(B) server <- ours(A) client"
  ex "$t-ours-both" B "$t/$size" "\$U $t-pingpong $(pp_args $((port + 3)) "$extra")" \
     "\$U $t-pingpong $(pp_args $((port + 3)) "$extra") \$PEER" \
     "$t-pingpong  ours(B) server <- ours(A) client"
  port=$((port + 10))
done
rp_srv() { echo "-s -v -a \$ME -p $1 -S $RPING_SIZE"; }
rp_cli() { echo "-c -v -V -a \$PEER -p $1 -C $RPING_COUNT -S $RPING_SIZE"; }
ex rping-ours-srv-A A rping "\$U rping $(rp_srv 18731)" "rping $(rp_cli 18731)" \
   "rping        ours(A) server <- rdma-core(B) client"
ex rping-ours-cli-A B rping "rping $(rp_srv 18732)" "\$U rping $(rp_cli 18732)" \
   "rping        rdma-core(B) server <- ours(A) client"
ex rping-ours-both B rping "\$U rping $(rp_srv 18733)" "\$U rping $(rp_cli 18733)" \
   "rping        ours(B) server <- ours(A) client"
ex perftest-write-bw A bw "ib_write_bw -F -d \$D -x \$G -p 18741 -n $BW_ITERS -s $BW_SIZE" \
   "ib_write_bw -F -d \$D -x \$G -p 18741 -n $BW_ITERS -s $BW_SIZE \$PEER" \
   "ib_write_bw  rdma-core(A) server <- rdma-core(B) client (wire check)"
ex perftest-send-lat B lat "ib_send_lat -F -d \$D -x \$G -p 18742 -n $LAT_ITERS -s $LAT_SIZE" \
   "ib_send_lat -F -d \$D -x \$G -p 18742 -n $LAT_ITERS -s $LAT_SIZE \$PEER" \
   "ib_send_lat  rdma-core(B) server <- rdma-core(A) client (wire check)"

# rdma_cm programs over our librdmacm (O) and rdma-core's (R), across the wire.
CM_MSGS=10
if [[ -n $RDMACM ]]; then
  O="env LD_LIBRARY_PATH=/guest/ours "
  cmp=18800 grp=1
  # cm NAME-STEM KIND READY SERVER_PROG CLIENT_PROG SERVER_ARGS CLIENT_ARGS:
  # the three pairs; @P@ in READY and the arguments is the port, $cmp for
  # the first pair, +100 and +200 for the others
  cm() {
    local stem=$1 kind=$2 ready=$3 sp=$4 cp=$5 sargs=$6 cargs=$7 j p pair srv scmd ccmd desc
    for j in 0 1 2; do
      p=$((cmp + 100 * j))
      case $j in
        0) pair=O-srv-A srv=A scmd="$O$sp" ccmd="$cp" desc="ours(A) server <- rdma-core(B) client" ;;
        1) pair=O-cli-A srv=B scmd="$sp" ccmd="$O$cp" desc="rdma-core(B) server <- ours(A) client" ;;
        2) pair=O-both srv=B scmd="$O$sp" ccmd="$O$cp" desc="ours(B) server <- ours(A) client" ;;
      esac
      ex "$stem-$pair" "$srv" "$kind" "$scmd ${sargs//@P@/$p}" "$ccmd ${cargs//@P@/$p}" \
        "cm $(printf '%-12s' "$sp") $desc" "${ready//@P@/$p}"
    done
  }
  cmp=$((cmp + 1)); cm cm-rping rping "listen:@P@" rping rping "$(rp_srv @P@)" "$(rp_cli @P@)"
  cm cm-udaddy cm-lines listen:7174 udaddy udaddy "-b \$ME -C $CM_MSGS" "-s \$PEER -C $CM_MSGS"
  g=$((grp++)); cm cm-mckey-$g cm-lines "mcast:$(printf '%02X0201EF' "$g")" mckey mckey "-m 239.1.2.$g -b \$ME -C $CM_MSGS" "-m 239.1.2.$g -b \$ME -s -C $CM_MSGS"
  cmp=$((cmp + 1)); cm cm-ucmatose cm-lines "listen:@P@" ucmatose ucmatose "-b \$ME -p @P@ -c 2 -C $CM_MSGS" "-s \$PEER -p @P@ -c 2 -C $CM_MSGS"
  cmp=$((cmp + 1)); cm cm-rdma-server cm-end "listen:@P@" rdma_server rdma_client "-s \$ME -p @P@" "-s \$PEER -p @P@"
  cmp=$((cmp + 1)); cm cm-rdma-xserver cm-end "listen:@P@" rdma_xserver rdma_xclient "-c r -p @P@" "-c r -s \$PEER -p @P@"
  cmp=$((cmp + 1)); cm cm-send-bw bw "listen:@P@" ib_send_bw ib_send_bw "-R -F -d \$D -p @P@ -n $BW_ITERS -s $BW_SIZE" "-R -F -d \$D -p @P@ -n $BW_ITERS -s $BW_SIZE \$PEER"
  cmp=$((cmp + 1)); cm cm-write-lat lat "listen:@P@" ib_write_lat ib_write_lat "-R -F -d \$D -p @P@ -n $LAT_ITERS -s $LAT_SIZE" "-R -F -d \$D -p @P@ -n $LAT_ITERS -s $LAT_SIZE \$PEER"
fi

# ---------------------------------------------------------------- guest script
# sq STR: single-quote STR for a POSIX shell
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
SCRIPT=$W/guest.sh
{
  cat <<'EOF'
# Generated by scripts/two-host.sh; runs on both hosts ($TWO_HOST_SELF = A or B).
export U=/guest/bin/uverbs D=$UVERBS_TEST_DEVICE G=$UVERBS_TEST_GID_INDEX
export ME=$UVERBS_TEST_IP PEER=$TWO_HOST_PEER
SELF=$TWO_HOST_SELF
CONNECT_SECS=45    # a client retries "server not listening yet" this long
RUN_SECS=60        # one client run
GRACE_SECS=10      # a server still running this long after its client ended is stopped
BARRIER_SECS=150   # > CONNECT_SECS + RUN_SECS: the longest a client side can take
EOF
  cat "$REPO/scripts/guest-ready.sh"
  cat <<'EOF'
# barrier K: return once the other host has reached barrier K too (A listens
# on TCP port 19000+K, B connects, retrying until A is there); fails after
# BARRIER_SECS. Exchange K ends with two: 2K when the client side is done
# (the server then gets GRACE_SECS to finish), 2K+1 when both are, so a
# failed exchange costs at most GRACE_SECS and the next one starts on both
# hosts together.
barrier() {
  port=$((19000 + $1))
  if [ "$SELF" = A ]; then
    timeout $BARRIER_SECS nc -l -p $port </dev/null >/dev/null 2>&1
    return
  fi
  bt=$(cs)
  until nc "$PEER" $port </dev/null >/dev/null 2>&1; do
    [ $(( $(cs) - bt )) -ge $((BARRIER_SECS * 100)) ] && return 1
    sleep 0.2
  done
}
# The wire is up once the peer answers (it boots at the same time; ARP first).
i=0
until ping -c 1 -W 1 "$PEER" >/dev/null 2>&1; do
  i=$((i + 1))
  [ $i -ge 90 ] && { echo "=== two-host: wire down: $PEER does not answer"; exit 3; }
done
barrier 0 || { echo "=== two-host: lost the other host at barrier 0"; exit 4; }
echo "=== two-host: wire up: $SELF $ME -> $PEER after $i lost ping(s)"
# tell K WORD: the client host of the exchange tells the server host WORD,
# meeting it at barrier K (A listens, B connects, as barrier); prints the
# word on both hosts (empty if the other host never came).
tell() {
  port=$((19000 + $1))
  if [ "$SELF" = A ]; then
    if [ $role = client ]; then
      echo "$2" | timeout $BARRIER_SECS nc -l -p $port >/dev/null 2>&1 && echo "$2"
    else
      timeout $BARRIER_SECS nc -l -p $port </dev/null 2>/dev/null
    fi
    return
  fi
  bt=$(cs)
  if [ $role = client ]; then
    until echo "$2" | nc "$PEER" $port >/dev/null 2>&1; do
      [ $(( $(cs) - bt )) -ge $((BARRIER_SECS * 100)) ] && return 1
      sleep 0.2
    done
    echo "$2"
  else
    until heard=$(nc "$PEER" $port </dev/null 2>/dev/null) && [ -n "$heard" ]; do
      [ $(( $(cs) - bt )) -ge $((BARRIER_SECS * 100)) ] && return 1
      sleep 0.2
    done
    echo "$heard"
  fi
}
# xchg K NAME SERVER_HOST SERVER_CMD CLIENT_CMD [READY]: play this host's side
# of exchange K, print its output between markers, then meet the other host.
# With READY the server host first waits for its server (ready above), then
# both meet at barrier 2000+K and the client starts. When the client lost
# perftest -R's own race (perftest_race) both sides run again, at most
# RACE_TRIES runs in all: the client host says so at barrier 3000+K, and
# every barrier of run R+1 is R*4000 further on.
xchg() {
  k=$1 name=$2 rdy=${6:-}
  if [ "$3" = "$SELF" ]; then role=server cmd=$4; else role=client cmd=$5; fi
  out=/tmp/$name.$role t0=$(cs) n=1 sync=ok races=0
  rm -f $out.earlier
  while :; do
    off=$((races * 4000)) note= verdict=done
    if [ $role = server ]; then
      # (exec: $! is the tool itself, which a kill then reaches)
      timeout $((BARRIER_SECS + GRACE_SECS + 30)) sh -c "exec $cmd" > $out 2>&1 &
      pid=$!
      if [ -n "$rdy" ]; then
        ready "$rdy" $pid || note=" (never ready: $rdy)"
        barrier $((2000 + k + off)) || sync=lost
      fi
      barrier $((2 * k + off)) || sync=lost       # the client side is done (or gone)
      i=0
      while alive $pid && [ $i -lt $((GRACE_SECS * 10)) ]; do sleep 0.1; i=$((i + 1)); done
      if alive $pid; then
        kill $pid; note=" (stopped: still running ${GRACE_SECS} s after the client ended)"
      fi
      wait $pid; rc=$?
    else
      rc=none
      [ -z "$rdy" ] || barrier $((2000 + k + off)) || sync=lost
      while [ $sync = ok ]; do
        timeout $RUN_SECS sh -c "exec $cmd" > $out 2>&1; rc=$?
        [ $rc = 0 ] && break
        if perftest_race $out; then
          [ $races -lt $((RACE_TRIES - 1)) ] && verdict=race
          break
        fi
        # Retry only "nobody listens yet": pingpong/perftest's TCP connect, and
        # rdma_cm's REJECTED (the peer's CM rejects a connect to an unbound port).
        grep -q -e "Couldn't connect to" -e 'RDMA_CM_EVENT_REJECTED' $out || break
        [ $(( $(cs) - t0 )) -ge $((CONNECT_SECS * 100)) ] && break
        # keep what the failed attempt printed (shown apart, on failure)
        { echo "(attempt $n, exit $rc:)"; cat $out; } >> $out.earlier
        n=$((n + 1))
        sleep 0.3
      done
      [ $rc = 143 ] && note=" (killed after ${RUN_SECS} s)"
      barrier $((2 * k + off)) || sync=lost
    fi
    [ $sync = ok ] && { barrier $((2 * k + 1 + off)) || sync=lost; }
    [ $sync = ok ] || break
    heard=$(tell $((3000 + k + off)) $verdict) || { sync=lost; break; }
    [ "$heard" = race ] || break
    races=$((races + 1))
    { echo "(run $races of both sides: perftest's listen race lost; exit $rc:)"; cat $out; } >> $out.earlier
  done
  echo "=== two-host: begin $name $role"
  echo "\$ $cmd"
  cat $out
  echo "=== two-host: end $name $role exit $rc attempts $n cs $(( $(cs) - t0 )) races $races$note"
  if [ -f $out.earlier ]; then
    echo "=== two-host: earlier $name $role"; cat $out.earlier; echo "=== two-host: earlier-end $name $role"
  fi
  [ $sync = ok ] || { echo "=== two-host: lost the other host in exchange $k"; exit 4; }
}
EOF
  for i in "${!EX_NAME[@]}"; do
    echo "xchg $((i + 1)) ${EX_NAME[$i]} ${EX_SRV[$i]} $(sq "${EX_SCMD[$i]}") $(sq "${EX_CCMD[$i]}") ${EX_READY[$i]}"
  done
  cat <<'EOF'
echo "=== two-host: $SELF eth0 rx $(cat /sys/class/net/eth0/statistics/rx_packets) tx $(cat /sys/class/net/eth0/statistics/tx_packets) packets"
exit 0
EOF
} > "$SCRIPT"

# ---------------------------------------------------------------- boot both
# guest NAME IP MAC PEER_IP LOCAL_SOCK REMOTE_SOCK: start one guest in the background
guest() {
  "$REPO/guest/run-guest.sh" --kernel "$KERNEL" --no-build --quiet --timeout "$TIMEOUT" \
    --smp 1 --log "$W/$1.console" --ip "$2" --mac "$3" \
    --nic "dgram,local.type=unix,local.path=$WIRE/$5,remote.type=unix,remote.path=$WIRE/$6" \
    --add "$UVERBS:/guest/bin/uverbs" "${OURS_ADD[@]}" --env "TWO_HOST_SELF=$1" --env "TWO_HOST_PEER=$4" \
    --script "$SCRIPT" 2> "$W/$1.run-guest" &
  PID[$1]=$!
}
log "kernel $KERNEL, uverbs $UVERBS; ${#EX_NAME[@]} exchanges; work directory $W"
T0=$(date +%s%N)
guest A "$A_IP" 52:54:00:00:00:0a "$B_IP" a.sock b.sock
guest B "$B_IP" 52:54:00:00:00:0b "$A_IP" b.sock a.sock

# Wait for both. When one guest fails (setup, crash, lost the other) the other
# has nobody to talk to: stop it at once. When one finishes normally the other
# has passed the same last barrier: give it 30 s to power off.
declare -A RC=()
deadline=
stop_running() { local p; for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; done; }
while [[ ${#PID[@]} -gt 0 ]]; do
  for h in A B; do
    [[ -n ${PID[$h]:-} ]] && ! kill -0 "${PID[$h]}" 2>/dev/null || continue
    set +e; wait "${PID[$h]}"; RC[$h]=$?; set -e
    unset "PID[$h]"
    log "guest $h finished: run-guest.sh exit ${RC[$h]} ($(( ($(date +%s%N) - T0) / 1000000 )) ms)"
    if [[ ${RC[$h]} != 0 ]]; then stop_running
    else deadline=${deadline:-$(( $(date +%s) + 30 ))}
    fi
  done
  if [[ -n $deadline && $(date +%s) -gt $deadline ]]; then
    log "the other guest did not finish within 30 s of the first: stopping it"
    stop_running
    deadline=
  fi
  sleep 0.2
done
GUEST_MS=$(( ($(date +%s%N) - T0) / 1000000 ))
for h in A B; do
  sed "s/^/[$KERNEL $h] /" "$W/$h.run-guest" >&2
  [[ -f $W/$h.console ]] && tr -d '\r' < "$W/$h.console" > "$W/$h.log" || : > "$W/$h.log"
  sed "s/^/[$KERNEL $h] /" "$W/$h.log" >&2
done

# ---------------------------------------------------------------- checks
# section HOST NAME ROLE: that side's output (command line first)
section() {
  awk -v b="=== two-host: begin $2 $3" -v e="=== two-host: end $2 $3 " \
    '$0 == b { on = 1; next } on && index($0, e) == 1 { exit } on' "$W/$1.log"
}
# earlier HOST NAME ROLE: a retried client's earlier attempts
earlier() {
  awk -v b="=== two-host: earlier $2 $3" -v e="=== two-host: earlier-end $2 $3" \
    '$0 == b { on = 1; next } on && $0 == e { exit } on' "$W/$1.log"
}
# endline HOST NAME ROLE: "EXIT ATTEMPTS CENTISECONDS RACES[ (NOTE)]", empty if
# that side never ended
endline() {
  awk -v e="=== two-host: end $2 $3 exit " \
    'index($0, e) == 1 { split(substr($0, length(e) + 1), f, " "); n = index($0, " ("); print f[1], f[3], f[5], f[7] (n ? substr($0, n) : "") }' "$W/$1.log"
}
# addrs LABEL < output: "QPN PSN GID" of each `LABEL` line of a pingpong
addrs() {
  awk -v l="$1" 'index($0, l) {
    q = $0; sub(/.*QPN /, "", q); sub(/[,:].*/, "", q)
    p = $0; sub(/.*PSN /, "", p); sub(/[,:].*/, "", p)
    g = $0; sub(/.*GID /, "", g); sub(/[ \t]+$/, "", g)
    print q, p, g }'
}
. "$REPO/scripts/wire-checks.sh"   # rping_lines, check_perf, problem

# The checks below add to PROBLEMS (empty: the exchange passed) and set
# SUMMARY (the figures for the report line).
# check_pingpong SRV_OUT CLI_OUT SIZE SRV_IP CLI_IP
check_pingpong() {
  local s=$1 c=$2 size=$3 sip=$4 cip=$5 side out bytes sl sr cl cr
  for side in server client; do
    out=$s; [[ $side == client ]] && out=$c
    bytes=$(grep -m1 -E '^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$' <<<"$out" | cut -d' ' -f1 || true)
    [[ $bytes == $((size * PP_ITERS * 2)) ]] \
      || problem "$side: the bytes line says '${bytes:-none}', want $((size * PP_ITERS * 2))"
    grep -A1 -E '^[0-9]+ bytes in ' <<<"$out" | grep -qE "^$PP_ITERS iters in [0-9.]+ seconds = [0-9.]+ usec/iter$" \
      || problem "$side: no '$PP_ITERS iters in ...' line after the bytes line"
  done
  sl=$(addrs 'local address:' <<<"$s"); sr=$(addrs 'remote address:' <<<"$s")
  cl=$(addrs 'local address:' <<<"$c"); cr=$(addrs 'remote address:' <<<"$c")
  [[ -n $sl && -n $cl ]] || problem "no 'local address' line (server '$sl', client '$cl')"
  [[ $sr == "$cl" ]] || problem "the server's remote address '$sr' is not the client's local '$cl'"
  [[ $cr == "$sl" ]] || problem "the client's remote address '$cr' is not the server's local '$sl'"
  [[ -z $sl || ${sl##* } == "::ffff:$sip" ]] || problem "the server's GID is ${sl##* }, want ::ffff:$sip"
  [[ -z $cl || ${cl##* } == "::ffff:$cip" ]] || problem "the client's GID is ${cl##* }, want ::ffff:$cip"
  SUMMARY="$PP_ITERS iters x $size B, $(grep -m1 -oE '[0-9.]+ usec/iter' <<<"$c" || echo '? usec/iter')"
}
# check_rping SRV_OUT CLI_OUT
check_rping() {
  local s=$1 c=$2 side prefix out got want
  for side in client server; do
    prefix='ping data: ' out=$c
    [[ $side == server ]] && prefix='server ping data: ' out=$s
    want=$(rping_lines "$prefix" "$RPING_COUNT" "$RPING_SIZE")
    got=$(grep -E "^$prefix" <<<"$out" || true)
    [[ $got == "$want" ]] || problem "$side: its '$prefix' lines are not rping's pings 0..$((RPING_COUNT - 1))" \
      "($(grep -c . <<<"$got" || true) lines; first difference: $(diff <(echo "$want") <(echo "$got") | grep -m1 '^[<>]' || true))"
  done
  SUMMARY="$RPING_COUNT pings x $RPING_SIZE B, data checked on both sides"
}
# check_cm_lines SRV_OUT CLI_OUT KIND SRV_CMD CLI_CMD: udaddy/mckey/ucmatose
# end with "data transfers complete" ... "return status 0"; rdma_server &
# co. with "<argv[0]>: end 0"
check_cm_lines() {
  local side out cmd prog
  for side in server client; do
    out=$1 cmd=$4; [[ $side == client ]] && out=$2 cmd=$5
    if [[ $3 == cm-lines ]]; then
      grep -qx 'data transfers complete' <<<"$out" || problem "$side: no 'data transfers complete'"
      grep -qx 'return status 0' <<<"$out" || problem "$side: no 'return status 0'"
    else
      prog=${cmd#env LD_LIBRARY_PATH=/guest/ours }; prog=${prog%% *}
      grep -qx "$prog: end 0" <<<"$out" || problem "$side: no '$prog: end 0'"
    fi
  done
  SUMMARY="$(grep -c . <<<"$1") + $(grep -c . <<<"$2") lines checked"
}

passed=0 failed=0 ignored=0
for i in "${!EX_NAME[@]}"; do
  name=${EX_NAME[$i]} srv=${EX_SRV[$i]} kind=${EX_KIND[$i]}
  cli=A; [[ $srv == A ]] && cli=B
  sip=$A_IP cip=$B_IP; [[ $srv == B ]] && sip=$B_IP cip=$A_IP
  sout=$(section "$srv" "$name" server) cout=$(section "$cli" "$name" client)
  read -r src _ scs _ snote <<<"$(endline "$srv" "$name" server)" || true
  read -r crc catt ccs craces cnote <<<"$(endline "$cli" "$name" client)" || true
  PROBLEMS=() SUMMARY=
  [[ -n ${src:-} ]] || problem "server: no result (host $srv stopped or lost the other host before this exchange)"
  [[ -n ${crc:-} ]] || problem "client: no result (host $cli stopped or lost the other host before this exchange)"
  [[ -z ${src:-} || $src == 0 ]] || problem "server exited $src${snote:+ $snote}"
  [[ -z ${crc:-} || $crc == 0 ]] || problem "client exited $crc${cnote:+ $cnote} after ${catt:-?} attempt(s)"
  # what they printed is judged only when both ended well
  if [[ ${src:-} == 0 && ${crc:-} == 0 ]]; then
    case $kind in
      rc/*|ud/*) check_pingpong "$sout" "$cout" "${kind#*/}" "$sip" "$cip" ;;
      rping) check_rping "$sout" "$cout" ;;
      cm-lines|cm-end) check_cm_lines "$sout" "$cout" "$kind" "${EX_SCMD[$i]}" "${EX_CCMD[$i]}" ;;
      bw) check_perf "$cout" bw "$BW_SIZE" "$BW_ITERS" ;;
      lat) check_perf "$cout" lat "$LAT_SIZE" "$LAT_ITERS" ;;
    esac
  fi
  secs=$(awk -v c="${ccs:-0}" 'BEGIN { printf "%.1f", c / 100 }')
  why=$(gap "$name")
  if [[ ${#PROBLEMS[@]} == 0 ]]; then
    passed=$((passed + 1))
    races=""
    [[ ${craces:-0} == 0 ]] || races=", perftest's listen race lost $craces time(s): both sides ran again"
    printf '[%s] ok      %-62s %s; %s s, %s attempt(s)%s\n' "$KERNEL" "${EX_DESC[$i]}" "$SUMMARY" "$secs" "$catt" "$races"
    [[ -z $why ]] || printf '[%s]   note: %s passes now: remove it from %s\n' "$KERNEL" "$name" "$GAPS"
  elif [[ -n $why ]]; then
    ignored=$((ignored + 1))
    printf '[%s] gap     %-62s known gap (%s): %s\n' "$KERNEL" "${EX_DESC[$i]}" "$why" "${PROBLEMS[0]}"
  else
    failed=$((failed + 1))
    printf '[%s] FAILED  %s\n' "$KERNEL" "${EX_DESC[$i]}"
    printf '    %s\n' "${PROBLEMS[@]}"
    echo "    --- server (host $srv):"; sed 's/^/    | /' <<<"${sout:-(no output)}"
    echo "    --- client (host $cli):"; sed 's/^/    | /' <<<"${cout:-(no output)}"
    ce=$(earlier "$cli" "$name" client)
    [[ -z $ce ]] || { echo "    --- client's earlier attempts:"; sed 's/^/    | /' <<<"$ce"; }
  fi
done
for h in A B; do
  grep -h '^=== two-host: \(wire\|lost\|[AB] eth0\)' "$W/$h.log" | sed "s/^=== two-host: /[$KERNEL] host $h: /" || true
  if [[ ${RC[$h]} != 0 ]]; then
    echo "[$KERNEL] GUEST $h FAILED: run-guest.sh exit ${RC[$h]} (3 wire down, 4 lost the other host, 123 setup, 124 timeout, 125 crash, 126 host error, 130 stopped)"
    echo "    --- last console lines of host $h:"; tail -n 30 "$W/$h.log" | sed 's/^/    | /'
    failed=$((failed + 1))
  fi
done
wall=$(( $(date +%s) - START ))
result=ok; [[ $failed == 0 ]] || result=FAILED
echo "two-host [$KERNEL]: $passed passed, $failed failed, $ignored known gaps (guests ${GUEST_MS} ms, ${wall} s in all)"
echo "[$KERNEL] two-host test result: $result. $passed passed; $failed failed; $ignored ignored; 0 measured; 0 filtered out; finished in ${wall}.00s"
[[ $failed == 0 ]] && STATUS=0
exit "$STATUS"
