//! The firmware's `QUERY_HCA_CAP` answer: capability pages that describe
//! what the model implements, and nothing else.
//!
//! rdma-core's libmlx5 asks for the general page at every context open and
//! for the atomic page in `ibv_query_device_ex` (`providers/mlx5/verbs.c`
//! `get_hca_general_caps`, `get_pci_atomic_caps`), and turns on what the
//! bits say: QoS, crypto, signature offloads, DMA MMO, general-2. A bit set
//! for something the model does not do would send libmlx5 (and rdma-core's
//! tests, which read `port_type` and friends) down paths nothing here
//! answers, so every field is zero except those below, each backed by what
//! the model executes or what its kernel side reports elsewhere
//! (`kernel.rs` `device_attr`, `objects.rs` limits).
//!
//! Layouts: Linux 6.1 `include/linux/mlx5/mlx5_ifc.h`
//! (`query_hca_cap_in`: `op_mod` at bit 0x30; `query_hca_cap_out`: the page
//! at bit 0x80; `cmd_hca_cap`, `atomic_caps`); the page types are
//! `enum mlx5_cap_type` of `include/linux/mlx5/device.h` (general 0, atomic
//! 3), `op_mod` = type << 1 | current. Maximum and current pages are the
//! same here (nothing is configurable).

/// `op_mod`'s capability types (`enum mlx5_cap_type`).
const CAP_GENERAL: u16 = 0;
const CAP_ATOMIC: u16 = 3;

/// Bit offsets in `cmd_hca_cap` (`mlx5_ifc.h`, 6.1) and widths.
mod general {
    pub(super) const LOG_MAX_SRQ_SZ: (usize, u32) = (0x80, 8);
    pub(super) const LOG_MAX_QP_SZ: (usize, u32) = (0x88, 8);
    pub(super) const LOG_MAX_QP: (usize, u32) = (0x9b, 5);
    pub(super) const LOG_MAX_SRQ: (usize, u32) = (0xab, 5);
    pub(super) const LOG_MAX_CQ_SZ: (usize, u32) = (0xc8, 8);
    pub(super) const LOG_MAX_CQ: (usize, u32) = (0xdb, 5);
    pub(super) const LOG_MAX_RA_REQ_QP: (usize, u32) = (0x14a, 6);
    pub(super) const LOG_MAX_RA_RES_QP: (usize, u32) = (0x15a, 6);
    pub(super) const PORT_TYPE: (usize, u32) = (0x1b6, 2);
    pub(super) const NUM_PORTS: (usize, u32) = (0x1b8, 8);
    pub(super) const LOG_MAX_MSG: (usize, u32) = (0x1c3, 5);
    pub(super) const CQE_VERSION: (usize, u32) = (0x1fc, 4);
    pub(super) const SCTR_DATA_CQE: (usize, u32) = (0x215, 1);
    pub(super) const ROCE: (usize, u32) = (0x21d, 1);
    pub(super) const ATOMIC: (usize, u32) = (0x21e, 1);
    pub(super) const BLOCK_LB_MC: (usize, u32) = (0x228, 1);
    pub(super) const LOG_PG_SZ: (usize, u32) = (0x258, 8);
    pub(super) const BF: (usize, u32) = (0x260, 1);
    pub(super) const LOG_BF_REG_SIZE: (usize, u32) = (0x26b, 5);
    pub(super) const LOG_MAX_PD: (usize, u32) = (0x32b, 5);
    pub(super) const LOG_MAX_UCTX: (usize, u32) = (0x463, 5);
}

/// Bit offsets in `atomic_caps`.
mod atomic {
    pub(super) const REQ_8B_ENDIANNESS_MODE: (usize, u32) = (0x40, 2);
    pub(super) const OPERATIONS: (usize, u32) = (0x90, 16);
    pub(super) const SIZE_QP: (usize, u32) = (0xb0, 16);
}

/// Where the page starts in `query_hca_cap_out` (bytes).
const PAGE: usize = 0x10;

