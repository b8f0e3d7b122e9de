//! The context's UARs against a fake kernel: the geometry mlx5_ib never
//! answers is refused, pages and bfregs are where the geometry puts them.

use std::collections::VecDeque;

use super::*;
use crate::{
    providers::Transport,
    testing::kernel::{dummy_fd, FakeKernel},
};

/// A kernel that answers `UAR_OBJ_ALLOC` with `(page id, mmap length)`
/// from `answers`, in turn (`ENOMEM` once they run out), and maps every
/// offset as anonymous memory; static UARs need no answers.
fn uar_kernel(answers: &[(u32, u32)]) -> Transport {
    let fake = Arc::new(FakeKernel::new());
    let mut answers: VecDeque<(u32, u32)> = answers.iter().copied().collect();
    let mut handle = 0u32;
    fake.on_ioctl(move |cmd| {
        if (cmd.object_id, cmd.method_id)
            != (abi::MLX5_IB_OBJECT_UAR, abi::MLX5_IB_METHOD_UAR_OBJ_ALLOC)
        {
            return Err(Errno::EPROTONOSUPPORT);
        }
        let (page_id, length) = answers.pop_front().ok_or(Errno::ENOMEM)?;
        handle += 1;
        cmd.set_new_object(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, handle);
        let offset = u64::from(handle) << 16;
        cmd.write_output(
            abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET,
            &offset.to_ne_bytes(),
        );
        cmd.write_output(
            abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH,
            &length.to_ne_bytes(),
        );
        cmd.write_output(
            abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID,
            &page_id.to_ne_bytes(),
        );
        Ok(())
    });
    Transport::new(fake, dummy_fd(), abi::RDMA_DRIVER_MLX5)
}

fn geometry(tot_bfregs: u32, num_uars_per_page: u32) -> UarGeometry {
    UarGeometry {
        tot_bfregs,
        bf_reg_size: 512,
        num_uars_per_page,
    }
}

fn malformed_kind(r: Result<Uars>) -> ErrorKind {
    match r {
        Ok(u) => panic!("accepted: {u:?}"),
        Err(e) => e.kind(),
    }
}

/// Item 6 of issue 27: a `num_uars_per_page` mlx5_ib never reports
/// (not a power of two, or above 16) is `Malformed`, with static and
/// with dynamic UARs, where `tot_bfregs / (n * 2)` overflowed u32 from
/// 2^31 on (a panic, or a division by zero in release).
#[test]
fn uars_per_page_mlx5_ib_never_reports_are_malformed() {
    for n in [1 << 31, 3, 32, u32::MAX, 17, 6, 1 << 16] {
        for tot in [0, 16] {
            let t = uar_kernel(&[(1, 4096)]);
            let r = Uars::open(t.device(), geometry(tot, n));
            assert_eq!(
                malformed_kind(r),
                ErrorKind::Malformed,
                "{n} per page, {tot}"
            );
        }
    }
    for n in [0, 1, 2, 4, 8, 16] {
        let page = n.max(1) * 4096;
        let t = uar_kernel(&[(1, page)]);
        let u = Uars::open(t.device(), geometry(0, n)).unwrap_or_else(|e| panic!("{n}: {e}"));
        assert_eq!(
            (u.uars_per_page, u.cq_page.len()),
            (n.max(1) as usize, page as usize)
        );
        let t = uar_kernel(&[]);
        let u = Uars::open(t.device(), geometry(32, n)).unwrap_or_else(|e| panic!("{n}: {e}"));
        let Mode::Static { pages, .. } = &u.mode else {
            panic!("static UARs expected");
        };
        assert_eq!(pages.len(), (32 / (2 * n.max(1)) as usize).max(1), "{n}");
    }
}

/// More static bfregs than mlx5_ib ever gives (512) are `Malformed`,
/// not a loop over 2^31 page mappings.
#[test]
fn more_static_bfregs_than_mlx5_ib_gives_are_malformed() {
    for tot in [513, 1 << 20, u32::MAX] {
        let t = uar_kernel(&[]);
        let r = Uars::open(t.device(), geometry(tot, 1));
        assert_eq!(malformed_kind(r), ErrorKind::Malformed, "{tot}");
    }
    let t = uar_kernel(&[]);
    let u = Uars::open(t.device(), geometry(512, 1)).unwrap_or_else(|e| panic!("{e}"));
    let Mode::Static { pages, .. } = &u.mode else {
        panic!("static UARs expected");
    };
    assert_eq!(pages.len(), 256);
    assert!(
        u.static_bfreg(255 * 4 + 1, 4, 512).is_some(),
        "the last page's bfreg"
    );
    assert!(
        u.static_bfreg(256 * 4 + 1, 4, 512).is_none(),
        "past the pages"
    );
    assert!(u.static_bfreg(u32::MAX, 4, 512).is_none());
    assert!(u.static_bfreg(u32::MAX - 2, 4, 512).is_none());
}

/// A BF page whose id leaves no room for its sub-UARs' ids
/// (`page_id + j` past `u32::MAX`) is `Malformed` when a QP asks for a
/// bfreg on it; one whose ids fit gives each sub-UAR its own id.
#[test]
fn a_page_id_whose_sub_uar_ids_overflow_is_malformed() {
    for (id, ok) in [
        (u32::MAX, false),
        (u32::MAX - 1, false),
        (u32::MAX - 3, true),
    ] {
        // The NC page, then a BF page of 4 sub-UARs.
        let t = uar_kernel(&[(7, 4 * 4096), (id, 4 * 4096)]);
        let u = Uars::open(t.device(), geometry(0, 4)).unwrap_or_else(|e| panic!("{e}"));
        match u.qp_bfreg(t.device()) {
            Ok(Some(b)) if ok => {
                assert_eq!((b.index, b.reg, b.buf_size), (id, BF_OFFSET, 256));
                let pool = u.pool();
                let ids: Vec<u32> = pool.free_dedicated.iter().map(|b| b.index).collect();
                assert_eq!(ids, [id, id + 1, id + 1, id + 2, id + 2, id + 3, id + 3]);
            }
            Err(e) if !ok => assert_eq!(e.kind(), ErrorKind::Malformed, "{e}"),
            other => panic!("page id {id:#x}: {other:?}"),
        }
    }
}

/// A UAR page longer than `num_uars_per_page` sub-UARs gets bfregs on
/// the first `num_uars_per_page` only; a BlueFlame register size that
/// puts a bfreg outside its page is `Malformed`.
#[test]
fn bfregs_stay_inside_the_sub_uars_the_geometry_names() {
    let t = uar_kernel(&[(7, 4096), (100, 64 * 4096)]);
    let u = Uars::open(t.device(), geometry(0, 2)).unwrap_or_else(|e| panic!("{e}"));
    assert!(u.qp_bfreg(t.device()).is_ok_and(|b| b.is_some()));
    assert_eq!(u.pool().free_dedicated.len(), 3, "2 sub-UARs of 2 bfregs");
    let t = uar_kernel(&[(7, 4096), (100, 4096)]);
    let g = UarGeometry {
        bf_reg_size: u32::MAX,
        ..geometry(0, 1)
    };
    let u = Uars::open(t.device(), g).unwrap_or_else(|e| panic!("{e}"));
    let e = u.qp_bfreg(t.device()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
}
