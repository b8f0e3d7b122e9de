//! The boundary between the core and the providers runs one way.
//!
//! - **Providers** (`providers/`) import only the crate's vocabulary (`abi`,
//!   `error`, `ioctl`, `sys`, `wc`, `wr`, ...), the public types re-exported at
//!   the crate root (`crate::QpType`, `crate::Context`), and the provider
//!   interface (`crate::providers`). They never reach into the core's object
//!   modules (`context`, `cq`, `qp`, `ah`, ...).
//! - **The core** (`src/`, the library) never names a provider: no `rxe` or
//!   `mlx5` module path, no `Rxe*`/`Mlx5*` identifier. It calls the `Any*`
//!   enums of `providers/dispatch.rs`, the one file that matches on them.
//!   The public `uverbs::mlx5` re-export in `src/lib.rs` is the exception.
//! - **The C libraries** (`capi/`: `libibverbs.so.1`; `preload/`: the
//!   LD_PRELOAD shim over the mlx5 model) only translate between C and the
//!   core: they never branch on a provider. No `provider_name()`, no
//!   `"rxe"`/`"mlx5"` string to compare with, none of the core's provider
//!   markers (`Rxe`, `Mlx5`, `ProviderKind`), no `providers` path; what
//!   differs by provider the core gives as data
//!   (`Context::wc_flags_numbering`). Only libmlx5's twin (`capi/mlx5/`,
//!   `capi/src/mlx5/`: `mlx5dv_*`) calls the public `uverbs::mlx5` API, as
//!   any program of that provider would. Test doubles (`testing::rxe`,
//!   `testing::mlx5`, the model the preload serves) are not providers.
//! - **The test doubles** (`src/testing/`: the fake kernels and the mlx5
//!   device model) never import the providers: no `crate::providers`, no
//!   provider module re-exported at the root (`crate::mlx5`,
//!   `crate::barrier`), no `super::` path climbing out of `testing`, no
//!   `#[path]` into `providers/`. They play the other side of the ABI with
//!   their own code, so that they check the providers instead of agreeing
//!   with them by construction. They are not the core either: they name
//!   rxe and mlx5 freely. The providers' unit tests may use them.
//!
//! The scan reads code only (comments and doc comments are skipped).

use std::{
    fs,
    path::{Path, PathBuf},
};

/// Modules of the crate a provider may import.
/// (`event_fd`: the one reader of event fds, which mlx5's DevX channels use;
/// `fork`: the process's fork protection, which the buffers providers
/// allocate for the device go through, as libibverbs offers its providers
/// `ibv_dontfork_range` (`driver.h`);
/// `testing`: the test doubles, for the providers' unit tests; the module
/// exists only in test and `test-utils` builds, so other code that names it
/// does not build.)
const VOCABULARY: &[&str] = &[
    "abi",
    "error",
    "event_fd",
    "fork",
    "ioctl",
    // The synchronisation primitives, std's or loom's (`--cfg loom`).
    "sync",
    "sys",
    "testing",
    "wc",
    "wr",
    "providers",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap_or_else(|e| panic!("{e}")).path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code lines of a file, numbered from 1, with `//` comments cut off.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let code = match l.find("//") {
                Some(at) => &l[..at],
                None => l,
            };
            (i + 1, code.to_string())
        })
        .filter(|(_, l)| !l.trim().is_empty())
        .collect()
}

