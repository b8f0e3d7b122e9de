//! libFuzzer entry point of `cm_query` (`cargo +nightly fuzz run --features libfuzzer cm_query`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::cm_query(data));
