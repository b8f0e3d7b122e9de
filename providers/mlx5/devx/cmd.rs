//! PRM command mailboxes: the header fields every DevX command starts and
//! answers with, and how a failed firmware command is reported.
//!
//! A command's input starts with `general_obj_in_cmd_hdr`
//! (`include/linux/mlx5/mlx5_ifc.h`): opcode (big-endian u16, bytes 0..2),
//! uid (2..4: the kernel overwrites it with the context's DevX uid),
//! vhca_tunnel_id (4..6: the kernel refuses anything but 0 with `EINVAL`),
//! op_mod, or obj_type for general objects (6..8), obj_id (big-endian u32,
//! 8..12). The output starts with `general_obj_out_cmd_hdr`: status (byte
//! 0), syndrome (big-endian u32, 4..8), obj_id (8..12). The kernel takes
//! no input or output shorter than 16 bytes.
//!
//! A command the firmware fails (status not 0): kernels since 5.19 answer
//! `EREMOTEIO` and copy the output mailbox back, so the status and the
//! syndrome reach the caller ([`crate::FirmwareStatus`]); older kernels
//! answer an errno translated from the status and copy nothing.

use crate::{
    error::{Error, ErrorKind, FirmwareStatus},
    sys::Errno,
};

/// The shortest command input or output the kernel accepts
/// (`MLX5_ST_SZ_BYTES(general_obj_in_cmd_hdr)`).
pub const HEADER_LEN: usize = 16;

/// The common header of a command's input (`general_obj_in_cmd_hdr`).
///
/// The `in` buffer of `mlx5dv_devx_obj_create` and friends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CmdIn {
    /// `MLX5_CMD_OP_*`.
    pub opcode: u16,
    /// `op_mod`, or `obj_type` for general-object commands (bytes 6..8).
    pub op_mod: u16,
    /// The object the command is about (queries, modifies, destroys).
    pub obj_id: u32,
}

impl CmdIn {
    /// A command header with `op_mod` 0 and no object.
    pub fn new(opcode: u16) -> Self {
        CmdIn {
            opcode,
            ..CmdIn::default()
        }
    }

    /// A general-object command (`MLX5_CMD_OP_*_GENERAL_OBJECT`) on
    /// `obj_type` / `obj_id`.
    pub fn general(opcode: u16, obj_type: u16, obj_id: u32) -> Self {
        CmdIn {
            opcode,
            op_mod: obj_type,
            obj_id,
        }
    }

    /// The header of `cmd_in`; `None` if it is shorter than [`HEADER_LEN`].
    pub fn read(cmd_in: &[u8]) -> Option<Self> {
        let h = cmd_in.get(..HEADER_LEN)?;
        Some(CmdIn {
            opcode: u16::from_be_bytes([h[0], h[1]]),
            op_mod: u16::from_be_bytes([h[6], h[7]]),
            obj_id: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
        })
    }

    /// Writes the header into the start of `cmd_in` (uid and
    /// vhca_tunnel_id zero); false, and nothing written, if `cmd_in` is
    /// shorter than [`HEADER_LEN`].
    pub fn write(&self, cmd_in: &mut [u8]) -> bool {
        let Some(h) = cmd_in.get_mut(..HEADER_LEN) else {
            return false;
        };
        h[0..2].copy_from_slice(&self.opcode.to_be_bytes());
        h[2..6].fill(0);
        h[6..8].copy_from_slice(&self.op_mod.to_be_bytes());
        h[8..12].copy_from_slice(&self.obj_id.to_be_bytes());
        true
    }
}

/// The common header of a command's output (`general_obj_out_cmd_hdr`).
///
/// The `out` buffer of `mlx5dv_devx_obj_create` and friends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CmdOut {
    /// `MLX5_CMD_STAT_*`: 0 is success.
    pub status: u8,
    /// The firmware's reason for a failure (its own code).
    pub syndrome: u32,
    /// The object a create made (general objects, and most create
    /// commands put their new id here).
    pub obj_id: u32,
}

impl CmdOut {
    /// The header of `cmd_out`; `None` if it is shorter than [`HEADER_LEN`].
    pub fn read(cmd_out: &[u8]) -> Option<Self> {
        let h = cmd_out.get(..HEADER_LEN)?;
        Some(CmdOut {
            status: h[0],
            syndrome: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            obj_id: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
        })
    }
}

