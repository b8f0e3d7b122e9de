//! libFuzzer entry point of `sysfs_text` (`cargo +nightly fuzz run --features libfuzzer sysfs_text`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::sysfs_text(data));
