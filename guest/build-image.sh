#!/usr/bin/env bash
# guest/build-image.sh — build (or check) the uverbs test guest for one kernel:
# a Debian kernel (uncompressed vmlinux for QEMU's PVH entry) and an
# uncompressed initramfs with busybox, iproute2, rdma-core's tools and the
# rdma_rxe module closure. QEMU itself is fetched too (never installed).
#
# Usage: guest/build-image.sh --kernel 6.1|6.12 [--force] [--refresh]
#   --force    rebuild the initramfs from the cached packages
#   --refresh  re-resolve and re-download all packages (follow Debian updates)
#
# Everything comes from `apt-get download` + `dpkg -x`; nothing is installed on
# the host. `apt-get update` runs (once) only when apt cannot resolve or fetch
# the packages (stale or empty package lists).
#
# Cache (outside the repo), $ROOT = ${UVERBS_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-guest}:
#   $ROOT/<kernel>/vmlinux          uncompressed kernel (PVH boot)
#   $ROOT/<kernel>/initramfs.cpio   base initramfs (newc, uncompressed)
#   $ROOT/<kernel>/kernel-release   e.g. 6.1.0-48-amd64
#   $ROOT/<kernel>/extract/         the extracted linux-image package
#   $ROOT/userspace/                extracted userspace packages (shared)
#   $ROOT/qemu/qemu-system-x86_64   QEMU wrapper (shared)
#   $ROOT/tools/                    kmod's depmod, only if the host has none
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=${UVERBS_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-guest}
KERNEL= FORCE=0 REFRESH=0

log() { printf '[build-image] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel) [[ $# -ge 2 ]] || usage; KERNEL=$2; shift 2 ;;
    --kernel=*) KERNEL=${1#--kernel=}; shift ;;
    --force) FORCE=1; shift ;;
    --refresh) REFRESH=1; FORCE=1; shift ;;
    -h|--help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
case $KERNEL in
  6.1)  META=linux-image-amd64 ;;       # bookworm's default kernel
  6.12) META=linux-image-6.12-amd64 ;;  # bookworm-security
  *) log "--kernel 6.1|6.12 is required"; usage ;;
esac

KD=$ROOT/$KERNEL
US=$ROOT/userspace
QD=$ROOT/qemu
mkdir -p "$KD"

# One build at a time per cache (the userspace/qemu dirs are shared).
exec 9>"$ROOT/.build.lock"
flock 9

# ---------------------------------------------------------------- warm path
# The stamp covers this script, the guest /init and the resolved packages; if
# it matches and the outputs exist, nothing (not even apt-cache) runs.
script_hash() { cat "$HERE/build-image.sh" "$HERE/init.sh" | sha256sum | cut -c1-16; }
STAMP=$(script_hash)
if [[ $FORCE == 0 && -f $KD/.stamp && $(cat "$KD/.stamp") == "$STAMP" &&
      -f $KD/vmlinux && -f $KD/initramfs.cpio && -x $QD/qemu-system-x86_64 && -f $QD/.done ]]; then
  log "up to date: $KD (kernel $(cat "$KD/kernel-release"))"
  exit 0
fi

for tool in apt-get apt-cache dpkg-deb readelf ldconfig xz zstd gzip sha256sum flock; do
  command -v "$tool" >/dev/null || die "missing host tool: $tool"
done

