//! libFuzzer entry point of `mlx5_cqe` (`cargo +nightly fuzz run --features libfuzzer mlx5_cqe`);
//! the body is the one the stable harness runs (`uverbs_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uverbs_fuzz::targets::mlx5_cqe(data));
