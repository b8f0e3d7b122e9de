//! The `RDMA_VERBS_IOCTL` command builder.
//!
//! A uverbs ioctl is an `ib_uverbs_ioctl_hdr` followed by an array of
//! `ib_uverbs_attr`, each naming one attribute of the method
//! (`include/uapi/rdma/rdma_user_ioctl_cmds.h`). [`IoctlCmd`] collects the
//! attributes with the encoding rules of the kernel's attribute specs
//! (`drivers/infiniband/core/uverbs_ioctl.c`, `uverbs_process_attr`):
//!
//! | spec       | encoding                                                        | builder |
//! |------------|-----------------------------------------------------------------|---------|
//! | `PTR_IN`   | `len = size`; inline in `data` when `len <= 8`, else a pointer  | [`IoctlCmd::input`], [`IoctlCmd::input_u32`], [`IoctlCmd::input_u64`] |
//! | `CONST_IN` | always 8 bytes inline                                           | [`IoctlCmd::const_in`] |
//! | `FLAGS_IN` | 8 bytes inline                                                  | [`IoctlCmd::flags_in`] |
//! | `PTR_OUT`  | always a pointer, `len` = buffer size                           | [`IoctlCmd::output`] |
//! | `IDR`      | the handle in `data`, `len = 0`; new handles written back       | [`IoctlCmd::object`], [`IoctlCmd::new_object`] |
//! | `FD`       | the fd in `data`, `len = 0`; new fds written back               | [`IoctlCmd::fd`], [`IoctlCmd::new_fd`] |
//!
//! Attributes are mandatory unless [`IoctlCmd::optional`] is called right after
//! adding them, as in libibverbs: a kernel that does not know a mandatory
//! attribute fails with `EPROTONOSUPPORT`, one that does not know an optional
//! attribute ignores it. The builder holds at most [`MAX_ATTRS`] attributes
//! inline, so building a command never allocates.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use crate::abi;
use zerocopy::{Immutable, IntoBytes};

use crate::sys::Errno;

/// The most attributes one command can carry (the largest core method, QP
/// create, uses 17 including the two driver-data attributes).
pub const MAX_ATTRS: usize = 24;

/// Where an attribute's payload lives.
#[derive(Debug, Default)]
pub enum AttrBuf<'a> {
    /// The payload is `data` itself (inline input, object handle, or nothing).
    #[default]
    Inline,
    /// An input buffer passed by pointer.
    In(&'a [u8]),
    /// An output buffer passed by pointer; the kernel fills up to `len` bytes.
    Out(&'a mut [u8]),
    /// An existing file descriptor (`data` = the fd).
    Fd(BorrowedFd<'a>),
    /// A new file descriptor created by the command; the transport stores it here.
    NewFd(Option<OwnedFd>),
    /// A new object; the kernel writes its handle into `data`.
    NewObject,
}

/// One `ib_uverbs_attr` together with the buffer it refers to.
#[derive(Debug, Default)]
pub struct Attr<'a> {
    /// Attribute id (`UVERBS_ATTR_*`).
    pub id: u16,
    /// Payload length in bytes (0 for handles and fds).
    pub len: u16,
    /// `UVERBS_ATTR_F_MANDATORY` on input; the kernel adds `UVERBS_ATTR_F_VALID_OUTPUT`.
    pub flags: u16,
    /// `attr_data` (the enum element for `ENUM_IN` attributes).
    pub attr_data: u16,
    /// Inline payload, handle or fd; the transport fills it for pointer attributes.
    pub data: u64,
    /// The buffer behind a pointer attribute, or the kind of inline value.
    pub buf: AttrBuf<'a>,
}

impl Attr<'_> {
    /// The `ib_uverbs_attr` the kernel sees for this attribute.
    ///
    /// Pointer attributes carry the buffer address, a new fd carries -1 (so
    /// an attribute the kernel ignores is never read back as descriptor 0);
    /// everything else carries `data`.
    pub fn to_raw(&self) -> abi::IbUverbsAttr {
        let data = match &self.buf {
            AttrBuf::In(b) => b.as_ptr() as u64,
            AttrBuf::Out(b) => b.as_ptr() as u64,
            AttrBuf::Fd(fd) => i64::from(fd.as_raw_fd()) as u64,
            AttrBuf::NewFd(_) => u64::MAX,
            AttrBuf::Inline | AttrBuf::NewObject => self.data,
        };
        abi::IbUverbsAttr {
            attr_id: self.id,
            len: self.len,
            flags: self.flags,
            attr_data: self.attr_data,
            data,
        }
    }

    /// Checks every length the kernel will trust against the buffer it
    /// describes: a pointer attribute's `len` within its slice, an inline
    /// one at most the 8 bytes of `data` (a longer one would make the
    /// kernel read `data` as an address), handles and fds 0. `EINVAL`
    /// otherwise.
    pub fn check_len(&self) -> Result<(), Errno> {
        let len = usize::from(self.len);
        let ok = match &self.buf {
            AttrBuf::In(b) => len <= b.len(),
            AttrBuf::Out(b) => len <= b.len(),
            AttrBuf::Inline => len <= 8,
            AttrBuf::Fd(_) | AttrBuf::NewFd(_) | AttrBuf::NewObject => len == 0,
        };
        if ok {
            Ok(())
        } else {
            Err(Errno::EINVAL)
        }
    }

    /// Whether the kernel reported this output as written.
    pub fn is_valid_output(&self) -> bool {
        self.flags & abi::UVERBS_ATTR_F_VALID_OUTPUT != 0
    }
}

