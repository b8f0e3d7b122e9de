//! libFuzzer entry point of `rping_wire` (`cargo +nightly fuzz run --features libfuzzer rping_wire`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::rping_wire(data));
