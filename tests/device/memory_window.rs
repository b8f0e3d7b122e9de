//! Memory windows, invalidation and atomic writes against the real kernel
//! (rxe_mw.c, rxe_req.c, rxe_resp.c): what a bound window lets a peer do,
//! and that every way of closing it (local invalidate, a peer's send with
//! invalidate, a type 1 unbind, deallocation) takes that away again.

use uverbs::{
    AccessFlags, MemoryRegion, MemoryWindow, MwType, QpType, RecvWr, SendOp, SendWr, WcFlags,
    WcOpcode, WcStatus,
};

use crate::support::*;

/// A region that can only be reached through windows: local write (which
/// rxe requires of a region under a writable window) and `MW_BIND`, no
/// remote rights of its own.
fn bindable(p: &Pair) -> MemoryRegion {
    p.pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Binds `len` bytes at `offset` of `mr` on B's send queue, waits for the
/// bind's completion and records the new key; returns it.
fn bind(p: &mut Pair, mw: &MemoryWindow, mr: &MemoryRegion, offset: usize, len: usize) -> u32 {
    let rights = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let b = mw.bind_to(mr, offset, len, rights).unwrap();
    p.b.post_send(&[SendWr::new(40, SendOp::BindMw(b), &[])])
        .unwrap();
    let c = wait(&mut p.cq_b, 1);
    assert_eq!(
        (c[0].wr_id, c[0].status, c[0].opcode),
        (40, WcStatus::SUCCESS, WcOpcode::BIND_MW),
        "{c:?}"
    );
    mw.set_rkey(b.rkey);
    b.rkey
}

/// A's RDMA write of `data` to `addr` with `rkey`; its completion status.
fn write(p: &mut Pair, src: &MemoryRegion, data: &[u8], addr: u64, rkey: u32) -> WcStatus {
    src.write(0, data).unwrap();
    let op = SendOp::RdmaWrite {
        remote_addr: addr,
        rkey,
    };
    let sge = src.sge(0, data.len() as u32).unwrap();
    p.a.post_send(&[SendWr::new(41, op, &[sge])]).unwrap();
    wait(&mut p.cq_a, 1)[0].status
}

#[test]
fn a_type2_window_opens_its_range_until_invalidated_locally() {
    let mut p = pair(QpType::Rc, 16, 7);
    let src = mr(&p.pd, 4096);
    let target = bindable(&p);
    let mw = p.pd.alloc_mw(MwType::Type2).unwrap();
    let before = mw.rkey();
    let rkey = bind(&mut p, &mw, &target, 1024, 512);
    assert_eq!(rkey & !0xff, before & !0xff, "the index part stays");
    assert_ne!(rkey, before);
    let at = target.addr() + 1024;
    let data = [0x5au8; 64];
    assert_eq!(write(&mut p, &src, &data, at, rkey), WcStatus::SUCCESS);
    let mut got = [0u8; 64];
    target.read(1024, &mut got).unwrap();
    assert_eq!(got, data);
    // Invalidated at B: the key opens nothing any more.
    p.b.post_send(&[SendWr::new(42, SendOp::LocalInvalidate { rkey }, &[])])
        .unwrap();
    let c = wait(&mut p.cq_b, 1);
    assert_eq!(
        (c[0].wr_id, c[0].status, c[0].opcode),
        (42, WcStatus::SUCCESS, WcOpcode::LOCAL_INV),
        "{c:?}"
    );
    assert_eq!(
        write(&mut p, &src, &data, at, rkey),
        WcStatus::REM_ACCESS_ERR
    );
}

/// Past the end of its region a window's key is refused. Inside the
/// region but past the window's range it is not, on rxe: the responder
/// checks the access against the window's region, not against the window
/// (6.1 rxe_resp.c `check_rkey`: `mr_check_range(mw->mr, ...)`), so on
/// rxe a window exposes its whole region with the window's rights.
#[test]
fn past_its_region_a_windows_key_is_refused_and_the_regions_own_key_opens_nothing() {
    let mut p = pair(QpType::Rc, 16, 7);
    let src = mr(&p.pd, 4096);
    let target = bindable(&p);
    let mw = p.pd.alloc_mw(MwType::Type2).unwrap();
    let rkey = bind(&mut p, &mw, &target, 1024, 512);
    // 64 bytes from 1480: the last 24 past the window, inside the region.
    let at = target.addr() + 1480;
    assert_eq!(
        write(&mut p, &src, &[1; 64], at, rkey),
        WcStatus::SUCCESS,
        "rxe checks against the region"
    );
    // 64 bytes from 4064: the last 32 past the region.
    let at = target.addr() + 4064;
    assert_eq!(
        write(&mut p, &src, &[2; 64], at, rkey),
        WcStatus::REM_ACCESS_ERR
    );
    let mut got = [0u8; 32];
    target.read(4064, &mut got).unwrap();
    assert_eq!(got, [0; 32], "nothing of the refused write landed");

    let mut q = pair(QpType::Rc, 16, 7);
    let src = mr(&q.pd, 4096);
    let target = bindable(&q);
    let (addr, key) = (target.addr(), target.rkey());
    assert_eq!(
        write(&mut q, &src, &[1; 8], addr, key),
        WcStatus::REM_ACCESS_ERR
    );
}

#[test]
fn a_send_with_invalidate_closes_the_receivers_window() {
    let mut p = pair(QpType::Rc, 16, 7);
    let src = mr(&p.pd, 4096);
    let inbox = mr(&p.pd, 4096);
    let target = bindable(&p);
    let mw = p.pd.alloc_mw(MwType::Type2).unwrap();
    let rkey = bind(&mut p, &mw, &target, 0, 4096);
    let at = target.addr();
    assert_eq!(write(&mut p, &src, &[7; 16], at, rkey), WcStatus::SUCCESS);
    p.b.post_recv(&[RecvWr::new(50, &[inbox.sge(0, 64).unwrap()])])
        .unwrap();
    let op = SendOp::SendWithInvalidate { rkey };
    p.a.post_send(&[SendWr::new(51, op, &[src.sge(0, 8).unwrap()])])
        .unwrap();
    let s = wait(&mut p.cq_a, 1);
    assert_eq!(
        (s[0].wr_id, s[0].status, s[0].opcode),
        (51, WcStatus::SUCCESS, WcOpcode::SEND),
        "{s:?}"
    );
    let r = wait(&mut p.cq_b, 1);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].opcode, r[0].byte_len),
        (50, WcStatus::SUCCESS, WcOpcode::RECV, 8),
        "{r:?}"
    );
    assert!(r[0].wc_flags.contains(WcFlags::WITH_INVALIDATE), "{r:?}");
    assert_eq!(r[0].imm_data, rkey, "the invalidated key, host order");
    assert_eq!(
        write(&mut p, &src, &[7; 16], at, rkey),
        WcStatus::REM_ACCESS_ERR
    );
}

