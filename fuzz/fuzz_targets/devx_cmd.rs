//! libFuzzer entry point of `devx_cmd` (`cargo +nightly fuzz run --features libfuzzer devx_cmd`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::devx_cmd(data));
