//! `rdma_getaddrinfo`: the addresses an rdma_cm endpoint binds to or
//! connects to, from a host name or address and a service (port), as
//! librdmacm 44 gives them without ibacm (`librdmacm/addrinfo.c`).
//!
//! librdmacm turns the hints into `getaddrinfo(3)` hints (passive,
//! numeric-host, the family unless `AF_IB`, `SOCK_STREAM`/`SOCK_DGRAM` from
//! the QP type, TCP/UDP from the port space), takes the **first** answer only,
//! and fills one `struct rdma_addrinfo` from it: the address becomes the
//! source of a passive entry (`RAI_PASSIVE`) and the destination of an active
//! one; the QP type and port space come from the hints, else from the
//! answer's socket type and protocol (stream: RC and `RDMA_PS_TCP`,
//! datagram: UD and `RDMA_PS_UDP`). The hints' source address is kept when
//! the lookup gave none. With neither node nor service, the hints alone are
//! copied. Route and connect data come only from ibacm, which this crate
//! does not ask (as librdmacm without a running ibacm): they stay empty, and
//! `RAI_NOROUTE` changes nothing.
//!
//! Here names go through [`std::net::ToSocketAddrs`] (the C library's
//! resolver, as librdmacm's), numeric addresses are parsed without a
//! lookup, and a failed lookup is an [`ErrorKind::NameLookup`] error whose
//! [`Error::gai_code`] is the `EAI_*` code `rdma_getaddrinfo` returns.
//! Services are port numbers (`/etc/services` names are not looked up:
//! `EAI_SERVICE`); `AF_IB` addresses are not supported (`EAI_FAMILY`).
#![allow(unsafe_code)] // gai_strerror, to name the lookup's EAI code

use std::{
    ffi::CStr,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs},
};

use bitflags::bitflags;

use crate::{
    error::{Error, ErrorKind, Result},
    QpType,
};

use super::PortSpace;

bitflags! {
    /// `ai_flags` of `struct rdma_addrinfo` (`RAI_*`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct AiFlags: u32 {
        /// The entry is for a listener: the address is the source
        /// (`RAI_PASSIVE`).
        #[doc(alias = "RAI_PASSIVE")]
        const PASSIVE = 0x1;
        /// The node is a numeric address; no name lookup (`RAI_NUMERICHOST`).
        #[doc(alias = "RAI_NUMERICHOST")]
        const NUMERICHOST = 0x2;
        /// Do not resolve a route (`RAI_NOROUTE`; only ibacm ever does).
        #[doc(alias = "RAI_NOROUTE")]
        const NOROUTE = 0x4;
        /// The hints' family applies (`RAI_FAMILY`).
        #[doc(alias = "RAI_FAMILY")]
        const FAMILY = 0x8;
    }
}

/// An address family, `ai_family` (`AF_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AddrFamily {
    /// `AF_UNSPEC` (0): any.
    #[default]
    Unspec,
    /// `AF_INET` (2).
    Inet,
    /// `AF_INET6` (10).
    Inet6,
    /// `AF_IB` (27): native InfiniBand addresses.
    Ib,
    /// A number this crate does not know.
    Other(i32),
}

impl AddrFamily {
    /// The `AF_*` number.
    pub fn raw(self) -> i32 {
        match self {
            AddrFamily::Unspec => 0,
            AddrFamily::Inet => 2,
            AddrFamily::Inet6 => 10,
            AddrFamily::Ib => 27,
            AddrFamily::Other(v) => v,
        }
    }

    /// From the `AF_*` number.
    pub fn from_raw(v: i32) -> Self {
        match v {
            0 => AddrFamily::Unspec,
            2 => AddrFamily::Inet,
            10 => AddrFamily::Inet6,
            27 => AddrFamily::Ib,
            v => AddrFamily::Other(v),
        }
    }

    /// The family of `addr`.
    pub fn of(addr: &SocketAddr) -> Self {
        match addr {
            SocketAddr::V4(_) => AddrFamily::Inet,
            SocketAddr::V6(_) => AddrFamily::Inet6,
        }
    }
}

