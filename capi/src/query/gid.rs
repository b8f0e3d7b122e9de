//! GID and P_Key queries: `ibv_query_gid`, `ibv_query_gid_type`,
//! `_ibv_query_gid_ex`, `_ibv_query_gid_table` (through uverbs' GID
//! queries: the kernel's `QUERY_GID_ENTRY`/`QUERY_GID_TABLE` methods, or
//! sysfs on kernels without them), `ibv_query_pkey` and
//! `ibv_get_pkey_index` (sysfs, where libibverbs reads the P_Key table).

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::{
    ffi::{c_int, c_uint},
    mem::size_of,
    ptr,
};

use uverbs::{sys::Errno, GidEntry, GidType};

use crate::{
    context::Context,
    device::{kernel, Device},
    errno,
    layout::{
        context::ibv_context,
        device::{ibv_gid, ibv_gid_entry},
    },
};

/// The entry of `port_num`/`index`; `Ok(None)` for an empty slot.
///
/// # Safety
/// `context` is NULL or an open context of this library.
unsafe fn gid_entry(
    context: *mut ibv_context,
    port_num: u8,
    index: u32,
) -> Result<Option<GidEntry>, Errno> {
    // SAFETY: the caller's contract.
    let ctx = unsafe { Context::from_c(context) }?;
    ctx.uv.query_gid(port_num, index).map_err(|e| errno::of(&e))
}

/// `struct ibv_gid_entry` of uverbs' entry.
fn c_gid_entry(e: &GidEntry) -> ibv_gid_entry {
    ibv_gid_entry {
        gid: ibv_gid { raw: e.gid.0 },
        gid_index: e.index,
        port_num: e.port,
        gid_type: match e.gid_type {
            GidType::Ib => 0,
            GidType::RoceV1 => 1,
            GidType::RoceV2 => 2,
            GidType::Other(v) => v,
            _ => 0,
        },
        ndev_ifindex: e.netdev_ifindex,
    }
}

/// `ibv_query_gid`: the GID at `index` (all zeros for an empty slot, as
/// libibverbs keeps it); -1 and `errno` on failure (`EINVAL` for an index
/// outside the table).
///
/// # Safety
/// `context` is an open context of this library (or NULL), `gid` a
/// writable `union ibv_gid` (or NULL).
#[export_name = "uverbs_ibv_query_gid"]
pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    if gid.is_null() {
        return errno::minus_one(Errno::EINVAL);
    }
    // SAFETY: the caller's contract; a negative index reaches the kernel
    // as the huge unsigned value libibverbs passes too (and fails there).
    match unsafe { gid_entry(context, port_num, index as u32) } {
        Ok(e) => {
            let raw = e.map_or([0; 16], |e| e.gid.0);
            // SAFETY: `gid` is writable (the caller's contract).
            unsafe { gid.write_unaligned(ibv_gid { raw }) };
            0
        }
        Err(e) => errno::minus_one(e),
    }
}

/// `ibv_query_gid_type` (IBVERBS_PRIVATE_34): `IBV_GID_TYPE_SYSFS_IB_ROCE_V1`
/// (0) for IB and RoCE v1 GIDs and for an empty slot,
/// `IBV_GID_TYPE_SYSFS_ROCE_V2` (1) otherwise; -1 and `errno` on failure.
///
/// # Safety
/// `context` is an open context of this library (or NULL), `gid_type` a
/// writable `int` (or NULL).
#[export_name = "uverbs_ibv_query_gid_type"]
pub unsafe extern "C" fn ibv_query_gid_type(
    context: *mut ibv_context,
    port_num: u8,
    index: c_uint,
    gid_type: *mut c_int,
) -> c_int {
    if gid_type.is_null() {
        return errno::minus_one(Errno::EINVAL);
    }
    // SAFETY: the caller's contract.
    let t = match unsafe { gid_entry(context, port_num, index) } {
        Ok(None) => 0,
        Ok(Some(e)) if matches!(e.gid_type, GidType::Ib | GidType::RoceV1) => 0,
        Ok(Some(_)) => 1,
        Err(e) => return errno::minus_one(e),
    };
    // SAFETY: `gid_type` is writable (the caller's contract).
    unsafe { gid_type.write_unaligned(t) };
    0
}

