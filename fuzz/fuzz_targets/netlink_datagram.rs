//! libFuzzer entry point of `netlink_datagram` (`cargo +nightly fuzz run --features libfuzzer netlink_datagram`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::netlink_datagram(data));
