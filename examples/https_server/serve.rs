//! The accept loop of `examples/https_server` and a connection's task: the
//! limits, the TLS handshake, hyper-util's HTTP/1 + HTTP/2 server over it,
//! the idle timeout and the graceful shutdown, and the counts of
//! `GET /stats`.

use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use futures::future::{Either, select};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio_rustls::TlsAcceptor;
use windows_threadpool::hyper::{PoolExecutor, PoolTimer};
use windows_threadpool::io::Compat;
use windows_threadpool::net::{TcpListener, TcpStream};
use windows_threadpool::{task, time};

/// The limits, Kestrel's where it has one (`KestrelServerLimits`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once; one accepted past them is closed at once.
    pub max_connections: u64,
    /// How long a TLS handshake, and an HTTP/1 request's head, may take.
    pub header_timeout: Duration,
    /// How long a connection with no request in flight is kept.
    pub idle_timeout: Duration,
    /// The largest HTTP/1 read buffer (so head) and HTTP/2 header list.
    pub max_header_bytes: usize,
    /// HTTP/2 streams open at once on a connection.
    pub max_streams: u32,
    /// How long a connection that was asked to shut down gracefully (idle,
    /// or the server stopping) may take before it is dropped.
    pub shutdown_timeout: Duration,
    /// Whether an idle connection waits for data before it takes a read
    /// buffer (`io::Compat::set_wait_for_data`).
    pub wait_for_data: bool,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        max_connections: 10_000,
        header_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(130),
        max_header_bytes: 32 << 10,
        max_streams: 100,
        shutdown_timeout: Duration::from_secs(30),
        wait_for_data: true,
    };
    /// hyper's smallest HTTP/1 read buffer (it panics below it).
    pub const MIN_HEADER_BYTES: usize = 8 << 10;
}

/// What the server counts; `GET /stats` reports them under `--stats`.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections served (TLS handshake included).
    pub accepted: AtomicU64,
    /// Of those, the ones that have ended, however.
    pub ended: AtomicU64,
    /// Closed as soon as accepted, at the connection limit; never `accepted`.
    pub over_limit: AtomicU64,
    pub accept_errors: AtomicU64,
    pub requests: AtomicU64,
    pub tls_handshakes: AtomicU64,
    /// Failed handshakes: bytes that are no ClientHello, no common ALPN
    /// protocol, a client gone or silent mid-handshake (timed out).
    pub tls_failed: AtomicU64,
    /// Of those, the ones ended by the header timeout.
    pub tls_timeouts: AtomicU64,
    /// Cut off by hyper's HTTP/1 header read timeout.
    pub header_timeouts: AtomicU64,
    /// Shut down gracefully for having no request in flight for the idle timeout.
    pub idle_closed: AtomicU64,
    /// Dropped for not having ended within the shutdown timeout once asked to.
    pub cut: AtomicU64,
    /// Any other error of a connection (a reset, a protocol error).
    pub failed: AtomicU64,
    /// With `Some`, `GET /stats` answers [`Stats::report`].
    pub resources: Option<fn() -> String>,
}

fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::SeqCst);
}

impl Stats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::SeqCst)
    }

    /// The line of `GET /stats`: `examples/http_server`'s keys first (what
    /// `cargo xtask`'s `parse_stats` reads), then the TLS and limit counts.
    pub fn report(&self) -> String {
        let g = Self::get;
        let resources = self.resources.map(|f| f()).unwrap_or_default();
        format!(
            "accepted={} ended={} over_limit={} {resources} requests={} tls_handshakes={} tls_failed={} \
             tls_timeouts={} header_timeouts={} idle_closed={} cut={} failed={}\n",
            g(&self.accepted),
            g(&self.ended),
            g(&self.over_limit),
            g(&self.requests),
            g(&self.tls_handshakes),
            g(&self.tls_failed),
            g(&self.tls_timeouts),
            g(&self.header_timeouts),
            g(&self.idle_closed),
            g(&self.cut),
            g(&self.failed),
        )
    }
}

