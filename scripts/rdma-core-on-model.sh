#!/usr/bin/env bash
# Debian bookworm's unmodified rdma-core 44.0-2 against uverbs' mlx5 device
# model (issue 26): the checks scripts/test.sh runs. Fails when any fails.
#
#   scripts/rdma-core-on-model.sh [PYVERBS_MODULE...]
#
# a. ibv_devices and ibv_devinfo -v list the model's device, port and GIDs;
#    uverbs devinfo (-v, -l, -i) prints what ibv_devinfo prints, field by field;
# b1. capi/tests/c/*.c print transcripts of the mlx5dv API over rdma-core
#    and over our libibverbs.so.1 + libmlx5.so.1: they must be equal;
# b. preload/tests/ioctl_probe.c sends raw uverbs ioctls and checks the
#    shim's answers against the 6.1 core's (unknown attributes, missing
#    ones, INVOKE_WRITE, plain write() commands); preload/tests/rc_probe.c,
#    built against Debian's headers, runs an RDMA WRITE on an RC QP the
#    model executes, waits for the completion event (poll, epoll,
#    O_NONBLOCK), polls the CQ and compares the bytes;
#    (b1 also runs capi/tests/c/devx_events.c, seed 004:
#    mlx5dv_devx_get_event as its man page describes it, a DevX CQ overrun
#    by a DevX QP, cookie and OMIT_EV_DATA channels, short buffers, EAGAIN,
#    EOVERFLOW, an eventfd, the reads after destroy; its transcripts over
#    Debian's libmlx5 and over ours compared byte for byte);
# b3. capi/tests/c/process.c under the shim, over rdma-core and over ours:
#    signal handlers calling write/read/dup/close while verbs run, EINTR
#    and SA_RESTART on blocking gets, fork, read(fd, NULL, 0) of the event
#    fds, DEALLOC_PD refused while the PD is in use, the PD usable
#    meanwhile (issue 39);
# b4. capi/tests/c/destroy.c under the shim, over rdma-core and over ours:
#    destroys the kernel refuses (the shim's uverbs_model_refuse_destroys)
#    leave MRs, AHs and PDs usable and are retried, and extended-CQ
#    sessions and ibv_poll_cq return no completion of a QP destroyed or
#    reset since, as libmlx5's __mlx5_cq_clean makes sure (issue 39);
# c. rdma-core's pyverbs tests (python3-pyverbs' tests/, gunzipped into a
#    temporary copy), one module at a time, on mlx5_0 port 1 with the
#    model's RoCE v2 GID (index 1). Every skip is listed with its reason.
# Every run also fails when the model reports a protocol violation
# (scripts/on-model.sh exits 3). The last line is a summary in cargo's
# shape (each check of a and b one test, pyverbs' tests counted as
# unittest ran them, skips as ignored), which scripts/test.sh totals.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ON=$ROOT/scripts/on-model.sh
MODULES=("$@")
[[ ${#MODULES[@]} -gt 0 ]] || MODULES=(test_device test_pd test_cq test_mr test_qp test_qpex test_cqex test_addr test_mlx5_uar
  test_cq_events test_atomic test_mlx5_cq test_parent_domain test_shared_pd test_mlx5_devx
  test_mlx5_raw_wqe test_mlx5_huge_page test_relaxed_ordering test_fork)
GID=1 # the model's RoCE v2 GID (::ffff:192.0.2.1)
# One process at a time, each alone with the lone model's identity (node
# GUID 0c42:a103:0012:3456, GID ::ffff:192.0.2.1), so what two processes
# print compares (scripts/fabric-matrix.sh runs processes together).
export UVERBS_FABRIC=off UVERBS_MODEL_IDENTITY=0x123456
# Debian's pyverbs 44.0-2 is built for CPython 3.11 (bookworm's): the
# system's interpreter, whatever python3 comes first on PATH.
PYTHON=python3
[[ -x /usr/bin/python3.11 ]] && PYTHON=/usr/bin/python3.11

WORK=$(mktemp -d "${TMPDIR:-/tmp}/uverbs-rdma-core.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
failed=()
passed=0 failures=0 skipped=0
step() { echo "== $*"; }
ok() { passed=$((passed + 1)); }
fail() { echo "FAILED: $*"; failed+=("$1"); failures=$((failures + 1)); }

eval "$("$ON" --print-env)"

step "a. ibv_devices, ibv_devinfo -v"
if "$ON" -- ibv_devices >"$WORK/devices" 2>&1 && grep -q 'mlx5_0.*0c42a10300123456' "$WORK/devices"; then
  cat "$WORK/devices"; ok
else
  cat "$WORK/devices"; fail "ibv_devices"
fi
if "$ON" -- ibv_devinfo -v >"$WORK/devinfo" 2>&1 \
  && grep -q 'hca_id:.*mlx5_0' "$WORK/devinfo" \
  && grep -q 'state:.*PORT_ACTIVE' "$WORK/devinfo" \
  && grep -q 'link_layer:.*Ethernet' "$WORK/devinfo" \
  && grep -q 'GID\[  1\]:.*::ffff:192.0.2.1, RoCE v2' "$WORK/devinfo"; then
  grep -E 'hca_id|fw_ver|vendor_part_id|state:|link_layer|GID' "$WORK/devinfo"; ok
else
  cat "$WORK/devinfo"; fail "ibv_devinfo"
fi
# uverbs' own CLI on the same model (its plain write() commands decoded by
# the shim as ib_uverbs_write does) must print what rdma-core's ibv_devinfo
# prints, field by field (preload/src/bin/devinfo-compare.rs, the comparer
# of tests/device/devinfo.rs). DEVINFO_ALLOWED_MISSING names the keys
# ibv_devinfo may print that uverbs does not, each with its reason; it is
# empty: every difference is a bug.
DEVINFO_ALLOWED_MISSING=()
if (cd "$ROOT" && cargo build -q --bin uverbs && cargo build -q -p uverbs-model-preload --bin devinfo-compare); then
  BIN=$(dirname "$UVERBS_PRELOAD")
  for args in "-v" "" "-l" "-v -d mlx5_0 -i 1"; do
    # shellcheck disable=SC2086 # args is a word list
    if "$ON" -- ibv_devinfo $args >"$WORK/ibv.out" 2>"$WORK/ibv.err" \
      && "$ON" -- "$BIN/uverbs" devinfo $args >"$WORK/uverbs.out" 2>"$WORK/uverbs.err" \
      && "$BIN/devinfo-compare" "$WORK/ibv.out" "$WORK/uverbs.out" ${DEVINFO_ALLOWED_MISSING[@]+"${DEVINFO_ALLOWED_MISSING[@]}"}; then
      echo "uverbs devinfo $args = ibv_devinfo $args ($(wc -l <"$WORK/ibv.out") lines)"; ok
    else
      cat "$WORK/ibv.err" "$WORK/uverbs.err"; fail "uverbs devinfo $args"
    fi
  done
else
  fail "building uverbs and devinfo-compare"
fi

step "b. ioctl probe (the shim's decoder) and RC probe (RDMA WRITE executed by the model)"
# shellcheck disable=SC2086 # CFLAGS and LDFLAGS are word lists
if cc $CFLAGS -Wall -Werror -o "$WORK/ioctl_probe" "$ROOT/preload/tests/ioctl_probe.c" $LDFLAGS \
  && "$ON" -- "$WORK/ioctl_probe"; then ok; else fail "ioctl_probe"; fi
# shellcheck disable=SC2086 # CFLAGS and LDFLAGS are word lists
if cc $CFLAGS -Wall -Werror -o "$WORK/rc_probe" "$ROOT/preload/tests/rc_probe.c" $LDFLAGS -libverbs \
  && "$ON" -- "$WORK/rc_probe"; then ok; else fail "rc_probe"; fi

step "b1. C transcripts over rdma-core and over ours: the same output"
# capi/tests/c/*.c programs written against Debian's mlx5dv.h print what
# each call answers; run over Debian's libibverbs + libmlx5 (the oracle)
# and over ours (scripts/on-model.sh --ours: our libibverbs.so.1 +
# libmlx5.so.1 driving uverbs' mlx5 provider), the transcripts must be
# equal. UVERBS_CABI_OURS names the directory of our libraries
# (scripts/test.sh's); unset, on-model.sh assembles one.
for prog in mlx5dv devx_events; do
  # shellcheck disable=SC2086 # CFLAGS and LDFLAGS are word lists
  if ! cc $CFLAGS -Wall -Werror -o "$WORK/$prog" "$ROOT/capi/tests/c/$prog.c" $LDFLAGS -libverbs -lmlx5 -ldl; then
    fail "$prog (build)"; continue
  fi
  if "$ON" -- "$WORK/$prog" >"$WORK/$prog.rdma-core" 2>"$WORK/$prog.rdma-core.err" \
    && "$ON" --ours ${UVERBS_CABI_OURS:+"$UVERBS_CABI_OURS"} -- "$WORK/$prog" >"$WORK/$prog.ours" 2>"$WORK/$prog.ours.err" \
    && diff -u "$WORK/$prog.rdma-core" "$WORK/$prog.ours"; then
    echo "$prog: the same $(wc -l <"$WORK/$prog.ours") lines over rdma-core and over ours"; ok
  else
    cat "$WORK/$prog.rdma-core.err" "$WORK/$prog.ours.err" 2>/dev/null | tail -n 20
    fail "$prog (rdma-core and ours differ, or one failed)"
  fi
done

step "b2. two stacks in one process: uverbs and libmlx5 QPs trade RC and UD traffic, WQEs compared"
# preload/tests/two_stacks.c: a uverbs Context on the shim's model (its
# test-only C API, preload/src/two_stacks.rs) next to libibverbs + libmlx5.
# shellcheck disable=SC2086 # CFLAGS and LDFLAGS are word lists
if cc $CFLAGS -Wall -Werror -o "$WORK/two_stacks" "$ROOT/preload/tests/two_stacks.c" $LDFLAGS -libverbs -lmlx5 \
  && "$ON" -- "$WORK/two_stacks"; then ok; else fail "two_stacks"; fi

step "b3. a process around the verbs under the shim: signal handlers, EINTR, fork, read(fd, NULL, 0), a PD in use"
# capi/tests/c/process.c (issue 39, items 2 and 5-9; the rxe guest runs it
# on the kernel itself, tests/device/cabi.rs): a SIGALRM handler calling
# write, dup, close and read of a channel while verbs run (the shim's calls
# are async-signal-safe), read(fd, NULL, 0) of the event fds, -1/EINTR from
# blocking gets and SA_RESTART, children forked after the parent used the
# device doing RDMA of their own, DEALLOC_PD refused while a QP, SRQ, MR or
# AH uses the PD, which stays usable and busy until they are gone. Over Debian's rdma-core and over ours every check passes
# (a hang is killed and fails) and both print the same PASS lines.
# shellcheck disable=SC2086 # CFLAGS and LDFLAGS are word lists
if cc $CFLAGS -Wall -Werror -o "$WORK/process" "$ROOT/capi/tests/c/process.c" $LDFLAGS -libverbs -lpthread; then
  for lib in rdma-core ours; do
    over=()
    [[ $lib == ours ]] && over=(--ours ${UVERBS_CABI_OURS:+"$UVERBS_CABI_OURS"})
    if timeout 300 "$ON" "${over[@]}" -- "$WORK/process" >"$WORK/process.$lib" 2>"$WORK/process.$lib.err"; then
      echo "process over $lib: $(grep -c '^PASS ' "$WORK/process.$lib") checks passed"; ok
    else
      cat "$WORK/process.$lib" "$WORK/process.$lib.err" | tail -n 30
      fail "process over $lib (a check failed, or it hung)"
    fi
  done
  if diff -u <(grep '^PASS ' "$WORK/process.rdma-core") <(grep '^PASS ' "$WORK/process.ours"); then
    ok
  else
    fail "process: rdma-core and ours pass different checks"
  fi
else
  fail "process (build)"
fi

step "b4. refused destroys and a destroyed or reset QP's completions under the shim"
# capi/tests/c/destroy.c (issue 39, items 1 and 3; the rxe guest runs it
# on the kernel itself, tests/device/cabi.rs): over Debian's rdma-core and
# over ours every check passes and both print the same PASS lines (a line
# says what the library did where providers differ).
# shellcheck disable=SC2086 # CFLAGS and LDFLAGS are word lists
if cc $CFLAGS -Wall -Werror -o "$WORK/destroy" "$ROOT/capi/tests/c/destroy.c" $LDFLAGS -libverbs -ldl; then
  for lib in rdma-core ours; do
    over=()
    [[ $lib == ours ]] && over=(--ours ${UVERBS_CABI_OURS:+"$UVERBS_CABI_OURS"})
    if timeout 300 "$ON" "${over[@]}" -- "$WORK/destroy" >"$WORK/destroy.$lib" 2>"$WORK/destroy.$lib.err"; then
      echo "destroy over $lib: $(grep -c '^PASS ' "$WORK/destroy.$lib") checks passed"; ok
    else
      cat "$WORK/destroy.$lib" "$WORK/destroy.$lib.err" | tail -n 30
      fail "destroy over $lib (a check failed, or it hung)"
    fi
  done
  if diff -u <(grep '^PASS ' "$WORK/destroy.rdma-core") <(grep '^PASS ' "$WORK/destroy.ours"); then
    ok
  else
    fail "destroy: rdma-core and ours pass different checks"
  fi
else
  fail "destroy (build)"
fi

step "c. pyverbs: ${MODULES[*]}"
cp -r "$RDMA_CORE_TESTS" "$WORK/tests"
gunzip -f "$WORK"/tests/*.gz
for m in "${MODULES[@]}"; do
  log=$WORK/$m.log
  status=0
  (cd "$WORK/tests" && "$ON" -- "$PYTHON" run_tests.py --dev mlx5_0 --port 1 --gid "$GID" -v -k "tests.$m.") >"$log" 2>&1 || status=$?
  summary=$(grep -E '^(Ran |OK|FAILED)' "$log" | tr '\n' ' ')
  echo "-- $m: $summary(exit $status)"
  grep -E " \.\.\. skipped " "$log" | sed 's/^/   skip: /' || true
  ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$log" | tail -n 1)
  skip=$({ grep -oE 'skipped=[0-9]+' "$log" || true; } | tail -n 1 | cut -d= -f2)
  bad=$(($({ grep -oE '(failures|errors)=[0-9]+' "$log" || true; } | cut -d= -f2 | paste -sd+ -) + 0))
  ran=${ran:-0} skip=${skip:-0} bad=${bad:-0}
  passed=$((passed + ran - skip - bad)) skipped=$((skipped + skip)) failures=$((failures + bad))
  if [[ $status -ne 0 ]] || ! grep -q '^Ran [1-9]' "$log"; then
    grep -E " \.\.\. (FAIL|ERROR)$|^(FAIL|ERROR): |Error: |violation|shim:" "$log" | sed 's/^/   /' || true
    failed+=("pyverbs $m")
    echo "FAILED: pyverbs $m"
    [[ $bad -gt 0 ]] || failures=$((failures + 1))
  fi
done

verdict=ok
[[ ${#failed[@]} -eq 0 ]] || verdict=FAILED
echo "test result: $verdict. $passed passed; $failures failed; $skipped ignored; 0 measured; 0 filtered out (rdma-core on the model)"

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "rdma-core on the model: ${#failed[@]} failed: ${failed[*]}"
  exit 1
fi
echo "rdma-core on the model: all passed"
