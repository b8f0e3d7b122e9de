//! Creating CQs with mlx5's own attributes, as `mlx5dv_create_cq` does
//! (rdma-core's `create_cq` in `providers/mlx5/verbs.c` with a
//! `struct mlx5dv_cq_init_attr`): the CQE size, CQE compression, 128-byte
//! CQE padding.

use super::dv::Mlx5Context;
use super::dv_query::Mlx5DeviceFlags;
use crate::{
    error::{Error, ErrorKind, Result},
    providers::DriverCqAttrs,
    CompletionQueue, CqOptions,
};

/// CQE compression formats (`enum mlx5dv_cqe_comp_res_format`): exactly
/// one is asked for.
pub mod cqe_comp_format {
    /// `MLX5DV_CQE_RES_FORMAT_HASH`.
    pub const HASH: u8 = 1 << 0;
    /// `MLX5DV_CQE_RES_FORMAT_CSUM`.
    pub const CSUM: u8 = 1 << 1;
    /// `MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX`.
    pub const CSUM_STRIDX: u8 = 1 << 2;
}

/// What an mlx5 CQ is created with beyond [`CqOptions`] (`struct
/// mlx5dv_cq_init_attr`). The default is libmlx5's `ibv_create_cq`: CQEs
/// of `MLX5_CQE_SIZE` bytes (64 when unset), no compression, no padding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Mlx5CqAttr {
    /// The CQE size, 64 or 128 bytes (`MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE`);
    /// `None` takes the `MLX5_CQE_SIZE` environment variable, as libmlx5
    /// does for every CQ, or 64.
    pub cqe_size: Option<u16>,
    /// CQE compression in one of the [`cqe_comp_format`]s
    /// (`MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE`); the device must report
    /// it ([`crate::mlx5::Mlx5DeviceAttr::cqe_comp_caps`]).
    pub compressed_format: Option<u8>,
    /// 128-byte CQEs padded to a cache line
    /// (`MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD`): needs 128-byte CQEs and a
    /// device with [`Mlx5DeviceFlags::CQE_128B_PAD`].
    pub pad: bool,
}

impl Mlx5CqAttr {
    /// CQEs of `bytes` bytes (64 or 128).
    pub fn cqe_size(mut self, bytes: u16) -> Self {
        self.cqe_size = Some(bytes);
        self
    }

    /// CQE compression in `format` (one of [`cqe_comp_format`]).
    pub fn compressed(mut self, format: u8) -> Self {
        self.compressed_format = Some(format);
        self
    }

    /// 128-byte CQE padding.
    pub fn padded(mut self) -> Self {
        self.pad = true;
        self
    }
}

fn invalid(detail: String) -> Error {
    Error::new("mlx5dv_create_cq", ErrorKind::InvalidArgument, detail)
}

impl Mlx5Context<'_> {
    /// Creates a CQ with mlx5's attributes, like `mlx5dv_create_cq`: what
    /// [`Context::create_cq`](crate::Context::create_cq) does, plus `attr`.
    /// Refused with [`ErrorKind::InvalidArgument`] (`EINVAL`, as libmlx5):
    /// a CQE size other than 64 or 128, compression in a format the device
    /// does not report (the kernel refuses several formats at once),
    /// padding without 128-byte CQEs or on a device without it.
    #[doc(alias = "mlx5dv_create_cq")]
    pub fn create_cq(
        &self,
        cqe: u32,
        opts: CqOptions<'_>,
        attr: Mlx5CqAttr,
    ) -> Result<CompletionQueue> {
        if let Some(s) = attr.cqe_size {
            if s != 64 && s != 128 {
                return Err(invalid(format!(
                    "a CQE of {s} bytes: mlx5 CQEs are 64 or 128 bytes"
                )));
            }
        }
        if attr.compressed_format.is_some() || attr.pad {
            let dev = self.query_device()?;
            if let Some(f) = attr.compressed_format {
                let caps = dev.cqe_comp_caps;
                if caps.max_num == 0 || u32::from(f) & caps.supported_format == 0 {
                    return Err(invalid(format!(
                        "CQE compression format {f:#x}: the device supports {:#x} (at most {} \
                         CQEs compressed)",
                        caps.supported_format, caps.max_num
                    )));
                }
            }
            if attr.pad {
                let size = match attr.cqe_size {
                    Some(s) => s as usize,
                    None => {
                        super::cq::cqe_size(None, std::env::var_os("MLX5_CQE_SIZE").as_deref())?
                    }
                };
                if !dev.flags.contains(Mlx5DeviceFlags::CQE_128B_PAD) || size != 128 {
                    return Err(invalid(format!(
                        "{size}-byte CQE padding: needs 128-byte CQEs on a device with \
                         MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD"
                    )));
                }
            }
        }
        let req = DriverCqAttrs {
            cqe_size: attr.cqe_size,
            compressed_format: attr.compressed_format,
            pad: attr.pad,
        };
        self.context().create_cq_with(cqe, opts, Some(req))
    }
}
