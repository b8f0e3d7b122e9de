//! Links the cdylib as rdma-core's `libibverbs.so.1`: its soname, and the
//! version nodes (`IBVERBS_1.0` ... `IBVERBS_1.14`, the private nodes of the
//! rdma-core releases) that programs linked against rdma-core's library
//! list in their version needs (`libibverbs.map`; see its header).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let map = format!("{dir}/libibverbs.map");
    println!("cargo:rerun-if-changed=libibverbs.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={map}");
}