/// Writes `entry` into the `entry_size` bytes at `dst`, zeroing what
/// follows `struct ibv_gid_entry` (as the kernel fills a larger buffer).
///
/// # Safety
/// `dst` has `entry_size >= size_of::<ibv_gid_entry>()` writable bytes.
unsafe fn put_gid_entry(dst: *mut u8, entry_size: usize, entry: &GidEntry) {
    // SAFETY: the caller's contract; the entry may be unaligned when
    // `entry_size` is not a multiple of 8.
    unsafe {
        ptr::write_bytes(dst, 0, entry_size);
        dst.cast::<ibv_gid_entry>()
            .write_unaligned(c_gid_entry(entry));
    }
}

/// The arguments every `ibv_query_gid_ex`/`_table` call is checked for:
/// the kernel defines no flag yet and takes only whole entries.
fn check_gid_args(flags: u32, entry_size: usize) -> Result<(), Errno> {
    if flags != 0 || entry_size < size_of::<ibv_gid_entry>() {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// `_ibv_query_gid_ex` (IBVERBS_1.11, behind the inline
/// `ibv_query_gid_ex`): the entry at `gid_index`; a positive errno on
/// failure: `ENODATA` for an empty slot, `EINVAL` for an index or port
/// outside the device, a flag, or a size below `struct ibv_gid_entry`.
///
/// # Safety
/// `context` is an open context of this library (or NULL), `entry` has
/// `entry_size` writable bytes (or is NULL).
#[export_name = "uverbs__ibv_query_gid_ex"]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    let run = || {
        check_gid_args(flags, entry_size)?;
        let port = u8::try_from(port_num).map_err(|_| Errno::EINVAL)?;
        if entry.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: the caller's contract.
        let e = unsafe { gid_entry(context, port, gid_index) }?.ok_or(Errno::ENODATA)?;
        // SAFETY: `entry` has `entry_size` bytes, checked to hold one entry.
        unsafe { put_gid_entry(entry.cast(), entry_size, &e) };
        Ok(())
    };
    match run() {
        Ok(()) => 0,
        Err(e) => errno::positive(e),
    }
}

/// `_ibv_query_gid_table` (IBVERBS_1.11, behind the inline
/// `ibv_query_gid_table`): every valid GID of every port, at most
/// `max_entries` of them, `entry_size` bytes apart; the count, or the
/// negative errno: `EINVAL` when they do not fit (`max_entries` 0
/// included, as the kernel refuses an empty buffer), for a flag, or for
/// a size below `struct ibv_gid_entry`.
///
/// # Safety
/// `context` is an open context of this library (or NULL), `entries` has
/// `max_entries * entry_size` writable bytes (or is NULL).
#[export_name = "uverbs__ibv_query_gid_table"]
pub unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    let run = || -> Result<usize, Errno> {
        check_gid_args(flags, entry_size)?;
        if entries.is_null() || max_entries == 0 {
            return Err(Errno::EINVAL);
        }
        // SAFETY: the caller's contract.
        let ctx = unsafe { Context::from_c(context) }?;
        let table = ctx.uv.query_gid_table().map_err(|e| errno::of(&e))?;
        if table.len() > max_entries {
            return Err(Errno::EINVAL);
        }
        for (i, e) in table.iter().enumerate() {
            // SAFETY: `i < max_entries`: entry `i` is inside the buffer.
            unsafe { put_gid_entry(entries.cast::<u8>().add(i * entry_size), entry_size, e) };
        }
        Ok(table.len())
    };
    match run() {
        Ok(n) => isize::try_from(n).unwrap_or(isize::MAX),
        Err(e) => -(errno::positive(e) as isize),
    }
}

