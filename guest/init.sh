#!/bin/sh
# /init of the uverbs test guest (busybox sh; copied in by build-image.sh).
#
# Brings up rxe0 (soft-RoCE) on a dummy0 netdev with 192.0.2.1/24, exports
#   UVERBS_TEST_DEVICE=rxe0 UVERBS_TEST_GID_INDEX=<RoCE v2 ::ffff:192.0.2.1 index>
#   UVERBS_TEST_IP=192.0.2.1 UVERBS_TEST_NETDEV=dummy0
# sources /guest/.env (run-guest.sh --env), runs /guest/run.sh in /guest, then
# prints the exit marker and powers off. Kernel command line knobs:
#   uverbs.nonce=X   marker nonce (so guest output cannot fake the marker)
#   uverbs.shell=1   interactive shell instead of /guest/run.sh
#   uverbs.nic=1     rxe0 on the virtio-net NIC (eth0; run-guest.sh --nic, a
#                    wire to another guest) instead of on dummy0
#   uverbs.ip=A.B.C.D  the address (/24) instead of 192.0.2.1
# Markers (each on its own line):
#   UVERBS-GUEST-EXIT:<nonce>:<status>     the command's exit status
#   UVERBS-GUEST-SETUP-FAILED:<nonce>      the rxe setup failed (run-guest.sh exits 123)
export PATH=/guest/bin:/guest:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
umask 022

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
exec </dev/console >/dev/console 2>&1
stty -onlcr 2>/dev/null   # plain \n on the serial console

NONCE=none SHELL_MODE=0 NIC=0 IP=192.0.2.1
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    uverbs.nonce=*) NONCE=${arg#uverbs.nonce=} ;;
    uverbs.shell=*) SHELL_MODE=${arg#uverbs.shell=} ;;
    uverbs.nic=*) NIC=${arg#uverbs.nic=} ;;
    uverbs.ip=*) IP=${arg#uverbs.ip=} ;;
  esac
done

fail() {
  echo "uverbs-guest: setup failed: $*"
  dmesg | tail -n 20
  echo "UVERBS-GUEST-SETUP-FAILED:$NONCE"
  poweroff -f
  sleep 10
}

IF=dummy0 DEV=rxe0
# iproute2's ip by path: busybox sh prefers its own `ip` applet.
/bin/ip link set lo up
modprobe ib_uverbs || fail "modprobe ib_uverbs"
modprobe rdma_ucm || fail "modprobe rdma_ucm"
# rxe's ICRC needs the "crc32" shash, which is not a modules.dep dependency
modprobe crc32_generic 2>/dev/null || grep -q crc32 /proc/crypto || fail "modprobe crc32_generic"
modprobe rdma_rxe || fail "modprobe rdma_rxe"
if [ "$NIC" = 1 ]; then
  # virtio_pci is no modules.dep dependency of virtio_net (and built in on
  # 6.12): without it the NIC silently never appears.
  modprobe virtio_pci 2>/dev/null || [ -d /sys/bus/pci/drivers/virtio-pci ] || fail "modprobe virtio_pci"
  modprobe virtio_net || fail "modprobe virtio_net"
  IF=
  i=0
  while [ -z "$IF" ]; do
    for d in /sys/class/net/eth*; do [ -e "$d" ] && { IF=${d##*/}; break; }; done
    [ -n "$IF" ] && break
    i=$((i + 1))
    [ $i -gt 100 ] && fail "no virtio-net NIC after 10 s: $(ls /sys/class/net)"
    sleep 0.1
  done
else
  modprobe dummy numdummies=0 || fail "modprobe dummy"
  /bin/ip link add "$IF" type dummy || fail "ip link add $IF"
fi
/bin/ip addr add "$IP/24" dev "$IF" || fail "ip addr add"
/bin/ip link set "$IF" up || fail "ip link set $IF up"
rdma link add "$DEV" type rxe netdev "$IF" || fail "rdma link add $DEV"

P=/sys/class/infiniband/$DEV/ports/1
i=0
until grep -q ACTIVE "$P/state" 2>/dev/null; do
  i=$((i + 1))
  [ $i -gt 100 ] && fail "$DEV port 1 not ACTIVE after 10 s: $(cat "$P/state" 2>/dev/null)"
  sleep 0.1
done

# GID index of the RoCE v2 IPv4-mapped GID (::ffff:$IP, e.g. ...:ffff:c000:0201
# for 192.0.2.1); GID 0 is fe80::
WANT_GID=$(echo "$IP" | { IFS=. read -r a b c d
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d"; })
GIDX=
i=0
while [ -z "$GIDX" ]; do
  idx=0
  while [ $idx -lt 16 ]; do
    case "$(cat "$P/gids/$idx" 2>/dev/null)" in
      "$WANT_GID")
        [ "$(cat "$P/gid_attrs/types/$idx" 2>/dev/null)" = "RoCE v2" ] && { GIDX=$idx; break; } ;;
    esac
    idx=$((idx + 1))
  done
  [ -n "$GIDX" ] && break
  i=$((i + 1))
  [ $i -gt 50 ] && fail "no RoCE v2 GID ::ffff:$IP on $DEV"
  sleep 0.1
done
[ -e /dev/infiniband/uverbs0 ] || fail "/dev/infiniband/uverbs0 missing"

export UVERBS_TEST_DEVICE=$DEV UVERBS_TEST_GID_INDEX=$GIDX UVERBS_TEST_IP=$IP UVERBS_TEST_NETDEV=$IF
echo "uverbs-guest: kernel $(uname -r), $DEV on $IF $IP, gid index $GIDX"
[ -f /guest/.env ] && . /guest/.env

cd /guest
if [ "$SHELL_MODE" = 1 ]; then
  setsid cttyhack sh
  rc=$?
elif [ -f /guest/run.sh ]; then
  sh /guest/run.sh
  rc=$?
else
  echo "uverbs-guest: no /guest/run.sh"
  rc=127
fi
sync
echo
echo "UVERBS-GUEST-EXIT:$NONCE:$rc"
poweroff -f
sleep 10
