//! `uverbs devx-watch [-d DEV] [--omit-data] [-n COUNT]`: prints the
//! unaffiliated DevX events of an mlx5 device (port changes, module events)
//! as they come: the counterpart of `asyncwatch` for DevX event channels.
//!
//! ```text
//! mlx5_0: DevX event channel FD 5 (data mode)
//!   cookie 9 event_type 0x09 (PORT_CHANGE) sub_type 0x04 data 00000000 ...
//! ```
//!
//! It opens the device with a DevX user context (and says why when the
//! kernel refuses one), subscribes each unaffiliated event type it knows
//! (the cookie is the type; types the device does not report are listed
//! and skipped), and reads the channel: blocking, one event per line,
//! flushed. With `--omit-data` only the cookie comes (events of a type are
//! coalesced until read). Exits 0 after COUNT events, 1 when reading fails
//! (the device was removed: the kernel destroyed the channel).

use std::io::{self, Write};

use uverbs::mlx5::{self, EventChannelFlags, OpenFlags, Target};

const PROG: &str = "uverbs devx-watch";

/// Unaffiliated `MLX5_EVENT_TYPE_*` values and their names
/// (`include/linux/mlx5/device.h`).
const UNAFFILIATED: &[(u16, &str)] = &[
    (0x08, "INTERNAL_ERROR"),
    (0x09, "PORT_CHANGE"),
    (0x15, "GPIO_EVENT"),
    (0x16, "PORT_MODULE_EVENT"),
    (0x17, "TEMP_WARN_EVENT"),
    (0x19, "REMOTE_CONFIG"),
    (0x22, "GENERAL_EVENT"),
    (0x25, "DEVICE_TRACER"),
];

fn usage(out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "Usage: {PROG} [options]")?;
    writeln!(out)?;
    writeln!(
        out,
        "Prints the unaffiliated DevX events of an mlx5 device."
    )?;
    writeln!(out)?;
    writeln!(out, "Options:")?;
    writeln!(
        out,
        "  -d, --ib-dev=<dev>  use device <dev> (default: the first mlx5 device)"
    )?;
    writeln!(
        out,
        "      --omit-data     an OMIT_DATA channel: cookies only, coalesced"
    )?;
    writeln!(
        out,
        "  -n, --count=<n>     exit after <n> events (default: run until killed)"
    )?;
    writeln!(out, "  -h, --help          print this help and exit")
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Opts {
    device: Option<String>,
    omit_data: bool,
    count: Option<u64>,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("option '{name}' requires an argument"))
        };
        match key {
            "-h" | "--help" => return Ok(None),
            "-d" | "--ib-dev" => o.device = Some(value(key)?),
            "--omit-data" => o.omit_data = true,
            "-n" | "--count" => {
                let v = value(key)?;
                o.count = Some(v.parse().map_err(|_| format!("invalid count '{v}'"))?);
            }
            other => return Err(format!("unrecognized option '{other}'")),
        }
    }
    Ok(Some(o))
}

/// The name of an event type.
fn type_name(t: u8) -> &'static str {
    UNAFFILIATED
        .iter()
        .find(|(v, _)| *v == u16::from(t))
        .map_or("unknown", |(_, n)| n)
}

/// `uverbs devx-watch ...`: returns the exit status.
pub fn main(args: &[String]) -> u8 {
    let opts = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            let _ = usage(&mut io::stdout());
            return 0;
        }
        Err(e) => {
            eprintln!("{PROG}: {e:#}");
            let _ = usage(&mut io::stderr());
            return 1;
        }
    };
    match watch(&opts, &mut io::stdout()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{PROG}: {e:#}");
            1
        }
    }
}

