#!/usr/bin/env bash
# capi/build-static.sh — links a C program written against Debian's
# <infiniband/verbs.h> (and <rdma/rdma_cma.h>) into a fully static musl binary
# over the uverbs-cabi staticlib: no libibverbs, no librdmacm, no provider, no
# dynamic loader. libibverbs.a defines the rdma_* names of librdmacm.so.1 too,
# so a program that uses both libraries links this one archive.
#
# Usage:
#   capi/build-static.sh [--glibc-dynamic] OUT [SRC.c...]
#     (default SRC: capi/tests/c/static_verbs.c)
#   --glibc-dynamic   instead, build OUT dynamically with the host's gcc and
#                     glibc, linked against Debian's libibverbs.so.1 and (if
#                     it uses it: --as-needed) librdmacm.so.1, as any program
#                     built on Debian is: it runs over real rdma-core, or over
#                     ours with LD_LIBRARY_PATH
#
# Static recipe (what this does; any C program works the same way):
#   1. the staticlib for musl: scripts/musl.sh cargo build --release -p uverbs-cabi
#      -> target/musl/x86_64-unknown-linux-musl/release/libibverbs.a
#      (all Rust must be ONE staticlib per binary: two would clash on std)
#   2. compile with gcc against musl's headers, not glibc's: -nostdinc, then
#      musl's include dir, gcc's own (stddef.h...), the kernel's uapi headers
#      (linux/, asm/, asm-generic/, rdma/: verbs.h includes them) and
#      Debian's libibverbs-dev headers
#   3. link -static -nostdlib with musl's crt1.o/crti.o/crtn.o, gcc's
#      crtbegin.o/crtend.o, and libibverbs.a + libunwind.a + musl's libc.a +
#      libgcc.a in one group (scripts/musl.sh keeps these in the sysroot's
#      self-contained/ directory)
#   4. scripts/musl.sh check OUT: no PT_INTERP, no DT_NEEDED
#
# Headers: verbs.h from $UVERBS_MLX5DV_INCLUDE, /usr/include or
# ~/.cache/uverbs-headers-ibverbs (Debian's libibverbs-dev, fetched with
# apt-get download when missing); rdma_cma.h likewise from
# $UVERBS_RDMACM_INCLUDE, /usr/include or ~/.cache/uverbs-headers-rdmacm
# (Debian's librdmacm-dev 44); kernel headers from $UVERBS_ABI_INCLUDE
# or /usr/include (linux-libc-dev). --glibc-dynamic links against the
# libibverbs.so.1 in ${UVERBS_GUEST_CACHE:-~/.cache/uverbs-guest}/userspace
# (guest/build-image.sh) or ~/.cache/uverbs-rdma-core-44 (scripts/on-model.sh).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}
log() { printf '[build-static] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }

DYNAMIC=0
[[ ${1:-} == --glibc-dynamic ]] && { DYNAMIC=1; shift; }
[[ $# -ge 1 && $1 != -* ]] || usage
OUT=$1; shift
SRCS=("$@")
[[ ${#SRCS[@]} -gt 0 ]] || SRCS=("$HERE/tests/c/static_verbs.c")
for s in "${SRCS[@]}"; do [[ -f $s ]] || die "no such source: $s"; done
mkdir -p "$(dirname "$OUT")"

# Debian's verbs.h (libibverbs-dev 44).
VERBS_INC=
for d in "${UVERBS_MLX5DV_INCLUDE:-}" /usr/include "$CACHE/uverbs-headers-ibverbs/usr/include"; do
  [[ -n $d && -f $d/infiniband/verbs.h ]] && { VERBS_INC=$d; break; }
done
if [[ -z $VERBS_INC ]]; then
  IBV=$CACHE/uverbs-headers-ibverbs
  log "fetching libibverbs-dev (verbs.h) into $IBV"
  mkdir -p "$IBV/debs"
  (cd "$IBV/debs" && { apt-get download libibverbs-dev >/dev/null 2>&1 \
    || { apt-get update -qq && apt-get download libibverbs-dev; }; }) || die "apt-get download libibverbs-dev failed"
  dpkg -x "$IBV"/debs/libibverbs-dev_*.deb "$IBV"
  VERBS_INC=$IBV/usr/include
fi

# Debian's rdma_cma.h / rdma_verbs.h (librdmacm-dev 44), for rdma_cm programs.
RDMACM_INC=
for d in "${UVERBS_RDMACM_INCLUDE:-}" /usr/include "$CACHE/uverbs-headers-rdmacm/usr/include"; do
  [[ -n $d && -f $d/rdma/rdma_cma.h ]] && { RDMACM_INC=$d; break; }
done
if [[ -z $RDMACM_INC ]]; then
  CMH=$CACHE/uverbs-headers-rdmacm
  log "fetching librdmacm-dev (rdma_cma.h) into $CMH"
  mkdir -p "$CMH/debs"
  (cd "$CMH/debs" && { apt-get download librdmacm-dev >/dev/null 2>&1 \
    || { apt-get update -qq && apt-get download librdmacm-dev; }; }) || die "apt-get download librdmacm-dev failed"
  dpkg -x "$CMH"/debs/librdmacm-dev_*.deb "$CMH"
  RDMACM_INC=$CMH/usr/include
fi

if [[ $DYNAMIC == 1 ]]; then
  LIBDIR=
  for r in "${UVERBS_GUEST_CACHE:-$CACHE/uverbs-guest}/userspace/root" "$CACHE/uverbs-rdma-core-44/root"; do
    [[ -f $r/usr/lib/x86_64-linux-gnu/libibverbs.so.1 ]] && { LIBDIR=$r; break; }
  done
  [[ -n $LIBDIR ]] || die "no Debian libibverbs.so.1: run guest/build-image.sh --kernel 6.1 once"
  L=$LIBDIR/usr/lib/x86_64-linux-gnu
  [[ -f $L/librdmacm.so.1 ]] || die "no Debian librdmacm.so.1 beside $L/libibverbs.so.1"
  "${CC:-cc}" -std=gnu11 -O2 -Wall -Wextra -I "$VERBS_INC" -I "$RDMACM_INC" ${UVERBS_ABI_INCLUDE:+-I "$UVERBS_ABI_INCLUDE"} \
    -o "$OUT" "${SRCS[@]}" -Wl,--as-needed "$L/librdmacm.so.1" "$L/libibverbs.so.1" -Wl,--no-as-needed \
    -Wl,-rpath-link,"$L:$LIBDIR/lib/x86_64-linux-gnu" ||
    die "compiling ${SRCS[*]} failed"
  log "built $OUT (dynamic, glibc, against Debian's $(readelf -d "$OUT" | sed -n 's/.*(NEEDED).*\[\(lib\(ibverbs\|rdmacm\)[^]]*\)\]/\1/p' | tr '\n' ' '))"
  exit 0
fi

# 1. The staticlib.
log "building the musl staticlib: scripts/musl.sh cargo build --release -p uverbs-cabi"
"$ROOT/scripts/musl.sh" cargo build --release -p uverbs-cabi >&2 || die "musl build of uverbs-cabi failed"
LIB=$ROOT/target/musl/x86_64-unknown-linux-musl/release/libibverbs.a
[[ -f $LIB ]] || die "no $LIB after the build"

# musl's sysroot, as scripts/musl.sh set it up.
RUSTC=$("$ROOT/scripts/musl.sh" env | sed -n 's/^export RUSTC=//p')
SYSROOT=$(dirname "$(dirname "$RUSTC")")
SC=$SYSROOT/lib/rustlib/x86_64-unknown-linux-musl/lib/self-contained
MUSL_INC=$SYSROOT/include/x86_64-linux-musl
[[ -f $SC/libc.a && -f $MUSL_INC/stdio.h ]] || die "musl sysroot incomplete at $SYSROOT (scripts/musl.sh setup)"

# 2. The kernel's uapi headers, and only those, beside musl's.
KINC=${UVERBS_ABI_INCLUDE:-/usr/include}
[[ -f $KINC/linux/types.h ]] || die "no kernel headers in $KINC (linux-libc-dev; set UVERBS_ABI_INCLUDE)"
ASM=$KINC/x86_64-linux-gnu/asm
[[ -d $ASM ]] || ASM=$KINC/asm
[[ -f $ASM/types.h ]] || die "no asm/types.h under $KINC"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/build-static.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/kinc"
ln -s "$KINC/linux" "$WORK/kinc/linux"
ln -s "$KINC/asm-generic" "$WORK/kinc/asm-generic"
ln -s "$KINC/rdma" "$WORK/kinc/rdma"
ln -s "$ASM" "$WORK/kinc/asm"
GCC_INC=$(gcc -print-file-name=include)
OBJS=()
for s in "${SRCS[@]}"; do
  o=$WORK/$(basename "${s%.c}").o
  gcc -std=gnu11 -O2 -Wall -Wextra -nostdinc -isystem "$MUSL_INC" -isystem "$GCC_INC" \
    -isystem "$WORK/kinc" -I "$VERBS_INC" -I "$RDMACM_INC" -c "$s" -o "$o" || die "compiling $s failed"
  OBJS+=("$o")
done

# 3. The static link.
gcc -static -no-pie -nostdlib -o "$OUT" \
  "$SC/crt1.o" "$SC/crti.o" "$SC/crtbegin.o" "${OBJS[@]}" \
  -Wl,--start-group "$LIB" "$SC/libunwind.a" "$SC/libc.a" "$(gcc -print-libgcc-file-name)" -Wl,--end-group \
  "$SC/crtend.o" "$SC/crtn.o" || die "linking $OUT failed"

# 4. Static for certain.
"$ROOT/scripts/musl.sh" check "$OUT" >&2 || die "$OUT is not static"
log "built $OUT (static musl, $(stat -c %s "$OUT") bytes)"
