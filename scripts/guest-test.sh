#!/usr/bin/env bash
# scripts/guest-test.sh — build the device tests and run them against a real
# kernel's rdma_rxe inside the test guest (guest/run-guest.sh), or on the host.
#
# Usage:
#   scripts/guest-test.sh [--kernel 6.1|6.12|all] [--musl] [--manifest-path P]
#                         [--timeout S] [-- extra test args]
#   UVERBS_TEST_DEVICE=mlx5_0 scripts/guest-test.sh --host [-- extra test args]
#
# Builds `cargo test --features device-tests,tokio --no-run` and `cargo build
# --bin uverbs` + `cargo build --features tokio --examples` on the host (with --musl: through
# scripts/musl.sh cargo ...), puts the executables into ONE guest boot per
# kernel and runs each test executable there with --test-threads=1,
# UVERBS_BIN=/guest/bin/uverbs and UVERBS_EXAMPLES_DIR=/guest/examples. The guest
# exports UVERBS_TEST_DEVICE=rxe0, UVERBS_TEST_GID_INDEX, UVERBS_TEST_IP=192.0.2.1.
# The console is streamed to stderr (prefixed "[<kernel>] "); stdout gets the
# cargo `test result:` lines, prefixed with the kernel. Exits non-zero if any
# test executable failed or a guest did not finish (crash/timeout).
#
# Also builds the C library (capi/: libibverbs.so.1 with the host's glibc
# toolchain, also with --musl), libmlx5.so.1, the stub libefa.so.1 and the C
# test program capi/tests/c/static_verbs.c (dynamic; with --musl also fully
# static), for tests/device/cabi*.rs: /guest/cabi in the guest, exported as
# UVERBS_CABI_DIR (and UVERBS_CABI_STATIC for the static program).
#
# --host runs the same executables directly on this machine (real hardware;
# no guest): UVERBS_TEST_DEVICE must name the device, and UVERBS_TEST_GID_INDEX
# / UVERBS_TEST_IP should be set as the tests need them.
#
# Options: --kernel (default all), --timeout S per guest boot (default 1200),
# --env K=V (exported in the guest; repeatable), --manifest-path (or
# $UVERBS_GUEST_TEST_MANIFEST) to build another crate.
# Exit status: 0 all passed; 1 a test executable failed or a guest failed
# (setup/timeout/crash: see the "[<kernel>] GUEST FAILED" line and the kept
# log); 2 usage or build failure.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)

log() { printf '[guest-test] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }

KERNELS=all MUSL=0 HOST=0 TIMEOUT=1200 MANIFEST=${UVERBS_GUEST_TEST_MANIFEST:-}
TEST_ARGS=() ENVS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel) [[ $# -ge 2 ]] || usage; KERNELS=$2; shift 2 ;;
    --musl) MUSL=1; shift ;;
    --host) HOST=1; shift ;;
    --timeout) [[ $# -ge 2 ]] || usage; TIMEOUT=$2; shift 2 ;;
    --manifest-path) [[ $# -ge 2 ]] || usage; MANIFEST=$2; shift 2 ;;
    --env) [[ $# -ge 2 && $2 == *=* ]] || usage; ENVS+=(--env "$2"); shift 2 ;;
    --) shift; TEST_ARGS=("$@"); break ;;
    -h|--help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
case $KERNELS in
  all) KERNELS=(6.1 6.12) ;;
  6.1|6.12) KERNELS=("$KERNELS") ;;
  *) die "--kernel 6.1|6.12|all" ;;
esac
if [[ $HOST == 1 ]]; then
  [[ -n ${UVERBS_TEST_DEVICE:-} ]] || die "--host needs UVERBS_TEST_DEVICE (e.g. mlx5_0)"
fi

