//! mlx5 context allocation: the `GET_CONTEXT` driver data.

use crate::abi;
#[cfg(test)]
use zerocopy::IntoBytes;
use zerocopy::{FromBytes, FromZeros};

/// `MLX5_IB_UVERBS_ABI_VERSION` is 1; rdma-core accepts 1..=1
/// (`MLX5_UVERBS_MIN_ABI_VERSION`/`MAX`).
pub(crate) const ABI_VERSIONS: std::ops::RangeInclusive<u32> = 1..=1;

/// Static bfregs requested (rdma-core's default `MLX5_TOTAL_UUARS`).
const TOTAL_BFREGS: u32 = 16;
/// Low-latency (dedicated) bfregs requested (rdma-core's default).
const LOW_LATENCY_BFREGS: u32 = 4;

/// What a context request asks for; retried with less when the kernel refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ContextRequest {
    /// Ask for a DevX user context (`MLX5_IB_ALLOC_UCTX_DEVX`).
    pub devx: bool,
}

impl ContextRequest {
    /// The `mlx5_ib_alloc_ucontext_req_v2` bytes.
    pub(crate) fn encode(self) -> abi::Mlx5IbAllocUcontextReqV2 {
        let mut req = abi::Mlx5IbAllocUcontextReqV2::new_zeroed();
        req.total_num_bfregs = TOTAL_BFREGS;
        req.num_low_latency_bfregs = LOW_LATENCY_BFREGS;
        req.flags = if self.devx {
            abi::MLX5_IB_ALLOC_UCTX_DEVX
        } else {
            0
        };
        req.max_cqe_version = 1;
        req.lib_caps = (abi::MLX5_LIB_CAP_4K_UAR | abi::MLX5_LIB_CAP_DYN_UAR) as u64;
        req
    }

    /// The request to try after this one failed, if any (rdma-core drops
    /// DevX first: firmware without `log_max_uctx` refuses it with EINVAL).
    pub(crate) fn fallback(self) -> Option<Self> {
        self.devx.then_some(ContextRequest { devx: false })
    }
}

/// The device geometry an mlx5 context reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mlx5Context {
    /// Whether a DevX user context was created.
    pub devx: bool,
    /// BlueFlame register size; 0 means no write-combining (doorbells only).
    pub bf_reg_size: u32,
    /// CQE format version (0 or 1).
    pub cqe_version: u8,
    /// Largest send WQE in bytes.
    pub max_sq_desc_sz: u16,
    /// Largest receive WQE in bytes.
    pub max_rq_desc_sz: u16,
    /// Cache line size the device uses for buffer alignment.
    pub cache_line_size: u32,
    /// Number of 4 KiB UARs per system page.
    pub num_uars_per_page: u32,
    /// Dynamic bfregs available.
    pub num_dyn_bfregs: u32,
    /// The raw response, for fields not decoded yet.
    pub resp: abi::Mlx5IbAllocUcontextResp,
}

impl Mlx5Context {
    /// Decodes the driver response of a successful `GET_CONTEXT`.
    pub(crate) fn from_response(req: ContextRequest, bytes: &[u8]) -> Option<Self> {
        let resp = abi::Mlx5IbAllocUcontextResp::read_from_prefix(bytes)
            .ok()?
            .0;
        Some(Mlx5Context {
            devx: req.devx,
            bf_reg_size: resp.bf_reg_size,
            cqe_version: resp.cqe_version,
            max_sq_desc_sz: resp.max_sq_desc_sz,
            max_rq_desc_sz: resp.max_rq_desc_sz,
            cache_line_size: resp.cache_line_size,
            num_uars_per_page: resp.num_uars_per_page.max(1),
            num_dyn_bfregs: resp.num_dyn_bfregs,
            resp,
        })
    }

    /// The size of the driver response buffer to offer.
    pub(crate) fn response_len() -> usize {
        size_of::<abi::Mlx5IbAllocUcontextResp>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_matches_what_rdma_core_sends() {
        let req = ContextRequest { devx: true }.encode();
        let bytes = req.as_bytes();
        assert_eq!(bytes.len(), 32);
        assert_eq!(req.total_num_bfregs, 16);
        assert_eq!(req.num_low_latency_bfregs, 4);
        assert_eq!(req.flags, 1);
        assert_eq!(req.max_cqe_version, 1);
        assert_eq!(req.lib_caps, 3);
        assert_eq!(
            ContextRequest { devx: true }.fallback(),
            Some(ContextRequest { devx: false })
        );
        assert_eq!(ContextRequest { devx: false }.fallback(), None);
    }

    #[test]
    fn response_decoding_tolerates_short_buffers() {
        assert!(Mlx5Context::from_response(ContextRequest { devx: false }, &[0; 8]).is_none());
        let mut resp = abi::Mlx5IbAllocUcontextResp::new_zeroed();
        resp.bf_reg_size = 512;
        resp.cqe_version = 1;
        resp.num_uars_per_page = 0;
        let ctx =
            Mlx5Context::from_response(ContextRequest { devx: true }, resp.as_bytes()).unwrap();
        assert_eq!(
            (ctx.bf_reg_size, ctx.cqe_version, ctx.num_uars_per_page),
            (512, 1, 1)
        );
    }
}
