//! `examples/http_server` checked with real clients: curl in `cargo xtask
//! test`, a wrk soak in `cargo xtask stress`, and wrk against it and the
//! same service on tokio (`wtp-bench`'s `tokio-http`) in `cargo xtask
//! bench`. A server runs as users run it (under Wine on Linux), is found by
//! its `listening on ADDR` line and stopped through its named stop event
//! (`http_server --stop NAME`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::LIB;
use crate::env::{self, Platform, Result};

/// How long the server may take to start, and to stop.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);
/// The body of `GET /` (examples/http_server/service.rs `HELLO`).
pub(crate) const HELLO: &str = "hello from the pool\n";

/// Builds the example; the exe.
pub fn build(p: &Platform, profile: &str) -> Result<PathBuf> {
    cargo_build(p, profile, &["-p", LIB, "--example", "http_server", "--features", "hyper"], "examples/http_server")?;
    Ok(p.bin_dir(profile)?.join("examples").join("http_server.exe"))
}

/// Builds `wtp-bench`'s `tokio-http` in release; the exe.
pub(crate) fn build_tokio(p: &Platform) -> Result<PathBuf> {
    cargo_build(p, "release", &["-p", "wtp-bench", "--bin", "tokio-http"], "tokio-http")?;
    Ok(p.bin_dir("release")?.join("tokio-http.exe"))
}

pub(crate) fn cargo_build(p: &Platform, profile: &str, what: &[&str], name: &str) -> Result<()> {
    let mut args = [&["build", "--quiet"][..], what].concat();
    if profile == "release" {
        args.push("--release");
    }
    let status = p.cargo(&args).stdin(Stdio::null()).status().map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err(format!("building {name} failed"));
    }
    Ok(())
}

/// The exe run as this platform runs it: under Wine on Linux.
fn command(p: &Platform, exe: &Path) -> Command {
    if p.under_wine() {
        let mut c = env::wine_run();
        c.arg(exe);
        c
    } else {
        Command::new(exe)
    }
}

/// A running `http_server`.
pub struct Served {
    pub addr: String,
    /// The Linux process running the server under Wine (see [`wine_process`]).
    pub(crate) pid: Option<u32>,
    child: Child,
    stop_event: String,
    stop_with: Command,
}

/// Starts the example `exe` on a free loopback port with a stop event of
/// its own.
pub fn start(p: &Platform, exe: &Path) -> Result<Served> {
    start_server(p, exe, exe, &[])
}

/// Starts `server` (the example, or `tokio-http`) with `extra` arguments on
/// a free loopback port and a stop event of its own, which the example
/// `example` sets.
pub(crate) fn start_server(p: &Platform, server: &Path, example: &Path, extra: &[&str]) -> Result<Served> {
    static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stop_event = format!("Local\\windows-threadpool-xtask-http-{}-{n}", std::process::id());
    let exe = server;
    let mut child = command(p, exe)
        .args(["127.0.0.1:0", "--stop-event", &stop_event])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", exe.display()))?;
    let stdout = child.stdout.take().expect("piped");
    let name = exe.file_stem().map_or("server".into(), |n| n.to_string_lossy().into_owned());
    let (tx, rx) = mpsc::channel();
    let printed = name.clone();
    std::thread::spawn(move || {
        let name = printed;
        for line in BufReader::new(stdout).lines().map_while(std::io::Result::ok) {
            println!("{name}: {line}");
            let _ = tx.send(line);
        }
    });
    let mut stop_with = command(p, example);
    stop_with.args(["--stop", &stop_event]).stdin(Stdio::null());
    let mut served = Served { addr: String::new(), pid: None, child, stop_event, stop_with };
    let deadline = Instant::now() + PATIENCE;
    while served.addr.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(addr) = line.strip_prefix("listening on ") {
                    served.addr = addr.trim().to_string();
                }
            }
            Err(_) => return Err(format!("{name} printed no `listening on` line within {PATIENCE:?}")),
        }
    }
    if p.under_wine() {
        served.pid = wine_process(exe, &["--stop-event", &served.stop_event]);
    }
    Ok(served)
}

