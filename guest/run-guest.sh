#!/usr/bin/env bash
# guest/run-guest.sh — boot the uverbs test guest (Debian kernel + rdma_rxe under
# QEMU) and run a command in it; exits with the command's exit status.
#
# Usage:
#   guest/run-guest.sh --kernel 6.1|6.12 [options] -- CMD [ARG]...
#   guest/run-guest.sh --kernel 6.1|6.12 [options] --script FILE
#   guest/run-guest.sh --kernel 6.1|6.12 [options] --shell   (interactive)
# Options:
#   --add SRC[:DST]  copy a host file/dir into the guest; DST defaults to
#                    /guest/BASENAME, a relative DST is under /guest (repeatable)
#   --env K=V        export K=V in the guest (repeatable)
#   --timeout S      kill QEMU after S seconds (default 600) -> exit 124
#   --smp N --mem MB guest CPUs / memory (default 2 / 1024)
#   --accel auto|kvm|tcg  default auto (or $UVERBS_GUEST_ACCEL): KVM only if
#                    /dev/kvm is usable and a probe boot succeeds (verdict cached)
#   --log FILE       also keep the console log at FILE
#   --quiet          do not stream the console to stdout
#   --no-build       do not run build-image.sh first
#   --nic NETDEV     give the guest a virtio-net NIC on the QEMU backend
#                    `-netdev NETDEV` (e.g. dgram,local.type=unix,local.path=A,
#                    remote.type=unix,remote.path=B: a wire to another guest) and
#                    put rxe0 on it (eth0) instead of on dummy0
#   --mac MAC        the NIC's MAC (with --nic; guests on one wire need different
#                    ones; default 52:54:00:12:34:56)
#   --ip ADDR        the guest's IPv4 address, /24 (default 192.0.2.1)
# The command runs under busybox sh in /guest, with PATH=/guest/bin:/guest:...,
# UVERBS_TEST_DEVICE=rxe0 UVERBS_TEST_GID_INDEX=<n> UVERBS_TEST_IP=192.0.2.1
# UVERBS_TEST_NETDEV=dummy0 exported (with --nic/--ip: eth0 and that address).
# SIGINT/SIGTERM stop QEMU before the script exits (status 130).
# Exit status: the command's status (0-255); 123 guest setup failed (rxe not
# up); 124 timeout; 125 no exit marker (kernel panic, crash, QEMU error);
# 126 usage or host-side error. On failure the console log is kept at
# target/guest-logs/<kernel>-<timestamp>.log (or $UVERBS_GUEST_LOG_DIR).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
ROOT=${UVERBS_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uverbs-guest}
LOGDIR=${UVERBS_GUEST_LOG_DIR:-$REPO/target/guest-logs}

log() { printf '[run-guest] %s\n' "$*" >&2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 126; }

KERNEL= SCRIPT= SHELL_MODE=0 TIMEOUT=600 SMP=2 MEM=1024 ACCEL=${UVERBS_GUEST_ACCEL:-auto}
LOG= QUIET=0 BUILD=1 NIC= MAC=52:54:00:12:34:56 IP=192.0.2.1
ADDS=() ENVS=() CMD=()
need() { [[ $1 -ge 2 ]] || usage; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel) need $#; KERNEL=$2; shift 2 ;;
    --add) need $#; ADDS+=("$2"); shift 2 ;;
    --env) need $#; [[ $2 == [A-Za-z_]*=* ]] || { log "bad --env $2"; exit 126; }; ENVS+=("$2"); shift 2 ;;
    --timeout) need $#; TIMEOUT=$2; shift 2 ;;
    --smp) need $#; SMP=$2; shift 2 ;;
    --mem) need $#; MEM=$2; shift 2 ;;
    --accel) need $#; ACCEL=$2; shift 2 ;;
    --log) need $#; LOG=$2; shift 2 ;;
    --quiet) QUIET=1; shift ;;
    --no-build) BUILD=0; shift ;;
    --nic) need $#; NIC=$2; shift 2 ;;
    --mac) need $#; MAC=$2; shift 2 ;;
    --ip) need $#; IP=$2; shift 2 ;;
    --script) need $#; SCRIPT=$2; shift 2 ;;
    --shell) SHELL_MODE=1; shift ;;
    --) shift; CMD=("$@"); break ;;
    -h|--help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
