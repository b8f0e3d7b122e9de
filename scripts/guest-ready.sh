# scripts/guest-ready.sh: shell functions for the guest scripts of
# scripts/rdmacm-guest.sh and scripts/two-host.sh (spliced into them, POSIX
# sh). READY_SECS: how long ready waits (seconds).
READY_SECS=${READY_SECS:-20}
# cs: the guest's uptime in centiseconds
cs() { read -r up _ < /proc/uptime; echo "${up%.*}${up#*.}"; }
# alive PID: running (a finished background job stays a zombie until reaped)
alive() { [ -r /proc/$1/status ] && ! grep -q '^State:[[:space:]]*Z' /proc/$1/status; }
# ready SPEC PID: wait (at most READY_SECS) until the kernel shows the
# server's rdma_cm listener on the port (listen:PORT) or its multicast group
# joined (mcast:HEXGROUP as /proc/net/igmp prints it) and the server busy;
# fails at once if the server died.
ready() {
  rt=$(cs)
  busy=0
  while :; do
    case $1 in
      # (+0.3 s: a wildcard listener's per-device id shows LISTEN a moment
      # before its IB CM listen exists, cma.c rdma_listen then cma_ib_listen;
      # a REQ in between is rejected, reason 8, seen once under load)
      listen:*) rdma res show cm_id 2>/dev/null | grep -q "state LISTEN .*:${1#listen:} " && { sleep 0.3; return 0; } ;;
      # joined, and then busy-polling its CQ: mckey's receiver reads the JOIN
      # event (a blocking read), attaches its QP and only then polls; three
      # samples in a row outside any system call (running or preempted)
      mcast:*) if grep -qi "${1#mcast:}" /proc/net/igmp 2>/dev/null; then
          read -r sc _ < /proc/$2/syscall 2>/dev/null
          case $sc in running|-1) busy=$((busy + 1)); [ $busy -ge 3 ] && return 0 ;; *) busy=0 ;; esac
        fi ;;
    esac
    alive $2 || return 1
    [ $(( $(cs) - rt )) -ge $((READY_SECS * 100)) ] && return 1
    sleep 0.1
  done
}
# perftest_race FILE: perftest -R's client (its output in FILE) lost the race
# with its server's second listen: after the control connection and both
# sides' handshake, the server creates, binds and listens on an id for the
# test QPs (perftest_communication.c rdma_cm_server_connection) while the
# client at once resolves and connects (rdma_cm_client_connection), so a REQ
# that arrives first is rejected, reason 8 (no listener). The client then
# crashes in its retry and the server waits for good: only a new run of both
# sides recovers. Either library can lose it, as server or as client.
perftest_race() {
  grep -q 'RDMA_CM_EVENT_REJECTED; error: 8' "$1" && grep -q 'Failed to connect RDMA CM events' "$1"
}
# How many times an exchange whose perftest client lost that race runs (both
# sides) in all.
RACE_TRIES=3