/// Where a field sits in a PRM mailbox: the dword index and shift of a
/// field of 1 to 32 bits that stays inside one big-endian 32-bit word, or
/// `None` (out of `len`, crossing a word, width 0 or over 32).
fn dword_field(len: usize, bit_offset: usize, width: u32) -> Option<(usize, u32, u32)> {
    let in_word = (bit_offset % 32) as u32;
    if width == 0 || width > 32 || in_word + width > 32 {
        return None;
    }
    let at = bit_offset / 32 * 4;
    if at.checked_add(4)? > len {
        return None;
    }
    let mask = if width == 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    };
    Some((at, 32 - in_word - width, mask))
}

/// Writes `value` into the `width`-bit field at bit `bit_offset` of a PRM
/// mailbox, as rdma-core's `DEVX_SET`/`DEVX_SET64` (the kernel's
/// `MLX5_SET`) do: structures of `mlx5_ifc.h` are big-endian 32-bit words
/// with bits numbered from the most significant bit of the first word, so
/// a field is named by its `__mlx5_bit_off` and `__mlx5_bit_sz`. Widths 1
/// to 32 inside one word, or 64 starting on a word. Bits of `value` above
/// `width` are ignored. False, and nothing written, for a field outside
/// `buf` or of another shape.
#[doc(alias = "DEVX_SET")]
#[doc(alias = "MLX5_SET")]
pub fn devx_set(buf: &mut [u8], bit_offset: usize, width: u32, value: u64) -> bool {
    if width == 64 {
        let Some(low) = bit_offset.checked_add(32) else {
            return false;
        };
        return bit_offset % 32 == 0
            && dword_field(buf.len(), low, 32).is_some()
            && devx_set(buf, bit_offset, 32, value >> 32)
            && devx_set(buf, low, 32, value & 0xffff_ffff);
    }
    let Some((at, shift, mask)) = dword_field(buf.len(), bit_offset, width) else {
        return false;
    };
    let word = &mut buf[at..at + 4];
    let old = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
    let new = (old & !(mask << shift)) | ((value as u32 & mask) << shift);
    word.copy_from_slice(&new.to_be_bytes());
    true
}

/// Reads the `width`-bit field at bit `bit_offset` of a PRM mailbox, as
/// rdma-core's `DEVX_GET`/`DEVX_GET64` (the kernel's `MLX5_GET`); the
/// layout and the shapes accepted are those of [`devx_set`]. `None` for a
/// field outside `buf` or of another shape.
#[doc(alias = "DEVX_GET")]
#[doc(alias = "MLX5_GET")]
pub fn devx_get(buf: &[u8], bit_offset: usize, width: u32) -> Option<u64> {
    if width == 64 {
        if bit_offset % 32 != 0 {
            return None;
        }
        let hi = devx_get(buf, bit_offset, 32)?;
        return Some(hi << 32 | devx_get(buf, bit_offset.checked_add(32)?, 32)?);
    }
    let (at, shift, mask) = dword_field(buf.len(), bit_offset, width)?;
    let word = u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
    Some(u64::from(word >> shift & mask))
}

/// The name of a `MLX5_CMD_STAT_*` status (`mlx5_ifc.h`).
pub fn status_name(status: u8) -> &'static str {
    match status {
        0x00 => "OK",
        0x01 => "INT_ERR",
        0x02 => "BAD_OP_ERR",
        0x03 => "BAD_PARAM_ERR",
        0x04 => "BAD_SYS_STATE_ERR",
        0x05 => "BAD_RES_ERR",
        0x06 => "RES_BUSY",
        0x08 => "LIM_ERR",
        0x09 => "BAD_RES_STATE_ERR",
        0x0a => "IX_ERR",
        0x0f => "NO_RES_ERR",
        0x10 => "BAD_QP_STATE_ERR",
        0x30 => "BAD_PKT_ERR",
        0x40 => "BAD_SIZE_OUTS_CQES_ERR",
        0x50 => "BAD_INP_LEN_ERR",
        0x51 => "BAD_OUTP_LEN_ERR",
        _ => "unknown status",
    }
}

