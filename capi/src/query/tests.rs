//! The queries against uverbs' fake rxe kernel.

use core::ffi::CStr;
use std::ptr;

use uverbs::testing::rxe::{device_attr, fake_rxe, FakeRxe, IPV4_GID, NODE_GUID};

use super::{gid::*, *};
use crate::device::test_kernel;
use crate::layout::device::{ibv_gid, ibv_gid_entry};

/// Runs `f` with a context on a fresh fake rxe, then closes it.
fn with_ctx(f: impl FnOnce(&FakeRxe, *mut ibv_context)) {
    let fake = fake_rxe();
    test_kernel::with(fake.dyn_kernel(), || {
        let ctx = test_kernel::open_first();
        f(&fake, ctx);
        // SAFETY: opened above, closed once.
        assert_eq!(unsafe { crate::device::ibv_close_device(ctx) }, 0);
    });
}

fn last() -> Errno {
    Errno::last()
}

/// A buffer of `n` bytes of 0xaa, 8-byte aligned.
fn sentinel(n: usize) -> Vec<u64> {
    vec![0xaaaa_aaaa_aaaa_aaaa; n.div_ceil(8)]
}

fn bytes(v: &[u64]) -> &[u8] {
    // SAFETY: a u64 slice is plain bytes.
    unsafe { core::slice::from_raw_parts(v.as_ptr().cast(), v.len() * 8) }
}

#[test]
fn query_device_fills_ibv_device_attr() {
    with_ctx(|_, ctx| {
        // SAFETY: zeroes are a valid ibv_device_attr.
        let mut a: ibv_device_attr = unsafe { core::mem::zeroed() };
        // SAFETY: an open context and a writable struct.
        assert_eq!(unsafe { ibv_query_device(ctx, &mut a) }, 0);
        let want = device_attr().base;
        // SAFETY: fw_ver is NUL-terminated.
        let fw = unsafe { CStr::from_ptr(a.fw_ver.as_ptr()) };
        assert_eq!(
            fw.to_str().unwrap(),
            "0.0.0",
            "rxe's formatting of fw_ver 0"
        );
        assert_eq!(
            a.node_guid,
            NODE_GUID.to_be(),
            "__be64 as the kernel gives it"
        );
        assert_eq!(a.max_qp, want.max_qp as c_int);
        assert_eq!(a.device_cap_flags, want.device_cap_flags);
        assert_eq!(a.max_srq_sge, 27);
        assert_eq!(
            (a.max_pkeys, a.local_ca_ack_delay, a.phys_port_cnt),
            (64, 15, 1)
        );
        // NULL arguments.
        // SAFETY: NULL is refused before any use.
        unsafe {
            assert_eq!(ibv_query_device(ptr::null_mut(), &mut a), libc::EINVAL);
            assert_eq!(ibv_query_device(ctx, ptr::null_mut()), libc::EINVAL);
        }
    });
}

#[test]
fn query_device_ex_honours_the_size_the_program_passes() {
    with_ctx(|_, ctx| {
        let whole = size_of::<ibv_device_attr_ex>();
        let mut buf = sentinel(whole + 16);
        let attr = buf.as_mut_ptr().cast::<ibv_device_attr_ex>();
        // SAFETY: `buf` holds the struct.
        assert_eq!(unsafe { query_device_ex(ctx, ptr::null(), attr, whole) }, 0);
        // SAFETY: filled above.
        let a = unsafe { &*attr };
        assert_eq!(a.device_cap_flags_ex, 0x0122_3c76);
        assert_eq!(a.phys_port_cnt_ex, 1, "netlink's port count");
        assert_eq!(
            (a.comp_mask, a.tso_caps.max_tso, a.pci_atomic_caps.swap),
            (0, 0, 0)
        );
        assert!(
            bytes(&buf)[whole..].iter().all(|&b| b == 0xaa),
            "nothing past the size"
        );

        // A size from an older verbs.h that ends inside `device_cap_flags_ex`:
        // what does not fit whole stays zero, nothing past it is written.
        let short = offset_of!(ibv_device_attr_ex, device_cap_flags_ex) + 4;
        let mut buf = sentinel(whole);
        let attr = buf.as_mut_ptr().cast::<ibv_device_attr_ex>();
        // SAFETY: `buf` holds `short` bytes.
        assert_eq!(unsafe { query_device_ex(ctx, ptr::null(), attr, short) }, 0);
        let b = bytes(&buf);
        assert!(
            b[offset_of!(ibv_device_attr_ex, device_cap_flags_ex)..short]
                .iter()
                .all(|&x| x == 0)
        );
        assert!(b[short..].iter().all(|&x| x == 0xaa));
        // SAFETY: the orig_attr part was written.
        assert_eq!(unsafe { (*attr).orig_attr.phys_port_cnt }, 1);

        // libibverbs' refusals: a comp_mask, a size below ibv_device_attr.
        let input = ibv_query_device_ex_input { comp_mask: 1 };
        // SAFETY: `buf` holds the struct; the errors come before any write.
        unsafe {
            assert_eq!(query_device_ex(ctx, &input, attr, whole), libc::EINVAL);
            assert_eq!(query_device_ex(ctx, ptr::null(), attr, 200), libc::EINVAL);
            let zero = ibv_query_device_ex_input { comp_mask: 0 };
            assert_eq!(query_device_ex(ctx, &zero, attr, whole), 0);
        }
    });
}

