//! `devx-pingpong SERVER PORT ITERS SIZE`: the client side of rdma-core's
//! `ibv_rc_pingpong -g 1 -s SIZE -n ITERS` with an RC QP made from DevX
//! (PRM) commands through `uverbs::mlx5`, for the fabric matrix
//! (`scripts/fabric-matrix.sh`): run under `scripts/on-model.sh` against
//! Debian's `ibv_rc_pingpong` (a libmlx5 verbs QP) in another process, it
//! exchanges ITERS messages each way across the model's fabric.
//!
//! The QP, its CQ and its queues are built by hand: `CREATE_CQ` on a UMEM
//! (`create_cq_in`, `cqc`), `CREATE_QP` (`create_qp_in`, `qpc`, `ads`: RC,
//! a receive queue of one 16-byte data segment per WQE, the send queue
//! after it, all in one UMEM), `RST2INIT`, `INIT2RTR`, `RTR2RTS` with the
//! address, PSNs and retry counts pingpong exchanges and uses (rdma-core
//! `mlx5_ifc.h`); SEND WQEs and receive WQEs, their doorbell records and
//! the send doorbell as `mlx5dv.h` lays them out; the CQ armed by hand
//! (`mlx5_arm_cq`: `arm_sn << 28 | ci` in the arm doorbell record, then
//! the UAR's 0x20) and each completion waited for through a DevX event
//! channel with a cookie (`mlx5dv_devx_get_event`), then its CQEs polled by
//! ownership (`mlx5_cqe64`: opcode and owner in byte 63, `wqe_counter` at
//! 60, `byte_cnt` at 44).
//!
//! Pingpong's address exchange (`pp_client_exch_dest`): connect to
//! SERVER:PORT, send `LID:QPN:PSN:GID` (`%04x:%06x:%06x:` and 32 hex digits,
//! NUL-terminated, 52 bytes), read the server's, send `done`. It prints
//! pingpong's `local address`, `remote address`, bytes and iterations lines.
#![allow(unsafe_code)] // WQEs, CQEs and doorbell records live in UMEMs the device reads and writes

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::ExitCode,
    time::{Duration, Instant},
};

use uverbs::{
    barrier,
    mlx5::{self, event_type, CmdOut, EventChannelFlags, OpenFlags, Target, UarKind, UmemAccess},
    AccessFlags,
};
use uverbs_test_support::{
    devx_overrun::create_cq_in,
    devx_rc::{create_rc_qp_in, rc_bring_up, RcPeer, RcQp},
};

/// CQEs (log), receive WQEs (log, 16 bytes each), send WQE basic blocks (log).
const LOG_NCQE: u32 = 6;
const LOG_RQ: u32 = 4;
const LOG_SQ: u32 = 4;
const RQ_BYTES: usize = 16 << LOG_RQ;

