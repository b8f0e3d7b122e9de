//! CQs, completion channels and their events through the C entry points,
//! on uverbs' fake rxe kernel (`uverbs::testing::rxe`).

use core::{
    ffi::{c_void, CStr},
    ptr::null_mut,
    sync::atomic::Ordering,
};
use std::{
    sync::{mpsc, Arc},
    thread,
    time::Duration,
};

use uverbs::{
    abi::IbUverbsWc,
    testing::rxe::{fake_rxe, FakeRxe, Kind, DEV},
    AsyncEventType,
};

use super::*;
use crate::comp_channel::{
    ibv_create_comp_channel, ibv_destroy_comp_channel, ibv_get_cq_event, ibv_wc_status_str,
};

/// A C context over the fake kernel; closed when dropped.
pub(crate) struct Rig {
    pub(crate) fake: Arc<FakeRxe>,
    pub(crate) ctx: *mut ibv_context,
}

impl Rig {
    pub(crate) fn new() -> Rig {
        let fake = fake_rxe();
        let uv = uverbs::Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
        let ctx = Context::create(uv, null_mut(), -1, -1);
        Rig { fake, ctx }
    }

    fn uv(&self) -> &uverbs::Context {
        // SAFETY: the context is open until the rig drops.
        &unsafe { Context::from_c(self.ctx) }.unwrap().uv
    }

    fn cq(&self, cq_context: usize, channel: *mut ibv_comp_channel) -> *mut ibv_cq {
        // SAFETY: the rig's context; `channel` is NULL or one of its channels.
        let cq = unsafe { ibv_create_cq(self.ctx, 8, cq_context as *mut c_void, channel, 0) };
        assert!(!cq.is_null(), "{}", std::io::Error::last_os_error());
        cq
    }

