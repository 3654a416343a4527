//! `examples/pipe_service.rs` under the service control manager, in
//! `cargo xtask test`: installed with `sc create` (Wine's, in the test
//! prefix; on Windows the system's, which needs an elevated shell), started
//! with `sc start`, asked over its pipe and over HTTP, stopped with
//! `sc stop`, and checked to be reported stopped with exit code 0; deleted
//! whatever happened. Every wait is bounded.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::LIB;
use crate::env::{self, Platform, Result};

/// How long the service may take to reach a state `sc` was asked for.
const PATIENCE: Duration = Duration::from_secs(60);

/// `sc` with `args`, as this platform runs it; its output.
fn sc(p: &Platform, args: &[&str]) -> Result<String> {
    let mut c = if p.under_wine() {
        let mut c = env::wine_cmd("wine");
        c.arg("sc");
        c
    } else {
        Command::new("sc.exe")
    };
    let out = c.args(args).stdin(Stdio::null()).output().map_err(|e| format!("sc {args:?}: {e}"))?;
    Ok(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The number after `field` in `sc query`'s output (`STATE : 4 RUNNING`).
fn field(query: &str, field: &str) -> Option<u32> {
    let line = query.lines().find(|l| l.trim_start().starts_with(field))?;
    line.split_once(':')?.1.split_whitespace().next()?.parse().ok()
}

/// `SERVICE_STOPPED` and `SERVICE_RUNNING`, as `sc query` prints them.
const STOPPED: u32 = 1;
const RUNNING: u32 = 4;

/// Polls `sc query` until the service's state is `state`; the last output.
fn wait_for(p: &Platform, name: &str, state: u32) -> Result<String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let query = sc(p, &["query", name])?;
        if field(&query, "STATE") == Some(state) {
            return Ok(query);
        }
        if Instant::now() >= deadline {
            return Err(format!("the service did not reach state {state} within {PATIENCE:?}:\n{query}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Deletes the service when dropped, stopping it first if it runs.
struct Installed<'a> {
    p: &'a Platform,
    name: String,
}

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        let _ = sc(self.p, &["stop", &self.name]);
        let _ = wait_for(self.p, &self.name, STOPPED);
        let _ = sc(self.p, &["delete", &self.name]);
    }
}

/// A loopback port free a moment ago.
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("a free port: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// The exe's Windows path (Wine's `Z:` drive on Linux).
fn windows_path(p: &Platform, exe: &Path) -> Result<String> {
    if !p.under_wine() {
        return Ok(exe.display().to_string());
    }
    let out = env::wine_cmd("winepath").arg("-w").arg(exe).output().map_err(|e| format!("winepath: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The whole check: a summary line, `Err` with what went wrong, or `None`
/// where the system refused to install a service (`sc create` in a shell
/// that is not elevated, on Windows): skipped, and said so.
pub fn check(p: &Platform, curl_exe: &Path) -> Result<Option<String>> {
    let status = p
        .cargo(&["build", "--quiet", "-p", LIB, "--example", "pipe_service", "--features", "hyper"])
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err("building examples/pipe_service.rs failed".into());
    }
    let exe = p.bin_dir("debug")?.join("examples").join("pipe_service.exe");
    let name = format!("wtp-pipe-service-{}", std::process::id());
    let pipe = format!(r"\\.\pipe\{name}");
    let addr = format!("127.0.0.1:{}", free_port()?);
    let bin_path = format!("\"{}\" --pipe {pipe} --addr {addr}", windows_path(p, &exe)?);

    let created = sc(p, &["create", &name, "binPath=", &bin_path])?;
    if !p.under_wine() && created.contains("FAILED 5") {
        println!(
            "xtask test: SKIPPED examples/pipe_service under the SCM: sc create needs an elevated shell: {created}"
        );
        return Ok(None);
    }
    if !created.contains("SUCCESS") && sc(p, &["query", &name]).map(|q| field(&q, "STATE").is_none())? {
        return Err(format!("sc create: {created}"));
    }
    let installed = Installed { p, name: name.clone() };
    sc(p, &["start", &name])?;
    wait_for(p, &name, RUNNING)?;

    let mut client = if p.under_wine() { env::wine_run() } else { Command::new(&exe) };
    if p.under_wine() {
        client.arg(&exe);
    }
    let out = client.args(["--client", &pipe, "ping"]).stdin(Stdio::null()).output().map_err(|e| e.to_string())?;
    let answer = String::from_utf8_lossy(&out.stdout);
    if answer.trim() != "pong: ping" {
        return Err(format!(
            "over the pipe: {answer:?}, expected \"pong: ping\" ({})",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let out = Command::new(curl_exe)
        .args(["--silent", "--show-error", "--max-time", "30", &format!("http://{addr}/")])
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    let body = String::from_utf8_lossy(&out.stdout);
    if body != "hello from the service\n" {
        return Err(format!("over HTTP: {body:?} ({})", String::from_utf8_lossy(&out.stderr)));
    }

    sc(p, &["stop", &name])?;
    let stopped = wait_for(p, &name, STOPPED)?;
    let codes = (field(&stopped, "WIN32_EXIT_CODE"), field(&stopped, "SERVICE_EXIT_CODE"));
    if codes != (Some(0), Some(0)) {
        return Err(format!("stopped with exit codes {codes:?}, expected 0 and 0:\n{stopped}"));
    }
    drop(installed);
    if field(&sc(p, &["query", &name])?, "STATE").is_some() {
        return Err(format!("sc delete left the service {name} installed"));
    }
    Ok(Some(format!(
        "examples/pipe_service under the SCM: started, answered over {pipe} and http://{addr}/, stopped with exit \
         code 0, deleted"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sc_query_fields_are_read() {
        let q = "SERVICE_NAME: x\n        TYPE               : 10  WIN32_OWN_PROCESS\n        STATE              : 4  RUNNING\n        WIN32_EXIT_CODE    : 0  (0x0)\n        SERVICE_EXIT_CODE  : 101  (0x65)\n";
        assert_eq!(field(q, "STATE"), Some(4));
        assert_eq!(field(q, "WIN32_EXIT_CODE"), Some(0));
        assert_eq!(field(q, "SERVICE_EXIT_CODE"), Some(101));
        assert_eq!(field(q, "CHECKPOINT"), None);
    }
}
