//! The DevX C entry points on uverbs' mlx5 device model (and on its rxe
//! fake, for another provider's answer), called as a program calls them.

use core::{ffi::c_void, ptr::null_mut};
use std::sync::Arc;

use uverbs::{
    mlx5::{self, OpenFlags},
    testing::mlx5::{fake_mlx5, Mlx5Model},
};

use super::{event::*, obj::*, uar::*, umem::*};
use crate::{
    context::Context,
    layout::{
        context::ibv_context,
        mlx5::{mlx5dv_devx_async_event_hdr, mlx5dv_devx_umem_in},
    },
};

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

struct Rig {
    model: Arc<Mlx5Model>,
    ctx: *mut ibv_context,
}

impl Rig {
    fn new() -> Rig {
        let model = fake_mlx5();
        let k = model.dyn_kernel();
        let dev = uverbs::find_device(&k, Some("mlx5_0")).unwrap();
        let uv = mlx5::open_device(k, dev, OpenFlags::DEVX).unwrap();
        let ctx = Context::create(uv, null_mut(), -1, -1);
        Rig { model, ctx }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // SAFETY: the rig's context, used no more.
        unsafe { Context::destroy(self.ctx) }.unwrap();
    }
}

/// A 16-byte PRM header: opcode, op_mod/obj_type, obj_id.
fn header(opcode: u16, obj_type: u16, obj_id: u32) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[0..2].copy_from_slice(&opcode.to_be_bytes());
    h[6..8].copy_from_slice(&obj_type.to_be_bytes());
    h[8..12].copy_from_slice(&obj_id.to_be_bytes());
    h
}

#[test]
fn objects_run_commands_and_a_refused_destroy_keeps_them() {
    let r = Rig::new();
    let cmd = header(0xa00, 1, 0);
    let mut out = [0u8; 16];
    // SAFETY: the rig's context and buffers of the lengths given.
    unsafe {
        let obj =
            mlx5dv_devx_obj_create(r.ctx, cmd.as_ptr().cast(), 16, out.as_mut_ptr().cast(), 16);
        assert!(!obj.is_null(), "{}", last_errno());
        let id = u32::from_be_bytes(out[8..12].try_into().unwrap());
        let q = header(0xa02, 1, id);
        let mut qout = [0u8; 64];
        assert_eq!(
            mlx5dv_devx_obj_query(obj, q.as_ptr().cast(), 16, qout.as_mut_ptr().cast(), 64),
            0
        );
        // A short input: the kernel's EINVAL, in the positive convention.
        assert_eq!(
            mlx5dv_devx_obj_query(obj, q.as_ptr().cast(), 8, qout.as_mut_ptr().cast(), 64),
            libc::EINVAL
        );
        // An id the object does not have: the kernel's EINVAL.
        let other = header(0xa02, 1, id + 1000);
        let ret =
            mlx5dv_devx_obj_query(obj, other.as_ptr().cast(), 16, qout.as_mut_ptr().cast(), 64);
        assert_eq!((ret, last_errno()), (libc::EINVAL, libc::EINVAL));
        // A command the firmware fails (an object type it does not know):
        // NULL, EREMOTEIO, and the status in the output mailbox.
        let bad = header(0xa00, 0x1234, 0);
        let mut bout = [0u8; 16];
        let none =
            mlx5dv_devx_obj_create(r.ctx, bad.as_ptr().cast(), 16, bout.as_mut_ptr().cast(), 16);
        assert!(none.is_null());
        assert_eq!(last_errno(), libc::EREMOTEIO);
        assert_ne!(bout[0], 0, "the firmware's status");
        r.model.refuse_destroys(true);
        assert_eq!(mlx5dv_devx_obj_destroy(obj), libc::EBUSY);
        assert_eq!(
            mlx5dv_devx_obj_query(obj, q.as_ptr().cast(), 16, qout.as_mut_ptr().cast(), 64),
            0,
            "still usable"
        );
        r.model.refuse_destroys(false);
        assert_eq!(mlx5dv_devx_obj_destroy(obj), 0);
        assert_eq!(r.model.devx_counts().0, 0);
        let mut eqn = u32::MAX;
        assert_eq!(mlx5dv_devx_query_eqn(r.ctx, 0, &mut eqn), 0);
        assert_ne!(eqn, u32::MAX);
        // A general command: QUERY_HCA_CAP.
        let hca = header(0x100, 0, 0);
        let mut hout = vec![0u8; 0x1010];
        assert_eq!(
            mlx5dv_devx_general_cmd(
                r.ctx,
                hca.as_ptr().cast(),
                16,
                hout.as_mut_ptr().cast(),
                hout.len()
            ),
            0
        );
    }
}