    fn handle(cq: *mut ibv_cq) -> u32 {
        // SAFETY: a live CQ of the test.
        unsafe { (*cq).handle }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // SAFETY: the rig's context, closed once.
        unsafe { Context::destroy(self.ctx) }.unwrap();
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A raw pointer that a test thread may carry.
#[derive(Clone, Copy)]
struct Send<T>(*mut T);
// SAFETY: the tests hand the library's thread-safe objects to threads.
unsafe impl<T> std::marker::Send for Send<T> {}

#[test]
fn a_cq_is_an_ibv_cq_ex_with_the_programs_context_and_its_polling_ops() {
    let r = Rig::new();
    // SAFETY: the rig's context.
    let ch = unsafe { ibv_create_comp_channel(r.ctx) };
    assert!(!ch.is_null());
    let cq = r.cq(0x1234, ch);
    // SAFETY: live objects of the test.
    unsafe {
        let c = &(*cq.cast::<Cq>()).c;
        assert_eq!(c.context, r.ctx);
        assert_eq!(c.channel, ch);
        assert_eq!(c.cq_context as usize, 0x1234);
        assert!(c.cqe.load(Ordering::Relaxed) >= 8);
        assert_eq!(c.comp_mask, 0);
        // Every CQ polls in ibv_start_poll sessions too (cq_ex.rs).
        assert!(c.start_poll.is_some() && c.read_completion_wallclock_ns.is_some());
        assert!(r.fake.cq_ring(c.handle).is_some());
        assert_eq!((*ch).refcnt.load(Ordering::Relaxed), 1);
        // A channel a CQ uses is not destroyed.
        assert_eq!(ibv_destroy_comp_channel(ch), libc::EBUSY);
        assert_eq!(ibv_resize_cq(cq, 16), 0);
        assert_eq!(c.cqe.load(Ordering::Relaxed), 31);
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!((*ch).refcnt.load(Ordering::Relaxed), 0);
        assert_eq!(ibv_destroy_comp_channel(ch), 0);
    }
}

#[test]
fn bad_arguments_give_the_errno_libibverbs_and_the_kernel_give() {
    let r = Rig::new();
    // SAFETY: the rig's context, and NULLs the functions must refuse.
    unsafe {
        let vectors = (*r.ctx).num_comp_vectors;
        assert!(ibv_create_cq(r.ctx, 8, null_mut(), null_mut(), vectors + 1).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert!(ibv_create_cq(r.ctx, 8, null_mut(), null_mut(), -1).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert!(ibv_create_cq(r.ctx, -1, null_mut(), null_mut(), 0).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert!(ibv_create_cq(null_mut(), 8, null_mut(), null_mut(), 0).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert_eq!(ibv_destroy_cq(null_mut()), libc::EINVAL);
        assert_eq!(ibv_destroy_comp_channel(null_mut()), libc::EINVAL);
        assert!(ibv_create_comp_channel(null_mut()).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        let (mut cq, mut cqc) = (null_mut(), null_mut());
        assert_eq!(ibv_get_cq_event(null_mut(), &mut cq, &mut cqc), -1);
        assert_eq!(last_errno(), libc::EINVAL);
        assert_eq!(poll_cq(null_mut(), 1, null_mut()), -libc::EINVAL);
        assert_eq!(req_notify_cq(null_mut(), 0), libc::EINVAL);
    }
}

#[test]
fn poll_gives_the_kernels_completion_as_rdma_cores_rxe_copies_it() {
    let r = Rig::new();
    let cq = r.cq(0, null_mut());
    let ring = r.fake.cq_ring(Rig::handle(cq)).unwrap();
    let imm = IbUverbsWc {
        wr_id: 7,
        opcode: 129, // RECV_RDMA_WITH_IMM
        byte_len: 64,
        ex: 0x1122_3344u32.to_be(), // __be32 as the kernel writes it
        qp_num: 17,
        src_qp: 18,
        wc_flags: 1 | 2, // GRH | WITH_IMM
        pkey_index: 3,
        sl: 2,
        ..IbUverbsWc::default()
    };
    let inv = IbUverbsWc {
        wr_id: 8,
        opcode: 128,
        status: 10,
        vendor_err: 0x55,
        ex: 0xabcd,  // invalidate_rkey, host order
        wc_flags: 4, // IB_WC_WITH_INVALIDATE, as rxe's kernel writes it
        slid: 9,
        dlid_path_bits: 1,
        ..IbUverbsWc::default()
    };
    assert!(ring.post_cqe(&imm) && ring.post_cqe(&inv));
    let mut wc = [ibv_wc::default(); 4];
    // SAFETY: a live CQ; room for 4.
    let n = unsafe { poll_cq(cq, 4, wc.as_mut_ptr()) };
    assert_eq!(n, 2);
    for (got, k) in wc.iter().zip([imm, inv]) {
        let want = ibv_wc {
            wr_id: k.wr_id,
            status: k.status,
            opcode: k.opcode,
            vendor_err: k.vendor_err,
            byte_len: k.byte_len,
            imm_data: k.ex,
            qp_num: k.qp_num,
            src_qp: k.src_qp,
            wc_flags: k.wc_flags,
            pkey_index: k.pkey_index,
            slid: k.slid,
            sl: k.sl,
            dlid_path_bits: k.dlid_path_bits,
        };
        assert_eq!(*got, want);
    }
    // SAFETY: as above.
    unsafe {
        assert_eq!(poll_cq(cq, 4, wc.as_mut_ptr()), 0);
        assert_eq!(poll_cq(cq, 0, null_mut()), 0);
        assert_eq!(ibv_destroy_cq(cq), 0);
    }
}

#[test]
fn more_completions_than_one_round_are_polled_in_one_call() {
    let r = Rig::new();
    // SAFETY: the rig's context.
    let cq = unsafe { ibv_create_cq(r.ctx, 63, null_mut(), null_mut(), 0) };
    assert!(!cq.is_null(), "{}", std::io::Error::last_os_error());
    let ring = r.fake.cq_ring(Rig::handle(cq)).unwrap();
    for i in 0..40 {
        let k = IbUverbsWc {
            wr_id: i,
            ..IbUverbsWc::default()
        };
        assert!(ring.post_cqe(&k));
    }
    let mut wc = [ibv_wc::default(); 40];
    // SAFETY: a live CQ; room for 35, then 40.
    unsafe {
        assert_eq!(poll_cq(cq, 35, wc.as_mut_ptr()), 35);
        assert_eq!(poll_cq(cq, 40, wc.as_mut_ptr()), 5);
        assert_eq!(wc[4].wr_id, 39);
        assert_eq!(ibv_destroy_cq(cq), 0);
    }
}

#[test]
fn resize_keeps_waiting_completions_and_reports_the_kernels_size_or_its_errno() {
    let r = Rig::new();
    let cq = r.cq(0, null_mut());
    let post = |ids: core::ops::Range<u64>| {
        let ring = r.fake.cq_ring(Rig::handle(cq)).unwrap();
        for wr_id in ids {
            assert!(ring.post_cqe(&IbUverbsWc {
                wr_id,
                ..IbUverbsWc::default()
            }));
        }
    };
    // SAFETY: a live CQ of the test.
    let cqe = || unsafe { (*cq.cast::<Cq>()).c.cqe.load(Ordering::Relaxed) };
    let before = cqe();
    post(0..10);
    let mut wc = [ibv_wc::default(); 40];
    // SAFETY: a live CQ (or NULL); room for 40.
    unsafe {
        assert_eq!(ibv_resize_cq(null_mut(), 10), libc::EINVAL);
        // Below the 10 waiting, 0, negative, above max_cqe: the kernel's EINVAL.
        for bad in [9, 0, -1, 1 << 20] {
            assert_eq!(ibv_resize_cq(cq, bad), libc::EINVAL, "cqe {bad}");
            assert_eq!(cqe(), before);
        }
        assert_eq!(ibv_resize_cq(cq, 100), 0);
        assert_eq!(cqe(), 127);
        post(10..110);
        assert_eq!(poll_cq(cq, 40, wc.as_mut_ptr()), 40);
        assert_eq!(wc.map(|w| w.wr_id), core::array::from_fn(|i| i as u64));
        assert_eq!(ibv_resize_cq(cq, 70), 0);
        assert_eq!(cqe(), 127, "70 waiting and one free: 128 slots");
        assert_eq!(ibv_resize_cq(cq, 69), libc::EINVAL);
        let mut got = 40;
        while got < 110 {
            let n = poll_cq(cq, 40, wc.as_mut_ptr());
            assert!(n > 0);
            for (i, w) in wc[..n as usize].iter().enumerate() {
                assert_eq!(w.wr_id, (got + i) as u64);
            }
            got += n as usize;
        }
        assert_eq!(ibv_resize_cq(cq, 8), 0);
        assert_eq!(cqe(), 15);
        assert_eq!(ibv_destroy_cq(cq), 0);
    }
}

/// `wc_flags` reach the program in the numbering uverbs gives for the
/// device (libmlx5's `enum ibv_wc_flags` of verbs.h: `IBV_WC_WITH_INV = 1
/// << 3`, `IBV_WC_IP_CSUM_OK = 1 << 2`; rxe's, the kernel's as written),
/// and a CQ takes its context's.
#[test]
fn wc_flags_reach_the_program_in_the_numbering_of_the_device() {
    let w = |f: u32| {
        let mut v = WorkCompletion::default();
        v.wc_flags = WcFlags::from_bits_retain(f);
        v
    };
    assert_eq!(to_c(&w(4), WcFlagsNumbering::Verbs).wc_flags, 1 << 3);
    assert_eq!(to_c(&w(8), WcFlagsNumbering::Verbs).wc_flags, 1 << 2);
    assert_eq!(to_c(&w(1 | 2), WcFlagsNumbering::Verbs).wc_flags, 1 | 2);
    assert_eq!(to_c(&w(4), WcFlagsNumbering::Kernel).wc_flags, 4);
    let r = Rig::new();
    let cq = r.cq(0, null_mut());
    // SAFETY: the rig's live CQ.
    let c = unsafe { Cq::from_c(cq) }.unwrap();
    assert_eq!(c.wc_flags, r.uv().wc_flags_numbering());
    assert_eq!(c.wc_flags, WcFlagsNumbering::Kernel, "rdma-core's rxe");
    // SAFETY: as above; not used after.
    assert_eq!(unsafe { ibv_destroy_cq(cq) }, 0);
}

#[test]
fn an_event_comes_back_with_the_cq_and_its_context_and_destroy_waits_for_its_ack() {
    let r = Rig::new();
    // SAFETY: the rig's context.
    let ch = unsafe { ibv_create_comp_channel(r.ctx) };
    let cq = r.cq(0xbeef, ch);
    // SAFETY: live objects of the test.
    unsafe {
        assert_eq!(req_notify_cq(cq, 0), 0);
        assert_eq!(r.fake.arms(), 1);
        assert!(r.fake.push_comp_event(Rig::handle(cq)));
        let (mut got, mut cqc) = (null_mut(), null_mut());
        assert_eq!(ibv_get_cq_event(ch, &mut got, &mut cqc), 0);
        assert_eq!(got, cq);
        assert_eq!(cqc as usize, 0xbeef);
    }
    let (done_tx, done_rx) = mpsc::channel();
    let p = Send(cq);
    let destroyer = thread::spawn(move || {
        let p = p;
        // SAFETY: the test's CQ, used by nobody after this.
        let rc = unsafe { ibv_destroy_cq(p.0) };
        done_tx.send(rc).unwrap();
    });
    // The kernel CQ goes at once; the C object waits for the ack.
    assert_eq!(
        done_rx.recv_timeout(Duration::from_millis(200)),
        Err(mpsc::RecvTimeoutError::Timeout)
    );
    assert_eq!(r.fake.destroyed(Kind::Cq).len(), 1);
    // SAFETY: the CQ lives until the destroy sees the ack.
    unsafe {
        assert_eq!(
            (*cq.cast::<Cq>())
                .c
                .comp_events_completed
                .load(Ordering::Relaxed),
            0
        );
        ibv_ack_cq_events(cq, 1);
    }
    assert_eq!(done_rx.recv_timeout(Duration::from_secs(10)), Ok(0));
    destroyer.join().unwrap();
    // SAFETY: the channel has no CQ left.
    assert_eq!(unsafe { ibv_destroy_comp_channel(ch) }, 0);
}

#[test]
fn a_nonblocking_channel_says_eagain() {
    let r = Rig::new();
    // SAFETY: the rig's context; the channel's fd is the program's to fcntl.
    unsafe {
        let ch = ibv_create_comp_channel(r.ctx);
        let fd = (*ch).fd;
        let fl = libc::fcntl(fd, libc::F_GETFL);
        assert_eq!(libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK), 0);
        let (mut cq, mut cqc) = (null_mut(), null_mut());
        assert_eq!(ibv_get_cq_event(ch, &mut cq, &mut cqc), -1);
        assert_eq!(last_errno(), libc::EAGAIN);
        assert_eq!(ibv_destroy_comp_channel(ch), 0);
    }
}

#[test]
fn an_async_event_left_unacknowledged_holds_the_destroy_after_its_command_until_acked() {
    let r = Rig::new();
    let cq = r.cq(0, null_mut());
    let uh = r.fake.user_handle(Kind::Cq, Rig::handle(cq));
    r.fake.push_event(AsyncEventType::CQ_ERR.0, uh);
    let ev = r
        .uv()
        .get_async_event_timeout(Some(Duration::from_secs(10)))
        .unwrap()
        .unwrap();
    assert_eq!(ev.context(), Some(cq as u64));
    ev.defer_ack();
    let (done_tx, done_rx) = mpsc::channel();
    let p = Send(cq);
    let destroyer = thread::spawn(move || {
        let p = p;
        // SAFETY: the test's CQ, used by nobody after this but the ack.
        done_tx.send(unsafe { ibv_destroy_cq(p.0) }).unwrap();
    });
    assert_eq!(
        done_rx.recv_timeout(Duration::from_millis(200)),
        Err(mpsc::RecvTimeoutError::Timeout)
    );
    // libibverbs' order (`ibv_cmd_destroy_cq`, then the wait for
    // `async_events_completed`): the command is in, the return waits.
    assert_eq!(r.fake.destroyed(Kind::Cq).len(), 1);
    // SAFETY: the CQ lives until the ack reaches it.
    unsafe { ack_async_event(cq) }.unwrap();
    assert_eq!(done_rx.recv_timeout(Duration::from_secs(10)), Ok(0));
    destroyer.join().unwrap();
}

#[test]
fn with_cqs_hands_out_one_or_two_cqs_and_refuses_a_destroyed_one() {
    let r = Rig::new();
    let (a, b) = (r.cq(1, null_mut()), r.cq(2, null_mut()));
    // SAFETY: live CQs of the test.
    let (ca, cb) = unsafe { (Cq::from_c(a).unwrap(), Cq::from_c(b).unwrap()) };
    assert_eq!(
        with_cqs(ca, ca, |s, r| (s.context(), r.context())),
        Ok((a as u64, a as u64))
    );
    assert_eq!(
        with_cqs(cb, ca, |s, r| (s.context(), r.context())),
        Ok((b as u64, a as u64))
    );
    assert_eq!(
        with_cqs(ca, cb, |s, r| (s.context(), r.context())),
        Ok((a as u64, b as u64))
    );
    *ca.cq.write().unwrap() = None; // as after a destroy, in place
    assert_eq!(with_cqs(ca, cb, |_, _| ()), Err(Errno::EINVAL));
    // SAFETY: the CQs of the test.
    unsafe {
        assert_eq!(ibv_destroy_cq(b), 0);
        drop(Box::from_raw(a.cast::<Cq>()));
    }
}

#[test]
fn status_texts_are_libibverbs_own() {
    let text = |s| {
        // SAFETY: the function returns static NUL-terminated strings.
        unsafe { CStr::from_ptr(ibv_wc_status_str(s)) }
            .to_str()
            .unwrap()
    };
    assert_eq!(text(0), "success");
    assert_eq!(text(5), "Work Request Flushed Error");
    assert_eq!(text(16), "aborted error");
    assert_eq!(text(23), "TM software rendezvous");
    assert_eq!(text(24), "unknown");
    assert_eq!(text(-1), "unknown");
}
