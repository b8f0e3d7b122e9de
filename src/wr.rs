//! Work requests: what `post_send` and `post_recv` take
//! (`struct ibv_send_wr`, `struct ibv_recv_wr`, `struct ibv_sge`).
//!
//! Memory safety of posting: a scatter/gather entry names memory by address
//! and key, and the device (or rxe, in the kernel) checks every access
//! against the registration behind the key; an entry that does not fall in a
//! registered region completes with an error, it never touches other memory.
//! The only memory the device can write is memory registered with the access
//! rights it needs, and regions the crate allocates ([`crate::MemoryRegion`])
//! are never exposed as Rust references. So posting is safe; what is unsafe
//! is registering memory that Rust code also references
//! ([`crate::ProtectionDomain::register_raw`]). Inline data is different: the
//! CPU copies it at post time, so it is given as a byte slice, never as an
//! address.

use bitflags::bitflags;

/// A scatter/gather element (`struct ibv_sge`): `length` bytes at `addr` of the
/// region whose local key is `lkey`: [`Sge::new`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sge {
    /// Virtual address (the registration's iova space).
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The region's local key.
    pub lkey: u32,
}

impl Sge {
    /// An element; see [`crate::MemoryRegion::sge`] for a bounds-checked one.
    pub const fn new(addr: u64, length: u32, lkey: u32) -> Self {
        Sge { addr, length, lkey }
    }

    crate::setters::setters! {
        /// Sets the address.
        addr: u64,
        /// Sets the length in bytes.
        length: u32,
        /// Sets the region's local key.
        lkey: u32,
    }
}

bitflags! {
    /// `IBV_SEND_*` flags of a send work request.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct SendFlags: u32 {
        /// Wait for earlier RDMA reads and atomics to finish first.
        const FENCE = 1;
        /// Generate a completion (otherwise only when the QP signals all).
        const SIGNALED = 2;
        /// Ask for a solicited event at the receiver.
        const SOLICITED = 4;
        /// Data is inline in the WQE (set by [`SendWr::inline`]).
        const INLINE = 8;
        /// Offload IP checksum (raw packet QPs).
        const IP_CSUM = 16;
    }
}

/// The operation of a send work request (`enum ibv_wr_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// `IBV_WR_SEND`.
    #[doc(alias = "IBV_WR_SEND")]
    Send,
    /// `IBV_WR_SEND_WITH_IMM`: the receiver sees `imm` in its completion.
    #[doc(alias = "IBV_WR_SEND_WITH_IMM")]
    SendWithImm {
        /// Immediate data (host order; sent big-endian).
        imm: u32,
    },
    /// `IBV_WR_RDMA_WRITE` to `remote_addr` in the region of `rkey`.
    #[doc(alias = "IBV_WR_RDMA_WRITE")]
    RdmaWrite {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`: also consumes a receive at the peer.
    #[doc(alias = "IBV_WR_RDMA_WRITE_WITH_IMM")]
    RdmaWriteWithImm {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data (host order).
        imm: u32,
    },
    /// `IBV_WR_RDMA_READ` from `remote_addr` into the local SGEs.
    #[doc(alias = "IBV_WR_RDMA_READ")]
    RdmaRead {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `IBV_WR_ATOMIC_CMP_AND_SWP` on the 8 bytes at `remote_addr`; the old
    /// value lands in the (8-byte) local SGE.
    #[doc(alias = "IBV_WR_ATOMIC_CMP_AND_SWP")]
    CompareSwap {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Value to compare with.
        compare: u64,
        /// Value stored when equal.
        swap: u64,
    },
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD` on the 8 bytes at `remote_addr`.
    #[doc(alias = "IBV_WR_ATOMIC_FETCH_AND_ADD")]
    FetchAdd {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Value to add.
        add: u64,
    },
    /// `IBV_WR_SEND_WITH_INV`: a send that also invalidates the remote key
    /// `rkey` at the receiver (its completion reports it).
    #[doc(alias = "IBV_WR_SEND_WITH_INV")]
    SendWithInvalidate {
        /// The receiver's key to invalidate.
        rkey: u32,
    },
    // The operations without payload come last and together: the posts'
    // check for them is then one comparison.
    /// `IBV_WR_LOCAL_INV`: invalidates the window (or fast-registered
    /// region) of `rkey` at this side; no payload.
    #[doc(alias = "IBV_WR_LOCAL_INV")]
    LocalInvalidate {
        /// The key to invalidate.
        rkey: u32,
    },
    /// `IBV_WR_BIND_MW`: binds a memory window ([`crate::MemoryWindow::bind_to`]);
    /// no payload, RC and UC QPs.
    #[doc(alias = "IBV_WR_BIND_MW")]
    BindMw(crate::MwBind),
    /// `IBV_WR_ATOMIC_WRITE`: writes the 8 bytes `data` at `remote_addr`
    /// (8-byte aligned) as one atomic access; no payload, RC QPs. Kernels
    /// from 6.2 (6.1's rxe completes it with a local QP operation error).
    #[doc(alias = "IBV_WR_ATOMIC_WRITE")]
    AtomicWrite {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// The bytes written, in memory order.
        data: [u8; 8],
    },
}

