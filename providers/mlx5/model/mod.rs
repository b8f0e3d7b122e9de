//! A software ConnectX for tests (feature `test-utils`, public as
//! `uverbs::testing::mlx5`): the kernel side of `mlx5_ib` for the calls a
//! context makes (`kernel.rs`) and the HCA behind it (`hca.rs`), on the
//! generic scripted [`FakeKernel`].
//!
//! There is no mlx5 hardware here, so the mlx5 data path is run against
//! this model. It is a test oracle, so it shares no code with the provider:
//! it decodes WQEs and encodes CQEs with its own code (`layout.rs`) written
//! from the structs of rdma-core's public `mlx5dv.h`, and it plays the
//! kernel from the facts of `drivers/infiniband/hw/mlx5` (queue geometry,
//! UAR allocation and mmap offsets, the driver data of each command).
//!
//! The HCA runs when a test calls [`Mlx5Model::process`]: it consumes the
//! doorbells written to the UAR pages since the last call (each page is a
//! memfd mapped twice, once for the library and once for the model),
//! executes the WQEs they announce between the model's QPs in host memory
//! (checking keys, access flags and QP states), and writes CQEs with the
//! ownership bit the library expects, raising completion events for armed
//! CQs and CQ_ERR instead of overrunning a CQ. What it finds wrong in the
//! library's use of the device is listed by [`Mlx5Model::violations`]; a
//! doorbell rung on a UAR the queue was not created with is ignored, as
//! hardware ignores it, and listed by [`Mlx5Model::ignored_doorbells`].
//!
//! One limit: the model reads a register's last value, where hardware sees
//! every store. When QPs share a register (shared bfregs, the NC doorbell
//! without write-combining) and several ring it between two `process`
//! calls, only the last doorbell is left; a doorbell on a register therefore
//! also runs the other QPs of that UAR whose doorbell record moved. QPs on
//! dedicated bfregs are held to their own doorbells.
//!
//! Knobs ([`Options`]) select the paths hardware and kernels vary on:
//! dynamic or static UARs, write-combining or not (`bf_reg_size` 0), CQE
//! version 0 or 1, and more than one UAR per system page.
#![allow(unsafe_code)]

use std::sync::{Arc, Mutex, MutexGuard};

use crate::sys::{fake::FakeKernel, Kernel};

mod hca;
mod kernel;
mod layout;
#[cfg(test)]
mod tests;

pub use hca::Arm;

/// The device's name.
pub const DEV: &str = "mlx5_0";

/// What kind of device and kernel the model plays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// A kernel without dynamic UARs: `tot_bfregs` static bfregs mapped at
    /// fixed offsets, the kernel choosing each QP's bfreg.
    pub static_uars: bool,
    /// BlueFlame register size; 0 is a host without write-combining.
    pub bf_reg_size: u32,
    /// CQE format version (0 or 1).
    pub cqe_version: u8,
    /// 4 KiB UARs per system page (16 on a 64 KiB-page host).
    pub num_uars_per_page: u32,
    /// Firmware that refuses a DevX user context.
    pub refuse_devx: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            static_uars: false,
            bf_reg_size: 512,
            cqe_version: 1,
            num_uars_per_page: 1,
            refuse_devx: false,
        }
    }
}

/// The model; see the module documentation.
#[derive(Debug)]
pub struct Mlx5Model {
    /// The scripted kernel: call log, queued reads (events), sysfs.
    pub kernel: Arc<FakeKernel>,
    /// What it plays.
    pub options: Options,
    hca: Arc<Mutex<hca::Hca>>,
}

/// A model with the default [`Options`] (ConnectX-5 like, current kernel).
pub fn fake_mlx5() -> Arc<Mlx5Model> {
    fake_mlx5_with(Options::default())
}

/// A model with the given [`Options`].
pub fn fake_mlx5_with(options: Options) -> Arc<Mlx5Model> {
    let kernel = Arc::new(FakeKernel::new());
    let hca = Arc::new(Mutex::new(hca::Hca {
        cqe_v1: options.cqe_version == 1,
        bf_half: options.bf_reg_size as usize / 2,
        ..hca::Hca::default()
    }));
    kernel::install(&kernel, &hca, &options);
    Arc::new(Mlx5Model {
        kernel,
        options,
        hca,
    })
}

impl Mlx5Model {
    fn hca(&self) -> MutexGuard<'_, hca::Hca> {
        self.hca.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This model as the transport a context is opened with.
    pub fn dyn_kernel(&self) -> Arc<dyn Kernel> {
        self.kernel.clone()
    }

    /// Runs the HCA until it is idle: consumes the doorbells written since
    /// the last call and executes what they announce. Returns the number
    /// of WQEs executed.
    pub fn process(&self) -> usize {
        let (n, events) = {
            let mut h = self.hca();
            let n = h.process();
            (n, std::mem::take(&mut h.out_events))
        };
        for e in events {
            self.kernel.push_read(Ok(e));
        }
        n
    }

    /// Protocol violations seen so far (empty when the library drove the
    /// device as the PRM and rdma-core do).
    pub fn violations(&self) -> Vec<String> {
        self.hca().violations.clone()
    }

    /// Doorbells the device ignored (rung on a UAR their queue was not
    /// created with, or naming no queue).
    pub fn ignored_doorbells(&self) -> Vec<String> {
        self.hca().ignored.clone()
    }

    /// The arm doorbells CQ `cqn` received, oldest first.
    pub fn arms(&self, cqn: u32) -> Vec<Arm> {
        self.hca()
            .cqs
            .get(&cqn)
            .map(|c| c.arms.clone())
            .unwrap_or_default()
    }

    /// The CQ number of the CQ with kernel handle `handle`.
    pub fn cqn_of_handle(&self, handle: u32) -> Option<u32> {
        self.hca()
            .cqs
            .iter()
            .find(|(_, c)| c.handle == handle)
            .map(|(n, _)| *n)
    }

    /// The state (`IB_QPS_*`) of QP `qpn`.
    pub fn qp_state(&self, qpn: u32) -> Option<u8> {
        self.hca().qps.get(&qpn).map(|q| q.state)
    }
}
