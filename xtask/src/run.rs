//! `cargo xtask test`, `demo`, `stress` and `trace-doc`.
//!
//! A green `cargo xtask test` means every check ran and passed: a
//! configuration that ran no test or no doctest fails, a test that passed
//! only on a retry (FLAKY, if a nextest configuration ever retries) fails,
//! and each configuration's count is printed so a shrinking suite shows.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::env::{self, Platform, Result};
use crate::setup;
use crate::{LIB, MSVC_TARGET};

/// The feature configurations every check runs in.
const CONFIGS: [(&str, &[&str]); 3] =
    [("default", &[]), ("no-default-features", &["--no-default-features"]), ("all-features", &["--all-features"])];

/// Enables the stress scenarios in the test binaries that carry them.
const STRESS_VAR: &str = "WINDOWS_THREADPOOL_STRESS";
const STRESS_SCALE_VAR: &str = "WINDOWS_THREADPOOL_STRESS_SCALE";

#[derive(Debug, Default)]
struct Tally {
    passed: u64,
    failed: u64,
    failures: Vec<String>,
}

impl Tally {
    fn check(&mut self, what: String, ok: bool) {
        if ok {
            self.passed += 1;
        } else {
            self.fail(what);
        }
    }

    fn fail(&mut self, what: String) {
        self.failed += 1;
        self.failures.push(what);
    }

    /// Adds one test run's results. A run without counts (a build failure),
    /// a run of no test, a FLAKY pass and a failing runner are failures.
    fn account(&mut self, what: &str, ok: bool, counts: Option<Counts>) {
        let Some(c) = counts else {
            return self.fail(format!("{what}: did not run (build failure?)"));
        };
        self.passed += c.passed.saturating_sub(c.flaky.len() as u64);
        self.failed += c.failed;
        if c.failed > 0 {
            self.failures.push(format!("{what}: {} failed", c.failed));
        }
        for name in &c.flaky {
            self.fail(format!("{what}: FLAKY (passed only on a retry): {name}"));
        }
        if c.run == 0 {
            self.fail(format!("{what}: no test ran"));
        } else if !ok && c.failed == 0 && c.flaky.is_empty() {
            self.fail(format!("{what}: the runner failed"));
        }
    }

    fn finish(&self, cmd: &str) -> Result<()> {
        for f in &self.failures {
            println!("xtask {cmd}: FAILED {f}");
        }
        println!("{} passed, {} failed", self.passed, self.failed);
        if self.failed == 0 && self.failures.is_empty() { Ok(()) } else { Err("failures above".into()) }
    }
}

/// What one test run reported.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    /// Tests that ran (passed, failed or flaky).
    run: u64,
    /// Passed, including those that passed only on a retry.
    passed: u64,
    failed: u64,
    /// Tests that passed only on a retry.
    flaky: Vec<String>,
}

/// `text` without ANSI escape sequences (CSI `ESC [ ... final`, and any other
/// `ESC x` pair): a `CARGO_TERM_COLOR=always` (as CI sets it) colours
/// the lines the parsers read even when `--color never` was asked for.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
        } else if chars.next() == Some('[') {
            // Parameter and intermediate bytes, up to the final byte (@ to ~).
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}

/// Runs `cmd`, echoing its output as it arrives, and returns (success, all
/// output with ANSI escapes stripped).
fn run_tee(cmd: &mut Command) -> (bool, String) {
    eprintln!("xtask: running {cmd:?}");
    let mut child = match cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn() {
        Ok(c) => c,
        Err(e) => return (false, format!("cannot start: {e}")),
    };
    fn pump(r: impl Read + Send + 'static, to_err: bool) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(r).lines().map_while(|l| l.ok()) {
                if to_err {
                    eprintln!("{line}");
                } else {
                    println!("{line}");
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        })
    }
    let out = pump(child.stdout.take().expect("piped"), false);
    let err = pump(child.stderr.take().expect("piped"), true);
    let status = child.wait();
    let text = out.join().unwrap_or_default() + &err.join().unwrap_or_default();
    let _ = std::io::stdout().flush();
    (status.is_ok_and(|s| s.success()), strip_ansi(&text))
}

/// Counts from nextest's closing `N tests run: N passed (N flaky), N failed, ...`
/// line, and the names on its `FLAKY` lines.
fn parse_nextest(text: &str) -> Option<Counts> {
    let line = text.lines().rev().find(|l| l.contains(" run: ") && l.contains("passed"))?;
    let (head, tail) = line.split_once(" run: ")?;
    // "... 7 tests" or, for a cancelled run, "... 3/7 tests": the number that ran.
    let run_word = head.split_whitespace().rev().nth(1)?;
    let mut c = Counts { run: run_word.split('/').next()?.parse().ok()?, ..Counts::default() };
    // Parenthesised notes ("(1 flaky, 1 leaky)") qualify a count; set them apart.
    let (mut counts, mut notes, mut depth) = (String::new(), String::new(), 0u32);
    for ch in tail.chars() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                notes.push(',');
            }
            _ if depth > 0 => notes.push(ch),
            _ => counts.push(ch),
        }
    }
    for part in counts.split(',') {
        let mut words = part.split_whitespace();
        let Some(n) = words.next() else { continue };
        let n: u64 = n.parse().ok()?;
        match words.next()? {
            "passed" => c.passed += n,
            "skipped" => {}
            _ => c.failed += n,
        }
    }
    let flaky: u64 = notes
        .split(',')
        .filter_map(|note| note.trim().strip_suffix(" flaky").and_then(|n| n.trim().parse::<u64>().ok()))
        .sum();
    // "FLAKY 2/2 [   0.012s] (2/2) crate::binary test_name"
    for line in text.lines().filter_map(|l| l.trim_start().strip_prefix("FLAKY ")) {
        let name = line.split_once("] ").map_or(line, |(_, rest)| rest).trim();
        let name = name.strip_prefix('(').and_then(|n| n.split_once(") ")).map_or(name, |(_, rest)| rest);
        if !c.flaky.iter().any(|f| f == name) {
            c.flaky.push(name.to_string());
        }
    }
    // A FLAKY count without its lines still counts, unnamed.
    while (c.flaky.len() as u64) < flaky {
        c.flaky.push("(unnamed)".into());
    }
    Some(c)
}

