//! The write bandwidth test (perftest's `run_iter_bw`, one QP, ITERATIONS):
//! side A keeps up to `tx_depth` RDMA writes of `size` bytes outstanding to
//! side B's buffer, `post_list` requests per `post_send` call; every
//! `cq_mod`-th request (and the last) is signaled, and each completion
//! accounts for `cq_mod` requests. Side B does nothing (the responder is in
//! the kernel).

use uverbs::{SendOp, SendWr, WcStatus, WorkCompletion};

use super::{
    clock::{Clock, Watchdog},
    err, report, Opts, Res, Setup,
};

/// perftest's `CTX_POLL_BATCH`.
const POLL_BATCH: usize = 16;

pub fn run(o: &Opts, s: Setup) -> Res<report::Bw> {
    let Setup { mut a, b, .. } = s;
    let iters = o.iters;
    let (tx_depth, cq_mod, post_list) = (o.tx_depth, o.cq_mod, o.post_list);
    let op = SendOp::RdmaWrite {
        remote_addr: b.mr.addr() + b.half as u64,
        rkey: b.mr.rkey(),
    };
    let sge = [a.mr.sge(0, o.size as u32).map_err(err("sge"))?];
    let mut tposted = vec![1u64; iters];
    let mut tcompleted = vec![1u64; iters];
    let mut wc = [WorkCompletion::default(); POLL_BATCH];
    let mut wrs: Vec<SendWr<'_>> = Vec::with_capacity(post_list);
    let (mut scnt, mut ccnt) = (0usize, 0usize);
    let clock = Clock::start(o.clock);
    let mut watch = Watchdog::default();
    while scnt < iters || ccnt < iters {
        while scnt < iters && scnt - ccnt + post_list <= tx_depth {
            let n = post_list.min(iters - scnt);
            wrs.clear();
            for k in scnt..scnt + n {
                let wr = SendWr::new(k as u64, op, &sge);
                let signaled = (k + 1) % cq_mod == 0 || k == iters - 1;
                wrs.push(if signaled { wr } else { wr.unsignaled() });
            }
            let t = clock.now();
            tposted[scnt..scnt + n].fill(t);
            a.qp.post_send(&wrs)
                .map_err(|e| format!("post_send (scnt={scnt}): {e:#}"))?;
            scnt += n;
        }
        if ccnt < iters {
            let ne = a.send_cq.poll(&mut wc);
            if ne > 0 {
                watch = Watchdog::default();
                let t = clock.now();
                for c in &wc[..ne] {
                    if c.status != WcStatus::SUCCESS {
                        return Err(format!("completion failed: {c:?}"));
                    }
                    ccnt += cq_mod;
                    tcompleted[ccnt.min(iters) - 1] = t;
                }
            } else {
                if watch.stuck() {
                    return Err(format!("stuck: {scnt} posted, {ccnt} completed"));
                }
            }
        }
    }
    let hz = clock.hz();
    drop(b);
    Ok(report::bandwidth(
        o.size,
        &tposted,
        &tcompleted,
        cq_mod,
        post_list,
        hz,
    ))
}
