//! The built `libmlx5.so.1` (capi/mlx5/) and the mlx5dv functions of the
//! C library: the shared library has rdma-core's soname, needs
//! `libibverbs.so.1`, defines every function of `capi/mlx5/exports.txt`
//! (rdma-core 44's libmlx5 exports, from Debian's library) under its node
//! and every node of `libmlx5.map`; `libibverbs.so.1` exports each
//! function privately (`uverbs_<name>`) and no `mlx5dv_*` name of its
//! own; `libibverbs.a` defines the plain names for static links; and each
//! function still marked unsupported (`unsupported!` in capi/src/mlx5/),
//! called through `libmlx5.so.1` by name and node, fails in its
//! convention.

mod support;

use std::{collections::BTreeSet, fmt::Write as _, process::Command};

/// One line of exports.txt: `(node, name, private target, default?)`.
fn exports() -> Vec<(String, String, String, bool)> {
    let path = support::crate_dir().join("mlx5/exports.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let list: Vec<_> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (node, rest) = l.split_once(' ').expect("NODE name");
            match rest.strip_prefix('@') {
                Some(a) => {
                    let (name, target) = a.split_once('=').expect("NODE @name=target");
                    (node.into(), name.into(), target.into(), false)
                }
                None => (node.into(), rest.into(), rest.into(), true),
            }
        })
        .collect();
    // rdma-core 44's libmlx5.so.1.24.44.0 exports 128 functions, one of
    // them (mlx5dv_init_obj) under two nodes.
    assert_eq!(list.len(), 129, "{}", path.display());
    list
}

/// The nodes `libmlx5.map` declares, in order.
fn nodes() -> Vec<String> {
    let path = support::crate_dir().join("mlx5/libmlx5.map");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.strip_suffix(';'))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("MLX5_"))
        .map(String::from)
        .collect()
}

fn output(cmd: &mut Command) -> Option<String> {
    match cmd.output() {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => panic!("{cmd:?}: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            support::unavailable(&format!("{cmd:?}: {e}"));
            None
        }
    }
}

#[test]
fn libmlx5_defines_every_function_under_its_node_and_needs_libibverbs() {
    let so = support::libmlx5();
    let Some(syms) = output(
        Command::new("nm")
            .args(["-D", "--with-symbol-versions", "--defined-only"])
            .arg(&so),
    ) else {
        return;
    };
    let defined: BTreeSet<&str> = syms
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let mut missing = Vec::new();
    for (node, name, _, default) in exports() {
        let want = format!("{name}{}{node}", if default { "@@" } else { "@" });
        if !defined.contains(want.as_str()) {
            missing.push(want);
        }
    }
    let Some(vers) = output(Command::new("readelf").args(["-V", "-W"]).arg(&so)) else {
        return;
    };
    let have: Vec<&str> = vers
        .lines()
        .skip_while(|l| !l.contains(".gnu.version_d"))
        .take_while(|l| !l.contains(".gnu.version_r"))
        .filter(|l| l.contains("Flags: none"))
        .filter_map(|l| l.split("Name: ").nth(1))
        .collect();
    if have != nodes() {
        missing.push(format!("the nodes of libmlx5.map (defines {have:?})"));
    }
    assert!(missing.is_empty(), "{} lacks {missing:?}", so.display());
    // Nothing else: the stubs and the nodes, no Rust symbol of its own.
    let extra: Vec<_> = defined
        .iter()
        .filter(|s| {
            !s.starts_with("mlx5dv_") && !s.starts_with("_mlx5dv_") && !s.starts_with("MLX5_")
        })
        .collect();
    assert!(extra.is_empty(), "{} also exports {extra:?}", so.display());
    let Some(dynamic) = output(Command::new("readelf").args(["-d", "-W"]).arg(&so)) else {
        return;
    };
    assert!(
        dynamic.contains("Library soname: [libmlx5.so.1]"),
        "{dynamic}"
    );
    assert!(
        dynamic.contains("Shared library: [libibverbs.so.1]"),
        "{dynamic}"
    );
}

#[test]
fn libibverbs_exports_the_private_entry_points_and_no_mlx5dv_name() {
    let so = support::cdylib();
    let Some(syms) = output(Command::new("nm").args(["-D", "--defined-only"]).arg(&so)) else {
        return;
    };
    let defined: BTreeSet<&str> = syms
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let missing: Vec<_> = exports()
        .into_iter()
        .map(|(_, _, target, _)| format!("uverbs_{target}"))
        .filter(|t| !defined.contains(t.as_str()))
        .collect();
    assert!(missing.is_empty(), "{} lacks {missing:?}", so.display());
    let own: Vec<_> = defined
        .iter()
        .filter(|s| s.starts_with("mlx5dv_") || s.starts_with("_mlx5dv_"))
        .collect();
    assert!(
        own.is_empty(),
        "{} exports mlx5dv names itself (they belong to libmlx5.so.1): {own:?}",
        so.display()
    );
}

