//! Checks every registered struct and constant of `uverbs-abi` against the
//! real kernel UAPI headers, by compiling and running a generated C program.
//!
//! Headers: `/usr/include` (a directory containing `rdma/ib_user_verbs.h`), or
//! `$UVERBS_ABI_INCLUDE`. Compiler: `$CC`, default `cc`. Both are required:
//! the test fails, never skips, when either is missing.

use std::{
    collections::{BTreeMap, BTreeSet},
    env, fs,
    path::{Path, PathBuf},
    process::Command,
};

use uverbs_abi::layout::{ALL_CONSTS, ALL_EXPRS, ALL_STRUCTS};

/// The only constants that are not checked against a header, because the
/// kernel does not export them in its UAPI:
/// - `IBV_EVENT_*`: kernel `enum ib_event_type`, include/rdma/ib_verbs.h
///   (the numbers written into `ib_uverbs_async_event_desc.event_type`);
/// - `RDMA_CM_EVENT_*`: kernel `enum rdma_cm_event_type`,
///   include/rdma/rdma_cm.h (the numbers in `rdma_ucm_event_resp.event`).
const NOT_IN_UAPI: &[&str] = &[
    "IBV_EVENT_CQ_ERR",
    "IBV_EVENT_QP_FATAL",
    "IBV_EVENT_QP_REQ_ERR",
    "IBV_EVENT_QP_ACCESS_ERR",
    "IBV_EVENT_COMM_EST",
    "IBV_EVENT_SQ_DRAINED",
    "IBV_EVENT_PATH_MIG",
    "IBV_EVENT_PATH_MIG_ERR",
    "IBV_EVENT_DEVICE_FATAL",
    "IBV_EVENT_PORT_ACTIVE",
    "IBV_EVENT_PORT_ERR",
    "IBV_EVENT_LID_CHANGE",
    "IBV_EVENT_PKEY_CHANGE",
    "IBV_EVENT_SM_CHANGE",
    "IBV_EVENT_SRQ_ERR",
    "IBV_EVENT_SRQ_LIMIT_REACHED",
    "IBV_EVENT_QP_LAST_WQE_REACHED",
    "IBV_EVENT_CLIENT_REREGISTER",
    "IBV_EVENT_GID_CHANGE",
    "IBV_EVENT_WQ_FATAL",
    "RDMA_CM_EVENT_ADDR_RESOLVED",
    "RDMA_CM_EVENT_ADDR_ERROR",
    "RDMA_CM_EVENT_ROUTE_RESOLVED",
    "RDMA_CM_EVENT_ROUTE_ERROR",
    "RDMA_CM_EVENT_CONNECT_REQUEST",
    "RDMA_CM_EVENT_CONNECT_RESPONSE",
    "RDMA_CM_EVENT_CONNECT_ERROR",
    "RDMA_CM_EVENT_UNREACHABLE",
    "RDMA_CM_EVENT_REJECTED",
    "RDMA_CM_EVENT_ESTABLISHED",
    "RDMA_CM_EVENT_DISCONNECTED",
    "RDMA_CM_EVENT_DEVICE_REMOVAL",
    "RDMA_CM_EVENT_MULTICAST_JOIN",
    "RDMA_CM_EVENT_MULTICAST_ERROR",
    "RDMA_CM_EVENT_ADDR_CHANGE",
    "RDMA_CM_EVENT_TIMEWAIT_EXIT",
];

/// Registry types of `layout.rs` itself (not ABI).
const REGISTRY_ITEMS: &[&str] = &[
    "FieldLayout",
    "StructLayout",
    "ConstLayout",
    "ExprLayout",
    "ALL_STRUCTS",
    "ALL_CONSTS",
    "ALL_EXPRS",
];

const HEADERS: &[&str] = &[
    "rdma/rdma_user_ioctl_cmds.h",
    "rdma/ib_user_ioctl_cmds.h",
    "rdma/ib_user_ioctl_verbs.h",
    "rdma/ib_user_verbs.h",
    "rdma/rdma_user_rxe.h",
    "rdma/mlx5-abi.h",
    "rdma/mlx5_user_ioctl_cmds.h",
    "rdma/mlx5_user_ioctl_verbs.h",
    "rdma/rdma_user_cm.h",
    "rdma/ib_user_sa.h",
    "rdma/rdma_netlink.h",
    "linux/socket.h",
];

