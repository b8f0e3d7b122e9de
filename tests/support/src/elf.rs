//! A tiny, dependency-free ELF64 reader: just enough to tell whether an executable
//! needs a dynamic loader (`PT_INTERP`) or shared libraries (`DT_NEEDED`).
//!
//! Only little-endian ELF64 is accepted. Every offset and length read from the file
//! is bounds-checked with checked arithmetic, so malformed input yields an
//! [`ElfError`], never a panic.
//!
//! A `static-pie` executable (rustc's default for musl) still has a `PT_DYNAMIC`
//! segment holding its own relocations, but no `DT_NEEDED` entries and no
//! `PT_INTERP`; [`ElfInfo::is_static`] treats it as static. A classic static
//! executable has no `PT_DYNAMIC` at all.

use std::fmt;

// References: the System V gABI, "ELF Header", "Program Header", "Dynamic Section";
// constant values as in glibc's <elf.h>.
const EI_CLASS: usize = 4;
const EI_DATA: usize = 5;
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
const EHDR64_SIZE: usize = 64;
const PHDR64_SIZE: usize = 56;
const DYN64_SIZE: usize = 16;
/// `e_phnum` value meaning "the real count is in section header 0" (not supported).
const PN_XNUM: u16 = 0xffff;

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;

const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_STRSZ: u64 = 10;

/// Why a file could not be read as ELF64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElfError {
    /// Shorter than the 64-byte ELF64 header.
    TooShort(usize),
    /// Does not start with `\x7fELF`.
    BadMagic,
    /// `EI_CLASS` is not ELFCLASS64.
    NotElf64(u8),
    /// `EI_DATA` is not little-endian.
    NotLittleEndian(u8),
    /// A header field has a value this reader does not accept.
    Unsupported(&'static str),
    /// A structure named by the file lies (partly) outside it.
    OutOfBounds(&'static str),
    /// The file is internally inconsistent.
    Malformed(&'static str),
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort(len) => write!(f, "{len} bytes is too short for an ELF64 header"),
            Self::BadMagic => f.write_str("missing \\x7fELF magic"),
            Self::NotElf64(class) => write!(f, "EI_CLASS {class} is not ELFCLASS64"),
            Self::NotLittleEndian(data) => write!(f, "EI_DATA {data} is not little-endian"),
            Self::Unsupported(what) => write!(f, "unsupported: {what}"),
            Self::OutOfBounds(what) => write!(f, "{what} lies outside the file"),
            Self::Malformed(what) => write!(f, "malformed: {what}"),
        }
    }
}

impl std::error::Error for ElfError {}

/// What the loader-relevant parts of an ELF64 file say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfInfo {
    /// `e_type` (2 = `ET_EXEC`, 3 = `ET_DYN`, which includes PIE and static-pie).
    pub elf_type: u16,
    /// `e_machine` (62 = x86-64).
    pub machine: u16,
    /// Contents of `PT_INTERP` without the trailing NUL, if present.
    pub interpreter: Option<String>,
    /// Whether a `PT_DYNAMIC` segment exists (true for static-pie).
    pub has_dynamic: bool,
    /// `DT_NEEDED` library names, in file order.
    pub needed: Vec<String>,
}

impl ElfInfo {
    /// No dynamic loader and no shared libraries: the kernel can run it alone.
    pub fn is_static(&self) -> bool {
        self.interpreter.is_none() && self.needed.is_empty()
    }
}

/// `bytes[off..off + len]`, or `OutOfBounds(what)`.
fn range<'a>(
    bytes: &'a [u8],
    off: u64,
    len: u64,
    what: &'static str,
) -> Result<&'a [u8], ElfError> {
    let start = usize::try_from(off).map_err(|_| ElfError::OutOfBounds(what))?;
    let len = usize::try_from(len).map_err(|_| ElfError::OutOfBounds(what))?;
    let end = start.checked_add(len).ok_or(ElfError::OutOfBounds(what))?;
    bytes.get(start..end).ok_or(ElfError::OutOfBounds(what))
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

// The `*_at` helpers index directly; callers only pass slices whose length was
// checked against the fixed structure size (64, 56 or 16 bytes) first.

