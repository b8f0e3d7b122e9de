//! The CLI under test is the static musl binary when the guest runs the musl
//! build (`scripts/guest-test.sh --musl` exports `UVERBS_EXPECT_STATIC=1`):
//! then every device test that runs `uverbs` (devinfo, pingpong, asyncwatch)
//! also proves the static binary against the real kernel.

use uverbs_test_support::elf;

#[test]
fn the_cli_is_static_when_the_musl_build_is_tested() {
    let bin = std::env::var("UVERBS_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_uverbs").into());
    let bytes = std::fs::read(&bin).unwrap_or_else(|e| panic!("reading {bin}: {e}"));
    let info = elf::parse(&bytes).unwrap_or_else(|e| panic!("{bin}: {e:?}"));
    if std::env::var("UVERBS_EXPECT_STATIC").as_deref() == Ok("1") {
        assert!(info.is_static(), "{bin} is not static: {info:?}");
    } else {
        // The glibc build: dynamic, so the check above can fail.
        assert!(!info.is_static(), "{bin} unexpectedly static: {info:?}");
    }
}
