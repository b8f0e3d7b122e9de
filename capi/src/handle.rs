//! The one conversion between a C object of this library and the program's
//! pointer to it, in the shape of Rust-for-Linux's `ForeignOwnable`: a
//! boxed Rust object whose C struct the program points at is handed out
//! once ([`Handle::into_c`]), borrowed back from the pointer on every call
//! ([`Handle::from_c`]), and taken back once when the program destroys it
//! ([`Handle::free`], [`Handle::from_c_owned`]).
//!
//! An object type implements it with [`handle!`](crate::handle!), naming
//! the field the program's pointer points at: the first field for every
//! object but the context, whose `ibv_context` is the last field of its
//! first field (`verbs_context`); DevX objects are opaque to the program.

#![allow(unsafe_code)]

use uverbs::sys::Errno;

/// A C object of this library; see the module documentation.
///
/// # Safety
/// [`Handle::C_OFFSET`] bytes into the object is a field of type
/// [`Handle::C`] or one that begins with it (`ibv_cq_ex` begins with
/// `ibv_cq`'s fields): [`handle!`](crate::handle!) takes the offset from
/// the field with `offset_of!`.
pub(crate) unsafe trait Handle: Sized {
    /// The C struct the program's pointer names.
    type C;
    /// Where it is in the object.
    const C_OFFSET: usize = 0;

    /// Hands the object to the program: the pointer to its C part, valid
    /// until [`Handle::free`].
    fn into_c(self: Box<Self>) -> *mut Self::C {
        Box::into_raw(self)
            .cast::<u8>()
            .wrapping_add(Self::C_OFFSET)
            .cast()
    }

    /// The object behind the program's pointer; `EINVAL` for NULL.
    ///
    /// # Safety
    /// `p` is NULL or a pointer [`Handle::into_c`] returned whose object is
    /// not freed, and the reference is not used after it is.
    unsafe fn from_c<'a>(p: *mut Self::C) -> Result<&'a Self, Errno> {
        if p.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: by the caller's contract `p` points `C_OFFSET` bytes into
        // a live `Self` (the trait's contract).
        Ok(unsafe { &*p.byte_sub(Self::C_OFFSET).cast::<Self>() })
    }

    /// Takes the object back from the program, which gives up its pointer.
    ///
    /// # Safety
    /// `p` is a pointer [`Handle::into_c`] returned whose object is not
    /// freed; neither it nor a reference [`Handle::from_c`] made from it is
    /// used after.
    unsafe fn from_c_owned(p: *mut Self::C) -> Box<Self> {
        // SAFETY: the caller's contract: the allocation `into_c` gave out,
        // `C_OFFSET` bytes before `p`.
        unsafe { Box::from_raw(p.byte_sub(Self::C_OFFSET).cast::<Self>()) }
    }

    /// Frees the object behind the program's pointer (its destroy).
    ///
    /// # Safety
    /// As [`Handle::from_c_owned`].
    unsafe fn free(p: *mut Self::C) {
        // SAFETY: the caller's contract.
        drop(unsafe { Self::from_c_owned(p) });
    }
}

/// Implements [`Handle`] for `$ty`, whose C part `$c` is its field
/// `$($field).+` (a path for a nested one), checking the offset at compile
/// time: `handle!(Cq: ibv_cq = c);`.
#[macro_export]
#[doc(hidden)]
macro_rules! handle {
    // An object the program holds as an opaque pointer (`void *`): its
    // address.
    ($ty:ty : opaque) => {
        // SAFETY: the C part is the whole object, at offset 0.
        unsafe impl $crate::handle::Handle for $ty {
            type C = ::core::ffi::c_void;
        }
    };
    ($ty:ty : $c:ty = $first:ident $(. $rest:ident)*) => {
        // SAFETY: `$ty` is `#[repr(C)]` and its C part is where `C_OFFSET`
        // says (the offset is the field's, and the field is of type `$c`
        // or begins with it).
        unsafe impl $crate::handle::Handle for $ty {
            type C = $c;
            const C_OFFSET: usize = ::core::mem::offset_of!($ty, $first $(. $rest)*);
        }
    };
}