/// Sums libtest's `test result: ok. N passed; N failed; ...` lines.
fn parse_libtest(text: &str) -> Option<Counts> {
    let mut seen = false;
    let mut c = Counts::default();
    for line in text.lines().filter_map(|l| l.trim().strip_prefix("test result: ")) {
        seen = true;
        for part in line.split(';') {
            let words: Vec<&str> = part.split_whitespace().collect();
            let n = words.iter().position(|w| *w == "passed" || *w == "failed");
            if let Some(i) = n.filter(|&i| i > 0) {
                let v: u64 = words[i - 1].parse().unwrap_or(0);
                if words[i] == "passed" { c.passed += v } else { c.failed += v }
            }
        }
    }
    c.run = c.passed + c.failed;
    seen.then_some(c)
}

/// Runs the tests (under nextest, which setup installs: the suite needs a
/// process per test) and the doctests of one feature configuration;
/// returns its `N tests + N doctests` line.
fn tests(p: &Platform, tally: &mut Tally, config: &str, flags: &[&str]) -> String {
    let lib = ["-p", LIB];
    let slots = test_slots().to_string();
    let mut args = vec!["nextest", "run", "--color", "never", "--no-fail-fast", "--test-threads", &slots];
    args.extend(lib);
    args.extend(flags);
    let (ok, text) = run_tee(&mut p.cargo(&args));
    let counts = parse_nextest(&text);
    let ran = counts.as_ref().map_or(0, |c| c.run);
    tally.account(&format!("tests ({config})"), ok, counts);

    let mut args = vec!["test", "--color", "never", "--doc", "--no-fail-fast"];
    args.extend(lib);
    args.extend(flags);
    let (ok, text) = run_tee(&mut p.cargo(&args));
    let counts = parse_libtest(&text);
    let doc_ran = counts.as_ref().map_or(0, |c| c.run);
    tally.account(&format!("doctests ({config})"), ok, counts);
    format!("{config}: {ran} tests + {doc_ran} doctests")
}

