//! `cargo xtask test`, `demo`, `stress` and `trace-doc`.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use crate::LIB;
use crate::setup::{self, Platform, Result, workspace_root};

/// The feature configurations every check runs in.
const CONFIGS: [(&str, &[&str]); 3] =
    [("default", &[]), ("no-default-features", &["--no-default-features"]), ("all-features", &["--all-features"])];

#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    failures: Vec<String>,
    /// Tests that passed only on nextest's retry, listed in the summary.
    flaky: Vec<String>,
}

impl Tally {
    fn check(&mut self, what: String, ok: bool) {
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
            self.failures.push(what);
        }
    }
}

fn cargo(p: &Platform, args: &[&str]) -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    // The target goes before any `--`, which starts the tool's own arguments.
    let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    c.current_dir(workspace_root()).args(&args[..split]).args(p.target_args()).args(&args[split..]);
    c
}

/// Runs `cmd`, echoing its output as it arrives, and returns (success, all output).
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
    (status.is_ok_and(|s| s.success()), text)
}

fn has_nextest() -> bool {
    Command::new("cargo")
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Counts from nextest's closing `N tests run: N passed, N failed, ...` line.
fn parse_nextest(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().rev().find(|l| l.contains(" run: ") && l.contains("passed"))?;
    let (_, counts) = line.split_once(" run: ")?;
    let (mut passed, mut failed) = (0, 0);
    for part in counts.split(',') {
        let mut words = part.split_whitespace();
        let n: u64 = words.next()?.parse().ok()?;
        match words.next()? {
            "passed" => passed += n,
            "skipped" => {}
            _ => failed += n,
        }
    }
    Some((passed, failed))
}

/// Sums libtest's `test result: ok. N passed; N failed; ...` lines.
fn parse_libtest(text: &str) -> Option<(u64, u64)> {
    let mut seen = false;
    let (mut passed, mut failed) = (0, 0);
    for line in text.lines().filter_map(|l| l.trim().strip_prefix("test result: ")) {
        seen = true;
        for part in line.split(';') {
            let words: Vec<&str> = part.split_whitespace().collect();
            let n = words.iter().position(|w| *w == "passed" || *w == "failed");
            if let Some(i) = n.filter(|&i| i > 0) {
                let v: u64 = words[i - 1].parse().unwrap_or(0);
                if words[i] == "passed" { passed += v } else { failed += v }
            }
        }
    }
    seen.then_some((passed, failed))
}

fn tests(p: &Platform, tally: &mut Tally, config: &str, flags: &[&str]) {
    let lib = ["-p", LIB];
    let (ok, counts) = if has_nextest() {
        let mut args = vec!["nextest", "run", "--no-fail-fast"];
        args.extend(lib);
        args.extend(flags);
        let (ok, text) = run_tee(&mut cargo(p, &args));
        let flaky =
            text.lines().filter(|l| l.trim_start().starts_with("FLAKY")).map(|l| format!("{config}: {}", l.trim()));
        tally.flaky.extend(flaky);
        (ok, parse_nextest(&text))
    } else {
        let mut args = vec!["test", "--no-fail-fast", "--lib", "--tests", "--examples"];
        args.extend(lib);
        args.extend(flags);
        let (ok, text) = run_tee(&mut cargo(p, &args));
        (ok, parse_libtest(&text))
    };
    account(tally, format!("tests ({config})"), ok, counts);

    let mut args = vec!["test", "--doc", "--no-fail-fast"];
    args.extend(lib);
    args.extend(flags);
    let (ok, text) = run_tee(&mut cargo(p, &args));
    account(tally, format!("doctests ({config})"), ok, parse_libtest(&text));
}

fn account(tally: &mut Tally, what: String, ok: bool, counts: Option<(u64, u64)>) {
    match counts {
        Some((passed, failed)) => {
            tally.passed += passed;
            tally.failed += failed;
            if failed > 0 {
                tally.failures.push(format!("{what}: {failed} failed"));
            } else if !ok {
                // The runner failed without a failing test: count the run itself.
                tally.check(format!("{what}: runner failed"), false);
            }
        }
        None => tally.check(format!("{what}: did not run (build failure?)"), false),
    }
}

pub fn test(rest: &[String]) -> Result<()> {
    if !rest.is_empty() {
        return Err(format!("unexpected arguments {rest:?}"));
    }
    let p = setup::setup()?;
    let t0 = std::time::Instant::now();
    let mut tally = Tally::default();
    for (config, flags) in CONFIGS {
        tests(&p, &mut tally, config, flags);
        let mut args = vec!["clippy", "--quiet", "-p", LIB, "--all-targets"];
        args.extend(flags);
        args.extend(["--", "-D", "warnings"]);
        let (ok, _) = run_tee(&mut cargo(&p, &args));
        tally.check(format!("clippy ({config})"), ok);
    }
    let (ok, _) =
        run_tee(&mut cargo(&p, &["clippy", "--quiet", "-p", "wtp-bench", "--all-targets", "--", "-D", "warnings"]));
    tally.check("clippy (benchmarks)".into(), ok);
    let (ok, _) = run_tee(
        cargo(&p, &["doc", "--quiet", "--no-deps", "-p", LIB, "--all-features", "--document-private-items"])
            .env("RUSTDOCFLAGS", "-D warnings"),
    );
    tally.check("rustdoc (all features, private items)".into(), ok);
    let host = Platform { target: None };
    // Off Windows the library is an empty crate: the whole workspace must
    // still build and lint for the host.
    let (ok, _) =
        run_tee(&mut cargo(&host, &["clippy", "--quiet", "--workspace", "--all-targets", "--", "-D", "warnings"]));
    tally.check("host build of the workspace".into(), ok);
    let (ok, text) = run_tee(&mut cargo(&host, &["test", "--quiet", "-p", "xtask"]));
    account(&mut tally, "tooling tests".into(), ok, parse_libtest(&text));

    println!("xtask test: finished in {:.0}s", t0.elapsed().as_secs_f64());
    for f in &tally.flaky {
        println!("xtask test: passed on retry (FLAKY) {f}");
    }
    for f in &tally.failures {
        println!("xtask test: FAILED {f}");
    }
    println!("{} passed, {} failed", tally.passed, tally.failed);
    if tally.failed == 0 && tally.failures.is_empty() { Ok(()) } else { Err("failures above".into()) }
}

/// Regenerates the event table in `docs/trace.md` from the crate's event
/// table, by running the test that checks it with the bless variable set.
pub fn trace_doc() -> Result<()> {
    let p = setup::setup()?;
    let test = "trace::tests::docs_reference_section_is_generated_from_the_event_table";
    let status = cargo(&p, &["test", "--quiet", "-p", LIB, "--lib", "--", test, "--exact", "--nocapture"])
        .env("WINDOWS_THREADPOOL_BLESS", "1")
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cargo test: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("regenerating docs/trace.md failed: {status}")) }
}