fn main() -> ExitCode {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 4 {
        eprintln!("usage: devx-pingpong SERVER PORT ITERS SIZE");
        return ExitCode::from(2);
    }
    let (Ok(port), Ok(iters), Ok(size)) = (a[1].parse(), a[2].parse(), a[3].parse()) else {
        eprintln!("devx-pingpong: PORT, ITERS and SIZE are numbers");
        return ExitCode::from(2);
    };
    match run(&a[0], port, iters, size) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("devx-pingpong: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn run(server: &str, port: u16, iters: u32, size: u32) -> Res<()> {
    let kernel = uverbs::sys::linux();
    let dev = uverbs::find_device(&kernel, Some("mlx5_0"))?;
    let ctx = mlx5::open_device(kernel, dev, OpenFlags::DEVX)?;
    let mx = ctx.mlx5()?;
    let devx = mx.devx()?;
    let pd = ctx.alloc_pd()?;
    let pdn = mx.pd_number(&pd)?;
    let mr = pd.alloc_mr(2 * size as usize, AccessFlags::LOCAL_WRITE)?;
    let gid = ctx.query_gid(1, 1)?.ok_or("no GID 1")?.gid;

    // The DevX CQ, every CQE invalid until the device writes it.
    let cq_buf = devx.umem_reg(64 << LOG_NCQE, UmemAccess::LOCAL_WRITE)?;
    let cq_dbr = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE)?;
    let cqes = cq_buf.as_ptr().ok_or("no UMEM memory")?;
    for i in 0..1usize << LOG_NCQE {
        // SAFETY: byte 63 of CQE i, inside the UMEM, before any CQ uses it.
        unsafe { cqes.add(64 * i + 63).write_volatile(0xf0) };
    }
    let uar = devx.alloc_uar(UarKind::NonCached)?;
    let eqn = devx.query_eqn(0)?;
    let cmd = create_cq_in(LOG_NCQE, cq_buf.id(), cq_dbr.id(), uar.page_id(), eqn);
    let mut out = vec![0u8; 16];
    let cq = devx.obj_create_using(&cmd, &mut out, &[&cq_buf, &cq_dbr, &uar])?;
    let cqn = CmdOut::read(&out).ok_or("CREATE_CQ output")?.obj_id & 0xff_ffff;

    // The RC QP: the receive queue first in its UMEM, the send queue after.
    let wq = devx.umem_reg(RQ_BYTES + (64 << LOG_SQ), UmemAccess::LOCAL_WRITE)?;
    let qp_dbr = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE)?;
    let cmd = create_rc_qp_in(&RcQp {
        pdn,
        uar_page: uar.page_id(),
        cqn,
        log_sq: LOG_SQ,
        // 16-byte receive WQEs: stride log 0.
        rq: Some((LOG_RQ, 0)),
        dbr_umem: qp_dbr.id(),
        wq_umem: wq.id(),
    });
    let mut out = vec![0u8; 16];
    let qp = devx.obj_create_using(&cmd, &mut out, &[&wq, &qp_dbr, &uar])?;
    let qpn = CmdOut::read(&out).ok_or("CREATE_QP output")?.obj_id & 0xff_ffff;
    let my_psn = std::process::id().wrapping_mul(2_654_435_761) & 0xff_ffff;

    // Pingpong's exchange, then the QP towards the server's.
    let mut sock = TcpStream::connect((server, port))?;
    let mine = format!(
        "{:04x}:{:06x}:{:06x}:{}\0",
        0,
        qpn,
        my_psn,
        wire_gid(&gid.0)
    );
    sock.write_all(mine.as_bytes())?;
    let mut theirs = [0u8; 52];
    sock.read_exact(&mut theirs)?;
    let text = std::str::from_utf8(&theirs[..51])?;
    let f: Vec<&str> = text.split(':').collect();
    if f.len() != 4 {
        return Err(format!("the server's address: {text:?}").into());
    }
    let rqpn = u32::from_str_radix(f[1], 16)?;
    let rpsn = u32::from_str_radix(f[2], 16)?;
    let rgid = gid_of_wire(f[3])?;
    sock.write_all(b"done\0")?;
    println!(
        "  local address:  LID 0x0000, QPN {qpn:#08x}, PSN {my_psn:#08x}, GID {}",
        std::net::Ipv6Addr::from(gid.0)
    );
    println!(
        "  remote address: LID 0x0000, QPN {rqpn:#08x}, PSN {rpsn:#08x}, GID {}",
        std::net::Ipv6Addr::from(rgid)
    );
    let peer = RcPeer {
        remote_qpn: rqpn,
        rgid,
        rq_psn: rpsn,
        sq_psn: my_psn,
        // pingpong's
        min_rnr_nak: 12,
        remote_access: false,
    };
    for (_, c) in rc_bring_up(qpn, &peer) {
        let mut out = vec![0u8; 16];
        qp.modify(&c, &mut out)?;
    }

    // Completions by cookie.
    let ch = devx.create_event_channel(EventChannelFlags::empty())?;
    ch.subscribe(Some(&cq), &[event_type::COMP], Target::Cookie(0x0404))?;
    let rq = wq.as_ptr().ok_or("no UMEM memory")?;
    // SAFETY: the send queue starts after the receive queue in the UMEM.
    let sq = unsafe { rq.add(RQ_BYTES) };
    let qdb = qp_dbr.as_ptr().ok_or("no UMEM memory")?;
    let cdb = cq_dbr.as_ptr().ok_or("no UMEM memory")?;
    let dbrec = |base: *mut u8, word: usize, v: u32| {
        // SAFETY: word 0 or 1 of a doorbell record UMEM of 4096 bytes.
        unsafe {
            base.add(4 * word)
                .cast::<[u8; 4]>()
                .write_volatile(v.to_be_bytes())
        };
    };
    let (recv_buf, send_buf) = (mr.addr(), mr.addr() + u64::from(size));
    mr.write(size as usize, &vec![0x5a; size as usize])?;
    let (mut rq_head, mut sq_pi, mut ci, mut arm_sn) = (0u32, 0u32, 0u32, 0u32);
    let post_recv = |head: &mut u32| {
        let mut w = [0u8; 16];
        w[0..4].copy_from_slice(&size.to_be_bytes());
        w[4..8].copy_from_slice(&mr.lkey().to_be_bytes());
        w[8..16].copy_from_slice(&recv_buf.to_be_bytes());
        let at = 16 * (*head as usize & ((1 << LOG_RQ) - 1));
        // SAFETY: receive WQE `at` inside the receive queue of the UMEM.
        unsafe { rq.add(at).cast::<[u8; 16]>().write_volatile(w) };
        *head += 1;
        barrier::udma_to_device_barrier();
        dbrec(qdb, 0, *head & 0xffff);
    };
    for _ in 0..(1 << LOG_RQ) - 1 {
        post_recv(&mut rq_head);
    }

    let start = Instant::now();
    let (mut sent, mut received) = (0u32, 0u32);
    let mut send_busy = false;
    while sent < iters || received < iters {
        // As pingpong's client: the next send once the last one completed
        // and the server's answer to it arrived.
        if !send_busy && sent < iters && received == sent {
            // A SEND of SIZE bytes (ctrl + one data segment), CQ_UPDATE.
            let mut w = [0u8; 64];
            w[0..4].copy_from_slice(&((sq_pi & 0xffff) << 8 | 0x0a).to_be_bytes());
            w[4..8].copy_from_slice(&(qpn << 8 | 2).to_be_bytes());
            w[11] = 0x08;
            w[16..20].copy_from_slice(&size.to_be_bytes());
            w[20..24].copy_from_slice(&mr.lkey().to_be_bytes());
            w[24..32].copy_from_slice(&send_buf.to_be_bytes());
            let at = 64 * (sq_pi as usize & ((1 << LOG_SQ) - 1));
            // SAFETY: send WQE `at` inside the send queue of the UMEM.
            unsafe { sq.add(at).cast::<[u8; 64]>().write_volatile(w) };
            sq_pi += 1;
            barrier::udma_to_device_barrier();
            dbrec(qdb, 1, sq_pi & 0xffff);
            barrier::udma_to_device_barrier();
            let mut db = [0u8; 8];
            db.copy_from_slice(&w[..8]);
            uar.write64(0x800, db)?;
            barrier::mmio_flush_writes();
            send_busy = true;
        }
        // Arm, wait for the completion event by cookie, poll what came.
        let v = (arm_sn & 3) << 28 | (ci & 0xff_ffff);
        dbrec(cdb, 1, v);
        barrier::udma_to_device_barrier();
        let mut ring = [0u8; 8];
        ring[..4].copy_from_slice(&v.to_be_bytes());
        ring[4..].copy_from_slice(&cqn.to_be_bytes());
        let mut got = poll_cq(cqes, &mut ci);
        if got.is_empty() {
            uar.write64(0x20, ring)?;
            barrier::mmio_flush_writes();
            got = poll_cq(cqes, &mut ci);
            if got.is_empty() {
                let ev = ch
                    .get_event_timeout(Some(Duration::from_secs(20)))?
                    .ok_or("no completion event in 20 s")?;
                if ev.cookie != 0x0404 || ev.cqn() != Some(cqn) {
                    return Err(
                        format!("an event for cookie {} CQ {:?}", ev.cookie, ev.cqn()).into(),
                    );
                }
                arm_sn += 1;
                got = poll_cq(cqes, &mut ci);
            }
        }
        dbrec(cdb, 0, ci & 0xff_ffff);
        for (opcode, syndrome, bytes) in got {
            match opcode {
                0 => {
                    sent += 1;
                    send_busy = false;
                }
                2 if bytes == size => {
                    received += 1;
                    post_recv(&mut rq_head);
                }
                _ => {
                    return Err(format!(
                        "a CQE with opcode {opcode:#x}, syndrome {syndrome:#x}, {bytes} bytes"
                    )
                    .into())
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = 2 * u64::from(size) * u64::from(iters);
    println!(
        "{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
        bytes as f64 * 8.0 / secs / 1e6
    );
    println!(
        "{iters} iters in {secs:.2} seconds = {:.2} usec/iter",
        secs * 1e6 / f64::from(iters)
    );
    qp.destroy()?;
    cq.destroy()?;
    Ok(())
}

/// The CQEs the device wrote since `ci`: (opcode, syndrome, byte count).
fn poll_cq(cqes: *mut u8, ci: &mut u32) -> Vec<(u8, u8, u32)> {
    let mut out = Vec::new();
    loop {
        let at = 64 * (*ci as usize & ((1 << LOG_NCQE) - 1));
        // SAFETY: byte 63 of a CQE inside the CQ's UMEM.
        let op_own = unsafe { cqes.add(at + 63).read_volatile() };
        let owner = (*ci >> LOG_NCQE) & 1;
        if op_own >> 4 == 0xf || u32::from(op_own & 1) != owner {
            return out;
        }
        barrier::udma_from_device_barrier();
        let mut c = [0u8; 64];
        for (k, b) in c.iter_mut().enumerate() {
            // SAFETY: the CQE's bytes, inside the UMEM, owned by software now.
            *b = unsafe { cqes.add(at + k).read_volatile() };
        }
        let bytes = u32::from_be_bytes([c[44], c[45], c[46], c[47]]);
        out.push((op_own >> 4, c[55], bytes));
        *ci += 1;
    }
}

/// Pingpong's `gid_to_wire_gid`: four big-endian words as 8 hex digits each.
fn wire_gid(g: &[u8; 16]) -> String {
    g.chunks(4)
        .map(|w| format!("{:08x}", u32::from_be_bytes([w[0], w[1], w[2], w[3]])))
        .collect()
}

/// Pingpong's `wire_gid_to_gid`.
fn gid_of_wire(s: &str) -> Res<[u8; 16]> {
    if s.len() != 32 {
        return Err(format!("a GID of {} digits", s.len()).into());
    }
    let mut g = [0u8; 16];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)?;
    }
    Ok(g)
}
