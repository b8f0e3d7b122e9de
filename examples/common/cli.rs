//! The command line every example shares: `--help`, the device models
//! (`--model`, or `UVERBS_MODEL`), and errors printed as a reader wants
//! them (`error: MESSAGE`, the error's `Display`, not a `Debug` dump).
//!
//! Exit statuses: 0 on success and for `--help` (usage on stdout), 1 when
//! the example fails, 2 on a usage error (usage on stderr).
//!
//! A device model runs the example without RDMA hardware: the program
//! opens its device through one of the fake kernels of `uverbs::testing`
//! (the crate's feature `test-utils`, which its dev-dependency on itself
//! turns on for the examples and tests) instead of `/dev/infiniband`, and
//! the library runs unchanged on top:
//! - `mlx5`: a software ConnectX (`uverbs::testing::mlx5`) whose HCA
//!   executes the work requests the mlx5 provider writes, on a thread of
//!   its own here; it also plays mlx5_ib and DevX.
//! - `rxe`: soft-RoCE's kernel side (`uverbs::testing::rxe`). It answers
//!   the commands but moves no data, so only the examples without a data
//!   path take it.
//!
//! No model plays rdma_cm: the rdma_cm examples need a device.
//!
//! An example calls [`parse`] first, takes its device from
//! [`Args::device`] (only the examples that do link the models), and ends
//! with [`finish`].
#![allow(dead_code)] // each example uses a part

use std::{fmt::Display, os::fd::AsRawFd, str::FromStr, sync::Arc, sync::OnceLock};

use uverbs::{
    sys::Kernel,
    testing::{
        mlx5::{fake_mlx5, HcaThread, Mlx5Model},
        rxe::{fake_rxe, FakeRxe},
    },
    AsyncEventType, Context,
};

/// A device model an example can run on instead of `/dev/infiniband`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// The software ConnectX of `uverbs::testing::mlx5` (runs the data path).
    Mlx5,
    /// rxe's kernel side from `uverbs::testing::rxe` (no data path).
    Rxe,
}

impl Model {
    fn name(self) -> &'static str {
        match self {
            Model::Mlx5 => "mlx5",
            Model::Rxe => "rxe",
        }
    }

    fn parse(s: &str) -> Option<Model> {
        match s {
            "mlx5" => Some(Model::Mlx5),
            "rxe" => Some(Model::Rxe),
            _ => None,
        }
    }
}

/// What an example is and which arguments it takes.
pub struct Spec {
    /// The program's name.
    pub name: &'static str,
    /// What it does (the help's paragraph).
    pub about: &'static str,
    /// Its positional arguments with their help, in order.
    pub args: &'static [(&'static str, &'static str)],
    /// How many of them are required (the first ones).
    pub required: usize,
    /// The models it runs on, the default first; empty when none can play
    /// what it needs (the text says why in `about`).
    pub models: &'static [Model],
}

impl Spec {
    fn usage(&self) -> String {
        let mut s = format!("Usage: {}", self.name);
        if !self.models.is_empty() {
            s.push_str(" [--model[=KIND]]");
        }
        for (i, (name, _)) in self.args.iter().enumerate() {
            if i < self.required {
                s.push_str(&format!(" {name}"));
            } else {
                s.push_str(&format!(" [{name}]"));
            }
        }
        s
    }

    fn help(&self) -> String {
        let mut s = format!("{}\n\n{}\n", self.usage(), wrap(self.about, 0));
        if !self.args.is_empty() {
            s.push_str("\nArguments:\n");
            for (name, what) in self.args {
                s.push_str(&format!("  {name:<14}{}\n", wrap(what, 16)));
            }
        }
        s.push_str("\nOptions:\n");
        if let Some(first) = self.models.first() {
            let kinds: Vec<&str> = self.models.iter().map(|m| m.name()).collect();
            let what = format!(
                "run on a device model of uverbs::testing instead of /dev/infiniband \
                 (KIND: {}; default {}); also UVERBS_MODEL=KIND",
                kinds.join(", "),
                first.name()
            );
            s.push_str(&format!("  --model[=KIND]  {}\n", wrap(&what, 18)));
        }
        s.push_str("  -h, --help      print this help\n\n");
        s.push_str(&wrap(
            "Errors are printed on stderr as `error: MESSAGE` (exit status 1); \
             a usage error exits 2.",
            0,
        ));
        s.push('\n');
        s
    }

