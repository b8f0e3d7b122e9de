#!/usr/bin/env bash
# Runs a program against uverbs' mlx5 device model with Debian bookworm's
# unmodified rdma-core 44.0-2 userspace (libibverbs, libmlx5, ibverbs-utils,
# pyverbs and rdma-core's tests), through the LD_PRELOAD shim of preload/.
#
#   scripts/on-model.sh [--print-env] [--ours [DIR]] [-- CMD ARGS...]
#
# --ours runs the program over this project's C libraries instead of
# Debian's: DIR (default target/cabi-ours, assembled here with `cargo build
# -p uverbs-cabi -p uverbs-cabi-mlx5`) holds libibverbs.so.1, libmlx5.so.1
# and the stub libefa.so.1, and comes first on LD_LIBRARY_PATH, so the
# program's libibverbs and libmlx5 are ours and drive uverbs' own mlx5
# provider on the model.
#
# The packages are fetched once with `apt-get download` and unpacked with
# `dpkg -x` (nothing is installed) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-rdma-core-44. The shim is built with
# `cargo build -p uverbs-model-preload` (CARGO_TARGET_DIR honoured).
#
# --print-env prints `export` lines a shell can eval: PATH (ibv_devinfo and
# friends), LD_LIBRARY_PATH, RDMAV_DRIVERS, PYTHONPATH, LD_PRELOAD-free
# CFLAGS (-I the Debian headers) and LDFLAGS (-L, -Wl,-rpath-link), and
# UVERBS_PRELOAD (the shim's path), so that
#   eval "$(scripts/on-model.sh --print-env)"; cc $CFLAGS prog.c $LDFLAGS -libverbs -lmlx5
# builds a program `scripts/on-model.sh -- ./prog` runs.
#
# Every process gets an HCA of its own (node GUID, MAC, GIDs ::ffff:10.x.y.z
# from its pid; UVERBS_MODEL_IDENTITY=N picks another), and the HCAs meet on
# the model's virtual fabric, $UVERBS_FABRIC (default
# $XDG_RUNTIME_DIR/uverbs-fabric, else /tmp/uverbs-fabric-$UID; "off": the
# process is alone): run a server in one terminal and its client in another,
#   scripts/on-model.sh -- ibv_rc_pingpong -g 1
#   scripts/on-model.sh --ours -- ibv_rc_pingpong -g 1 localhost
# (preload/README.md, "The fabric"; scripts/fabric-matrix.sh runs the matrix).
#
# Exit status: the program's; 3 when it succeeded but the model reported
# protocol violations (printed on stderr); 2 on a setup failure.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-rdma-core-44
DEB=$CACHE/root
VERSION=44.0-2
PKGS=(libibverbs1 ibverbs-providers ibverbs-utils libibverbs-dev python3-pyverbs librdmacm1)
# python3-scapy (pure Python, bookworm's 2.5.0): test_mlx5_devx skips without it.
OTHER=(libnl-3-200 libnl-route-3-200 python3-scapy)
# .done records what was fetched; a changed list fetches again.
STAMP="${PKGS[*]} $VERSION ${OTHER[*]}"

log() { echo "on-model: $*" >&2; }
die() { log "$*"; exit 2; }

