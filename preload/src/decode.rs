//! Raw `RDMA_VERBS_IOCTL` calls to the model's typed commands.
//!
//! The inverse of a transport: an `ib_uverbs_ioctl_hdr` and its
//! `ib_uverbs_attr[]` in the caller's memory become an [`IoctlCmd`] whose
//! slices point into the caller's buffers, built with the public builder;
//! what the model answers (flags, new handles, new fds) is copied back into
//! the caller's attributes, as `drivers/infiniband/core/uverbs_ioctl.c`
//! (`ib_uverbs_cmd_verbs`, `uverbs_process_attr`, `uverbs_finalize_attrs`)
//! does. The attribute kinds come from the 6.1 method specs (`specs.rs`).
//! `UVERBS_METHOD_INVOKE_WRITE` is answered as the 6.1 uverbs core does it
//! (`uverbs_std_types_device.c`): the write command it names runs as a
//! [`WriteCmd`] with `CORE_IN`, `UHW_IN`, `CORE_OUT` and `UHW_OUT` as its
//! four parts.
#![allow(unsafe_code)] // reads and writes the caller's command buffers

use std::os::fd::{BorrowedFd, IntoRawFd, RawFd};

use uverbs::ioctl::AttrIndex;
use uverbs::sys::{Errno, IoctlCmd, Kernel, WriteCmd};

use crate::specs::{self, Kind, Spec};

/// `struct ib_uverbs_ioctl_hdr` (`include/uapi/rdma/rdma_user_ioctl_cmds.h`).
const HDR_LEN: usize = 24;
/// `struct ib_uverbs_attr`.
const ATTR_LEN: usize = 16;
/// `UVERBS_ATTR_F_MANDATORY`, `UVERBS_ATTR_F_VALID_OUTPUT`.
const F_MANDATORY: u16 = 1;
const F_VALID_OUTPUT: u16 = 2;
/// `IB_USER_VERBS_CMD_GET_CONTEXT`, `IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`:
/// the write commands whose response starts with a new fd.
const CMD_GET_CONTEXT: u32 = 0;
const CMD_CREATE_COMP_CHANNEL: u32 = 17;

/// `RDMA_DRIVER_MLX5` (`include/uapi/rdma/ib_user_ioctl_verbs.h`,
/// `enum rdma_driver_id`: UNKNOWN, MLX5, ...); `uverbs_ioctl.c:562` refuses
/// another driver's id with `EINVAL`.
const RDMA_DRIVER_MLX5: u32 = 1;

/// `RDMA_VERBS_IOCTL` = `_IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr)`.
pub(crate) const RDMA_VERBS_IOCTL: libc::c_ulong =
    (3 << 30) | ((HDR_LEN as libc::c_ulong) << 16) | (0x1b << 8) | 1;

/// One raw attribute, read from the caller.
#[derive(Debug, Clone, Copy)]
struct RawAttr {
    id: u16,
    len: u16,
    flags: u16,
    data: u64,
    /// Where the attribute is in the caller's memory.
    at: *mut u8,
}

fn rd16(p: *const u8) -> u16 {
    // SAFETY: callers pass pointers into the header or attribute array
    // they have checked the length of.
    unsafe { std::ptr::read_unaligned(p.cast::<u16>()) }
}

fn rd32(p: *const u8) -> u32 {
    // SAFETY: as `rd16`.
    unsafe { std::ptr::read_unaligned(p.cast::<u32>()) }
}

fn rd64(p: *const u8) -> u64 {
    // SAFETY: as `rd16`.
    unsafe { std::ptr::read_unaligned(p.cast::<u64>()) }
}