# ---------------------------------------------------------------- apt helpers
APT_UPDATED=0
apt_update_once() {
  [[ $APT_UPDATED == 0 ]] || return 1
  APT_UPDATED=1
  log "apt cannot resolve/fetch the packages: running apt-get update (once)"
  if [[ $(id -u) == 0 ]]; then apt-get update -q >&2
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo -n apt-get update -q >&2
  else die "apt-get update needs root; run it once, then retry"
  fi
}
# all_known PKG...: true if apt has a candidate version for every package
all_known() {
  local n
  n=$(apt-cache policy "$@" 2>/dev/null | grep -c '^  Candidate: [^(]' || true)
  [[ $n -eq $# ]]
}
resolve_kernel() {
  apt-cache depends "$META" 2>/dev/null | awk '/^ +Depends: linux-image-[0-9]/ && !k {k = $2} END {print k}'
}
# fetch DIR PKG...: apt-get download into DIR (quietly; the unsandboxed
# warning as root is harmless)
fetch() {
  local dir=$1; shift
  mkdir -p "$dir"
  (cd "$dir" && apt-get download -q "$@" 2>&1 | grep -v 'unsandboxed' >&2; exit "${PIPESTATUS[0]}")
}
# fetch_retry DIR PKG...: on failure (e.g. 404 from stale lists) update once and retry
fetch_retry() {
  fetch "$@" && return 0
  apt_update_once || return 1
  fetch "$@"
}
# extract DEST DEB...: dpkg -x each into DEST
extract() {
  local dest=$1 d; shift
  mkdir -p "$dest"
  for d in "$@"; do dpkg-deb -x "$d" "$dest"; done
}

# ---------------------------------------------------------------- package lists
# Userspace: busybox, iproute2 (`ip`, `rdma`), rdma-core (libs, rxe provider,
# tools), perftest, and the shared libraries they need (the NEEDED closure is
# checked when the rootfs is assembled: a missing package is reported).
UPKGS=(
  busybox-static iproute2
  libibverbs1 ibverbs-providers ibverbs-utils librdmacm1 rdmacm-utils perftest
  libc6 libgcc-s1 libibumad3 libmnl0 libnl-3-200 libnl-route-3-200 libpci3 libudev1
  zlib1g libzstd1 liblzma5 libcap2 libelf1 libbpf1 libselinux1 libpcre2-8-0 libbsd0 libmd0
  libtirpc3 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
  libssl3 libdb5.3 libxtables12
)
# QEMU: Debian's build plus the libraries a minimal host may lack; only the
# libraries missing on the host are put on its LD_LIBRARY_PATH.
QPKGS=(
  qemu-system-x86 qemu-system-common qemu-system-data seabios
  libfdt1 libcapstone4 libvdeplug2 libnl-3-200 libnl-route-3-200 libibverbs1
  librdmacm1 libslirp0 libpmem1 libdaxctl1 libndctl6 libpixman-1-0
  libjpeg62-turbo libpng16-16 libsasl2-2 libsasl2-modules-db libdb5.3
  libseccomp2 libnuma1 liburing2 libfuse3-3 libaio1 libgnutls30 libglib2.0-0
  libbpf1 libelf1 libcap-ng0 libzstd1 zlib1g libgmp10 libnettle8 libhogweed6
  libp11-kit0 libtasn1-6 libidn2-0 libunistring2 libffi8 libmount1 libblkid1
  libpcre2-8-0 libselinux1 libudev1 liburing2 libkmod2
)
TPKGS=(kmod libkmod2)

NEED_DEPMOD=1
command -v depmod >/dev/null && NEED_DEPMOD=0

# ---------------------------------------------------------------- resolve (once, cached)
# Resolution results are cached in $KD/kernel-pkg; --refresh redoes them.
KPKG=
[[ $REFRESH == 0 && -f $KD/kernel-pkg ]] && KPKG=$(cat "$KD/kernel-pkg")
need_resolve=0
[[ -z $KPKG ]] && need_resolve=1
[[ $REFRESH == 1 || ! -f $US/.done || ! -f $QD/.done ]] && need_resolve=1
if [[ $need_resolve == 1 ]]; then
  check=("${UPKGS[@]}" "${QPKGS[@]}")
  [[ $NEED_DEPMOD == 1 ]] && check+=("${TPKGS[@]}")
  KPKG=$(resolve_kernel || true)
  if [[ -z $KPKG ]] || ! all_known "$KPKG" "${check[@]}"; then
    apt_update_once || true
    KPKG=$(resolve_kernel || true)
    [[ -n $KPKG ]] || die "apt cannot resolve $META (is bookworm-security in the apt sources?)"
    all_known "$KPKG" "${check[@]}" || die "apt cannot resolve some of: ${check[*]}"
  fi
fi
[[ $KPKG == linux-image-$KERNEL.* ]] || die "$META resolves to $KPKG, not a $KERNEL kernel"

# ---------------------------------------------------------------- kernel package
if [[ $REFRESH == 1 || ! -f $KD/extract/.done || $(cat "$KD/kernel-pkg" 2>/dev/null) != "$KPKG" ]]; then
  log "fetching $KPKG"
  rm -rf "$KD/debs" "$KD/extract"
  if ! fetch "$KD/debs" "$KPKG"; then
    # stale lists: the version apt knows is gone from the mirror
    apt_update_once || die "cannot download $KPKG"
    KPKG=$(resolve_kernel || true)
    [[ $KPKG == linux-image-$KERNEL.* ]] || die "$META resolves to '$KPKG' after apt-get update"
    rm -rf "$KD/debs"; fetch "$KD/debs" "$KPKG" || die "cannot download $KPKG"
  fi
  extract "$KD/extract" "$KD"/debs/*.deb
  rm -rf "$KD/debs"
  printf '%s\n' "$KPKG" > "$KD/kernel-pkg"
  touch "$KD/extract/.done"
fi
EX=$KD/extract
KREL=$(ls "$EX/lib/modules")
[[ -n $KREL && -f $EX/boot/vmlinuz-$KREL ]] || die "no kernel found in $EX"

# ---------------------------------------------------------------- userspace (shared)
UHASH=$(printf '%s\n' "${UPKGS[@]}" | sha256sum | cut -c1-16)
if [[ $REFRESH == 1 || ! -f $US/.done || $(cat "$US/.done") != "$UHASH" ]]; then
  log "fetching ${#UPKGS[@]} userspace packages"
  rm -rf "$US"; mkdir -p "$US"
  fetch_retry "$US/debs" "${UPKGS[@]}" || die "cannot download the userspace packages"
  extract "$US/root" "$US"/debs/*.deb
  rm -rf "$US/debs"
  echo "$UHASH" > "$US/.done"
fi
UR=$US/root
BUSYBOX=$UR/bin/busybox

# ---------------------------------------------------------------- depmod
TD=$ROOT/tools
DEPMOD=depmod
if [[ $NEED_DEPMOD == 1 ]]; then
  if [[ ! -f $TD/.done ]]; then
    log "host has no depmod: fetching kmod"
    rm -rf "$TD"
    fetch_retry "$TD/debs" "${TPKGS[@]}" || die "cannot download kmod"
    extract "$TD/root" "$TD"/debs/*.deb
    rm -rf "$TD/debs"
    ln -sf root/bin/kmod "$TD/depmod"   # kmod dispatches on argv[0]
    touch "$TD/.done"
  fi
  DEPMOD=$TD/depmod
fi
run_depmod() { # basedir krel
  LD_LIBRARY_PATH="$TD/root/lib/x86_64-linux-gnu:$TD/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$DEPMOD" -b "$1" "$2"
}
# Debian's kernel .deb ships no modules.dep (its postinst runs depmod).
[[ -s $EX/lib/modules/$KREL/modules.dep ]] || run_depmod "$EX" "$KREL"

# ---------------------------------------------------------------- QEMU (shared)
QHASH=$(printf '%s\n' "${QPKGS[@]}" | sha256sum | cut -c1-16)
if [[ $REFRESH == 1 || ! -f $QD/.done || $(cat "$QD/.done") != "$QHASH" ]]; then
  log "fetching QEMU (${#QPKGS[@]} packages; extracted, not installed)"
  rm -rf "$QD"; mkdir -p "$QD/lib"
  mapfile -t qp < <(printf '%s\n' "${QPKGS[@]}" | sort -u)
  fetch_retry "$QD/debs" "${qp[@]}" || die "cannot download QEMU"
  extract "$QD/root" "$QD"/debs/*.deb
  rm -rf "$QD/debs"
  # Put on LD_LIBRARY_PATH only what the host lacks (never libc & co.).
  declare -A QSEEN=()
  HOSTLIBS=$(ldconfig -p)
  qlib() { # elf
    local n f d
    for n in $(readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [[ -n ${QSEEN[$n]:-} ]] && continue
      QSEEN[$n]=1
      grep -q "^[[:space:]]$n (libc6,x86-64)" <<<"$HOSTLIBS" && continue
      f=
      for d in "$QD/root/usr/lib/x86_64-linux-gnu" "$QD/root/lib/x86_64-linux-gnu"; do
        [[ -e $d/$n ]] && { f=$d/$n; break; }
      done
      [[ -n $f ]] || die "QEMU needs $n, which neither the host nor the fetched packages have: add its package to QPKGS"
      cp -L "$f" "$QD/lib/$n"
      qlib "$f"
    done
  }
  qlib "$QD/root/usr/bin/qemu-system-x86_64"
  qlib "$QD/root/usr/lib/x86_64-linux-gnu/qemu/accel-tcg-x86_64.so"
  cat > "$QD/qemu-system-x86_64" <<'EOF'
#!/bin/sh
# Wrapper for the QEMU that guest/build-image.sh extracted (not installed).
D=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export QEMU_MODULE_DIR="$D/root/usr/lib/x86_64-linux-gnu/qemu"
exec "$D/root/usr/bin/qemu-system-x86_64" -L "$D/root/usr/share/qemu" -L "$D/root/usr/share/seabios" "$@"
EOF
  chmod 755 "$QD/qemu-system-x86_64"
  "$QD/qemu-system-x86_64" --version >/dev/null || die "the extracted QEMU does not run"
  echo "$QHASH" > "$QD/.done"
  log "$("$QD/qemu-system-x86_64" --version | sed -n 1p); host-missing libs: $(ls "$QD/lib" | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- rootfs
t0=$(date +%s%N)
log "assembling the initramfs for $KREL"
RF=$KD/rootfs
rm -rf "$RF"; mkdir -p "$RF"
cd "$RF"
mkdir -p bin sbin usr/bin usr/sbin lib64 proc sys dev tmp run root etc guest \
         usr/lib/x86_64-linux-gnu/libibverbs lib/modules etc/libibverbs.d
ln -s ../usr/lib/x86_64-linux-gnu lib/x86_64-linux-gnu

# Real binaries first (cp -a keeps symlinks as symlinks: iproute2's sbin/ip is
# an absolute symlink to /bin/ip, which must not resolve to the host's).
MISSING=0
declare -A SEEN=()
LIBDIRS=("$UR/lib/x86_64-linux-gnu" "$UR/usr/lib/x86_64-linux-gnu" "$UR/usr/lib/x86_64-linux-gnu/libibverbs")
copy_lib() { # soname
  local n=$1 d
  [[ -n ${SEEN[$n]:-} ]] && return 0
  SEEN[$n]=1
  for d in "${LIBDIRS[@]}"; do
    if [[ -e $d/$n ]]; then
      cp -L "$d/$n" "usr/lib/x86_64-linux-gnu/$n"
      add_needed "$d/$n"
      return 0
    fi
  done
  log "MISSING shared library: $n"; MISSING=1
}
add_needed() { # elf
  local n
  for n in $(readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    copy_lib "$n"
  done
}
for d in bin sbin usr/bin usr/sbin; do
  [[ -d $UR/$d ]] || continue
  for f in "$UR/$d"/*; do
    b=${f##*/}
    [[ $b == busybox ]] && continue
    cp -a "$f" "$d/$b"
    [[ -L $f ]] || add_needed "$f"
  done
done
cp "$BUSYBOX" bin/busybox
# busybox applet links at their usual paths where no real binary exists
# (sbin/modprobe matters: the kernel's request_module() runs /sbin/modprobe)
for a in $("$BUSYBOX" --list-full); do
  [[ $a == bin/busybox ]] && continue
  [[ -e $a || -L $a ]] || ln -s /bin/busybox "$a"
done
cp -L "$UR/lib64/ld-linux-x86-64.so.2" lib64/ld-linux-x86-64.so.2
# dlopen()ed, so not in any NEEDED list: libgcc_s (glibc's pthread_exit/cancel
# unwinding, Rust panics), NSS, and the rxe verbs provider.
for n in libgcc_s.so.1 libnss_files.so.2 libnss_dns.so.2 libresolv.so.2; do copy_lib "$n"; done
cp "$UR/etc/libibverbs.d/rxe.driver" etc/libibverbs.d/
for so in "$UR"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so; do
  cp -L "$so" usr/lib/x86_64-linux-gnu/libibverbs/
  add_needed "$so"
done
[[ -d $UR/etc/rdma ]] && cp -a "$UR/etc/rdma" etc/
[[ $MISSING == 0 ]] || die "unresolved shared libraries: add their packages to UPKGS"

# Kernel modules: the modules.dep closure of what we load, decompressed
# (busybox modprobe cannot read .ko.xz), then depmod on the trimmed tree.
# crc32_generic: rdma_rxe allocates the "crc32" shash for its ICRC, which is no
# modules.dep dependency ("rdma link add" fails with ENOENT without it).
# virtio_pci + virtio_net (with net_failover/failover): the NIC of the two-host
# mode (run-guest.sh --nic); virtio_pci is built in on 6.12.
WANT=(ib_uverbs rdma_ucm rdma_rxe crc32_generic dummy virtio_pci virtio_net)
MD=$EX/lib/modules/$KREL
declare -A KSEEN=()
add_mod() { # relpath
  local rel=$1 dep
  [[ -n ${KSEEN[$rel]:-} ]] && return 0
  KSEEN[$rel]=1
  mkdir -p "lib/modules/$KREL/$(dirname "$rel")"
  cp "$MD/$rel" "lib/modules/$KREL/$rel"
  for dep in $(awk -v m="$rel:" '$1==m { for (i = 2; i <= NF; i++) print $i }' "$MD/modules.dep"); do
    add_mod "$dep"
  done
}
for m in "${WANT[@]}"; do
  rel=$(awk -F: -v m="$m" '{ n=$1; sub(/.*\//,"",n); sub(/\.ko(\.[a-z]+)?$/,"",n); gsub(/-/,"_",n); if (n==m) { print $1; exit } }' "$MD/modules.dep")
  if [[ -n $rel ]]; then add_mod "$rel"
  elif grep -qE "/${m//_/[-_]}\.ko" "$MD/modules.builtin"; then log "note: $m is built in"
  else die "module $m not found in $KREL"
  fi
done
find "lib/modules/$KREL" -name '*.ko.xz' -exec xz -d {} +
find "lib/modules/$KREL" -name '*.ko.zst' -exec zstd -q -d --rm {} +
for f in modules.order modules.builtin modules.builtin.modinfo; do
  [[ -f $MD/$f ]] && cp "$MD/$f" "lib/modules/$KREL/"
done
sed -i -e 's/\.ko\.\(xz\|zst\)$/.ko/' "lib/modules/$KREL/modules.order"
run_depmod "$RF" "$KREL"

# minimal /etc
echo "root:x:0:0:root:/root:/bin/sh" > etc/passwd
echo "root:x:0:" > etc/group
printf '127.0.0.1 localhost\n::1 localhost\n' > etc/hosts
echo "hosts: files" > etc/nsswitch.conf
printf '/usr/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu/libibverbs\n' > etc/ld.so.conf
ldconfig -r "$RF" 2>/dev/null || log "note: ldconfig -r failed (ld.so falls back to its default dirs)"
cp "$HERE/init.sh" init
chmod 755 init

# newc cpio with the (static) busybox from the image: the host needs no cpio
find . -mindepth 1 | LC_ALL=C sort | "$BUSYBOX" cpio -o -H newc > "$KD/initramfs.cpio.tmp" 2>/dev/null
mv "$KD/initramfs.cpio.tmp" "$KD/initramfs.cpio"

# ---------------------------------------------------------------- vmlinux
# The uncompressed ELF kernel, booted through QEMU's PVH entry (CONFIG_PVH=y):
# skips SeaBIOS and the in-guest decompression (~3.5 s under TCG).
extract_vmlinux() { # bzImage out
  local off magic
  for magic in '\xfd7zXZ\x00' '\x28\xb5\x2f\xfd' '\x1f\x8b\x08'; do
    for off in $(LC_ALL=C grep -obUaP "$magic" "$1" | cut -d: -f1); do
      case $magic in
        *7zXZ*) tail -c +$((off + 1)) "$1" | xz -dc --single-stream > "$2" 2>/dev/null || true ;;
        *b5*)   tail -c +$((off + 1)) "$1" | zstd -dcq > "$2" 2>/dev/null || true ;;
        *)      tail -c +$((off + 1)) "$1" | gzip -dc > "$2" 2>/dev/null || true ;;
      esac
      [[ $(head -c 4 "$2" | od -An -c | tr -d ' ') == 177ELF ]] && return 0
    done
  done
  rm -f "$2"; return 1
}
if [[ ! -f $KD/vmlinux || $(cat "$KD/vmlinux.krel" 2>/dev/null) != "$KREL" ]]; then
  extract_vmlinux "$EX/boot/vmlinuz-$KREL" "$KD/vmlinux.tmp" || die "cannot extract vmlinux from vmlinuz-$KREL"
  mv "$KD/vmlinux.tmp" "$KD/vmlinux"
  echo "$KREL" > "$KD/vmlinux.krel"
fi
echo "$KREL" > "$KD/kernel-release"
script_hash > "$KD/.stamp"
t1=$(date +%s%N)
log "built $KD/initramfs.cpio ($(du -h "$KD/initramfs.cpio" | cut -f1)) + vmlinux for $KREL in $(( (t1 - t0) / 1000000 )) ms"
