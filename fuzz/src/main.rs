//! `uverbs-fuzz`: the stable fuzzing harness (see `README.md`).
//!
//! ```text
//! uverbs-fuzz [run] [--seconds N] [--seed S] [TARGET...]   fuzz each target for N seconds
//! uverbs-fuzz replay TARGET PATH...                         run files (or folders of them) once
//! uverbs-fuzz list                                          the targets and what they check
//! uverbs-fuzz write-seeds                                   (re)write corpus/<target>/<seed>
//! ```
//!
//! `run` supervises: each target runs in a child process (`uverbs-fuzz
//! child ...`), so that one that dies (a signal, an abort, a hang) is
//! reported like a panic. Such a child is run again with the same seed and
//! `--trace FILE`, which writes every input to FILE before it runs it: the
//! input sequence depends only on the seed, so FILE ends up holding the
//! input that killed it. The summary line has cargo test's shape.
#![deny(unsafe_code)]

use std::{
    fs,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant, SystemTime},
};

use uverbs_fuzz::{
    engine::{self, Dirs, Outcome, Target},
    targets::{by_name, TARGETS},
};

/// Command-line options.
#[derive(Debug)]
struct Opts {
    seconds: f64,
    seed: Option<u64>,
    trace: Option<PathBuf>,
    max_runs: Option<u64>,
    dirs: Dirs,
    args: Vec<String>,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: uverbs-fuzz [run] [--seconds N] [--seed S] [--corpus DIR] [--artifacts DIR] [TARGET...]\n\
         \x20      uverbs-fuzz replay TARGET PATH...\n\
         \x20      uverbs-fuzz list\n\
         \x20      uverbs-fuzz write-seeds [--corpus DIR]"
    );
    ExitCode::from(2)
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut o = Opts {
        seconds: 4.0,
        seed: None,
        trace: None,
        max_runs: None,
        dirs: Dirs {
            corpus: root.join("corpus"),
            artifacts: root.join("artifacts"),
        },
        args: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--seconds" => {
                o.seconds = value(a)?.parse().map_err(|e| format!("--seconds: {e}"))?;
            }
            "--seed" => {
                let v = value(a)?;
                let v = v.trim_start_matches("0x");
                o.seed = Some(u64::from_str_radix(v, 16).map_err(|e| format!("--seed: {e}"))?);
            }
            "--trace" => o.trace = Some(value(a)?.into()),
            "--max-runs" => {
                o.max_runs = Some(value(a)?.parse().map_err(|e| format!("--max-runs: {e}"))?);
            }
            "--corpus" => o.dirs.corpus = value(a)?.into(),
            "--artifacts" => o.dirs.artifacts = value(a)?.into(),
            s if s.starts_with("--") => return Err(format!("unknown option {s}")),
            _ => o.args.push(a.clone()),
        }
    }
    if !(o.seconds >= 0.0 && o.seconds.is_finite()) {
        return Err("--seconds must be a number of seconds".into());
    }
    Ok(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, rest) = match args.first().map(String::as_str) {
        Some(c @ ("run" | "child" | "replay" | "list" | "write-seeds")) => (c, &args[1..]),
        Some("-h" | "--help") => return usage(),
        _ => ("run", &args[..]),
    };
    let opts = match parse(rest) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("uverbs-fuzz: {e}");
            return usage();
        }
    };
    match cmd {
        "list" => {
            for t in TARGETS {
                println!("{:<18} {}", t.name, t.checks);
            }
            ExitCode::SUCCESS
        }
        "write-seeds" => write_seeds(&opts),
        "replay" => replay(&opts),
        "child" => child(&opts),
        _ => supervise(&opts),
    }
}

