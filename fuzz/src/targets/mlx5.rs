//! mlx5: CQEs the device writes (through the provider's real poll path,
//! on the device model), the `GET_CONTEXT` driver response, and DevX event
//! records, command outputs and asynchronous answers.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
};

use uverbs::{
    abi, fuzzing,
    ioctl::AttrBuf,
    mlx5::{
        devx_get, devx_set, status_name, CmdIn, CmdOut, DevxEvent, DATA_RECORD_LEN, EQE_LEN,
        HEADER_LEN,
    },
    sys::{
        fake::{dummy_fd, FakeKernel},
        Errno, Kernel,
    },
    testing::mlx5::{fake_mlx5, netlink_reply, Mlx5Model},
    CompletionQueue, Context, CqOptions, ErrorKind, ProtectionDomain, QpCap, QpInitAttr, QueuePair,
    SharedReceiveQueue, SrqAttr, WcStatus, WorkCompletion,
};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

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
        let srq = pd.create_srq(SrqAttr::new(8, 1)).expect("create_srq");
        let qp = |srq| {
            pd.create_qp(
                &QpInitAttr::rc(&cq, &cq)
                    .srq(srq)
                    .cap(QpCap::new(8, 8, 1, 1)),
            )
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

/// `GET_CONTEXT`'s driver response (`mlx5_ib_alloc_ucontext_resp`) as the
/// provider decodes it, then as a context opens with it: the input is a
/// mode byte (bit 0: the DevX request), the response, and a script for the
/// UAR part ([`mlx5_context_uars`]).
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
        mlx5_context_uars(&r, &resp[need..]);
    }
}

/// What the fake mlx5_ib of [`mlx5_context_uars`] answered and saw.
#[derive(Debug, Default)]
struct UarScript {
    /// Script words still to answer with: a page id and a length per
    /// `UAR_OBJ_ALLOC`, a bfreg index per QP create (static UARs).
    words: VecDeque<u32>,
    /// The next page id, bfreg index and handle once `words` ran out.
    next: u32,
    /// 4 KiB UARs per page the default length has.
    uars_per_page: u32,
    /// Each `UAR_OBJ_ALLOC` answered: (page id, length).
    pages: Vec<(u32, u32)>,
    /// Each QP create's `mlx5_ib_create_qp`: (flags, bfreg index).
    qps: Vec<(u32, u32)>,
}

impl UarScript {
    fn word(&mut self, default: u32) -> u32 {
        self.words.pop_front().unwrap_or(default)
    }

    fn next(&mut self) -> u32 {
        self.next = self.next.wrapping_add(1);
        self.next
    }
}

