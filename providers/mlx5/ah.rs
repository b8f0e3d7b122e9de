//! mlx5 address handles: the address vector a UD send WQE carries, built as
//! rdma-core's `mlx5_create_ah` builds it (`providers/mlx5/verbs.c`).
//!
//! RoCE (Ethernet link layer): the UDP source port of RoCE v2 in `rlid`
//! (`mlx5_ah_set_udp_sport`), the SL in bits 1..3 of `stat_rate_sl`, the
//! destination MAC the kernel resolved (`mlx5_ib_create_ah_resp.dmac`), and
//! no GRH bit (RoCE packets always carry one). InfiniBand: DLID, path bits,
//! the SL in bits 0..3, and the GRH bit when global. A global route adds the
//! traffic class, hop limit, `grh << 30 | sgid_index << 20 | flow_label` and
//! the destination GID. The link layer is told by the DLID: RoCE has none.

use super::wqe::Av;
use crate::AhAttr;

/// An mlx5 AH's driver data: the address vector UD sends carry, and its 48
/// wire bytes (`struct mlx5_wqe_av`) at a stable address for the AH's
/// direct view (`mlx5dv_ah.av`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mlx5Ah {
    pub(crate) av: Av,
    pub(crate) wire: [u8; 48],
}

impl Mlx5Ah {
    pub(crate) fn new(av: Av) -> Self {
        Mlx5Ah {
            wire: av.encode(),
            av,
        }
    }
}

/// The static rate an AV carries (`ah_attr_to_mlx5_rate`: the IB rate
/// enum offset by `MLX5_STAT_RATE_OFFSET`, 0 for the port's rate).
fn av_rate(static_rate: u8) -> u8 {
    if static_rate == 0 {
        0
    } else {
        static_rate.saturating_add(5).min(0xf)
    }
}

/// The UDP source port of a RoCE v2 AH (`ibv_flow_label_to_udp_sport`,
/// with a fixed port for a zero flow label where rdma-core picks one at
/// random).
fn udp_sport(flow_label: u32) -> u16 {
    let fl = flow_label & 0xf_ffff;
    let low = (fl & 0x3fff) ^ ((fl & 0xf_c000) >> 14);
    if fl == 0 {
        0xc000 | 0x1234
    } else {
        (low | 0xc000) as u16
    }
}

/// The address vector of an AH, as `mlx5_create_ah` builds it. A RoCE
/// port is recognised by a zero DLID (RoCE has no LIDs).
pub(crate) fn build_av(attr: &AhAttr, dmac: [u8; 6]) -> Av {
    let is_eth = attr.dlid == 0;
    let rate = av_rate(attr.static_rate) << 4;
    let mut av = Av::default();
    let grh_bit: u32 = if is_eth {
        if let Some(g) = &attr.grh {
            av.rlid = udp_sport(g.flow_label);
        }
        av.stat_rate_sl = rate | ((attr.sl & 0x7) << 1);
        av.rmac = dmac;
        0
    } else {
        av.fl_mlid = attr.src_path_bits & 0x7f;
        av.rlid = attr.dlid;
        av.stat_rate_sl = rate | (attr.sl & 0xf);
        1
    };
    if let Some(g) = &attr.grh {
        av.tclass = g.traffic_class;
        av.hop_limit = g.hop_limit;
        av.grh_gid_fl = grh_bit << 30 | u32::from(g.sgid_index) << 20 | (g.flow_label & 0xf_ffff);
        av.rgid = g.dgid.0;
    }
    av
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Gid, GlobalRoute};

    #[test]
    fn roce_and_ib_vectors_follow_mlx5_create_ah() {
        let dgid = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        let attr = AhAttr {
            grh: Some(GlobalRoute {
                dgid,
                flow_label: 0x12345,
                sgid_index: 3,
                hop_limit: 64,
                traffic_class: 0x20,
            }),
            dlid: 0,
            sl: 5,
            src_path_bits: 0,
            static_rate: 0,
            port_num: 1,
        };
        let av = build_av(&attr, [1, 2, 3, 4, 5, 6]);
        assert_eq!(av.stat_rate_sl, 5 << 1);
        assert_eq!(av.rmac, [1, 2, 3, 4, 5, 6]);
        // ibv_flow_label_to_udp_sport(0x12345): (0x2345 ^ 0x4) | 0xc000
        assert_eq!(av.rlid, 0xe341);
        assert_eq!(av.grh_gid_fl, 3 << 20 | 0x12345);
        assert_eq!((av.tclass, av.hop_limit, av.rgid), (0x20, 64, dgid.0));
        let ib = AhAttr {
            dlid: 0x17,
            sl: 9,
            src_path_bits: 0x81,
            static_rate: 3,
            ..attr
        };
        let av = build_av(&ib, [0; 6]);
        assert_eq!(av.stat_rate_sl, (3 + 5) << 4 | 9);
        assert_eq!((av.rlid, av.fl_mlid), (0x17, 0x01));
        assert_eq!(av.grh_gid_fl, 1 << 30 | 3 << 20 | 0x12345);
        assert_eq!(av.rmac, [0; 6]);
    }
}
