//! What an mlx5 device has, as `mlx5dv_query_device` reports it
//! ([`Mlx5Context::query_device`]).
//!
//! rdma-core's libmlx5 gathers it at context open (`mlx5_query_device_ctx`,
//! `get_hca_general_caps`, `get_crypto_caps` in `providers/mlx5/verbs.c`)
//! and answers from its cache (`_mlx5dv_query_device`, `mlx5.c`); here it is
//! gathered when asked, from the same four sources:
//!
//! - the context's `mlx5_ib_alloc_ucontext_resp` (CQE version, real-time
//!   timestamps, dynamic bfregs, flow action flags);
//! - the mlx5 part of `EX_QUERY_DEVICE`, `struct mlx5_ib_query_device_resp`,
//!   when the context says the kernel fills it (`cmds_supp_uhw` has
//!   `MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE`): multi-packet send, CQE
//!   compression and padding, credit mode, software parsing, striding RQ,
//!   tunnel offloads, DCI streams (the kernel's `mlx5_ib_query_device`);
//! - DevX `QUERY_HCA_CAP` of the general device capabilities (LAG ports,
//!   signature, crypto, DMA memcpy), of the crypto capabilities when the
//!   device has crypto, and of the ODP capabilities (DC's ODP); failures
//!   there leave the fields zero, as libmlx5 ignores them (a context
//!   without DevX cannot send them), and so does a build without the
//!   `devx` feature (`dv_query_caps.rs`);
//! - the kernel's clock pages (`clock.rs`).
//!

use zerocopy::{FromZeros, IntoBytes};

use super::dv::Mlx5Context;
use crate::{abi, error::Result};

bitflags::bitflags! {
    /// `mlx5dv_context.flags` (`enum mlx5dv_context_flags`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Mlx5DeviceFlags: u64 {
        /// CQE version 1 (`MLX5DV_CONTEXT_FLAGS_CQE_V1`).
        const CQE_V1 = 1 << 0;
        /// Multi-packet send WQEs allowed.
        const MPW_ALLOWED = 1 << 2;
        /// Enhanced multi-packet send WQEs.
        const ENHANCED_MPW = 1 << 3;
        /// 128-byte CQE compression.
        const CQE_128B_COMP = 1 << 4;
        /// 128-byte CQE padding.
        const CQE_128B_PAD = 1 << 5;
        /// Packet-based credit mode.
        const PACKET_BASED_CREDIT_MODE = 1 << 6;
        /// Completion timestamps in real time.
        const REAL_TIME_TS = 1 << 7;
    }
}

/// CQE compression capabilities (`struct mlx5dv_cqe_comp_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CqeCompCaps {
    /// Most CQEs compressed into one.
    pub max_num: u32,
    /// `enum mlx5dv_cqe_comp_res_format` bits.
    pub supported_format: u32,
}

/// Software parsing capabilities (`struct mlx5dv_sw_parsing_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SwParsingCaps {
    /// `enum mlx5dv_sw_parsing_offloads` bits.
    pub sw_parsing_offloads: u32,
    /// QP types (bit per `IBV_QPT_*`).
    pub supported_qpts: u32,
}

/// Striding RQ capabilities (`struct mlx5dv_striding_rq_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
#[allow(missing_docs)] // mlx5dv.h's names
pub struct StridingRqCaps {
    pub min_single_stride_log_num_of_bytes: u32,
    pub max_single_stride_log_num_of_bytes: u32,
    pub min_single_wqe_log_num_of_strides: u32,
    pub max_single_wqe_log_num_of_strides: u32,
    pub supported_qpts: u32,
}

/// Signature offload capabilities (`struct mlx5dv_sig_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
#[allow(missing_docs)] // mlx5dv.h's names
pub struct SigCaps {
    pub block_size: u64,
    pub block_prot: u32,
    pub t10dif_bg: u16,
    pub crc_type: u16,
}

/// DCI stream capabilities (`struct mlx5dv_dci_streams_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
#[allow(missing_docs)] // mlx5dv.h's names
pub struct DciStreamsCaps {
    pub max_log_num_concurent: u8,
    pub max_log_num_errored: u8,
}

/// Crypto capabilities (`struct mlx5dv_crypto_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
#[allow(missing_docs)] // mlx5dv.h's names
pub struct CryptoCaps {
    pub failed_selftests: u16,
    pub crypto_engines: u8,
    pub wrapped_import_method: u8,
    pub log_max_num_deks: u8,
    pub flags: u32,
}

