//! A plain `write()` command on the uverbs fd, decoded as Linux 6.1's
//! `ib_uverbs_write` (`drivers/infiniband/core/uverbs_main.c:559-675`) does:
//! the `ib_uverbs_cmd_hdr`, for extended commands the `ib_uverbs_ex_cmd_hdr`
//! after it, the sizes checked by `verify_hdr` (`uverbs_main.c:500-557`)
//! against the method definitions of `uverbs_cmd.c` ([`specs::WRITE_SIZES`]),
//! and the request and response split into the model's [`WriteCmd`] parts.
//! The response slices are the program's response buffers themselves, so
//! the model's answer lands where the kernel's `copy_to_user` puts it.
//!
//! Not modelled: `ib_safe_file_access` (`uverbs_main.c:571-575`, `EACCES`
//! after a credential change); a response pointer that is not null but
//! not mapped either faults in the program, not with `EFAULT`.
#![allow(unsafe_code)] // reads the caller's command, writes its responses

use std::os::fd::BorrowedFd;

use uverbs::sys::{Errno, Kernel, WriteCmd};

use crate::decode::{run_write, NewFds};
use crate::specs::{self, Def};

/// `struct ib_uverbs_cmd_hdr` (`include/uapi/rdma/ib_user_verbs.h`):
/// `command`, `in_words`, `out_words` (`u32`, `u16`, `u16`).
const HDR_LEN: usize = 8;
/// `struct ib_uverbs_ex_cmd_hdr`: `response` (`u64`), `provider_in_words`,
/// `provider_out_words` (`u16`), `cmd_hdr_reserved` (`u32`).
const EX_HDR_LEN: usize = 16;
/// `IB_USER_VERBS_CMD_COMMAND_MASK`.
const COMMAND_MASK: u32 = 0xff;
/// `IB_USER_VERBS_CMD_DESTROY_CQ`.
const CMD_DESTROY_CQ: u32 = 20;

/// A write method as `uapi_get_method` (`rdma_core.h:168-185`) finds it.
#[derive(Debug, Clone, Copy)]
struct Method {
    is_ex: bool,
    def: Def,
    req_size: usize,
    resp_size: usize,
}

/// `uapi->notsupp_method` (`uverbs_uapi.c:445-454`): what a command number
/// inside the table but without a method gets; not `is_ex`, sizes 0, no
/// response, and its handler `ib_uverbs_notsupp` (`uverbs_uapi.c:11-14`)
/// returns `EOPNOTSUPP`.
const NOTSUPP: Method = Method {
    is_ex: false,
    def: Def::I,
    req_size: 0,
    resp_size: 0,
};