#[test]
fn umems_register_program_memory_and_deregister_as_the_kernel_decides() {
    let r = Rig::new();
    let mut mem = vec![0u64; 1024];
    let addr = mem.as_mut_ptr().cast::<c_void>();
    // SAFETY: the rig's context; `mem` outlives the registrations.
    unsafe {
        let u = mlx5dv_devx_umem_reg(r.ctx, addr, 8192, 1);
        assert!(!u.is_null(), "{}", last_errno());
        assert_ne!((*u).umem_id, 0);
        assert_eq!(r.model.devx_counts().1, 1);
        assert_eq!(mlx5dv_devx_umem_dereg(u), 0);
        assert_eq!(r.model.devx_counts().1, 0);
        let mut input = mlx5dv_devx_umem_in {
            addr,
            size: 8192,
            access: 1,
            pgsz_bitmap: !0xfff,
            comp_mask: 0,
            dmabuf_fd: -1,
        };
        let u = mlx5dv_devx_umem_reg_ex(r.ctx, &mut input);
        assert!(!u.is_null(), "{}", last_errno());
        assert_eq!(mlx5dv_devx_umem_dereg(u), 0);
        input.pgsz_bitmap = 0;
        assert!(mlx5dv_devx_umem_reg_ex(r.ctx, &mut input).is_null());
        assert_eq!(last_errno(), libc::EINVAL, "no page size fits");
        input.comp_mask = 2;
        assert!(mlx5dv_devx_umem_reg_ex(r.ctx, &mut input).is_null());
        assert_eq!(last_errno(), libc::EOPNOTSUPP, "an unknown comp_mask bit");
        input.comp_mask = 1;
        assert!(mlx5dv_devx_umem_reg_ex(r.ctx, &mut input).is_null());
        assert_eq!(
            last_errno(),
            libc::EBADF,
            "MLX5DV_UMEM_MASK_DMABUF with fd -1"
        );
        // Remote write without local write: the kernel's EINVAL.
        assert!(mlx5dv_devx_umem_reg(r.ctx, addr, 8192, 2).is_null());
        assert_eq!(last_errno(), libc::EINVAL);
    }
}

#[test]
fn uars_are_a_page_each_for_bf_and_the_contexts_one_for_nc() {
    let r = Rig::new();
    // SAFETY: the rig's context.
    unsafe {
        let bf1 = mlx5dv_devx_alloc_uar(r.ctx, 0);
        let bf2 = mlx5dv_devx_alloc_uar(r.ctx, 0);
        assert!(!bf1.is_null() && !bf2.is_null(), "{}", last_errno());
        assert_ne!(bf1, bf2);
        for u in [bf1, bf2] {
            assert_eq!((*u).reg_addr, (*u).base_addr.byte_add(0x800));
            assert_eq!((*u).comp_mask, 0);
        }
        assert_ne!((*bf1).page_id, (*bf2).page_id);
        let nc1 = mlx5dv_devx_alloc_uar(r.ctx, 1);
        let nc2 = mlx5dv_devx_alloc_uar(r.ctx, 1);
        assert!(!nc1.is_null(), "{}", last_errno());
        assert_eq!(nc1, nc2, "the singleton");
        assert_eq!((*nc1).reg_addr, (*nc1).base_addr.byte_add(0x800));
        mlx5dv_devx_free_uar(nc1);
        assert_eq!(mlx5dv_devx_alloc_uar(r.ctx, 1), nc1, "free leaves it");
        assert!(mlx5dv_devx_alloc_uar(r.ctx, 2).is_null());
        assert_eq!(last_errno(), libc::EOPNOTSUPP);
        mlx5dv_devx_free_uar(bf1);
        mlx5dv_devx_free_uar(bf2);
    }
}

