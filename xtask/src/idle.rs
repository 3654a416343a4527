//! Memory per idle keep-alive connection, measured from outside as a user
//! would: a server exe (`examples/http_server` or `tokio-http`) runs under
//! Wine, and its Wine process's resident memory (`VmRSS` in
//! `/proc/PID/status`) is read once settled, before and with N connections
//! open, each having served one `GET /`. Then every connection is asked a
//! second `GET /`, all are closed, and the memory is read again.
//!
//! `cargo xtask bench` puts both servers' figures in `docs/benchmarks.md`;
//! `cargo xtask stress` (10,000 connections) and `cargo xtask test` (1,000)
//! check the example: every connection answers, and a second round of as
//! many connections leaves its open handles (`GET /stats`) within the leak
//! checks' slack of the first's. The figures themselves are printed, never
//! asserted, and so is the resident memory once the connections closed:
//! under Wine 8 it is mostly Wine's (its pool starts a thread for each
//! callback submitted while all are busy, up to 500, and the Linux process
//! keeps much of what those threads took; docs/wine.md). What the crate
//! itself keeps is checked inside the process by the hostile idle clients
//! (`tests/support/hostile.rs`: the Rust heap's blocks and the memory held).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::env::{self, Platform, Result};
use crate::http::{self, HELLO, PATIENCE, POLL, THREADS_STILL};

/// The request each connection sends (one response, kept alive).
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
/// The header read timeout both servers run with, in seconds. Under hyper
/// 1.x it is also how long a keep-alive connection may sit idle (their
/// default, 10 s, would close them before 10,000 are open and measured).
const HEADER_TIMEOUT_SECS: &str = "1800";
/// How long opening every connection may take: `tokio-http` under Wine 8
/// takes time quadratic in the connections (measured: 5,000 in 37 s,
/// 10,000 in 159 and 219 s on a loaded machine; the example 10,000 in 5 to
/// 13 s).
const OPEN_PATIENCE: Duration = Duration::from_secs(600);
/// How long the resident memory must hold still to count as settled.
const RSS_STILL: Duration = Duration::from_secs(1);
/// Files the server and this process may need beyond the sockets.
const FD_MARGIN: u64 = 256;
/// The largest answer read to a `GET /` (it is about 100 bytes).
const MAX_ANSWER: usize = 64 << 10;
/// Unanswered connections named in a report (the count is always given).
const NAMED: usize = 5;

/// Connections in `cargo xtask bench` and `cargo xtask stress`.
pub const BENCH_CONNS: usize = 10_000;
/// Connections in `cargo xtask test`.
pub const TEST_CONNS: usize = 1_000;

/// One reading of a process's memory and threads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Memory {
    /// Resident and peak resident bytes (`VmRSS`, `VmHWM`).
    pub rss: u64,
    pub hwm: u64,
    pub threads: u64,
}

/// `VmRSS` and `VmHWM` of a `/proc/PID/status` text, in bytes.
fn parse_status(text: &str) -> Option<(u64, u64)> {
    let kib = |key: &str| {
        let rest = text.lines().find_map(|l| l.strip_prefix(key))?;
        rest.trim().strip_suffix("kB")?.trim().parse::<u64>().ok().map(|k| k * 1024)
    };
    Some((kib("VmRSS:")?, kib("VmHWM:")?))
}

fn memory(pid: u32) -> Result<Memory> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let (rss, hwm) = parse_status(&text).ok_or_else(|| format!("{path}: no VmRSS or VmHWM"))?;
    Ok(Memory { rss, hwm, threads: http::thread_count(pid)? })
}

/// `pid`'s memory once settled, within [`PATIENCE`]: its resident bytes
/// unchanged for [`RSS_STILL`], and its threads at most `threads` (the
/// count of the reading before) or unchanged for [`THREADS_STILL`]. A burst
/// grows Wine's pool by up to hundreds of threads, about a megabyte
/// resident each, which idle out a few seconds later.
/// What a reading waits for besides a still resident memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Settle {
    /// The threads back to a count, or still for [`THREADS_STILL`] (an idle
    /// pool thread lives 5 s under Wine): the readings `bench` and `stress`
    /// report.
    Threads,
    /// Nothing more: `cargo xtask test`, whose check reads the example's
    /// handles and answers, not its memory, and prints the memory as read.
    Memory,
}