/// What the model's capability pages depend on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    /// The newest CQE version the device writes (the kernel gives a
    /// context the lesser of this and the library's request).
    pub(crate) max_cqe_version: u32,
    /// The BlueFlame register size (0: no write-combining).
    pub(crate) bf_reg_size: u32,
    /// `log2` of the queue limits `objects.rs` enforces.
    pub(crate) log_max_qp_sz: u32,
    pub(crate) log_max_cq_sz: u32,
    pub(crate) log_max_srq_sz: u32,
}

/// Sets `width` bits at bit `bit` of a big-endian PRM page, as `MLX5_SET`.
fn set(page: &mut [u8], (bit, width): (usize, u32), value: u32) {
    for i in 0..width as usize {
        let b = bit + i;
        let v = (value >> (width as usize - 1 - i)) & 1;
        let mask = 1u8 << (7 - b % 8);
        if v == 1 {
            page[b / 8] |= mask;
        } else {
            page[b / 8] &= !mask;
        }
    }
}

/// Fills `out` (a `query_hca_cap_out` mailbox, at least 16 bytes; the
/// page is cut to what fits) with the answer to `op_mod`.
pub(crate) fn answer(caps: &Caps, op_mod: u16, out: &mut [u8]) {
    let mut page = [0u8; 0x100];
    match op_mod >> 1 {
        CAP_GENERAL => general_page(caps, &mut page),
        CAP_ATOMIC => atomic_page(&mut page),
        // Every other kind (offloads, ODP, QoS, general-2, ...): all zero,
        // none of it modelled.
        _ => {}
    }
    out.fill(0);
    if out.len() > PAGE {
        let n = (out.len() - PAGE).min(page.len());
        out[PAGE..PAGE + n].copy_from_slice(&page[..n]);
    }
}

fn general_page(caps: &Caps, p: &mut [u8]) {
    use general::*;
    // The limits `objects.rs` enforces, and the counts `device_attr`
    // reports (max_qp 2^18, max_cq 2^24, max_srq 2^23, max_pd 2^24,
    // 16 outstanding reads each way).
    set(p, LOG_MAX_QP_SZ, caps.log_max_qp_sz);
    set(p, LOG_MAX_CQ_SZ, caps.log_max_cq_sz);
    set(p, LOG_MAX_SRQ_SZ, caps.log_max_srq_sz);
    set(p, LOG_MAX_QP, 18);
    set(p, LOG_MAX_CQ, 24);
    set(p, LOG_MAX_SRQ, 23);
    set(p, LOG_MAX_PD, 24);
    set(p, LOG_MAX_RA_REQ_QP, 4);
    set(p, LOG_MAX_RA_RES_QP, 4);
    // One Ethernet (RoCE) port: `MLX5_CAP_PORT_TYPE_ETH` = 1.
    set(p, PORT_TYPE, 1);
    set(p, NUM_PORTS, 1);
    set(p, ROCE, 1);
    // Messages up to 1 GiB (the port's max_msg_sz).
    set(p, LOG_MAX_MSG, 30);
    set(p, CQE_VERSION, caps.max_cqe_version);
    // Scatter-to-CQE is executed (`exec.rs`, `objects.rs` `scatter_rooms`).
    set(p, SCTR_DATA_CQE, 1);
    // Compare-and-swap and fetch-and-add (`exec.rs`).
    set(p, ATOMIC, 1);
    // QPs may block their own multicast (`IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK`,
    // `objects.rs` `driver_create_flags`): kept trivially, the model
    // delivers no multicast at all (no ATTACH_MCAST).
    set(p, BLOCK_LB_MC, 1);
    set(p, LOG_PG_SZ, 12);
    if caps.bf_reg_size != 0 {
        set(p, BF, 1);
        set(p, LOG_BF_REG_SIZE, caps.bf_reg_size.trailing_zeros());
    }
    // DevX user contexts exist (`devx.rs`).
    set(p, LOG_MAX_UCTX, 4);
}

