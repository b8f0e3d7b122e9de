//! `wr_complete`: a session's recorded requests written through one typed
//! uverbs session (`QueuePair::start_wr::<K, P>()`), the transport `K`
//! and provider `P` the QP's, and its one doorbell.
//!
//! Each transport has its own writer ([`Transport`]), since the typed API
//! gives each only the operations it carries: what one does not carry
//! fails with `EOPNOTSUPP`, a request malformed for its operation (inline
//! data for a read, a list for an atomic, a UD send without a destination
//! or a connected one with) with `EINVAL`. On any error the typed session
//! is dropped, which takes back what it had written: nothing of the
//! session executes.

use uverbs::{
    qpx::{self, Mlx5, ProviderKind, QpKind, Rc, Rxe, Uc, Ud, Wr, WrSession},
    sys::Errno,
    PostError, PostErrorKind, QpType, QueuePair, SendFlags, UdDest,
};

use super::{
    pending::{Data, Op, Pending, Req},
    Config, Provider,
};
use crate::{ah::Ah, errno, layout::qp::ibv_ah};

/// The errno of a typed session's refusal, as rxe's `wr_*` report the
/// same conditions (`ENOSPC` for a full queue, too many SGEs or too much
/// inline data) and its kernel the rest (`EINVAL`; the doorbell's own).
pub(super) fn session_errno(e: &PostError) -> Errno {
    match &e.kind {
        PostErrorKind::QueueFull
        | PostErrorKind::TooManySges { .. }
        | PostErrorKind::InlineTooLong { .. } => Errno::ENOSPC,
        PostErrorKind::OpNotSupported(_)
        | PostErrorKind::WrongQpType { .. }
        | PostErrorKind::WrongProvider { .. } => Errno::EOPNOTSUPP,
        PostErrorKind::Doorbell(err) => errno::of(err),
        _ => Errno::EINVAL,
    }
}

/// Writes and rings the session's requests on `uv`.
///
/// # Safety
/// The AHs the requests name (`ibv_wr_set_ud_addr`) are live AHs of this
/// library.
pub(super) unsafe fn post(uv: &mut QueuePair, config: &Config, p: &Pending) -> Result<(), Errno> {
    match (config.qp_type, config.provider) {
        // SAFETY: the caller's contract.
        (QpType::Rc, Provider::Rxe) => unsafe { run::<Rc, Rxe>(uv, p) },
        // SAFETY: as above.
        (QpType::Rc, Provider::Mlx5) => unsafe { run::<Rc, Mlx5>(uv, p) },
        // SAFETY: as above.
        (QpType::Uc, Provider::Rxe) => unsafe { run::<Uc, Rxe>(uv, p) },
        // SAFETY: as above.
        (QpType::Uc, Provider::Mlx5) => unsafe { run::<Uc, Mlx5>(uv, p) },
        // SAFETY: as above.
        (QpType::Ud, Provider::Rxe) => unsafe { run::<Ud, Rxe>(uv, p) },
        // SAFETY: as above.
        (QpType::Ud, Provider::Mlx5) => unsafe { run::<Ud, Mlx5>(uv, p) },
        _ => Err(Errno::EOPNOTSUPP),
    }
}

/// [`post`] on a QP of transport `K` and provider `P`.
///
/// # Safety
/// As [`post`].
unsafe fn run<K: Transport, P: ProviderKind>(uv: &mut QueuePair, p: &Pending) -> Result<(), Errno> {
    let mut s = uv.start_wr::<K, P>().map_err(|e| session_errno(&e))?;
    for r in &p.reqs {
        // SAFETY: the caller's contract.
        unsafe { K::write(&mut s, r, p) }?;
    }
    s.complete().map_err(|e| session_errno(&e))
}

/// `wr_flags` as the typed request's flags: `IBV_SEND_INLINE` is the data
/// setter's to say (the payload method sets it for inline data).
fn flags(raw: u32) -> SendFlags {
    SendFlags::from_bits_truncate(raw) - SendFlags::INLINE
}

/// A SEND's or RDMA WRITE's data: SGEs or inline bytes.
fn data<K: QpKind, P: ProviderKind>(
    w: Wr<'_, '_, '_, K, P, qpx::Data>,
    r: &Req,
    p: &Pending,
) -> Result<(), Errno> {
    let w = w.wr_id(r.wr_id).flags(flags(r.flags));
    match &r.data {
        Data::Sges(range) => w.sge_list(p.sges(range)),
        Data::Inline(range) => w.inline(p.inline(range)),
    }
    .map_err(|e| session_errno(&e))
}

/// An RDMA READ's SGEs (inline data has nowhere to go).
fn read<K: QpKind, P: ProviderKind>(
    w: Wr<'_, '_, '_, K, P, qpx::Read>,
    r: &Req,
    p: &Pending,
) -> Result<(), Errno> {
    let w = w.wr_id(r.wr_id).flags(flags(r.flags));
    match &r.data {
        Data::Sges(range) => w.sge_list(p.sges(range)).map_err(|e| session_errno(&e)),
        Data::Inline(_) => Err(Errno::EINVAL),
    }
}