/// The bytes of a `PTR_IN` attribute: inline in `data` up to 8 bytes.
///
/// # Safety
///
/// The caller's attribute must describe memory that stays valid for `'a`.
unsafe fn in_bytes<'a>(a: &RawAttr) -> &'a [u8] {
    let len = usize::from(a.len);
    if len <= 8 {
        // SAFETY: `data` is the 8 bytes at offset 8 of the caller's attribute.
        unsafe { std::slice::from_raw_parts(a.at.add(8), len) }
    } else if a.data == 0 {
        &[]
    } else {
        // SAFETY: the caller passed `len` bytes at `data` (the kernel would
        // copy_from_user them).
        unsafe { std::slice::from_raw_parts(a.data as usize as *const u8, len) }
    }
}

/// The buffer of a `PTR_OUT` attribute.
///
/// # Safety
///
/// As [`in_bytes`]; the buffer must not alias another attribute's.
unsafe fn out_bytes<'a>(a: &RawAttr) -> &'a mut [u8] {
    if a.len == 0 || a.data == 0 {
        return &mut [];
    }
    // SAFETY: the caller passed `len` writable bytes at `data`.
    unsafe { std::slice::from_raw_parts_mut(a.data as usize as *mut u8, usize::from(a.len)) }
}

/// What the caller must be told about a new fd.
pub(crate) type NewFds = Vec<RawFd>;

