//! `examples/https_server` checked with real clients in `cargo xtask test`
//! (and alone by `cargo xtask demo --https`): curl over TLS (HTTP/2 and
//! HTTP/1.1, chosen by ALPN) and in cleartext (h2c with prior knowledge,
//! HTTP/1.1), the JSON route, the shared state, the body limit, h2load's
//! HTTP/2 load over TLS, an idle h2c connection shut down with a GOAWAY,
//! `--max-connections` refusing a connection past it, and hostile TLS clients written here (bytes that are no ClientHello, a
//! ClientHello offering only an ALPN protocol the server lacks, one cut
//! short then silent), each counted by the server and each followed by a
//! good request. The servers run as `http_server` does under
//! `crate::http`: under Wine on Linux, stopped through their named event.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::LIB;
use crate::env::{self, Platform, Result};
use crate::http::{PATIENCE, all_ended_by, cargo_build, server_stats, start_server};

/// The body of `GET /` (examples/https_server/app.rs `HELLO`).
const HELLO: &str = "hello from axum on the pool\n";
/// `POST /echo`'s limit (app.rs `BODY_LIMIT`).
const BODY_LIMIT: usize = 1 << 20;
/// The TLS server's `--header-timeout`: what ends the silent handshake.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// The cleartext server's `--idle-timeout`.
const IDLE_TIMEOUT: Duration = Duration::from_secs(1);
/// The cleartext server's `--shutdown-timeout`: far past [`PATIENCE`], so
/// that a connection held until it is not mistaken for one that ended.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(600);
/// h2load's run: requests, connections, streams at once per connection.
const H2LOAD: [(&str, u32); 3] = [("-n", 2000), ("-c", 4), ("-m", 10)];

/// Builds the example; the exe.
pub fn build(p: &Platform, profile: &str) -> Result<PathBuf> {
    cargo_build(
        p,
        profile,
        &["-p", LIB, "--example", "https_server", "--features", "hyper,tokio"],
        "examples/https_server",
    )?;
    Ok(p.bin_dir(profile)?.join("examples").join("https_server.exe"))
}

/// `curl -sS --max-time 30 ARGS`: its stdout, failing on a failed transfer
/// (not on an HTTP error status: callers read `%{http_code}`).
fn curl(curl: &Path, args: &[&str]) -> Result<String> {
    crate::http::curl_with(curl, &[], args)
}

/// `curl ARGS URL -w '\n%{http_code} %{http_version}'` expecting `status`
/// over HTTP `version` with the body `body`.
fn expect_answer(curl_exe: &Path, args: &[&str], url: &str, status: &str, version: &str, body: &str) -> Result<()> {
    let out = curl(curl_exe, &[args, &["-w", "\n%{http_code} %{http_version}", url]].concat())?;
    let expected = format!("{body}\n{status} {version}");
    if out != expected {
        return Err(format!("curl {args:?} {url}: {out:?}, expected {expected:?}"));
    }
    Ok(())
}

/// One counter of a `GET /stats` line.
fn stat(line: &str, key: &str) -> Result<u64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("GET /stats has no {key}: {line:?}"))
}

/// The whole check; a summary line.
pub fn check(p: &Platform, curl_exe: &Path, h2load: Option<&Path>) -> Result<String> {
    let t0 = Instant::now();
    let exe = build(p, "debug")?;
    let built = t0.elapsed();
    let dir = env::layout()?.target_dir.join("xtask-https");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let t1 = Instant::now();
    let mut done = vec![tls_checks(p, &exe, curl_exe, h2load, &dir)?];
    done.push(plain_checks(p, &exe, curl_exe)?);
    done.push(limit_checks(p, &exe)?);
    Ok(format!(
        "examples/https_server: {} ({:.1} s, and {:.1} s to build)",
        done.join("; "),
        t1.elapsed().as_secs_f64(),
        built.as_secs_f64()
    ))
}