/// Writes every target's seeds to `corpus/<target>/<name>`.
fn write_seeds(o: &Opts) -> ExitCode {
    for t in TARGETS {
        let dir = o.dirs.corpus.join(t.name);
        if let Err(e) = fs::create_dir_all(&dir) {
            eprintln!("{}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
        for (name, bytes) in (t.seeds)() {
            let path = dir.join(name);
            if let Err(e) = fs::write(&path, bytes) {
                eprintln!("{}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Runs files once on a target (`replay TARGET PATH...`; a folder means
/// every file in it).
fn replay(o: &Opts) -> ExitCode {
    let Some((name, paths)) = o.args.split_first() else {
        return usage();
    };
    let Some(target) = by_name(name) else {
        eprintln!("uverbs-fuzz: no target {name:?} (see `uverbs-fuzz list`)");
        return ExitCode::from(2);
    };
    engine::install_panic_hook();
    let mut files = Vec::new();
    for p in paths {
        let p = Path::new(p);
        if p.is_dir() {
            files.extend(engine::read_corpus(p));
        } else {
            match fs::read(p) {
                Ok(b) => files.push((p.to_path_buf(), b)),
                Err(e) => {
                    eprintln!("{}: {e}", p.display());
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    let mut failed = 0;
    for (path, bytes) in &files {
        match engine::run_one(target, bytes) {
            None => println!("{}: ok", path.display()),
            Some(p) => {
                failed += 1;
                println!(
                    "{}: panicked at {}:\n{}\n{}",
                    path.display(),
                    p.location,
                    p.message,
                    p.backtrace
                );
            }
        }
    }
    println!("{} inputs, {failed} panicked", files.len());
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The child: fuzzes one target; exit code 0 passed, 1 panicked (reported).
/// Prints `progress RUNS` now and then and `stats RUNS CORPUS` at the end.
fn child(o: &Opts) -> ExitCode {
    let [name] = o.args.as_slice() else {
        return usage();
    };
    let Some(target) = by_name(name) else {
        eprintln!("uverbs-fuzz: no target {name:?}");
        return ExitCode::from(2);
    };
    engine::install_panic_hook();
    let seed = o.seed.unwrap_or(0);
    let budget = Duration::from_secs_f64(o.seconds);
    let outcome = engine::fuzz(
        target,
        &o.dirs,
        budget,
        seed,
        o.trace.as_deref(),
        o.max_runs,
        &mut |runs| println!("progress {runs}"),
    );
    let (stats, code) = match outcome {
        Outcome::Passed(s) => (s, 0),
        Outcome::Crashed(s) => (s, 1),
    };
    println!("stats {} {}", stats.runs, stats.corpus);
    // Exit now: the targets' fixtures (contexts on fake kernels, kept in
    // thread-locals) are not torn down, which after a crash could block
    // on state the crash left behind.
    std::process::exit(code)
}

/// How a child ended.
enum Ended {
    /// Exit code 0, with runs and corpus size.
    Passed(u64, usize),
    /// It reported a panic itself.
    Panicked,
    /// It died or hung (the description), after this many runs.
    Died(String, u64),
}

/// Runs one child and waits at most `limit` for it.
fn run_child(
    exe: &Path,
    o: &Opts,
    t: &Target,
    seed: u64,
    extra: &[String],
    limit: Duration,
) -> Ended {
    let mut cmd = Command::new(exe);
    cmd.arg("child")
        .arg(t.name)
        .arg("--seconds")
        .arg(o.seconds.to_string())
        .arg("--seed")
        .arg(format!("{seed:x}"))
        .arg("--corpus")
        .arg(&o.dirs.corpus)
        .arg("--artifacts")
        .arg(&o.dirs.artifacts)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Ended::Died(format!("could not start: {e}"), 0),
    };
    let progress = Arc::new(AtomicU64::new(0));
    let stats = Arc::new(std::sync::Mutex::new(None::<(u64, usize)>));
    let reader = child.stdout.take().map(|out| {
        let (progress, stats) = (progress.clone(), stats.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let mut w = line.split_whitespace();
                match (w.next(), w.next(), w.next()) {
                    (Some("progress"), Some(n), _) => {
                        progress.store(n.parse().unwrap_or(0), Ordering::Relaxed);
                    }
                    (Some("stats"), Some(n), Some(c)) => {
                        let v = (n.parse().unwrap_or(0), c.parse().unwrap_or(0));
                        *stats.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
                    }
                    _ => println!("{line}"),
                }
            }
        })
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!(
                    "hung: still running after {:.0} s",
                    limit.as_secs_f64()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break Err(format!("wait failed: {e}")),
        }
    };
    if let Some(r) = reader {
        let _ = r.join();
    }
    let runs = progress.load(Ordering::Relaxed);
    match status {
        Ok(s) if s.success() => {
            let (runs, corpus) = stats
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or((runs, 0));
            Ended::Passed(runs, corpus)
        }
        Ok(s) if s.code() == Some(1) => Ended::Panicked,
        Ok(s) => Ended::Died(format!("died ({s})"), runs),
        Err(why) => Ended::Died(why, runs),
    }
}

/// A seed from the clock, printed so that a run can be repeated.
fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x5eed)
}

fn supervise(o: &Opts) -> ExitCode {
    let selected: Vec<&Target> = if o.args.is_empty() {
        TARGETS.iter().collect()
    } else {
        let mut v = Vec::new();
        for name in &o.args {
            match by_name(name) {
                Some(t) => v.push(t),
                None => {
                    eprintln!("uverbs-fuzz: no target {name:?} (see `uverbs-fuzz list`)");
                    return ExitCode::from(2);
                }
            }
        }
        v
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("uverbs-fuzz: where am I? {e}");
            return ExitCode::FAILURE;
        }
    };
    let seed = o.seed.unwrap_or_else(clock_seed);
    let start = Instant::now();
    println!(
        "\nrunning {} fuzz targets, {} s each (seed {seed:x}; repeat with --seed {seed:x})",
        selected.len(),
        o.seconds
    );
    // Corpus replay, the seeds and minimizing a crash come on top of the
    // budget; a child past this is hung.
    let limit = Duration::from_secs_f64(o.seconds + 60.0);
    let (mut passed, mut failed) = (0usize, Vec::new());
    for t in &selected {
        let t0 = Instant::now();
        match run_child(&exe, o, t, seed, &[], limit) {
            Ended::Passed(runs, corpus) => {
                passed += 1;
                println!(
                    "test {} ... ok ({runs} runs, {corpus} corpus files, {:.1} s)",
                    t.name,
                    t0.elapsed().as_secs_f64()
                );
            }
            Ended::Panicked => {
                println!(
                    "test {} ... FAILED (panicked; input saved, see above)",
                    t.name
                );
                failed.push(t.name);
            }
            Ended::Died(why, runs) => {
                println!("test {} ... FAILED ({why} after {runs} runs)", t.name);
                find_killer(&exe, o, t, seed, runs);
                failed.push(t.name);
            }
        }
    }
    let filtered = TARGETS.len() - selected.len();
    if !failed.is_empty() {
        println!("\nfailures:");
        for f in &failed {
            println!("    {f}");
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; 0 ignored; 0 measured; {filtered} filtered out; finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len(),
        start.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Repeats a run that died with every input traced to a file, to report
/// the input that killed it.
fn find_killer(exe: &Path, o: &Opts, t: &Target, seed: u64, runs: u64) {
    let dir = o.dirs.artifacts.join(t.name);
    let _ = fs::create_dir_all(&dir);
    let trace = dir.join("trace-current-input");
    let _ = fs::remove_file(&trace);
    let extra = [
        "--trace".to_string(),
        trace.display().to_string(),
        "--max-runs".to_string(),
        (runs + 100_000).to_string(),
    ];
    eprintln!(
        "repeating the run of {} with every input traced, to find the one that kills it",
        t.name
    );
    let traced = Opts {
        seconds: 600.0,
        seed: o.seed,
        trace: None,
        max_runs: None,
        dirs: o.dirs.clone(),
        args: Vec::new(),
    };
    let limit = Duration::from_secs_f64(o.seconds * 4.0 + 120.0);
    match run_child(exe, &traced, t, seed, &extra, limit) {
        Ended::Died(why, _) => match fs::read(&trace) {
            Ok(input) => {
                let path = dir.join(format!("crash-{}", engine::digest(&input)));
                let _ = fs::rename(&trace, &path);
                eprintln!(
                    "\n==== fuzz target `{}` {why} on an input of {} bytes:\n{}\nsaved to {}\n\
                     replay with: scripts/fuzz.sh --replay {} {}",
                    t.name,
                    input.len(),
                    engine::hex(&input),
                    path.display(),
                    t.name,
                    path.display()
                );
            }
            Err(e) => eprintln!("the traced run died ({why}) but left no input: {e}"),
        },
        Ended::Panicked => eprintln!("the traced run panicked instead (reported above)"),
        Ended::Passed(..) => eprintln!(
            "the traced run did not die: the failure depends on more than the input \
             (timing, memory); seed {seed:x}"
        ),
    }
}