#[test]
fn events_read_back_as_the_kernel_hands_them_out() {
    let r = Rig::new();
    let mut port = [0x09u16];
    let mut eqe = [0u8; 64];
    eqe[1] = 0x09;
    eqe[3] = 4;
    // SAFETY: the rig's context, buffers of the lengths given.
    unsafe {
        let ch = mlx5dv_devx_create_event_channel(r.ctx, 0);
        let omit = mlx5dv_devx_create_event_channel(r.ctx, 1);
        assert!(!ch.is_null() && !omit.is_null(), "{}", last_errno());
        assert!((*ch).fd >= 0);
        assert!(mlx5dv_devx_create_event_channel(r.ctx, 4).is_null());
        assert_eq!(last_errno(), libc::EINVAL, "the kernel's answer to a flag");
        assert_eq!(
            mlx5dv_devx_subscribe_devx_event(ch, null_mut(), 2, port.as_mut_ptr(), 0xabc),
            0
        );
        assert_eq!(
            mlx5dv_devx_subscribe_devx_event(omit, null_mut(), 2, port.as_mut_ptr(), 0xdef),
            0
        );
        assert_eq!(
            mlx5dv_devx_subscribe_devx_event(ch, null_mut(), 3, port.as_mut_ptr(), 1),
            libc::EINVAL
        );
        assert_eq!(
            mlx5dv_devx_subscribe_devx_event_fd(ch, -1, null_mut(), 9),
            libc::EBADF
        );
        assert_eq!(r.model.devx_raise_event(eqe), 2);
        let mut buf = [0u8; 128];
        let ev = buf.as_mut_ptr().cast::<mlx5dv_devx_async_event_hdr>();
        assert_eq!(mlx5dv_devx_get_event(ch, ev, 71), -1);
        assert_eq!(last_errno(), libc::EINVAL, "short: the event stays");
        assert_eq!(mlx5dv_devx_get_event(ch, ev, 128), 72);
        assert_eq!((*ev).cookie, 0xabc);
        assert_eq!(buf[8 + 1], 0x09);
        assert_eq!(mlx5dv_devx_get_event(omit, ev, 7), -1);
        assert_eq!(last_errno(), libc::EINVAL);
        assert_eq!(mlx5dv_devx_get_event(omit, ev, 8), 8);
        assert_eq!((*ev).cookie, 0xdef);
        // A lost event: EOVERFLOW first.
        r.model.devx_fail_event_allocs(1);
        r.model.devx_raise_event(eqe);
        assert_eq!(mlx5dv_devx_get_event(ch, ev, 128), -1);
        assert_eq!(last_errno(), libc::EOVERFLOW);
        // After destroy, a blocking read: EIO.
        r.model.devx_raise_event(eqe);
        assert_eq!(mlx5dv_devx_get_event(omit, ev, 8), 8);
        r.model.devx_destroy_fds();
        assert_eq!(mlx5dv_devx_get_event(omit, ev, 8), -1);
        assert_eq!(last_errno(), libc::EIO);
        mlx5dv_devx_destroy_event_channel(ch);
        mlx5dv_devx_destroy_event_channel(omit);
    }
}

#[test]
fn async_queries_answer_on_the_completion_fd() {
    let r = Rig::new();
    let cmd = header(0xa00, 1, 0);
    let mut out = [0u8; 16];
    // SAFETY: the rig's context and buffers of the lengths given.
    unsafe {
        let comp = mlx5dv_devx_create_cmd_comp(r.ctx);
        assert!(!comp.is_null(), "{}", last_errno());
        let obj =
            mlx5dv_devx_obj_create(r.ctx, cmd.as_ptr().cast(), 16, out.as_mut_ptr().cast(), 16);
        let id = u32::from_be_bytes(out[8..12].try_into().unwrap());
        let q = header(0xa02, 1, id);
        assert_eq!(
            mlx5dv_devx_obj_query_async(obj, q.as_ptr().cast(), 16, 64, 0x55, comp),
            0
        );
        assert_eq!(
            mlx5dv_devx_obj_query_async(obj, q.as_ptr().cast(), 16, 1 << 16, 1, comp),
            libc::EINVAL
        );
        let mut resp = [0u8; 72];
        let hdr = resp.as_mut_ptr().cast();
        assert_eq!(mlx5dv_devx_get_async_cmd_comp(comp, hdr, 71), libc::ENOSPC);
        assert_eq!(mlx5dv_devx_get_async_cmd_comp(comp, hdr, 72), 0);
        assert_eq!(u64::from_ne_bytes(resp[..8].try_into().unwrap()), 0x55);
        assert_eq!(resp[8], 0, "the firmware's status");
        assert_eq!(mlx5dv_devx_obj_destroy(obj), 0);
        mlx5dv_devx_destroy_cmd_comp(comp);
    }
}

#[test]
fn another_providers_context_is_eopnotsupp() {
    let fake = uverbs::testing::rxe::fake_rxe();
    let uv = uverbs::Context::open_with(fake.dyn_kernel(), Some("rxe0")).unwrap();
    let ctx = Context::create(uv, null_mut(), -1, -1);
    let cmd = header(0xa00, 1, 0);
    let mut out = [0u8; 16];
    // SAFETY: a live context and buffers of the lengths given.
    unsafe {
        assert!(
            mlx5dv_devx_obj_create(ctx, cmd.as_ptr().cast(), 16, out.as_mut_ptr().cast(), 16)
                .is_null()
        );
        assert_eq!(last_errno(), libc::EOPNOTSUPP);
        assert_eq!(
            mlx5dv_devx_general_cmd(ctx, cmd.as_ptr().cast(), 16, out.as_mut_ptr().cast(), 16),
            libc::EOPNOTSUPP
        );
        assert!(mlx5dv_devx_alloc_uar(ctx, 1).is_null());
        assert_eq!(last_errno(), libc::EOPNOTSUPP);
        assert!(mlx5dv_devx_create_event_channel(ctx, 0).is_null());
        assert_eq!(last_errno(), libc::EOPNOTSUPP);
        assert!(mlx5dv_devx_umem_reg(ctx, null_mut(), 4096, 1).is_null());
        assert_eq!(last_errno(), libc::EOPNOTSUPP);
        Context::destroy(ctx).unwrap();
    }
}
