//! The QP, SRQ and AH entry points on the fake rxe kernel: what they write
//! into the C structs, the errno conventions, and how posted chains reach
//! the rings (`*bad_wr` included).

use core::{ffi::c_int, ptr::null_mut};

use uverbs::testing::rxe::{fake_rxe, FakeRxe, DEV, IPV4_GID};

use super::*;
use crate::{
    cq::{ibv_create_cq, ibv_destroy_cq},
    layout::{
        device::ibv_gid,
        qp::{
            ibv_ah_attr, ibv_global_route, ibv_send_wr_ext, ibv_send_wr_imm, ibv_send_wr_qp_type,
            ibv_send_wr_rdma, ibv_send_wr_tso, ibv_send_wr_ud, ibv_send_wr_wr, ibv_send_wr_xrc,
            ibv_sge, ibv_srq_attr, ibv_srq_init_attr,
        },
    },
    pd::{ibv_alloc_pd, ibv_dealloc_pd},
    srq::{ibv_create_srq, ibv_destroy_srq, ibv_modify_srq},
};

/// A fake rxe device opened, with a PD and a CQ (shared with `qp_ex`'s
/// tests).
pub(crate) struct Env {
    pub(crate) fake: std::sync::Arc<FakeRxe>,
    pub(crate) ctx: *mut ibv_context,
    pub(crate) pd: *mut ibv_pd,
    pub(crate) cq: *mut ibv_cq,
}

pub(crate) fn env() -> Env {
    let fake = fake_rxe();
    let uv = uverbs::Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let ctx = crate::context::Context::create(uv, null_mut(), -1, -1);
    // SAFETY: a live context.
    let pd = unsafe { ibv_alloc_pd(ctx) };
    assert!(!pd.is_null());
    // SAFETY: a live context.
    let cq = unsafe { ibv_create_cq(ctx, 16, null_mut(), null_mut(), 0) };
    assert!(!cq.is_null());
    Env { fake, ctx, pd, cq }
}

pub(crate) fn init_attr(e: &Env, qp_type: c_int, srq: *mut ibv_srq) -> ibv_qp_init_attr {
    ibv_qp_init_attr {
        qp_context: 0x77 as *mut c_void,
        send_cq: e.cq,
        recv_cq: e.cq,
        srq,
        cap: ibv_qp_cap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 2,
            max_recv_sge: 2,
            max_inline_data: 16,
        },
        qp_type,
        sq_sig_all: 0,
    }
}

pub(crate) fn blank_attr() -> ibv_qp_attr {
    let ah = ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid { raw: [0; 16] },
            flow_label: 0,
            sgid_index: 0,
            hop_limit: 0,
            traffic_class: 0,
        },
        dlid: 0,
        sl: 0,
        src_path_bits: 0,
        static_rate: 0,
        is_global: 0,
        port_num: 0,
    };
    ibv_qp_attr {
        qp_state: 0,
        cur_qp_state: 0,
        path_mtu: 0,
        path_mig_state: 0,
        qkey: 0,
        rq_psn: 0,
        sq_psn: 0,
        dest_qp_num: 0,
        qp_access_flags: 0,
        cap: ibv_qp_cap::default(),
        ah_attr: ah,
        alt_ah_attr: ah,
        pkey_index: 0,
        alt_pkey_index: 0,
        en_sqd_async_notify: 0,
        sq_draining: 0,
        max_rd_atomic: 0,
        max_dest_rd_atomic: 0,
        min_rnr_timer: 0,
        port_num: 0,
        timeout: 0,
        retry_cnt: 0,
        rnr_retry: 0,
        alt_port_num: 0,
        alt_timeout: 0,
        rate_limit: 0,
    }
}

/// RESET → INIT → RTR → RTS for an RC QP talking to itself (`qp_num`).
pub(crate) fn to_rts(qp: *mut ibv_qp, qp_num: u32) {
    to_rts_at(qp, qp_num, IPV4_GID);
}

