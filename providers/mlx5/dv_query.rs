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
//!   without DevX cannot send them);
//! - the kernel's clock pages (`clock.rs`).
//!
//! The bit offsets of the capability fields are the PRM's
//! (`mlx5_ifc.h`: `struct mlx5_ifc_query_hca_cap_out_bits`, whose
//! `capability` union starts at bit 0x80), counted from the header.

use zerocopy::{FromZeros, IntoBytes};

use super::devx::{devx_get, CmdIn};
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

/// `MLX5_CMD_OP_QUERY_HCA_CAP`.
const QUERY_HCA_CAP: u16 = 0x100;
/// `op_mod`s: the capability group `<< 1 | HCA_CAP_OPMOD_GET_CUR`.
const GENERAL_DEVICE: u16 = 0x1;
const ODP: u16 = 2 << 1 | 1;
const CRYPTO: u16 = 0x1a << 1 | 1;
/// `query_hca_cap_in` is 16 bytes, `query_hca_cap_out` 0x1010.
const CAP_IN_LEN: usize = 16;
const CAP_OUT_LEN: usize = 0x1010;

/// Bit offsets (and widths) in `query_hca_cap_out` (the capability union
/// at 0x80 plus the field's offset in its PRM struct, `mlx5_ifc.h`).
mod bit {
    pub const CAP: usize = 128;
    // struct mlx5_ifc_cmd_hca_cap_bits
    pub const LOG_DMA_MMO_MAX_SIZE: (usize, u32) = (CAP + 107, 5);
    pub const SIG_CRC64_XP10: usize = CAP + 327;
    pub const SIG_CRC32C: usize = CAP + 328;
    pub const DMA_MMO_SQ: usize = CAP + 339;
    pub const SIG_BLOCK_4048: usize = CAP + 496;
    pub const SHO: usize = CAP + 535;
    pub const NUM_LAG_PORTS: (usize, u32) = (CAP + 636, 4);
    pub const AES_XTS_SINGLE_BLOCK_LE_TWEAK: usize = CAP + 1009;
    pub const AES_XTS_MULTI_BLOCK_BE_TWEAK: usize = CAP + 1010;
    pub const CRYPTO: usize = CAP + 1129;
    pub const SIGERR_DOMAIN_AND_SIG_TYPE: usize = CAP + 1152;
    pub const DMA_MMO_QP: usize = CAP + 1864;
    // struct mlx5_ifc_odp_cap_bits: dc_odp_caps (send, receive, write, read)
    pub const DC_ODP_SEND: usize = CAP + 256;
    // struct mlx5_ifc_crypto_caps_bits
    pub const WRAPPED_CRYPTO_OPERATIONAL: usize = CAP;
    pub const WRAPPED_CRYPTO_GOING_TO_COMMISSIONING: usize = CAP + 1;
    pub const WRAPPED_IMPORT_METHOD: (usize, u32) = (CAP + 24, 8);
    pub const LOG_MAX_NUM_DEKS: (usize, u32) = (CAP + 43, 5);
    pub const FAILED_SELFTESTS: (usize, u32) = (CAP + 64, 16);
}

/// rdma-core's `MLX5_DMA_MMO_MAX_SIZE` (a device that reports no size).
const DMA_MMO_MAX_SIZE: u64 = 1 << 31;
/// `MLX5_CRYPTO_CAPS_WRAPPED_IMPORT_METHOD_AES` (`mlx5_ifc.h`).
const WRAPPED_IMPORT_METHOD_AES: u64 = 0x4;

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
        if s.devx {
            if let Some(out) = self.query_hca_cap(GENERAL_DEVICE) {
                apply_general_caps(&mut a, &out);
                if a.crypto_caps.flags & CRYPTO_CAPS_CRYPTO != 0 {
                    if let Some(out) = self.query_hca_cap(CRYPTO) {
                        apply_crypto_caps(&mut a, &out);
                    }
                }
            }
            if let Some(out) = self.query_hca_cap(ODP) {
                a.dc_odp_caps = dc_odp_caps(&out);
            }
        }
        Ok(a)
    }

    /// The current capabilities of one group (`op_mod`), or `None` when
    /// the command fails.
    fn query_hca_cap(&self, op_mod: u16) -> Option<Vec<u8>> {
        let devx = self.devx().ok()?;
        let mut cmd_in = [0u8; CAP_IN_LEN];
        CmdIn {
            opcode: QUERY_HCA_CAP,
            op_mod,
            obj_id: 0,
        }
        .write(&mut cmd_in);
        let mut out = vec![0u8; CAP_OUT_LEN];
        devx.general_cmd(&cmd_in, &mut out).ok()?;
        Some(out)
    }
}