fn watch(o: &Opts, out: &mut dyn Write) -> Result<(), String> {
    let kernel = crate::transport::kernel();
    let list = uverbs::devices_with(&kernel).map_err(|e| format!("{e:#}"))?;
    let dev = match &o.device {
        Some(n) => list
            .into_iter()
            .find(|d| &d.name == n)
            .ok_or_else(|| format!("IB device '{n}' wasn't found"))?,
        None => list
            .into_iter()
            .find(|d| d.driver_id == Some(uverbs::abi::RDMA_DRIVER_MLX5))
            .ok_or("no mlx5 device found")?,
    };
    let name = dev.name.clone();
    let ctx = mlx5::open_device(kernel, dev, OpenFlags::DEVX).map_err(|e| format!("{e:#}"))?;
    let devx = ctx
        .mlx5()
        .and_then(|m| m.devx())
        .map_err(|e| format!("{e:#}"))?;
    let flags = if o.omit_data {
        EventChannelFlags::OMIT_DATA
    } else {
        EventChannelFlags::empty()
    };
    let ch = devx
        .create_event_channel(flags)
        .map_err(|e| format!("{e:#}"))?;
    let w = |out: &mut dyn Write, s: String| {
        let _ = writeln!(out, "{s}");
        let _ = out.flush();
    };
    w(
        out,
        format!(
            "{name}: DevX event channel FD {} ({})",
            std::os::fd::AsRawFd::as_raw_fd(&ch),
            if o.omit_data {
                "omit data"
            } else {
                "data mode"
            }
        ),
    );
    let mut subscribed = 0;
    for &(t, n) in UNAFFILIATED {
        match ch.subscribe(None, &[t], Target::Cookie(u64::from(t))) {
            Ok(()) => subscribed += 1,
            Err(_) => w(
                out,
                format!("  ({n} {t:#04x}: not reported by this device)"),
            ),
        }
    }
    if subscribed == 0 {
        return Err("the device reports none of the unaffiliated event types".into());
    }
    let mut seen = 0u64;
    while o.count.is_none_or(|c| seen < c) {
        let ev = ch.get_event().map_err(|e| format!("{e:#}"))?;
        let line = match ev.eqe {
            Some(eqe) => {
                let data: String = eqe[32..60]
                    .chunks(4)
                    .map(|c| format!("{:02x}{:02x}{:02x}{:02x}", c[0], c[1], c[2], c[3]))
                    .collect::<Vec<_>>()
                    .join(" ");
                format!(
                    "  cookie {} event_type {:#04x} ({}) sub_type {:#04x} data {data}",
                    ev.cookie,
                    eqe[1],
                    type_name(eqe[1]),
                    eqe[3]
                )
            }
            None => format!(
                "  cookie {} ({})",
                ev.cookie,
                u8::try_from(ev.cookie).map_or("unknown", type_name)
            ),
        };
        w(out, line);
        seen += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn options_parse() {
        assert_eq!(parse(&s(&[])), Ok(Some(Opts::default())));
        assert_eq!(
            parse(&s(&["-d", "mlx5_1", "--omit-data", "--count=3"])),
            Ok(Some(Opts {
                device: Some("mlx5_1".into()),
                omit_data: true,
                count: Some(3)
            }))
        );
        assert_eq!(parse(&s(&["-h"])), Ok(None));
        assert!(parse(&s(&["-n"]))
            .unwrap_err()
            .contains("requires an argument"));
        assert!(parse(&s(&["-n", "x"]))
            .unwrap_err()
            .contains("invalid count"));
        assert!(parse(&s(&["-x"])).unwrap_err().contains("unrecognized"));
    }

    /// On the device model: the watch subscribes, and prints the events
    /// raised while it runs, in both modes.
    #[test]
    fn watches_the_models_events() {
        use uverbs::testing::mlx5::fake_mlx5;
        for omit in [false, true] {
            let model = fake_mlx5();
            let k = model.dyn_kernel();
            let m2 = model.clone();
            let raiser = std::thread::spawn(move || {
                // Until the watch has subscribed.
                let mut port = [0u8; 64];
                port[1] = 0x09;
                port[3] = 0x04;
                port[32..36].copy_from_slice(&0x0100_0000u32.to_be_bytes());
                let mut raised = 0;
                for _ in 0..2000 {
                    raised += m2.devx_raise_event(port);
                    if raised >= 2 {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            });
            crate::transport::use_for_this_thread(k);
            let mut out = Vec::new();
            let o = Opts {
                device: Some("mlx5_0".into()),
                omit_data: omit,
                count: Some(1),
            };
            watch(&o, &mut out).unwrap();
            raiser.join().unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(text.starts_with("mlx5_0: DevX event channel FD"), "{text}");
            if omit {
                assert!(text.contains("  cookie 9 (PORT_CHANGE)"), "{text}");
            } else {
                assert!(
                    text.contains(
                        "  cookie 9 event_type 0x09 (PORT_CHANGE) sub_type 0x04 data 01000000 00000000"
                    ),
                    "{text}"
                );
            }
            // The model reports port changes and module events only.
            assert!(
                text.contains("(INTERNAL_ERROR 0x08: not reported by this device)"),
                "{text}"
            );
        }
    }
}