/// [`to_rts`] towards the port's GID 1, `dgid`.
pub(crate) fn to_rts_at(qp: *mut ibv_qp, qp_num: u32, dgid: [u8; 16]) {
    let mut a = blank_attr();
    a.qp_state = 1;
    a.port_num = 1;
    a.qp_access_flags = 0x7;
    // SAFETY: a live QP.
    assert_eq!(
        // SAFETY: live objects of this library.
        unsafe { ibv_modify_qp(qp, &mut a, 1 | (1 << 3) | (1 << 4) | (1 << 5)) },
        0
    );
    // SAFETY: a live QP.
    assert_eq!(unsafe { (*qp).state.load(Ordering::Relaxed) }, 1);
    let mut a = blank_attr();
    a.qp_state = 2;
    a.path_mtu = 3;
    a.dest_qp_num = qp_num;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid.raw = dgid;
    a.ah_attr.grh.sgid_index = 1;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    let mask = 1 | (1 << 7) | (1 << 8) | (1 << 20) | (1 << 12) | (1 << 17) | (1 << 15);
    // SAFETY: a live QP.
    assert_eq!(unsafe { ibv_modify_qp(qp, &mut a, mask) }, 0);
    let mut a = blank_attr();
    a.qp_state = 3;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    let mask = 1 | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 16) | (1 << 13);
    // SAFETY: a live QP.
    assert_eq!(unsafe { ibv_modify_qp(qp, &mut a, mask) }, 0);
    // SAFETY: a live QP.
    assert_eq!(unsafe { (*qp).state.load(Ordering::Relaxed) }, 3);
}

fn send_wr(opcode: c_int, sge: &mut ibv_sge, flags: u32) -> ibv_send_wr {
    ibv_send_wr {
        wr_id: 0,
        next: null_mut(),
        sg_list: sge,
        num_sge: 1,
        opcode,
        send_flags: flags,
        imm_data: ibv_send_wr_imm { imm_data: 0 },
        wr: ibv_send_wr_wr {
            rdma: ibv_send_wr_rdma {
                remote_addr: 0x1000,
                rkey: 5,
            },
        },
        qp_type: ibv_send_wr_qp_type {
            xrc: ibv_send_wr_xrc { remote_srqn: 0 },
        },
        bind_mw: ibv_send_wr_ext {
            tso: ibv_send_wr_tso {
                hdr: null_mut(),
                hdr_sz: 0,
                mss: 0,
            },
        },
    }
}

