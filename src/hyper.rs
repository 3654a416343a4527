//! hyper 1.x on the pool (feature `hyper`): the three things hyper asks
//! of a runtime, from this crate.
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
