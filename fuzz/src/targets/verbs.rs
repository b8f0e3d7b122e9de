//! Verbs command responses (ioctl outputs and write responses), QP
//! attribute decoding, and address vectors built from a received GRH.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
};

use uverbs::{
    abi, fuzzing,
    ioctl::AttrBuf,
    sys::Errno,
    testing::rxe::{fake_rxe, FakeRxe, DEV, IPV4_GID, LINK_LOCAL_GID},
    CompletionQueue, Context, CqOptions, ErrorKind, Gid, ProtectionDomain, QpAttrMask, QpCap,
    QpInitAttr, QueuePair, WcFlags, WorkCompletion,
};
use zerocopy::{FromBytes, IntoBytes};

/// Errnos a scripted command can fail with: the ones the library treats
/// specially (fallbacks to older commands, missing GIDs) and plain ones.
const ERRNOS: [Errno; 8] = [
    Errno::EOPNOTSUPP,
    Errno::ENOSYS,
    Errno::EPROTONOSUPPORT,
    Errno::ENOTTY,
    Errno::ENODATA,
    Errno::EINVAL,
    Errno::EIO,
    Errno::ENOSPC,
];

/// The answers of the scripted kernel: a stream of bytes each command
/// takes from. A command's first byte decides its fate (`0xf0..`: fail
/// with an errno of [`ERRNOS`]); its outputs are then filled, in order,
/// from the bytes that follow (zeros once the stream runs dry).
type Script = Arc<Mutex<VecDeque<u8>>>;

fn take(script: &Script, n: usize) -> Vec<u8> {
    let mut s = script.lock().unwrap_or_else(|p| p.into_inner());
    (0..n).map(|_| s.pop_front().unwrap_or(0)).collect()
}

fn fate(script: &Script) -> Result<(), Errno> {
    match take(script, 1)[0] {
        c @ 0xf0.. => Err(ERRNOS[usize::from(c & 7)]),
        _ => Ok(()),
    }
}

/// A context on the fake rxe kernel with a CQ and a QP, whose ioctl and
/// write commands are then answered from a [`Script`].
struct Scripted {
    script: Script,
    fake: Arc<FakeRxe>,
    ctx: Context,
    qp: QueuePair,
    _cq: CompletionQueue,
    _pd: ProtectionDomain,
    /// Inputs run on this context (it is renewed now and then: a fallback
    /// to write commands, once taken, is kept for the context's life).
    uses: u32,
}

impl Scripted {
    fn new() -> Self {
        let fake = fake_rxe();
        let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).expect("open the fake rxe0");
        let pd = ctx.alloc_pd().expect("alloc_pd");
        let cq = ctx.create_cq(4, CqOptions::default()).expect("create_cq");
        let qp = pd
            .create_qp(&QpInitAttr::rc(&cq, &cq).cap(QpCap::new(4, 4, 1, 1)))
            .expect("create_qp");
        let script: Script = Arc::default();
        let s = script.clone();
        fake.kernel.on_ioctl(move |cmd| {
            fate(&s)?;
            let outs: Vec<(u16, usize)> = cmd
                .attrs()
                .iter()
                .filter_map(|a| match &a.buf {
                    AttrBuf::Out(b) => Some((a.id, b.len())),
                    _ => None,
                })
                .collect();
            for (id, len) in outs {
                cmd.write_output(id, &take(&s, len));
            }
            Ok(())
        });
        let s = script.clone();
        fake.kernel.on_write(move |cmd| {
            fate(&s)?;
            let core = take(&s, cmd.core_out.len());
            cmd.core_out.copy_from_slice(&core);
            let driver = take(&s, cmd.driver_out.len());
            cmd.driver_out.copy_from_slice(&driver);
            Ok(())
        });
        Scripted {
            script,
            fake,
            ctx,
            qp,
            _cq: cq,
            _pd: pd,
            uses: 0,
        }
    }
}

impl Scripted {
    /// Destroys the objects with answers a kernel would give: success and
    /// zero events reported. (A destroy waits until as many events were
    /// acknowledged as the kernel says it reported; scripted bytes there
    /// would make it wait forever, as a lying kernel would.)
    fn retire(self) {
        self.fake.kernel.on_ioctl(|_| Ok(()));
        self.fake.kernel.on_write(|_| Ok(()));
        drop(self);
    }
}

/// The fixture, kept for the life of the process (a static is never
/// dropped: no teardown of fake-kernel objects at exit).
static SCRIPTED: Mutex<Option<Scripted>> = Mutex::new(None);

