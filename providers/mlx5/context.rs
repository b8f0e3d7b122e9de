//! mlx5 context allocation: the `GET_CONTEXT` driver data, the retry
//! without DevX, and the device geometry of the response.

use zerocopy::{FromBytes, FromZeros, IntoBytes};

use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    providers::{DevxRequest, GetContext},
    sys::Errno,
};

/// Static bfregs requested (rdma-core's default `MLX5_TOTAL_UUARS`).
const TOTAL_BFREGS: u32 = 16;
/// Low-latency (dedicated) bfregs requested (rdma-core's default).
pub(crate) const LOW_LATENCY_BFREGS: u32 = 4;

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
pub(crate) struct Mlx5State {
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

impl Mlx5State {
    /// Opens the context as rdma-core's `mlx5_alloc_context` does: with a
    /// DevX user context first, and without it when the kernel refuses
    /// (`EINVAL`: firmware without `log_max_uctx`).
    pub(crate) fn open(get_context: &mut GetContext<'_>, devx: DevxRequest) -> Result<Self> {
        let mut req = Some(ContextRequest { devx: true });
        let mut last = None;
        while let Some(r) = req {
            let encoded = r.encode();
            let mut out = vec![0u8; Self::response_len()];
            match get_context(encoded.as_bytes(), &mut out) {
                Ok(()) => {
                    return Self::from_response(r, &out).ok_or_else(|| {
                        Error::new(
                            "GET_CONTEXT",
                            ErrorKind::Malformed,
                            "short mlx5_ib_alloc_ucontext_resp",
                        )
                    })
                }
                Err(e)
                    if e.kernel_errno() == Some(Errno::EINVAL) && devx == DevxRequest::Prefer =>
                {
                    last = Some(e);
                    req = r.fallback();
                }
                Err(e) if devx == DevxRequest::Require => {
                    return Err(e.with_detail(
                        "the kernel refused a DevX user context (firmware without \
                         log_max_uctx, or no CAP_NET_RAW), and DevX was required",
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        Err(last
            .unwrap_or_else(|| Error::new("GET_CONTEXT", ErrorKind::Os, "mlx5 context refused")))
    }

    /// Decodes the driver response of a successful `GET_CONTEXT`.
    pub(crate) fn from_response(req: ContextRequest, bytes: &[u8]) -> Option<Self> {
        let resp = abi::Mlx5IbAllocUcontextResp::read_from_prefix(bytes)
            .ok()?
            .0;
        Some(Mlx5State {
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
        assert!(Mlx5State::from_response(ContextRequest { devx: false }, &[0; 8]).is_none());
        let mut resp = abi::Mlx5IbAllocUcontextResp::new_zeroed();
        resp.bf_reg_size = 512;
        resp.cqe_version = 1;
        resp.num_uars_per_page = 0;
        let ctx = Mlx5State::from_response(ContextRequest { devx: true }, resp.as_bytes()).unwrap();
        assert_eq!(
            (ctx.bf_reg_size, ctx.cqe_version, ctx.num_uars_per_page),
            (512, 1, 1)
        );
    }
}
