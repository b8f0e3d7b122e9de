//! libFuzzer entry point of `verbs_responses` (`cargo +nightly fuzz run --features libfuzzer verbs_responses`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::verbs_responses(data));