/// The device, port, GID and QP queries on responses taken from the
/// input: the first byte says which queries run (bits 0..4) and on which
/// port; the rest is the [`Script`]. Each query returns a value or an
/// error that names its command; none panics, loops or allocates without
/// bound, whatever the sizes and counts in the responses.
pub fn verbs_responses(data: &[u8]) {
    let Some((&which, script)) = data.split_first() else {
        return;
    };
    {
        let mut cell = SCRIPTED.lock().unwrap_or_else(|p| p.into_inner());
        if cell.as_ref().is_some_and(|s| s.uses >= 256) {
            if let Some(old) = cell.take() {
                old.retire();
            }
        }
        let s = cell.get_or_insert_with(Scripted::new);
        s.uses += 1;
        s.fake.kernel.clear_calls();
        {
            let mut q = s.script.lock().unwrap_or_else(|p| p.into_inner());
            q.clear();
            q.extend(script.iter().copied());
        }
        let port = if which & 0x80 != 0 { 2 } else { 1 };
        let check = |e: uverbs::Error| assert!(!e.to_string().is_empty());
        if which & 1 != 0 {
            match s.ctx.query_device() {
                Ok(a) => assert!(!a.fw_ver.is_empty()),
                Err(e) => check(e),
            }
        }
        if which & 2 != 0 {
            match s.ctx.query_port(port) {
                Ok(p) => {
                    let _ = (p.state.raw(), p.active_mtu.bytes(), p.link_layer);
                }
                Err(e) => check(e),
            }
        }
        if which & 4 != 0 {
            match s.ctx.query_gid_table() {
                Ok(t) => {
                    for e in t {
                        let _ = (e.gid.to_string(), e.gid_type);
                    }
                }
                Err(e) => check(e),
            }
        }
        if which & 8 != 0 {
            let index = u32::from(which >> 4);
            match s.ctx.query_gid(port, index) {
                Ok(Some(e)) => drop(e.gid.to_string()),
                Ok(None) => {}
                Err(e) => check(e),
            }
        }
        if which & 16 != 0 {
            match s.qp.query(QpAttrMask::all()) {
                Ok((attr, init)) => assert_eq!(attr.cap, init.cap),
                Err(e) => check(e),
            }
        }
    }
}

/// A script in which every command succeeds with these response bytes.
fn answers(which: u8, responses: &[&[u8]]) -> Vec<u8> {
    let mut v = vec![which];
    for r in responses {
        v.push(0);
        v.extend_from_slice(r);
    }
    v
}

pub fn verbs_responses_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let dev = uverbs::testing::rxe::device_attr();
    let port = uverbs::testing::rxe::port_attr();
    let mut port_ex = port.as_bytes().to_vec();
    port_ex.extend_from_slice(&[0x20, 0, 0, 0]);
    let mut huge = uverbs::testing::rxe::port_attr();
    huge.gid_tbl_len = u32::MAX;
    let mut huge_ex = huge.as_bytes().to_vec();
    huge_ex.extend_from_slice(&[0; 4]);
    let mut entry = [0u8; 32];
    entry[..16].copy_from_slice(&IPV4_GID);
    entry[16..20].copy_from_slice(&1u32.to_ne_bytes());
    entry[20..24].copy_from_slice(&1u32.to_ne_bytes());
    entry[24..28].copy_from_slice(&2u32.to_ne_bytes());
    let qp = abi::IbUverbsQueryQpResp {
        max_send_wr: 4,
        qp_state: 3,
        ..Default::default()
    };
    vec![
        ("query-device", answers(1, &[dev.as_bytes()])),
        ("query-port", answers(2, &[&port_ex])),
        (
            "query-gid-table",
            answers(4, &[dev.as_bytes(), &port_ex, &entry, &1u64.to_ne_bytes()]),
        ),
        ("query-gid-1", answers(8 | (1 << 4), &[&entry])),
        ("query-qp", answers(16, &[qp.as_bytes()])),
        // Found by this target: a port reporting 2^32 - 1 GIDs made
        // query_gid_table allocate 128 GiB for them (an abort).
        (
            "regress-huge-gid-tbl-len",
            answers(4, &[dev.as_bytes(), &huge_ex]),
        ),
        // The ioctl path refused: the write fallbacks and sysfs answer.
        (
            "fallbacks",
            vec![0x1f, 0xf0, 0, 0xf2, 0xf2, 0xf0, 0xf0, 0xf4],
        ),
    ]
}

// -------------------------------------------------------------- qp_attr

