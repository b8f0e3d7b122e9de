//! The forms of `uverbs::mlx5`'s DevX API that libmlx5's C functions
//! (`capi/src/mlx5/devx/`) stand on, against the device model: a refused
//! destroy that gives the object back (`mlx5dv_devx_obj_destroy`), an
//! explicit UMEM deregistration the kernel decides
//! (`mlx5dv_devx_umem_dereg`), `mlx5dv_devx_umem_reg_ex`'s page-size bitmap
//! and dma-buf forms, one raw read of an event channel or command fd as
//! the kernel answers it (`mlx5dv_devx_get_event`,
//! `mlx5dv_devx_get_async_cmd_comp`), the mapped UAR page
//! (`mlx5dv_devx_uar`), and DevX functions on a context without a DevX uid
//! (libmlx5 issues them anyway and the kernel answers).

use std::os::fd::AsFd;

use uverbs::{
    abi,
    mlx5::{
        self, event_type, CmdIn, CmdOut, EventChannelFlags, OpenFlags, Target, UarKind, UmemAccess,
        UmemIn,
    },
    sys::Errno,
    testing::{
        kernel::AttrKind,
        mlx5::{fake_mlx5, fake_mlx5_with, Mlx5Model, Options},
    },
    Context,
};

use uverbs_test_support::devx_overrun;

fn open_devx(model: &Mlx5Model) -> Context {
    let k = model.dyn_kernel();
    let dev = uverbs::find_device(&k, Some("mlx5_0")).unwrap();
    mlx5::open_device(k, dev, OpenFlags::DEVX).unwrap_or_else(|e| panic!("open: {e}"))
}

/// A general object (`CREATE_GENERAL_OBJECT` of type 1), which the model
/// books and answers queries of; and its id.
fn general_obj(devx: &mlx5::Devx) -> (mlx5::DevxObj, u32) {
    let mut cmd = [0u8; 16];
    CmdIn::general(0xa00, 1, 0).write(&mut cmd);
    let mut out = [0u8; 16];
    let obj = devx.obj_create(&cmd, &mut out).unwrap();
    (obj, CmdOut::read(&out).unwrap().obj_id)
}

/// `QUERY_GENERAL_OBJECT` of a [`general_obj`].
fn query_in(id: u32) -> [u8; 16] {
    let mut q = [0u8; 16];
    CmdIn::general(0xa02, 1, id).write(&mut q);
    q
}

#[test]
fn a_refused_object_destroy_gives_the_object_back_usable() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let (obj, id) = general_obj(&devx);
    let handle = obj.handle();
    model.refuse_destroys(true);
    let err = obj.destroy().unwrap_err();
    assert_eq!(err.errno(), Errno::EBUSY);
    let obj = err.into_inner();
    assert_eq!(obj.handle(), handle, "the same object");
    assert_eq!(model.devx_counts().0, 1, "still in the kernel");
    // Still usable: the kernel answers a query of it.
    let mut out = [0u8; 64];
    obj.query(&query_in(id), &mut out).unwrap();
    model.refuse_destroys(false);
    obj.destroy().unwrap();
    assert_eq!(model.devx_counts().0, 0);
}

fn umem_deregs(model: &Mlx5Model) -> usize {
    model
        .kernel
        .ioctls()
        .iter()
        .filter(|s| {
            (s.object, s.method)
                == (
                    abi::MLX5_IB_OBJECT_DEVX_UMEM,
                    abi::MLX5_IB_METHOD_DEVX_UMEM_DEREG,
                )
        })
        .count()
}

/// `dereg` asks the kernel at once, whoever else holds the UMEM: the
/// model's firmware refuses while a CQ names it and the UMEM comes back
/// registered; once the CQ is gone the deregistration goes through, and
/// the CQ's own reference, dropped later, deregisters nothing twice.
#[test]
fn an_explicit_deregistration_is_the_kernels_decision() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let buf = devx.umem_reg(64 * 64, UmemAccess::LOCAL_WRITE).unwrap();
    let dbr = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE).unwrap();
    let uar = devx.alloc_uar(UarKind::NonCached).unwrap();
    let eqn = devx.query_eqn(0).unwrap();
    let cmd = devx_overrun::create_cq_in(6, buf.id(), dbr.id(), uar.page_id(), eqn);
    let mut out = [0u8; 16];
    let cq = devx.obj_create(&cmd, &mut out).unwrap();
    let err = buf.dereg().unwrap_err();
    assert_eq!(
        err.errno(),
        Errno::EINVAL,
        "BAD_RES_STATE through mlx5_cmd_exec"
    );
    let buf = err.into_inner();
    assert_eq!(model.devx_counts(), (1, 2), "both UMEMs still registered");
    assert_eq!(umem_deregs(&model), 1);
    cq.destroy().unwrap();
    // The CQ named both UMEMs and held them: it let them go with it, and
    // dbr (whose handle is still here) stays.
    assert_eq!(model.devx_counts(), (0, 2));
    let clone = buf.clone();
    buf.dereg().unwrap();
    assert_eq!(model.devx_counts(), (0, 1));
    assert_eq!(umem_deregs(&model), 2);
    drop(clone);
    assert_eq!(umem_deregs(&model), 2, "a deregistered shell asks nothing");
    dbr.dereg().unwrap();
    assert_eq!(model.devx_counts(), (0, 0));
    assert_eq!(model.violations(), Vec::<String>::new());
}

