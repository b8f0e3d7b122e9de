//! Memory windows on the fake rxe kernel (`uverbs::testing::rxe`): the
//! commands allocation and deallocation make (ioctl and write-only
//! modes), the keys, what `bind_to` checks before any kernel, and the
//! typed session's bind, invalidate and atomic write reaching the send
//! ring. The kernel's side of binding (rxe_mw.c) is the guest's test,
//! `tests/device/memory_window.rs`.

use uverbs::testing::rxe::*;
use uverbs::{
    abi,
    qp_ex::{Rc, Rxe},
    sys::fake::Call,
    AccessFlags, CommandMode, Context, CqOptions, ErrorKind, MwType,
};
use zerocopy::FromBytes;

use uverbs_test_support::fake_rc;

#[test]
fn alloc_and_dealloc_make_the_kernels_commands_in_both_modes() {
    let fake = fake_rxe();
    let dev = uverbs::find_device(&fake.dyn_kernel(), Some(DEV)).unwrap();
    for mode in [CommandMode::Auto, CommandMode::WriteOnly] {
        let ctx = Context::open_device_with_mode(fake.dyn_kernel(), dev.clone(), mode).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        fake.kernel.clear_calls();
        let one = pd.alloc_mw(MwType::Type1).unwrap();
        let two = pd.alloc_mw(MwType::Type2).unwrap();
        assert_eq!(
            fake.kernel.calls(),
            [
                Call::Write(abi::IB_USER_VERBS_CMD_ALLOC_MW),
                Call::Write(abi::IB_USER_VERBS_CMD_ALLOC_MW)
            ],
            "{mode:?}: allocation is the write command (no ioctl method exists)"
        );
        assert_eq!(
            (one.mw_type(), two.mw_type()),
            (MwType::Type1, MwType::Type2)
        );
        assert_ne!(one.handle(), two.handle());
        // The keys are the kernel's answer (the fake's: handle << 8 | 0x3c).
        assert_eq!(one.rkey(), (one.handle() << 8) | 0x3c);
        assert_eq!(two.rkey(), (two.handle() << 8) | 0x3c);
        assert_eq!(one.pd().handle(), pd.handle());

        // An explicit destroy reports EBUSY while a clone lives, giving
        // the window back; once the clone is gone, it works.
        let h = two.handle();
        let clone = two.clone();
        let e = two.destroy().unwrap_err();
        assert_eq!(e.errno(), uverbs::sys::Errno::EBUSY, "{e}");
        let two = e.into_inner();
        drop(clone);
        fake.kernel.clear_calls();
        two.destroy().unwrap();
        let destroy = match mode {
            CommandMode::WriteOnly => Call::Write(abi::IB_USER_VERBS_CMD_DEALLOC_MW),
            _ => Call::Ioctl {
                object: abi::UVERBS_OBJECT_MW,
                method: abi::UVERBS_METHOD_MW_DESTROY,
            },
        };
        assert_eq!(fake.kernel.calls(), [destroy], "{mode:?}");
        assert!(fake.destroyed(Kind::Mw).contains(&h));
        // The last drop deallocates too.
        let h = one.handle();
        drop(one);
        assert!(fake.destroyed(Kind::Mw).contains(&h), "{mode:?}: drop");
        // The PD outlives its windows' handles only as long as they do.
        pd.destroy().unwrap();
    }
}

#[test]
fn keys_advance_in_the_low_byte_and_are_recorded() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mw = pd.alloc_mw(MwType::Type2).unwrap();
    mw.set_rkey(0x1234_56fe);
    assert_eq!(mw.rkey(), 0x1234_56fe);
    assert_eq!(mw.next_rkey(), 0x1234_56ff);
    mw.set_rkey(0x1234_56ff);
    // The key byte wraps; the index above it never changes.
    assert_eq!(mw.next_rkey(), 0x1234_5600);
}

