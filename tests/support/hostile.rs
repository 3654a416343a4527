//! Hostile clients against `examples/http_server`'s service, run in this
//! process (`server.rs`): the scenarios of the bounded tests in
//! `tests/hyper.rs` (`cargo xtask test`) and of their full versions in
//! `tests/http_stress.rs` (`cargo xtask stress`), which differ only in
//! their numbers. How they run, and the end every scenario shares, is
//! `rounds.rs`'s; here the server's well-behaved client is a `GET /`, and
//! the hostile clients are `std` sockets. Include it beside `support`,
//! `leak`, `rounds`, `server`, `client` and `service`.
#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use windows_threadpool::{task, time};

use crate::leak as process;
use crate::rounds::SETTLE;
use crate::rounds::{Footprint, PROMPTLY, off_pool, until};
use crate::server::{Exec, Server, reset_on_close, still_serves};
use crate::service::{self, HELLO, Stats};
use crate::{client, support};

/// The server a scenario runs against, and its rounds.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub header_timeout: Duration,
    pub max_connections: u64,
    /// Measured rounds, after the warm-up round.
    pub rounds: usize,
    /// How long the rounds may take (the settling and counting around them
    /// get [`run_all`]'s own allowance).
    pub limit: Duration,
}

impl Setup {
    /// The example's defaults (10 s header timeout, 10,000 connections).
    pub fn new(rounds: usize, limit: Duration) -> Self {
        Self { header_timeout: Duration::from_secs(10), max_connections: service::MAX_CONNECTIONS, rounds, limit }
    }
}

/// What a scenario's rounds get: the server's address and counters.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub stats: Arc<Stats>,
}

impl Target {
    /// A new client's `GET /`, answered within [`PROMPTLY`]; its time.
    pub async fn promptly(&self, during: &str) -> Duration {
        let t = Instant::now();
        if time::timeout(PROMPTLY, still_serves(self.addr)).await.is_err() {
            panic!("GET / {during}: not answered within {PROMPTLY:?} ({:?})", self.stats);
        }
        t.elapsed()
    }

    /// Waits (at most [`support::PATIENCE`]) until every accepted
    /// connection has ended.
    pub async fn all_ended(&self, what: &str) {
        let stats = self.stats.clone();
        until(what, support::PATIENCE, move || stats.ended() == Stats::get(&stats.accepted)).await;
    }

    /// A counter's value.
    pub fn get(&self, counter: impl Fn(&Stats) -> &AtomicU64) -> u64 {
        Stats::get(counter(&self.stats))
    }

    /// Waits (at most `patience`) until `counter` reaches `value`, and
    /// checks it did not pass it.
    pub async fn reaches(&self, what: &str, patience: Duration, counter: fn(&Stats) -> &AtomicU64, value: u64) {
        let (count, show) = (|| Stats::get(counter(&self.stats)), || format!("{:?}", self.stats));
        crate::rounds::reaches(what, patience, count, value, show).await;
    }
}

impl crate::rounds::Server for Server {
    type Setup = Setup;
    type Target = Target;
    const WINE_BYTES_PER_CONNECTION: usize = process::WINE_SOCKET_BYTES_PER_CYCLE;

    fn start(setup: &Setup) -> Self {
        Server::start_with(&Exec::Pool, setup.header_timeout, setup.max_connections)
    }

    fn target(&self) -> Target {
        Target { addr: self.addr, stats: self.stats.clone() }
    }

    async fn promptly(target: &Target, during: &str) -> Duration {
        target.promptly(during).await
    }

    async fn all_ended(target: &Target, what: &str) {
        target.all_ended(what).await
    }

    fn connections(&self) -> usize {
        Server::accepted(self) as usize
    }

    fn stats(&self) -> String {
        format!("{:?}", self.stats)
    }

    async fn stop(self) {
        Server::stop(self).await
    }
}

/// A scenario of this server.
pub type Scenario = crate::rounds::Scenario<Server>;

/// A scenario of `round` against a server set up as `setup`.
fn scenario<R, Fut>(name: &'static str, setup: Setup, round: R) -> Scenario
where
    R: Fn(Target, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = String> + Send + 'static,
{
    Scenario::new(name, setup, setup.rounds, setup.limit, round)
}

// ---- raw clients ----------------------------------------------------------

/// A blocking connection to `addr` whose reads and writes give up after
/// [`support::PATIENCE`].
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(support::PATIENCE)).unwrap();
    s.set_write_timeout(Some(support::PATIENCE)).unwrap();
    s
}

