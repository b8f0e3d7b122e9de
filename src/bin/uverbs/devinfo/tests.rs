use super::*;
use uverbs::{ErrorKind, Gid, GidType, LinkLayer, Mtu, NodeType, PortState};

/// The rxe0 values of the test guest (`/work/shared/reference/rxe-guest.md`).
fn rxe_attr() -> DeviceAttr {
    {
        let mut v = DeviceAttr::default();
        v.fw_ver = "0.0.0".into();
        v.node_guid = 0x5054_00ff_fe12_3456;
        v.sys_image_guid = 0x5054_00ff_fe12_3456;
        v.max_mr_size = u64::MAX;
        v.page_size_cap = 0xffff_f000;
        v.vendor_id = 0xffffff;
        v.max_qp = 1_048_560;
        v.max_qp_wr = 1_048_576;
        v.device_cap_flags = uverbs::DeviceCapFlags::from_bits_retain(0x0122_3c76);
        v.max_sge = 32;
        v.max_sge_rd = 32;
        v.max_cq = 1_048_576;
        v.max_cqe = 32767;
        v.max_mr = 524_287;
        v.max_pd = 1_048_576;
        v.max_qp_rd_atom = 128;
        v.max_res_rd_atom = 258_048;
        v.max_qp_init_rd_atom = 128;
        v.atomic_cap = 1;
        v.max_mw = 524_287;
        v.max_mcast_grp = 8192;
        v.max_mcast_qp_attach = 56;
        v.max_total_mcast_qp_attach = 458_752;
        v.max_ah = 32767;
        v.max_srq = 917_503;
        v.max_srq_wr = 1_048_576;
        v.max_srq_sge = 27;
        v.max_pkeys = 64;
        v.local_ca_ack_delay = 15;
        v.phys_port_cnt = 1;
        v.device_cap_flags_ex = uverbs::DeviceCapFlagsEx::from_bits_retain(0x0122_3c76);
        v
    }
}

fn rxe_port() -> PortAttr {
    {
        let mut v = PortAttr::default();
        v.state = PortState::Active;
        v.max_mtu = Mtu(5);
        v.active_mtu = Mtu(3);
        v.gid_tbl_len = 1024;
        v.port_cap_flags = uverbs::PortCapFlags::from_bits_retain(0x0001_0000);
        v.max_msg_sz = 0x80_0000;
        v.bad_pkey_cntr = 0;
        v.qkey_viol_cntr = 0;
        v.pkey_tbl_len = 1;
        v.lid = 0;
        v.sm_lid = 0;
        v.lmc = 0;
        v.max_vl_num = 1;
        v.sm_sl = 0;
        v.subnet_timeout = 0;
        v.init_type_reply = 0;
        v.active_width = 1;
        v.active_speed = 1;
        v.phys_state = 5;
        v.link_layer = LinkLayer::Ethernet;
        v.flags = 0;
        v.port_cap_flags2 = uverbs::PortCapFlags2::empty();
        v
    }
}

fn gid(s: &str) -> Gid {
    Gid(s.parse::<std::net::Ipv6Addr>().unwrap().octets())
}

struct FakeHca {
    attr: uverbs::Result<DeviceAttr>,
    port: PortAttr,
    gids: Vec<GidEntry>,
    /// Index whose GID query fails.
    gid_error_at: Option<u32>,
}

impl FakeHca {
    fn rxe() -> Self {
        let entry = |index, g: &str| {
            let mut v = GidEntry::default();
            v.gid = gid(g);
            v.index = index;
            v.port = 1;
            v.gid_type = GidType::RoceV2;
            v.netdev_ifindex = 2;
            v
        };
        FakeHca {
            attr: Ok(rxe_attr()),
            port: rxe_port(),
            gids: vec![
                entry(0, "fe80::5054:ff:fe12:3456"),
                entry(1, "::ffff:192.0.2.1"),
            ],
            gid_error_at: None,
        }
    }
}

impl Hca for FakeHca {
    fn query_device(&self) -> uverbs::Result<DeviceAttr> {
        self.attr.clone()
    }
    fn query_port(&self, _port: u8) -> uverbs::Result<PortAttr> {
        Ok(self.port.clone())
    }
    fn query_gid(&self, _port: u8, index: u32) -> uverbs::Result<Option<GidEntry>> {
        if self.gid_error_at == Some(index) {
            return Err(uverbs::Error::sys(
                "UVERBS_METHOD_QUERY_GID_ENTRY",
                uverbs::sys::Errno::EINVAL,
            ));
        }
        Ok(self.gids.iter().find(|e| e.index == index).copied())
    }
    fn num_comp_vectors(&self) -> u32 {
        2
    }
}

