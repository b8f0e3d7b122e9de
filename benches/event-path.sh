#!/usr/bin/env bash
# benches/event-path.sh — user instructions per iteration of the completion
# event loop, ours against rdma-core's, counted by callgrind in the rxe guest.
#
# Usage: benches/event-path.sh [--kernel 6.1|6.12] [--no-build] [-n N1,N2]
#                              [-s SIZE] [--base BIN] [--profile [TOP]]
#                              [--keep DIR]
#        benches/event-path.sh --from DIR [-n N1,N2] [--profile [TOP]]
#
# Boots the rxe guest once (guest/run-guest.sh) and runs, for each client,
# rdma-core 44's `ibv_rc_pingpong -e` (Debian's ibverbs-utils, in the image)
# as the server in the background and the client to 192.0.2.1 under
# `valgrind --tool=callgrind`, -s SIZE (default 64) and -n N1 then -n N2
# iterations (default 100,300): clients `ibv_rc_pingpong -e` (rdma-core:
# libibverbs + librxe) and `uverbs rc-pingpong -e` (this repository's CLI,
# release build). With --base BIN, a third client in the same boot: BIN,
# another build of `uverbs` (e.g. the commit before a change, built and
# copied aside), shown as `base`, so before and after share one guest and
# one server.
#
# The server is the same C tool for every client, run under valgrind's
# `lackey --trace-mem=yes` (its trace to /dev/null) to make it slow: each
# iteration then takes exactly two completion events on the client (the
# send's completion, then, long after, the reply's receive). With a server
# as fast as the client, whether one event covers both completions is a
# race: measured 0.9 to 2.3 events per iteration from run to run, which
# moved rdma-core's per-iteration figure by half. The client waits until
# the server listens (its TCP port in /proc/net/tcp). Valgrind is Debian
# bookworm's (3.19.0), fetched with `apt-get download` and `dpkg-deb -x`
# into ${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-guest/valgrind (never
# installed); only its launcher, callgrind, lackey and the core preload go
# into the guest.
#
# Each client's profile comes back over the console (gzip + base64) and is
# read on the host. Callgrind counts user-mode instructions only (the
# kernel's work in each system call is not counted, for either stack).
# The per-iteration figure is the difference of the two runs' totals over
# N2 - N1, so setup (device open, connection, teardown) cancels out:
#
#   Ir/iter = (Ir(N2) - Ir(N1)) / (N2 - N1)
#
# and likewise the completion events per iteration (calls of the function
# that gets one: rdma-core's `ibv_get_cq_event`, ours
# `CompletionChannel::get_event` or `get_event_deferred`); Ir/event is
# Ir/iter over events/iter. Prints each client's figures and the ratios
# to rdma-core's. With --profile, also the TOP (default 25) functions of
# each client by inclusive instructions per iteration, with their own
# (self) instructions (the same difference, per function; a function's
# inlined code counts as its own; rdma-core's libraries are stripped, so
# its static functions show as addresses). --keep DIR keeps the profiles
# (rdma-core-N.out, uverbs-N.out, base-N.out) for callgrind_annotate;
# --from DIR prints the figures of kept profiles again, without the guest.
#
# Takes about 3 minutes with the defaults, 4-5 with --base (the guest is
# TCG, and valgrind runs every instruction of the client and the server
# through its JIT).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
log() { printf '[event-path] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }

KERNEL=6.1 BUILD=1 NS=100,300 SIZE=64 PROFILE=0 TOP=25 KEEP= FROM= BASE=
while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel) [[ $# -ge 2 ]] || usage; KERNEL=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -n) [[ $# -ge 2 ]] || usage; NS=$2; shift 2 ;;
    -s) [[ $# -ge 2 ]] || usage; SIZE=$2; shift 2 ;;
    --profile) PROFILE=1; shift
      if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then TOP=$1; shift; fi ;;
    --keep) [[ $# -ge 2 ]] || usage; KEEP=$2; shift 2 ;;
    --from) [[ $# -ge 2 ]] || usage; FROM=$2; shift 2 ;;
    --base) [[ $# -ge 2 ]] || usage; BASE=$2; shift 2 ;;
    -h|--help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
[[ $KERNEL == 6.1 || $KERNEL == 6.12 ]] || die "--kernel 6.1|6.12"
[[ $NS =~ ^[0-9]+,[0-9]+$ ]] || die "-n N1,N2"
N1=${NS%,*} N2=${NS#*,}
(( N2 > N1 && N1 > 0 )) || die "-n N1,N2 needs 0 < N1 < N2"
[[ $SIZE =~ ^[0-9]+$ ]] || die "-s SIZE"
cd "$REPO"
WHO=(rdma-core uverbs)
if [[ -n $BASE ]]; then
  [[ -x $BASE ]] || die "--base $BASE: not an executable"
  WHO+=(base)
elif [[ -n $FROM && -f $FROM/base-$N1.out ]]; then
  WHO+=(base)
fi

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/event-path.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
PROFILES=$STAGE/profiles
if [[ -n $FROM ]]; then
  PROFILES=$FROM
else
  # ---------------------------------------------------------------- valgrind
  CACHE=${UVERBS_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-guest}/valgrind
  if [[ ! -f $CACHE/.done ]]; then
    log "fetching Debian's valgrind into $CACHE (apt-get download + dpkg-deb -x)"
    rm -rf "$CACHE"; mkdir -p "$CACHE/debs"
    (cd "$CACHE/debs" && apt-get download -q valgrind 2>&1 | grep -v unsandboxed >&2; exit "${PIPESTATUS[0]}") \
      || die "apt-get download valgrind failed (apt-get update first?)"
    dpkg-deb -x "$CACHE"/debs/valgrind_*.deb "$CACHE/root"
    rm -rf "$CACHE/debs"
    touch "$CACHE/.done"
  fi
  VG=$CACHE/root
  mkdir -p "$STAGE/vg/lib"
  cp "$VG/usr/bin/valgrind.bin" "$STAGE/vg/valgrind"
  for f in callgrind-amd64-linux lackey-amd64-linux vgpreload_core-amd64-linux.so default.supp; do
    cp "$VG/usr/libexec/valgrind/$f" "$STAGE/vg/lib/"
  done

  # ---------------------------------------------------------------- uverbs
  if [[ $BUILD == 1 ]]; then
    log "cargo build --release --bin uverbs"
    cargo build --release --quiet --bin uverbs || die "cargo build failed"
  fi
  [[ -x target/release/uverbs ]] || die "no target/release/uverbs (drop --no-build)"
  cp target/release/uverbs "$STAGE/uverbs"
  ADD_BASE=()
  if [[ -n $BASE ]]; then
    cp "$BASE" "$STAGE/uverbs-base"
    ADD_BASE=(--add "$STAGE/uverbs-base:/guest/uverbs-base")
  fi

  # ---------------------------------------------------------------- guest
  cat > "$STAGE/run.sh" <<EOF
G=\$UVERBS_TEST_GID_INDEX
export VALGRIND_LIB=/guest/vg/lib
rc=0
for who in ${WHO[*]}; do
  for n in $N1 $N2; do
    /guest/vg/valgrind --tool=lackey --trace-mem=yes --log-file=/dev/null \
      ibv_rc_pingpong -d rxe0 -g \$G -e -s $SIZE -n \$n > /tmp/server.txt 2>&1 &
    srv=\$!
    # Until the server listens on its TCP port (18515 = 0x4853).
    i=0
    until grep -q ':4853 00000000:0000 0A' /proc/net/tcp; do
      i=\$((i + 1)); [ \$i -lt 600 ] || { echo "EVP-SERVER-FAILED \$who \$n (not listening)"; break; }
      sleep 0.1
    done
    case \$who in
      uverbs) client="/guest/uverbs rc-pingpong" ;;
      base) client="/guest/uverbs-base rc-pingpong" ;;
      *) client=ibv_rc_pingpong ;;
    esac
    if ! /guest/vg/valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \\
        \$client -d rxe0 -g \$G -e -s $SIZE -n \$n 192.0.2.1 > /tmp/client.txt 2> /tmp/vg.txt; then
      echo "EVP-FAILED \$who \$n"; cat /tmp/vg.txt /tmp/client.txt; rc=1
    fi
    wait \$srv || { echo "EVP-SERVER-FAILED \$who \$n"; cat /tmp/server.txt; rc=1; }
    sed 's/^/EVP-CLIENT /' /tmp/client.txt
    echo "EVP-BEGIN \$who-\$n"
    gzip -c /tmp/cg.out | base64
    echo "EVP-END"
    rm -f /tmp/cg.out
  done
done
exit \$rc
EOF
  CONSOLE=$STAGE/console.log
  log "guest $KERNEL: ibv_rc_pingpong -e server, clients under callgrind, -s $SIZE -n $N1 and $N2"
  start=$(date +%s)
  set +e
  "$REPO/guest/run-guest.sh" --kernel "$KERNEL" --quiet --timeout 3600 --log "$CONSOLE" \
    --add "$STAGE/vg:/guest/vg" --add "$STAGE/uverbs:/guest/uverbs" "${ADD_BASE[@]}" --script "$STAGE/run.sh"
  grc=$?
  set -e
  log "guest done in $(( $(date +%s) - start )) s (exit $grc)"
  tr -d '\r' < "$CONSOLE" > "$STAGE/console.txt"
  grep -E '^EVP-(FAILED|SERVER-FAILED)' -A20 "$STAGE/console.txt" >&2 && exit 1
  [[ $grc == 0 ]] || { tail -40 "$STAGE/console.txt" >&2; exit 1; }
  grep '^EVP-CLIENT' "$STAGE/console.txt" | grep 'iters in' | sed 's/^EVP-CLIENT /  client: /' >&2
  mkdir -p "$PROFILES"
  awk -v dir="$PROFILES" '
    /^EVP-BEGIN / { f = dir "/" $2 ".b64"; next }
    /^EVP-END/ { close(f); f = ""; next }
    f != "" { print > f }
  ' "$STAGE/console.txt"
  for who in "${WHO[@]}"; do
    for n in "$N1" "$N2"; do
      [[ -s $PROFILES/$who-$n.b64 ]] || die "no profile $who-$n came back"
      base64 -d "$PROFILES/$who-$n.b64" | gunzip > "$PROFILES/$who-$n.out"
    done
  done
  [[ -n $KEEP ]] && { mkdir -p "$KEEP"; cp "$PROFILES"/*.out "$KEEP/"; log "profiles kept in $KEEP"; }
fi

# total FILE: the profile's total Ir.
total() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }
# events FILE: calls of the function that gets one completion event:
# rdma-core's `ibv_get_cq_event`, ours `CompletionChannel::get_event` or
# `get_event_deferred` (library functions the pingpong tools call once
# per event; the setup calls none).
events() {
  awk '
    function name_of(s,   id, rest) {
      id = s; sub(/\).*/, ")", id); rest = s; sub(/^\([0-9]+\) ?/, "", rest)
      if (rest != "") names[id] = rest
      return names[id]
    }
    /^cfn=/ { callee = name_of(substr($0, 5)); next }
    /^fn=/ { name_of(substr($0, 4)); next }
    /^calls=/ {
      if (callee ~ /^(ibv_get_cq_event|uverbs::comp_channel::CompletionChannel::get_event(_deferred)?)$/) {
        split(substr($0, 7), c, " "); n += c[1]
      }
      next
    }
    END { print n + 0 }
  ' "$1"
}
printf '\n%-10s %12s %12s %10s %10s %10s\n' client "Ir(n=$N1)" "Ir(n=$N2)" Ir/iter events/iter Ir/event
declare -A PER_ITER PER_EVENT
for who in "${WHO[@]}"; do
  a=$(total "$PROFILES/$who-$N1.out") b=$(total "$PROFILES/$who-$N2.out")
  ea=$(events "$PROFILES/$who-$N1.out") eb=$(events "$PROFILES/$who-$N2.out")
  read -r it ev pe < <(awk -v a="$a" -v b="$b" -v ea="$ea" -v eb="$eb" -v d=$((N2 - N1)) \
    'BEGIN { it = (b - a) / d; ev = (eb - ea) / d; printf "%.1f %.3f %.1f\n", it, ev, (ev > 0 ? it / ev : 0) }')
  PER_ITER[$who]=$it PER_EVENT[$who]=$pe
  printf '%-10s %12s %12s %10s %10s %10s\n' "$who" "$a" "$b" "$it" "$ev" "$pe"
done
awk -v a="${PER_ITER[uverbs]}" -v b="${PER_ITER[rdma-core]}" -v c="${PER_EVENT[uverbs]}" -v d="${PER_EVENT[rdma-core]}" \
  'BEGIN { printf "ratio ours/rdma-core: %.3f per iteration, %.3f per event (target <= 1.0 per iteration)\n", a / b, c / d }'
if [[ " ${WHO[*]} " == *" base "* ]]; then
  awk -v a="${PER_ITER[base]}" -v b="${PER_ITER[rdma-core]}" -v c="${PER_EVENT[base]}" -v d="${PER_EVENT[rdma-core]}" \
    'BEGIN { printf "ratio base/rdma-core: %.3f per iteration, %.3f per event\n", a / b, c / d }'
fi

if [[ $PROFILE == 1 ]]; then
  # FILE -> "function<TAB>self<TAB>inclusive" (the inclusive cost of each
  # call record is the line after it; a function's recursion is not
  # counted twice).
  per_function() {
    awk '
      function name_of(s,   id, rest) {
        id = s; sub(/\).*/, ")", id); rest = s; sub(/^\([0-9]+\) ?/, "", rest)
        if (rest != "") names[id] = rest
        return names[id]
      }
      function ob_of(s,   id, rest) {
        id = s; sub(/\).*/, ")", id); rest = s; sub(/^\([0-9]+\) ?/, "", rest)
        if (rest != "") { sub(/.*\//, "", rest); obs[id] = rest }
        return obs[id]
      }
      # Stripped code is named by its address: add the object.
      function key(name, ob) { return name ~ /^0x/ ? name " (" ob ")" : name }
      /^ob=/ { ob = ob_of(substr($0, 4)); next }
      /^cob=/ { cob = ob_of(substr($0, 5)); next }
      /^fn=/ { cur = key(name_of(substr($0, 4)), ob); seen[cur] = 1; next }
      /^cfn=/ { callee = key(name_of(substr($0, 5)), cob != "" ? cob : ob); cob = ""; next }
      /^calls=/ { incall = 1; next }
      /^[0-9+*-]/ {
        if (incall) { if (callee != cur) incl[cur] += $2; incall = 0 }
        else { self[cur] += $2; incl[cur] += $2 }
        next
      }
      END { for (f in seen) printf "%s\t%d\t%d\n", f, self[f], incl[f] }
    ' "$1" | sort
  }
  for who in "${WHO[@]}"; do
    printf '\n%s: instructions per iteration by function (top %d)\n%10s %10s  %s\n' \
      "$who" "$TOP" inclusive self function
    join -t $'\t' <(per_function "$PROFILES/$who-$N1.out") <(per_function "$PROFILES/$who-$N2.out") \
      | awk -F'\t' -v d=$((N2 - N1)) '{
          s = ($4 - $2) / d; i = ($5 - $3) / d
          if (i >= 0.5) printf "%10.1f %10.1f  %s\n", i, s, $1
        }' | sort -rn \
      | awk 'NR == 1 { top = $1 } !($1 == top && $2 == 0)' | head -n "$TOP"
  done
fi