/// `sscanf(s, "%hx")`: optional blanks and sign, optional `0x`, hex
/// digits, stored into 16 bits.
pub(super) fn scan_hex_u16(s: &str) -> Option<u16> {
    let s = s.trim_start();
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .filter(|r| r.starts_with(|c: char| c.is_ascii_hexdigit()))
        .unwrap_or(s);
    let digits = s.bytes().take_while(u8::is_ascii_hexdigit).count();
    if digits == 0 {
        return None;
    }
    let v = s[..digits].bytes().fold(0u64, |acc, b| {
        acc.wrapping_mul(16)
            .wrapping_add(u64::from((b as char).to_digit(16).unwrap_or(0)))
    });
    let v = if neg { v.wrapping_neg() } else { v };
    Some(v as u16)
}

/// The P_Key at `index` of `port_num`, in network byte order, from
/// `<ibdev_path>/ports/<port>/pkeys/<index>` as libibverbs reads it (an
/// 8-byte read: longer contents without a newline there fail).
fn read_pkey(dev: &Device, port_num: u8, index: c_int) -> Result<u16, Errno> {
    let path = format!("{}/ports/{port_num}/pkeys/{index}", dev.ibdev_path());
    let text = kernel()
        .read_to_string(path.as_ref())
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let head = text.as_bytes().get(..8).unwrap_or(text.as_bytes());
    if head.len() == 8 && head[7] != b'\n' {
        return Err(Errno::EINVAL);
    }
    core::str::from_utf8(head)
        .ok()
        .and_then(scan_hex_u16)
        .map(u16::to_be)
        .ok_or(Errno::EINVAL)
}

/// The device of an open context.
///
/// # Safety
/// `context` is NULL or an open context of this library.
unsafe fn device_of(context: *mut ibv_context) -> Result<&'static Device, Errno> {
    // SAFETY: the caller's contract.
    let ctx = unsafe { Context::from_c(context) }?;
    Device::from_c(ctx.vctx.context.device)
}

/// `ibv_query_pkey`: the P_Key at `index` (network byte order) from sysfs,
/// as libibverbs reads it; -1 and `errno` on failure (`ENOENT` for an
/// index outside the table).
///
/// # Safety
/// `context` is an open context of this library (or NULL), `pkey` a
/// writable `__be16` (or NULL).
#[export_name = "uverbs_ibv_query_pkey"]
pub unsafe extern "C" fn ibv_query_pkey(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    if pkey.is_null() {
        return errno::minus_one(Errno::EINVAL);
    }
    // SAFETY: the caller's contract.
    match unsafe { device_of(context) }.and_then(|d| read_pkey(d, port_num, index)) {
        Ok(v) => {
            // SAFETY: `pkey` is writable (the caller's contract).
            unsafe { pkey.write_unaligned(v) };
            0
        }
        Err(e) => errno::minus_one(e),
    }
}

/// `ibv_get_pkey_index` (IBVERBS_1.5): the index of `pkey` (network byte
/// order) in the port's table, searched as libibverbs searches it; -1 and
/// `errno` when it is not there.
///
/// # Safety
/// `context` is an open context of this library (or NULL).
#[export_name = "uverbs_ibv_get_pkey_index"]
pub unsafe extern "C" fn ibv_get_pkey_index(
    context: *mut ibv_context,
    port_num: u8,
    pkey: u16,
) -> c_int {
    // SAFETY: the caller's contract.
    let dev = match unsafe { device_of(context) } {
        Ok(d) => d,
        Err(e) => return errno::minus_one(e),
    };
    for index in 0..=c_int::MAX {
        match read_pkey(dev, port_num, index) {
            Ok(v) if v == pkey => return index,
            Ok(_) => {}
            Err(e) => return errno::minus_one(e),
        }
    }
    errno::minus_one(Errno::ENOENT)
}
