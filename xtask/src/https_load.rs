//! `examples/https_server` under load from clients no one here wrote
//! (its checks in `cargo xtask test` are `crate::https`'s):
//! h2load (HTTP/2 over TLS and h2c) and wrk (HTTP/1.1) against it and the
//! same axum service on tokio (`wtp-bench`'s `tokio-https`) in `cargo xtask
//! bench`, and a soak of h2load over TLS in `cargo xtask stress`. The
//! servers are started, found and stopped as `http_server` is
//! ([`http::start_server`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::env::{self, Platform, Result};
use crate::http::{self, BENCH_CONNS, BENCH_ROUNDS, BENCH_SECS, Served, ServerStats, Threads, WARM_UP_SECS};
use crate::https::build;

/// Builds `wtp-bench`'s `tokio-https` in release; the exe.
fn build_tokio(p: &Platform) -> Result<PathBuf> {
    http::cargo_build(p, "release", &["-p", "wtp-bench", "--bin", "tokio-https"], "tokio-https")?;
    Ok(p.bin_dir("release")?.join("tokio-https.exe"))
}

/// How a server is reached.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Wire {
    /// TLS with a certificate made at start (`--self-signed`); ALPN picks
    /// HTTP/2 or HTTP/1.1.
    Tls,
    /// Cleartext: HTTP/1.1, or HTTP/2 with prior knowledge (`--plain`).
    Plain,
}

impl Wire {
    fn flag(self) -> &'static str {
        match self {
            Wire::Tls => "--self-signed",
            Wire::Plain => "--plain",
        }
    }

    fn url(self, addr: &str, path: &str) -> String {
        match self {
            Wire::Tls => format!("https://{addr}{path}"),
            Wire::Plain => format!("http://{addr}{path}"),
        }
    }
}

// ---- h2load ------------------------------------------------------------------

/// What h2load reported of one run.
#[derive(Debug, Default, PartialEq)]
pub struct H2loadRun {
    /// Wall time of the run, in seconds (`finished in`).
    pub secs: f64,
    pub per_second: f64,
    pub done: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub errored: u64,
    pub timeout: u64,
    /// Responses that were not 2xx.
    pub non_2xx: u64,
    /// Mean time for a request, in milliseconds.
    pub mean_ms: f64,
    /// The protocol negotiated (`h2`, `h2c`, `http/1.1`).
    pub protocol: String,
}

impl H2loadRun {
    /// Requests that did not end in a 2xx answer.
    pub fn errors(&self) -> u64 {
        self.failed + self.errored + self.timeout + self.non_2xx
    }
}

/// An h2load duration such as `207us`, `1.94ms` or `4.09s`, in milliseconds.
fn h2load_ms(text: &str) -> Option<f64> {
    // Divided, not multiplied by 1e-3: the quotient is the nearest double.
    let (number, per_ms) = if let Some(n) = text.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else {
        (text.strip_suffix('s')?, 1e-3)
    };
    number.parse::<f64>().ok().map(|n| n / per_ms)
}

/// h2load's report (nghttp2 1.x's text output); `None` if it is not one.
pub fn parse_h2load(out: &str) -> Option<H2loadRun> {
    let mut run = H2loadRun::default();
    let (mut finished, mut requests, mut timed) = (false, false, false);
    for line in out.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().map(|w| w.trim_end_matches(',')).collect();
        match words.as_slice() {
            ["finished", "in", secs, per_second, "req/s", ..] => {
                run.secs = h2load_ms(secs)? / 1e3;
                run.per_second = per_second.parse().ok()?;
                finished = true;
            }
            ["requests:", rest @ ..] => {
                let count = |name: &str| rest.windows(2).find(|w| w[1] == name).and_then(|w| w[0].parse().ok());
                run.done = count("done")?;
                run.succeeded = count("succeeded")?;
                run.failed = count("failed")?;
                run.errored = count("errored")?;
                run.timeout = count("timeout")?;
                requests = true;
            }
            ["status", "codes:", rest @ ..] => {
                run.non_2xx = rest.windows(2).filter(|w| w[1] != "2xx").filter_map(|w| w[0].parse::<u64>().ok()).sum();
            }
            ["time", "for", "request:", _min, _max, mean, ..] => {
                run.mean_ms = h2load_ms(mean)?;
                timed = true;
            }
            ["Application", "protocol:", protocol] => run.protocol = protocol.to_string(),
            _ => {}
        }
    }
    (finished && requests && timed).then_some(run)
}