#[test]
#[allow(unsafe_code)] // registering memory of this test
fn umem_reg_ex_sends_the_bitmap_and_the_dmabuf_as_the_kernel_takes_them() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let mut mem = vec![0u8; 8192];
    let input =
        UmemIn::new(mem.as_mut_ptr(), mem.len(), UmemAccess::LOCAL_WRITE).with_page_sizes(!0xfff);
    // SAFETY: `mem` outlives the registration (deregistered below).
    let umem = unsafe { devx.umem_reg_ex(&input) }.unwrap();
    let shape = model.kernel.ioctls().last().cloned().unwrap();
    let pgsz = shape
        .attrs
        .iter()
        .find(|a| a.0 == abi::MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP)
        .expect("the bitmap attribute");
    assert_eq!((pgsz.1, pgsz.2), (AttrKind::Inline, 8), "a CONST_IN");
    assert_ne!(
        pgsz.3 & abi::UVERBS_ATTR_F_MANDATORY,
        0,
        "mandatory, as reg_ex"
    );
    assert_eq!(umem.addr(), mem.as_ptr() as u64);
    umem.dereg().unwrap();
    // No page size the memory can be mapped with: the kernel's EINVAL.
    let none = UmemIn::new(mem.as_mut_ptr(), mem.len(), UmemAccess::LOCAL_WRITE).with_page_sizes(0);
    // SAFETY: as above; nothing is registered.
    let e = unsafe { devx.umem_reg_ex(&none) }.unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL);
    // A dma-buf fd goes as a RAW_FD (length 0, the number in data); an fd
    // that is no dma-buf is the kernel's EINVAL (`dma_buf_get`).
    let not_dmabuf = model.kernel.event_fd().unwrap();
    let dma = UmemIn::new(std::ptr::null_mut(), 4096, UmemAccess::LOCAL_WRITE)
        .with_dmabuf(not_dmabuf.as_fd());
    // SAFETY: a dma-buf registration touches no memory of this process.
    let e = unsafe { devx.umem_reg_ex(&dma) }.unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL);
    let shape = model.kernel.ioctls().last().cloned().unwrap();
    let fd = shape
        .attrs
        .iter()
        .find(|a| a.0 == abi::MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD)
        .expect("the dma-buf attribute");
    assert_eq!((fd.1, fd.2), (AttrKind::Inline, 0), "a RAW_FD: length 0");
    assert_eq!(model.devx_counts(), (0, 0));
}

fn port_change() -> [u8; 64] {
    let mut e = [0u8; 64];
    e[1] = event_type::PORT_CHANGE as u8;
    e[3] = 4;
    e
}

