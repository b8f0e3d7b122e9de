//! Fuzz targets for uverbs' decoders of bytes written by the kernel, the
//! device or a network peer, and the engine of the stable harness that runs
//! them (`uverbs-fuzz`, see `README.md`).
//!
//! Each target is a plain `fn(&[u8])`: it hands the bytes to the decoders
//! the library (or the CLI) runs on such bytes and panics when an
//! invariant breaks. The same bodies back the libFuzzer entry points in
//! `fuzz_targets/` (feature `libfuzzer`, nightly).
#![deny(unsafe_code)]

pub mod engine;
pub mod targets;

// The CLI's wire formats, compiled from the CLI's own source files: the
// pingpong and rping peers' messages are decoded by the bin crate, which a
// library cannot depend on, so its files are included here as they are.

/// `src/bin/uverbs/pingpong/wire.rs`: the pingpongs' address exchange.
#[allow(dead_code)] // the TCP exchange itself is not fuzzed
#[path = "../../src/bin/uverbs/pingpong/wire.rs"]
pub mod pingpong_wire;

/// `src/bin/uverbs/rping/wire.rs`: rping's buffer descriptions and ping text.
#[path = "../../src/bin/uverbs/rping/wire.rs"]
pub mod rping_wire;
