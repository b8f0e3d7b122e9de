//! What the host tests of the built libraries share: where cargo put them,
//! building them when `cargo test` did not, the C compiler and Debian's
//! headers (as the layout probe finds them),
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
    built("libibverbs.so")
}

/// The built `libibverbs.a`.
pub fn staticlib() -> PathBuf {
    built("libibverbs.a")
}

/// The built `librdmacm.so` (capi/rdmacm/, installed as `librdmacm.so.1`).
pub fn librdmacm() -> PathBuf {
    built("librdmacm.so")
}

/// The built `libmlx5.so` (capi/mlx5/, installed as `libmlx5.so.1`).
pub fn libmlx5() -> PathBuf {
    built("libmlx5.so")
}

/// `name` in the profile directory, after building it. `cargo test`
/// builds the rlib its tests link, never the crates' cdylibs and the
/// staticlib, so the first test of this process that needs one runs
/// `cargo build -p uverbs-cabi -p uverbs-cabi-mlx5 -p uverbs-cabi-rdmacm`
/// with the cargo that
/// built this test, into the same target directory and profile (and
/// target triple, if one was given): cargo rebuilds what is stale and
/// nothing else, so a fresh clone's `cargo test --workspace` passes and a
/// library older than its sources is never tested. (`cargo test` has
/// released its build lock when it runs the test programs.)
fn built(name: &str) -> PathBuf {
    static BUILD: std::sync::Once = std::sync::Once::new();
    BUILD.call_once(build_libraries);
    let lib = profile_dir().join(name);
    assert!(lib.is_file(), "{}: not built", lib.display());
    lib
}

fn build_libraries() {
    // `target/tmp`, given to integration tests: its parent is the target
    // directory, whatever CARGO_TARGET_DIR or --target-dir said.
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp")
        .to_path_buf();
    let profile_dir = profile_dir();
    let dir_name = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("the profile directory's name")
        .to_string();
    // `target/<profile>` or, with --target, `target/<triple>/<profile>`.
    let triple = profile_dir
        .parent()
        .filter(|p| *p != target_dir)
        .and_then(Path::file_name)
        .map(|t| t.to_string_lossy().into_owned());
    let profile = if dir_name == "debug" {
        "dev"
    } else {
        &dir_name
    };
    let workspace = crate_dir()
        .parent()
        .expect("capi/ is a workspace member")
        .join("Cargo.toml");
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .args([
            "build",
            "--quiet",
            "-p",
            "uverbs-cabi",
            "-p",
            "uverbs-cabi-mlx5",
            "-p",
            "uverbs-cabi-rdmacm",
        ])
        .arg("--manifest-path")
        .arg(&workspace)
        .arg("--target-dir")
        .arg(&target_dir)
        .args(["--profile", profile]);
    if let Some(t) = triple {
        cargo.args(["--target", &t]);
    }
    run(&mut cargo);
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