/// Tests run at once: two per core. Most of a test's time under Wine is
/// spent waiting on Wine's server and the pool's threads, not on a core
/// (on 2 cores, alternated: the default configuration's tests in 101 and
/// 115 s four at once, 186 and 199 s two at once); `.config/nextest.toml`
/// counts the heaviest tests twice.
fn test_slots() -> usize {
    2 * std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Every stress binary: `cargo xtask stress` runs them all (the HTTP ones
/// with their features, [`HTTP_STRESS`]).
const ALL_STRESS: &str = "binary(/_stress$/) & !binary(http_stress) & !binary(https_stress)";
/// The hostile clients of `examples/http_server` (`tests/http_stress.rs`)
/// and of `examples/https_server` over TLS (`tests/https_stress.rs`), which
/// need the features [`HTTP_STRESS_FEATURES`].
const HTTP_STRESS: &str = "binary(http_stress) | binary(https_stress)";
const HTTP_STRESS_FEATURES: &str = "hyper,tokio";
/// What `cargo xtask test` runs at scale 1: every stress binary but the long
/// ones, the leak checks (100,000 cycles per type; `tests/objects/leaks.rs` is their
/// short version) and the hostile HTTP and named-pipe clients (minutes;
/// `tests/hyper.rs` and `tests/io/pipe_hostile.rs` have their bounded
/// versions), which the ordinary tests run.
const TEST_STRESS: &str =
    "binary(/_stress$/) & !binary(leak_stress) & !binary(http_stress) & !binary(https_stress) & !binary(pipe_stress)";

/// Cases per lifecycle model (`tests/objects/lifecycle.rs`) that `cargo xtask
/// stress` runs, times the scale; the ordinary tests run a few hundred.
const STRESS_LIFECYCLE_CASES: u64 = 3_000;

/// The lifecycle models: their module of the `objects` test binary.
const LIFECYCLE: &str = "binary(objects) & test(/^lifecycle::/)";

/// Runs the stress binaries `filter` selects, built with `flags`, one
/// scenario at a time, with their reports, at `scale`; returns how many ran.
fn stress_scenarios(p: &Platform, tally: &mut Tally, scale: &str, filter: &str, flags: &[&str]) -> u64 {
    let mut args = vec![
        "nextest",
        "run",
        "--color",
        "never",
        "-p",
        LIB,
        "-E",
        filter,
        "-j",
        "1",
        "--no-fail-fast",
        "--no-capture",
    ];
    args.extend(flags);
    let (ok, text) = run_tee(p.cargo(&args).env(STRESS_VAR, "1").env(STRESS_SCALE_VAR, scale));
    let counts = parse_nextest(&text);
    let ran = counts.as_ref().map_or(0, |c| c.run);
    let what = if flags.is_empty() { String::new() } else { format!(", {}", flags.join(" ")) };
    tally.account(&format!("stress scenarios (scale {scale}{what})"), ok, counts);
    ran
}

/// Runs the lifecycle models (`tests/objects/lifecycle.rs`) with
/// [`STRESS_LIFECYCLE_CASES`] times `scale` cases each; returns the cases.
fn lifecycle_cases(p: &Platform, tally: &mut Tally, scale: &str) -> u64 {
    let cases = STRESS_LIFECYCLE_CASES * scale.trim().parse::<u64>().unwrap_or(1).max(1);
    let args =
        ["nextest", "run", "--color", "never", "-p", LIB, "--test", "objects", "-E", LIFECYCLE, "--no-fail-fast"];
    let (ok, text) = run_tee(p.cargo(&args).env("PROPTEST_CASES", cases.to_string()));
    tally.account(&format!("lifecycle models ({cases} cases each)"), ok, parse_nextest(&text));
    cases
}

/// The Wine runner's retries of its start-up failure signature since
/// `clear_runner_log`: not failures, but never silent.
fn runner_retries() -> Vec<String> {
    env::runner_log()
        .ok()
        .and_then(|log| std::fs::read_to_string(log).ok())
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether an example's output ends as its `main` returning the error
/// Wine's `CreateProcess` gives when the process it starts dies starting
/// (`ERROR_INTERNAL_ERROR`, 1359; `docs/wine.md`, "Harness facts"), the
/// only failure for which `cargo xtask test` runs an example again.
fn ended_by_a_dying_start(output: &str) -> bool {
    let died = format!("Error: Os {{ code: {}, ", crate::start::INTERNAL_ERROR);
    output.lines().last().is_some_and(|l| l.starts_with(&died))
}

/// The last line `examples/trace_timeline.rs` prints, once its dumps are written.
const TIMELINE_DONE: &str = "wrote trace.txt and trace.json";

/// Whether `output` (stdout, then stderr) is a program that printed `done`
/// as its last line and whose Wine process the runner then saw killed by a
/// signal: Wine 8 crashing as a finished process exits (`docs/wine.md`,
/// "Harness facts"), not the program failing.
fn killed_by_wine_after(output: &str, done: &str) -> bool {
    let mut lines = output.lines().filter(|l| !l.trim().is_empty() && !l.starts_with("xtask: "));
    let mut own_last = None;
    let mut killed = false;
    for l in lines.by_ref() {
        if l.starts_with("wine-runner: wine was killed by signal ") {
            killed = true;
        } else if !killed {
            own_last = Some(l);
        } else {
            return false;
        }
    }
    killed && own_last == Some(done)
}

/// Says that something was run again, and lists it with the runner's
/// retries.
fn note_retry(msg: &str) {
    println!("xtask: {msg}");
    if let Ok(log) = env::runner_log() {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(log);
        let _ = file.and_then(|mut f| writeln!(f, "{msg}"));
    }
}

fn clear_runner_log() {
    if let Ok(log) = env::runner_log() {
        let _ = std::fs::remove_file(log);
    }
}

fn report_runner_retries(cmd: &str) {
    for r in runner_retries() {
        println!("xtask {cmd}: wine-runner retried (not a failure): {r}");
    }
}

/// `cargo xtask wine10 [--setup] [-j N] [-- NEXTEST ARGS]`: prepares the
/// Wine 10 root (`crate::wine10`), then runs the nextest suite and the
/// doctests in the default and all-features configurations under Wine 10
/// (after `--`: one nextest run with those arguments, default features).
/// `-j N`: N tests at a time (nextest's and the doctests' threads).
pub fn wine10(rest: &[String]) -> Result<()> {
    let Wine10Args { setup_only, threads, nextest_args } = wine10_args(rest)?;
    let mut p = crate::wine10::prepare()?;
    if setup_only {
        return Ok(());
    }
    if let Some(n) = threads {
        p.env.extend([("NEXTEST_TEST_THREADS".into(), n.clone().into()), ("RUST_TEST_THREADS".into(), n.into())]);
    }
    let t0 = Instant::now();
    clear_runner_log();
    let mut tally = Tally::default();
    let mut lines = Vec::new();
    if let Some(extra) = nextest_args {
        let mut args = vec!["nextest", "run", "--color", "never", "--no-fail-fast", "-p", LIB];
        args.extend(extra.iter().map(String::as_str));
        let (ok, text) = run_tee(&mut p.cargo(&args));
        tally.account("tests (Wine 10, as asked)", ok, parse_nextest(&text));
    } else {
        for (config, flags) in [CONFIGS[0], CONFIGS[2]] {
            let t = Instant::now();
            let line = tests(&p, &mut tally, &format!("{config}, Wine 10"), flags);
            lines.push(format!("{line} in {:.0}s", t.elapsed().as_secs_f64()));
        }
    }
    println!("xtask wine10: finished in {:.0}s", t0.elapsed().as_secs_f64());
    for line in &lines {
        println!("xtask wine10: {line}");
    }
    report_runner_retries("wine10");
    tally.finish("wine10")
}

/// What `cargo xtask wine10` was asked.
#[derive(Debug, Default, PartialEq)]
struct Wine10Args {
    setup_only: bool,
    threads: Option<String>,
    /// After `--`: one nextest run with these.
    nextest_args: Option<Vec<String>>,
}

fn wine10_args(rest: &[String]) -> Result<Wine10Args> {
    let mut w = Wine10Args::default();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--setup" => w.setup_only = true,
            "-j" => {
                let n = it.next().filter(|n| n.parse::<u32>().is_ok_and(|n| n > 0)).ok_or("-j needs a number")?;
                w.threads = Some(n.clone());
            }
            "--" => w.nextest_args = Some(it.by_ref().cloned().collect()),
            _ => return Err(format!("unexpected argument {a:?}")),
        }
    }
    Ok(w)
}

/// `cargo xtask test [--target T]`.
pub fn test(target: Option<&str>, rest: &[String]) -> Result<()> {
    if !rest.is_empty() {
        return Err(format!("unexpected arguments {rest:?}"));
    }
    let p = setup::setup(target)?;
    let host = Platform::host();
    let t0 = Instant::now();
    clear_runner_log();
    let mut tally = Tally::default();

    let (ok, _) = run_tee(&mut host.cargo(&["fmt", "--all", "--check"]));
    tally.check("rustfmt (cargo fmt --all --check)".into(), ok);
    tally.check("layers: the import graph of src/ (cargo xtask layers)".into(), crate::layers::check().is_ok());

    let mut per_config = Vec::new();
    for (config, flags) in CONFIGS {
        per_config.push(tests(&p, &mut tally, config, flags));
        let mut args = vec!["clippy", "--quiet", "-p", LIB, "--all-targets"];
        args.extend(flags);
        args.extend(["--", "-D", "warnings"]);
        let (ok, _) = run_tee(&mut p.cargo(&args));
        tally.check(format!("clippy ({config})"), ok);
    }

    let t_stress = Instant::now();
    let scenarios = stress_scenarios(&p, &mut tally, "1", TEST_STRESS, &[]);
    let stress_line = format!("stress: {scenarios} scenarios at scale 1 in {:.1}s", t_stress.elapsed().as_secs_f64());

    // The examples assert what they show; running them keeps them true.
    for (example, args) in EXAMPLES {
        let (mut ok, text) = run_tee(p.cargo(&example_args(example, args)).stdin(Stdio::null()));
        if !ok && ended_by_a_dying_start(&text) {
            note_retry(&format!(
                "examples/{example}.rs ended with CreateProcess's ERROR_INTERNAL_ERROR (Wine's start of a process \
                 that died starting); running it once more"
            ));
            ok = run_tee(p.cargo(&example_args(example, args)).stdin(Stdio::null())).0;
        }
        tally.check(format!("examples/{example}.rs"), ok);
    }
    match setup::http_tool("curl") {
        Ok(curl) => {
            let result = crate::http::curl_check(&p, &curl);
            match &result {
                Ok(line) => println!("xtask test: {line}"),
                Err(e) => println!("xtask test: examples/http_server under curl: {e}"),
            }
            tally.check("examples/http_server under curl".into(), result.is_ok());
        }
        Err(why) => println!("xtask test: SKIPPED the curl check of examples/http_server: {why}"),
    }
    match setup::http_tool("curl") {
        Ok(curl) => {
            let result = https_checks(&p, &curl);
            match &result {
                Ok(line) => println!("xtask test: {line}"),
                Err(e) => println!("xtask test: examples/https_server: {e}"),
            }
            tally.check("examples/https_server under curl, h2load and hostile TLS clients".into(), result.is_ok());
        }
        Err(why) => println!("xtask test: SKIPPED the checks of examples/https_server: {why}"),
    }
    match setup::http_tool("curl") {
        Ok(curl) => match crate::service::check(&p, &curl) {
            Ok(Some(line)) => {
                println!("xtask test: {line}");
                tally.check("examples/pipe_service under the SCM".into(), true);
            }
            Ok(None) => {}
            Err(e) => {
                println!("xtask test: examples/pipe_service under the SCM: {e}");
                tally.check("examples/pipe_service under the SCM".into(), false);
            }
        },
        Err(why) => println!("xtask test: SKIPPED examples/pipe_service under the SCM: {why}"),
    }
    idle_check(&p, &mut tally, "test", "debug", crate::idle::TEST_CONNS, crate::idle::Settle::Memory);
    let browser_skipped = match setup::browser() {
        Ok(browser) => {
            let result = timeline_in_browser(&p, &browser);
            match &result {
                Ok(line) => println!("xtask test: {line}"),
                Err(e) => println!("xtask test: the HTML timeline in {}: {e}", browser.display()),
            }
            tally.check("the HTML timeline in a headless browser".into(), result.is_ok());
            None
        }
        Err(why) => {
            println!("xtask test: SKIPPED the browser check of the HTML timeline: {why}");
            Some(why)
        }
    };

    let (ok, _) =
        run_tee(&mut p.cargo(&["clippy", "--quiet", "-p", "wtp-bench", "--all-targets", "--", "-D", "warnings"]));
    tally.check("clippy (benchmarks)".into(), ok);
    let (ok, _) = run_tee(
        p.cargo(&["doc", "--quiet", "--no-deps", "-p", LIB, "--all-features", "--document-private-items"])
            .env("RUSTDOCFLAGS", "-D warnings"),
    );
    tally.check("rustdoc (all features, private items)".into(), ok);
    if ok {
        match p.doc_dir().and_then(|d| crate::doc_links::broken_fragments(&d.join(LIB.replace('-', "_")))) {
            Ok(broken) => {
                for b in &broken {
                    println!("xtask test: rustdoc link to a missing #fragment: {b}");
                }
                tally.check("rustdoc: every #fragment link names a heading".into(), broken.is_empty());
            }
            Err(e) => tally.check(format!("rustdoc: fragment links: {e}"), false),
        }
    }
    if !cfg!(windows) {
        // The MSVC target cannot link here, but its cfg can be checked (and linted).
        // The TLS tests' ring compiles C in its build script for any target:
        // nothing is linked, so MinGW's gcc and LLVM's lib.exe-like archiver
        // stand in for MSVC's compiler and lib.exe.
        let msvc = ["clippy", "--quiet", "--target", MSVC_TARGET, "-p", LIB, "--all-targets", "--all-features"];
        let mut clippy = host.cargo(&[&msvc[..], &["--", "-D", "warnings"]].concat());
        clippy.env("CC_x86_64_pc_windows_msvc", "x86_64-w64-mingw32-gcc").env("AR_x86_64_pc_windows_msvc", "llvm-lib");
        let (ok, _) = run_tee(&mut clippy);
        tally.check(format!("clippy ({MSVC_TARGET}, all features, no link)"), ok);
    }
    // Off Windows the library is an empty crate: the whole workspace must
    // still build and lint for the host.
    let (ok, _) =
        run_tee(&mut host.cargo(&["clippy", "--quiet", "--workspace", "--all-targets", "--", "-D", "warnings"]));
    tally.check("host build of the workspace".into(), ok);
    let (ok, text) =
        run_tee(&mut host.cargo(&["test", "--color", "never", "--quiet", "-p", "xtask", "-p", "wine-runner"]));
    tally.account("tooling tests", ok, parse_libtest(&text));
    let miri_skipped = host_cores(&mut tally)?;
    // One mutant of the smallest module keeps `cargo xtask mutants` working.
    let smoke = crate::mutants::smoke(&p);
    if let Err(e) = &smoke {
        println!("xtask test: mutation smoke: {e}");
    }
    tally.check("mutation testing smoke (cargo xtask mutants, one shard)".into(), smoke.is_ok());

    println!("xtask test: finished in {:.0}s", t0.elapsed().as_secs_f64());
    for line in per_config.iter().chain([&stress_line]) {
        println!("xtask test: {line}");
    }
    report_runner_retries("test");
    if let Some(why) = browser_skipped {
        println!("xtask test: !!! SKIPPED: the browser check of the HTML timeline did not run: {why}");
    }
    if let Some(why) = miri_skipped {
        println!("xtask test: !!! SKIPPED: Miri did not run the platform-independent cores' tests: {why}");
    }
    tally.finish("test")
}

/// The platform-independent cores (trace ring, drain obligation, I/O
/// registry, callback context, task chunking) on the host: their loom
/// models, then their unit tests under Miri, each in a target directory of
/// its own so neither invalidates the ordinary host build. Returns why Miri was skipped, if it was.
fn host_cores(tally: &mut Tally) -> Result<Option<String>> {
    let target_dir = env::layout()?.target_dir.clone();
    let loom = ["test", "--color", "never", "--release", "-p", LIB, "--lib", "loom"];
    let (ok, text) = run_tee(
        Platform::host().cargo(&loom).env("RUSTFLAGS", "--cfg loom").env("CARGO_TARGET_DIR", target_dir.join("loom")),
    );
    tally.account("loom models (host)", ok, parse_libtest(&text));
    if let Err(why) = setup::miri() {
        println!("xtask test: !!! SKIPPING Miri: {why}");
        return Ok(Some(why));
    }
    // Stacked Borrows (Miri's default), then Tree Borrows; strict provenance
    // in both, since no core needs an integer turned back into a pointer.
    for (model, flags) in [("Stacked Borrows", ""), ("Tree Borrows", " -Zmiri-tree-borrows")] {
        let miri = ["miri", "test", "--color", "never", "-p", LIB, "--lib"];
        let (ok, text) = run_tee(
            env::nightly_cargo(&miri)
                .env("MIRIFLAGS", format!("-Zmiri-strict-provenance{flags}"))
                .env("CARGO_TARGET_DIR", target_dir.join("miri")),
        );
        tally.account(&format!("Miri, {model} (host)"), ok, parse_libtest(&text));
    }
    Ok(None)
}

/// `cargo xtask trace-view --check`: setup, then the browser check alone.
pub fn timeline_check(target: Option<&str>) -> Result<()> {
    let p = setup::setup(target)?;
    let browser = setup::browser().map_err(|why| format!("SKIPPED: no browser to check the timeline in: {why}"))?;
    let line = timeline_in_browser(&p, &browser)?;
    println!("xtask trace-view: {line}");
    Ok(())
}

/// Runs `examples/trace_timeline.rs` with the trace armed, turns both of its
/// dumps into pages, loads each in the headless `browser`, and checks the
/// page drew one bar per `trampoline-entered` row of the text dump (counted
/// here, not by the generator), then takes a screenshot. Returns a summary.
fn timeline_in_browser(p: &Platform, browser: &std::path::Path) -> Result<String> {
    use crate::trace_view::{self, Kind};
    let (ok, _) =
        run_tee(&mut p.cargo(&["build", "--quiet", "-p", LIB, "--example", "trace_timeline", "--features", "trace"]));
    if !ok {
        return Err("building examples/trace_timeline.rs failed".into());
    }
    let dir = trace_view::scratch_dir()?;
    for f in ["trace.txt", "trace.json", "trace.html", "trace-json.html", "timeline.png"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let exe = p.bin_dir("debug")?.join("examples").join("trace_timeline.exe");
    let mut run = if p.under_wine() {
        let mut c = env::wine_run();
        c.arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let mut run = || run_tee(run.current_dir(&dir).env("WINDOWS_THREADPOOL_TRACE", "*"));
    let (mut ok, text) = run();
    if !ok && killed_by_wine_after(&text, TIMELINE_DONE) {
        note_retry(
            "examples/trace_timeline.rs finished and then Wine was killed by a signal as the process exited; \
             running it once more",
        );
        ok = run().0;
    }
    if !ok {
        return Err("examples/trace_timeline.rs failed".into());
    }
    let text = std::fs::read_to_string(dir.join("trace.txt")).map_err(|e| format!("trace.txt: {e}"))?;
    let entered = |target: &str| text.lines().filter(|l| l.contains(&format!(" {target} trampoline-entered "))).count();
    let expected = text.lines().filter(|l| l.contains(" trampoline-entered ")).count();
    // The example's shape: four work callbacks, at least one tick, one wait activation.
    if entered("work") != 4 || entered("timer-periodic") == 0 || entered("wait") != 1 {
        return Err(format!(
            "trace.txt does not hold the example's callbacks (work {}, ticks {}, wait {})",
            entered("work"),
            entered("timer-periodic"),
            entered("wait")
        ));
    }
    let mut summary = String::new();
    for (dump, page) in [("trace.txt", "trace.html"), ("trace.json", "trace-json.html")] {
        let page = dir.join(page);
        let tl = trace_view::write_page(&dir.join(dump), &page)?;
        let url = trace_view::file_url(&page);
        let dom = browser_output(browser, &dir, &["--dump-dom", &url])?;
        let status = trace_view::root_data(&dom, "status");
        let drawn = trace_view::count_class(&dom, "rect", "bar");
        if status.as_deref() != Some("drawn") || drawn != expected || tl.count(Kind::Callback) != expected {
            return Err(format!(
                "{dump}: expected {expected} bars (trampoline-entered rows); the page's status is {status:?}, \
                 it drew {drawn}, the generator found {}",
                tl.count(Kind::Callback)
            ));
        }
        summary.push_str(&format!("{dump}: {drawn} bars; "));
    }
    // The page's own handlers, driven by synthetic events in the real browser.
    let url = format!("{}#selftest", trace_view::file_url(&dir.join("trace.html")));
    let dom = browser_output(browser, &dir, &["--dump-dom", &url])?;
    let selftest = trace_view::root_data(&dom, "selftest");
    if selftest.as_deref() != Some("zoom ok, pan ok, hover ok") {
        return Err(format!("zoom, pan and hover self-test: {selftest:?}"));
    }
    summary.push_str("zoom, pan, hover ok; ");
    let shot = dir.join("timeline.png");
    browser_output(
        browser,
        &dir,
        &[
            "--hide-scrollbars",
            "--window-size=1400,300",
            &format!("--screenshot={}", shot.display()),
            &trace_view::file_url(&dir.join("trace.html")),
        ],
    )?;
    is_screenshot(&shot)?;
    let chart = benchmark_chart_in_browser(browser, &dir)?;
    Ok(format!("HTML timeline in {}: {summary}screenshot {}; {chart}", browser.display(), shot.display()))
}

/// A PNG of some size at `shot`, or why not.
fn is_screenshot(shot: &std::path::Path) -> Result<()> {
    let png = std::fs::read(shot).map_err(|e| format!("no screenshot {}: {e}", shot.display()))?;
    if !png.starts_with(b"\x89PNG") || png.len() < 1000 {
        return Err(format!("{} is not a screenshot", shot.display()));
    }
    Ok(())
}

/// `docs/benchmarks.svg` rendered once: the browser's document holds a bar
/// for every ratio of `docs/benchmarks.md`'s head-to-head rows, and a
/// screenshot of it is a picture.
fn benchmark_chart_in_browser(browser: &std::path::Path, dir: &std::path::Path) -> Result<String> {
    let root = env::workspace_root();
    let doc =
        std::fs::read_to_string(root.join("docs/benchmarks.md")).map_err(|e| format!("docs/benchmarks.md: {e}"))?;
    let expected = crate::chart::bar_count(&doc);
    let url = crate::trace_view::file_url(&root.join(crate::bench::CHART));
    let dom = browser_output(browser, dir, &["--dump-dom", &url])?;
    let drawn = crate::trace_view::count_class(&dom, "rect", "bar");
    if expected == 0 || drawn != expected {
        return Err(format!(
            "{}: the browser drew {drawn} bars, docs/benchmarks.md has {expected} head-to-head ratios \
             (cargo xtask bench --chart redraws it)",
            crate::bench::CHART
        ));
    }
    let shot = dir.join("benchmarks.png");
    let _ = std::fs::remove_file(&shot);
    browser_output(
        browser,
        dir,
        &["--hide-scrollbars", "--window-size=1060,720", &format!("--screenshot={}", shot.display()), &url],
    )?;
    is_screenshot(&shot)?;
    Ok(format!("{}: {drawn} bars, screenshot {}", crate::bench::CHART, shot.display()))
}

/// Runs headless `browser` with `args` and returns its standard output;
/// kills it after two minutes (a watchdog for a hung browser; the check
/// fails then, it never passes on time).
fn browser_output(browser: &std::path::Path, dir: &std::path::Path, args: &[&str]) -> Result<String> {
    let mut cmd = Command::new(browser);
    // No sandbox: CI runs this as root in a container, where Chromium's
    // sandbox cannot start (and the page is our own file); a container's
    // small /dev/shm is why shared memory is not used.
    cmd.args(["--headless", "--disable-gpu", "--no-first-run", "--no-sandbox", "--disable-dev-shm-usage"])
        .arg(format!("--user-data-dir={}", dir.join("browser-profile").display()))
        .args(args);
    let out = env::output_within(&mut cmd, std::time::Duration::from_secs(120))
        .map_err(|e| format!("{} {args:?}: {e}", browser.display()))?;
    if !out.status.success() {
        return Err(format!("{} {args:?} failed ({}):\n{}", browser.display(), out.status, out.stderr));
    }
    let stdout = out.stdout;
    Ok(stdout)
}

/// Regenerates the event table in `docs/trace.md` from the crate's event
/// table, by running the test that checks it with the bless variable set.
pub fn trace_doc(target: Option<&str>) -> Result<()> {
    let p = setup::setup(target)?;
    let test = "trace::tests::docs_reference_section_is_generated_from_the_event_table";
    let status = p
        .cargo(&["test", "--quiet", "-p", LIB, "--lib", "--", test, "--exact", "--nocapture"])
        .env("WINDOWS_THREADPOOL_BLESS", "1")
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cargo test: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("regenerating docs/trace.md failed: {status}")) }
}

/// The examples `demo` runs, and `test` runs as checks, with their
/// arguments (each ends by itself: the echo server serves its own client).
const EXAMPLES: [(&str, &[&str]); 5] = [
    ("tour", &[]),
    ("service", &[]),
    ("async_service", &[]),
    ("echo_server", &["--self-test"]),
    ("http_server", &["--self-test"]),
];

/// The features an example of [`EXAMPLES`] needs (its `required-features`).
fn example_features(example: &str) -> &'static [&'static str] {
    if example == "http_server" { &["--features", "hyper"] } else { &[] }
}

