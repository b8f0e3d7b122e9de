//! The capability flags of the device and port queries, under libibverbs'
//! names: `enum ibv_device_cap_flags` and the `IBV_DEVICE_*` defines above
//! bit 31, `enum ibv_port_cap_flags` and `enum ibv_port_cap_flags2`
//! (`libibverbs/verbs.h`), with the kernel's widths (`device_cap_flags_ex`
//! is 64 bits in `struct ib_uverbs_ex_query_device_resp`).
//!
//! Every set keeps the bits it does not name (`const _ = !0`): what the
//! kernel reports survives a round trip, and `bits()` is the raw value.

use bitflags::bitflags;

/// Declares [`DeviceCapFlags`] and [`DeviceCapFlagsEx`] from one list of
/// the 32-bit flags: the extended set has the same names, and more.
macro_rules! device_cap_flags {
    ($($(#[$m:ident $($a:tt)*])* $name:ident = $bit:literal;)*) => {
        bitflags! {
            /// The device's capabilities, `device_cap_flags` of
            /// `struct ibv_device_attr` (`enum ibv_device_cap_flags`): the
            /// low 32 bits of the kernel's flags. [`DeviceCapFlagsEx`] has
            /// all 64.
            #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
            pub struct DeviceCapFlags: u32 {
                $($(#[$m $($a)*])* const $name = 1 << $bit;)*
                const _ = !0;
            }
        }

        bitflags! {
            /// The device's capabilities, all 64 bits:
            /// `device_cap_flags_ex` of `struct ibv_device_attr_ex`. The
            /// names of [`DeviceCapFlags`], and the flags above bit 31
            /// (`IBV_DEVICE_RAW_SCATTER_FCS` and on; the kernel's `enum
            /// ib_uverbs_device_cap_flags`).
            #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
            pub struct DeviceCapFlagsEx: u64 {
                $($(#[$m $($a)*])* const $name = 1 << $bit;)*
                /// The device can scatter the Ethernet FCS into receive
                /// buffers (deprecated by the kernel for the raw packet
                /// caps): `IBV_DEVICE_RAW_SCATTER_FCS`.
                #[doc(alias = "IBV_DEVICE_RAW_SCATTER_FCS")]
                const RAW_SCATTER_FCS = 1 << 34;
                /// Receive buffers may be padded up to the end of the cache
                /// line (`IBV_DEVICE_PCI_WRITE_END_PADDING`).
                #[doc(alias = "IBV_DEVICE_PCI_WRITE_END_PADDING")]
                const PCI_WRITE_END_PADDING = 1 << 36;
                /// RDMA FLUSH to the global visibility point
                /// (`IB_UVERBS_DEVICE_FLUSH_GLOBAL`, Linux 6.2+; no
                /// libibverbs name).
                #[doc(alias = "IB_UVERBS_DEVICE_FLUSH_GLOBAL")]
                const FLUSH_GLOBAL = 1 << 38;
                /// RDMA FLUSH to persistence
                /// (`IB_UVERBS_DEVICE_FLUSH_PERSISTENT`, Linux 6.2+; no
                /// libibverbs name).
                #[doc(alias = "IB_UVERBS_DEVICE_FLUSH_PERSISTENT")]
                const FLUSH_PERSISTENT = 1 << 39;
                /// RDMA atomic write (`IB_UVERBS_DEVICE_ATOMIC_WRITE`,
                /// Linux 6.2+; no libibverbs name).
                #[doc(alias = "IB_UVERBS_DEVICE_ATOMIC_WRITE")]
                const ATOMIC_WRITE = 1 << 40;
                /// A confidential-computing guest whose DMA goes through
                /// bounce buffers (`IBV_DEVICE_CC_DMA_BOUNCE`, rdma-core
                /// 64+; the kernel's `IB_UVERBS_DEVICE_CC_DMA_BOUNCE`).
                #[doc(alias = "IBV_DEVICE_CC_DMA_BOUNCE")]
                #[doc(alias = "IB_UVERBS_DEVICE_CC_DMA_BOUNCE")]
                const CC_DMA_BOUNCE = 1 << 41;
                const _ = !0;
            }
        }

        impl From<DeviceCapFlags> for DeviceCapFlagsEx {
            /// The same bits, widened.
            fn from(f: DeviceCapFlags) -> Self {
                DeviceCapFlagsEx::from_bits_retain(u64::from(f.bits()))
            }
        }
    };
}

device_cap_flags! {
    /// A QP's or SRQ's work request limits can be resized
    /// (`IBV_DEVICE_RESIZE_MAX_WR`).
    #[doc(alias = "IBV_DEVICE_RESIZE_MAX_WR")]
    RESIZE_MAX_WR = 0;
    /// The P_Key violation counter is supported (`IBV_DEVICE_BAD_PKEY_CNTR`).
    #[doc(alias = "IBV_DEVICE_BAD_PKEY_CNTR")]
    BAD_PKEY_CNTR = 1;
    /// The Q_Key violation counter is supported (`IBV_DEVICE_BAD_QKEY_CNTR`).
    #[doc(alias = "IBV_DEVICE_BAD_QKEY_CNTR")]
    BAD_QKEY_CNTR = 2;
    /// Raw packet multicast (`IBV_DEVICE_RAW_MULTI`).
    #[doc(alias = "IBV_DEVICE_RAW_MULTI")]
    RAW_MULTI = 3;
    /// Automatic path migration (`IBV_DEVICE_AUTO_PATH_MIG`).
    #[doc(alias = "IBV_DEVICE_AUTO_PATH_MIG")]
    AUTO_PATH_MIG = 4;
    /// A QP's port can change in SQD→SQD (`IBV_DEVICE_CHANGE_PHY_PORT`).
    #[doc(alias = "IBV_DEVICE_CHANGE_PHY_PORT")]
    CHANGE_PHY_PORT = 5;
    /// UD address vectors must match the QP's port
    /// (`IBV_DEVICE_UD_AV_PORT_ENFORCE`).
    #[doc(alias = "IBV_DEVICE_UD_AV_PORT_ENFORCE")]
    UD_AV_PORT_ENFORCE = 6;
    /// A modify may name the current QP state
    /// (`IBV_DEVICE_CURR_QP_STATE_MOD`).
    #[doc(alias = "IBV_DEVICE_CURR_QP_STATE_MOD")]
    CURR_QP_STATE_MOD = 7;
    /// Ports can be shut down (`IBV_DEVICE_SHUTDOWN_PORT`).
    #[doc(alias = "IBV_DEVICE_SHUTDOWN_PORT")]
    SHUTDOWN_PORT = 8;
    /// InitTypeReply is supported (`IBV_DEVICE_INIT_TYPE`; no longer
    /// reported by the kernel).
    #[doc(alias = "IBV_DEVICE_INIT_TYPE")]
    INIT_TYPE = 9;
    /// Port-active events are generated (`IBV_DEVICE_PORT_ACTIVE_EVENT`).
    #[doc(alias = "IBV_DEVICE_PORT_ACTIVE_EVENT")]
    PORT_ACTIVE_EVENT = 10;
    /// The system image GUID is supported (`IBV_DEVICE_SYS_IMAGE_GUID`).
    #[doc(alias = "IBV_DEVICE_SYS_IMAGE_GUID")]
    SYS_IMAGE_GUID = 11;
    /// RC receive-not-ready NAKs are generated (`IBV_DEVICE_RC_RNR_NAK_GEN`).
    #[doc(alias = "IBV_DEVICE_RC_RNR_NAK_GEN")]
    RC_RNR_NAK_GEN = 12;
    /// SRQs can be resized (`IBV_DEVICE_SRQ_RESIZE`).
    #[doc(alias = "IBV_DEVICE_SRQ_RESIZE")]
    SRQ_RESIZE = 13;
    /// CQs can be armed for N completions (`IBV_DEVICE_N_NOTIFY_CQ`).
    #[doc(alias = "IBV_DEVICE_N_NOTIFY_CQ")]
    N_NOTIFY_CQ = 14;
    /// Memory windows (`IBV_DEVICE_MEM_WINDOW`).
    #[doc(alias = "IBV_DEVICE_MEM_WINDOW")]
    MEM_WINDOW = 17;
    /// UD IP checksum offload (`IBV_DEVICE_UD_IP_CSUM`).
    #[doc(alias = "IBV_DEVICE_UD_IP_CSUM")]
    UD_IP_CSUM = 18;
    /// XRC (`IBV_DEVICE_XRC`).
    #[doc(alias = "IBV_DEVICE_XRC")]
    XRC = 20;
    /// Memory management extensions: fast registration, local invalidate
    /// (`IBV_DEVICE_MEM_MGT_EXTENSIONS`).
    #[doc(alias = "IBV_DEVICE_MEM_MGT_EXTENSIONS")]
    MEM_MGT_EXTENSIONS = 21;
    /// Type 2A memory windows (`IBV_DEVICE_MEM_WINDOW_TYPE_2A`).
    #[doc(alias = "IBV_DEVICE_MEM_WINDOW_TYPE_2A")]
    MEM_WINDOW_TYPE_2A = 23;
    /// Type 2B memory windows (`IBV_DEVICE_MEM_WINDOW_TYPE_2B`).
    #[doc(alias = "IBV_DEVICE_MEM_WINDOW_TYPE_2B")]
    MEM_WINDOW_TYPE_2B = 24;
    /// RC IP checksum offload (`IBV_DEVICE_RC_IP_CSUM`).
    #[doc(alias = "IBV_DEVICE_RC_IP_CSUM")]
    RC_IP_CSUM = 25;
    /// Raw packet IP checksum offload (`IBV_DEVICE_RAW_IP_CSUM`; the
    /// kernel deprecates it for the raw packet caps).
    #[doc(alias = "IBV_DEVICE_RAW_IP_CSUM")]
    RAW_IP_CSUM = 26;
    /// Managed flow steering (`IBV_DEVICE_MANAGED_FLOW_STEERING`).
    #[doc(alias = "IBV_DEVICE_MANAGED_FLOW_STEERING")]
    MANAGED_FLOW_STEERING = 29;
}

bitflags! {
    /// A port's capabilities, `port_cap_flags` of `struct ibv_port_attr`
    /// (`enum ibv_port_cap_flags`: the InfiniBand PortInfo CapabilityMask).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct PortCapFlags: u32 {
        /// The port is the subnet manager's (`IBV_PORT_SM`).
        #[doc(alias = "IBV_PORT_SM")]
        const SM = 1 << 1;
        /// Notices are supported (`IBV_PORT_NOTICE_SUP`).
        #[doc(alias = "IBV_PORT_NOTICE_SUP")]
        const NOTICE_SUP = 1 << 2;
        /// Traps are supported (`IBV_PORT_TRAP_SUP`).
        #[doc(alias = "IBV_PORT_TRAP_SUP")]
        const TRAP_SUP = 1 << 3;
        /// Optional inter-packet delay (`IBV_PORT_OPT_IPD_SUP`).
        #[doc(alias = "IBV_PORT_OPT_IPD_SUP")]
        const OPT_IPD_SUP = 1 << 4;
        /// Automatic path migration (`IBV_PORT_AUTO_MIGR_SUP`).
        #[doc(alias = "IBV_PORT_AUTO_MIGR_SUP")]
        const AUTO_MIGR_SUP = 1 << 5;
        /// SL-to-VL mapping tables (`IBV_PORT_SL_MAP_SUP`).
        #[doc(alias = "IBV_PORT_SL_MAP_SUP")]
        const SL_MAP_SUP = 1 << 6;
        /// M_Key kept in non-volatile memory (`IBV_PORT_MKEY_NVRAM`).
        #[doc(alias = "IBV_PORT_MKEY_NVRAM")]
        const MKEY_NVRAM = 1 << 7;
        /// P_Keys kept in non-volatile memory (`IBV_PORT_PKEY_NVRAM`).
        #[doc(alias = "IBV_PORT_PKEY_NVRAM")]
        const PKEY_NVRAM = 1 << 8;
        /// LED info (`IBV_PORT_LED_INFO_SUP`).
        #[doc(alias = "IBV_PORT_LED_INFO_SUP")]
        const LED_INFO_SUP = 1 << 9;
        /// System image GUID (`IBV_PORT_SYS_IMAGE_GUID_SUP`).
        #[doc(alias = "IBV_PORT_SYS_IMAGE_GUID_SUP")]
        const SYS_IMAGE_GUID_SUP = 1 << 11;
        /// P_Key switch external port trap
        /// (`IBV_PORT_PKEY_SW_EXT_PORT_TRAP_SUP`).
        #[doc(alias = "IBV_PORT_PKEY_SW_EXT_PORT_TRAP_SUP")]
        const PKEY_SW_EXT_PORT_TRAP_SUP = 1 << 12;
        /// Extended link speeds (`IBV_PORT_EXTENDED_SPEEDS_SUP`).
        #[doc(alias = "IBV_PORT_EXTENDED_SPEEDS_SUP")]
        const EXTENDED_SPEEDS_SUP = 1 << 14;
        /// `port_cap_flags2` is valid (`IBV_PORT_CAP_MASK2_SUP`).
        #[doc(alias = "IBV_PORT_CAP_MASK2_SUP")]
        const CAP_MASK2_SUP = 1 << 15;
        /// Communication management (`IBV_PORT_CM_SUP`).
        #[doc(alias = "IBV_PORT_CM_SUP")]
        const CM_SUP = 1 << 16;
        /// SNMP tunnelling (`IBV_PORT_SNMP_TUNNEL_SUP`).
        #[doc(alias = "IBV_PORT_SNMP_TUNNEL_SUP")]
        const SNMP_TUNNEL_SUP = 1 << 17;
        /// Reinitialisation (`IBV_PORT_REINIT_SUP`).
        #[doc(alias = "IBV_PORT_REINIT_SUP")]
        const REINIT_SUP = 1 << 18;
        /// Device management (`IBV_PORT_DEVICE_MGMT_SUP`).
        #[doc(alias = "IBV_PORT_DEVICE_MGMT_SUP")]
        const DEVICE_MGMT_SUP = 1 << 19;
        /// Vendor-specific MADs (`IBV_PORT_VENDOR_CLASS_SUP`).
        #[doc(alias = "IBV_PORT_VENDOR_CLASS_SUP")]
        const VENDOR_CLASS_SUP = 1 << 20;
        /// Directed-route notices (`IBV_PORT_DR_NOTICE_SUP`).
        #[doc(alias = "IBV_PORT_DR_NOTICE_SUP")]
        const DR_NOTICE_SUP = 1 << 21;
        /// Capability-mask change notices (`IBV_PORT_CAP_MASK_NOTICE_SUP`).
        #[doc(alias = "IBV_PORT_CAP_MASK_NOTICE_SUP")]
        const CAP_MASK_NOTICE_SUP = 1 << 22;
        /// Boot management (`IBV_PORT_BOOT_MGMT_SUP`).
        #[doc(alias = "IBV_PORT_BOOT_MGMT_SUP")]
        const BOOT_MGMT_SUP = 1 << 23;
        /// Link round-trip latency (`IBV_PORT_LINK_LATENCY_SUP`).
        #[doc(alias = "IBV_PORT_LINK_LATENCY_SUP")]
        const LINK_LATENCY_SUP = 1 << 24;
        /// Client re-registration (`IBV_PORT_CLIENT_REG_SUP`).
        #[doc(alias = "IBV_PORT_CLIENT_REG_SUP")]
        const CLIENT_REG_SUP = 1 << 25;
        /// GIDs are IP addresses: RoCE v2 (`IBV_PORT_IP_BASED_GIDS`).
        #[doc(alias = "IBV_PORT_IP_BASED_GIDS")]
        const IP_BASED_GIDS = 1 << 26;
        const _ = !0;
    }
}

bitflags! {
    /// More port capabilities, `port_cap_flags2` of `struct ibv_port_attr`
    /// (`enum ibv_port_cap_flags2`: PortInfo CapabilityMask2, valid when
    /// [`PortCapFlags::CAP_MASK2_SUP`] is set).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct PortCapFlags2: u16 {
        /// NodeDescription can be set (`IBV_PORT_SET_NODE_DESC_SUP`).
        #[doc(alias = "IBV_PORT_SET_NODE_DESC_SUP")]
        const SET_NODE_DESC_SUP = 1 << 0;
        /// PortInfoExtended (`IBV_PORT_INFO_EXT_SUP`).
        #[doc(alias = "IBV_PORT_INFO_EXT_SUP")]
        const INFO_EXT_SUP = 1 << 1;
        /// Virtualisation (`IBV_PORT_VIRT_SUP`).
        #[doc(alias = "IBV_PORT_VIRT_SUP")]
        const VIRT_SUP = 1 << 2;
        /// Switch port state table (`IBV_PORT_SWITCH_PORT_STATE_TABLE_SUP`).
        #[doc(alias = "IBV_PORT_SWITCH_PORT_STATE_TABLE_SUP")]
        const SWITCH_PORT_STATE_TABLE_SUP = 1 << 3;
        /// 2x link width (`IBV_PORT_LINK_WIDTH_2X_SUP`).
        #[doc(alias = "IBV_PORT_LINK_WIDTH_2X_SUP")]
        const LINK_WIDTH_2X_SUP = 1 << 4;
        /// HDR link speed (`IBV_PORT_LINK_SPEED_HDR_SUP`).
        #[doc(alias = "IBV_PORT_LINK_SPEED_HDR_SUP")]
        const LINK_SPEED_HDR_SUP = 1 << 5;
        /// NDR link speed (`IBV_PORT_LINK_SPEED_NDR_SUP`).
        #[doc(alias = "IBV_PORT_LINK_SPEED_NDR_SUP")]
        const LINK_SPEED_NDR_SUP = 1 << 10;
        /// XDR link speed (`IBV_PORT_LINK_SPEED_XDR_SUP`).
        #[doc(alias = "IBV_PORT_LINK_SPEED_XDR_SUP")]
        const LINK_SPEED_XDR_SUP = 1 << 12;
        const _ = !0;
    }
}

#[cfg(test)]
mod tests {
    use bitflags::Flags;

    use super::*;
    use crate::abi;

    /// How many flags of `F` have names.
    fn named<F: Flags>() -> usize {
        F::FLAGS.iter().filter(|f| f.is_named()).count()
    }

    /// The flags the kernel names (`enum ib_uverbs_device_cap_flags`,
    /// `<rdma/ib_user_verbs.h>`, through `uverbs-abi`) are its values, in
    /// both widths; the others are libibverbs' (`libibverbs/verbs.h`:
    /// `IBV_DEVICE_INIT_TYPE = 1 << 9`, `IBV_DEVICE_CC_DMA_BOUNCE (1ULL <<
    /// 41)`) or the newer kernel's (rdma-core's
    /// `kernel-headers/rdma/ib_user_verbs.h`: `FLUSH_GLOBAL = 1ULL << 38`,
    /// `FLUSH_PERSISTENT = 1ULL << 39`, `ATOMIC_WRITE = 1ULL << 40`).
    #[test]
    fn device_cap_flags_are_the_c_values() {
        use DeviceCapFlags as D;
        let kernel = [
            (D::RESIZE_MAX_WR, abi::IB_UVERBS_DEVICE_RESIZE_MAX_WR),
            (D::BAD_PKEY_CNTR, abi::IB_UVERBS_DEVICE_BAD_PKEY_CNTR),
            (D::BAD_QKEY_CNTR, abi::IB_UVERBS_DEVICE_BAD_QKEY_CNTR),
            (D::RAW_MULTI, abi::IB_UVERBS_DEVICE_RAW_MULTI),
            (D::AUTO_PATH_MIG, abi::IB_UVERBS_DEVICE_AUTO_PATH_MIG),
            (D::CHANGE_PHY_PORT, abi::IB_UVERBS_DEVICE_CHANGE_PHY_PORT),
            (
                D::UD_AV_PORT_ENFORCE,
                abi::IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE,
            ),
            (
                D::CURR_QP_STATE_MOD,
                abi::IB_UVERBS_DEVICE_CURR_QP_STATE_MOD,
            ),
            (D::SHUTDOWN_PORT, abi::IB_UVERBS_DEVICE_SHUTDOWN_PORT),
            (
                D::PORT_ACTIVE_EVENT,
                abi::IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT,
            ),
            (D::SYS_IMAGE_GUID, abi::IB_UVERBS_DEVICE_SYS_IMAGE_GUID),
            (D::RC_RNR_NAK_GEN, abi::IB_UVERBS_DEVICE_RC_RNR_NAK_GEN),
            (D::SRQ_RESIZE, abi::IB_UVERBS_DEVICE_SRQ_RESIZE),
            (D::N_NOTIFY_CQ, abi::IB_UVERBS_DEVICE_N_NOTIFY_CQ),
            (D::MEM_WINDOW, abi::IB_UVERBS_DEVICE_MEM_WINDOW),
            (D::UD_IP_CSUM, abi::IB_UVERBS_DEVICE_UD_IP_CSUM),
            (D::XRC, abi::IB_UVERBS_DEVICE_XRC),
            (
                D::MEM_MGT_EXTENSIONS,
                abi::IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS,
            ),
            (
                D::MEM_WINDOW_TYPE_2A,
                abi::IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A,
            ),
            (
                D::MEM_WINDOW_TYPE_2B,
                abi::IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B,
            ),
            (D::RC_IP_CSUM, abi::IB_UVERBS_DEVICE_RC_IP_CSUM),
            (D::RAW_IP_CSUM, abi::IB_UVERBS_DEVICE_RAW_IP_CSUM),
            (
                D::MANAGED_FLOW_STEERING,
                abi::IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING,
            ),
        ];
        for (flag, c) in kernel {
            assert_eq!(u64::from(flag.bits()), c, "{flag:?}");
            assert_eq!(DeviceCapFlagsEx::from(flag).bits(), c, "{flag:?}");
        }
        assert_eq!(D::INIT_TYPE.bits(), 1 << 9);
        assert_eq!(named::<D>(), kernel.len() + 1, "every flag is tested");

        use DeviceCapFlagsEx as E;
        let high = [
            (E::RAW_SCATTER_FCS, abi::IB_UVERBS_DEVICE_RAW_SCATTER_FCS),
            (
                E::PCI_WRITE_END_PADDING,
                abi::IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING,
            ),
            (E::FLUSH_GLOBAL, 1 << 38),
            (E::FLUSH_PERSISTENT, 1 << 39),
            (E::ATOMIC_WRITE, 1 << 40),
            (E::CC_DMA_BOUNCE, 1 << 41),
        ];
        for (flag, c) in high {
            assert_eq!(flag.bits(), c, "{flag:?}");
        }
        assert_eq!(named::<E>(), named::<D>() + high.len());
        // The same names in both widths.
        for f in D::FLAGS.iter().filter(|f| f.is_named()) {
            let ex = E::from_name(f.name()).unwrap_or_else(|| panic!("{}", f.name()));
            assert_eq!(ex.bits(), u64::from(f.value().bits()), "{}", f.name());
        }
    }

    /// `enum ibv_port_cap_flags` and `enum ibv_port_cap_flags2` of
    /// `libibverbs/verbs.h` (the kernel keeps its `IB_PORT_*` bits out of
    /// the uAPI headers, so the values are written here from verbs.h).
    #[test]
    fn port_cap_flags_are_the_c_values() {
        use PortCapFlags as P;
        let flags = [
            (P::SM, 1 << 1),
            (P::NOTICE_SUP, 1 << 2),
            (P::TRAP_SUP, 1 << 3),
            (P::OPT_IPD_SUP, 1 << 4),
            (P::AUTO_MIGR_SUP, 1 << 5),
            (P::SL_MAP_SUP, 1 << 6),
            (P::MKEY_NVRAM, 1 << 7),
            (P::PKEY_NVRAM, 1 << 8),
            (P::LED_INFO_SUP, 1 << 9),
            (P::SYS_IMAGE_GUID_SUP, 1 << 11),
            (P::PKEY_SW_EXT_PORT_TRAP_SUP, 1 << 12),
            (P::EXTENDED_SPEEDS_SUP, 1 << 14),
            (P::CAP_MASK2_SUP, 1 << 15),
            (P::CM_SUP, 1 << 16),
            (P::SNMP_TUNNEL_SUP, 1 << 17),
            (P::REINIT_SUP, 1 << 18),
            (P::DEVICE_MGMT_SUP, 1 << 19),
            (P::VENDOR_CLASS_SUP, 1 << 20),
            (P::DR_NOTICE_SUP, 1 << 21),
            (P::CAP_MASK_NOTICE_SUP, 1 << 22),
            (P::BOOT_MGMT_SUP, 1 << 23),
            (P::LINK_LATENCY_SUP, 1 << 24),
            (P::CLIENT_REG_SUP, 1 << 25),
            (P::IP_BASED_GIDS, 1 << 26),
        ];
        for (flag, c) in flags {
            assert_eq!(flag.bits(), c, "{flag:?}");
        }
        assert_eq!(named::<P>(), flags.len(), "every flag is tested");

        use PortCapFlags2 as P2;
        let flags2 = [
            (P2::SET_NODE_DESC_SUP, 1 << 0),
            (P2::INFO_EXT_SUP, 1 << 1),
            (P2::VIRT_SUP, 1 << 2),
            (P2::SWITCH_PORT_STATE_TABLE_SUP, 1 << 3),
            (P2::LINK_WIDTH_2X_SUP, 1 << 4),
            (P2::LINK_SPEED_HDR_SUP, 1 << 5),
            (P2::LINK_SPEED_NDR_SUP, 1 << 10),
            (P2::LINK_SPEED_XDR_SUP, 1 << 12),
        ];
        for (flag, c) in flags2 {
            assert_eq!(flag.bits(), c, "{flag:?}");
        }
        assert_eq!(named::<P2>(), flags2.len(), "every flag is tested");
    }

    /// Bits no name covers survive, in every width, as the kernel sent them.
    #[test]
    fn unknown_bits_survive_a_round_trip() {
        let d = 1 << 31 | 1 << 15 | 1;
        assert_eq!(DeviceCapFlags::from_bits_retain(d).bits(), d);
        assert_eq!(DeviceCapFlags::from_bits(d).map(|f| f.bits()), Some(d));
        let e = 1 << 63 | 1 << 37 | 1 << 34 | 1 << 9;
        let ex = DeviceCapFlagsEx::from_bits_retain(e);
        assert_eq!(ex.bits(), e);
        assert!(ex.contains(DeviceCapFlagsEx::RAW_SCATTER_FCS | DeviceCapFlagsEx::INIT_TYPE));
        let p = 1 << 31 | 1 << 10 | 1 << 16;
        assert_eq!(PortCapFlags::from_bits_retain(p).bits(), p);
        assert!(PortCapFlags::from_bits_retain(p).contains(PortCapFlags::CM_SUP));
        let p2 = 1 << 15 | 1 << 5;
        assert_eq!(PortCapFlags2::from_bits_retain(p2).bits(), p2);
        // Formatting as hex is of the raw value (what `ibv_devinfo` prints).
        assert_eq!(
            format!("{:#x}", DeviceCapFlagsEx::from_bits_retain(e)),
            format!("{e:#x}")
        );
    }
}
