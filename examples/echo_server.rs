//! A TCP echo server on the pool: the accept loop and every connection are
//! tasks (`task::spawn`), each read and write completes on a pool thread,
//! and no runtime thread is started.
//!
//! `cargo run --example echo_server -- [ADDR]` serves on `ADDR` (default
//! `127.0.0.1:0`, a free port) until stopped, and prints `listening on ADDR`
//! once bound. With `--self-test` (what `cargo xtask demo` and `cargo xtask
//! test` run) the same process is its own client: 1,000 round trips of 64
//! bytes over one connection, then 50 connections at once of 20 round trips
//! each; it prints the round-trip times measured, checks that the server
//! echoed every byte, and exits.
#[cfg(windows)]
fn main() -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    use std::sync::Arc;
    use std::time::Duration;

    use windows_threadpool::net::TcpListener;
    use windows_threadpool::{task, time};

    /// How long the self-test may take in all (it takes well under a
    /// second under Wine).
    const SELF_TEST_LIMIT: Duration = Duration::from_secs(60);

    let mut self_test = false;
    let mut addr = None;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--self-test" => self_test = true,
            flag if flag.starts_with("--") => {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!("unknown flag {flag}; usage: echo_server [--self-test] [ADDR]"),
                ));
            }
            _ if addr.is_none() => addr = Some(arg),
            _ => return Err(Error::new(ErrorKind::InvalidInput, "usage: echo_server [--self-test] [ADDR]")),
        }
    }
    let listener = Arc::new(TcpListener::bind(addr.as_deref().unwrap_or("127.0.0.1:0"))?);
    let local = listener.local_addr()?;
    println!("listening on {local}");

    if !self_test {
        return task::block_on(server::serve(listener, None)).map(drop);
    }

    let connections = 1 + client::CONCURRENT;
    let server = task::spawn(server::serve(listener, Some(connections)));
    task::block_on(async {
        let checked = time::timeout(SELF_TEST_LIMIT, async {
            let one = client::one_connection(local).await?;
            println!("{one}");
            let many = client::concurrent(local).await?;
            println!("{many}");
            let echoed = server.await.expect("the server panicked")?;
            let sent = (one.trips + many.trips) * client::MESSAGE as u64;
            if echoed != sent {
                return Err(Error::other(format!("the server echoed {echoed} bytes of {sent}")));
            }
            println!("server: {connections} connections, {echoed} bytes echoed");
            Ok(())
        });
        checked
            .await
            .map_err(|_| Error::new(ErrorKind::TimedOut, format!("the self-test took over {SELF_TEST_LIMIT:?}")))?
    })
}

#[cfg(windows)]
mod server {
    use std::io;
    use std::sync::Arc;
    use std::time::Duration;

    use windows_threadpool::net::{TcpListener, TcpStream};
    use windows_threadpool::{task, time};

    /// Accepts connections (all of them, or `limit`), each echoed by a task
    /// of its own; with a limit, waits for every echo to end and returns
    /// the bytes echoed in all.
    pub async fn serve(listener: Arc<TcpListener>, limit: Option<usize>) -> io::Result<u64> {
        let mut echoes = Vec::new();
        let mut accepted = 0;
        while limit.is_none_or(|l| accepted < l) {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                // Not one client's (`accept` skips a client that left) but
                // the system's, such as running out of sockets: wait a
                // little and go on.
                Err(e) => {
                    eprintln!("echo_server: accept: {e}");
                    time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            accepted += 1;
            let echo = task::spawn(async move {
                let echoed = echo(&stream).await;
                if let Err(e) = &echoed {
                    eprintln!("echo_server: {peer}: {e}");
                }
                echoed
            });
            // Serving forever, a connection's task runs detached.
            if limit.is_some() {
                echoes.push(echo);
            }
        }
        let mut total = 0;
        for echo in echoes {
            total += echo.await.expect("an echo task panicked")?;
        }
        Ok(total)
    }

    /// Writes back what it reads until the peer shuts down; the bytes echoed.
    async fn echo(stream: &TcpStream) -> io::Result<u64> {
        stream.set_nodelay(true)?;
        let mut buf = vec![0u8; 4096];
        let mut total = 0;
        loop {
            let (n, b) = stream.read(buf).await;
            buf = b;
            let n = n?;
            if n == 0 {
                return Ok(total);
            }
            buf.truncate(n);
            let (sent, b) = stream.write_all(buf).await;
            buf = b;
            sent?;
            total += n as u64;
            buf.resize(4096, 0); // within its capacity: no allocation
        }
    }
}

#[cfg(windows)]
mod client {
    use std::fmt;
    use std::io;
    use std::net::{Shutdown, SocketAddr};
    use std::time::{Duration, Instant};

