//! `ibv_create_cq_ex` and the polling session through the C slots, as
//! verbs.h's inline functions call them, on uverbs' fake rxe kernel.

use core::{
    ffi::{c_int, c_void},
    mem::transmute,
    ptr::null_mut,
};
use uverbs::{abi::IbUverbsWc, testing::rxe::RxeRing};

use super::*;
use crate::{
    comp_channel::{ibv_create_comp_channel, ibv_destroy_comp_channel, ibv_get_cq_event},
    context::Context,
    cq::{ibv_ack_cq_events, ibv_create_cq, ibv_destroy_cq, tests::Rig},
    layout::cq::{ibv_comp_channel, ibv_cq, ibv_wc},
    pd::{ibv_alloc_pd, ibv_dealloc_pd},
};

const WITH_TS: u64 = 1 << 7;
const WITH_CVLAN: u64 = 1 << 8;
const WITH_FLOW_TAG: u64 = 1 << 9;
const WITH_TM_INFO: u64 = 1 << 10;
const WITH_WALLCLOCK: u64 = 1 << 11;
const STANDARD: u64 = 0x7f;

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn attr(wc_flags: u64) -> ibv_cq_init_attr_ex {
    ibv_cq_init_attr_ex {
        cqe: 8,
        cq_context: null_mut(),
        channel: null_mut(),
        comp_vector: 0,
        wc_flags,
        comp_mask: 0,
        flags: 0,
        parent_domain: null_mut(),
    }
}

/// A CQ as a program holds it: `ibv_cq_ex *`, whose ops it calls through
/// the struct's slots (verbs.h's inline `ibv_start_poll` etc.).
#[derive(Clone, Copy)]
struct Ex(P);
// SAFETY: the tests hand the library's thread-safe CQs to threads.
unsafe impl Send for Ex {}

type P = *mut ibv_cq_ex;

/// Calls the op in slot `$slot` of `$cq` as type `$t`.
macro_rules! call {
    ($cq:expr, $slot:ident: $t:ty $(, $arg:expr)*) => {{
        let cq: *mut ibv_cq_ex = $cq;
        // SAFETY: a live CQ of the test; the slot holds the op of that
        // signature (what verbs.h's inline function calls).
        unsafe {
            let f = transmute::<unsafe extern "C" fn(), $t>((*cq).$slot.unwrap());
            f(cq $(, $arg)*)
        }
    }};
}

impl Ex {
    /// `ibv_create_cq_ex` through the context's `create_cq_ex` slot.
    fn create(r: &Rig, a: &mut ibv_cq_init_attr_ex) -> Result<Ex, i32> {
        // SAFETY: the rig's context, open until it drops.
        let vctx = unsafe { &Context::from_c(r.ctx).unwrap().vctx };
        type Create = unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> P;
        // SAFETY: the slot holds `create_cq_ex`, of that signature.
        let f = unsafe { transmute::<unsafe extern "C" fn(), Create>(vctx.create_cq_ex.unwrap()) };
        // SAFETY: the rig's context and the test's attributes.
        let cq = unsafe { f(r.ctx, a) };
        if cq.is_null() {
            Err(last_errno())
        } else {
            Ok(Ex(cq))
        }
    }

    fn std(r: &Rig) -> Ex {
        Ex::create(r, &mut attr(STANDARD)).unwrap()
    }

    fn ring(self, r: &Rig) -> RxeRing {
        // SAFETY: a live CQ of the test.
        r.fake.cq_ring(unsafe { (*self.0).handle }).unwrap()
    }

    fn start(self) -> c_int {
        let mut a = ibv_poll_cq_attr { comp_mask: 0 };
        call!(self.0, start_poll: unsafe extern "C" fn(P, *mut ibv_poll_cq_attr) -> c_int, &mut a)
    }

    fn next(self) -> c_int {
        call!(self.0, next_poll: unsafe extern "C" fn(P) -> c_int)
    }

    fn end(self) {
        call!(self.0, end_poll: unsafe extern "C" fn(P))
    }

    /// The session's current completion as a `struct ibv_wc` (no
    /// `pkey_index`: `ibv_cq_ex` has no reader of it).
    fn read(self) -> ibv_wc {
        type U32 = unsafe extern "C" fn(P) -> u32;
        type U8 = unsafe extern "C" fn(P) -> u8;
        // SAFETY: a live CQ of the test.
        let (status, wr_id) = unsafe {
            let c = &*self.0;
            (c.status.load(Relaxed), c.wr_id.load(Relaxed))
        };
        ibv_wc {
            wr_id,
            status,
            opcode: call!(self.0, read_opcode: U32),
            vendor_err: call!(self.0, read_vendor_err: U32),
            byte_len: call!(self.0, read_byte_len: U32),
            imm_data: call!(self.0, read_imm_data: U32),
            qp_num: call!(self.0, read_qp_num: U32),
            src_qp: call!(self.0, read_src_qp: U32),
            wc_flags: call!(self.0, read_wc_flags: U32),
            pkey_index: 0,
            slid: call!(self.0, read_slid: U32) as u16,
            sl: call!(self.0, read_sl: U8),
            dlid_path_bits: call!(self.0, read_dlid_path_bits: U8),
        }
    }