/// `IB_UVERBS_WR_ATOMIC_WRITE` (ib_user_verbs.h from Linux 6.2, after
/// `IB_UVERBS_WR_FLUSH` = 14; 6.1's headers, the ones `uverbs-abi` is
/// checked against, lack both; `IBV_WR_ATOMIC_WRITE` in rdma-core's verbs.h,
/// which capi's layout probe compares).
const WR_ATOMIC_WRITE: u32 = 15;

impl SendOp {
    /// The `IB_UVERBS_WR_*` opcode.
    pub fn raw(&self) -> u32 {
        match self {
            SendOp::RdmaWrite { .. } => 0,
            SendOp::RdmaWriteWithImm { .. } => 1,
            SendOp::Send => 2,
            SendOp::SendWithImm { .. } => 3,
            SendOp::RdmaRead { .. } => 4,
            SendOp::CompareSwap { .. } => 5,
            SendOp::FetchAdd { .. } => 6,
            SendOp::LocalInvalidate { .. } => 7,
            SendOp::BindMw(_) => 8,
            SendOp::SendWithInvalidate { .. } => 9,
            SendOp::AtomicWrite { .. } => WR_ATOMIC_WRITE,
        }
    }

    /// Whether the operation is an atomic.
    pub fn is_atomic(&self) -> bool {
        matches!(self, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }

    /// Whether the operation is local to the QP (no packet: a bind or a
    /// local invalidate).
    pub fn is_local(&self) -> bool {
        matches!(self, SendOp::LocalInvalidate { .. } | SendOp::BindMw(_))
    }

    /// The key an invalidating operation names (carried where immediate
    /// data goes, `ex.invalidate_rkey`).
    pub fn invalidate_rkey(&self) -> Option<u32> {
        match *self {
            SendOp::LocalInvalidate { rkey } | SendOp::SendWithInvalidate { rkey } => Some(rkey),
            _ => None,
        }
    }

    /// Whether the operation takes no scatter/gather list or inline data.
    pub fn takes_no_payload(&self) -> bool {
        matches!(
            self,
            SendOp::LocalInvalidate { .. } | SendOp::BindMw(_) | SendOp::AtomicWrite { .. }
        )
    }

    /// Immediate data, if the operation carries it.
    pub fn imm(&self) -> Option<u32> {
        match *self {
            SendOp::SendWithImm { imm } | SendOp::RdmaWriteWithImm { imm, .. } => Some(imm),
            _ => None,
        }
    }
}

/// Where a UD send goes: an address handle, the remote QP number and Q_Key.
///
/// The `wr.ud` part of libibverbs' `struct ibv_send_wr` (`ah`, `remote_qpn`, `remote_qkey`):
/// [`UdDest::new`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct UdDest<'a> {
    /// The address handle of the destination.
    pub ah: &'a crate::AddressHandle,
    /// Remote QP number.
    pub remote_qpn: u32,
    /// Remote Q_Key.
    pub remote_qkey: u32,
}

impl<'a> UdDest<'a> {
    /// The QP `remote_qpn` with Q_Key `remote_qkey`, reached through `ah`.
    #[inline]
    pub const fn new(ah: &'a crate::AddressHandle, remote_qpn: u32, remote_qkey: u32) -> Self {
        UdDest {
            ah,
            remote_qpn,
            remote_qkey,
        }
    }

    crate::setters::setters! {
        /// Sets the address handle.
        ah: &'a crate::AddressHandle,
        /// Sets the remote QP number.
        remote_qpn: u32,
        /// Sets the remote Q_Key.
        remote_qkey: u32,
    }