/// `cargo run`'s arguments for one of [`EXAMPLES`].
fn example_args<'a>(example: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["run", "--quiet", "-p", LIB, "--example", example];
    all.extend(example_features(example));
    all.push("--");
    all.extend(args);
    all
}

pub fn demo(target: Option<&str>) -> Result<()> {
    let p = setup::setup(target)?;
    for (example, args) in EXAMPLES {
        let status = p
            .cargo(&example_args(example, args))
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("cargo run: {e}"))?;
        if !status.success() {
            return Err(format!("examples/{example}.rs failed: {status}"));
        }
    }
    Ok(())
}

/// `cargo xtask demo --curl`: setup, then the curl check alone.
pub fn curl_check(target: Option<&str>) -> Result<()> {
    let p = setup::setup(target)?;
    let curl = setup::http_tool("curl").map_err(|why| format!("SKIPPED: no curl: {why}"))?;
    println!("xtask demo: {}", crate::http::curl_check(&p, &curl)?);
    Ok(())
}

/// The checks of examples/https_server, h2load's part skipped (loudly)
/// without h2load.
fn https_checks(p: &Platform, curl: &std::path::Path) -> Result<String> {
    let h2load = setup::http_tool("h2load");
    if let Err(why) = &h2load {
        println!("xtask test: SKIPPED h2load's HTTP/2 load of examples/https_server: {why}");
    }
    crate::https::check(p, curl, h2load.ok().as_deref())
}