/// What [`Mlx5Context::query_device`] reports (`struct mlx5dv_context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Mlx5DeviceAttr {
    /// Device flags.
    pub flags: Mlx5DeviceFlags,
    /// CQE compression.
    pub cqe_comp_caps: CqeCompCaps,
    /// Software parsing.
    pub sw_parsing_caps: SwParsingCaps,
    /// Striding RQs.
    pub striding_rq_caps: StridingRqCaps,
    /// `enum mlx5dv_tunnel_offloads` bits.
    pub tunnel_offloads_caps: u32,
    /// Dynamic bfregs the kernel can allocate.
    pub max_dynamic_bfregs: u32,
    /// How often the kernel refreshes its clock info page at least, in ns;
    /// `None` without the page.
    pub max_clock_info_update_nsec: Option<u64>,
    /// `enum mlx5dv_flow_action_cap_flags` bits.
    pub flow_action_flags: u32,
    /// DC transport ODP capabilities (`IBV_ODP_SUPPORT_*` bits).
    pub dc_odp_caps: u32,
    /// Whether the device's free-running clock is mapped
    /// ([`Mlx5Context::core_clock_ptr`]).
    pub hca_core_clock: bool,
    /// LAG ports; `None` when the device reports none.
    pub num_lag_ports: Option<u8>,
    /// Signature offload.
    pub sig_caps: SigCaps,
    /// DCI streams.
    pub dci_streams_caps: DciStreamsCaps,
    /// The largest DMA memcpy work request, in bytes (0: none).
    pub max_wr_memcpy_length: u64,
    /// Crypto offload.
    pub crypto_caps: CryptoCaps,
}
impl Mlx5Context<'_> {
    /// What the device has, like `mlx5dv_query_device` with every
    /// `comp_mask` bit asked for (see the module doc for where each field
    /// comes from). Fails only when `EX_QUERY_DEVICE` fails.
    #[doc(alias = "mlx5dv_query_device")]
    pub fn query_device(&self) -> Result<Mlx5DeviceAttr> {
        let s = self.state;
        let mut a = Mlx5DeviceAttr::default();
        if s.cqe_version == 1 {
            a.flags |= Mlx5DeviceFlags::CQE_V1;
        }
        if s.resp.comp_mask & abi::MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS != 0 {
            a.flags |= Mlx5DeviceFlags::REAL_TIME_TS;
        }
        a.max_dynamic_bfregs = s.num_dyn_bfregs;
        a.max_clock_info_update_nsec = self.attr().max_clock_info_update_nsec;
        a.flow_action_flags = u32::from(s.resp.flow_action_flags);
        a.hca_core_clock = self.core_clock_ptr().is_some();
        if u32::from(s.resp.cmds_supp_uhw) & abi::MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE != 0 {
            let mut d = abi::Mlx5IbQueryDeviceResp::new_zeroed();
            self.context().query_device_driver(d.as_mut_bytes())?;
            apply_query_device_resp(&mut a, &d);
        }
        #[cfg(feature = "devx")]
        self.apply_hca_caps(&mut a);
        Ok(a)
    }
}

/// The fields of `mlx5_ib_query_device_resp`, as `mlx5_query_device_ctx`
/// takes them.
fn apply_query_device_resp(a: &mut Mlx5DeviceAttr, d: &abi::Mlx5IbQueryDeviceResp) {
    let mpw = d.mlx5_ib_support_multi_pkt_send_wqes;
    for (bit, flag) in [
        (abi::MLX5_IB_ALLOW_MPW, Mlx5DeviceFlags::MPW_ALLOWED),
        (abi::MLX5_IB_SUPPORT_EMPW, Mlx5DeviceFlags::ENHANCED_MPW),
    ] {
        if mpw & bit != 0 {
            a.flags |= flag;
        }
    }
    for (bit, flag) in [
        (
            abi::MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_COMP,
            Mlx5DeviceFlags::CQE_128B_COMP,
        ),
        (
            abi::MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD,
            Mlx5DeviceFlags::CQE_128B_PAD,
        ),
        (
            abi::MLX5_IB_QUERY_DEV_RESP_PACKET_BASED_CREDIT_MODE,
            Mlx5DeviceFlags::PACKET_BASED_CREDIT_MODE,
        ),
    ] {
        if d.flags & bit != 0 {
            a.flags |= flag;
        }
    }
    a.cqe_comp_caps = CqeCompCaps {
        max_num: d.cqe_comp_caps.max_num,
        supported_format: d.cqe_comp_caps.supported_format,
    };
    a.sw_parsing_caps = SwParsingCaps {
        sw_parsing_offloads: d.sw_parsing_caps.sw_parsing_offloads,
        supported_qpts: d.sw_parsing_caps.supported_qpts,
    };
    let r = &d.striding_rq_caps;
    a.striding_rq_caps = StridingRqCaps {
        min_single_stride_log_num_of_bytes: r.min_single_stride_log_num_of_bytes,
        max_single_stride_log_num_of_bytes: r.max_single_stride_log_num_of_bytes,
        min_single_wqe_log_num_of_strides: r.min_single_wqe_log_num_of_strides,
        max_single_wqe_log_num_of_strides: r.max_single_wqe_log_num_of_strides,
        supported_qpts: r.supported_qpts,
    };
    a.tunnel_offloads_caps = d.tunnel_offloads_caps;
    a.dci_streams_caps = DciStreamsCaps {
        max_log_num_concurent: d.dci_streams_caps.max_log_num_concurent,
        max_log_num_errored: d.dci_streams_caps.max_log_num_errored,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_device_response_decodes_as_libmlx5() {
        let mut d = abi::Mlx5IbQueryDeviceResp::new_zeroed();
        d.mlx5_ib_support_multi_pkt_send_wqes = abi::MLX5_IB_ALLOW_MPW | abi::MLX5_IB_SUPPORT_EMPW;
        d.flags = abi::MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD;
        d.cqe_comp_caps.max_num = 64;
        d.cqe_comp_caps.supported_format = 3;
        d.tunnel_offloads_caps = 5;
        d.dci_streams_caps.max_log_num_errored = 3;
        let mut a = Mlx5DeviceAttr::default();
        apply_query_device_resp(&mut a, &d);
        assert_eq!(
            a.flags,
            Mlx5DeviceFlags::MPW_ALLOWED
                | Mlx5DeviceFlags::ENHANCED_MPW
                | Mlx5DeviceFlags::CQE_128B_PAD
        );
        assert_eq!(
            (a.cqe_comp_caps.max_num, a.cqe_comp_caps.supported_format),
            (64, 3)
        );
        assert_eq!(a.tunnel_offloads_caps, 5);
        assert_eq!(a.dci_streams_caps.max_log_num_errored, 3);
    }
}
