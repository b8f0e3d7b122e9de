//! The layout probe: compiles a C program against Debian's
//! `<infiniband/verbs.h>` and `<infiniband/mlx5dv.h>` (libibverbs-dev 44) that prints `sizeof`,
//! `_Alignof` and the `offsetof` of every field [`super::all`] lists, and
//! compares each with this crate's `#[repr(C)]` declarations.
//!
//! The header comes from `UVERBS_MLX5DV_INCLUDE` (scripts/test.sh fetches
//! libibverbs-dev into `~/.cache/uverbs-headers-ibverbs`), `/usr/include`,
//! or that cache. Outside CI a missing header or compiler skips the test
//! with a note; in CI (`CI` set) it fails.

use std::{env, fmt::Write as _, path::PathBuf, process::Command};

use super::{all, Layout};

/// Where `infiniband/verbs.h` is, or why the test cannot run.
fn include_dir() -> Result<PathBuf, String> {
    rdmacm_include_dir()?;
    let mut candidates = Vec::new();
    if let Some(d) = env::var_os("UVERBS_MLX5DV_INCLUDE") {
        candidates.push(PathBuf::from(d));
    }
    candidates.push(PathBuf::from("/usr/include"));
    let cache = env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let Some(c) = cache {
        candidates.push(c.join("uverbs-headers-ibverbs/usr/include"));
    }
    candidates
        .into_iter()
        .find(|d| d.join("infiniband/verbs.h").is_file())
        .ok_or_else(|| {
            "no <infiniband/verbs.h>: run scripts/test.sh (it fetches Debian's libibverbs-dev \
             into ~/.cache/uverbs-headers-ibverbs), or `apt-get download libibverbs-dev && \
             dpkg -x libibverbs-dev_*.deb DIR` and set UVERBS_MLX5DV_INCLUDE=DIR/usr/include"
                .to_string()
        })
}

/// Where `rdma/rdma_cma.h` is (librdmacm-dev 44: `UVERBS_RDMACM_INCLUDE`,
/// `/usr/include`, or `~/.cache/uverbs-headers-rdmacm/usr/include`, where
/// scripts/test.sh unpacks Debian's package), or why the test cannot run.
fn rdmacm_include_dir() -> Result<PathBuf, String> {
    let mut candidates = Vec::new();
    if let Some(d) = env::var_os("UVERBS_RDMACM_INCLUDE") {
        candidates.push(PathBuf::from(d));
    }
    candidates.push(PathBuf::from("/usr/include"));
    let cache = env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let Some(c) = cache {
        candidates.push(c.join("uverbs-headers-rdmacm/usr/include"));
    }
    candidates
        .into_iter()
        .find(|d| d.join("rdma/rdma_cma.h").is_file())
        .ok_or_else(|| {
            "no <rdma/rdma_cma.h>: run scripts/test.sh (it fetches Debian's librdmacm-dev \
             into ~/.cache/uverbs-headers-rdmacm), or `apt-get download librdmacm-dev && \
             dpkg -x librdmacm-dev_*.deb DIR` and set UVERBS_RDMACM_INCLUDE=DIR/usr/include"
                .to_string()
        })
}

/// The C field name of a Rust field (`r#priv` is C's `priv`).
fn c_field(rust: &str) -> &str {
    rust.strip_prefix("r#").unwrap_or(rust)
}

/// The probe program: one line per struct (`name size align`) and per
/// field (`name.field offset`).
fn program(layouts: &[Layout]) -> String {
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\n\
         #include <infiniband/sa.h>\n#include <infiniband/mlx5dv.h>\n\
         #include <rdma/rdma_cma.h>\n\
         int main(void) {\n",
    );
    for l in layouts {
        let _ = writeln!(
            c,
            "  printf(\"%s %zu %zu\\n\", \"{0}\", sizeof({0}), _Alignof({0}));",
            l.c_name
        );
        for (f, _) in l.fields {
            let f = c_field(f);
            let _ = writeln!(
                c,
                "  printf(\"%s.%s %zu\\n\", \"{0}\", \"{f}\", offsetof({0}, {f}));",
                l.c_name
            );
        }
    }
    c.push_str("  return 0;\n}\n");
    c
}

#[test]
fn every_declared_field_is_where_verbs_h_puts_it() {
    let Some(dir) = headers("layout probe") else {
        return;
    };
    let layouts = all();
    let Some(text) = run_c(&dir, "probe", &program(&layouts)) else {
        return;
    };
    let mut lines = text.lines();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for l in &layouts {
        let want = format!("{} {} {}", l.c_name, l.size, l.align);
        let got = lines.next().unwrap_or_default();
        if got != want {
            wrong.push(format!("C says `{got}`, Rust declares `{want}`"));
        }
        for (f, off) in l.fields {
            let want = format!("{}.{} {off}", l.c_name, c_field(f));
            let got = lines.next().unwrap_or_default();
            if got != want {
                wrong.push(format!("C says `{got}`, Rust declares `{want}`"));
            }
            checked += 1;
        }
    }
    assert!(
        wrong.is_empty(),
        "layouts differ from verbs.h:\n{}",
        wrong.join("\n")
    );
    // Every struct a program touches is declared, not a handful.
    assert!(
        layouts.len() >= 4 && checked >= 60,
        "{} structs, {checked} fields",
        layouts.len()
    );
}

/// The headers' directory; outside CI, `None` after a note naming `what`
/// was not run (in CI a missing header fails the test).
pub(super) fn headers(what: &str) -> Option<PathBuf> {
    match include_dir() {
        Ok(d) => Some(d),
        Err(why) if env::var_os("CI").is_some() => panic!("{why}"),
        Err(why) => {
            eprintln!("{what} not run: {why}");
            None
        }
    }
}

