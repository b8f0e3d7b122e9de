#!/usr/bin/env bash
# Static x86_64-unknown-linux-musl builds without rustup's musl rust-std.
#
#   scripts/musl.sh setup            fetch and unpack the toolchain (idempotent, cached)
#   scripts/musl.sh cargo ARGS...    run cargo for the musl target (std built from source)
#   scripts/musl.sh check BIN        assert BIN is a static ELF (no PT_INTERP, no DT_NEEDED)
#   scripts/musl.sh env              print the exports `cargo` uses (for debugging)
#
# Route (see /work/shared/reference/musl.md): Debian's rustc-web + the matching
# rust-web-src std sources, built with `RUSTC_BOOTSTRAP=1 -Zbuild-std`. musl's crt
# objects and libc.a (musl-dev), gcc's crtbegin/crtend, and LLVM's libunwind.a (plus
# a `__fprintf_chk` forwarder, because Debian built it with _FORTIFY_SOURCE) go into
# the sysroot's `lib/rustlib/x86_64-unknown-linux-musl/lib/self-contained/`, where
# rustup's musl target keeps them, so the default linker `cc` needs no extra flags.
#
# Packages are fetched with `apt-get download` and unpacked with `dpkg -x` into
# ${UVERBS_MUSL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-musl}; nothing is
# installed system-wide. Package names and versions are resolved from apt, never
# hard-coded: rustc-web -> libstd-rust-web-dev -> libstd-rust-web-X.Y -> libllvmNN,
# and libunwind-NN-dev follows NN. A stamp keyed on the resolved versions makes a
# warm `setup` a no-op.
set -euo pipefail

readonly TARGET=x86_64-unknown-linux-musl
# Bump when the layout produced by `do_setup` changes; it is part of the stamp key.
readonly LAYOUT_REV=1

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${UVERBS_MUSL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-musl}
readonly ROOT CACHE