fn settled(pid: u32, threads: Option<u64>, settle: Settle) -> Result<Memory> {
    let deadline = Instant::now() + PATIENCE;
    let first = memory(pid)?;
    let (mut rss_since, mut threads_since) = ((first.rss, Instant::now()), (first.threads, Instant::now()));
    loop {
        let m = memory(pid)?;
        if m.rss != rss_since.0 {
            rss_since = (m.rss, Instant::now());
        }
        if m.threads != threads_since.0 {
            threads_since = (m.threads, Instant::now());
        }
        let few = settle == Settle::Memory
            || threads.is_some_and(|t| m.threads <= t)
            || threads_since.1.elapsed() >= THREADS_STILL;
        if rss_since.1.elapsed() >= RSS_STILL && few {
            return Ok(m);
        }
        if Instant::now() > deadline {
            return Err(format!("memory not settled within {PATIENCE:?} (threads at most {threads:?}): {m:?}"));
        }
        std::thread::sleep(POLL);
    }
}

/// The body of the complete `200` answer in `got`, `None` while it is
/// incomplete; an error for anything else.
pub(crate) fn answer_body(got: &[u8]) -> Result<Option<&[u8]>> {
    let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = String::from_utf8_lossy(&got[..end]);
    if !head.starts_with("HTTP/1.1 200 ") {
        return Err(format!("answered {:?}", head.lines().next().unwrap_or("")));
    }
    let length = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.trim().eq_ignore_ascii_case("content-length")))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .ok_or("an answer with no Content-Length")?;
    let body = &got[end + 4..];
    match body.len().cmp(&length) {
        std::cmp::Ordering::Less => Ok(None),
        std::cmp::Ordering::Equal => Ok(Some(body)),
        std::cmp::Ordering::Greater => Err(format!("{} bytes after a Content-Length of {length}", body.len())),
    }
}

/// Reads one whole answer to `GET /` from `c` by `deadline` (past it, a
/// read still waits 1 ms, for an answer already there): it must be `HELLO`.
fn read_hello(c: &mut TcpStream, deadline: Instant) -> Result<()> {
    let (mut got, mut chunk) = (Vec::new(), [0u8; 1024]);
    while got.len() <= MAX_ANSWER {
        if let Some(body) = answer_body(&got)? {
            return if body == HELLO.as_bytes() { Ok(()) } else { Err(format!("answered {body:?}")) };
        }
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        c.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        match c.read(&mut chunk) {
            Ok(0) => return Err("closed without answering".into()),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(format!("no answer by the deadline ({} bytes of it)", got.len()));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!("an answer longer than {MAX_ANSWER} bytes"))
}

/// Opens `n` connections to `addr`, sending `GET /` on each as it opens,
/// then reads every answer, by `deadline`; the connections that failed,
/// with why, by index.
fn open(addr: SocketAddr, n: usize, deadline: Instant) -> (Vec<TcpStream>, Vec<(usize, String)>) {
    let opened: Vec<Result<TcpStream>> = (0..n)
        .map(|_| {
            let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            let mut c = TcpStream::connect_timeout(&addr, left).map_err(|e| format!("connecting: {e}"))?;
            c.set_write_timeout(Some(PATIENCE)).map_err(|e| e.to_string())?;
            c.write_all(REQUEST).map(|()| c).map_err(|e| format!("sending: {e}"))
        })
        .collect();
    let (mut streams, mut failed) = (Vec::with_capacity(n), Vec::new());
    for (i, c) in opened.into_iter().enumerate() {
        match c.and_then(|mut c| read_hello(&mut c, deadline).map(|()| c)) {
            Ok(c) => streams.push(c),
            Err(e) => failed.push((i, e)),
        }
    }
    (streams, failed)
}

/// Sends `GET /` again on every connection, then reads each answer by
/// `deadline`; the ones that did not answer, with why, by index.
fn ask_again(conns: &mut [TcpStream], deadline: Instant) -> Vec<(usize, String)> {
    let sent: Vec<Result<()>> =
        conns.iter_mut().map(|c| c.write_all(REQUEST).map_err(|e| format!("sending: {e}"))).collect();
    conns
        .iter_mut()
        .zip(sent)
        .enumerate()
        .filter_map(|(i, (c, sent))| sent.and_then(|()| read_hello(c, deadline)).err().map(|e| (i, e)))
        .collect()
}

/// `(index, why)` pairs as one line: how many, and the first few.
fn named(failed: &[(usize, String)]) -> String {
    let first: Vec<String> = failed.iter().take(NAMED).map(|(i, e)| format!("#{i}: {e}")).collect();
    format!("{} ({}{})", failed.len(), first.join("; "), if failed.len() > NAMED { "; ..." } else { "" })
}

/// The Wine server of the project's prefix: the process whose working
/// directory is named after the prefix's device and inode, in hex (Wine's
/// `server-DEV-INODE`).
#[cfg(target_os = "linux")]
fn wine_server() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let prefix = std::fs::metadata(env::wine_prefix()).ok()?;
    let name = format!("server-{:x}-{:x}", prefix.dev(), prefix.ino());
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let cwd = std::fs::read_link(entry.path().join("cwd")).ok()?;
        (cwd.file_name()? == name.as_str()).then_some(pid)
    })
}

