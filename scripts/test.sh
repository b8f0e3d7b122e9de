#!/usr/bin/env bash
# scripts/test.sh — every test of the project, from a fresh clone on a Debian
# 12 machine with no RDMA hardware. It installs nothing on the host: kernel
# headers, QEMU, the guest kernels and the musl toolchain are fetched with
# `apt-get download` into caches under ${XDG_CACHE_HOME:-$HOME/.cache}.
#
# Steps:
#   1. cargo fmt --check, cargo clippy -D warnings (all targets), cargo doc,
#      and each cargo feature of the library built on its own
#      (scripts/features.sh);
#   2. the static musl build of the `uverbs` CLI (scripts/musl.sh) and its
#      static-binary check;
#   3. host tests: cargo test --workspace (unit tests, the fake-kernel tests,
#      capi's tests of the built libibverbs.so/.a and stub libraries,
#      the ABI layout test against the kernel's own headers, the dependency
#      policy and static-binary tests), then the loom models
#      (scripts/loom.sh: the `loom_*` unit tests built with --cfg loom),
#      then rdma-core on the mlx5 device model (scripts/rdma-core-on-model.sh:
#      Debian's unmodified libibverbs + libmlx5, ibv_devinfo, C probes and
#      rdma-core's pyverbs tests through the LD_PRELOAD shim of preload/),
#      and pyverbs on the model over rdma-core and over our libibverbs.so.1
#      + libmlx5.so.1, compared test by test (scripts/pyverbs-model.sh),
#      QP sizing likewise, row by row (scripts/qp-sizing-model.sh), and the
#      model's virtual fabric across processes (scripts/fabric-matrix.sh:
#      the pingpongs of rdma-core against ours, perftest, the fault cases);
#   4. the device tests in the rxe test guest: kernel 6.1 with glibc builds,
#      kernel 6.12 with musl builds (scripts/guest-test.sh; they include capi's:
#      rdma-core's tools, perftest and C programs over our libibverbs.so.1
#      and libmlx5.so.1,
#      and the fully static musl C program in the musl run); then
#      rdma-core's pyverbs tests on both kernels, on real rdma-core and on
#      ours, compared test by test (scripts/pyverbs-guest.sh); then rdma_cm
#      on both kernels: Debian's rdma_cm tools, capi/tests/c/cm_notify.c and
#      the static musl capi/tests/c/static_rping.c over our librdmacm.so.1
#      and rdma-core's (scripts/rdmacm-guest.sh), and pyverbs' CM tests over
#      both (scripts/pyverbs-guest.sh --rdmacm);
#   5. two hosts on a virtual wire: our CLI against rdma-core's tools, and
#      Debian's rdma_cm tools over our librdmacm.so.1 against rdma-core's,
#      between two guests (scripts/two-host.sh --rdmacm), kernel 6.1 with the glibc build,
#      kernel 6.12 with the musl build;
#   6. packaging and toolchains: `cargo package --workspace` (the two
#      published crates, uverbs-abi first, each built from its package;
#      preload/, capi/ and tests/support/ are not published), the MSRV check with
#      Debian's rustc of the declared `rust-version` (scripts/msrv.sh);
#   7. fuzzing: every fuzz target replays its corpus, then runs mutated
#      inputs for a few seconds (scripts/fuzz.sh); a crash fails the run.
# A guest step (4 or 5) whose guest kernel crashed runs once more (see
# guest_step below).
# Prints cargo's `test result:` lines (steps 5 and 7 print their own in that
# shape) and a final total line.
#
# Options: --quick (steps 1 and 3 only, without the loom models and
# rdma-core), --no-musl, --no-loom, --no-rdma-core, --no-guest (no step 4),
# --no-two-host (no step 5), --no-package (no step 6), --no-fuzz (no step 7).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

QUICK=0 MUSL=1 LOOM=1 RDMA_CORE=1 GUEST=1 TWO_HOST=1 PACKAGE=1 FUZZ=1
for arg in "$@"; do
  case $arg in
    --quick) QUICK=1 MUSL=0 LOOM=0 RDMA_CORE=0 GUEST=0 TWO_HOST=0 PACKAGE=0 FUZZ=0 ;;
    --no-musl) MUSL=0 ;;
    --no-loom) LOOM=0 ;;
    --no-rdma-core) RDMA_CORE=0 ;;
    --no-guest) GUEST=0 ;;
    --no-two-host) TWO_HOST=0 ;;
    --no-package) PACKAGE=0 ;;
    --no-fuzz) FUZZ=0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
    *) echo "unknown option $arg" >&2; exit 2 ;;
  esac
done

