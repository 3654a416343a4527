//! hyper 1.x on the pool (feature `hyper`): the three things hyper asks
//! of a runtime, from this crate, for HTTP/1 and HTTP/2, server and client.
//!
//! - **I/O**: [`io::Compat`](crate::io::Compat) over a
//!   [`net::TcpStream`](crate::net::TcpStream) is hyper's `rt::Read` and
//!   `rt::Write`, the same adapter that gives tokio's and `futures-io`'s
//!   traits: one read kept in flight in an owned buffer, writes through an
//!   owned buffer, `poll_flush` ready only once every accepted byte is
//!   written, `poll_shutdown` a flush then `shutdown(Write)`.
//! - **Background tasks**: [`PoolExecutor`] is an `rt::Executor` that
//!   spawns each future with [`task::spawn`], detached.
//! - **Timeouts**: [`PoolTimer`] is an `rt::Timer` whose sleeps are
//!   [`time::Sleep`]s, so hyper's header read timeout
//!   and keep-alive timers fire from the crate's one timer queue, and
//!   `reset` moves a sleep's deadline without a new allocation.
//!
//! An HTTP/1.1 server then runs entirely on the pool, with no runtime
//! thread of its own:
//!
//! ```no_run
//! use std::convert::Infallible;
//! use std::time::Duration;
//! use hyper::{Request, Response, body::{Bytes, Incoming}, server::conn::http1, service::service_fn};
//! use http_body_util::Full;
//! use windows_threadpool::{hyper::PoolTimer, io::Compat, net::TcpListener, task, time};
//!
//! async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
//!     Ok(Response::new(Full::new(Bytes::from_static(b"hello\n"))))
//! }
//!
//! async fn serve() -> std::io::Result<()> {
//!     let listener = TcpListener::bind("127.0.0.1:8080")?;
//!     loop {
//!         let stream = match listener.accept().await {
//!             Ok((stream, _)) => stream,
//!             // Not one client's (`accept` skips a client that left) but
//!             // the system's, such as running out of sockets: wait, go on.
//!             Err(e) => {
//!                 eprintln!("accept: {e}");
//!                 time::sleep(Duration::from_millis(100)).await;
//!                 continue;
//!             }
//!         };
//!         let _ = stream.set_nodelay(true); // fails only for a peer already gone
//!         task::spawn(async move {
//!             let served = http1::Builder::new()
//!                 .timer(PoolTimer::new())
//!                 .header_read_timeout(Duration::from_secs(10))
//!                 .serve_connection(Compat::new(stream), service_fn(hello))
//!                 .await;
//!             if let Err(e) = served {
//!                 eprintln!("connection: {e}");
//!             }
//!         });
//!     }
//! }
//!
//! fn main() -> std::io::Result<()> {
//!     task::block_on(serve())
//! }
//! ```
//!
//! A client: `handshake` over [`io::Compat`](crate::io::Compat) of a
//! [`TcpStream`](crate::net::TcpStream), the connection run as a task of its
//! own, then `send_request`:
//!
//! ```
//! use std::{convert::Infallible, io, time::Duration};
//! use http_body_util::{BodyExt, Empty, Full};
//! use hyper::body::{Bytes, Incoming};
//! use hyper::{Request, Response, client::conn::http1 as client, server::conn::http1 as server, service::service_fn};
//! use windows_threadpool::{io::Compat, net::{TcpListener, TcpStream}, task, time};
//!
//! task::block_on(async {
//!     // A server to ask, on a free port.
//!     let listener = TcpListener::bind("127.0.0.1:0")?;
//!     let addr = listener.local_addr()?;
//!     let _server = task::spawn(async move {
//!         let (stream, _) = listener.accept().await?;
//!         let hello = service_fn(|_: Request<Incoming>| async {
//!             Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hello\n"))))
//!         });
//!         server::Builder::new().serve_connection(Compat::new(stream), hello).await.map_err(io::Error::other)
//!     });
//!
//!     let stream = time::timeout(Duration::from_secs(5), TcpStream::connect(addr)).await??;
//!     let (mut sender, connection) = client::handshake(Compat::new(stream)).await.map_err(io::Error::other)?;
//!     let _connection = task::spawn(connection); // drives the connection; ends when it closes
//!     let request = Request::get("/")
//!         .header(hyper::header::HOST, "localhost")
//!         .body(Empty::<Bytes>::new())
//!         .map_err(io::Error::other)?;
//!     let response = time::timeout(Duration::from_secs(5), sender.send_request(request)).await?.map_err(io::Error::other)?;
//!     assert!(response.status().is_success());
//!     let body = response.into_body().collect().await.map_err(io::Error::other)?.to_bytes();
//!     assert_eq!(body, "hello\n");
//!     Ok::<_, io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! HTTP/1 needs no executor (each connection is a future the caller
//! runs, as above); [`PoolExecutor`] is for what takes one: hyper's
//! HTTP/2, and libraries built on hyper that spawn.
//!
//! # HTTP/2
//!
//! hyper's HTTP/2 runs each stream as a task of its own, through the
//! executor. Its server asks `E: Http2ServerConnExec<S::Future, B>`
//! (hyper-util's `auto` builder asks the same), which hyper implements for
//! every `E: Clone + Executor<H2Stream<S::Future, B, E>> +
//! Executor<UpgradedSendStreamTask<B::Data>>`; its client asks
//! `E: Http2ClientConnExec<B, T> + Unpin`, implemented for every
//! `E: Clone + Executor<H2ClientFuture<B, T, E>> +
//! Executor<UpgradedSendStreamTask<B::Data>>`. [`PoolExecutor`] is an
//! `Executor` of every `Send + 'static` future with a `Send` output, so it
//! meets both whenever those futures are `Send`: when the service's future,
//! the bodies and their data (and, for the client, the I/O) are
//! `Send + 'static`. A service whose future is not `Send` cannot be served
//! over HTTP/2 on the pool: any pool thread may poll a task.
//!
//! hyper-util's `auto` builder serves HTTP/1.1 and HTTP/2 on one connection
//! type, telling them apart by the connection's first bytes; hyper's HTTP/2
//! client speaks h2c with prior knowledge (HTTP/2 from the first byte):
//!
//! ```
//! use std::{convert::Infallible, io, time::Duration};
//! use http_body_util::{BodyExt, Empty, Full};
//! use hyper::body::{Bytes, Incoming};
//! use hyper::{Request, Response, Version, client::conn::http2, service::service_fn};
//! use hyper_util::server::conn::auto;
//! use windows_threadpool::hyper::{PoolExecutor, PoolTimer};
//! use windows_threadpool::{io::Compat, net::{TcpListener, TcpStream}, task, time};
//!
//! task::block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0")?;
//!     let addr = listener.local_addr()?;
//!     let _server = task::spawn(async move {
//!         let (stream, _) = listener.accept().await?;
//!         let hello = service_fn(|req: Request<Incoming>| async move {
//!             let text = format!("hello over {:?}\n", req.version());
//!             Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(text))))
//!         });
//!         let mut server = auto::Builder::new(PoolExecutor::new());
//!         server.http1().timer(PoolTimer::new());
//!         server.http2().timer(PoolTimer::new());
//!         server.serve_connection(Compat::new(stream), hello).await.map_err(io::Error::other)
//!     });
//!
//!     let stream = time::timeout(Duration::from_secs(5), TcpStream::connect(addr)).await??;
//!     let (mut sender, connection) = http2::Builder::new(PoolExecutor::new())
//!         .timer(PoolTimer::new())
//!         .handshake(Compat::new(stream))
//!         .await
//!         .map_err(io::Error::other)?;
//!     let _connection = task::spawn(connection);
//!     // An HTTP/2 request names its scheme and authority: an absolute URI.
//!     let request = Request::get("http://localhost/").body(Empty::<Bytes>::new()).map_err(io::Error::other)?;
//!     let response = time::timeout(Duration::from_secs(5), sender.send_request(request)).await?.map_err(io::Error::other)?;
//!     assert_eq!(response.version(), Version::HTTP_2);
//!     let body = response.into_body().collect().await.map_err(io::Error::other)?.to_bytes();
//!     assert_eq!(body, "hello over HTTP/2.0\n");
//!     Ok::<_, io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # hyper-util
//!
//! What of hyper-util 0.1 works on the pool, with no tokio runtime:
//!
//! - `server::conn::auto::Builder::new(PoolExecutor::new())` (feature
//!   `server-auto`), as above; give each protocol [`PoolTimer`] for its
//!   timeouts and keep-alive (`http1().timer(..)`, `http2().timer(..)`).
//! - `server::graceful::GracefulShutdown` (feature `server-graceful`): it
//!   is a `tokio::sync::watch` channel, which needs no runtime. Each
//!   connection `watch`ed is told to shut down gracefully (HTTP/1.1 answers
//!   the request in flight with `connection: close`, HTTP/2 sends GOAWAY);
//!   `shutdown().await` returns once every watched future has been
//!   dropped, not merely completed: spawn each as a task of its own, or
//!   drop it once done. One connection's own shutdown needs no watcher:
//!   `graceful_shutdown()` on the pinned connection, then await it.
//! - `service::TowerToHyperService` (feature `service`): a tower `Service`,
//!   such as an axum `Router`, as hyper's.
//! - `rt::TokioIo` (feature `tokio`, which builds tokio's `rt` and `time`
//!   but starts nothing): tokio's I/O traits as hyper's, for a stream that
//!   has only tokio's, such as a TLS stream over
//!   [`io::Compat`](crate::io::Compat) (below).
//!
//! What does not: `rt::TokioExecutor` spawns with `tokio::spawn` and
//! `rt::TokioTimer` sleeps with `tokio::time::sleep`, which both panic
//! outside a tokio runtime ([`PoolExecutor`] and [`PoolTimer`] take their
//! places); the legacy client's `client::legacy::connect::HttpConnector`
//! (and so `Client::builder(..).build_http()`) connects with tokio's
//! `TcpSocket`, which needs tokio's reactor.
//!
//! # TLS
//!
//! TLS needs nothing more of this crate. With feature `tokio`,
//! [`io::Compat`](crate::io::Compat) is tokio's `AsyncRead`/`AsyncWrite`,
//! which tokio-rustls' `TlsAcceptor` and `TlsConnector` take; hyper-util's
//! `TokioIo` makes their stream hyper's. ALPN is rustls'
//! `alpn_protocols`: the `auto` builder serves whichever protocol the
//! client speaks, and a client picks its handshake by the stream's
//! `alpn_protocol()`. A server:
//!
//! ```no_run
//! # #[cfg(feature = "tokio")] mod tls {
//! use std::{convert::Infallible, io, sync::Arc};
//! use hyper::{Request, Response, body::Incoming, service::service_fn};
//! use hyper_util::{rt::TokioIo, server::conn::auto};
//! use tokio_rustls::TlsAcceptor;
//! use windows_threadpool::{hyper::{PoolExecutor, PoolTimer}, io::Compat, net::TcpListener, task};
//!
//! async fn hello(_: Request<Incoming>) -> Result<Response<String>, Infallible> {
//!     Ok(Response::new("hello\n".to_owned()))
//! }
//!
//! /// `config`: rustls' `ServerConfig` with its certificate, and
//! /// `alpn_protocols` `h2` and `http/1.1`.
//! pub async fn serve(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> io::Result<()> {
//!     let tls = TlsAcceptor::from(config);
//!     loop {
//!         let (stream, _) = listener.accept().await?; // errors: as in the HTTP/1.1 server above
//!         let tls = tls.clone();
//!         task::spawn(async move {
//!             // A handshake that fails ends this connection only.
//!             let stream = match tls.accept(Compat::new(stream)).await {
//!                 Ok(stream) => stream,
//!                 Err(e) => return eprintln!("handshake: {e}"),
//!             };
//!             let mut http = auto::Builder::new(PoolExecutor::new());
//!             http.http1().timer(PoolTimer::new());
//!             if let Err(e) = http.serve_connection(TokioIo::new(stream), service_fn(hello)).await {
//!                 eprintln!("connection: {e}");
//!             }
//!         });
//!     }
//! }
//! # }
//! # fn main() {}
//! ```

