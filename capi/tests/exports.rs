//! The built libraries export every symbol the consumers import
//! (`capi/symbols/libibverbs.txt`, from scripts/cabi-symbols.sh): the
//! cdylib defines each one and every version node the list names (glibc's
//! loader refuses a program whose node is missing, and Debian's binaries
//! bind every import at start), and the staticlib defines each one too (a
//! static link needs them all). A failure names each missing symbol with
//! its node and the programs that import it.

mod support;

use std::{collections::BTreeSet, process::Command};

/// `(symbol, node, consumers)` of every line of the list.
fn imports() -> Vec<(String, String, String)> {
    let path = support::crate_dir().join("symbols/libibverbs.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let list: Vec<_> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut f = l.split('\t');
            let (Some(s), Some(n)) = (f.next(), f.next()) else {
                panic!("{}: bad line {l:?}", path.display())
            };
            (
                s.to_string(),
                n.to_string(),
                f.next().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        list.len() >= 58,
        "{}: only {} symbols",
        path.display(),
        list.len()
    );
    list
}

/// The output of a binutils tool, or `None` (with the test not run) when
/// it is missing.
fn tool(cmd: &mut Command) -> Option<String> {
    match cmd.output() {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => panic!("{cmd:?}: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            support::unavailable(&format!("{cmd:?}: {e}"));
            None
        }
    }
}

/// The report of what `defined` lacks, one line per missing symbol.
fn missing(defined: &BTreeSet<String>) -> Vec<String> {
    imports()
        .into_iter()
        .filter(|(s, _, _)| !defined.contains(s))
        .map(|(s, n, c)| {
            let users: Vec<&str> = c.split(',').collect();
            let more = match users.len() {
                0..=3 => String::new(),
                k => format!(" and {} more", k - 3),
            };
            format!(
                "  {s}@{n}  (imported by {}{more})",
                users[..users.len().min(3)].join(", ")
            )
        })
        .collect()
}

#[test]
fn the_shared_library_exports_every_imported_symbol_and_node() {
    let so = support::cdylib();
    assert!(so.is_file(), "{} not built", so.display());
    let Some(syms) = tool(Command::new("readelf").args(["--dyn-syms", "-W"]).arg(&so)) else {
        return;
    };
    // `Num: Value Size Type Bind Vis Ndx Name[@[@]VERSION]`
    let defined: BTreeSet<String> = syms
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[3] == "FUNC" && f[6] != "UND")
                .then(|| f[7].split('@').next().unwrap_or("").to_string())
        })
        .collect();
    let Some(vers) = tool(Command::new("readelf").args(["-V", "-W"]).arg(&so)) else {
        return;
    };
    let nodes: BTreeSet<String> = vers
        .lines()
        .skip_while(|l| !l.contains(".gnu.version_d"))
        .take_while(|l| !l.contains(".gnu.version_r"))
        .filter_map(|l| l.split("Name: ").nth(1))
        .map(|n| n.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    let mut report = missing(&defined);
    let want: BTreeSet<String> = imports().into_iter().map(|(_, n, _)| n).collect();
    report.extend(
        want.difference(&nodes)
            .map(|n| format!("  version node {n} (not defined: the loader refuses its users)")),
    );
    let Some(dynamic) = tool(Command::new("readelf").args(["-d", "-W"]).arg(&so)) else {
        return;
    };
    if !dynamic.contains("Library soname: [libibverbs.so.1]") {
        report.push("  soname libibverbs.so.1".into());
    }
    assert!(
        report.is_empty(),
        "{} lacks {} of the {} imported symbols and nodes:\n{}",
        so.display(),
        report.len(),
        imports().len(),
        report.join("\n")
    );
}

#[test]
fn the_static_library_defines_every_imported_symbol() {
    let a = support::staticlib();
    assert!(a.is_file(), "{} not built", a.display());
    let Some(syms) = tool(Command::new("nm").args(["-g", "--defined-only"]).arg(&a)) else {
        return;
    };
    let defined: BTreeSet<String> = syms
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // `name@@NODE`: the archive keeps the version the shared
            // library gets (build.rs's .symver), and a static link resolves
            // `name` to the default one.
            (f.len() == 3 && f[1] == "T").then(|| f[2].split('@').next().unwrap_or("").to_string())
        })
        .collect();
    let report = missing(&defined);
    assert!(
        report.is_empty(),
        "{} lacks {} of the {} imported symbols:\n{}",
        a.display(),
        report.len(),
        imports().len(),
        report.join("\n")
    );
}