const HOW_TO_GET: &str = "install the Linux UAPI headers and a C compiler (Debian: \
     `apt-get install linux-libc-dev gcc`), or without root: `apt-get download linux-libc-dev && \
     dpkg -x linux-libc-dev_*.deb DIR` and set UVERBS_ABI_INCLUDE=DIR/usr/include; set CC to \
     pick the compiler";

fn include_dir() -> PathBuf {
    let dir = env::var_os("UVERBS_ABI_INCLUDE")
        .map_or_else(|| PathBuf::from("/usr/include"), PathBuf::from);
    assert!(
        dir.join("rdma/ib_user_verbs.h").is_file(),
        "uverbs-abi layout test: no <rdma/ib_user_verbs.h> under {}: {HOW_TO_GET}",
        dir.display()
    );
    dir
}

/// The C program: one line of output per checked item.
fn c_source() -> String {
    let mut c = String::from("#include <stdio.h>\n#include <stddef.h>\n");
    for h in HEADERS {
        c += &format!("#include <{h}>\n");
    }
    c += "int main(void) {\n";
    for s in ALL_STRUCTS {
        let t = s.c_type;
        c += &format!(
            "  printf(\"S {} %zu %zu\\n\", sizeof({t}), (size_t)_Alignof({t}));\n",
            s.rust
        );
        for f in s.fields.iter().filter(|f| !f.c.is_empty()) {
            c += &format!(
                "  printf(\"F {}.{} %zu %zu\\n\", offsetof({t}, {m}), sizeof((({t} *)0)->{m}));\n",
                s.rust,
                f.rust,
                m = f.c
            );
        }
    }
    for k in ALL_CONSTS.iter().filter(|k| !NOT_IN_UAPI.contains(&k.name)) {
        let n = k.name;
        c += &format!("  printf(\"C {n} %d %llu\\n\", ({n}) < 0, (unsigned long long)({n}));\n");
    }
    for (i, e) in ALL_EXPRS.iter().enumerate() {
        let x = e.c;
        c += &format!("  printf(\"E {i} %d %llu\\n\", ({x}) < 0, (unsigned long long)({x}));\n");
    }
    c += "  return 0;\n}\n";
    c
}

/// Compiles and runs the C program once per test process (the tests run in
/// parallel and would otherwise race on the same files); returns its output.
fn run_c() -> String {
    static OUTPUT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OUTPUT.get_or_init(compile_and_run).clone()
}

fn compile_and_run() -> String {
    let inc = include_dir();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("uverbs-abi-layout");
    fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    fs::write(&src, c_source()).unwrap();
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let mut cmd = Command::new(&cc);
    cmd.arg("-std=gnu11").arg("-w").arg("-I").arg(&inc);
    // Multiarch directories (e.g. x86_64-linux-gnu/asm) of an unpacked package.
    if let Ok(rd) = fs::read_dir(&inc) {
        for e in rd.flatten() {
            if e.path().join("asm").is_dir() {
                cmd.arg("-I").arg(e.path());
            }
        }
    }
    cmd.arg("-o").arg(&exe).arg(&src);
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("uverbs-abi layout test: cannot run C compiler `{cc}` ({e}): {HOW_TO_GET}")
    });
    assert!(
        out.status.success(),
        "uverbs-abi layout test: compiling {} failed ({HOW_TO_GET}):\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("run layout program");
    assert!(run.status.success(), "layout program failed");
    String::from_utf8(run.stdout).unwrap()
}

fn c_value(neg: &str, raw: &str) -> i128 {
    let v = i128::from(raw.parse::<u64>().unwrap());
    if neg == "1" {
        v - (1i128 << 64)
    } else {
        v
    }
}

