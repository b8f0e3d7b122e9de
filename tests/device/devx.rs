//! mlx5 DevX on the device under test.
//!
//! On rxe (the test guest) these check what a user of another driver gets:
//! DevX and the mlx5 view refused with an error naming the driver, before
//! any command reaches the kernel. On a ConnectX (`UVERBS_TEST_DEVICE=mlx5_0
//! scripts/guest-test.sh --host`) they run the hardware suite's DevX part: a
//! DevX CQ on UMEM, an EQN and a UAR; its events subscribed through a
//! cookie and through an eventfd; QUERY_CQ through DevX; QUERY_QP of a
//! verbs QP through DevX. (Overrunning the DevX CQ on purpose, as
//! rdma-core's `tests/test_mlx5_devx_async_events.py` does, needs a DevX QP
//! feeding it; not written yet.)

use std::os::fd::AsFd;

use uverbs::{
    mlx5::{
        self, event_type, CmdIn, CmdOut, EventChannelFlags, OpenFlags, Target, UarKind, UmemAccess,
    },
    Context, ErrorKind,
};

use crate::support;

/// `DEVX_SET` of a field of the PRM layouts below (`mlx5_ifc.h`); the
/// offsets are constants of this program, so a refusal is a bug here.
fn set(buf: &mut [u8], off: usize, width: u32, value: u64) {
    assert!(
        mlx5::devx_set(buf, off, width, value),
        "no {width}-bit field at bit {off:#x}"
    );
}

#[test]
fn devx_on_the_device_under_test() {
    let ctx = support::open();
    match ctx.provider_name() {
        "mlx5" => mlx5_devx(ctx),
        other => {
            // Not mlx5: refused, naming the driver, before the kernel.
            let err = ctx.mlx5().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::UnsupportedProvider);
            assert!(err.to_string().contains(other), "{err}");
            let k = uverbs::sys::linux();
            let dev = uverbs::find_device(&k, Some(&crate::test_device())).unwrap();
            let err = mlx5::open_device(k, dev, OpenFlags::DEVX).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::UnsupportedProvider, "{err}");
        }
    }
}

/// The hardware part (mlx5 only).
fn mlx5_devx(_opened_without_devx: Context) {
    let k = uverbs::sys::linux();
    let dev = uverbs::find_device(&k, Some(&crate::test_device())).unwrap();
    let ctx = mlx5::open_device(k, dev, OpenFlags::DEVX).unwrap_or_else(|e| panic!("{e}"));
    let devx = ctx.mlx5().unwrap().devx().unwrap();
    let buf = devx.umem_reg(64 * 64, UmemAccess::LOCAL_WRITE).unwrap();
    let dbr = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE).unwrap();
    let uar = devx.alloc_uar(UarKind::NonCached).unwrap();
    let eqn = devx.query_eqn(0).unwrap();
    let mut cmd = vec![0u8; 272];
    CmdIn::new(0x400).write(&mut cmd);
    let cqc = 0x80;
    set(&mut cmd, cqc + 0x06, 1, 1);
    set(&mut cmd, cqc + 0x20, 32, u64::from(dbr.id()));
    set(&mut cmd, cqc + 0x63, 5, 6);
    set(&mut cmd, cqc + 0x68, 24, u64::from(uar.page_id()));
    set(&mut cmd, cqc + 0xb8, 8, u64::from(eqn));
    set(&mut cmd, 0x2c0, 32, u64::from(buf.id()));
    set(&mut cmd, 0x2e0, 1, 1);
    let mut out = vec![0u8; 16];
    let cq = devx
        .obj_create_using(&cmd, &mut out, &[&buf, &dbr, &uar])
        .unwrap_or_else(|e| panic!("DevX CREATE_CQ: {e}"));
    let cqn = CmdOut::read(&out).unwrap().obj_id & 0x00ff_ffff;
    // QUERY_CQ through DevX.
    let mut q = vec![0u8; 0x110];
    cq.query(
        &{
            let mut c = vec![0u8; 16];
            CmdIn::general(0x402, 0, cqn).write(&mut c);
            c
        },
        &mut q,
    )
    .unwrap();
    // Cookie and eventfd subscriptions on it.
    let ch = devx
        .create_event_channel(EventChannelFlags::empty())
        .unwrap();
    ch.subscribe(Some(&cq), &[event_type::CQ_ERROR], Target::Cookie(0x5eed))
        .unwrap();
    let efd: std::os::fd::OwnedFd = nix::sys::eventfd::EventFd::new().unwrap().into();
    ch.subscribe(Some(&cq), &[event_type::COMP], Target::EventFd(efd.as_fd()))
        .unwrap();
    assert_eq!(ch.try_get_event().unwrap(), None, "nothing happened yet");
    // QUERY_QP of a verbs QP through DevX.
    let pd = ctx.alloc_pd().unwrap();
    let vcq = ctx.create_cq(8, uverbs::CqOptions::default()).unwrap();
    let qp = pd
        .create_qp(&uverbs::QpInitAttr {
            qp_type: uverbs::QpType::Rc,
            send_cq: &vcq,
            recv_cq: &vcq,
            srq: None,
            cap: uverbs::QpCap {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            sq_sig_all: false,
        })
        .unwrap();
    let mut c = vec![0u8; 16];
    CmdIn::general(0x50b, 0, qp.qp_num()).write(&mut c);
    let mut qout = vec![0u8; 0x100];
    devx.qp_query(&qp, &c, &mut qout).unwrap();
    assert_eq!(CmdOut::read(&qout).unwrap().status, 0);
    cq.destroy().unwrap();
}
