#!/usr/bin/env bash
# scripts/pyverbs-guest.sh — rdma-core's pyverbs tests (Debian bookworm's
# python3-pyverbs 44.0-2) in the rxe guest, twice in one boot: first on real
# rdma-core (Debian's libibverbs, libmlx5, libefa in the guest), then on ours
# (LD_LIBRARY_PATH=/guest/ours: our libibverbs.so.1 and stub libmlx5.so.1 /
# libefa.so.1, and our librdmacm.so.1 when DIR has one, else Debian's stays;
# --rdmacm requires it), compared test by test: every test that passes on
# real rdma-core must pass on ours.
#
# Usage:
#   scripts/pyverbs-guest.sh --ours DIR [options]   DIR holds libibverbs.so.1,
#                                                   libmlx5.so.1, libefa.so.1
#                                                   (and librdmacm.so.1: used
#                                                   when there)
#   scripts/pyverbs-guest.sh --real-only [options]  the baseline only
# Options:
#   --kernel 6.1|6.12|all  guest kernel(s) (default all: 6.1 then 6.12)
#   --module M             run only module M (repeatable; default: the 19
#                          generic modules of guest/PYVERBS.md)
#   --module-timeout S     bound per module and library (default 60)
#   --timeout S            bound for the whole guest (default: from the above)
#   --rdmacm               the rdma_cm comparison: DIR also holds our
#                          librdmacm.so.1, which the ours run loads instead of
#                          Debian's (the check of the mapped libraries covers
#                          it); the modules default to the two that use
#                          pyverbs.cmid (test_rdmacm, test_mlx5_rdmacm); the
#                          runner finds rxe0's netdev with `rdma link`
#                          (pyverbs-run.py --netdev-from-rdma-link), for both
#                          libraries, so test_rdmacm runs instead of skipping
#   --exec                 a fresh python3.11 per module instead of a fork of
#                          one that has imported the suite (~45 s more per
#                          library and kernel; same outcomes)
#   --retry N              run the tests that pass on real rdma-core and fail
#                          (not crash, not hang) on ours once more on ours, if
#                          there are at most N (default 5; 0: never); a pass
#                          then counts, reported as flaky
#   --table all|rest|changed|none  rows printed (default all; rest: those not
#                          ok on both; changed: the outcome differs)
#   --markdown             the table in Markdown
#   --known-gaps FILE      tests that pass on real rdma-core and are known not
#                          to on ours yet (`module.Class.test  reason` per
#                          line): listed with their reason, not counted failed
#                          (capi/pyverbs-known-gaps.txt)
#   --keep DIR             keep each kernel's console log in DIR
#   --prepare              only fetch and assemble the python tree, then exit
#   --self-test            check the runner and the parser on the host, no
#                          guest (~10 s): made-up modules that pass, fail,
#                          crash, hang and fail once; prints a `test result:`
# Prints per kernel a table (test, real outcome, ours outcome), a verdict and
# `[K] test result: ok. P passed; F failed; I ignored; ...` (P: pass on both;
# F: pass on real, not on ours, plus harness problems; I: the rest), which
# scripts/test.sh totals; the guest console goes to stderr. A guest kernel
# crash prints `FAILED: run-guest.sh exit 125` (test.sh's guest_step reruns).
# Exit status 0 when every kernel's verdict is ok, 1 otherwise, 2 on usage.
#
# Python: the guest has none. Debian's python3.11 (+ libpython3.11, which the
# pyverbs modules link, libexpat1, libffi8) and python3-pyverbs are
# `apt-get download`ed and `dpkg -x`ed (never installed) into
# ${UVERBS_PYVERBS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-pyverbs},
# trimmed, byte-compiled, and put at their Debian paths in the guest with
# run-guest.sh --add (tests at /usr/share/doc/rdma-core/tests, gunzipped).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${UVERBS_PYVERBS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-pyverbs}
GUEST_CACHE=${UVERBS_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-guest}

