//! mlx5 DevX through the public API (`uverbs::mlx5`), against the device
//! model's DevX kernel side (`src/testing/mlx5/devx.rs`, which plays
//! `drivers/infiniband/hw/mlx5/devx.c`: attribute specs, uid and opcode
//! class checks, the read paths of command completion fds and event
//! channels byte for byte, subscriptions, removal).
//!
//! The commands each call issues are compared with `devx.c`'s method specs
//! (object and method ids, every attribute's kind, length and mandatory
//! flag, the driver id); the event and answer streams with what
//! `devx_async_event_read` and `devx_async_cmd_event_read` produce. The
//! hardware suite's DevX scenario (`tests/support/src/devx_overrun.rs`: a DevX
//! CQ on UMEM, EQN and UAR, overrun on purpose by a DevX QP, its CQ_ERROR
//! EQE through both paths) also runs here, against the model's firmware
//! side (`src/testing/mlx5/devx_fw.rs`); there is no ConnectX here to
//! run it on.

use std::{
    os::fd::{AsFd, AsRawFd, OwnedFd},
    sync::{Arc, Mutex},
    thread,
    time::{Duration, Instant},
};

use uverbs::{
    abi,
    mlx5::{
        self, event_type, CmdIn, CmdOut, DevxEvent, EventChannelFlags, OpenFlags, Target, UarKind,
        UmemAccess,
    },
    sys::{
        fake::{AttrKind, IoctlShape},
        Errno,
    },
    testing::mlx5::{fake_mlx5, fake_mlx5_with, Mlx5Model, Options},
    Context, CqOptions, ErrorKind,
};

const M: u16 = abi::UVERBS_ATTR_F_MANDATORY;

fn open_devx(model: &Mlx5Model) -> Context {
    let k = model.dyn_kernel();
    let dev = uverbs::find_device(&k, Some("mlx5_0")).unwrap();
    mlx5::open_device(k, dev, OpenFlags::DEVX).unwrap_or_else(|e| panic!("open: {e}"))
}

use uverbs_test_support::{bounded::PATIENCE, devx_overrun, devx_umem};

/// The hardware suite's DevX scenario (rdma-core's
/// `test_mlx5_devx_async_events.py`) on the device model, whose firmware
/// decodes the PRM mailboxes with its own reader and checks every field a
/// wrong offset would garble: a DevX CQ on UMEM + EQN + UAR fed by a DevX
/// UD QP that posts NOPs until the CQ overruns; the CQ_ERROR EQE (its CQN,
/// syndrome 1) by cookie and by eventfd; QUERY_CQ; a verbs QP queried and
/// moved to INIT through DevX.
#[test]
fn a_devx_cq_overrun_on_purpose_reports_cq_error_by_cookie_and_by_eventfd() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let mlx5 = ctx.mlx5().unwrap();
    let devx = mlx5.devx().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let pdn = mlx5.pd_number(&pd).unwrap();
    let settle = || {
        // 128 NOPs, of which the CQ of 64 takes 64.
        assert_eq!(model.process(), 128);
    };
    devx_overrun::query_devx_cq(&devx, pdn);
    devx_overrun::cq_overrun_by_cookie(&devx, pdn, &settle);
    devx_overrun::cq_overrun_by_eventfd(&devx, pdn, &settle);
    devx_overrun::verbs_qp_through_devx(&ctx, &pd, &devx);
    assert_eq!(model.violations(), Vec::<String>::new());
}

/// How many `UMEM_DEREG` commands the model received.
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

/// The safe API keeps a DevX CQ's memory for as long as the CQ: a CQ made
/// with `obj_create`, whose command names its buffer and doorbell UMEMs by
/// id only, keeps both although their handles are dropped first (no
/// deregistration reaches the kernel while it lives), the device's CQEs
/// land in that memory, and the UMEMs go once the CQ is destroyed
/// (`tests/support/src/devx_umem.rs`, also in the hardware suite).
#[test]
fn a_devx_cq_keeps_the_umems_its_command_names() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let mlx5 = ctx.mlx5().unwrap();
    let devx = mlx5.devx().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let pdn = mlx5.pd_number(&pd).unwrap();
    devx_umem::cq_keeps_the_umems_its_command_names(
        &devx,
        pdn,
        &|| assert_eq!(model.process(), 4, "the 4 NOPs"),
        &|| {
            assert_eq!(umem_deregs(&model), 0, "no deregistration yet");
            assert_eq!(
                model.devx_counts(),
                (2, 4),
                "the CQ and the QP, the 4 UMEMs they name"
            );
        },
    );
    assert_eq!(model.devx_counts(), (0, 0), "destroyed, then deregistered");
    assert_eq!(umem_deregs(&model), 4, "each UMEM once, after its object");
    assert_eq!(model.violations(), Vec::<String>::new());
}

/// The model's firmware refuses `DESTROY_UMEM` while a DevX object's create
/// command names the UMEM (`EINVAL`: `BAD_RES_STATE` through
/// `mlx5_cmd_exec`), and the library's deregistration that fails that way
/// leaks the memory instead of giving it back: a CQ created by a raw
/// `OBJ_CREATE` the library never sees still receives its CQEs in the
/// memory of a UMEM whose handle was dropped (`tests/support/src/devx_umem.rs`,
/// also in the hardware suite, where it reports the firmware's answer).
#[test]
fn a_refused_umem_deregistration_leaks_the_memory_the_device_still_writes() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let mlx5 = ctx.mlx5().unwrap();
    let devx = mlx5.devx().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let pdn = mlx5.pd_number(&pd).unwrap();
    let k = model.dyn_kernel();
    let refused = devx_umem::umem_dereg_while_a_cq_uses_it(&devx, &*k, pdn, &|| {
        assert_eq!(model.process(), 4, "the 4 NOPs")
    });
    assert_eq!(
        refused,
        Errno::EINVAL,
        "BAD_RES_STATE, as cmd_status_to_err maps it"
    );
    // The hand-made UMEM's refused and final deregistrations, the library
    // UMEM's refused one, the QP's two.
    assert_eq!(umem_deregs(&model), 5);
    assert_eq!(
        model.devx_counts(),
        (0, 1),
        "the library UMEM stays registered, its memory leaked, until the context goes"
    );
    assert_eq!(model.violations(), Vec::<String>::new());
}