/// Compiles `program` against the headers in `dir` and runs it: its
/// output, or `None` (after a note) when no C compiler exists outside CI.
pub(super) fn run_c(dir: &std::path::Path, name: &str, program: &str) -> Option<String> {
    let out = env::temp_dir().join(format!("uverbs-cabi-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("temporary directory");
    let src = out.join(format!("{name}.c"));
    std::fs::write(&src, program).expect("write the probe");
    let exe = out.join(name);
    let mut cc = Command::new(env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.arg("-std=gnu11").arg("-I").arg(dir);
    // <rdma/rdma_cma.h> (librdmacm-dev 44) for the librdmacm layouts.
    if let Ok(d) = rdmacm_include_dir() {
        cc.arg("-I").arg(d);
    }
    // verbs.h includes <linux/types.h> and <rdma/...> (linux-libc-dev).
    if let Some(k) = env::var_os("UVERBS_ABI_INCLUDE") {
        cc.arg("-I").arg(k);
    }
    let status = match cc.arg("-o").arg(&exe).arg(&src).status() {
        Ok(s) => s,
        Err(e) if env::var_os("CI").is_some() => panic!("no C compiler: {e}"),
        Err(e) => {
            eprintln!("{name} not run: no C compiler ({e})");
            return None;
        }
    };
    assert!(
        status.success(),
        "compiling {name} failed ({status}): {}",
        src.display()
    );
    let run = Command::new(&exe).output().expect("run the probe");
    assert!(run.status.success());
    let _ = std::fs::remove_dir_all(&out);
    Some(String::from_utf8(run.stdout).expect("utf-8"))
}

/// The verbs.h enum values this library and uverbs use where Linux 6.1's
/// UAPI headers (which `uverbs-abi` is checked against) have no
/// counterpart, or which capi spells itself: work request and completion
/// opcodes of windows, invalidations and atomic writes, and the
/// `send_ops_flags` bits.
#[test]
fn verbs_h_enum_values_match() {
    use uverbs::{AccessFlags, MwBind, SendOp, SendOpsFlags, WcOpcode};
    let Some(dir) = headers("enum probe") else {
        return;
    };
    let bind = MwBind::new(0, 0);
    let ours: &[(&str, u64)] = &[
        (
            "IBV_WR_LOCAL_INV",
            SendOp::LocalInvalidate { rkey: 0 }.raw().into(),
        ),
        ("IBV_WR_BIND_MW", SendOp::BindMw(bind).raw().into()),
        (
            "IBV_WR_SEND_WITH_INV",
            SendOp::SendWithInvalidate { rkey: 0 }.raw().into(),
        ),
        (
            "IBV_WR_ATOMIC_WRITE",
            SendOp::AtomicWrite {
                remote_addr: 0,
                rkey: 0,
                data: [0; 8],
            }
            .raw()
            .into(),
        ),
        ("IBV_WC_BIND_MW", WcOpcode::BIND_MW.0.into()),
        ("IBV_WC_LOCAL_INV", WcOpcode::LOCAL_INV.0.into()),
        ("IBV_WC_ATOMIC_WRITE", WcOpcode::ATOMIC_WRITE.0.into()),
        ("IBV_WC_DRIVER2", WcOpcode::DRIVER2.0.into()),
        ("IBV_MW_TYPE_1", uverbs::MwType::Type1.raw().into()),
        ("IBV_MW_TYPE_2", uverbs::MwType::Type2.raw().into()),
        ("IBV_ACCESS_MW_BIND", AccessFlags::MW_BIND.bits().into()),
        ("IBV_QP_EX_WITH_RDMA_WRITE", SendOpsFlags::RDMA_WRITE.bits()),
        (
            "IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM",
            SendOpsFlags::RDMA_WRITE_WITH_IMM.bits(),
        ),
        ("IBV_QP_EX_WITH_SEND", SendOpsFlags::SEND.bits()),
        (
            "IBV_QP_EX_WITH_SEND_WITH_IMM",
            SendOpsFlags::SEND_WITH_IMM.bits(),
        ),
        ("IBV_QP_EX_WITH_RDMA_READ", SendOpsFlags::RDMA_READ.bits()),
        (
            "IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP",
            SendOpsFlags::ATOMIC_CMP_AND_SWP.bits(),
        ),
        (
            "IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD",
            SendOpsFlags::ATOMIC_FETCH_AND_ADD.bits(),
        ),
        ("IBV_QP_EX_WITH_LOCAL_INV", SendOpsFlags::LOCAL_INV.bits()),
        ("IBV_QP_EX_WITH_BIND_MW", SendOpsFlags::BIND_MW.bits()),
        (
            "IBV_QP_EX_WITH_SEND_WITH_INV",
            SendOpsFlags::SEND_WITH_INV.bits(),
        ),
        ("IBV_QP_EX_WITH_TSO", SendOpsFlags::TSO.bits()),
        (
            "IBV_QP_EX_WITH_ATOMIC_WRITE",
            SendOpsFlags::ATOMIC_WRITE.bits(),
        ),
    ];
    let mut c =
        String::from("#include <stdio.h>\n#include <infiniband/verbs.h>\nint main(void) {\n");
    for (name, _) in ours {
        let _ = writeln!(
            c,
            "  printf(\"%s %llu\\n\", \"{name}\", (unsigned long long){name});"
        );
    }
    c.push_str("  return 0;\n}\n");
    let Some(text) = run_c(&dir, "enums", &c) else {
        return;
    };
    let want: Vec<String> = ours.iter().map(|(n, v)| format!("{n} {v}")).collect();
    let got: Vec<&str> = text.lines().collect();
    assert_eq!(
        got, want,
        "verbs.h (left) and the Rust values (right) differ"
    );
}