    /// The provider's data of the destination's address handle.
    pub(crate) fn ah_driver(&self) -> &'a crate::providers::AnyAh {
        self.ah.driver()
    }
}

/// The payload of a send work request.
///
/// In libibverbs, `sg_list`/`num_sge` of `struct ibv_send_wr`, inline when `IBV_SEND_INLINE` is set.
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    /// Scatter/gather list (read by the device).
    Sges(&'a [Sge]),
    /// Bytes copied into the WQE at post time (`IBV_SEND_INLINE`).
    Inline(&'a [u8]),
}

/// A send work request (`struct ibv_send_wr`): [`SendWr::new`] or
/// [`SendWr::send`], then [`inline`](SendWr::inline),
/// [`flags`](SendWr::flags), [`unsignaled`](SendWr::unsignaled),
/// [`to`](SendWr::to).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// The data.
    pub payload: Payload<'a>,
    /// `IBV_SEND_*` flags (`INLINE` is implied by an inline payload).
    pub flags: SendFlags,
    /// The destination, for UD QPs.
    pub ud: Option<UdDest<'a>>,
}

impl<'a> SendWr<'a> {
    /// A signaled work request for `op` with a scatter/gather list.
    #[inline]
    pub const fn new(wr_id: u64, op: SendOp, sges: &'a [Sge]) -> Self {
        SendWr {
            wr_id,
            op,
            payload: Payload::Sges(sges),
            flags: SendFlags::SIGNALED,
            ud: None,
        }
    }

    /// A signaled `SEND`.
    #[inline]
    pub const fn send(wr_id: u64, sges: &'a [Sge]) -> Self {
        Self::new(wr_id, SendOp::Send, sges)
    }

    /// Replaces the payload.
    #[inline]
    pub const fn payload(mut self, payload: Payload<'a>) -> Self {
        self.payload = payload;
        self
    }

    /// Replaces the payload with the scatter/gather list `sges`.
    #[inline]
    pub const fn sges(mut self, sges: &'a [Sge]) -> Self {
        self.payload = Payload::Sges(sges);
        self
    }

    /// Sets the operation.
    #[inline]
    pub const fn op(mut self, op: SendOp) -> Self {
        self.op = op;
        self
    }

    /// Sets the id returned in the completion.
    #[inline]
    pub const fn wr_id(mut self, wr_id: u64) -> Self {
        self.wr_id = wr_id;
        self
    }

    /// Replaces the payload with inline bytes.
    #[inline]
    pub const fn inline(mut self, data: &'a [u8]) -> Self {
        self.payload = Payload::Inline(data);
        self
    }

    /// Sets the flags (replacing the default `SIGNALED`).
    #[inline]
    pub const fn flags(mut self, flags: SendFlags) -> Self {
        self.flags = flags;
        self
    }

    /// Makes the request unsignaled.
    #[inline]
    pub const fn unsignaled(mut self) -> Self {
        self.flags = self.flags.difference(SendFlags::SIGNALED);
        self
    }

    /// Sets the UD destination.
    ///
    /// A UD message is one packet: at most the port's active MTU
    /// ([`PortAttr::active_mtu`](crate::PortAttr::active_mtu)) bytes, the
    /// GRH not counted. Check the length before posting: following IB spec
    /// C10-93.1.1, rxe sends nothing for a longer message and still
    /// completes it successfully, so the data is silently lost.
    #[inline]
    pub const fn to(mut self, dest: UdDest<'a>) -> Self {
        self.ud = Some(dest);
        self
    }

    /// Sets or clears the UD destination ([`to`](Self::to) with an
    /// `Option`).
    #[inline]
    pub const fn ud(mut self, ud: Option<UdDest<'a>>) -> Self {
        self.ud = ud;
        self
    }

    /// Total payload length in bytes (saturating).
    pub fn length(&self) -> u32 {
        match self.payload {
            Payload::Sges(sges) => sges.iter().fold(0u32, |n, s| n.saturating_add(s.length)),
            Payload::Inline(data) => u32::try_from(data.len()).unwrap_or(u32::MAX),
        }
    }
}

/// A receive work request (`struct ibv_recv_wr`): [`RecvWr::new`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where incoming data is scattered.
    pub sges: &'a [Sge],
}

