//! Hostile clients against `examples/https_server` over TLS, run in this
//! process: the example's accept loop and connection task (`serve.rs`,
//! with its limits) over its axum application (`app.rs`), on a free
//! loopback port, with `tls.rs`'s rustls server configuration (the
//! example's provider, protocol versions and ALPN names, over a fresh
//! self-signed certificate). How the scenarios run, and the end every one
//! shares, is `rounds.rs`'s; here the well-behaved client is a `GET /` over
//! TLS on the pool (tokio-rustls over `io::Compat`), and the hostile
//! clients are rustls' blocking client over `std` sockets, on threads of
//! their own. `tests/https_stress.rs` runs them (`cargo xtask stress`).
//! Include it beside `support`, `leak`, `rng`, `rounds`, `tls`, `serve`
//! and `app`.
#![allow(dead_code)]

use std::io::{self, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use rustls::{ClientConfig, ClientConnection};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use windows_threadpool::io::Compat;
use windows_threadpool::net::{TcpListener, TcpStream};
use windows_threadpool::{task, time};

use crate::leak as process;
use crate::rounds::{Footprint, PROMPTLY, SETTLE, off_pool, until};
use crate::serve::{self, Limits, Stats};
use crate::{app, support, tls};

/// `examples/https_server` on a free loopback port, stopped by
/// [`rounds::Server::stop`](crate::rounds::Server::stop).
pub struct Server {
    addr: SocketAddr,
    stats: Arc<Stats>,
    client: Arc<ClientConfig>,
    /// Dropped (taken) to stop the server.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// What the accept loop returned.
    served: tokio::sync::oneshot::Receiver<io::Result<()>>,
}

/// What a scenario's rounds get: the server's address and counters, and a
/// client configuration that trusts its certificate.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub stats: Arc<Stats>,
    pub client: Arc<ClientConfig>,
}

impl Target {
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

    /// A new client's `GET /` over TLS, answered within [`PROMPTLY`]; its
    /// time.
    pub async fn promptly(&self, during: &str) -> Duration {
        let t = Instant::now();
        match time::timeout(PROMPTLY, get(self.addr, self.client.clone())).await {
            Ok(Ok(answer)) => {
                let text = String::from_utf8_lossy(&answer);
                assert!(text.starts_with("HTTP/1.1 200 ") && text.ends_with(app::HELLO), "GET / {during}: {text:?}");
            }
            Ok(Err(e)) => panic!("GET / {during}: {e} ({:?})", self.stats),
            Err(_) => panic!("GET / {during}: not answered within {PROMPTLY:?} ({:?})", self.stats),
        }
        t.elapsed()
    }

    /// A new client's `GET /` every 200 ms, each answered within
    /// [`PROMPTLY`], until `done` (at most `patience`); how many, and the
    /// slowest.
    async fn serves_meanwhile(&self, what: &str, patience: Duration, done: impl Fn() -> bool) -> (u64, Duration) {
        let deadline = Instant::now() + patience;
        let (mut gets, mut slowest) = (0, Duration::ZERO);
        while !done() {
            assert!(Instant::now() < deadline, "{what}: not within {patience:?} ({:?})", self.stats);
            slowest = slowest.max(self.promptly(what).await);
            gets += 1;
            time::sleep(Duration::from_millis(200)).await;
        }
        (gets, slowest)
    }
}

/// One HTTP/1.1 `GET /` over TLS on the pool: the answer's bytes, up to
/// [`app::HELLO`] (the connection is closed after it).
async fn get(addr: SocketAddr, client: Arc<ClientConfig>) -> io::Result<Vec<u8>> {
    let tcp = Compat::new(TcpStream::connect(addr).await?);
    let mut tls = TlsConnector::from(client).connect(tls::server_name(), tcp).await?;
    tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await?;
    let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
    while !got.ends_with(app::HELLO.as_bytes()) {
        match tls.read(&mut buf).await? {
            0 => break,
            n => got.extend_from_slice(&buf[..n]),
        }
    }
    Ok(got)
}

impl crate::rounds::Server for Server {
    type Setup = Limits;
    type Target = Target;
    const WINE_BYTES_PER_CONNECTION: usize = process::WINE_SOCKET_BYTES_PER_CYCLE;