/// Every `crate::NAME` in the code (the first segment after `crate::`),
/// including the names inside `use crate::{a, b::c}` groups.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // A group: the first segment of each comma-separated item at
            // depth 0 (nested groups belong to their item).
            let mut depth = 0;
            let mut item_start = true;
            for (i, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        rest = &group[i..];
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_alphanumeric() || c == '_') => {
                        let name: String = group[i..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        out.push(name);
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

/// A file's code with line breaks kept as spaces, so that `use` groups that
/// span lines are read whole; comments removed first.
fn joined_code(text: &str) -> String {
    code_lines(text)
        .into_iter()
        .map(|(_, l)| l)
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a provider file imports that it must not.
fn provider_violations(text: &str) -> Vec<String> {
    crate_paths(&joined_code(text))
        .into_iter()
        .filter(|name| {
            let root_type = name.chars().next().is_some_and(char::is_uppercase);
            !root_type && !VOCABULARY.contains(&name.as_str())
        })
        .collect()
}

/// Where a core file names a provider: `(line, code)`.
fn core_violations(text: &str) -> Vec<(usize, String)> {
    code_lines(text)
        .into_iter()
        .filter(|(_, l)| {
            let words: Vec<&str> = l
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .collect();
            words.iter().any(|w| {
                *w == "rxe" || *w == "mlx5" || w.starts_with("Rxe") || w.starts_with("Mlx5")
            })
        })
        .collect()
}

/// What names the providers from a test double: `crate::providers` and the
/// provider modules the crate root re-exports (`uverbs::mlx5`,
/// `uverbs::barrier`).
const PROVIDER_PATHS: &[&str] = &["providers", "mlx5", "barrier"];

/// How many `super::` a code line chains at most (`super::super::x` is 2).
fn super_chain(code: &str) -> usize {
    let mut most = 0;
    let mut rest = code;
    while let Some(at) = rest.find("super::") {
        let starts_word = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let mut n = 0;
        let mut tail = &rest[at..];
        while let Some(t) = tail.strip_prefix("super::") {
            n += 1;
            tail = t;
        }
        if starts_word {
            most = most.max(n);
        }
        rest = tail;
    }
    most
}

/// A code line with its string and char literals emptied, so that braces
/// and words in them (`format!("{sys}/ibdev")`, `'{'`) are not read as code.
fn without_literals(code: &str) -> String {
    let mut out = String::new();
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            // A char literal ('x', '\n', '\u{7b}'); a lifetime ('a) stays.
            '\'' => {
                let ahead: Vec<char> = chars.clone().take(3).collect();
                if ahead.first() == Some(&'\\') {
                    chars.next();
                    chars.next();
                    for c in chars.by_ref() {
                        if c == '\'' {
                            break;
                        }
                    }
                    out.push_str("' '");
                } else if ahead.get(1) == Some(&'\'') {
                    chars.next();
                    chars.next();
                    out.push_str("' '");
                } else {
                    out.push('\'');
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Where a test-double file names the providers: `(line, what)`. `depth`
/// is how deep the file's module is below `crate::testing` (`testing/mod.rs`
/// 0, `testing/kernel.rs` and `testing/mlx5/mod.rs` 1, ...): a `super::`
/// chain longer than that, plus the inline modules around the line, climbs
/// out of `testing`.
fn testing_violations(depth: usize, text: &str) -> Vec<(usize, String)> {
    let mut bad = Vec::new();
    let lines = code_lines(text);
    // Inline modules (`mod tests { ... }`): the brace depth each opened at.
    let mut braces = 0usize;
    let mut inline_mods: Vec<usize> = Vec::new();
    for (n, code) in &lines {
        let plain = without_literals(code);
        let words: Vec<&str> = plain
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        let opens_mod = words
            .iter()
            .position(|w| *w == "mod")
            .is_some_and(|i| words.get(i + 1).is_some() && plain.trim_end().ends_with('{'));
        for name in crate_paths(&plain) {
            if PROVIDER_PATHS.contains(&name.as_str()) {
                bad.push((*n, format!("names crate::{name}")));
            }
        }
        // `providers::` not after `crate::` (reported above) nor inside a
        // longer name.
        let bare = plain.match_indices("providers::").any(|(at, _)| {
            let before = &plain[..at];
            !before.ends_with("crate::")
                && before
                    .chars()
                    .next_back()
                    .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        });
        if bare {
            bad.push((*n, "names providers::".to_string()));
        }
        let climbs = super_chain(&plain);
        if climbs > depth + inline_mods.len() {
            bad.push((*n, format!("climbs out of testing with {climbs} super::")));
        }
        let includes = ["#[path", "include!", "include_str!", "include_bytes!"]
            .iter()
            .any(|m| code.contains(m));
        if includes && (code.contains("providers") || code.contains("..")) {
            bad.push((*n, "reads a file outside src/testing".to_string()));
        }
        for c in plain.chars() {
            match c {
                '{' => braces += 1,
                '}' => {
                    braces = braces.saturating_sub(1);
                    if inline_mods.last() == Some(&braces) {
                        inline_mods.pop();
                    }
                }
                _ => {}
            }
        }
        if opens_mod {
            inline_mods.push(braces - 1);
        }
    }
    // `use crate::{\n    providers,\n ...}` spans lines: read whole.
    for name in crate_paths(&joined_code(text)) {
        if PROVIDER_PATHS.contains(&name.as_str()) && !bad.iter().any(|(_, w)| w.contains(&name)) {
            // The line of the group item (`    mlx5::Thing,`), else the
            // first that has the word.
            let word = |l: &str| {
                l.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|w| w == name)
            };
            let item = |l: &str| {
                l.trim_start()
                    .strip_prefix(name.as_str())
                    .is_some_and(|r| r.starts_with("::") || r.starts_with(',') || r.is_empty())
            };
            let n = lines
                .iter()
                .find(|(_, l)| item(l))
                .or_else(|| lines.iter().find(|(_, l)| word(l)))
                .map_or(0, |(n, _)| *n);
            bad.push((n, format!("names crate::{name} (in a use group)")));
        }
    }
    // One report a line (`crate::{abi, providers::x}` is both kinds).
    bad.sort();
    bad.dedup_by_key(|(n, _)| *n);
    bad
}

/// Core lines that name a provider for a reason other than dispatch.
const EXCEPTIONS: &[(&str, &str)] = &[
    // The public mlx5 API.
    ("src/lib.rs", "pub use providers::mlx5::dv as mlx5;"),
    // The kernel ABI re-exported as one namespace (abi::mlx5, abi::rxe).
    ("src/lib.rs", "mlx5_ioctl::*"),
    // The markers typed sessions are typed by (providers/typed.rs).
    ("src/qp_ex.rs", "pub use crate::providers::typed::Mlx5;"),
    ("src/qp_ex.rs", "pub use crate::providers::typed::Rxe;"),
    // The message of a build with no provider feature.
    ("src/lib.rs", "uverbs needs at least one provider"),
    // A hint for users with no device: how to create a soft-RoCE one.
    ("src/device_list.rs", "rdma link add rxe0"),
    // The async wrappers of the public DevX event channel: users of the
    // public `uverbs::mlx5` API, as any program would be (feature tokio).
    ("src/tokio/channels.rs", "mlx5::DevxEventChannel"),
    // The runtime-independent async layer over the same public channel.
    (
        "src/event_stream/source.rs",
        "use crate::mlx5::{DevxEvent, DevxEventChannel};",
    ),
    ("src/event_stream/stream.rs", "mlx5::DevxEventChannel"),
];

/// Words that name a provider to branch on, in the C libraries' code.
const C_LIBRARY_WORDS: &[&str] = &["provider_name", "Rxe", "Mlx5", "ProviderKind", "providers"];

/// Where a C library file (capi/, preload/) branches on a provider:
/// `(line, what)`. `mlx5dv` is whether the file is libmlx5's twin, which
/// may use the public `uverbs::mlx5` API.
fn c_library_violations(text: &str, mlx5dv: bool) -> Vec<(usize, String)> {
    let mut bad = Vec::new();
    for (n, code) in code_lines(text) {
        // String literals that are a provider's name (compared with).
        let mut rest = code.as_str();
        while let Some(at) = rest.find('"') {
            let tail = &rest[at + 1..];
            let Some(end) = tail.find('"') else { break };
            let lit = &tail[..end];
            if lit.eq_ignore_ascii_case("rxe") || lit.eq_ignore_ascii_case("mlx5") {
                bad.push((n, format!("the string \"{lit}\"")));
            }
            rest = &tail[end + 1..];
        }
        let plain = without_literals(&code);
        for w in plain.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if C_LIBRARY_WORDS.contains(&w) {
                bad.push((n, format!("names {w}")));
            }
        }
        if !mlx5dv && crate_paths(&plain.replace("uverbs::", "crate::")).contains(&"mlx5".into()) {
            bad.push((n, "uses uverbs::mlx5".to_string()));
        }
    }
    // `use uverbs::{\n    mlx5,\n ...}` spans lines.
    if !mlx5dv
        && !bad.iter().any(|(_, w)| w.contains("uverbs::mlx5"))
        && crate_paths(&joined_code(text).replace("uverbs::", "crate::")).contains(&"mlx5".into())
    {
        bad.push((0, "uses uverbs::mlx5 (in a use group)".to_string()));
    }
    bad.sort();
    bad.dedup_by_key(|(n, _)| *n);
    bad
}

#[test]
fn the_c_library_scanner_catches_what_it_should() {
    let c = "// provider_name() == \"rxe\" in a comment is fine\n\
             let kernel = ctx.uv.provider_name() == \"rxe\";\n\
             if name == \"MLX5\" {}\n\
             use uverbs::mlx5::open_device;\n\
             let s = \"mlx5dv_create_qp\";\n\
             use uverbs::testing::rxe::{fake_rxe, FakeRxe};\n\
             use uverbs::testing::mlx5::Mlx5Model;\n\
             fn f(_: uverbs::Mlx5) {}\n\
             let d = uverbs::ProviderKind::Rxe;\n\
             let n = ctx.uv.wc_flags_numbering();\n";
    let lines: Vec<usize> = c_library_violations(c, false)
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(lines, [2, 3, 4, 8, 9]);
    let lines: Vec<usize> = c_library_violations(c, true)
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(lines, [2, 3, 8, 9]);
    let group = "use uverbs::{\n    sys::Errno,\n    mlx5,\n};\n";
    assert_eq!(c_library_violations(group, false).len(), 1);
    assert!(c_library_violations(group, true).is_empty());
}

/// The C libraries (`capi/`, `preload/`) never branch on a provider; see
/// the module documentation.
#[test]
fn the_c_libraries_never_branch_on_a_provider() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["capi", "preload"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "capi/ and preload/ not found");
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap_or(f);
        let mlx5dv = rel.starts_with("capi/mlx5") || rel.starts_with("capi/src/mlx5");
        let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (line, what) in c_library_violations(&text, mlx5dv) {
            bad.push(format!("{}:{line}: {what}", rel.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "a C library branches on a provider (make the difference data the core \
         gives, as Context::wc_flags_numbering):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_scanners_catch_what_they_should() {
    let provider = "use crate::{\n    abi,\n    context::ContextInner, // no\n    QpType,\n};\n\
                    fn f(a: &crate::ah::AddressHandle) {}\n";
    assert_eq!(provider_violations(provider), ["context", "ah"]);
    assert!(provider_violations("use crate::{abi, providers::Device, wr::{SendWr}};").is_empty());
    let core =
        "// rxe in a comment is fine\nlet x = Provider::Rxe(y);\nuse crate::providers::mlx5;\n\
                let ok = abi::RDMA_DRIVER_RXE;\n";
    let lines: Vec<usize> = core_violations(core).iter().map(|(n, _)| *n).collect();
    assert_eq!(lines, [2, 3]);
}

#[test]
fn the_testing_scanner_catches_what_it_should() {
    let double = "use crate::{abi, providers::rxe::fake::gid_entry};\n\
                  use crate::providers;\n\
                  let x = providers::rxe::X;\n\
                  use crate::mlx5::DevxEventChannel;\n\
                  use super::super::providers;\n\
                  #[path = \"../../providers/mlx5/wqe.rs\"]\n\
                  // crate::providers in a comment is fine\n\
                  let s = \"providers::rxe in a string is fine\";\n\
                  use super::{device::gid_entry, kernel::FakeKernel};\n\
                  let f = format!(\"{sys}/ibdev {{\");\n\
                  mod inner {\n    use super::super::X;\n}\n\
                  use super::super::Y;\n\
                  let ok = abi::RDMA_DRIVER_MLX5 + testing::mlx5::DEV;\n";
    let lines: Vec<usize> = testing_violations(1, double)
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(lines, [1, 2, 3, 4, 5, 6, 14]);
    // Deeper files may climb as far as `testing`, and no further.
    assert!(testing_violations(3, "use super::super::kernel::GIDS;").is_empty());
    assert_eq!(testing_violations(0, "use super::sys::Kernel;").len(), 1);
    // `use` groups over several lines.
    let group = "use crate::{\n    abi,\n    providers::Device,\n};\n";
    let lines: Vec<usize> = testing_violations(1, group)
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(lines, [3]);
    let group = "use crate::{\n    abi,\n    mlx5,\n    sys::Errno,\n};\n";
    let lines: Vec<usize> = testing_violations(1, group)
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(lines, [3]);
}

/// The test doubles (`src/testing/`) never name the providers; see the
/// module documentation.
#[test]
fn the_test_doubles_never_import_the_providers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let testing = root.join("src/testing");
    let mut files = Vec::new();
    rust_files(&testing, &mut files);
    assert!(files.len() > 10, "src/testing/ not found");
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&testing).unwrap_or(f);
        // The depth of the file's module below `crate::testing`; a
        // folder's `mod.rs` is the folder's module.
        let depth = rel.components().count() - usize::from(rel.ends_with("mod.rs"));
        let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (line, what) in testing_violations(depth, &text) {
            bad.push(format!(
                "{}:{line}: {what}",
                f.strip_prefix(root).unwrap_or(f).display()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "the test doubles name the providers (take what they need from crate::abi, \
         or define it in the double with the source it follows):\n{}",
        bad.join("\n")
    );
}

#[test]
fn providers_import_only_the_vocabulary_and_the_interface() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("providers"), &mut files);
    assert!(files.len() > 10, "providers/ not found");
    let mut bad = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for name in provider_violations(&text) {
            bad.push(format!(
                "{} imports crate::{name}",
                f.strip_prefix(root).unwrap_or(f).display()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "providers reach into the core (allowed: {VOCABULARY:?} and root types):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_core_never_names_a_provider() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap_or(f);
        // The CLI is a user of the library, not part of it. The test
        // doubles play the providers' devices, so they name rxe and mlx5;
        // their rule is `the_test_doubles_never_import_the_providers`.
        if rel.starts_with("src/bin") || rel.starts_with("src/testing") {
            continue;
        }
        let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (line, code) in core_violations(&text) {
            // A `cfg` names the providers' cargo features (`rxe`, `mlx5`):
            // a build switch, not a dispatch; the item it gates is a line
            // of its own, checked as any other.
            if code.trim_start().starts_with("#[cfg") {
                continue;
            }
            if !EXCEPTIONS
                .iter()
                .any(|(file, part)| rel == Path::new(file) && code.contains(part))
            {
                bad.push(format!("{}:{line}: {}", rel.display(), code.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "the core names a provider (dispatch belongs in providers/dispatch.rs):\n{}",
        bad.join("\n")
    );
}
