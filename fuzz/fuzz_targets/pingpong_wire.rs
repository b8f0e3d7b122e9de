//! libFuzzer entry point of `pingpong_wire` (`cargo +nightly fuzz run --features libfuzzer pingpong_wire`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::pingpong_wire(data));
