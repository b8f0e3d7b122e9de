//! The stable fuzzing engine: runs a target body (`fn(&[u8])`, where a panic
//! is a failure) on the target's corpus, then on mutated and generated
//! inputs until a time budget is spent.
//!
//! There is no coverage feedback (stable Rust has no sanitizer coverage);
//! depth comes from structure instead: every target brings well-formed
//! seeds (its corpus files, written from the formats) and a dictionary of
//! the tokens its format is made of, and mutations stack on seeds, on
//! recent mutants and on splices of both. The input sequence depends only
//! on the seed of the random generator, so a run can be repeated exactly
//! (`--seed`), which is how a crash that kills the process (a signal, an
//! abort, a hang) still yields its input: the supervisor repeats the run
//! with every input written to a file first (see `main.rs`).
//!
//! A panic is caught, reported with the input in hex, its message and a
//! backtrace, minimized (bytes removed while the same panic persists) and
//! saved under `artifacts/<target>/`.

use std::{
    backtrace::Backtrace,
    fs,
    io::Write,
    panic::{self, AssertUnwindSafe},
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Mutex,
    },
    time::{Duration, Instant},
};

/// One fuzz target.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Its name: the corpus and artifact folder, and the `cargo fuzz` binary.
    pub name: &'static str,
    /// The decoders it reaches and what it asserts, in one line.
    pub checks: &'static str,
    /// The body: runs the decoders on one input; panics on a violated invariant.
    pub run: fn(&[u8]),
    /// Well-formed inputs written from the format: the committed corpus
    /// (`write-seeds` regenerates it) and the engine's first pool.
    pub seeds: fn() -> Vec<(&'static str, Vec<u8>)>,
    /// Tokens of the format that mutations insert and overwrite with.
    pub dict: &'static [&'static [u8]],
    /// Longest input worth generating.
    pub max_len: usize,
}

