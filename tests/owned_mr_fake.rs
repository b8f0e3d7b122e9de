//! Host tests of `OwnedMemoryRegion`: on the fake rxe kernel (keys,
//! addresses, copies, errors) and on the mlx5 device model (the device
//! writes the owned buffers; a refused deregistration gives the region
//! back, and a refused drop leaks the buffer).

use std::sync::{atomic::Ordering, Arc};

use memmap2::MmapMut;

use uverbs::{
    abi,
    testing::{
        kernel::Call,
        mlx5::{fake_mlx5, Mlx5Model},
        rxe::{fake_rxe, FakeRxe, Kind, DEV},
    },
    AccessFlags, CompletionQueue, Context, CqOptions, ErrorKind, Gid, Mtu, OwnedMemoryRegion,
    ProtectionDomain, QpAttr, QpCap, QpInitAttr, QpState, QueuePair, RegionBuffer, SendFlags,
    SendOp, SendWr, WcStatus, WorkCompletion,
};

const RW: AccessFlags = AccessFlags::LOCAL_WRITE.union(AccessFlags::REMOTE_WRITE);

fn rxe() -> (Arc<FakeRxe>, ProtectionDomain) {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    (fake, pd)
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// The rxe fake's keys for the MR of kernel handle `h` (`objects.rs`).
fn keys(h: u32) -> (u32, u32) {
    (0x100 + h, 0x200 + h)
}

#[test]
fn a_vec_is_registered_at_its_own_address_and_given_back_with_its_writes() {
    let (fake, pd) = rxe();
    let v = pattern(4096);
    let (ptr, cap) = (v.as_ptr() as u64, v.capacity());
    let r = pd.register_owned(v, RW).unwrap();
    assert_eq!(r.addr(), ptr, "registered where the Vec is");
    assert_eq!((r.len(), r.is_empty()), (4096, false));
    assert_eq!((r.lkey(), r.rkey()), keys(r.handle()));
    let sge = r.sge(8, 16).unwrap();
    assert_eq!((sge.addr, sge.length, sge.lkey), (ptr + 8, 16, r.lkey()));

    let mut got = vec![0u8; 4096];
    r.read(0, &mut got).unwrap();
    assert_eq!(
        got,
        pattern(4096),
        "the Vec's bytes, read through the region"
    );
    r.write(5, b"written through the region").unwrap();
    r.write_u8(4095, 0xaa).unwrap();
    r.fill(1000, 3, 0x5a).unwrap();
    assert_eq!(r.read_u8(4095).unwrap(), 0xaa);
    assert_eq!(r.read_u64(1000).unwrap() & 0xff_ffff, 0x5a_5a5a);

    let handle = r.handle();
    let v = r.into_inner().unwrap();
    assert!(fake.destroyed(Kind::Mr).contains(&handle), "deregistered");
    assert_eq!((v.as_ptr() as u64, v.len(), v.capacity()), (ptr, 4096, cap));
    let mut want = pattern(4096);
    want[5..31].copy_from_slice(b"written through the region");
    want[4095] = 0xaa;
    want[1000..1003].fill(0x5a);
    assert_eq!(v, want);
}

#[test]
fn only_the_length_is_registered_and_the_pad_stays_outside_it() {
    let (_fake, pd) = rxe();
    let mut v = Vec::with_capacity(13);
    v.extend_from_slice(b"thirteen byte");
    let r = pd.register_owned(v, AccessFlags::LOCAL_WRITE).unwrap();
    assert_eq!(r.len(), 13);
    assert_eq!(r.addr() % 8, 0);
    let mut out = [0u8; 13];
    r.read(0, &mut out).unwrap();
    assert_eq!(&out, b"thirteen byte");
    for e in [
        r.read(12, &mut [0; 2]).unwrap_err(),
        r.write(13, b"x").unwrap_err(),
        r.read_u8(13).unwrap_err(),
        r.write_u8(usize::MAX, 0).unwrap_err(),
        r.fill(0, 14, 0).unwrap_err(),
        r.sge(0, 14).unwrap_err(),
        r.sge(usize::MAX, 2).unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(
            e.to_string().contains("outside the region's 13 bytes"),
            "{e}"
        );
    }
    r.write(9, b"BYTE").unwrap();
    let v = r.into_inner().unwrap();
    assert_eq!(v, b"thirteen BYTE");
    assert!(v.capacity() >= 16, "the pad came from the spare capacity");
}

#[test]
fn a_box_and_a_mapping_round_trip() {
    let (_fake, pd) = rxe();
    let b: Box<[u8]> = pattern(24).into_boxed_slice();
    let ptr = b.as_ptr() as u64;
    let r = pd.register_owned(b, RW).unwrap();
    assert_eq!(r.addr(), ptr);
    r.write(20, b"tail").unwrap();
    let b = r.into_inner().unwrap();
    assert_eq!(b.as_ptr() as u64, ptr);
    assert_eq!(&b[..20], &pattern(24)[..20]);
    assert_eq!(&b[20..], b"tail");

    // A length that is not a multiple of 8: the box is padded while
    // registered and shrunk back after.
    let b: Box<[u8]> = pattern(21).into_boxed_slice();
    let r = pd.register_owned(b, RW).unwrap();
    r.write(17, b"end!").unwrap();
    let b = r.into_inner().unwrap();
    assert_eq!(b.len(), 21);
    assert_eq!(&b[17..], b"end!");

    let len = 3 * 4096 + 5;
    let mut m = MmapMut::map_anon(len).unwrap();
    m[len - 1] = 7;
    let ptr = m.as_ptr() as u64;
    let r = pd.register_owned(m, RW).unwrap();
    assert_eq!((r.addr(), r.len()), (ptr, len));
    assert_eq!(r.read_u8(len - 1).unwrap(), 7);
    r.write(len - 4, b"map!").unwrap();
    let m = r.into_inner().unwrap();
    assert_eq!((m.as_ptr() as u64, m.len()), (ptr, len));
    assert_eq!(&m[len - 4..], b"map!");
}

#[test]
fn empty_buffers_and_bad_access_are_refused_before_the_kernel() {
    let (fake, pd) = rxe();
    fake.kernel.clear_calls();
    let reg_mr = |fake: &FakeRxe| {
        fake.kernel
            .calls()
            .contains(&Call::Write(abi::IB_USER_VERBS_CMD_REG_MR))
    };
    fn refused<B: RegionBuffer>(pd: &ProtectionDomain, buf: B, access: AccessFlags) -> String {
        let e = pd.register_owned(buf, access).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("register_owned"), "{e}");
        e.to_string()
    }
    // An empty Vec's pointer dangles: it must never reach the kernel.
    for e in [
        refused(&pd, Vec::<u8>::new(), RW),
        refused(&pd, Vec::<u8>::with_capacity(64), RW),
        refused(&pd, Box::<[u8]>::default(), RW),
    ] {
        assert!(e.contains("is empty"), "{e}");
    }
    if let Ok(m) = MmapMut::map_anon(0) {
        assert!(refused(&pd, m, RW).contains("is empty"));
    }
    for access in [AccessFlags::REMOTE_WRITE, AccessFlags::REMOTE_ATOMIC] {
        let e = refused(&pd, vec![0u8; 64], access);
        assert!(e.contains("require LOCAL_WRITE"), "{e}");
    }
    assert!(!reg_mr(&fake), "nothing was registered");
    // A kernel error is reported as the kernel's (the fake device is gone).
    fake.behaviour.removed.store(true, Ordering::Relaxed);
    let e = pd.register_owned(vec![1u8; 64], RW).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DeviceRemoved, "{e}");
    fake.behaviour.removed.store(false, Ordering::Relaxed);
}