/// Every byte until the server closes the connection (or resets it); `true`
/// if it was reset. Panics if it stays open past [`support::PATIENCE`].
pub fn read_to_close(s: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (got, false),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
                panic!("the server kept the connection open past {:?}", support::PATIENCE)
            }
            Err(_) => return (got, true),
        }
    }
}

/// One response read off `s`: its status and body (`Content-Length` bodies
/// only, as the service sends).
pub fn read_response(s: &mut TcpStream) -> std::io::Result<(u16, Vec<u8>)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match s.read(&mut buf)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => got.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
    let status = head.get(9..12).and_then(|s| s.parse().ok()).ok_or(std::io::ErrorKind::InvalidData)?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(std::io::ErrorKind::InvalidData)?;
    let mut body = got.split_off(head_end);
    while body.len() < len {
        match s.read(&mut buf)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => body.extend_from_slice(&buf[..n]),
        }
    }
    if body.len() != len {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    Ok((status, body))
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

pub use crate::rng::Rng;

// ---- the scenarios ----------------------------------------------------------

/// The separators of RFC 9110's tokens, none of which may start a
/// header's name.
const SEPARATORS: &[u8] = b"()<>@,;\\\"/[]?={} \t";

/// Garbage bytes and the heads hyper must refuse, each answered 400: a
/// garbage request line, header name and header value (each with one
/// byte no request may hold where it stands, so each is an error at once,
/// never a head hyper waits to see the rest of), `HTTP/9.9`, a negative
/// and a doubled conflicting `Content-Length`, a bad chunk size.
fn bad_heads_of(rng: &mut Rng) -> Vec<(&'static str, Vec<u8>)> {
    let mut line = vec![rng.next() as u8 % 9]; // a control byte where the method starts
    line.extend(rng.bytes(1000));
    line.extend_from_slice(b"\r\n\r\n");
    let mut name = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    name.push(SEPARATORS[rng.next() as usize % SEPARATORS.len()]); // a separator where a name starts
    name.extend(rng.bytes(1000));
    name.extend_from_slice(b": v\r\n\r\n");
    let mut value = b"GET / HTTP/1.1\r\nHost: x\r\nX-Garbage: ".to_vec();
    value.push(rng.next() as u8 % 9); // a control byte
    value.extend(rng.bytes(1000).iter().map(|&b| if b == b'\r' || b == b'\n' { b'.' } else { b }));
    value.extend_from_slice(b"\r\n\r\n");
    vec![
        ("garbage request line", line),
        ("garbage header name", name),
        ("garbage header value", value),
        ("HTTP/9.9", b"GET / HTTP/9.9\r\nHost: x\r\n\r\n".to_vec()),
        ("negative Content-Length", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n".to_vec()),
        (
            "conflicting Content-Lengths",
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!".to_vec(),
        ),
        (
            "bad chunk size",
            b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n".to_vec(),
        ),
    ]
}

/// Each round, `sets` sets of [`bad_heads_of`] (seeded), one connection
/// each, one after another: each answered 400 (unless the reset of a close
/// with bytes unread lost the answer) and counted a bad request, but for
/// the bad chunk, which is a request whose body the service fails to read
/// (it answers 400, and hyper closes).
pub fn bad_heads(sets: usize, rounds: usize, seed: u64) -> Scenario {
    scenario("bad_heads", Setup::new(rounds, support::PATIENCE * 2), move |t, round| async move {
        let (addr, bad, requests) = (t.addr, t.get(|s| &s.bad_requests), t.get(|s| &s.requests));
        let lost = off_pool(move || {
            let (mut rng, mut lost) = (Rng::new(seed ^ round as u64), 0);
            for _ in 0..sets {
                for (what, head) in bad_heads_of(&mut rng) {
                    let mut s = connect(addr);
                    // The server may close before it has read all of it.
                    let _ = s.write_all(&head);
                    let (got, reset) = read_to_close(&mut s);
                    if got.is_empty() && reset {
                        lost += 1;
                    } else {
                        let got = String::from_utf8_lossy(&got);
                        assert!(got.starts_with("HTTP/1.1 400 "), "{what}: {got:?}");
                    }
                }
            }
            lost
        })
        .await;
        assert_eq!(t.get(|s| &s.bad_requests), bad + 6 * sets as u64, "{:?}", t.stats);
        assert_eq!(t.get(|s| &s.requests), requests + sets as u64, "{:?}", t.stats);
        format!("{} bad heads a round (seed {seed}), {lost} answers lost to a reset", 7 * sets)
    })
}

/// Body sizes the half-closing clients cycle through.
const HALF_CLOSE_BODIES: [usize; 5] = [0, 1, 1000, 64 << 10, 1 << 20];

/// Each round, `clients` clients one after another, each sending a `POST
/// /echo` (0 B to 1 MiB) and then shutting down its sending side
/// (`shutdown(Write)`) before it reads: each answered 200 with its body
/// (hyper's `half_close(true)`; without it hyper takes the end of the
/// request stream for the client leaving and drops the answer), then
/// closed.
pub fn half_close(clients: usize, rounds: usize) -> Scenario {
    scenario("half_close", Setup::new(rounds, support::PATIENCE * 2), move |t, _| async move {
        let addr = t.addr;
        off_pool(move || {
            for i in 0..clients {
                let body = client::pattern(HALF_CLOSE_BODIES[i % HALF_CLOSE_BODIES.len()]);
                let mut s = connect(addr);
                let head = format!("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", body.len());
                s.write_all(head.as_bytes()).unwrap();
                s.write_all(&body).unwrap();
                s.shutdown(Shutdown::Write).unwrap();
                let answer = read_response(&mut s);
                assert!(
                    matches!(&answer, Ok((200, echoed)) if echoed[..] == body[..]),
                    "client {i} ({} bytes, half-closed): {:?}",
                    body.len(),
                    answer.map(|(status, echoed)| (status, echoed.len()))
                );
                let (rest, _) = read_to_close(&mut s);
                assert!(rest.is_empty(), "client {i}: {} bytes after the answer", rest.len());
            }
        })
        .await;
        format!("{clients} POST /echo a round, each then shutdown(Write), each answered")
    })
}

/// A head of one header line of 16 MiB.
fn huge_line() -> Vec<u8> {
    let mut head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Huge: ".to_vec();
    head.resize(head.len() + (16 << 20), b'a');
    head.extend_from_slice(b"\r\n\r\n");
    head
}

/// A head of 10,000 headers.
fn ten_thousand_headers() -> Vec<u8> {
    let mut head = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..10_000 {
        head.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// Writes `head` in 64 KiB pieces until the server stops taking it, then
/// reads to the close: `(bytes written, the answer, reset)`.
fn send_oversized(addr: SocketAddr, head: &[u8]) -> (usize, Vec<u8>, bool) {
    let mut s = connect(addr);
    let mut sent = 0;
    for piece in head.chunks(64 << 10) {
        match s.write_all(piece) {
            Ok(()) => sent += piece.len(),
            Err(_) => break,
        }
    }
    let (got, reset) = read_to_close(&mut s);
    (sent, got, reset)
}

/// Each round, `clients` clients at once, half with a head of one 16 MiB
/// header line, half with 10,000 headers: each cut off at
/// [`service::MAX_HEADER_SIZE`] (431, unless the reset of a close with
/// bytes unread lost it) and counted too large; none is a request.
pub fn oversized_heads(clients: usize, rounds: usize) -> Scenario {
    scenario("oversized_heads", Setup::new(rounds, support::PATIENCE * 2), move |t, _| async move {
        let (addr, too_large, requests) = (t.addr, t.get(|s| &s.too_large), t.get(|s| &s.requests));
        let written = off_pool(move || {
            let (line, many) = (Arc::new(huge_line()), Arc::new(ten_thousand_headers()));
            let clients: Vec<_> = (0..clients)
                .map(|i| {
                    let head = if i % 2 == 0 { line.clone() } else { many.clone() };
                    std::thread::spawn(move || send_oversized(addr, &head))
                })
                .collect();
            let mut written = Vec::new();
            for (i, c) in clients.into_iter().enumerate() {
                let (n, got, reset) = c.join().unwrap();
                let got = String::from_utf8_lossy(&got);
                assert!(got.starts_with("HTTP/1.1 431 ") || got.is_empty() && reset, "client {i}: {got:?}");
                written.push(n);
            }
            written
        })
        .await;
        assert_eq!(t.get(|s| &s.too_large), too_large + clients as u64, "{:?}", t.stats);
        assert_eq!(t.get(|s| &s.requests), requests, "{:?}", t.stats);
        let most = written.iter().max().copied().unwrap_or(0);
        format!("{clients} oversized heads a round (16 MiB line, 10,000 headers), at most {most} bytes of one written")
    })
}

/// Each round, `clients` clients at once each send the head of a 1 MiB
/// `POST /echo` and 64 KiB of its body and, once the server has read every
/// head, all reset: each connection fails, alone.
pub fn resets_mid_body(clients: usize, rounds: usize) -> Scenario {
    scenario("resets_mid_body", Setup::new(rounds, support::PATIENCE * 2), move |t, round| async move {
        let (addr, requests, failed) = (t.addr, t.get(|s| &s.requests), t.get(|s| &s.failed));
        let open = off_pool(move || {
            let head = format!("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", 1 << 20);
            (0..clients)
                .map(|_| {
                    let mut s = connect(addr);
                    s.write_all(head.as_bytes()).unwrap();
                    s.write_all(&[7u8; 64 << 10]).unwrap();
                    s
                })
                .collect::<Vec<_>>()
        })
        .await;
        let heads = requests + clients as u64;
        t.reaches(&format!("round {round}: every head read"), support::PATIENCE, |s| &s.requests, heads).await;
        off_pool(move || {
            for s in &open {
                reset_on_close(s);
            }
        })
        .await;
        let all = failed + clients as u64;
        t.reaches(&format!("round {round}: every reset connection failed"), support::PATIENCE, |s| &s.failed, all)
            .await;
        format!("{clients} resets a round, 64 KiB into a 1 MiB body")
    })
}

/// Each round, `clients` connections opened at once and, once the server
/// has accepted them all, closed at once without a request: each ends,
/// closed, with nothing served.
pub fn dropped_without_a_request(clients: usize, rounds: usize) -> Scenario {
    scenario("dropped_without_a_request", Setup::new(rounds, support::PATIENCE * 2), move |t, round| async move {
        let (addr, accepted, closed) = (t.addr, t.get(|s| &s.accepted), t.get(|s| &s.closed));
        let requests = t.get(|s| &s.requests);
        let open = off_pool(move || (0..clients).map(|_| connect(addr)).collect::<Vec<_>>()).await;
        let all = accepted + clients as u64;
        t.reaches(&format!("round {round}: every connection accepted"), support::PATIENCE, |s| &s.accepted, all).await;
        drop(open);
        let all = closed + clients as u64;
        t.reaches(&format!("round {round}: every connection closed"), support::PATIENCE, |s| &s.closed, all).await;
        assert_eq!(t.get(|s| &s.requests), requests, "{:?}", t.stats);
        format!("{clients} connections a round closed at once without a request")
    })
}

/// Each round, one client pipelines `requests` `GET /`s and never reads an
/// answer, while another client's `GET /`s (each on a new connection) are
/// answered within [`PROMPTLY`], from once the server has started on the
/// flood until it has answered them all or stalled (no progress for
/// 500 ms: its answers fill the socket's buffers, which the flooder never
/// drains); then the flooder resets.
pub fn pipelined_flood(requests: usize, rounds: usize) -> Scenario {
    scenario("pipelined_flood", Setup::new(rounds, support::PATIENCE * 2), move |t, round| async move {
        let (addr, base) = (t.addr, t.get(|s| &s.requests));
        let (written, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (w, halt) = (written.clone(), stop.clone());
        let flooder = off_pool(move || {
            let flood = GET.repeat(requests);
            let s = connect(addr);
            s.set_nonblocking(true).unwrap();
            let deadline = Instant::now() + support::PATIENCE;
            let mut off = 0;
            while !halt.load(SeqCst) {
                assert!(Instant::now() < deadline, "the flood not stopped within {:?}", support::PATIENCE);
                match (&s).write(&flood[off..]) {
                    Ok(n) => off += n,
                    // Full (or all written): the server reads on when it answers.
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    Err(e) => panic!("the flood's write: {e}"),
                }
                w.store(off, SeqCst);
                if off == flood.len() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            reset_on_close(&s);
        });
        let flooder = task::spawn(flooder);
        let stats = t.stats.clone();
        let started = move || Stats::get(&stats.requests) > base;
        until(&format!("round {round}: the flood's first request read"), support::PATIENCE, started).await;
        let deadline = Instant::now() + support::PATIENCE;
        let (mut gets, mut slowest, mut served) = (0u64, Duration::ZERO, 0);
        let mut progress = Instant::now();
        loop {
            slowest = slowest.max(t.promptly("during the flood").await);
            gets += 1;
            let now = t.get(|s| &s.requests) - base - gets;
            if now != served {
                (served, progress) = (now, Instant::now());
            }
            if served == requests as u64 || progress.elapsed() > Duration::from_millis(500) {
                break;
            }
            assert!(Instant::now() < deadline, "round {round}: the flood neither answered nor stalled: {served}");
        }
        stop.store(true, SeqCst);
        flooder.await.expect("the flooder panicked");
        let ended = move || t.stats.ended() == Stats::get(&t.stats.accepted);
        until(&format!("round {round}: the flood's connection ended"), support::PATIENCE, ended).await;
        format!(
            "{requests} GETs pipelined ({} bytes of {} written), {served} answered before the flood stopped; {gets} \
             other GETs meanwhile, the slowest in {:.1} ms",
            written.load(SeqCst),
            requests * GET.len(),
            slowest.as_secs_f64() * 1e3
        )
    })
}

/// Reads one answer to `GET /` off each of `conns`, in order: 200 and
/// [`HELLO`].
fn hellos(conns: &mut [TcpStream], what: &str) {
    for (i, s) in conns.iter_mut().enumerate() {
        let answer = read_response(s);
        assert!(matches!(&answer, Ok((200, body)) if body == HELLO), "{what}, connection {i}: {answer:?}");
    }
}

/// Each round, `clients` connections each served one `GET /` (all sent
/// first, then all read), left idle for `idle` (and, when that is 5 s or
/// more, until the threads the burst added have idled out), then each
/// served another; then all closed. Reports what they cost while idle.
/// The header timeout is the scenario's limit: hyper's header read timeout
/// also runs while a kept-alive connection waits for its next request.
pub fn idle_connections(clients: usize, idle: Duration, rounds: usize) -> Scenario {
    let limit = support::PATIENCE * 2 + (idle + SETTLE) * 2 * (rounds as u32 + 1);
    let setup = Setup { header_timeout: limit, ..Setup::new(rounds, limit) };
    scenario("idle_connections", setup, move |t, round| async move {
        let (addr, requests, closed) = (t.addr, t.get(|s| &s.requests), t.get(|s| &s.closed));
        let before = Footprint::memory();
        let mut open = off_pool(move || {
            let mut open: Vec<_> = (0..clients).map(|_| connect(addr)).collect();
            for s in &mut open {
                s.write_all(GET).unwrap();
            }
            hellos(&mut open, "the first GET");
            open
        })
        .await;
        // Idle for a while: the connections wait, each with a zero-byte
        // receive, no buffer and no thread.
        let (idle_at, seen) = crate::rounds::after_idle(idle, before.threads).await;
        let open = off_pool(move || {
            for s in &mut open {
                s.write_all(GET).unwrap();
            }
            hellos(&mut open, "the second GET, after idling");
            open
        })
        .await;
        assert_eq!(t.get(|s| &s.requests), requests + 2 * clients as u64, "round {round}: {:?}", t.stats);
        drop(open);
        let all = closed + clients as u64;
        t.reaches(&format!("round {round}: every connection closed"), support::PATIENCE, |s| &s.closed, all).await;
        let per = |a: usize, b: usize| (b as i64 - a as i64) / clients as i64;
        format!(
            "{clients} connections a round, each served one GET, idle {idle:?}, all served another; while idle \
             (the clients' sockets included): threads {} -> {} ({seen:?}), held {:+} a connection, committed {:+} a \
             connection, private bytes {:+} a connection",
            before.threads,
            idle_at.threads,
            per(before.held(), idle_at.held()),
            per(before.committed, idle_at.committed),
            per(before.private_bytes, idle_at.private_bytes),
        )
    })
}

/// Each round, `clients` slowloris clients each send a head one byte a
/// second; the header timeout (`header_timeout`) cuts each off, none before
/// it, while a new client's `GET /` is answered within [`PROMPTLY`] every
/// 200 ms until the last is cut off.
///
/// Cutting them off must not take a pool thread each: a cut connection's
/// socket is dropped with its receive in flight, and its close must wait
/// for no completion on a thread of its own (no hand-off, the end every
/// scenario shares). The threads are reported, not bounded: Wine's pool
/// starts one for each callback submitted while all are busy (500 cut-offs
/// within 0.7 s, each a timer's wake, a poll and a cancelled receive's
/// completion, peaked at 199 threads; docs/wine.md), which says nothing of
/// the crate.
pub fn slowloris(clients: usize, header_timeout: Duration, rounds: usize) -> Scenario {
    let limit = support::PATIENCE * 2 + (header_timeout + support::PATIENCE) * (rounds as u32 + 1);
    slowloris_rounds(clients, Setup { header_timeout, ..Setup::new(rounds, limit) })
}

fn slowloris_rounds(clients: usize, setup: Setup) -> Scenario {
    let header_timeout = setup.header_timeout;
    scenario("slowloris", setup, move |t, round| async move {
        let (addr, cut, requests) = (t.addr, t.get(|s| &s.header_timeouts), t.get(|s| &s.requests));
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let t0 = Instant::now();
        let lorises = task::spawn(off_pool(move || {
            let mut open: Vec<Option<TcpStream>> = (0..clients).map(|_| Some(connect(addr))).collect();
            let head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ";
            let deadline = Instant::now() + header_timeout + support::PATIENCE;
            let mut sent = 0;
            while !stop.load(SeqCst) {
                assert!(Instant::now() < deadline, "the slowloris clients not cut off within {:?}", support::PATIENCE);
                let byte = [head.get(sent).copied().unwrap_or(b'a')];
                sent += 1;
                for s in &mut open {
                    // A write to a connection the server closed fails (at
                    // the latest the second one).
                    if s.as_mut().is_some_and(|s| s.write_all(&byte).is_err()) {
                        *s = None;
                    }
                }
                for _ in 0..10 {
                    if stop.load(SeqCst) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            // Every one was cut off: what is left to read ends at once.
            for s in open.iter_mut().flatten() {
                let (got, _) = read_to_close(s);
                let got = String::from_utf8_lossy(&got);
                assert!(got.is_empty() || got.starts_with("HTTP/1.1 408 "), "{got:?}");
            }
            sent
        }));
        let deadline = t0 + header_timeout + support::PATIENCE;
        let (mut gets, mut gets_before_a_cut, mut slowest, mut first_cut) = (0u64, 0u64, Duration::ZERO, None);
        loop {
            let now = t.get(|s| &s.header_timeouts) - cut;
            if now > 0 && first_cut.is_none() {
                first_cut = Some(t0.elapsed());
            }
            if now == clients as u64 {
                break;
            }
            assert!(Instant::now() < deadline, "round {round}: {now} of {clients} slowloris clients cut off");
            slowest = slowest.max(t.promptly("while slowloris clients send their heads").await);
            gets += 1;
            gets_before_a_cut += u64::from(first_cut.is_none());
            time::sleep(Duration::from_millis(200)).await;
        }
        let all_cut = t0.elapsed();
        done.store(true, SeqCst);
        let sent = lorises.await.expect("the slowloris clients panicked");
        let first_cut = first_cut.unwrap_or_default();
        // Every slowloris connection was accepted after `t0`.
        assert!(first_cut >= header_timeout, "round {round}: one cut off after {first_cut:?}");
        assert!(gets_before_a_cut > 0, "round {round}: no GET / while all the slowloris clients were on");
        assert_eq!(t.get(|s| &s.requests), requests + gets, "round {round}: {:?}", t.stats);
        format!(
            "{clients} slowloris clients a round ({sent} bytes each at most), cut off from {:.2}s to {:.2}s; {gets} \
             GETs meanwhile ({gets_before_a_cut} before the first cut), the slowest in {:.1} ms",
            first_cut.as_secs_f64(),
            all_cut.as_secs_f64(),
            slowest.as_secs_f64() * 1e3
        )
    })
}