/// The server over TLS with a certificate of its own.
fn tls_checks(p: &Platform, exe: &Path, curl_exe: &Path, h2load: Option<&Path>, dir: &Path) -> Result<String> {
    let timeout = HEADER_TIMEOUT.as_secs().to_string();
    let served = start_server(p, exe, exe, &["--self-signed", "--stats", "--header-timeout", &timeout])?;
    let addr = served.addr.clone();
    let url = |path: &str| format!("https://{addr}{path}");
    let good = || expect_answer(curl_exe, &["-k", "--http2"], &url("/"), "200", "2", HELLO);
    good()?;
    expect_answer(curl_exe, &["-k", "--http1.1"], &url("/"), "200", "1.1", HELLO)?;
    expect_answer(curl_exe, &["-k", "--http2"], &url("/users/42"), "200", "2", r#"{"id":42,"name":"user 42"}"#)?;
    // Two requests on one connection; the count is the server's, shared.
    let hits = curl(curl_exe, &["-k", "--http2", "-w", "%{num_connects}\n", &url("/hits"), &url("/hits")])?;
    if hits != "hits=1\n1\nhits=2\n0\n" {
        return Err(format!("GET /hits twice on one connection: {hits:?}"));
    }
    let (small, big) = (dir.join("small.bin"), dir.join("over-limit.bin"));
    std::fs::write(&small, b"echo me").map_err(|e| format!("{}: {e}", small.display()))?;
    std::fs::write(&big, vec![b'x'; BODY_LIMIT + 1]).map_err(|e| format!("{}: {e}", big.display()))?;
    let post = |file: &Path, http: &str| {
        curl(
            curl_exe,
            &["-k", http, "--data-binary", &format!("@{}", file.display()), "-w", "\n%{http_code}", &url("/echo")],
        )
    };
    for http in ["--http2", "--http1.1"] {
        let echoed = post(&small, http)?;
        if echoed != "echo me\n200" {
            return Err(format!("POST /echo {http} of 7 bytes: {echoed:?}"));
        }
        let refused = post(&big, http)?;
        if !refused.ends_with("\n413") {
            let status = &refused[refused.len().saturating_sub(4)..];
            return Err(format!(
                "POST /echo {http} of {} bytes: answered {} bytes ending {status:?}, expected 413",
                BODY_LIMIT + 1,
                refused.len()
            ));
        }
    }
    let load = match h2load {
        Some(h2load) => h2load_run(h2load, &url("/"))?,
        None => "h2load SKIPPED".into(),
    };

    // Hostile clients: each counted as a failed handshake, the server still serving.
    let stats = || curl(curl_exe, &["-k", &url("/stats")]);
    let garbage = hostile(&addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")?;
    let failed_after = |n: u64| -> Result<()> {
        let line = stats()?;
        let failed = stat(&line, "tls_failed")?;
        if failed != n {
            return Err(format!("tls_failed={failed} after {n} hostile clients: {line:?}"));
        }
        good()
    };
    failed_after(1)?;
    let refused = hostile(&addr, &client_hello(b"foo"))?;
    if !(refused.len() >= 7 && refused[0] == 0x15 && refused[5..7] == [2, NO_APPLICATION_PROTOCOL]) {
        return Err(format!(
            "a ClientHello offering only ALPN foo: answered {refused:02x?}, expected the alert \
                            no_application_protocol"
        ));
    }
    failed_after(2)?;
    let t = Instant::now();
    let mut hello = client_hello(b"h2");
    hello.truncate(hello.len() / 2);
    let silent = hostile(&addr, &hello)?;
    let cut_after = t.elapsed();
    if !silent.is_empty() || cut_after < HEADER_TIMEOUT.mul_f64(0.9) {
        return Err(format!(
            "half a ClientHello: closed after {cut_after:?} (header timeout {HEADER_TIMEOUT:?}), \
                            answered {silent:02x?}"
        ));
    }
    failed_after(3)?;
    let line = stats()?;
    let (handshakes, timeouts) = (stat(&line, "tls_handshakes")?, stat(&line, "tls_timeouts")?);
    if timeouts != 1 {
        return Err(format!("tls_timeouts={timeouts} after one silent handshake: {line:?}"));
    }
    served.stop()?;
    Ok(format!(
        "TLS: curl --http2 and --http1.1 (ALPN), JSON, shared state, POST /echo and 413 past {BODY_LIMIT} bytes \
         over both, {load}; hostile: {} bytes of garbage, ALPN foo refused, half a ClientHello cut after \
         {:.1} s, each counted ({handshakes} handshakes, 3 failed) and followed by a good request",
        garbage.len(),
        cut_after.as_secs_f64()
    ))
}

/// The same server in cleartext: h2c with prior knowledge, HTTP/1.1, and
/// an idle HTTP/2 connection shut down with a GOAWAY, whose end the server
/// then counts well before its shutdown timeout ([`SHUTDOWN_TIMEOUT`]).
fn plain_checks(p: &Platform, exe: &Path, curl_exe: &Path) -> Result<String> {
    let idle = IDLE_TIMEOUT.as_secs().to_string();
    let shutdown = SHUTDOWN_TIMEOUT.as_secs().to_string();
    let args = ["--plain", "--stats", "--idle-timeout", &idle, "--shutdown-timeout", &shutdown];
    let served = start_server(p, exe, exe, &args)?;
    let url = format!("http://{}/", served.addr);
    expect_answer(curl_exe, &["--http2-prior-knowledge"], &url, "200", "2", HELLO)?;
    expect_answer(curl_exe, &["--http1.1"], &url, "200", "1.1", HELLO)?;
    let t = Instant::now();
    goaway_when_idle(&served.addr)?;
    let after = t.elapsed();
    let line = curl(curl_exe, &[&format!("{url}stats")])?;
    let idle_closed = stat(&line, "idle_closed")?;
    if idle_closed != 1 {
        return Err(format!("idle_closed={idle_closed} after one idle h2c connection: {line:?}"));
    }
    // The idle one has ended too, once its GOAWAY was sent and its client
    // left, not at the shutdown timeout, and was not cut.
    let fetch = || server_stats(&served.addr);
    all_ended_by(&fetch, Instant::now() + PATIENCE)
        .map_err(|e| format!("the idle h2c connection not ended {PATIENCE:?} after its GOAWAY: {e}"))?;
    let line = curl(curl_exe, &[&format!("{url}stats")])?;
    if stat(&line, "cut")? != 0 {
        return Err(format!("the idle h2c connection was cut: {line:?}"));
    }
    served.stop()?;
    Ok(format!(
        "cleartext: curl --http2-prior-knowledge and --http1.1, an idle h2c connection sent GOAWAY after {:.1} s",
        after.as_secs_f64()
    ))
}

/// `--max-connections 2`: with two connections open and served, a third
/// is closed unanswered and counted (`over_limit`), and the two are still
/// served. Each of the two has had its answer, so the server counts both
/// as open when the third arrives.
fn limit_checks(p: &Platform, exe: &Path) -> Result<String> {
    let served = start_server(p, exe, exe, &["--plain", "--stats", "--max-connections", "2"])?;
    let open = || -> Result<TcpStream> {
        let s = TcpStream::connect(&served.addr).map_err(|e| format!("connecting to {}: {e}", served.addr))?;
        s.set_read_timeout(Some(PATIENCE)).map_err(|e| e.to_string())?;
        Ok(s)
    };
    let (mut first, mut second) = (open()?, open()?);
    for s in [&mut first, &mut second] {
        let body = get_kept(s, "/")?;
        if body != HELLO {
            return Err(format!("GET / under the limit answered {body:?}"));
        }
    }
    let third = hostile(&served.addr, b"GET / HTTP/1.1\r\nHost: limit\r\n\r\n")?;
    if !third.is_empty() {
        return Err(format!(
            "a third connection past --max-connections 2 was answered: {:?}",
            String::from_utf8_lossy(&third)
        ));
    }
    let line = get_kept(&mut second, "/stats")?;
    let over_limit = stat(&line, "over_limit")?;
    if over_limit != 1 {
        return Err(format!("over_limit={over_limit} after one connection past the limit: {line:?}"));
    }
    served.stop()?;
    Ok("--max-connections 2: a third connection closed unanswered and counted".into())
}

/// `GET path` on the kept-alive connection `s`; the body of its `200`.
fn get_kept(s: &mut TcpStream, path: &str) -> Result<String> {
    write!(s, "GET {path} HTTP/1.1\r\nHost: limit\r\n\r\n").map_err(|e| format!("GET {path}: {e}"))?;
    let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
    loop {
        if let Some(body) = crate::idle::answer_body(&got)? {
            return Ok(String::from_utf8_lossy(body).into_owned());
        }
        match s.read(&mut buf) {
            Ok(0) => return Err(format!("GET {path}: closed after {got:?}")),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("GET {path}: {e} after {got:?}")),
        }
    }
}

/// Writes `bytes` on a connection of its own to `addr`, then reads until
/// the server closes it; what the server sent (a reset counts as closed).
fn hostile(addr: &str, bytes: &[u8]) -> Result<Vec<u8>> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connecting to {addr}: {e}"))?;
    s.set_read_timeout(Some(PATIENCE)).map_err(|e| e.to_string())?;
    s.write_all(bytes).map_err(|e| format!("writing to {addr}: {e}"))?;
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => Ok(got),
        Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted) => Ok(got),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            Err(format!("{addr} kept the connection open {PATIENCE:?} after {} bytes of {got:02x?}", got.len()))
        }
        Err(e) => Err(format!("reading from {addr} after {} bytes of {got:02x?}: {e}", got.len())),
    }
}

