//! Dependency policy: the library stays pure Rust.
//!
//! The normal + build dependency graph of `uverbs` and `uverbs-abi` (for the host
//! and for `x86_64-unknown-linux-musl`, the static target) must not gain:
//! - a `*-sys` crate, or any crate with a `links` key (both mean native linking);
//! - a crate that drives a C/C++ toolchain or finds native libraries at build time
//!   (`cc`, `cmake`, `pkg-config`, `bindgen`, `vcpkg`, ...);
//! - a crate that loads shared libraries at run time (`libloading`, `dlopen`, ...),
//!   or an RDMA crate that wraps libibverbs;
//! - any build script not on the reviewed allowlist below.
//!
//! Our own library sources must not call `dlopen`/`dlsym` or use `#[link(...)]`.
//!
//! The graph comes from `cargo metadata --format-version 1 --filter-platform T`:
//! `packages[]` gives each crate's `links` key and whether it has a `custom-build`
//! target; `resolve.nodes[].deps[].dep_kinds[].kind` gives the edge kinds (`null` =
//! normal, `"build"`, `"dev"`). It is read with a small JSON parser below, so the
//! test needs no dependencies and no fragile string matching.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
    process::Command,
};

const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";
const ROOTS: [&str; 2] = ["uverbs", "uverbs-abi"];

/// Crates that build or link native code, or load it at run time.
const DENIED: &[(&str, &str)] = &[
    ("cc", "compiles C/C++"),
    ("cmake", "runs CMake"),
    ("cxx", "C++ bridge"),
    ("cxx-build", "compiles C++"),
    ("bindgen", "needs libclang and C headers"),
    ("pkg-config", "finds native libraries"),
    ("system-deps", "finds native libraries"),
    ("vcpkg", "finds native libraries"),
    ("autotools", "runs configure/make"),
    ("nasm-rs", "assembles native code"),
    ("libloading", "dlopen at run time"),
    ("dlopen", "dlopen at run time"),
    ("dlopen2", "dlopen at run time"),
    ("dlib", "dlopen at run time"),
    ("shared_library", "dlopen at run time"),
    ("sharedlib", "dlopen at run time"),
    ("ibverbs", "wraps libibverbs"),
    ("sideway", "wraps libibverbs"),
    ("async-rdma", "wraps libibverbs"),
];

/// Build scripts that were read and found to be pure Rust (they only probe the
/// compiler version or target cfgs and print `cargo:` directives; none compiles or
/// links anything). The check is by name, so a crate that later starts compiling C
/// would also need `cc` or a `links` key, which are caught separately.
/// `autocfg` itself is fine: it only runs rustc on probe snippets; a crate using it
/// still needs an entry here for its own build script.
const PURE_BUILD_SCRIPTS: &[(&str, &str)] = &[
    (
        "libc",
        "rustc --version probe -> cfgs (freebsd-version/emcc only on those targets)",
    ),
    (
        "crossbeam-utils",
        "emits cfgs for targets without atomics; runs nothing",
    ),
    ("memoffset", "autocfg probe of rustc features (via nix)"),
    ("nix", "cfg_aliases: cfg aliases from the target's cfgs"),
    (
        "proc-macro2",
        "rustc probe for proc_macro features (host, via zerocopy-derive)",
    ),
    ("quote", "rustc --version probe (host, via zerocopy-derive)"),
    ("zerocopy", "rustc --version probe -> zerocopy_* cfgs"),
];

/// A crate in the resolved graph, with the facts the policy looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Crate {
    name: String,
    version: String,
    links: Option<String>,
    build_script: bool,
}

/// Returns one message per policy violation (empty if the graph is acceptable).
fn policy_violations(crates: &[Crate]) -> Vec<String> {
    let mut out = Vec::new();
    for c in crates {
        let id = format!("{} {}", c.name, c.version);
        if c.name.ends_with("-sys") || c.name.ends_with("_sys") {
            out.push(format!("{id}: *-sys crate (native bindings/linking)"));
        }
        if let Some((_, why)) = DENIED.iter().find(|(n, _)| *n == c.name) {
            out.push(format!("{id}: denied crate ({why})"));
        }
        if let Some(links) = &c.links {
            out.push(format!(
                "{id}: has `links = \"{links}\"` (links a native library)"
            ));
        }
        if c.build_script && !PURE_BUILD_SCRIPTS.iter().any(|(n, _)| *n == c.name) {
            out.push(format!(
                "{id}: has a build script not reviewed as pure Rust \
                 (read it; if it compiles or links nothing, add it to PURE_BUILD_SCRIPTS)"
            ));
        }
    }
    out
}

