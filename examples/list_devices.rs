//! Lists the RDMA devices, opens each and prints its ports and GIDs: a short
//! tour of discovery and the query API.
//!
//! ```sh
//! cargo run --example list_devices
//! cargo run --example list_devices -- --model=rxe   # the rxe device model's device
//! ```

#[path = "common/cli.rs"]
mod cli;

use cli::{Model, Spec};

const SPEC: Spec = Spec {
    name: "list_devices",
    about: "Lists the RDMA devices, opens each and prints its ports and GIDs.",
    args: &[],
    required: 0,
    models: &[Model::Mlx5, Model::Rxe],
};

fn main() {
    let args = cli::parse(&SPEC);
    cli::finish(run(args));
}

fn run(args: cli::Args) -> uverbs::Result<()> {
    // `uverbs::devices()` and `uverbs::sys::linux()` on a real system; the
    // model's kernel with `--model`.
    let device = args.device();
    let kernel = device.kernel();
    let devices = uverbs::devices_with(&kernel)?;
    if devices.is_empty() {
        println!("no RDMA devices");
    }
    for dev in devices {
        println!(
            "{} ({}, node GUID {:016x}, {})",
            dev.name,
            dev.uverbs_name,
            dev.node_guid,
            dev.node_type.transport_name()
        );
        let ctx = uverbs::Context::open_device(kernel.clone(), dev)?;
        let attr = ctx.query_device()?;
        println!(
            "  provider {}, fw {}, {} port(s), {} completion vector(s)",
            ctx.provider_name(),
            attr.fw_ver,
            attr.phys_port_cnt,
            ctx.num_comp_vectors()
        );
        for port in 1..=attr.phys_port_cnt {
            let p = ctx.query_port(port)?;
            println!(
                "  port {port}: {:?}, {:?}, active MTU {}",
                p.state,
                p.link_layer,
                p.active_mtu.bytes().unwrap_or(0)
            );
        }
        for gid in ctx.query_gid_table()? {
            println!(
                "    GID[{}] port {} {} {:?}",
                gid.index, gid.port, gid.gid, gid.gid_type
            );
        }
    }
    Ok(())
}