/// An atomic's one SGE, where the old value lands.
fn atomic<K: QpKind, P: ProviderKind>(
    w: Wr<'_, '_, '_, K, P, qpx::Atomic>,
    r: &Req,
    p: &Pending,
) -> Result<(), Errno> {
    let w = w.wr_id(r.wr_id).flags(flags(r.flags));
    match &r.data {
        Data::Sges(range) => match p.sges(range) {
            [sge] => w.sge(*sge).map_err(|e| session_errno(&e)),
            _ => Err(Errno::EINVAL),
        },
        Data::Inline(_) => Err(Errno::EINVAL),
    }
}

/// A request whose operation carries its data (a bind, a local
/// invalidate, an atomic write): a setter's data is `EINVAL`, as rxe
/// refuses a bind with any (rdma-core rxe.c `validate_send_wr`).
fn no_data<K: QpKind, P: ProviderKind>(
    w: Wr<'_, '_, '_, K, P, qpx::NoData>,
    r: &Req,
) -> Result<(), Errno> {
    if !matches!(&r.data, Data::Sges(range) if range.is_empty()) {
        return Err(Errno::EINVAL);
    }
    w.wr_id(r.wr_id)
        .flags(flags(r.flags))
        .post()
        .map_err(|e| session_errno(&e))
}

/// How each transport writes a recorded request into its typed session.
trait Transport: QpKind + Sized {
    /// Writes `r` (its data in `p`).
    ///
    /// # Safety
    /// The AH of `r.ud`, if any, is a live AH of this library.
    unsafe fn write<P: ProviderKind>(
        s: &mut WrSession<'_, Self, P>,
        r: &Req,
        p: &Pending,
    ) -> Result<(), Errno>;
}

impl Transport for Rc {
    unsafe fn write<P: ProviderKind>(
        s: &mut WrSession<'_, Rc, P>,
        r: &Req,
        p: &Pending,
    ) -> Result<(), Errno> {
        if r.ud.is_some() {
            return Err(Errno::EINVAL);
        }
        match r.op {
            Op::CmpSwp {
                rkey,
                addr,
                compare,
                swap,
            } => atomic(s.atomic_cmp_swp(rkey, addr, compare, swap), r, p),
            Op::FetchAdd { rkey, addr, add } => atomic(s.atomic_fetch_add(rkey, addr, add), r, p),
            Op::Read { rkey, addr } => read(s.rdma_read(rkey, addr), r, p),
            Op::LocalInv(rkey) => no_data(s.local_inv(rkey), r),
            Op::AtomicWrite { rkey, addr, data } => no_data(s.atomic_write(rkey, addr, data), r),
            _ => connected(s, r, p),
        }
    }
}

impl Transport for Uc {
    unsafe fn write<P: ProviderKind>(
        s: &mut WrSession<'_, Uc, P>,
        r: &Req,
        p: &Pending,
    ) -> Result<(), Errno> {
        if r.ud.is_some() {
            return Err(Errno::EINVAL);
        }
        connected(s, r, p)
    }
}

/// What RC and UC share: sends and RDMA writes.
fn connected<K: qpx::Connected + qpx::Writes, P: ProviderKind>(
    s: &mut WrSession<'_, K, P>,
    r: &Req,
    p: &Pending,
) -> Result<(), Errno> {
    match r.op {
        Op::Send => data(s.send(), r, p),
        Op::SendImm(imm) => data(s.send_imm(imm), r, p),
        Op::Write { rkey, addr } => data(s.rdma_write(rkey, addr), r, p),
        Op::WriteImm { rkey, addr, imm } => data(s.rdma_write_imm(rkey, addr, imm), r, p),
        Op::SendInv(rkey) => data(s.send_inv(rkey), r, p),
        Op::BindMw(bind) => no_data(s.bind_mw(bind), r),
        Op::Read { .. }
        | Op::CmpSwp { .. }
        | Op::FetchAdd { .. }
        | Op::LocalInv(_)
        | Op::AtomicWrite { .. } => Err(Errno::EOPNOTSUPP),
    }
}

impl Transport for Ud {
    unsafe fn write<P: ProviderKind>(
        s: &mut WrSession<'_, Ud, P>,
        r: &Req,
        p: &Pending,
    ) -> Result<(), Errno> {
        if !matches!(r.op, Op::Send | Op::SendImm(_)) {
            return Err(Errno::EOPNOTSUPP);
        }
        let Some(ud) = r.ud else {
            return Err(Errno::EINVAL);
        };
        // SAFETY: the caller's contract.
        let ah = unsafe { Ah::from_c(ud.ah as *mut ibv_ah) }?;
        let dest = UdDest {
            ah: ah.handle(),
            remote_qpn: ud.remote_qpn,
            remote_qkey: ud.remote_qkey,
        };
        match r.op {
            Op::Send => data(s.send_to(dest), r, p),
            Op::SendImm(imm) => data(s.send_imm_to(dest, imm), r, p),
            _ => Err(Errno::EOPNOTSUPP), // refused above
        }
    }
}