    /// `ibv_poll_cq` through the context's op.
    fn poll(self, r: &Rig, n: usize) -> Vec<ibv_wc> {
        type Poll = unsafe extern "C" fn(P, c_int, *mut ibv_wc) -> c_int;
        let mut wc = vec![ibv_wc::default(); n];
        // SAFETY: the rig's context; its poll_cq slot has that signature;
        // room for `n`.
        let got = unsafe {
            let f = transmute::<unsafe extern "C" fn(), Poll>((*r.ctx).ops.poll_cq.unwrap());
            f(self.0, n as c_int, wc.as_mut_ptr())
        };
        wc.truncate(usize::try_from(got).unwrap());
        wc
    }

    fn destroy(self) {
        // SAFETY: a live CQ of the test, not used after.
        assert_eq!(unsafe { ibv_destroy_cq(self.0.cast()) }, 0);
    }
}

fn post(ring: &RxeRing, wr_ids: impl IntoIterator<Item = u64>) {
    for i in wr_ids {
        let k = IbUverbsWc {
            wr_id: i,
            byte_len: (i as u32).wrapping_mul(3),
            ex: (i as u32).to_be(),
            qp_num: i as u32 ^ 0x5a5a,
            wc_flags: 2,
            ..IbUverbsWc::default()
        };
        assert!(ring.post_cqe(&k));
    }
}

#[test]
fn create_cq_ex_makes_a_cq_with_every_op_and_so_does_create_cq() {
    let r = Rig::new();
    // SAFETY: the rig's context.
    let ch = unsafe { ibv_create_comp_channel(r.ctx) };
    let mut a = attr(STANDARD);
    a.cq_context = 0x77 as *mut c_void;
    a.channel = ch;
    a.cqe = 10;
    let cq = Ex::create(&r, &mut a).unwrap();
    // SAFETY: a live CQ of the test, and one of ibv_create_cq.
    unsafe {
        let c = &*cq.0;
        assert_eq!(
            (c.context, c.channel, c.cq_context as usize),
            (r.ctx, ch, 0x77)
        );
        assert!(c.cqe.load(core::sync::atomic::Ordering::Relaxed) >= 10);
        assert_eq!(c.comp_mask, 0);
        assert!(r.fake.cq_ring(c.handle).is_some());
        assert_eq!((*ch).refcnt.load(Relaxed), 1);
        let plain = ibv_create_cq(r.ctx, 4, null_mut(), null_mut(), 0);
        for p in [cq.0, plain.cast::<ibv_cq_ex>()] {
            let c = &*p;
            let slots = [
                c.start_poll,
                c.next_poll,
                c.end_poll,
                c.read_opcode,
                c.read_vendor_err,
                c.read_byte_len,
                c.read_imm_data,
                c.read_qp_num,
                c.read_src_qp,
                c.read_wc_flags,
                c.read_slid,
                c.read_sl,
                c.read_dlid_path_bits,
                c.read_completion_ts,
                c.read_cvlan,
                c.read_flow_tag,
                c.read_tm_info,
                c.read_completion_wallclock_ns,
            ];
            assert!(slots.iter().all(Option::is_some));
        }
        // The ibv_create_cq CQ polls in sessions too.
        let plain = Ex(plain.cast());
        post(&plain.ring(&r), [9]);
        assert_eq!(plain.start(), 0);
        assert_eq!(plain.read().wr_id, 9);
        plain.end();
        plain.destroy();
        cq.destroy();
        assert_eq!((*ch).refcnt.load(Relaxed), 0);
        assert_eq!(ibv_destroy_comp_channel(ch), 0);
    }
}

