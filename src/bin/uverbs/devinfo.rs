//! `uverbs devinfo [-d DEV] [-i PORT] [-v] [-l]`: device and port attributes,
//! printed exactly as rdma-core v44's `ibv_devinfo` prints them
//! (`libibverbs/examples/devinfo.c`), so the two outputs can be diffed.
//!
//! Values rdma-core gets from provider driver data that the kernel's
//! `EX_QUERY_DEVICE` response does not carry (TSO caps, packet pacing, the RSS
//! hash function and fields mask; mlx5 only) are printed as rdma-core prints
//! them when they are zero: see [`ProviderCaps`].
//!
//! The printing functions write into any [`Write`] and query through the
//! [`Hca`] trait, so the unit tests below render hand-built attributes.

use std::io::{self, Write};

use uverbs::{Context, DeviceAttr, DeviceInfo, GidEntry, PortAttr};

/// The name `usage` and getopt-style messages use for this program.
const PROG: &str = "uverbs devinfo";

/// Exit status for `return -1` in the C tool.
const EXIT_MINUS_ONE: i32 = -1;

mod args;
mod format;

use args::*;
use format::*;

/// `uverbs devinfo ...`: returns the exit status.
pub fn main(args: &[String]) -> u8 {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut err = io::stderr();
    let status = run(args, &mut out, &mut err);
    let _ = out.flush();
    // The C tool returns an int from main: the status is its low byte.
    status as u8
}

pub(super) fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let action = match parse_args(args, out, err) {
        Ok(a) => a,
        Err(Exit(code)) => return code,
    };
    let opts = match action {
        Action::Help => {
            let _ = usage(out);
            return 0;
        }
        Action::List => {
            return match device_list() {
                Ok(list) => {
                    let names: Vec<&str> = list.iter().map(|d| d.name.as_str()).collect();
                    let _ = write_list(out, &names);
                    0
                }
                Err(e) => {
                    let _ = writeln!(err, "Failed to get IB devices list: {e:#}");
                    EXIT_MINUS_ONE
                }
            };
        }
        Action::Show(opts) => opts,
    };
    let list = match device_list() {
        Ok(list) => list,
        Err(e) => {
            let _ = writeln!(err, "Failed to get IB devices list: {e:#}");
            return EXIT_MINUS_ONE;
        }
    };
    if let Some(name) = &opts.device {
        let Some(dev) = list.iter().find(|d| &d.name == name) else {
            let _ = writeln!(err, "IB device '{name}' wasn't found");
            return EXIT_MINUS_ONE;
        };
        return open_and_print(out, err, dev, opts.port, opts.verbose);
    }
    if list.is_empty() {
        let _ = writeln!(err, "No IB devices found");
        return EXIT_MINUS_ONE;
    }
    list.iter().fold(0, |ret, dev| {
        ret | open_and_print(out, err, dev, opts.port, opts.verbose)
    })
}

/// The devices in libibverbs' order: the netlink dump (device index) order.
pub(super) fn device_list() -> uverbs::Result<Vec<DeviceInfo>> {
    let mut list = uverbs::devices_with(&crate::transport::kernel())?;
    list.sort_by(|a, b| {
        (a.index.unwrap_or(u32::MAX), &a.name).cmp(&(b.index.unwrap_or(u32::MAX), &b.name))
    });
    Ok(list)
}

/// `ibv_devinfo -l`.
pub(super) fn write_list(out: &mut dyn Write, names: &[&str]) -> io::Result<()> {
    let plural = if names.len() != 1 { "s" } else { "" };
    writeln!(out, "{} HCA{plural} found:", names.len())?;
    for name in names {
        writeln!(out, "\t{name}")?;
    }
    writeln!(out)
}

pub(super) fn open_and_print(
    out: &mut dyn Write,
    err: &mut dyn Write,
    dev: &DeviceInfo,
    port: u8,
    verbose: bool,
) -> i32 {
    let ctx = match Context::open_device(crate::transport::kernel(), dev.clone()) {
        Ok(ctx) => ctx,
        Err(e) => {
            let _ = writeln!(err, "Failed to open device");
            let _ = writeln!(err, "{PROG}: {}: {e:#}", dev.name);
            return 1;
        }
    };
    let board_id = read_board_id(&dev.name);
    let hca = LiveHca { ctx: &ctx };
    let id = HcaId {
        name: &dev.name,
        node_type: dev.node_type,
        board_id: board_id.as_deref(),
    };
    print_hca_cap(out, err, &id, &hca, port, verbose).unwrap_or(1)
}

/// `<sysfs>/class/infiniband/DEV/board_id` ([`uverbs::sysfs_path`])
/// without its trailing newline, as `ibv_read_sysfs_file` returns it;
/// `None` when absent or empty.
pub(super) fn read_board_id(name: &str) -> Option<String> {
    let path = uverbs::sysfs_path().join(format!("class/infiniband/{name}/board_id"));
    let mut s = std::fs::read_to_string(path).ok()?;
    if s.ends_with('\n') {
        s.pop();
    }
    (!s.is_empty()).then_some(s)
}

// ---------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------

/// The queries `ibv_devinfo` makes on an open device.
trait Hca {
    fn query_device(&self) -> uverbs::Result<DeviceAttr>;
    fn query_port(&self, port: u8) -> uverbs::Result<PortAttr>;
    /// `Ok(None)` for an empty slot.
    fn query_gid(&self, port: u8, index: u32) -> uverbs::Result<Option<GidEntry>>;
    fn num_comp_vectors(&self) -> u32;
    /// Values rdma-core gets from provider driver data.
    fn provider_caps(&self) -> ProviderCaps {
        ProviderCaps::default()
    }
}

pub(super) struct LiveHca<'a> {
    ctx: &'a Context,
}

impl Hca for LiveHca<'_> {
    fn query_device(&self) -> uverbs::Result<DeviceAttr> {
        self.ctx.query_device()
    }
    fn query_port(&self, port: u8) -> uverbs::Result<PortAttr> {
        self.ctx.query_port(port)
    }
    fn query_gid(&self, port: u8, index: u32) -> uverbs::Result<Option<GidEntry>> {
        self.ctx.query_gid(port, index)
    }
    fn num_comp_vectors(&self) -> u32 {
        self.ctx.num_comp_vectors()
    }
}

#[cfg(test)]
mod tests;
