#!/usr/bin/env bash
# scripts/loom.sh — the model-checked tests: the `loom_*` unit tests built
# with `--cfg loom`, so that `src/sync.rs` gives them loom's primitives and
# loom runs each under every interleaving of its threads. Their build has a
# target directory of its own (the cfg changes every crate's fingerprint).
#
# Usage: scripts/loom.sh [extra cargo test args, e.g. a test name filter]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export RUSTFLAGS="${RUSTFLAGS:-} --cfg loom"
export CARGO_TARGET_DIR=${LOOM_TARGET_DIR:-target/loom}
exec cargo test --release --lib --features test-utils "$@" -- loom_
