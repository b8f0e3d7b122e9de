//! Layout registry: the macros that define every ABI struct and constant of
//! this crate, and the tables that `tests/layout.rs` checks against the C
//! headers.
//!
//! Every struct is declared through [`abi_structs!`] and every constant
//! through [`abi_consts!`]. Each invocation also emits the module's registry
//! (`STRUCTS` / `CONSTS`), which [`ALL_STRUCTS`] and [`ALL_CONSTS`] collect.
//! The layout test compiles a C program that prints `sizeof`, `_Alignof`,
//! `offsetof` and member sizes for every registered entry, and a completeness
//! test scans `src/` so that a `pub struct` or `pub const` outside the
//! registry fails the build's tests.

/// One field of a registered struct.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct FieldLayout {
    /// Rust field name.
    pub rust: &'static str,
    /// C member designator for `offsetof` (may be a path such as `wr.rdma`).
    /// Empty for padding that is implicit in C.
    pub c: &'static str,
    /// Rust `offset_of!`.
    pub offset: usize,
    /// Rust `size_of` of the field type.
    pub size: usize,
}

/// One registered struct.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct StructLayout {
    /// Rust type name.
    pub rust: &'static str,
    /// C type expression (`struct x`, `union y` or a `__typeof__(...)`).
    pub c_type: &'static str,
    /// Rust `size_of`.
    pub size: usize,
    /// Rust `align_of`.
    pub align: usize,
    /// Every field, in declaration order.
    pub fields: &'static [FieldLayout],
}

/// One registered constant (value widened to `i128`, so that both `u64`
/// flags and negative values compare exactly).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct ConstLayout {
    /// Rust (= C) name.
    pub name: &'static str,
    /// Value.
    pub value: i128,
}

/// A derived value checked against a C expression (e.g. a function-like
/// macro such as `RDMA_NL_GET_TYPE`).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct ExprLayout {
    /// C expression.
    pub c: &'static str,
    /// Value computed by Rust.
    pub value: i128,
}

#[doc(hidden)]
#[macro_export]
macro_rules! __abi_c_field {
    ($rust:ident) => {
        stringify!($rust)
    };
    ($rust:ident $c:literal) => {
        $c
    };
}