/// A UAR is freed under a DevX QP that rings it, without refusal: the
/// kernel's `UAR_OBJ_DESTROY` cannot fail (`main.c` `mmap_obj_cleanup`
/// returns 0; the firmware's `DEALLOC_UAR` waits for the page's last
/// mapping, `mlx5_ib_mmap_free`, and its answer is ignored). A QP made with
/// `obj_create` names its UAR by page id only, and the library frees a
/// dropped `DevxUar` at once: the page holds the CPU's doorbell registers,
/// which the device never writes, so no memory is at stake
/// (`obj_create_using` keeps a UAR for as long as the object, for a program
/// that rings it).
#[test]
#[allow(unsafe_code)] // a UAR object allocated and destroyed by hand
fn a_uar_freed_under_a_devx_qp_is_never_refused() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let mlx5 = ctx.mlx5().unwrap();
    let devx = mlx5.devx().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let pdn = mlx5.pd_number(&pd).unwrap();
    let (buf, dbr) = (
        devx.umem_reg(64 << 4, UmemAccess::LOCAL_WRITE).unwrap(),
        devx.umem_reg(4096, UmemAccess::LOCAL_WRITE).unwrap(),
    );
    let cq_uar = devx.alloc_uar(UarKind::NonCached).unwrap();
    let eqn = devx.query_eqn(0).unwrap();
    let cmd = devx_overrun::create_cq_in(4, buf.id(), dbr.id(), cq_uar.page_id(), eqn);
    let mut out = vec![0u8; 16];
    let cq = devx.obj_create_using(&cmd, &mut out, &[&cq_uar]).unwrap();
    let cqn = CmdOut::read(&out).unwrap().obj_id & 0x00ff_ffff;
    let sq = devx
        .umem_reg(64 << devx_overrun::LOG_SQ_WQEBB, UmemAccess::LOCAL_WRITE)
        .unwrap();
    let qp_dbr = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE).unwrap();
    let k = model.dyn_kernel();
    let uar_cmd = |method| {
        uverbs::ioctl::IoctlCmd::new(abi::MLX5_IB_OBJECT_UAR, method, abi::RDMA_DRIVER_MLX5)
    };

    // The kernel's answer, on a UAR object of the test's own.
    let (mut offset, mut length, mut page) = ([0u8; 8], [0u8; 4], [0u8; 4]);
    let mut alloc = uar_cmd(abi::MLX5_IB_METHOD_UAR_OBJ_ALLOC);
    let at = alloc.new_object(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE);
    alloc.const_in(
        abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE,
        u64::from(abi::MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC),
    );
    alloc.output(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, &mut offset);
    alloc.output(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, &mut length);
    alloc.output(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, &mut page);
    // SAFETY: no address; the new UAR object is the test's own.
    unsafe { k.ioctl(ctx.cmd_fd(), &mut alloc) }.unwrap();
    let handle = alloc.new_handle(at);
    drop(alloc);
    let page = u32::from_ne_bytes(page);
    let cmd = devx_overrun::create_qp_in(pdn, cqn, sq.id(), qp_dbr.id(), page);
    let qp = devx.obj_create(&cmd, &mut out).unwrap();
    let mut destroy = uar_cmd(abi::MLX5_IB_METHOD_UAR_OBJ_DESTROY);
    destroy.object(abi::MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, handle);
    // SAFETY: no address; the handle is the test's own UAR object.
    let destroyed = unsafe { k.ioctl(ctx.cmd_fd(), &mut destroy) };
    assert_eq!(destroyed, Ok(()), "UAR_OBJ_DESTROY under a live QP");
    qp.destroy().unwrap();

    // The library's: a DevxUar a QP names by page id only goes at once.
    let uar = devx.alloc_uar(UarKind::NonCached).unwrap();
    let cmd = devx_overrun::create_qp_in(pdn, cqn, sq.id(), qp_dbr.id(), uar.page_id());
    let qp = devx.obj_create(&cmd, &mut out).unwrap();
    drop(uar);
    let last = last_ioctl(&model);
    assert_eq!(
        (last.object, last.method),
        (abi::MLX5_IB_OBJECT_UAR, abi::MLX5_IB_METHOD_UAR_OBJ_DESTROY),
        "freed while the QP lives"
    );
    qp.destroy().unwrap();
    cq.destroy().unwrap();
    drop((buf, dbr, sq, qp_dbr));
    assert_eq!(model.devx_counts(), (0, 0));
}