pub fn demo() -> Result<()> {
    let p = setup::setup()?;
    let status = cargo(&p, &["run", "--quiet", "-p", LIB, "--example", "tour"])
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cargo run: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("the tour failed: {status}")) }
}

/// Enables the stress scenarios in the test binaries that carry them.
const STRESS_VAR: &str = "WINDOWS_THREADPOOL_STRESS";
const STRESS_SCALE_VAR: &str = "WINDOWS_THREADPOOL_STRESS_SCALE";

/// Runs every `*_stress` test binary's scenarios, one at a time, printing
/// their reports. `WINDOWS_THREADPOOL_STRESS_SCALE` passes through.
pub fn stress(rest: &[String]) -> Result<()> {
    if !rest.is_empty() {
        return Err(format!("unexpected arguments {rest:?}"));
    }
    let p = setup::setup()?;
    let scale = std::env::var(STRESS_SCALE_VAR).unwrap_or_else(|_| "1".into());
    println!("xtask stress: scale {scale}");
    let t0 = std::time::Instant::now();
    let mut tally = Tally::default();
    let (ok, counts) = if has_nextest() {
        let args =
            ["nextest", "run", "-p", LIB, "-E", "binary(/_stress$/)", "-j", "1", "--no-fail-fast", "--no-capture"];
        let (ok, text) = run_tee(cargo(&p, &args).env(STRESS_VAR, "1"));
        (ok, parse_nextest(&text))
    } else {
        let args = ["test", "-p", LIB, "--test", "*_stress", "--no-fail-fast"];
        let (ok, text) = run_tee(cargo(&p, &args).env(STRESS_VAR, "1"));
        (ok, parse_libtest(&text))
    };
    account(&mut tally, "stress scenarios".into(), ok, counts);
    println!("xtask stress: finished in {:.0}s (scale {scale})", t0.elapsed().as_secs_f64());
    for f in &tally.failures {
        println!("xtask stress: FAILED {f}");
    }
    println!("{} passed, {} failed", tally.passed, tally.failed);
    if tally.passed > 0 && tally.failed == 0 && tally.failures.is_empty() {
        Ok(())
    } else if tally.passed == 0 && tally.failures.is_empty() {
        Err("no stress scenario ran".into())
    } else {
        Err("failures above".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nextest_summary_counts_every_non_pass_as_failure() {
        let text = "junk\n     Summary [   1.1s] 7 tests run: 4 passed, 1 failed, 2 timed out, 0 skipped\n";
        assert_eq!(parse_nextest(text), Some((4, 3)));
        assert_eq!(parse_nextest("     Summary [   0.1s] 1 test run: 1 passed, 3 skipped"), Some((1, 0)));
        assert_eq!(parse_nextest("error: could not compile"), None);
    }

    #[test]
    fn libtest_results_are_summed() {
        let text =
            "test result: ok. 3 passed; 0 failed; 1 ignored\nx\ntest result: FAILED. 2 passed; 5 failed; 0 ignored\n";
        assert_eq!(parse_libtest(text), Some((5, 5)));
        assert_eq!(parse_libtest("error[E0433]"), None);
    }
}