/// The hints of [`getaddrinfo`] (the `hints` argument of
/// `rdma_getaddrinfo`): everything unset by default (`AddrHints::new()`),
/// then the setters: `AddrHints::new().flags(AiFlags::PASSIVE).port_space(Some(PortSpace::Tcp))`.
#[doc(alias = "rdma_addrinfo")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AddrHints {
    /// `RAI_*` flags.
    pub flags: AiFlags,
    /// The family wanted (`AF_UNSPEC`: any).
    pub family: AddrFamily,
    /// The QP type (`None`: from the port space, else RC).
    pub qp_type: Option<QpType>,
    /// The port space (`None`: from the QP type, else TCP).
    pub port_space: Option<PortSpace>,
    /// A source address, kept in the answer when the lookup gave none.
    pub src_addr: Option<SocketAddr>,
    /// A destination address (used when neither node nor service is given).
    pub dst_addr: Option<SocketAddr>,
}

impl AddrHints {
    /// No flags, any family, no QP type, port space or addresses.
    pub const fn new() -> Self {
        AddrHints {
            flags: AiFlags::empty(),
            family: AddrFamily::Unspec,
            qp_type: None,
            port_space: None,
            src_addr: None,
            dst_addr: None,
        }
    }

    crate::setters::setters! {
        /// Sets the `RAI_*` flags.
        flags: AiFlags,
        /// Sets the family.
        family: AddrFamily,
        /// Sets the QP type.
        qp_type: Option<QpType>,
        /// Sets the port space.
        port_space: Option<PortSpace>,
        /// Sets the source address.
        src_addr: Option<SocketAddr>,
        /// Sets the destination address.
        dst_addr: Option<SocketAddr>,
    }
}

/// One answer of [`getaddrinfo`] (`struct rdma_addrinfo`): what
/// [`super::create_ep`] makes an endpoint from.
#[doc(alias = "rdma_addrinfo")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RdmaAddrInfo {
    /// `RAI_PASSIVE` for a listener's entry (librdmacm keeps no other flag
    /// from a lookup; with neither node nor service, the hints' flags).
    pub flags: AiFlags,
    /// The family of the addresses.
    pub family: AddrFamily,
    /// The QP type of the endpoint.
    pub qp_type: QpType,
    /// The port space of the endpoint.
    pub port_space: PortSpace,
    /// The source address: what a passive endpoint binds to.
    pub src_addr: Option<SocketAddr>,
    /// The destination address: what an active endpoint resolves.
    pub dst_addr: Option<SocketAddr>,
    /// The canonical name of the source (never set by a lookup here, as in
    /// librdmacm, which asks for none).
    pub src_canonname: Option<String>,
    /// The canonical name of the destination (as `src_canonname`).
    pub dst_canonname: Option<String>,
    /// Path records for the route (`ai_route`: from ibacm only, so empty).
    pub route: Vec<u8>,
    /// Private data for the connect (`ai_connect`: from ibacm only, so empty).
    pub connect: Vec<u8>,
}

impl RdmaAddrInfo {
    /// An entry with the given addresses, passive when `flags` says so; the
    /// rest empty. (What [`getaddrinfo`] returns; for programs that know
    /// their addresses already.)
    pub fn new(
        flags: AiFlags,
        port_space: PortSpace,
        src_addr: Option<SocketAddr>,
        dst_addr: Option<SocketAddr>,
    ) -> Self {
        let family = dst_addr
            .or(src_addr)
            .map_or(AddrFamily::Unspec, |a| AddrFamily::of(&a));
        RdmaAddrInfo {
            flags,
            family,
            qp_type: port_space.qp_type(),
            port_space,
            src_addr,
            dst_addr,
            src_canonname: None,
            dst_canonname: None,
            route: Vec::new(),
            connect: Vec::new(),
        }
    }

    /// Whether this is a listener's entry (`RAI_PASSIVE`).
    pub fn is_passive(&self) -> bool {
        self.flags.contains(AiFlags::PASSIVE)
    }