/// The model's firmware refuses a QP context with a field out of place
/// (here `pm_state` left 0): BAD_PARAM, its syndrome naming the field's bit
/// offset, so a wrong offset in the scenario above cannot pass unseen.
#[test]
fn the_models_firmware_refuses_a_qp_context_field_out_of_place() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let mut cmd = mailbox(CmdIn::new(0x500), 0x880 / 8);
    devx_overrun::set(&mut cmd, 0x860, 1, 1); // wq_umem_valid
    let mut out = vec![0u8; 16];
    let err = devx.obj_create(&cmd, &mut out).unwrap_err();
    let fw = err.firmware_status().expect("a firmware failure");
    assert_eq!(
        (fw.status, fw.syndrome),
        (0x03, 0xdf00_0000 | (0xc0 + 0x13))
    );
}

/// A PRM mailbox of `len` bytes starting with `h`.
fn mailbox(h: CmdIn, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    assert!(h.write(&mut b));
    b
}

/// `MLX5_CMD_OP_*` used here.
const CREATE_CQ: u16 = 0x400;
const QUERY_CQ: u16 = 0x402;
const QUERY_QP: u16 = 0x50b;
const QP_2RST: u16 = 0x50a;
const QUERY_HCA_CAP: u16 = 0x100;
const CREATE_GENERAL_OBJECT: u16 = 0xa00;

/// An EQE of `event_type` naming CQ `cqn` where that type puts it.
fn eqe(event_type: u16, cqn: u32) -> [u8; 64] {
    let mut e = [0u8; 64];
    e[1] = event_type as u8;
    match event_type {
        event_type::CQ_ERROR => {
            e[32..36].copy_from_slice(&cqn.to_be_bytes());
            e[43] = 1; // overrun
        }
        event_type::COMP => e[56..60].copy_from_slice(&cqn.to_be_bytes()),
        _ => {}
    }
    e
}

/// The last ioctl the model received.
fn last_ioctl(model: &Mlx5Model) -> IoctlShape {
    model.kernel.ioctls().pop().expect("an ioctl")
}

#[test]
fn devx_is_required_or_explained() {
    // Firmware without DevX: a required DevX open fails with the kernel's
    // answer; a default open falls back, and devx() says why it has none.
    let model = fake_mlx5_with(Options {
        refuse_devx: true,
        ..Options::default()
    });
    let k = model.dyn_kernel();
    let dev = uverbs::find_device(&k, Some("mlx5_0")).unwrap();
    let err = mlx5::open_device(k.clone(), dev.clone(), OpenFlags::DEVX).unwrap_err();
    assert_eq!(err.errno(), Errno::EINVAL, "{err}");
    assert!(err.to_string().contains("DevX was required"), "{err}");
    let ctx = mlx5::open_device(k, dev, OpenFlags::empty()).unwrap();
    assert!(!ctx.mlx5().unwrap().attr().devx);
    let err = ctx.mlx5().unwrap().devx().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnsupportedProvider);
    assert!(err.to_string().contains("OpenFlags::DEVX"), "{err}");
    // With DevX firmware the required open has it.
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    assert!(ctx.mlx5().unwrap().attr().devx && model.devx());
    ctx.mlx5().unwrap().devx().unwrap();
}

#[test]
fn objects_are_created_queried_and_destroyed_with_the_commands_devx_c_expects() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let mut out = vec![0u8; 64];
    let cq = devx
        .obj_create(&mailbox(CmdIn::new(CREATE_CQ), 272), &mut out)
        .unwrap();
    let cqn = CmdOut::read(&out).unwrap().obj_id;
    assert_eq!(CmdOut::read(&out).unwrap().status, 0);
    assert_eq!(
        last_ioctl(&model),
        IoctlShape {
            object: abi::MLX5_IB_OBJECT_DEVX_OBJ,
            method: abi::MLX5_IB_METHOD_DEVX_OBJ_CREATE,
            driver_id: abi::RDMA_DRIVER_MLX5,
            attrs: vec![
                (
                    abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE,
                    AttrKind::NewObject,
                    0,
                    M
                ),
                (
                    abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN,
                    AttrKind::In,
                    272,
                    M
                ),
                // The kernel marks outputs it wrote valid.
                (
                    abi::MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT,
                    AttrKind::Out,
                    64,
                    M
                ),
            ],
        }
    );
    // Query the object by its id; the handle names it.
    let mut q = vec![0u8; 32];
    cq.query(&mailbox(CmdIn::general(QUERY_CQ, 0, cqn), 16), &mut q)
        .unwrap();
    assert_eq!(CmdOut::read(&q).unwrap().obj_id, cqn);
    let s = last_ioctl(&model);
    assert_eq!(
        (s.object, s.method, &s.attrs[..1]),
        (
            abi::MLX5_IB_OBJECT_DEVX_OBJ,
            abi::MLX5_IB_METHOD_DEVX_OBJ_QUERY,
            &[(
                abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE,
                AttrKind::Inline,
                0,
                M
            )][..]
        )
    );
    // The kernel's checks: a query naming another object, a command of
    // another class, a non-zero vhca_tunnel_id.
    let err = cq
        .query(&mailbox(CmdIn::general(QUERY_CQ, 0, cqn + 1), 16), &mut q)
        .unwrap_err();
    assert_eq!(err.errno(), Errno::EINVAL, "{err}");
    let err = cq
        .modify(&mailbox(CmdIn::general(QUERY_CQ, 0, cqn), 16), &mut q)
        .unwrap_err();
    assert_eq!(err.errno(), Errno::EINVAL, "{err}");
    let mut tunnel = mailbox(CmdIn::general(QUERY_CQ, 0, cqn), 16);
    tunnel[5] = 1;
    let err = cq.query(&tunnel, &mut q).unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::InvalidArgument,
        "refused before the kernel: {err}"
    );
    assert_eq!(model.devx_counts(), (1, 0));
    cq.destroy().unwrap();
    assert_eq!(model.devx_counts(), (0, 0));
    let s = last_ioctl(&model);
    assert_eq!(
        s.attrs,
        [(
            abi::MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE,
            AttrKind::Inline,
            0,
            M
        )]
    );
    // Dropping destroys too.
    drop(
        devx.obj_create(&mailbox(CmdIn::new(CREATE_CQ), 64), &mut out)
            .unwrap(),
    );
    assert_eq!(model.devx_counts(), (0, 0));
}

