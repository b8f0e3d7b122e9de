//! libFuzzer entry point of `nldev_discovery` (`cargo +nightly fuzz run --features libfuzzer nldev_discovery`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::nldev_discovery(data));