    fn start(limits: &Limits) -> Self {
        let (server_config, client) = tls::configs(&[tls::H2, tls::HTTP1], &[tls::HTTP1]);
        // Every client's handshake is a full one.
        let mut client = Arc::unwrap_or_clone(client);
        client.resumption = rustls::client::Resumption::disabled();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(Stats::default());
        let server = serve::Server::new(app::router(), Some(TlsAcceptor::from(server_config)), *limits, stats.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (done, served) = tokio::sync::oneshot::channel();
        let serving = serve::serve(listener, server, async move { drop(stopped.await) });
        drop(task::spawn(async move { drop(done.send(serving.await)) }));
        Self { addr, stats, client: Arc::new(client), stop: Some(stop), served }
    }

    fn target(&self) -> Target {
        Target { addr: self.addr, stats: self.stats.clone(), client: self.client.clone() }
    }

    async fn promptly(target: &Target, during: &str) -> Duration {
        target.promptly(during).await
    }

    async fn all_ended(target: &Target, what: &str) {
        let stats = target.stats.clone();
        until(what, support::PATIENCE, move || Stats::get(&stats.ended) == Stats::get(&stats.accepted)).await;
    }

    fn connections(&self) -> usize {
        (Stats::get(&self.stats.accepted) + Stats::get(&self.stats.over_limit)) as usize
    }

    fn stats(&self) -> String {
        self.stats.report().trim_end().to_owned()
    }

    /// Stops it gracefully, and checks that every connection it accepted
    /// ended.
    async fn stop(mut self) {
        drop(self.stop.take());
        (&mut self.served).await.expect("the server's task panicked").unwrap();
        assert_eq!(Stats::get(&self.stats.ended), Stats::get(&self.stats.accepted), "{:?}", self.stats);
    }
}

/// A scenario of this server.
pub type Scenario = crate::rounds::Scenario<Server>;

// ---- raw clients ----------------------------------------------------------

/// A blocking connection to `addr` whose reads and writes give up after
/// [`support::PATIENCE`].
fn connect(addr: SocketAddr) -> StdStream {
    let s = StdStream::connect(addr).unwrap();
    s.set_read_timeout(Some(support::PATIENCE)).unwrap();
    s.set_write_timeout(Some(support::PATIENCE)).unwrap();
    s
}

/// A blocking TLS client's connection: rustls' state and its socket.
struct Tls {
    conn: ClientConnection,
    sock: StdStream,
}

impl Tls {
    /// Connected, nothing sent yet.
    fn new(t: &Target) -> Self {
        Self { conn: ClientConnection::new(t.client.clone(), tls::server_name()).unwrap(), sock: connect(t.addr) }
    }

    /// Connected, with the handshake done (the client's `Finished` written).
    fn handshaken(t: &Target) -> Self {
        let mut c = Self::new(t);
        while c.conn.is_handshaking() {
            c.conn.complete_io(&mut c.sock).unwrap();
        }
        while c.conn.wants_write() {
            c.conn.write_tls(&mut c.sock).unwrap();
        }
        c
    }

    /// The TLS records rustls has to send written to the socket: `Ok(true)`
    /// once all are written, `Ok(false)` if the socket's buffer is full (a
    /// non-blocking one).
    fn send(&mut self) -> io::Result<bool> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// A ClientHello, as the records a fresh client sends first.
fn client_hello(t: &Target) -> Vec<u8> {
    let mut conn = ClientConnection::new(t.client.clone(), tls::server_name()).unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    hello
}

/// Every byte until the server closes the connection (or resets it).
/// Panics if it stays open past [`support::PATIENCE`].
fn read_to_close(s: &mut StdStream) -> Vec<u8> {
    let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) => {
                panic!("the server kept the connection open past {:?}", support::PATIENCE)
            }
            Err(_) => return got,
        }
    }
}

#[path = "sockets.rs"]
mod sockets;
use sockets::reset_on_close;

pub use crate::rng::Rng;

// ---- the scenarios ----------------------------------------------------------