impl Served {
    /// Ends the server at once, with no graceful stop: SIGKILL to its Wine
    /// process, then waits for the runner to see it go.
    #[cfg(target_os = "linux")]
    pub(crate) fn kill(mut self) -> Result<()> {
        let pid = self.pid.ok_or("no Wine process to kill")?;
        let pid = libc::pid_t::try_from(pid).map_err(|e| e.to_string())?;
        // SAFETY: kill(2) takes any pid; this one is the server's, which this process started.
        if unsafe { libc::kill(pid, libc::SIGKILL) } != 0 {
            return Err(format!("kill {pid}: {}", std::io::Error::last_os_error()));
        }
        let deadline = Instant::now() + PATIENCE;
        while self.child.try_wait().map_err(|e| e.to_string())?.is_none() {
            if Instant::now() > deadline {
                return Err(format!("the runner of killed process {pid} did not exit within {PATIENCE:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

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
pub(crate) fn curl(curl: &Path, args: &[&str]) -> Result<String> {
    curl_with(curl, &["--fail"], args)
}

/// `curl -sS --max-time 30 FLAGS ARGS`, failing on a failed transfer; its stdout.
pub(crate) fn curl_with(curl: &Path, flags: &[&str], args: &[&str]) -> Result<String> {
    let out = Command::new(curl)
        .args(["-sS", "--max-time", "30"])
        .args(flags)
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
    let dir = env::layout()?.target_dir.join("xtask-http");
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

// ---- wrk: the soak and the benchmark -----------------------------------------

/// What wrk reported of one run.
#[derive(Debug, Default, PartialEq)]
pub struct WrkRun {
    pub requests: u64,
    pub per_second: f64,
    /// Mean and largest latency, in milliseconds.
    pub mean_ms: f64,
    pub max_ms: f64,
    /// Connect, read, write and timeout errors, summed (wrk prints the line only when one is non-zero).
    pub socket_errors: u64,
    /// Responses other than 2xx and 3xx (printed only when non-zero).
    pub non_2xx: u64,
}

/// A wrk latency such as `3.01ms`, `250.00us` or `1.20s`, in milliseconds.
fn wrk_ms(text: &str) -> Option<f64> {
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60e3)
    } else {
        (text.strip_suffix('s')?, 1e3)
    };
    number.parse::<f64>().ok().map(|n| n * scale)
}

/// wrk's report (`wrk` 4.x's text output); `None` if it is not one.
pub fn parse_wrk(out: &str) -> Option<WrkRun> {
    let mut run = WrkRun::default();
    let (mut latency, mut rate, mut count) = (false, false, false);
    for line in out.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Latency", mean, _stdev, max, ..] => {
                (run.mean_ms, run.max_ms) = (wrk_ms(mean)?, wrk_ms(max)?);
                latency = true;
            }
            ["Requests/sec:", n] => {
                run.per_second = n.parse().ok()?;
                rate = true;
            }
            [n, "requests", "in", ..] => {
                run.requests = n.parse().ok()?;
                count = true;
            }
            ["Socket", "errors:", rest @ ..] => {
                let numbers = rest.iter().map(|w| w.trim_end_matches(',')).filter_map(|w| w.parse::<u64>().ok());
                run.socket_errors = numbers.sum();
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => run.non_2xx = n.parse().ok()?,
            _ => {}
        }
    }
    (latency && rate && count).then_some(run)
}

/// `wrk -t1 -cCONNS -dSECSs --timeout 10s http://ADDR/`, bounded in time by wrk itself.
pub(crate) fn wrk(wrk: &Path, addr: &str, conns: u32, secs: u32) -> Result<WrkRun> {
    let out = Command::new(wrk)
        .args(["-t1", &format!("-c{conns}"), &format!("-d{secs}s"), "--timeout", "10s"])
        .arg(format!("http://{addr}/"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("wrk failed ({}): {text}{}", out.status, String::from_utf8_lossy(&out.stderr)));
    }
    parse_wrk(&text).ok_or_else(|| format!("wrk printed no report: {text}"))
}

/// One plain `GET path` on a connection of its own; the body.
fn get(addr: &str, path: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| format!("connecting to {addr}: {e}"))?;
    s.set_read_timeout(Some(PATIENCE)).map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").map_err(|e| e.to_string())?;
    let mut response = String::new();
    s.read_to_string(&mut response).map_err(|e| format!("GET {path}: {e}"))?;
    match response.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
        _ => Err(format!("GET {path}: {response:?}")),
    }
}

/// The numbers of the example's `GET /stats` line (`key=value ...`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerStats {
    pub accepted: u64,
    pub ended: u64,
    pub threads: u64,
    pub handles: u64,
    pub private_bytes: u64,
    pub handle_slack: u64,
    pub private_bytes_slack: u64,
}

