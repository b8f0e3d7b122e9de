//! The three ways to post sends (`post_send`, a send batch, a typed
//! session), and a `SendWr` of an RC QP written through a typed session's
//! builders (`uverbs::qp_ex`), so that tests written with `SendWr`s run every
//! path with the same requests. Used by `tests/mlx5_send_flags.rs`,
//! `tests/mlx5_fence.rs` and the device tests' `send_flags.rs`.

use uverbs::{
    qp_ex::{Mlx5, ProviderKind, Rc, Rxe},
    Payload, PostError, PostErrorKind, QueuePair, SendFlags, SendOp, SendWr, WrSession,
};

/// The ways to post; each rings one doorbell for its requests.
#[derive(Debug, Clone, Copy)]
pub enum Path {
    PostSend,
    Batch,
    /// A typed session (`start_wr`, the `ibv_wr_*` builders).
    Typed,
}

pub const PATHS: [Path; 3] = [Path::PostSend, Path::Batch, Path::Typed];

/// Posts `wrs` on `qp` by `path` (a typed session of the QP's provider:
/// rxe in the guest, mlx5 on the model or a host with one).
pub fn post_by(qp: &mut QueuePair, path: Path, wrs: &[SendWr<'_>]) {
    match path {
        Path::PostSend => qp.post_send(wrs).unwrap(),
        Path::Batch => {
            let mut batch = qp.start_send().unwrap();
            for wr in wrs {
                batch.push(wr).unwrap();
            }
            batch.complete().unwrap();
        }
        Path::Typed => match post::<Rxe>(qp, wrs) {
            Err(e) if matches!(e.kind, PostErrorKind::WrongProvider { .. }) => {
                post::<Mlx5>(qp, wrs).unwrap()
            }
            r => r.unwrap(),
        },
    }
}

/// Writes `wr` into `s` with the builder of its operation: its id, its
/// flags (`INLINE` chosen by the payload), its payload.
pub fn push<P: ProviderKind>(
    s: &mut WrSession<'_, Rc, P>,
    wr: &SendWr<'_>,
) -> Result<(), PostError> {
    let flags = wr.flags - SendFlags::INLINE;
    macro_rules! finish {
        ($b:expr) => {{
            let b = $b.wr_id(wr.wr_id).flags(flags);
            match wr.payload {
                Payload::Inline(data) => b.inline(data),
                Payload::Sges(sges) => b.sge_list(sges),
            }
        }};
    }
    let one_sge = || match wr.payload {
        Payload::Sges(&[sge]) => sge,
        _ => panic!("an atomic takes one SGE: {wr:?}"),
    };
    match wr.op {
        SendOp::Send => finish!(s.send()),
        SendOp::SendWithImm { imm } => finish!(s.send_imm(imm)),
        SendOp::RdmaWrite { remote_addr, rkey } => finish!(s.rdma_write(rkey, remote_addr)),
        SendOp::RdmaWriteWithImm {
            remote_addr,
            rkey,
            imm,
        } => finish!(s.rdma_write_imm(rkey, remote_addr, imm)),
        SendOp::RdmaRead { remote_addr, rkey } => {
            let b = s.rdma_read(rkey, remote_addr).wr_id(wr.wr_id).flags(flags);
            match wr.payload {
                Payload::Sges(sges) => b.sge_list(sges),
                Payload::Inline(_) => panic!("a read takes SGEs: {wr:?}"),
            }
        }
        SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => s
            .atomic_cmp_swp(rkey, remote_addr, compare, swap)
            .wr_id(wr.wr_id)
            .flags(flags)
            .sge(one_sge()),
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => s
            .atomic_fetch_add(rkey, remote_addr, add)
            .wr_id(wr.wr_id)
            .flags(flags)
            .sge(one_sge()),
        SendOp::SendWithInvalidate { rkey } => finish!(s.send_inv(rkey)),
        SendOp::LocalInvalidate { rkey } => s.local_inv(rkey).wr_id(wr.wr_id).flags(flags).post(),
        SendOp::BindMw(bind) => s.bind_mw(bind).wr_id(wr.wr_id).flags(flags).post(),
        SendOp::AtomicWrite {
            remote_addr,
            rkey,
            data,
        } => s
            .atomic_write(rkey, remote_addr, data)
            .wr_id(wr.wr_id)
            .flags(flags)
            .post(),
    }
}

/// Posts `wrs` on `qp` in one typed session of provider `P`.
pub fn post<P: ProviderKind>(qp: &mut QueuePair, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
    let mut s = qp.start_wr::<Rc, P>()?;
    for wr in wrs {
        push(&mut s, wr)?;
    }
    s.complete()
}
