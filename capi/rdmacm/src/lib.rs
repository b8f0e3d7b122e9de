//! `librdmacm.so.1` over uverbs: rdma-core 44's `<rdma/rdma_cma.h>` ABI.
//!
//! Nothing but stubs: each function of rdma-core's library, under the
//! version node rdma-core gives it (`rdma_create_id@@RDMACM_1.0`,
//! `rdma_establish@@RDMACM_1.2`), is one jump to the function of the same
//! name that our `libibverbs.so.1` exports privately as `uverbs_rdma_*`
//! (and `uverbs_r*` for the rsockets calls; the `uverbs-cabi` crate,
//! `capi/src/rdmacm/`), where the verbs objects the ids hand out
//! (`id->verbs`, `id->qp`, `id->pd`) live. So a program that loads both
//! libraries works on one copy of uverbs, and a static link needs only
//! `libibverbs.a`, which defines the same functions under their plain
//! names. `build.rs` generates the stubs from `exports.txt`; see
//! `capi/README.md`. (It links std, as every Rust cdylib must, and uses
//! none of it.)

#[allow(unsafe_code)] // the generated `global_asm!` stubs: jumps, no Rust code
mod stubs {
    #[cfg(not(target_env = "musl"))]
    include!(concat!(env!("OUT_DIR"), "/stubs.rs"));
}
