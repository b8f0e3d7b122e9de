//! libFuzzer entry point of `qp_attr` (`cargo +nightly fuzz run --features libfuzzer qp_attr`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::qp_attr(data));
