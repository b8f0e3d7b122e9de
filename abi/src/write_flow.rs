//! Flow steering structs of the extended `write()` ABI (`IB_USER_VERBS_EX_CMD_CREATE_FLOW`,
//! `<rdma/ib_user_verbs.h>`): the spec header, every filter and spec type, and the flow attr.

use crate::layout::abi_structs;

abi_structs! {
    /// `struct ib_uverbs_flow_spec_hdr` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Followed in the same buffer by the flexible array `flow_spec_data[]` (`__aligned_u64`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsFlowSpecHdr: "struct ib_uverbs_flow_spec_hdr" {
        pub type_: u32 = "type",
        pub size: u16,
        pub reserved: u16,
    }

    /// `struct ib_uverbs_flow_eth_filter` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowEthFilter: "struct ib_uverbs_flow_eth_filter" {
        pub dst_mac: [u8; 6],
        pub src_mac: [u8; 6],
        /// Big-endian (`__be16`).
        pub ether_type: u16,
        /// Big-endian (`__be16`).
        pub vlan_tag: u16,
    }

    /// `struct ib_uverbs_flow_spec_eth` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecEth: "struct ib_uverbs_flow_spec_eth" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
        pub val: IbUverbsFlowEthFilter,
        pub mask: IbUverbsFlowEthFilter,
    }

    /// `struct ib_uverbs_flow_ipv4_filter` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowIpv4Filter: "struct ib_uverbs_flow_ipv4_filter" {
        /// Big-endian (`__be32`).
        pub src_ip: u32,
        /// Big-endian (`__be32`).
        pub dst_ip: u32,
        pub proto: u8,
        pub tos: u8,
        pub ttl: u8,
        pub flags: u8,
    }

    /// `struct ib_uverbs_flow_spec_ipv4` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecIpv4: "struct ib_uverbs_flow_spec_ipv4" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
        pub val: IbUverbsFlowIpv4Filter,
        pub mask: IbUverbsFlowIpv4Filter,
    }

    /// `struct ib_uverbs_flow_tcp_udp_filter` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowTcpUdpFilter: "struct ib_uverbs_flow_tcp_udp_filter" {
        /// Big-endian (`__be16`).
        pub dst_port: u16,
        /// Big-endian (`__be16`).
        pub src_port: u16,
    }

    /// `struct ib_uverbs_flow_spec_tcp_udp` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecTcpUdp: "struct ib_uverbs_flow_spec_tcp_udp" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
        pub val: IbUverbsFlowTcpUdpFilter,
        pub mask: IbUverbsFlowTcpUdpFilter,
    }

    /// `struct ib_uverbs_flow_ipv6_filter` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowIpv6Filter: "struct ib_uverbs_flow_ipv6_filter" {
        pub src_ip: [u8; 16],
        pub dst_ip: [u8; 16],
        /// Big-endian (`__be32`).
        pub flow_label: u32,
        pub next_hdr: u8,
        pub traffic_class: u8,
        pub hop_limit: u8,
        pub reserved: u8,
    }

    /// `struct ib_uverbs_flow_spec_ipv6` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecIpv6: "struct ib_uverbs_flow_spec_ipv6" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
        pub val: IbUverbsFlowIpv6Filter,
        pub mask: IbUverbsFlowIpv6Filter,
    }

    /// `struct ib_uverbs_flow_spec_action_tag` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecActionTag: "struct ib_uverbs_flow_spec_action_tag" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
        pub tag_id: u32,
        pub reserved1: u32,
    }

    /// `struct ib_uverbs_flow_spec_action_drop` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecActionDrop: "struct ib_uverbs_flow_spec_action_drop" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
    }

    /// `struct ib_uverbs_flow_spec_action_handle` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecActionHandle: "struct ib_uverbs_flow_spec_action_handle" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
        pub handle: u32,
        pub reserved1: u32,
    }

    /// `struct ib_uverbs_flow_spec_action_count` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecActionCount: "struct ib_uverbs_flow_spec_action_count" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
        pub handle: u32,
        pub reserved1: u32,
    }

    /// `struct ib_uverbs_flow_tunnel_filter` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowTunnelFilter: "struct ib_uverbs_flow_tunnel_filter" {
        /// Big-endian (`__be32`).
        pub tunnel_id: u32,
    }

    /// `struct ib_uverbs_flow_spec_tunnel` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecTunnel: "struct ib_uverbs_flow_spec_tunnel" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
        pub val: IbUverbsFlowTunnelFilter,
        pub mask: IbUverbsFlowTunnelFilter,
    }

    /// `struct ib_uverbs_flow_spec_esp_filter` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecEspFilter: "struct ib_uverbs_flow_spec_esp_filter" {
        pub spi: u32,
        pub seq: u32,
    }

    /// `struct ib_uverbs_flow_spec_esp` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecEsp: "struct ib_uverbs_flow_spec_esp" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
        pub val: IbUverbsFlowSpecEspFilter,
        pub mask: IbUverbsFlowSpecEspFilter,
    }

    /// `struct ib_uverbs_flow_gre_filter` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowGreFilter: "struct ib_uverbs_flow_gre_filter" {
        /// Big-endian (`__be16`).
        pub c_ks_res0_ver: u16,
        /// Big-endian (`__be16`).
        pub protocol: u16,
        /// Big-endian (`__be32`).
        pub key: u32,
    }

    /// `struct ib_uverbs_flow_spec_gre` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecGre: "struct ib_uverbs_flow_spec_gre" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
        pub val: IbUverbsFlowGreFilter,
        pub mask: IbUverbsFlowGreFilter,
    }

    /// `struct ib_uverbs_flow_mpls_filter` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowMplsFilter: "struct ib_uverbs_flow_mpls_filter" {
        /// Big-endian (`__be32`).
        pub label: u32,
    }

    /// `struct ib_uverbs_flow_spec_mpls` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsFlowSpecMpls: "struct ib_uverbs_flow_spec_mpls" {
        /// C anonymous union of `hdr`, `type`, `size`, `reserved`.
        /// Represented as its member `hdr`.
        pub hdr: IbUverbsFlowSpecHdr,
        pub val: IbUverbsFlowMplsFilter,
        pub mask: IbUverbsFlowMplsFilter,
    }

    /// `struct ib_uverbs_flow_attr` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Followed in the same buffer by the flexible array `flow_specs[]` (`struct ib_uverbs_flow_spec_hdr`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsFlowAttr: "struct ib_uverbs_flow_attr" {
        pub type_: u32 = "type",
        pub size: u16,
        pub priority: u16,
        pub num_of_specs: u8,
        pub reserved: [u8; 2],
        pub port: u8,
        pub flags: u32,
    }

    /// `struct ib_uverbs_create_flow` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsCreateFlow: "struct ib_uverbs_create_flow" {
        pub comp_mask: u32,
        pub qp_handle: u32,
        pub flow_attr: IbUverbsFlowAttr,
    }

    /// `struct ib_uverbs_create_flow_resp` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsCreateFlowResp: "struct ib_uverbs_create_flow_resp" {
        pub comp_mask: u32,
        pub flow_handle: u32,
    }

    /// `struct ib_uverbs_destroy_flow` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsDestroyFlow: "struct ib_uverbs_destroy_flow" {
        pub comp_mask: u32,
        pub flow_handle: u32,
    }
}
