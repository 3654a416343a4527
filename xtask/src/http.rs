//! `examples/http_server` checked with a real client: curl, in
//! `cargo xtask test`. The server runs as users run it (under Wine on
//! Linux), is found by its `listening on ADDR` line and stopped through its
//! named stop event (`http_server --stop NAME`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::LIB;
use crate::setup::{self, Platform, Result};

/// How long the server may take to start, and to stop.
const PATIENCE: Duration = Duration::from_secs(60);
/// The body of `GET /` (examples/http_server/service.rs `HELLO`).
const HELLO: &str = "hello from the pool\n";

/// Builds the example; the exe.
pub fn build(p: &Platform, profile: &str) -> Result<PathBuf> {
    let mut args = vec!["build", "--quiet", "-p", LIB, "--example", "http_server", "--features", "hyper"];
    if profile == "release" {
        args.push("--release");
    }
    let status = p.cargo(&args).stdin(Stdio::null()).status().map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err("building examples/http_server failed".into());
    }
    Ok(p.bin_dir(profile)?.join("examples").join("http_server.exe"))
}

/// The exe run as this platform runs it: under Wine on Linux.
fn command(p: &Platform, exe: &Path) -> Command {
    if p.target.is_some() && !cfg!(windows) {
        let mut c = setup::wine_run();
        c.arg(exe);
        c
    } else {
        Command::new(exe)
    }
}

/// A running `http_server`.
pub struct Served {
    pub addr: String,
    child: Child,
    stop_event: String,
    stop_with: Command,
}

/// Starts `exe` on a free loopback port with a stop event of its own.
pub fn start(p: &Platform, exe: &Path) -> Result<Served> {
    let stop_event = format!("Local\\windows-threadpool-xtask-http-{}", std::process::id());
    let mut child = command(p, exe)
        .args(["127.0.0.1:0", "--stop-event", &stop_event])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", exe.display()))?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(std::io::Result::ok) {
            println!("http_server: {line}");
            let _ = tx.send(line);
        }
    });
    let mut stop_with = command(p, exe);
    stop_with.args(["--stop", &stop_event]).stdin(Stdio::null());
    let mut served = Served { addr: String::new(), child, stop_event, stop_with };
    let deadline = Instant::now() + PATIENCE;
    while served.addr.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(addr) = line.strip_prefix("listening on ") {
                    served.addr = addr.trim().to_string();
                }
            }
            Err(_) => return Err(format!("http_server printed no `listening on` line within {PATIENCE:?}")),
        }
    }
    Ok(served)
}

impl Served {
    /// Sets the stop event and waits for the server to exit, successfully.
    pub fn stop(mut self) -> Result<()> {
        let status = self.stop_with.status().map_err(|e| format!("http_server --stop: {e}"))?;
        if !status.success() {
            return Err(format!("http_server --stop {} failed: {status}", self.stop_event));
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            match self.child.try_wait().map_err(|e| format!("waiting for http_server: {e}"))? {
                Some(status) if status.success() => return Ok(()),
                Some(status) => return Err(format!("http_server exited with {status}")),
                None if Instant::now() > deadline => {
                    return Err(format!("http_server did not stop within {PATIENCE:?}"));
                }
                None => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

impl Drop for Served {
    /// A server not stopped (a check failed): stop it, or end it.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = self.stop_with.status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `curl` with a time limit, failing on an HTTP error; its stdout.
fn curl(curl: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(curl)
        .args(["-sS", "--fail", "--max-time", "30"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    if !out.status.success() {
        return Err(format!("curl {args:?}: {} {}", out.status, String::from_utf8_lossy(&out.stderr)));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("curl {args:?}: {e}"))
}

/// The example under curl: `GET /` twice on one kept-alive connection, a
/// 256 KiB `POST /echo` echoed byte for byte, then a graceful stop
/// through the named event. A summary line.
pub fn curl_check(p: &Platform, curl_exe: &Path) -> Result<String> {
    let exe = build(p, "debug")?;
    let dir = setup::layout()?.target_dir.join("xtask-http");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (body, back) = (dir.join("body.bin"), dir.join("echoed.bin"));
    let data: Vec<u8> = (0..256 * 1024).map(|i: usize| (i % 251) as u8 ^ (i / 251) as u8).collect();
    std::fs::write(&body, &data).map_err(|e| format!("{}: {e}", body.display()))?;
    let _ = std::fs::remove_file(&back);

    let served = start(p, &exe)?;
    let url = format!("http://{}/", served.addr);
    let twice = curl(curl_exe, &["-w", "connects=%{num_connects}\n", &url, &url])?;
    let expected = format!("{HELLO}connects=1\n{HELLO}connects=0\n");
    if twice != expected {
        return Err(format!("GET / twice: {twice:?}, expected {expected:?} (the second on the same connection)"));
    }
    let echo_url = format!("http://{}/echo", served.addr);
    let data_arg = format!("@{}", body.display());
    let out_arg = back.display().to_string();
    curl(
        curl_exe,
        &["--data-binary", &data_arg, "-H", "Content-Type: application/octet-stream", "-o", &out_arg, &echo_url],
    )?;
    let echoed = std::fs::read(&back).map_err(|e| format!("{}: {e}", back.display()))?;
    if echoed != data {
        return Err(format!("POST /echo: {} bytes came back of {}, or they differ", echoed.len(), data.len()));
    }
    served.stop()?;
    Ok("curl: GET / twice on one connection, a 256 KiB POST /echo, stopped by its named event".into())
}