/// The TLS alert a server sends when no ALPN protocol is common (RFC 7301).
const NO_APPLICATION_PROTOCOL: u8 = 120;

/// A TLS 1.2 ClientHello offering the one ALPN protocol `alpn`: ECDHE with
/// an ECDSA or RSA certificate and AES-128-GCM, x25519 or P-256. A server
/// gets as far as choosing its ALPN protocol with it.
fn client_hello(alpn: &[u8]) -> Vec<u8> {
    let mut extensions = Vec::new();
    let mut extension = |kind: u16, body: &[u8]| {
        extensions.extend(kind.to_be_bytes());
        extensions.extend((body.len() as u16).to_be_bytes());
        extensions.extend(body);
    };
    extension(0x000a, &[0, 4, 0x00, 0x1d, 0x00, 0x17]); // supported_groups
    extension(0x000b, &[1, 0]); // ec_point_formats: uncompressed
    extension(0x000d, &[0, 6, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01]); // signature_algorithms
    extension(0x0017, &[]); // extended_master_secret
    let protocols = [&[alpn.len() as u8][..], alpn].concat();
    extension(0x0010, &[&(protocols.len() as u16).to_be_bytes()[..], &protocols].concat());
    let mut hello = vec![0x03, 0x03]; // TLS 1.2
    hello.extend([0x5a; 32]); // random
    hello.push(0); // no session id
    hello.extend([0, 4, 0xc0, 0x2b, 0xc0, 0x2f]); // ECDHE_{ECDSA,RSA}_WITH_AES_128_GCM_SHA256
    hello.extend([1, 0]); // no compression
    hello.extend((extensions.len() as u16).to_be_bytes());
    hello.extend(extensions);
    let mut handshake = vec![1]; // client_hello
    handshake.extend(&(hello.len() as u32).to_be_bytes()[1..]);
    handshake.extend(hello);
    let mut record = vec![0x16, 0x03, 0x01]; // handshake record
    record.extend((handshake.len() as u16).to_be_bytes());
    record.extend(handshake);
    record
}

