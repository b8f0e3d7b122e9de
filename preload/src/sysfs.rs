//! The model's sysfs tree, written to a directory libibverbs reads through
//! `SYSFS_PATH` (`libibverbs/sysfs.c`, `ibv_get_sysfs_path`).

use std::{
    io,
    path::{Path, PathBuf},
};

use uverbs::sys::Kernel;

/// Every file of the model's sysfs map under `dir` (paths from `/sys`).
fn walk(k: &dyn Kernel, dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    let Ok(names) = k.read_dir(dir) else { return };
    for n in names {
        let p = dir.join(n);
        match k.read_to_string(&p) {
            Ok(s) => out.push((p, s)),
            Err(_) => walk(k, &p, out),
        }
    }
}

/// Writes the model's files under `root`, with `uverbs0/dev` naming the
/// device the shim backs the command fd with (`/dev/null`, 1:3), so that
/// libibverbs' `fstat` check of the opened fd (`util/open_cdev.c`) passes
/// without interposing `fstat`. Returns the files written.
pub(crate) fn write_tree(k: &dyn Kernel, root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    walk(k, Path::new("/sys"), &mut files);
    if files.is_empty() {
        return Err(io::Error::other("the model has no sysfs files"));
    }
    let mut written = Vec::new();
    for (p, contents) in files {
        let Ok(rel) = p.strip_prefix("/sys") else {
            continue;
        };
        let contents = if rel.ends_with("infiniband_verbs/uverbs0/dev") {
            "1:3\n".to_string()
        } else {
            contents
        };
        let dest = root.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&dest, contents)?;
        written.push(rel.to_path_buf());
    }
    Ok(written)
}
