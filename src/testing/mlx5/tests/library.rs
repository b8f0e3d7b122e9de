//! Tests of the device model through the provider's data path: that it ignores what hardware ignores
//! and flags what hardware would not do, so the end-to-end tests
//! (tests/mlx5_model.rs) can rely on its silence.

use std::sync::atomic::Ordering;

use super::super::{fake_mlx5, Mlx5Model};
use crate::{
    AccessFlags, Context, CqOptions, Gid, Mtu, QpAttr, QpCap, QpInitAttr, QpState, QpType,
    QueuePair, RecvWr, SendWr, WorkCompletion,
};

fn connect(qp: &QueuePair, remote: u32) {
    let mut a = QpAttr::with_state(QpState::Init);
    a.port_num = 1;
    a.qp_access_flags = AccessFlags::LOCAL_WRITE;
    qp.modify_to(&a).unwrap();
    a.qp_state = QpState::Rtr;
    a.path_mtu = Mtu(3);
    a.dest_qp_num = remote;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh = Some(crate::GlobalRoute {
        dgid: Gid([0; 16]),
        sgid_index: 1,
        ..Default::default()
    });
    qp.modify_to(&a).unwrap();
    a.qp_state = QpState::Rts;
    a.rnr_retry = 7;
    qp.modify_to(&a).unwrap();
}

/// A QP connected to itself with two receives posted, and its CQ.
fn looped(
    model: &Mlx5Model,
) -> (
    Context,
    crate::CompletionQueue,
    QueuePair,
    crate::MemoryRegion,
) {
    let ctx = Context::open_with(model.dyn_kernel(), None).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let mut qp = pd
        .create_qp(&QpInitAttr {
            context: 0,
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            srq: None,
            cap: QpCap {
                max_send_wr: 8,
                max_recv_wr: 8,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 32,
            },
            sq_sig_all: false,
        })
        .unwrap();
    connect(&qp, qp.qp_num());
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let sge = [mr.sge(0, 64).unwrap()];
    qp.post_recv(&[RecvWr::new(1, &sge), RecvWr::new(2, &sge)])
        .unwrap();
    (ctx, cq, qp, mr)
}

/// Moves every doorbell written so far from the QP's UAR to another UAR
/// page, as a library ringing the wrong UAR would have written it.
fn move_doorbells_to_another_uar(model: &Mlx5Model, qpn: u32) {
    let h = model.hca();
    let id = h.qps[&qpn].uar;
    let from = h.uars.iter().find(|u| u.page_id == id).expect("QP's UAR");
    let to = h
        .uars
        .iter()
        .find(|u| u.page_id != id)
        .expect("another UAR");
    for reg in (0x800..0x1000).step_by(8) {
        let v = from.word(reg).swap(0, Ordering::Relaxed);
        to.word(reg).store(v, Ordering::Relaxed);
    }
}

#[test]
fn a_doorbell_on_another_uar_is_ignored() {
    let model = fake_mlx5();
    let (_ctx, mut cq, mut qp, _mr) = looped(&model);
    qp.post_send(&[SendWr::send(7, &[]).inline(b"lost")])
        .unwrap();
    move_doorbells_to_another_uar(&model, qp.qp_num());
    assert_eq!(model.process(), 0, "nothing executed");
    let mut wc = [WorkCompletion::default(); 4];
    assert_eq!(cq.poll(&mut wc), 0);
    let ignored = model.ignored_doorbells();
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    assert!(ignored[0].contains("on UAR"), "{ignored:?}");
    // The next doorbell, on the right UAR, runs both WQEs (the device
    // fetches up to the doorbell record).
    qp.post_send(&[SendWr::send(8, &[]).inline(b"found")])
        .unwrap();
    assert_eq!(model.process(), 2);
}

#[test]
fn a_blueflame_copy_that_differs_from_the_wqe_is_flagged() {
    let model = fake_mlx5();
    let (_ctx, _cq, mut qp, _mr) = looped(&model);
    // One inline WQE: the library copies it to the BlueFlame register.
    qp.post_send(&[SendWr::send(7, &[]).inline(b"blue flame")])
        .unwrap();
    {
        let h = model.hca();
        let id = h.qps[&qp.qp_num()].uar;
        let page = h.uars.iter().find(|u| u.page_id == id).unwrap();
        // Corrupt a data word of whichever half holds the copy.
        for reg in [0x800usize, 0x900, 0xa00, 0xb00] {
            if page.word(reg).load(Ordering::Relaxed) != 0 {
                page.word(reg + 24).fetch_xor(0xff, Ordering::Relaxed);
            }
        }
    }
    model.process();
    let v = model.violations();
    assert!(v.iter().any(|m| m.contains("BlueFlame")), "{v:?}");
}