pub fn parse_stats(line: &str) -> Option<ServerStats> {
    let field = |key: &str| {
        line.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('=')).and_then(|v| v.parse().ok())
    };
    Some(ServerStats {
        accepted: field("accepted")?,
        ended: field("ended")?,
        threads: field("threads")?,
        handles: field("handles")?,
        private_bytes: field("private_bytes")?,
        handle_slack: field("handle_slack")?,
        private_bytes_slack: field("private_bytes_slack")?,
    })
}

/// How long the thread count must hold still before a baseline is read:
/// longer than an idle pool thread lives (Wine: 5 s).
pub(crate) const THREADS_STILL: Duration = Duration::from_secs(7);
/// How often [`settled_stats`] looks.
pub(crate) const POLL: Duration = Duration::from_millis(250);

/// What [`settled_stats`] waits for besides the connections.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Threads {
    /// The thread count unchanged for [`THREADS_STILL`] (a baseline).
    Still,
    /// At most this many threads.
    AtMost(u64),
}

/// The server's stats once every connection but the asking one has ended
/// (wrk's have closed) and its threads are as `threads` asks, within
/// [`PATIENCE`]. Each pool thread holds private bytes (its stack, about
/// 1 MiB), and the pool keeps the threads a burst made until they idle out,
/// so private bytes compare only at the same threads.
///
/// The threads are counted without a request where the platform shows
/// them from outside (Linux: the Wine process's tasks). A request wakes
/// the pool's idle threads, and Wine wakes them in turn, each living 5 s
/// past its last wake: asking every [`POLL`] kept 17 to 24 of them alive,
/// a number that drifted by one or two between a baseline and its check.
/// Left alone, they idle out to the same few every time.
fn settled_stats(served: &Served, threads: Threads) -> Result<ServerStats> {
    settled_stats_by(served, threads, &|| server_stats(&served.addr))
}

/// Waits until every connection but the one asking for the stats has
/// ended, by `fetch`, at most until `deadline`; the stats then.
pub(crate) fn all_ended_by(fetch: &dyn Fn() -> Result<ServerStats>, deadline: Instant) -> Result<ServerStats> {
    loop {
        let stats = fetch()?;
        if stats.ended + 1 == stats.accepted {
            return Ok(stats);
        }
        if Instant::now() > deadline {
            return Err(format!("connections: {stats:?}"));
        }
        std::thread::sleep(POLL);
    }
}