#[test]
fn firmware_failures_carry_the_mailbox_or_the_legacy_errno() {
    for legacy in [false, true] {
        let model = fake_mlx5_with(Options {
            legacy_devx_errors: legacy,
            ..Options::default()
        });
        let ctx = open_devx(&model);
        let devx = ctx.mlx5().unwrap().devx().unwrap();
        let mut out = vec![0u8; 32];
        // The model's firmware knows general objects below type 0x100.
        let bad = mailbox(CmdIn::general(CREATE_GENERAL_OBJECT, 0x1ff, 0), 64);
        let err = devx.obj_create(&bad, &mut out).unwrap_err();
        if legacy {
            assert_eq!((err.kind(), err.errno()), (ErrorKind::Os, Errno::EINVAL));
            assert!(err.firmware_status().is_none());
        } else {
            assert_eq!(err.kind(), ErrorKind::Firmware, "{err}");
            assert_eq!(err.errno(), Errno::EREMOTEIO);
            let fw = err.firmware_status().unwrap();
            assert_eq!((fw.status, fw.syndrome), (0x03, 0x7a4c_01ff));
            assert_eq!(fw.out.len(), 32);
            assert!(err.to_string().contains("BAD_PARAM_ERR"), "{err}");
        }
        assert_eq!(model.devx_counts(), (0, 0), "nothing created");
    }
}

#[test]
fn verbs_objects_are_queried_and_modified_through_devx() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let qp = devx_overrun::small_rc_qp(&pd, &cq);
    let mut out = vec![0u8; 64];
    devx.qp_query(
        &qp,
        &mailbox(CmdIn::general(QUERY_QP, 0, qp.qp_num()), 16),
        &mut out,
    )
    .unwrap();
    assert_eq!(CmdOut::read(&out).unwrap().obj_id, qp.qp_num());
    let s = last_ioctl(&model);
    assert_eq!(
        s.attrs[0],
        (
            abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE,
            AttrKind::Inline,
            0,
            M
        )
    );
    // A command for a CQ against the QP is refused by the kernel.
    let err = devx
        .qp_query(
            &qp,
            &mailbox(CmdIn::general(QUERY_CQ, 0, qp.qp_num()), 16),
            &mut out,
        )
        .unwrap_err();
    assert_eq!(err.errno(), Errno::EINVAL);
    let cqn = model.cqn_of_handle(cq.handle()).unwrap();
    devx.cq_query(
        &cq,
        &mailbox(CmdIn::general(QUERY_CQ, 0, cqn), 16),
        &mut out,
    )
    .unwrap();
    // The model's firmware refuses 2RST: the mailbox says why.
    let err = devx
        .qp_modify(
            &qp,
            &mailbox(CmdIn::general(QP_2RST, 0, qp.qp_num()), 16),
            &mut out,
        )
        .unwrap_err();
    assert_eq!(err.firmware_status().map(|f| f.status), Some(0x10));
}

