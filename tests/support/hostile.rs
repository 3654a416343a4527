//! Hostile clients against `examples/http_server`'s service, run in this
//! process (`server.rs`): the scenarios of the bounded tests in
//! `tests/hyper.rs` (`cargo xtask test`) and of their full versions in
//! `tests/http_stress.rs` (`cargo xtask stress`), which differ only in
//! their numbers.
//!
//! Every scenario ends the same way ([`run`]): every connection the server
//! accepted has ended, a new client's `GET /` is answered within
//! [`PROMPTLY`], and, once the process is back to the threads it had before
//! the load (each pool thread holds about 1 MiB of private bytes), its
//! handles and private bytes are back within the leak checks' slack. The
//! hostile clients are `std` sockets on threads of their own, not on the
//! pool, so the pool's threads are the server's (and its `GET /` client's).
//!
//! A scenario reads process-wide counts: it must run in a process of its
//! own (`support::alone`; the stress harness under nextest runs each
//! scenario in its own process). Include it beside `support`, `leak`,
//! `server`, `client` and `service`.
#![allow(dead_code)]

use std::future::Future;
use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use windows_threadpool::{task, time};

use crate::leak as process;
use crate::server::{Exec, Server, still_serves};
use crate::service::{self, Stats};
use crate::{client, support};

/// How long a new client's `GET /` may take, during a scenario and after
/// it. Under Wine one takes a few milliseconds (connect, request, answer);
/// a server queued behind its hostile clients takes their timeouts or the
/// test's patience.
pub const PROMPTLY: Duration = Duration::from_secs(2);

/// How long the threads the load added may take to idle out (Wine ends an
/// idle pool thread after 5 s).
const SETTLE: Duration = Duration::from_secs(30);

/// The server a scenario runs against.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub header_timeout: Duration,
    pub max_connections: u64,
    /// How long the whole scenario may take (its load, the checks and the
    /// threads' settling).
    pub limit: Duration,
}

impl Setup {
    /// The example's defaults (10 s header timeout, 10,000 connections).
    pub fn new(limit: Duration) -> Self {
        Self { header_timeout: Duration::from_secs(10), max_connections: service::MAX_CONNECTIONS, limit }
    }
}

/// What a scenario's load gets: the server's address and counters.
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

    pub fn get(&self, counter: impl Fn(&Stats) -> &std::sync::atomic::AtomicU64) -> u64 {
        Stats::get(counter(&self.stats))
    }
}

