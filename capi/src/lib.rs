//! `libibverbs.so.1` over uverbs: rdma-core's C API (`<infiniband/verbs.h>`
//! of rdma-core 44) for unmodified C programs, on the pure-Rust verbs stack.
//!
//! The crate builds as `libibverbs.so` (soname `libibverbs.so.1`, with
//! rdma-core's version nodes: see `build.rs` and `libibverbs.map`), which
//! programs linked against rdma-core's library load through
//! `LD_LIBRARY_PATH`, and as `libibverbs.a` for static links (musl
//! included). The C objects are the structs of [`layout`], laid out as
//! verbs.h lays them out; each is the first field of a `#[repr(C)]` Rust
//! object that holds the uverbs object behind it, so the pointer a program
//! holds is the Rust object's address.
//!
//! Conventions, per function as libibverbs has them: constructors return
//! NULL and set `errno`; `ibv_modify_*`, `ibv_destroy_*`, `ibv_query_*`
//! (most) and the posts return a positive errno; the event gets and
//! `ibv_query_gid` return -1 and set `errno`. Anything uverbs does not do
//! fails with `EOPNOTSUPP`; no function reports success without doing the
//! work.
//!
//! `unsafe` is allowed only in the modules that export C functions, each
//! block with its `// SAFETY:` reasoning: the pointers come from the
//! program, which verbs.h's contract makes responsible for passing live
//! objects of this library.

#![deny(unsafe_code)]

pub mod layout;

mod errno;

mod ctx;
mod device;
mod query;
mod async_event;

mod cq;
mod comp_channel;
mod cq_ex;

mod pd;
mod qp;
mod qp_ex;
mod srq;
mod ah;

mod unsupported;
