//! Async events against uverbs' fake rxe kernel.

use core::ffi::CStr;
use std::ptr;

use uverbs::{
    abi,
    sys::Errno,
    testing::rxe::{fake_rxe, FakeRxe, Kind},
    CqOptions,
};

use super::*;
use crate::device::test_kernel;

/// Runs `f` with a context on a fresh fake rxe, then closes it.
fn with_ctx(f: impl FnOnce(&FakeRxe, *mut ibv_context)) {
    let fake = fake_rxe();
    test_kernel::with(fake.dyn_kernel(), || {
        let ctx = test_kernel::open_first();
        f(&fake, ctx);
        // SAFETY: opened above, closed once.
        assert_eq!(unsafe { crate::device::ibv_close_device(ctx) }, 0);
    });
}

fn empty_event() -> ibv_async_event {
    ibv_async_event {
        element: ibv_async_event_element { port_num: -1 },
        event_type: -1,
    }
}

#[test]
fn a_port_event_names_its_port() {
    with_ctx(|fake, ctx| {
        fake.push_event(abi::IBV_EVENT_PORT_ERR, 1);
        let mut ev = empty_event();
        // SAFETY: an open context and a writable event.
        assert_eq!(unsafe { ibv_get_async_event(ctx, &mut ev) }, 0);
        assert_eq!(ev.event_type, 10);
        // SAFETY: a port event's element is the port number.
        assert_eq!(unsafe { ev.element.port_num }, 1);
        // Nothing to acknowledge, nothing fails.
        // SAFETY: the event just filled.
        unsafe { ibv_ack_async_event(&mut ev) };
    });
}

#[test]
fn a_cq_event_names_the_c_object_and_waits_for_its_ack() {
    with_ctx(|fake, ctx| {
        // SAFETY: an open context of this library.
        let uv = &unsafe { Context::from_c(ctx) }.unwrap().uv;
        // The C object's address, as crate::cq gives it to uverbs.
        let c_object = 0x7f00_1234_5000u64;
        let options = CqOptions::new().context(c_object);
        let cq = uv.create_cq(4, options).unwrap();
        fake.push_event(
            abi::IBV_EVENT_CQ_ERR,
            fake.user_handle(Kind::Cq, cq.handle()),
        );
        let mut ev = empty_event();
        // SAFETY: an open context and a writable event.
        assert_eq!(unsafe { ibv_get_async_event(ctx, &mut ev) }, 0);
        assert_eq!(ev.event_type, 0);
        // SAFETY: a CQ event's element is the CQ pointer.
        assert_eq!(unsafe { ev.element.cq } as u64, c_object);
        // Counted by the CQ until acknowledged (ibv_ack_async_event reaches
        // crate::cq, which acknowledges through this call).
        let busy = cq.destroy().unwrap_err();
        assert_eq!(busy.errno(), Errno::EBUSY);
        let cq = busy.into_inner();
        cq.ack_async_events(1).unwrap();
        cq.destroy().unwrap();
    });
}

#[test]
fn a_program_set_o_nonblock_makes_the_get_eagain() {
    with_ctx(|_, ctx| {
        // SAFETY: an open context; its async fd is the fake's pipe.
        let fd = unsafe { (*ctx).async_fd };
        // SAFETY: fcntl on an fd of this context.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            assert_eq!(libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK), 0);
        }
        let mut ev = empty_event();
        // SAFETY: an open context and a writable event.
        assert_eq!(unsafe { ibv_get_async_event(ctx, &mut ev) }, -1);
        assert_eq!(Errno::last(), Errno::EAGAIN);
        assert_eq!(ev.event_type, -1, "untouched");
    });
}

#[test]
fn null_arguments_are_einval() {
    with_ctx(|_, ctx| {
        let mut ev = empty_event();
        // SAFETY: NULL is refused before any use.
        unsafe {
            assert_eq!(ibv_get_async_event(ptr::null_mut(), &mut ev), -1);
            assert_eq!(Errno::last(), Errno::EINVAL);
            assert_eq!(ibv_get_async_event(ctx, ptr::null_mut()), -1);
            assert_eq!(Errno::last(), Errno::EINVAL);
            ibv_ack_async_event(ptr::null_mut());
        }
    });
}

#[test]
fn event_type_texts_are_libibverbs_texts() {
    let s = |v| {
        // SAFETY: static strings.
        unsafe { CStr::from_ptr(ibv_event_type_str(v)) }
            .to_str()
            .unwrap()
    };
    assert_eq!(s(0), "CQ error");
    assert_eq!(s(8), "local catastrophic error");
    assert_eq!(s(12), "P_Key change");
    assert_eq!(s(19), "WQ fatal");
    assert_eq!(s(20), "unknown");
    assert_eq!(s(-1), "unknown");
}
