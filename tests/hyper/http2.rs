//! HTTP/2 on the pool, h2c (prior knowledge): hyper's HTTP/2 server and
//! client with `PoolExecutor` and `PoolTimer` over the crate's sockets
//! (`PoolTimer` driving the server's keep-alive pings among them), and
//! hyper-util's `auto` builder, `TowerToHyperService` and `GracefulShutdown`
//! on them. Over TLS: `tls.rs`.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::{http1 as client1, http2 as client2};
use hyper::server::conn::http2 as server2;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use windows_threadpool::hyper::{PoolExecutor, PoolTimer};
use windows_threadpool::io::Compat;
use windows_threadpool::net::{TcpListener, TcpStream};
use windows_threadpool::{JoinHandle, task, time};

/// Bound on each test's body: under the executors' watchdog
/// (`support::PATIENCE`), so a hang fails with a message.
const LIMIT: Duration = Duration::from_secs(20);

/// A server connection's end once its client closed first: `Ok`, or the
/// reset that TCP sends back when the server's last frames (its GOAWAY, a
/// TLS close) reach a socket the client has closed. Any other error fails.
pub fn ended_by_client<E: Into<Box<dyn std::error::Error + Send + Sync>>>(result: Result<(), E>) {
    let Err(e) = result else { return };
    let e: Box<dyn std::error::Error + Send + Sync> = e.into();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&*e);
    while let Some(c) = cause {
        let io = c.downcast_ref::<io::Error>();
        let inner = io.and_then(|i| i.get_ref()).map(|i| i as &(dyn std::error::Error + 'static));
        if io.is_some_and(|i| matches!(i.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted)) {
            return;
        }
        cause = inner.or_else(|| c.source());
    }
    panic!("the connection ended with an error of its own: {e:?}");
}

/// Runs `body` under `task::block_on`, failing it past [`LIMIT`].
pub fn run(body: impl Future<Output = ()> + Send + 'static) {
    crate::executors::run_on("task::block_on", async move {
        time::timeout(LIMIT, body).await.expect("the test did not finish within its limit")
    });
}

/// A listener on a free loopback port.
pub fn listen() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").unwrap()
}

/// Answers "{version} {path}": which protocol served which request.
pub fn who(req: &Request<Incoming>) -> Response<Full<Bytes>> {
    Response::new(Full::new(Bytes::from(format!("{:?} {}", req.version(), req.uri().path()))))
}

/// The crate's HTTP/2 client over `io`: its connection runs as a task.
pub async fn h2_client<T>(io: T) -> (client2::SendRequest<Empty<Bytes>>, JoinHandle<hyper::Result<()>>)
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) =
        client2::Builder::new(PoolExecutor::new()).timer(PoolTimer::new()).handshake(io).await.unwrap();
    (sender, task::spawn(connection))
}

/// GET `path` over HTTP/2 (an absolute URI: `:scheme` and `:authority`);
/// the body.
pub async fn h2_get(sender: &mut client2::SendRequest<Empty<Bytes>>, scheme: &str, path: &str) -> io::Result<String> {
    let request = Request::get(format!("{scheme}://localhost{path}")).body(Empty::new()).unwrap();
    let response = sender.send_request(request).await.map_err(io::Error::other)?;
    body(response).await
}

/// An HTTP/1.1 client over `io`: its connection runs as a task.
pub async fn h1_client<T>(io: T) -> (client1::SendRequest<Empty<Bytes>>, JoinHandle<hyper::Result<()>>)
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) = client1::handshake(io).await.unwrap();
    (sender, task::spawn(connection))
}

/// GET `path` over HTTP/1.1; the whole response.
pub async fn h1_get(sender: &mut client1::SendRequest<Empty<Bytes>>, path: &str) -> io::Result<Response<Incoming>> {
    let request = Request::get(path).header(hyper::header::HOST, "localhost").body(Empty::new()).unwrap();
    sender.send_request(request).await.map_err(io::Error::other)
}

pub async fn body(response: Response<Incoming>) -> io::Result<String> {
    let bytes = response.into_body().collect().await.map_err(io::Error::other)?.to_bytes();
    Ok(String::from_utf8(bytes.to_vec()).unwrap())
}

