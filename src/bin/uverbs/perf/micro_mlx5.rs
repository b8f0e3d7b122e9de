//! `uverbs perf micro --mlx5-model` (feature `test-utils`): the mlx5 data
//! path's cost per call, on the device model of `uverbs::testing::mlx5`
//! (host memory; the UAR is a page of ordinary memory). The model runs only
//! between the timed loops, to complete what was posted, so the times are
//! the library's alone: WQE building, the doorbell record and the 8-byte
//! doorbell (BlueFlame for one inline WQE) per post; the ownership check and
//! parsing per CQE. `benches/mlx5.sh` runs it beside a C baseline written
//! with rdma-core's mlx5dv.h helpers (`benches/mlx5_baseline.c`) and prints
//! both in one table.
//!
//! Output: one line per measurement, `name ns_per_op`, as the C baseline.

use std::time::Instant;

use uverbs::{
    testing::mlx5::fake_mlx5, AccessFlags, CqOptions, Gid, Mtu, QpCap, QpInitAttr, QpType, RecvWr,
    SendOp, SendWr, WorkCompletion,
};

use super::{err, Opts, Res};

/// Work requests per timed chunk: the send queue's depth (as the C
/// baseline's `MAX_POST`).
const CHUNK: usize = 512;

pub fn run(o: &Opts) -> Res<()> {
    let iters = o.iters.max(CHUNK as u64 as usize) as u64;
    let model = fake_mlx5();
    let ctx =
        uverbs::Context::open_with(model.dyn_kernel(), None).map_err(err("open the mlx5 model"))?;
    let pd = ctx.alloc_pd().map_err(err("allocate PD"))?;
    let mut cq = ctx
        .create_cq(4095, CqOptions::default())
        .map_err(err("create CQ"))?;
    let mut qp = pd
        .create_qp(&QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            srq: None,
            cap: QpCap {
                max_send_wr: CHUNK as u32,
                max_recv_wr: CHUNK as u32,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 16,
            },
            sq_sig_all: false,
        })
        .map_err(err("create QP"))?;
    let gid = ctx
        .query_gid(1, 1)
        .map_err(err("query GID"))?
        .map_or(Gid([0; 16]), |e| e.gid);
    super::connect(&qp, qp.qp_num(), o, Mtu(3), gid)?;
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let mr = pd
        .alloc_mr(1 << 16, access)
        .map_err(err("register memory"))?;
    let sge = [mr.sge(0, 64).map_err(err("sge"))?];
    let rsge = [mr.sge(8192, 64).map_err(err("sge"))?];
    let op = SendOp::RdmaWrite {
        remote_addr: mr.addr() + 4096,
        rkey: mr.rkey(),
    };
    let mut wc = [WorkCompletion::default(); 16];
    // Completes everything posted: the model runs, the CQ is emptied.
    let mut settle = |qp: &mut uverbs::QueuePair, cq: &mut uverbs::CompletionQueue| {
        loop {
            model.process();
            let mut n = 0;
            loop {
                let k = cq.poll(&mut wc);
                if k == 0 {
                    break;
                }
                n += k;
            }
            if n == 0 {
                break;
            }
        }
        let _ = qp;
    };

    for batch in [1usize, 8, 64] {
        let mut wrs: Vec<SendWr<'_>> = (0..batch)
            .map(|i| SendWr::new(i as u64, op, &sge).unsignaled())
            .collect();
        wrs[batch - 1] = SendWr::new(batch as u64, op, &sge);
        let (mut ns, mut done) = (0u128, 0u64);
        while done < iters {
            let t0 = Instant::now();
            for _ in 0..CHUNK / batch {
                qp.post_send(&wrs).map_err(err("post RDMA writes"))?;
            }
            ns += t0.elapsed().as_nanos();
            done += (CHUNK / batch * batch) as u64;
            settle(&mut qp, &mut cq);
        }
        println!("write_batch{batch} {:.2}", ns as f64 / done as f64);
    }

    let data = [0u8; 16];
    let send = [SendWr::send(7, &[]).inline(&data)];
    let recvs: Vec<RecvWr<'_>> = (0..CHUNK).map(|i| RecvWr::new(i as u64, &rsge)).collect();
    let (mut ns, mut done) = (0u128, 0u64);
    while done < iters {
        qp.post_recv(&recvs).map_err(err("post receives"))?;
        let t0 = Instant::now();
        for _ in 0..CHUNK {
            qp.post_send(&send).map_err(err("post an inline send"))?;
        }
        ns += t0.elapsed().as_nanos();
        done += CHUNK as u64;
        settle(&mut qp, &mut cq);
    }
    println!("inline_send {:.2}", ns as f64 / done as f64);

    let signaled: Vec<SendWr<'_>> = (0..64).map(|i| SendWr::new(i, op, &sge)).collect();
    let (mut ns, mut done) = (0u128, 0u64);
    while done < iters {
        for _ in 0..CHUNK / 64 {
            qp.post_send(&signaled).map_err(err("post RDMA writes"))?;
        }
        model.process();
        let t0 = Instant::now();
        let mut got = 0;
        while got < CHUNK {
            got += cq.poll(&mut wc);
        }
        ns += t0.elapsed().as_nanos();
        done += CHUNK as u64;
    }
    println!("poll_cqe {:.2}", ns as f64 / done as f64);
    let violations = model.violations();
    if !violations.is_empty() {
        return Err(format!(
            "the device model saw protocol violations: {violations:?}"
        ));
    }
    Ok(())
}