#[test]
fn query_port_fills_the_size_of_each_header_generation() {
    with_ctx(|_, ctx| {
        // v44's 52 bytes.
        let mut p = ibv_port_attr::default();
        // SAFETY: a writable ibv_port_attr.
        let rc = unsafe { query_port(ctx, 1, &mut p, size_of::<ibv_port_attr>()) };
        assert_eq!(rc, 0);
        assert_eq!(
            (p.state, p.max_mtu, p.active_mtu, p.link_layer),
            (4, 5, 3, 2)
        );
        assert_eq!(
            (p.gid_tbl_len, p.pkey_tbl_len, p.max_msg_sz),
            (1024, 1, 0x80_0000)
        );
        // Newer rdma-core's 56 bytes: `active_speed_ex` zeroed.
        let mut buf = sentinel(56);
        // SAFETY: 56 writable bytes.
        let rc = unsafe { query_port(ctx, 1, buf.as_mut_ptr().cast(), 56) };
        assert_eq!(rc, 0);
        assert_eq!(&bytes(&buf)[52..56], &[0; 4]);
        // The exported IBVERBS_1.1 ibv_query_port: 48 bytes, no port_cap_flags2.
        let mut buf = sentinel(56);
        // SAFETY: 48 writable bytes.
        let rc = unsafe { ibv_query_port(ctx, 1, buf.as_mut_ptr().cast()) };
        assert_eq!(rc, 0);
        assert!(bytes(&buf)[48..].iter().all(|&b| b == 0xaa));
        assert_eq!(bytes(&buf)[0], 4, "state");
        // SAFETY: NULL is refused before any use.
        unsafe {
            assert_eq!(query_port(ctx, 1, ptr::null_mut(), 52), libc::EINVAL);
            assert_eq!(query_port(ptr::null_mut(), 1, &mut p, 52), libc::EINVAL);
        }
    });
}

#[test]
fn gids_follow_libibverbs_conventions() {
    with_ctx(|_, ctx| {
        let mut gid = ibv_gid { raw: [0x55; 16] };
        let mut t = -1;
        // SAFETY: an open context and writable results.
        unsafe {
            assert_eq!(ibv_query_gid(ctx, 1, 1, &mut gid), 0);
            assert_eq!(gid.raw, IPV4_GID);
            assert_eq!(ibv_query_gid_type(ctx, 1, 1, &mut t), 0);
            assert_eq!(t, 1, "IBV_GID_TYPE_SYSFS_ROCE_V2");
            // An empty slot: zeros and success, type RoCE v1 (libibverbs
            // keeps the old API's answer).
            assert_eq!(ibv_query_gid(ctx, 1, 2, &mut gid), 0);
            assert_eq!(gid.raw, [0; 16]);
            assert_eq!(ibv_query_gid_type(ctx, 1, 2, &mut t), 0);
            assert_eq!(t, 0);
            // Outside the table: -1 and the kernel's EINVAL.
            assert_eq!(ibv_query_gid(ctx, 1, 5000, &mut gid), -1);
            assert_eq!(last(), Errno::EINVAL);
            assert_eq!(ibv_query_gid(ctx, 1, 0, ptr::null_mut()), -1);
            assert_eq!(last(), Errno::EINVAL);
        }
    });
}

