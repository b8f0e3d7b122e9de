#!/usr/bin/env bash
# scripts/fuzz.sh — builds the stable fuzz harness (fuzz/, no nightly needed)
# and runs every fuzz target for a bounded time: each target first replays
# its corpus (fuzz/corpus/<target>/), then runs mutated and generated inputs
# until its time is spent. A panic, abort, signal or hang fails the run; the
# input is printed in hex and saved under fuzz/artifacts/<target>/.
# Prints cargo test's `test result:` line; exits non-zero on any failure.
#
# Usage:
#   scripts/fuzz.sh [--seconds-per-target N] [--seed HEX] [TARGET...]
#                                      (default 4 s each: about 90 s for all)
#   scripts/fuzz.sh --replay TARGET PATH...   run saved inputs (files or folders) once
#   scripts/fuzz.sh --list                    the targets and what each checks
# See fuzz/README.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

SECONDS_PER=4
MODE=run
ARGS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds-per-target) SECONDS_PER=${2:?--seconds-per-target needs a number}; shift 2 ;;
    --seconds-per-target=*) SECONDS_PER=${1#*=}; shift ;;
    --seed) ARGS+=(--seed "${2:?--seed needs a value}"); shift 2 ;;
    --replay) MODE=replay; shift ;;
    --list) MODE=list; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

# The harness has its own workspace (fuzz/) and profile (optimised, with
# debug assertions and overflow checks); it builds under target/fuzz.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}/fuzz
cargo build --manifest-path fuzz/Cargo.toml --profile fuzz --locked --bin uverbs-fuzz
BIN=$CARGO_TARGET_DIR/fuzz/uverbs-fuzz

case $MODE in
  list) exec "$BIN" list ;;
  replay) exec "$BIN" replay "${ARGS[@]}" ;;
  run) exec "$BIN" run --seconds "$SECONDS_PER" "${ARGS[@]}" ;;
esac