#[test]
fn create_cq_ex_refuses_what_rdma_cores_rxe_and_libibverbs_refuse() {
    let r = Rig::new();
    // SAFETY: the rig's context.
    let pd = unsafe { ibv_alloc_pd(r.ctx) };
    assert!(!pd.is_null());
    let with = |f: &dyn Fn(&mut ibv_cq_init_attr_ex)| {
        let mut a = attr(STANDARD);
        f(&mut a);
        Ex::create(&r, &mut a).map(Ex::destroy)
    };
    let eopnotsupp = Err(libc::EOPNOTSUPP);
    // Fields rxe does not report, and bits verbs.h does not define.
    for bits in [
        WITH_TS,
        WITH_WALLCLOCK,
        WITH_CVLAN,
        WITH_FLOW_TAG,
        WITH_TM_INFO,
        1 << 12,
        1 << 63,
    ] {
        assert_eq!(with(&|a| a.wc_flags |= bits), eopnotsupp, "{bits:#x}");
    }
    // libibverbs' comp_mask check; the kernel's rxe refuses every CQ flag.
    assert_eq!(with(&|a| a.comp_mask = 1 << 2), eopnotsupp);
    assert_eq!(
        with(&|a| (a.comp_mask, a.flags) = (MASK_FLAGS, 2)),
        eopnotsupp
    );
    assert_eq!(
        with(&|a| (a.comp_mask, a.flags) = (MASK_FLAGS, 4)),
        eopnotsupp
    );
    assert_eq!(with(&|a| a.comp_mask = MASK_PD), Err(libc::EINVAL));
    // SAFETY: the rig's context.
    let vectors = unsafe { (*r.ctx).num_comp_vectors } as u32;
    assert_eq!(with(&|a| a.comp_vector = vectors), Err(libc::EINVAL));
    assert_eq!(with(&|a| a.cqe = 0), Err(libc::EINVAL));
    assert_eq!(with(&|a| a.cqe = u32::MAX), Err(libc::EINVAL));
    // Accepted: no field at all, each standard one alone, the
    // single-thread hint, a PD, flags without their mask bit.
    assert_eq!(with(&|a| a.wc_flags = 0), Ok(()));
    for bit in 0..7 {
        assert_eq!(with(&|a| a.wc_flags = 1 << bit), Ok(()));
    }
    assert_eq!(
        with(&|a| (a.comp_mask, a.flags) = (MASK_FLAGS, SINGLE_THREADED)),
        Ok(())
    );
    assert_eq!(
        with(&|a| (a.comp_mask, a.parent_domain) = (MASK_PD, pd)),
        Ok(())
    );
    assert_eq!(with(&|a| a.flags = 2), Ok(()));
    // NULL arguments.
    // SAFETY: NULLs the op refuses.
    unsafe {
        assert!(create_cq_ex(r.ctx, null_mut()).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert!(create_cq_ex(null_mut(), &mut attr(STANDARD)).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
}

#[test]
fn readers_of_fields_rxe_cannot_report_answer_zero() {
    let r = Rig::new();
    let cq = Ex::std(&r);
    post(&cq.ring(&r), [1]);
    assert_eq!(cq.start(), 0);
    type U64 = unsafe extern "C" fn(P) -> u64;
    assert_eq!(call!(cq.0, read_completion_ts: U64), 0);
    assert_eq!(call!(cq.0, read_completion_wallclock_ns: U64), 0);
    assert_eq!(call!(cq.0, read_cvlan: unsafe extern "C" fn(P) -> u16), 0);
    assert_eq!(
        call!(cq.0, read_flow_tag: unsafe extern "C" fn(P) -> u32),
        0
    );
    let mut tm = ibv_wc_tm_info {
        tag: u64::MAX,
        r#priv: u32::MAX,
    };
    type Tm = unsafe extern "C" fn(P, *mut ibv_wc_tm_info);
    call!(cq.0, read_tm_info: Tm, &mut tm);
    assert_eq!(tm, ibv_wc_tm_info::default());
    call!(cq.0, read_tm_info: Tm, null_mut());
    cq.end();
    // SAFETY: NULL CQs: the readers answer 0.
    unsafe {
        assert_eq!(read_opcode(null_mut()), 0);
        assert_eq!(read_byte_len(null_mut()), 0);
    }
    cq.destroy();
}

#[test]
fn a_cq_ex_arms_delivers_events_and_is_destroyed_like_any_cq() {
    let r = Rig::new();
    // SAFETY: the rig's context.
    let ch: *mut ibv_comp_channel = unsafe { ibv_create_comp_channel(r.ctx) };
    let mut a = attr(STANDARD);
    (a.channel, a.cq_context) = (ch, 0xc0de as *mut c_void);
    let cq = Ex::create(&r, &mut a).unwrap();
    type Arm = unsafe extern "C" fn(P, c_int) -> c_int;
    // SAFETY: the rig's context (its req_notify_cq slot has that
    // signature) and live objects of the test.
    unsafe {
        let arm = transmute::<unsafe extern "C" fn(), Arm>((*r.ctx).ops.req_notify_cq.unwrap());
        assert_eq!(arm(cq.0, 0), 0);
        assert_eq!(r.fake.arms(), 1);
        assert!(r.fake.push_comp_event((*cq.0).handle));
        let (mut got, mut cqc): (*mut ibv_cq, *mut c_void) = (null_mut(), null_mut());
        assert_eq!(ibv_get_cq_event(ch, &mut got, &mut cqc), 0);
        assert_eq!((got.cast::<ibv_cq_ex>(), cqc as usize), (cq.0, 0xc0de));
        // Arming inside a session does not wait for it.
        post(&cq.ring(&r), [1]);
        assert_eq!(cq.start(), 0);
        assert_eq!(arm(cq.0, 1), 0);
        cq.end();
        ibv_ack_cq_events(got, 1);
    }
    cq.destroy();
    // SAFETY: the channel has no CQ left.
    assert_eq!(unsafe { ibv_destroy_comp_channel(ch) }, 0);
}

mod sessions;
