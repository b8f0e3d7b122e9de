#!/usr/bin/env bash
# benches/callgrind.sh — instructions per data-path call, on the host.
#
# Usage: benches/callgrind.sh [--no-build] [-n CALLS] [-s SIZE]
#        benches/callgrind.sh --mlx5 [--no-build] [-n OPS]
#        benches/callgrind.sh --cabi [--no-build] [-n OPS] [ROW...]
#
# Runs `uverbs perf micro --fake` (built with `--features test-utils`: the
# fake rxe kernel of `uverbs::testing::rxe`, rings in shared memory, a
# doorbell write that returns at once, the kernel's ring side played between
# the calls) under `valgrind --tool=callgrind` and prints,
# for each measured call (`micro_fake::op_*`, each called exactly CALLS times),
# its inclusive instruction count divided by CALLS. Deterministic: the same
# binary gives the same counts, so it measures what the TCG guest pays per
# call (there every guest instruction is expensive) without the guest.
#
# With --mlx5 it runs `uverbs perf micro --mlx5-model` instead (the mlx5
# data path on the device model, as benches/mlx5.sh times it) and prints the
# instructions per posted work request (`write_batchN`: N RDMA writes per
# post_send; `inline_send`: one inline SEND per call, BlueFlame) and per
# polled CQE (`poll`: requester CQEs, `poll_recv`: receives, `poll_srq`:
# receives through an SRQ; 16 per call; `cqex_poll*`: the same CQEs taken
# by extended polling sessions of up to 16, wr_id and status read).
# OPS is rounded up to a multiple of 4096.
#
# With --cabi it counts the C ABI rows of benches/mlx5.sh: libmlx5's bench
# program (benches/mlx5_libmlx5.c, built by benches/mlx5.sh) on the device
# model, once over Debian's libibverbs + libmlx5 and once over this
# project's libibverbs.so.1 + libmlx5.so.1 (release builds, as
# benches/mlx5.sh assembles them in target/bench-mlx5/cabi), one process
# per row (UVERBS_BENCH_ROWS), and prints each row's instructions per work
# request or CQE (the row's timed function, inclusive of the libraries'
# code it calls) over both and their ratio. OPS is rounded up to a
# multiple of 512; ROWs default to every row.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=1 N=10000 SIZE=2 MLX5=0 CABI=0 ROWS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --no-build) BUILD=0; shift ;;
    --mlx5) MLX5=1; shift ;;
    --cabi) CABI=1; shift ;;
    -n) N=$2; shift 2 ;;
    -s) SIZE=$2; shift 2 ;;
    -*) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2 ;;
    *) ROWS+=("$1"); shift ;;
  esac
done
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 2; }
cd "$REPO"
if [[ $CABI == 1 ]]; then
  BENCH=$REPO/target/bench-mlx5/mlx5_libmlx5 DIR=$REPO/target/bench-mlx5/cabi
  if [[ $BUILD == 1 ]]; then
    cargo build --release --quiet -p uverbs-cabi -p uverbs-cabi-mlx5 >&2
    mkdir -p "$DIR"
    cp target/release/libibverbs.so "$DIR/libibverbs.so.1"
    cp target/release/libmlx5.so "$DIR/libmlx5.so.1"
    capi/stubs/build.sh "$DIR" >/dev/null
  fi
  [[ -x $BENCH && -f $DIR/libibverbs.so.1 ]] \
    || { echo "callgrind.sh: run benches/mlx5.sh once first (it builds $BENCH)" >&2; exit 2; }
  N=$(( (N + 511) / 512 * 512 ))
  [[ ${#ROWS[@]} == 0 ]] && ROWS=(write_batch1 write_batch8 write_batch64 inline_send
    wr_write_batch1 wr_write_batch8 wr_write_batch64 wr_inline_send poll_cqe cqex_poll_cqe)
  OUT=$(mktemp -d "${TMPDIR:-/tmp}/uverbs-callgrind.XXXXXX")
  trap 'rm -rf "$OUT"' EXIT
  # The inclusive Ir of every call of C function $1 in profile $2.
  calls_of() {
    awk -v fn="$1" '
      function name_of(s,   id, rest) {
        id = s; sub(/\).*/, ")", id); rest = s; sub(/^\([0-9]+\) ?/, "", rest)
        if (rest != "") names[id] = rest
        return names[id]
      }
      /^fn=/ { name_of(substr($0, 4)); next }
      /^cfn=/ { callee = name_of(substr($0, 5)); next }
      /^calls=/ { want = callee == fn; next }
      want { split($0, f, " "); ir += f[2]; want = 0 }
      END { print ir + 0 }
    ' "$2"
  }
  printf '%-18s %10s %10s %6s   (%d each)\n' row libmlx5 "C ABI" ratio "$N"
  for row in "${ROWS[@]}"; do
    case $row in
      *write_batch*) fn=write_chunk ;;
      *inline_send) fn=inline_chunk ;;
      poll_cqe) fn=poll_chunk ;;
      cqex_poll_cqe) fn=cqex_chunk ;;
      *) echo "callgrind.sh: unknown row $row" >&2; exit 2 ;;
    esac
    ir=()
    for who in lib ours; do
      ours=(); [[ $who == ours ]] && ours=(--ours "$DIR")
      UVERBS_BENCH_ROWS=$row UVERBS_MODEL_HCA=manual scripts/on-model.sh "${ours[@]}" -- \
        valgrind --tool=callgrind --callgrind-out-file="$OUT/$who.out" "$BENCH" "$N" \
        > "$OUT/run.txt" 2> "$OUT/vg.txt" || { cat "$OUT/vg.txt" "$OUT/run.txt" >&2; exit 1; }
      ir+=("$(calls_of "$fn" "$OUT/$who.out")")
    done
    awk -v r="$row" -v a="${ir[0]}" -v b="${ir[1]}" -v n="$N" \
      'BEGIN { printf "%-18s %10.1f %10.1f %6.2f\n", r, a / n, b / n, (a ? b / a : 0) }'
  done
  exit 0
