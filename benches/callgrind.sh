#!/usr/bin/env bash
# benches/callgrind.sh — instructions per data-path call, on the host.
#
# Usage: benches/callgrind.sh [--no-build] [-n CALLS] [-s SIZE]
#        benches/callgrind.sh --mlx5 [--no-build] [-n OPS]
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
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=1 N=10000 SIZE=2 MLX5=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --no-build) BUILD=0; shift ;;
    --mlx5) MLX5=1; shift ;;
    -n) N=$2; shift 2 ;;
    -s) SIZE=$2; shift 2 ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 2; }
cd "$REPO"
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