#[test]
fn the_general_command_eqn_and_uar_queries() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let mut out = vec![0u8; 16 + 256];
    devx.general_cmd(&mailbox(CmdIn::new(QUERY_HCA_CAP), 16), &mut out)
        .unwrap();
    // The general page (`cmd_hca_cap` from byte 16): port_type (bits
    // 0x1b6..0x1b8) Ethernet, one port (num_ports, bits 0x1b8..0x1c0).
    assert_eq!(
        (out[16 + 0x36] & 3, out[16 + 0x37]),
        (1, 1),
        "port_type, num_ports"
    );
    let s = last_ioctl(&model);
    assert_eq!(
        (s.object, s.method),
        (abi::MLX5_IB_OBJECT_DEVX, abi::MLX5_IB_METHOD_DEVX_OTHER)
    );
    // Only general commands.
    let err = devx
        .general_cmd(&mailbox(CmdIn::new(CREATE_CQ), 16), &mut out)
        .unwrap_err();
    assert_eq!(err.errno(), Errno::EINVAL);
    assert_eq!(devx.query_eqn(0).unwrap(), 0x19);
    assert_eq!(
        last_ioctl(&model).attrs,
        [
            (
                abi::MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC,
                AttrKind::Inline,
                4,
                M
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN,
                AttrKind::Out,
                4,
                M
            ),
        ]
    );
    let err = devx.query_eqn(5).unwrap_err();
    assert!(err.to_string().contains("num_comp_vectors"), "{err}");
    let uar = devx.alloc_uar(UarKind::NonCached).unwrap();
    assert!(uar.page_id() > 0 && uar.len() >= 4096);
    uar.write64(0x800, [1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    assert_eq!(
        uar.write64(0x801, [0; 8]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert!(uar.write64(uar.len() - 4, [0; 8]).is_err());
    // Without DevX, a general command outside the whitelist is refused.
    let plain = fake_mlx5_with(Options {
        refuse_devx: true,
        ..Options::default()
    });
    let ctx = Context::open_with(plain.dyn_kernel(), None).unwrap();
    assert!(ctx.mlx5().unwrap().devx().is_err());
}

#[test]
fn umems_live_as_long_as_the_objects_that_use_them() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let umem = devx
        .umem_reg(10_000, UmemAccess::LOCAL_WRITE | UmemAccess::REMOTE_READ)
        .unwrap();
    assert_eq!(umem.len(), 12288, "whole pages");
    assert!(umem.id() != 0 && umem.as_ptr().is_some());
    let s = last_ioctl(&model);
    assert_eq!(
        s.attrs,
        [
            (
                abi::MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE,
                AttrKind::NewObject,
                0,
                M
            ),
            (abi::MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR, AttrKind::Inline, 8, M),
            (abi::MLX5_IB_ATTR_DEVX_UMEM_REG_LEN, AttrKind::Inline, 8, M),
            (
                abi::MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS,
                AttrKind::Inline,
                8,
                M
            ),
            (abi::MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID, AttrKind::Out, 4, M),
        ]
    );
    let uar = devx.alloc_uar(UarKind::BlueFlame).unwrap();
    let mut out = vec![0u8; 64];
    let cq = devx
        .obj_create_using(
            &mailbox(CmdIn::new(CREATE_CQ), 64),
            &mut out,
            &[&umem, &uar],
        )
        .unwrap();
    drop((umem, uar));
    assert_eq!(model.devx_counts(), (1, 1), "the CQ keeps its UMEM");
    cq.destroy().unwrap();
    assert_eq!(model.devx_counts(), (0, 0), "then both go");
}

#[test]
fn async_queries_answer_on_the_completion_fd_byte_for_byte() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let mut out = vec![0u8; 64];
    let cq = devx
        .obj_create(&mailbox(CmdIn::new(CREATE_CQ), 64), &mut out)
        .unwrap();
    let cqn = CmdOut::read(&out).unwrap().obj_id;
    let comp = devx.create_cmd_comp().unwrap();
    assert_eq!(comp.try_get().unwrap(), None, "empty: EAGAIN");
    let q = mailbox(CmdIn::general(QUERY_CQ, 0, cqn), 16);
    cq.query_async(&q, 48, 0xabcd, &comp).unwrap();
    let s = last_ioctl(&model);
    assert_eq!(
        s.attrs,
        [
            (
                abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE,
                AttrKind::Inline,
                0,
                M
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN,
                AttrKind::In,
                16,
                M
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN,
                AttrKind::Inline,
                8,
                M
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD,
                AttrKind::Fd,
                0,
                M
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID,
                AttrKind::Inline,
                8,
                M
            ),
        ]
    );
    // The kernel's stream: the wr_id, then 48 bytes of output. A buffer
    // too short is ENOSPC and the answer stays.
    let mut small = [0u8; 40];
    let err = comp
        .read_into(&mut small, Some(Duration::ZERO))
        .unwrap_err();
    assert_eq!(err.errno(), Errno::ENOSPC, "{err}");
    assert!(err.to_string().contains("stays queued"), "{err}");
    let r = comp.get().unwrap();
    assert_eq!(r.wr_id, 0xabcd);
    assert_eq!(r.out.len(), 48);
    assert_eq!(
        CmdOut::read(&r.out).unwrap(),
        CmdOut {
            status: 0,
            syndrome: 0,
            obj_id: cqn
        }
    );
    // More than 1 MiB waiting: EAGAIN, until some are read.
    for i in 0..16 {
        cq.query_async(&q, 65535, i, &comp).unwrap();
    }
    let err = cq.query_async(&q, 65535, 99, &comp).unwrap_err();
    assert_eq!(err.errno(), Errno::EAGAIN, "{err}");
    assert_eq!(comp.get().unwrap().wr_id, 0);
    cq.query_async(&q, 65535, 99, &comp).unwrap();
    // An out length below the header is refused here.
    assert_eq!(
        cq.query_async(&q, 8, 1, &comp).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn data_mode_events_are_cookie_and_eqe_and_overflow_comes_first() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let mut out = vec![0u8; 64];
    let cq = devx
        .obj_create(&mailbox(CmdIn::new(CREATE_CQ), 64), &mut out)
        .unwrap();
    let cqn = CmdOut::read(&out).unwrap().obj_id;
    let ch = devx
        .create_event_channel(EventChannelFlags::empty())
        .unwrap();
    assert_eq!(ch.record_len(), 72);
    let s = last_ioctl(&model);
    assert_eq!(
        s.attrs,
        [
            (
                abi::MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE,
                AttrKind::NewFd,
                0,
                M
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS,
                AttrKind::Inline,
                8,
                M
            ),
        ]
    );
    ch.subscribe(
        Some(&cq),
        &[event_type::CQ_ERROR, event_type::COMP],
        Target::Cookie(77),
    )
    .unwrap();
    assert_eq!(
        last_ioctl(&model).attrs,
        [
            (
                abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE,
                AttrKind::Fd,
                0,
                M
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE,
                AttrKind::Inline,
                0,
                M
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST,
                AttrKind::Inline,
                4,
                M
            ),
            (
                abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE,
                AttrKind::Inline,
                8,
                M
            ),
        ]
    );
    assert_eq!(
        model.devx_subscriptions(),
        [
            (Some(cq.handle()), event_type::CQ_ERROR, 77, false),
            (Some(cq.handle()), event_type::COMP, 77, false)
        ],
        "one entry per type, one cookie"
    );
    assert_eq!(ch.try_get_event().unwrap(), None);
    let err_eqe = eqe(event_type::CQ_ERROR, cqn);
    assert_eq!(model.devx_raise_event(err_eqe), 1);
    assert_eq!(model.devx_raise_event(eqe(event_type::COMP, cqn)), 1);
    assert_eq!(
        model.devx_raise_event(eqe(event_type::COMP, cqn + 1)),
        0,
        "another CQ"
    );
    // The raw stream: 8 bytes of cookie, 64 of EQE.
    let mut raw = [0u8; 72];
    assert_eq!(
        ch.read_raw(&mut raw, Some(Duration::ZERO)).unwrap(),
        Some(72)
    );
    assert_eq!(raw[..8], 77u64.to_ne_bytes());
    assert_eq!(raw[8..], err_eqe);
    let ev = ch
        .get_event_timeout(Some(PATIENCE.0))
        .unwrap()
        .expect("the queued CQ error event");
    assert_eq!(
        (ev.cookie, ev.event_type(), ev.cqn()),
        (77, Some(0), Some(cqn))
    );
    // A buffer short of the record is refused here, naming the size.
    let err = ch.read_raw(&mut [0u8; 71], None).unwrap_err();
    assert!(err.to_string().contains("72 bytes"), "{err}");
    // As mlx5dv_devx_get_event answers it: EINVAL.
    assert_eq!(
        (err.kind(), err.errno()),
        (ErrorKind::InvalidArgument, Errno::EINVAL)
    );
    // A lost allocation: EOVERFLOW before the events already queued.
    assert_eq!(model.devx_raise_event(err_eqe), 1);
    model.devx_fail_event_allocs(1);
    assert_eq!(model.devx_raise_event(err_eqe), 1);
    assert_eq!(model.devx_raise_event(err_eqe), 1);
    let err = ch.try_get_event().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::EventsLost, "{err}");
    assert_eq!(
        err.errno(),
        Errno::EOVERFLOW,
        "as mlx5dv_devx_get_event: {err}"
    );
    assert!(err.to_string().contains("resynchronise"), "{err}");
    for _ in 0..2 {
        let ev = ch.try_get_event().unwrap().expect("the events kept");
        assert_eq!((ev.cookie, ev.cq_error_syndrome()), (77, Some(1)));
    }
    assert_eq!(ch.try_get_event().unwrap(), None);
    // Destroying the object ends its subscriptions.
    cq.destroy().unwrap();
    assert!(model.devx_subscriptions().is_empty());
}

#[test]
fn a_short_read_at_the_kernel_keeps_the_event() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let ch = devx
        .create_event_channel(EventChannelFlags::empty())
        .unwrap();
    ch.subscribe(None, &[event_type::PORT_CHANGE], Target::Cookie(5))
        .unwrap();
    let mut port = [0u8; 64];
    port[1] = event_type::PORT_CHANGE as u8;
    assert_eq!(model.devx_raise_event(port), 1);
    // What the kernel does with a 64-byte buffer: EINVAL, event kept.
    let k = model.dyn_kernel();
    let mut b = [0u8; 64];
    assert_eq!(k.read(ch.as_fd(), &mut b), Err(Errno::EINVAL));
    assert_eq!(k.read(ch.as_fd(), &mut b), Err(Errno::EINVAL));
    let ev = ch.try_get_event().unwrap().unwrap();
    assert_eq!(
        (ev.cookie, ev.event_type()),
        (5, Some(event_type::PORT_CHANGE as u8))
    );
}

