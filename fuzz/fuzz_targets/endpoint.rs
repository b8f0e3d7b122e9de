//! libFuzzer entry point of `endpoint` (`cargo +nightly fuzz run --features libfuzzer endpoint`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::endpoint(data));
