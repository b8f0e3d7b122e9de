//! librdmacm's conversions (`ibv_copy_{ah_attr,qp_attr,path_rec}_from_kern`)
//! called from C: `c/marshall.c`, compiled against Debian's verbs.h and sa.h
//! and the kernel's uapi headers and linked against the built
//! `libibverbs.so`, compares each result with C's own field assignments
//! byte for byte, so a field this crate places at another offset than
//! verbs.h fails here.

mod support;

use std::process::Command;

#[test]
fn conversions_match_cs_own_assignments() {
    let Some(inc) = support::verbs_include() else {
        support::unavailable(
            "no Debian <infiniband/verbs.h> (scripts/test.sh fetches libibverbs-dev)",
        );
        return;
    };
    let Some(mut cc) = support::cc() else {
        support::unavailable("no C compiler");
        return;
    };
    let dir = support::scratch("marshall");
    let exe = dir.join("marshall");
    let lib = support::profile_dir();
    support::run(
        cc.arg("-std=gnu11")
            .arg("-Wall")
            .arg("-Werror")
            .args(support::include_args(&inc))
            .arg("-o")
            .arg(&exe)
            .arg(support::crate_dir().join("tests/c/marshall.c"))
            // The cdylib itself (its soname is libibverbs.so.1, which
            // LD_LIBRARY_PATH below does not provide under that name).
            .arg(support::cdylib())
            .arg(format!("-Wl,-rpath,{}", lib.display())),
    );
    // The program needs libibverbs.so.1: link the soname to the build.
    let _ = std::fs::remove_file(dir.join("libibverbs.so.1"));
    std::os::unix::fs::symlink(support::cdylib(), dir.join("libibverbs.so.1")).expect("symlink");
    let out = support::run(Command::new(&exe).env("LD_LIBRARY_PATH", &dir));
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("PASS ")).count(),
        3,
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
