//! The capabilities `mlx5dv_query_device` reads with DevX `QUERY_HCA_CAP`
//! (feature `devx`): the general device capabilities (LAG ports,
//! signature, crypto, DMA memcpy), the crypto capabilities when the device
//! has crypto, and the ODP capabilities (DC's ODP), as libmlx5 reads them
//! at context open (`get_hca_general_caps`, `get_crypto_caps` in
//! `providers/mlx5/verbs.c`).
//!
//! The bit offsets of the capability fields are the PRM's
//! (`mlx5_ifc.h`: `struct mlx5_ifc_query_hca_cap_out_bits`, whose
//! `capability` union starts at bit 0x80), counted from the header.

use super::devx::{devx_get, CmdIn};
use super::dv::Mlx5Context;
use super::dv_query::{Mlx5DeviceAttr, SigCaps};

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
    /// Fills the fields of `a` that come from the HCA capabilities, when
    /// the context has DevX (failed commands leave them zero).
    pub(super) fn apply_hca_caps(&self, a: &mut Mlx5DeviceAttr) {
        if self.state.devx {
            if let Some(out) = self.query_hca_cap(GENERAL_DEVICE) {
                apply_general_caps(a, &out);
                if a.crypto_caps.flags & CRYPTO_CAPS_CRYPTO != 0 {
                    if let Some(out) = self.query_hca_cap(CRYPTO) {
                        apply_crypto_caps(a, &out);
                    }
                }
            }
            if let Some(out) = self.query_hca_cap(ODP) {
                a.dc_odp_caps = dc_odp_caps(&out);
            }
        }
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
    use super::super::dv_query::CryptoCaps;
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
}