#[test]
fn gid_ex_and_table_report_empty_and_short_buffers() {
    with_ctx(|_, ctx| {
        let es = size_of::<ibv_gid_entry>();
        let mut buf = sentinel(es + 8);
        let entry = buf.as_mut_ptr().cast::<ibv_gid_entry>();
        // SAFETY: `buf` holds `es + 8` writable bytes.
        unsafe {
            assert_eq!(_ibv_query_gid_ex(ctx, 1, 1, entry, 0, es + 8), 0);
            let e = entry.read();
            assert_eq!(e.gid.raw, IPV4_GID);
            assert_eq!(
                (e.gid_index, e.port_num, e.gid_type, e.ndev_ifindex),
                (1, 1, 2, 2)
            );
            assert_eq!(
                &bytes(&buf)[es..es + 8],
                &[0; 8],
                "a larger entry's tail zeroed"
            );
            // pyverbs' "non-existent gid index" bad flow.
            assert_eq!(_ibv_query_gid_ex(ctx, 1, 2, entry, 0, es), libc::ENODATA);
            assert_eq!(_ibv_query_gid_ex(ctx, 1, 5000, entry, 0, es), libc::EINVAL);
            assert_eq!(_ibv_query_gid_ex(ctx, 1, 1, entry, 1, es), libc::EINVAL);
            assert_eq!(_ibv_query_gid_ex(ctx, 1, 1, entry, 0, es - 1), libc::EINVAL);
            assert_eq!(_ibv_query_gid_ex(ctx, 300, 1, entry, 0, es), libc::EINVAL);
        }
        let mut table = sentinel(es * 4);
        let entries = table.as_mut_ptr().cast::<ibv_gid_entry>();
        // SAFETY: `table` holds four entries.
        unsafe {
            assert_eq!(_ibv_query_gid_table(ctx, entries, 4, 0, es), 2);
            assert_eq!((*entries.add(1)).gid.raw, IPV4_GID);
            // Too small (pyverbs' bad flow passes 0): -EINVAL.
            assert_eq!(
                _ibv_query_gid_table(ctx, entries, 0, 0, es),
                -(libc::EINVAL as isize)
            );
            assert_eq!(
                _ibv_query_gid_table(ctx, entries, 1, 0, es),
                -(libc::EINVAL as isize)
            );
            assert_eq!(
                _ibv_query_gid_table(ctx, entries, 4, 1, es),
                -(libc::EINVAL as isize)
            );
        }
    });
}

#[test]
fn pkeys_are_read_from_sysfs() {
    with_ctx(|fake, ctx| {
        let ports = "/sys/class/infiniband/rxe0/ports/1/pkeys";
        fake.kernel
            .file(format!("{ports}/0"), "0xffff\n")
            .file(format!("{ports}/1"), "0x8001\n")
            .file(format!("{ports}/2"), "0x12345678");
        let mut pkey = 0u16;
        // SAFETY: an open context and a writable result.
        unsafe {
            assert_eq!(ibv_query_pkey(ctx, 1, 0, &mut pkey), 0);
            assert_eq!(pkey, 0xffffu16.to_be());
            assert_eq!(ibv_query_pkey(ctx, 1, 1, &mut pkey), 0);
            assert_eq!(pkey, 0x8001u16.to_be());
            // Longer than libibverbs' 8-byte read without a newline there.
            assert_eq!(ibv_query_pkey(ctx, 1, 2, &mut pkey), -1);
            assert_eq!(ibv_query_pkey(ctx, 1, 9, &mut pkey), -1);
            assert_eq!(last(), Errno::ENOENT);
            assert_eq!(ibv_get_pkey_index(ctx, 1, 0x8001u16.to_be()), 1);
            assert_eq!(ibv_get_pkey_index(ctx, 1, 0x7fffu16.to_be()), -1);
            assert_eq!(ibv_query_pkey(ctx, 1, 0, ptr::null_mut()), -1);
            assert_eq!(last(), Errno::EINVAL);
        }
    });
}

#[test]
fn hex_scanning_is_sscanf_hx() {
    assert_eq!(scan_hex_u16("0xffff\n"), Some(0xffff));
    assert_eq!(scan_hex_u16("  7fff"), Some(0x7fff));
    assert_eq!(scan_hex_u16("0X10"), Some(0x10));
    assert_eq!(scan_hex_u16("12345"), Some(0x2345), "stored into 16 bits");
    assert_eq!(scan_hex_u16("-1"), Some(0xffff));
    assert_eq!(scan_hex_u16("zz"), None);
    assert_eq!(scan_hex_u16(""), None);
}

#[test]
fn port_state_texts_are_libibverbs_texts() {
    let s = |v| {
        // SAFETY: static strings.
        unsafe { CStr::from_ptr(ibv_port_state_str(v)) }
            .to_str()
            .unwrap()
    };
    assert_eq!(s(0), "no state change (NOP)");
    assert_eq!(s(4), "active");
    assert_eq!(s(5), "active defer");
    assert_eq!(s(6), "unknown");
    assert_eq!(s(-1), "unknown");
}
