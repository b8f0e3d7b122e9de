//! The second process of the latency tests: side B runs in a forked child,
//! as perftest's server runs in a process of its own.
//!
//! Why not a thread: in a process with more than one thread every system
//! call on a descriptor pays for the shared descriptor table (the kernel's
//! `fdget` takes and drops a reference on the file instead of borrowing
//! it), and the C library's cancellation points switch the cancellation
//! state around the call. perftest's two processes pay neither. In the TCG
//! test guest a 32-byte `write()` costs about 120 ns more with two threads
//! than with one, on every doorbell.
//!
//! The `unsafe` here is `fork`, `waitpid` and `kill` (the workspace does not
//! enable `nix`'s `process` and `signal` features for the CLI alone).
#![allow(unsafe_code)]

use std::io::Write;

use super::Res;

/// A forked child process.
#[derive(Debug)]
pub struct Child {
    pid: libc::pid_t,
    reaped: bool,
}

/// Which side of a [`fork`] this is.
#[derive(Debug)]
pub enum Forked {
    /// The new process: run side B, then [`exit`].
    Child,
    /// This process, with its child.
    Parent(Child),
}

/// Forks. Fails, without forking, unless this process has exactly one
/// thread: a child forked from a multithreaded process may inherit locks
/// (the allocator's) that another thread held.
pub fn fork() -> Res<Forked> {
    let threads = std::fs::read_dir("/proc/self/task")
        .map_err(|e| format!("/proc/self/task: {e:#} (without procfs, use --threads)"))?
        .count();
    if threads != 1 {
        return Err(format!(
            "cannot fork side B: this process has {threads} threads (needs 1)"
        ));
    }
    // Nothing buffered may be written twice (once by each process).
    let _ = std::io::stdout().flush();
    // SAFETY: the process has one thread (checked above), so the child is a
    // consistent copy of it: no lock is held by a thread that does not exist
    // in the child.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(Child { pid, reaped: false })),
    }
}

/// Ends the child process with `status`.
pub fn exit(status: u8) -> ! {
    let _ = std::io::stderr().flush();
    std::process::exit(i32::from(status))
}

impl Child {
    /// Waits for the child; `Ok` if it exited with status 0.
    pub fn wait(mut self) -> Res<()> {
        let status = self.reap()?;
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            Ok(())
        } else if libc::WIFEXITED(status) {
            Err(format!(
                "side B (pid {}) exited with status {}",
                self.pid,
                libc::WEXITSTATUS(status)
            ))
        } else {
            Err(format!(
                "side B (pid {}) was killed by signal {}",
                self.pid,
                libc::WTERMSIG(status)
            ))
        }
    }

    fn reap(&mut self) -> Res<libc::c_int> {
        let mut status = 0;
        loop {
            // SAFETY: `pid` is our child, not yet reaped; `status` is a
            // valid `int` for the kernel to write.
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if r == self.pid {
                self.reaped = true;
                return Ok(status);
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                self.reaped = true;
                return Err(format!("waitpid {}: {e:#}", self.pid));
            }
        }
    }
}

impl Drop for Child {
    /// A child not waited for (the parent failed first) is killed and
    /// reaped, so it neither outlives the run nor stays a zombie.
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: `pid` is our child and not yet reaped, so the number
            // cannot have been reused by another process.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
            }
            let _ = self.reap();
        }
    }
}
