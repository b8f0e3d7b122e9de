#!/usr/bin/env bash
# scripts/features.sh — builds the `uverbs` library with each of its cargo
# features on its own (what `cargo hack check --each-feature` does, without
# installing cargo-hack), so a `#[cfg(feature = ...)]` that leaves something
# behind is found here rather than by a user with `default-features = false`.
#
# Each row is `cargo check -p uverbs --lib --no-default-features --features
# F`, plus the least the feature needs: a provider (`rxe`) for the features
# that bring none (at least one provider is required). A warning fails the row as an error does:
# a feature combination that leaves dead code behind is a bug of its gates.
# Then the defaults, every public feature together, and the CLI's
# feature (`--bins`); and the build with no provider must fail with the
# crate's own message.
#
# Usage: scripts/features.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

fail=0
row() {
  local what=$1
  shift
  local out
  if ! out=$(cargo check -p uverbs "$@" 2>&1); then
    printf 'features.sh: %-34s FAILED\n%s\n' "$what" "$out" >&2
    fail=1
  elif grep -q '^warning' <<<"$out"; then
    printf 'features.sh: %-34s WARNINGS\n%s\n' "$what" "$out" >&2
    fail=1
  else
    printf 'features.sh: %-34s ok\n' "$what" >&2
  fi
}

for f in rxe mlx5 devx "cm rxe" "tokio rxe" "stream rxe"; do
  row "--features ${f// /,}" --lib --no-default-features --features "${f// /,}"
done
row "default features" --lib
row "every public feature" --lib --features tokio,stream
row "cli (the uverbs binary)" --bins --no-default-features --features cli

# No provider: the crate says what to enable.
if out=$(cargo check -p uverbs --lib --no-default-features 2>&1); then
  echo "features.sh: --no-default-features built, but a build with no provider must fail" >&2
  fail=1
elif ! grep -q 'uverbs needs at least one provider' <<<"$out"; then
  printf 'features.sh: --no-default-features failed without the crate'"'"'s message:\n%s\n' "$out" >&2
  fail=1
else
  printf 'features.sh: %-34s refused, as it must\n' "--no-default-features" >&2
fi

if [[ $fail != 0 ]]; then
  echo "features.sh: FAILED" >&2
  exit 1
fi
echo "features.sh: every feature builds on its own" >&2
