//! `devinfo-compare EXPECTED ACTUAL [ALLOWED_MISSING_KEY...]`: compares two
//! `ibv_devinfo`-style outputs field by field with the comparer the device
//! tests use (`uverbs_test_support::devinfo_compare`, tests/support/), for
//! `scripts/rdma-core-on-model.sh`: rdma-core's `ibv_devinfo` as the
//! reference, `uverbs devinfo` on the same model as the one checked.
//! Exits 0 when they agree (keys the reference prints that the other does
//! not are allowed only when named), 1 with the differences otherwise, 2
//! on a usage or I/O error. With nothing allowed missing, the texts must
//! also be identical line by line, tabs included.

use uverbs_test_support::devinfo_compare::{compare, first_line_difference, parse};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [expected, actual, allowed @ ..] = &args[..] else {
        eprintln!("usage: devinfo-compare EXPECTED ACTUAL [ALLOWED_MISSING_KEY...]");
        std::process::exit(2);
    };
    let read = |p: &String| {
        std::fs::read_to_string(p).unwrap_or_else(|e| {
            eprintln!("devinfo-compare: {p}: {e}");
            std::process::exit(2)
        })
    };
    let (e, a) = (read(expected), read(actual));
    let entries = parse(&e);
    if entries.is_empty() {
        eprintln!("devinfo-compare: {expected}: no fields");
        std::process::exit(1);
    }
    let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
    if let Err(report) = compare(&entries, &parse(&a)).check(&allowed) {
        eprint!("{report}");
        std::process::exit(1);
    }
    if allowed.is_empty() {
        if let Some((line, e, a)) = first_line_difference(&e, &a) {
            eprintln!(
                "same fields, different text at line {line}:\n  expected: {e}\n  actual:   {a}"
            );
            std::process::exit(1);
        }
    }
}