/// `cargo xtask demo --https`: setup, then the checks of examples/https_server alone.
pub fn https_check(target: Option<&str>) -> Result<()> {
    let p = setup::setup(target)?;
    let curl = setup::http_tool("curl").map_err(|why| format!("SKIPPED: no curl: {why}"))?;
    println!("xtask demo: {}", https_checks(&p, &curl)?);
    Ok(())
}

/// `cargo xtask demo --service`: set up, then only the check of
/// `examples/pipe_service.rs` under the service control manager.
pub fn service_check(target: Option<&str>) -> Result<()> {
    let p = setup::setup(target)?;
    let curl = setup::http_tool("curl").map_err(|why| format!("SKIPPED: no curl: {why}"))?;
    match crate::service::check(&p, &curl)? {
        Some(line) => println!("xtask demo: {line}"),
        None => println!("xtask demo: SKIPPED (see above)"),
    }
    Ok(())
}

/// `conns` idle keep-alive connections against the example built in
/// `profile` (`idle::check`): each answers a second `GET /`, and a second
/// round leaves memory within the leak slack. Skipped, loudly, where it
/// cannot be measured.
fn idle_check(p: &Platform, tally: &mut Tally, cmd: &str, profile: &str, conns: usize, settle: crate::idle::Settle) {
    if let Some(why) = crate::idle::cannot(p) {
        println!("xtask {cmd}: !!! SKIPPED {conns} idle keep-alive connections: {why}");
        return;
    }
    let t = Instant::now();
    let result = crate::idle::check(p, profile, conns, settle);
    match &result {
        Ok(line) => println!("xtask {cmd}: {line} ({:.0}s)", t.elapsed().as_secs_f64()),
        Err(e) => println!("xtask {cmd}: {e} ({:.0}s)", t.elapsed().as_secs_f64()),
    }
    tally.check(format!("{conns} idle keep-alive connections to examples/http_server"), result.is_ok());
}