#[test]
fn an_rc_qp_is_created_moved_to_rts_queried_posted_to_and_destroyed() {
    let e = env();
    let mut ia = init_attr(&e, 2, null_mut());
    // SAFETY: live objects.
    let qp = unsafe { ibv_create_qp(e.pd, &mut ia) };
    assert!(!qp.is_null());
    // SAFETY: the QP just made.
    let base = unsafe { &*qp };
    assert_eq!((base.pd, base.send_cq, base.recv_cq), (e.pd, e.cq, e.cq));
    assert_eq!(
        (
            base.state.load(Ordering::Relaxed),
            base.qp_type,
            base.context
        ),
        (0, 2, e.ctx)
    );
    assert_eq!(base.qp_context as usize, 0x77);
    assert!(base.qp_num != 0);
    assert!(ia.cap.max_send_wr >= 4 && ia.cap.max_recv_wr >= 4);

    // Receives: a chain of three lands in the receive ring.
    let handle = base.handle;
    let rq = e.fake.rq_ring(handle).unwrap();
    let mut buf = [0u8; 64];
    let mut sge = ibv_sge {
        addr: buf.as_mut_ptr() as u64,
        length: 64,
        lkey: 1,
    };
    let mut r = [ibv_recv_wr {
        wr_id: 0,
        next: null_mut(),
        sg_list: &mut sge,
        num_sge: 1,
    }; 3];
    r[0].next = &mut r[1];
    r[1].next = &mut r[2];
    let mut bad = null_mut();
    // RESET refuses receives (rxe: EINVAL), naming the first.
    // SAFETY: live objects.
    assert_eq!(
        // SAFETY: live objects of this library.
        unsafe { post_recv(qp, &mut r[0], &mut bad) },
        Errno::EINVAL as c_int
    );
    assert_eq!(bad, &raw mut r[0]);

    let mut a = blank_attr();
    // SAFETY: live objects of this library.
    let rc = unsafe { ibv_modify_qp(qp, &mut a, 1 | (1 << 21)) };
    assert_eq!(
        rc,
        Errno::EOPNOTSUPP as c_int,
        "the kernel's answer to a legacy bit"
    );
    to_rts(qp, base.qp_num);
    let before = rq.producer();
    // SAFETY: live objects.
    assert_eq!(unsafe { post_recv(qp, &mut r[0], &mut bad) }, 0);
    assert!(bad.is_null());
    assert_eq!(rq.producer().wrapping_sub(before), 3);

    // Query (the fake kernel has no QUERY_QP: the guest runs check the
    // attributes): masks from IBV_QP_RATE_LIMIT up are refused first.
    let mut got = blank_attr();
    // SAFETY: an all-zero struct of integers and pointers.
    let mut gi: ibv_qp_init_attr = unsafe { core::mem::zeroed() };
    // SAFETY: live objects.
    assert_eq!(
        // SAFETY: live objects of this library.
        unsafe { ibv_query_qp(qp, &mut got, 1 << 25, &mut gi) },
        Errno::EOPNOTSUPP as c_int
    );

    // Sends: a chain whose second request has an opcode this post does
    // not take (TSO): the first goes, `bad_wr` names the second.
    let sq = e.fake.sq_ring(handle).unwrap();
    let mut s = [
        send_wr(2, &mut sge, 2),
        send_wr(10, &mut sge, 2),
        send_wr(0, &mut sge, 2),
    ];
    s[0].next = &mut s[1];
    s[1].next = &mut s[2];
    let mut bad = null_mut();
    let before = sq.producer();
    // SAFETY: live objects.
    let rc = unsafe { post_send(qp, &mut s[0], &mut bad) };
    assert_eq!(rc, Errno::EOPNOTSUPP as c_int);
    assert_eq!(bad, &raw mut s[1]);
    assert_eq!(sq.producer().wrapping_sub(before), 1);
    sq.consume_all();

    // Inline data longer than the QP takes: EINVAL at that request.
    let mut big = [0u8; 64];
    let mut long = ibv_sge {
        addr: big.as_mut_ptr() as u64,
        length: 64,
        lkey: 0,
    };
    let mut w = send_wr(2, &mut long, 2 | 8);
    // SAFETY: live objects.
    assert_eq!(
        // SAFETY: live objects of this library.
        unsafe { post_send(qp, &mut w, &mut bad) },
        Errno::EINVAL as c_int
    );
    assert_eq!(bad, &raw mut w);
    // Inline data that fits, two SGEs gathered.
    let mut two = [
        ibv_sge {
            addr: big.as_mut_ptr() as u64,
            length: 4,
            lkey: 0,
        },
        ibv_sge {
            addr: big.as_mut_ptr() as u64 + 8,
            length: 4,
            lkey: 0,
        },
    ];
    let mut w = send_wr(2, &mut two[0], 2 | 8);
    w.num_sge = 2;
    // SAFETY: live objects.
    assert_eq!(unsafe { post_send(qp, &mut w, &mut bad) }, 0);
    sq.consume_all();

    // A full queue: ENOMEM at the first request that does not fit.
    let n = 1024;
    let mut many: Vec<ibv_send_wr> = (0..n).map(|_| send_wr(2, &mut sge, 0)).collect();
    for i in 0..n - 1 {
        let next = &raw mut many[i + 1];
        many[i].next = next;
    }
    // SAFETY: live objects.
    let rc = unsafe { post_send(qp, &mut many[0], &mut bad) };
    assert_eq!(rc, Errno::ENOMEM as c_int);
    let at = (0..n).find(|&i| core::ptr::eq(bad, &many[i])).unwrap();
    assert!(at >= ia.cap.max_send_wr as usize, "bad_wr at {at}");

    // SAFETY: live objects, given up.
    unsafe {
        assert_eq!(
            ibv_destroy_cq(e.cq),
            Errno::EBUSY as c_int,
            "the QP uses it"
        );
        assert_eq!(ibv_destroy_qp(qp), 0);
        assert_eq!(ibv_destroy_cq(e.cq), 0);
        assert_eq!(ibv_dealloc_pd(e.pd), 0);
    }
}