#[test]
fn omit_data_channels_coalesce_per_subscription() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let mut out = vec![0u8; 64];
    let cq = devx
        .obj_create(&mailbox(CmdIn::new(CREATE_CQ), 64), &mut out)
        .unwrap();
    let cqn = CmdOut::read(&out).unwrap().obj_id;
    let ch = devx
        .create_event_channel(EventChannelFlags::OMIT_DATA)
        .unwrap();
    assert_eq!(ch.record_len(), 8);
    assert_eq!(
        last_ioctl(&model).attrs[1],
        (
            abi::MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS,
            AttrKind::Inline,
            8,
            M
        ),
    );
    ch.subscribe(Some(&cq), &[event_type::COMP], Target::Cookie(1))
        .unwrap();
    ch.subscribe(Some(&cq), &[event_type::CQ_ERROR], Target::Cookie(2))
        .unwrap();
    for _ in 0..5 {
        model.devx_raise_event(eqe(event_type::COMP, cqn));
    }
    model.devx_raise_event(eqe(event_type::CQ_ERROR, cqn));
    model.devx_raise_event(eqe(event_type::COMP, cqn));
    let mut raw = [0u8; 8];
    assert_eq!(
        ch.read_raw(&mut raw, Some(Duration::ZERO)).unwrap(),
        Some(8)
    );
    assert_eq!(raw, 1u64.to_ne_bytes(), "five completions, one record");
    let ev = ch.try_get_event().unwrap().unwrap();
    assert_eq!((ev.cookie, ev.eqe), (2, None));
    assert_eq!(ch.try_get_event().unwrap(), None);
    // Read, the subscription queues again; no EOVERFLOW in this mode.
    model.devx_fail_event_allocs(3);
    model.devx_raise_event(eqe(event_type::COMP, cqn));
    assert_eq!(ch.try_get_event().unwrap().map(|e| e.cookie), Some(1));
}