#[test]
fn the_region_is_send_and_sync_and_its_debug_reads_no_memory() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<OwnedMemoryRegion<Vec<u8>>>();
    send_sync::<OwnedMemoryRegion<Box<[u8]>>>();
    send_sync::<OwnedMemoryRegion<MmapMut>>();
    let (_fake, pd) = rxe();
    let r = pd.register_owned(vec![0x41u8; 16], RW).unwrap();
    let shown = format!("{r:?}");
    assert!(
        shown.contains("Vec<u8>") && shown.contains("lkey"),
        "{shown}"
    );
    assert!(!shown.contains("65, 65"), "no bytes of the buffer: {shown}");
}

/// An RC QP on the mlx5 model connected to itself, and its CQ.
fn looped(model: &Mlx5Model) -> (Context, ProtectionDomain, CompletionQueue, QueuePair) {
    let ctx = Context::open_with(model.dyn_kernel(), None).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let qp = pd
        .create_qp(&QpInitAttr::rc(&cq, &cq).cap(QpCap::new(8, 8, 1, 1)))
        .unwrap();
    let mut a = QpAttr::with_state(QpState::Init);
    a.port_num = 1;
    a.qp_access_flags = RW | AccessFlags::REMOTE_READ;
    qp.modify_to(&a).unwrap();
    a.qp_state = QpState::Rtr;
    a.path_mtu = Mtu::BYTES_1024;
    a.dest_qp_num = qp.qp_num();
    a.ah_attr.port_num = 1;
    a.ah_attr.grh = Some(uverbs::GlobalRoute::new(Gid([0; 16]), 1));
    qp.modify_to(&a).unwrap();
    a.qp_state = QpState::Rts;
    a.rnr_retry = 7;
    qp.modify_to(&a).unwrap();
    (ctx, pd, cq, qp)
}

