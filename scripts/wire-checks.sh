# scripts/wire-checks.sh: host-side checks shared by scripts/rdmacm-guest.sh
# and scripts/two-host.sh (sourced; bash).

# rping_lines PREFIX COUNT SIZE: the lines rping -v prints for pings 0..COUNT-1
# (rping.c: "rdma-ping-%d: " then letters from 'A'+ping, wrapping after 'z',
# up to SIZE-1 bytes)
rping_lines() {
  awk -v pre="$1" -v n="$2" -v size="$3" 'BEGIN {
    for (k = 0; k < n; k++) {
      s = "rdma-ping-" k ": "; c = 65 + k % 58
      for (i = length(s); i < size - 1; i++) { s = s sprintf("%c", c); c++; if (c > 122) c = 65 }
      print pre s
    } }'
}
# perf_row BYTES ITERS < output: the figures of perftest's result row
perf_row() { awk -v b="$1" -v n="$2" '$1 == b && $2 == n && NF >= 5 { print; exit }'; }
# problem TEXT: one reason the exchange being checked failed (PROBLEMS empty:
# it passed)
problem() { PROBLEMS+=("$*"); }
