//! The documentation keeps its promises: every `#[doc(alias = "...")]` (the
//! libibverbs, librdmacm or mlx5dv name a search finds) is also written in
//! the item's prose, where a reader sees it; every example is listed in
//! the crate root's table of examples; and every Rust snippet of README.md
//! and src/README.md is compiled (each is a doctest of `src/lib.rs` under
//! `cfg(doctest)`, and no snippet opts out with `ignore`).

use std::{fs, path::Path};

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(line, alias)` of every alias whose doc comment does not name it.
fn aliases_missing_from_prose(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut missing = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let mut rest = *line;
        while let Some(at) = rest.find("doc(alias = \"") {
            rest = &rest[at + 13..];
            let Some(end) = rest.find('"') else { break };
            let alias = &rest[..end];
            // The doc comment and attributes directly above the alias.
            let prose = lines[..i]
                .iter()
                .rev()
                .take_while(|l| {
                    let t = l.trim_start();
                    t.starts_with("///") || t.starts_with("#[")
                })
                .filter(|l| l.trim_start().starts_with("///"));
            if !prose.clone().any(|l| l.contains(alias)) {
                missing.push((i + 1, alias.to_string()));
            }
        }
    }
    missing
}

#[test]
fn the_scanner_finds_an_alias_missing_from_prose() {
    let text = "/// Like `ibv_foo`.\n#[doc(alias = \"ibv_foo\")]\nfn a() {}\n\
                /// Something else.\n#[inline]\n#[doc(alias = \"ibv_bar\")]\nfn b() {}\n";
    assert_eq!(
        aliases_missing_from_prose(text),
        [(6, "ibv_bar".to_string())]
    );
}

#[test]
fn every_doc_alias_is_named_in_its_prose() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("providers"), &mut files);
    let mut bad = Vec::new();
    let mut seen = 0;
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        seen += text.matches("doc(alias = \"").count();
        for (line, alias) in aliases_missing_from_prose(&text) {
            bad.push(format!(
                "{}:{line}: {alias}",
                f.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(seen > 50, "only {seen} aliases found: scanner broken?");
    assert!(
        bad.is_empty(),
        "aliases not named in the docs:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_example_is_reachable_from_the_crate_docs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let mut missing = Vec::new();
    for entry in fs::read_dir(root.join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            if !lib.contains(&format!("examples/{name}")) {
                missing.push(name);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "examples the crate docs do not show: {missing:?}"
    );
}

/// The C names of the crate root's "libibverbs names" table: each
/// backticked `ibv_*`, `IBV_*`, `rdma_*` or `mlx5dv_*` name of the left column
/// (`name(_ex)` is two names; `prefix_*` families and `struct` names are
/// left out: they name many items or a type).
fn table_names(lib: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_table = false;
    for line in lib.lines() {
        if line.starts_with("//! # libibverbs names") {
            in_table = true;
            continue;
        }
        if in_table && line.starts_with("//! #") {
            break;
        }
        let Some(row) = line.strip_prefix("//! | ") else {
            continue;
        };
        let left = row.split(" | ").next().unwrap_or("");
        for cell in left.split('`').skip(1).step_by(2) {
            let is_c = ["ibv_", "IBV_", "rdma_", "mlx5dv_"]
                .iter()
                .any(|p| cell.starts_with(p));
            if !is_c || cell.contains('*') || cell.contains(' ') {
                continue;
            }
            match cell.strip_suffix("(_ex)") {
                Some(base) => {
                    names.push(base.to_string());
                    names.push(format!("{base}_ex"));
                }
                None => names.push(cell.to_string()),
            }
        }
    }
    names
}

#[test]
fn every_c_name_of_the_names_table_is_a_doc_alias() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let names = table_names(&lib);
    assert!(
        names.len() > 40,
        "only {} names: table parser broken?",
        names.len()
    );
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("providers"), &mut files);
    let aliases: String = files
        .iter()
        .map(|f| fs::read_to_string(f).unwrap())
        .collect();
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !aliases.contains(&format!("doc(alias = \"{n}\")")))
        .collect();
    assert!(
        missing.is_empty(),
        "C names of the table no item has as #[doc(alias)]: {missing:?}"
    );
}

