//! Links `libmlx5.so.1`: a library of one-jump stubs, each rdma-core's
//! `mlx5dv_*` symbol under its version node, jumping to the private export
//! `uverbs_mlx5dv_*` of our `libibverbs.so.1`, where the functions live next
//! to the verbs objects they take. A program that loads both libraries (as
//! every mlx5dv user does) reaches one copy of uverbs.
//!
//! - `exports.txt` (the functions and their nodes) and `libmlx5.map` (the
//!   nodes) are this folder's; `capi/build.rs` checks the C library
//!   exports every function of the list.
//! - `libibverbs.so.1` must be a `DT_NEEDED` of the library (so that a
//!   `dlopen("libmlx5.so.1")` works alone), but cargo builds the two
//!   cdylibs in no fixed order. So the link takes a placeholder
//!   `libibverbs.so` made with rustc alone (no C; `symver::placeholder`; the build is `symver::stub_library`): soname
//!   `libibverbs.so.1`, defining each `uverbs_mlx5dv_*` the stubs jump to.
//!   At run time the loader binds them in the real library.

#[path = "../symver.rs"]
mod symver;

fn main() {
    symver::stub_library("libmlx5");
}