/// No `/proc` to look in.
#[cfg(not(target_os = "linux"))]
fn wine_server() -> Option<u32> {
    None
}

/// Open files and the soft limit on them of the process `/proc/<proc_dir>`.
fn files(proc_dir: &str) -> Result<(u64, u64)> {
    let open = std::fs::read_dir(format!("/proc/{proc_dir}/fd")).map_err(|e| format!("/proc/{proc_dir}/fd: {e}"))?;
    let limits = std::fs::read_to_string(format!("/proc/{proc_dir}/limits")).map_err(|e| e.to_string())?;
    let soft = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("/proc/{proc_dir}/limits: no open-file limit"))?;
    Ok((open.count() as u64, soft))
}

/// Fails unless this process and the Wine server each have room for
/// `conns` more sockets: under Wine each socket is an open file of the
/// server's (measured: one per connection), and of this process, the client.
/// Waits up to [`PATIENCE`] for the server's room: it was still releasing
/// a killed `tokio-http`'s 10,000 sockets when the next run began.
fn check_files(conns: usize) -> Result<()> {
    let need = conns as u64 + FD_MARGIN;
    let (open, soft) = files("self")?;
    if soft.saturating_sub(open) < need {
        return Err(format!(
            "this process may open {soft} files and has {open} open: too few for {conns} sockets \
             (raise the hard limit, `ulimit -Hn`)"
        ));
    }
    let server = wine_server().ok_or("the prefix's Wine server was not found in /proc")?;
    let t = Instant::now();
    let (mut open, mut soft) = files(&server.to_string())?;
    while soft.saturating_sub(open) < need && t.elapsed() < PATIENCE {
        std::thread::sleep(POLL);
        (open, soft) = files(&server.to_string())?;
    }
    if t.elapsed() >= POLL {
        eprintln!("idle: waited {:.1} s for the Wine server's open files to fall to {open}", t.elapsed().as_secs_f64());
    }
    if soft.saturating_sub(open) < need {
        return Err(format!(
            "the Wine server (pid {server}) may open {soft} files and has {open} open {PATIENCE:?} on: too few for {conns} sockets. \
             It keeps the limit of the process that started it; `cargo xtask setup` raises its own to the hard \
             limit first, so end this server (`WINEPREFIX={} wineserver -k`, which ends every Wine process of the \
             prefix) and run again",
            env::wine_prefix().display()
        ));
    }
    Ok(())
}