/// `MLX5DV_CRYPTO_CAPS_CRYPTO`.
const CRYPTO_CAPS_CRYPTO: u32 = 1 << 0;

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

fn bit_set(out: &[u8], at: usize) -> bool {
    devx_get(out, at, 1).unwrap_or(0) != 0
}

fn field(out: &[u8], (at, width): (usize, u32)) -> u64 {
    devx_get(out, at, width).unwrap_or(0)
}

/// The general device capabilities, as `get_hca_general_caps` and
/// `get_hca_sig_caps` take them.
fn apply_general_caps(a: &mut Mlx5DeviceAttr, out: &[u8]) {
    let lag = field(out, bit::NUM_LAG_PORTS) as u8;
    a.num_lag_ports = (lag != 0).then_some(lag);
    if bit_set(out, bit::SHO) && bit_set(out, bit::SIGERR_DOMAIN_AND_SIG_TYPE) {
        // MLX5DV_SIG_PROT_CAP_T10DIF | _CRC; block sizes 512, 520, 4096,
        // 4160; both T10-DIF guards; CRC32.
        let mut sig = SigCaps {
            block_size: 1 << 0 | 1 << 1 | 1 << 3 | 1 << 4,
            block_prot: 1 << 0 | 1 << 1,
            t10dif_bg: 1 << 0 | 1 << 1,
            crc_type: 1 << 0,
        };
        if bit_set(out, bit::SIG_BLOCK_4048) {
            sig.block_size |= 1 << 2;
        }
        if bit_set(out, bit::SIG_CRC32C) {
            sig.crc_type |= 1 << 1;
        }
        if bit_set(out, bit::SIG_CRC64_XP10) {
            sig.crc_type |= 1 << 2;
        }
        a.sig_caps = sig;
    }
    if bit_set(out, bit::CRYPTO) {
        a.crypto_caps.flags |= CRYPTO_CAPS_CRYPTO;
    }
    // MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_SINGLE_BLOCK (2), _MULTI_BLOCK (4).
    if bit_set(out, bit::AES_XTS_SINGLE_BLOCK_LE_TWEAK) {
        a.crypto_caps.crypto_engines |= 1 << 1;
    }
    if bit_set(out, bit::AES_XTS_MULTI_BLOCK_BE_TWEAK) {
        a.crypto_caps.crypto_engines |= 1 << 1 | 1 << 2;
    }
    if bit_set(out, bit::DMA_MMO_SQ) || bit_set(out, bit::DMA_MMO_QP) {
        let log = field(out, bit::LOG_DMA_MMO_MAX_SIZE);
        a.max_wr_memcpy_length = if log != 0 { 1 << log } else { DMA_MMO_MAX_SIZE };
    }
}

/// The crypto capabilities, as `get_crypto_caps` takes them.
fn apply_crypto_caps(a: &mut Mlx5DeviceAttr, out: &[u8]) {
    let c = &mut a.crypto_caps;
    if bit_set(out, bit::WRAPPED_CRYPTO_OPERATIONAL) {
        c.flags |= 1 << 1;
    }
    if bit_set(out, bit::WRAPPED_CRYPTO_GOING_TO_COMMISSIONING) {
        c.flags |= 1 << 2;
    }
    if field(out, bit::WRAPPED_IMPORT_METHOD) & WRAPPED_IMPORT_METHOD_AES != 0 {
        c.wrapped_import_method |= 1 << 0;
    }
    c.log_max_num_deks = field(out, bit::LOG_MAX_NUM_DEKS) as u8;
    c.failed_selftests = field(out, bit::FAILED_SELFTESTS) as u16;
}

/// `get_dc_odp_caps`: `IBV_ODP_SUPPORT_SEND`, `_RECV`, `_WRITE`, `_READ`
/// (1, 2, 4, 8) from the DC ODP caps' first four bits.
fn dc_odp_caps(out: &[u8]) -> u32 {
    (0..4)
        .filter(|i| bit_set(out, bit::DC_ODP_SEND + i))
        .fold(0, |acc, i| acc | 1 << i)
}

#[cfg(test)]
mod tests {
    use super::super::devx::devx_set;
    use super::*;

    /// A `query_hca_cap_out` with the given bits set.
    fn caps(bits: &[(usize, u32, u64)]) -> Vec<u8> {
        let mut out = vec![0u8; CAP_OUT_LEN];
        for &(at, width, v) in bits {
            assert!(devx_set(&mut out, at, width, v));
        }
        out
    }

