//! `uverbs-test-support`: what uverbs' test binaries share, one crate
//! instead of the same files mounted into each binary with `#[path]`
//! (`tests/README.md` says which test lives where).
//!
//! - [`bounded`]: waits that fail the test after a [`bounded::Patience`]
//!   instead of hanging the run (host tests and device tests).
//! - [`qp_connect`]: a QP moved from RESET to RTS towards a peer (the
//!   device tests and the mlx5 model tests).
//! - [`mlx5_pair`]: a context on the mlx5 device model, connected QP pairs,
//!   and the checks that end each model test.
//! - [`fake_rc`]: an RC QP in RTS on the fake rxe kernel.
//! - [`typed_wr`]: the three ways to post sends, and a `SendWr` written
//!   through a typed session's builders.
//! - [`devx_overrun`], [`devx_umem`]: the DevX scenarios run both on the
//!   device model (`tests/mlx5_devx.rs`) and on a ConnectX (`tests/device/devx.rs`).
//! - [`devx_rc`]: a DevX RC QP's `CREATE_QP` and bring-up commands (the
//!   fabric test and `devx-pingpong`).
//! - [`elf`]: a dependency-free ELF64 reader (is an executable static?).
//! - [`devinfo_compare`]: field-by-field comparison of `ibv_devinfo`-style
//!   output (the device tests, and `preload`'s `devinfo-compare` tool).
//!
//! Not published; a dev-dependency of `uverbs` (and a dependency of the
//! preload shim's comparison tool). It depends on `uverbs` with
//! `test-utils`, which the crate's own tests turn on anyway.

pub mod bounded;
pub mod devinfo_compare;
pub mod devx_overrun;
pub mod devx_rc;
pub mod devx_umem;
pub mod elf;
pub mod fake_rc;
pub mod mlx5_pair;
pub mod qp_connect;
pub mod typed_wr;
