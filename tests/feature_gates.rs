//! The cargo features a user chooses (`rxe`, `mlx5`, `devx`, `cm`, `cli`,
//! `tokio`, `stream`) are documented where they gate something: every public item
//! behind `#[cfg(feature = "F")]` also carries
//! `#[cfg_attr(docsrs, doc(cfg(feature = "F")))]`, so docs.rs (built with
//! `--cfg docsrs`) says which feature brings it; and the README's feature
//! table names every feature of Cargo.toml. Whether each feature builds on
//! its own is `scripts/features.sh`'s job (in `scripts/test.sh`).

use std::{fs, path::Path};

/// The features a user of the crate picks; the others (`test-utils`,
/// `device-tests`, `fuzzing`) are for the repository's own tests.
const USER_FEATURES: &[&str] = &["rxe", "mlx5", "devx", "cm", "cli", "tokio", "stream"];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            // The test doubles and the CLI are not the library's public API.
            if !path.ends_with("testing") && !path.ends_with("bin") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The feature a `#[cfg(feature = "F")]` line gates on, if it is one.
fn gated_feature(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix("#[cfg(feature = \"")?;
    let name = rest.strip_suffix("\")]")?;
    Some(name)
}

/// Whether the line starts an item visible outside the crate (plain `pub`;
/// `pub(crate)` and `pub(super)` are not).
fn is_public_item(line: &str) -> bool {
    let t = line.trim_start();
    [
        "pub mod ",
        "pub fn ",
        "pub const fn ",
        "pub async fn ",
        "pub struct ",
        "pub enum ",
        "pub trait ",
        "pub type ",
        "pub const ",
        "pub use ",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// The items gated on a user feature without saying so to rustdoc:
/// `file:line: feature`.
fn undocumented_gates(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("providers"), &mut files);
    let mut missing = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(feature) = gated_feature(line) else {
                continue;
            };
            if !USER_FEATURES.contains(&feature) {
                continue;
            }
            // The item's attributes and doc comment, then the item.
            let mut j = i + 1;
            let mut documented = false;
            while j < lines.len() {
                let t = lines[j].trim_start();
                if t.starts_with("#[") || t.starts_with("///") || t.starts_with("//") {
                    if t.contains(&format!("doc(cfg(feature = \"{feature}\"))")) {
                        documented = true;
                    }
                    j += 1;
                } else {
                    break;
                }
            }
            if j < lines.len() && is_public_item(lines[j]) && !documented {
                missing.push(format!(
                    "{}:{}: `{}` gated on `{feature}`",
                    file.strip_prefix(root).unwrap().display(),
                    j + 1,
                    lines[j].trim()
                ));
            }
        }
    }
    missing
}

#[test]
fn every_gated_public_item_names_its_feature_in_the_docs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let missing = undocumented_gates(root);
    assert!(
        missing.is_empty(),
        "add #[cfg_attr(docsrs, doc(cfg(feature = \"F\")))] to:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_check_finds_a_gate_without_its_doc_cfg() {
    let dir = std::env::temp_dir().join(format!("uverbs-feature-gates-{}", std::process::id()));
    let src = dir.join("src");
    fs::create_dir_all(&src).unwrap();
    fs::create_dir_all(dir.join("providers")).unwrap();
    fs::write(
        src.join("lib.rs"),
        "#[cfg(feature = \"cm\")]\n/// Doc.\npub mod cm;\n\
         #[cfg(feature = \"tokio\")]\n#[cfg_attr(docsrs, doc(cfg(feature = \"tokio\")))]\npub mod tokio;\n\
         #[cfg(feature = \"mlx5\")]\npub(crate) fn internal() {}\n\
         #[cfg(feature = \"test-utils\")]\npub mod testing;\n",
    )
    .unwrap();
    let missing = undocumented_gates(&dir);
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(missing, ["src/lib.rs:3: `pub mod cm;` gated on `cm`"]);
}

#[test]
fn the_readme_lists_every_feature() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let features = manifest
        .split("\n[features]\n")
        .nth(1)
        .expect("Cargo.toml has a [features] table")
        .split("\n[")
        .next()
        .unwrap();
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    for line in features.lines() {
        let Some((name, _)) = line.split_once(" = ") else {
            continue;
        };
        if line.starts_with('#') || name == "default" {
            continue;
        }
        assert!(
            readme.contains(&format!("| `{name}` |")),
            "README.md's feature table has no row for `{name}`"
        );
    }
    for f in USER_FEATURES {
        assert!(
            features.contains(&format!("\n{f} = ")) || features.starts_with(&format!("{f} = ")),
            "`{f}` is not a feature of Cargo.toml"
        );
    }
}
