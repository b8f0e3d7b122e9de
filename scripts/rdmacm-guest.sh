#!/usr/bin/env bash
# scripts/rdmacm-guest.sh — Debian's rdma_cm programs over our librdmacm.so.1
# (capi/rdmacm/) and over rdma-core's, against each other, in one rxe test
# guest per kernel; plus the seed-003 C program (capi/tests/c/cm_notify.c)
# and the fully static musl rping-like program (capi/tests/c/static_rping.c)
# against Debian's rping.
#
# Usage:
#   scripts/rdmacm-guest.sh --ours DIR [--kernel 6.1|6.12|all] [--no-static]
#                           [--debian-rdmacm] [--only REGEX] [--timeout S]
#                           [--known-gaps FILE] [--keep DIR]
#                           [--recheck CONSOLE]
#   DIR holds librdmacm.so.1, libibverbs.so.1, libmlx5.so.1 and the stub
#   libefa.so.1 (scripts/test.sh builds them in target/rdmacm-ours, release). --debian-rdmacm: DIR
#   has no librdmacm.so.1 and "ours" means Debian's librdmacm.so.1 over our
#   libibverbs.so.1 (a development mode; CI never uses it).
#   --known-gaps FILE: exchanges known not to pass over ours yet, one
#   `GLOB  reason` a line (a bash glob on the exchange name, e.g.
#   rdma_server:*O*, or on KERNEL/NAME, e.g. 6.12/mckey:O-R, for one kernel;
#   capi/rdmacm-known-gaps.txt): a failure there is listed
#   with its reason and counted ignored, a pass is noted ("remove it").
#   --recheck CONSOLE: no guest; check a console kept with --keep (same
#   options otherwise, so the same exchanges) again.
#
# Each side of each exchange picks its libraries:
#   R  rdma-core: Debian's librdmacm.so.1 + libibverbs.so.1 + providers
#   O  ours: LD_LIBRARY_PATH=/guest/ours (our librdmacm.so.1, libibverbs.so.1,
#      libmlx5.so.1, stub libefa.so.1)
#   S  the static musl static_rping (no librdmacm, no libibverbs at all)
# Exchanges (server first, the client once it listens), each tool four times:
# R<-R (the baseline), O<-O, O server <- R client, R server <- O client:
#   rping            -s -v / -c -v -V -C 10 -S 64
#   udaddy           -b ADDR -C 10 / -s ADDR -C 10        (UD, SIDR)
#   mckey            -m GROUP -b ADDR -C 10 / ... -s      (multicast join; a
#                    receiver still waiting 2 s after a good sender run gets
#                    another, at most 3 in all, reported: on 6.12's rxe
#                    datagrams to a group are lost now and then, with
#                    rdma-core alone too)
#   ucmatose         -b ADDR -c 2 -C 10 / -s ADDR -c 2 -C 10
#   rdma_server      -s ADDR -p P / rdma_client -s ADDR -p P   (sync ids, rdma_create_ep)
#   rdma_xserver     -p P / rdma_xclient -s ADDR -p P     (RC; rxe has no XRC)
#   ib_send_bw -R    -F -n 200 (perftest over rdma_cm)
#   ib_write_lat -R  -F -n 200
#   cm_notify        -s / -c (also compared with rdma-core's output, below)
# and static_rping (S) as server <- rping client (R and O) and rping server
# (R and O) <- static_rping client.
# "Listens" is read from the kernel (`rdma res show cm_id`: a LISTEN id on the
# port; mckey: its IGMP group in /proc/net/igmp and the receiver busy-polling
# its CQ, i.e. out of its blocking read of the JOIN event: attached), so
# a client never races its server's first listen. perftest -R has a race of
# its own, its second listen (scripts/guest-ready.sh perftest_race): a
# client that lost it makes both sides run again, three runs at most, and
# the exchange's line says how many were lost.
#
# Checks (on the host, from the console):
#   every exchange: both sides exit 0 within their bounds;
#   each tool's output (stdout + stderr) over O<-O, O<-R and R<-O is the
#     baseline R<-R's, line for line, per role (mckey's group address, which
#     differs per exchange, masked, and rping's two lines that depend on its
#     threads' timing dropped; perftest: its result row
#     has the size and iterations and positive figures instead, since its
#     numbers vary);
#   the baseline itself: rping's 10 data lines (rping.c's pattern) on both
#     sides; udaddy/ucmatose/mckey print "return status 0"; rdma_server,
#     rdma_client, rdma_xserver, rdma_xclient print "end 0"; cm_notify
#     prints "done" on both sides;
#   static_rping: the same data lines on both sides as rping's;
#   the libraries: each program run as O resolves librdmacm.so.1 and
#     libibverbs.so.1 from /guest/ours (LD_TRACE_LOADED_OBJECTS), as R from
#     Debian's directory; static_rping has no PT_INTERP (scripts/musl.sh check).
# Output: one line per exchange, then per kernel
#   [6.1] rdmacm test result: ok. 46 passed; 0 failed; 0 ignored; ...
# (scripts/test.sh totals these); a failed exchange prints both sides'
# output and the baseline's. The guest console goes to stderr.
# Exit status: 0 all passed; 1 something failed (or a guest did not finish:
# "FAILED: run-guest.sh exit 125" is a crash, which test.sh's guest_step
# reruns); 2 usage or build failure.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { printf '[rdmacm-guest] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }

RECHECK= KERNELS=(6.1 6.12) OURS= STATIC=1 DEBIAN_RDMACM=0 ONLY= TIMEOUT=900 KEEP= GAPS=
need() { [[ $1 -ge 2 ]] || usage; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel) need $#; case $2 in all) KERNELS=(6.1 6.12) ;; 6.1|6.12) KERNELS=("$2") ;; *) usage ;; esac; shift 2 ;;
    --ours) need $#; OURS=$2; shift 2 ;;
    --no-static) STATIC=0; shift ;;
    --debian-rdmacm) DEBIAN_RDMACM=1; shift ;;
    --only) need $#; ONLY=$2; shift 2 ;;
    --timeout) need $#; TIMEOUT=$2; shift 2 ;;
    --keep) need $#; KEEP=$2; shift 2 ;;
    --known-gaps) need $#; GAPS=$2; shift 2 ;;
    --recheck) need $#; RECHECK=$2; shift 2 ;;
    -h|--help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
[[ -n $OURS ]] || { log "--ours DIR is required"; usage; }
[[ -d $OURS ]] || die "--ours $OURS: not a directory"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout takes seconds"
GAP_GLOB=() GAP_WHY=()
if [[ -n $GAPS ]]; then
  [[ -f $GAPS ]] || die "--known-gaps $GAPS: no such file"
  while read -r g why; do
    [[ -z $g || $g == \#* ]] && continue
    GAP_GLOB+=("$g") GAP_WHY+=("$why")
  done < "$GAPS"
fi
# gap NAME: the reason NAME is a known gap, or nothing
# gap NAME KERNEL: a glob matches NAME, or KERNEL/NAME (an entry for one kernel)
gap() { local i; for i in "${!GAP_GLOB[@]}"; do [[ $1 == ${GAP_GLOB[$i]} || $2/$1 == ${GAP_GLOB[$i]} ]] && { echo "${GAP_WHY[$i]}"; return 0; }; done; return 0; }
START=$(date +%s)

W=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-guest.XXXXXX")
trap 'rm -rf "$W"' EXIT

# ---------------------------------------------------------------- ours
mkdir -p "$W/ours" "$W/bin"
LIBS=(libibverbs.so.1 libmlx5.so.1 libefa.so.1)
if [[ $DEBIAN_RDMACM == 1 ]]; then
  [[ ! -e $OURS/librdmacm.so.1 ]] || die "--debian-rdmacm, but $OURS has a librdmacm.so.1"
else
  LIBS=(librdmacm.so.1 "${LIBS[@]}")
fi
for n in "${LIBS[@]}"; do
  [[ -e $OURS/$n ]] || die "--ours $OURS has no $n"
  objcopy --strip-debug "$OURS/$n" "$W/ours/$n" 2>/dev/null || cp -L "$OURS/$n" "$W/ours/$n"
  so=$(readelf -d "$W/ours/$n" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [[ $so == "$n" ]] || die "$OURS/$n has SONAME '${so:-none}', not $n"
done

if [[ -n $RECHECK ]]; then STATIC_BUILD=0; else STATIC_BUILD=$STATIC; fi
# ---------------------------------------------------------------- C programs
# cm_notify linked dynamically against Debian's librdmacm and libibverbs (so
# it runs over either), static_rping fully static for musl.
"$ROOT/capi/build-static.sh" --glibc-dynamic "$W/bin/cm_notify" "$ROOT/capi/tests/c/cm_notify.c" \
  || die "building capi/tests/c/cm_notify.c failed"
if [[ $STATIC_BUILD == 1 ]]; then
  "$ROOT/capi/build-static.sh" "$W/bin/static_rping_musl" "$ROOT/capi/tests/c/static_rping.c" \
    || die "linking capi/tests/c/static_rping.c fully static (musl, libibverbs.a) failed"
  "$ROOT/scripts/musl.sh" check "$W/bin/static_rping_musl" >&2 || die "static_rping_musl is not static"
fi

# ---------------------------------------------------------------- exchanges
# NAME TOOL SRV_LIB CLI_LIB READY SRV_CMD CLI_CMD; in the commands $A is the
# guest's address. READY: listen:PORT or mcast:HEXGROUP (see the header).
EX=()
ex() {
  [[ -z $ONLY || $1 =~ $ONLY ]] || return 0
  EX+=("$1|$2|$3|$4|$5|$6|$7")
}
RPING_COUNT=10 RPING_SIZE=64 MSGS=10 PERF_ITERS=200 BW_SIZE=65536 LAT_SIZE=2
port=18500 grp=1
for pair in R-R O-O O-R R-O; do
  s=${pair%-*} c=${pair#*-}
  p=$((port += 1))
  ex "rping:$pair" rping "$s" "$c" "listen:$p" "rping -s -v -a \$A -p $p -S $RPING_SIZE" \
    "rping -c -v -V -a \$A -p $p -C $RPING_COUNT -S $RPING_SIZE"
  ex "udaddy:$pair" udaddy "$s" "$c" "listen:7174" "udaddy -b \$A -C $MSGS" "udaddy -s \$A -C $MSGS"
  g=$((grp++))
  ex "mckey:$pair" mckey "$s" "$c" "mcast:$(printf '%02X0101EF' "$g")" "mckey -m 239.1.1.$g -b \$A -C $MSGS" \
    "mckey -m 239.1.1.$g -b \$A -s -C $MSGS"
  p=$((port += 1))
  ex "ucmatose:$pair" ucmatose "$s" "$c" "listen:$p" "ucmatose -b \$A -p $p -c 2 -C $MSGS" \
    "ucmatose -s \$A -p $p -c 2 -C $MSGS"
  p=$((port += 1))
  ex "rdma_server:$pair" rdma_server "$s" "$c" "listen:$p" "rdma_server -s \$A -p $p" "rdma_client -s \$A -p $p"
  p=$((port += 1))
  ex "rdma_xserver:$pair" rdma_xserver "$s" "$c" "listen:$p" "rdma_xserver -c r -p $p" "rdma_xclient -c r -s \$A -p $p"
  p=$((port += 1))
  ex "ib_send_bw:$pair" ib_send_bw "$s" "$c" "listen:$p" "ib_send_bw -R -F -d \$D -p $p -n $PERF_ITERS -s $BW_SIZE" \
    "ib_send_bw -R -F -d \$D -p $p -n $PERF_ITERS -s $BW_SIZE \$A"
  p=$((port += 1))
  ex "ib_write_lat:$pair" ib_write_lat "$s" "$c" "listen:$p" "ib_write_lat -R -F -d \$D -p $p -n $PERF_ITERS -s $LAT_SIZE" \
    "ib_write_lat -R -F -d \$D -p $p -n $PERF_ITERS -s $LAT_SIZE \$A"
  p=$((port += 1))
  ex "cm_notify:$pair" cm_notify "$s" "$c" "listen:$p" "/guest/bin/cm_notify -s -a \$A -p $p" "/guest/bin/cm_notify -c -a \$A -p $p"
done
if [[ $STATIC == 1 ]]; then
  for lib in R O; do
    p=$((port += 1))
    ex "static_rping:S-$lib" static_rping S "$lib" "listen:$p" \
      "/guest/bin/static_rping_musl -s -v -a \$A -p $p -S $RPING_SIZE" \
      "rping -c -v -V -a \$A -p $p -C $RPING_COUNT -S $RPING_SIZE"
    p=$((port += 1))
    ex "static_rping:$lib-S" static_rping "$lib" S "listen:$p" "rping -s -v -a \$A -p $p -S $RPING_SIZE" \
      "/guest/bin/static_rping_musl -c -v -V -a \$A -p $p -C $RPING_COUNT -S $RPING_SIZE"
  done
fi
[[ ${#EX[@]} -gt 0 ]] || die "--only '$ONLY' selects no exchange"
PROGS=(rping udaddy mckey ucmatose rdma_server rdma_client rdma_xserver rdma_xclient ib_send_bw ib_write_lat
  /guest/bin/cm_notify)

# ---------------------------------------------------------------- guest script
NONCE=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
if [[ -n $RECHECK ]]; then
  NONCE=$(tr -d '\r' < "$RECHECK" | sed -n 's/^=== rdmacm:\([0-9a-f]*\): .*/\1/p' | head -1)
  [[ -n $NONCE ]] || die "--recheck $RECHECK: no rdmacm markers"
  [[ ${#KERNELS[@]} == 1 ]] || die "--recheck needs --kernel"
fi
M="=== rdmacm:$NONCE:"
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
{
  cat <<EOF
M='$M'
EOF
  cat <<'EOF'
export A=$UVERBS_TEST_IP D=$UVERBS_TEST_DEVICE
READY_SECS=20 RUN_SECS=60 GRACE_SECS=10
EOF
  cat "$ROOT/scripts/guest-ready.sh"
  cat <<'EOF'
# libenv LIB: the environment prefix of a side
libenv() { case $1 in O) echo "LD_LIBRARY_PATH=/guest/ours" ;; *) echo "" ;; esac; }
# xchg NAME SRV_LIB CLI_LIB READY SRV_CMD CLI_CMD
xchg() {
  name=$1 sl=$2 cl=$3 rd=$4 scmd=$5 ccmd=$6
  t0=$(cs) races=0
  : > /tmp/earlier.out
  while :; do
    note=
    timeout $((READY_SECS + RUN_SECS + GRACE_SECS + 10)) env $(libenv $sl) sh -c "exec $scmd" > /tmp/srv.out 2>&1 &
    spid=$!
    runs=0
    if ready "$rd" $spid; then
      while :; do
        timeout $RUN_SECS env $(libenv $cl) sh -c "exec $ccmd" > /tmp/cli.out 2>&1; crc=$?
        runs=$((runs + 1))
        # mckey: a receiver still waiting 2 s after a good sender run lost
        # datagrams (on 6.12's rxe, with either library, even rdma-core's
        # alone): the sender runs again, at most 3 times in all
        case $rd in mcast:*) ;; *) break ;; esac
        [ $crc = 0 ] && [ $runs -lt 3 ] || break
        i=0; while alive $spid && [ $i -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
        alive $spid || break
      done
    else
      crc=none note="the server never got ready ($rd)"; : > /tmp/cli.out
    fi
    i=0
    while alive $spid && [ $i -lt $((GRACE_SECS * 10)) ]; do sleep 0.1; i=$((i + 1)); done
    if alive $spid; then kill $spid; note="$note (server stopped: still running ${GRACE_SECS} s after the client)"; fi
    wait $spid; src=$?
    # perftest's own race lost (either side's library): both sides again
    if [ "$crc" != 0 ] && perftest_race /tmp/cli.out && [ $races -lt $((RACE_TRIES - 1)) ]; then
      races=$((races + 1))
      { echo "(run $races of both sides, client exit $crc, server exit $src:)"; cat /tmp/cli.out; } >> /tmp/earlier.out
      continue
    fi
    break
  done
  echo "$M begin $name server"; echo "\$ $scmd"; cat /tmp/srv.out; echo "$M end $name server exit $src"
  echo "$M begin $name client"; echo "\$ $ccmd"; cat /tmp/cli.out; echo "$M end $name client exit $crc"
  echo "$M runs $name $runs"
  echo "$M races $name $races"
  if [ $races -gt 0 ]; then echo "$M begin $name earlier"; echo "(the earlier runs' client output)"; cat /tmp/earlier.out; echo "$M end $name earlier exit -"; fi
  echo "$M done $name cs $(( $(cs) - t0 ))${note:+ note $note}"
}
# libs PROG: where each side's dynamic loader finds the two libraries
libs() {
  for l in R O; do
    out=$(env $(libenv $l) LD_TRACE_LOADED_OBJECTS=1 "$(command -v $1 || echo $1)" 2>&1 | grep -E 'lib(rdmacm|ibverbs)\.so\.1 =>' | sed 's/ (0x.*//' | tr -d '\t' | tr '\n' ';')
    echo "$M libs $l $1 $out"
  done
}
EOF
  for p in "${PROGS[@]}"; do echo "libs $p"; done
  for e in "${EX[@]}"; do
    IFS='|' read -r name tool sl cl rd scmd ccmd <<<"$e"
    echo "xchg $name $sl $cl $rd $(sq "$scmd") $(sq "$ccmd")"
  done
  echo 'exit 0'
} > "$W/run.sh"

# ---------------------------------------------------------------- checks
# section LOG NAME ROLE: that side's output (without the command line)
section() {
  awk -v b="$M begin $2 $3" -v e="$M end $2 $3 " '$0 == b { on = 1; getline; next } on && index($0, e) == 1 { exit } on' "$1"
}
field() { awk -v p="$M $2 " 'index($0, p) == 1 { print substr($0, length(p) + 1) }' "$1"; }
endcode() { field "$1" "end $2 $3 exit" | head -1; }
. "$ROOT/scripts/wire-checks.sh"   # rping_lines, check_perf, problem
# check_own TOOL ROLE OUTPUT: what the tool must print by itself
check_own() {
  local tool=$1 role=$2 out=$3 want got
  case $tool in
    rping|static_rping)
      [[ $role == server ]] && want=$(rping_lines 'server ping data: ' "$RPING_COUNT" "$RPING_SIZE") \
        || want=$(rping_lines 'ping data: ' "$RPING_COUNT" "$RPING_SIZE")
      got=$(grep -E '^(server )?ping data: ' <<<"$out" || true)
      [[ $got == "$want" ]] || problem "$role: its ping data lines are not rping's pings 0..$((RPING_COUNT - 1))" \
        "($(grep -c . <<<"$got" || true) lines; first difference: $(diff <(echo "$want") <(echo "$got") | grep -m1 '^[<>]' || true))" ;;
    udaddy|mckey|ucmatose)
      grep -qx 'return status 0' <<<"$out" || problem "$role: no 'return status 0'"
      grep -qx 'data transfers complete' <<<"$out" || problem "$role: no 'data transfers complete'" ;;
    rdma_server|rdma_xserver)
      local n=$tool; [[ $role == client ]] && n=${tool/server/client}
      grep -qx "$n: end 0" <<<"$out" || problem "$role: no '$n: end 0'" ;;
    cm_notify)
      grep -qx "$role: done" <<<"$out" || problem "$role: no '$role: done'"
      [[ $role == client ]] || grep -qx 'server: rdma_notify(IBV_EVENT_COMM_EST) = 0' <<<"$out" \
        || problem "server: no 'rdma_notify(IBV_EVENT_COMM_EST) = 0'" ;;
    ib_send_bw) [[ $role == server ]] || check_perf "$out" bw "$BW_SIZE" "$PERF_ITERS" ;;
    ib_write_lat) [[ $role == server ]] || check_perf "$out" lat "$LAT_SIZE" "$PERF_ITERS" ;;
  esac
}

# norm: what of an output the comparison with the baseline ignores
norm() { sed -e 's/239\.1\.1\.[0-9]*/239.1.1.N/g' -e '/^\(client\|server\) DISCONNECT EVENT\.\.\.$/d' -e '/^wait for RDMA_READ_ADV state 10$/d'; }

# check KERNEL CONSOLE: one line per exchange; sets PASSED/FAILED
check() {
  local k=$1 log=$2 e name tool sl cl rd scmd ccmd role out base src crc secs note l prog line want why
  PASSED=0 FAILED=0 IGNORED=0
  # the libraries each side loaded
  for prog in "${PROGS[@]}"; do
    for l in R O; do
      line=$(field "$log" "libs $l $prog")
      if [[ $l == O ]]; then
        want="libibverbs.so.1 => /guest/ours/libibverbs.so.1"
        [[ $DEBIAN_RDMACM == 0 ]] && want="librdmacm.so.1 => /guest/ours/librdmacm.so.1;$want"
      else
        want="librdmacm.so.1 => /usr/lib/x86_64-linux-gnu/librdmacm.so.1;libibverbs.so.1 => /usr/lib/x86_64-linux-gnu/libibverbs.so.1"
      fi
      # each program names both libraries, in its loader's order
      local ok=1 w
      IFS=';' read -ra ws <<<"$want"
      for w in "${ws[@]}"; do [[ ";$line" == *";$w;"* ]] || ok=0; done
      if [[ $ok == 1 ]]; then PASSED=$((PASSED + 1))
      else
        FAILED=$((FAILED + 1))
        printf '[%s] FAILED  libraries of %s as %s: %s (want %s)\n' "$k" "$prog" "$l" "${line:-nothing}" "$want"
      fi
    done
  done
  for e in "${EX[@]}"; do
    IFS='|' read -r name tool sl cl rd scmd ccmd <<<"$e"
    PROBLEMS=() SUMMARY=
    src=$(endcode "$log" "$name" server) crc=$(endcode "$log" "$name" client)
    note=$(field "$log" "done $name cs" | sed -n 's/^[0-9]* note //p')
    secs=$(field "$log" "done $name cs" | awk '{ printf "%.1f", $1 / 100 }')
    [[ -n $src ]] || problem "no result (the guest stopped before this exchange)"
    [[ -z $src || $src == 0 ]] || problem "server exited $src"
    [[ -z $crc || $crc == 0 ]] || problem "client exited $crc"
    [[ -z $note ]] || problem "$note"
    if [[ ${#PROBLEMS[@]} == 0 ]]; then
      for role in server client; do
        out=$(section "$log" "$name" "$role")
        check_own "$tool" "$role" "$out"
        # the same program's output as in the baseline exchange, per role
        if [[ $tool != ib_* && $tool != static_rping && $name != *:R-R ]]; then
          # (mckey's group differs per exchange: 239.1.1.N; rping's "client
          # DISCONNECT EVENT..." and "wait for RDMA_READ_ADV state 10" come
          # from its CM thread racing the main one's exit: there or not on
          # either library, e.g. absent from 6.12's R-R client once)
          base=$(section "$log" "$tool:R-R" "$role" | norm)
          out=$(norm <<<"$out")
          if [[ -z $(endcode "$log" "$tool:R-R" "$role") ]]; then
            problem "$role: no baseline (R-R) to compare with (--only?)"
          elif [[ $(endcode "$log" "$tool:R-R" server) != 0 || $(endcode "$log" "$tool:R-R" client) != 0 ]]; then
            problem "$role: the baseline (R-R) failed: nothing to compare with"
          elif [[ $out != "$base" ]]; then
            problem "$role: output differs from rdma-core's (R-R): $(diff <(echo "$base") <(echo "$out") | grep -m2 '^[<>]' | tr '\n' ' ')"
          fi
        fi
      done
    fi
    why=$(gap "$name" "$k")
    if [[ ${#PROBLEMS[@]} == 0 ]]; then
      PASSED=$((PASSED + 1))
      runs=$(field "$log" "runs $name")
      [[ ${runs:-1} -le 1 ]] || SUMMARY="${SUMMARY:+$SUMMARY; }the sender ran $runs times (datagrams lost)"
      races=$(field "$log" "races $name")
      [[ ${races:-0} == 0 ]] || SUMMARY="${SUMMARY:+$SUMMARY; }perftest's listen race lost $races time(s), both sides ran again"
      printf '[%s] ok      %-24s %s s%s\n' "$k" "$name" "${secs:-?}" "${SUMMARY:+; $SUMMARY}"
      [[ -z $why ]] || printf '[%s]   note: %s passes now: remove it from %s\n' "$k" "$name" "$GAPS"
    elif [[ -n $why ]]; then
      IGNORED=$((IGNORED + 1))
      printf '[%s] gap     %-24s known gap (%s): %s\n' "$k" "$name" "$why" "${PROBLEMS[0]}"
    else
      FAILED=$((FAILED + 1))
      printf '[%s] FAILED  %s (%s s)\n' "$k" "$name" "${secs:-?}"
      printf '    %s\n' "${PROBLEMS[@]}"
      for role in server client; do
        echo "    --- $role ($([[ $role == server ]] && echo "$sl" || echo "$cl")): exit $(endcode "$log" "$name" "$role")"
        section "$log" "$name" "$role" | sed 's/^/    | /'
      done
      races=$(field "$log" "races $name")
      if [[ ${races:-0} != 0 ]]; then
        echo "    --- earlier runs (perftest's listen race lost):"
        section "$log" "$name" earlier | sed 's/^/    | /'
      fi
    fi
  done
}

# ---------------------------------------------------------------- run
ADDS=(--add "$W/ours:/guest/ours" --add "$W/bin:/guest/bin")
status=0
if [[ -n $RECHECK ]]; then
  tr -d '\r' < "$RECHECK" > "$W/recheck.txt"
  check "${KERNELS[0]}" "$W/recheck.txt"
  echo "[${KERNELS[0]}] rdmacm recheck: $PASSED passed; $FAILED failed; $IGNORED ignored"
  [[ $FAILED == 0 ]]; exit
fi
for k in "${KERNELS[@]}"; do
  "$ROOT/guest/build-image.sh" --kernel "$k" >&2 || die "guest/build-image.sh --kernel $k failed"
  console=$W/console-$k.log
  t0=$(date +%s)
  set +e
  "$ROOT/guest/run-guest.sh" --kernel "$k" --no-build --timeout "$TIMEOUT" --log "$console" \
    "${ADDS[@]}" --script "$W/run.sh" 2>&1 | sed -u "s/^/[$k] /" >&2
  rc=${PIPESTATUS[0]}
  set -e
  secs=$(( $(date +%s) - t0 ))
  [[ -n $KEEP ]] && { mkdir -p "$KEEP"; cp "$console" "$KEEP/rdmacm-$k.console.log"; }
  [[ -f $console ]] || : > "$console"
  tr -d '\r' < "$console" > "$console.txt"
  check "$k" "$console.txt"
  case $rc in
    0) ;;
    123|124|125|126) echo "[$k] FAILED: run-guest.sh exit $rc (123 setup, 124 timeout, 125 crash, 126 host error)"; FAILED=$((FAILED + 1)) ;;
    *) echo "[$k] FAILED: the guest script exited $rc"; FAILED=$((FAILED + 1)) ;;
  esac
  result=ok; [[ $FAILED == 0 ]] || { result=FAILED; status=1; }
  what="ours = our librdmacm.so.1 + libibverbs.so.1"
  [[ $DEBIAN_RDMACM == 1 ]] && what="ours = Debian's librdmacm.so.1 over our libibverbs.so.1 (--debian-rdmacm)"
  echo "rdmacm [$k]: $PASSED passed, $FAILED failed, $IGNORED known gaps; ${#EX[@]} exchanges in ${secs} s wall ($what)"
  echo "[$k] rdmacm test result: $result. $PASSED passed; $FAILED failed; $IGNORED ignored; 0 measured; 0 filtered out; finished in ${secs}.00s"
done
log "done in $(( $(date +%s) - START )) s"
exit "$status"