fn rxe_id() -> HcaId<'static> {
    HcaId {
        name: "rxe0",
        node_type: NodeType::from_raw(1),
        board_id: None,
    }
}

fn render(hca: &FakeHca, port: u8, verbose: bool) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let rc = print_hca_cap(&mut out, &mut err, &rxe_id(), hca, port, verbose).unwrap();
    (
        rc,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

const RXE_BRIEF: &str = "hca_id:\trxe0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t0.0.0
\tnode_guid:\t\t\t5054:00ff:fe12:3456
\tsys_image_guid:\t\t\t5054:00ff:fe12:3456
\tvendor_id:\t\t\t0xffffff
\tvendor_part_id:\t\t\t0
\thw_ver:\t\t\t\t0x0
\tphys_port_cnt:\t\t\t1
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t1024 (3)
\t\t\tsm_lid:\t\t\t0
\t\t\tport_lid:\t\t0
\t\t\tport_lmc:\t\t0x00
\t\t\tlink_layer:\t\tEthernet

";

#[test]
fn brief_output_matches_ibv_devinfo() {
    let (rc, out, err) = render(&FakeHca::rxe(), 0, false);
    assert_eq!((rc, err.as_str()), (0, ""));
    assert_eq!(out, RXE_BRIEF);
}

#[test]
fn verbose_output_matches_ibv_devinfo() {
    let (rc, out, err) = render(&FakeHca::rxe(), 0, true);
    assert_eq!((rc, err.as_str()), (0, ""));
    let expected = "hca_id:\trxe0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t0.0.0
\tnode_guid:\t\t\t5054:00ff:fe12:3456
\tsys_image_guid:\t\t\t5054:00ff:fe12:3456
\tvendor_id:\t\t\t0xffffff
\tvendor_part_id:\t\t\t0
\thw_ver:\t\t\t\t0x0
\tphys_port_cnt:\t\t\t1
\tmax_mr_size:\t\t\t0xffffffffffffffff
\tpage_size_cap:\t\t\t0xfffff000
\tmax_qp:\t\t\t\t1048560
\tmax_qp_wr:\t\t\t1048576
\tdevice_cap_flags:\t\t0x01223c76
\t\t\t\t\tBAD_PKEY_CNTR
\t\t\t\t\tBAD_QKEY_CNTR
\t\t\t\t\tAUTO_PATH_MIG
\t\t\t\t\tCHANGE_PHY_PORT
\t\t\t\t\tUD_AV_PORT_ENFORCE
\t\t\t\t\tPORT_ACTIVE_EVENT
\t\t\t\t\tSYS_IMAGE_GUID
\t\t\t\t\tRC_RNR_NAK_GEN
\t\t\t\t\tSRQ_RESIZE
\t\t\t\t\tMEM_WINDOW
\t\t\t\t\tMEM_MGT_EXTENSIONS
\t\t\t\t\tMEM_WINDOW_TYPE_2B
\tmax_sge:\t\t\t32
\tmax_sge_rd:\t\t\t32
\tmax_cq:\t\t\t\t1048576
\tmax_cqe:\t\t\t32767
\tmax_mr:\t\t\t\t524287
\tmax_pd:\t\t\t\t1048576
\tmax_qp_rd_atom:\t\t\t128
\tmax_ee_rd_atom:\t\t\t0
\tmax_res_rd_atom:\t\t258048
\tmax_qp_init_rd_atom:\t\t128
\tmax_ee_init_rd_atom:\t\t0
\tatomic_cap:\t\t\tATOMIC_HCA (1)
\tmax_ee:\t\t\t\t0
\tmax_rdd:\t\t\t0
\tmax_mw:\t\t\t\t524287
\tmax_raw_ipv6_qp:\t\t0
\tmax_raw_ethy_qp:\t\t0
\tmax_mcast_grp:\t\t\t8192
\tmax_mcast_qp_attach:\t\t56
\tmax_total_mcast_qp_attach:\t458752
\tmax_ah:\t\t\t\t32767
\tmax_fmr:\t\t\t0
\tmax_srq:\t\t\t917503
\tmax_srq_wr:\t\t\t1048576
\tmax_srq_sge:\t\t\t27
\tmax_pkeys:\t\t\t64
\tlocal_ca_ack_delay:\t\t15
\tgeneral_odp_caps:
\trc_odp_caps:
\t\t\t\t\tNO SUPPORT
\tuc_odp_caps:
\t\t\t\t\tNO SUPPORT
\tud_odp_caps:
\t\t\t\t\tNO SUPPORT
\txrc_odp_caps:
\t\t\t\t\tNO SUPPORT
\tcompletion_timestamp_mask not supported
\tcore clock not supported
\tdevice_cap_flags_ex:\t\t0x1223C76
\ttso_caps:
\t\tmax_tso:\t\t\t0
\trss_caps:
\t\tmax_rwq_indirection_tables:\t\t\t0
\t\tmax_rwq_indirection_table_size:\t\t\t0
\t\trx_hash_function:\t\t\t\t0x0
\t\trx_hash_fields_mask:\t\t\t\t0x0
\tmax_wq_type_rq:\t\t\t0
\tpacket_pacing_caps:
\t\tqp_rate_limit_min:\t0kbps
\t\tqp_rate_limit_max:\t0kbps
\ttag matching not supported
\tnum_comp_vectors:\t\t2
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t1024 (3)
\t\t\tsm_lid:\t\t\t0
\t\t\tport_lid:\t\t0
\t\t\tport_lmc:\t\t0x00
\t\t\tlink_layer:\t\tEthernet
\t\t\tmax_msg_sz:\t\t0x800000
\t\t\tport_cap_flags:\t\t0x00010000
\t\t\tport_cap_flags2:\t0x0000
\t\t\tmax_vl_num:\t\t1 (1)
\t\t\tbad_pkey_cntr:\t\t0x0
\t\t\tqkey_viol_cntr:\t\t0x0
\t\t\tsm_sl:\t\t\t0
\t\t\tpkey_tbl_len:\t\t1
\t\t\tgid_tbl_len:\t\t1024
\t\t\tsubnet_timeout:\t\t0
\t\t\tinit_type_reply:\t0
\t\t\tactive_width:\t\t1X (1)
\t\t\tactive_speed:\t\t2.5 Gbps (1)
\t\t\tphys_state:\t\tLINK_UP (5)
\t\t\tGID[  0]:\t\tfe80::5054:ff:fe12:3456, RoCE v2
\t\t\tGID[  1]:\t\t::ffff:192.0.2.1, RoCE v2

";
    assert_eq!(out, expected, "\n--- got ---\n{out}");
}

#[test]
fn optional_device_sections() {
    let mut hca = FakeHca::rxe();
    let a = hca.attr.as_mut().unwrap();
    a.max_fmr = 5;
    a.max_map_per_fmr = 7;
    a.max_srq = 0;
    a.odp_caps.general_caps = 0b111;
    a.odp_caps.rc_odp_caps = 0b10_0101 | 0x100;
    a.completion_timestamp_mask = 0x7fff_ffff_ffff_ffff;
    a.hca_core_clock = 156_250;
    a.raw_packet_caps = 0b1011;
    a.device_cap_flags_ex =
        uverbs::DeviceCapFlagsEx::from_bits_retain((1 << 34) | (1 << 36) | (1 << 40) | 0x1000);
    a.rss_caps.supported_qpts = (1 << 8) | (1 << 4) | (1 << 2);
    a.tm_caps = {
        let mut v = uverbs::TmCaps::default();
        v.max_rndv_hdr_size = 64;
        v.max_num_tags = 63;
        v.flags = 1;
        v.max_ops = 32768;
        v.max_sge = 1;
        v
    };
    a.cq_mod_caps = {
        let mut v = uverbs::CqModerationCaps::default();
        v.max_cq_count = 65535;
        v.max_cq_period = 4095;
        v
    };
    a.max_dm_size = 131_072;
    a.max_qp = 0x8000_0000;
    let (_, out, _) = render(&hca, 0, true);
    for needle in [
        "\tmax_qp:\t\t\t\t-2147483648\n",
        "\tmax_fmr:\t\t\t5\n\tmax_map_per_fmr:\t\t7\n\tmax_srq:\t\t\t0\n\tmax_pkeys:",
        "\tgeneral_odp_caps:\n\t\t\t\t\tODP_SUPPORT\n\t\t\t\t\tODP_SUPPORT_IMPLICIT\n\t\t\t\t\tUnknown flags: 0x4\n",
        "\trc_odp_caps:\n\t\t\t\t\tSUPPORT_SEND\n\t\t\t\t\tSUPPORT_WRITE\n\t\t\t\t\tSUPPORT_SRQ\n\t\t\t\t\tUnknown flags: 0x100\n\tuc_odp_caps:",
        "\tcompletion timestamp_mask:\t\t\t0x7fffffffffffffff\n",
        "\thca_core_clock:\t\t\t156250kHZ\n",
        "\traw packet caps:\n\t\t\t\t\tC-VLAN stripping offload\n\t\t\t\t\tScatter FCS offload\n\t\t\t\t\tDelay drop\n\tdevice_cap_flags_ex:\t\t0x11400001000\n\t\t\t\t\tRAW_SCATTER_FCS\n\t\t\t\t\tPCI_WRITE_END_PADDING\n\t\t\t\t\tUnknown flags: 0x10000000000\n\ttso_caps:",
        "\t\trx_hash_fields_mask:\t\t\t\t0x0\n\t\tsupported_qp:\n\t\t\t\t\tSUPPORT_RAW_PACKET\n\t\t\t\t\tSUPPORT_UD\n\t\t\t\t\tUnknown flags: 0x4\n\tmax_wq_type_rq:",
        "\tmax_rndv_hdr_size:\t\t64\n\tmax_num_tags:\t\t\t63\n\tmax_ops:\t\t\t32768\n\tmax_sge:\t\t\t1\n\tflags:\n\t\t\t\t\tIBV_TM_CAP_RC\n",
        "\n\tcq moderation caps:\n\t\tmax_cq_count:\t65535\n\t\tmax_cq_period:\t4095 us\n\n\tmaximum available device memory:\t131072Bytes\n\n\tnum_comp_vectors:\t\t2\n",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
}

#[test]
fn board_id_and_iwarp_transport() {
    let id = HcaId {
        name: "siw0",
        node_type: NodeType::from_raw(4),
        board_id: Some("MT_0000000010"),
    };
    let mut hca = FakeHca::rxe();
    hca.port.link_layer = LinkLayer::Unspecified;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    print_hca_cap(&mut out, &mut err, &id, &hca, 0, true).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("\ttransport:\t\t\tiWARP (1)\n"));
    assert!(out.contains("\thw_ver:\t\t\t\t0x0\n\tboard_id:\t\t\tMT_0000000010\n\tphys_port_cnt:"));
    assert!(
        !out.contains("phys_state"),
        "phys_state is printed only for IB transport"
    );
    // No ", RoCE v2" suffix off Ethernet.
    assert!(out.contains("\t\t\tGID[  1]:\t\t::ffff:192.0.2.1\n"));
}

#[test]
fn gid_lines_by_type_and_link_layer() {
    let line = |g: &str, t, ll| {
        let mut out = Vec::new();
        write_gid(&mut out, 7, &gid(g), t, ll).unwrap();
        String::from_utf8(out).unwrap()
    };
    assert_eq!(
        line("fe80::2:c903:a:bcde", GidType::Ib, LinkLayer::InfiniBand),
        "\t\t\tGID[  7]:\t\tfe80:0000:0000:0000:0002:c903:000a:bcde\n"
    );
    assert_eq!(
        line(
            "fe80::5054:ff:fe12:3456",
            GidType::RoceV1,
            LinkLayer::Ethernet
        ),
        "\t\t\tGID[  7]:\t\tfe80:0000:0000:0000:5054:00ff:fe12:3456, RoCE v1\n"
    );
    assert_eq!(
        line(
            "fe80::5054:ff:fe12:3456",
            GidType::RoceV2,
            LinkLayer::Ethernet
        ),
        "\t\t\tGID[  7]:\t\tfe80::5054:ff:fe12:3456, RoCE v2\n"
    );
    let mut out = Vec::new();
    write_gid(
        &mut out,
        1000,
        &gid("::1"),
        GidType::RoceV2,
        LinkLayer::Ethernet,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "\t\t\tGID[1000]:\t\t::1, RoCE v2\n"
    );
}

#[test]
fn inet_ntop6_matches_glibc() {
    let cases = [
        ("::", "::"),
        ("::1", "::1"),
        ("::ffff:192.0.2.1", "::ffff:192.0.2.1"),
        // glibc keeps the deprecated IPv4-compatible form; Rust's Display does not.
        ("::c000:201", "::192.0.2.1"),
        ("::ffff:0:c000:201", "::ffff:0:c000:201"),
        ("fe80::5054:ff:fe12:3456", "fe80::5054:ff:fe12:3456"),
        ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
        ("1:0:0:2:3:0:0:4", "1::2:3:0:0:4"),
        ("1:0:2:0:3:0:4:0", "1:0:2:0:3:0:4:0"),
        ("2001:db8::", "2001:db8::"),
        ("0:0:1::", "0:0:1::"),
    ];
    for (input, expected) in cases {
        assert_eq!(inet_ntop6(&gid(input).0), expected, "{input}");
    }
}

#[test]
fn port_selection_and_errors() {
    let hca = FakeHca::rxe();
    let (rc, out, err) = render(&hca, 2, false);
    assert_eq!(
        (rc, out.as_str(), err.as_str()),
        (4, "", "Invalid port requested for device\n")
    );
    let (rc, out, _) = render(&hca, 1, false);
    assert_eq!((rc, out.as_str()), (0, RXE_BRIEF));

    let mut bad = FakeHca::rxe();
    bad.gid_error_at = Some(1);
    let (rc, out, err) = render(&bad, 0, true);
    assert_eq!(rc, -1);
    assert!(
        out.ends_with("\t\t\tGID[  0]:\t\tfe80::5054:ff:fe12:3456, RoCE v2\n"),
        "{out}"
    );
    assert!(
        err.starts_with("Failed to query gid to port 1, index 1\n"),
        "{err}"
    );

    let mut dead = FakeHca::rxe();
    dead.attr = Err(uverbs::Error::new(
        "query",
        ErrorKind::DeviceRemoved,
        "gone",
    ));
    let (rc, out, err) = render(&dead, 0, false);
    assert_eq!((rc, out.as_str()), (2, ""));
    assert!(err.starts_with("Failed to query device props\n"));
}

#[test]
fn list_format() {
    let mut out = Vec::new();
    write_list(&mut out, &["rxe0"]).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "1 HCA found:\n\trxe0\n\n");
    let mut out = Vec::new();
    write_list(&mut out, &[]).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "0 HCAs found:\n\n");
}