LOGS=$ROOT/target/test-logs
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log "$LOGS"/*.crashed*.txt
step() { printf '\n==== %s (%s)\n' "$*" "$(date +%T)" >&2; }
START=$(date +%s)

# Kernel headers for the ABI layout test: the host's linux-libc-dev if it has
# the RDMA headers, otherwise Debian's package unpacked into a cache.
if [[ -z ${UVERBS_ABI_INCLUDE:-} && ! -f /usr/include/rdma/ib_user_verbs.h ]]; then
  step "fetching linux-libc-dev for the ABI layout test"
  HDRS=${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-headers
  if [[ ! -f $HDRS/usr/include/rdma/ib_user_verbs.h ]]; then
    mkdir -p "$HDRS/debs"
    (cd "$HDRS/debs" && { apt-get download linux-libc-dev 2>/dev/null \
      || { apt-get update -qq && apt-get download linux-libc-dev; }; })
    dpkg -x "$HDRS"/debs/linux-libc-dev_*.deb "$HDRS"
  fi
  export UVERBS_ABI_INCLUDE=$HDRS/usr/include
fi

# rdma-core's public mlx5dv.h for the mlx5 golden tests and the mlx5
# benchmark's C baseline: Debian's libibverbs-dev unpacked into a cache.
if [[ -z ${UVERBS_MLX5DV_INCLUDE:-} && ! -f /usr/include/infiniband/mlx5dv.h ]]; then
  IBV=${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-headers-ibverbs
  if [[ ! -f $IBV/usr/include/infiniband/mlx5dv.h ]]; then
    step "fetching libibverbs-dev (mlx5dv.h) for the mlx5 golden tests"
    mkdir -p "$IBV/debs"
    (cd "$IBV/debs" && { apt-get download libibverbs-dev 2>/dev/null \
      || { apt-get update -qq && apt-get download libibverbs-dev; }; })
    dpkg -x "$IBV"/debs/libibverbs-dev_*.deb "$IBV"
  fi
  export UVERBS_MLX5DV_INCLUDE=$IBV/usr/include
fi

# rdma-core's rdma_cma.h for the librdmacm layout probe (capi): Debian's
# librdmacm-dev unpacked into a cache.
if [[ -z ${UVERBS_RDMACM_INCLUDE:-} && ! -f /usr/include/rdma/rdma_cma.h ]]; then
  RCM=${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-headers-rdmacm
  if [[ ! -f $RCM/usr/include/rdma/rdma_cma.h ]]; then
    step "fetching librdmacm-dev (rdma_cma.h) for the librdmacm layout probe"
    mkdir -p "$RCM/debs"
    (cd "$RCM/debs" && { apt-get download librdmacm-dev 2>/dev/null \
      || { apt-get update -qq && apt-get download librdmacm-dev; }; })
    dpkg -x "$RCM"/debs/librdmacm-dev_*.deb "$RCM"
  fi
  export UVERBS_RDMACM_INCLUDE=$RCM/usr/include
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --features uverbs/device-tests,uverbs/tokio -- -D warnings

step "cargo doc (broken links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --features uverbs/tokio,uverbs/stream --quiet

step "each cargo feature on its own (scripts/features.sh)"
scripts/features.sh

if [[ $MUSL == 1 ]]; then
  step "static musl build of the uverbs CLI"
  scripts/musl.sh cargo build --release --bin uverbs
  MUSL_BIN=$ROOT/target/musl/x86_64-unknown-linux-musl/release/uverbs
  scripts/musl.sh check "$MUSL_BIN"
  export UVERBS_MUSL_BIN=$MUSL_BIN
fi

# The C libraries, built here for the steps after the host tests (guest,
# model, pyverbs). capi's host tests would build them themselves
# (capi/tests/support/mod.rs), without --features uverbs/tokio.
step "the C libraries (capi/): libibverbs.so, libibverbs.a, libmlx5.so and librdmacm.so"
cargo build -p uverbs-cabi -p uverbs-cabi-mlx5 -p uverbs-cabi-rdmacm

step "host tests"
cargo test --workspace --features uverbs/tokio 2>&1 | tee "$LOGS/host.log"

if [[ $LOOM == 1 ]]; then
  step "loom models (the loom_* unit tests under --cfg loom)"
  scripts/loom.sh 2>&1 | tee "$LOGS/loom.log"
fi

# The C libraries as programs load them: libibverbs.so.1, libmlx5.so.1 and
# librdmacm.so.1 (ours) and the stub libefa.so.1, in one directory for
# LD_LIBRARY_PATH (the pyverbs steps take librdmacm.so.1 only with --rdmacm).
# ours_dir DIR PROFILE: that directory, from target/PROFILE.
ours_dir() {
  rm -rf "$1"; mkdir -p "$1"
  cp "$ROOT/target/$2/libibverbs.so" "$1/libibverbs.so.1"
  cp "$ROOT/target/$2/libmlx5.so" "$1/libmlx5.so.1"
  cp "$ROOT/target/$2/librdmacm.so" "$1/librdmacm.so.1"
  capi/stubs/build.sh "$1" >&2
}
OURS=$ROOT/target/pyverbs-ours
if [[ $RDMA_CORE == 1 || $GUEST == 1 || $TWO_HOST == 1 ]]; then
  ours_dir "$OURS" debug
fi
# The rdma_cm programs run against rdma-core's over the release build, as
# they are deployed: perftest -R races its own server (the client connects
# right after the handshake that releases it, while the server re-listens),
# and the debug build's first rdma_getaddrinfo, paying a page fault for each
# of its cold code pages (about 1 ms each in the TCG guest), lost that race
# 7 times in 8 under load, the release build 0 in 8 (capi/README.md).
OURS_REL=$ROOT/target/rdmacm-ours
if [[ $GUEST == 1 || $TWO_HOST == 1 ]]; then
  step "the C libraries, release build (for the rdma_cm programs)"
  cargo build --release -p uverbs-cabi -p uverbs-cabi-mlx5 -p uverbs-cabi-rdmacm
  ours_dir "$OURS_REL" release
fi

if [[ $RDMA_CORE == 1 ]]; then
  step "rdma-core 44 (libibverbs, libmlx5, ibv_devinfo, pyverbs tests) on the mlx5 device model"
  UVERBS_CABI_OURS=$OURS scripts/rdma-core-on-model.sh 2>&1 | tee "$LOGS/rdma-core.log"
  step "pyverbs on the mlx5 device model: over rdma-core, then over ours, test by test"
  scripts/pyverbs-model.sh --ours "$OURS" --known-gaps capi/pyverbs-model-known-gaps.txt 2>&1 \
    | tee "$LOGS/pyverbs-model.log"
  step "QP sizing on the mlx5 device model: libmlx5's answers, then ours, row by row"
  scripts/qp-sizing-model.sh --ours "$OURS" 2>&1 | tee "$LOGS/qp-sizing-model.log"
  step "the model's virtual fabric: pingpongs and perftest across processes, rdma-core against ours"
  scripts/fabric-matrix.sh 2>&1 | tee "$LOGS/fabric-matrix.log"
fi

# Runs one guest step, `NAME COMMAND...`: stdout to $LOGS/NAME.log (and the
# terminal), stderr (the guests' consoles) to $LOGS/NAME.console.log. When a
# guest's kernel died under it (the harness reports run-guest.sh's exit 125:
# no exit marker, a panic or QEMU failing), the step runs once more, after
# the crash's console lines are shown and the run's logs kept as
# NAME.crashed.txt and NAME.crashed.console.txt (outside the totals). Seen
# once in many runs: a double fault in Debian 6.12's rxe receive path under
# TCG, between two exchanges, whose binaries had passed twice before. A
# second crash, or any other failure (a failed test, a timeout, a setup
# error), fails the run.
guest_step() {
  local name=$1; shift
  if "$@" 2>"$LOGS/$name.console.log" | tee "$LOGS/$name.log"; then
    return 0
  fi
  if grep -q "FAILED: run-guest.sh exit 125" "$LOGS/$name.log"; then
    printf '
==== %s: a guest kernel crashed; its console:
' "$name" >&2
    grep -E -A 40 -m 1 "Oops|Kernel panic|BUG:|double fault" "$LOGS/$name.console.log" >&2 \
      || tail -n 60 "$LOGS/$name.console.log" >&2
    mv "$LOGS/$name.log" "$LOGS/$name.crashed.txt"
    mv "$LOGS/$name.console.log" "$LOGS/$name.crashed.console.txt"
    step "$name: once more, after a guest kernel crash"
    if "$@" 2>"$LOGS/$name.console.log" | tee "$LOGS/$name.log"; then
      return 0
    fi
  fi
  tail -n 60 "$LOGS/$name.console.log" >&2
  exit 1
}

if [[ $GUEST == 1 ]]; then
  step "device tests in the rxe guest: kernel 6.1, glibc build"
  guest_step guest-6.1 scripts/guest-test.sh --kernel 6.1
  if [[ $MUSL == 1 ]]; then
    step "device tests in the rxe guest: kernel 6.12, static musl build"
    guest_step guest-6.12 scripts/guest-test.sh --kernel 6.12 --musl
  else
    step "device tests in the rxe guest: kernel 6.12, glibc build"
    guest_step guest-6.12 scripts/guest-test.sh --kernel 6.12
  fi
fi

if [[ $GUEST == 1 ]]; then
  # rdma-core's pyverbs tests, twice per kernel in one boot: on real
  # rdma-core, then on capi's libibverbs.so.1 (+ the stub libmlx5/libefa),
  # compared test by test (capi/pyverbs-known-gaps.txt: what ours lacks yet).
  step "pyverbs harness self-test (host)"
  scripts/pyverbs-guest.sh --self-test 2>&1 | tee "$LOGS/pyverbs-self-test.log" >&2
  for k in 6.1 6.12; do
    step "rdma-core's pyverbs tests in the rxe guest, kernel $k: real rdma-core, then ours"
    guest_step "pyverbs-$k" scripts/pyverbs-guest.sh --kernel "$k" --ours "$OURS" \
      --known-gaps capi/pyverbs-known-gaps.txt --table changed
  done
  # rdma_cm: Debian's tools, cm_notify (seed 003) and the static musl
  # static_rping over our librdmacm.so.1 against rdma-core's, in one guest;
  # then pyverbs' CM tests over both, test by test.
  step "the wire harnesses' output checks, self-test (host)"
  bash scripts/wire-checks.sh 2>&1 | tee "$LOGS/wire-checks-self-test.log" >&2
  static=(); [[ $MUSL == 1 ]] || static=(--no-static)
  for k in 6.1 6.12; do
    step "rdma_cm tools, cm_notify and static_rping in the rxe guest, kernel $k: ours against rdma-core"
    guest_step "rdmacm-$k" scripts/rdmacm-guest.sh --kernel "$k" --ours "$OURS_REL" "${static[@]}" \
      --known-gaps capi/rdmacm-known-gaps.txt
    step "pyverbs' CM tests in the rxe guest, kernel $k: real rdma-core, then our librdmacm"
    guest_step "pyverbs-cm-$k" scripts/pyverbs-guest.sh --kernel "$k" --ours "$OURS" --rdmacm \
      --known-gaps capi/pyverbs-cm-known-gaps.txt --table all
  done
fi

if [[ $TWO_HOST == 1 ]]; then
  step "two hosts on a virtual wire: kernel 6.1, glibc build"
  guest_step two-host-6.1 scripts/two-host.sh --kernel 6.1 --rdmacm "$OURS_REL" --known-gaps capi/rdmacm-known-gaps.txt
  musl=() build=glibc
  [[ $MUSL == 1 ]] && musl=(--musl) build="static musl"
  step "two hosts on a virtual wire: kernel 6.12, $build build"
  guest_step two-host-6.12 scripts/two-host.sh --kernel 6.12 "${musl[@]}" --rdmacm "$OURS_REL" --known-gaps capi/rdmacm-known-gaps.txt
fi

if [[ $PACKAGE == 1 ]]; then
  step "cargo package --workspace (uverbs-abi, then uverbs, each verified from its package)"
  cargo package --workspace --exclude uverbs-model-preload --exclude uverbs-cabi --exclude uverbs-cabi-mlx5 --exclude uverbs-cabi-rdmacm --exclude uverbs-test-support --allow-dirty 2>&1 | tee "$LOGS/package.txt" | grep -E '^ *(Packaged|Verifying|Finished)' >&2
  step "MSRV: the library and the CLI with rustc $(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)"
  scripts/msrv.sh 2>&1 | tail -n 3 >&2
fi

if [[ $FUZZ == 1 ]]; then
  step "fuzzing: every target's corpus, then ${UVERBS_FUZZ_SECONDS:-3} s of mutated inputs each"
  scripts/fuzz.sh --seconds-per-target "${UVERBS_FUZZ_SECONDS:-3}" 2>&1 | tee "$LOGS/fuzz.log"
fi

# Totals over every cargo summary line (host, guests, two-host, fuzzing),
# each counted once: the guests' console logs repeat their result lines.
passed=0 failed=0 ignored=0
results=()
for f in "$LOGS"/*.log; do [[ $f == *.console.log ]] || results+=("$f"); done
while read -r p f i; do
  passed=$((passed + p)) failed=$((failed + f)) ignored=$((ignored + i))
done < <(grep -ho 'test result: [a-zA-Z]*\. [0-9]* passed; [0-9]* failed; [0-9]* ignored' "${results[@]}" \
  | sed -E 's/.* ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored/\1 \2 \3/')
printf '\nwall time: %ss\n' "$(( $(date +%s) - START ))"
echo "total: $passed passed, $failed failed, $ignored skipped"
[[ $failed == 0 ]]