/// RDMA-writes `data` from `src` to `dst_addr`/`rkey` and waits for its completion.
fn rdma_write(
    model: &Mlx5Model,
    qp: &mut QueuePair,
    cq: &mut CompletionQueue,
    src: &uverbs::MemoryRegion,
    data: &[u8],
    (dst_addr, rkey): (u64, u32),
) {
    src.write(0, data).unwrap();
    let sge = [src.sge(0, data.len() as u32).unwrap()];
    let mut wr = SendWr::new(
        1,
        SendOp::RdmaWrite {
            remote_addr: dst_addr,
            rkey,
        },
        &sge,
    );
    wr.flags = SendFlags::SIGNALED;
    qp.post_send(&[wr]).unwrap();
    let mut wc = [WorkCompletion::default(); 1];
    for _ in 0..1000 {
        model.process();
        if cq.poll(&mut wc) == 1 {
            assert_eq!(wc[0].status, WcStatus::SUCCESS, "{:?}", wc[0]);
            return;
        }
    }
    panic!("no completion");
}

#[test]
fn the_device_writes_into_an_owned_vec_and_mapping() {
    let model = fake_mlx5();
    let (_ctx, pd, mut cq, mut qp) = looped(&model);
    let src = pd.alloc_mr(8192, AccessFlags::LOCAL_WRITE).unwrap();
    let data = pattern(5000);

    let v = pd.register_owned(vec![0u8; 8192], RW).unwrap();
    rdma_write(
        &model,
        &mut qp,
        &mut cq,
        &src,
        &data,
        (v.addr() + 3, v.rkey()),
    );
    let mut got = vec![0u8; 5000];
    v.read(3, &mut got).unwrap();
    assert_eq!(got, data, "read through the region");
    let v = v.into_inner().unwrap();
    assert_eq!(&v[3..5003], &data[..]);
    assert!(v[..3].iter().chain(&v[5003..]).all(|&b| b == 0));

    let m = pd
        .register_owned(MmapMut::map_anon(8192).unwrap(), RW)
        .unwrap();
    rdma_write(
        &model,
        &mut qp,
        &mut cq,
        &src,
        &data[..4096],
        (m.addr() + 4096, m.rkey()),
    );
    m.read(4096, &mut got[..4096]).unwrap();
    assert_eq!(&got[..4096], &data[..4096]);
    let m = m.into_inner().unwrap();
    assert_eq!(&m[4096..], &data[..4096]);

    // Up to the last byte of a Vec whose length is not a multiple of 8:
    // the device's whole-word writes stay in the pad.
    let odd = pd.register_owned(vec![0u8; 21], RW).unwrap();
    rdma_write(
        &model,
        &mut qp,
        &mut cq,
        &src,
        &data[..21],
        (odd.addr(), odd.rkey()),
    );
    assert_eq!(odd.into_inner().unwrap(), &data[..21]);
    assert_eq!(model.mr_count(), 1, "only `src` is still registered");
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}

/// Whether `addr` lies in one of this process's mappings.
fn mapped(addr: u64) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().any(|line| {
        let range = line.split_whitespace().next().unwrap_or("");
        let (lo, hi) = range.split_once('-').unwrap_or(("0", "0"));
        let lo = u64::from_str_radix(lo, 16).unwrap_or(0);
        let hi = u64::from_str_radix(hi, 16).unwrap_or(0);
        (lo..hi).contains(&addr)
    })
}

#[test]
fn a_refused_deregistration_returns_the_region_and_a_refused_drop_leaks_the_buffer() {
    let model = fake_mlx5();
    let (_ctx, pd, _cq, _qp) = looped(&model);
    let r = pd.register_owned(pattern(64), RW).unwrap();
    model.refuse_destroys(true);
    let e = r.into_inner().unwrap_err();
    assert!(e.error().to_string().contains("MR_DESTROY"), "{e}");
    let r = e.into_inner();
    r.write(0, b"still registered").unwrap();
    model.refuse_destroys(false);
    let v = r.into_inner().unwrap();
    assert_eq!(&v[..16], b"still registered");

    let len = 5 * 4096;
    let m = pd
        .register_owned(MmapMut::map_anon(len).unwrap(), RW)
        .unwrap();
    let addr = m.addr();
    let leaked = uverbs::testing::leaked_objects();
    model.refuse_destroys(true);
    drop(m);
    model.refuse_destroys(false);
    assert!(uverbs::testing::leaked_objects() > leaked);
    assert!(mapped(addr), "the mapping at {addr:#x} was unmapped");
    assert!(mapped(addr + len as u64 - 1));
    assert_eq!(model.mr_count(), 1, "the kernel object lives on too");
}