fetch() {
  [[ -f $CACHE/.done && $(<"$CACHE/.done") == "$STAMP" ]] && return 0
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/uverbs-rdma-core.XXXXXX")
  local pinned=()
  for p in "${PKGS[@]}"; do pinned+=("$p=$VERSION"); done
  log "fetching ${PKGS[*]} ${OTHER[*]} (rdma-core $VERSION) into $CACHE"
  if ! (cd "$work" && apt-get download "${pinned[@]}" "${OTHER[@]}" >&2 2>/dev/null); then
    log "apt-get download failed; running apt-get update once"
    apt-get update -qq >&2 || die "apt-get update failed"
    (cd "$work" && apt-get download "${pinned[@]}" "${OTHER[@]}" >&2) || die "apt-get download failed"
  fi
  mkdir -p "$work/root"
  for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
  mkdir -p "$CACHE"
  rm -rf "$DEB"
  mv "$work/root" "$DEB"
  mkdir -p "$CACHE/debs" && mv "$work"/*.deb "$CACHE/debs/"
  rm -rf "$work"
  echo "$STAMP" >"$CACHE/.done"
}

fetch

LIB=$DEB/usr/lib/x86_64-linux-gnu
env_lines() {
  local so=$1
  cat <<ENV
export PATH=$DEB/usr/bin\${PATH:+:\$PATH}
export LD_LIBRARY_PATH=$LIB:$DEB/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export RDMAV_DRIVERS=$LIB/libibverbs/libmlx5
export PYTHONPATH=$DEB/usr/lib/python3/dist-packages\${PYTHONPATH:+:\$PYTHONPATH}
export UVERBS_PRELOAD=$so
export RDMA_CORE_TESTS=$DEB/usr/share/doc/rdma-core/tests
export CFLAGS="-I$DEB/usr/include"
export LDFLAGS="-L$LIB -Wl,-rpath-link,$LIB:$DEB/lib/x86_64-linux-gnu"
ENV
}

build() {
  local target=${CARGO_TARGET_DIR:-$ROOT/target}
  (cd "$ROOT" && cargo build -q -p uverbs-model-preload >&2) || die "building the preload shim failed"
  SO=$target/debug/libuverbs_model_preload.so
  [[ -f $SO ]] || die "no $SO after the build"
}

# ours DIR: assembles the project's C libraries in DIR.
ours() {
  local dir=$1 target=${CARGO_TARGET_DIR:-$ROOT/target}
  (cd "$ROOT" && cargo build -q -p uverbs-cabi -p uverbs-cabi-mlx5 >&2) || die "building the C libraries failed"
  mkdir -p "$dir"
  cp "$target/debug/libibverbs.so" "$dir/libibverbs.so.1"
  cp "$target/debug/libmlx5.so" "$dir/libmlx5.so.1"
  [[ -f $dir/libefa.so.1 ]] || "$ROOT/capi/stubs/build.sh" "$dir" >/dev/null || die "building the stub libefa failed"
}

OURS=
case ${1:-} in
  --print-env)
    build
    env_lines "$SO"
    exit 0
    ;;
  --ours)
    shift
    if [[ ${1:-} != -- && -n ${1:-} ]]; then
      OURS=$(mkdir -p "$1" && cd "$1" && pwd); shift
      [[ -f $OURS/libibverbs.so.1 && -f $OURS/libmlx5.so.1 ]] || ours "$OURS"
    else
      OURS=${CARGO_TARGET_DIR:-$ROOT/target}/cabi-ours
      ours "$OURS"
    fi
    [[ ${1:-} == -- ]] || die "usage: scripts/on-model.sh --ours [DIR] -- CMD ARGS..."
    shift
    ;;
  --)
    shift
    ;;
  *)
    die "usage: scripts/on-model.sh [--print-env] [--ours [DIR]] [-- CMD ARGS...]"
    ;;
esac
[[ $# -gt 0 ]] || die "no command given"
build
eval "$(env_lines "$SO")"
[[ -z $OURS ]] || export LD_LIBRARY_PATH=$OURS:$LD_LIBRARY_PATH
REPORT=$(mktemp "${TMPDIR:-/tmp}/uverbs-model-report.XXXXXX")
trap 'rm -f "$REPORT"' EXIT
status=0
UVERBS_MODEL_REPORT=$REPORT LD_PRELOAD=$SO${LD_PRELOAD:+:$LD_PRELOAD} "$@" || status=$?
if [[ -s $REPORT ]]; then
  log "the model reported:"
  cat "$REPORT" >&2
  [[ $status -eq 0 ]] && status=3
fi
exit "$status"
