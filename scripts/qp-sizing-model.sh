#!/usr/bin/env bash
# scripts/qp-sizing-model.sh — QP sizing over rdma-core and over ours on
# the mlx5 device model: preload/tests/qp_sizing.c creates a QP per row of
# preload/tests/qp_sizing.rows (every type, both creation paths, send
# operations, creation flags, capacities at libmlx5's boundaries) and
# prints the errno or the capacities each QP reports; Debian's libibverbs +
# libmlx5 are the oracle, and our libibverbs.so.1 must print the same lines.
#
# Usage: scripts/qp-sizing-model.sh --ours DIR   (DIR as scripts/pyverbs-model.sh's)
# Prints the rows that differ and `test result: ...` in cargo's shape (each
# row one test). Exit status 0 when every row agrees, 1 otherwise, 2 on
# usage or setup errors.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ON=$ROOT/scripts/on-model.sh
die() { echo "qp-sizing-model: $*" >&2; exit 2; }
OURS=
while [[ $# -gt 0 ]]; do
  case $1 in
    --ours) [[ $# -ge 2 ]] || die "--ours DIR"; OURS=$(cd "$2" && pwd); shift 2 ;;
    *) die "usage: scripts/qp-sizing-model.sh --ours DIR" ;;
  esac
done
[[ -n $OURS && -f $OURS/libibverbs.so.1 ]] || die "--ours DIR with libibverbs.so.1 is required"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/uverbs-qp-sizing.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
eval "$("$ON" --print-env)"
# shellcheck disable=SC2086 # CFLAGS and LDFLAGS are word lists
cc $CFLAGS -Wall -Werror -o "$WORK/qp_sizing" "$ROOT/preload/tests/qp_sizing.c" $LDFLAGS -libverbs \
  || die "building preload/tests/qp_sizing.c failed"
ROWS=$ROOT/preload/tests/qp_sizing.rows
"$ON" -- "$WORK/qp_sizing" <"$ROWS" >"$WORK/real" 2>"$WORK/real.err" \
  || { cat "$WORK/real.err" >&2; die "the rows over rdma-core failed"; }
LD_LIBRARY_PATH=$OURS:$LD_LIBRARY_PATH UVERBS_MODEL_REPORT=$WORK/report LD_PRELOAD=$UVERBS_PRELOAD \
  "$WORK/qp_sizing" <"$ROWS" >"$WORK/ours" 2>"$WORK/ours.err" \
  || { cat "$WORK/ours.err" >&2; die "the rows over ours failed"; }
if [[ -s $WORK/report ]]; then
  echo "the model reported protocol violations over ours:"; cat "$WORK/report"
fi
total=$(wc -l <"$WORK/real")
bad=$( (diff "$WORK/real" "$WORK/ours" || true) | grep -c '^<' || true)
if [[ $bad -gt 0 ]]; then
  echo "rows where ours differs (< rdma-core, > ours):"
  diff "$WORK/real" "$WORK/ours" || true
fi
[[ -s $WORK/report ]] && bad=$((bad + 1))
verdict=ok
[[ $bad -eq 0 ]] || verdict=FAILED
echo "test result: $verdict. $((total - bad)) passed; $bad failed; 0 ignored; 0 measured; 0 filtered out (QP sizing, ours vs libmlx5 on the model)"
[[ $bad -eq 0 ]]
