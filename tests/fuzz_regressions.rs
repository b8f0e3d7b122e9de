//! Regression tests of what the fuzz targets (`fuzz/`) found in the
//! library, through the public API on the fake kernels. Each input is also
//! in the target's corpus (`fuzz/corpus/<target>/regress-*`), which
//! `scripts/fuzz.sh` replays.

use uverbs::{
    abi,
    sys::Errno,
    testing::rxe::{fake_rxe, port_attr, DEV},
    Context,
};
use zerocopy::{FromZeros, IntoBytes};

/// `verbs_responses`: a port reporting a huge `gid_tbl_len` made
/// `query_gid_table` allocate for it (32 bytes an entry, 128 GiB here) and
/// abort when the allocation failed. One query cannot return more than an
/// ioctl attribute holds, so it is refused first, with the size named.
#[test]
fn a_huge_gid_table_length_is_an_error_not_an_allocation() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    fake.kernel.on_ioctl(|cmd| {
        let mut resp = abi::IbUverbsQueryPortRespEx::new_zeroed();
        resp.legacy_resp = port_attr();
        resp.legacy_resp.gid_tbl_len = u32::MAX;
        cmd.write_output(abi::UVERBS_ATTR_QUERY_PORT_RESP, resp.as_bytes());
        Ok(())
    });
    let e = ctx.query_gid_table().unwrap_err();
    assert_eq!(e.errno(), Errno::E2BIG, "{e}");
    assert!(
        e.to_string().contains("4294967295 GID table entries"),
        "{e}"
    );
}
