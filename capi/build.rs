//! Links the cdylib as rdma-core's `libibverbs.so.1` and gives every export
//! its symbol version.
//!
//! - The soname, and the version nodes (`libibverbs.map`: `IBVERBS_1.0` ...
//!   `IBVERBS_1.14` and the private nodes) that programs linked against
//!   rdma-core's library list in their version needs.
//! - `exports.txt` names each exported function's node. rustc's own version
//!   script exports every `#[export_name]` symbol unversioned, and a program
//!   linked against an unversioned definition binds, when it later runs on
//!   rdma-core's library, to the oldest version there (IBVERBS_1.0's
//!   compat entry points, another ABI). So each function is exported as
//!   `uverbs_<name>`, and `$OUT_DIR/symver.rs` (generated here, included
//!   by `lib.rs`) defines `<name>@@<node>` with a `.symver` directive,
//!   exactly as rdma-core's library defines it; static links resolve
//!   `<name>` to it too. The versioned name is given to a one-instruction
//!   stub that jumps to the function: LLVM's assembler wants the symbol a
//!   `.symver` renames defined in the same object, and rustc places the
//!   functions in codegen units of its choosing. (Only the exported entry
//!   points pay the jump; the data path runs through the ops tables.)
//! - The build fails when `exports.txt` and the sources disagree: a
//!   function exported under no node would be invisible under its name,
//!   and a listed one missing would leave a program's import unresolved.

use std::{collections::BTreeSet, fs, path::Path};

#[path = "symver.rs"]
mod symver;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    println!("cargo:rerun-if-changed=libibverbs.map");
    println!("cargo:rerun-if-changed=exports.txt");
    println!("cargo:rerun-if-changed=mlx5/exports.txt");
    println!("cargo:rerun-if-changed=rdmacm/exports.txt");
    println!("cargo:rerun-if-changed=symver.rs");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libibverbs.map");

    let map = fs::read_to_string(format!("{dir}/libibverbs.map")).expect("read libibverbs.map");
    let list = fs::read_to_string(format!("{dir}/exports.txt")).expect("read exports.txt");
    let mut stubs = symver::Stubs::new(".text.uverbs_symver", "libibverbs.so.1");
    let mut listed = BTreeSet::new();
    for e in symver::entries("exports.txt", &list) {
        let (name, node) = (&e.name, &e.node);
        assert!(
            map.contains(&format!("{node} {{")),
            "exports.txt: node {node} is not in libibverbs.map"
        );
        assert!(
            e.alias || listed.insert(name.clone()),
            "exports.txt: {name} twice"
        );
        // One stub per name and node, jumping to the Rust function.
        let (stub, at) = if e.alias {
            (format!("uverbs_v{node}_{name}"), "@")
        } else {
            (format!("uverbs_v_{name}"), "@@")
        };
        stubs.push(&stub, &e.target, Some(&format!("{name}{at}{node}")));
    }
    // libmlx5.so.1's functions (capi/mlx5/exports.txt) live here too, as
    // private exports `uverbs_<name>` that capi/mlx5's stubs jump to. For
    // static links the archive also defines each plain `<name>`; in the
    // cdylib rustc's version script keeps those local, so libibverbs.so.1
    // exports no mlx5dv_* name of its own. An older ABI's entry point
    // (`@name=target`) is served by its target.
    let mlx5 =
        fs::read_to_string(format!("{dir}/mlx5/exports.txt")).expect("read mlx5/exports.txt");
    for e in symver::entries("mlx5/exports.txt", &mlx5) {
        if e.alias {
            listed.insert(e.target);
            continue;
        }
        assert!(
            listed.insert(e.name.clone()),
            "mlx5/exports.txt: {} twice",
            e.name
        );
        stubs.push(&e.name, &e.name, None);
    }
    // librdmacm.so.1's functions (capi/rdmacm/exports.txt) likewise:
    // private exports `uverbs_<name>` that capi/rdmacm's stubs jump to,
    // plain `<name>` in the static archive.
    let rdmacm =
        fs::read_to_string(format!("{dir}/rdmacm/exports.txt")).expect("read rdmacm/exports.txt");
    for e in symver::entries("rdmacm/exports.txt", &rdmacm) {
        assert!(
            !e.alias && listed.insert(e.name.clone()),
            "rdmacm/exports.txt: {} twice, or an alias",
            e.name
        );
        stubs.push(&e.name, &e.name, None);
    }
    let mut exported = BTreeSet::new();
    collect_exports(Path::new(&format!("{dir}/src")), &mut exported);
    let unlisted: Vec<_> = exported.difference(&listed).collect();
    let missing: Vec<_> = listed.difference(&exported).collect();
    assert!(
        unlisted.is_empty() && missing.is_empty(),
        "exports.txt and the sources disagree: exported but not listed {unlisted:?}; \
         listed but not exported {missing:?}"
    );
    fs::write(format!("{out}/symver.rs"), stubs.finish()).expect("write symver.rs");
}

/// The names of `#[export_name = "uverbs_<name>"]` functions under `dir`.
fn collect_exports(dir: &Path, names: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).expect("read src") {
        let path = entry.expect("read src").path();
        if path.is_dir() {
            collect_exports(&path, names);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = fs::read_to_string(&path).expect("read a source file");
            for rest in text.split("#[export_name = \"uverbs_").skip(1) {
                if let Some(name) = rest.split('"').next() {
                    names.insert(name.to_string());
                }
            }
            // capi/src/mlx5/unsupported.rs's macro: `unsupported! {
            // convention: [name, ...], ... }` exports `uverbs_<name>` for
            // each name in the brackets.
            for rest in text.split("unsupported! {").skip(1) {
                let body = rest.split("\n}").next().unwrap_or_default();
                for list in body.split('[').skip(1) {
                    let list = list.split(']').next().unwrap_or_default();
                    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                        names.insert(name.to_string());
                    }
                }
            }
        }
    }
}