/// [`settled_stats`] with the stats read by `fetch` (over TLS, say).
pub(crate) fn settled_stats_by(
    served: &Served,
    threads: Threads,
    fetch: &dyn Fn() -> Result<ServerStats>,
) -> Result<ServerStats> {
    let deadline = Instant::now() + PATIENCE;
    let not_settled = |what: String| format!("not settled {PATIENCE:?} after the load ({threads:?}): {what}");
    all_ended_by(fetch, deadline).map_err(not_settled)?;
    let count = || match served.pid {
        Some(pid) => thread_count(pid),
        None => fetch().map(|s| s.threads),
    };
    let mut still_since: Option<(u64, Instant)> = None;
    loop {
        let n = count()?;
        let settled = match threads {
            Threads::AtMost(most) => n <= most,
            Threads::Still => match still_since {
                Some((m, since)) if m == n => since.elapsed() >= THREADS_STILL,
                _ => {
                    still_since = Some((n, Instant::now()));
                    false
                }
            },
        };
        if settled {
            return Ok(ServerStats { threads: n, ..fetch()? });
        }
        if Instant::now() > deadline {
            return Err(not_settled(format!("{n} threads")));
        }
        std::thread::sleep(POLL);
    }
}

pub(crate) fn server_stats(addr: &str) -> Result<ServerStats> {
    let body = get(addr, "/stats")?;
    parse_stats(&body).ok_or_else(|| format!("GET /stats: {body:?}"))
}

/// The threads of process `pid` (Linux's `/proc`).
pub(crate) fn thread_count(pid: u32) -> Result<u64> {
    let dir = format!("/proc/{pid}/task");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{dir}: {e}"))?;
    Ok(entries.count() as u64)
}

/// The Linux process that runs the Wine process started with `args` (the
/// one whose command line is the exe's, not the runner's); `None` if none
/// is found (or there is no `/proc`).
fn wine_process(exe: &Path, args: &[&str]) -> Option<u32> {
    let name = exe.file_name()?.to_str()?;
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
        let mut words = cmdline.split(|&b| b == 0).map(String::from_utf8_lossy);
        let first = words.next()?;
        let rest: Vec<_> = words.collect();
        let ours = first.ends_with(name) && args.iter().all(|a| rest.iter().any(|w| w == a));
        ours.then_some(pid)
    })
}

/// Where a soak's counts moved beyond the leak checks' slack; empty if nowhere.
pub fn leaked(before: &ServerStats, after: &ServerStats) -> Vec<String> {
    let mut found = Vec::new();
    if after.handles > before.handles + before.handle_slack {
        found.push(format!("handles {} -> {} (slack {})", before.handles, after.handles, before.handle_slack));
    }
    if after.private_bytes > before.private_bytes + before.private_bytes_slack {
        found.push(format!(
            "private bytes {} -> {} (slack {})",
            before.private_bytes, after.private_bytes, before.private_bytes_slack
        ));
    }
    found
}

/// Connections of the soak.
const SOAK_CONNS: u32 = 64;

/// What a soak's resources did, for its summary line.
pub(crate) fn moved(before: &ServerStats, after: &ServerStats) -> String {
    format!(
        "threads {} -> {}, handles {} -> {}, private bytes {} -> {}",
        before.threads, after.threads, before.handles, after.handles, before.private_bytes, after.private_bytes
    )
}