/// A small, fast, seedable generator (xorshift64*; quality is ample here).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (any value; 0 is remapped).
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True with probability 1/`n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// Integers at the edges of every width, in both byte orders, for the
/// "interesting value" mutation.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    15,
    16,
    31,
    32,
    63,
    64,
    127,
    128,
    255,
    256,
    384,
    1024,
    4096,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0xff_ffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffe,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
];

/// Applies one random mutation to `data`; `pool` supplies splice partners.
pub fn mutate(rng: &mut Rng, data: &mut Vec<u8>, pool: &[Vec<u8>], dict: &[&[u8]], max: usize) {
    let len = data.len();
    match rng.below(14) {
        // Flip a bit.
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        // A random byte.
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = rng.next_u64() as u8;
        }
        // Add or subtract a little from a byte.
        2 if len > 0 => {
            let i = rng.below(len);
            let d = rng.below(35) as u8;
            data[i] = if rng.one_in(2) {
                data[i].wrapping_add(d)
            } else {
                data[i].wrapping_sub(d)
            };
        }
        // An interesting integer of 1, 2, 4 or 8 bytes, either byte order.
        3 if len > 0 => {
            let width = 1usize << rng.below(4);
            let mut v = INTERESTING[rng.below(INTERESTING.len())];
            if rng.one_in(4) {
                v = v.wrapping_neg();
            }
            let bytes = if rng.one_in(2) {
                v.to_le_bytes()
            } else {
                (v << (64 - 8 * width as u32).min(63)).to_be_bytes()
            };
            let at = rng.below(len);
            let n = width.min(len - at);
            data[at..at + n].copy_from_slice(&bytes[..n]);
        }
        // The input's own length (or a neighbour) as a 16- or 32-bit field:
        // length fields are what decoders trust.
        4 if len > 0 => {
            let v = (len as u64)
                .wrapping_add(rng.below(9) as u64)
                .wrapping_sub(4);
            let width = if rng.one_in(2) { 2 } else { 4 };
            let at = rng.below(len);
            let n = width.min(len - at);
            data[at..at + n].copy_from_slice(&v.to_ne_bytes()[..n]);
        }
        // Insert random bytes.
        5 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(8);
            let bytes = rng.bytes(n);
            data.splice(at..at, bytes);
        }
        // Delete a range.
        6 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(32));
            data.drain(at..at + n);
        }
        // Duplicate a range somewhere else.
        7 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(64));
            let chunk = data[at..at + n].to_vec();
            let to = rng.below(len + 1);
            data.splice(to..to, chunk);
        }
        // Truncate.
        8 if len > 0 => {
            data.truncate(rng.below(len));
        }
        // Splice: a prefix of this input, a suffix of another.
        9 if !pool.is_empty() => {
            let other = &pool[rng.below(pool.len())];
            let cut = rng.below(len + 1);
            let from = rng.below(other.len() + 1);
            data.truncate(cut);
            data.extend_from_slice(&other[from..]);
        }
        // Crossover: another input's bytes over this one at the same place.
        10 if !pool.is_empty() && len > 0 => {
            let other = &pool[rng.below(pool.len())];
            let at = rng.below(len);
            let n = rng.below(len - at + 1).min(other.len().saturating_sub(at));
            if n > 0 {
                data[at..at + n].copy_from_slice(&other[at..at + n]);
            }
        }
        // Insert a token of the format.
        11 if !dict.is_empty() => {
            let token = dict[rng.below(dict.len())];
            let at = rng.below(len + 1);
            data.splice(at..at, token.iter().copied());
        }
        // Overwrite with a token of the format.
        12 if !dict.is_empty() && len > 0 => {
            let token = dict[rng.below(dict.len())];
            let at = rng.below(len);
            let n = token.len().min(len - at);
            data[at..at + n].copy_from_slice(&token[..n]);
        }
        // Fill a range with one byte.
        _ if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(16));
            let b = [0u8, 0xff, 0x41, rng.next_u64() as u8][rng.below(4)];
            data[at..at + n].fill(b);
        }
        _ => data.push(rng.next_u64() as u8),
    }
    data.truncate(max);
}

/// The message, place and backtrace of the last panic (any thread).
static LAST_PANIC: Mutex<Option<Panic>> = Mutex::new(None);

/// Whether panics capture a backtrace (not while minimizing: the place is
/// enough there, and capturing is slow).
static BACKTRACES: AtomicBool = AtomicBool::new(true);

/// A caught panic.
#[derive(Debug, Clone)]
pub struct Panic {
    /// `file:line:column` of the panic.
    pub location: String,
    /// Its message.
    pub message: String,
    /// Where it happened.
    pub backtrace: String,
}

/// Replaces the default panic output with a record of the panic: the
/// engine reports it itself, with the input.
pub fn install_panic_hook() {
    let default = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if RUNNING.load(Ordering::Relaxed) == 0 {
            // Not a target's panic: the harness's own, reported as usual.
            return default(info);
        }
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_else(|| "unknown place".into());
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(a non-string panic payload)".into());
        let panic = Panic {
            location,
            message,
            backtrace: if BACKTRACES.load(Ordering::Relaxed) {
                Backtrace::force_capture().to_string()
            } else {
                String::new()
            },
        };
        *LAST_PANIC.lock().unwrap_or_else(|p| p.into_inner()) = Some(panic);
    }));
}

/// How many target bodies are running (panics outside them are the
/// harness's own).
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Runs `target` on `input`; the panic, if it panicked.
pub fn run_one(target: &Target, input: &[u8]) -> Option<Panic> {
    RUNNING.fetch_add(1, Ordering::Relaxed);
    let result = panic::catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    RUNNING.fetch_sub(1, Ordering::Relaxed);
    match result {
        Ok(()) => None,
        Err(_) => Some(
            LAST_PANIC
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .unwrap_or_else(|| Panic {
                    location: "unknown place".into(),
                    message: "a panic whose hook did not run".into(),
                    backtrace: String::new(),
                }),
        ),
    }
}

/// Lowercase hex of `bytes`, 32 bytes a line.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2 + bytes.len() / 32);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 && i % 32 == 0 {
            out.push('\n');
        }
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A stable name for an input (FNV-1a), for artifact and corpus files.
pub fn digest(bytes: &[u8]) -> String {
    let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{h:016x}")
}

/// The files of `dir`, sorted by name (none if it does not exist).
pub fn read_corpus(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.is_file());
    files.sort();
    files
        .into_iter()
        .filter_map(|p| fs::read(&p).ok().map(|b| (p, b)))
        .collect()
}

/// Shrinks a crashing input: removes chunks (halving their size) while the
/// target still panics at the same place, for at most `budget`.
pub fn minimize(target: &Target, input: &[u8], location: &str, budget: Duration) -> Vec<u8> {
    let start = Instant::now();
    let mut best = input.to_vec();
    let mut chunk = best.len().div_ceil(2).max(1);
    BACKTRACES.store(false, Ordering::Relaxed);
    let _restore = Restore;
    loop {
        let mut at = 0;
        while at < best.len() && start.elapsed() < budget {
            let mut candidate = best.clone();
            candidate.drain(at..(at + chunk).min(best.len()));
            match run_one(target, &candidate) {
                Some(p) if p.location == location => best = candidate,
                _ => at += chunk,
            }
        }
        if chunk == 1 || start.elapsed() >= budget {
            return best;
        }
        chunk = chunk.div_ceil(2);
    }
}

/// Turns backtraces back on when minimizing ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        BACKTRACES.store(true, Ordering::Relaxed);
    }
}

/// Where a run reads its corpus and writes what it finds.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// `corpus/`: one folder per target.
    pub corpus: PathBuf,
    /// `artifacts/`: one folder per target (crashing inputs).
    pub artifacts: PathBuf,
}

/// What a fuzzing run of one target did.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Corpus files replayed.
    pub corpus: usize,
    /// Inputs run in all (corpus included).
    pub runs: u64,
}

/// Reports a crash of `target` on `input`: the panic, the input in hex, a
/// minimized input, both saved under `artifacts/<target>/`.
pub fn report_crash(target: &Target, dirs: &Dirs, input: &[u8], panic: &Panic) {
    let dir = dirs.artifacts.join(target.name);
    let _ = fs::create_dir_all(&dir);
    let path = dir.join(format!("crash-{}", digest(input)));
    let saved = fs::write(&path, input).is_ok();
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "\n==== fuzz target `{}` panicked on an input of {} bytes:\n{}\n\npanicked at {}:\n{}\n\n{}",
        target.name,
        input.len(),
        hex(input),
        panic.location,
        panic.message,
        panic.backtrace
    );
    if saved {
        let _ = writeln!(err, "saved to {}", path.display());
    }
    drop(err);
    let small = minimize(target, input, &panic.location, Duration::from_secs(5));
    if small.len() < input.len() {
        let path = dir.join(format!("minimized-{}", digest(&small)));
        let saved = fs::write(&path, &small).is_ok();
        eprintln!(
            "minimized to {} bytes (same panic place):\n{}{}",
            small.len(),
            hex(&small),
            if saved {
                format!("\nsaved to {}", path.display())
            } else {
                String::new()
            }
        );
    }
    eprintln!(
        "replay with: scripts/fuzz.sh --replay {} {}",
        target.name,
        dir.display()
    );
}

/// How a fuzzing run of one target ended.
#[derive(Debug)]
pub enum Outcome {
    /// The budget was spent without a failure.
    Passed(Stats),
    /// The target panicked (reported, saved).
    Crashed(Stats),
}

/// Fuzzes `target` for `budget` (and at most `max_runs` inputs): the
/// corpus and the seeds first, then mutants, with the generator seeded by
/// `seed`. With `trace`, every input is written to that file before it
/// runs (slow; used to recover the input of a crash that kills the
/// process). `progress` hears the number of runs now and then.
pub fn fuzz(
    target: &Target,
    dirs: &Dirs,
    budget: Duration,
    seed: u64,
    trace: Option<&Path>,
    max_runs: Option<u64>,
    progress: &mut dyn FnMut(u64),
) -> Outcome {
    let start = Instant::now();
    let mut stats = Stats::default();
    let run = |input: &[u8], stats: &mut Stats| -> Option<Panic> {
        if let Some(t) = trace {
            let _ = fs::write(t, input);
        }
        stats.runs += 1;
        run_one(target, input)
    };
    let mut pool: Vec<Vec<u8>> = Vec::new();
    for (_, bytes) in read_corpus(&dirs.corpus.join(target.name)) {
        stats.corpus += 1;
        if let Some(p) = run(&bytes, &mut stats) {
            report_crash(target, dirs, &bytes, &p);
            return Outcome::Crashed(stats);
        }
        pool.push(bytes);
    }
    for (_, bytes) in (target.seeds)() {
        if let Some(p) = run(&bytes, &mut stats) {
            report_crash(target, dirs, &bytes, &p);
            return Outcome::Crashed(stats);
        }
        pool.push(bytes);
    }
    let mut rng = Rng::new(seed);
    // Recent mutants: mutations also build on them, so inputs drift further
    // from the seeds than a few stacked mutations take them.
    let mut recent: Vec<Vec<u8>> = Vec::with_capacity(64);
    let mut input = Vec::with_capacity(target.max_len);
    let max_runs = max_runs.unwrap_or(u64::MAX);
    let mut report_at = 0;
    while start.elapsed() < budget && stats.runs < max_runs {
        if stats.runs >= report_at {
            progress(stats.runs);
            report_at = stats.runs + 4096;
        }
        input.clear();
        match rng.below(10) {
            0 => {
                let n = rng.below(target.max_len + 1);
                input.extend(rng.bytes(n));
            }
            1..=3 if !recent.is_empty() => {
                input.extend_from_slice(&recent[rng.below(recent.len())])
            }
            _ if !pool.is_empty() => input.extend_from_slice(&pool[rng.below(pool.len())]),
            _ => {
                let n = rng.below(64);
                input.extend(rng.bytes(n));
            }
        }
        let most = if rng.one_in(4) { 16 } else { 4 };
        let n = 1 + rng.below(most);
        for _ in 0..n {
            mutate(&mut rng, &mut input, &pool, target.dict, target.max_len);
        }
        if let Some(p) = run(&input, &mut stats) {
            report_crash(target, dirs, &input, &p);
            return Outcome::Crashed(stats);
        }
        if recent.len() < 64 {
            recent.push(input.clone());
        } else {
            let i = rng.below(64);
            recent[i].clone_from(&input);
        }
    }
    Outcome::Passed(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_respect_the_length_limit_and_the_seed_decides_them() {
        let pool = vec![vec![1u8; 40], vec![2u8; 3], Vec::new()];
        let run = |seed| {
            let mut rng = Rng::new(seed);
            let mut data = vec![0u8; 20];
            let mut seen = Vec::new();
            for _ in 0..5000 {
                mutate(&mut rng, &mut data, &pool, &[b"tok"], 64);
                assert!(data.len() <= 64);
                seen.push(data.clone());
            }
            seen
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn a_panic_is_caught_located_and_minimized() {
        install_panic_hook();
        let target = Target {
            name: "selftest",
            checks: "",
            run: |d| assert!(!d.windows(2).any(|w| w == b"XY"), "found XY"),
            seeds: Vec::new,
            dict: &[],
            max_len: 64,
        };
        assert!(run_one(&target, b"abcXdY").is_none());
        let p = run_one(&target, b"abcXYd").expect("it panics");
        assert!(p.message.contains("found XY"), "{p:?}");
        let small = minimize(&target, b"abcXYdefgh", &p.location, Duration::from_secs(5));
        assert_eq!(small, b"XY");
    }
}