#[test]
fn the_table_parser_reads_names_and_ex_forms() {
    let lib = "//! # libibverbs names\n//!\n//! | C | uverbs |\n//! |---|---|\n\
               //! | `ibv_query_device(_ex)`, `ibv_destroy_*`, `struct ibv_wc` | [`X`] |\n\
               //! | `rdma_notify`, `IBV_MTU_256`, `IBV_WC_*` | [`Y`], `ibv_not_this_column` |\n\
               //!\n//! # Layout\n\
               //! | `ibv_after` | x |\n";
    assert_eq!(
        table_names(lib),
        [
            "ibv_query_device",
            "ibv_query_device_ex",
            "rdma_notify",
            "IBV_MTU_256"
        ]
    );
}

/// Why a README line is a snippet rustdoc would not compile, if it is one:
/// a fenced block whose info string rustdoc reads as Rust (no language, or
/// `rust` or a doctest attribute first) marked `ignore`, a fence with no
/// language at all (Rust to rustdoc: say `rust`, `sh` or `text`), or an
/// indented code block (Rust to rustdoc too; use a fence).
fn uncompiled_snippets(text: &str) -> Vec<(usize, String)> {
    const RUST: &[&str] = &[
        "rust",
        "no_run",
        "should_panic",
        "compile_fail",
        "ignore",
        "edition2015",
        "edition2018",
        "edition2021",
        "edition2024",
    ];
    let mut bad = Vec::new();
    let mut fence: Option<&str> = None;
    let mut blank_before = true;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) && trimmed.trim_end() == open {
                fence = None;
            }
            continue;
        }
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        if let Some(m) = marker {
            let info = trimmed.trim_start_matches(m.chars().next().unwrap()).trim();
            let attrs: Vec<&str> = info
                .split([',', ' ', '\t'])
                .filter(|a| !a.is_empty())
                .collect();
            match attrs.first() {
                None => bad.push((i + 1, "a fence without a language".to_string())),
                Some(first) if RUST.contains(first) => {
                    if attrs.iter().any(|a| a.starts_with("ignore")) {
                        bad.push((i + 1, format!("```{info}: not compiled")));
                    }
                }
                Some(_) => {}
            }
            fence = Some(
                &trimmed
                    [..trimmed.len() - trimmed.trim_start_matches(m.chars().next().unwrap()).len()],
            );
            blank_before = false;
            continue;
        }
        if blank_before && line.starts_with("    ") && !trimmed.is_empty() {
            bad.push((i + 1, "an indented code block".to_string()));
        }
        // An indented block starts after a blank line (not inside a list
        // item's continuation, which the README indents by two).
        blank_before = line.trim().is_empty()
            || (blank_before && line.starts_with("    ") && !trimmed.is_empty());
    }
    bad
}

#[test]
fn the_snippet_scanner_finds_what_rustdoc_would_not_compile() {
    let text = "# T\n\n```rust,ignore\nx\n```\n\n```sh\nls\n```\n\n```\nplain\n```\n\
                \n```rust,no_run\nfn f() {}\n```\n\n```text\n    indented in a fence\n```\n\
                \n    cargo build\n\n- item\n  continued\n";
    let found: Vec<usize> = uncompiled_snippets(text).iter().map(|b| b.0).collect();
    assert_eq!(found, [3, 11, 23], "{:?}", uncompiled_snippets(text));
}

#[test]
fn every_rust_snippet_of_the_readme_is_a_doctest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = fs::read_to_string(root.join("src/lib.rs")).unwrap();
    // The front door, and the crate's own README (its guide to the API):
    // each included by src/lib.rs as a doctest, as `include` names it.
    for (file, include) in [
        ("README.md", "#[doc = include_str!(\"../README.md\")]"),
        ("src/README.md", "#[doc = include_str!(\"README.md\")]"),
    ] {
        let readme = fs::read_to_string(root.join(file)).unwrap();
        let bad = uncompiled_snippets(&readme);
        assert!(
            bad.is_empty(),
            "{file} snippets rustdoc would not compile (make them compile, with `no_run` \
             and hidden `# ` lines for what needs a device, or tag them `sh`/`text`):\n{}",
            bad.iter()
                .map(|(l, why)| format!("{file}:{l}: {why}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert!(
            readme.contains("```rust"),
            "no Rust snippet found in {file}: scanner broken?"
        );
        // And it is compiled at all: included as a doctest of the crate.
        let at = lib
            .find(include)
            .unwrap_or_else(|| panic!("src/lib.rs includes {file} as documentation"));
        assert!(
            lib[..at].trim_end().ends_with("#[cfg(doctest)]"),
            "{file}'s include in src/lib.rs is not under #[cfg(doctest)]"
        );
    }
}
