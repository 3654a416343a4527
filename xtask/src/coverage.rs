//! `cargo xtask coverage [--target T] [cargo-llvm-cov options]`: line
//! coverage of the library's tests (all features) with `cargo-llvm-cov`.
//!
//! Coverage needs `-C instrument-coverage`, and that needs the profiler
//! runtime (`profiler_builtins`) in the target's standard library. Rust's
//! distributed standard library for `x86_64-pc-windows-gnu` ships none (the
//! MSVC one does): building for it fails with `error[E0463]: can't find
//! crate for profiler_builtins` (measured with Rust 1.95). The MSVC target,
//! which has it, cannot link on Linux without Microsoft's SDK libraries. So
//! under Wine coverage cannot be measured, and this command says so and
//! fails rather than report a number it did not measure; natively on
//! Windows (MSVC target) it runs. Whether the runtime is there is checked,
//! not assumed, so a toolchain that ships it is used.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::env::{self, Result};
use crate::setup;
use crate::{LIB, WIN_TARGET};

/// Whether the installed standard library for `target` carries the profiler runtime.
fn has_profiler_runtime(target: &str) -> Result<bool> {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("rustc --print sysroot: {e}"))?;
    let lib = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("lib/rustlib").join(target).join("lib");
    let entries = std::fs::read_dir(&lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    Ok(entries.filter_map(|e| e.ok()).any(|e| e.file_name().to_string_lossy().starts_with("libprofiler_builtins-")))
}

pub fn coverage(target: Option<&str>, rest: &[String]) -> Result<()> {
    let p = setup::setup(target)?;
    let checked = p.target.as_deref().unwrap_or(if cfg!(windows) { "" } else { WIN_TARGET });
    if !checked.is_empty() && !has_profiler_runtime(checked)? {
        return Err(format!(
            "coverage cannot be measured for {checked}: its standard library has no profiler runtime \
             (profiler_builtins), which -C instrument-coverage needs; Rust does not ship one for the \
             windows-gnu target. Run `cargo xtask coverage` natively on Windows for the MSVC target."
        ));
    }
    let have = env::cargo()
        .args(["llvm-cov", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        return Err(
            "cargo-llvm-cov is not installed: cargo install cargo-llvm-cov && rustup component add llvm-tools-preview"
                .into(),
        );
    }
    let mut cmd = env::cargo();
    cmd.args(["llvm-cov", "nextest", "-p", LIB, "--all-features"]);
    if let Some(t) = &p.target {
        cmd.args(["--target", t]);
    }
    let status = cmd.args(rest).stdin(Stdio::null()).status().map_err(|e| format!("cargo llvm-cov: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("cargo llvm-cov failed: {status}")) }
}