/// A fake mlx5_ib that answers `GET_CONTEXT` with `resp`, `UAR_OBJ_ALLOC`
/// and QP creates from `script`, and every other method (PD, CQ, QP
/// destroy) with new handles and zeroed outputs.
fn uar_kernel(
    resp: abi::Mlx5IbAllocUcontextResp,
    script: Arc<Mutex<UarScript>>,
) -> Arc<FakeKernel> {
    let k = Arc::new(FakeKernel::new());
    k.char_dev((231 << 8) | 192);
    k.on_netlink(netlink_reply);
    k.on_ioctl(move |cmd| {
        let mut s = script.lock().unwrap_or_else(|p| p.into_inner());
        match (cmd.object_id, cmd.method_id) {
            (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_GET_CONTEXT) => {
                cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
                cmd.write_output(
                    abi::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
                    &1u32.to_ne_bytes(),
                );
            }
            (abi::UVERBS_OBJECT_ASYNC_EVENT, abi::UVERBS_METHOD_ASYNC_EVENT_ALLOC) => {
                cmd.set_new_fd(abi::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, dummy_fd());
            }
            (abi::MLX5_IB_OBJECT_UAR, abi::MLX5_IB_METHOD_UAR_OBJ_ALLOC) => {
                let id = s.next();
                let id = s.word(id);
                let len = s.uars_per_page.saturating_mul(4096);
                let len = s.word(len);
                s.pages.push((id, len));
                let handle = s.next();
                cmd.set_new_object(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, handle);
                let offset = u64::from(handle) << 16;
                cmd.write_output(
                    abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET,
                    &offset.to_ne_bytes(),
                );
                cmd.write_output(
                    abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH,
                    &len.to_ne_bytes(),
                );
                cmd.write_output(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, &id.to_ne_bytes());
            }
            (object, method) => {
                if (object, method) == (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_CREATE) {
                    let input = cmd
                        .input_bytes(abi::UVERBS_ATTR_UHW_IN)
                        .ok_or(Errno::EINVAL)?;
                    let req = abi::Mlx5IbCreateQp::read_from_prefix(&input)
                        .map_err(|_| Errno::EINVAL)?
                        .0;
                    s.qps.push((req.flags, req.bfreg_index));
                    let mut out = abi::Mlx5IbCreateQpResp::new_zeroed();
                    if req.flags & abi::MLX5_QP_FLAG_UAR_PAGE_INDEX == 0 {
                        // Static UARs: the kernel chooses the bfreg.
                        let gross = s.next();
                        out.bfreg_index = s.word(gross);
                    }
                    let qpn = s.next() & 0x00ff_ffff;
                    cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, out.as_bytes());
                    cmd.write_output(abi::UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &qpn.to_ne_bytes());
                }
                let new: Vec<u16> = cmd
                    .attrs()
                    .iter()
                    .filter(|a| matches!(a.buf, AttrBuf::NewObject))
                    .map(|a| a.id)
                    .collect();
                for id in new {
                    let handle = s.next();
                    cmd.set_new_object(id, handle);
                }
            }
        }
        Ok(())
    });
    k.on_write(|cmd| {
        // ALLOC_PD has no ioctl method in libibverbs' choice: the handle
        // is the response's first word.
        if cmd.command != abi::IB_USER_VERBS_CMD_ALLOC_PD || cmd.core_out.len() < 4 {
            return Err(Errno::EOPNOTSUPP);
        }
        cmd.core_out[..4].copy_from_slice(&1u32.to_ne_bytes());
        Ok(())
    });
    k
}

/// The context's UARs (item 6 of issue 27): a context opens on a fake
/// mlx5_ib answering `resp`, whose `UAR_OBJ_ALLOC` answers (page id,
/// length) and static bfreg choices come from `script` (a QP count byte,
/// then native-endian u32 words, each answer taking the next ones; counters
/// and whole pages once they run out), and that many QPs are created.
///
/// A `num_uars_per_page` mlx5_ib never sends (not 0 or a power of two up
/// to 16) or more than 512 static bfregs opens nothing: `Malformed`,
/// never an overflow. Nothing panics on a page id or a bfreg index, and
/// every QP on dynamic UARs names a 4 KiB UAR of a page the kernel gave
/// (`page id + j`, without wrapping, `j` below the UARs the page has).
fn mlx5_context_uars(r: &abi::Mlx5IbAllocUcontextResp, script: &[u8]) {
    let (qps, words) = match script.split_first() {
        Some((&n, words)) => (usize::from(n % 24), words),
        None => (2, script),
    };
    let s = Arc::new(Mutex::new(UarScript {
        words: words
            .chunks_exact(4)
            .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
            .collect(),
        uars_per_page: r.num_uars_per_page.clamp(1, 16),
        ..UarScript::default()
    }));
    let kernel: Arc<dyn Kernel> = uar_kernel(*r, s.clone());
    let n = r.num_uars_per_page;
    let sane = (n == 0 || (n.is_power_of_two() && n <= 16)) && r.tot_bfregs <= 512;
    let ctx = match Context::open_with(kernel, None) {
        Ok(ctx) => ctx,
        Err(e) => {
            if !sane || r.cqe_version > 1 {
                assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
            }
            return;
        }
    };
    assert!(
        sane,
        "a context opened with {n} UARs per page and {} static bfregs",
        r.tot_bfregs
    );
    let pd = ctx.alloc_pd().expect("the fake allocates PDs");
    let cq = ctx
        .create_cq(4, CqOptions::default())
        .expect("the fake creates CQs");
    let mut made = Vec::new();
    for _ in 0..qps {
        let qp = pd.create_qp(&QpInitAttr::rc(&cq, &cq).cap(QpCap::new(1, 1, 1, 1)));
        // Refusals are fine (the response's queue limits, a bfreg the
        // kernel chose outside the pages, a page id without room for its
        // UARs): what matters is that none panics.
        if let Ok(qp) = qp {
            made.push(qp);
        }
    }
    let s = s.lock().unwrap_or_else(|p| p.into_inner());
    let per_page = n.max(1);
    for &(flags, index) in &s.qps {
        if flags & abi::MLX5_QP_FLAG_UAR_PAGE_INDEX == 0 {
            continue;
        }
        let on_a_page = s.pages.iter().any(|&(id, len)| {
            index
                .checked_sub(id)
                .is_some_and(|j| j < per_page && j < len / 4096)
        });
        assert!(
            on_a_page,
            "a QP names UAR {index:#x}, on none of the pages {:x?}",
            s.pages
        );
    }
    drop(s);
    drop(made);
}