    #[test]
    fn the_offsets_are_the_prms() {
        // Counted from mlx5_ifc.h (rdma-core 44) by summing the widths of
        // the fields before each one: the capability union starts at bit
        // 128 of query_hca_cap_out.
        assert_eq!(bit::NUM_LAG_PORTS, (764, 4));
        assert_eq!(bit::SHO, 663);
        assert_eq!(bit::SIGERR_DOMAIN_AND_SIG_TYPE, 1280);
        assert_eq!(bit::CRYPTO, 1257);
        assert_eq!(bit::LOG_DMA_MMO_MAX_SIZE, (235, 5));
        assert_eq!(bit::DMA_MMO_SQ, 467);
        assert_eq!(bit::DMA_MMO_QP, 1992);
        assert_eq!(bit::SIG_BLOCK_4048, 624);
        assert_eq!(bit::SIG_CRC32C, 456);
        assert_eq!(bit::SIG_CRC64_XP10, 455);
        assert_eq!(bit::AES_XTS_SINGLE_BLOCK_LE_TWEAK, 1137);
        assert_eq!(bit::DC_ODP_SEND, 384);
        assert_eq!(bit::WRAPPED_IMPORT_METHOD, (152, 8));
        assert_eq!(bit::LOG_MAX_NUM_DEKS, (171, 5));
        assert_eq!(bit::FAILED_SELFTESTS, (192, 16));
    }

    #[test]
    fn general_caps_decode_as_libmlx5() {
        let mut a = Mlx5DeviceAttr::default();
        apply_general_caps(&mut a, &caps(&[]));
        assert_eq!(a, Mlx5DeviceAttr::default());
        let out = caps(&[
            (bit::NUM_LAG_PORTS.0, 4, 2),
            (bit::SHO, 1, 1),
            (bit::SIGERR_DOMAIN_AND_SIG_TYPE, 1, 1),
            (bit::SIG_CRC32C, 1, 1),
            (bit::CRYPTO, 1, 1),
            (bit::AES_XTS_MULTI_BLOCK_BE_TWEAK, 1, 1),
            (bit::DMA_MMO_QP, 1, 1),
        ]);
        apply_general_caps(&mut a, &out);
        assert_eq!(a.num_lag_ports, Some(2));
        // 512 | 520 | 4096 | 4160 (bits 0, 1, 3, 4); CRC32 | CRC32C.
        assert_eq!(a.sig_caps.block_size, 0b11011);
        assert_eq!(a.sig_caps.crc_type, 0b11);
        assert_eq!(a.crypto_caps.flags, CRYPTO_CAPS_CRYPTO);
        assert_eq!(a.crypto_caps.crypto_engines, 0b110);
        // No size reported: rdma-core's default, 2 GiB.
        assert_eq!(a.max_wr_memcpy_length, 1 << 31);
        let out = caps(&[
            (bit::DMA_MMO_SQ, 1, 1),
            (bit::LOG_DMA_MMO_MAX_SIZE.0, 5, 20),
        ]);
        apply_general_caps(&mut a, &out);
        assert_eq!(a.max_wr_memcpy_length, 1 << 20);
        // Signature needs both bits.
        let mut b = Mlx5DeviceAttr::default();
        apply_general_caps(&mut b, &caps(&[(bit::SHO, 1, 1)]));
        assert_eq!(b.sig_caps, SigCaps::default());
    }

    #[test]
    fn crypto_and_odp_caps_decode_as_libmlx5() {
        let mut a = Mlx5DeviceAttr::default();
        apply_crypto_caps(
            &mut a,
            &caps(&[
                (bit::WRAPPED_CRYPTO_OPERATIONAL, 1, 1),
                (bit::WRAPPED_IMPORT_METHOD.0, 8, 0x4),
                (bit::LOG_MAX_NUM_DEKS.0, 5, 9),
                (bit::FAILED_SELFTESTS.0, 16, 0x1234),
            ]),
        );
        assert_eq!(
            a.crypto_caps,
            CryptoCaps {
                failed_selftests: 0x1234,
                crypto_engines: 0,
                wrapped_import_method: 1,
                log_max_num_deks: 9,
                flags: 1 << 1,
            }
        );
        // send and read: IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_READ.
        let out = caps(&[(bit::DC_ODP_SEND, 1, 1), (bit::DC_ODP_SEND + 3, 1, 1)]);
        assert_eq!(dc_odp_caps(&out), 0b1001);
    }

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