/// Polls `done` every 10 ms until it holds; panics after `patience`.
pub async fn until(what: &str, patience: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + patience;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {patience:?}");
        time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs `f` on a thread of its own (not the pool's) and awaits its result;
/// a panic there is resumed here.
pub async fn off_pool<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || drop(tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)))));
    match rx.await.expect("the client thread ended without a result") {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The process's threads, open handles (not threads) and private bytes.
#[derive(Debug, Clone, Copy)]
pub struct Footprint {
    pub threads: usize,
    pub handles: usize,
    pub private_bytes: usize,
}

impl Footprint {
    pub fn now() -> Self {
        Self {
            threads: process::thread_ids().len(),
            handles: process::handle_count(),
            private_bytes: process::private_bytes(),
        }
    }
}

/// The largest thread count seen by a sampler thread (every 50 ms; a
/// Toolhelp snapshot takes about 8 ms under Wine), which counts itself out.
struct Peak {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicUsize>,
    sampler: std::thread::JoinHandle<()>,
}

impl Peak {
    fn start() -> Self {
        let (stop, peak) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let (s, p) = (stop.clone(), peak.clone());
        let sampler = std::thread::spawn(move || {
            while !s.load(SeqCst) {
                p.fetch_max(process::thread_ids().len() - 1, SeqCst);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Self { stop, peak, sampler }
    }

    fn stop(self) -> usize {
        self.stop.store(true, SeqCst);
        self.sampler.join().unwrap();
        self.peak.load(SeqCst)
    }
}

/// What a scenario measured.
#[derive(Debug)]
pub struct Report {
    pub name: &'static str,
    /// The load's own time.
    pub load: Duration,
    pub before: Footprint,
    pub peak_threads: usize,
    pub after: Footprint,
    /// How long the threads took to come back to `before.threads`.
    pub settled_in: Duration,
    /// The `GET /` after the load.
    pub get_after: Duration,
    pub stats: String,
    /// The scenario's own numbers.
    pub notes: String,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (b, a) = (&self.before, &self.after);
        write!(
            f,
            "{}: load {:.2}s; {}; threads {} -> peak {} -> {} (settled in {:.1}s); handles {} -> {}; private bytes \
             {} -> {} ({:+}); GET / after it in {:.1} ms; {}",
            self.name,
            self.load.as_secs_f64(),
            self.notes,
            b.threads,
            self.peak_threads,
            a.threads,
            self.settled_in.as_secs_f64(),
            b.handles,
            a.handles,
            b.private_bytes,
            a.private_bytes,
            a.private_bytes as i64 - b.private_bytes as i64,
            self.get_after.as_secs_f64() * 1e3,
            self.stats
        )
    }
}

/// Starts the server as `setup` says, warms it up, runs `load` against it
/// and checks the end every scenario shares (see the module docs); prints
/// and returns the report.
pub fn run<F, Fut>(name: &'static str, setup: Setup, load: F) -> Report
where
    F: FnOnce(Target) -> Fut + Send + 'static,
    Fut: Future<Output = String> + Send + 'static,
{
    let started = Instant::now();
    let stage = Arc::new(std::sync::Mutex::new("starting"));
    let at = stage.clone();
    // Says on stderr where the scenario is, so a failure shows how far it got.
    let step = move |what: &'static str| {
        eprintln!("{name}: {:.3}s: {what}", started.elapsed().as_secs_f64());
        *at.lock().unwrap() = what;
    };
    let report = task::block_on(time::timeout(setup.limit, async move {
        let server = Server::start_with(&Exec::Pool, setup.header_timeout, setup.max_connections);
        let target = Target { addr: server.addr, stats: server.stats.clone() };
        // The first connections' allocations are the pool's and the
        // allocator's to keep.
        for _ in 0..20 {
            drop(windows_threadpool::net::TcpStream::connect(target.addr).await.unwrap());
        }
        target.promptly("after the warm-up").await;
        target.all_ended("the warm-up's connections ended").await;
        step("warmed up");
        let before = Footprint::now();
        let peak = Peak::start();
        step("the load");
        let t = Instant::now();
        let notes = load(target.clone()).await;
        let load = t.elapsed();
        step("waiting for its connections to end");
        target.all_ended("every connection of the load ended").await;
        step("GET / after the load");
        let get_after = target.promptly("after the load").await;
        target.all_ended("the last GET's connection ended").await;
        let peak_threads = peak.stop();
        step("waiting for the threads to settle");
        let t = Instant::now();
        // Polled from this thread with the pool left alone: Wine ends an
        // idle pool thread 5 s after it was last woken, and a timer of the
        // pool's every 100 ms would wake them in turn and keep them.
        let mut seen = Vec::new();
        loop {
            let n = process::thread_ids().len();
            if seen.last().is_none_or(|&(_, m)| m != n) {
                seen.push((t.elapsed().as_millis(), n));
            }
            if n <= before.threads {
                break;
            }
            assert!(
                t.elapsed() < SETTLE,
                "the threads did not come back to {} within {SETTLE:?} (ms, threads): {seen:?}",
                before.threads
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let settled_in = t.elapsed();
        let after = Footprint::now();
        let stats = format!("{:?}", server.stats);
        step("stopping the server");
        server.stop().await;
        Report { name, load, before, peak_threads, after, settled_in, get_after, stats, notes }
    }))
    .unwrap_or_else(|_| panic!("{name}: not done within {:?}: stuck in {:?}", setup.limit, stage.lock().unwrap()));
    println!("{report}");
    let (b, a) = (&report.before, &report.after);
    assert!(a.handles <= b.handles + process::POOL_HANDLE_SLACK, "handles leaked: {report}");
    assert!(a.private_bytes <= b.private_bytes + process::PRIVATE_BYTES_SLACK, "private bytes leaked: {report}");
    report
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

#[path = "rng.rs"]
mod rng;
pub use rng::Rng;

// ---- the scenarios ----------------------------------------------------------

/// The heads of [`bad_heads`]' rounds: what hyper must refuse, each
/// answered 400.
fn bad_heads_of(rng: &mut Rng) -> Vec<(&'static str, Vec<u8>)> {
    // Garbage with one byte no request may hold where it stands, so each
    // is an error, never a head hyper waits to see the rest of.
    let mut line = vec![rng.next() as u8 % 9]; // a control byte where the method starts
    line.extend(rng.bytes(1000));
    line.extend_from_slice(b"\r\n\r\n");
    let mut name = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    name.push(b"()<>@,;\\\"/[]?={} "[rng.next() as usize % 18]); // a separator where a name starts
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

/// `rounds` of bad heads (garbage in the request line, a header's name and
/// its value, `HTTP/9.9`, a negative and a doubled conflicting
/// `Content-Length`, a bad chunk size in a chunked body), one connection
/// each, one after another: each answered 400 (unless a reset lost the
/// answer: the server closes with bytes unread) and counted a bad request,
/// but for the bad chunk, which the service answers 400 (its body fails).
pub fn bad_heads(rounds: usize, seed: u64) -> Report {
    run("bad_heads", Setup::new(support::PATIENCE * 2), move |t| async move {
        let addr = t.addr;
        let lost = off_pool(move || {
            let (mut rng, mut lost) = (Rng::new(seed), 0);
            for _ in 0..rounds {
                for (what, head) in bad_heads_of(&mut rng) {
                    let mut s = connect(addr);
                    // The server may close before it has read all of it.
                    let _ = s.write_all(&head);
                    let (got, reset) = read_to_close(&mut s);
                    let got = String::from_utf8_lossy(&got);
                    if got.is_empty() && reset {
                        lost += 1;
                    } else {
                        assert!(got.starts_with("HTTP/1.1 400 "), "{what}: {got:?}");
                    }
                }
            }
            lost
        })
        .await;
        let heads = rounds as u64 * 7;
        assert_eq!(t.get(|s| &s.accepted), 20 + 1 + heads);
        assert_eq!(t.get(|s| &s.bad_requests), rounds as u64 * 6, "{:?}", t.stats);
        // The bad chunk is the body's: its head is a request, answered 400
        // by the service, and hyper then closes the connection.
        assert_eq!(t.get(|s| &s.requests), 1 + rounds as u64, "{:?}", t.stats);
        assert_eq!(t.get(|s| &s.closed), 21 + rounds as u64, "{:?}", t.stats);
        format!("{heads} bad heads (seed {seed}), {lost} answers lost to a reset")
    })
}

/// Body sizes the half-closing clients cycle through.
const HALF_CLOSE_BODIES: [usize; 5] = [0, 1, 1000, 64 << 10, 1 << 20];

/// `clients` clients, one after another, each sending a `POST /echo` and
/// then shutting down its sending side (`shutdown(Write)`) before it reads:
/// each is answered 200 with its body (hyper's `half_close(true)`; without
/// it hyper takes the end of the request stream for the client leaving
/// and drops the answer), then closed.
pub fn half_close(clients: usize) -> Report {
    run("half_close", Setup::new(support::PATIENCE * 2), move |t| async move {
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
        assert_eq!(t.get(|s| &s.requests), 1 + clients as u64);
        format!("{clients} POST /echo then shutdown(Write), each answered")
    })
}