    use windows_threadpool::net::TcpStream;
    use windows_threadpool::task;

    /// Bytes per message.
    pub const MESSAGE: usize = 64;
    const ONE_CONNECTION_TRIPS: usize = 1_000;
    pub const CONCURRENT: usize = 50;
    const TRIPS_EACH: usize = 20;

    /// Round-trip times of one phase.
    pub struct Measured {
        what: String,
        pub trips: u64,
        median: Duration,
        p99: Duration,
        total: Duration,
    }

    impl Measured {
        fn new(what: String, mut samples: Vec<Duration>, total: Duration) -> Self {
            samples.sort();
            let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
            Self { what, trips: samples.len() as u64, median: at(0.5), p99: at(0.99), total }
        }
    }

    impl fmt::Display for Measured {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "{}: {} round trips of {MESSAGE} bytes in {:.1} ms, round trip median {} µs, p99 {} µs",
                self.what,
                self.trips,
                self.total.as_secs_f64() * 1e3,
                self.median.as_micros(),
                self.p99.as_micros()
            )
        }
    }

    /// Connects, makes `trips` round trips (each message's bytes say which
    /// connection and round it is, and must come back as sent), shuts down
    /// its writing side and reads the server's end of file.
    async fn round_trips(addr: SocketAddr, connection: usize, trips: usize) -> io::Result<Vec<Duration>> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let mut times = Vec::with_capacity(trips);
        let (mut out, mut back) = (vec![0u8; MESSAGE], vec![0u8; MESSAGE]);
        for round in 0..trips {
            out.fill((connection * 31 + round) as u8);
            let t = Instant::now();
            let (sent, o) = stream.write_all(out).await;
            out = o;
            sent?;
            let mut got = 0;
            while got < MESSAGE {
                // At most MESSAGE reads: each returns a byte at least, or fails.
                let (n, b) = stream.read(back).await;
                back = b;
                match n? {
                    0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                    n => {
                        if back[..n] != out[got..got + n] {
                            return Err(io::Error::other("the echo differs from what was sent"));
                        }
                        got += n;
                    }
                }
            }
            times.push(t.elapsed());
        }
        stream.shutdown(Shutdown::Write)?;
        let (n, _) = stream.read(back).await;
        if n? != 0 {
            return Err(io::Error::other("the server sent more than was echoed"));
        }
        Ok(times)
    }

    pub async fn one_connection(addr: SocketAddr) -> io::Result<Measured> {
        let t = Instant::now();
        let times = round_trips(addr, 0, ONE_CONNECTION_TRIPS).await?;
        Ok(Measured::new("one connection".into(), times, t.elapsed()))
    }

    pub async fn concurrent(addr: SocketAddr) -> io::Result<Measured> {
        let t = Instant::now();
        let clients: Vec<_> = (1..=CONCURRENT).map(|c| task::spawn(round_trips(addr, c, TRIPS_EACH))).collect();
        let mut times = Vec::with_capacity(CONCURRENT * TRIPS_EACH);
        for c in clients {
            times.extend(c.await.expect("a client task panicked")?);
        }
        Ok(Measured::new(format!("{CONCURRENT} connections at once, {TRIPS_EACH} each"), times, t.elapsed()))
    }
}

#[cfg(not(windows))]
fn main() {
    eprintln!("this example runs on Windows (or under Wine: `cargo xtask demo`)");
}
