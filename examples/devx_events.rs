//! DevX event channels on an mlx5 device (`mlx5dv_devx_get_event`):
//! open the device with a DevX user context, create an event channel,
//! subscribe to an unaffiliated event (port change) and to the events of a
//! DevX CQ built from PRM commands on UMEM, an EQN and a UAR, then read the
//! events with `poll(2)` and print their cookie and EQE fields.
//!
//! ```sh
//! cargo run --example devx_events -- [mlx5_0] [seconds]
//! ```
//!
//! Needs a ConnectX and DevX (firmware with `log_max_uctx`, and
//! `CAP_NET_RAW`); toggle the port's link to see a port change. The DevX
//! CQ raises a CQ error event (syndrome 1) if it is overrun, and completion
//! events once armed. Not run in this project's CI: there is no ConnectX
//! there (the same calls run against the device model in
//! `tests/mlx5_devx.rs`).

use std::{
    os::fd::AsFd,
    time::{Duration, Instant},
};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use uverbs::mlx5::{
    self, event_type, CmdIn, CmdOut, EventChannelFlags, OpenFlags, Target, UarKind, UmemAccess,
};

/// `DEVX_SET` of a field of the PRM layouts below (`mlx5_ifc.h`); the
/// offsets are constants of this program, so a refusal is a bug here.
fn set(buf: &mut [u8], off: usize, width: u32, value: u64) {
    assert!(
        mlx5::devx_set(buf, off, width, value),
        "no {width}-bit field at bit {off:#x}"
    );
}

fn main() -> uverbs::Result<()> {
    let mut args = std::env::args().skip(1);
    let name = args.next();
    let seconds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(30);
    let kernel = uverbs::sys::linux();
    let dev = uverbs::find_device(&kernel, name.as_deref())?;
    let ctx = mlx5::open_device(kernel, dev, OpenFlags::DEVX)?;
    let devx = ctx.mlx5()?.devx()?;
    let channel = devx.create_event_channel(EventChannelFlags::empty())?;
    channel.subscribe(None, &[event_type::PORT_CHANGE], Target::Cookie(1))?;

    // A DevX CQ of 64 CQEs: its buffer and doorbell record in UMEMs, its
    // EQ and UAR from the kernel (`create_cq_in`, `cqc` of mlx5_ifc.h).
    let buf = devx.umem_reg(64 * 64, UmemAccess::LOCAL_WRITE)?;
    let dbr = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE)?;
    let uar = devx.alloc_uar(UarKind::NonCached)?;
    let eqn = devx.query_eqn(0)?;
    let mut cmd = vec![0u8; 272];
    CmdIn::new(0x400).write(&mut cmd); // MLX5_CMD_OP_CREATE_CQ
    let cqc = 0x80; // cq_context, in bits
    set(&mut cmd, cqc + 0x06, 1, 1); // dbr_umem_valid
    set(&mut cmd, cqc + 0x08, 3, 0); // cqe_sz: 64 bytes
    set(&mut cmd, cqc + 0x20, 32, u64::from(dbr.id())); // dbr_umem_id
    set(&mut cmd, cqc + 0x63, 5, 6); // log_cq_size
    set(&mut cmd, cqc + 0x68, 24, u64::from(uar.page_id())); // uar_page
    set(&mut cmd, cqc + 0xb8, 8, u64::from(eqn)); // c_eqn
    set(&mut cmd, cqc + 0xc3, 5, 0); // log_page_size: 4 KiB
    set(&mut cmd, cqc + 0x1c0, 64, 0); // dbr_addr: offset in the UMEM
    set(&mut cmd, 0x280, 64, 0); // cq_umem_offset
    set(&mut cmd, 0x2c0, 32, u64::from(buf.id())); // cq_umem_id
    set(&mut cmd, 0x2e0, 1, 1); // cq_umem_valid
    let mut out = vec![0u8; 16];
    let cq = devx.obj_create_using(&cmd, &mut out, &[&buf, &dbr, &uar])?;
    let cqn = CmdOut::read(&out).map_or(0, |h| h.obj_id & 0x00ff_ffff);
    channel.subscribe(
        Some(&cq),
        &[event_type::COMP, event_type::CQ_ERROR],
        Target::Cookie(2),
    )?;
    println!(
        "{}: DevX channel ready (CQ {cqn:#x} on EQ {eqn}, UAR page {}); waiting {seconds} s",
        ctx.device().name,
        uar.page_id()
    );

    let deadline = Instant::now() + Duration::from_secs(seconds);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let mut fds = [PollFd::new(channel.as_fd(), PollFlags::POLLIN)];
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        if poll(&mut fds, PollTimeout::from(ms)).unwrap_or(0) == 0 {
            continue;
        }
        // Drain what is there (the pattern edge-triggered epoll needs too).
        while let Some(ev) = channel.try_get_event()? {
            print!(
                "cookie {} type {:?} sub_type {:?}",
                ev.cookie,
                ev.event_type(),
                ev.sub_type()
            );
            if let Some(cqn) = ev.cqn() {
                print!(" cqn {cqn:#x}");
            }
            if let Some(s) = ev.cq_error_syndrome() {
                print!(" syndrome {s}");
            }
            println!();
        }
    }
    cq.destroy()?;
    Ok(())
}
