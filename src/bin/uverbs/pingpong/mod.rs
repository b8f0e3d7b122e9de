//! `uverbs rc-pingpong`, `uc-pingpong`, `ud-pingpong`, `srq-pingpong`:
//! rdma-core v44's `ibv_{rc,uc,ud,srq}_pingpong` (`libibverbs/examples/`)
//! over the uverbs library, wire-compatible with them: the same TCP
//! exchange ([`wire`]), QP attributes, post/poll loop and output, so either
//! side can be the C tool.
//!
//! Layout: [`args`] (command lines), [`wire`] (address messages and the TCP
//! exchange), this module (device setup, PSNs, timing and the summary
//! lines), [`link`] (the QP transitions, through the library's bring-up),
//! [`single`] (the one-QP loop RC, UC and UD share) and [`srq`] (its own
//! tool).
//!
//! Options the library cannot honour (`-o`/`-O`/`-P` on-demand paging, `-t`
//! completion timestamps, `-j` device memory; `srq -o`) first get the C
//! tool's capability check and message, and on a device that has the
//! capability a clear "not supported" error. `-N` (rc: the `ibv_wr_*` send
//! API) posts each SEND through a typed session of the device's provider
//! (`QueuePair::start_wr`), as `use_new_send` posts through `ibv_wr_*`.

mod args;
mod link;
mod single;
mod srq;
mod wire;

use std::time::Instant;

use uverbs::{Context, Gid};

pub use args::Transport;
use args::{Options, Parsed};

/// `PINGPONG_RECV_WRID`.
pub const RECV_WRID: u64 = 1;
/// `PINGPONG_SEND_WRID`.
pub const SEND_WRID: u64 = 2;
/// `sysconf(_SC_PAGESIZE)` on the targets we build for (x86_64, aarch64 4K).
pub const PAGE_SIZE: usize = 4096;

/// `uverbs rc-pingpong`.
pub fn rc_main(args: &[String]) -> u8 {
    main(Transport::Rc, args)
}

/// `uverbs uc-pingpong`.
pub fn uc_main(args: &[String]) -> u8 {
    main(Transport::Uc, args)
}

/// `uverbs ud-pingpong`.
pub fn ud_main(args: &[String]) -> u8 {
    main(Transport::Ud, args)
}

/// `uverbs srq-pingpong`.
pub fn srq_main(args: &[String]) -> u8 {
    main(Transport::Srq, args)
}

fn main(t: Transport, argv: &[String]) -> u8 {
    let opts = match args::parse(t, argv, &mut std::io::stdout(), &mut std::io::stderr()) {
        Parsed::Run(o) => o,
        Parsed::Help => return 0,
        Parsed::Exit(code) => return code,
    };
    match t {
        Transport::Srq => srq::run(&opts),
        _ => single::run(t, &opts),
    }
}

/// Prints `msg` (and the library's error, for the details) on stderr.
pub fn fail(msg: &str, e: impl std::fmt::Display) {
    eprintln!("{msg}");
    eprintln!("  ({e:#})");
}

/// The next completions of the pingpong loop, as the C tools get them: with
/// `-e`, wait for a completion event, count it in `num_cq_events` and leave
/// it unacknowledged (the tools acknowledge them all at once before they
/// destroy the CQ: `ibv_ack_cq_events(cq, num_cq_events)`, see
/// [`ack_all_events`]), re-arm and poll once; without, busy-poll until at
/// least one completion arrives. Inlined into the tools' loops, as C
/// compilers inline ibv_rc_pingpong's static functions.
#[inline(always)]
pub fn next_completions(
    channel: Option<&uverbs::CompletionChannel>,
    cq: &mut uverbs::CompletionQueue,
    wc: &mut [uverbs::WorkCompletion],
    num_cq_events: &mut u32,
) -> Result<usize, ()> {
    if let Some(ch) = channel {
        // Got and left unacknowledged in one step (`get_event` then
        // `defer_ack`, without the event value).
        let ev = ch
            .get_event_deferred()
            .map_err(|e| fail("Failed to get cq_event", e))?;
        *num_cq_events += 1;
        if !ev.is_for(cq) {
            eprintln!("CQ event for unknown CQ {:#x}", ev.cq_handle());
            return Err(());
        }
        cq.req_notify(false)
            .map_err(|e| fail("Couldn't request CQ notification", e))?;
        return Ok(cq.poll(wc));
    }
    loop {
        let n = cq.poll(wc);
        if n >= 1 {
            return Ok(n);
        }
    }
}

/// `ibv_ack_cq_events(cq, num_cq_events)` after the loop, as the C tools do.
pub fn ack_all_events(cq: &uverbs::CompletionQueue, num_cq_events: u32) -> Result<(), ()> {
    cq.ack_events(num_cq_events)
        .map_err(|e| fail("Couldn't acknowledge CQ events", e))
}