/// `cargo xtask stress`: `secs` of `wrk -c64` against the example (after a
/// warm-up of the same load): no socket error, no non-2xx, handles and
/// private bytes back within the leak checks' slack once wrk's connections
/// have closed, and the server answering after. A summary line.
pub fn soak(p: &Platform, wrk_exe: &Path, secs: u32) -> Result<String> {
    let exe = build(p, "release")?;
    let served = start_server(p, &exe, &exe, &["--stats"])?;
    if p.under_wine() && served.pid.is_none() {
        return Err("the server's Wine process was not found in /proc, to count its threads".into());
    }
    let addr = served.addr.clone();
    let warm = wrk(wrk_exe, &addr, SOAK_CONNS, 5)?;
    let before = settled_stats(&served, Threads::Still)?;
    let run = wrk(wrk_exe, &addr, SOAK_CONNS, secs)?;
    let after = settled_stats(&served, Threads::AtMost(before.threads))?;
    let hello = get(&addr, "/")?;
    served.stop()?;
    let mut failures = leaked(&before, &after);
    if run.socket_errors + warm.socket_errors != 0 {
        failures.push(format!("{} socket errors (warm-up {})", run.socket_errors, warm.socket_errors));
    }
    if run.non_2xx + warm.non_2xx != 0 {
        failures.push(format!("{} non-2xx responses (warm-up {})", run.non_2xx, warm.non_2xx));
    }
    if run.requests == 0 {
        failures.push("wrk completed no request".into());
    }
    if hello != HELLO {
        failures.push(format!("GET / after the soak answered {hello:?}"));
    }
    let summary = format!(
        "HTTP soak: {secs} s of wrk -c{SOAK_CONNS}: {} requests ({:.0}/s, mean {:.2} ms, max {:.1} ms), \
         {} socket errors, {} non-2xx; {}",
        run.requests,
        run.per_second,
        run.mean_ms,
        run.max_ms,
        run.socket_errors,
        run.non_2xx,
        moved(&before, &after)
    );
    if failures.is_empty() { Ok(summary) } else { Err(format!("{summary}: FAILED: {}", failures.join("; "))) }
}

/// The connection counts and seconds of each bench run (of this and
/// `https_load`'s).
pub(crate) const BENCH_CONNS: [u32; 2] = [16, 256];
pub(crate) const BENCH_SECS: u32 = 10;
/// Runs of each server at each count, alternated, after a warm-up of each.
pub(crate) const BENCH_ROUNDS: usize = 2;
/// Seconds of the unrecorded warm-up (the first burst of connections grows
/// each server's threads).
pub(crate) const WARM_UP_SECS: u32 = 3;