/// Which server runs, and how far the run goes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Depth {
    /// Up to the reading with every connection idle (`tokio-http`: under
    /// Wine 8 a second request on each of thousands of idle connections
    /// takes minutes, see `docs/benchmarks.md`).
    Idle,
    /// Then a second `GET /` on every connection, and the reading after
    /// they all closed (the example, which answers `GET /stats`).
    Answers,
    /// Then a second round of as many connections, each asked twice and
    /// closed: the reading after it must be within the leak slack of the
    /// one after the first (the example).
    Again,
}

/// What one run measured.
#[derive(Debug)]
pub struct IdleRun {
    pub conns: usize,
    pub before: Memory,
    /// Every connection open and idle, each having served one `GET /`.
    pub idle: Memory,
    /// Seconds to open every connection and read its answer.
    pub open_secs: f64,
    /// Connections that did not answer their second `GET /`, with why.
    pub unanswered: Vec<(usize, String)>,
    /// Connections of the second round that did not answer, with why.
    pub unanswered_again: Vec<(usize, String)>,
    /// Seconds for every connection's second `GET /`.
    pub again_secs: Option<f64>,
    /// Once every connection has closed.
    pub closed: Option<Memory>,
    /// Once the second round's have closed.
    pub closed_again: Option<Memory>,
    /// The example's open handles once the first round's connections
    /// closed, and once the second's did.
    pub handles: Option<(u64, u64)>,
    /// The leak checks' slack on handles, as the example reports it.
    pub slack: Option<u64>,
}

impl IdleRun {
    /// Resident bytes per idle connection.
    pub fn per_conn(&self) -> f64 {
        (self.idle.rss as f64 - self.before.rss as f64) / self.conns as f64
    }

    /// What the checks of `cargo xtask stress` and `test` fail on: a
    /// connection that did not answer, and memory a second round did not
    /// give back; empty if nothing.
    pub fn failures(&self) -> Vec<String> {
        let mut found = Vec::new();
        if !self.unanswered.is_empty() {
            found.push(format!("connections that did not answer: {}", named(&self.unanswered)));
        }
        if !self.unanswered_again.is_empty() {
            found.push(format!("second-round connections that did not answer: {}", named(&self.unanswered_again)));
        }
        if let (Some((closed, again)), Some(slack)) = (self.handles, self.slack)
            && again > closed + slack
        {
            found.push(format!("handles not back after the second round: {closed} -> {again} (slack {slack})"));
        }
        found
    }

    /// One line for a report.
    pub fn summary(&self, name: &str) -> String {
        let mut line = format!(
            "{name}: {} idle keep-alive connections: {:.1} KiB each (resident {} -> {} MiB, threads {} -> {}; \
             opened and answered in {:.1} s)",
            self.conns,
            self.per_conn() / 1024.0,
            mib(self.before.rss),
            mib(self.idle.rss),
            self.before.threads,
            self.idle.threads,
            self.open_secs
        );
        if let Some(secs) = self.again_secs {
            line.push_str(&format!(
                "; a second GET / on each: {} of {} answered in {secs:.1} s",
                self.conns - self.unanswered.len().min(self.conns),
                self.conns
            ));
        }
        for (what, m) in [("all closed", self.closed), ("a second round closed", self.closed_again)] {
            if let Some(m) = m {
                line.push_str(&format!("; {what}: {} MiB (peak {} MiB)", mib(m.rss), mib(m.hwm)));
            }
        }
        if let Some((first, again)) = self.handles {
            line.push_str(&format!("; handles once closed: {first}, after a second round {again}"));
        }
        line
    }
}

/// Bytes in MiB, one decimal.
fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// Why this platform cannot measure, if it cannot.
pub fn cannot(p: &Platform) -> Option<&'static str> {
    let linux_wine = p.under_wine() && cfg!(target_os = "linux");
    (!linux_wine).then_some("measured only under Wine on Linux, from /proc")
}