/// Each round, `clients` TLS connections opened one after another, each
/// left idle once its handshake is done (no request): a new client's
/// `GET /` is answered within [`PROMPTLY`] beside them; they stay idle for
/// `idle` (and, when that is 5 s or more, until the threads the burst
/// added have idled out); then all are closed at once. Reports what they
/// cost while idle. The header and idle timeouts are the scenario's
/// limit, so that none ends on its own.
pub fn idle_connections(clients: usize, idle: Duration, rounds: usize) -> Scenario {
    // Each handshake: a few milliseconds, under Wine, on a loaded 2-core machine.
    let handshaking = Duration::from_millis(50) * (clients * (rounds + 1)) as u32;
    let limit = support::PATIENCE * 2 + handshaking + (idle + SETTLE) * 2 * (rounds as u32 + 1);
    let limits = Limits { header_timeout: limit, idle_timeout: limit, ..Limits::DEFAULT };
    Scenario::new("https_idle_connections", limits, rounds, limit, move |t, round| async move {
        let (handshakes, closed, requests) =
            (t.get(|s| &s.tls_handshakes), t.get(|s| &s.ended), t.get(|s| &s.requests));
        let before = Footprint::memory();
        let target = t.clone();
        let started = Instant::now();
        let open = off_pool(move || (0..clients).map(|_| Tls::handshaken(&target)).collect::<Vec<_>>()).await;
        let all = handshakes + clients as u64;
        t.reaches(&format!("round {round}: every handshake done"), support::PATIENCE, |s| &s.tls_handshakes, all).await;
        let opened = started.elapsed();
        let beside = t.promptly(&format!("beside {clients} idle TLS connections")).await;
        // Idle: each connection waits in hyper-util's read of its first bytes.
        let (idle_at, seen) = crate::rounds::after_idle(idle, before.threads).await;
        let after_idle = t.promptly(&format!("beside {clients} TLS connections idle {idle:?}")).await;
        drop(open);
        // The two GETs ended too.
        let all = closed + clients as u64 + 2;
        t.reaches(&format!("round {round}: every connection ended"), support::PATIENCE, |s| &s.ended, all).await;
        assert_eq!(t.get(|s| &s.requests), requests + 2, "round {round}: {:?}", t.stats);
        let per = |a: usize, b: usize| (b as i64 - a as i64) / clients as i64;
        format!(
            "{clients} TLS connections a round, handshakes done in {:.1}s, then idle {idle:?}; a new client's GET / \
             beside them in {:.1} ms, and after the idling in {:.1} ms; while idle (the clients' sockets and TLS \
             state included): threads {} -> {} ({seen:?}), held {:+} a connection, committed {:+} a connection, \
             private bytes {:+} a connection",
            opened.as_secs_f64(),
            beside.as_secs_f64() * 1e3,
            after_idle.as_secs_f64() * 1e3,
            before.threads,
            idle_at.threads,
            per(before.held(), idle_at.held()),
            per(before.committed, idle_at.committed),
            per(before.private_bytes, idle_at.private_bytes),
        )
    })
}

/// Each round, `sets` times, one after another: a client that sends its
/// ClientHello, reads the start of the server's answer and resets (the
/// server waits for its `Finished`); one that finishes its handshake and
/// resets at once; and one that resets once the server has completed the
/// handshake (and waits for its first request). Every connection is
/// accepted and ends; each of the first fails its handshake, each of the
/// third completes it; each of the second has either failed it (the reset
/// came first) or completed it; and every completed one then fails (a
/// reset is no clean end).
pub fn resets(sets: usize, rounds: usize) -> Scenario {
    let limit = support::PATIENCE * 2 + Duration::from_millis(50) * (3 * sets) as u32;
    Scenario::new("https_resets", Limits::DEFAULT, rounds, limit, move |t, round| async move {
        let (accepted, tls_failed) = (t.get(|s| &s.accepted), t.get(|s| &s.tls_failed));
        let (handshakes, timeouts, failed) =
            (t.get(|s| &s.tls_handshakes), t.get(|s| &s.tls_timeouts), t.get(|s| &s.failed));
        let target = t.clone();
        off_pool(move || {
            for _ in 0..sets {
                let mut c = Tls::new(&target);
                c.send().unwrap();
                let mut first = [0u8; 1];
                c.sock.read_exact(&mut first).unwrap();
                reset_on_close(&c.sock);
                drop(c);
                reset_on_close(&Tls::handshaken(&target).sock);
                let done = target.get(|s| &s.tls_handshakes);
                let c = Tls::handshaken(&target);
                let deadline = Instant::now() + support::PATIENCE;
                while target.get(|s| &s.tls_handshakes) == done {
                    assert!(Instant::now() < deadline, "a handshake not completed within {:?}", support::PATIENCE);
                    std::thread::sleep(Duration::from_millis(1));
                }
                reset_on_close(&c.sock);
            }
        })
        .await;
        let all = accepted + 3 * sets as u64;
        t.reaches(&format!("round {round}: every reset connection ended"), support::PATIENCE, |s| &s.ended, all).await;
        assert_eq!(t.get(|s| &s.accepted), all, "round {round}: {:?}", t.stats);
        let now_failed = t.get(|s| &s.tls_failed) - tls_failed;
        let now_done = t.get(|s| &s.tls_handshakes) - handshakes;
        assert_eq!(now_failed + now_done, 3 * sets as u64, "round {round}: {:?}", t.stats);
        assert!(now_failed >= sets as u64 && now_done >= sets as u64, "round {round}: {:?}", t.stats);
        assert_eq!(t.get(|s| &s.failed) - failed, now_done, "round {round}: {:?}", t.stats);
        assert_eq!(t.get(|s| &s.tls_timeouts), timeouts, "round {round}: {:?}", t.stats);
        format!(
            "{sets} resets a round mid-handshake, {sets} right after it and {sets} once the server completed it, \
             one after another: {now_failed} handshakes failed, {now_done} completed"
        )
    })
}

