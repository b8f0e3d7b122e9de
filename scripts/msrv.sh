#!/usr/bin/env bash
# scripts/msrv.sh — checks that the workspace builds with the oldest Rust it
# declares (`rust-version` in Cargo.toml), using Debian's rustc-web of that
# version (bookworm ships 1.85 in main), fetched with `apt-get download` and
# unpacked with `dpkg -x` into ${UVERBS_MSRV_CACHE:-~/.cache/uverbs-msrv};
# nothing is installed. Runs the current cargo with that rustc:
#   cargo check --workspace --lib --bins --features uverbs/tokio,uverbs/stream
# (tests, benches and examples use dev-dependencies that may need newer Rust;
# the library and the CLI are what users build).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${UVERBS_MSRV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-msrv}
log() { printf 'msrv.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

MSRV=$(sed -n 's/^rust-version = "\([0-9.]*\)"$/\1/p' "$ROOT/Cargo.toml" | head -n1)
[[ -n $MSRV ]] || die "no rust-version in Cargo.toml"

# The rustc-web version whose upstream version is the MSRV (x.y.*).
version() { apt-cache madison rustc-web 2>/dev/null | awk -v m="$MSRV" '$3 ~ "^" m "\\." { print $3; exit }'; }
VER=$(version)
if [[ -z $VER ]]; then
  log "apt knows no rustc-web $MSRV; running apt-get update once"
  apt-get update -qq || die "apt-get update failed"
  VER=$(version)
fi
[[ -n $VER ]] || die "no rustc-web $MSRV.* in apt (Debian bookworm has 1.85)"
STD=libstd-rust-web-$MSRV
depends() { apt-cache show "$1=$2" 2>/dev/null | sed -n 's/^Depends: //p' | head -n1 | tr ',' '\n'; }
LLVM=$(depends "$STD" "$VER" | sed -n 's/^ *\(libllvm[0-9]*\).*/\1/p' | head -n1)
[[ -n $LLVM ]] || die "cannot tell which libllvm $STD $VER needs"

DIR=$CACHE/${VER//[^A-Za-z0-9.+-]/_}
if [[ ! -x $DIR/usr/bin/rustc ]]; then
  log "fetching rustc-web $VER, $STD, $LLVM into $DIR"
  work=$(mktemp -d "${TMPDIR:-/tmp}/msrv.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  aptopts=(-q)
  [[ $EUID -ne 0 ]] || aptopts+=(-o APT::Sandbox::User=root)
  pkgs=("rustc-web=$VER" "libstd-rust-web-dev=$VER" "$STD=$VER" "$LLVM")
  (cd "$work" && apt-get download "${aptopts[@]}" "${pkgs[@]}" >&2) || die "apt-get download failed"
  mkdir -p "$work/root"
  for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
  mkdir -p "$CACHE"
  rm -rf "$DIR"
  mv "$work/root" "$DIR"
fi
RUSTC=$DIR/usr/bin/rustc
export LD_LIBRARY_PATH=$DIR/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$RUSTC" -V >/dev/null 2>&1 || die "$RUSTC does not run"
log "checking with $("$RUSTC" -V)"
cd "$ROOT"
RUSTC=$RUSTC cargo check --workspace --lib --bins --features uverbs/tokio,uverbs/stream \
  --target-dir "$ROOT/target/msrv" --quiet
log "ok: the workspace builds with Rust $MSRV (rust-version)"