/// Checks the inputs of a command before the kernel sees them, as the
/// kernel would refuse them: both mailboxes at least [`HEADER_LEN`] bytes,
/// `vhca_tunnel_id` zero, and lengths the ioctl attribute can carry.
pub(crate) fn check_mailboxes(
    op: &'static str,
    cmd_in: &[u8],
    cmd_out: &[u8],
) -> Result<(), Error> {
    let invalid = |d: String| Error::new(op, ErrorKind::InvalidArgument, d);
    if cmd_in.len() < HEADER_LEN || cmd_out.len() < HEADER_LEN {
        return Err(invalid(format!(
            "the command's input ({} bytes) and output ({} bytes) must each hold at least \
             the {HEADER_LEN}-byte PRM header",
            cmd_in.len(),
            cmd_out.len()
        )));
    }
    if cmd_in[4..6] != [0, 0] {
        return Err(invalid(
            "vhca_tunnel_id (bytes 4..6 of the input) must be 0: the kernel refuses other \
             values"
                .into(),
        ));
    }
    let max = usize::from(u16::MAX);
    if cmd_in.len() > max || cmd_out.len() > max {
        return Err(invalid(format!(
            "PRM mailboxes of more than {max} bytes cannot be passed to the kernel"
        )));
    }
    Ok(())
}

/// The result of a command the kernel ran: success, a firmware failure
/// with the output mailbox (`EREMOTEIO`, or a non-zero status in an
/// output the kernel returned), or the kernel's own errno.
pub(crate) fn firmware_result(
    op: &'static str,
    ioctl: Result<(), Errno>,
    cmd_out: &[u8],
) -> Result<(), Error> {
    let status = CmdOut::read(cmd_out).unwrap_or_default();
    match ioctl {
        Ok(()) if status.status == 0 => Ok(()),
        Ok(()) | Err(Errno::EREMOTEIO) => Err(firmware_error(op, status, cmd_out)),
        Err(e) => Err(Error::sys(op, e)),
    }
}

/// The error of a command the firmware failed.
pub(crate) fn firmware_error(op: &'static str, h: CmdOut, cmd_out: &[u8]) -> Error {
    Error::firmware(
        op,
        FirmwareStatus {
            status: h.status,
            syndrome: h.syndrome,
            out: cmd_out.to_vec(),
        },
    )
    .with_detail(format!(
        "the firmware failed the command: status {} ({:#04x}), syndrome {:#010x}; the \
         output mailbox is in Error::firmware_status()",
        status_name(h.status),
        h.status,
        h.syndrome
    ))
}

