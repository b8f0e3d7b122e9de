//! mlx5: CQEs the device writes (through the provider's real poll path,
//! on the device model), the `GET_CONTEXT` driver response, and DevX event
//! records, command outputs and asynchronous answers.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
};

use uverbs::{
    abi, fuzzing,
    mlx5::{
        devx_get, devx_set, status_name, CmdIn, CmdOut, DevxEvent, DATA_RECORD_LEN, EQE_LEN,
        HEADER_LEN,
    },
    sys::Errno,
    testing::mlx5::{fake_mlx5, Mlx5Model},
    CompletionQueue, Context, CqOptions, ErrorKind, ProtectionDomain, QpCap, QpInitAttr, QpType,
    QueuePair, SharedReceiveQueue, SrqAttr, WcStatus, WorkCompletion,
};
use zerocopy::{FromBytes, IntoBytes};

/// `MLX5_CQE_*` opcodes the provider turns into completions.
const REQ: u8 = 0;
const RESP_SEND_INV: u8 = 4;
const REQ_ERR: u8 = 13;
const RESP_ERR: u8 = 14;
const INVALID: u8 = 15;

/// A context on the device model with one CQ serving an RC QP with a
/// receive queue and an RC QP on an SRQ.
struct Mlx5Cq {
    model: Arc<Mlx5Model>,
    cq: CompletionQueue,
    cqn: u32,
    /// `(qpn, user index)` of each QP.
    qps: [(u32, u32); 2],
    _objects: (
        QueuePair,
        QueuePair,
        SharedReceiveQueue,
        ProtectionDomain,
        Context,
    ),
}

impl Mlx5Cq {
    fn new() -> Self {
        let model = fake_mlx5();
        let ctx = Context::open_with(model.dyn_kernel(), None).expect("open the model");
        let pd = ctx.alloc_pd().expect("alloc_pd");
        let cq = ctx.create_cq(16, CqOptions::default()).expect("create_cq");
        let srq = pd
            .create_srq(SrqAttr {
                max_wr: 8,
                max_sge: 1,
                srq_limit: 0,
            })
            .expect("create_srq");
        let qp = |srq| {
            pd.create_qp(&QpInitAttr {
                qp_type: QpType::Rc,
                send_cq: &cq,
                recv_cq: &cq,
                srq,
                cap: QpCap {
                    max_send_wr: 8,
                    max_recv_wr: 8,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 0,
                },
                sq_sig_all: false,
            })
            .expect("create_qp")
        };
        let (a, b) = (qp(None), qp(Some(&srq)));
        let info = |q: &QueuePair| {
            let i = model.qp(q.qp_num()).expect("the model knows the QP");
            (i.qpn, i.uidx.unwrap_or(i.qpn))
        };
        let qps = [info(&a), info(&b)];
        let cqn = model
            .cqn_of_handle(cq.handle())
            .expect("the model knows the CQ");
        Mlx5Cq {
            model,
            cq,
            cqn,
            qps,
            _objects: (a, b, srq, pd, ctx),
        }
    }
}

/// The fixture, kept for the life of the process (a static is never
/// dropped: no teardown of fake-kernel objects at exit).
static MLX5_CQ: Mutex<Option<Mlx5Cq>> = Mutex::new(None);