pub fn mlx5_context_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let base = abi::Mlx5IbAllocUcontextResp {
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
    let seed = |mode: u8, r: &abi::Mlx5IbAllocUcontextResp, qps: Option<u8>, words: &[u32]| {
        let mut v = vec![mode];
        v.extend_from_slice(r.as_bytes());
        if let Some(n) = qps {
            v.push(n);
            for w in words {
                v.extend_from_slice(&w.to_ne_bytes());
            }
        }
        v
    };
    let with = |f: &dyn Fn(&mut abi::Mlx5IbAllocUcontextResp)| {
        let mut r = base;
        f(&mut r);
        r
    };
    let stat = with(&|r| {
        r.num_uars_per_page = 0;
        r.tot_bfregs = 16;
    });
    let per_page = |n: u32, tot: u32| {
        with(&|r| {
            r.num_uars_per_page = n;
            r.tot_bfregs = tot;
        })
    };
    vec![
        ("devx-dynamic-uars", seed(1, &base, None, &[])),
        ("static-uars-zero-per-page", seed(0, &stat, None, &[])),
        // 17 QPs: 4 dedicated bfregs (2 pages), then 12 shared (6 more
        // pages) and around again; 4 KiB UARs on 64 KiB pages.
        (
            "dynamic-16-per-page-17-qps",
            seed(1, &per_page(16, 0), Some(17), &[]),
        ),
        // Static bfregs the kernel chose: 1 (page 0), 5 (UAR 1), 2 (not a
        // usable one), past the pages, u32::MAX.
        (
            "static-bfreg-choices",
            seed(0, &stat, Some(5), &[1, 5, 2, 64, u32::MAX]),
        ),
        // Issue 27 item 6: 2^31 UARs per page overflowed `n * 2`.
        (
            "regress-uars-per-page-2-31",
            seed(1, &per_page(1 << 31, 16), Some(1), &[]),
        ),
        (
            "regress-uars-per-page-2-31-dynamic",
            seed(1, &per_page(1 << 31, 0), Some(1), &[]),
        ),
        (
            "regress-uars-per-page-u32-max",
            seed(0, &per_page(u32::MAX, 16), Some(1), &[]),
        ),
        (
            "regress-uars-per-page-3",
            seed(0, &per_page(3, 16), Some(1), &[]),
        ),
        (
            "regress-uars-per-page-32",
            seed(1, &per_page(32, 0), Some(1), &[]),
        ),
        // More static bfregs than mlx5_ib gives: 2^31 page mappings.
        (
            "regress-static-bfregs-u32-max",
            seed(0, &per_page(1, u32::MAX), Some(1), &[]),
        ),
        // A BF page id whose 4 sub-UARs' ids pass u32::MAX (`page_id + j`).
        (
            "regress-page-id-near-u32-max",
            seed(
                1,
                &per_page(4, 0),
                Some(1),
                &[7, 4 * 4096, u32::MAX - 1, 4 * 4096],
            ),
        ),
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
            assert_eq!((e.kind(), e.errno()), (ErrorKind::Os, Errno::EINVAL));
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