#[test]
fn the_static_library_defines_every_mlx5dv_function() {
    let a = support::staticlib();
    let Some(syms) = output(Command::new("nm").args(["-g", "--defined-only"]).arg(&a)) else {
        return;
    };
    let defined: BTreeSet<&str> = syms
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[1] == "T").then(|| f[2])
        })
        .collect();
    let missing: Vec<_> = exports()
        .into_iter()
        .filter(|(_, _, _, default)| *default)
        .map(|(_, name, _, _)| name)
        .filter(|n| !defined.contains(n.as_str()))
        .collect();
    assert!(missing.is_empty(), "{} lacks {missing:?}", a.display());
}

/// `(name, convention)` of every function the sources mark unsupported.
fn unsupported() -> Vec<(String, String)> {
    let mut v = Vec::new();
    let dir = support::crate_dir().join("src/mlx5");
    // The sources of src/mlx5/ and of its subdirectories (devx/).
    let mut files = Vec::new();
    let mut dirs = vec![dir.clone()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("read a source directory") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    for path in files {
        let text = std::fs::read_to_string(&path).expect("a source");
        for rest in text.split("unsupported! {").skip(1) {
            let body = rest.split("\n}").next().unwrap_or_default();
            for part in body.split(']') {
                let Some((conv, list)) = part.split_once(": [") else {
                    continue;
                };
                let conv = conv.trim().trim_start_matches(',').trim();
                for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    v.push((name.to_string(), conv.to_string()));
                }
            }
        }
    }
    assert!(!v.is_empty(), "no unsupported! lists in {}", dir.display());
    v
}

#[test]
fn every_unsupported_function_fails_in_its_convention_through_libmlx5() {
    let Some(mut cc) = support::cc() else {
        support::unavailable("no C compiler");
        return;
    };
    let so = support::libmlx5();
    let ibv = support::cdylib();
    let dir = support::scratch("mlx5-unsupported");
    // The loader finds libibverbs.so.1 (libmlx5's DT_NEEDED) here.
    std::os::unix::fs::symlink(&ibv, dir.join("libibverbs.so.1")).expect("symlink");
    std::os::unix::fs::symlink(&so, dir.join("libmlx5.so.1")).expect("symlink");
    // Each private target, by the name and node a program looks it up with.
    let nodes: std::collections::BTreeMap<String, (String, String)> = exports()
        .into_iter()
        .map(|(node, name, target, _)| (target, (name, node)))
        .collect();
    let mut c = String::from(
        "#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <errno.h>\n#include <stdbool.h>\n\
         #include <stdio.h>\n#include <sys/types.h>\nint main(void) {\n  int fails = 0, n = 0;\n\
           void *h = dlopen(\"libmlx5.so.1\", RTLD_NOW);\n\
           if (!h) { printf(\"FAIL dlopen: %s\\n\", dlerror()); return 1; }\n",
    );
    let list = unsupported();
    for (target, conv) in &list {
        let (name, node) = nodes
            .get(target)
            .unwrap_or_else(|| panic!("{target} is not in exports.txt"));
        let (ty, check) = match conv.as_str() {
            "null" => ("void *", "r == NULL && errno == EOPNOTSUPP"),
            "positive" => ("int ", "r == EOPNOTSUPP && errno == EOPNOTSUPP"),
            "negative" => ("int ", "r == -EOPNOTSUPP && errno == EOPNOTSUPP"),
            "minus_one" => ("int ", "r == -1 && errno == EOPNOTSUPP"),
            "minus_one_ssize" => ("ssize_t ", "r == -1 && errno == EOPNOTSUPP"),
            "void" => ("void ", ""),
            other => panic!("{name}: unknown convention {other}"),
        };
        let _ = writeln!(c, "  {{\n    void *p = dlvsym(h, \"{name}\", \"{node}\");");
        let _ = writeln!(
            c,
            "    if (!p) {{ printf(\"FAIL {name}@{node}: not found\\n\"); fails++; }} else {{\n      errno = 0;"
        );
        if ty == "void " {
            let _ = writeln!(c, "      ((void (*)(void))p)();");
        } else {
            let _ = writeln!(
                c,
                "      {ty}r = (({ty}(*)(void))p)();\n      if (!({check})) {{ printf(\"FAIL {name}: not {conv}\\n\"); fails++; }}"
            );
        }
        let _ = writeln!(c, "      n++;\n    }}\n  }}");
    }
    c.push_str("  printf(\"%d called, %d failed\\n\", n, fails);\n  return fails != 0;\n}\n");
    let src = dir.join("unsupported.c");
    std::fs::write(&src, c).expect("write the checker");
    let exe = dir.join("unsupported");
    support::run(cc.arg("-o").arg(&exe).arg(&src).arg("-ldl"));
    let out = support::run(Command::new(&exe).env("LD_LIBRARY_PATH", &dir));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{} called, 0 failed", list.len())),
        "{text}"
    );
}
