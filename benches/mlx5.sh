#!/usr/bin/env bash
# benches/mlx5.sh — the mlx5 data path's cost per call, uverbs against a C
# baseline written with rdma-core's mlx5dv.h helpers, in one run.
#
# Usage: benches/mlx5.sh [-n ITERS] [--rounds R]
#
# Builds `uverbs` in release with the device model (`--features test-utils`)
# and benches/mlx5_baseline.c against Debian's libibverbs-dev headers
# (fetched with apt-get download + dpkg -x into
# ${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-headers-ibverbs; nothing is
# installed), then runs `uverbs perf micro --mlx5-model` and the baseline
# alternately, R rounds, and prints the median ns per operation of each and
# the median of the per-round ratios (uverbs / C; lower is better; a ratio
# is taken within one round, so drift of the machine's speed between rounds
# cancels out), then the best round of each (this shared machine sometimes
# runs a whole phase of a process slower; the best round is the code's own
# cost). The C program has three baselines:
#   C min      one fixed operation written straight into the queue with the
#              mlx5dv.h helpers, no checks, no bookkeeping beyond the WQE
#              ids and the queue-full check, inlined into the timing loop
#              with the queue's geometry, QP number and arrays' addresses
#              as compile-time constants (the floor of any code; no library
#              serving QPs made at run time can fold those);
#   C call     C min's work as a library does it: the same helpers and
#              nothing more, but the queue's state set at run time and
#              reached through a pointer, and each post or poll one call
#              (noipa), as uverbs' measured calls are; its posts are
#              written two ways (the state read into locals, or through
#              the pointer where used) and the faster of the two counts;
#   rdma-core  the same WQEs and CQEs reached the way rdma-core's
#              providers/mlx5 does from the generic verbs: a list of
#              ibv_send_wr-shaped requests checked one by one, a switch on
#              the opcode, the SGE loop, the QP found by user index when
#              polling, and the queue's spinlock per call (rdma-core's
#              default; uverbs needs none).
# and two columns of the C ABI:
#   libmlx5    Debian's unmodified libibverbs + libmlx5 (rdma-core 44.0-2)
#              on the same device model, in one process through the
#              preload (scripts/on-model.sh, UVERBS_MODEL_HCA=manual):
#              ibv_post_send for the post rows, the ibv_wr_* builders
#              (ibv_wr_start / ibv_wr_rdma_write / ibv_wr_set_sge /
#              ibv_wr_complete) for the send-batch rows, ibv_poll_cq per
#              requester CQE (benches/mlx5_libmlx5.c). Each kind of work
#              first runs once through the model, checked; the timed
#              chunks then complete as the C baseline's do;
#   C ABI      the same binary over this project's libibverbs.so.1 +
#              libmlx5.so.1 (release builds of capi/ and capi/mlx5/, first
#              on LD_LIBRARY_PATH: scripts/on-model.sh --ours), so uverbs'
#              own mlx5 provider does the work behind rdma-core's C API;
#              its ratio is C ABI / libmlx5 (the target: <= 0.8 on every
#              row), in a column of its own after libmlx5's.
# uverbs rows: `write_batchN` and `inline_send` post through
# `QueuePair::post_send` (a slice of `SendWr`), `wr_write_batchN` and
# `wr_inline_send` through a send batch (`start_send`, `push`, `complete`:
# the `ibv_wr_*` shape), `wrx_write_batchN` and `wrx_inline_send` through a
# typed session (`start_wr::<Rc, Mlx5>`, the `ibv_wr_*` builders, checks
# once per session); each wr_/wrx_ row is compared with the C rows of the
# same work and with libmlx5's ibv_wr_* rows. `poll_cqe` polls requester CQEs, `poll_recv_cqe` receives
# (RESP_SEND CQEs of the QP's own receive queue), `poll_srq_cqe` receives
# through an SRQ, 16 per call; the `cqex_` rows take the same CQEs with
# extended polling sessions (`start_poll`, `next`: `ibv_start_poll`,
# `ibv_next_poll`), up to 16 per session, each completion's wr_id and
# status read (no C column).
# Shared posting (issue 42 item 4; src/bin/uverbs/perf/micro_shared.rs):
# `shared_write_batchN` is `write_batchN`'s work through
# `SharedQueuePair::post_send` from one thread (the lock uncontended),
# `mut_write_batchN` the `&mut` post timed in alternate chunks with it;
# `contended4_write_batch1` is four threads posting one RDMA write each
# call to one `SharedQueuePair`, in rounds (ns per write over the round's
# wall time), against libmlx5's `lib_contended4_write_batch1` (four
# pthreads, `ibv_post_send` on one QP: its send queue spinlock). The
# summary after the tables gives shared / `&mut` and ours / libmlx5 per
# round (targets: <= 1.2 and <= 1.0).
# Both work in host memory: the UAR is ordinary memory, so the doorbell
# costs a cached store, not a PCIe write; the numbers are the software's
# own cost. A benchmark: it asserts nothing.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ITERS=2000000 ROUNDS=5
while [[ $# -gt 0 ]]; do
  case $1 in
    -n) ITERS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

INC=${UVERBS_MLX5DV_INCLUDE:-}
if [[ -z $INC ]]; then
  if [[ -f /usr/include/infiniband/mlx5dv.h ]]; then
    INC=/usr/include
  else
    CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-headers-ibverbs
    if [[ ! -f $CACHE/usr/include/infiniband/mlx5dv.h ]]; then
      mkdir -p "$CACHE/debs"
      (cd "$CACHE/debs" && { apt-get download libibverbs-dev 2>/dev/null \
        || { apt-get update -qq && apt-get download libibverbs-dev; }; })
      dpkg -x "$CACHE"/debs/libibverbs-dev_*.deb "$CACHE"
    fi
    INC=$CACHE/usr/include
  fi
fi
OUT=$ROOT/target/bench-mlx5
mkdir -p "$OUT"
${CC:-gcc} -O2 -Wall -I "$INC" -o "$OUT/mlx5_baseline" benches/mlx5_baseline.c -lpthread
# The libmlx5 column: Debian's rdma-core on the model (fetched, and the
# preload built, by scripts/on-model.sh on first use).
ENV=$(scripts/on-model.sh --print-env)
(eval "$ENV"
 # shellcheck disable=SC2086 # CFLAGS and LDFLAGS are word lists
 ${CC:-gcc} -O2 -Wall $CFLAGS -o "$OUT/mlx5_libmlx5" benches/mlx5_libmlx5.c $LDFLAGS -libverbs -lmlx5 -ldl -lpthread)
cargo build --release --quiet --features test-utils --bin uverbs
UVERBS=$ROOT/target/release/uverbs
# The C ABI column: our libraries, release builds, as programs load them.
cargo build --release --quiet -p uverbs-cabi -p uverbs-cabi-mlx5
CABI=$OUT/cabi
mkdir -p "$CABI"
cp target/release/libibverbs.so "$CABI/libibverbs.so.1"
cp target/release/libmlx5.so "$CABI/libmlx5.so.1"
capi/stubs/build.sh "$CABI" >/dev/null

for r in $(seq 1 "$ROUNDS"); do
  "$UVERBS" perf micro --mlx5-model -n "$ITERS" | sed "s/^/uverbs $r /"
  "$OUT/mlx5_baseline" "$ITERS" | sed "s/^/c $r /"
  UVERBS_MODEL_HCA=manual scripts/on-model.sh -- "$OUT/mlx5_libmlx5" "$ITERS" | sed "s/^/c $r /"
  UVERBS_MODEL_HCA=manual scripts/on-model.sh --ours "$CABI" -- "$OUT/mlx5_libmlx5" "$ITERS" \
    | sed "s/^lib_/cabi_/; s/^/c $r /"
done > "$OUT/raw.txt"

python3 - "$OUT/raw.txt" "$ROUNDS" <<'PY'
import sys, statistics
runs = {}  # (who, round) -> {name: ns}
for line in open(sys.argv[1]):
    who, r, name, ns = line.split()
    for prefix, base in (("rc_", "rdma-core"), ("call_", "call"), ("callp_", "call"),
                         ("lib_", "libmlx5"), ("cabi_", "cabi")):
        if name.startswith(prefix):
            who, name = base, name[len(prefix):]
    row = runs.setdefault((who, r), {})
    # C call's posts are written two ways (call_, callp_): the faster counts.
    row[name] = min(row.get(name, float("inf")), float(ns))
rounds = sorted({r for _, r in runs}, key=int)
names = list(runs[("uverbs", rounds[0])])
bases = (("c", 9), ("call", 10), ("rdma-core", 13), ("libmlx5", 11))
med = statistics.median
def col(who, name):
    # A send-batch row (wr_*) or typed-session row (wrx_*) does the work of
    # the C row of the same name; libmlx5 has both (ibv_post_send, and its
    # own ibv_wr_* builders, which the typed rows compare with too); an
    # extended-CQ poll row (cqex_*) the work of the plain poll row.
    if who in ("libmlx5", "cabi"):
        for p in ("wrx_", "wrc_"):
            if name.startswith(p):
                name = "wr_" + name.removeprefix(p)
    elif who != "uverbs":
        name = (name.removeprefix("wrx_").removeprefix("wrc_").removeprefix("wr_")
                .removeprefix("cqex_"))
    if any(name not in runs[(who, r)] for r in rounds):
        return None
    return [runs[(who, r)][name] for r in rounds]
head = (f"{'operation':<18} {'uverbs ns':>10} {'C min ns':>9} {'ratio':>6} {'C call ns':>10} "
        f"{'ratio':>6} {'rdma-core ns':>13} {'ratio':>6} {'libmlx5 ns':>11} {'ratio':>6} "
        f"{'C ABI ns':>9} {'/lib':>5}")
print(f"median of {sys.argv[2]} rounds; ratio = uverbs / C, the median of the per-round ratios;")
print("C ABI: libmlx5's program over our libibverbs.so.1 + libmlx5.so.1, /lib its ratio to libmlx5")
print(head)
def cabi_cells(name, best):
    ours, lib = col("cabi", name), col("libmlx5", name)
    if ours is None or lib is None:
        return f" {'-':>9} {'-':>5}"
    if best:
        return f" {min(ours):>9.2f} {min(ours) / min(lib):>5.2f}"
    return f" {med(ours):>9.2f} {med([o / l for o, l in zip(ours, lib)]):>5.2f}"
for name in names:
    us = col("uverbs", name)
    cells = ""
    for base, w in bases:
        cs = col(base, name)
        if cs is None:
            cells += f" {'-':>{w}} {'-':>6}"
            continue
        cells += f" {med(cs):>{w}.2f} {med([u / c for u, c in zip(us, cs)]):>6.2f}"
    extra = f"   {1e3 / med(us):.0f} M msg/s" if "write_batch" in name else ""
    print(f"{name:<18} {med(us):>10.2f}{cells}{cabi_cells(name, False)}{extra}")
# The fastest round of each: a process of this shared machine sometimes runs
# a whole phase at a lower speed; the best round is the code's own cost.
print()
print("best round of each; ratio = best uverbs / best C")
print(head)
for name in names:
    u = min(col("uverbs", name))
    cells = ""
    for base, w in bases:
        cs = col(base, name)
        if cs is None:
            cells += f" {'-':>{w}} {'-':>6}"
            continue
        c = min(cs)
        cells += f" {c:>{w}.2f} {u / c:>6.2f}"
    print(f"{name:<18} {u:>10.2f}{cells}{cabi_cells(name, True)}")
# Shared posting: the uncontended shared post against the `&mut` post of
# the same run, and four posting threads against libmlx5's four.
print()
print("shared posting; ratio = median of the per-round ratios (best rounds in brackets)")
for n in (1, 8, 64):
    sh, mu = col("uverbs", f"shared_write_batch{n}"), col("uverbs", f"mut_write_batch{n}")
    if sh and mu:
        r = med([a / b for a, b in zip(sh, mu)])
        print(f"shared_write_batch{n:<3} {med(sh):>7.2f} ns   &mut {med(mu):>7.2f} ns   "
              f"shared/&mut {r:.2f} ({min(sh) / min(mu):.2f})   target <= 1.2")
us, lib = col("uverbs", "contended4_write_batch1"), col("libmlx5", "contended4_write_batch1")
if us and lib:
    r = med([a / b for a, b in zip(us, lib)])
    print(f"contended4_write_batch1 {med(us):>7.2f} ns ({1e3 / med(us):.1f} M/s)   libmlx5 "
          f"{med(lib):>7.2f} ns ({1e3 / med(lib):.1f} M/s)   ours/libmlx5 time {r:.2f} "
          f"({min(us) / min(lib):.2f})   target <= 1.0")
PY
