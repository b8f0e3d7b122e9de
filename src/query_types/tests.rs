//! Unit tests of `query_types.rs`.

use super::*;

#[test]
fn gid_formats_like_inet_ntop() {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&[192, 0, 2, 1]);
    assert_eq!(Gid(g).to_string(), "::ffff:192.0.2.1");
    assert!(!Gid(g).is_null());
    assert!(Gid([0xfe; 8]
        .into_iter()
        .chain([0; 8])
        .collect::<Vec<_>>()
        .try_into()
        .unwrap())
    .is_null());
}

fn gid(text: &str) -> Gid {
    Gid(text.parse::<std::net::Ipv6Addr>().unwrap().octets())
}

#[test]
fn gid_display_matches_glibc_inet_ntop() {
    let cases = [
        ("::", "::"),
        ("::1", "::1"),
        ("::ffff:192.0.2.1", "::ffff:192.0.2.1"),
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
        assert_eq!(gid(input).to_string(), expected, "{input}");
    }
}

#[test]
fn mtu_round_trips() {
    assert_eq!(Mtu::BYTES_1024.bytes(), Some(1024));
    assert_eq!(Mtu::from_bytes(4096), Some(Mtu::BYTES_4096));
    assert_eq!(Mtu(0).bytes(), None);
    assert_eq!(Mtu(9).bytes(), None);
    assert_eq!(Mtu::from_bytes(1000), None);
}

/// `enum ibv_mtu` of `libibverbs/verbs.h` (`IBV_MTU_256 = 1` …
/// `IBV_MTU_4096 = 5`; the kernel's `enum ib_mtu` is not in its uAPI
/// headers); an unknown value is kept and shown as a number.
#[test]
fn mtu_constants_are_the_c_values_and_debug_shows_the_name() {
    let c = [
        (Mtu::BYTES_256, 1, 256, "BYTES_256"),
        (Mtu::BYTES_512, 2, 512, "BYTES_512"),
        (Mtu::BYTES_1024, 3, 1024, "BYTES_1024"),
        (Mtu::BYTES_2048, 4, 2048, "BYTES_2048"),
        (Mtu::BYTES_4096, 5, 4096, "BYTES_4096"),
    ];
    for (mtu, raw, bytes, name) in c {
        assert_eq!(
            (mtu.0, mtu.bytes(), mtu.name()),
            (raw, Some(bytes), Some(name))
        );
        assert_eq!(Mtu(raw), mtu);
        assert_eq!(format!("{mtu:?}"), name);
    }
    for raw in [0, 6, 255] {
        assert_eq!(Mtu(raw).name(), None);
        assert_eq!(format!("{:?}", Mtu(raw)), format!("Mtu({raw})"));
        assert_eq!(Mtu(raw).0, raw, "kept as it is");
    }
}

/// The names before issue 42 still compile (deprecated) and are the same
/// values.
#[test]
#[allow(deprecated)]
fn mtu_old_names_are_the_new_values() {
    assert_eq!(
        [
            Mtu::MTU_256,
            Mtu::MTU_512,
            Mtu::MTU_1024,
            Mtu::MTU_2048,
            Mtu::MTU_4096
        ],
        [
            Mtu::BYTES_256,
            Mtu::BYTES_512,
            Mtu::BYTES_1024,
            Mtu::BYTES_2048,
            Mtu::BYTES_4096
        ]
    );
}

#[test]
fn unknown_values_are_kept() {
    assert_eq!(PortState::from_raw(9), PortState::Other(9));
    assert_eq!(PortState::from_raw(9).raw(), 9);
    assert_eq!(LinkLayer::from_raw(7), LinkLayer::Other(7));
    assert_eq!(GidType::from_raw(5), GidType::Other(5));
}
