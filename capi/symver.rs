//! What both C libraries' build scripts share (`capi/build.rs` for
//! `libibverbs.so.1`, `capi/mlx5/build.rs` for `libmlx5.so.1`, each
//! `#[path]`-mounting this file): the `exports.txt` lines and the one-jump
//! stubs that give an exported function its symbol version, and the
//! placeholder `libibverbs.so` the stub libraries (`libmlx5.so.1`,
//! `librdmacm.so.1`) link against.
//!
//! An `exports.txt` line is `NODE name` (the default version,
//! `name@@NODE`), `NODE @name` (a non-default alias `name@NODE` of the
//! same function) or `NODE @name=target` (a non-default alias served by
//! another function, an older ABI's). `#` starts a comment line.

use std::fmt::Write as _;

/// One line of an `exports.txt`.
pub struct Entry {
    /// The version node.
    pub node: String,
    /// The exported name.
    pub name: String,
    /// The function that serves it (`name` unless `@name=target`).
    pub target: String,
    /// A non-default `name@node`.
    pub alias: bool,
}

/// The entries of `list`, the text of the file `file` (named in panics).
pub fn entries(file: &str, list: &str) -> Vec<Entry> {
    let mut v = Vec::new();
    for (n, line) in list.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (node, rest) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("{file}:{}: want `NODE name`", n + 1));
        let (name, target, alias) = match rest.strip_prefix('@') {
            Some(a) => match a.split_once('=') {
                Some((name, target)) => (name, target, true),
                None => (a, a, true),
            },
            None => (rest, rest, false),
        };
        v.push(Entry {
            node: node.to_string(),
            name: name.to_string(),
            target: target.to_string(),
            alias,
        });
    }
    v
}

/// Stubs being written into one text section, as the body of a
/// `core::arch::global_asm!`.
pub struct Stubs {
    asm: String,
    x86: bool,
}

impl Stubs {
    /// Stubs in section `section`, for `what` (named in the panic on an
    /// architecture whose jump is not written here: x86_64 and aarch64).
    pub fn new(section: &str, what: &str) -> Stubs {
        let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
        assert!(
            matches!(arch.as_str(), "x86_64" | "aarch64"),
            "{what}'s stubs are generated for x86_64 and aarch64 only, not {arch}"
        );
        let mut asm = String::new();
        for l in [
            format!(".pushsection {section},\\\"ax\\\",%progbits"),
            ".p2align 4".to_string(),
        ] {
            let _ = writeln!(asm, "    \"{l}\",");
        }
        Stubs {
            asm,
            x86: arch == "x86_64",
        }
    }

    /// A global function `label` that jumps to `uverbs_<target>`, and, with
    /// `version` (`name@node` or `name@@node`), that version's definition.
    pub fn push(&mut self, label: &str, target: &str, version: Option<&str>) {
        let (kind, jump) = if self.x86 {
            ("@", format!("jmp uverbs_{target}@PLT"))
        } else {
            ("%", format!("b uverbs_{target}"))
        };
        let mut lines = vec![
            format!(".globl {label}"),
            format!(".type {label},{kind}function"),
            format!("{label}:"),
            format!("    {jump}"),
            format!(".size {label}, .-{label}"),
        ];
        if let Some(v) = version {
            lines.push(format!(".symver {label}, {v}"));
        }
        for l in lines {
            let _ = writeln!(self.asm, "    \"{l}\",");
        }
    }

    /// The `global_asm!` invocation of the stubs.
    pub fn finish(mut self) -> String {
        self.asm.push_str("    \".popsection\",\n");
        format!("core::arch::global_asm!(\n{});\n", self.asm)
    }
}

