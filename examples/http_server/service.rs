//! The service of `examples/http_server`, shared with `tests/hyper.rs`:
//! the handler, hyper's HTTP/1 settings and the accept loop with its
//! graceful shutdown.
#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::{Either, select};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use windows_threadpool::hyper::PoolTimer;
use windows_threadpool::io::Compat;
use windows_threadpool::net::{TcpListener, TcpStream};
use windows_threadpool::time;

/// The body of `GET /`.
pub const HELLO: &[u8] = b"hello from the pool\n";
/// The largest body `POST /echo` takes (413 past it).
pub const ECHO_LIMIT: usize = 16 << 20;
/// The largest request head taken (431 past it).
pub const MAX_HEADER_SIZE: usize = 16 << 10;
/// Connections served at once unless `--max-connections` says otherwise;
/// one accepted past it is closed at once.
pub const MAX_CONNECTIONS: u64 = 10_000;

/// A connection's task, as [`serve`] hands it to the executor.
pub type Connection = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How the connections ended, for the tests and the example's summary.
#[derive(Debug, Default)]
pub struct Stats {
    pub accepted: AtomicU64,
    /// Accepts that failed for a reason of the system's (the loop waited
    /// and went on).
    pub accept_errors: AtomicU64,
    /// Requests whose head was read (counted before their body is).
    pub requests: AtomicU64,
    /// Served until the client closed, or shut down gracefully.
    pub closed: AtomicU64,
    /// Cut off by the header read timeout.
    pub header_timeouts: AtomicU64,
    /// A request hyper could not parse (answered 400).
    pub bad_requests: AtomicU64,
    /// A request head over [`MAX_HEADER_SIZE`] (answered 431).
    pub too_large: AtomicU64,
    /// Any other error (a reset, a body cut short).
    pub failed: AtomicU64,
    /// Closed as soon as accepted, the server being at its connection
    /// limit; never counted in `accepted`.
    pub over_limit: AtomicU64,
    /// With `Some`, `GET /stats` answers [`Stats::report`] (the example's
    /// `--stats`, which the HTTP soak of `cargo xtask stress` reads).
    pub resources: Option<fn() -> String>,
}

impl Stats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::SeqCst)
    }

    /// The connections that have ended, however.
    pub fn ended(&self) -> u64 {
        [&self.closed, &self.header_timeouts, &self.bad_requests, &self.too_large, &self.failed]
            .iter()
            .map(|c| Self::get(c))
            .sum()
    }

    /// `accepted=A ended=E over_limit=O ` and what [`Stats::resources`]
    /// reports, on one line; `None` without it.
    pub fn report(&self) -> Option<String> {
        let resources = self.resources?;
        let (accepted, over_limit) = (Self::get(&self.accepted), Self::get(&self.over_limit));
        Some(format!("accepted={accepted} ended={} over_limit={over_limit} {}\n", self.ended(), resources()))
    }
}

/// `GET /`: [`HELLO`]; `POST /echo`: the request's body; anything else 404
/// (or 405 for another method on those paths).
pub async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/") => (StatusCode::OK, Bytes::from_static(HELLO)),
        (&Method::POST, "/echo") => match Limited::new(req.into_body(), ECHO_LIMIT).collect().await {
            Ok(body) => (StatusCode::OK, body.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => (StatusCode::PAYLOAD_TOO_LARGE, Bytes::new()),
            // A malformed body (a bad chunk size) is answered; one cut
            // short fails the connection, so this is never sent.
            Err(_) => (StatusCode::BAD_REQUEST, Bytes::new()),
        },
        (_, "/" | "/echo") => (StatusCode::METHOD_NOT_ALLOWED, Bytes::new()),
        _ => (StatusCode::NOT_FOUND, Bytes::new()),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    Ok(response)
}

/// hyper's HTTP/1 server settings: the crate's timer, the header read
/// timeout, [`MAX_HEADER_SIZE`], and half-closed connections served: a
/// client that shuts down its sending side after its request (HTTP/1.0
/// style) is still answered, where hyper's default takes that end of
/// stream for the client leaving and drops the answer. Keep-alive is
/// hyper's default (on).
pub fn http1(header_read_timeout: Duration) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(PoolTimer::new())
        .header_read_timeout(header_read_timeout)
        .max_header_size(MAX_HEADER_SIZE)
        .half_close(true);
    builder
}

/// How long the accept loop waits after an accept failed for a reason of
/// the system's (out of sockets or memory) before it accepts again.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Accepts connections until `stop` completes, each served by a task that
/// `exec` runs, at most `max_connections` at once (one accepted past them
/// is closed at once and counted in [`Stats::over_limit`]); then closes the
/// listener (new connections are refused), shuts every connection down
/// gracefully (a request in flight is answered, an idle keep-alive
/// connection closes) and returns once all have ended.
pub async fn serve<E>(
    listener: TcpListener,
    builder: http1::Builder,
    max_connections: u64,
    exec: E,
    stop: impl Future<Output = ()>,
    stats: Arc<Stats>,
) -> io::Result<()>
where
    E: hyper::rt::Executor<Connection>,
{
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
            // Not one client's (`accept` skips a client that left) but the
            // system's, such as running out of sockets: a server outlives a
            // bad moment, so wait a little and go on.
            Err(e) => {
                eprintln!("http_server: accept: {e}");
                stats.accept_errors.fetch_add(1, Ordering::SeqCst);
                match select(pin!(time::sleep(ACCEPT_PAUSE)), stop.as_mut()).await {
                    Either::Left(_) => continue,
                    Either::Right(((), _)) => break,
                }
            }
        };
        // A connection's end is counted as its task ends, so this may count
        // one that just ended as open, never the other way round.
        if Stats::get(&stats.accepted) - stats.ended() >= max_connections {
            stats.over_limit.fetch_add(1, Ordering::SeqCst);
            drop(stream);
            continue;
        }
        stats.accepted.fetch_add(1, Ordering::SeqCst);
        exec.execute(Box::pin(connection(stream, builder.clone(), watch.clone(), stats.clone())));
    }
    drop(listener);
    drop(watch);
    stopping.send_replace(true);
    stopping.closed().await;
    Ok(())
}

async fn connection(
    stream: TcpStream,
    builder: http1::Builder,
    mut stop: tokio::sync::watch::Receiver<bool>,
    stats: Arc<Stats>,
) {
    // A peer already gone makes this fail; serving then fails too.
    let _ = stream.set_nodelay(true);
    let counted = stats.clone();
    let service = service_fn(move |req: Request<Incoming>| {
        counted.requests.fetch_add(1, Ordering::SeqCst);
        let report = if req.uri().path() == "/stats" { counted.report() } else { None };
        async move {
            match report {
                Some(report) => Ok(Response::new(Full::new(Bytes::from(report)))),
                None => answer(req).await,
            }
        }
    });
    let mut conn = pin!(builder.serve_connection(Compat::new(stream), service));
    let before_stop = match select(conn.as_mut(), pin!(stop.wait_for(|stopping| *stopping))).await {
        Either::Left((served, _)) => Some(served),
        Either::Right(_) => None, // (its guard of the watch's value is dropped here)
    };
    let served = match before_stop {
        Some(served) => served,
        None => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    let counter = match &served {
        Ok(()) => &stats.closed,
        Err(e) if e.is_timeout() => &stats.header_timeouts,
        Err(e) if e.is_parse_too_large() => &stats.too_large,
        Err(e) if e.is_parse() => &stats.bad_requests,
        Err(_) => &stats.failed,
    };
    counter.fetch_add(1, Ordering::SeqCst);
}