fn atomic_page(p: &mut [u8]) {
    use atomic::*;
    // Host-endian 8-byte atomics (`MLX5_ATOMIC_REQ_MODE_HOST_ENDIANNESS`,
    // the IB_ATOMIC_HCA of `device_attr`), compare-and-swap (bit 0) and
    // fetch-and-add (bit 1), 8-byte operands only (`MLX5_ATOMIC_SIZE_QP_8BYTES`,
    // 1 << 3): the model's `exec.rs` refuses any other local SGE.
    set(p, REQ_8B_ENDIANNESS_MODE, 1);
    set(p, OPERATIONS, 0b11);
    set(p, SIZE_QP, 1 << 3);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::mlx5::devx_fw::get;

    const CAPS: Caps = Caps {
        max_cqe_version: 1,
        bf_reg_size: 512,
        log_max_qp_sz: 15,
        log_max_cq_sz: 22,
        log_max_srq_sz: 15,
    };

    #[test]
    fn the_general_page_says_what_the_model_does_and_nothing_more() {
        let mut out = vec![0xffu8; 4112];
        answer(&CAPS, 0x1, &mut out);
        assert_eq!(out[..PAGE], [0; PAGE], "status and syndrome are zero");
        let page = &out[PAGE..];
        // Offsets written out from mlx5_ifc.h's `cmd_hca_cap` (not this
        // module's constants): port_type 0x1b6/2, num_ports 0x1b8/8,
        // cqe_version 0x1fc/4, log_max_qp_sz 0x88/8, log_bf_reg_size
        // 0x26b/5, sctr_data_cqe 0x215/1, roce 0x21d/1, atomic 0x21e/1,
        // block_lb_mc 0x228/1, end_pad 0x160/1, eth_net_offloads 0x21c/1.
        assert_eq!(get(page, 0x1b6, 2), 1, "port_type: Ethernet");
        assert_eq!(get(page, 0x1b8, 8), 1, "num_ports");
        assert_eq!(get(page, 0x1fc, 4), 1, "cqe_version");
        assert_eq!(get(page, 0x88, 8), 15, "log_max_qp_sz");
        assert_eq!(get(page, 0x26b, 5), 9, "log_bf_reg_size: 512 bytes");
        assert_eq!(get(page, 0x215, 1), 1, "sctr_data_cqe");
        assert_eq!(
            (get(page, 0x21d, 1), get(page, 0x21e, 1)),
            (1, 1),
            "roce, atomic"
        );
        assert_eq!(get(page, 0x228, 1), 1, "block_lb_mc");
        // end_pad, eth_net_offloads: off (no such QP flags).
        assert_eq!((get(page, 0x160, 1), get(page, 0x21c, 1)), (0, 0));
        // Features libmlx5 reads and would turn on from a stray bit stay
        // off (rdma-core v44 `providers/mlx5/mlx5_ifc.h`): hca_cap_2,
        // dma_mmo_sq, qpc_extension, sho, qos, general_obj_types, crypto,
        // sigerr_domain_and_sig_type, dma_mmo_qp.
        for (bit, width) in [
            (0x20, 1),
            (0x153, 1),
            (0x122, 1),
            (0x217, 1),
            (0x21b, 1),
            (0x400, 32),
            (0x420, 32),
            (0x469, 1),
            (0x480, 1),
            (0x748, 1),
        ] {
            assert_eq!(get(page, bit, width), 0, "bit {bit:#x}");
        }
        let set_bits: u32 = page.iter().map(|b| b.count_ones()).sum();
        assert!(set_bits < 64, "{set_bits} bits set: only the listed fields");
    }

    #[test]
    fn the_atomic_page_and_the_rest() {
        let mut out = vec![0u8; 4112];
        answer(&CAPS, 0x7, &mut out);
        let page = &out[PAGE..];
        assert_eq!(get(page, 0x90, 16), 0b11);
        assert_eq!(get(page, 0xb0, 16), 8);
        assert_eq!(get(page, 0x40, 2), 1);
        answer(&CAPS, 0x41, &mut out); // general-2: not modelled
        assert!(out.iter().all(|&b| b == 0));
        // A short mailbox gets what fits.
        let mut short = vec![0u8; PAGE + 0x40];
        answer(&CAPS, 0x1, &mut short);
        assert_eq!(get(&short[PAGE..], 0x1b6, 2), 1, "port_type");
    }
}
