//! Project tooling. `cargo xtask <command>`:
//!
//! - `setup`: make this machine able to build and run the Windows target
//!   (rustfmt, clippy, cargo-nextest; on Linux also Wine, mingw, the Rust
//!   targets, the Wine runner, a proved Wine prefix); ends by printing the
//!   `.cargo/config.toml` lines that run a crate of one's own under Wine.
//! - `test`: setup, then format, the whole test matrix with per-configuration
//!   counts, the stress scenarios at scale 1, lints and docs; ends with
//!   `N passed, N failed`.
//! - `demo`: run `examples/tour.rs`, `examples/service.rs`, `examples/async_service.rs` and
//!   `examples/echo_server.rs --self-test`.
//! - `bench`: run the benchmarks and write `docs/benchmarks.md`.
//! - `trace-doc`: regenerate the event table in `docs/trace.md`.
//! - `trace-view`: turn a trace dump into one self-contained HTML timeline
//!   (`--check`: the headless-browser check of it alone).
//! - `stress`: setup, then the opt-in stress scenarios (`tests/*_stress.rs`),
//!   one at a time, with their reports.
//! - `coverage`: line coverage of the library's tests, where it can be measured.
//! - `mutants`: mutation testing (cargo-mutants) module by module, and
//!   `docs/mutants.md` from the results.
//! - `layers`: the import graph of `src/` (rooms, arrows, floors, circles),
//!   and its check (justified circles, the trace below its users, long
//!   files, the README's layout); `test` runs the check.
//! - `wine10`: the nextest suite and doctests (default and all features)
//!   under Debian trixie's Wine 10.0, in a root it prepares once (Linux, root).
//! - `exec`: run a program as it is (the test runner on a Windows host).
//!
//! On Linux everything runs for `x86_64-pc-windows-gnu` under Wine. On
//! Windows tests run natively for the host target, or for the target named
//! by `--target` (setup, test, demo, stress, bench, trace-doc accept it).

mod bench;
mod chart;
mod coverage;
mod doc_links;
mod env;
mod http;
mod https;
mod https_load;
mod idle;
/// The tests' JSON parser (one definition).
#[path = "../../tests/support/json.rs"]
mod json;
mod layers;
mod mutants;
mod run;
mod service;
mod setup;
/// Wine's failed process starts: the tests' definition of the error code.
#[path = "../../tests/support/start.rs"]
mod start;
mod trace_view;
mod wine10;

use std::process::ExitCode;

/// The target tests run for under Wine on Linux.
pub const WIN_TARGET: &str = "x86_64-pc-windows-gnu";
/// Checked (never linked) on Linux, so its cfg stays buildable.
pub const MSVC_TARGET: &str = "x86_64-pc-windows-msvc";
pub const LIB: &str = "windows-threadpool";

