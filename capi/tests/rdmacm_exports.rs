//! The built `librdmacm.so.1` (capi/rdmacm/) and the librdmacm functions of
//! the C library: the shared library has rdma-core's soname, needs
//! `libibverbs.so.1`, defines every function of `capi/rdmacm/exports.txt`
//! (rdma-core 44's librdmacm exports, from Debian's library) under its
//! node and every node of `librdmacm.map`, and nothing else;
//! `libibverbs.so.1` exports each function privately (`uverbs_<name>`) and
//! no librdmacm name of its own; `libibverbs.a` defines the plain names for
//! static links; and a C program that looks the functions up by name and
//! node, as a program linked against rdma-core's library does, reaches
//! ours (`rdma_event_str`, `rsocket`'s `ENOTSUP`, `rdma_getaddrinfo`).

mod support;

use std::{collections::BTreeSet, process::Command};

/// `(node, name)` of every line of exports.txt.
fn exports() -> Vec<(String, String)> {
    let path = support::crate_dir().join("rdmacm/exports.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let list: Vec<_> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (node, name) = l.split_once(' ').expect("NODE name");
            (node.to_string(), name.to_string())
        })
        .collect();
    // rdma-core 44's librdmacm.so.1.3.44.0 exports 68 functions.
    assert_eq!(list.len(), 68, "{}", path.display());
    list
}

/// Whether `s` is a librdmacm name (`rdma_*`, or an rsockets `r*` call of
/// the list).
fn is_rdmacm_name(s: &str, names: &BTreeSet<String>) -> bool {
    s.starts_with("rdma_") || names.contains(s)
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
fn librdmacm_defines_every_function_under_its_node_and_needs_libibverbs() {
    let so = support::librdmacm();
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
    let missing: Vec<_> = exports()
        .into_iter()
        .map(|(node, name)| format!("{name}@@{node}"))
        .filter(|w| !defined.contains(w.as_str()))
        .collect();
    assert!(missing.is_empty(), "{} lacks {missing:?}", so.display());
    let extra: Vec<_> = defined
        .iter()
        .filter(|s| {
            let name = s.split('@').next().unwrap_or_default();
            !s.starts_with("RDMACM_") && !exports().iter().any(|(_, n)| n == name)
        })
        .collect();
    assert!(extra.is_empty(), "{} also exports {extra:?}", so.display());
    let Some(vers) = output(Command::new("readelf").args(["-V", "-W"]).arg(&so)) else {
        return;
    };
    let nodes: Vec<&str> = vers
        .lines()
        .skip_while(|l| !l.contains(".gnu.version_d"))
        .take_while(|l| !l.contains(".gnu.version_r"))
        .filter(|l| l.contains("Flags: none"))
        .filter_map(|l| l.split("Name: ").nth(1))
        .map(|n| n.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(
        nodes,
        ["RDMACM_1.0", "RDMACM_1.1", "RDMACM_1.2", "RDMACM_1.3"]
    );
    let Some(dynamic) = output(Command::new("readelf").args(["-d", "-W"]).arg(&so)) else {
        return;
    };
    assert!(
        dynamic.contains("Library soname: [librdmacm.so.1]"),
        "{dynamic}"
    );
    assert!(
        dynamic.contains("Shared library: [libibverbs.so.1]"),
        "{dynamic}"
    );
}

#[test]
fn libibverbs_exports_the_private_entry_points_and_no_librdmacm_name() {
    let so = support::cdylib();
    let Some(syms) = output(Command::new("nm").args(["-D", "--defined-only"]).arg(&so)) else {
        return;
    };
    let defined: BTreeSet<&str> = syms
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let names: BTreeSet<String> = exports().into_iter().map(|(_, n)| n).collect();
    let missing: Vec<_> = names
        .iter()
        .map(|n| format!("uverbs_{n}"))
        .filter(|t| !defined.contains(t.as_str()))
        .collect();
    assert!(missing.is_empty(), "{} lacks {missing:?}", so.display());
    let own: Vec<_> = defined
        .iter()
        .filter(|s| is_rdmacm_name(s, &names))
        .collect();
    assert!(
        own.is_empty(),
        "{} exports librdmacm names itself (they belong to librdmacm.so.1): {own:?}",
        so.display()
    );
}

#[test]
fn the_static_library_defines_every_librdmacm_function() {
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
        .map(|(_, name)| name)
        .filter(|n| !defined.contains(n.as_str()))
        .collect();
    assert!(missing.is_empty(), "{} lacks {missing:?}", a.display());
}

#[test]
fn a_program_reaches_our_functions_by_name_and_node() {
    let Some(mut cc) = support::cc() else {
        support::unavailable("no C compiler");
        return;
    };
    let dir = support::scratch("rdmacm-dlvsym");
    // The loader finds libibverbs.so.1 (librdmacm's DT_NEEDED) here.
    std::os::unix::fs::symlink(support::cdylib(), dir.join("libibverbs.so.1")).expect("symlink");
    std::os::unix::fs::symlink(support::librdmacm(), dir.join("librdmacm.so.1")).expect("symlink");
    let c = r#"#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  void *h = dlopen("librdmacm.so.1", RTLD_NOW);
  if (!h) { printf("FAIL dlopen: %s\n", dlerror()); return 1; }
  const char *(*str)(int) = (const char *(*)(int))dlvsym(h, "rdma_event_str", "RDMACM_1.0");
  int (*sock)(int, int, int) = (int (*)(int, int, int))dlvsym(h, "rsocket", "RDMACM_1.0");
  int (*gai)(const char *, const char *, const void *, void **) =
      (int (*)(const char *, const char *, const void *, void **))dlvsym(h, "rdma_getaddrinfo", "RDMACM_1.0");
  void (*freeai)(void *) = (void (*)(void *))dlvsym(h, "rdma_freeaddrinfo", "RDMACM_1.0");
  void *est = dlvsym(h, "rdma_establish", "RDMACM_1.2");
  if (!str || !sock || !gai || !freeai || !est) { printf("FAIL dlvsym\n"); return 1; }
  printf("%s\n", str(9));
  errno = 0;
  int r = sock(2, 1, 0);
  printf("rsocket %d %s\n", r, errno == ENOTSUP ? "ENOTSUP" : strerror(errno));
  /* RAI_PASSIVE | RAI_NUMERICHOST, port space TCP: the first two ints and
     the fourth of struct rdma_addrinfo; the rest zero. */
  int hints[24] = { 3, 0, 0, 0x106 };
  void *res = NULL;
  r = gai("127.0.0.1", "7471", hints, &res);
  printf("getaddrinfo %d %d\n", r, res ? ((int *)res)[2] : -1);
  if (res) freeai(res);
  return 0;
}
"#;
    let src = dir.join("dlvsym.c");
    std::fs::write(&src, c).expect("write the program");
    let exe = dir.join("dlvsym");
    support::run(cc.arg("-o").arg(&exe).arg(&src).arg("-ldl"));
    let out = support::run(Command::new(&exe).env("LD_LIBRARY_PATH", &dir));
    let text = String::from_utf8_lossy(&out.stdout);
    // IBV_QPT_RC (2) is the passive TCP entry's QP type.
    assert_eq!(
        text, "RDMA_CM_EVENT_ESTABLISHED\nrsocket -1 ENOTSUP\ngetaddrinfo 0 2\n",
        "{text}"
    );
}
