//! The test doubles: the kernel's side, faked, for tests, benchmarks, the
//! fuzz targets and `uverbs perf micro --fake` (feature `test-utils`, which
//! this crate's own tests turn on; not in normal builds).
//!
//! - [`kernel`]: the generic scripted kernel, [`kernel::FakeKernel`]. It
//!   implements [`Kernel`](crate::sys::Kernel) without touching the system:
//!   sysfs from a map, commands to handler closures, every call logged. Also
//!   public as `uverbs::sys::fake`, the path most tests use.
//! - [`rxe`]: a Linux 6.1 kernel with one soft-RoCE device, rxe0
//!   ([`rxe::FakeRxe`], [`rxe::fake_rxe`]), its rings shared as the kernel
//!   shares them.
//! - [`mlx5`]: a software ConnectX behind `mlx5_ib` ([`mlx5::Mlx5Model`],
//!   [`mlx5::fake_mlx5`]): the kernel's side, the firmware of DevX, and an
//!   HCA that executes the WQEs the library writes.
//! - `device.rs` (private): the device, port and GID answers both device
//!   doubles give.
//!
//! The doubles play the other side of the ABI with their own code, written
//! from the kernel's and rdma-core's sources, so they never import the
//! providers (`providers/`): a double that borrowed a provider's encoder or
//! constant would agree with it by construction and check nothing. What
//! they share with the library is the kernel ABI (`uverbs-abi`, as
//! `crate::abi`), the transport ([`crate::sys`]) and the public API.
//! `tests/provider_boundary.rs` checks that no file here names
//! `crate::providers`; the providers' own unit tests may use the doubles.

mod device;
pub mod kernel;
pub mod mlx5;
pub mod rxe;

/// How many kernel objects (with what they own) the process has leaked
/// because their destroy failed at their last drop (see `object.rs`):
/// tests of the leak rule compare it before and after.
pub fn leaked_objects() -> usize {
    crate::object::LEAKED.load(std::sync::atomic::Ordering::Relaxed)
}
