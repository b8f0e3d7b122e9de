//! A destroy the kernel refuses, on the mlx5 device model: whatever the
//! kernel object may still use stays the library's, so the device never
//! writes memory the process gave back and its completions are never
//! attributed to another object (issue 27, item 1); an explicit destroy
//! gives the object back, usable, and the retry destroys it (issue 39,
//! items 1 and 2: address handles and PDs here, MRs and windows on the
//! fake rxe kernel in `tests/refused_destroy_fake.rs`).
//!
//! The model answers the destroy commands with `EBUSY` while told to
//! (`Mlx5Model::refuse_destroys`), as the kernel does for an object
//! something else still uses (a DevX QP on a verbs CQ, a flow on a QP),
//! and keeps using the objects; it refuses `DEALLOC_PD` on its own while a
//! QP, SRQ, MR or AH of any context sharing the PD uses it (the kernel's
//! `uverbs_free_pd`).

use std::os::fd::AsFd;

use uverbs::testing::mlx5::{fake_mlx5, Mlx5Model};
use uverbs::{
    sys::Errno, AccessFlags, Context, CqOptions, QpType, RecvWr, SendOp, SendWr, SrqAttr, UdDest,
    WcOpcode, WcStatus, WorkCompletion,
};

#[allow(unused_imports)]
use uverbs_test_support::mlx5_pair::{cap, connect, create_qp, gid, open, ud_pair, UdPair, QKEY};

/// Whether `addr` lies in one of this process's mappings.
fn mapped(addr: u64) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines().any(|line| {
        let range = line.split_whitespace().next().unwrap_or("");
        let (lo, hi) = range.split_once('-').unwrap_or(("0", "0"));
        let lo = u64::from_str_radix(lo, 16).unwrap_or(0);
        let hi = u64::from_str_radix(hi, 16).unwrap_or(0);
        (lo..hi).contains(&addr)
    })
}

fn poll_one(model: &Mlx5Model, cq: &mut uverbs::CompletionQueue) -> WorkCompletion {
    let mut wc = [WorkCompletion::default(); 1];
    for _ in 0..1000 {
        model.process();
        if cq.poll(&mut wc) == 1 {
            return wc[0];
        }
    }
    panic!("no completion");
}

/// A QP, an SRQ, a CQ and an MR whose destroys are refused: their queue
/// buffers, doorbell records and the MR's memory stay mapped, and the
/// device keeps using them; the QP's work still executes from its buffer
/// and completes under its own number on the CQ the program still polls.
#[test]
fn a_refused_destroy_leaves_the_device_memory_mapped_and_in_use() {
    let model = fake_mlx5();
    let ctx: Context = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let lone_cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let srq = pd.create_srq(SrqAttr::new(8, 1)).unwrap();
    let all = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let mr = pd.alloc_mr(4096, all).unwrap();
    let target = pd.alloc_mr(4096, all).unwrap();
    let mut a = create_qp(&pd, QpType::Rc, &cq, None, cap(8, 1, 0));
    let b = create_qp(&pd, QpType::Rc, &cq, None, cap(8, 1, 0));
    let g = gid(&ctx);
    connect(&a, b.qp_num(), g, 7);
    connect(&b, a.qp_num(), g, 7);

    let qp_info = model.qp(a.qp_num()).expect("QP a in the model");
    let cq_info = model
        .cq(model.cqn_of_handle(lone_cq.handle()).unwrap())
        .unwrap();
    let srq_info = model.srq(srq.srq_num()).expect("SRQ in the model");
    let mr_addr = mr.addr();

    // Work the device has not executed yet when the QP's handle goes.
    mr.write(0, b"still here").unwrap();
    let qp_num = a.qp_num();
    let sge = [mr.sge(0, 10).unwrap()];
    let mut wr = SendWr::new(
        42,
        SendOp::RdmaWrite {
            remote_addr: target.addr(),
            rkey: target.rkey(),
        },
        &sge,
    );
    wr.flags = uverbs::SendFlags::SIGNALED;
    a.post_send(&[wr]).unwrap();

    model.refuse_destroys(true);
    drop(a);
    assert!(
        srq.destroy().is_err(),
        "the model refuses the SRQ's destroy"
    );
    drop(lone_cq);
    drop(mr);
    model.refuse_destroys(false);

    for (what, addr) in [
        ("QP buffer", qp_info.buf),
        ("QP doorbell record", qp_info.db),
        ("CQ buffer", cq_info.buf),
        ("CQ doorbell record", cq_info.db),
        ("SRQ buffer", srq_info.buf),
        ("SRQ doorbell record", srq_info.db),
        ("MR memory", mr_addr),
    ] {
        assert!(mapped(addr), "the {what} at {addr:#x} was unmapped");
    }

    // The device still runs the QP from its buffer and completes the work
    // under the QP's number (its user index was not given back).
    let wc = poll_one(&model, &mut cq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.qp_num),
        (42, WcStatus::SUCCESS, WcOpcode::RDMA_WRITE, qp_num)
    );
    let mut got = [0u8; 10];
    target.read(0, &mut got).unwrap();
    assert_eq!(&got, b"still here");

    // The device writes the refused CQ: into memory the library kept.
    let mut cqe = [0u8; 64];
    cqe[63] = 0xf0; // an invalid CQE's opcode: nothing else reads it
    assert!(
        model.inject_cqe(cq_info.cqn, cqe),
        "the CQ lives on in the model"
    );

    // A QP made now gets neither the leaked QP's user index nor its bfreg.
    let c = create_qp(&pd, QpType::Rc, &cq, None, cap(8, 1, 0));
    let c_info = model.qp(c.qp_num()).unwrap();
    assert_ne!(c_info.uidx, qp_info.uidx, "user index reused");
    assert!(
        c_info.bfreg_index.is_none() || c_info.bfreg_index != qp_info.bfreg_index,
        "bfreg reused"
    );
    drop(c);
    drop(b);
}