/// Builds `OUT_DIR/placeholder/libibverbs.so` (soname `libibverbs.so.1`)
/// defining `uverbs_<target>` for each target: only the link reads it.
#[allow(dead_code)] // capi/build.rs links no stub library
pub fn placeholder(out: &std::path::Path, targets: &[String]) -> std::path::PathBuf {
    let pdir = out.join("placeholder");
    std::fs::create_dir_all(&pdir).expect("create the placeholder directory");
    let mut src = String::from(
        "#![no_std]\n#[panic_handler]\nfn panic(_: &core::panic::PanicInfo) -> ! { loop {} }\n",
    );
    let mut seen = std::collections::BTreeSet::new();
    for t in targets {
        if seen.insert(t) {
            let _ = writeln!(src, "#[no_mangle]\npub extern \"C\" fn uverbs_{t}() {{}}");
        }
    }
    let rs = pdir.join("placeholder.rs");
    std::fs::write(&rs, src).expect("write placeholder.rs");
    let so = pdir.join("libibverbs.so");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let mut cmd = std::process::Command::new(rustc);
    cmd.args([
        "--edition",
        "2021",
        "--crate-type",
        "cdylib",
        "--crate-name",
        "ibverbs",
    ])
    .args([
        "-C",
        "panic=abort",
        "-C",
        "opt-level=0",
        "-C",
        "debuginfo=0",
    ])
    .args([
        "-C",
        "link-arg=-Wl,-soname,libibverbs.so.1",
        "-C",
        "link-arg=-nostartfiles",
    ]);
    if let Ok(target) = std::env::var("TARGET") {
        cmd.args(["--target", &target]);
    }
    if let Ok(linker) = std::env::var("RUSTC_LINKER") {
        cmd.arg("-C").arg(format!("linker={linker}"));
    }
    let status = cmd
        .arg("-o")
        .arg(&so)
        .arg(&rs)
        .status()
        .expect("run rustc for the placeholder");
    assert!(
        status.success(),
        "building the placeholder libibverbs.so failed: {status}"
    );
    so
}

/// The whole build of a stub library (`capi/mlx5`, `capi/rdmacm`): for
/// `lib` = `libmlx5`, `libmlx5.so.1` of one-jump stubs, each
/// `<name>@@<node>` of the folder's `exports.txt` (its nodes checked
/// against `libmlx5.map`) jumping to our `libibverbs.so.1`'s private
/// export, linked against the placeholder so that the library needs
/// `libibverbs.so.1`. musl targets build no shared libraries: nothing to do.
#[allow(dead_code)] // capi/build.rs links no stub library
pub fn stub_library(lib: &str) {
    use std::{env, fs, path::PathBuf};
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let map_name = format!("{lib}.map");
    let soname = format!("{lib}.so.1");
    let short = lib.strip_prefix("lib").unwrap_or(lib);
    println!("cargo:rerun-if-changed=exports.txt");
    println!("cargo:rerun-if-changed={map_name}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../symver.rs");
    // musl targets build no shared libraries (rustc drops the cdylib):
    // static programs take the functions from libibverbs.a.
    if env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|e| e == "musl") {
        return;
    }
    let map =
        fs::read_to_string(dir.join(&map_name)).unwrap_or_else(|e| panic!("read {map_name}: {e}"));
    let list = fs::read_to_string(dir.join("exports.txt")).expect("read exports.txt");
    let mut stubs = Stubs::new(&format!(".text.uverbs_{short}"), &soname);
    let mut targets = Vec::new();
    for entry in entries("exports.txt", &list) {
        assert!(
            map.contains(&format!("{} {{", entry.node)),
            "exports.txt: node {} is not in {map_name}",
            entry.node
        );
        let stub = format!(
            "uverbs_{short}_v{}_{}",
            entry.node.replace('.', "_"),
            entry.name
        );
        let at = if entry.alias { "@" } else { "@@" };
        let version = format!("{}{at}{}", entry.name, entry.node);
        stubs.push(&stub, &entry.target, Some(&version));
        targets.push(entry.target);
    }
    fs::write(out.join("stubs.rs"), stubs.finish()).expect("write stubs.rs");

    let placeholder = placeholder(&out, &targets);
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        dir.join(&map_name).display()
    );
    println!("cargo:rustc-cdylib-link-arg={}", placeholder.display());
}
