//! Project tooling. `cargo xtask <command>`:
//!
//! - `setup`: make this machine able to build and run the Windows target
//!   (on Linux: Wine, mingw, the Rust target, a proved Wine prefix).
//! - `test`: setup, then the whole test matrix; ends with `N passed, N failed`.
//! - `demo`: run `examples/tour.rs`.
//! - `bench`: run the benchmarks and write `docs/benchmarks.md`.
//! - `trace-doc`: regenerate the event table in `docs/trace.md`.
//! - `stress`: setup, then the opt-in stress scenarios (`tests/*_stress.rs`),
//!   one at a time, with their reports.

mod bench;
mod run;
mod setup;

use std::process::ExitCode;

pub const WIN_TARGET: &str = "x86_64-pc-windows-gnu";
pub const LIB: &str = "windows-threadpool";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, rest) = match args.split_first() {
        Some((c, r)) => (c.as_str(), r),
        None => ("help", &[][..]),
    };
    let result = match cmd {
        "setup" => setup::setup().map(|_| ()),
        "test" => run::test(rest),
        "demo" => run::demo(),
        "bench" => bench::bench(rest),
        "stress" => run::stress(rest),
        "trace-doc" => run::trace_doc(),
        _ => {
            eprintln!(
                "usage: cargo xtask <setup|test|demo|stress|bench|trace-doc>\n\
                 \n  setup      prepare this machine (Linux: Wine prefix, mingw, Rust target)\
                 \n  test       setup, then tests, clippy and rustdoc in every feature configuration\
                 \n  demo       run examples/tour.rs\
                 \n  stress     run the opt-in stress scenarios one at a time (WINDOWS_THREADPOOL_STRESS_SCALE multiplies the load)\
                 \n  bench      run the benchmarks and write docs/benchmarks.md (--quick: a smoke run)\
                 \n  trace-doc  regenerate the event table in docs/trace.md"
            );
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
