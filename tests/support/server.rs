//! The service of `examples/http_server` on a free loopback port in the
//! test's own process, and the raw clients the HTTP tests (`tests/hyper.rs`,
//! `tests/http_stress.rs`) meet it with. Include it beside `support`,
//! `executors`, `client` and `service`.
#![allow(dead_code)]

use std::future::Future;
use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use windows_threadpool::hyper::PoolExecutor;
use windows_threadpool::net::TcpListener;

use crate::service::{self, Connection, Stats};
use crate::{client, executors, support};

/// Which executor runs the test: its body, the server's accept loop and
/// every connection's task, the server's and the client's.
#[derive(Debug, Clone, Copy)]
pub enum On {
    Pool,
    Tokio,
}

impl On {
    /// Runs `body` to completion on this executor (under the executors'
    /// watchdog), handing it the executor to spawn on.
    pub fn run<F: Future<Output = ()> + Send + 'static>(self, body: impl FnOnce(Exec) -> F + Send + 'static) {
        let name = match self {
            On::Pool => "task::block_on",
            On::Tokio => "tokio multi-thread",
        };
        executors::run_on(name, async move {
            let exec = match self {
                On::Pool => Exec::Pool,
                On::Tokio => Exec::Tokio(tokio::runtime::Handle::current()),
            };
            body(exec).await
        });
    }
}

/// [`On`]'s executor, as hyper's `rt::Executor`.
#[derive(Debug, Clone)]
pub enum Exec {
    Pool,
    Tokio(tokio::runtime::Handle),
}

impl hyper::rt::Executor<Connection> for Exec {
    fn execute(&self, fut: Connection) {
        match self {
            Exec::Pool => PoolExecutor::new().execute(fut),
            Exec::Tokio(rt) => drop(rt.spawn(fut)),
        }
    }
}

/// The service on a free loopback port, stopped by [`Server::stop`].
pub struct Server {
    pub addr: SocketAddr,
    pub stats: Arc<Stats>,
    /// Dropped (taken) to stop the server.
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// What the server's accept loop returned.
    pub served: tokio::sync::oneshot::Receiver<std::io::Result<()>>,
}

impl Server {
    /// Its accept loop and connections run on `exec`.
    pub fn start(exec: &Exec, header_read_timeout: Duration) -> Self {
        Self::start_with(exec, header_read_timeout, service::MAX_CONNECTIONS)
    }

    /// [`Server::start`] serving at most `max_connections` at once.
    pub fn start_with(exec: &Exec, header_read_timeout: Duration, max_connections: u64) -> Self {
        use hyper::rt::Executor;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(Stats::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (done, served) = tokio::sync::oneshot::channel();
        let serving = service::serve(
            listener,
            service::http1(header_read_timeout),
            max_connections,
            exec.clone(),
            async move { drop(stopped.await) },
            stats.clone(),
        );
        exec.execute(Box::pin(async move { drop(done.send(serving.await)) }));
        Self { addr, stats, stop: Some(stop), served }
    }

    pub fn accepted(&self) -> u64 {
        Stats::get(&self.stats.accepted)
    }

    /// Shuts the server down gracefully, and checks that every connection
    /// it accepted ended (a connection task that panicked never counts its
    /// end). That it refuses connections after the stop is the graceful
    /// stop's test: its port, once free, may be bound by another test.
    pub async fn stop(mut self) {
        drop(self.stop.take());
        (&mut self.served).await.expect("the server's task panicked").unwrap();
        assert_eq!(self.stats.ended(), self.accepted(), "{:?}", self.stats);
    }
}

/// Waits (at most [`support::PATIENCE`]) until `done` holds.
pub fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + support::PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {:?}", support::PATIENCE);
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A blocking client's connection, with a bounded wait on reads.
pub fn raw(addr: SocketAddr) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(support::PATIENCE)).unwrap();
    s
}

/// Everything until the server closes (or resets) the connection.
pub fn read_until_closed(s: &mut std::net::TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut || e.kind() == std::io::ErrorKind::WouldBlock => {
                panic!("the server kept the connection open past {:?}", support::PATIENCE)
            }
            Err(_) => break, // reset
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Sends `request` raw and reads the answer up to the server's close.
pub fn answer_to(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = raw(addr);
    s.write_all(request).unwrap();
    read_until_closed(&mut s)
}

/// The server answers another client after a bad one: one GET through
/// hyper's client.
pub async fn still_serves(addr: SocketAddr) {
    let mut sender = client::connect(addr, &Exec::Pool).await.unwrap();
    client::hellos(&mut sender, 1).await.unwrap();
}

#[path = "sockets.rs"]
mod sockets;
pub use sockets::reset_on_close;