/// A position in an [`IoctlCmd`], returned when an attribute is added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttrIndex(usize);

/// One uverbs ioctl: object, method, driver id and attributes.
#[derive(Debug)]
pub struct IoctlCmd<'a> {
    /// `UVERBS_OBJECT_*` (or a driver object id).
    pub object_id: u16,
    /// `UVERBS_METHOD_*` (or a driver method id).
    pub method_id: u16,
    /// The device's `RDMA_DRIVER_*` id; the kernel rejects a mismatch with `EINVAL`.
    pub driver_id: u32,
    attrs: [Attr<'a>; MAX_ATTRS],
    len: usize,
    overflow: bool,
}

impl<'a> IoctlCmd<'a> {
    /// A command with no attributes yet.
    pub fn new(object_id: u16, method_id: u16, driver_id: u32) -> Self {
        IoctlCmd {
            object_id,
            method_id,
            driver_id,
            attrs: Default::default(),
            len: 0,
            overflow: false,
        }
    }

    /// The attributes added so far, in order.
    pub fn attrs(&self) -> &[Attr<'a>] {
        &self.attrs[..self.len]
    }

    /// Mutable access for the crate's transports (writing back handles, fds
    /// and flags). Not public: the builder alone sets lengths and buffers.
    pub(crate) fn attrs_mut(&mut self) -> &mut [Attr<'a>] {
        &mut self.attrs[..self.len]
    }

    /// Fails with `E2BIG` when more than [`MAX_ATTRS`] attributes were added.
    pub fn check(&self) -> Result<(), Errno> {
        if self.overflow {
            Err(Errno::E2BIG)
        } else {
            Ok(())
        }
    }