impl<'a> RecvWr<'a> {
    /// A receive work request.
    #[inline]
    pub const fn new(wr_id: u64, sges: &'a [Sge]) -> Self {
        RecvWr { wr_id, sges }
    }
}

/// Why a post failed, and which request of the batch (`bad_wr`).
///
/// Requests before `index` were posted (and the doorbell rung for them);
/// the one at `index` and those after it were not.
///
/// libibverbs returns the errno and sets `*bad_wr`; this carries both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostError {
    /// Index of the first request that was not posted.
    pub index: usize,
    /// What was wrong with it.
    pub kind: PostErrorKind,
}

/// What was wrong with a work request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostErrorKind {
    /// The queue is full: wait for completions and post again.
    QueueFull,
    /// More scatter/gather elements than the queue was created for.
    TooManySges {
        /// Given.
        given: usize,
        /// The queue's `max_send_sge` / `max_recv_sge`.
        max: u32,
    },
    /// Inline data longer than the queue's `max_inline_data`.
    InlineTooLong {
        /// Given.
        given: usize,
        /// The queue's limit.
        max: u32,
    },
    /// The operation does not exist for this QP type (e.g. RDMA on UD).
    OpNotSupported(&'static str),
    /// A UD send without a destination, or a destination on a connected QP.
    BadDestination(&'static str),
    /// An atomic whose remote address is not 8-byte aligned or whose local
    /// buffer is not exactly 8 bytes.
    BadAtomic(&'static str),
    /// The QP is in a state that refuses posting (RESET, or INIT for sends).
    BadState(&'static str),
    /// A payload given to an operation that takes none (a bind, a local
    /// invalidate, an atomic write: its data is in the operation).
    UnexpectedPayload(&'static str),
    /// A typed session ([`crate::QueuePair::start_wr`]) was started for
    /// another QP type than the QP's.
    WrongQpType {
        /// The QP's type.
        qp: crate::QpType,
        /// The type the session was asked for.
        session: crate::QpType,
    },
    /// A typed session was started for another provider than the QP's
    /// device's ([`crate::qp_ex::ProviderKind`]).
    WrongProvider {
        /// The QP's provider (`"rxe"`).
        qp: &'static str,
        /// The provider the session was asked for (`"mlx5"`).
        session: &'static str,
    },
    /// The kernel refused the doorbell: the requests before `index` are in
    /// the queue but the device was not told; they run at the next
    /// successful post.
    Doorbell(crate::Error),
}

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "work request {} not posted: ", self.index)?;
        match &self.kind {
            PostErrorKind::QueueFull => write!(f, "the queue is full (poll completions first)"),
            PostErrorKind::TooManySges { given, max } => {
                write!(f, "{given} scatter/gather elements, the queue takes {max}")
            }
            PostErrorKind::InlineTooLong { given, max } => {
                write!(f, "{given} bytes of inline data, the queue takes {max}")
            }
            PostErrorKind::OpNotSupported(why)
            | PostErrorKind::BadDestination(why)
            | PostErrorKind::BadAtomic(why)
            | PostErrorKind::BadState(why)
            | PostErrorKind::UnexpectedPayload(why) => f.write_str(why),
            PostErrorKind::Doorbell(_) => {
                f.write_str("the doorbell was refused (the source says how)")
            }
            PostErrorKind::WrongQpType { qp, session } => write!(
                f,
                "the QP is {qp:?}, the session was started for {session:?}: \
                 start it as start_wr::<{qp:?}, _>()"
            ),
            PostErrorKind::WrongProvider { qp, session } => write!(
                f,
                "the session was started for provider {session}, the QP's device is \
                 driven by {qp} (Context::provider_name): start it for that provider"
            ),
        }
    }
}

/// The source is the doorbell's [`Error`](crate::Error) for
/// [`PostErrorKind::Doorbell`]; the other kinds are found by the library.
impl std::error::Error for PostError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            PostErrorKind::Doorbell(e) => Some(e),
            _ => None,
        }
    }
}

impl From<PostError> for crate::Error {
    /// A post error as the crate's error (the doorbell's own error, or an
    /// `InvalidArgument` naming the request).
    fn from(e: PostError) -> Self {
        match e.kind {
            PostErrorKind::Doorbell(err) => err,
            _ => crate::Error::new(
                "post work request",
                crate::ErrorKind::InvalidArgument,
                e.to_string(),
            ),
        }
    }
}