# ---------------------------------------------------------------- build
CARGO=(cargo)
[[ $MUSL == 1 ]] && CARGO=("$REPO/scripts/musl.sh" cargo)
MF=()
[[ -n $MANIFEST ]] && MF=(--manifest-path "$MANIFEST")
# Only the device test target runs in the guest (the host-only tests need
# cargo, the sources or the kernel headers); another crate runs all its tests.
SEL=(--test device)
[[ -n $MANIFEST ]] && SEL=()
# musl builds its std from source once per profile: build everything in
# release so the CLI and the tests share it.
PROFILE=()
[[ $MUSL == 1 ]] && PROFILE=(--release)
[[ -n $MANIFEST ]] || cd "$REPO"

# executables ARTIFACT_FILTER: read cargo's JSON messages on stdin and print
# the executables of the matching compiler-artifact messages (independent of
# the target dir / --target).
executables() {
  python3 -c '
import json, sys
want = sys.argv[1]
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    t = m.get("target", {})
    if want == "tests" and m.get("profile", {}).get("test"):
        print(m["executable"])
    elif want == "examples" and "example" in t.get("kind", []):
        print(m["executable"])
    elif want != "tests" and t.get("name") == want and "bin" in t.get("kind", []):
        print(m["executable"])
' "$1"
}

# This crate's device tests include the async ones (feature tokio); another
# crate (--manifest-path) gets device-tests only.
FEATURES=device-tests
[[ -z $MANIFEST ]] && FEATURES=device-tests,tokio
log "building test executables: ${CARGO[*]} test ${PROFILE[*]} --features $FEATURES ${SEL[*]} --no-run ${MF[*]}"
JSON=$(mktemp "${TMPDIR:-/tmp}/guest-test.XXXXXX")
trap 'rm -f "$JSON"' EXIT
"${CARGO[@]}" test "${PROFILE[@]}" --features "$FEATURES" "${SEL[@]}" --no-run --message-format=json-render-diagnostics "${MF[@]}" > "$JSON" \
  || die "cargo test --no-run failed"
