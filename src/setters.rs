//! The chaining setters of the option and attribute structs
//! ([`QpAttr`](crate::QpAttr), [`QpCap`](crate::QpCap), ...): one `const fn`
//! per field, named after it, that sets it and returns the value, so a
//! struct the crate may grow (`#[non_exhaustive]`) is still written in one
//! expression: `QpAttr::new().qp_state(QpState::Init).port_num(1)`.
//!
//! Outside the crate a literal does not compile, with or without `..`
//! (what keeps adding a field from breaking programs):
//!
//! ```compile_fail,E0639
//! let cap = uverbs::QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
//! ```
//!
//! ```compile_fail,E0639
//! let attr = uverbs::QpAttr { port_num: 1, ..uverbs::QpAttr::default() };
//! ```
//!
//! ```compile_fail,E0639
//! let sge = uverbs::Sge { addr: 0, length: 0, lkey: 0 };
//! ```
//!
//! ```
//! let cap = uverbs::QpCap::new(1, 1, 1, 1);
//! let attr = uverbs::QpAttr::new().port_num(1);
//! let sge = uverbs::Sge::new(0, 0, 0);
//! # let _ = (cap, attr, sge);
//! ```

/// `setters! { /// doc\n field: Type, ... }` inside an `impl`: a
/// `pub const fn field(mut self, field: Type) -> Self` for each.
macro_rules! setters {
    ($( $(#[$doc:meta])* $field:ident: $ty:ty ),* $(,)?) => {
        $(
            $(#[$doc])*
            #[inline]
            #[must_use]
            pub const fn $field(mut self, $field: $ty) -> Self {
                self.$field = $field;
                self
            }
        )*
    };
}

pub(crate) use setters;