#[derive(Clone, Copy)]
struct Phdr {
    p_type: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

/// Parses the ELF header, program headers, `PT_INTERP` and `PT_DYNAMIC`.
pub fn parse(bytes: &[u8]) -> Result<ElfInfo, ElfError> {
    let ehdr = bytes
        .get(..EHDR64_SIZE)
        .ok_or(ElfError::TooShort(bytes.len()))?;
    if ehdr[..4] != *b"\x7fELF" {
        return Err(ElfError::BadMagic);
    }
    if ehdr[EI_CLASS] != ELFCLASS64 {
        return Err(ElfError::NotElf64(ehdr[EI_CLASS]));
    }
    if ehdr[EI_DATA] != ELFDATA2LSB {
        return Err(ElfError::NotLittleEndian(ehdr[EI_DATA]));
    }
    let elf_type = u16_at(ehdr, 16);
    let machine = u16_at(ehdr, 18);
    let phoff = u64_at(ehdr, 32);
    let phentsize = u16_at(ehdr, 54);
    let phnum = u16_at(ehdr, 56);
    if phnum == PN_XNUM {
        return Err(ElfError::Unsupported(
            "e_phnum == PN_XNUM (extended numbering)",
        ));
    }
    if usize::from(phentsize) < PHDR64_SIZE && phnum != 0 {
        return Err(ElfError::Malformed(
            "e_phentsize smaller than an ELF64 program header",
        ));
    }
    let table_len = u64::from(phentsize) * u64::from(phnum);
    let table = range(bytes, phoff, table_len, "program header table")?;

    let phdrs: Vec<Phdr> = (0..usize::from(phnum))
        .map(|i| {
            let start = i * usize::from(phentsize);
            let p = &table[start..start + PHDR64_SIZE];
            Phdr {
                p_type: u32_at(p, 0),
                offset: u64_at(p, 8),
                vaddr: u64_at(p, 16),
                filesz: u64_at(p, 32),
            }
        })
        .collect();

    let mut interpreter = None;
    for ph in phdrs.iter().filter(|p| p.p_type == PT_INTERP) {
        if interpreter.is_some() {
            return Err(ElfError::Malformed("more than one PT_INTERP"));
        }
        let raw = range(bytes, ph.offset, ph.filesz, "PT_INTERP")?;
        let raw = raw.strip_suffix(b"\0").unwrap_or(raw);
        interpreter = Some(String::from_utf8_lossy(raw).into_owned());
    }

    let mut dynamics = phdrs.iter().filter(|p| p.p_type == PT_DYNAMIC);
    let dynamic = dynamics.next();
    if dynamics.next().is_some() {
        return Err(ElfError::Malformed("more than one PT_DYNAMIC"));
    }
    let needed = match dynamic {
        Some(ph) => needed_libraries(bytes, &phdrs, ph)?,
        None => Vec::new(),
    };

    Ok(ElfInfo {
        elf_type,
        machine,
        interpreter,
        has_dynamic: dynamic.is_some(),
        needed,
    })
}

/// Reads the `DT_NEEDED` names from the dynamic segment `dynamic`.
fn needed_libraries(bytes: &[u8], phdrs: &[Phdr], dynamic: &Phdr) -> Result<Vec<String>, ElfError> {
    let seg = range(bytes, dynamic.offset, dynamic.filesz, "PT_DYNAMIC")?;
    let mut needed_offsets = Vec::new();
    let mut strtab = None;
    let mut strsz = None;
    for entry in seg.chunks_exact(DYN64_SIZE) {
        let (tag, val) = (u64_at(entry, 0), u64_at(entry, 8));
        match tag {
            DT_NULL => break,
            DT_NEEDED => needed_offsets.push(val),
            DT_STRTAB => strtab = Some(val),
            DT_STRSZ => strsz = Some(val),
            _ => {}
        }
    }
    if needed_offsets.is_empty() {
        // static-pie: only relocation entries; no need to find the string table.
        return Ok(Vec::new());
    }
    let strtab_vaddr = strtab.ok_or(ElfError::Malformed("DT_NEEDED without DT_STRTAB"))?;
    let strtab_off = vaddr_to_offset(phdrs, strtab_vaddr)?;
    // Without DT_STRSZ, allow reading to the end of the file (each name is NUL-terminated).
    let avail = u64::try_from(bytes.len())
        .unwrap_or(u64::MAX)
        .saturating_sub(strtab_off);
    let strs = range(
        bytes,
        strtab_off,
        strsz.unwrap_or(avail),
        "DT_STRTAB string table",
    )?;
    needed_offsets
        .into_iter()
        .map(|off| {
            let start =
                usize::try_from(off).map_err(|_| ElfError::OutOfBounds("DT_NEEDED name"))?;
            let tail = strs
                .get(start..)
                .ok_or(ElfError::OutOfBounds("DT_NEEDED name"))?;
            let len = tail
                .iter()
                .position(|&b| b == 0)
                .ok_or(ElfError::Malformed("DT_NEEDED name not NUL-terminated"))?;
            Ok(String::from_utf8_lossy(&tail[..len]).into_owned())
        })
        .collect()
}

/// Maps a virtual address to a file offset through the `PT_LOAD` segments.
fn vaddr_to_offset(phdrs: &[Phdr], vaddr: u64) -> Result<u64, ElfError> {
    phdrs
        .iter()
        .filter(|p| p.p_type == PT_LOAD)
        .find_map(|p| {
            let delta = vaddr.checked_sub(p.vaddr)?;
            (delta < p.filesz)
                .then(|| p.offset.checked_add(delta))
                .flatten()
        })
        .ok_or(ElfError::OutOfBounds(
            "DT_STRTAB address (in no PT_LOAD segment)",
        ))
}