/// Seconds of `wrk -c64` in the HTTP soak of `cargo xtask stress`, and of
/// h2load over TLS in its HTTPS soak.
const HTTP_SOAK_SECS: u32 = 60;

/// `cargo xtask stress`: the stress scenarios at `WINDOWS_THREADPOOL_STRESS_SCALE`,
/// the lifecycle models, the HTTP soak (`http::soak`) and 10,000 idle
/// keep-alive connections (`idle::check`); `--only-http`: the last two alone;
/// `--only-idle`: the last alone; `--only-hostile`: the hostile clients of
/// the HTTP and HTTPS examples alone ([`HTTP_STRESS`]).
/// `tokio-http`'s figure is left to `cargo xtask bench`: under Wine 8 its
/// 10,000 connections take minutes to open.
pub fn stress(target: Option<&str>, rest: &[String]) -> Result<()> {
    let only_http = rest.iter().any(|a| a == "--only-http");
    let only_idle = rest.iter().any(|a| a == "--only-idle");
    let only_hostile = rest.iter().any(|a| a == "--only-hostile");
    if let Some(a) = rest.iter().find(|a| !["--only-http", "--only-idle", "--only-hostile"].contains(&a.as_str())) {
        return Err(format!("unexpected argument {a:?}"));
    }
    let p = setup::setup(target)?;
    let mut tally = Tally::default();
    let scale = std::env::var(STRESS_SCALE_VAR).unwrap_or_else(|_| "1".into());
    if only_hostile {
        clear_runner_log();
        stress_scenarios(&p, &mut tally, &scale, HTTP_STRESS, &["--features", HTTP_STRESS_FEATURES]);
        report_runner_retries("stress");
        return tally.finish("stress");
    }
    if only_idle {
        idle_check(&p, &mut tally, "stress", "release", crate::idle::BENCH_CONNS, crate::idle::Settle::Threads);
        return tally.finish("stress");
    }
    if !only_http {
        println!("xtask stress: scale {scale}");
        let t0 = Instant::now();
        clear_runner_log();
        let ran = stress_scenarios(&p, &mut tally, &scale, ALL_STRESS, &[])
            + stress_scenarios(&p, &mut tally, &scale, HTTP_STRESS, &["--features", HTTP_STRESS_FEATURES]);
        println!("xtask stress: {ran} scenarios at scale {scale} in {:.1}s", t0.elapsed().as_secs_f64());
        let t1 = Instant::now();
        let cases = lifecycle_cases(&p, &mut tally, &scale);
        println!("xtask stress: lifecycle models with {cases} cases each in {:.1}s", t1.elapsed().as_secs_f64());
    }
    match setup::http_tool("wrk") {
        Ok(wrk) => {
            let t = Instant::now();
            let result = crate::http::soak(&p, &wrk, HTTP_SOAK_SECS);
            match &result {
                Ok(line) => println!("xtask stress: {line} ({:.0}s)", t.elapsed().as_secs_f64()),
                Err(e) => println!("xtask stress: {e}"),
            }
            tally.check("the HTTP soak of examples/http_server under wrk".into(), result.is_ok());
        }
        Err(why) => println!("xtask stress: !!! SKIPPED the HTTP soak of examples/http_server: {why}"),
    }
    match (setup::http_tool("h2load"), setup::http_tool("curl")) {
        (Ok(h2load), Ok(curl)) => {
            let t = Instant::now();
            let result = crate::https_load::soak(&p, &h2load, &curl, HTTP_SOAK_SECS);
            match &result {
                Ok(line) => println!("xtask stress: {line} ({:.0}s)", t.elapsed().as_secs_f64()),
                Err(e) => println!("xtask stress: {e}"),
            }
            tally.check("the HTTPS soak of examples/https_server under h2load".into(), result.is_ok());
        }
        (Err(why), _) | (_, Err(why)) => {
            println!("xtask stress: !!! SKIPPED the HTTPS soak of examples/https_server: {why}")
        }
    }
    idle_check(&p, &mut tally, "stress", "release", crate::idle::BENCH_CONNS, crate::idle::Settle::Threads);
    report_runner_retries("stress");
    tally.finish("stress")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_example_runs_again_only_after_wines_dying_start() {
        let died = "service started\nError: Os { code: 1359, kind: Uncategorized, message: \"Internal error.\" }\n";
        assert!(ended_by_a_dying_start(died));
        assert!(!ended_by_a_dying_start("Error: Os { code: 2, kind: NotFound, message: \"not found\" }\n"));
        assert!(!ended_by_a_dying_start("Error: Os { code: 1350, kind: Uncategorized }\n"));
        assert!(!ended_by_a_dying_start("Error: Os { code: 1359, kind: Uncategorized }\nthen more\n"));
        assert!(!ended_by_a_dying_start("thread 'main' panicked: code 1359\n"));
        assert!(!ended_by_a_dying_start(""));
    }

    #[test]
    fn the_timeline_runs_again_only_when_wine_died_after_it_finished() {
        let killed = "wine-runner: wine was killed by signal 11; exiting with 139\n";
        assert!(killed_by_wine_after(&format!("{TIMELINE_DONE}\n{killed}"), TIMELINE_DONE));
        assert!(killed_by_wine_after(&format!("{TIMELINE_DONE}\n\n{}", killed.replace("11", "9")), TIMELINE_DONE));
        // Not finished: killed before the last line, or failed without a signal.
        assert!(!killed_by_wine_after(&format!("trace: started\n{killed}"), TIMELINE_DONE));
        assert!(!killed_by_wine_after(killed, TIMELINE_DONE));
        assert!(!killed_by_wine_after(&format!("{TIMELINE_DONE}\n"), TIMELINE_DONE));
        assert!(!killed_by_wine_after(&format!("{TIMELINE_DONE}\nError: Os {{ code: 5 }}\n"), TIMELINE_DONE));
        // A panic after the last line is the program's own failure.
        assert!(!killed_by_wine_after(&format!("{TIMELINE_DONE}\nthread 'main' panicked\n{killed}"), TIMELINE_DONE));
    }

    #[test]
    fn nextest_summary_counts_every_non_pass_as_failure() {
        let text = "junk\n     Summary [   1.1s] 7 tests run: 4 passed, 1 failed, 2 timed out, 0 skipped\n";
        assert_eq!(parse_nextest(text), Some(Counts { run: 7, passed: 4, failed: 3, flaky: vec![] }));
        let one = parse_nextest("     Summary [   0.1s] 1 test run: 1 passed, 3 skipped").unwrap();
        assert_eq!((one.run, one.passed, one.failed), (1, 1, 0));
        let cancelled = parse_nextest("     Summary [   0.1s] 2/9 tests run: 1 passed, 1 failed, 0 skipped").unwrap();
        assert_eq!((cancelled.run, cancelled.failed), (2, 1));
        assert_eq!(parse_nextest("error: could not compile"), None);
    }

    #[test]
    fn coloured_output_is_parsed_once_stripped() {
        // As nextest 0.9.143 prints it with --color always (CARGO_TERM_COLOR=always in CI).
        let text = "\u{1b}[32;1m     Summary\u{1b}[0m [   0.937s] \u{1b}[1m13\u{1b}[0m tests run: \u{1b}[1m13\u{1b}[0m \
                    \u{1b}[32;1mpassed\u{1b}[0m, \u{1b}[1m0\u{1b}[0m \u{1b}[33;1mskipped\u{1b}[0m\n";
        assert_eq!(parse_nextest(text), None, "the raw coloured line is not parseable");
        assert_eq!(parse_nextest(&strip_ansi(text)), Some(Counts { run: 13, passed: 13, failed: 0, flaky: vec![] }));
        let libtest = "test result: \u{1b}[32mok\u{1b}[0m. 3 passed; 0 failed; 0 ignored\n";
        assert_eq!(parse_libtest(&strip_ansi(libtest)).map(|c| c.passed), Some(3));
        assert_eq!(strip_ansi("a\u{1b}[1;2Hb\u{1b}7c"), "abc");
    }

    #[test]
    fn nextest_flaky_passes_are_named_and_fail_the_tally() {
        // As nextest 0.9 prints it (NEXTEST_RETRIES=1, a test failing once).
        let text = "  TRY 2 PASS [   0.012s] (2/2) rt::a flaky\n\
                    ────────────\n     Summary [   0.288s] 2 tests run: 2 passed (1 flaky, 1 leaky), 0 skipped\n   \
                    FLAKY 2/2 [   0.012s] (2/2) rt::a flaky\n";
        let c = parse_nextest(text).unwrap();
        assert_eq!(c, Counts { run: 2, passed: 2, failed: 0, flaky: vec!["rt::a flaky".into()] });
        let mut tally = Tally::default();
        tally.account("tests (default)", true, Some(c));
        assert_eq!((tally.passed, tally.failed), (1, 1));
        assert!(tally.finish("test").is_err());
    }

    #[test]
    fn an_empty_or_missing_run_fails_the_tally() {
        let mut tally = Tally::default();
        tally.account("doctests", true, parse_libtest("test result: ok. 0 passed; 0 failed; 0 ignored"));
        assert_eq!(tally.failures, ["doctests: no test ran"]);
        let mut tally = Tally::default();
        tally.account("tests", false, None);
        assert_eq!(tally.failed, 1);
        let mut tally = Tally::default();
        tally.account("tests", true, parse_libtest("test result: ok. 3 passed; 0 failed; 1 ignored"));
        assert!(tally.finish("test").is_ok());
    }

    #[test]
    fn wine10_arguments() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(wine10_args(&[]), Ok(Wine10Args::default()));
        assert_eq!(
            wine10_args(&args(&["-j", "1", "--", "-E", "test(x)", "--setup"])),
            Ok(Wine10Args {
                setup_only: false,
                threads: Some("1".into()),
                nextest_args: Some(args(&["-E", "test(x)", "--setup"]))
            })
        );
        assert!(wine10_args(&args(&["--setup"])).unwrap().setup_only);
        assert!(wine10_args(&args(&["-j"])).is_err());
        assert!(wine10_args(&args(&["-j", "0"])).is_err());
        assert!(wine10_args(&args(&["--all"])).is_err());
    }

    #[test]
    fn libtest_results_are_summed() {
        let text =
            "test result: ok. 3 passed; 0 failed; 1 ignored\nx\ntest result: FAILED. 2 passed; 5 failed; 0 ignored\n";
        assert_eq!(parse_libtest(text), Some(Counts { run: 10, passed: 5, failed: 5, flaky: vec![] }));
        assert_eq!(parse_libtest("error[E0433]"), None);
    }
}