/// What every connection's task shares.
pub struct Server {
    pub app: Router,
    /// `None`: cleartext HTTP/1.1 and h2c (prior knowledge).
    pub tls: Option<TlsAcceptor>,
    pub limits: Limits,
    pub stats: Arc<Stats>,
    builder: auto::Builder<PoolExecutor>,
}

impl Server {
    pub fn new(app: Router, tls: Option<TlsAcceptor>, limits: Limits, stats: Arc<Stats>) -> Self {
        Self { builder: builder(&limits), app, tls, limits, stats }
    }
}

/// hyper-util's server that takes HTTP/1.1 or HTTP/2 on each connection,
/// found from its first bytes (the HTTP/2 preface or not, whatever ALPN
/// said): its HTTP/2 streams run as tasks on the pool, its timers are the
/// crate's.
fn builder(limits: &Limits) -> auto::Builder<PoolExecutor> {
    let mut builder = auto::Builder::new(PoolExecutor::new());
    builder
        .http1()
        .timer(PoolTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes)
        .half_close(true);
    builder
        .http2()
        .timer(PoolTimer::new())
        .max_concurrent_streams(limits.max_streams)
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
    builder
}

/// How long the accept loop waits after an accept failed for a reason of
/// the system's (out of sockets or memory) before it accepts again.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Accepts connections until `stop` completes, each served by a task of
/// its own, at most `max_connections` at once; then closes the listener,
/// asks every connection to shut down gracefully and returns once all
/// have ended.
pub async fn serve(listener: TcpListener, server: Server, stop: impl Future<Output = ()>) -> io::Result<()> {
    let server = Arc::new(server);
    let stats = &server.stats;
    // Each connection holds a receiver; `closed` is when the last is gone.
    let (stopping, watch) = tokio::sync::watch::channel(false);
    let mut stop = pin!(stop);
    loop {
        let accepted = match select(pin!(listener.accept()), stop.as_mut()).await {
            Either::Left((accepted, _)) => accepted,
            Either::Right(((), _)) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // The system's (`accept` skips a client that left): wait, go on.
            Err(e) => {
                eprintln!("https_server: accept: {e}");
                count(&stats.accept_errors);
                match select(pin!(time::sleep(ACCEPT_PAUSE)), stop.as_mut()).await {
                    Either::Left(_) => continue,
                    Either::Right(((), _)) => break,
                }
            }
        };
        // An end is counted as its task ends: this may count one that just
        // ended as open, never the other way round.
        if Stats::get(&stats.accepted) - Stats::get(&stats.ended) >= server.limits.max_connections {
            count(&stats.over_limit);
            drop(stream);
            continue;
        }
        count(&stats.accepted);
        drop(task::spawn(connection(stream, server.clone(), watch.clone())));
    }
    drop(listener);
    drop(watch);
    stopping.send_replace(true);
    stopping.closed().await;
    Ok(())
}

/// One connection: the TLS handshake within the header timeout, then HTTP
/// until the client leaves, the connection idles out or the server stops.
/// Whatever happens, it ends here: the accept loop never sees it.
async fn connection(stream: TcpStream, server: Arc<Server>, stop: tokio::sync::watch::Receiver<bool>) {
    let stats = &server.stats;
    // A peer already gone makes this fail; serving then fails too.
    let _ = stream.set_nodelay(true);
    let mut io = Compat::new(stream);
    io.set_wait_for_data(server.limits.wait_for_data);
    match &server.tls {
        None => http(io, &server, stop).await,
        Some(acceptor) => match time::timeout(server.limits.header_timeout, acceptor.accept(io)).await {
            Ok(Ok(tls)) => {
                count(&stats.tls_handshakes);
                http(TokioIo::new(tls), &server, stop).await;
            }
            Ok(Err(_)) => count(&stats.tls_failed),
            Err(_) => {
                count(&stats.tls_failed);
                count(&stats.tls_timeouts);
            }
        },
    }
    count(&stats.ended);
}

/// Why a connection is asked to shut down, or cut.
enum Ending {
    Stop,
    Idle,
    /// No request started within the header timeout: cut at once.
    Silent,
}