/// `read_once` is one read as `devx_async_event_read` answers it: the
/// overflow first, a short buffer refused with the event kept, the record
/// whole into a larger buffer, `EAGAIN` on an empty `O_NONBLOCK` fd, and
/// after the channel's object is destroyed `EAGAIN` non-blocking, `EIO`
/// blocking.
#[test]
fn one_raw_read_of_a_channel_is_the_kernels_answer() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let ch = devx
        .create_event_channel(EventChannelFlags::empty())
        .unwrap();
    ch.subscribe(None, &[event_type::PORT_CHANGE], Target::Cookie(0xc0ffee))
        .unwrap();
    model.devx_fail_event_allocs(1);
    assert_eq!(model.devx_raise_event(port_change()), 1);
    assert_eq!(model.devx_raise_event(port_change()), 1);
    let mut buf = [0u8; 100];
    let e = ch.read_once(&mut buf).unwrap_err();
    assert_eq!(e.errno(), Errno::EOVERFLOW, "the lost event first");
    let e = ch.read_once(&mut buf[..71]).unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL, "a short buffer");
    assert_eq!(ch.read_once(&mut buf).unwrap(), 72, "kept, and whole");
    assert_eq!(u64::from_ne_bytes(buf[..8].try_into().unwrap()), 0xc0ffee);
    assert_eq!(buf[8 + 1], event_type::PORT_CHANGE as u8);
    let k = model.dyn_kernel();
    assert!(!k.set_nonblocking(ch.as_fd(), true).unwrap());
    let e = ch.read_once(&mut buf).unwrap_err();
    assert_eq!(e.errno(), Errno::EAGAIN);
    // An OMIT_DATA channel: 8-byte records; 7 bytes are too few.
    let omit = devx
        .create_event_channel(EventChannelFlags::OMIT_DATA)
        .unwrap();
    omit.subscribe(None, &[event_type::PORT_CHANGE], Target::Cookie(5))
        .unwrap();
    model.devx_raise_event(port_change());
    assert_eq!(
        omit.read_once(&mut buf[..7]).unwrap_err().errno(),
        Errno::EINVAL
    );
    assert_eq!(omit.read_once(&mut buf).unwrap(), 8);
    assert_eq!(u64::from_ne_bytes(buf[..8].try_into().unwrap()), 5);
    model.devx_destroy_fds();
    assert_eq!(ch.read_once(&mut buf).unwrap_err().errno(), Errno::EAGAIN);
    assert_eq!(omit.read_once(&mut buf).unwrap_err().errno(), Errno::EIO);
}

#[test]
fn one_raw_read_of_a_command_fd_is_the_kernels_answer() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let comp = devx.create_cmd_comp().unwrap();
    let (obj, id) = general_obj(&devx);
    obj.query_async(&query_in(id), 64, 0x77, &comp).unwrap();
    let mut buf = vec![0u8; 8 + 64];
    let e = comp.read_once(&mut buf[..8 + 63]).unwrap_err();
    assert_eq!(e.errno(), Errno::ENOSPC, "too small: kept");
    assert_eq!(comp.read_once(&mut buf).unwrap(), 72);
    assert_eq!(u64::from_ne_bytes(buf[..8].try_into().unwrap()), 0x77);
    let k = model.dyn_kernel();
    k.set_nonblocking(comp.as_fd(), true).unwrap();
    assert_eq!(comp.read_once(&mut buf).unwrap_err().errno(), Errno::EAGAIN);
    assert_eq!(CmdOut::read(&buf[8..]).unwrap().status, 0);
    obj.destroy().unwrap();
}

#[test]
#[allow(unsafe_code)] // reading the doorbell page the model mapped
fn a_devx_uar_exposes_its_mapped_page() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    for kind in [UarKind::BlueFlame, UarKind::NonCached] {
        let uar = devx.alloc_uar(kind).unwrap();
        assert_eq!(uar.kind(), kind);
        assert!(!uar.as_ptr().is_null());
        assert_eq!(uar.reg_offset(), 0x800);
        assert!(uar.reg_offset() + 8 <= uar.len());
        // The pointer is the page write64 stores to.
        uar.write64(0x800, [1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        // SAFETY: inside the live mapping, aligned; read atomically.
        let got = unsafe {
            std::sync::atomic::AtomicU64::from_ptr(uar.as_ptr().add(0x800).cast())
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        assert_eq!(got.to_ne_bytes(), [1, 2, 3, 4, 5, 6, 7, 8]);
    }
}

/// On a context without a DevX uid, `devx_any` issues the commands and the
/// kernel answers: UARs, EQNs and the fds work; objects, UMEMs and
/// subscriptions are `EINVAL`.
#[test]
fn without_a_devx_uid_the_kernel_answers_each_command() {
    let model = fake_mlx5_with(Options {
        refuse_devx: true,
        ..Options::default()
    });
    let k = model.dyn_kernel();
    let dev = uverbs::find_device(&k, Some("mlx5_0")).unwrap();
    let ctx = mlx5::open_device(k, dev, OpenFlags::empty()).unwrap();
    let mlx5 = ctx.mlx5().unwrap();
    assert!(mlx5.devx().is_err());
    let devx = mlx5.devx_any().unwrap();
    devx.alloc_uar(UarKind::NonCached).unwrap();
    devx.query_eqn(0).unwrap();
    devx.create_cmd_comp().unwrap();
    let ch = devx
        .create_event_channel(EventChannelFlags::empty())
        .unwrap();
    let e = ch
        .subscribe(None, &[event_type::PORT_CHANGE], Target::Cookie(1))
        .unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL);
    let mut cmd = [0u8; 16];
    CmdIn::new(0x800).write(&mut cmd);
    let e = devx.obj_create(&cmd, &mut [0u8; 16]).unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL);
    let e = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE).unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL);
}