/// Runs the ioctl at `arg` against the model; the new fds it handed out
/// are returned so the caller can track them.
///
/// # Safety
///
/// `arg` must be what the program passed to `ioctl(fd, RDMA_VERBS_IOCTL,
/// arg)`; the memory it names is the program's, as for the kernel.
pub(crate) unsafe fn ioctl(
    k: &dyn Kernel,
    fd: BorrowedFd<'_>,
    arg: *mut u8,
) -> Result<NewFds, Errno> {
    if arg.is_null() {
        return Err(Errno::EFAULT);
    }
    let length = usize::from(rd16(arg));
    let object = rd16(arg.wrapping_add(2));
    let method = rd16(arg.wrapping_add(4));
    let num_attrs = usize::from(rd16(arg.wrapping_add(6)));
    let reserved1 = rd64(arg.wrapping_add(8));
    let driver_id = rd32(arg.wrapping_add(16));
    let reserved2 = rd32(arg.wrapping_add(20));
    // ib_uverbs_cmd_verbs: the driver must be the device's.
    if driver_id != RDMA_DRIVER_MLX5 {
        return Err(Errno::EINVAL);
    }
    // ib_uverbs_ioctl: the length must match, the reserved fields be zero.
    if length != HDR_LEN + ATTR_LEN * num_attrs || length > 4096 {
        return Err(Errno::EINVAL);
    }
    if reserved1 != 0 || reserved2 != 0 {
        return Err(Errno::EPROTONOSUPPORT);
    }
    let raw: Vec<RawAttr> = (0..num_attrs)
        .map(|i| {
            let at = arg.wrapping_add(HDR_LEN + ATTR_LEN * i);
            RawAttr {
                id: rd16(at),
                len: rd16(at.wrapping_add(2)),
                flags: rd16(at.wrapping_add(4)),
                data: rd64(at.wrapping_add(8)),
                at,
            }
        })
        .collect();
    let specs: Vec<Spec> = specs::METHODS
        .iter()
        .filter(|m| m.object == object && m.method == method)
        .flat_map(|m| m.attrs.iter().copied())
        .collect();
    if specs.is_empty() {
        // uapi_get_method: no such object or method.
        return Err(Errno::EPROTONOSUPPORT);
    }
    // uverbs_process_attr: an attribute the method does not know fails the
    // call when the caller marked it mandatory and is ignored otherwise.
    let mut known = Vec::with_capacity(raw.len());
    for a in &raw {
        match specs.iter().find(|s| s.id == a.id) {
            Some(s) => {
                if known.iter().any(|(b, _): &(RawAttr, Spec)| b.id == a.id) {
                    return Err(Errno::EINVAL); // an attribute twice
                }
                known.push((*a, *s));
            }
            None if a.flags & F_MANDATORY != 0 => return Err(Errno::EPROTONOSUPPORT),
            None => {}
        }
    }
    // A mandatory attribute of the spec missing: EINVAL (the bundle's
    // mandatory bitmap check in ib_uverbs_run_method).
    if specs
        .iter()
        .any(|s| s.mandatory && !known.iter().any(|(a, _)| a.id == s.id))
    {
        return Err(Errno::EINVAL);
    }
    if object == specs::OBJECT_DEVICE && method == specs::METHOD_INVOKE_WRITE {
        // SAFETY: the caller's attributes, as for the kernel.
        return unsafe { invoke_write(k, fd, &known) };
    }
    let mut cmd = IoctlCmd::new(object, method, driver_id);
    let mut back: Vec<(AttrIndex, RawAttr, Kind)> = Vec::with_capacity(known.len());
    for (a, s) in &known {
        let at = match s.kind {
            // uverbs_process_attr: a RAW_FD has length 0 and its number in
            // `data` (the kernel checks it fits an int).
            Kind::RawFd => {
                let fd = a.data as i64;
                if a.len != 0 || i32::try_from(fd).is_err() {
                    return Err(Errno::EINVAL);
                }
                cmd.raw_fd(a.id, fd as i32)
            }
            Kind::PtrIn | Kind::ConstIn | Kind::FlagsIn | Kind::EnumIn => {
                // SAFETY: the caller's buffers, valid for this call.
                cmd.input(a.id, unsafe { in_bytes(a) })
            }
            // SAFETY: as above; distinct outputs do not overlap.
            Kind::PtrOut => cmd.output(a.id, unsafe { out_bytes(a) }),
            Kind::Idr | Kind::IdrDestroy => cmd.object(a.id, a.data as u32),
            Kind::IdrNew => cmd.new_object(a.id),
            Kind::Fd => {
                let raw = a.data as i64 as RawFd;
                if raw < 0 {
                    return Err(Errno::EBADF);
                }
                // SAFETY: the program named this fd for the duration of
                // the call; the model only looks at it.
                cmd.fd(a.id, unsafe { BorrowedFd::borrow_raw(raw) })
            }
            Kind::FdNew => cmd.new_fd(a.id),
        };
        if a.flags & F_MANDATORY == 0 {
            cmd.optional();
        }
        back.push((at, *a, s.kind));
    }
    cmd.check()?;
    // SAFETY: every address the command carries is the program's own, as
    // it is when the program makes this call on a real device.
    unsafe { k.ioctl(fd, &mut cmd) }?;
    let mut fds = Vec::new();
    for (at, a, kind) in back {
        match kind {
            Kind::PtrOut if cmd.is_valid_output(at) => {
                // SAFETY: `flags` at offset 4 of the caller's attribute.
                unsafe {
                    std::ptr::write_unaligned(a.at.add(4).cast::<u16>(), a.flags | F_VALID_OUTPUT)
                };
            }
            Kind::IdrNew => {
                let h = u64::from(cmd.new_handle(at));
                // SAFETY: `data` at offset 8.
                unsafe { std::ptr::write_unaligned(a.at.add(8).cast::<u64>(), h) };
            }
            Kind::FdNew => {
                let fd = cmd.take_fd(at).ok_or(Errno::EINVAL)?.into_raw_fd();
                fds.push(fd);
                // SAFETY: `data` at offset 8.
                unsafe { std::ptr::write_unaligned(a.at.add(8).cast::<u64>(), fd as u64) };
            }
            _ => {}
        }
    }
    Ok(fds)
}