fn main() -> ExitCode {
    env::invocation_dir();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, rest) = match args.split_first() {
        Some((c, r)) => (c.as_str(), r),
        None => ("", &[][..]),
    };
    if cmd == "exec" {
        // Verbatim: these are the test binary's own arguments.
        return match env::exec(rest) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("xtask exec: {e}");
                ExitCode::from(127)
            }
        };
    }
    let (target, rest) = match take_target(rest) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("xtask {cmd}: {e}");
            return ExitCode::from(2);
        }
    };
    let target = target.as_deref();
    let result = match cmd {
        "setup" => setup::setup(target).map(|_| setup::print_user_config()),
        "test" => run::test(target, &rest),
        // `--curl`: set up, then only the curl check of examples/http_server that `test` runs.
        "demo" if rest.iter().any(|a| a == "--curl") => run::curl_check(target),
        // `--https`: set up, then only the checks of examples/https_server that `test` runs.
        "demo" if rest.iter().any(|a| a == "--https") => run::https_check(target),
        // `--service`: set up, then only the check of examples/pipe_service under the SCM that `test` runs.
        "demo" if rest.iter().any(|a| a == "--service") => run::service_check(target),
        "demo" => run::demo(target),
        "bench" => bench::bench(target, &rest),
        "stress" => run::stress(target, &rest),
        "trace-doc" => run::trace_doc(target),
        // `--check`: set up, then only the browser check `test` runs.
        "trace-view" if rest.iter().any(|a| a == "--check") => run::timeline_check(target),
        // A file conversion: needs no set-up.
        "trace-view" => trace_view::trace_view(&rest),
        "coverage" => coverage::coverage(target, &rest),
        "mutants" => mutants::mutants(target, &rest),
        // Reads src/ only: needs no set-up.
        "layers" => layers::layers(&rest),
        "wine10" => run::wine10(&rest),
        _ => {
            let asked = matches!(cmd, "help" | "--help" | "-h");
            let usage = "usage: cargo xtask <setup|test|demo|stress|bench|trace-doc|trace-view|coverage|mutants|layers|wine10> [--target TRIPLE]\n\
                 \n  setup      prepare this machine (rustfmt, clippy, cargo-nextest; Linux: Wine prefix and runner, mingw, Rust targets)\
                 \n  test       setup, then fmt, tests, stress at scale 1, the examples, clippy and rustdoc in every feature configuration\
                 \n  demo       run examples/tour.rs, service.rs, async_service.rs, echo_server.rs and http_server --self-test\
                 \n             --curl: setup, then only the curl check of examples/http_server that `test` runs\
                 \n             --https: setup, then only the checks of examples/https_server (curl, h2load, hostile TLS clients) that `test` runs\
                 \n             --service: setup, then only the check of examples/pipe_service under the SCM that `test` runs\
                 \n  stress     run the opt-in stress scenarios one at a time (WINDOWS_THREADPOOL_STRESS_SCALE multiplies the load),\
                 \n             then 60 s of wrk against examples/http_server, 60 s of h2load over TLS against examples/https_server\
                 \n             and 10,000 idle keep-alive connections to the first (--only-http: those three alone; --only-idle: the idle connections alone;\
                 \n             --only-hostile: the hostile clients of examples/http_server and, over TLS, examples/https_server alone)\
                 \n  bench      run the benchmarks and write docs/benchmarks.md (--quick: a smoke run; --only-http, --only-inplace: that section alone;\
                 \n             --only-https: the HTTPS table, printed and not written; --chart: only redraw docs/benchmarks.svg from it)\
                 \n  trace-doc  regenerate the event table in docs/trace.md\
                 \n  trace-view DUMP [-o OUT.html]: one self-contained HTML timeline from a trace dump (text or Chrome JSON);\
                 \n             --check: setup, then only the headless-browser check of the timeline that `test` runs\
                 \n  coverage   line coverage of the library's tests (explains why not, where it cannot)\
                 \n  mutants    mutation testing per module (--module NAME, --shard k/n, --timeout S, --iterate: only what the last run missed; --report rewrites docs/mutants.md)\
                 \n  layers     the import graph of src/ from its use lines (rooms, arrows, floors, circles), and its check\
                 \n             (circles justified, the trace below its users, files over 700 lines, README ## Layout);\
                 \n             --check: the check alone, as `test` runs it\
                 \n  wine10     the suite (default and all features, doctests) under Wine 10 in a Debian trixie root it prepares once\
                 \n             (Linux, as root; --setup: prepare only; -j N: tests at a time; -- ARGS: one nextest run with ARGS)\
                 \n\n--target: on Windows, test that target natively instead of the host's";
            if asked {
                println!("{usage}");
                return ExitCode::SUCCESS;
            }
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {cmd}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Splits `--target T` (or `--target=T`) off a command's arguments.
fn take_target(args: &[String]) -> Result<(Option<String>, Vec<String>), String> {
    let (mut target, mut rest) = (None, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            rest.push(a.clone());
            rest.extend(it.by_ref().cloned());
        } else if a == "--target" {
            target = Some(it.next().ok_or("--target needs a target triple")?.clone());
        } else if let Some(t) = a.strip_prefix("--target=") {
            target = Some(t.to_string());
        } else {
            rest.push(a.clone());
        }
    }
    Ok((target, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_is_taken_from_anywhere_before_a_double_dash() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(take_target(&args(&["--quick", "--target", "t1"])), Ok((Some("t1".into()), args(&["--quick"]))));
        assert_eq!(take_target(&args(&["--target=t2"])), Ok((Some("t2".into()), vec![])));
        assert_eq!(take_target(&args(&["--", "--target", "x"])), Ok((None, args(&["--", "--target", "x"]))));
        assert!(take_target(&args(&["--target"])).is_err());
    }
}
