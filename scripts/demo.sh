#!/usr/bin/env bash
# scripts/demo.sh — show `uverbs devinfo` on a real RDMA device.
#
# Builds the uverbs CLI (cargo build --bin uverbs). If this host has
# /dev/infiniband/uverbs*, runs `uverbs devinfo` directly; otherwise boots the
# 6.1 test guest (soft-RoCE rxe0, see guest/README.md) and runs `uverbs
# devinfo` there, followed by rdma-core's `ibv_devinfo` for comparison.
#
# Environment:
#   UVERBS_DEMO_BIN=/path/to/binary   skip the build and use this executable
#   UVERBS_DEMO_KERNEL=6.12           guest kernel (default 6.1)
# Extra arguments are passed to `uverbs devinfo`.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
log() { printf '[demo] %s\n' "$*" >&2; }

BIN=${UVERBS_DEMO_BIN:-}
if [[ -z $BIN ]]; then
  log "building: cargo build --bin uverbs"
  BIN=$(cd "$REPO" && cargo build --bin uverbs --message-format=json-render-diagnostics | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and m.get("executable") and t.get("name") == "uverbs":
        print(m["executable"])
' | tail -1)
fi
[[ -n $BIN && -x $BIN ]] || { log "no uverbs executable (build failed?)"; exit 1; }

if compgen -G '/dev/infiniband/uverbs*' >/dev/null; then
  log "host has $(echo /dev/infiniband/uverbs*): running $BIN devinfo directly"
  exec "$BIN" devinfo "$@"
fi

KERNEL=${UVERBS_DEMO_KERNEL:-6.1}
log "no /dev/infiniband/uverbs* on this host: booting the $KERNEL guest (rxe0)"
q=
for a in "$@"; do q+=" '${a//\'/\'\\\'\'}'"; done
exec "$REPO/guest/run-guest.sh" --kernel "$KERNEL" --timeout 300 --add "$BIN:/guest/bin/uverbs" -- sh -c "
echo '\$ uverbs devinfo$q'
/guest/bin/uverbs devinfo$q
rc=\$?
echo
echo '--- for comparison, rdma-core: \$ ibv_devinfo'
ibv_devinfo
exit \$rc"
