//! DevX event channels on an mlx5 device (`mlx5dv_devx_get_event`):
//! open the device with a DevX user context, create an event channel,
//! subscribe to an unaffiliated event (port change) and to the events of a
//! DevX CQ built from PRM commands on UMEM, an EQN and a UAR, then read the
//! events with `poll(2)` and print their cookie and EQE fields.
//!
//! ```sh
//! cargo run --example devx_events -- [mlx5_0] [seconds]
//! cargo run --example devx_events -- --model mlx5_0 1   # on the mlx5 device model
//! ```
//!
//! Needs a ConnectX and DevX (firmware with `log_max_uctx`, and
//! `CAP_NET_RAW`); toggle the port's link to see a port change. The DevX
//! CQ raises a CQ error event (syndrome 1) if it is overrun, and completion
//! events once armed. No ConnectX is available in this project's CI: there
//! it runs on the device model (`--model`, in `tests/examples.rs`), whose
//! firmware builds the CQ and takes port 1 down and up.

use std::{
    os::fd::AsFd,
    time::{Duration, Instant},
};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use uverbs::mlx5::{
    self, event_type, CmdIn, CmdOut, DevxEvent, EventChannelFlags, OpenFlags, Target, UarKind,
    UmemAccess,
};

#[path = "common/cli.rs"]
mod cli;

use cli::{Model, Spec};

const SPEC: Spec = Spec {
    name: "devx_events",
    about: "DevX event channels of an mlx5 device: subscribes to port changes and to the \
            events of a DevX CQ built from PRM commands on UMEM, an EQN and a UAR, and \
            prints the events that come for SECONDS seconds. Toggle the port's link to \
            see a port change; on the device model, the model takes port 1 down and up \
            a moment after the start.",
    args: &[
        ("DEVICE", "the mlx5 device to open (default: the first)"),
        ("SECONDS", "how long to wait for events (default: 30)"),
    ],
    required: 0,
    models: &[Model::Mlx5],
};

/// `DEVX_SET` of a field of the PRM layouts below (`mlx5_ifc.h`); the
/// offsets are constants of this program, so a refusal is a bug here.
fn set(buf: &mut [u8], off: usize, width: u32, value: u64) {
    assert!(
        mlx5::devx_set(buf, off, width, value),
        "no {width}-bit field at bit {off:#x}"
    );
}

/// The name of an event type. `DevxEvent::event_type` is the EQE's byte
/// (`u8`) and the `event_type` constants are the `u16`s `subscribe` takes
/// (as `mlx5dv_devx_subscribe_devx_event`'s list): widen to compare.
fn type_name(ev: &DevxEvent) -> &'static str {
    match ev.event_type().map(u16::from) {
        Some(event_type::COMP) => "completion",
        Some(event_type::CQ_ERROR) => "CQ error",
        Some(event_type::PORT_CHANGE) => "port change",
        Some(_) => "other",
        None => "no data",
    }
}

fn main() {
    let args = cli::parse(&SPEC);
    cli::finish(run(args));
}

fn run(args: cli::Args) -> uverbs::Result<()> {
    let seconds: u64 = args.parse_or(1, 30);
    let device = args.device();
    let kernel = device.kernel(); // uverbs::sys::linux(), or the model's
    let dev = uverbs::find_device(&kernel, args.get(0))?;
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
    device.flap_port_devx(); // only on the model

    let deadline = Instant::now() + Duration::from_secs(seconds);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let mut fds = [PollFd::new(channel.as_fd(), PollFlags::POLLIN)];
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        if poll(&mut fds, PollTimeout::from(ms)).unwrap_or(0) == 0 {
            continue;
        }
        // Drain what is there (the pattern edge-triggered epoll needs too).
        while let Some(ev) = channel.try_get_event()? {
            print!("cookie {} {}", ev.cookie, type_name(&ev));
            if let (Some(t), Some(s)) = (ev.event_type(), ev.sub_type()) {
                print!(" (type {t:#04x}, sub-type {s})");
            }
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