async fn connect(addr: std::net::SocketAddr) -> Compat<TcpStream> {
    Compat::new(TcpStream::connect(addr).await.unwrap())
}

/// 100 requests at once on one h2c connection, each answered with its own
/// body. Every handler waits until all 100 are in, so all 100 streams are
/// open at once (hyper's server allows 200 by default).
#[test]
fn h2c_answers_a_hundred_concurrent_streams_on_one_connection() {
    const STREAMS: usize = 100;
    run(async {
        let listener = listen();
        let addr = listener.local_addr().unwrap();
        let all_in = Arc::new(tokio::sync::Barrier::new(STREAMS));
        let server = task::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let service = service_fn(move |req: Request<Incoming>| {
                let all_in = all_in.clone();
                async move {
                    all_in.wait().await;
                    Ok::<_, Infallible>(who(&req))
                }
            });
            server2::Builder::new(PoolExecutor::new())
                .timer(PoolTimer::new())
                .serve_connection(Compat::new(stream), service)
                .await
        });
        let (sender, connection) = h2_client(connect(addr).await).await;
        let requests = (0..STREAMS).map(|i| {
            let mut sender = sender.clone();
            async move { h2_get(&mut sender, "http", &format!("/{i}")).await }
        });
        for (i, got) in futures::future::join_all(requests).await.into_iter().enumerate() {
            assert_eq!(got.unwrap(), format!("HTTP/2.0 /{i}"));
        }
        // The last sender gone, the client closes the connection.
        drop(sender);
        connection.await.unwrap().unwrap();
        ended_by_client(server.await.unwrap());
    });
}

/// hyper-util's `auto` builder on `PoolExecutor` tells HTTP/1.1 from
/// HTTP/2 by the connection's first bytes: an HTTP/1.1 client and an h2c
/// client on one listener are each answered in their own protocol, by a
/// tower service (an axum `Router`) through `TowerToHyperService`.
#[test]
fn the_auto_builder_serves_http1_and_http2_on_one_listener() {
    run(async {
        let listener = listen();
        let addr = listener.local_addr().unwrap();
        let router = axum::Router::new()
            .fallback(|req: axum::extract::Request| async move { format!("{:?} {}", req.version(), req.uri().path()) });
        let server = task::spawn(async move {
            let mut served = Vec::new();
            for _ in 0..2 {
                let (stream, _) = listener.accept().await.unwrap();
                let service = TowerToHyperService::new(router.clone());
                served.push(task::spawn(async move {
                    auto::Builder::new(PoolExecutor::new()).serve_connection(Compat::new(stream), service).await
                }));
            }
            for connection in served {
                ended_by_client(connection.await.unwrap());
            }
        });
        let (mut one, one_connection) = h1_client(connect(addr).await).await;
        let (mut two, two_connection) = h2_client(connect(addr).await).await;
        let response = h1_get(&mut one, "/one").await.unwrap();
        assert_eq!(response.version(), hyper::Version::HTTP_11);
        assert_eq!(body(response).await.unwrap(), "HTTP/1.1 /one");
        assert_eq!(h2_get(&mut two, "http", "/two").await.unwrap(), "HTTP/2.0 /two");
        drop((one, two));
        one_connection.await.unwrap().unwrap();
        two_connection.await.unwrap().unwrap();
        server.await.unwrap();
    });
}