log() { printf 'musl.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# --- version resolution --------------------------------------------------------

# Fingerprint of everything that decides apt's candidates. If it is unchanged the
# versions resolved last time are still right, so a warm run skips apt-cache
# (about 0.5 s per call on these machines).
apt_fingerprint() {
	{
		stat -c '%n %s %Y' /var/lib/apt/lists/*Packages* /etc/apt/sources.list \
			/etc/apt/sources.list.d/* /etc/apt/preferences /etc/apt/preferences.d/* 2>/dev/null || true
		gcc -dumpfullversion 2>/dev/null || echo nogcc
		echo "layout=$LAYOUT_REV"
	} | sha256sum | cut -c1-16
}

# Candidate version of package $1, or nothing if apt has none.
candidate() {
	apt-cache show --no-all-versions "$1" 2>/dev/null | sed -n 's/^Version: //p' | head -n1
}

# First dependency of package $1 whose name matches the ERE $2.
dep_matching() {
	apt-cache depends "$1" 2>/dev/null |
		sed -n 's/^ *Depends: \([^ <>]*\)$/\1/p' | grep -E -m1 "^$2\$" || true
}

# Sets PKGS (name=version ...) from apt. Runs `apt-get update` once if apt can't
# resolve the chain at all (for example on a machine with empty lists).
resolve_with_apt() {
	local attempt std llvm nn p v
	for attempt in 1 2; do
		PKGS=()
		std=$(dep_matching libstd-rust-web-dev 'libstd-rust-web-[0-9]+\.[0-9]+')
		llvm=${std:+$(dep_matching "$std" 'libllvm[0-9]+')}
		if [[ -n $(candidate rustc-web) && -n $std && -n $llvm ]]; then
			nn=${llvm#libllvm}
			for p in rustc-web libstd-rust-web-dev "$std" "$llvm" rust-web-src \
				musl-dev "libunwind-$nn-dev"; do
				v=$(candidate "$p")
				[[ -n $v ]] || die "apt has no candidate for $p"
				PKGS+=("$p=$v")
			done
			return 0
		fi
		[[ $attempt == 1 ]] || break
		log "apt cannot resolve rustc-web's dependency chain; running apt-get update once"
		apt-get update -qq || die "apt-get update failed"
	done
	die "apt cannot resolve rustc-web -> libstd-rust-web-X.Y -> libllvmNN"
}

# Sets PKGS and KEY, reusing $CACHE/resolved when the apt fingerprint matches.
resolve() {
	local fp line
	fp=$(apt_fingerprint)
	if [[ -f $CACHE/resolved ]] && read -r line <"$CACHE/resolved" && [[ $line == "$fp" ]]; then
		mapfile -t PKGS < <(tail -n +2 "$CACHE/resolved")
	else
		resolve_with_apt
		fp=$(apt_fingerprint) # apt-get update may have changed the lists
		mkdir -p "$CACHE"
		printf '%s\n' "$fp" "${PKGS[@]}" >"$CACHE/resolved.tmp"
		mv -f "$CACHE/resolved.tmp" "$CACHE/resolved"
	fi
	[[ ${#PKGS[@]} -gt 0 ]] || die "empty package list in $CACHE/resolved"
	local rustc_ver src_ver p
	for p in "${PKGS[@]}"; do
		case $p in
		rustc-web=*) rustc_ver=${p#*=} ;;
		rust-web-src=*) src_ver=${p#*=} ;;
		esac
	done
	# build-std only works with sources from exactly the compiler's version.
	[[ ${rustc_ver:-} == "${src_ver:-x}" ]] ||
		die "rustc-web ${rustc_ver:-?} and rust-web-src ${src_ver:-?} differ; build-std needs the same version"
	KEY="layout=$LAYOUT_REV gcc=$(gcc -dumpfullversion) ${PKGS[*]}"
	TOOLDIR=$CACHE/rustc-web-${rustc_ver//[^A-Za-z0-9.+-]/_}-$(printf '%s' "$KEY" | sha256sum | cut -c1-8)
	SYSROOT=$TOOLDIR/root/usr
	SELF_CONTAINED=$SYSROOT/lib/rustlib/$TARGET/lib/self-contained
}

# --- setup ---------------------------------------------------------------------

# Cheap checks that the toolchain with sysroot $1 is usable. Prints the first problem.
verify() {
	local f SYSROOT=$1 SELF_CONTAINED=$1/lib/rustlib/$TARGET/lib/self-contained
	for f in crt1.o crti.o crtn.o rcrt1.o Scrt1.o crtbeginS.o crtendS.o libc.a libunwind.a; do
		[[ -s $SELF_CONTAINED/$f ]] || { echo "missing $SELF_CONTAINED/$f"; return 1; }
	done
	[[ -f $SYSROOT/lib/rustlib/src/rust/library/std/Cargo.toml ]] ||
		{ echo "std sources missing under $SYSROOT/lib/rustlib/src/rust/library"; return 1; }
	[[ -d $SYSROOT/lib/rustlib/x86_64-unknown-linux-gnu/lib ]] ||
		{ echo "host std (libstd-rust-web-dev) missing"; return 1; }
	LD_LIBRARY_PATH=$SYSROOT/lib/x86_64-linux-gnu "$SYSROOT/bin/rustc" -vV >/dev/null 2>&1 ||
		{ echo "$SYSROOT/bin/rustc does not run"; return 1; }
}

do_setup() {
	local work deb p G
	resolve
	if [[ -f $TOOLDIR/stamp && $(<"$TOOLDIR/stamp") == "$KEY" ]]; then
		return 0
	fi
	command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
		die "needs apt-get and dpkg-deb (Debian/Ubuntu)"
	command -v gcc >/dev/null || die "needs gcc (for crtbegin/crtend and the libunwind shim)"
	mkdir -p "$CACHE"
	# Serialise concurrent setups (two `musl.sh cargo` at once); re-check under the lock.
	exec 9>"$CACHE/.lock"
	flock 9
	if [[ -f $TOOLDIR/stamp && $(<"$TOOLDIR/stamp") == "$KEY" ]]; then
		exec 9>&-
		return 0
	fi
	log "setting up ${PKGS[*]}"
	log "into $TOOLDIR"
	work=$(mktemp -d "$CACHE/.setup.XXXXXX")
	chmod 755 "$work"
	# shellcheck disable=SC2064 # expand $work now
	trap "rm -rf '$work'" EXIT
	mkdir -p "$work/debs" "$work/root"
	local -a aptopts=(-q)
	# As root apt would warn that _apt cannot write into our private cache directory
	# and then download unsandboxed anyway; say so up front.
	[[ $EUID -ne 0 ]] || aptopts+=(-o APT::Sandbox::User=root)
	(cd "$work/debs" && apt-get download "${aptopts[@]}" "${PKGS[@]}" >&2) || die "apt-get download failed"
	for p in "${PKGS[@]}"; do
		deb=$(ls "$work/debs/${p%%=*}"_*.deb 2>/dev/null | head -n1)
		[[ -n $deb ]] || die "download of ${p%%=*} produced no .deb"
		if [[ ${p%%=*} == rust-web-src ]]; then
			# Only the std sources (library/) and the rustlib/src link are needed.
			dpkg-deb --fsys-tarfile "$deb" |
				tar -x -C "$work/root" --wildcards './usr/src/rustc-*/library' './usr/lib/rustlib/src'
		else
			dpkg -x "$deb" "$work/root"
		fi
	done
	rm -rf "$work/debs"

	local R=$work/root/usr SC G
	SC=$R/lib/rustlib/$TARGET/lib/self-contained
	G=$(dirname "$(gcc -print-libgcc-file-name)")
	mkdir -p "$SC"
	cp "$R"/lib/x86_64-linux-musl/{crt1.o,crti.o,crtn.o,rcrt1.o,Scrt1.o,libc.a} "$SC/"
	cp "$G"/crt{begin,beginS,end,endS}.o "$SC/"
	cp "$R/lib/x86_64-linux-gnu/libunwind.a" "$SC/"
	# Debian's libunwind.a was built with _FORTIFY_SOURCE; `__fprintf_chk` is the only
	# symbol it needs that musl lacks. Forward it to vfprintf.
	cat >"$work/fprintf_chk.c" <<-'EOF'
		typedef struct _IO_FILE FILE;
		int vfprintf(FILE *f, const char *fmt, __builtin_va_list ap);
		int __fprintf_chk(FILE *f, int flag, const char *fmt, ...)
		{
			__builtin_va_list ap;
			int r;
			(void)flag;
			__builtin_va_start(ap, fmt);
			r = vfprintf(f, fmt, ap);
			__builtin_va_end(ap);
			return r;
		}
	EOF
	gcc -O2 -fPIC -fno-stack-protector -c "$work/fprintf_chk.c" -o "$work/fprintf_chk.o"
	ar rcs "$SC/libunwind.a" "$work/fprintf_chk.o"

	# The rust-web-src link may be absolute (/usr/src/rustc-X.Y.Z); point it into the
	# unpacked tree instead.
	local srcdir
	srcdir=$(ls -d "$R"/src/rustc-*/library 2>/dev/null | head -n1)
	[[ -n $srcdir ]] || die "rust-web-src has no usr/src/rustc-*/library"
	rm -rf "$R/lib/rustlib/src/rust"
	mkdir -p "$R/lib/rustlib/src"
	ln -s "../../../src/$(basename "$(dirname "$srcdir")")" "$R/lib/rustlib/src/rust"

	local problem
	problem=$(verify "$R") || die "verification failed: $problem"
	rm -rf "$TOOLDIR"
	mv "$work" "$TOOLDIR"
	trap - EXIT
	printf '%s\n' "$KEY" >"$TOOLDIR/stamp"
	exec 9>&-
	local old
	for old in "$CACHE"/rustc-web-*; do
		[[ $old == "$TOOLDIR" || ! -d $old ]] || log "note: $old is no longer used (rm -rf it to reclaim space)"
	done
	log "ready: $(LD_LIBRARY_PATH=$SYSROOT/lib/x86_64-linux-gnu "$SYSROOT/bin/rustc" -V)"
}

# --- commands ------------------------------------------------------------------

cmd_setup() {
	do_setup
	local problem
	problem=$(verify "$SYSROOT") || die "verification failed: $problem (delete $TOOLDIR and re-run)"
}

musl_env() {
	# Scoped to the cargo child only: exported in a subshell or printed.
	printf '%s\n' \
		"RUSTC=$SYSROOT/bin/rustc" \
		"RUSTDOC=$SYSROOT/bin/rustdoc" \
		"LD_LIBRARY_PATH=$SYSROOT/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		"RUSTC_BOOTSTRAP=1"
}

cmd_env() {
	do_setup
	musl_env | sed 's/^/export /'
}

cmd_cargo() {
	local pre=()
	# `+toolchain` selects rustup's cargo; the compiler is always Debian's rustc.
	if [[ ${1:-} == +* ]]; then pre+=("$1"); shift; fi
	[[ $# -gt 0 && $1 != -* ]] ||
		die "usage: musl.sh cargo [+toolchain] SUBCOMMAND [ARGS...] (subcommand first)"
	local sub=$1
	shift
	do_setup
	local -a envs
	mapfile -t envs < <(musl_env)
	# The added options go right after the subcommand, so they precede any `--`.
	# target/musl is fixed (CARGO_TARGET_DIR is ignored) so this never shares
	# artifacts with the glibc/rustup build.
	exec env "${envs[@]}" cargo "${pre[@]}" "$sub" \
		-Zbuild-std=std,panic_abort --target "$TARGET" --target-dir "$ROOT/target/musl" "$@"
}

cmd_check() {
	[[ $# -eq 1 ]] || die "usage: musl.sh check BIN"
	local bin=$1 size fail=0
	[[ -f $bin ]] || die "$bin: no such file"
	command -v readelf >/dev/null || die "needs readelf (binutils)"
	size=$(stat -c %s "$bin")
	printf '%s: %d bytes (%s)\n' "$bin" "$size" "$(numfmt --to=iec-i --suffix=B "$size" 2>/dev/null || echo "?")"
	if command -v file >/dev/null; then file -b "$bin"; fi
	readelf -h "$bin" >/dev/null 2>&1 || die "$bin: not an ELF file"
	if readelf -lW "$bin" | grep -q 'Requesting program interpreter\|^ *INTERP '; then
		log "FAIL: $bin has a PT_INTERP (dynamic loader): $(readelf -lW "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')"
		fail=1
	fi
	local needed
	needed=$(readelf -dW "$bin" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
	if [[ -n $needed ]]; then
		log "FAIL: $bin needs shared libraries: $(echo $needed)"
		fail=1
	fi
	[[ $fail == 0 ]] || exit 1
	echo "static: no PT_INTERP, no DT_NEEDED"
}

case ${1:-} in
setup) shift; [[ $# -eq 0 ]] || usage; cmd_setup ;;
cargo) shift; cmd_cargo "$@" ;;
check) shift; cmd_check "$@" ;;
env) shift; cmd_env ;;
*) usage ;;
esac