    /// A usage error: the message and the usage on stderr, status 2.
    pub fn usage_error(&self, message: impl Display) -> ! {
        eprintln!(
            "error: {message}\n{}\nTry `{} --help`.",
            self.usage(),
            self.name
        );
        std::process::exit(2)
    }
}

/// `text` in lines of at most 78 columns, the lines after the first
/// indented by `indent` (which the first line's start is assumed to be at).
fn wrap(text: &str, indent: usize) -> String {
    let mut out = String::new();
    let mut col = indent;
    for word in text.split_whitespace() {
        if col > indent && col + 1 + word.len() > 78 {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
        } else if col > indent {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += word.len();
    }
    out
}

/// The parsed command line.
pub struct Args {
    spec: &'static Spec,
    positional: Vec<String>,
    model: Option<Model>,
}

impl Args {
    /// Where the device comes from: the running kernel, or the model asked
    /// for, started now. (Only the examples that call this link the
    /// models.)
    pub fn device(&self) -> Device {
        Device::start(self.model)
    }

    /// Positional argument `i`, if given.
    pub fn get(&self, i: usize) -> Option<&str> {
        self.positional.get(i).map(String::as_str)
    }

    /// Positional argument `i` parsed, or `default` when absent; a value
    /// that does not parse is a usage error.
    pub fn parse_or<T: FromStr>(&self, i: usize, default: T) -> T
    where
        T::Err: Display,
    {
        self.parse(i).unwrap_or(default)
    }

    /// Positional argument `i` parsed, if given; a value that does not
    /// parse is a usage error.
    pub fn parse<T: FromStr>(&self, i: usize) -> Option<T>
    where
        T::Err: Display,
    {
        let s = self.get(i)?;
        Some(s.parse().unwrap_or_else(|e| {
            let name = self.spec.args.get(i).map_or("argument", |a| a.0);
            self.spec.usage_error(format_args!("{name} {s:?}: {e:#}"))
        }))
    }
}

/// The protocol violations of the model this process runs on, for
/// [`finish`]'s check.
static VIOLATIONS: OnceLock<Box<dyn Fn() -> Vec<String> + Send + Sync>> = OnceLock::new();

/// Parses the command line: prints the help and exits 0 for `-h`/`--help`,
/// exits 2 on an unknown option or a wrong number of arguments, and
/// starts the model `--model` or `UVERBS_MODEL` asks for.
pub fn parse(spec: &'static Spec) -> Args {
    let mut positional = Vec::new();
    let mut model = None;
    let mut options = true;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            _ if !options || !arg.starts_with('-') || arg == "-" => positional.push(arg),
            "-h" | "--help" => {
                print!("{}", spec.help());
                std::process::exit(0);
            }
            "--" => options = false,
            "--model" => model = Some(None),
            _ => match arg.strip_prefix("--model=") {
                Some(kind) => model = Some(Some(kind.to_string())),
                None => spec.usage_error(format_args!("unknown option {arg:?}")),
            },
        }
    }
    if model.is_none() {
        if let Some(kind) = std::env::var("UVERBS_MODEL").ok().filter(|k| !k.is_empty()) {
            model = Some(Some(kind));
        }
    }
    let model = model.map(|kind| choose(spec, kind.as_deref()));
    if positional.len() < spec.required {
        let missing = spec.args[positional.len()].0;
        spec.usage_error(format_args!("missing {missing}"));
    }
    if positional.len() > spec.args.len() {
        let extra = &positional[spec.args.len()];
        spec.usage_error(format_args!("unexpected argument {extra:?}"));
    }
    Args {
        spec,
        positional,
        model,
    }
}

/// The model `kind` names (`None`: the example's default), if the example
/// runs on it; otherwise a usage error that says what it runs on.
fn choose(spec: &Spec, kind: Option<&str>) -> Model {
    let Some(&default) = spec.models.first() else {
        spec.usage_error(format_args!(
            "{} has no device model: uverbs::testing has none for what it needs \
             (see --help); run it on an RDMA device (rxe or hardware)",
            spec.name
        ))
    };
    let Some(kind) = kind else {
        return default;
    };
    match Model::parse(kind) {
        Some(m) if spec.models.contains(&m) => m,
        Some(m) => spec.usage_error(format_args!(
            "{} does not run on the {} model (it has no data path); use --model=mlx5",
            spec.name,
            m.name()
        )),
        None => spec.usage_error(format_args!(
            "unknown model {kind:?} (the models: mlx5, rxe)"
        )),
    }
}

