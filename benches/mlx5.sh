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
# their ratio (uverbs / C; lower is better). Both work in host memory: the
# UAR is ordinary memory, so the doorbell costs a cached store, not a PCIe
# write; the numbers are the software's own cost. A benchmark: it asserts
# nothing.
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
${CC:-gcc} -O2 -Wall -I "$INC" -o "$OUT/mlx5_baseline" benches/mlx5_baseline.c
cargo build --release --quiet --features test-utils --bin uverbs
UVERBS=$ROOT/target/release/uverbs

for r in $(seq 1 "$ROUNDS"); do
  "$UVERBS" perf micro --mlx5-model -n "$ITERS" | sed "s/^/uverbs $r /"
  "$OUT/mlx5_baseline" "$ITERS" | sed "s/^/c $r /"
done > "$OUT/raw.txt"

python3 - "$OUT/raw.txt" "$ROUNDS" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    who, _, name, ns = line.split()
    rows.setdefault(name, {}).setdefault(who, []).append(float(ns))
print(f"{'operation':<14} {'uverbs ns':>10} {'C ns':>8} {'ratio':>6}   (median of {sys.argv[2]} rounds)")
for name, v in rows.items():
    u, c = statistics.median(v["uverbs"]), statistics.median(v["c"])
    extra = ""
    if name.startswith("write_batch"):
        extra = f"   {1e3 / u:.0f} M msg/s (C {1e3 / c:.0f})"
    print(f"{name:<14} {u:>10.2f} {c:>8.2f} {u / c:>6.2f}{extra}")
PY
