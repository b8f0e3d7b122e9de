//! The kernel transport every subcommand opens devices through: the running
//! kernel, or, in the CLI's own tests, a fake one (the mlx5 device model)
//! chosen per thread, so a test can run a subcommand unchanged on a device
//! this machine does not have.

use std::sync::Arc;

use uverbs::sys::Kernel;

#[cfg(test)]
thread_local! {
    static OVERRIDE: std::cell::RefCell<Option<Arc<dyn Kernel>>> =
        const { std::cell::RefCell::new(None) };
}

/// The transport of the calling thread.
pub fn kernel() -> Arc<dyn Kernel> {
    #[cfg(test)]
    if let Some(k) = OVERRIDE.with(|o| o.borrow().clone()) {
        return k;
    }
    uverbs::sys::linux()
}

/// Makes the calling thread's subcommands use `kernel` (tests only).
#[cfg(test)]
pub fn use_for_this_thread(kernel: Arc<dyn Kernel>) {
    OVERRIDE.with(|o| *o.borrow_mut() = Some(kernel));
}