/// Finds and opens the device (`-d`, or the first), as the C tools do.
pub fn open_device(o: &Options) -> Option<Context> {
    let list = match uverbs::devices_with(&crate::transport::kernel()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("Failed to get IB devices list: {e:#}");
            return None;
        }
    };
    let dev = match &o.ib_dev {
        None => match list.into_iter().next() {
            Some(d) => d,
            None => {
                eprintln!("No IB devices found");
                return None;
            }
        },
        Some(name) => match list.into_iter().find(|d| &d.name == name) {
            Some(d) => d,
            None => {
                eprintln!("IB device {name} not found");
                return None;
            }
        },
    };
    let name = dev.name.clone();
    match Context::open_device(crate::transport::kernel(), dev) {
        Ok(c) => Some(c),
        Err(e) => {
            fail(&format!("Couldn't get context for {name}"), e);
            None
        }
    }
}

/// `-i`: the C tools keep an int; the verbs take a `u8`.
pub fn ib_port(o: &Options) -> Option<u8> {
    let p = u8::try_from(o.ib_port).ok();
    if p.is_none() {
        eprintln!("Couldn't get port info (port {} does not exist)", o.ib_port);
    }
    p
}

/// The capability checks of `pp_init_ctx` for `-o`/`-O`/`-t`/`-j` (their
/// messages when the device lacks the feature), then our refusal: the
/// library has no ODP registration of the whole address space, no
/// timestamped CQs (`ibv_create_cq_ex`) and no device memory.
pub fn refuse_unsupported(t: Transport, ctx: &Context, o: &Options) -> bool {
    if !(o.odp || o.ts || o.dm) {
        return false;
    }
    let attr = match ctx.query_device() {
        Ok(a) => a,
        Err(e) => {
            fail("Couldn't query device for its features", e);
            return true;
        }
    };
    let prog = t.prog();
    if o.odp {
        // IBV_ODP_SUPPORT; SEND | RECV (| SRQ_RECV for srq).
        let mask = if t == Transport::Srq {
            1 | (1 << 5)
        } else {
            1 | 2
        };
        if attr.odp_caps.general_caps & 1 == 0 || attr.odp_caps.rc_odp_caps & mask != mask {
            if t == Transport::Srq {
                eprintln!("The device isn't ODP capable or does not support RC send, receive and srq with ODP");
            } else {
                eprintln!(
                    "The device isn't ODP capable or does not support RC send and receive with ODP"
                );
            }
            return true;
        }
        if o.implicit_odp && attr.odp_caps.general_caps & 2 == 0 {
            eprintln!("The device doesn't support implicit ODP");
            return true;
        }
        eprintln!("{prog}: -o/-O/-P (on-demand paging) are not supported by uverbs");
        return true;
    }
    if o.ts {
        if attr.completion_timestamp_mask == 0 {
            eprintln!("The device isn't completion timestamp capable");
            return true;
        }
        eprintln!("{prog}: -t (completion timestamps) is not supported by uverbs");
        return true;
    }
    if attr.max_dm_size == 0 {
        eprintln!("Device doesn't support dm allocation");
    } else if attr.max_dm_size < u64::from(o.size) {
        eprintln!("Device memory is insufficient");
    } else {
        eprintln!("{prog}: -j (device memory) is not supported by uverbs");
    }
    true
}

/// The local GID for `-g` (`ibv_query_gid`; an empty slot reads as zero),
/// or zero without `-g`.
pub fn local_gid(ctx: &Context, port: u8, gidx: i32, err_msg: &str) -> Option<Gid> {
    if gidx < 0 {
        return Some(Gid::default());
    }
    match ctx.query_gid(port, gidx as u32) {
        Ok(g) => Some(g.map(|e| e.gid).unwrap_or_default()),
        Err(e) => {
            fail(&format!("{err_msg} {gidx}"), e);
            None
        }
    }
}

/// The two summary lines, computed as the C tools compute them (a `float`
/// of microseconds, `long long` bytes).
pub fn summary(size: u32, iters: u32, start: Instant, end: Instant) -> [String; 2] {
    let d = end.duration_since(start);
    let usec = (d.as_secs() * 1_000_000 + u64::from(d.subsec_micros())) as f32;
    let bytes = i64::from(size) * i64::from(iters) * 2;
    [
        format!(
            "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec",
            f64::from(usec) / 1e6,
            bytes as f64 * 8.0 / f64::from(usec)
        ),
        format!(
            "{} iters in {:.2} seconds = {:.2} usec/iter",
            iters as i32,
            f64::from(usec) / 1e6,
            f64::from(usec / iters as f32)
        ),
    ]
}

/// The `-c` pattern: byte `i / page_size % sizeof(char)` (always 0) at the
/// start of each page of the message.
pub fn validation_offsets(size: u32) -> impl Iterator<Item = usize> {
    (0..size as usize).step_by(PAGE_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn summary_lines_match_printf() {
        let start = Instant::now();
        let end = start + Duration::from_micros(123_456);
        assert_eq!(
            summary(4096, 200, start, end),
            [
                "1638400 bytes in 0.12 seconds = 106.17 Mbit/sec".to_string(),
                "200 iters in 0.12 seconds = 617.28 usec/iter".to_string(),
            ]
        );
    }

    #[test]
    fn validation_touches_each_page() {
        assert_eq!(
            validation_offsets(9000).collect::<Vec<_>>(),
            [0, 4096, 8192]
        );
    }
}