use core::future::Future;
use core::pin::Pin;
use std::time::{Duration, Instant};

use crate::{task, time};

/// hyper's `rt::Executor` over [`task::spawn`]: each future runs as a
/// detached task on the default pool (a dropped [`JoinHandle`](crate::JoinHandle)
/// detaches, never cancels).
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolExecutor(());

impl PoolExecutor {
    /// The executor.
    pub const fn new() -> Self {
        Self(())
    }
}

impl<F> ::hyper::rt::Executor<F> for PoolExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        drop(task::spawn(fut));
    }
}

/// hyper's `rt::Timer` over [`time::sleep`] and [`time::sleep_until`]; its
/// `reset` resets the [`time::Sleep`] in place.
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolTimer(());

impl PoolTimer {
    /// The timer.
    pub const fn new() -> Self {
        Self(())
    }
}

impl ::hyper::rt::Timer for PoolTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(time::sleep(duration))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(time::sleep_until(deadline))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn ::hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<time::Sleep>() {
            Some(ours) => ours.get_mut().reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

impl ::hyper::rt::Sleep for time::Sleep {}

const _: () = {
    const fn send_sync<T: Send + Sync + Unpin>() {}
    send_sync::<time::Sleep>();
    send_sync::<PoolExecutor>();
    send_sync::<PoolTimer>();
};
