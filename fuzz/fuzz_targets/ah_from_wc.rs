//! libFuzzer entry point of `ah_from_wc` (`cargo +nightly fuzz run --features libfuzzer ah_from_wc`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::ah_from_wc(data));