log() { printf '[pyverbs] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }

MODULES_DEFAULT=(test_device test_pd test_mr test_cq test_cq_events test_cqex test_qp test_qpex
  test_atomic test_addr test_fork test_relaxed_ordering test_odp test_parent_domain
  test_tag_matching test_flow test_rss_traffic test_shared_pd test_rdmacm)
RDMACM_MODULES=(test_rdmacm test_mlx5_rdmacm)
RDMACM=0 KERNELS=(6.1 6.12) OURS= GAPS= REAL_ONLY=0 MODULES=() MTIMEOUT=60 TIMEOUT= EXEC=0 TABLE=all MD=0 KEEP= PREPARE=0 SELF_TEST=0 RETRY=5
need() { [[ $1 -ge 2 ]] || usage; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel) need $#; case $2 in all) KERNELS=(6.1 6.12) ;; 6.1|6.12) KERNELS=("$2") ;; *) usage ;; esac; shift 2 ;;
    --ours) need $#; OURS=$2; shift 2 ;;
    --real-only) REAL_ONLY=1; shift ;;
    --rdmacm) RDMACM=1; shift ;;
    --module) need $#; MODULES+=("$2"); shift 2 ;;
    --module-timeout) need $#; MTIMEOUT=$2; shift 2 ;;
    --timeout) need $#; TIMEOUT=$2; shift 2 ;;
    --exec) EXEC=1; shift ;;
    --retry) need $#; RETRY=$2; shift 2 ;;
    --table) need $#; TABLE=$2; shift 2 ;;
    --markdown) MD=1; shift ;;
    --known-gaps) need $#; GAPS=$2; shift 2 ;;
    --keep) need $#; KEEP=$2; shift 2 ;;
    --prepare) PREPARE=1; shift ;;
    --self-test) SELF_TEST=1; shift ;;
    -h|--help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