/// Compares the C program's output with the Rust registry; returns one line
/// per mismatch (or missing item).
fn compare(c_output: &str) -> Vec<String> {
    let mut c: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in c_output.lines() {
        let mut it = line.split_whitespace();
        if let (Some(kind), Some(key)) = (it.next(), it.next()) {
            c.insert(format!("{kind} {key}"), it.map(str::to_owned).collect());
        }
    }
    let mut bad = Vec::new();
    for s in ALL_STRUCTS {
        match c.get(&format!("S {}", s.rust)) {
            None => bad.push(format!("{} ({}): missing from C output", s.rust, s.c_type)),
            Some(v) => {
                let (size, align): (usize, usize) = (v[0].parse().unwrap(), v[1].parse().unwrap());
                if size != s.size {
                    bad.push(format!(
                        "{} ({}): size C {size} vs Rust {}",
                        s.rust, s.c_type, s.size
                    ));
                }
                if align != s.align {
                    bad.push(format!(
                        "{} ({}): align C {align} vs Rust {}",
                        s.rust, s.c_type, s.align
                    ));
                }
            }
        }
        for f in s.fields.iter().filter(|f| !f.c.is_empty()) {
            match c.get(&format!("F {}.{}", s.rust, f.rust)) {
                None => bad.push(format!("{}.{}: missing from C output", s.rust, f.rust)),
                Some(v) => {
                    let (off, size): (usize, usize) =
                        (v[0].parse().unwrap(), v[1].parse().unwrap());
                    if off != f.offset {
                        bad.push(format!(
                            "{}.{} (C `{}`): offset C {off} vs Rust {}",
                            s.rust, f.rust, f.c, f.offset
                        ));
                    }
                    if size != f.size {
                        bad.push(format!(
                            "{}.{} (C `{}`): size C {size} vs Rust {}",
                            s.rust, f.rust, f.c, f.size
                        ));
                    }
                }
            }
        }
    }
    for k in ALL_CONSTS.iter().filter(|k| !NOT_IN_UAPI.contains(&k.name)) {
        match c.get(&format!("C {}", k.name)) {
            None => bad.push(format!("{}: missing from C output", k.name)),
            Some(v) => {
                let cv = c_value(&v[0], &v[1]);
                if cv != k.value {
                    bad.push(format!(
                        "{}: value C {cv} ({cv:#x}) vs Rust {} ({:#x})",
                        k.name, k.value, k.value
                    ));
                }
            }
        }
    }
    for (i, e) in ALL_EXPRS.iter().enumerate() {
        match c.get(&format!("E {i}")) {
            None => bad.push(format!("{}: missing from C output", e.c)),
            Some(v) => {
                let cv = c_value(&v[0], &v[1]);
                if cv != e.value {
                    bad.push(format!("{}: value C {cv} vs Rust {}", e.c, e.value));
                }
            }
        }
    }
    bad
}

#[test]
fn layout_matches_c_headers() {
    let bad = compare(&run_c());
    assert!(
        bad.is_empty(),
        "{} ABI mismatch(es) between uverbs-abi and the C headers in {}:\n  {}",
        bad.len(),
        include_dir().display(),
        bad.join("\n  ")
    );
    eprintln!(
        "checked {} structs ({} fields), {} constants ({} not in UAPI), {} expressions",
        ALL_STRUCTS.len(),
        ALL_STRUCTS.iter().map(|s| s.fields.len()).sum::<usize>(),
        ALL_CONSTS.len(),
        NOT_IN_UAPI.len(),
        ALL_EXPRS.len()
    );
}

