//! The mlx5 (ConnectX) provider.
//!
//! Opening a context sends `mlx5_ib_alloc_ucontext_req_v2` as driver data and
//! keeps the device geometry from `mlx5_ib_alloc_ucontext_resp`
//! (`include/uapi/rdma/mlx5-abi.h`; the kernel side is `mlx5_ib_alloc_ucontext`
//! in `drivers/infiniband/hw/mlx5/main.c`). A PD's driver data is its PD
//! number (`mlx5_ib_alloc_pd_resp`), which QPs and DevX objects name.
//!
//! The data path (UAR doorbells, BlueFlame, WQE building, CQE parsing) is not
//! written yet: its queue types are [`Unreachable`], and creating a CQ, QP or
//! SRQ fails with an error saying so. The public, mlx5-only API (the
//! counterpart of `mlx5dv`) is [`dv`], exported as `uverbs::mlx5`.

use std::ops::RangeInclusive;

use zerocopy::FromBytes;

use super::{
    CqCreated, CqRequest, Device, GetContext, Provider, QpCreated, QpRequest, RunWithIn,
    RunWithOut, SrqCreated, SrqRequest, Unreachable,
};
use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    sys::Errno,
    wc::WorkCompletion,
    wr::{PostError, RecvWr, SendWr},
};

mod context;
pub mod dv;

pub(crate) use context::Mlx5State;

/// The mlx5 provider.
#[derive(Debug)]
pub(crate) struct Mlx5;

/// An mlx5 PD: the PD number the kernel reports in the driver response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mlx5Pd {
    #[allow(dead_code)] // read by the data path (QP creation) and DevX
    pub(crate) pdn: u32,
}

fn missing(op: &'static str) -> Error {
    Error::new(
        op,
        ErrorKind::UnsupportedProvider,
        "the mlx5 data path (queue buffers, doorbell records, UAR doorbells) is not \
         implemented yet; only rxe has one",
    )
}

impl Provider for Mlx5 {
    const NAME: &'static str = "mlx5";
    const DRIVER_ID: u32 = abi::RDMA_DRIVER_MLX5;
    /// `MLX5_IB_UVERBS_ABI_VERSION` is 1; rdma-core accepts 1..=1
    /// (`MLX5_UVERBS_MIN_ABI_VERSION`/`MAX`).
    const ABI_VERSIONS: RangeInclusive<u32> = 1..=1;

    type Context = Mlx5State;
    type Pd = Mlx5Pd;
    type Ah = ();
    type CqPlan = Unreachable;
    type CqShared = Unreachable;
    type Cq = Unreachable;
    type QpPlan = Unreachable;
    type QpShared = Unreachable;
    type Qp = Unreachable;
    type SrqPlan = Unreachable;
    type SrqShared = Unreachable;
    type Srq = Unreachable;

    /// mlx5 devices are named `mlx5_N` by the kernel (the convention
    /// libibverbs' sysfs matching relies on as well).
    fn claims_sysfs_device(name: &str, _has_parent: bool) -> bool {
        name.starts_with("mlx5")
    }

    fn open(_dev: Device<'_>, get_context: &mut GetContext<'_>) -> Result<Mlx5State> {
        Mlx5State::open(get_context)
    }

    /// `mlx5_query_device_ex` prints the sub-minor with four digits.
    fn fw_ver(raw: u64) -> String {
        let (major, minor, sub) = ((raw >> 32) & 0xffff, (raw >> 16) & 0xffff, raw & 0xffff);
        format!("{major}.{minor}.{sub:04}")
    }

    fn alloc_pd(_: &Mlx5State, run: &mut RunWithOut<'_>) -> Result<Mlx5Pd, Errno> {
        let mut resp = [0u8; size_of::<abi::Mlx5IbAllocPdResp>()];
        run(&mut resp)?;
        let pdn = abi::Mlx5IbAllocPdResp::read_from_bytes(&resp)
            .map(|r| r.pdn)
            .unwrap_or(0);
        Ok(Mlx5Pd { pdn })
    }

    fn create_ah(_: &Mlx5State, run: &mut RunWithOut<'_>) -> Result<(), Errno> {
        run(&mut [])
    }

    fn plan_cq(_: &Mlx5State, _: Device<'_>, _: &CqRequest) -> Result<(Unreachable, Unreachable)> {
        Err(missing("ibv_create_cq"))
    }

    fn finish_cq(
        _: &Mlx5State,
        _: Device<'_>,
        plan: Unreachable,
        _: &Unreachable,
        _: &CqCreated,
    ) -> Result<Unreachable> {
        match plan {}
    }

    fn poll_cq(cq: &mut Unreachable, _: &mut [WorkCompletion]) -> usize {
        match *cq {}
    }

    fn req_notify_cq(
        cq: &Unreachable,
        _: &Unreachable,
        _: Device<'_>,
        _: u32,
        _: bool,
    ) -> Result<(), Errno> {
        match *cq {}
    }

    fn on_completion_event(shared: &Unreachable) {
        match *shared {}
    }

    fn plan_qp(
        _: &Mlx5State,
        _: Device<'_>,
        _: &Mlx5Pd,
        _: &QpRequest,
    ) -> Result<(Unreachable, Unreachable)> {
        Err(missing("ibv_create_qp"))
    }

    fn finish_qp(
        _: &Mlx5State,
        _: Device<'_>,
        plan: Unreachable,
        _: &Unreachable,
        _: &QpRequest,
        _: &QpCreated,
    ) -> Result<Unreachable> {
        match plan {}
    }

    fn post_send(qp: &mut Unreachable, _: Device<'_>, _: &[SendWr<'_>]) -> Result<(), PostError> {
        match *qp {}
    }

    fn post_recv(qp: &mut Unreachable, _: &[RecvWr<'_>]) -> Result<(), PostError> {
        match *qp {}
    }

    fn plan_srq(
        _: &Mlx5State,
        _: Device<'_>,
        _: &Mlx5Pd,
        _: &SrqRequest,
    ) -> Result<(Unreachable, Unreachable)> {
        Err(missing("ibv_create_srq"))
    }

    fn finish_srq(
        _: &Mlx5State,
        _: Device<'_>,
        plan: Unreachable,
        _: &Unreachable,
        _: &SrqCreated,
    ) -> Result<(Unreachable, u32)> {
        match plan {}
    }

    fn post_srq_recv(srq: &mut Unreachable, _: &[RecvWr<'_>]) -> Result<(), PostError> {
        match *srq {}
    }

    fn modify_srq(srq: &Unreachable, _: &mut RunWithIn<'_>) -> Result<(), Errno> {
        match *srq {}
    }
}