/// Serves HTTP on `io` until the client leaves, or, asked to shut down
/// (idle, or the server stopping), until the requests in flight are
/// answered (HTTP/1: keep-alive off; HTTP/2: GOAWAY), at most the shutdown
/// timeout.
async fn http<I>(io: I, server: &Server, mut stop: tokio::sync::watch::Receiver<bool>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (stats, limits) = (&server.stats, &server.limits);
    let activity = Arc::new(Activity::new());
    let service = Counted {
        inner: TowerToHyperService::new(server.app.clone()),
        activity: activity.clone(),
        stats: stats.clone(),
    };
    let mut served = pin!(server.builder.serve_connection(io, service));
    let stopping = pin!(async {
        // Err: the server is gone, so stopping too.
        let _ = stop.wait_for(|stopping| *stopping).await;
        Ending::Stop
    });
    let idled = pin!(async {
        idle(&activity, limits.idle_timeout).await;
        Ending::Idle
    });
    let silent = pin!(async {
        silent(&activity, limits.header_timeout).await;
        Ending::Silent
    });
    let ending = pin!(async {
        match select(select(stopping, idled), silent).await {
            Either::Left((Either::Left((ending, _)) | Either::Right((ending, _)), _)) | Either::Right((ending, _)) => {
                ending
            }
        }
    });
    let result = match select(served.as_mut(), ending).await {
        Either::Left((result, _)) => result,
        Either::Right((ending, _)) => {
            match ending {
                Ending::Stop => {}
                Ending::Idle => count(&stats.idle_closed),
                Ending::Silent => return count(&stats.header_timeouts),
            }
            // Called on the connection itself: hyper-util's GracefulShutdown
            // would wait for its watcher, which lives as long as `served`.
            served.as_mut().graceful_shutdown();
            match time::timeout(limits.shutdown_timeout, served).await {
                Ok(result) => result,
                Err(_) => return count(&stats.cut),
            }
        }
    };
    match result {
        Ok(()) => {}
        Err(e) if e.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_timeout) => {
            count(&stats.header_timeouts)
        }
        Err(_) => count(&stats.failed),
    }
}

/// A connection's requests in flight, and when that last changed; and
/// whether one has ever started.
struct Activity(Mutex<(usize, Instant)>, AtomicBool);

impl Activity {
    fn new() -> Self {
        Self(Mutex::new((0, Instant::now())), AtomicBool::new(false))
    }

    fn change(&self, by: isize) {
        self.1.store(true, Ordering::Relaxed);
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *state = (state.0.wrapping_add_signed(by), Instant::now());
    }
}

/// A request in flight, from the call of the service until its answer's
/// head is ready (an answer's body still being written when the connection
/// is shut down is finished: graceful shutdown lets it).
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: &Arc<Activity>) -> Self {
        activity.change(1);
        Self(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.change(-1);
    }
}

/// Completes once no request has been in flight for `after`: one timer a
/// connection, woken at most once per `after` while requests are in flight.
async fn idle(activity: &Activity, after: Duration) {
    loop {
        let now = Instant::now();
        let (in_flight, since) = *activity.0.lock().unwrap_or_else(PoisonError::into_inner);
        let deadline = if in_flight == 0 { since + after } else { now + after };
        if in_flight == 0 && deadline <= now {
            return;
        }
        time::sleep_until(deadline).await;
    }
}

/// Completes if no request has started `within` of the connection's
/// start, never once one has: hyper's header timeout is HTTP/1's, and
/// starts once hyper-util has read enough to tell the protocols apart, so
/// it does not bound an HTTP/2 preface or first frames sent a byte at a
/// time, or a cleartext client that sends nothing.
async fn silent(activity: &Activity, within: Duration) {
    time::sleep(within).await;
    if activity.1.load(Ordering::Relaxed) {
        std::future::pending::<()>().await;
    }
}

/// The service with its requests counted, for the idle timeout and the stats.
#[derive(Clone)]
struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
    stats: Arc<Stats>,
}

impl<S, B> hyper::service::Service<Request<Incoming>> for Counted<S>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        count(&self.stats.requests);
        let busy = Busy::new(&self.activity);
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            drop(busy);
            answer
        })
    }
}
