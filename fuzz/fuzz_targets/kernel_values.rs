//! libFuzzer entry point of `kernel_values` (`cargo +nightly fuzz run --features libfuzzer kernel_values`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::kernel_values(data));