    /// Finds an attribute by id.
    pub fn find(&self, id: u16) -> Option<&Attr<'a>> {
        self.attrs().iter().find(|a| a.id == id)
    }

    fn push(&mut self, attr: Attr<'a>) -> AttrIndex {
        if self.len == MAX_ATTRS {
            self.overflow = true;
            return AttrIndex(MAX_ATTRS - 1);
        }
        self.attrs[self.len] = attr;
        self.len += 1;
        AttrIndex(self.len - 1)
    }

    fn mandatory(id: u16, len: u16, data: u64, buf: AttrBuf<'a>) -> Attr<'a> {
        Attr {
            id,
            len,
            flags: abi::UVERBS_ATTR_F_MANDATORY,
            attr_data: 0,
            data,
            buf,
        }
    }

    /// Makes the most recently added attribute optional.
    pub fn optional(&mut self) -> &mut Self {
        if let Some(last) = self.len.checked_sub(1) {
            self.attrs[last].flags &= !abi::UVERBS_ATTR_F_MANDATORY;
        }
        self
    }

    /// A `PTR_IN` attribute: inline when at most 8 bytes, else by pointer.
    pub fn input(&mut self, id: u16, bytes: &'a [u8]) -> AttrIndex {
        let len = attr_len(bytes.len(), &mut self.overflow);
        if bytes.len() <= 8 {
            let mut inline = [0u8; 8];
            inline[..bytes.len()].copy_from_slice(bytes);
            self.push(Self::mandatory(
                id,
                len,
                u64::from_ne_bytes(inline),
                AttrBuf::Inline,
            ))
        } else {
            self.push(Self::mandatory(id, len, 0, AttrBuf::In(bytes)))
        }
    }

    /// A `PTR_IN` attribute holding a struct.
    pub fn input_struct<T: IntoBytes + Immutable>(&mut self, id: u16, value: &'a T) -> AttrIndex {
        self.input(id, value.as_bytes())
    }

    /// A 4-byte `PTR_IN` attribute (`UVERBS_ATTR_TYPE(u32)`), inline.
    pub fn input_u32(&mut self, id: u16, value: u32) -> AttrIndex {
        self.push(Self::mandatory(id, 4, u64::from(value), AttrBuf::Inline))
    }

    /// An 8-byte `PTR_IN` attribute (`UVERBS_ATTR_TYPE(u64)`), inline.
    pub fn input_u64(&mut self, id: u16, value: u64) -> AttrIndex {
        self.push(Self::mandatory(id, 8, value, AttrBuf::Inline))
    }

    /// A `RAW_FD` attribute (`UVERBS_ATTR_RAW_FD`): the fd number in
    /// `data` and a length of 0, as the kernel requires
    /// (`uverbs_process_attr`: any other length is `EINVAL`); unlike an
    /// `FD` attribute the kernel does not look the fd up.
    pub fn raw_fd(&mut self, id: u16, fd: i32) -> AttrIndex {
        self.push(Self::mandatory(
            id,
            0,
            i64::from(fd) as u64,
            AttrBuf::Inline,
        ))
    }

    /// A `CONST_IN` attribute: always 8 bytes inline, whatever the C type.
    pub fn const_in(&mut self, id: u16, value: u64) -> AttrIndex {
        self.input_u64(id, value)
    }

    /// A `FLAGS_IN` attribute (8 bytes inline).
    pub fn flags_in(&mut self, id: u16, value: u64) -> AttrIndex {
        self.input_u64(id, value)
    }

    /// A `PTR_OUT` attribute: always by pointer.
    pub fn output(&mut self, id: u16, buf: &'a mut [u8]) -> AttrIndex {
        let len = attr_len(buf.len(), &mut self.overflow);
        self.push(Self::mandatory(id, len, 0, AttrBuf::Out(buf)))
    }

    /// An existing object handle (`IDR` read/write/destroy access).
    pub fn object(&mut self, id: u16, handle: u32) -> AttrIndex {
        self.push(Self::mandatory(id, 0, u64::from(handle), AttrBuf::Inline))
    }

    /// A new object (`IDR` with `UVERBS_ACCESS_NEW`); read it with [`IoctlCmd::new_handle`].
    pub fn new_object(&mut self, id: u16) -> AttrIndex {
        self.push(Self::mandatory(id, 0, 0, AttrBuf::NewObject))
    }

    /// An existing file descriptor (`FD` attribute).
    pub fn fd(&mut self, id: u16, fd: BorrowedFd<'a>) -> AttrIndex {
        self.push(Self::mandatory(id, 0, 0, AttrBuf::Fd(fd)))
    }

    /// A new file descriptor; take it with [`IoctlCmd::take_fd`].
    pub fn new_fd(&mut self, id: u16) -> AttrIndex {
        self.push(Self::mandatory(id, 0, 0, AttrBuf::NewFd(None)))
    }

    /// Provider input (`UVERBS_ATTR_UHW_IN`), optional as the kernel declares it.
    pub fn driver_in(&mut self, bytes: &'a [u8]) -> &mut Self {
        if !bytes.is_empty() {
            self.input(abi::UVERBS_ATTR_UHW_IN, bytes);
            self.optional();
        }
        self
    }

    /// Provider output (`UVERBS_ATTR_UHW_OUT`), optional as the kernel declares it.
    pub fn driver_out(&mut self, buf: &'a mut [u8]) -> &mut Self {
        if !buf.is_empty() {
            self.output(abi::UVERBS_ATTR_UHW_OUT, buf);
            self.optional();
        }
        self
    }

    /// The handle the kernel assigned to a [`IoctlCmd::new_object`] attribute.
    pub fn new_handle(&self, at: AttrIndex) -> u32 {
        // Handles are u32 values zero-extended into `data`.
        self.attrs[at.0].data as u32
    }

    /// Takes the fd the kernel created for a [`IoctlCmd::new_fd`] attribute.
    pub fn take_fd(&mut self, at: AttrIndex) -> Option<OwnedFd> {
        match &mut self.attrs[at.0].buf {
            AttrBuf::NewFd(fd) => fd.take(),
            _ => None,
        }
    }

    /// Whether the kernel wrote the output attribute at `at`.
    pub fn is_valid_output(&self, at: AttrIndex) -> bool {
        self.attrs[at.0].is_valid_output()
    }
}