/// `cargo xtask bench`: the example (release) and `tokio-http` alternated
/// under `wrk -t1 -c16` and `-c256` for 10 s each, twice, after a warm-up
/// of each; a markdown table.
pub fn bench(p: &Platform, wrk_exe: &Path) -> Result<String> {
    let example = build(p, "release")?;
    let tokio = build_tokio(p)?;
    let servers = [start_server(p, &example, &example, &[])?, start_server(p, &tokio, &example, &[])?];
    let mut table = String::from(
        "| wrk -t1 -dNs | server | requests/s (each run) | mean latency ms (each run) | max latency ms (each run) | \
         requests/s ×tokio |\n|---|---|---|---|---|---|\n",
    );
    for conns in BENCH_CONNS {
        let mut runs: [Vec<WrkRun>; 2] = Default::default();
        for served in &servers {
            wrk(wrk_exe, &served.addr, conns, WARM_UP_SECS)?;
        }
        for _ in 0..BENCH_ROUNDS {
            for (i, served) in servers.iter().enumerate() {
                let run = wrk(wrk_exe, &served.addr, conns, BENCH_SECS)?;
                eprintln!("bench http: -c{conns} {}: {run:?}", ["pool", "tokio"][i]);
                runs[i].push(run);
            }
        }
        let mean = |r: &[WrkRun]| r.iter().map(|r| r.per_second).sum::<f64>() / r.len() as f64;
        let ratio = mean(&runs[0]) / mean(&runs[1]);
        for (i, name) in
            ["this crate (examples/http_server)", "tokio multi-thread + hyper (tokio-http)"].iter().enumerate()
        {
            let each = |f: fn(&WrkRun) -> f64, digits: usize| {
                runs[i].iter().map(|r| format!("{:.*}", digits, f(r))).collect::<Vec<_>>().join(", ")
            };
            let errors: u64 = runs[i].iter().map(|r| r.socket_errors + r.non_2xx).sum();
            let note = if errors == 0 { String::new() } else { format!(" ({errors} errors)") };
            table.push_str(&format!(
                "| -c{conns} -d{BENCH_SECS}s | {name}{note} | {} | {} | {} | {} |\n",
                each(|r| r.per_second, 0),
                each(|r| r.mean_ms, 2),
                each(|r| r.max_ms, 1),
                if i == 0 { format!("×{ratio:.2}") } else { "×1.00".into() }
            ));
        }
    }
    for served in servers {
        served.stop()?;
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As Debian's wrk 4.1.0 prints it.
    const REPORT: &str = "Running 10s test @ http://127.0.0.1:8080/
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.01ms    1.07ms  20.50ms   90.00%
    Req/Sec     5.00k   300.00     5.50k    70.00%
  50012 requests in 10.00s, 5.00MB read
  Socket errors: connect 1, read 2, write 0, timeout 4
  Non-2xx or 3xx responses: 5
Requests/sec:   5001.20
Transfer/sec:    512.00KB
";

    #[test]
    fn a_wrk_report_is_parsed() {
        let run = parse_wrk(REPORT).unwrap();
        assert_eq!(
            run,
            WrkRun { requests: 50012, per_second: 5001.2, mean_ms: 3.01, max_ms: 20.5, socket_errors: 7, non_2xx: 5 }
        );
        let clean: String =
            REPORT.lines().filter(|l| !l.contains("errors") && !l.contains("Non-2xx")).collect::<Vec<_>>().join("\n");
        let run = parse_wrk(&clean).unwrap();
        assert_eq!((run.socket_errors, run.non_2xx), (0, 0));
        assert_eq!(parse_wrk("unable to connect to 127.0.0.1:1 Connection refused"), None);
    }

    #[test]
    fn wrk_latencies_are_read_in_their_units() {
        assert_eq!(wrk_ms("250.00us"), Some(0.25));
        assert_eq!(wrk_ms("3.01ms"), Some(3.01));
        assert_eq!(wrk_ms("1.20s"), Some(1200.0));
        assert_eq!(wrk_ms("2.00m"), Some(120_000.0));
        assert_eq!(wrk_ms("fast"), None);
    }

    #[test]
    fn the_soak_compares_within_the_reported_slack() {
        let line = "accepted=66 ended=65 threads=9 handles=40 private_bytes=1000000 handle_slack=4 \
                    private_bytes_slack=4194304\n";
        let before = parse_stats(line).unwrap();
        assert_eq!((before.accepted, before.ended, before.threads, before.handles), (66, 65, 9, 40));
        let same = ServerStats { handles: 44, private_bytes: 1_000_000 + 4_194_304, ..before };
        assert!(leaked(&before, &same).is_empty());
        let more = ServerStats { handles: 45, private_bytes: 1_000_000 + 4_194_305, ..before };
        assert_eq!(leaked(&before, &more).len(), 2);
        assert_eq!(parse_stats("accepted=1 ended=0"), None);
    }

    /// The process found is the one whose command line is the exe's, not
    /// a parent's that names it among its arguments (as the Wine runner's
    /// does), and its threads are counted.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_wine_process_is_the_one_that_runs_the_exe() {
        // The sleep's length names it; `timeout` ends it should the test not.
        let arg = format!("20.{}", std::process::id());
        let mut parent = Command::new("timeout").args(["10", "sleep", &arg]).spawn().unwrap();
        let sleep = Path::new("/bin/sleep");
        let deadline = Instant::now() + Duration::from_secs(5);
        let found = loop {
            match wine_process(sleep, &[&arg]) {
                Some(pid) => break pid,
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                None => panic!("sleep {arg} not found"),
            }
        };
        assert_ne!(found, parent.id(), "the parent naming the exe among its arguments was taken");
        assert_eq!(thread_count(found).unwrap(), 1);
        assert_eq!(wine_process(sleep, &[&arg, "--absent"]), None);
        let _ = Command::new("kill").arg(found.to_string()).status();
        let _ = parent.wait();
    }
}
