//! The C structs of rdma-core 44's `<infiniband/verbs.h>` (and, in [`mlx5`],
//! `<infiniband/mlx5dv.h>`), laid out as C lays
//! them out (x86-64 and aarch64, glibc and musl alike: the only libc types
//! inside, `pthread_mutex_t` and `pthread_cond_t`, are 40 and 48 bytes in
//! both).
//!
//! Programs compile verbs.h's 96 inline functions into themselves: they read
//! fields (`qp->qp_num`, `mr->lkey`, `wc.status`) and call function pointers
//! (`ctx->ops.post_send`, the `verbs_context` ops at negative offsets from
//! the context, `ibv_qp_ex`'s `wr_*`, `ibv_cq_ex`'s `read_*`) at fixed
//! offsets, so a wrong offset is silent memory corruption, not a link error.
//! Every struct here is declared with [`c_layout!`](crate::c_layout), which asserts its size
//! at compile time and lists every field's offset; the layout probe test
//! (`probe.rs`) compiles a C program against Debian's verbs.h that prints the
//! same offsets and compares them field by field.
//!
//! Names are verbs.h's own, so that a field can be found in the header by
//! its name. verbs.h is dual-licensed GPL-2.0 or BSD (Linux-OpenIB); these
//! declarations restate its layout under the BSD option.

#![allow(non_camel_case_types, non_snake_case)]

pub mod context;
pub mod cq;
pub mod device;
pub mod mlx5;
pub mod pd;
pub mod qp;
pub mod rdmacm;
pub mod unsupported;

#[cfg(test)]
mod probe;
#[cfg(test)]
mod translations;

/// One C struct's layout as this crate declares it, for the probe test.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The C type, e.g. `struct ibv_qp` or `union ibv_gid`.
    pub c_name: &'static str,
    /// `sizeof`.
    pub size: usize,
    /// `_Alignof`.
    pub align: usize,
    /// Each field's name and offset.
    pub fields: &'static [(&'static str, usize)],
}

/// Declares the layout of a `#[repr(C)]` type for the probe test and
/// asserts its size at compile time:
/// `c_layout!(IBV_QP: "struct ibv_qp" = ibv_qp, 160, [context, qp_context, ...]);`
/// defines `pub const IBV_QP: Layout`.
#[macro_export]
#[doc(hidden)]
macro_rules! c_layout {
    ($name:ident : $c:literal = $ty:ty, $size:literal, [$($field:ident),* $(,)?]) => {
        const _: () = assert!(::core::mem::size_of::<$ty>() == $size, $c);
        #[doc = concat!("The layout of `", $c, "`.")]
        pub const $name: $crate::layout::Layout = $crate::layout::Layout {
            c_name: $c,
            size: ::core::mem::size_of::<$ty>(),
            align: ::core::mem::align_of::<$ty>(),
            fields: &[$((stringify!($field), ::core::mem::offset_of!($ty, $field))),*],
        };
    };
}

/// Every declared layout, for the probe test.
pub fn all() -> Vec<Layout> {
    let mut v = Vec::new();
    v.extend_from_slice(context::LAYOUTS);
    v.extend_from_slice(device::LAYOUTS);
    v.extend_from_slice(pd::LAYOUTS);
    v.extend_from_slice(cq::LAYOUTS);
    v.extend_from_slice(qp::LAYOUTS);
    v.extend_from_slice(unsupported::LAYOUTS);
    v.extend_from_slice(mlx5::LAYOUTS);
    v.extend_from_slice(rdmacm::LAYOUTS);
    v
}

/// `pthread_mutex_t` (40 bytes on glibc and musl, x86-64 and aarch64): only
/// its size matters, nothing here locks it (the objects' Rust state has its
/// own locks); zeroed, as `PTHREAD_MUTEX_INITIALIZER` is.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct pthread_mutex_t(pub [u8; 40]);

/// `pthread_cond_t` (48 bytes), zeroed as `PTHREAD_COND_INITIALIZER` is.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct pthread_cond_t(pub [u8; 48]);

/// A function pointer slot this library leaves NULL or does not call: its
/// signature does not matter to the layout.
///
/// Slots this library fills hold its typed functions, each cast once (with
/// `core::mem::transmute`, in the module that owns the function) to this
/// type: a function pointer has the same size and ABI whatever its
/// signature, and the program calls it with the signature verbs.h gives
/// the slot.
pub type AnyFn = Option<unsafe extern "C" fn()>;