/// The kernel's side of a command: accessors for transports and fakes.
impl<'a> IoctlCmd<'a> {
    fn find_mut(&mut self, id: u16) -> Option<&mut Attr<'a>> {
        self.attrs_mut().iter_mut().find(|a| a.id == id)
    }

    /// The bytes of an input attribute (inline or by pointer).
    pub fn input_bytes(&self, id: u16) -> Option<Vec<u8>> {
        let a = self.find(id)?;
        match &a.buf {
            AttrBuf::In(b) => Some(b.to_vec()),
            AttrBuf::Inline => {
                let len = usize::from(a.len).min(8);
                Some(a.data.to_ne_bytes()[..len].to_vec())
            }
            _ => None,
        }
    }

    /// An inline input value (`CONST_IN`, `FLAGS_IN`, small `PTR_IN`, object handle).
    pub fn input_value(&self, id: u16) -> Option<u64> {
        let a = self.find(id)?;
        matches!(a.buf, AttrBuf::Inline).then_some(a.data)
    }

    /// Fills an output attribute as the kernel does (at most its length) and
    /// marks it valid; returns how many bytes were written.
    pub fn write_output(&mut self, id: u16, bytes: &[u8]) -> Option<usize> {
        let a = self.find_mut(id)?;
        let AttrBuf::Out(buf) = &mut a.buf else {
            return None;
        };
        let n = bytes.len().min(buf.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        a.flags |= abi::UVERBS_ATTR_F_VALID_OUTPUT;
        Some(n)
    }

    /// Stores the handle of a new object, as the kernel does.
    pub fn set_new_object(&mut self, id: u16, handle: u32) -> bool {
        match self.find_mut(id) {
            Some(a) if matches!(a.buf, AttrBuf::NewObject) => {
                a.data = u64::from(handle);
                true
            }
            _ => false,
        }
    }

    /// Stores a new file descriptor, as the transport does.
    pub fn set_new_fd(&mut self, id: u16, fd: OwnedFd) -> bool {
        match self.find_mut(id) {
            Some(a) => match &mut a.buf {
                AttrBuf::NewFd(slot) => {
                    *slot = Some(fd);
                    true
                }
                _ => false,
            },
            None => false,
        }
    }
}

fn attr_len(len: usize, overflow: &mut bool) -> u16 {
    u16::try_from(len).unwrap_or_else(|_| {
        *overflow = true;
        u16::MAX
    })
}

/// Whether an ioctl error means "this kernel has no such method": `ENOTTY`
/// (no ioctl interface at all) or `EPROTONOSUPPORT` (unknown object, method or
/// mandatory attribute). libibverbs falls back to `write()` on exactly these
/// (`libibverbs/cmd_fallback.c`).
pub fn is_unsupported(errno: Errno) -> bool {
    matches!(errno, Errno::ENOTTY | Errno::EPROTONOSUPPORT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_inputs_are_inline_and_large_ones_by_pointer() {
        let small = [1u8, 2, 3];
        let large = [7u8; 20];
        let mut cmd = IoctlCmd::new(3, 0, 14);
        cmd.input(1, &small);
        cmd.input(2, &large);
        let a = &cmd.attrs()[0];
        assert_eq!(
            (a.len, a.data),
            (3, u64::from_ne_bytes([1, 2, 3, 0, 0, 0, 0, 0]))
        );
        assert!(matches!(a.buf, AttrBuf::Inline));
        let b = cmd.attrs()[1].to_raw();
        assert_eq!(b.len, 20);
        assert_eq!(b.data, large.as_ptr() as u64);
    }

    #[test]
    fn optional_clears_only_the_last_mandatory_flag() {
        let mut cmd = IoctlCmd::new(0, 3, 1);
        cmd.const_in(0, 5);
        cmd.const_in(1, 6);
        cmd.optional();
        assert_eq!(cmd.attrs()[0].flags, abi::UVERBS_ATTR_F_MANDATORY);
        assert_eq!(cmd.attrs()[1].flags, 0);
    }

    #[test]
    fn const_in_is_always_eight_bytes() {
        let mut cmd = IoctlCmd::new(0, 2, 14);
        cmd.const_in(0, 1);
        assert_eq!(cmd.attrs()[0].len, 8);
    }

    #[test]
    fn driver_data_is_optional_and_skipped_when_empty() {
        let mut out = [0u8; 16];
        let mut cmd = IoctlCmd::new(3, 0, 14);
        cmd.driver_in(&[]).driver_out(&mut out);
        assert_eq!(cmd.attrs().len(), 1);
        assert_eq!(cmd.attrs()[0].id, abi::UVERBS_ATTR_UHW_OUT);
        assert_eq!(cmd.attrs()[0].flags, 0);
    }

    #[test]
    fn too_many_attributes_is_an_error_not_a_panic() {
        let mut cmd = IoctlCmd::new(0, 0, 0);
        for id in 0..(MAX_ATTRS as u16 + 3) {
            cmd.const_in(id, 0);
        }
        assert_eq!(cmd.check(), Err(Errno::E2BIG));
        assert_eq!(cmd.attrs().len(), MAX_ATTRS);
    }

    #[test]
    fn unsupported_errnos() {
        assert!(is_unsupported(Errno::ENOTTY));
        assert!(is_unsupported(Errno::EPROTONOSUPPORT));
        assert!(!is_unsupported(Errno::EINVAL));
    }
}
