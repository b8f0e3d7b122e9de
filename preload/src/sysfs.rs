//! The model's sysfs tree, written to a directory libibverbs reads through
//! `SYSFS_PATH` (`libibverbs/sysfs.c`, `ibv_get_sysfs_path`).

use std::{
    io,
    path::{Path, PathBuf},
};

use uverbs::sys::Kernel;

/// Files libibverbs 44 reads that the model's sysfs map does not have
/// yet; each is written only when the model lacks it (the model is where
/// they belong).
/// - the global uverbs ABI, 3..6 (`libibverbs/init.c:467-491`);
/// - `device/modalias`, the only way libibverbs matches libmlx5 in sysfs
///   mode (`init.c:277-298`, `providers/mlx5/mlx5.c:67-90`): a ConnectX-5;
/// - P_Key 0 (`ibv_query_pkey`), the firmware version, system image GUID
///   and board id (`ibv_devinfo`).
const MISSING: &[(&str, &str)] = &[
    ("/sys/class/infiniband_verbs/abi_version", "6\n"),
    (
        "/sys/class/infiniband/mlx5_0/device/modalias",
        "pci:v000015B3d00001017sv000015B3sd00000020bc02sc00i00\n",
    ),
    ("/sys/class/infiniband/mlx5_0/ports/1/pkeys/0", "0xffff\n"),
    ("/sys/class/infiniband/mlx5_0/fw_ver", "16.35.2000\n"),
    (
        "/sys/class/infiniband/mlx5_0/sys_image_guid",
        "0c42:a103:0012:3456\n",
    ),
    ("/sys/class/infiniband/mlx5_0/board_id", "MT_0000000008\n"),
];

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
    // Files libibverbs needs that the model's map lacks (see `MISSING`).
    for (p, c) in MISSING {
        if !files.iter().any(|(q, _)| q == Path::new(p)) {
            files.push((PathBuf::from(p), (*c).to_string()));
        }
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
