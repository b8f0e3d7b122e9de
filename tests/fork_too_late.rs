//! Fork protection asked for after memory was registered without it:
//! `fork_init` fails with `EINVAL` (libibverbs' `too_late`) and the status
//! stays disabled; `RDMAV_FORK_SAFE=0` does not turn it on. A process of
//! its own (`tests/fork_protection.rs` turns protection on).

use uverbs::sys::Errno;
use uverbs::testing::mlx5::fake_mlx5;
use uverbs::{fork_init, fork_status_with, AccessFlags, Context, ForkStatus};

#[test]
fn fork_init_after_a_registration_is_too_late() {
    std::env::set_var("RDMAV_FORK_SAFE", "0");
    let model = fake_mlx5();
    let kernel = model.dyn_kernel();
    let ctx = Context::open_with(kernel.clone(), None).unwrap();
    assert_eq!(fork_status_with(kernel.as_ref()), ForkStatus::Disabled);
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let e = fork_init().unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL, "{e}");
    assert_eq!(fork_status_with(kernel.as_ref()), ForkStatus::Disabled);
    // Still too late once the region is gone, as in libibverbs.
    mr.destroy().unwrap();
    assert_eq!(fork_init().unwrap_err().errno(), Errno::EINVAL);
}