fi
[[ $BUILD == 1 ]] && cargo build --release --bin uverbs --features test-utils >&2
OUT=$(mktemp -d "${TMPDIR:-/tmp}/uverbs-callgrind.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
# Runs `uverbs perf micro ARGS...` under callgrind and prints, for each
# measured function `MODULE::op_*`, its inclusive instruction count divided
# by the number of operations `ops_of NAME` gives.
count() {
  local module=$1; shift
  UVERBS_PERF_WARMUP_MS=0 valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.out" \
    target/release/uverbs perf micro "$@" > "$OUT/run.txt" 2> "$OUT/vg.txt" \
    || { cat "$OUT/vg.txt" "$OUT/run.txt" >&2; exit 1; }
  # The inclusive cost of every call of each measured function, summed
  # from the profile's call records (`cfn=` then `calls=`, then the line
  # whose second field is the calls' inclusive Ir; names are compressed to
  # `(id)` after their first `fn=` or `cfn=`): exact however the
  # function's own instructions are split over the source files of what
  # was inlined into it (callgrind_annotate reports it per file).
  awk -v mod="uverbs::perf::$module::op_" '
    function name_of(s,   id, rest) {
      id = s; sub(/\).*/, ")", id); rest = s; sub(/^\([0-9]+\) ?/, "", rest)
      if (rest != "") names[id] = rest
      return names[id]
    }
    /^fn=/ { name_of(substr($0, 4)); next }
    /^cfn=/ { callee = name_of(substr($0, 5)); next }
    /^calls=/ { want = index(callee, mod) == 1; next }
    want { split($0, f, " "); ir[substr(callee, length(mod) + 1)] += f[2]; want = 0 }
    END { for (n in ir) print n, ir[n] }
  ' "$OUT/cg.out" | while read -r name ir; do
    printf '%-28s %10.1f\n' "$name" "$(awk -v a="$ir" -v n="$(ops_of "$name")" 'BEGIN { print a / n }')"
  done | sort
}

if [[ $MLX5 == 1 ]]; then
  N=$(( (N + 4095) / 4096 * 4096 ))
  # Each post section posts N work requests timed plus 512 through the
  # model first; the polls take N CQEs (requester and receive), the SRQ's
  # rounds of 511 receives enough rounds for N.
  ops_of() {
    case $1 in
      poll | poll_recv | cqex_poll | cqex_poll_recv) echo "$N" ;;
      poll_srq | cqex_poll_srq) echo $(((N + 510) / 511 * 511)) ;;
      *) echo $((N + 512)) ;;
    esac
  }
  printf '%-28s %10s\n' "operation ($N each)" "Ir/op"
  count micro_mlx5 --mlx5-model -n "$N"
else
  ops_of() { echo "$N"; }
  printf '%-28s %10s\n' "call ($N each, size $SIZE)" "Ir/call"
  count micro_fake --fake -n "$N" -s "$SIZE"
fi
