/* capi/tests/c/mlx5dv.c: rdma-core 44's mlx5dv.h API on the first device
 * (the mlx5 device model under scripts/on-model.sh), printing a transcript
 * of what each call answers. scripts/rdma-core-on-model.sh runs it over
 * Debian's libibverbs + libmlx5 and over ours (libibverbs.so.1 +
 * libmlx5.so.1) and requires the same transcript: libmlx5 is the oracle.
 * Only values that do not depend on the process (no addresses, no
 * handles) are printed.
 */
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>
int main(void) {
  int n; struct ibv_device **l = ibv_get_device_list(&n);
  if (!l || !n) { printf("no devices\n"); return 1; }
  printf("is_supported %d\n", mlx5dv_is_supported(l[0]));
  struct mlx5dv_context_attr a = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX };
  struct ibv_context *c = mlx5dv_open_device(l[0], &a);
  if (!c) { perror("open"); return 1; }
  struct mlx5dv_context d; memset(&d, 0xab, sizeof d); d.comp_mask = ~0ULL;
  int r = mlx5dv_query_device(c, &d);
  printf("query %d version %u flags %#llx comp_mask %#llx\n", r, d.version, (unsigned long long)d.flags, (unsigned long long)d.comp_mask);
  printf("cqe_comp %u %#x swp %#x %#x striding %u %u %u %u %#x tunnel %#x dynbf %u clk %llu flow %#x dcodp %#x hcaclk %d lag %u\n",
    d.cqe_comp_caps.max_num, d.cqe_comp_caps.supported_format, d.sw_parsing_caps.sw_parsing_offloads, d.sw_parsing_caps.supported_qpts,
    d.striding_rq_caps.min_single_stride_log_num_of_bytes, d.striding_rq_caps.max_single_stride_log_num_of_bytes,
    d.striding_rq_caps.min_single_wqe_log_num_of_strides, d.striding_rq_caps.max_single_wqe_log_num_of_strides, d.striding_rq_caps.supported_qpts,
    d.tunnel_offloads_caps, d.max_dynamic_bfregs, (unsigned long long)d.max_clock_info_update_nsec, d.flow_action_flags, d.dc_odp_caps,
    d.hca_core_clock != NULL, d.num_lag_ports);
  printf("sig %#llx %#x %#x %#x dci %u %u memcpy %zu crypto %u %u %u %u %#x\n", (unsigned long long)d.sig_caps.block_size, d.sig_caps.block_prot,
    d.sig_caps.t10dif_bg, d.sig_caps.crc_type, d.dci_streams_caps.max_log_num_concurent, d.dci_streams_caps.max_log_num_errored,
    d.max_wr_memcpy_length, d.crypto_caps.failed_selftests, d.crypto_caps.crypto_engines, d.crypto_caps.wrapped_import_method,
    d.crypto_caps.log_max_num_deks, d.crypto_caps.flags);
  struct mlx5dv_clock_info ci; r = mlx5dv_get_clock_info(c, &ci);
  printf("clock_info %d mult %u shift %u mask %#llx\n", r, ci.mult, ci.shift, (unsigned long long)ci.mask);
  struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
  r = ibv_query_rt_values_ex(c, &v);
  printf("rt_values %d comp_mask %#x nonzero %d\n", r, v.comp_mask, v.raw_clock.tv_nsec != 0 || v.raw_clock.tv_sec != 0);
  return 0;
}