/// `UVERBS_METHOD_INVOKE_WRITE` (Linux 6.1 `uverbs_std_types_device.c`):
/// the write command `WRITE_CMD` with `CORE_IN`/`CORE_OUT` as its core
/// request and response and the UHW attributes as the driver's parts.
///
/// # Safety
///
/// As [`ioctl`].
unsafe fn invoke_write(
    k: &dyn Kernel,
    fd: BorrowedFd<'_>,
    known: &[(RawAttr, Spec)],
) -> Result<NewFds, Errno> {
    let find = |id| known.iter().find(|(a, _)| a.id == id).map(|(a, _)| *a);
    let command = find(specs::ATTR_WRITE_CMD).ok_or(Errno::EINVAL)?.data;
    let command = u32::try_from(command).map_err(|_| Errno::EINVAL)?;
    // uapi_get_method: flag bits beyond the extended flag and the 8-bit
    // command are EINVAL, an unknown command EOPNOTSUPP.
    if command & !(specs::EXTENDED | 0xff) != 0 {
        return Err(Errno::EINVAL);
    }
    let &(_, _, req_size, resp_size) = specs::WRITE_SIZES
        .iter()
        .find(|(c, _, _, _)| *c == command)
        .ok_or(Errno::EOPNOTSUPP)?;
    let core_in_attr = find(specs::ATTR_CORE_IN);
    let core_out_attr = find(specs::ATTR_CORE_OUT);
    // SAFETY: the caller's buffers, valid for this call.
    let core_in: &[u8] = core_in_attr.map_or(&[], |a| unsafe { in_bytes(&a) });
    let core_out: &mut [u8] = match core_out_attr {
        // SAFETY: as above.
        Some(a) => unsafe { out_bytes(&a) },
        None => &mut [],
    };
    if core_in.len() < req_size || core_out.len() < resp_size {
        return Err(Errno::ENOSPC);
    }
    // SAFETY: as above.
    let driver_in: &[u8] = find(specs::ATTR_UHW_IN).map_or(&[], |a| unsafe { in_bytes(&a) });
    let uhw_out = find(specs::ATTR_UHW_OUT);
    let driver_out: &mut [u8] = match uhw_out {
        // SAFETY: as above.
        Some(a) => unsafe { out_bytes(&a) },
        None => &mut [],
    };
    let mut cmd = WriteCmd {
        command,
        core_in,
        driver_in,
        core_out,
        driver_out,
        fd_at: None,
        new_fd: None,
    };
    // SAFETY: the addresses in the request are the program's own.
    let fds = unsafe { run_write(k, fd, &mut cmd) }?;
    // The 6.1 core marks the responses it copied (uverbs_response,
    // uverbs_copy_to_struct_or_zero; ib_copy_to_udata for UHW_OUT).
    for a in [core_out_attr, uhw_out].into_iter().flatten() {
        // SAFETY: `flags` at offset 4 of the caller's attribute.
        unsafe { std::ptr::write_unaligned(a.at.add(4).cast::<u16>(), a.flags | F_VALID_OUTPUT) };
    }
    Ok(fds)
}

/// Runs a write command against the model; for the commands whose response
/// starts with a new fd (`GET_CONTEXT`'s `async_fd`, `CREATE_COMP_CHANNEL`'s
/// `fd`) the fd the model handed out is stored there and returned.
///
/// # Safety
///
/// The addresses in the request are the program's own, as for
/// [`Kernel::write_cmd`].
pub(crate) unsafe fn run_write(
    k: &dyn Kernel,
    fd: BorrowedFd<'_>,
    cmd: &mut WriteCmd<'_>,
) -> Result<NewFds, Errno> {
    cmd.fd_at = matches!(cmd.command, CMD_GET_CONTEXT | CMD_CREATE_COMP_CHANNEL).then_some(0);
    // SAFETY: the caller's promise.
    unsafe { k.write_cmd(fd, cmd) }?;
    let mut fds = Vec::new();
    if let (Some(at), Some(new)) = (cmd.fd_at, cmd.new_fd.take()) {
        let raw = new.into_raw_fd();
        if let Some(slot) = cmd.core_out.get_mut(at..at + 4) {
            slot.copy_from_slice(&(raw as u32).to_ne_bytes());
        }
        fds.push(raw);
    }
    Ok(fds)
}
