//! A minimal test harness for opt-in stress scenarios (`harness = false`
//! test targets such as `tests/timer_stress.rs`).
//!
//! It speaks the part of libtest's command line that nextest and `cargo
//! test` use:
//! - `--list --format terse` prints `name: test` for every scenario, but only
//!   when [`ENABLE_VAR`] is set; otherwise it lists nothing, so nothing runs
//!   and nothing is counted as passed. `--list --ignored` lists nothing (no
//!   scenario is ignored).
//! - `<name> --exact` runs that scenario; `<filter>` runs those whose name
//!   contains it; no filter runs every scenario, one after another. Nothing
//!   runs unless [`ENABLE_VAR`] is set.
//! - A failing scenario makes the process exit non-zero; other flags
//!   (`--nocapture`, `--test-threads`, ...) are accepted and ignored.
//!
//! Scenarios run one at a time (a lane), so they do not measure each other.
//! Each runs on its own thread under a deadline: a hang is a failure (the
//! process exits), never a stuck run. [`Ctx::n`] scales load counts by
//! [`SCALE_VAR`], and deadlines scale with it.
#![allow(dead_code)]

use std::fmt::Display;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Set (to anything non-empty) to list and run the scenarios.
pub const ENABLE_VAR: &str = "WINDOWS_THREADPOOL_STRESS";
/// A positive integer multiplying every load count (default 1).
pub const SCALE_VAR: &str = "WINDOWS_THREADPOOL_STRESS_SCALE";

/// One scenario: `run` panics (an assertion) to fail.
pub struct Scenario {
    pub name: &'static str,
    /// Deadline at scale 1; multiplied by the scale.
    pub deadline: Duration,
    pub run: fn(&Ctx),
}

/// What a scenario gets: its load scale and a way to report measurements.
pub struct Ctx {
    name: &'static str,
    scale: usize,
    started: Instant,
}

impl Ctx {
    pub fn scale(&self) -> usize {
        self.scale
    }

    /// `base` load units at the current scale.
    pub fn n(&self, base: usize) -> usize {
        base * self.scale
    }

    /// Prints one `[scenario] key: value` line (reports, not assertions).
    pub fn report(&self, key: &str, value: impl Display) {
        println!("[{}] {key}: {value}", self.name);
    }

    /// Time since the scenario started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

fn enabled() -> bool {
    std::env::var_os(ENABLE_VAR).is_some_and(|v| !v.is_empty())
}

fn scale() -> Result<usize, String> {
    match std::env::var(SCALE_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(1),
        Ok(s) => match s.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{SCALE_VAR}={s:?} is not a positive integer")),
        },
        Err(e) => Err(format!("{SCALE_VAR}: {e}")),
    }
}

/// Flags that take a value as the next argument when not written `--flag=value`.
const VALUE_FLAGS: &[&str] = &["--format", "--logfile", "--color", "--test-threads", "--skip", "-Z", "--report-time"];

struct Args {
    list: bool,
    ignored: bool,
    exact: bool,
    filter: Option<String>,
}

fn parse(args: impl Iterator<Item = String>) -> Args {
    let mut a = Args { list: false, ignored: false, exact: false, filter: None };
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--list" => a.list = true,
            "--ignored" => a.ignored = true,
            "--exact" => a.exact = true,
            f if VALUE_FLAGS.contains(&f) => {
                args.next();
            }
            f if f.starts_with('-') => {}
            _ => {
                if a.filter.is_none() {
                    a.filter = Some(arg);
                }
            }
        }
    }
    a
}

/// Runs the harness over `scenarios`; use as the test target's `main`.
pub fn main(scenarios: &[Scenario]) -> ExitCode {
    let args = parse(std::env::args().skip(1));
    let on = enabled();
    if args.list {
        if on && !args.ignored {
            for s in scenarios {
                println!("{}: test", s.name);
            }
        }
        return ExitCode::SUCCESS;
    }
    let scale = match scale() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("stress: {e}");
            return ExitCode::FAILURE;
        }
    };
    let selected: Vec<&Scenario> = scenarios
        .iter()
        .filter(|_| on && !args.ignored)
        .filter(|s| match &args.filter {
            None => true,
            Some(f) if args.exact => s.name == f,
            Some(f) => s.name.contains(f.as_str()),
        })
        .collect();
    if !on {
        println!("stress scenarios are opt-in: set {ENABLE_VAR}=1 to list and run them");
    }
    println!("\nrunning {} tests (scale {scale})", selected.len());
    let t0 = Instant::now();
    let mut failed = Vec::new();
    for s in &selected {
        if run_one(s, scale) {
            println!("test {} ... ok", s.name);
        } else {
            println!("test {} ... FAILED", s.name);
            failed.push(s.name);
        }
    }
    let verdict = if failed.is_empty() { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {verdict}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out; finished in {:.2}s\n",
        selected.len() - failed.len(),
        failed.len(),
        scenarios.len() - selected.len(),
        t0.elapsed().as_secs_f64()
    );
    if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(101) }
}

/// Runs one scenario on its own thread; false if it panicked. Exits the
/// process if it overruns its deadline (the thread cannot be stopped).
fn run_one(s: &Scenario, scale: usize) -> bool {
    let deadline = s.deadline * u32::try_from(scale).unwrap_or(u32::MAX);
    let (tx, rx) = mpsc::channel();
    let (name, run) = (s.name, s.run);
    let worker = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let ctx = Ctx { name, scale, started: Instant::now() };
            run(&ctx);
            ctx.report("elapsed", format_args!("{:.3}s", ctx.elapsed().as_secs_f64()));
        })
        .expect("spawn scenario thread");
    let waiter = std::thread::spawn(move || {
        let ok = worker.join().is_ok();
        let _ = tx.send(ok);
    });
    match rx.recv_timeout(deadline) {
        Ok(ok) => {
            let _ = waiter.join();
            ok
        }
        Err(_) => {
            println!("test {name} ... FAILED: exceeded its deadline of {deadline:?} (scale {scale})");
            eprintln!("stress: scenario {name} exceeded its deadline of {deadline:?}; exiting");
            std::process::exit(101);
        }
    }
}

/// The `p`-th percentile (0..=100) of `v`, which it sorts.
pub fn percentile(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    let i = ((v.len() - 1) as f64 * p / 100.0).round() as usize;
    v[i]
}

/// `min / p50 / p99 / max` of `v` in microseconds, for reports.
pub fn summary(v: &mut [Duration]) -> String {
    if v.is_empty() {
        return "no samples".into();
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (min, p50, p99) = (percentile(v, 0.0), percentile(v, 50.0), percentile(v, 99.0));
    let max = v[v.len() - 1];
    format!("n={} min {:.0}us p50 {:.0}us p99 {:.0}us max {:.0}us", v.len(), us(min), us(p50), us(p99), us(max))
}

pub use crate::rng::Rng;

impl Rng {
    /// Seeded from `WINDOWS_THREADPOOL_STRESS_SEED`, or the time; the seed
    /// is reported so a run can be repeated.
    pub fn from_time(ctx: &Ctx) -> Self {
        let seed =
            std::env::var("WINDOWS_THREADPOOL_STRESS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
            });
        ctx.report("seed", seed);
        Self::new(seed)
    }
}