/// CQEs the device writes, parsed by the provider's poll path: the input
/// is a sequence of 65-byte chunks, a control byte (bits 0..2: make the CQE
/// name QP 1 or 2 by QP number and user index, as the device would; bits
/// 2..: how many completions the next poll takes) and a 64-byte
/// `mlx5_cqe64` that the model writes at the CQ's next position with the
/// right owner bit. Exactly the CQEs naming a live QP (by user index) with
/// an opcode that completes something surface, in order, each with the QP
/// number, status, byte count and kind its bytes say.
pub fn mlx5_cqe(data: &[u8]) {
    {
        let mut cell = MLX5_CQ.lock().unwrap_or_else(|p| p.into_inner());
        let c = cell.get_or_insert_with(Mlx5Cq::new);
        c.model.kernel.clear_calls();
        let mut out = [WorkCompletion::default(); 16];
        let mut expect = VecDeque::new();
        for chunk in data.chunks(65) {
            let (&ctl, bytes) = chunk.split_first().unwrap_or((&0, &[]));
            let mut cqe = [0u8; 64];
            cqe[..bytes.len()].copy_from_slice(bytes);
            let opcode = cqe[63] >> 4;
            if opcode == INVALID {
                // The device never writes it; the CQ would stall on it.
                continue;
            }
            if let Some(&(qpn, uidx)) = c.qps.get(usize::from(ctl & 3).wrapping_sub(1)) {
                cqe[57..60].copy_from_slice(&qpn.to_be_bytes()[1..]);
                cqe[33..36].copy_from_slice(&uidx.to_be_bytes()[1..]);
            }
            assert!(c.model.inject_cqe(c.cqn, cqe), "the CQ overflowed");
            // The model plays CQE version 1: the user index names the QP.
            let uidx = u32::from_be_bytes([0, cqe[33], cqe[34], cqe[35]]);
            if c.qps.iter().any(|&(_, u)| u == uidx) && SURFACING.contains(&opcode) {
                expect.push_back(cqe);
            }
            let take = usize::from(ctl >> 2) % (out.len() + 1);
            let n = c.cq.poll(&mut out[..take]);
            assert!(n <= take, "{n} completions into {take} slots");
            for wc in &out[..n] {
                check(wc, expect.pop_front());
            }
        }
        loop {
            let n = c.cq.poll(&mut out);
            for wc in &out[..n] {
                check(wc, expect.pop_front());
            }
            if n == 0 {
                break;
            }
        }
        assert!(
            expect.is_empty(),
            "{} CQEs of live QPs never surfaced",
            expect.len()
        );
        let info = c.model.cq(c.cqn).expect("the CQ");
        assert!(
            !info.in_error,
            "CQ overrun: the consumer index was not published"
        );
    }
}

/// CQE opcodes that give a completion (requester, the four responder
/// kinds, and the two error kinds).
const SURFACING: [u8; 7] = [REQ, 1, 2, 3, RESP_SEND_INV, REQ_ERR, RESP_ERR];

/// A completion against the CQE it must come from (`None`: it came from
/// nowhere).
fn check(wc: &WorkCompletion, cqe: Option<[u8; 64]>) {
    let cqe = cqe.expect("a completion from no CQE of a live QP");
    let qpn = u32::from_be_bytes([0, cqe[57], cqe[58], cqe[59]]);
    assert_eq!(wc.qp_num, qpn, "the completion names another QP");
    match cqe[63] >> 4 {
        REQ_ERR | RESP_ERR => {
            assert_ne!(wc.status, WcStatus::SUCCESS, "an error CQE succeeded");
            assert_eq!(wc.vendor_err, u32::from(cqe[54]));
        }
        op => {
            assert_eq!(wc.status, WcStatus::SUCCESS);
            if op != REQ {
                let byte_cnt = u32::from_be_bytes([cqe[44], cqe[45], cqe[46], cqe[47]]);
                assert_eq!(wc.byte_len, byte_cnt);
                assert!(wc.opcode.is_recv());
            }
        }
    }
}

fn cqe(opcode: u8, wqe_counter: u16, byte_cnt: u32, syndrome: u8) -> [u8; 64] {
    let mut c = [0u8; 64];
    c[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
    c[55] = syndrome;
    c[60..62].copy_from_slice(&wqe_counter.to_be_bytes());
    c[63] = opcode << 4;
    c
}

pub fn mlx5_cqe_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let chunks = |list: &[(u8, [u8; 64])]| {
        let mut v = Vec::new();
        for (ctl, c) in list {
            v.push(*ctl);
            v.extend_from_slice(c);
        }
        v
    };
    vec![
        (
            "send-and-recv",
            chunks(&[(1 | 4, cqe(REQ, 0, 0, 0)), (1 | 4, cqe(2, 0, 64, 0))]),
        ),
        (
            "srq-recv-with-imm",
            chunks(&[
                (2 | 8, cqe(3, 5, 13, 0)),
                (2 | 8, cqe(RESP_SEND_INV, 7, 1, 0)),
            ]),
        ),
        (
            "errors",
            chunks(&[
                (1 | 4, cqe(REQ_ERR, 3, 0, 0x15)),
                (2 | 4, cqe(RESP_ERR, 9, 0, 0x05)),
            ]),
        ),
        ("unknown-qp", chunks(&[(0, cqe(REQ, 1, 0, 0))])),
    ]
}

// ------------------------------------------------------------- context