/// Runs `server` (the example, or `tokio-http` stopped by `example`) with
/// `conns` connections as far as `depth` goes.
pub fn measure(
    p: &Platform,
    server: &Path,
    example: &Path,
    conns: usize,
    depth: Depth,
    settle: Settle,
) -> Result<IdleRun> {
    if let Some(why) = cannot(p) {
        return Err(why.into());
    }
    check_files(conns)?;
    let mut args = vec!["--header-timeout", HEADER_TIMEOUT_SECS];
    if depth != Depth::Idle {
        args.push("--stats");
    }
    let name = server.file_stem().map_or("server".into(), |n| n.to_string_lossy().into_owned());
    let served = http::start_server(p, server, example, &args)?;
    match steps(&served, conns, depth, settle) {
        Ok((run, open)) => {
            eprintln!("idle: {}", run.summary(&name));
            if depth == Depth::Idle {
                // Killed, with its connections open: under Wine 8
                // `tokio-http` took minutes, the Wine server busy, over the
                // close or stop of thousands of connections.
                end(served)?;
            } else {
                served.stop()?;
            }
            drop(open);
            Ok(run)
        }
        Err(e) => {
            // A server in trouble may never take its stop event.
            let _ = end(served);
            Err(e)
        }
    }
}

/// [`measure`]'s steps against the running server; the connections still
/// open (at [`Depth::Idle`], all of them).
fn steps(served: &http::Served, conns: usize, depth: Depth, settle: Settle) -> Result<(IdleRun, Vec<TcpStream>)> {
    let pid = served.pid.ok_or("the server's Wine process was not found in /proc")?;
    let addr: SocketAddr = served.addr.parse().map_err(|e| format!("{}: {e}", served.addr))?;
    let before = settled(pid, None, settle)?;
    let t = Instant::now();
    let (mut streams, failed) = open(addr, conns, t + OPEN_PATIENCE);
    if !failed.is_empty() {
        return Err(format!("{} of {conns} connections failed to open and answer: {}", failed.len(), named(&failed)));
    }
    let open_secs = t.elapsed().as_secs_f64();
    let idle = settled(pid, Some(before.threads), settle)?;
    let mut run = IdleRun {
        conns,
        before,
        idle,
        open_secs,
        unanswered: Vec::new(),
        unanswered_again: Vec::new(),
        again_secs: None,
        closed: None,
        closed_again: None,
        handles: None,
        slack: None,
    };
    if depth == Depth::Idle {
        return Ok((run, streams));
    }
    let t = Instant::now();
    run.unanswered = ask_again(&mut streams, t + PATIENCE);
    run.again_secs = Some(t.elapsed().as_secs_f64());
    drop(streams);
    let closed = settled_closed(&served.addr, pid, idle.threads, settle)?;
    let first = http::server_stats(&served.addr)?;
    run.closed = Some(closed);
    if depth == Depth::Again {
        let (mut streams, failed) = open(addr, conns, Instant::now() + OPEN_PATIENCE);
        run.unanswered_again = failed;
        run.unanswered_again.extend(ask_again(&mut streams, Instant::now() + PATIENCE));
        drop(streams);
        run.closed_again = Some(settled_closed(&served.addr, pid, closed.threads, settle)?);
        let again = http::server_stats(&served.addr)?;
        run.handles = Some((first.handles, again.handles));
        run.slack = Some(again.handle_slack);
    }
    Ok((run, Vec::new()))
}

#[cfg(target_os = "linux")]
fn end(served: http::Served) -> Result<()> {
    served.kill()
}

/// Never reached: [`measure`] runs on Linux only.
#[cfg(not(target_os = "linux"))]
fn end(served: http::Served) -> Result<()> {
    served.stop()
}

/// The memory once the example has ended every connection but the one
/// asking (its `GET /stats`), then settled.
fn settled_closed(addr: &str, pid: u32, threads: u64, settle: Settle) -> Result<Memory> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let stats = http::server_stats(addr)?;
        if stats.ended + 1 == stats.accepted {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("connections not ended {PATIENCE:?} after the client closed them: {stats:?}"));
        }
        std::thread::sleep(POLL);
    }
    settled(pid, Some(threads), settle)
}