    crate::setters::setters! {
        /// Sets the flags.
        flags: AiFlags,
        /// Sets the family.
        family: AddrFamily,
        /// Sets the QP type.
        qp_type: QpType,
        /// Sets the port space.
        port_space: PortSpace,
        /// Sets the source address.
        src_addr: Option<SocketAddr>,
        /// Sets the destination address.
        dst_addr: Option<SocketAddr>,
    }
}

const OP: &str = "rdma_getaddrinfo";

/// `EAI_ADDRFAMILY` (glibc and musl: -9; the `libc` crate leaves it out, as
/// both C libraries define it only for `_GNU_SOURCE`): the host has no
/// address of the family asked for.
pub const EAI_ADDRFAMILY: i32 = -9;

/// The QP type and port space of an answer: the hints', else what the
/// socket type and protocol librdmacm asks `getaddrinfo` for give back
/// (`ucma_convert_to_ai`, `ucma_convert_to_rai`).
fn qp_and_ps(hints: &AddrHints) -> (QpType, PortSpace) {
    let stream = |t: QpType| !matches!(t, QpType::Ud);
    match (hints.qp_type, hints.port_space) {
        (Some(t), Some(PortSpace::Ib(_))) => (t, PortSpace::Ib(t)),
        (Some(t), Some(ps)) => (t, ps),
        // A QP type alone: stream → TCP, datagram → UDP.
        (Some(t), None) => (
            t,
            if stream(t) {
                PortSpace::Tcp
            } else {
                PortSpace::Udp
            },
        ),
        // A port space alone: TCP → stream (RC), UDP/IPoIB → datagram (UD),
        // IB → either, and the resolver's first answer is a stream one.
        (None, Some(ps)) => (ps.qp_type(), ps),
        (None, None) => (QpType::Rc, PortSpace::Tcp),
    }
}

/// `getaddrinfo`'s `EAI_*` code for a failed std lookup: std reports the
/// resolver's `gai_strerror` text (or the errno for `EAI_SYSTEM`), so the
/// code is the one whose text that is.
fn gai_code_of(e: &std::io::Error) -> i32 {
    if e.raw_os_error().is_some() {
        return libc::EAI_SYSTEM;
    }
    let msg = e.to_string();
    const CODES: [i32; 11] = [
        libc::EAI_NONAME,
        libc::EAI_NODATA,
        EAI_ADDRFAMILY,
        libc::EAI_AGAIN,
        libc::EAI_FAIL,
        libc::EAI_FAMILY,
        libc::EAI_SERVICE,
        libc::EAI_MEMORY,
        libc::EAI_SOCKTYPE,
        libc::EAI_BADFLAGS,
        libc::EAI_OVERFLOW,
    ];
    CODES
        .into_iter()
        .find(|&code| {
            // SAFETY: gai_strerror takes any int and returns a pointer to a
            // static NUL-terminated string (never NULL in glibc or musl),
            // which is only read here.
            let text = unsafe { libc::gai_strerror(code) };
            if text.is_null() {
                return false;
            }
            // SAFETY: non-null, NUL-terminated and static, as above.
            let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
            !text.is_empty() && msg.ends_with(text.as_ref())
        })
        .unwrap_or(libc::EAI_NONAME)
}

fn lookup_error(code: i32, detail: String) -> Error {
    Error::name_lookup(OP, code, detail)
}

/// Whether `addr` is of the family wanted (`Unspec`: any).
fn family_ok(family: AddrFamily, addr: &SocketAddr) -> bool {
    match family {
        AddrFamily::Unspec => true,
        f => f == AddrFamily::of(addr),
    }
}