#[cfg(test)]
mod tests {
    /// Hand-computed placements (`mlx5_ifc.h` numbering: bit 0 is the most
    /// significant bit of the first big-endian word).
    #[test]
    fn devx_set_places_fields_as_mlx5_ifc_numbers_them() {
        use super::{devx_get, devx_set};
        let mut b = [0u8; 16];
        // A 3-bit field at bit 8: bits 8..11 of word 0, value 0b101.
        assert!(devx_set(&mut b, 8, 3, 0b101));
        assert_eq!(b[..4], [0x00, 0xa0, 0x00, 0x00]);
        // A 1-bit flag at bit 6 leaves its neighbours alone.
        assert!(devx_set(&mut b, 6, 1, 1));
        assert_eq!(b[..4], [0x02, 0xa0, 0x00, 0x00]);
        // A 24-bit field at bit 40 (word 1, low 24 bits); extra bits dropped.
        assert!(devx_set(&mut b, 40, 24, 0xff12_3456));
        assert_eq!(b[4..8], [0x00, 0x12, 0x34, 0x56]);
        // A 64-bit field on word 2: high word first.
        assert!(devx_set(&mut b, 64, 64, 0x0102_0304_0506_0708));
        assert_eq!(b[8..], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(devx_get(&b, 8, 3), Some(0b101));
        assert_eq!(devx_get(&b, 6, 1), Some(1));
        assert_eq!(devx_get(&b, 40, 24), Some(0x12_3456));
        assert_eq!(devx_get(&b, 64, 64), Some(0x0102_0304_0506_0708));
        assert_eq!(devx_get(&b, 0, 32), Some(0x02a0_0000));
    }

    #[test]
    fn devx_set_refuses_what_does_not_fit_and_writes_nothing() {
        use super::{devx_get, devx_set};
        let mut b = [0u8; 8];
        assert!(!devx_set(&mut b, 64, 1, 1), "past the end");
        assert!(!devx_set(&mut b, 30, 4, 0xf), "crosses a word");
        assert!(!devx_set(&mut b, 0, 0, 1), "zero width");
        assert!(!devx_set(&mut b, 0, 33, 1), "33 bits");
        assert!(!devx_set(&mut b, 16, 64, 1), "64 bits off a word");
        assert!(!devx_set(&mut b, 32, 64, u64::MAX), "64 bits past the end");
        assert_eq!(b, [0; 8]);
        assert_eq!(devx_get(&b, 64, 1), None);
        assert_eq!(devx_get(&b, usize::MAX, 1), None);
        assert_eq!(devx_get(&b, usize::MAX - 31, 64), None);
        assert!(!devx_set(&mut b, usize::MAX - 31, 64, 1));
        assert_eq!(devx_get(&b, 32, 64), None);
    }
    use super::*;

    #[test]
    fn headers_round_trip_at_their_prm_offsets() {
        let mut buf = [0xffu8; 20];
        assert!(CmdIn::general(0xa00, 0x1d, 0x0012_3456).write(&mut buf));
        assert_eq!(
            buf[..12],
            [0x0a, 0x00, 0, 0, 0, 0, 0x00, 0x1d, 0x00, 0x12, 0x34, 0x56]
        );
        assert_eq!(buf[12..], [0xff; 8], "only the header is written");
        assert_eq!(
            CmdIn::read(&buf),
            Some(CmdIn::general(0xa00, 0x1d, 0x12_3456))
        );
        assert!(!CmdIn::new(1).write(&mut [0u8; 15]));
        assert_eq!(CmdIn::read(&[0u8; 15]), None);
        let mut out = [0u8; 16];
        out[0] = 3;
        out[4..8].copy_from_slice(&0xdead_beefu32.to_be_bytes());
        out[8..12].copy_from_slice(&7u32.to_be_bytes());
        assert_eq!(
            CmdOut::read(&out),
            Some(CmdOut {
                status: 3,
                syndrome: 0xdead_beef,
                obj_id: 7
            })
        );
    }

    #[test]
    fn firmware_failures_carry_status_syndrome_and_mailbox() {
        let mut out = [0u8; 24];
        out[0] = 0x03;
        out[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
        out[20] = 0x99;
        for ioctl in [Err(Errno::EREMOTEIO), Ok(())] {
            let e = firmware_result("DEVX_OTHER", ioctl, &out).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Firmware);
            let fw = e.firmware_status().expect("firmware status");
            assert_eq!((fw.status, fw.syndrome), (3, 0x1234_5678));
            assert_eq!(fw.out, out, "the whole output mailbox");
            let text = e.to_string();
            assert!(
                text.contains("BAD_PARAM_ERR") && text.contains("0x12345678"),
                "{text}"
            );
        }
        // An older kernel: a translated errno and no mailbox.
        let e = firmware_result("DEVX_OTHER", Err(Errno::EINVAL), &[0; 16]).unwrap_err();
        assert_eq!(
            (e.kind(), e.errno(), e.firmware_status()),
            (ErrorKind::Os, Errno::EINVAL, None)
        );
        assert!(firmware_result("DEVX_OTHER", Ok(()), &[0; 16]).is_ok());
    }

    #[test]
    fn mailboxes_the_kernel_would_refuse_are_refused_first() {
        assert!(check_mailboxes("x", &[0; 16], &[0; 16]).is_ok());
        for (i, o) in [(15, 16), (16, 15)] {
            let e = check_mailboxes("x", &vec![0; i], &vec![0; o]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        }
        let mut tunnel = [0u8; 16];
        tunnel[5] = 1;
        let e = check_mailboxes("x", &tunnel, &[0; 16]).unwrap_err();
        assert!(e.to_string().contains("vhca_tunnel_id"), "{e}");
        assert!(check_mailboxes("x", &vec![0; 65536], &[0; 16]).is_err());
    }
}