fn krate(name: &str, links: Option<&str>, build_script: bool) -> Crate {
    Crate {
        name: name.to_owned(),
        version: "1.0.0".to_owned(),
        links: links.map(str::to_owned),
        build_script,
    }
}

#[test]
fn policy_rejects_native_and_dlopen_crates_in_a_synthetic_graph() {
    // Negative control for `policy_violations`.
    let graph = [
        krate("libc", None, true),
        krate("openssl-sys", Some("openssl"), true),
        krate("libloading", None, false),
        krate("cc", None, false),
        krate("zstd-safe", None, true),
        krate("bitflags", None, false),
    ];
    let v = policy_violations(&graph);
    let hit = |needle: &str| v.iter().any(|m| m.starts_with(needle));
    assert!(hit("openssl-sys 1.0.0: *-sys"), "{v:#?}");
    assert!(hit("openssl-sys 1.0.0: has `links"), "{v:#?}");
    assert!(hit("openssl-sys 1.0.0: has a build script"), "{v:#?}");
    assert!(hit("libloading 1.0.0: denied"), "{v:#?}");
    assert!(hit("cc 1.0.0: denied"), "{v:#?}");
    assert!(hit("zstd-safe 1.0.0: has a build script"), "{v:#?}");
    assert!(
        !v.iter()
            .any(|m| m.starts_with("libc ") || m.starts_with("bitflags ")),
        "{v:#?}"
    );
    assert_eq!(v.len(), 6, "{v:#?}");
}

// ---- cargo metadata ---------------------------------------------------------------

fn workspace_manifest() -> String {
    format!("{}/Cargo.toml", env!("CARGO_MANIFEST_DIR"))
}

fn host_triple() -> String {
    let out = Command::new(env!("CARGO"))
        .arg("-vV")
        .output()
        .expect("run cargo -vV");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .unwrap_or_else(|| panic!("no `host:` line in `cargo -vV` output:\n{text}"))
        .trim()
        .to_owned()
}

