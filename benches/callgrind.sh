#!/usr/bin/env bash
# benches/callgrind.sh — instructions per data-path call, on the host.
#
# Usage: benches/callgrind.sh [--no-build] [-n CALLS] [-s SIZE]
#
# Runs `uverbs perf micro --fake` (built with `--features test-utils`: the
# fake rxe kernel of `uverbs::testing::rxe`, rings in shared memory, a
# doorbell write that returns at once, the kernel's ring side played between
# the calls) under `valgrind --tool=callgrind` and prints,
# for each measured call (`micro_fake::op_*`, each called exactly CALLS times),
# its inclusive instruction count divided by CALLS. Deterministic: the same
# binary gives the same counts, so it measures what the TCG guest pays per
# call (there every guest instruction is expensive) without the guest.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=1 N=10000 SIZE=2
while [[ $# -gt 0 ]]; do
  case $1 in
    --no-build) BUILD=0; shift ;;
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
valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.out" \
  target/release/uverbs perf micro --fake -n "$N" -s "$SIZE" > "$OUT/run.txt" 2> "$OUT/vg.txt" \
  || { cat "$OUT/vg.txt" "$OUT/run.txt" >&2; exit 1; }
callgrind_annotate --inclusive=yes --threshold=100 "$OUT/cg.out" 2>/dev/null > "$OUT/ann.txt"
printf '%-28s %10s\n' "call ($N each, size $SIZE)" "Ir/call"
# Lines look like: "1,234,567 (12.3%)  src/bin/...:uverbs::perf::micro::op_poll_one [...]"
grep -E '^ *[0-9,]+ \([ 0-9.]+%\) +[^ ]+:uverbs::perf::micro_fake::op_[a-z0-9_]+ \[' "$OUT/ann.txt" | while read -r line; do
  ir=$(awk '{print $1}' <<<"$line" | tr -d ,)
  name=$(grep -oE 'micro_fake::op_[a-z0-9_]+' <<<"$line" | head -1 | sed 's/micro_fake::op_//')
  printf '%-28s %10.1f\n' "$name" "$(awk -v a="$ir" -v n="$N" 'BEGIN { print a / n }')"
done | sort