mapfile -t TESTS < <(executables tests < "$JSON" | awk '!seen[$0]++')
[[ ${#TESTS[@]} -gt 0 ]] || die "no test executables were built"
log "building the uverbs CLI: ${CARGO[*]} build --bin uverbs ${MF[*]}"
"${CARGO[@]}" build "${PROFILE[@]}" --bin uverbs --message-format=json-render-diagnostics "${MF[@]}" > "$JSON" \
  || die "cargo build --bin uverbs failed"
UVERBS=$(executables uverbs < "$JSON" | tail -1)
[[ -n $UVERBS && -x $UVERBS ]] || die "cargo did not report the uverbs executable"
# The examples, which device tests run as programs (UVERBS_EXAMPLES_DIR).
EXAMPLES=()
if [[ -z $MANIFEST ]]; then
  log "building the examples: ${CARGO[*]} build --features tokio --examples"
  "${CARGO[@]}" build "${PROFILE[@]}" --features tokio --examples --message-format=json-render-diagnostics > "$JSON" \
    || die "cargo build --examples failed"
  mapfile -t EXAMPLES < <(executables examples < "$JSON" | awk '!seen[$0]++')
fi
log "test executables: ${TESTS[*]##*/}; uverbs: $UVERBS; examples: ${EXAMPLES[*]##*/}"

# The C library (capi/) for the device tests that run Debian's programs over
# it (tests/device/cabi*.rs): libibverbs.so.1 built with the host's glibc
# toolchain even with --musl (Debian's binaries are glibc), libmlx5.so.1
# (capi/mlx5/), the stub libefa.so.1 (capi/stubs/), and capi/tests/c/static_verbs.c
# linked dynamically against Debian's libibverbs (static_verbs_dyn) and, with
# --musl, fully static over the musl staticlib (static_verbs). They go to
# /guest/cabi, exported as UVERBS_CABI_DIR (UVERBS_CABI_STATIC: the static
# program). A static program that does not link is reported here and left
# out, so the device test that needs it fails and the others still run.
CABI= CABI_STATIC=
# cdylib NAME: the .so of the library target NAME in cargo's JSON on stdin.
cdylib() {
  python3 -c '
import json, sys
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == sys.argv[1]:
        print("\n".join(f for f in m.get("filenames", []) if f.endswith(".so")))
' "$1"
}
if [[ -z $MANIFEST ]]; then
  CABI=$(mktemp -d "${TMPDIR:-/tmp}/guest-test-cabi.XXXXXX")
  trap 'rm -rf "$JSON" "$CABI"' EXIT
  log "building the C libraries: cargo build -p uverbs-cabi -p uverbs-cabi-mlx5 (host glibc), stub, C programs"
  cargo build -p uverbs-cabi -p uverbs-cabi-mlx5 --message-format=json-render-diagnostics > "$JSON" \
    || die "cargo build -p uverbs-cabi -p uverbs-cabi-mlx5 failed"
  SO=$(cdylib ibverbs < "$JSON" | tail -1)
  [[ -n $SO && -f $SO ]] || die "cargo did not report libibverbs.so"
  MLX5_SO=$(cdylib mlx5 < "$JSON" | tail -1)
  [[ -n $MLX5_SO && -f $MLX5_SO ]] || die "cargo did not report libmlx5.so"
  objcopy --strip-debug "$SO" "$CABI/libibverbs.so.1" 2>/dev/null || cp "$SO" "$CABI/libibverbs.so.1"
  objcopy --strip-debug "$MLX5_SO" "$CABI/libmlx5.so.1" 2>/dev/null || cp "$MLX5_SO" "$CABI/libmlx5.so.1"
  "$REPO/capi/stubs/build.sh" "$CABI" >&2 || die "building the stub libefa failed"
  rm -rf "$CABI/src"
  "$REPO/capi/build-static.sh" --glibc-dynamic "$CABI/static_verbs_dyn" \
    || die "building capi/tests/c/static_verbs.c (dynamic) failed"
  # The C programs that compare libibverbs' conventions call by call over
  # both libraries (tests/device/cabi.rs), linked against ours: it exports
  # rdma-core's symbol versions, so they run over either.
  VERBS_INC=
  for d in "${UVERBS_MLX5DV_INCLUDE:-}" /usr/include "${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-headers-ibverbs/usr/include"; do
    [[ -n $d && -f $d/infiniband/verbs.h ]] && { VERBS_INC=$d; break; }
  done
  [[ -n $VERBS_INC ]] || die "no infiniband/verbs.h (Debian's libibverbs-dev; scripts/test.sh fetches it)"
  for c in objects qp_ex cq_ex close_device process destroy; do
    [[ -f $REPO/capi/tests/c/$c.c ]] || continue
    cc -O1 -Wall -I "$VERBS_INC" ${UVERBS_ABI_INCLUDE:+-I "$UVERBS_ABI_INCLUDE"} -o "$CABI/$c" \
      "$REPO/capi/tests/c/$c.c" -L "$(dirname "$SO")" -libverbs -lpthread -ldl \
      || die "building capi/tests/c/$c.c failed"
  done
  if [[ $MUSL == 1 ]]; then
    if "$REPO/capi/build-static.sh" "$CABI/static_verbs"; then
      CABI_STATIC=$CABI/static_verbs
    else
      log "WARNING: the static musl static_verbs did not build; its device test will fail"
    fi
  fi
fi

# sq STR: single-quote STR for a POSIX shell
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# ---------------------------------------------------------------- host mode
if [[ $HOST == 1 ]]; then
  fails=0
  OUT=$(mktemp "${TMPDIR:-/tmp}/guest-test-host.XXXXXX")
  trap 'rm -rf "$JSON" "$OUT" "$CABI"' EXIT
  for t in "${TESTS[@]}"; do
    log "running ${t##*/} on the host (device $UVERBS_TEST_DEVICE)"
    set +e
    UVERBS_BIN=$UVERBS UVERBS_EXAMPLES_DIR=${EXAMPLES[0]:+$(dirname "${EXAMPLES[0]}")} \
      UVERBS_CABI_DIR=$CABI UVERBS_CABI_STATIC=$CABI_STATIC \
      "$t" --test-threads=1 "${TEST_ARGS[@]}" 2>&1 | tee "$OUT" >&2
    rc=${PIPESTATUS[0]}
    set -e
    grep '^test result: ' "$OUT" | sed 's/^/[host] /' || true
    if [[ $rc != 0 ]]; then
      fails=$((fails + 1)); echo "[host] FAILED: ${t##*/} (exit $rc)"
    fi
  done
  [[ $fails == 0 ]] || { log "$fails test executable(s) failed"; exit 1; }
  exit 0
fi

# ---------------------------------------------------------------- guest mode
# One guest script runs every test executable, then reports how many failed.
SCRIPT=$(mktemp "${TMPDIR:-/tmp}/guest-test-run.XXXXXX")
# The programs the tests run go in without their debug info: a dozen debug
# builds of ~25 MB each overflow the initramfs of a 1 GiB guest
# ("Initramfs unpacking failed: write error"). Test executables keep theirs
# (their panics print line numbers).
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/guest-test-bin.XXXXXX")
trap 'rm -rf "$JSON" "$SCRIPT" "$STAGE" "$CABI"' EXIT
stripped() {
  local out="$STAGE/$(basename "$1")"
  if objcopy --strip-debug "$1" "$out" 2>/dev/null; then echo "$out"; else echo "$1"; fi
}
ADDS=(--add "$(stripped "$UVERBS"):/guest/bin/uverbs")
for e in "${EXAMPLES[@]}"; do ADDS+=(--add "$(stripped "$e"):/guest/examples/$(basename "$e")"); done
[[ -n $CABI ]] && ADDS+=(--add "$CABI:/guest/cabi")
extra=
for a in "${TEST_ARGS[@]}"; do extra+=" $(sq "$a")"; done
{
  echo 'export UVERBS_BIN=/guest/bin/uverbs'
  echo 'export UVERBS_EXAMPLES_DIR=/guest/examples'
  if [[ -n $CABI ]]; then
    echo 'export UVERBS_CABI_DIR=/guest/cabi'
    [[ -n $CABI_STATIC ]] && echo 'export UVERBS_CABI_STATIC=/guest/cabi/static_verbs'
  fi
  # The musl build must be static: a device test checks UVERBS_BIN with this.
  [[ $MUSL == 1 ]] && echo 'export UVERBS_EXPECT_STATIC=1'
  echo 'fails=0'
  i=0
  for t in "${TESTS[@]}"; do
    n=$(basename "$t")
    ADDS+=(--add "$t:/guest/tests/$i-$n")
    echo "echo '=== guest-test: running $n'"
    echo "/guest/tests/$i-$n --test-threads=1$extra"
    echo "rc=\$?; echo \"=== guest-test: $n exit \$rc\""
    echo "[ \$rc = 0 ] || fails=\$((fails + 1))"
    i=$((i + 1))
  done
  echo 'echo "=== guest-test: $fails test executable(s) failed"'
  echo '[ $fails = 0 ]'
} > "$SCRIPT"

status=0
for k in "${KERNELS[@]}"; do
  CONSOLE=$(mktemp "${TMPDIR:-/tmp}/guest-test-console.XXXXXX")
  set +e
  "$REPO/guest/run-guest.sh" --kernel "$k" --timeout "$TIMEOUT" --mem 1536 --log "$CONSOLE" "${ADDS[@]}" "${ENVS[@]}" \
    --script "$SCRIPT" 2>&1 | sed -u "s/^/[$k] /" >&2
  rc=${PIPESTATUS[0]}
  set -e
  tr -d '\r' < "$CONSOLE" | grep '^test result: ' | sed "s/^/[$k] /" || true
  tr -d '\r' < "$CONSOLE" | sed -n 's/^=== guest-test: \(.*\) exit \([1-9][0-9]*\)$/\1 (exit \2)/p' \
    | sed "s/^/[$k] FAILED: /" || true
  case $rc in
    0) ;;
    123|124|125|126) echo "[$k] GUEST FAILED: run-guest.sh exit $rc (123 setup, 124 timeout, 125 crash, 126 host error)" ;;
  esac
  [[ $rc == 0 ]] || status=1
  rm -f "$CONSOLE"
done
[[ $status == 0 ]] && log "all test executables passed on: ${KERNELS[*]}"
exit "$status"
