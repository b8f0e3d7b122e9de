#!/usr/bin/env bash
# scripts/soak.sh — the long soak in the rxe guest: 10^7 messages over 64
# RC QPs (32 loopback pairs), every completion accounted for, none lost or
# duplicated, every payload in order (tests/device/soak.rs). Not part of CI,
# which runs the same test at 10^6 messages over 16 QPs.
#
# Usage: scripts/soak.sh [--kernel 6.1|6.12|all] [--messages N] [--qps N]
#                        [--timeout S] [--musl]
# Defaults: kernel 6.12, 10000000 messages, 64 QPs, 7200 s per guest.
# Prints the test's own line ("soak: N messages over Q QPs in S s (R msg/s)")
# and cargo's test result; exits non-zero on any failure.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KERNEL=6.12 MESSAGES=10000000 QPS=64 TIMEOUT=7200 MUSL=()
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel) [[ $# -ge 2 ]] || usage; KERNEL=$2; shift 2 ;;
    --messages) [[ $# -ge 2 ]] || usage; MESSAGES=$2; shift 2 ;;
    --qps) [[ $# -ge 2 ]] || usage; QPS=$2; shift 2 ;;
    --timeout) [[ $# -ge 2 ]] || usage; TIMEOUT=$2; shift 2 ;;
    --musl) MUSL=(--musl); shift ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
done
(( QPS >= 2 && QPS % 2 == 0 )) || { echo "soak.sh: --qps must be even and >= 2" >&2; exit 2; }

exec "$HERE/guest-test.sh" --kernel "$KERNEL" "${MUSL[@]}" --timeout "$TIMEOUT" \
  --env "UVERBS_SOAK_MESSAGES=$MESSAGES" --env "UVERBS_SOAK_QPS=$QPS" \
  -- soak:: --nocapture