/// An address handle whose destroy the kernel refuses comes back: UD
/// sends still reach their peer through it, and the retry destroys it
/// (before, the destroy consumed it: the handle was lost, the kernel AH
/// left to the drop's retry).
#[test]
fn a_refused_address_handle_comes_back_and_still_sends() {
    let UdPair {
        model,
        mut cq_a,
        mut cq_b,
        mut a,
        mut b,
        mr,
        ah,
        ..
    } = ud_pair();
    let handle = ah.handle();
    model.refuse_destroys(true);
    let e = ah.destroy().unwrap_err();
    assert_eq!(e.errno(), Errno::EBUSY, "{e}");
    assert_eq!(e.error().op(), "UVERBS_METHOD_AH_DESTROY");
    let ah = e.into_inner();
    assert_eq!(ah.handle(), handle);
    model.refuse_destroys(false);
    b.post_recv(&[RecvWr::new(5, &[mr.sge(0, 40 + 64).unwrap()])])
        .unwrap();
    let dest = UdDest::new(&ah, b.qp_num(), QKEY);
    a.post_send(&[SendWr::send(1, &[]).inline(b"after").to(dest)])
        .unwrap();
    assert_eq!(poll_one(&model, &mut cq_a).status, WcStatus::SUCCESS);
    let wc = poll_one(&model, &mut cq_b);
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (5, WcStatus::SUCCESS, 45)
    );
    ah.destroy().unwrap();
}

/// The kernel refuses to deallocate a PD that another context's objects
/// use (an importer's QP on the imported PD: `uverbs_free_pd`'s `usecnt`,
/// which this context's handles cannot see): the PD comes back, objects
/// are still made from it, the kernel refuses again while the QP lives,
/// and the retry after it is gone deallocates it.
#[test]
fn a_pd_the_kernel_refuses_for_another_contexts_qp_comes_back_usable() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let fd = ctx.dup_cmd_fd().unwrap();
    let imported = Context::import(model.dyn_kernel(), fd.as_fd()).unwrap();
    let ipd = imported.import_pd(pd.handle()).unwrap();
    let icq = imported.create_cq(8, CqOptions::default()).unwrap();
    let iqp = create_qp(&ipd, QpType::Rc, &icq, None, cap(4, 1, 0));
    let e = pd.destroy().unwrap_err();
    assert_eq!(e.errno(), Errno::EBUSY, "{e}");
    assert_eq!(
        e.error().op(),
        "UVERBS_METHOD_PD_DESTROY",
        "the kernel's answer"
    );
    let pd = e.into_inner();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    mr.destroy().unwrap();
    let pd = pd.destroy().unwrap_err().into_inner();
    iqp.destroy().unwrap();
    pd.destroy().unwrap();
    drop(ipd);
}