/// The provider's decoding of `GET_CONTEXT`'s driver response
/// (`mlx5_ib_alloc_ucontext_resp`): first byte bit 0 is the DevX request.
pub fn mlx5_context(data: &[u8]) {
    let Some((&mode, resp)) = data.split_first() else {
        return;
    };
    let devx = mode & 1 != 0;
    let got = fuzzing::mlx5_context_response(resp, devx);
    let need = size_of::<abi::Mlx5IbAllocUcontextResp>();
    assert_eq!(got.is_some(), resp.len() >= need, "{} bytes", resp.len());
    if let Some(g) = got {
        let r = abi::Mlx5IbAllocUcontextResp::read_from_prefix(resp)
            .expect("long enough")
            .0;
        assert_eq!(g.devx, devx);
        assert_eq!(
            (g.bf_reg_size, g.cqe_version),
            (r.bf_reg_size, r.cqe_version)
        );
        assert_eq!(g.raw_num_uars_per_page, r.num_uars_per_page);
        assert_eq!(
            g.num_uars_per_page,
            r.num_uars_per_page.max(1),
            "a zero divisor kept"
        );
        assert_eq!(g.tot_bfregs, r.tot_bfregs);
    }
}

pub fn mlx5_context_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut r = abi::Mlx5IbAllocUcontextResp {
        qp_tab_size: 1 << 18,
        bf_reg_size: 512,
        cache_line_size: 64,
        max_sq_desc_sz: 512,
        max_rq_desc_sz: 512,
        cqe_version: 1,
        num_uars_per_page: 1,
        num_dyn_bfregs: 32,
        ..Default::default()
    };
    let mut devx = vec![1u8];
    devx.extend_from_slice(r.as_bytes());
    r.num_uars_per_page = 0;
    r.tot_bfregs = 16;
    let mut stat = vec![0u8];
    stat.extend_from_slice(r.as_bytes());
    vec![
        ("devx-dynamic-uars", devx),
        ("static-uars-zero-per-page", stat),
    ]
}

// ----------------------------------------------------------- DevX event

/// `DevxEvent::parse` on a record as a DevX event channel returns it: the
/// first byte picks the channel mode (bit 0: `OMIT_DATA`, cookie only).
pub fn devx_event(data: &[u8]) {
    let Some((&mode, record)) = data.split_first() else {
        return;
    };
    let omit = mode & 1 != 0;
    let want = if omit { 8 } else { DATA_RECORD_LEN };
    let Some(ev) = DevxEvent::parse(record, omit) else {
        assert_ne!(record.len(), want, "a well-sized record refused");
        return;
    };
    assert_eq!(record.len(), want);
    assert_eq!(ev.cookie.to_ne_bytes(), record[..8]);
    match ev.eqe {
        None => {
            assert!(omit);
            assert!(ev.event_type().is_none() && ev.data().is_none() && ev.cqn().is_none());
        }
        Some(eqe) => {
            assert_eq!(eqe[..], record[8..8 + EQE_LEN]);
            assert_eq!(ev.event_type(), Some(eqe[1]));
            assert_eq!(ev.sub_type(), Some(eqe[3]));
            assert_eq!(ev.data(), Some(&eqe[32..60]));
            if let Some(cqn) = ev.cqn() {
                assert!(cqn <= 0x00ff_ffff && (eqe[1] == 0 || eqe[1] == 4));
            }
            assert_eq!(ev.cq_error_syndrome().is_some(), eqe[1] == 4);
        }
    }
}

pub fn devx_event_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut comp = vec![0u8; 1 + DATA_RECORD_LEN];
    comp[1..9].copy_from_slice(&0x1122_3344u64.to_ne_bytes());
    comp[1 + 8 + 56..1 + 8 + 60].copy_from_slice(&0x777u32.to_be_bytes());
    let mut cq_err = vec![0u8; 1 + DATA_RECORD_LEN];
    cq_err[1 + 8 + 1] = 4;
    cq_err[1 + 8 + 32..1 + 8 + 36].copy_from_slice(&0x42u32.to_be_bytes());
    cq_err[1 + 8 + 43] = 1;
    let mut port = vec![0u8; 1 + DATA_RECORD_LEN];
    port[1 + 8 + 1] = 9;
    port[1 + 8 + 3] = 4;
    let mut omit = vec![1u8];
    omit.extend_from_slice(&7u64.to_ne_bytes());
    vec![
        ("completion", comp),
        ("cq-error-overrun", cq_err),
        ("port-change", port),
        ("omit-data-cookie", omit),
    ]
}

// ------------------------------------------------------------ DevX cmd

