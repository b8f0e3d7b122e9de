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
//!
//! The scan reads code only (comments and doc comments are skipped).

use std::{
    fs,
    path::{Path, PathBuf},
};

/// Modules of the crate a provider may import.
/// (`netlink`: the fake rxe kernel, `providers/rxe/fake.rs`, answers discovery;
/// `event_fd`: the one reader of event fds, which mlx5's DevX channels use;
/// `shared_memory`: atomic copies of memory others access, which the mlx5
/// device model uses for its DMA.)
const VOCABULARY: &[&str] = &[
    "abi",
    "error",
    "event_fd",
    "ioctl",
    "netlink",
    "shared_memory",
    // The synchronisation primitives, std's or loom's (`--cfg loom`).
    "sync",
    "sys",
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

/// Core lines that name a provider for a reason other than dispatch.
const EXCEPTIONS: &[(&str, &str)] = &[
    // The public mlx5 API.
    ("src/lib.rs", "pub use providers::mlx5::dv as mlx5;"),
    // The kernel ABI re-exported as one namespace (abi::mlx5, abi::rxe).
    ("src/lib.rs", "mlx5_ioctl::*"),
    // The fakes for tests (feature test-utils).
    ("src/lib.rs", "pub use crate::providers::rxe::fake as rxe;"),
    (
        "src/lib.rs",
        "pub use crate::providers::mlx5::model as mlx5;",
    ),
    // A hint for users with no device: how to create a soft-RoCE one.
    ("src/device_list.rs", "rdma link add rxe0"),
    // The async wrapper of the public DevX event channel: a user of the
    // public `uverbs::mlx5` API, as any program would be (feature tokio).
    (
        "src/tokio/channels.rs",
        "mlx5::{DevxEvent, DevxEventChannel}",
    ),
];

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
        // The CLI is a user of the library, not part of it.
        if rel.starts_with("src/bin") {
            continue;
        }
        let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (line, code) in core_violations(&text) {
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