/// hyper-util's `GracefulShutdown` over an HTTP/1.1 and an HTTP/2
/// connection that the `auto` builder serves with `PoolExecutor`, each with
/// a request in flight when the shutdown starts: the shutdown waits for
/// both answers, then both connections close (HTTP/1.1 answers with
/// `connection: close`).
#[test]
fn graceful_shutdown_finishes_the_requests_in_flight_then_closes_the_connections() {
    run(async {
        let listener = listen();
        let addr = listener.local_addr().unwrap();
        let (arrived, mut arrivals) = tokio::sync::mpsc::unbounded_channel();
        let release = Arc::new(tokio::sync::Semaphore::new(0));
        let answered = Arc::new(AtomicUsize::new(0));
        let service = {
            let (release, answered) = (release.clone(), answered.clone());
            service_fn(move |req: Request<Incoming>| {
                let (arrived, release, answered) = (arrived.clone(), release.clone(), answered.clone());
                async move {
                    // Arrival is told only once the wait for a permit is
                    // registered: a permit given after the shutdown then
                    // wakes this connection's task, whose next poll sees the
                    // shutdown before the answer is made (told earlier, the
                    // poll telling it could take the permit in the same pass).
                    let mut acquire = std::pin::pin!(release.acquire());
                    let mut told = Some(arrived);
                    std::future::poll_fn(|cx| {
                        let polled = acquire.as_mut().poll(cx);
                        if polled.is_pending()
                            && let Some(arrived) = told.take()
                        {
                            arrived.send(()).unwrap();
                        }
                        polled
                    })
                    .await
                    .unwrap()
                    .forget();
                    answered.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, Infallible>(who(&req))
                }
            })
        };
        let one = task::spawn(async move {
            let (mut sender, connection) = h1_client(connect(addr).await).await;
            let response = h1_get(&mut sender, "/one").await.unwrap();
            let close = response.headers().get(hyper::header::CONNECTION).cloned();
            (body(response).await.unwrap(), close, connection.await.unwrap())
        });
        let two = task::spawn(async move {
            let (mut sender, connection) = h2_client(connect(addr).await).await;
            let got = h2_get(&mut sender, "http", "/two").await.unwrap();
            // The server's GOAWAY ends the connection with the sender still held.
            (got, connection.await.unwrap(), sender)
        });

        let graceful = GracefulShutdown::new();
        let builder = auto::Builder::new(PoolExecutor::new());
        let mut connections = Vec::new();
        for _ in 0..2 {
            let (stream, _) = listener.accept().await.unwrap();
            let connection = builder.serve_connection(Compat::new(stream), service.clone()).into_owned();
            connections.push(task::spawn(graceful.watch(connection)));
        }
        for _ in 0..2 {
            arrivals.recv().await.unwrap();
        }
        assert_eq!(graceful.count(), 2);
        let mut shutdown = Box::pin(graceful.shutdown());
        assert!(futures::poll!(&mut shutdown).is_pending(), "the shutdown did not wait for the requests in flight");
        release.add_permits(2);
        shutdown.await;
        assert_eq!(answered.load(Ordering::SeqCst), 2, "the shutdown ended before the answers");
        for connection in connections {
            ended_by_client(connection.await.unwrap());
        }
        let (got, close, ended) = one.await.unwrap();
        assert_eq!(got, "HTTP/1.1 /one");
        assert_eq!(close.as_ref().map(|v| v.as_bytes()), Some(&b"close"[..]));
        ended.unwrap();
        let (got, ended, _sender) = two.await.unwrap();
        assert_eq!(got, "HTTP/2.0 /two");
        ended.unwrap();
    });
}

/// A client's first bytes: the HTTP/2 connection preface, then an empty
/// SETTINGS frame (length 0, type 4, no flags, stream 0).
const PREFACE_AND_SETTINGS: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";

/// hyper's HTTP/2 server pinging every `interval` on `PoolTimer`, and
/// closing a connection whose ping is not acknowledged within `timeout`.
fn keep_alive_server(interval: Duration, timeout: Duration) -> server2::Builder<PoolExecutor> {
    let mut builder = server2::Builder::new(PoolExecutor::new());
    builder.timer(PoolTimer::new()).keep_alive_interval(interval).keep_alive_timeout(timeout);
    builder
}

/// A server's I/O that counts the PING frames (not their ACKs) it writes,
/// by reading the frame headers of its output: hyper tells no one of its
/// pings. The count is dropped with the connection, which ends its waiters.
struct Pings<T> {
    io: T,
    sent: tokio::sync::watch::Sender<usize>,
    /// The frame header being read, and how much of it has been.
    header: [u8; 9],
    have: usize,
    /// Payload bytes still to pass over before the next header.
    skip: usize,
}