/// The body of each never-reader's `POST /echo`, which the server echoes.
const ECHOED: usize = 64 << 10;

/// Each round, `clients` clients at once, each with its handshake done,
/// send `POST /echo`s of 64 KiB back to back and never read an answer:
/// the answers fill the sockets' buffers, the server's writes stall, no
/// request is in flight, and the idle timeout (3 s) asks each connection
/// to shut down, which it cannot; the shutdown timeout (3 s) cuts each,
/// counted (`cut`), while a new client's `GET /` is answered within
/// [`PROMPTLY`] every 200 ms until the last is cut.
pub fn never_readers(clients: usize, rounds: usize) -> Scenario {
    let limits =
        Limits { idle_timeout: Duration::from_secs(3), shutdown_timeout: Duration::from_secs(3), ..Limits::DEFAULT };
    let limit = (support::PATIENCE * 2) * (rounds as u32 + 1);
    Scenario::new("https_never_readers", limits, rounds, limit, move |t, round| async move {
        let (cut, header_timeouts) = (t.get(|s| &s.cut), t.get(|s| &s.header_timeouts));
        let (requests, idle_closed) = (t.get(|s| &s.requests), t.get(|s| &s.idle_closed));
        let stop = Arc::new(AtomicBool::new(false));
        let (halt, target) = (stop.clone(), t.clone());
        let readers = task::spawn(off_pool(move || {
            let mut open: Vec<Option<Tls>> = (0..clients).map(|_| Some(Tls::handshaken(&target))).collect();
            let mut request =
                format!("POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: {ECHOED}\r\n\r\n").into_bytes();
            request.resize(request.len() + ECHOED, b'e');
            let mut at = vec![0; clients];
            let mut written = 0usize;
            for c in open.iter().flatten() {
                c.sock.set_nonblocking(true).unwrap();
            }
            let deadline = Instant::now() + support::PATIENCE * 2;
            while !halt.load(SeqCst) {
                assert!(Instant::now() < deadline, "the never-readers not cut within {:?}", support::PATIENCE * 2);
                let mut progress = false;
                for (slot, at) in open.iter_mut().zip(&mut at) {
                    let Some(c) = slot else { continue };
                    // rustls takes what fits in its buffer (64 KiB).
                    let n = c.conn.writer().write(&request[*at..]).unwrap();
                    (*at, written) = ((*at + n) % request.len(), written + n);
                    match c.send() {
                        Ok(all) => progress |= all || n > 0,
                        // Cut: the server closed it.
                        Err(_) => *slot = None,
                    }
                }
                if !progress {
                    // Every socket's buffer full: the server has stopped reading.
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            written
        }));
        let stats = t.stats.clone();
        let all = cut + clients as u64;
        let cut_all = move || Stats::get(&stats.cut) >= all;
        let what = format!("round {round}: beside {clients} never-readers until all are cut");
        let (gets, slowest) = t.serves_meanwhile(&what, support::PATIENCE * 2, cut_all).await;
        stop.store(true, SeqCst);
        let written = readers.await.expect("the never-readers panicked");
        assert_eq!(t.get(|s| &s.cut), all, "round {round}: {:?}", t.stats);
        // Each was asked to shut down for idling first.
        assert_eq!(t.get(|s| &s.idle_closed), idle_closed + clients as u64, "round {round}: {:?}", t.stats);
        assert_eq!(t.get(|s| &s.header_timeouts), header_timeouts, "round {round}: {:?}", t.stats);
        let echoes = t.get(|s| &s.requests) - requests - gets;
        format!(
            "{clients} never-readers a round, {} MiB written, {echoes} echoes begun, all cut; {gets} GETs meanwhile, \
             the slowest in {:.1} ms",
            written >> 20,
            slowest.as_secs_f64() * 1e3
        )
    })
}

/// Each round, `clients` clients that send their ClientHello one byte a
/// second and `clients` that, handshake done, send a request's head one
/// byte a second (a TLS record each): the header timeout cuts each, the
/// first during the handshake (`tls_timeouts`), the others in hyper's
/// header read (`header_timeouts`), none before it, while a new client's
/// `GET /` is answered within [`PROMPTLY`] every 200 ms until the last is
/// cut.
pub fn trickle(clients: usize, header_timeout: Duration, rounds: usize) -> Scenario {
    let limit = support::PATIENCE * 2 + (header_timeout + support::PATIENCE * 2) * (rounds as u32 + 1);
    let limits = Limits { header_timeout, ..Limits::DEFAULT };
    Scenario::new("https_trickle", limits, rounds, limit, move |t, round| async move {
        let (timeouts, header_timeouts) = (t.get(|s| &s.tls_timeouts), t.get(|s| &s.header_timeouts));
        let (handshakes, requests) = (t.get(|s| &s.tls_handshakes), t.get(|s| &s.requests));
        let stop = Arc::new(AtomicBool::new(false));
        let (halt, target) = (stop.clone(), t.clone());
        let t0 = Instant::now();
        let tricklers = task::spawn(off_pool(move || {
            let mut hellos: Vec<_> =
                (0..clients).map(|_| Some((connect(target.addr), client_hello(&target)))).collect();
            let mut heads: Vec<_> = (0..clients).map(|_| Some(Tls::handshaken(&target))).collect();
            let head = b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
            let deadline = Instant::now() + header_timeout + support::PATIENCE * 2;
            let mut sent = 0;
            while !halt.load(SeqCst) {
                assert!(Instant::now() < deadline, "the tricklers not cut within {:?}", support::PATIENCE * 2);
                for slot in &mut hellos {
                    // A write to a connection the server closed fails (at
                    // the latest the second one).
                    if let Some((s, hello)) = slot
                        && s.write_all(&[hello.get(sent).copied().unwrap_or(0)]).is_err()
                    {
                        *slot = None;
                    }
                }
                let byte = [head.get(sent).copied().unwrap_or(b'a')];
                for slot in &mut heads {
                    if let Some(c) = slot
                        && (c.conn.writer().write_all(&byte).is_err() || c.send().is_err())
                    {
                        *slot = None;
                    }
                }
                sent += 1;
                for _ in 0..10 {
                    if halt.load(SeqCst) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            sent
        }));
        let stats = t.stats.clone();
        let first_cut = Arc::new(std::sync::Mutex::new(None));
        let first = first_cut.clone();
        let all = timeouts + header_timeouts + 2 * clients as u64;
        let cut_all = move || {
            let now = Stats::get(&stats.tls_timeouts) + Stats::get(&stats.header_timeouts);
            let mut first = first.lock().unwrap();
            if now > timeouts + header_timeouts && first.is_none() {
                *first = Some(t0.elapsed());
            }
            now >= all
        };
        let what = format!("round {round}: beside {} tricklers until all are cut", 2 * clients);
        let (gets, slowest) = t.serves_meanwhile(&what, header_timeout + support::PATIENCE * 2, cut_all).await;
        let all_cut = t0.elapsed();
        stop.store(true, SeqCst);
        let sent = tricklers.await.expect("the tricklers panicked");
        let first_cut = first_cut.lock().unwrap().unwrap_or_default();
        // Every trickler's connection was accepted after `t0`.
        assert!(first_cut >= header_timeout, "round {round}: one cut after {first_cut:?}");
        assert_eq!(t.get(|s| &s.tls_timeouts), timeouts + clients as u64, "round {round}: {:?}", t.stats);
        assert_eq!(t.get(|s| &s.header_timeouts), header_timeouts + clients as u64, "round {round}: {:?}", t.stats);
        assert_eq!(t.get(|s| &s.tls_handshakes), handshakes + clients as u64 + gets, "round {round}: {:?}", t.stats);
        assert_eq!(t.get(|s| &s.requests), requests + gets, "round {round}: {:?}", t.stats);
        format!(
            "{clients} ClientHellos and {clients} request heads a round, one byte a second ({sent} bytes each at \
             most), cut from {:.2}s to {:.2}s; {gets} GETs meanwhile, the slowest in {:.1} ms",
            first_cut.as_secs_f64(),
            all_cut.as_secs_f64(),
            slowest.as_secs_f64() * 1e3
        )
    })
}

/// HTTP/2's connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Each round, `clients` clients that, handshake done, send HTTP/2's
/// preface one byte a second (24 bytes). hyper-util's `auto` server reads
/// it to learn the protocol, with no timeout of its own, and hyper's header
/// timeout is HTTP/1's: what ends each is the example's first-request
/// deadline, the header timeout (10 s), none before it and none by the
/// idle timeout (15 s) (`header_timeouts`, not `idle_closed`), while a new
/// client's `GET /` is answered within [`PROMPTLY`] every 200 ms until the
/// last is closed.
pub fn preface_trickle(clients: usize, rounds: usize) -> Scenario {
    let (header_timeout, idle_timeout) = (Duration::from_secs(10), Duration::from_secs(15));
    let limits = Limits { header_timeout, idle_timeout, shutdown_timeout: Duration::from_secs(5), ..Limits::DEFAULT };
    let limit = support::PATIENCE * 2 + (idle_timeout + support::PATIENCE * 2) * (rounds as u32 + 1);
    Scenario::new("https_preface_trickle", limits, rounds, limit, move |t, round| async move {
        let (idle_closed, header_timeouts) = (t.get(|s| &s.idle_closed), t.get(|s| &s.header_timeouts));
        let (cut, failed) = (t.get(|s| &s.cut), t.get(|s| &s.failed));
        let stop = Arc::new(AtomicBool::new(false));
        let (halt, target) = (stop.clone(), t.clone());
        let t0 = Instant::now();
        let tricklers = task::spawn(off_pool(move || {
            let mut open: Vec<_> = (0..clients).map(|_| Some(Tls::handshaken(&target))).collect();
            let deadline = Instant::now() + header_timeout + support::PATIENCE * 2;
            let (mut sent, mut written) = (0, vec![0; clients]);
            while !halt.load(SeqCst) {
                let late = support::PATIENCE * 2;
                assert!(Instant::now() < deadline, "the preface tricklers not closed within {late:?}");
                if let Some(&byte) = PREFACE.get(sent) {
                    for (slot, written) in open.iter_mut().zip(&mut written) {
                        // A write to a connection the server closed fails
                        // (at the latest the second one).
                        if let Some(c) = slot {
                            if c.conn.writer().write_all(&[byte]).is_err() || c.send().is_err() {
                                *slot = None;
                            } else {
                                *written += 1;
                            }
                        }
                    }
                    sent += 1;
                }
                for _ in 0..10 {
                    if halt.load(SeqCst) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            written.into_iter().max().unwrap_or(0)
        }));
        let stats = t.stats.clone();
        let first_close = Arc::new(std::sync::Mutex::new(None));
        let first = first_close.clone();
        let all = header_timeouts + clients as u64;
        let closed_all = move || {
            let now = Stats::get(&stats.header_timeouts);
            let mut first = first.lock().unwrap();
            if now > header_timeouts && first.is_none() {
                *first = Some(t0.elapsed());
            }
            now >= all
        };
        let what = format!("round {round}: beside {clients} preface tricklers until all are closed");
        let (gets, slowest) = t.serves_meanwhile(&what, header_timeout + support::PATIENCE * 2, closed_all).await;
        let all_closed = t0.elapsed();
        let stats = t.stats.clone();
        let ended = move || Stats::get(&stats.ended) == Stats::get(&stats.accepted);
        until(&format!("round {round}: every preface trickler ended"), support::PATIENCE, ended).await;
        stop.store(true, SeqCst);
        // The most written to one connection before it was closed (and the
        // one write a closed connection may still take).
        let most = tricklers.await.expect("the preface tricklers panicked");
        let first_close = first_close.lock().unwrap().unwrap_or_default();
        // Every trickler's connection was accepted after `t0`.
        assert!(first_close >= header_timeout, "round {round}: one closed after {first_close:?}");
        assert!(most < PREFACE.len(), "round {round}: the whole preface sent to a connection still open");
        assert_eq!(t.get(|s| &s.header_timeouts), all, "round {round}: {:?}", t.stats);
        assert_eq!(t.get(|s| &s.idle_closed), idle_closed, "round {round}: {:?}", t.stats);
        format!(
            "{clients} HTTP/2 prefaces a round, one byte a second (at most {most} bytes to one), closed by the header \
             timeout from {:.2}s to {:.2}s ({} cut after a shutdown, {} failed); {gets} GETs meanwhile, the slowest in \
             {:.1} ms",
            first_close.as_secs_f64(),
            all_closed.as_secs_f64(),
            t.get(|s| &s.cut) - cut,
            t.get(|s| &s.failed) - failed,
            slowest.as_secs_f64() * 1e3
        )
    })
}

/// Garbage where a ClientHello should be: random bytes whose first is no
/// TLS record's type, a cleartext `GET /`, and a handshake record whose
/// ClientHello is random bytes (each one record, whole, so each is an
/// error at once, never a record the server waits to see the rest of).
fn garbage_of(rng: &mut Rng) -> Vec<(&'static str, Vec<u8>)> {
    // Record types are 20 to 24.
    let mut bytes = vec![25 + (rng.next() as u8 % 200)];
    bytes.extend((0..16).map(|_| rng.next() as u8));
    bytes.extend(rng.bytes(1000));
    let body: Vec<u8> = (0..=rng.below(1000)).map(|_| rng.next() as u8).collect();
    let (len, record) = (body.len() as u32, body.len() as u16 + 4);
    let mut hello = vec![0x16, 0x03, 0x01];
    hello.extend_from_slice(&record.to_be_bytes());
    hello.extend_from_slice(&[0x01, (len >> 16) as u8, (len >> 8) as u8, len as u8]);
    hello.extend(body);
    vec![
        ("random bytes", bytes),
        ("cleartext GET /", b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec()),
        ("a random ClientHello", hello),
    ]
}

/// Each round, `sets` sets of [`garbage_of`] (seeded), one connection each,
/// one after another: each handshake fails at once (`tls_failed`, no
/// timeout), and the server closes the connection, with at most an alert.
pub fn garbage(sets: usize, rounds: usize, seed: u64) -> Scenario {
    let limit = support::PATIENCE * 2 + Duration::from_millis(50) * (3 * sets) as u32;
    Scenario::new("https_garbage", Limits::DEFAULT, rounds, limit, move |t, round| async move {
        let (accepted, failed) = (t.get(|s| &s.accepted), t.get(|s| &s.tls_failed));
        let (handshakes, timeouts) = (t.get(|s| &s.tls_handshakes), t.get(|s| &s.tls_timeouts));
        let addr = t.addr;
        let alerts = off_pool(move || {
            let (mut rng, mut alerts) = (Rng::new(seed ^ round as u64), 0);
            for _ in 0..sets {
                for (what, garbage) in garbage_of(&mut rng) {
                    let mut s = connect(addr);
                    // The server may close before it has read all of it.
                    let _ = s.write_all(&garbage);
                    let got = read_to_close(&mut s);
                    // An alert record, if any: type 21.
                    assert!(got.is_empty() || got[0] == 21, "{what}: {got:?}");
                    alerts += usize::from(!got.is_empty());
                }
            }
            alerts
        })
        .await;
        let all = accepted + 3 * sets as u64;
        t.reaches(&format!("round {round}: every connection ended"), support::PATIENCE, |s| &s.ended, all).await;
        assert_eq!(t.get(|s| &s.accepted), all, "round {round}: {:?}", t.stats);
        assert_eq!(t.get(|s| &s.tls_failed), failed + 3 * sets as u64, "round {round}: {:?}", t.stats);
        assert_eq!(t.get(|s| &s.tls_handshakes), handshakes, "round {round}: {:?}", t.stats);
        assert_eq!(t.get(|s| &s.tls_timeouts), timeouts, "round {round}: {:?}", t.stats);
        format!("{} garbage ClientHellos a round (seed {seed} ^ {round}), {alerts} answered with an alert", 3 * sets)
    })
}
