#!/usr/bin/env bash
# scripts/pyverbs-model.sh — rdma-core's pyverbs tests (Debian bookworm's
# python3-pyverbs 44.0-2) on uverbs' mlx5 device model, twice: over
# rdma-core (Debian's libibverbs + libmlx5) and over ours (the project's
# libibverbs.so.1 + libmlx5.so.1, which drive uverbs' own mlx5 provider),
# compared test by test as scripts/pyverbs-guest.sh compares them on rxe:
#   - every test that passes over libmlx5 must pass over ours;
#   - every test that rdma-core skips must be skipped (or pass) over ours,
#     never end in an error or a failure.
# Both runs go through the LD_PRELOAD shim of preload/ (scripts/on-model.sh's
# environment), each with its own model report: a protocol violation the
# model reports over ours fails the run (over rdma-core it is a feature the
# model does not execute, shown).
#
# Usage:
#   scripts/pyverbs-model.sh --ours DIR [options]   DIR holds libibverbs.so.1,
#                                                   libmlx5.so.1, libefa.so.1
#   scripts/pyverbs-model.sh --real-only [options]  the baseline only
# Options:
#   --module M          run only module M (repeatable; default: every
#                       test_*.py module of the suite)
#   --module-timeout S  bound per module and library (default 120)
#   --known-gaps FILE   tests that pass over libmlx5 and are known not to over
#                       ours yet (`module.Class.test  reason` per line)
#   --table all|rest|changed|none  rows printed (default changed)
#   --markdown          the table in Markdown
#   --keep DIR          keep the console log and the model reports in DIR
# Prints the table, a verdict and `[model] test result: ...` in cargo's
# shape (P: pass on both; F: pass over libmlx5 and not over ours, a skip
# that became an error, plus harness problems; I: the rest), which
# scripts/test.sh totals. Exit status 0 when the verdict is ok, 1 otherwise,
# 2 on usage.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ON=$ROOT/scripts/on-model.sh
log() { printf '[pyverbs-model] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }

OURS= REAL_ONLY=0 MODULES=() MTIMEOUT=120 GAPS= TABLE=changed MD=0 KEEP=
need() { [[ $1 -ge 2 ]] || usage; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --ours) need $#; OURS=$(cd "$2" && pwd); shift 2 ;;
    --real-only) REAL_ONLY=1; shift ;;
    --module) need $#; MODULES+=("$2"); shift 2 ;;
    --module-timeout) need $#; MTIMEOUT=$2; shift 2 ;;
    --known-gaps) need $#; GAPS=$2; shift 2 ;;
    --table) need $#; TABLE=$2; shift 2 ;;
    --markdown) MD=1; shift ;;
    --keep) need $#; KEEP=$2; shift 2 ;;
    -h|--help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
[[ -n $OURS || $REAL_ONLY == 1 ]] || { log "--ours DIR or --real-only is required"; usage; }
[[ -z $OURS || $REAL_ONLY == 0 ]] || die "--ours and --real-only exclude each other"
if [[ -n $OURS ]]; then
  for f in libibverbs.so.1 libmlx5.so.1 libefa.so.1; do
    [[ -f $OURS/$f ]] || die "$OURS has no $f"
  done
fi
# Debian's pyverbs 44.0-2 is built for CPython 3.11 (bookworm's).
PYTHON=/usr/bin/python3.11
[[ -x $PYTHON ]] || die "no $PYTHON (Debian bookworm's python3.11, which pyverbs 44.0-2 needs)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/uverbs-pyverbs-model.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
eval "$("$ON" --print-env)"
cp -r "$RDMA_CORE_TESTS" "$WORK/tests"
gunzip -f "$WORK"/tests/*.gz
if [[ ${#MODULES[@]} -eq 0 ]]; then
  for f in "$WORK"/tests/test_*.py; do MODULES+=("$(basename "$f" .py)"); done
fi

NONCE=model$$
CONSOLE=$WORK/console.log
# One runner per library: a fresh python3.11 per module (--exec), so that
# each module's process opens the device (and builds its model) itself.
run() { # LIB [LD_LIBRARY_PATH prefix]
  local lib=$1 prefix=${2:-} status=0
  log "pyverbs over ${lib}: ${#MODULES[@]} modules"
  LD_LIBRARY_PATH=${prefix:+$prefix:}$LD_LIBRARY_PATH UVERBS_MODEL_REPORT=$WORK/report-$lib \
    LD_PRELOAD=$UVERBS_PRELOAD PYTHONUNBUFFERED=1 \
    "$PYTHON" "$ROOT/scripts/pyverbs-run.py" --lib "$lib" --nonce "$NONCE" --tests "$WORK/tests" \
    --dev mlx5_0 --port 1 --gid 1 --timeout "$MTIMEOUT" --exec --work "$WORK/run-$lib" \
    "${MODULES[@]}" >>"$CONSOLE" 2>&1 || status=$?
  echo "=== pyverbs:$NONCE: runner-exit $lib rc=$status" >>"$CONSOLE"
}
run real
[[ $REAL_ONLY == 1 ]] || run ours "$OURS"

status=0
cmp=(--nonce "$NONCE" --kernel model --table "$TABLE" --ours-prefix "$OURS/" --skip-must-skip)
[[ $REAL_ONLY == 1 ]] && cmp+=(--real-only)
[[ $MD == 1 ]] && cmp+=(--markdown)
[[ -n $GAPS ]] && cmp+=(--known-gaps "$GAPS")
# Over rdma-core, a violation is a feature the model does not execute
# (UMR WQEs of test_mlx5_mkey, whose tests then end in errors over
# libmlx5 too): shown, not failed. Over ours it is our provider breaking
# the device's protocol: failed.
if [[ -s $WORK/report-real ]]; then
  log "the model reported over rdma-core (features it does not model):"
  sort "$WORK/report-real" | sed -E 's/^pid [0-9]+: //; s/QP 0x[0-9a-f]+/QP #/' | sort | uniq -c >&2
fi
if [[ -s $WORK/report-ours ]]; then
  cmp+=(--problem "the model reported protocol violations over ours: $(head -c 600 "$WORK/report-ours" | tr '\n' ' ')")
fi
"$PYTHON" "$ROOT/scripts/pyverbs-compare.py" "${cmp[@]}" "$CONSOLE" || status=1
if [[ -n $KEEP ]]; then
  mkdir -p "$KEEP"
  cp "$CONSOLE" "$KEEP/pyverbs-model.console.log"
  for lib in real ours; do [[ -f $WORK/report-$lib ]] && cp "$WORK/report-$lib" "$KEEP/model-report-$lib.txt"; done
fi
exit "$status"