/// The `QUERY_QP` response decoding and rdma_cm's `INIT_QP_ATTR` one: the
/// attributes decoded from a response, encoded into a `MODIFY_QP` request
/// with every mask bit, give back the response's fields (the GRH fields
/// only when `is_global`, which becomes exactly 0 or 1).
pub fn qp_attr(data: &[u8]) {
    let mut padded = vec![0u8; size_of::<abi::IbUverbsQueryQpResp>()];
    let n = padded.len().min(data.len());
    padded[..n].copy_from_slice(&data[..n]);
    let r = abi::IbUverbsQueryQpResp::read_from_bytes(&padded).expect("sized above");
    let (attr, init) = fuzzing::qp_query_response(data);
    assert_eq!(attr.cap, init.cap);
    assert_eq!(init.sq_sig_all, r.sq_sig_all != 0);
    assert_eq!(attr.sq_draining, r.sq_draining != 0);
    let m = fuzzing::qp_modify_request(7, &attr, QpAttrMask::all());
    assert_eq!(m.qp_handle, 7);
    assert_eq!(
        (m.qp_state, m.cur_qp_state, m.path_mtu, m.path_mig_state),
        (r.qp_state, r.cur_qp_state, r.path_mtu, r.path_mig_state)
    );
    assert_eq!(
        (m.qkey, m.rq_psn, m.sq_psn, m.dest_qp_num, m.qp_access_flags),
        (r.qkey, r.rq_psn, r.sq_psn, r.dest_qp_num, r.qp_access_flags)
    );
    assert_eq!(
        (m.pkey_index, m.alt_pkey_index),
        (r.pkey_index, r.alt_pkey_index)
    );
    assert_eq!(
        (
            m.max_rd_atomic,
            m.max_dest_rd_atomic,
            m.min_rnr_timer,
            m.port_num
        ),
        (
            r.max_rd_atomic,
            r.max_dest_rd_atomic,
            r.min_rnr_timer,
            r.port_num
        )
    );
    assert_eq!(
        (
            m.timeout,
            m.retry_cnt,
            m.rnr_retry,
            m.alt_port_num,
            m.alt_timeout
        ),
        (
            r.timeout,
            r.retry_cnt,
            r.rnr_retry,
            r.alt_port_num,
            r.alt_timeout
        )
    );
    assert_eq!(m.en_sqd_async_notify, 0, "QUERY_QP does not report it");
    for (got, sent) in [(&m.dest, &r.dest), (&m.alt_dest, &r.alt_dest)] {
        assert_eq!(
            (
                got.dlid,
                got.sl,
                got.src_path_bits,
                got.static_rate,
                got.port_num
            ),
            (
                sent.dlid,
                sent.sl,
                sent.src_path_bits,
                sent.static_rate,
                sent.port_num
            )
        );
        assert_eq!(got.is_global, u8::from(sent.is_global != 0));
        let grh = |d: &abi::IbUverbsQpDest| {
            (
                d.dgid,
                d.flow_label,
                d.sgid_index,
                d.hop_limit,
                d.traffic_class,
            )
        };
        if sent.is_global != 0 {
            assert_eq!(grh(got), grh(sent));
        } else {
            assert_eq!(
                grh(got),
                ([0; 16], 0, 0, 0, 0),
                "GRH fields without is_global"
            );
        }
    }
    // The same bytes as rdma_cm's INIT_QP_ATTR answer (another layout).
    let mut padded = vec![0u8; size_of::<abi::IbUverbsQpAttr>()];
    let n = padded.len().min(data.len());
    padded[..n].copy_from_slice(&data[..n]);
    let q = abi::IbUverbsQpAttr::read_from_bytes(&padded).expect("sized above");
    let (attr, mask) = fuzzing::cm_init_qp_attr_response(data);
    assert_eq!(mask.bits(), q.qp_attr_mask);
    let narrow = |v: u32| u8::try_from(v).unwrap_or(u8::MAX);
    assert_eq!(attr.qp_state.raw(), narrow(q.qp_state));
    assert_eq!(attr.path_mtu.0, narrow(q.path_mtu));
    assert_eq!(attr.ah_attr.is_global(), q.ah_attr.is_global != 0);
    assert_eq!(attr.en_sqd_async_notify, q.en_sqd_async_notify != 0);
}