/// Perturbing the C output must produce one report per perturbation.
#[test]
fn comparison_reports_perturbations() {
    let good = run_c();
    assert!(
        compare(&good).is_empty(),
        "baseline must be clean for this self-test"
    );
    let mut lines: Vec<String> = good.lines().map(str::to_owned).collect();
    let field = lines
        .iter()
        .position(|l| l.starts_with("F IbUverbsAttr.flags "))
        .unwrap();
    let size = lines
        .iter()
        .position(|l| l.starts_with("S IbUverbsIoctlHdr "))
        .unwrap();
    let konst = lines
        .iter()
        .position(|l| l.starts_with("C UVERBS_METHOD_CQ_CREATE "))
        .unwrap();
    let fsize = lines
        .iter()
        .position(|l| l.starts_with("F RxeSendWr.wr "))
        .unwrap();
    lines[field] = "F IbUverbsAttr.flags 5 2".to_owned();
    lines[size] = "S IbUverbsIoctlHdr 32 8".to_owned();
    lines[konst] = "C UVERBS_METHOD_CQ_CREATE 0 7".to_owned();
    lines[fsize] = "F RxeSendWr.wr 24 112".to_owned();
    let bad = compare(&lines.join("\n"));
    let expect = [
        "IbUverbsAttr.flags (C `flags`): offset C 5 vs Rust 4",
        "IbUverbsIoctlHdr (struct ib_uverbs_ioctl_hdr): size C 32 vs Rust 24",
        "UVERBS_METHOD_CQ_CREATE: value C 7",
        "RxeSendWr.wr (C `wr`): size C 112 vs Rust 120",
    ];
    for e in expect {
        assert!(
            bad.iter().any(|b| b.starts_with(e)),
            "not reported: {e}; got {bad:#?}"
        );
    }
    assert_eq!(bad.len(), expect.len(), "{bad:#?}");
    // A line dropped from the C output is reported too.
    let dropped: Vec<&str> = good
        .lines()
        .filter(|l| !l.starts_with("C IB_USER_VERBS_ABI_VERSION "))
        .collect();
    assert_eq!(
        compare(&dropped.join("\n")),
        ["IB_USER_VERBS_ABI_VERSION: missing from C output"]
    );
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `pub struct` / `pub const` in `src/` is in the registry, exactly once.
#[test]
fn registry_is_complete() {
    let mut files = Vec::new();
    rs_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut declared = BTreeSet::new();
    for f in &files {
        for line in fs::read_to_string(f).unwrap().lines() {
            let l = line.trim_start();
            if l.starts_with("//") {
                continue;
            }
            for kw in ["pub struct ", "pub const "] {
                if let Some(rest) = l.strip_prefix(kw) {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != "fn" {
                        declared.insert(name);
                    }
                }
            }
        }
    }
    let mut problems = Vec::new();
    let mut registered = BTreeSet::new();
    for name in ALL_STRUCTS
        .iter()
        .map(|s| s.rust)
        .chain(ALL_CONSTS.iter().map(|k| k.name))
    {
        if !registered.insert(name) {
            problems.push(format!("{name}: registered twice"));
        }
    }
    let mut c_types = BTreeSet::new();
    for s in ALL_STRUCTS {
        if !c_types.insert(s.c_type) {
            problems.push(format!(
                "{}: C type `{}` registered twice",
                s.rust, s.c_type
            ));
        }
        for f in s.fields {
            if f.c.is_empty() != f.rust.starts_with("_pad") {
                problems.push(format!(
                    "{}.{}: only `_pad*` fields may lack a C member",
                    s.rust, f.rust
                ));
            }
        }
        let sum: usize = s.fields.iter().map(|f| f.size).sum();
        if sum != s.size {
            problems.push(format!(
                "{}: fields cover {sum} of {} bytes",
                s.rust, s.size
            ));
        }
    }
    for name in &declared {
        if !registered.contains(name.as_str()) && !REGISTRY_ITEMS.contains(&name.as_str()) {
            problems.push(format!("{name}: declared in src/ but not registered (define it with abi_structs!/abi_consts!)"));
        }
    }
    for name in &registered {
        if !declared.contains(*name) {
            problems.push(format!(
                "{name}: registered but not found by the source scan"
            ));
        }
    }
    for name in NOT_IN_UAPI {
        if !registered.contains(name) {
            problems.push(format!("{name}: listed in NOT_IN_UAPI but not registered"));
        }
    }
    assert!(
        problems.is_empty(),
        "registry problems:\n  {}",
        problems.join("\n  ")
    );
}

/// The kernel-internal event numbers, checked the only way possible: the
/// documented sequences (include/rdma/ib_verbs.h, include/rdma/rdma_cm.h).
#[test]
fn not_in_uapi_values() {
    let value = |n: &str| ALL_CONSTS.iter().find(|k| k.name == n).unwrap().value;
    for (i, n) in NOT_IN_UAPI
        .iter()
        .filter(|n| n.starts_with("IBV_EVENT_"))
        .enumerate()
    {
        assert_eq!(value(n), i as i128, "{n}");
    }
    for (i, n) in NOT_IN_UAPI
        .iter()
        .filter(|n| n.starts_with("RDMA_CM_EVENT_"))
        .enumerate()
    {
        assert_eq!(value(n), i as i128, "{n}");
    }
}
