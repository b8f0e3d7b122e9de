//! What the host tests of the built libraries share: where cargo put them,
//! the C compiler and Debian's headers (as the layout probe finds them),
//! and the rule for a missing tool: outside CI the test is not run (with a
//! note), in CI (`CI` set) it fails.

#![allow(dead_code)] // each test file uses part of it

use std::{
    env,
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// `target/<profile>`: the directory of the cdylib and the staticlib,
/// two levels above this test executable (`target/<profile>/deps/x-HASH`).
pub fn profile_dir() -> PathBuf {
    let exe = env::current_exe().expect("the test executable's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// The built `libibverbs.so` (installed as `libibverbs.so.1`).
pub fn cdylib() -> PathBuf {
    fresh(profile_dir().join("libibverbs.so"))
}

/// The built `libibverbs.a`.
pub fn staticlib() -> PathBuf {
    fresh(profile_dir().join("libibverbs.a"))
}

/// `lib`, after checking it is newer than every source it was built from
/// (the dependency list cargo writes beside it, `libibverbs.d`: files only
/// the tests compile, such as `src/*/tests.rs`, are not among them):
/// `cargo test` builds the rlib its tests link, not the cdylib and the
/// staticlib, so `cargo build -p uverbs-cabi` (same profile) must come
/// first (scripts/test.sh runs it).
fn fresh(lib: PathBuf) -> PathBuf {
    let built = std::fs::metadata(&lib)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run `cargo build -p uverbs-cabi` first)",
                lib.display()
            )
        });
    let deps = lib.with_file_name("libibverbs.d");
    let listed = std::fs::read_to_string(&deps).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run `cargo build -p uverbs-cabi` first)",
            deps.display()
        )
    });
    let sources = listed
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(_, d)| d))
        .flat_map(str::split_whitespace)
        .map(PathBuf::from);
    for p in sources {
        if let Ok(t) = std::fs::metadata(&p).and_then(|m| m.modified()) {
            assert!(
                t <= built,
                "{} is older than {}: run `cargo build -p uverbs-cabi` (same profile) before \
                 these tests",
                lib.display(),
                p.display()
            );
        }
    }
    lib
}

/// This crate's directory (host tests run in the source tree).
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A tool the test needs is missing: fails in CI; elsewhere prints why
/// and returns true, for the test to return.
pub fn unavailable(why: &str) -> bool {
    assert!(env::var_os("CI").is_none(), "{why}");
    eprintln!("not run: {why}");
    true
}

/// The directory holding Debian's `infiniband/verbs.h` (libibverbs-dev 44),
/// as the layout probe looks for it.
pub fn verbs_include() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(d) = env::var_os("UVERBS_MLX5DV_INCLUDE") {
        candidates.push(PathBuf::from(d));
    }
    candidates.push(PathBuf::from("/usr/include"));
    let cache = env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let Some(c) = cache {
        candidates.push(c.join("uverbs-headers-ibverbs/usr/include"));
    }
    candidates
        .into_iter()
        .find(|d| d.join("infiniband/verbs.h").is_file())
}

/// `-I` options for verbs.h and the kernel's `rdma/` headers.
pub fn include_args(verbs: &Path) -> Vec<String> {
    let mut a = vec![format!("-I{}", verbs.display())];
    if let Some(k) = env::var_os("UVERBS_ABI_INCLUDE") {
        a.push(format!("-I{}", PathBuf::from(k).display()));
    }
    a
}

/// The C compiler (`$CC` or `cc`), if it runs.
pub fn cc() -> Option<Command> {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    Command::new(&cc).arg("--version").output().ok()?;
    Some(Command::new(cc))
}

/// Runs `cmd`, panicking with its output unless it exits 0.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A fresh temporary directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = env::temp_dir().join(format!("uverbs-cabi-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temporary directory");
    d
}
