//! The mlx5 context path, on a fake kernel that answers like mlx5_ib
//! (`drivers/infiniband/hw/mlx5/main.c`, `mlx5_ib_alloc_ucontext`): there is
//! no mlx5 hardware here, so this is what can be tested of it.
//!
//! - GET_CONTEXT carries `mlx5_ib_alloc_ucontext_req_v2` as driver data, the
//!   device's driver id (1) in the ioctl header, and asks for DevX;
//! - firmware without DevX support refuses that (EINVAL) and the context is
//!   opened again without it, as rdma-core does;
//! - the response's geometry is kept and reported by `ctx.mlx5()?.attr()`;
//! - the context's UARs: with dynamic UARs (`tot_bfregs == 0`) one NC UAR
//!   from `MLX5_IB_METHOD_UAR_OBJ_ALLOC`, mapped at the offset and length the
//!   kernel returned (a BF one when the kernel predates the NC type); with
//!   static UARs, the `tot_bfregs / 2` pages mapped at `index * 4096`.
//!
//! The data path itself is tested against the device model
//! (`uverbs::testing::mlx5`, tests/mlx5_model.rs).

use std::sync::{Arc, Mutex};

use uverbs::{
    abi,
    sys::{
        fake::{dummy_fd, Call, FakeKernel},
        Errno, Kernel,
    },
    Context,
};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// How the fake kernel gives out UARs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Uars {
    /// `UAR_OBJ_ALLOC` of both types.
    Dynamic,
    /// `UAR_OBJ_ALLOC` of BF only (a kernel before the NC type).
    DynamicBfOnly,
    /// No `UAR_OBJ_ALLOC`: `tot_bfregs` static bfregs.
    Static,
}

/// The UAR allocations the fake answered: (type, mmap offset).
type UarLog = Arc<Mutex<Vec<(u64, u64)>>>;

/// What the fake saw of each GET_CONTEXT.
#[derive(Debug, Clone)]
struct Seen {
    driver_id: u32,
    req: abi::Mlx5IbAllocUcontextReqV2,
    out_len: usize,
}

fn fake_mlx5(devx_supported: bool) -> (Arc<FakeKernel>, Arc<Mutex<Vec<Seen>>>) {
    let (k, seen, _) = fake_mlx5_uars(devx_supported, Uars::Dynamic);
    (k, seen)
}

fn fake_mlx5_uars(
    devx_supported: bool,
    uars: Uars,
) -> (Arc<FakeKernel>, Arc<Mutex<Vec<Seen>>>, UarLog) {
    let k = Arc::new(FakeKernel::new());
    k.char_dev(libc::makedev(231, 192));
    k.on_netlink(uverbs::testing::mlx5::netlink_reply);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let log = seen.clone();
    let uar_log: UarLog = Arc::default();
    let ulog = uar_log.clone();
    k.on_ioctl(move |cmd| {
        if cmd.driver_id != abi::RDMA_DRIVER_MLX5 {
            return Err(Errno::EINVAL);
        }
        match (cmd.object_id, cmd.method_id) {
            (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_GET_CONTEXT) => {
                let bytes = cmd
                    .input_bytes(abi::UVERBS_ATTR_UHW_IN)
                    .ok_or(Errno::EINVAL)?;
                let req = abi::Mlx5IbAllocUcontextReqV2::read_from_bytes(&bytes)
                    .map_err(|_| Errno::EINVAL)?;
                let out_len = match cmd.find(abi::UVERBS_ATTR_UHW_OUT) {
                    Some(a) => usize::from(a.len),
                    None => 0,
                };
                log.lock().unwrap().push(Seen {
                    driver_id: cmd.driver_id,
                    req,
                    out_len,
                });
                if req.flags & abi::MLX5_IB_ALLOC_UCTX_DEVX != 0 && !devx_supported {
                    return Err(Errno::EINVAL);
                }
                let mut resp = abi::Mlx5IbAllocUcontextResp::new_zeroed();
                resp.bf_reg_size = 512;
                resp.cqe_version = 1;
                resp.num_uars_per_page = 1;
                resp.max_sq_desc_sz = 512;
                if uars == Uars::Static {
                    resp.tot_bfregs = req.total_num_bfregs;
                }
                cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
                cmd.write_output(
                    abi::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
                    &4u32.to_ne_bytes(),
                );
                Ok(())
            }
            (abi::UVERBS_OBJECT_ASYNC_EVENT, abi::UVERBS_METHOD_ASYNC_EVENT_ALLOC) => {
                cmd.set_new_fd(abi::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, dummy_fd());
                Ok(())
            }
            (abi::MLX5_IB_OBJECT_UAR, abi::MLX5_IB_METHOD_UAR_OBJ_ALLOC) => {
                let kind = cmd
                    .input_value(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE)
                    .ok_or(Errno::EINVAL)?;
                match uars {
                    Uars::Static => return Err(Errno::EPROTONOSUPPORT),
                    Uars::DynamicBfOnly if kind != 0 => return Err(Errno::EOPNOTSUPP),
                    _ => {}
                }
                let mut log = ulog.lock().unwrap();
                let offset = 0x1_0000_0000u64 + 4096 * log.len() as u64;
                log.push((kind, offset));
                cmd.set_new_object(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, log.len() as u32);
                cmd.write_output(
                    abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET,
                    &offset.to_ne_bytes(),
                );
                cmd.write_output(
                    abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH,
                    &4096u32.to_ne_bytes(),
                );
                cmd.write_output(
                    abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID,
                    &(100 + log.len() as u32).to_ne_bytes(),
                );
                Ok(())
            }
            _ => Err(Errno::EPROTONOSUPPORT),
        }
    });
    (k, seen, uar_log)
}

