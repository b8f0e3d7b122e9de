//! C's number parsing for command-line options (`strtol`/`strtoul` with
//! base 0), so the rdma-core-compatible tools accept exactly what the C tools
//! accept.

/// C's `strtol(s, NULL, 0)`: leading blanks, a sign, `0x` hex / `0` octal /
/// decimal, stops at the first invalid character, 0 when there are no
/// digits; saturates like glibc.
pub fn strtol(s: &str) -> i64 {
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let b = s.as_bytes();
    let (radix, digits) = if b.len() >= 3
        && b[0] == b'0'
        && (b[1] | 0x20) == b'x'
        && (b[2] as char).is_ascii_hexdigit()
    {
        (16, &s[2..])
    } else if b.first() == Some(&b'0') {
        (8, s)
    } else {
        (10, s)
    };
    let mut v: i128 = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(radix) else { break };
        v = (v * i128::from(radix) + i128::from(d)).min(i128::from(u64::MAX) + 1);
    }
    let v = if neg { -v } else { v };
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// C's `strtoul(s, NULL, 0)` stored in an `unsigned int`.
pub fn strtoul_u32(s: &str) -> u32 {
    let t = s.trim_start();
    let neg = t.starts_with('-');
    let mag = strtol(t.trim_start_matches(['-', '+'])).unsigned_abs();
    let v = if neg { mag.wrapping_neg() } else { mag };
    v as u32
}