/// `cargo metadata` for one platform. Offline first (the test was just built, so the
/// sources are present); online only if a crate for `platform` was never fetched.
/// `--locked`: never rewrite Cargo.lock from a test.
fn metadata(platform: &str) -> Json {
    let run = |offline: bool| {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--filter-platform",
        ])
        .arg(platform)
        .arg("--manifest-path")
        .arg(workspace_manifest());
        if offline {
            cmd.arg("--offline");
        }
        cmd.output().expect("run cargo metadata")
    };
    let mut out = run(true);
    if !out.status.success() {
        eprintln!(
            "cargo metadata --offline failed, retrying online:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out = run(false);
    }
    assert!(
        out.status.success(),
        "cargo metadata --filter-platform {platform} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("metadata is UTF-8");
    Json::parse(&text).unwrap_or_else(|e| panic!("cannot parse cargo metadata: {e}"))
}

/// Crates reachable from `ROOTS` through normal and build edges (not dev).
fn library_graph(meta: &Json) -> Vec<Crate> {
    let mut by_id = BTreeMap::new();
    let mut roots = Vec::new();
    for p in meta
        .get("packages")
        .and_then(Json::as_array)
        .expect("packages[]")
    {
        let id = p.get("id").and_then(Json::as_str).expect("package id");
        let name = p.get("name").and_then(Json::as_str).expect("package name");
        let targets = p
            .get("targets")
            .and_then(Json::as_array)
            .expect("targets[]");
        let build_script = targets.iter().any(|t| {
            t.get("kind")
                .and_then(Json::as_array)
                .is_some_and(|k| k.iter().any(|k| k.as_str() == Some("custom-build")))
        });
        let krate = Crate {
            name: name.to_owned(),
            version: p
                .get("version")
                .and_then(Json::as_str)
                .unwrap_or("?")
                .to_owned(),
            links: p.get("links").and_then(Json::as_str).map(str::to_owned),
            build_script,
        };
        let members = meta
            .get("workspace_members")
            .and_then(Json::as_array)
            .expect("members");
        if ROOTS.contains(&name) && members.iter().any(|m| m.as_str() == Some(id)) {
            roots.push(id.to_owned());
        }
        by_id.insert(id.to_owned(), krate);
    }
    assert_eq!(
        roots.len(),
        ROOTS.len(),
        "workspace members {ROOTS:?} not all found"
    );

    let mut edges: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let nodes = meta
        .get("resolve")
        .and_then(|r| r.get("nodes"))
        .and_then(Json::as_array);
    for node in nodes.expect("resolve.nodes[]") {
        let id = node.get("id").and_then(Json::as_str).expect("node id");
        for dep in node
            .get("deps")
            .and_then(Json::as_array)
            .expect("node deps[]")
        {
            let kinds = dep
                .get("dep_kinds")
                .and_then(Json::as_array)
                .expect("dep_kinds[]");
            let library_edge = kinds.iter().any(|k| match k.get("kind") {
                Some(Json::Null) => true,
                Some(kind) => kind.as_str() == Some("build"),
                None => false,
            });
            if library_edge {
                let pkg = dep.get("pkg").and_then(Json::as_str).expect("dep pkg");
                edges.entry(id).or_default().push(pkg);
            }
        }
    }

    let mut seen = BTreeSet::new();
    let mut stack: Vec<&str> = roots.iter().map(String::as_str).collect();
    while let Some(id) = stack.pop() {
        if seen.insert(id) {
            stack.extend(edges.get(id).into_iter().flatten());
        }
    }
    seen.iter()
        .map(|id| {
            by_id
                .get(*id)
                .unwrap_or_else(|| panic!("{id} not in packages[]"))
                .clone()
        })
        .collect()
}

#[test]
fn graph_walk_follows_normal_and_build_edges_but_not_dev() {
    // Negative control for `library_graph` on a hand-written metadata document:
    // uverbs -> a (normal) -> openssl-sys; uverbs-abi -> b (build);
    // uverbs -> libloading (dev only, so not part of the library).
    let pkg = |id: &str, links: &str, build: bool| {
        let kind = if build {
            r#"["lib"]},{"kind":["custom-build"]"#
        } else {
            r#"["lib"]"#
        };
        format!(
            r#"{{"id":"{id}","name":"{id}","version":"1.0.0","links":{links},"targets":[{{"kind":{kind}}}]}}"#
        )
    };
    let dep = |pkg: &str, kind: &str| {
        format!(r#"{{"pkg":"{pkg}","dep_kinds":[{{"kind":{kind},"target":null}}]}}"#)
    };
    let node =
        |id: &str, deps: &[String]| format!(r#"{{"id":"{id}","deps":[{}]}}"#, deps.join(","));
    let doc = format!(
        r#"{{"packages":[{}],"workspace_members":["uverbs","uverbs-abi"],"resolve":{{"nodes":[{}]}}}}"#,
        [
            pkg("uverbs", "null", false),
            pkg("uverbs-abi", "null", false),
            pkg("a", "null", false),
            pkg("b", "null", true),
            pkg("openssl-sys", r#""openssl""#, true),
            pkg("libloading", "null", false),
        ]
        .join(","),
        [
            node("uverbs", &[dep("a", "null"), dep("libloading", r#""dev""#)]),
            node("uverbs-abi", &[dep("b", r#""build""#)]),
            node("a", &[dep("openssl-sys", "null")]),
            node("b", &[]),
            node("openssl-sys", &[]),
            node("libloading", &[]),
        ]
        .join(","),
    );
    let graph = library_graph(&Json::parse(&doc).expect("synthetic metadata"));
    let mut names: Vec<_> = graph.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["a", "b", "openssl-sys", "uverbs", "uverbs-abi"]);
    let v = policy_violations(&graph);
    assert!(v.iter().any(|m| m.starts_with("openssl-sys")), "{v:#?}");
    assert!(
        v.iter()
            .any(|m| m.starts_with("b 1.0.0: has a build script")),
        "{v:#?}"
    );
}

#[test]
fn library_dependency_graph_is_pure_rust_for_host_and_musl() {
    let mut platforms = vec![host_triple()];
    if platforms[0] != MUSL_TARGET {
        platforms.push(MUSL_TARGET.to_owned());
    }
    let mut failures = Vec::new();
    for platform in &platforms {
        let graph = library_graph(&metadata(platform));
        let names: Vec<_> = graph
            .iter()
            .map(|c| format!("{} {}", c.name, c.version))
            .collect();
        eprintln!("{platform}: {} crates: {}", graph.len(), names.join(", "));
        assert!(
            graph.iter().any(|c| c.name == "libc"),
            "graph walk found no libc: {names:?}"
        );
        // The async runtime is opt-in (feature `tokio`): a default build
        // pulls in no runtime. The second runtime of the examples (smol,
        // for `uverbs::event_stream`) is a dev-dependency only, and the
        // `stream` feature brings `futures-core` alone.
        const RUNTIMES: [&str; 7] = [
            "tokio",
            "mio",
            "smol",
            "async-io",
            "polling",
            "async-executor",
            "futures-lite",
        ];
        assert!(
            !graph.iter().any(|c| RUNTIMES.contains(&c.name.as_str())),
            "a default build depends on an async runtime: {names:?}"
        );
        failures.extend(
            policy_violations(&graph)
                .into_iter()
                .map(|v| format!("[{platform}] {v}")),
        );
    }
    assert!(
        failures.is_empty(),
        "dependency policy violations:\n{}",
        failures.join("\n")
    );
}

// ---- our own sources ------------------------------------------------------------

/// Patterns that mean loading or linking native code from our own library code.
const NATIVE_PATTERNS: &[&str] = &["dlopen", "dlsym", "dlmopen", "#[link("];

/// Lines of `text` (not comments) that contain a `NATIVE_PATTERNS` entry.
fn native_code_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| NATIVE_PATTERNS.iter().any(|p| l.contains(p)))
        .map(|(i, l)| (i + 1, l.trim().to_owned()))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn source_scan_flags_dlopen_and_link_attributes() {
    // Negative control for `native_code_lines`.
    let text = "// we never dlopen\nlet h = libc::dlopen(p, 0);\n#[link(name = \"ibverbs\")]\n";
    let hits = native_code_lines(text);
    assert_eq!(
        hits.iter().map(|h| h.0).collect::<Vec<_>>(),
        [2, 3],
        "{hits:?}"
    );
}

#[test]
fn own_sources_do_not_dlopen_or_link_native_libraries() {
    // Comment lines are skipped so docs may say what we do *not* do. Tests under
    // abi/ may build C with the host compiler, which is not part of the library.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "providers", "abi/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(!files.is_empty(), "no .rs files found under src/");
    let mut hits = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (line, code) in native_code_lines(&text) {
            hits.push(format!("{}:{line}: {code}", file.display()));
        }
    }
    assert!(
        hits.is_empty(),
        "native loading/linking in our sources:\n{}",
        hits.join("\n")
    );
}

// ---- minimal JSON ---------------------------------------------------------------

/// Just enough JSON for `cargo metadata` output. Numbers are kept as text.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    fn parse(text: &str) -> Result<Json, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        let v = p.value(0)?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("trailing data at byte {}", p.i));
        }
        Ok(v)
    }

    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    const MAX_DEPTH: usize = 128;

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.i))
    }

    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &str) -> bool {
        let ok = self.s[self.i..].starts_with(lit.as_bytes());
        if ok {
            self.i += lit.len();
        }
        ok
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > Self::MAX_DEPTH {
            return self.err("nesting too deep");
        }
        self.ws();
        match self.s.get(self.i) {
            None => self.err("unexpected end"),
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.eat("}") {
                    return Ok(Json::Object(fields));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.ws();
                    if !self.eat(":") {
                        return self.err("expected ':'");
                    }
                    fields.push((key, self.value(depth + 1)?));
                    self.ws();
                    if self.eat("}") {
                        return Ok(Json::Object(fields));
                    }
                    if !self.eat(",") {
                        return self.err("expected ',' or '}'");
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.eat("]") {
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    if self.eat("]") {
                        return Ok(Json::Array(items));
                    }
                    if !self.eat(",") {
                        return self.err("expected ',' or ']'");
                    }
                }
            }
            Some(b'"') => self.string().map(Json::String),
            Some(_) if self.eat("null") => Ok(Json::Null),
            Some(_) if self.eat("true") => Ok(Json::Bool(true)),
            Some(_) if self.eat("false") => Ok(Json::Bool(false)),
            Some(c) if *c == b'-' || c.is_ascii_digit() => {
                let start = self.i;
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|c| c.is_ascii_digit() || b"+-.eE".contains(c))
                {
                    self.i += 1;
                }
                Ok(Json::Number(
                    String::from_utf8_lossy(&self.s[start..self.i]).into_owned(),
                ))
            }
            Some(_) => self.err("unexpected character"),
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .s
            .get(self.i..self.i + 4)
            .ok_or("truncated \\u escape")?;
        let text = std::str::from_utf8(digits).map_err(|e| e.to_string())?;
        let v = u32::from_str_radix(text, 16).map_err(|e| format!("bad \\u escape: {e}"))?;
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, String> {
        if !self.eat("\"") {
            return self.err("expected string");
        }
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.i) else {
                return self.err("unterminated string");
            };
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|e| e.to_string()),
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else {
                        return self.err("unterminated escape");
                    };
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&hi) && self.eat("\\u") {
                                let lo = self.hex4()?;
                                0x10000 + ((hi - 0xd800) << 10) + (lo.wrapping_sub(0xdc00) & 0x3ff)
                            } else {
                                hi
                            };
                            char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER)
                        }
                        _ => return self.err("bad escape"),
                    };
                    out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => out.push(c),
            }
        }
    }
}