/// The mmaps the context made: (length, offset).
fn mmaps(k: &FakeKernel) -> Vec<(usize, u64)> {
    k.calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Mmap(len, offset) => Some((len, offset)),
            _ => None,
        })
        .collect()
}

#[test]
fn get_context_sends_mlx5_driver_data_and_keeps_the_geometry() {
    let (k, seen) = fake_mlx5(true);
    let kernel: Arc<dyn Kernel> = k.clone();
    let ctx = Context::open_with(kernel, Some("mlx5_0")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ctx.provider_name(), "mlx5");
    assert_eq!(ctx.driver_id(), abi::RDMA_DRIVER_MLX5);
    assert_eq!(ctx.num_comp_vectors(), 4);
    let attr = ctx.mlx5().unwrap_or_else(|e| panic!("{e}")).attr();
    assert_eq!(
        (
            attr.devx,
            attr.bf_reg_size,
            attr.cqe_version,
            attr.max_sq_desc_sz
        ),
        (true, 512, 1, 512)
    );
    assert_eq!(attr.num_uars_per_page, 1);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "one GET_CONTEXT when DevX is available");
    let s = &seen[0];
    assert_eq!(s.driver_id, abi::RDMA_DRIVER_MLX5);
    assert_eq!(s.req.total_num_bfregs, 16);
    assert_eq!(s.req.num_low_latency_bfregs, 4);
    assert_eq!(s.req.flags, abi::MLX5_IB_ALLOC_UCTX_DEVX);
    assert_eq!(s.req.max_cqe_version, 1);
    assert_eq!(
        s.req.lib_caps,
        u64::from(abi::MLX5_LIB_CAP_4K_UAR | abi::MLX5_LIB_CAP_DYN_UAR)
    );
    // The whole response struct is offered (the kernel copies its full size).
    assert_eq!(s.out_len, size_of::<abi::Mlx5IbAllocUcontextResp>());
}

#[test]
fn firmware_without_devx_gets_a_second_request_without_it() {
    let (k, seen) = fake_mlx5(false);
    let kernel: Arc<dyn Kernel> = k.clone();
    let ctx = Context::open_with(kernel, None).unwrap_or_else(|e| panic!("{e}"));
    let attr = ctx.mlx5().unwrap_or_else(|e| panic!("{e}")).attr();
    assert_eq!((attr.devx, attr.bf_reg_size), (false, 512));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].req.flags, abi::MLX5_IB_ALLOC_UCTX_DEVX);
    assert_eq!(seen[1].req.flags, 0);
}

#[test]
fn a_context_maps_one_nc_uar_for_cq_doorbells() {
    let (k, _, uars) = fake_mlx5_uars(true, Uars::Dynamic);
    let kernel: Arc<dyn Kernel> = k.clone();
    let _ctx = Context::open_with(kernel, None).unwrap_or_else(|e| panic!("{e}"));
    let uars = uars.lock().unwrap().clone();
    assert_eq!(uars.len(), 1, "one UAR at open: {uars:?}");
    assert_eq!(uars[0].0, u64::from(abi::MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC));
    assert_eq!(mmaps(&k), vec![(4096, uars[0].1)]);
}

#[test]
fn a_kernel_without_nc_uars_gets_a_bf_uar_instead() {
    let (k, _, uars) = fake_mlx5_uars(true, Uars::DynamicBfOnly);
    let kernel: Arc<dyn Kernel> = k.clone();
    let _ctx = Context::open_with(kernel, None).unwrap_or_else(|e| panic!("{e}"));
    let uars = uars.lock().unwrap().clone();
    assert_eq!(uars.len(), 1, "{uars:?}");
    assert_eq!(uars[0].0, u64::from(abi::MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF));
    assert_eq!(mmaps(&k), vec![(4096, uars[0].1)]);
}

#[test]
fn static_uars_are_mapped_page_by_page() {
    let (k, _, uars) = fake_mlx5_uars(true, Uars::Static);
    let kernel: Arc<dyn Kernel> = k.clone();
    let _ctx = Context::open_with(kernel, None).unwrap_or_else(|e| panic!("{e}"));
    assert!(uars.lock().unwrap().is_empty());
    // 16 bfregs, 2 per 4 KiB UAR: pages 0..8 with the regular command (0).
    let expected: Vec<(usize, u64)> = (0..8).map(|i| (4096, i * 4096)).collect();
    assert_eq!(mmaps(&k), expected);
}