[[ $KERNEL == 6.1 || $KERNEL == 6.12 ]] || { log "--kernel 6.1|6.12 is required"; usage; }
[[ ${#CMD[@]} -gt 0 || -n $SCRIPT || $SHELL_MODE == 1 ]] || { log "no command"; usage; }
[[ -z $SCRIPT || -f $SCRIPT ]] || { log "no such script: $SCRIPT"; exit 126; }
case $ACCEL in auto|kvm|tcg) ;; *) log "bad --accel $ACCEL"; exit 126 ;; esac
[[ $IP =~ ^([0-9]{1,3}\.){3}[0-9]{1,3}$ ]] || { log "bad --ip $IP (an IPv4 address, no prefix)"; exit 126; }
[[ $MAC =~ ^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$ ]] || { log "bad --mac $MAC"; exit 126; }

KD=$ROOT/$KERNEL
if [[ $BUILD == 1 ]]; then
  "$HERE/build-image.sh" --kernel "$KERNEL" || { log "build-image.sh failed"; exit 126; }
fi
[[ -f $KD/vmlinux && -f $KD/initramfs.cpio ]] || { log "no image in $KD (run guest/build-image.sh --kernel $KERNEL)"; exit 126; }
QEMU=${UVERBS_GUEST_QEMU:-$ROOT/qemu/qemu-system-x86_64}
BUSYBOX=$ROOT/userspace/root/bin/busybox

WORK=$(mktemp -d "${TMPDIR:-/tmp}/uverbs-guest.XXXXXX")
# QPID is the running `timeout` (which forwards a SIGTERM to QEMU and kills it
# 5 s later if needed); cleanup waits for it so no QEMU outlives this script.
QPID=
cleanup() {
  if [[ -n $QPID ]]; then
    kill "$QPID" 2>/dev/null
    wait "$QPID" 2>/dev/null
    # stopped by a signal: --log still gets what the guest printed
    [[ -n $LOG && -f $WORK/console.log ]] && cp "$WORK/console.log" "$LOG" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# sq STR: single-quote STR for a POSIX shell
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# mkinitrd DIR OUT: the base initramfs + an overlay cpio of DIR
mkinitrd() {
  (cd "$1" && find . -mindepth 1 | LC_ALL=C sort | "$BUSYBOX" cpio -o -H newc 2>/dev/null) > "$WORK/overlay.cpio"
  cat "$KD/initramfs.cpio" "$WORK/overlay.cpio" > "$2"
}

# boot ACCEL TIMEOUT INITRD LOGFILE QUIET EXTRA_APPEND [QEMU_ARG]...: run QEMU;
# sets QRC, MARKER, SECS. QEMU runs in the background and is waited for, so a
# SIGTERM/SIGINT to this script runs its trap (killing QEMU) at once instead
# of after QEMU exits.
boot() {
  local accel=$1 tmo=$2 initrd=$3 logf=$4 quiet=$5 extra=$6 nonce start end tee_pid
  shift 6
  nonce=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
  local q=("$QEMU" -nodefaults -no-user-config -display none -no-reboot
           -m "$MEM" -smp "$SMP" -kernel "$KD/vmlinux" -initrd "$initrd"
           -append "console=ttyS0 panic=-1 quiet loglevel=3 uverbs.nonce=$nonce${extra:+ $extra}"
           -serial stdio "$@")
  if [[ $accel == kvm ]]; then q+=(-accel kvm -cpu host); else q+=(-accel tcg); fi
  start=$(date +%s%N)
  set +e
  if [[ $quiet == 1 ]]; then
    timeout -k 5 "$tmo" "${q[@]}" </dev/null >"$logf" 2>&1 &
    QPID=$!
    wait "$QPID"
    QRC=$?
  else
    rm -f "$WORK/console.fifo"; mkfifo "$WORK/console.fifo"
    tee "$logf" < "$WORK/console.fifo" &
    tee_pid=$!
    timeout -k 5 "$tmo" "${q[@]}" </dev/null >"$WORK/console.fifo" 2>&1 &
    QPID=$!
    wait "$QPID"
    QRC=$?
    wait "$tee_pid"
  fi
  QPID=
  set -e
  end=$(date +%s%N)
  SECS=$(( (end - start) / 1000000 ))
  MARKER=$(tr -d '\r' < "$logf" | sed -n "s/^UVERBS-GUEST-EXIT:$nonce:\([0-9]*\)\$/\1/p" | tail -1)
  if [[ -z $MARKER ]] && tr -d '\r' < "$logf" | grep -qx "UVERBS-GUEST-SETUP-FAILED:$nonce"; then
    MARKER=setup-failed
  fi
}

# ---- accelerator: KVM only if /dev/kvm is usable and a probe boot works
if [[ $ACCEL == auto ]]; then
  ACCEL=tcg
  if [[ -r /dev/kvm && -w /dev/kvm ]]; then
    key="$(uname -n) $(uname -r) $("$QEMU" --version | sed -n 1p)"
    vf=$ROOT/kvm-verdict
    if [[ -f $vf && $(sed -n 1p "$vf") == "$key" ]]; then
      ACCEL=$(sed -n 2p "$vf")
    else
      log "probing KVM (one-time per machine; verdict cached in $vf)"
      mkdir -p "$WORK/probe/guest"; echo 'exit 0' > "$WORK/probe/guest/run.sh"
      mkinitrd "$WORK/probe" "$WORK/probe.cpio"
      boot kvm 15 "$WORK/probe.cpio" "$WORK/probe.log" 1 ""
      if [[ $MARKER == 0 ]]; then ACCEL=kvm; else
        log "KVM probe failed (qemu rc $QRC: $(grep -m1 -iE 'error|fail' "$WORK/probe.log" | cut -c1-120)); using TCG"
      fi
      printf '%s\n%s\n' "$key" "$ACCEL" > "$vf"
    fi
  fi
fi

# ---- per-run overlay: /guest/run.sh, /guest/.env, --add files
OV=$WORK/overlay
mkdir -p "$OV/guest"
if [[ -n $SCRIPT ]]; then
  cp "$SCRIPT" "$OV/guest/run.sh"
elif [[ ${#CMD[@]} -gt 0 ]]; then
  { for a in "${CMD[@]}"; do sq "$a"; printf ' '; done; echo; } > "$OV/guest/run.sh"
fi
: > "$OV/guest/.env"
for e in "${ENVS[@]}"; do printf 'export %s=%s\n' "${e%%=*}" "$(sq "${e#*=}")" >> "$OV/guest/.env"; done
for a in "${ADDS[@]}"; do
  src=${a%%:*} dst=
  [[ $a == *:* ]] && dst=${a#*:}
  [[ -z $dst ]] && dst=/guest/$(basename "$src")
  [[ $dst == /* ]] || dst=/guest/$dst
  [[ -e $src ]] || { log "--add: no such file: $src"; exit 126; }
  mkdir -p "$OV$(dirname "$dst")"
  cp -a "$src" "$OV$dst"
done
mkinitrd "$OV" "$WORK/initrd.cpio"

KREL=$(cat "$KD/kernel-release")
# The NIC (--nic) and the address (--ip) reach init.sh on the kernel command
# line; without them nothing is added, so the single-guest boot is unchanged.
APPEND= QNIC=()
if [[ -n $NIC ]]; then
  APPEND+=" uverbs.nic=1"
  # romfile= : no iPXE option ROM (nothing boots from the network).
  QNIC=(-netdev "$NIC,id=wire0" -device "virtio-net-pci,netdev=wire0,mac=$MAC,romfile=")
fi
[[ $IP == 192.0.2.1 ]] || APPEND+=" uverbs.ip=$IP"
if [[ $SHELL_MODE == 1 ]]; then
  q=("$QEMU" -nodefaults -no-user-config -display none -no-reboot -m "$MEM" -smp "$SMP"
     -kernel "$KD/vmlinux" -initrd "$WORK/initrd.cpio" -serial stdio
     -append "console=ttyS0 panic=-1 quiet loglevel=3 uverbs.shell=1$APPEND" "${QNIC[@]}")
  if [[ $ACCEL == kvm ]]; then q+=(-accel kvm -cpu host); else q+=(-accel tcg); fi
  "${q[@]}"
  exit $?
fi

log "booting $KREL ($ACCEL, -smp $SMP -m $MEM, timeout ${TIMEOUT}s${NIC:+; NIC $MAC, $IP, -netdev $NIC})"
boot "$ACCEL" "$TIMEOUT" "$WORK/initrd.cpio" "$WORK/console.log" "$QUIET" "${APPEND# }" "${QNIC[@]}"

if [[ $QRC == 124 || $QRC == 137 ]]; then rc=124; why="timeout after ${TIMEOUT}s"
elif [[ $MARKER == setup-failed ]]; then rc=123; why="guest setup failed (rxe not up)"
elif [[ -z $MARKER ]]; then rc=125; why="no exit marker (guest crashed/panicked, or QEMU failed: rc $QRC)"
else rc=$MARKER; why="guest command exit status $rc"
fi
[[ -n $LOG ]] && cp "$WORK/console.log" "$LOG"
if [[ $rc != 0 ]]; then
  mkdir -p "$LOGDIR"
  keep=$LOGDIR/$KERNEL-$(date +%Y%m%d-%H%M%S).log
  # noclobber creates the file exclusively: two guests failing in the same
  # second (scripts/two-host.sh) must not race for one name
  if ! (set -C; cat "$WORK/console.log" > "$keep") 2>/dev/null; then
    keep=${keep%.log}-$$.log
    cp "$WORK/console.log" "$keep"
  fi
  log "console log kept: $keep"
fi
log "$why; ${SECS} ms (QEMU start to exit, $ACCEL)"
exit "$rc"