impl<T> Pings<T> {
    fn new(io: T, sent: tokio::sync::watch::Sender<usize>) -> Self {
        Self { io, sent, header: [0; 9], have: 0, skip: 0 }
    }

    fn scan(&mut self, mut written: &[u8]) {
        const PING: u8 = 6;
        const ACK: u8 = 1;
        while !written.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(written.len());
                (self.skip, written) = (self.skip - n, &written[n..]);
                continue;
            }
            let n = (self.header.len() - self.have).min(written.len());
            self.header[self.have..self.have + n].copy_from_slice(&written[..n]);
            (self.have, written) = (self.have + n, &written[n..]);
            if self.have == self.header.len() {
                let [l0, l1, l2, kind, flags, ..] = self.header;
                if kind == PING && flags & ACK == 0 {
                    self.sent.send_modify(|n| *n += 1);
                }
                (self.have, self.skip) = (0, usize::from_be_bytes([0, 0, 0, 0, 0, l0, l1, l2]));
            }
        }
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for Pings<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

// Vectored writes left to the default, one buffer a call: every byte
// written passes `scan`.
impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for Pings<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.scan(&buf[..n]);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// HTTP/2 keep-alive on `PoolTimer` cuts a dead peer: a client that sends
/// the preface and its SETTINGS, then neither reads nor answers a PING.
/// hyper closes the connection once a ping goes unanswered for the
/// timeout, and the connection ends with its keep-alive error; without
/// the ping timer's sleeps firing it would never end.
#[test]
fn h2_keep_alive_cuts_a_peer_that_never_answers_its_pings() {
    const KEEP_ALIVE: Duration = Duration::from_millis(100);
    run(async {
        let listener = listen();
        let addr = listener.local_addr().unwrap();
        let (pings, sent) = tokio::sync::watch::channel(0);
        let server = task::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let service = service_fn(|req: Request<Incoming>| async move { Ok::<_, Infallible>(who(&req)) });
            keep_alive_server(KEEP_ALIVE, KEEP_ALIVE)
                .serve_connection(Pings::new(Compat::new(stream), pings), service)
                .await
        });
        // Kept open until the server has ended: the server, not a close of
        // the peer's, must end the connection.
        let peer = TcpStream::connect(addr).await.unwrap();
        peer.write_all(PREFACE_AND_SETTINGS).await.0.unwrap();
        let ended = time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the server kept a peer that never answered its pings")
            .unwrap();
        let e = ended.expect_err("the connection ended without its keep-alive error");
        assert!(e.is_timeout(), "the connection ended with another error: {e:?}");
        assert!(*sent.borrow() >= 1, "the connection ended before its first ping");
        drop(peer);
    });
}

/// HTTP/2 keep-alive on `PoolTimer` keeps a live peer: hyper's client,
/// which acknowledges each PING, stays connected while the server pings
/// it, and is answered afterwards. The server sends its next ping only
/// once the last was acknowledged, so three sent means two round trips
/// within the timeout, each followed by a fresh interval.
#[test]
fn h2_keep_alive_keeps_a_peer_that_answers_its_pings() {
    const PINGS: usize = 3;
    run(async {
        let listener = listen();
        let addr = listener.local_addr().unwrap();
        let (pings, mut sent) = tokio::sync::watch::channel(0);
        let server = task::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let service = service_fn(|req: Request<Incoming>| async move { Ok::<_, Infallible>(who(&req)) });
            // The timeout above a slow machine's round trip, yet short of
            // the test's bound: a ping left unanswered ends the connection.
            keep_alive_server(Duration::from_millis(50), Duration::from_millis(500))
                .serve_connection(Pings::new(Compat::new(stream), pings), service)
                .await
        });
        let (mut sender, connection) = h2_client(connect(addr).await).await;
        time::timeout(Duration::from_secs(10), sent.wait_for(|&n| n >= PINGS))
            .await
            .expect("the server sent fewer than three pings")
            .expect("the server closed the connection before its third ping");
        assert_eq!(h2_get(&mut sender, "http", "/after").await.unwrap(), "HTTP/2.0 /after");
        drop(sender);
        connection.await.unwrap().unwrap();
        ended_by_client(server.await.unwrap());
    });
}