/// `h2load ARGS URL`, ended after `limit` if it has not finished by then
/// (h2load waits for every connection of a timed run, however slow a
/// server is to accept them).
fn h2load(exe: &Path, args: &[&str], url: &str, limit: Duration) -> Result<H2loadRun> {
    let mut cmd = Command::new(exe);
    cmd.args(["--connection-inactivity-timeout=30"]).args(args).arg(url);
    let out = env::output_within(&mut cmd, limit).map_err(|e| format!("h2load {args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("h2load {args:?} failed ({}): {}{}", out.status, out.stdout, out.stderr));
    }
    parse_h2load(&out.stdout).ok_or_else(|| format!("h2load {args:?} printed no report: {}", out.stdout))
}

/// How long past its own duration a run may take to connect and finish.
const H2LOAD_GRACE: Duration = Duration::from_secs(60);

/// `-D SECS -cCONNS -mSTREAMS` over HTTP/2 (ALPN `h2` over TLS, prior
/// knowledge over cleartext).
fn h2load_for(exe: &Path, served: &Served, wire: Wire, conns: u32, secs: u32) -> Result<H2loadRun> {
    let args = [format!("-D{secs}"), format!("-c{conns}"), format!("-m{STREAMS}"), "-t1".to_string()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    h2load(exe, &args, &wire.url(&served.addr, "/"), Duration::from_secs(secs.into()) + H2LOAD_GRACE)
}

/// New TLS connections each asking one request: handshakes a second, the
/// mean time of a request, and the requests not answered 2xx.
fn handshakes(exe: &Path, served: &Served) -> Result<(f64, f64, u64)> {
    let n = HANDSHAKES.to_string();
    let run = h2load(exe, &["-n", &n, "-c", &n, "-m1", "-t1"], &Wire::Tls.url(&served.addr, "/"), H2LOAD_GRACE)?;
    Ok((
        f64::from(HANDSHAKES) / run.secs,
        run.mean_ms,
        run.errors() + u64::from(HANDSHAKES) - run.done.min(HANDSHAKES.into()),
    ))
}

/// An unrecorded run of server `i`; its failure leaves the server's cells n/a.
fn warm_up(runs: &mut Runs, i: usize, load: &str, run: impl FnOnce() -> Result<(f64, f64, u64)>) {
    if let Err(e) = run() {
        println!("bench: !!! {load} (warm-up), {}: {e}", SHORT[i]);
        runs.failed[i] = Some(e);
    }
}

// ---- the soak ----------------------------------------------------------------

/// The soak's HTTP/2 connections and streams per connection.
const SOAK_CONNS: u32 = 16;
/// Concurrent streams per connection in the soak and the benchmark.
const STREAMS: u32 = 10;

/// The example's `GET /stats` over TLS (curl, which takes the self-signed
/// certificate with `-k`).
fn tls_stats(curl: &Path, addr: &str) -> Result<ServerStats> {
    let body = http::curl(curl, &["-k", &Wire::Tls.url(addr, "/stats")])?;
    http::parse_stats(&body).ok_or_else(|| format!("GET /stats: {body:?}"))
}

/// `cargo xtask stress`: `secs` of h2load over TLS (`-c16 -m10`, after a
/// warm-up of the same load) against the example: no failed or errored
/// request, handles and private bytes back within the leak checks' slack
/// once h2load's connections have closed, and the server answering after.
/// A summary line.
pub fn soak(p: &Platform, h2load_exe: &Path, curl: &Path, secs: u32) -> Result<String> {
    let exe = build(p, "release")?;
    let served = http::start_server(p, &exe, &exe, &[Wire::Tls.flag(), "--stats"])?;
    if p.under_wine() && served.pid.is_none() {
        return Err("the server's Wine process was not found in /proc, to count its threads".into());
    }
    let addr = served.addr.clone();
    let stats = || tls_stats(curl, &addr);
    let warm = h2load_for(h2load_exe, &served, Wire::Tls, SOAK_CONNS, 5)?;
    let before = http::settled_stats_by(&served, Threads::Still, &stats)?;
    let run = h2load_for(h2load_exe, &served, Wire::Tls, SOAK_CONNS, secs)?;
    let after = http::settled_stats_by(&served, Threads::AtMost(before.threads), &stats)?;
    let hello = http::curl(curl, &["-k", "--http2", &Wire::Tls.url(&addr, "/")])?;
    served.stop()?;
    let mut failures = http::leaked(&before, &after);
    if run.errors() + warm.errors() != 0 {
        failures.push(format!("{} requests not answered 2xx (warm-up {})", run.errors(), warm.errors()));
    }
    if run.succeeded == 0 {
        failures.push("h2load completed no request".into());
    }
    if run.protocol != "h2" {
        failures.push(format!("ALPN chose {:?}, not h2", run.protocol));
    }
    if hello.is_empty() {
        failures.push("GET / after the soak answered an empty body".into());
    }
    let summary = format!(
        "HTTPS soak: {secs} s of h2load -c{SOAK_CONNS} -m{STREAMS} over TLS ({}): {} requests ({:.0}/s, mean {:.2} ms), \
         {} not 2xx; {}",
        run.protocol,
        run.succeeded,
        run.per_second,
        run.mean_ms,
        run.errors(),
        http::moved(&before, &after)
    );
    if failures.is_empty() { Ok(summary) } else { Err(format!("{summary}: FAILED: {}", failures.join("; "))) }
}

// ---- the benchmark -----------------------------------------------------------

/// One-request TLS connections of the handshake rate.
const HANDSHAKES: u32 = 400;

/// The servers the benchmark alternates: the example as it ships, the
/// example with `--buffered-reads`, and `tokio-https`, the last, which
/// the others are compared with.
const SERVERS: usize = 3;
const TOKIO: usize = SERVERS - 1;
/// Their names in progress lines.
const SHORT: [&str; SERVERS] = ["pool", "pool --buffered-reads", "tokio"];
/// Their names in the table.
const NAMES: [&str; SERVERS] =
    ["this crate (examples/https_server)", "this crate, `--buffered-reads`", "tokio multi-thread (tokio-https)"];

/// One load's runs of every server: requests/s and mean latency of each
/// run, and errors.
struct Runs {
    per_second: [Vec<f64>; SERVERS],
    mean_ms: [Vec<f64>; SERVERS],
    errors: [u64; SERVERS],
    /// Why a server's runs stopped (its cells are then n/a).
    failed: [Option<String>; SERVERS],
}

impl Runs {
    fn new() -> Self {
        Self {
            per_second: Default::default(),
            mean_ms: Default::default(),
            errors: [0; SERVERS],
            failed: Default::default(),
        }
    }

    /// Server `i`'s next run, by `run` (requests/s, mean ms, errors),
    /// unless one of its runs failed: a failure is reported and leaves
    /// the server's cells n/a, not the table unwritten.
    fn record(&mut self, i: usize, load: &str, run: impl FnOnce() -> Result<(f64, f64, u64)>) {
        if self.failed[i].is_some() {
            return;
        }
        match run() {
            Ok((per_second, mean_ms, errors)) => {
                eprintln!("bench https: {load} {}: {per_second:.0}/s, mean {mean_ms:.2} ms, {errors} errors", SHORT[i]);
                self.per_second[i].push(per_second);
                self.mean_ms[i].push(mean_ms);
                self.errors[i] += errors;
            }
            Err(e) => {
                println!("bench: !!! {load}, {}: {e}", SHORT[i]);
                self.failed[i] = Some(e);
            }
        }
    }

    /// The table lines, tokio's last, with each server's requests/s as a
    /// ratio to tokio's (n/a where either failed).
    fn rows(&self, load: &str) -> String {
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let each = |v: &[f64], digits: usize| v.iter().map(|x| format!("{x:.digits$}")).collect::<Vec<_>>().join(", ");
        (0..SERVERS)
            .map(|i| {
                let note = if self.errors[i] == 0 { String::new() } else { format!(" ({} errors)", self.errors[i]) };
                let (rate, latency) = match &self.failed[i] {
                    None => (each(&self.per_second[i], 0), each(&self.mean_ms[i], 2)),
                    Some(why) => (format!("n/a: {}", why.replace('|', "/")), "n/a".into()),
                };
                let relative = match (&self.failed[i], &self.failed[TOKIO]) {
                    (None, None) => format!("×{:.2}", mean(&self.per_second[i]) / mean(&self.per_second[TOKIO])),
                    _ => "n/a".into(),
                };
                format!("| {load} | {}{note} | {rate} | {latency} | {relative} |\n", NAMES[i])
            })
            .collect()
    }
}

/// `cargo xtask bench`: the example (release), as it ships and with
/// `--buffered-reads`, and `tokio-https`, all serving the same axum
/// `Router`, alternated under h2load over h2c and
/// over TLS (`-c16 -m10` and `-c256 -m10`, 10 s each) and wrk over
/// HTTP/1.1 (`-c16`, `-c256`), twice each after a warm-up of each; then
/// the rate of new TLS connections. A markdown table.
pub fn bench(p: &Platform, h2load_exe: &Path, wrk_exe: &Path) -> Result<String> {
    let example = build(p, "release")?;
    let tokio = build_tokio(p)?;
    let start = |wire: Wire| -> Result<[Served; SERVERS]> {
        Ok([
            http::start_server(p, &example, &example, &[wire.flag()])?,
            http::start_server(p, &example, &example, &[wire.flag(), "--buffered-reads"])?,
            http::start_server(p, &tokio, &example, &[wire.flag()])?,
        ])
    };
    let mut table = String::from(
        "| load | server | requests/s (each run) | mean latency ms (each run) | requests/s ×tokio |\n|---|---|---|---|---|\n",
    );
    for wire in [Wire::Plain, Wire::Tls] {
        let servers = start(wire)?;
        for conns in BENCH_CONNS {
            let load = format!(
                "h2load -c{conns} -m{STREAMS} -D{BENCH_SECS}s, {}",
                if wire == Wire::Tls { "HTTP/2 over TLS" } else { "h2c" }
            );
            let mut runs = Runs::new();
            let h2 = |served: &Served, secs| {
                h2load_for(h2load_exe, served, wire, conns, secs).map(|r| (r.per_second, r.mean_ms, r.errors()))
            };
            for (i, served) in servers.iter().enumerate() {
                warm_up(&mut runs, i, &load, || h2(served, WARM_UP_SECS));
            }
            for _ in 0..BENCH_ROUNDS {
                for (i, served) in servers.iter().enumerate() {
                    runs.record(i, &load, || h2(served, BENCH_SECS));
                }
            }
            table.push_str(&runs.rows(&load));
        }
        if wire == Wire::Plain {
            for conns in BENCH_CONNS {
                let load = format!("wrk -t1 -c{conns} -d{BENCH_SECS}s, HTTP/1.1");
                let mut runs = Runs::new();
                let wrk = |served: &Served, secs| {
                    http::wrk(wrk_exe, &served.addr, conns, secs)
                        .map(|r| (r.per_second, r.mean_ms, r.socket_errors + r.non_2xx))
                };
                for (i, served) in servers.iter().enumerate() {
                    warm_up(&mut runs, i, &load, || wrk(served, WARM_UP_SECS));
                }
                for _ in 0..BENCH_ROUNDS {
                    for (i, served) in servers.iter().enumerate() {
                        runs.record(i, &load, || wrk(served, BENCH_SECS));
                    }
                }
                table.push_str(&runs.rows(&load));
            }
        } else {
            let load = format!(
                "{HANDSHAKES} new TLS connections of one request each (h2load -c{HANDSHAKES} -m1): requests/s are \
                 handshakes/s"
            );
            let mut runs = Runs::new();
            for _ in 0..BENCH_ROUNDS {
                for (i, served) in servers.iter().enumerate() {
                    runs.record(i, &load, || handshakes(h2load_exe, served));
                }
            }
            table.push_str(&runs.rows(&load));
        }
        for served in servers {
            served.stop()?;
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As Debian's h2load (nghttp2 1.52.0) prints it over TLS.
    const REPORT: &str = "starting benchmark...
spawning thread #0: 16 total client(s). Timing-based test with 0s of warm-up time and 10s of main duration for measurements.
TLS Protocol: TLSv1.3
Cipher: TLS_AES_256_GCM_SHA384
Server Temp Key: X25519 253 bits
Application protocol: h2
Main benchmark duration is started for 10s.

finished in 10.00s, 5123.40 req/s, 1.20MB/s
requests: 51234 total, 51400 started, 51234 done, 51200 succeeded, 30 failed, 4 errored, 2 timeout
status codes: 51200 2xx, 0 3xx, 3 4xx, 1 5xx
traffic: 12.00MB (12582912) total, 1.00MB (1048576) headers (space savings 90.00%), 500.00KB (512000) data
                     min         max         mean         sd        +/- sd
time for request:      207us     45.67ms      3.12ms       1.20ms    80.00%
time for connect:     2.10ms      4.20ms      3.00ms       0.50ms    60.00%
time to 1st byte:     5.00ms      9.00ms      7.00ms       1.00ms    50.00%
req/s           :     300.00      340.00      320.21        10.00    70.00%
";

    #[test]
    fn an_h2load_report_is_parsed() {
        let run = parse_h2load(REPORT).unwrap();
        assert_eq!(
            run,
            H2loadRun {
                secs: 10.0,
                per_second: 5123.40,
                done: 51234,
                succeeded: 51200,
                failed: 30,
                errored: 4,
                timeout: 2,
                non_2xx: 4,
                mean_ms: 3.12,
                protocol: "h2".into(),
            }
        );
        assert_eq!(run.errors(), 40);
        assert_eq!(parse_h2load("finished in 1.00s, 10.00 req/s, 1KB/s\n"), None);
    }

    #[test]
    fn h2load_durations_are_read_in_their_units() {
        assert_eq!(h2load_ms("207us"), Some(0.207));
        assert_eq!(h2load_ms("45.67ms"), Some(45.67));
        assert_eq!(h2load_ms("4.09s"), Some(4090.0));
        assert_eq!(h2load_ms("12"), None);
    }
}