/// `uapi_get_method` (`rdma_core.h:168-185`): `None` is the not-supported
/// method, an error what the kernel returns.
fn method(command: u32) -> Result<Option<Method>, Errno> {
    // rdma_core.h:172-174: other flag bits are EINVAL.
    if command & !(specs::EXTENDED | COMMAND_MASK) != 0 {
        return Err(Errno::EINVAL);
    }
    let ex = command & specs::EXTENDED != 0;
    // uverbs_uapi.c:436-447: num_write(_ex) is one past the highest
    // command the device has; rdma_core.h:177-183: beyond it EOPNOTSUPP.
    let num = specs::WRITE_SIZES
        .iter()
        .filter(|(c, ..)| (c & specs::EXTENDED != 0) == ex)
        .map(|(c, ..)| (c & COMMAND_MASK) + 1)
        .max()
        .unwrap_or(0);
    if command & COMMAND_MASK >= num {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(specs::WRITE_SIZES.iter().find(|(c, ..)| *c == command).map(
        |&(_, def, req_size, resp_size)| Method {
            is_ex: ex,
            def,
            req_size,
            resp_size,
        },
    ))
}

fn rd16(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn rd64(b: &[u8], at: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(a)
}

/// `len` bytes of the program's memory at `addr` (a null address with a
/// length is the kernel's `EFAULT`).
///
/// # Safety
///
/// `addr` must name `len` bytes of the program's memory valid for `'a`.
unsafe fn user<'a>(addr: u64, len: usize) -> Result<&'a [u8], Errno> {
    match (addr, len) {
        (_, 0) => Ok(&[]),
        (0, _) => Err(Errno::EFAULT),
        // SAFETY: the caller's promise.
        _ => Ok(unsafe { std::slice::from_raw_parts(addr as usize as *const u8, len) }),
    }
}

/// The writable form of [`user`].
///
/// # Safety
///
/// As [`user`], and no other live slice may overlap it.
unsafe fn user_mut<'a>(addr: u64, len: usize) -> Result<&'a mut [u8], Errno> {
    match (addr, len) {
        (_, 0) => Ok(&mut []),
        (0, _) => Err(Errno::EFAULT),
        // SAFETY: the caller's promise.
        _ => Ok(unsafe { std::slice::from_raw_parts_mut(addr as usize as *mut u8, len) }),
    }
}

/// Runs the command the program wrote (`count` bytes at `buf`) against the
/// model, as `ib_uverbs_write` does; on success the kernel returns `count`
/// (`uverbs_main.c:674`). The new fds the model handed out are returned
/// for the caller to track.
///
/// # Safety
///
/// `buf` is what the program passed to `write(fd, buf, count)`; the
/// response buffers it names are the program's, as for the kernel.
pub(crate) unsafe fn write(
    k: &dyn Kernel,
    fd: BorrowedFd<'_>,
    buf: *const u8,
    count: usize,
) -> Result<NewFds, Errno> {
    // uverbs_main.c:577-578.
    if count < HDR_LEN {
        return Err(Errno::EINVAL);
    }
    // uverbs_main.c:580-581 (copy_from_user of the header). The whole
    // buffer is only looked at once its length matches the header's words.
    // SAFETY: the program's buffer of `count` >= 8 bytes.
    let hdr = unsafe { user(buf as u64, HDR_LEN) }?;
    let command = rd32(hdr, 0);
    let mut in_words = usize::from(rd16(hdr, 4));
    let out_words = usize::from(rd16(hdr, 6));
    // uverbs_main.c:583-585.
    let found = method(command)?;
    let m = found.unwrap_or(NOTSUPP);
    if m.is_ex {
        // uverbs_main.c:587-592.
        if count < HDR_LEN + EX_HDR_LEN {
            return Err(Errno::EINVAL);
        }
        // SAFETY: the program's buffer of `count` >= 24 bytes.
        let ex = unsafe { user(buf.wrapping_add(HDR_LEN) as u64, EX_HDR_LEN) }?;
        let response = rd64(ex, 0);
        let provider_in = usize::from(rd16(ex, 8)) * 8;
        let provider_out = usize::from(rd16(ex, 10)) * 8;
        let reserved = rd32(ex, 12);
        let (core_in_len, core_out_len) = (in_words * 8, out_words * 8);
        // verify_hdr, uverbs_main.c:504-531.
        if core_in_len + provider_in != count - HDR_LEN - EX_HDR_LEN {
            return Err(Errno::EINVAL);
        }
        if core_in_len < m.req_size {
            return Err(Errno::ENOSPC);
        }
        if reserved != 0 {
            return Err(Errno::EINVAL);
        }
        if response != 0 {
            if core_out_len == 0 && provider_out == 0 {
                return Err(Errno::EINVAL);
            }
            if core_out_len < m.resp_size {
                return Err(Errno::ENOSPC);
            }
        } else if core_out_len != 0 || provider_out != 0 {
            return Err(Errno::EINVAL);
        }
        // uverbs_main.c:653-666: the core request right after the two
        // headers, the provider's after it; the core response at
        // `response`, the provider's right after it.
        // SAFETY: the program's buffer of `count` bytes, all of them the
        // request's (checked above).
        let all = unsafe { user(buf as u64, count) }?;
        let body = &all[HDR_LEN + EX_HDR_LEN..];
        let (core_in, driver_in) = body.split_at(core_in_len);
        // SAFETY: the program's response buffer of both lengths (the
        // kernel's access_ok, uverbs_main.c:522-525); the two parts are
        // disjoint.
        let core_out = unsafe { user_mut(response, core_out_len) }?;
        // SAFETY: as above.
        let driver_out =
            unsafe { user_mut(response.wrapping_add(core_out_len as u64), provider_out) }?;
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
        return unsafe { run_write(k, fd, &mut cmd) };
    }
    // verify_hdr for a legacy command, uverbs_main.c:534-556.
    if in_words * 4 != count {
        return Err(Errno::EINVAL);
    }
    if count < m.req_size + HDR_LEN {
        // uverbs_main.c:538-551: rdma-core v18 and v19 send DESTROY_CQ as
        // 16 bytes instead of 24; the kernel reads it as 24 (the 8 bytes
        // after the buffer are whatever is there: zeros here).
        // That case returns before the response size check (:548-549).
        if command == CMD_DESTROY_CQ && count == 16 {
            in_words = 6;
        } else {
            return Err(Errno::ENOSPC);
        }
    } else if out_words * 4 < m.resp_size {
        // uverbs_main.c:553-554.
        return Err(Errno::ENOSPC);
    }
    // SAFETY: the program's buffer of `count` bytes, all of them the
    // request's (checked above).
    let all = unsafe { user(buf as u64, count) }?;
    let padded;
    let all = if in_words * 4 > all.len() {
        let mut v = all.to_vec();
        v.resize(in_words * 4, 0);
        padded = v;
        &padded[..]
    } else {
        all
    };
    // uverbs_main.c:606-652.
    let body = &all[HDR_LEN..in_words * 4];
    let mut out_len = out_words * 4;
    let (core_in, driver_in) = if m.def.has_udata() {
        // uverbs_main.c:611-618: the driver's request follows req_size.
        body.split_at(m.req_size)
    } else {
        // uverbs_main.c:619-621: no driver data; the core gets it all.
        (body, &[][..])
    };
    let (core_out, driver_out): (&mut [u8], &mut [u8]) = if m.def.has_resp() {
        // uverbs_main.c:630-631: `response` is the request's first u64
        // (verify_hdr made sure the request is that long).
        let response = rd64(body, 0);
        let mut driver_len = 0;
        if m.def.has_udata() {
            // uverbs_main.c:634-644: the driver's response follows resp_size.
            driver_len = out_len - m.resp_size;
            out_len = m.resp_size;
        }
        // SAFETY: the program's response buffer of `out_words * 4` bytes
        // (a fault is the kernel's EFAULT at copy_to_user); disjoint parts.
        let core_out = unsafe { user_mut(response, out_len) }?;
        // SAFETY: as above.
        let driver_out = unsafe { user_mut(response.wrapping_add(out_len as u64), driver_len) }?;
        (core_out, driver_out)
    } else {
        // uverbs_main.c:645-652: no response pointer, so no output at all.
        (&mut [], &mut [])
    };
    if found.is_none() {
        // uverbs_uapi.c:11-14: the not-supported method's handler.
        return Err(Errno::EOPNOTSUPP);
    }
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
    unsafe { run_write(k, fd, &mut cmd) }
}

#[cfg(test)]
mod tests {
    //! Requests framed as rdma-core's `execute_write` / `execute_write_ex`
    //! (and uverbs' `src/sys/linux.rs`) frame them, sizes from the 6.1 uapi
    //! headers, answered by the model.
    use std::os::fd::{AsFd, OwnedFd};
    use std::sync::Arc;

    use uverbs::testing::mlx5::{fake_mlx5, Mlx5Model};

    use super::*;

    /// `sizeof(struct ib_uverbs_query_device_resp)`, of the extended
    /// response, and `offsetof(..., vendor_id)` (6.1 uapi).
    const QUERY_DEVICE_RESP: usize = 176;
    const EX_QUERY_DEVICE_RESP: usize = 304;
    const VENDOR_ID_AT: usize = 40;
    /// The model's ConnectX-5 firmware 16.35.2000.
    const FW_VER: u64 = (16 << 32) | (35 << 16) | 2000;

    struct Rig {
        model: Arc<Mlx5Model>,
        fd: OwnedFd,
    }

    fn rig() -> Rig {
        Rig {
            model: fake_mlx5(),
            fd: std::fs::File::open("/dev/null").unwrap().into(),
        }
    }

    impl Rig {
        fn run(&self, req: &[u8]) -> Result<NewFds, Errno> {
            self.run_raw(req.as_ptr(), req.len())
        }

        fn run_raw(&self, buf: *const u8, count: usize) -> Result<NewFds, Errno> {
            let k = self.model.dyn_kernel();
            // SAFETY: the request and the buffers it names live across the call.
            unsafe { write(&*k, self.fd.as_fd(), buf, count) }
        }
    }

    /// `ib_uverbs_cmd_hdr` + `body` (which starts with the response
    /// pointer for commands that answer), `in_words` counted in 4 bytes.
    fn legacy(command: u32, body: &[u8], out_words: u16) -> Vec<u8> {
        let in_words = ((HDR_LEN + body.len()) / 4) as u16;
        let mut v = command.to_ne_bytes().to_vec();
        v.extend_from_slice(&in_words.to_ne_bytes());
        v.extend_from_slice(&out_words.to_ne_bytes());
        v.extend_from_slice(body);
        v
    }

    /// `ib_uverbs_cmd_hdr` + `ib_uverbs_ex_cmd_hdr` + the core request and
    /// the provider's, sizes in words of 8.
    fn extended(
        command: u32,
        core_in: &[u8],
        out_words: u16,
        response: u64,
        provider: (u16, u16),
        reserved: u32,
    ) -> Vec<u8> {
        let mut v = command.to_ne_bytes().to_vec();
        v.extend_from_slice(&((core_in.len() / 8) as u16).to_ne_bytes());
        v.extend_from_slice(&out_words.to_ne_bytes());
        v.extend_from_slice(&response.to_ne_bytes());
        v.extend_from_slice(&provider.0.to_ne_bytes());
        v.extend_from_slice(&provider.1.to_ne_bytes());
        v.extend_from_slice(&reserved.to_ne_bytes());
        v.extend_from_slice(core_in);
        v.extend(std::iter::repeat_n(0, usize::from(provider.0) * 8));
        v
    }

    fn ptr(b: &mut [u8]) -> [u8; 8] {
        (b.as_mut_ptr() as u64).to_ne_bytes()
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        rd64(b, at)
    }

    #[test]
    fn a_legacy_query_device_answers_into_the_response_pointer() {
        let r = rig();
        let mut resp = vec![0xaa; QUERY_DEVICE_RESP];
        let req = legacy(1, &ptr(&mut resp), (QUERY_DEVICE_RESP / 4) as u16);
        assert_eq!(r.run(&req), Ok(vec![]));
        assert_eq!(u64_at(&resp, 0), FW_VER);
        assert_eq!(rd32(&resp, VENDOR_ID_AT), 0x02c9);
        assert_eq!(rd32(&resp, VENDOR_ID_AT + 4), 4119);
    }

    #[test]
    fn an_extended_query_device_sizes_in_words_of_8() {
        let r = rig();
        let mut resp = vec![0xaa; EX_QUERY_DEVICE_RESP];
        let at = resp.as_mut_ptr() as u64;
        // struct ib_uverbs_ex_query_device: comp_mask, reserved.
        let req = extended(
            specs::EXTENDED | 1,
            &[0; 8],
            (EX_QUERY_DEVICE_RESP / 8) as u16,
            at,
            (0, 0),
            0,
        );
        assert_eq!(r.run(&req), Ok(vec![]));
        assert_eq!(u64_at(&resp, 0), FW_VER);
        assert_eq!(rd32(&resp, VENDOR_ID_AT), 0x02c9);
    }

    #[test]
    fn the_driver_response_follows_the_core_response() {
        // ALLOC_PD (UAPI_DEF_WRITE_UDATA_IO): the core answers pd_handle
        // (4 bytes), mlx5 its pdn right after it.
        let r = rig();
        let mut resp = [0xffu8; 8];
        let req = legacy(3, &ptr(&mut resp), 2);
        assert_eq!(r.run(&req), Ok(vec![]));
        assert_ne!(rd32(&resp, 4), 0xffff_ffff, "the driver's pdn was written");
        // DEALLOC_PD (UAPI_DEF_WRITE_I) of the handle answered.
        let req = legacy(4, &resp[..4], 0);
        assert_eq!(r.run(&req), Ok(vec![]));
        assert_eq!(r.run(&req), Err(Errno::EINVAL), "already gone");
    }

    #[test]
    fn a_new_comp_channel_fd_is_returned_and_answered() {
        let r = rig();
        let mut resp = [0xffu8; 4];
        let req = legacy(17, &ptr(&mut resp), 1);
        let fds = r.run(&req).unwrap();
        assert_eq!(fds.len(), 1);
        assert_eq!(rd32(&resp, 0), fds[0] as u32);
        r.model.kernel.forget_fd(fds[0]);
        // SAFETY: the fd the model handed out, closed once.
        drop(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[0]) });
    }

    #[test]
    fn header_errors_are_the_kernels() {
        let r = rig();
        let mut resp = vec![0; QUERY_DEVICE_RESP];
        let good = legacy(1, &ptr(&mut resp), (QUERY_DEVICE_RESP / 4) as u16);
        // uverbs_main.c:577-581: shorter than the header; no buffer.
        assert_eq!(r.run(&good[..7]), Err(Errno::EINVAL));
        assert_eq!(r.run_raw(std::ptr::null(), 8), Err(Errno::EFAULT));
        // rdma_core.h:172-183: a stray flag bit; beyond the table.
        assert_eq!(r.run(&legacy(0x4000_0001, &[0; 8], 0)), Err(Errno::EINVAL));
        assert_eq!(r.run(&legacy(41, &[0; 8], 0)), Err(Errno::EOPNOTSUPP));
        assert_eq!(
            r.run(&legacy(specs::EXTENDED | 58, &[0; 8], 0)),
            Err(Errno::EOPNOTSUPP)
        );
        // uverbs_uapi.c:445-454: a hole in the table (6, MODIFY_AH) is the
        // not-supported method: legacy framing checked, then EOPNOTSUPP.
        assert_eq!(r.run(&legacy(6, &[0; 8], 0)), Err(Errno::EOPNOTSUPP));
        let mut bad = legacy(6, &[0; 8], 0);
        bad.push(0);
        assert_eq!(r.run(&bad), Err(Errno::EINVAL));
    }

    #[test]
    fn legacy_sizes_are_checked() {
        let r = rig();
        let mut resp = vec![0; QUERY_DEVICE_RESP];
        let good = legacy(1, &ptr(&mut resp), (QUERY_DEVICE_RESP / 4) as u16);
        // uverbs_main.c:535-536: in_words must count the bytes written.
        let mut longer = good.clone();
        longer.extend_from_slice(&[0; 4]);
        assert_eq!(r.run(&longer), Err(Errno::EINVAL));
        // uverbs_main.c:538-551: shorter than the request: ENOSPC.
        assert_eq!(r.run(&legacy(1, &[], 44)), Err(Errno::ENOSPC));
        // uverbs_main.c:553-554: a response buffer shorter than the core's.
        assert_eq!(r.run(&legacy(1, &ptr(&mut resp), 43)), Err(Errno::ENOSPC));
        // A null response pointer: the kernel's copy_to_user faults.
        assert_eq!(r.run(&legacy(1, &[0; 8], 44)), Err(Errno::EFAULT));
        // uverbs_main.c:538-548: DESTROY_CQ of 16 bytes is read as 24 and
        // reaches the model (which serves DESTROY_CQ as an ioctl only),
        // whatever out_words says; 12 bytes are ENOSPC.
        let mut resp = [0u8; 8];
        let req = legacy(20, &ptr(&mut resp), 2);
        assert_eq!(r.run(&req), Err(Errno::EOPNOTSUPP));
        let req = legacy(20, &ptr(&mut resp), 0);
        assert_eq!(r.run(&req), Err(Errno::EOPNOTSUPP));
        assert_eq!(r.run(&legacy(20, &[0; 4], 2)), Err(Errno::ENOSPC));
    }

    #[test]
    fn extended_header_errors_are_the_kernels() {
        let r = rig();
        let mut resp = vec![0; EX_QUERY_DEVICE_RESP];
        let at = resp.as_mut_ptr() as u64;
        let words = (EX_QUERY_DEVICE_RESP / 8) as u16;
        let q = specs::EXTENDED | 1;
        let good = extended(q, &[0; 8], words, at, (0, 0), 0);
        // uverbs_main.c:588-589: no room for the extended header.
        assert_eq!(r.run(&good[..15]), Err(Errno::EINVAL));
        // uverbs_main.c:507-508: the words must count the bytes written.
        assert_eq!(r.run(&good[..good.len() - 8]), Err(Errno::EINVAL));
        let mut hdr_says_more = good.clone();
        hdr_says_more[4] = 2; // in_words 2, 8 bytes follow
        assert_eq!(r.run(&hdr_says_more), Err(Errno::EINVAL));
        // uverbs_main.c:510-511: a core request shorter than req_size
        // (EX_CREATE_CQ needs 32 bytes).
        let short = extended(specs::EXTENDED | 18, &[0; 8], 2, at, (0, 0), 0);
        assert_eq!(r.run(&short), Err(Errno::ENOSPC));
        // uverbs_main.c:513-514: cmd_hdr_reserved.
        let reserved = extended(q, &[0; 8], words, at, (0, 0), 1);
        assert_eq!(r.run(&reserved), Err(Errno::EINVAL));
        // uverbs_main.c:516-520: a response pointer with no room.
        assert_eq!(
            r.run(&extended(q, &[0; 8], 0, at, (0, 0), 0)),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            r.run(&extended(q, &[0; 8], 22, at, (0, 0), 0)),
            Err(Errno::ENOSPC)
        );
        // uverbs_main.c:527-529: room without a response pointer.
        assert_eq!(
            r.run(&extended(q, &[0; 8], words, 0, (0, 0), 0)),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            r.run(&extended(q, &[0; 8], 0, 0, (0, 1), 0)),
            Err(Errno::EINVAL)
        );
        // Provider words are part of the length check (in) and of the
        // response (out): the provider request follows the core's.
        let with_provider = extended(q, &[0; 8], words, at, (1, 0), 0);
        assert_eq!(r.run(&with_provider), Ok(vec![]));
        assert_eq!(
            r.run(&with_provider[..with_provider.len() - 8]),
            Err(Errno::EINVAL)
        );
    }
}
