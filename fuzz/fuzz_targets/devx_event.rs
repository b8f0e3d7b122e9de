//! libFuzzer entry point of `devx_event` (`cargo +nightly fuzz run --features libfuzzer devx_event`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::devx_event(data));
