//! Links `librdmacm.so.1`: a library of one-jump stubs, each rdma-core's
//! `rdma_*` symbol under its version node, jumping to the private export
//! `uverbs_rdma_*` of our `libibverbs.so.1`, where the functions live next
//! to the verbs objects they take. A program that loads both libraries (as
//! every rdma_cm user of verbs does) reaches one copy of uverbs.
//!
//! - `exports.txt` (the functions and their nodes) and `librdmacm.map` (the
//!   nodes) are this folder's; `capi/build.rs` checks the C library
//!   exports every function of the list.
//! - `libibverbs.so.1` must be a `DT_NEEDED` of the library (so that a
//!   `dlopen("librdmacm.so.1")` works alone), but cargo builds the two
//!   cdylibs in no fixed order. So the link takes a placeholder
//!   `libibverbs.so` made with rustc alone (no C; `symver::placeholder`): soname
//!   `libibverbs.so.1`, defining each `uverbs_rdma_*` the stubs jump to.
//!   At run time the loader binds them in the real library.

use std::{env, fs, path::PathBuf};

#[path = "../symver.rs"]
mod symver;

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=exports.txt");
    println!("cargo:rerun-if-changed=librdmacm.map");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../symver.rs");
    // musl targets build no shared libraries (rustc drops the cdylib):
    // static programs take the functions from libibverbs.a.
    if env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|e| e == "musl") {
        return;
    }
    let map = fs::read_to_string(dir.join("librdmacm.map")).expect("read librdmacm.map");
    let list = fs::read_to_string(dir.join("exports.txt")).expect("read exports.txt");
    let mut stubs = symver::Stubs::new(".text.uverbs_rdmacm", "librdmacm.so.1");
    let mut targets = Vec::new();
    for entry in symver::entries("exports.txt", &list) {
        assert!(
            map.contains(&format!("{} {{", entry.node)),
            "exports.txt: node {} is not in librdmacm.map",
            entry.node
        );
        let stub = format!(
            "uverbs_rdmacm_v{}_{}",
            entry.node.replace('.', "_"),
            entry.name
        );
        let at = if entry.alias { "@" } else { "@@" };
        let version = format!("{}{at}{}", entry.name, entry.node);
        stubs.push(&stub, &entry.target, Some(&version));
        targets.push(entry.target);
    }
    fs::write(out.join("stubs.rs"), stubs.finish()).expect("write stubs.rs");

    let placeholder = symver::placeholder(&out, &targets);
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librdmacm.so.1");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        dir.join("librdmacm.map").display()
    );
    println!("cargo:rustc-cdylib-link-arg={}", placeholder.display());
}