#[test]
fn create_qp_ex_takes_the_pd_from_its_attributes_and_refuses_what_uverbs_lacks() {
    let e = env();
    let base = init_attr(&e, 4, null_mut());
    // SAFETY: an all-zero struct of integers and pointers.
    let mut ex: ibv_qp_init_attr_ex = unsafe { core::mem::zeroed() };
    ex.qp_context = base.qp_context;
    ex.send_cq = base.send_cq;
    ex.recv_cq = base.recv_cq;
    ex.cap = base.cap;
    ex.qp_type = 4;
    ex.pd = e.pd;
    ex.comp_mask = 1 << 1; // XRCD
                           // SAFETY: live objects.
    unsafe {
        assert!(create_qp_ex(e.ctx, &mut ex).is_null());
        assert_eq!(Errno::last(), Errno::EOPNOTSUPP);
        ex.comp_mask = 0;
        assert!(create_qp_ex(e.ctx, &mut ex).is_null());
        assert_eq!(Errno::last(), Errno::EINVAL);
        ex.comp_mask = 1 | (1 << 2);
        ex.create_flags = 1 << 1;
        assert!(create_qp_ex(e.ctx, &mut ex).is_null());
        assert_eq!(Errno::last(), Errno::EOPNOTSUPP);
        ex.create_flags = 0;
        let qp = create_qp_ex(e.ctx, &mut ex);
        assert!(!qp.is_null());
        assert_eq!((*qp).qp_type, 4);
        assert_eq!(ibv_destroy_qp(qp), 0);
    }
}

#[test]
fn srq_and_ud_paths() {
    let e = env();
    let mut sia = ibv_srq_init_attr {
        srq_context: 0x55 as *mut c_void,
        attr: ibv_srq_attr {
            max_wr: 8,
            max_sge: 1,
            srq_limit: 0,
        },
    };
    // SAFETY: live objects.
    let srq = unsafe { ibv_create_srq(e.pd, &mut sia) };
    assert!(!srq.is_null());
    assert!(sia.attr.max_wr >= 8);
    // SAFETY: the SRQ just made.
    assert_eq!(
        // SAFETY: live objects of this library.
        unsafe { ((*srq).pd, (*srq).srq_context as usize) },
        (e.pd, 0x55)
    );
    let mut ia = init_attr(&e, 4, srq);
    // SAFETY: live objects.
    let qp = unsafe { ibv_create_qp(e.pd, &mut ia) };
    assert!(!qp.is_null());
    let mut a = ibv_srq_attr {
        max_wr: 16,
        max_sge: 1,
        srq_limit: 2,
    };
    let mut buf = [0u8; 64];
    let mut sge = ibv_sge {
        addr: buf.as_mut_ptr() as u64,
        length: 64,
        lkey: 1,
    };
    let mut r = ibv_recv_wr {
        wr_id: 1,
        next: null_mut(),
        sg_list: &mut sge,
        num_sge: 1,
    };
    let mut bad = null_mut();
    // SAFETY: the SRQ just made.
    let ring = e.fake.srq_ring(unsafe { (*srq).handle }).unwrap();
    // SAFETY: live objects.
    unsafe {
        assert_eq!(ibv_modify_srq(srq, &mut a, 1), Errno::EOPNOTSUPP as c_int);
        let before = ring.producer();
        assert_eq!(crate::srq::post_srq_recv(srq, &mut r, &mut bad), 0);
        assert_eq!(ring.producer().wrapping_sub(before), 1);
        let mut n = 0u32;
        assert_eq!(crate::srq::get_srq_num(srq, &mut n), 0);
        assert_eq!(
            ibv_destroy_srq(srq),
            Errno::EBUSY as c_int,
            "the QP uses it"
        );
    }

    // UD: a send without an address handle is refused (the fake kernel
    // has no CREATE_AH: the guest's ibv_ud_pingpong posts to real ones).
    let mut w = send_wr(2, &mut sge, 2);
    w.wr = ibv_send_wr_wr {
        ud: ibv_send_wr_ud {
            ah: null_mut(),
            remote_qpn: 0x11,
            remote_qkey: 0x1111,
        },
    };
    let mut bad = null_mut();
    // SAFETY: live objects.
    unsafe {
        let mut a = blank_attr();
        a.qp_state = 1;
        a.port_num = 1;
        a.qkey = 0x1111;
        assert_eq!(
            ibv_modify_qp(qp, &mut a, 1 | (1 << 4) | (1 << 5) | (1 << 6)),
            0
        );
        a.qp_state = 2;
        assert_eq!(ibv_modify_qp(qp, &mut a, 1), 0);
        a.qp_state = 3;
        assert_eq!(ibv_modify_qp(qp, &mut a, 1 | (1 << 16)), 0);
        assert_eq!(post_send(qp, &mut w, &mut bad), Errno::EINVAL as c_int);
        assert_eq!(bad, &raw mut w);
        assert_eq!(ibv_destroy_qp(qp), 0);
        assert_eq!(ibv_destroy_srq(srq), 0);
    }
}