/// Opens an h2c connection (the preface and empty SETTINGS), sends no
/// request, and reads frames until the server's GOAWAY; an error if the
/// connection closes first or none comes within [`PATIENCE`].
fn goaway_when_idle(addr: &str) -> Result<()> {
    const GOAWAY: u8 = 7;
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connecting to {addr}: {e}"))?;
    s.set_read_timeout(Some(PATIENCE)).map_err(|e| e.to_string())?;
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").map_err(|e| e.to_string())?;
    let mut kinds = Vec::new();
    loop {
        let mut head = [0u8; 9];
        if let Err(e) = s.read_exact(&mut head) {
            return Err(format!("idle h2c connection: no GOAWAY among frames of types {kinds:?}: {e}"));
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0; len];
        s.read_exact(&mut payload).map_err(|e| format!("idle h2c connection: a frame cut short: {e}"))?;
        if head[3] == GOAWAY {
            return Ok(());
        }
        kinds.push(head[3]);
    }
}

/// h2load's run over TLS ([`H2LOAD`]): every request answered 2xx over h2.
fn h2load_run(h2load: &Path, url: &str) -> Result<String> {
    let mut cmd = Command::new(h2load);
    for (flag, n) in H2LOAD {
        cmd.arg(flag).arg(n.to_string());
    }
    // No progress for 10 s ends a connection: h2load cannot hang the check.
    let out = cmd.args(["-N", "10s", url]).stdin(Stdio::null()).output().map_err(|e| format!("h2load: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let run = parse_h2load(&text).ok_or_else(|| format!("h2load printed no summary ({}): {text}", out.status))?;
    let total = u64::from(H2LOAD[0].1);
    let count = |key: &str| run.get(key).copied().unwrap_or(u64::MAX);
    let clean = ["failed", "errored", "timeout"].iter().all(|k| count(k) == 0);
    if !out.status.success()
        || !clean
        || count("succeeded") != total
        || count("2xx") != total
        || !text.contains("Application protocol: h2")
    {
        return Err(format!("h2load over TLS: {run:?} ({}): {text}", out.status));
    }
    let secs = text.lines().find_map(|l| l.strip_prefix("finished in ")?.split(',').next()).unwrap_or("?");
    Ok(format!("h2load -n{total} -c{} -m{}: {total} succeeded over h2 in {secs}", H2LOAD[1].1, H2LOAD[2].1))
}

/// The counts of h2load's `requests:` and `status codes:` lines, by the
/// word after each (`succeeded`, `failed`, `errored`, `timeout`, `2xx`, ...);
/// `None` without them.
fn parse_h2load(out: &str) -> Option<HashMap<String, u64>> {
    let mut counts = HashMap::new();
    let mut lines = 0;
    for line in out.lines() {
        let Some(rest) = line.strip_prefix("requests: ").or_else(|| line.strip_prefix("status codes: ")) else {
            continue;
        };
        lines += 1;
        for part in rest.split(", ") {
            let (n, word) = part.trim().split_once(' ')?;
            counts.insert(word.to_string(), n.parse().ok()?);
        }
    }
    (lines == 2).then_some(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As Debian bookworm's h2load 1.52 prints it.
    const REPORT: &str = "starting benchmark...
spawning thread #0: 4 total client(s). 2000 total requests
TLS Protocol: TLSv1.3
Cipher: TLS_AES_256_GCM_SHA384
Server Temp Key: X25519 253 bits
Application protocol: h2
progress: 10% done

finished in 1.52s, 1315.79 req/s, 48.83KB/s
requests: 2000 total, 2000 started, 2000 done, 1999 succeeded, 1 failed, 0 errored, 0 timeout
status codes: 1999 2xx, 0 3xx, 0 4xx, 1 5xx
traffic: 74.22KB (76000) total, 23.44KB (24000) headers (space savings 90.00%), 54.69KB (56000) data
";

    #[test]
    fn an_h2load_summary_is_parsed() {
        let run = parse_h2load(REPORT).unwrap();
        assert_eq!((run["succeeded"], run["failed"], run["errored"], run["timeout"]), (1999, 1, 0, 0));
        assert_eq!((run["2xx"], run["5xx"]), (1999, 1));
        assert_eq!(parse_h2load("connect: Connection refused"), None);
    }

    #[test]
    fn the_client_hello_is_one_well_formed_record() {
        let hello = client_hello(b"foo");
        assert_eq!(&hello[..3], [0x16, 0x03, 0x01]);
        assert_eq!(u16::from_be_bytes([hello[3], hello[4]]) as usize, hello.len() - 5);
        assert_eq!(hello[5], 1);
        assert_eq!(u32::from_be_bytes([0, hello[6], hello[7], hello[8]]) as usize, hello.len() - 9);
        assert!(hello.ends_with(&[0x00, 0x10, 0, 6, 0, 4, 3, b'f', b'o', b'o']));
    }

    #[test]
    fn a_stat_is_read_by_its_key() {
        let line = "accepted=3 ended=2 tls_failed=1 tls_failed_extra=9\n";
        assert_eq!(stat(line, "tls_failed"), Ok(1));
        assert!(stat(line, "tls_timeouts").is_err());
    }
}