pub fn qp_attr_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let rts = abi::IbUverbsQueryQpResp {
        qp_state: 3,
        cur_qp_state: 3,
        path_mtu: 5,
        dest: abi::IbUverbsQpDest {
            is_global: 1,
            dgid: IPV4_GID,
            hop_limit: 64,
            port_num: 1,
            ..Default::default()
        },
        max_send_wr: 16,
        qp_access_flags: 7,
        sq_sig_all: 1,
        ..Default::default()
    };
    // Not global: the stale GRH must not come back.
    let reset = abi::IbUverbsQueryQpResp {
        alt_dest: abi::IbUverbsQpDest {
            dgid: LINK_LOCAL_GID,
            ..Default::default()
        },
        ..Default::default()
    };
    vec![
        ("rts-roce", rts.as_bytes().to_vec()),
        ("reset-stale-grh", reset.as_bytes().to_vec()),
    ]
}

// ------------------------------------------------------------ ah_from_wc

/// The fixture, kept for the life of the process (a static is never
/// dropped: no teardown of fake-kernel objects at exit).
static CTX: Mutex<Option<(Arc<FakeRxe>, Context)>> = Mutex::new(None);

/// `Context::init_ah_from_wc` on the 40 bytes that start a UD receive
/// buffer (the sender's GRH or IPv4 header: a network peer's bytes), on
/// the fake rxe0 with its two RoCE v2 GIDs. Input: port, the completion's
/// flags byte (bit 0: `IBV_WC_GRH`), SLID, SL, path bits, then the header.
/// An address vector with a GRH replies from a GID of that port that the
/// header names as its destination, to the header's source.
pub fn ah_from_wc(data: &[u8]) {
    if data.len() < 5 {
        return;
    }
    let mut grh = [0u8; 40];
    let n = (data.len() - 5).min(40);
    grh[..n].copy_from_slice(&data[5..5 + n]);
    let port = data[0] % 3;
    let wc = {
        let mut v = WorkCompletion::default();
        v.wc_flags = if data[1] & 1 != 0 {
            WcFlags::GRH
        } else {
            WcFlags::empty()
        };
        v.slid = u16::from(data[2]);
        v.sl = data[3];
        v.dlid_path_bits = data[4];
        v
    };
    {
        let mut cell = CTX.lock().unwrap_or_else(|p| p.into_inner());
        let (fake, ctx) = cell.get_or_insert_with(|| {
            let fake = fake_rxe();
            let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).expect("open the fake rxe0");
            (fake, ctx)
        });
        fake.kernel.clear_calls();
        match ctx.init_ah_from_wc(port, &wc, &grh) {
            Ok(attr) => {
                assert_eq!((attr.dlid, attr.sl, attr.port_num), (wc.slid, wc.sl, port));
                match attr.grh {
                    None => assert!(!wc.wc_flags.contains(WcFlags::GRH)),
                    Some(route) => {
                        assert!(wc.wc_flags.contains(WcFlags::GRH));
                        let table = ctx.query_gid_table().expect("the fake's GID table");
                        let local = table
                            .iter()
                            .find(|e| e.index == u32::from(route.sgid_index))
                            .expect("the source GID index names a GID");
                        assert_eq!(local.port, u32::from(port));
                        let named = local.gid.0 == grh[24..40]
                            || (local.gid.0[..12] == IPV4_GID[..12]
                                && local.gid.0[12..] == grh[36..40]);
                        assert!(named, "{:?} is not the header's destination", local.gid);
                        let v4_src = {
                            let mut g = IPV4_GID;
                            g[12..].copy_from_slice(&grh[32..36]);
                            Gid(g)
                        };
                        assert!(
                            route.dgid.0 == grh[8..24] || route.dgid == v4_src,
                            "the reply does not go to the header's source"
                        );
                    }
                }
            }
            Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}"),
        }
    }
}

pub fn ah_from_wc_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let ipv4 = |src: [u8; 4], dst: [u8; 4]| {
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[8] = 64;
        h[9] = 17;
        h[12..16].copy_from_slice(&src);
        h[16..20].copy_from_slice(&dst);
        let mut sum: u32 = h
            .chunks_exact(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        h
    };
    let mut v4 = vec![1, 1, 0, 0, 0];
    v4.extend_from_slice(&[0; 20]);
    v4.extend_from_slice(&ipv4([192, 0, 2, 9], [192, 0, 2, 1]));
    let mut v6 = vec![1, 1, 0, 0, 0];
    let mut grh = [0u8; 40];
    grh[0..4].copy_from_slice(&((6u32 << 28) | (0x12 << 20) | 0xabcde).to_be_bytes());
    grh[6] = 17;
    grh[7] = 9;
    grh[8..24].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
    grh[24..40].copy_from_slice(&LINK_LOCAL_GID);
    v6.extend_from_slice(&grh);
    vec![
        ("roce-v2-ipv4", v4),
        ("roce-v2-ipv6", v6),
        ("no-grh", vec![1, 0, 7, 1, 0]),
    ]
}