/// The address of `node` and `port`, as the first answer of the resolver
/// with librdmacm's hints.
fn resolve(node: Option<&str>, port: u16, hints: &AddrHints, passive: bool) -> Result<SocketAddr> {
    let family = if hints.family == AddrFamily::Ib {
        // librdmacm asks getaddrinfo for AF_UNSPEC then; an AF_IB answer
        // needs RAI_FAMILY + RAI_NUMERICHOST and an IPv6 literal.
        if hints.flags.contains(AiFlags::FAMILY) && hints.flags.contains(AiFlags::NUMERICHOST) {
            return Err(lookup_error(
                libc::EAI_FAMILY,
                "AF_IB addresses are not supported by this crate's rdma_cm".into(),
            ));
        }
        AddrFamily::Unspec
    } else {
        hints.family
    };
    if !matches!(
        family,
        AddrFamily::Unspec | AddrFamily::Inet | AddrFamily::Inet6
    ) {
        return Err(lookup_error(
            libc::EAI_FAMILY,
            format!("family {} is not an IP family", family.raw()),
        ));
    }
    let Some(node) = node else {
        // No node: the wildcard for a listener, loopback otherwise (glibc's
        // first answers: 0.0.0.0 passive, ::1 active, for AF_UNSPEC).
        let ip = match (family, passive) {
            (AddrFamily::Inet6, true) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            (AddrFamily::Inet6, false) | (AddrFamily::Unspec, false) => {
                IpAddr::V6(Ipv6Addr::LOCALHOST)
            }
            (_, true) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            (_, false) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        };
        return Ok(SocketAddr::new(ip, port));
    };
    // Numeric first (no lookup), with an IPv6 scope (`fe80::1%eth0` takes
    // the lookup path, as the resolver handles interface names).
    if let Ok(ip) = node.parse::<IpAddr>() {
        let a = SocketAddr::new(ip, port);
        if !family_ok(family, &a) {
            return Err(lookup_error(
                EAI_ADDRFAMILY,
                format!("{node} is not of the family asked for ({family:?})"),
            ));
        }
        return Ok(a);
    }
    if hints.flags.contains(AiFlags::NUMERICHOST) && !node.contains('%') {
        return Err(lookup_error(
            libc::EAI_NONAME,
            format!("{node:?} is not a numeric address (RAI_NUMERICHOST)"),
        ));
    }
    let answers = (node, port)
        .to_socket_addrs()
        .map_err(|e| lookup_error(gai_code_of(&e), format!("{node}: {e}")))?;
    let mut any = false;
    for a in answers {
        any = true;
        if family_ok(family, &a) {
            return Ok(a);
        }
    }
    Err(lookup_error(
        if any {
            EAI_ADDRFAMILY
        } else {
            libc::EAI_NONAME
        },
        format!("{node} has no address of the family asked for ({family:?})"),
    ))
}

/// The port of a service: a number (`/etc/services` names are not looked up).
fn service_port(service: Option<&str>) -> Result<u16> {
    let Some(s) = service else { return Ok(0) };
    s.trim().parse::<u16>().map_err(|_| {
        lookup_error(
            libc::EAI_SERVICE,
            format!("service {s:?} is not a port number (names are not looked up)"),
        )
    })
}

