//! The stub `libefa.so.1` (capi/stubs/; `libmlx5.so.1` is a real library,
//! capi/mlx5/, tested by `mlx5_exports.rs`): built by
//! `capi/stubs/build.sh` from their lists, each exports every listed
//! function under its version node and defines every node, and each
//! function, looked up by name and node (`dlvsym`) and called, fails as its
//! list says: NULL / EOPNOTSUPP / -EOPNOTSUPP / -1 with `errno`
//! `EOPNOTSUPP`, `false`, or nothing.

mod support;

use std::{fmt::Write as _, path::Path, process::Command};

/// One `fn NAME NODE CONVENTION` line.
struct Func {
    name: String,
    node: String,
    conv: String,
}

/// The soname, nodes and functions of a stub list.
fn read_list(list: &Path) -> (String, Vec<String>, Vec<Func>) {
    let text = std::fs::read_to_string(list).unwrap_or_else(|e| panic!("{}: {e}", list.display()));
    let (mut soname, mut nodes, mut fns) = (String::new(), Vec::new(), Vec::new());
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.as_slice() {
            ["soname", s] => soname = s.to_string(),
            ["node", n] => nodes.push(n.to_string()),
            ["fn", name, node, conv] => fns.push(Func {
                name: name.to_string(),
                node: node.to_string(),
                conv: conv.to_string(),
            }),
            [] => {}
            _ => panic!("{}: bad line {l:?}", list.display()),
        }
    }
    (soname, nodes, fns)
}

/// A C program that opens `so` and calls every function of `fns` as its
/// convention says, printing `FAIL ...` for each that does not answer so.
fn checker(so: &Path, fns: &[Func]) -> String {
    let mut c = String::from(
        "#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <errno.h>\n#include <stdbool.h>\n\
         #include <stdio.h>\nint main(void) {\n  int fails = 0, n = 0;\n",
    );
    let _ = writeln!(
        c,
        "  void *h = dlopen(\"{}\", RTLD_NOW);\n  if (!h) {{ printf(\"FAIL dlopen: %s\\n\", dlerror()); return 1; }}",
        so.display()
    );
    for f in fns {
        let (ty, check) = match f.conv.as_str() {
            "null" => ("void *", "r == NULL && errno == EOPNOTSUPP"),
            "positive" => ("int ", "r == EOPNOTSUPP && errno == EOPNOTSUPP"),
            "negative" => ("int ", "r == -EOPNOTSUPP && errno == EOPNOTSUPP"),
            "minus_one" => ("int ", "r == -1 && errno == EOPNOTSUPP"),
            "false" => ("bool ", "r == false"),
            "void" => ("void ", ""),
            other => panic!("{}: unknown convention {other}", f.name),
        };
        let _ = writeln!(
            c,
            "  {{\n    void *p = dlvsym(h, \"{}\", \"{}\");",
            f.name, f.node
        );
        let _ = writeln!(
            c,
            "    if (!p) {{ printf(\"FAIL {0}@{1}: not found\\n\"); fails++; }} else {{",
            f.name, f.node
        );
        let _ = writeln!(c, "      errno = 0;");
        if ty == "void " {
            let _ = writeln!(c, "      ((void (*)(void))p)();");
        } else {
            let _ = writeln!(c, "      {ty}r = (({ty}(*)(void))p)();");
            let _ = writeln!(
                c,
                "      if (!({check})) {{ printf(\"FAIL {}: not {}\\n\"); fails++; }}",
                f.name, f.conv
            );
        }
        let _ = writeln!(c, "      n++;\n    }}\n  }}");
    }
    c.push_str("  printf(\"%d called, %d failed\\n\", n, fails);\n  return fails != 0;\n}\n");
    c
}

fn check_stub(list: &str) {
    let Some(mut cc) = support::cc() else {
        support::unavailable("no C compiler");
        return;
    };
    let dir = support::scratch(&format!("stub-{list}"));
    let list = support::crate_dir().join("stubs").join(list);
    support::run(
        Command::new("bash")
            .arg(support::crate_dir().join("stubs/build.sh"))
            .arg(&dir)
            .arg(&list),
    );
    let (soname, nodes, fns) = read_list(&list);
    let so = dir.join(&soname);
    let syms = support::run(
        Command::new("nm")
            .args(["-D", "--with-symbol-versions", "--defined-only"])
            .arg(&so),
    );
    let syms = String::from_utf8_lossy(&syms.stdout);
    let exported: Vec<&str> = syms
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    for f in &fns {
        let want = format!("{}@@{}", f.name, f.node);
        assert!(
            exported.contains(&want.as_str()),
            "{soname}: {want} not exported:\n{syms}"
        );
    }
    // Nodes appear as absolute symbols named after themselves.
    for n in &nodes {
        assert!(
            exported.contains(&n.as_str()),
            "{soname}: node {n} not defined:\n{syms}"
        );
    }
    let funcs = exported
        .iter()
        .filter(|s| s.contains("@@") && !s.starts_with(|c: char| c.is_uppercase()));
    assert_eq!(
        funcs.count(),
        fns.len(),
        "{soname} exports more than its list:\n{syms}"
    );
    let dynamic = support::run(Command::new("readelf").args(["-d", "-W"]).arg(&so));
    assert!(
        String::from_utf8_lossy(&dynamic.stdout).contains(&format!("Library soname: [{soname}]")),
        "{soname}: soname"
    );

    let src = dir.join("check.c");
    std::fs::write(&src, checker(&so, &fns)).expect("write check.c");
    let exe = dir.join("check");
    support::run(
        cc.arg("-std=gnu11")
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .arg("-ldl"),
    );
    let out = support::run(&mut Command::new(&exe));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{} called, 0 failed", fns.len())),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn libefa_stub_exports_its_list_and_fails_in_each_convention() {
    check_stub("libefa.txt");
}