/// The example's run, as `cargo xtask stress` (release, [`BENCH_CONNS`])
/// and `test` (debug, [`TEST_CONNS`]) check it: a summary line, or the
/// failures.
pub fn check(p: &Platform, profile: &str, conns: usize, settle: Settle) -> Result<String> {
    let exe = http::build(p, profile)?;
    let run = measure(p, &exe, &exe, conns, Depth::Again, settle)?;
    let summary = run.summary(&format!("examples/http_server ({profile})"));
    let failures = run.failures();
    if failures.is_empty() { Ok(summary) } else { Err(format!("{summary}: FAILED: {}", failures.join("; "))) }
}

/// Runs of each server in `cargo xtask bench`, alternated.
const BENCH_ROUNDS: usize = 2;

/// `cargo xtask bench`: the example (release, [`Depth::Answers`]) and
/// `tokio-http` ([`Depth::Idle`]) alternated, [`BENCH_ROUNDS`] each, at
/// [`BENCH_CONNS`] connections; a markdown table (a run that failed is
/// shown failed, not dropped).
pub fn bench(p: &Platform) -> Result<String> {
    let (example, tokio) = (http::build(p, "release")?, http::build_tokio(p)?);
    let mut runs: [Vec<Result<IdleRun>>; 2] = Default::default();
    for _ in 0..BENCH_ROUNDS {
        for (i, (exe, depth)) in [(&example, Depth::Answers), (&tokio, Depth::Idle)].into_iter().enumerate() {
            let run = measure(p, exe, &example, BENCH_CONNS, depth, Settle::Threads);
            if let Err(e) = &run {
                eprintln!("bench idle: {}: FAILED: {e}", ["pool", "tokio"][i]);
            }
            runs[i].push(run);
        }
    }
    Ok(bench_table(&runs))
}