/// Resolves `node` and `service` for an rdma_cm endpoint, like
/// `rdma_getaddrinfo` (see the [module documentation](self)): one entry,
/// passive (`AiFlags::PASSIVE` in the hints) with `node` (or the wildcard) as
/// source address, active with it as destination.
///
/// Errors: `InvalidArgument` (`EINVAL`) with neither node, service nor
/// hints; [`ErrorKind::NameLookup`] with the `EAI_*` code
/// ([`Error::gai_code`]) for what `getaddrinfo` would refuse.
///
/// ```no_run
/// # fn main() -> uverbs::Result<()> {
/// use uverbs::cm::{getaddrinfo, AddrHints, AiFlags};
/// let server = getaddrinfo(None, Some("7471"), Some(&AddrHints::new().flags(AiFlags::PASSIVE)))?;
/// let client = getaddrinfo(Some("192.0.2.1"), Some("7471"), None)?;
/// assert!(server[0].is_passive() && !client[0].is_passive());
/// # Ok(())
/// # }
/// ```
#[doc(alias = "rdma_getaddrinfo")]
pub fn getaddrinfo(
    node: Option<&str>,
    service: Option<&str>,
    hints: Option<&AddrHints>,
) -> Result<Vec<RdmaAddrInfo>> {
    if node.is_none() && service.is_none() && hints.is_none() {
        return Err(Error::new(
            OP,
            ErrorKind::InvalidArgument,
            "give a node, a service or hints",
        ));
    }
    let none = AddrHints::new();
    let hints = hints.unwrap_or(&none);
    let (qp_type, port_space) = qp_and_ps(hints);
    let mut rai = if node.is_some() || service.is_some() {
        let passive = hints.flags.contains(AiFlags::PASSIVE);
        let port = service_port(service)?;
        let addr = resolve(node, port, hints, passive)?;
        let mut r = RdmaAddrInfo::new(AiFlags::empty(), port_space, None, None);
        r.qp_type = qp_type;
        r.family = AddrFamily::of(&addr);
        if passive {
            r.flags = AiFlags::PASSIVE;
            r.src_addr = Some(addr);
        } else {
            r.dst_addr = Some(addr);
        }
        r
    } else {
        // Neither node nor service: the hints, as they are (with no hint
        // of its own, the QP type and port space stay unset in C: 0).
        let mut r = RdmaAddrInfo::new(hints.flags, port_space, None, hints.dst_addr);
        r.qp_type = qp_type;
        r.family = hints.family;
        r
    };
    if rai.src_addr.is_none() {
        rai.src_addr = hints.src_addr;
    }
    Ok(vec![rai])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(node: Option<&str>, service: Option<&str>, hints: Option<&AddrHints>) -> RdmaAddrInfo {
        let mut v = getaddrinfo(node, service, hints).unwrap();
        assert_eq!(v.len(), 1, "librdmacm returns one entry");
        v.remove(0)
    }

    #[test]
    fn active_numeric_is_destination_tcp_rc() {
        let r = one(Some("192.0.2.1"), Some("7471"), None);
        assert_eq!(r.dst_addr, Some("192.0.2.1:7471".parse().unwrap()));
        assert_eq!(r.src_addr, None);
        assert_eq!(r.flags, AiFlags::empty());
        assert_eq!(r.family, AddrFamily::Inet);
        assert_eq!((r.qp_type, r.port_space), (QpType::Rc, PortSpace::Tcp));
        assert!(r.route.is_empty() && r.connect.is_empty());
    }

    #[test]
    fn passive_without_node_binds_the_wildcard() {
        let h = AddrHints::new().flags(AiFlags::PASSIVE);
        let r = one(None, Some("7471"), Some(&h));
        assert_eq!(r.src_addr, Some("0.0.0.0:7471".parse().unwrap()));
        assert_eq!(r.dst_addr, None);
        assert_eq!(r.flags, AiFlags::PASSIVE);
        let h6 = h.clone().family(AddrFamily::Inet6);
        let r = one(None, Some("1"), Some(&h6));
        assert_eq!(r.src_addr, Some("[::]:1".parse().unwrap()));
        let r = one(Some("fe80::2"), Some("7"), Some(&h));
        assert_eq!(r.src_addr, Some("[fe80::2]:7".parse().unwrap()));
        assert_eq!(r.family, AddrFamily::Inet6);
    }

    #[test]
    fn qp_type_and_port_space_follow_the_hints() {
        let ud = AddrHints::new().qp_type(Some(QpType::Ud));
        let r = one(Some("10.0.0.1"), None, Some(&ud));
        assert_eq!((r.qp_type, r.port_space), (QpType::Ud, PortSpace::Udp));
        assert_eq!(r.dst_addr.unwrap().port(), 0);
        let ipoib = AddrHints::new().port_space(Some(PortSpace::Ipoib));
        let r = one(Some("10.0.0.1"), None, Some(&ipoib));
        assert_eq!((r.qp_type, r.port_space), (QpType::Ud, PortSpace::Ipoib));
        let both = AddrHints::new()
            .qp_type(Some(QpType::Uc))
            .port_space(Some(PortSpace::Ib(QpType::Rc)));
        let r = one(Some("10.0.0.1"), None, Some(&both));
        assert_eq!(
            (r.qp_type, r.port_space),
            (QpType::Uc, PortSpace::Ib(QpType::Uc))
        );
    }

    #[test]
    fn hints_source_is_kept_and_hints_alone_are_copied() {
        let src: SocketAddr = "10.0.0.2:0".parse().unwrap();
        let dst: SocketAddr = "10.0.0.3:9".parse().unwrap();
        let h = AddrHints::new().src_addr(Some(src));
        let r = one(Some("10.0.0.1"), Some("5"), Some(&h));
        assert_eq!(
            (r.src_addr, r.dst_addr),
            (Some(src), Some("10.0.0.1:5".parse().unwrap()))
        );
        // A passive entry's own address wins over the hints'.
        let hp = h.clone().flags(AiFlags::PASSIVE);
        let r = one(Some("10.0.0.1"), Some("5"), Some(&hp));
        assert_eq!(r.src_addr, Some("10.0.0.1:5".parse().unwrap()));
        let only = AddrHints::new()
            .flags(AiFlags::NOROUTE)
            .family(AddrFamily::Inet)
            .src_addr(Some(src))
            .dst_addr(Some(dst));
        let r = one(None, None, Some(&only));
        assert_eq!((r.src_addr, r.dst_addr), (Some(src), Some(dst)));
        assert_eq!(r.flags, AiFlags::NOROUTE);
        assert_eq!(r.family, AddrFamily::Inet);
    }

    #[test]
    fn errors_are_librdmacms() {
        let e = getaddrinfo(None, None, None).unwrap_err();
        assert_eq!(e.errno(), crate::sys::Errno::EINVAL);
        let numeric = AddrHints::new().flags(AiFlags::NUMERICHOST);
        let e = getaddrinfo(Some("no-such-host.invalid"), None, Some(&numeric)).unwrap_err();
        assert_eq!(
            (e.kind(), e.gai_code()),
            (ErrorKind::NameLookup, Some(libc::EAI_NONAME))
        );
        let e = getaddrinfo(Some("10.0.0.1"), Some("rdma-echo"), None).unwrap_err();
        assert_eq!(e.gai_code(), Some(libc::EAI_SERVICE));
        let v6 = AddrHints::new().family(AddrFamily::Inet6);
        let e = getaddrinfo(Some("10.0.0.1"), None, Some(&v6)).unwrap_err();
        assert_eq!(e.gai_code(), Some(EAI_ADDRFAMILY));
        let ib = AddrHints::new()
            .family(AddrFamily::Ib)
            .flags(AiFlags::FAMILY | AiFlags::NUMERICHOST);
        let e = getaddrinfo(Some("fe80::1"), None, Some(&ib)).unwrap_err();
        assert_eq!(e.gai_code(), Some(libc::EAI_FAMILY));
    }

    #[test]
    fn names_resolve_and_failures_carry_the_resolvers_code() {
        // localhost is in every /etc/hosts the tests run with.
        let r = one(Some("localhost"), Some("1"), None);
        assert!(r.dst_addr.unwrap().ip().is_loopback());
        let v4 = AddrHints::new().family(AddrFamily::Inet);
        let r = one(Some("localhost"), Some("1"), Some(&v4));
        assert_eq!(r.dst_addr, Some("127.0.0.1:1".parse().unwrap()));
        // `.invalid` never resolves (RFC 6761); offline resolvers may answer
        // EAI_AGAIN/EAI_FAIL instead of EAI_NONAME.
        let e = getaddrinfo(Some("no-such-host.invalid"), None, None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NameLookup);
        assert!(
            [
                libc::EAI_NONAME,
                libc::EAI_AGAIN,
                libc::EAI_FAIL,
                libc::EAI_SYSTEM
            ]
            .contains(&e.gai_code().unwrap()),
            "{e:#} {:?}",
            e.gai_code()
        );
    }
}