/// A DevX command's output mailbox as the kernel copies it back: the PRM
/// headers (`CmdOut::read`, `CmdIn::read`/`write`), status names, and how
/// the library turns the ioctl's result and the mailbox into success or a
/// firmware error (first byte: the ioctl succeeded, failed with
/// `EREMOTEIO` as kernels since 5.19 report firmware failures, or with
/// another errno).
pub fn devx_cmd(data: &[u8]) {
    let Some((&mode, out)) = data.split_first() else {
        return;
    };
    let header = CmdOut::read(out);
    assert_eq!(header.is_some(), out.len() >= HEADER_LEN);
    if let Some(h) = header {
        assert_eq!(h.status, out[0]);
        assert_eq!(h.syndrome.to_be_bytes(), out[4..8]);
    }
    if let Some(h) = CmdIn::read(out) {
        let mut buf = [0u8; HEADER_LEN];
        assert!(h.write(&mut buf));
        assert_eq!(CmdIn::read(&buf), Some(h), "CmdIn does not round-trip");
    }
    // Field access on a firmware-written mailbox: the control byte picks a
    // field; what reads back is what a write of it puts there, and a
    // refused field is refused by both, with nothing written.
    let width = [1, 3, 8, 24, 32, 64, 0, 33][usize::from(mode >> 5)];
    let bit = usize::from(mode & 0x1f) * 7 + usize::from(out.first().copied().unwrap_or(0));
    let mut copy = out.to_vec();
    match devx_get(out, bit, width) {
        Some(v) => {
            assert!(devx_set(&mut copy, bit, width, v));
            assert_eq!(
                copy, out,
                "writing back field {bit}/{width} changed the mailbox"
            );
            assert!(
                width == 64 || v >> width == 0,
                "field {bit}/{width} read {v:#x}"
            );
        }
        None => {
            assert!(!devx_set(&mut copy, bit, width, 0));
            assert_eq!(copy, out, "a refused field was written");
        }
    }
    let status = header.unwrap_or_default();
    assert!(!status_name(status.status).is_empty());
    let ioctl = match mode % 3 {
        0 => Ok(()),
        1 => Err(Errno::EREMOTEIO),
        _ => Err(Errno::EINVAL),
    };
    match fuzzing::devx_command_result(ioctl, out) {
        Ok(()) => assert!(ioctl.is_ok() && status.status == 0),
        Err(e) if ioctl == Err(Errno::EINVAL) => {
            assert_eq!((e.kind(), e.errno()), (ErrorKind::Os, Some(Errno::EINVAL)));
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Firmware, "{e}");
            let fw = e
                .firmware_status()
                .expect("a firmware error carries its status");
            assert_eq!((fw.status, fw.syndrome), (status.status, status.syndrome));
            assert_eq!(fw.out, out, "the whole mailbox");
            assert!(e.to_string().contains(status_name(status.status)), "{e}");
        }
    }
}

pub fn devx_cmd_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut ok = vec![0u8; 1 + 16];
    ok[1 + 8..1 + 12].copy_from_slice(&0x1234u32.to_be_bytes());
    let mut bad_param = vec![1u8; 1 + 24];
    bad_param[1..].fill(0);
    bad_param[1] = 3;
    bad_param[1 + 4..1 + 8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    let mut in_hdr = vec![0u8; 1 + 16];
    in_hdr[1..3].copy_from_slice(&0xa00u16.to_be_bytes());
    in_hdr[1 + 6..1 + 8].copy_from_slice(&0x1du16.to_be_bytes());
    vec![
        ("create-ok", ok),
        ("bad-param-eremoteio", bad_param),
        ("general-object-header", in_hdr),
        ("old-kernel-einval", vec![2, 0, 0]),
    ]
}

// ---------------------------------------------------------- DevX async

/// One answer read from a DevX command completion fd: the 8-byte `wr_id`
/// header and the output mailbox.
pub fn devx_async(data: &[u8]) {
    match fuzzing::devx_async_answer(data) {
        Ok((wr_id, n)) => {
            assert!(data.len() >= 8);
            assert_eq!(wr_id.to_ne_bytes(), data[..8]);
            assert_eq!(n, data.len() - 8);
        }
        Err(e) => {
            assert!(data.len() < 8, "a {}-byte answer refused: {e}", data.len());
            assert_eq!(e.kind(), ErrorKind::Malformed);
        }
    }
}

pub fn devx_async_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut answer = 42u64.to_ne_bytes().to_vec();
    answer.extend_from_slice(&[0; 16]);
    vec![("query-answer", answer), ("short", vec![1, 2, 3])]
}
