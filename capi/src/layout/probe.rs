//! The layout probe: compiles a C program against Debian's
//! `<infiniband/verbs.h>` (libibverbs-dev 44) that prints `sizeof`,
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

/// The C field name of a Rust field (`r#priv` is C's `priv`).
fn c_field(rust: &str) -> &str {
    rust.strip_prefix("r#").unwrap_or(rust)
}

/// The probe program: one line per struct (`name size align`) and per
/// field (`name.field offset`).
fn program(layouts: &[Layout]) -> String {
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\n\
         #include <infiniband/sa.h>\n\
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
    let dir = match include_dir() {
        Ok(d) => d,
        Err(why) if env::var_os("CI").is_some() => panic!("{why}"),
        Err(why) => {
            eprintln!("layout probe not run: {why}");
            return;
        }
    };
    let layouts = all();
    let out = env::temp_dir().join(format!("uverbs-cabi-probe-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("temporary directory");
    let src = out.join("probe.c");
    std::fs::write(&src, program(&layouts)).expect("write probe.c");
    let exe = out.join("probe");
    let mut cc = Command::new(env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.arg("-std=gnu11").arg("-I").arg(&dir);
    // verbs.h includes <linux/types.h> and <rdma/...> (linux-libc-dev).
    if let Some(k) = env::var_os("UVERBS_ABI_INCLUDE") {
        cc.arg("-I").arg(k);
    }
    let status = match cc.arg("-o").arg(&exe).arg(&src).status() {
        Ok(s) => s,
        Err(e) if env::var_os("CI").is_some() => panic!("no C compiler: {e}"),
        Err(e) => {
            eprintln!("layout probe not run: no C compiler ({e})");
            return;
        }
    };
    assert!(
        status.success(),
        "compiling the probe failed ({status}): {}",
        src.display()
    );
    let run = Command::new(&exe).output().expect("run the probe");
    assert!(run.status.success());
    let text = String::from_utf8(run.stdout).expect("utf-8");
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
    let _ = std::fs::remove_dir_all(&out);
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