#[test]
fn eventfd_subscriptions_signal_the_eventfd_and_never_the_channel() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let mut out = vec![0u8; 64];
    let cq = devx
        .obj_create(&mailbox(CmdIn::new(CREATE_CQ), 64), &mut out)
        .unwrap();
    let cqn = CmdOut::read(&out).unwrap().obj_id;
    let ch = devx
        .create_event_channel(EventChannelFlags::empty())
        .unwrap();
    let efd: OwnedFd = nix::sys::eventfd::EventFd::from_value_and_flags(
        0,
        nix::sys::eventfd::EfdFlags::EFD_NONBLOCK,
    )
    .unwrap()
    .into();
    // One type per eventfd subscription: refused before the kernel.
    let before = model.kernel.ioctls().len();
    let err = ch
        .subscribe(
            Some(&cq),
            &[event_type::COMP, event_type::CQ_ERROR],
            Target::EventFd(efd.as_fd()),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        model.kernel.ioctls().len(),
        before,
        "nothing reached the kernel"
    );
    ch.subscribe(Some(&cq), &[event_type::COMP], Target::EventFd(efd.as_fd()))
        .unwrap();
    let attrs = last_ioctl(&model).attrs;
    assert_eq!(
        attrs.last(),
        Some(&(
            abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM,
            AttrKind::Inline,
            4,
            M
        ))
    );
    assert!(
        !attrs
            .iter()
            .any(|a| a.0 == abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE),
        "a cookie and an eventfd never go together"
    );
    assert_eq!(model.devx_raise_event(eqe(event_type::COMP, cqn)), 1);
    assert_eq!(model.devx_raise_event(eqe(event_type::COMP, cqn)), 1);
    let mut v = [0u8; 8];
    assert_eq!(nix::unistd::read(efd.as_raw_fd(), &mut v), Ok(8));
    assert_eq!(u64::from_ne_bytes(v), 2, "signalled once per event");
    assert_eq!(ch.try_get_event().unwrap(), None, "the channel saw none");
    // The kernel's own checks: cookie and eventfd together, a non-eventfd.
    let k = model.dyn_kernel();
    let list = event_type::COMP.to_ne_bytes();
    let mut raw = uverbs::ioctl::IoctlCmd::new(
        abi::MLX5_IB_OBJECT_DEVX,
        abi::MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT,
        abi::RDMA_DRIVER_MLX5,
    );
    raw.fd(abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE, ch.as_fd());
    raw.input(abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST, &list);
    raw.input_u32(
        abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM,
        efd.as_raw_fd() as u32,
    );
    raw.input_u64(abi::MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE, 9);
    // SAFETY: a subscription command: its only value that could be an
    // address is the cookie, which the kernel echoes back and never
    // dereferences; the fd is the context's own.
    #[allow(unsafe_code)]
    let refused = unsafe { k.ioctl(ctx.cmd_fd(), &mut raw) };
    assert_eq!(refused, Err(Errno::EINVAL));
    let err = ch
        .subscribe(
            None,
            &[event_type::PORT_CHANGE],
            Target::EventFd(ch.as_fd()),
        )
        .unwrap_err();
    assert_eq!(err.errno(), Errno::EINVAL, "not an eventfd: {err}");
}

#[test]
fn subscriptions_the_device_does_not_report_are_refused() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let ch = devx
        .create_event_channel(EventChannelFlags::empty())
        .unwrap();
    // A completion event needs an object; CQ_ERROR is affiliated.
    for t in [event_type::COMP, event_type::CQ_ERROR, 300] {
        let err = ch.subscribe(None, &[t], Target::Cookie(1)).unwrap_err();
        assert_eq!(err.errno(), Errno::EINVAL, "type {t}");
    }
    assert_eq!(
        ch.subscribe(None, &[event_type::PORT_CHANGE; 17], Target::Cookie(1))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument,
        "at most 16 types"
    );
    assert_eq!(
        ch.subscribe(None, &[], Target::Cookie(1))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    ch.subscribe(None, &[event_type::PORT_CHANGE; 16], Target::Cookie(1))
        .unwrap();
}

#[test]
fn after_removal_every_read_reports_it() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let blocking = devx
        .create_event_channel(EventChannelFlags::empty())
        .unwrap();
    let polled = devx
        .create_event_channel(EventChannelFlags::OMIT_DATA)
        .unwrap();
    let comp = devx.create_cmd_comp().unwrap();
    polled
        .subscribe(None, &[event_type::PORT_CHANGE], Target::Cookie(3))
        .unwrap();
    assert_eq!(polled.try_get_event().unwrap(), None, "non-blocking now");
    let waiter = thread::spawn(move || blocking.get_event());
    thread::sleep(Duration::from_millis(50));
    model.devx_destroy_fds();
    // The blocked read: EIO.
    let err = PATIENCE
        .join(
            "a get_event blocked when the DevX fds were destroyed (EIO expected)",
            waiter,
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceRemoved, "{err}");
    // Non-blocking: the kernel answers EAGAIN forever; the hung-up poll
    // tells removal from idleness, in every way of waiting.
    let k = model.dyn_kernel();
    assert_eq!(k.read(polled.as_fd(), &mut [0u8; 8]), Err(Errno::EAGAIN));
    assert_eq!(
        k.wait_readable(polled.as_fd(), Some(Duration::ZERO)),
        Ok(uverbs::sys::Readiness::Closed)
    );
    let start = Instant::now();
    for r in [
        polled.try_get_event(),
        polled.get_event_timeout(Some(Duration::from_secs(5))),
        polled.get_event_timeout(None),
    ] {
        assert_eq!(r.unwrap_err().kind(), ErrorKind::DeviceRemoved);
    }
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "no wait on a removed channel"
    );
    assert_eq!(comp.try_get().unwrap_err().kind(), ErrorKind::DeviceRemoved);
    assert_eq!(comp.get().unwrap_err().kind(), ErrorKind::DeviceRemoved);
}