#[test]
fn bind_to_checks_range_pd_and_rights() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let other = ctx.alloc_pd().unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND;
    let mr = pd.alloc_mr(4096, access).unwrap();
    let foreign = other.alloc_mr(4096, access).unwrap();
    let mw = pd.alloc_mw(MwType::Type2).unwrap();
    let rights = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let b = mw.bind_to(&mr, 64, 1024, rights).unwrap();
    assert_eq!(
        (b.mw_rkey, b.rkey, b.mr_lkey, b.addr, b.length, b.access),
        (
            mw.rkey(),
            mw.next_rkey(),
            mr.lkey(),
            mr.addr() + 64,
            1024,
            rights
        )
    );
    // Binding does not change the window's key: the program records it.
    assert_eq!(b.mw_rkey, mw.rkey());
    let range = mw.bind_to(&mr, 4000, 97, rights).unwrap_err();
    assert_eq!(range.kind(), ErrorKind::InvalidArgument, "{range}");
    assert!(range.to_string().contains("4000..4097"), "{range}");
    let pd_err = mw.bind_to(&foreign, 0, 8, rights).unwrap_err();
    assert!(
        pd_err.to_string().contains("protection domains"),
        "{pd_err}"
    );
    let bad = mw.bind_to(&mr, 0, 8, AccessFlags::MW_BIND).unwrap_err();
    assert!(bad.to_string().contains("REMOTE_READ"), "{bad}");
    // Length 0 (a type 1 window's unbind) is a range like any other.
    assert_eq!(mw.bind_to(&mr, 0, 0, rights).unwrap().length, 0);
}

#[test]
fn typed_session_posts_bind_invalidate_send_inv_and_atomic_write() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    let mut qp = fake_rc::rc_in_rts(&pd, &cq);
    let mr = pd
        .alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)
        .unwrap();
    let mw = pd.alloc_mw(MwType::Type2).unwrap();
    let bind = mw.bind_to(&mr, 0, 512, AccessFlags::REMOTE_READ).unwrap();

    let mut s = qp.start_wr::<Rc, Rxe>().unwrap();
    s.bind_mw(bind).wr_id(1).post().unwrap();
    s.local_inv(bind.rkey).wr_id(2).unsignaled().post().unwrap();
    s.send_inv(0x4242)
        .wr_id(3)
        .sge(mr.sge(0, 4).unwrap())
        .unwrap();
    s.atomic_write(7, 0x8000, *b"abcdefgh")
        .wr_id(4)
        .post()
        .unwrap();
    // A misaligned atomic write is refused; the session goes on.
    let e = s.atomic_write(7, 0x8004, [0; 8]).post().unwrap_err();
    assert!(matches!(e.kind, uverbs::PostErrorKind::BadAtomic(_)), "{e}");
    assert_eq!(e.index, 4);
    s.complete().unwrap();

    let ring = fake.sq_ring(qp.handle()).unwrap();
    let mut got = Vec::new();
    while let Some(bytes) = ring.consume() {
        let w = abi::RxeSendWqe::read_from_prefix(&bytes).unwrap().0;
        got.push((
            w.wr.wr_id,
            w.wr.opcode,
            w.wr.send_flags,
            w.wr.ex,
            w.dma.length,
        ));
        if w.wr.opcode == 15 {
            let at = std::mem::size_of::<abi::RxeSendWqe>();
            assert_eq!(&bytes[at..at + 8], b"abcdefgh");
        }
        if w.wr.opcode == 8 {
            let m = abi::RxeSendWrMw::read_from_prefix(&w.wr.wr[..]).unwrap().0;
            assert_eq!(
                (m.addr, m.length, m.mr_lkey, m.mw_rkey, m.rkey, m.access),
                (mr.addr(), 512, mr.lkey(), mw.rkey(), mw.next_rkey(), 4)
            );
        }
    }
    assert_eq!(
        got,
        [
            (1, 8, 2, 0, 0),
            (2, 7, 0, bind.rkey, 0),
            (3, 9, 2, 0x4242, 4),
            (4, 15, 2, 0, 8)
        ]
    );
}