#[test]
fn a_type1_window_binds_and_unbinds_with_length_zero() {
    let mut p = pair(QpType::Rc, 16, 7);
    let src = mr(&p.pd, 4096);
    let target = bindable(&p);
    let mw = p.pd.alloc_mw(MwType::Type1).unwrap();
    let rkey = bind(&mut p, &mw, &target, 0, 256);
    let at = target.addr();
    assert_eq!(write(&mut p, &src, &[3; 32], at, rkey), WcStatus::SUCCESS);
    let unbound = bind(&mut p, &mw, &target, 0, 0);
    assert_ne!(unbound, rkey);
    assert_eq!(
        write(&mut p, &src, &[3; 32], at, unbound),
        WcStatus::REM_ACCESS_ERR
    );
}

#[test]
fn deallocating_a_bound_window_ends_its_binding_and_frees_the_region() {
    let mut p = pair(QpType::Rc, 16, 7);
    let src = mr(&p.pd, 4096);
    let target = bindable(&p);
    let mw = p.pd.alloc_mw(MwType::Type2).unwrap();
    let rkey = bind(&mut p, &mw, &target, 0, 128);
    // A region under a bound window cannot be deregistered (rxe_mr.c
    // `rxe_dereg_mr`, IBA 10.6.7.2.6); try on a second one. The refused
    // region comes back still registered: the window's key still writes
    // into it; once the window is gone, the retry deregisters it (issue
    // 39 item 1: the destroy consumed it, and it stayed registered).
    let other = bindable(&p);
    let mw2 = p.pd.alloc_mw(MwType::Type2).unwrap();
    let rkey2 = bind(&mut p, &mw2, &other, 0, 64);
    let e = other.destroy().unwrap_err();
    assert_eq!(e.errno(), uverbs::sys::Errno::EINVAL, "{e}");
    let other = e.into_inner();
    let at = other.addr();
    assert_eq!(write(&mut p, &src, &[7; 8], at, rkey2), WcStatus::SUCCESS);
    let mut got = [0u8; 8];
    other.read(0, &mut got).unwrap();
    assert_eq!(got, [7; 8], "still registered");
    let other = other.destroy().unwrap_err().into_inner();
    mw2.destroy().unwrap();
    other.destroy().unwrap();
    // Deallocated: the window's key opens nothing.
    mw.destroy().unwrap();
    assert_eq!(
        write(&mut p, &src, &[9; 8], target.addr(), rkey),
        WcStatus::REM_ACCESS_ERR
    );
    // ... and the region can go.
    target.destroy().unwrap();
}

/// `IBV_WR_ATOMIC_WRITE` exists from Linux 6.2 on: 6.12's rxe writes the 8
/// bytes, 6.1's fails the request (no such opcode in its
/// rxe_opcode.c table) with a local QP operation error.
#[test]
fn an_atomic_write_lands_its_8_bytes_from_linux_6_2() {
    let mut p = pair(QpType::Rc, 16, 7);
    let target = mr(&p.pd, 4096);
    let op = SendOp::AtomicWrite {
        remote_addr: target.addr() + 64,
        rkey: target.rkey(),
        data: *b"atomic!!",
    };
    p.a.post_send(&[SendWr::new(60, op, &[])]).unwrap();
    let c = wait(&mut p.cq_a, 1);
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    if release.starts_with("6.1.") {
        assert_eq!(
            (c[0].wr_id, c[0].status),
            (60, WcStatus::LOC_QP_OP_ERR),
            "{release}: {c:?}"
        );
    } else {
        assert_eq!(
            (c[0].wr_id, c[0].status, c[0].opcode),
            (60, WcStatus::SUCCESS, WcOpcode::ATOMIC_WRITE),
            "{release}: {c:?}"
        );
        let mut got = [0u8; 8];
        target.read(64, &mut got).unwrap();
        assert_eq!(&got, b"atomic!!");
    }
}