/// Ends the example: a failure is printed as `error: MESSAGE` with its
/// `Display` and exits 1. On the mlx5 model, a use of the device the
/// model found wrong (its protocol violations) is a failure too.
pub fn finish<E: Display>(result: Result<(), E>) {
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
    if let Some(violations) = VIOLATIONS.get() {
        let seen = violations();
        if !seen.is_empty() {
            eprintln!("error: the device model saw protocol violations: {seen:?}");
            std::process::exit(1);
        }
    }
}

/// Where the example's device comes from: the running kernel, or a model.
pub struct Device {
    model: Option<Running>,
}

enum Running {
    Rxe(Arc<FakeRxe>),
    Mlx5 {
        model: Arc<Mlx5Model>,
        // The HCA runs on its thread until this is dropped.
        _hca: HcaThread,
    },
}

impl Device {
    fn start(model: Option<Model>) -> Device {
        let model = model.map(|m| match m {
            Model::Rxe => Running::Rxe(fake_rxe()),
            Model::Mlx5 => {
                let model = fake_mlx5();
                let m = model.clone();
                let _ = VIOLATIONS.set(Box::new(move || m.violations()));
                let _hca = model.spawn_hca();
                Running::Mlx5 { model, _hca }
            }
        });
        Device { model }
    }

    /// The kernel transport: the running kernel, or the model's.
    pub fn kernel(&self) -> Arc<dyn Kernel> {
        match &self.model {
            None => uverbs::sys::linux(),
            Some(Running::Rxe(fake)) => fake.dyn_kernel(),
            Some(Running::Mlx5 { model, .. }) => model.dyn_kernel(),
        }
    }

    /// Opens `name` (`None`: the first device), as [`Context::open`] does,
    /// on the model when there is one.
    pub fn open(&self, name: Option<&str>) -> uverbs::Result<Context> {
        Context::open_with(self.kernel(), name)
    }

    /// Whether the example runs on a model.
    pub fn is_model(&self) -> bool {
        self.model.is_some()
    }

    /// On a model, plays port 1's link going down and up in a moment:
    /// the model queues `PORT_ERR` then `PORT_ACTIVE` on `ctx`'s async
    /// event fd, as rxe reports `ip link set NETDEV down` and `up`. On a
    /// device it does nothing: change the link yourself.
    pub fn flap_port(&self, ctx: &Context) {
        let push: Box<dyn Fn(AsyncEventType) + Send> = match &self.model {
            None => return,
            Some(Running::Rxe(fake)) => {
                let fake = fake.clone();
                Box::new(move |t| fake.push_event(t.0, 1))
            }
            Some(Running::Mlx5 { model, .. }) => {
                let (kernel, fd) = (model.kernel.clone(), ctx.async_fd().as_raw_fd());
                Box::new(move |t| {
                    // `struct ib_uverbs_async_event_desc`: element (the
                    // port), event type, reserved.
                    let mut record = 1u64.to_ne_bytes().to_vec();
                    record.extend_from_slice(&t.0.to_ne_bytes());
                    record.extend_from_slice(&[0; 4]);
                    kernel.push_read_to(fd, Ok(record));
                })
            }
        };
        std::thread::spawn(move || {
            for t in [AsyncEventType::PORT_ERR, AsyncEventType::PORT_ACTIVE] {
                std::thread::sleep(std::time::Duration::from_millis(200));
                push(t);
            }
        });
    }

    /// On the mlx5 model, plays port 1 going down and up in a moment for
    /// the DevX event subscriptions: two `PORT_CHANGE` EQEs (sub-types
    /// DOWN and ACTIVE), as the firmware's event queue reports them. On a
    /// device it does nothing: change the link yourself.
    pub fn flap_port_devx(&self) {
        let Some(Running::Mlx5 { model, .. }) = &self.model else {
            return;
        };
        let model = model.clone();
        std::thread::spawn(move || {
            // MLX5_PORT_CHANGE_SUBTYPE_DOWN, _ACTIVE.
            for sub_type in [1u8, 4] {
                std::thread::sleep(std::time::Duration::from_millis(200));
                let mut eqe = [0u8; 64];
                eqe[1] = 0x09; // MLX5_EVENT_TYPE_PORT_CHANGE
                eqe[3] = sub_type;
                eqe[40] = 1 << 4; // struct mlx5_eqe_port_state: port 1
                model.devx_raise_event(eqe);
            }
        });
    }
}
