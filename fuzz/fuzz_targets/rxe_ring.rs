//! libFuzzer entry point of `rxe_ring` (`cargo +nightly fuzz run --features libfuzzer rxe_ring`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::rxe_ring(data));
