//! Running rdma-core's unmodified programs over either libibverbs: the real
//! one the guest has (Debian's rdma-core 44), or ours (capi/, the C ABI over
//! uverbs), which `scripts/guest-test.sh` builds into `UVERBS_CABI_DIR`
//! (`/guest/cabi`: libibverbs.so.1, the stub libmlx5.so.1 and libefa.so.1,
//! the C test programs) and a program loads through `LD_LIBRARY_PATH`.
//!
//! Shared by `cabi.rs` (ibv_devinfo, ibv_devices, the pingpongs, the C
//! program) and `cabi_perftest.rs`; its child runner (`spawn`, `finish`,
//! `Out`) by `pingpong.rs` too. Without `UVERBS_CABI_DIR` every test
//! that uses it fails (the library is part of what is tested, never
//! skipped). Every child is killed at its deadline, so a hang fails the
//! test instead of the guest's boot.

use std::{
    io::Read,
    path::PathBuf,
    process::{Child, Command, ExitStatus, Stdio},
    thread,
    time::{Duration, Instant},
};

/// Which libibverbs a program runs over.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lib {
    /// Ours: `LD_LIBRARY_PATH=$UVERBS_CABI_DIR`.
    Ours,
    /// rdma-core's, as installed (no `LD_LIBRARY_PATH`).
    RdmaCore,
}

/// `UVERBS_CABI_DIR`, checked to hold our `libibverbs.so.1`.
pub fn cabi_dir() -> PathBuf {
    let dir = std::env::var_os("UVERBS_CABI_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "UVERBS_CABI_DIR is not set: these tests run rdma-core's programs over the C \
                 library of capi/, which scripts/guest-test.sh builds into /guest/cabi \
                 (libibverbs.so.1, libmlx5.so.1, libefa.so.1, static_verbs_dyn)"
            )
        });
    let lib = dir.join("libibverbs.so.1");
    assert!(lib.is_file(), "{} is missing", lib.display());
    dir
}

/// `program` with `args`, set up to load `lib`.
pub fn command(lib: Lib, program: &str, args: &[&str]) -> Command {
    let mut c = Command::new(program);
    c.args(args)
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("LD_PRELOAD");
    if lib == Lib::Ours {
        c.env("LD_LIBRARY_PATH", cabi_dir());
    }
    c
}

/// What a finished (or killed) child left.
#[derive(Debug)]
pub struct Out {
    /// `None`: killed at its deadline.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// Exited 0.
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// The exit code (`None` if killed or signalled).
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }
}

/// Starts `cmd` with its output piped.
pub fn spawn(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

/// Waits for `child` until `deadline`, then kills it; collects its output.
pub fn finish(mut child: Child, deadline: Instant) -> Out {
    let mut so = child.stdout.take().expect("piped stdout");
    let mut se = child.stderr.take().expect("piped stderr");
    let t_out = thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let t_err = thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for child") {
            break Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    Out {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

/// How long a server may run on once its client failed for good.
pub const SERVER_GRACE: Duration = Duration::from_secs(10);

/// Runs `cmd` to completion (killed after `timeout`).
pub fn run(cmd: &mut Command, timeout: Duration) -> Out {
    finish(spawn(cmd), Instant::now() + timeout)
}

/// A server, then its client: the client is started again while it only
/// failed to reach the server (`refused`: the server is still setting up
/// and not listening yet), at most until the server exits or `deadline`.
/// A server whose client failed for good gets [`SERVER_GRACE`] more, not
/// the rest of `deadline` (it may wait for that client forever).
/// Returns (server, client, client attempts).
pub fn server_client(
    mut server: Command,
    client: impl Fn() -> Command,
    refused: impl Fn(&Out) -> bool,
    deadline: Instant,
) -> (Out, Out, u32) {
    let mut srv = spawn(&mut server);
    let mut attempts = 0;
    let cli = loop {
        attempts += 1;
        let out = finish(spawn(&mut client()), deadline);
        let server_gone = srv.try_wait().ok().flatten().is_some();
        if out.ok() || !refused(&out) || server_gone || Instant::now() >= deadline {
            break out;
        }
        thread::sleep(Duration::from_millis(300));
    };
    let srv_deadline = if cli.ok() {
        deadline
    } else {
        deadline.min(Instant::now() + SERVER_GRACE)
    };
    let srv = finish(srv, srv_deadline);
    (srv, cli, attempts)
}

/// The first line where `a` and `b` differ: (line number, a's, b's).
pub fn first_difference<'t>(a: &'t str, b: &'t str) -> Option<(usize, &'t str, &'t str)> {
    let (mut la, mut lb) = (a.lines(), b.lines());
    for n in 1.. {
        match (la.next(), lb.next()) {
            (None, None) => return None,
            (x, y) if x == y => continue,
            (x, y) => return Some((n, x.unwrap_or("<end>"), y.unwrap_or("<end>"))),
        }
    }
    None
}