/// The table of [`bench`]'s runs: the example's, then tokio's.
fn bench_table(runs: &[Vec<Result<IdleRun>>; 2]) -> String {
    let mean = |r: &[Result<IdleRun>]| {
        let ok: Vec<f64> = r.iter().flatten().map(IdleRun::per_conn).collect();
        ok.iter().sum::<f64>() / ok.len() as f64
    };
    let ratio = mean(&runs[0]) / mean(&runs[1]);
    let mut table = format!(
        "Memory per idle keep-alive connection: {BENCH_CONNS} connections opened from outside, each having \
         served one `GET /`; the server's Wine process's resident memory (`VmRSS`) before and with them all \
         idle, once settled, over the count; then a second `GET /` on each, and the memory once all have \
         closed. Lower is better.\n\n\
         | memory per idle keep-alive connection | server | KiB per connection (each run) | resident MiB before → idle (each run) | \
         KiB ×tokio | a second `GET /` on each | resident MiB once closed (peak) |\n|---|---|---|---|---|---|---|\n"
    );
    let names = ["this crate (examples/http_server)", "tokio multi-thread + hyper (tokio-http)"];
    let mut failed = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let each = |f: &dyn Fn(&IdleRun) -> String| {
            let cells: Vec<String> = runs[i].iter().map(|r| r.as_ref().map_or("failed".into(), f)).collect();
            cells.join(", ")
        };
        let answered = if i == 1 {
            "not asked (see the notes)".to_string()
        } else {
            each(&|r| format!("{} of {} answered", r.conns - r.unanswered.len().min(r.conns), r.conns))
        };
        let closed = each(&|r| r.closed.map_or("-".into(), |m| format!("{} ({})", mib(m.rss), mib(m.hwm))));
        table.push_str(&format!(
            "| {BENCH_CONNS} connections | {name} | {} | {} | ×{:.2} | {answered} | {} |\n",
            each(&|r| format!("{:.1}", r.per_conn() / 1024.0)),
            each(&|r| format!("{} → {}", mib(r.before.rss), mib(r.idle.rss))),
            if i == 0 { ratio } else { 1.0 },
            if i == 1 { "-".into() } else { closed },
        ));
        failed.extend(runs[i].iter().filter_map(|r| r.as_ref().err()).map(|e| format!("{name}: {e}")));
    }
    for f in failed {
        table.push_str(&format!("\nFailed: {f}\n"));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_is_read_from_proc_status() {
        let status = "Name:\thttp_server.exe\nVmHWM:\t   22680 kB\nVmRSS:\t   22676 kB\nThreads:\t4\n";
        assert_eq!(parse_status(status), Some((22_676 * 1024, 22_680 * 1024)));
        assert_eq!(parse_status("VmRSS:\t1 kB\n"), None);
    }

    #[test]
    fn an_answer_is_complete_at_its_content_length() {
        let whole = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ndate: x\r\n\r\nhello";
        assert_eq!(answer_body(whole), Ok(Some(&b"hello"[..])));
        assert_eq!(answer_body(&whole[..whole.len() - 1]), Ok(None));
        assert_eq!(answer_body(b"HTTP/1.1 200 OK\r\ncontent-len"), Ok(None));
        assert!(answer_body(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabc").is_err());
        assert!(answer_body(b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\n\r\n").is_err());
        assert!(answer_body(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
    }

    fn run(unanswered: usize, closed: u64, again: u64) -> IdleRun {
        run_with_handles(unanswered, closed, again, (40, 40))
    }

    fn run_with_handles(unanswered: usize, closed: u64, again: u64, handles: (u64, u64)) -> IdleRun {
        let m = |rss| Memory { rss, hwm: rss, threads: 5 };
        IdleRun {
            conns: 1_000,
            before: m(20 << 20),
            idle: m((20 << 20) + 1_000 * 10_240),
            open_secs: 1.0,
            unanswered: (0..unanswered).map(|i| (i, "closed without answering".into())).collect(),
            unanswered_again: Vec::new(),
            again_secs: Some(1.0),
            closed: Some(m(closed)),
            closed_again: Some(m(again)),
            handles: Some(handles),
            slack: Some(10),
        }
    }

    #[test]
    fn a_run_fails_on_a_silent_connection_or_handles_not_back() {
        // Resident memory past the first round's is reported, not failed (Wine's).
        let ok = run(0, 30 << 20, 60 << 20);
        assert_eq!(ok.per_conn(), 10_240.0);
        assert!(ok.failures().is_empty());
        assert_eq!(run(1, 30 << 20, 30 << 20).failures().len(), 1);
        assert!(run_with_handles(0, 0, 0, (40, 50)).failures().is_empty());
        assert_eq!(
            run_with_handles(0, 0, 0, (40, 51)).failures(),
            ["handles not back after the second round: 40 -> 51 (slack 10)"]
        );
        assert!(run(7, 0, 1 << 30).failures()[0].starts_with("connections that did not answer: 7 (#0: closed"));
        let again = IdleRun { unanswered_again: vec![(3, "sending: broken pipe".into())], ..run(0, 0, 0) };
        assert_eq!(again.failures(), ["second-round connections that did not answer: 1 (#3: sending: broken pipe)"]);
    }

    #[test]
    fn the_bench_table_has_a_row_per_server_and_the_ratio_to_tokio() {
        let tokio = IdleRun { idle: Memory { rss: (20 << 20) + 1_000 * 20_480, hwm: 0, threads: 5 }, ..run(0, 0, 0) };
        let table = bench_table(&[vec![Ok(run(0, 30 << 20, 30 << 20))], vec![Ok(tokio), Err("stalled".into())]]);
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with(&format!("| {BENCH_CONNS} "))).collect();
        assert_eq!(rows.len(), 2);
        assert!(
            rows[0].contains("| 10.0 | 20.0 → 29.8 | ×0.50 | 1000 of 1000 answered | 30.0 (30.0) |"),
            "{}",
            rows[0]
        );
        assert!(rows[1].contains("| 20.0, failed | 20.0 → 39.5, failed | ×1.00 | not asked"), "{}", rows[1]);
        assert!(table.ends_with("\nFailed: tokio multi-thread + hyper (tokio-http): stalled\n"), "{table}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn open_files_and_their_limit_are_read_from_proc() {
        let (open, soft) = files("self").unwrap();
        assert!(open >= 3 && soft >= open, "{open} open of {soft}");
    }
}
