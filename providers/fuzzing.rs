//! The providers' half of `uverbs::fuzzing` (feature `fuzzing`): thin
//! wrappers over the rxe and mlx5 decoders of kernel- and device-written
//! bytes, re-exported by `src/fuzzing.rs` (the core never names a provider;
//! see `tests/provider_boundary.rs`). They only adapt the input and call
//! the decoders the providers run.

use super::{
    mlx5::{
        context::{ContextRequest, Mlx5State},
        devx::{async_cmd, cmd},
    },
    rxe::{cq::RxeCq, queue::Producer},
};
use crate::{
    error::{Error, Result},
    sys::{Errno, Mapping},
    WorkCompletion,
};

/// An anonymous mapping holding `bytes`, standing in for a ring the kernel
/// mapped (page-aligned, exactly `bytes.len()` long, at least one byte).
fn mapping_of(bytes: &[u8]) -> Mapping {
    let mut map = memmap2::MmapOptions::new()
        .len(bytes.len().max(1))
        .map_anon()
        .unwrap_or_else(|e| panic!("anonymous mapping of {} bytes: {e}", bytes.len()));
    map[..bytes.len()].copy_from_slice(bytes);
    Mapping::from(map)
}

/// An rxe CQ ring as the kernel could have left it (`ring`: the header and
/// the slots, indices included) taken over by the provider's CQ
/// (`RxeCq::new`, which validates the geometry) and polled once per entry
/// of `batches` with an output of that many completions. Returns what each
/// poll returned, or the error the geometry check gave.
pub fn rxe_cq_poll(ring: &[u8], batches: &[usize]) -> Result<Vec<Vec<WorkCompletion>>> {
    let mut cq = RxeCq::new(mapping_of(ring))?;
    let mut out = vec![WorkCompletion::default(); batches.iter().copied().max().unwrap_or(0)];
    Ok(batches
        .iter()
        .map(|&n| {
            let got = cq.poll(&mut out[..n]);
            out[..got.min(n)].to_vec()
        })
        .collect())
}

/// An rxe send, receive or SRQ ring as the kernel could have left it, taken
/// over by the provider's producer side (`Producer::new`, elements of
/// `min_slot` bytes) and filled until it reports full: each free slot is
/// written whole (`min_slot` bytes of `fill`) and published. Returns how
/// many slots were published, or the error the geometry check gave.
pub fn rxe_producer_fill(ring: &[u8], min_slot: usize, fill: u8) -> Result<usize> {
    let mut producer = Producer::new(mapping_of(ring), "fuzzed rxe ring", min_slot)?;
    let element = vec![fill; min_slot];
    let mut published = 0usize;
    // A ring holds at most 2^32 - 1 elements; the bound only stops a
    // producer that never reports full from looping forever.
    while let Some(mut slot) = producer.next_slot() {
        slot.write_bytes(0, &element);
        slot.publish();
        published += 1;
        assert!(
            published <= ring.len(),
            "the producer published {published} slots of a {}-byte ring without filling it",
            ring.len()
        );
    }
    Ok(published)
}

/// What the mlx5 provider keeps of a `GET_CONTEXT` driver response
/// ([`mlx5_context_response`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mlx5ContextResponse {
    /// Whether the context is a DevX one (from the request).
    pub devx: bool,
    /// BlueFlame register size.
    pub bf_reg_size: u32,
    /// CQE version.
    pub cqe_version: u8,
    /// 4 KiB UARs per page, as the provider uses it.
    pub num_uars_per_page: u32,
    /// The raw value the kernel reported.
    pub raw_num_uars_per_page: u32,
    /// Static bfregs.
    pub tot_bfregs: u32,
}

/// `Mlx5State::from_response`: the mlx5 provider's decoding of the
/// `mlx5_ib_alloc_ucontext_resp` driver data of `GET_CONTEXT` (`None`: too
/// short).
pub fn mlx5_context_response(resp: &[u8], devx: bool) -> Option<Mlx5ContextResponse> {
    let s = Mlx5State::from_response(ContextRequest { devx }, resp)?;
    Some(Mlx5ContextResponse {
        devx: s.devx,
        bf_reg_size: s.bf_reg_size,
        cqe_version: s.cqe_version,
        num_uars_per_page: s.num_uars_per_page,
        raw_num_uars_per_page: s.resp.num_uars_per_page,
        tot_bfregs: s.resp.tot_bfregs,
    })
}

/// `firmware_result`: how a DevX command's outcome (the ioctl's result and
/// the output mailbox the kernel copied back) becomes success or an error.
pub fn devx_command_result(ioctl: Result<(), Errno>, cmd_out: &[u8]) -> Result<()> {
    cmd::firmware_result("fuzzed DevX command", ioctl, cmd_out)
}

/// `decode_answer`: one answer read from a DevX command completion fd,
/// split into its `wr_id` and the length of the output mailbox.
pub fn devx_async_answer(answer: &[u8]) -> Result<(u64, usize), Error> {
    async_cmd::decode_answer(answer)
}