#[test]
fn several_threads_reading_one_channel_get_each_event_once() {
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let ch = Arc::new(
        devx.create_event_channel(EventChannelFlags::empty())
            .unwrap(),
    );
    ch.subscribe(None, &[event_type::PORT_CHANGE], Target::Cookie(0))
        .unwrap();
    const N: u32 = 400;
    let got = Arc::new(Mutex::new(Vec::new()));
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let (ch, got) = (ch.clone(), got.clone());
            thread::spawn(move || loop {
                // Half block, half poll with a deadline.
                let ev = if i % 2 == 0 {
                    ch.get_event_timeout(Some(Duration::from_millis(300)))
                } else {
                    ch.get_event_timeout(Some(Duration::from_millis(200)))
                };
                match ev.unwrap() {
                    Some(e) => got.lock().unwrap().push(u32::from_be_bytes(
                        e.eqe.unwrap()[40..44].try_into().unwrap(),
                    )),
                    None => return,
                }
            })
        })
        .collect();
    for n in 0..N {
        let mut e = [0u8; 64];
        e[1] = event_type::PORT_CHANGE as u8;
        e[40..44].copy_from_slice(&n.to_be_bytes());
        assert_eq!(model.devx_raise_event(e), 1);
    }
    for r in readers {
        PATIENCE.join("a reader (it ends on a wait with no event)", r);
    }
    let mut got = got.lock().unwrap().clone();
    got.sort_unstable();
    assert_eq!(got, (0..N).collect::<Vec<_>>(), "each event exactly once");
}

#[test]
fn an_edge_triggered_epoll_drain_loop_loses_no_wakeup() {
    use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let ch = Arc::new(
        devx.create_event_channel(EventChannelFlags::empty())
            .unwrap(),
    );
    ch.subscribe(None, &[event_type::PORT_CHANGE], Target::Cookie(4))
        .unwrap();
    let ep = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).unwrap();
    ep.add(
        ch.as_fd(),
        EpollEvent::new(EpollFlags::EPOLLIN | EpollFlags::EPOLLET, 1),
    )
    .unwrap();
    const N: usize = 300;
    let m2 = model.clone();
    let producer = thread::spawn(move || {
        for i in 0..N {
            let mut e = [0u8; 64];
            e[1] = event_type::PORT_CHANGE as u8;
            e[40] = (i % 256) as u8;
            m2.devx_raise_event(e);
            if i % 7 == 0 {
                thread::sleep(Duration::from_micros(200));
            }
        }
    });
    let mut seen = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen < N && Instant::now() < deadline {
        let mut evs = [EpollEvent::empty(); 4];
        let n = ep.wait(&mut evs, EpollTimeout::from(500u16)).unwrap();
        if n == 0 {
            continue;
        }
        // The documented drain: read until nothing is left.
        while let Some(e) = ch.try_get_event().unwrap() {
            assert_eq!(e.cookie, 4);
            seen += 1;
        }
    }
    PATIENCE.join("the producer", producer);
    while let Some(_e) = ch.try_get_event().unwrap() {
        seen += 1;
    }
    assert_eq!(seen, N, "every event, through edge-triggered wake-ups");
}

#[test]
fn events_decode_whatever_the_bytes() {
    // The decoder never panics and accepts exactly the two record sizes.
    let mut x = 0x1234_5678_9abc_def0u64;
    for len in 0..100 {
        let rec: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for omit in [false, true] {
            let ok = DevxEvent::parse(&rec, omit);
            assert_eq!(ok.is_some(), len == if omit { 8 } else { 72 });
            if let Some(e) = ok {
                let _ = (e.event_type(), e.cqn(), e.cq_error_syndrome(), e.data());
            }
        }
    }
}

/// A DevX event channel the program made `O_NONBLOCK` (as a C program
/// does before polling it): the blocking get returns `WouldBlock` at once
/// when nothing is queued, as `mlx5dv_devx_get_event`'s one `read` answers
/// `EAGAIN`; once an event is queued it is read.
#[test]
fn a_program_set_o_nonblocking_makes_the_blocking_devx_get_would_block() {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use std::os::fd::{AsFd, AsRawFd};
    let model = fake_mlx5();
    let ctx = open_devx(&model);
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let ch = devx
        .create_event_channel(EventChannelFlags::OMIT_DATA)
        .unwrap();
    ch.subscribe(None, &[event_type::PORT_CHANGE], Target::Cookie(5))
        .unwrap();
    let raw = ch.as_fd().as_raw_fd();
    let flags = OFlag::from_bits_retain(fcntl(raw, FcntlArg::F_GETFL).unwrap());
    assert!(!flags.contains(OFlag::O_NONBLOCK), "handed out blocking");
    fcntl(raw, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).unwrap();
    let start = std::time::Instant::now();
    let (ch, got) = PATIENCE.within(
        "a blocking get on a DevX channel the program made O_NONBLOCK (WouldBlock at once \
         expected)",
        move || {
            let got = ch.get_event();
            (ch, got)
        },
    );
    let err = got.unwrap_err();
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
    assert_eq!(err.kind(), ErrorKind::WouldBlock, "{err}");
    assert_eq!(err.errno(), Errno::EAGAIN);
    // A port change (event type 0x09, sub-type 4: active), as devx_watch's
    // test raises it.
    let mut port = [0u8; 64];
    port[1] = 0x09;
    port[3] = 0x04;
    port[32..36].copy_from_slice(&0x0100_0000u32.to_be_bytes());
    assert_eq!(model.devx_raise_event(port), 1);
    let ev = PATIENCE
        .within("a blocking get of the port change raised", move || {
            ch.get_event()
        })
        .unwrap();
    assert_eq!(ev.cookie, 5);
}