if [[ ${#MODULES[@]} == 0 ]]; then
  MODULES=("${MODULES_DEFAULT[@]}")
  [[ $RDMACM == 1 ]] && MODULES=("${RDMACM_MODULES[@]}")
fi
[[ $RDMACM == 0 || $EXEC == 0 ]] || die "--rdmacm patches the preloaded suite: not with --exec"
[[ $MTIMEOUT =~ ^[0-9]+$ ]] || die "--module-timeout takes seconds"
[[ $RETRY =~ ^[0-9]+$ ]] || die "--retry takes a number"
if [[ $PREPARE == 0 && $SELF_TEST == 0 ]]; then
  [[ -n $OURS || $REAL_ONLY == 1 ]] || { log "--ours DIR or --real-only is required"; usage; }
  [[ -z $OURS || $REAL_ONLY == 0 ]] || die "--ours and --real-only exclude each other"
fi

# ---------------------------------------------------------------- the python tree
# $CACHE/debs (downloads), $CACHE/extract (dpkg -x), $CACHE/tree/usr (what goes
# into the guest at /usr). Rebuilt when this list or the trimming changes.
PKGS=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libpython3.11 libexpat1 libffi8
  python3-pyverbs=44.0-2)
# Not needed by the suite, or linked against libraries the guest lacks
# (ssl/crypto, sqlite, ncurses, readline, bz2, lzma, uuid, nsl, crypt).
TRIM_STDLIB=(test pydoc_data config-3.11-x86_64-linux-gnu turtledemo turtle.py distutils venv ensurepip
  idlelib tkinter lib2to3 sqlite3 curses dbm xmlrpc wsgiref __phello__)
TRIM_DYNLOAD=('_test*' 'xxlimited*' '_xxtestfuzz*' '_ctypes_test*' '_curses*' 'readline*' '_dbm*' 'nis*'
  'ossaudiodev*' 'audioop*' '_sqlite3*' '_ssl*' '_hashlib*' '_crypt*' '_bz2*' '_lzma*' '_uuid*'
  '_codecs_*' '_multibytecodec*')
TREE=$CACHE/tree
STAMP=$( { printf '%s\n' "${PKGS[@]}" "${TRIM_STDLIB[@]}" "${TRIM_DYNLOAD[@]}"; echo 3; } | sha256sum | cut -c1-16)
HPY=("$TREE/usr/bin/python3.11")   # Debian's interpreter, run on the host (same glibc)
hpy() { LD_LIBRARY_PATH=$TREE/usr/lib/x86_64-linux-gnu "${HPY[@]}" "$@"; }

apt_download() { # DIR PKG...: download, updating the package lists once if apt cannot
  local dir=$1; shift
  mkdir -p "$dir"
  (cd "$dir" && apt-get download -q "$@" 2>&1 | grep -v unsandboxed >&2; exit "${PIPESTATUS[0]}") && return 0
  log "apt-get download failed; apt-get update, then once more"
  if [[ $(id -u) == 0 ]]; then apt-get update -q >&2
  elif sudo -n true 2>/dev/null; then sudo -n apt-get update -q >&2
  else return 1
  fi
  (cd "$dir" && apt-get download -q "$@" 2>&1 | grep -v unsandboxed >&2; exit "${PIPESTATUS[0]}")
}

prepare() {
  if [[ -f $TREE/.done && $(cat "$TREE/.done") == "$STAMP" ]]; then return 0; fi
  local t0 x u d f
  t0=$(date +%s)
  mkdir -p "$CACHE"
  exec 8>"$CACHE/.lock"
  flock 8
  if [[ -f $TREE/.done && $(cat "$TREE/.done") == "$STAMP" ]]; then return 0; fi
  log "fetching ${PKGS[*]} (apt-get download, dpkg -x; nothing installed)"
  rm -rf "$CACHE/debs" "$CACHE/extract" "$TREE"
  apt_download "$CACHE/debs" "${PKGS[@]}" || die "cannot download ${PKGS[*]}"
  x=$CACHE/extract
  for d in "$CACHE"/debs/*.deb; do dpkg-deb -x "$d" "$x"; done
  u=$TREE/usr
  mkdir -p "$u/bin" "$u/lib/x86_64-linux-gnu" "$u/lib/python3/dist-packages" "$u/share/doc/rdma-core"
  cp -a "$x/usr/bin/python3.11" "$u/bin/"
  cp -a "$x/usr/lib/python3.11" "$u/lib/"
  for f in usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0 lib/x86_64-linux-gnu/libexpat.so.1 \
           usr/lib/x86_64-linux-gnu/libffi.so.8; do
    cp -L "$x/$f" "$u/lib/x86_64-linux-gnu/"
  done
  cp -a "$x/usr/lib/python3/dist-packages/pyverbs" "$u/lib/python3/dist-packages/"
  cp -a "$x/usr/share/doc/rdma-core/tests" "$u/share/doc/rdma-core/"
  gunzip -f "$u"/share/doc/rdma-core/tests/*.gz
  (cd "$u/lib/python3.11" && rm -rf "${TRIM_STDLIB[@]}")
  (cd "$u/lib/python3.11/lib-dynload" && for f in "${TRIM_DYNLOAD[@]}"; do rm -f $f; done)
  find "$u" -name __pycache__ -prune -exec rm -rf {} +
  # Byte-compile everything once, here, with the same interpreter: the guest
  # would otherwise compile ~20 s worth under TCG at every boot. unchecked-hash
  # pycs are used as they are (no mtime check through the cpio).
  hpy -m compileall -q -j 0 --invalidation-mode unchecked-hash -s "$TREE" -p / \
    "$u/lib/python3.11" "$u/lib/python3/dist-packages" "$u/share/doc/rdma-core/tests" >/dev/null \
    || die "compileall failed"
  rm -rf "$CACHE/extract"
  echo "$STAMP" > "$TREE/.done"
  exec 8>&-
  log "python tree ready: $(du -sh "$TREE" | cut -f1) in $(( $(date +%s) - t0 )) s"
}

# check_needed KERNEL: every ELF of the tree finds its NEEDED libraries in the
# tree or in the guest's initramfs (libibverbs & co. are there already); so
# should ours (only a warning: the ours run then reports the loader's error).
check_needed() {
  local cpio=$GUEST_CACHE/$1/initramfs.cpio have missing=0 f n
  have=$( { "$GUEST_CACHE/userspace/root/bin/busybox" cpio -t < "$cpio" 2>/dev/null; find "$TREE" -type f; } \
    | sed -n 's|.*/\(l[^/]*\.so[^/]*\)$|\1|p' | sort -u)
  while read -r f; do
    for n in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [[ -e $WORK/ours/$n ]] && continue
      grep -qxF "$n" <<<"$have" && continue
      if [[ $f == "$WORK"/ours/* ]]; then log "warning: ours: $(basename "$f") needs $n, which the guest lacks"
      else log "$f needs $n, which neither the tree nor the guest has"; missing=1
      fi
    done
  done < <(find "$TREE" -type f \( -name '*.so*' -o -name python3.11 \); [[ -d $WORK/ours ]] && find "$WORK/ours" -type f)
  [[ $missing == 0 ]] || die "unresolved libraries in the guest (add their packages to PKGS)"
}

# self_test: the runner and the comparer on the host, no guest: Debian's
# run_tests.py over four made-up modules (ok, FAIL, ERROR, skips, a subtest,
# an expected failure, output inside the verbose lines, class fixtures, a
# class imported into a second module; on "ours" one test fails, one
# segfaults, one hangs), in both modes. Checks the summary and the rows.
self_test() {
  local d=$WORK/self k mode out rc=0
  mkdir -p "$d/tests"
  for k in run_tests.py args_parser.py __init__.py; do cp "$TREE/usr/share/doc/rdma-core/tests/$k" "$d/tests/"; done
  cat > "$d/tests/test_a.py" <<'PY'
import os, sys, unittest
OURS = os.environ.get('SELF_TEST_OURS') == '1'
class A(unittest.TestCase):
    def test_ok(self):
        """A docstring ... with dots"""
        if OURS: self.fail('ours differs')
    def test_flaky(self):
        flag = os.environ['SELF_TEST_DIR'] + '/flaky-' + os.environ['SELF_TEST_MODE']
        if OURS and not os.path.exists(flag):
            open(flag, 'w').close()
            self.fail('first time')
    def test_fail(self): self.assertEqual(1, 2)
    def test_error(self): raise RuntimeError('boom\nsecond line')
    def test_skip(self): raise unittest.SkipTest("can't: \"quoted\"")
    def test_print(self):
        """Prints inside the verbose line"""
        print('output without newline', end='', flush=True)
        sys.stderr.write('libibverbs: Warning: something\n')
    @unittest.expectedFailure
    def test_xfail(self): self.fail('x')
    def test_subtest(self):
        for i in range(3):
            with self.subTest(i=i): self.assertLess(i, 2)
PY
  cat > "$d/tests/test_b.py" <<'PY'
import os, ctypes, unittest
class B(unittest.TestCase):
    def test_1(self): pass
    def test_2_crash(self):
        if os.environ.get('SELF_TEST_OURS') == '1': ctypes.string_at(0)
    def test_3(self): pass
PY
  cat > "$d/tests/test_c.py" <<'PY'
import os, time, unittest
class C(unittest.TestCase):
    def test_1(self): pass
    def test_2_hang(self):
        if os.environ.get('SELF_TEST_OURS') == '1':
            os.fork() or time.sleep(100)
            time.sleep(100)
    def test_3(self): pass
PY
  cat > "$d/tests/test_d.py" <<'PY'
import unittest
from tests.test_b import B
class D1(unittest.TestCase):
    @classmethod
    def setUpClass(cls): raise unittest.SkipTest('class skipped')
    def test_x(self): pass
class D2(unittest.TestCase):
    @classmethod
    def setUpClass(cls): raise ValueError('class broken')
    def test_y(self): pass
PY
  for mode in fork exec; do
    local args=(--nonce self --tests "$d/tests" --timeout 3 --work "$d/work-$mode")
    [[ $mode == exec ]] && args+=(--exec)
    # as the guest script does (the retry picks test_ok and test_flaky)
    ( export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 SELF_TEST_DIR=$d SELF_TEST_MODE=$mode
      c=$d/console-$mode.log
      hpy "$ROOT/scripts/pyverbs-run.py" --lib real "${args[@]}" test_a test_b test_c test_d >> "$c" 2>&1
      export SELF_TEST_OURS=1
      hpy "$ROOT/scripts/pyverbs-run.py" --lib ours "${args[@]}" test_a test_b test_c test_d >> "$c" 2>&1
      again=$(hpy "$ROOT/scripts/pyverbs-compare.py" --nonce self --no-lib-check --print-lost 5 "$c")
      [[ -n $again ]] && hpy "$ROOT/scripts/pyverbs-run.py" --lib ours-retry --no-list "${args[@]}" $again >> "$c" 2>&1
      printf '%s\n' "$again" > "$d/again-$mode"
    )
    out=$(hpy "$ROOT/scripts/pyverbs-compare.py" --nonce self --kernel "self-test $mode" --no-lib-check \
      --width 0 "$d/console-$mode.log" || true)
    for k in 'test result: FAILED\. 5 passed; 8 failed; 6 ignored;' \
             '^!! test_a\.A\.test_ok +ok +FAIL: AssertionError: ours differs \(retry: FAIL: AssertionError: ours differs\)$' \
             '^   test_a\.A\.test_flaky +ok +ok: on retry; first FAIL: AssertionError: first time$' \
             '^   test_a\.A\.test_error +ERROR: RuntimeError: boom second line +ERROR' \
             '^   test_a\.A\.test_print +ok +ok$' \
             "^   test_a\.A\.test_skip +skipped: can't: \"quoted\"" \
             '^   test_a\.A\.test_subtest +FAIL: AssertionError: 2 not less than 2' \
             '^   test_a\.A\.test_xfail +expected failure +expected failure$' \
             '^!! test_b\.B\.test_2_crash +ok +crashed: module died by signal 11 while running it$' \
             '^!! test_b\.B\.test_3#2 +ok +crashed: module died by signal 11$' \
             '^!! test_c\.C\.test_2_hang +ok +timeout: module timed out while running it$' \
             '^   test_d\.D1\.test_x +skipped: setUpClass: class skipped' \
             '^   test_d\.D2\.test_y +ERROR: setUpClass: ValueError: class broken'; do
      grep -qE -- "$k" <<<"$out" || { log "self-test ($mode): no line matches: $k"; rc=1; }
    done
    # retried: the two failures, not the crash nor the hang
    [[ $(cat "$d/again-$mode") == $'tests.test_a.A.test_flaky\ntests.test_a.A.test_ok' ]] \
      || { log "self-test ($mode): retried: $(tr '\n' ' ' < "$d/again-$mode")"; rc=1; }
    [[ $rc == 0 ]] || { printf '%s\n' "$out" >&2; break; }
  done
  if [[ $rc == 0 ]]; then
    echo "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out (pyverbs harness self-test)"
  else
    echo "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out (pyverbs harness self-test)"
  fi
  return "$rc"
}

prepare
[[ $PREPARE == 1 ]] && { log "prepared $TREE ($(du -sh "$TREE" | cut -f1))"; exit 0; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pyverbs-guest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if [[ $SELF_TEST == 1 ]]; then self_test; exit $?; fi

# ---------------------------------------------------------------- ours
ADDS=(--add "$TREE/usr:/usr" --add "$ROOT/scripts/pyverbs-run.py:/guest/pyverbs-run.py"
  --add "$ROOT/scripts/pyverbs-compare.py:/guest/pyverbs-compare.py")
if [[ -n $OURS ]]; then
  [[ -d $OURS ]] || die "--ours $OURS: not a directory"
  mkdir -p "$WORK/ours"
  OURS_LIBS=(libibverbs.so.1 libmlx5.so.1 libefa.so.1)
  [[ $RDMACM == 1 ]] && OURS_LIBS+=(librdmacm.so.1)
  for n in "${OURS_LIBS[@]}"; do
    if [[ ! -e $OURS/$n ]]; then
      hint=
      [[ -e $OURS/${n%.1} ]] && hint=" (there is ${n%.1}: name it $n)"
      die "--ours $OURS has no $n$hint"
    fi
    cp -L "$OURS/$n" "$WORK/ours/$n"
    so=$(readelf -d "$WORK/ours/$n" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [[ $so == "$n" ]] || log "warning: $OURS/$n has SONAME '${so:-none}', not $n"
  done
  # Our librdmacm.so.1 (capi/rdmacm) when DIR has it; else Debian's stays.
  if [[ -e $OURS/librdmacm.so.1 ]]; then
    cp -L "$OURS/librdmacm.so.1" "$WORK/ours/librdmacm.so.1"
    log "ours: librdmacm.so.1 too ($OURS/librdmacm.so.1)"
  else
    rm -f "$WORK/ours/librdmacm.so.1"
  fi
  ADDS+=(--add "$WORK/ours:/guest/ours")
fi

# ---------------------------------------------------------------- the guest script
# Real rdma-core, then ours, each one runner (pyverbs-run.py) over every
# module; the console is also kept in the guest, so that the comparer can
# pick the tests that passed on real and failed on ours (at most $RETRY, and
# not crashes or hangs) for one more run each on ours ("ours-retry"): a pass
# then is reported as flaky. test_resize_cq on 6.12 races with rxe's
# completions (see guest/PYVERBS.md).
NONCE=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
run_args="--nonce $NONCE --tests /usr/share/doc/rdma-core/tests --dev rxe0 --port 1 --timeout $MTIMEOUT"
[[ $EXEC == 1 ]] && run_args+=" --exec"
[[ $RDMACM == 1 ]] && run_args+=" --netdev-from-rdma-link"
M="=== pyverbs:$NONCE:"
{
  echo 'G=${UVERBS_TEST_GID_INDEX:-1}'
  echo 'export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1'
  echo 'C=/tmp/pyverbs-console.log'
  echo "{ python3.11 /guest/pyverbs-run.py --lib real $run_args --gid \$G ${MODULES[*]}; echo \"$M runner-exit real rc=\$?\"; } 2>&1 | tee -a \$C"
  if [[ -n $OURS ]]; then
    echo "{ LD_LIBRARY_PATH=/guest/ours python3.11 /guest/pyverbs-run.py --lib ours $run_args --gid \$G ${MODULES[*]}; echo \"$M runner-exit ours rc=\$?\"; } 2>&1 | tee -a \$C"
    if [[ $RETRY -gt 0 ]]; then
      echo "again=\$(python3.11 /guest/pyverbs-compare.py --nonce $NONCE --print-lost $RETRY \$C)"
      echo "[ -z \"\$again\" ] || LD_LIBRARY_PATH=/guest/ours python3.11 /guest/pyverbs-run.py --lib ours-retry --no-list $run_args --gid \$G \$again"
    fi
  fi
  echo 'exit 0'
} > "$WORK/run.sh"
nlib=$(( REAL_ONLY == 1 ? 1 : 2 ))
# boot + per library: the import (~10 s), the list and every module's bound
[[ -n $TIMEOUT ]] || TIMEOUT=$(( 120 + nlib * (120 + (${#MODULES[@]} + 1) * (MTIMEOUT + 10)) + RETRY * (MTIMEOUT + 10) ))

status=0
for k in "${KERNELS[@]}"; do
  "$ROOT/guest/build-image.sh" --kernel "$k" >&2 || die "guest/build-image.sh --kernel $k failed"
  check_needed "$k"
  console=$WORK/console-$k.log
  t0=$(date +%s)
  set +e
  "$ROOT/guest/run-guest.sh" --kernel "$k" --no-build --mem 1536 --timeout "$TIMEOUT" --log "$console" \
    "${ADDS[@]}" --script "$WORK/run.sh" 2>&1 | sed -u "s/^/[$k] /" >&2
  rc=${PIPESTATUS[0]}
  set -e
  secs=$(( $(date +%s) - t0 ))
  [[ -n $KEEP ]] && { mkdir -p "$KEEP"; cp "$console" "$KEEP/pyverbs-$k.console.log"; }
  case $rc in
    0) ;;
    123|124|125|126) echo "[$k] FAILED: run-guest.sh exit $rc (123 setup, 124 timeout, 125 crash, 126 host error)" ;;
    *) echo "[$k] FAILED: the guest script exited $rc" ;;
  esac
  cmp=(--nonce "$NONCE" --kernel "$k" --guest-status "$rc" --table "$TABLE")
  [[ $REAL_ONLY == 1 ]] && cmp+=(--real-only)
  [[ $MD == 1 ]] && cmp+=(--markdown)
  [[ -n $GAPS ]] && cmp+=(--known-gaps "$GAPS")
  [[ $RDMACM == 1 ]] && cmp+=(--require-rdmacm)
  [[ -f $console ]] || : > "$console"
  hpy "$ROOT/scripts/pyverbs-compare.py" "${cmp[@]}" "$console" || status=1
  [[ $rc == 0 ]] || status=1
  echo "[$k] pyverbs wall time: ${secs} s (boot, $nlib x ${#MODULES[@]} modules, poweroff)"
done
exit "$status"