/// Defines `#[repr(C)]` zerocopy structs and the module registry `STRUCTS`.
///
/// ```ignore
/// abi_structs! {
///     /// `struct ib_uverbs_cmd_hdr`.
///     pub struct IbUverbsCmdHdr: "struct ib_uverbs_cmd_hdr" {
///         pub command: u32,
///         pub in_words: u16,
///         pub out_words: u16,
///     }
///     pub struct Example: "struct example" {
///         pub type_: u32 = "type",     // C member name differs from the Rust one
///         pub _pad4: [u8; 4] = "",      // padding that is implicit in C
///     }
/// }
/// ```
///
/// Every struct gets `Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes,
/// Immutable, KnownLayout` and a `Default` that returns all-zero bytes
/// (`FromZeros::new_zeroed`), which also covers arrays longer than 32.
#[macro_export]
macro_rules! abi_structs {
    ($(
        $(#[$m:meta])*
        pub struct $name:ident : $c:literal {
            $( $(#[$fm:meta])* pub $f:ident : $t:ty $(= $cf:literal)? ),* $(,)?
        }
    )*) => {
        // zerocopy's `KnownLayout` derive emits a helper type without `Debug`;
        // the allow is scoped to this module, whose own structs all derive it.
        #[allow(missing_debug_implementations)]
        mod abi_defs {
            #[allow(unused_imports)]
            use super::*;
            $(
                $(#[$m])*
                #[repr(C)]
                #[derive(
                    Clone, Copy, Debug, PartialEq, Eq,
                    zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::Immutable, zerocopy::KnownLayout,
                )]
                pub struct $name {
                    $( $(#[$fm])* pub $f: $t, )*
                }

                impl Default for $name {
                    fn default() -> Self {
                        zerocopy::FromZeros::new_zeroed()
                    }
                }
            )*
        }
        pub use abi_defs::*;

        /// Registry of the structs defined in this module.
        pub(crate) const STRUCTS: &[$crate::layout::StructLayout] = &[$(
            $crate::layout::StructLayout {
                rust: stringify!($name),
                c_type: $c,
                size: core::mem::size_of::<$name>(),
                align: core::mem::align_of::<$name>(),
                fields: &[$(
                    $crate::layout::FieldLayout {
                        rust: stringify!($f),
                        c: $crate::__abi_c_field!($f $($cf)?),
                        offset: core::mem::offset_of!($name, $f),
                        size: core::mem::size_of::<$t>(),
                    },
                )*],
            },
        )*];
    };
}

/// Defines `pub const` items and the module registry `CONSTS`.
///
/// ```ignore
/// abi_consts! {
///     // enum ib_uverbs_write_cmds
///     pub const IB_USER_VERBS_CMD_GET_CONTEXT: u32 = 0;
/// }
/// ```
#[macro_export]
macro_rules! abi_consts {
    ($( $(#[$m:meta])* pub const $name:ident : $t:ty = $v:expr; )*) => {
        $( $(#[$m])* pub const $name: $t = $v; )*

        /// Registry of the constants defined in this module.
        #[allow(clippy::cast_lossless, clippy::unnecessary_cast)]
        pub(crate) const CONSTS: &[$crate::layout::ConstLayout] = &[$(
            $crate::layout::ConstLayout { name: stringify!($name), value: $name as i128 },
        )*];
    };
}

pub use crate::{abi_consts, abi_structs};

const fn total<T>(parts: &[&[T]]) -> usize {
    let mut n = 0;
    let mut p = 0;
    while p < parts.len() {
        n += parts[p].len();
        p += 1;
    }
    n
}

const fn concat<T: Copy, const N: usize>(parts: &[&[T]], fill: T) -> [T; N] {
    let mut out = [fill; N];
    let mut n = 0;
    let mut p = 0;
    while p < parts.len() {
        let part = parts[p];
        let mut i = 0;
        while i < part.len() {
            out[n] = part[i];
            i += 1;
            n += 1;
        }
        p += 1;
    }
    out
}

const STRUCT_PARTS: &[&[StructLayout]] = &[
    crate::ioctl::STRUCTS,
    crate::ioctl_verbs::STRUCTS,
    crate::write::STRUCTS,
    crate::write_cq::STRUCTS,
    crate::write_qp::STRUCTS,
    crate::write_srq_wq::STRUCTS,
    crate::write_flow::STRUCTS,
    crate::events::STRUCTS,
    crate::rxe::STRUCTS,
    crate::mlx5::STRUCTS,
    crate::mlx5_ioctl::STRUCTS,
    crate::ucma::STRUCTS,
    crate::nldev::STRUCTS,
];

const CONST_PARTS: &[&[ConstLayout]] = &[
    crate::ioctl::CONSTS,
    crate::ioctl_verbs::CONSTS,
    crate::write::CONSTS,
    crate::events::CONSTS,
    crate::rxe::CONSTS,
    crate::mlx5::CONSTS,
    crate::mlx5_ioctl::CONSTS,
    crate::ucma::CONSTS,
    crate::nldev::CONSTS,
];

const NO_STRUCT: StructLayout = StructLayout {
    rust: "",
    c_type: "",
    size: 0,
    align: 0,
    fields: &[],
};
const NO_CONST: ConstLayout = ConstLayout { name: "", value: 0 };

/// Every registered struct of the crate.
#[doc(hidden)]
pub const ALL_STRUCTS: &[StructLayout] =
    &concat::<StructLayout, { total(STRUCT_PARTS) }>(STRUCT_PARTS, NO_STRUCT);

/// Every registered constant of the crate.
#[doc(hidden)]
pub const ALL_CONSTS: &[ConstLayout] =
    &concat::<ConstLayout, { total(CONST_PARTS) }>(CONST_PARTS, NO_CONST);

/// Derived values checked against C expressions.
#[doc(hidden)]
pub const ALL_EXPRS: &[ExprLayout] = crate::nldev::EXPRS;
