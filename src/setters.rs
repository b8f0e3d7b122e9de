//! The chaining setters of the option and attribute structs
//! ([`QpAttr`](crate::QpAttr), [`QpCap`](crate::QpCap), ...): one `const fn`
//! per field, named after it, that sets it and returns the value, so a
//! struct the crate may grow (`#[non_exhaustive]`) is still written in one
//! expression: `QpAttr::new().qp_state(QpState::Init).port_num(1)`.

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