fn parse(args: &[&str]) -> (Result<Action, Exit>, String, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let r = parse_args(&args, &mut out, &mut err);
    (
        r,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

fn show(device: Option<&str>, port: u8, verbose: bool) -> Result<Action, Exit> {
    Ok(Action::Show(Options {
        device: device.map(str::to_string),
        port,
        verbose,
    }))
}

#[test]
fn getopt_compatible_parsing() {
    assert_eq!(parse(&[]).0, show(None, 0, false));
    assert_eq!(parse(&["-v", "-d", "rxe0"]).0, show(Some("rxe0"), 0, true));
    assert_eq!(parse(&["-vdrxe0", "-i0x2"]).0, show(Some("rxe0"), 2, true));
    assert_eq!(
        parse(&["--ib-dev=mlx5_0", "--ib-port", "1", "--verb"]).0,
        show(Some("mlx5_0"), 1, true)
    );
    assert_eq!(parse(&["operand", "-i", "010"]).0, show(None, 8, false));
    assert_eq!(
        parse(&["-i", "257"]).0,
        show(None, 1, false),
        "truncated to uint8_t like the C tool"
    );
    assert_eq!(
        parse(&["-v", "-l", "-x"]).0,
        Ok(Action::List),
        "-l acts as soon as it is seen"
    );
    assert_eq!(parse(&["--", "-x"]).0, show(None, 0, false));
    assert_eq!(parse(&["--help"]).0, Ok(Action::Help));

    let (r, out, err) = parse(&["-i", "abc"]);
    assert_eq!((r, err.as_str()), (Err(Exit(1)), ""));
    assert!(out.starts_with("Usage: uverbs devinfo"));
    let (r, _, err) = parse(&["-x"]);
    assert_eq!(
        (r, err.as_str()),
        (Err(Exit(-1)), "uverbs devinfo: invalid option -- 'x'\n")
    );
    let (r, _, err) = parse(&["-d"]);
    assert_eq!(
        (r, err.as_str()),
        (
            Err(Exit(-1)),
            "uverbs devinfo: option requires an argument -- 'd'\n"
        )
    );
    let (r, _, err) = parse(&["--ib"]);
    assert_eq!(r, Err(Exit(-1)));
    assert!(err.contains("'--ib' is ambiguous"), "{err}");
    let (_, _, err) = parse(&["--list=3"]);
    assert!(err.contains("'--list' doesn't allow an argument"), "{err}");
}

#[test]
fn strtol_like_c() {
    assert_eq!(strtol(" 12x"), 12);
    assert_eq!(strtol("0x1f"), 31);
    assert_eq!(strtol("0x"), 0);
    assert_eq!(strtol("017"), 15);
    assert_eq!(strtol("-3"), -3);
    assert_eq!(strtol(""), 0);
    assert_eq!(strtol("99999999999999999999999"), i64::MAX);
}