/// Receives go through the split-off receive queue's own lock: a post of
/// receives completes while another thread holds the send side (the QP's
/// lock, which sends, modifies and queries take), as libibverbs' providers
/// lock a QP's two queues apart.
#[test]
fn receives_are_posted_while_another_thread_holds_the_send_side() {
    let e = env();
    let mut ia = init_attr(&e, 2, null_mut());
    // SAFETY: live objects.
    let qp = unsafe { ibv_create_qp(e.pd, &mut ia) };
    assert!(!qp.is_null());
    // SAFETY: the QP just made.
    let (handle, qp_num) = unsafe { ((*qp).handle, (*qp).qp_num) };
    to_rts(qp, qp_num);
    let rq = e.fake.rq_ring(handle).unwrap();
    // SAFETY: a live QP of this library.
    let q = unsafe { Qp::from_c(qp) }.unwrap();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let addr = qp as usize;
    std::thread::scope(|s| {
        s.spawn(move || {
            q.qp.posting(|_, _| {
                held_tx.send(()).unwrap();
                // Hold the send side until the receive is in.
                let _ = done_rx.recv_timeout(std::time::Duration::from_secs(20));
            })
            .unwrap();
        });
        held_rx.recv().unwrap();
        let before = rq.producer();
        let poster = s.spawn(move || {
            let mut buf = [0u8; 64];
            let mut sge = ibv_sge {
                addr: buf.as_mut_ptr() as u64,
                length: 64,
                lkey: 1,
            };
            let mut r = ibv_recv_wr {
                wr_id: 9,
                next: null_mut(),
                sg_list: &mut sge,
                num_sge: 1,
            };
            let mut bad = null_mut();
            // SAFETY: a live QP of this library and a valid request.
            unsafe { post_recv(addr as *mut ibv_qp, &mut r, &mut bad) }
        });
        let start = std::time::Instant::now();
        while !poster.is_finished() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "a receive waited for the thread holding the send side"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(poster.join().unwrap(), 0);
        assert_eq!(rq.producer().wrapping_sub(before), 1);
        done_tx.send(()).unwrap();
    });
    // SAFETY: live objects, destroyed in order.
    unsafe {
        assert_eq!(ibv_destroy_qp(qp), 0);
    }
}