#[test]
fn json_parser_handles_escapes_and_rejects_garbage() {
    let v = Json::parse(r#" {"a": [1, -2.5e3, true, null, "x\"\u00e9\ud83d\ude00"], "b": {}} "#)
        .expect("valid JSON");
    let a = v.get("a").and_then(Json::as_array).expect("a");
    assert_eq!(a[0], Json::Number("1".into()));
    assert_eq!(a[3], Json::Null);
    assert_eq!(a[4].as_str(), Some("x\"\u{e9}\u{1f600}"));
    for bad in [
        "",
        "{",
        "[1,",
        "{\"a\" 1}",
        "\"\\q\"",
        "[1] 2",
        "nul",
        "\"\\u12\"",
    ] {
        assert!(Json::parse(bad).is_err(), "accepted {bad:?}");
    }
}

/// The fake kernels are test code: they ship only with the `test-utils`
/// feature, which no default turns on (the crate's own tests get it from
/// their self dev-dependency).
#[test]
fn the_fakes_are_behind_the_test_utils_feature() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::read_to_string(workspace_manifest()).unwrap_or_else(|e| panic!("{e}"));
    assert!(manifest.contains("\ntest-utils = ["), "the feature exists");
    assert!(
        !manifest.contains("default = [\"test-utils\"")
            && !manifest.contains("default=[\"test-utils\""),
        "test-utils is not a default feature"
    );
    let gate = "#[cfg(any(test, feature = \"test-utils\"))]";
    for (file, item) in [
        ("src/sys/mod.rs", "pub use crate::testing::kernel as fake;"),
        ("src/lib.rs", "pub mod testing;"),
        ("src/bin/uverbs/perf/mod.rs", "mod micro_fake;"),
    ] {
        let text = fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let at = lines
            .iter()
            .position(|l| *l == item)
            .unwrap_or_else(|| panic!("{file}: no `{item}`"));
        let cfg = lines[at - 1];
        assert!(
            cfg == gate || cfg == "#[cfg(feature = \"test-utils\")]",
            "{file}: `{item}` must be gated by the test-utils feature, found `{cfg}`"
        );
    }
}
