//! An HTTP/1.1 server on the pool: hyper 1.x over `net::TcpStream`
//! (`io::Compat`), its timeouts on `hyper::PoolTimer`, a task per connection
//! (`hyper::PoolExecutor`), and no runtime thread.
//!
//! `cargo run --example http_server --features hyper -- [ADDR]
//! [--stop-event NAME] [--header-timeout SECS] [--max-connections N] [--stats]`
//! serves on `ADDR` (default `127.0.0.1:8080`): `GET /` answers a short
//! body, `POST /echo` the request's body; connections are kept alive, a
//! client that takes more than `SECS` (default 10) to send a request's head
//! is cut off, and a connection accepted while `N` (default 10,000) are
//! open is closed at once. It prints
//! `stop event NAME` and then `listening on ADDR`, and serves until the
//! named event is set (default name `Local\windows-threadpool-http-server-PID`);
//! then it refuses new connections, lets the requests in flight finish,
//! closes the rest and exits. `http_server --stop NAME` sets that event
//! (from any process of the same session), so
//! `http_server --stop 'Local\windows-threadpool-http-server-1234'` stops
//! the server whose process id is 1234. With `--stats`, `GET /stats`
//! answers one line: connections accepted, ended and closed over the limit,
//! the process's threads, open handles and private bytes, and the slack
//! within which the leak checks let those move (what the HTTP soak of
//! `cargo xtask stress` compares). A client that shuts down its sending side
//! after its request is still answered (hyper's `half_close`).
//!
//! # What each limit costs
//!
//! Measured under Wine 8 by the hostile clients of `tests/http_stress.rs`
//! (the figures are the process's, clients included; read them as orders
//! of magnitude):
//!
//! - **Connections** (`--max-connections`, 10,000): an idle kept-alive
//!   connection holds its socket, a zero-byte receive (no buffer), hyper's
//!   state and its header timer, and no thread: about 26 KB (2,000 idle
//!   connections held 52 MB), so 10,000 are about 260 MB. One accepted past
//!   the limit costs an accept and a close: the limit bounds memory, not
//!   the rate of connections.
//! - **Header timeout** (`--header-timeout`, 10 s): how long a client may
//!   hold a connection without completing a request's head, one byte a
//!   second or idle (hyper's timer also runs while a kept-alive connection
//!   waits for its next request, so it closes idle ones too). Each cut
//!   drops a socket with its receive in flight, cancelled; its completion
//!   closes the socket as its callback ends, and no thread waits for it.
//!   The burst of wakes and completions still grows Wine's pool (see
//!   **Threads**): 500 slowloris clients cut off within 0.7 s took it to
//!   199 threads (about 1 MiB each) for the 5 s they take to idle out.
//! - **Head size** (`service::MAX_HEADER_SIZE`, 16 KiB):
//!   hyper buffers at most that much of a head, and the adapter a 64 KiB
//!   read buffer while bytes wait; a longer head (a 16 MiB line, 10,000
//!   headers) is answered 431 and closed.
//! - **Echo size** (`service::ECHO_LIMIT`, 16 MiB): `POST
//!   /echo` collects the body before it answers, so one request may hold up
//!   to twice the limit while the pieces are joined, then the limit until
//!   the answer is sent. The limits bound a connection, not the process:
//!   10,000 connections echoing 16 MiB each would want over 160 GiB, and a server
//!   for untrusted clients would stream the body or bound the echoes in
//!   flight.
//! - **Threads**: none per connection; Wine's pool adds a thread for each
//!   callback submitted while all of its threads are busy (up to 500; the
//!   Windows pool is not documented to), so a burst of completions grows it
//!   (200 answers at once: up to 86 threads; 2,000: 57 to 214; 10,000
//!   idle connections closed at once: 504) until they idle out.
//!
//! What each limit costs while it holds:
//! - the header timeout (`--header-timeout`, 10 s): a client that sends
//!   nothing, or one byte at a time, holds its socket, its task and hyper's
//!   connection state that long, and no thread;
//! - the largest head (16 KiB, 431 past it): hyper's read buffer grows to it
//!   per connection while a head is read;
//! - the largest `POST /echo` body (16 MiB, 413 past it): the body is
//!   gathered in memory, so each echo in flight may hold that much;
//! - `--max-connections` (10,000): every open connection holds a socket, a
//!   task, hyper's state and a pending zero-byte receive (no buffer of the
//!   crate's while it is idle); a connection past it is accepted and closed
//!   at once, so a flood costs an accept each and nothing kept.
//!
//! With `--self-test` (what `cargo xtask demo` and `cargo xtask test` run)
//! it serves on a free port and is its own client, through hyper's client
//! over the same sockets: a GET, a 1 MiB echo, 1,000 requests on one
//! connection and 64 connections at once; then it sets its own stop event
//! and checks that the server shut down, and exits.
#[cfg(windows)]
mod client;
#[cfg(windows)]
#[path = "../../tests/support/process.rs"]
mod process;
#[cfg(windows)]
mod service;

#[cfg(windows)]
fn main() -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use windows_threadpool::hyper::PoolExecutor;
    use windows_threadpool::net::TcpListener;
    use windows_threadpool::{Deadline, Event, task, time, wait};

    const USAGE: &str = "usage: http_server [ADDR] [--stop-event NAME] [--header-timeout SECS] [--max-connections N] \
                         [--stats] [--self-test] | http_server --stop NAME";
    /// How long the self-test may take in all.
    const SELF_TEST_LIMIT: Duration = Duration::from_secs(120);

    let usage = || Error::new(ErrorKind::InvalidInput, USAGE);
    let (mut addr, mut stop_event, mut header_timeout, mut self_test) = (None, None, Duration::from_secs(10), false);
    let mut max_connections = service::MAX_CONNECTIONS;
    let mut stats = service::Stats::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--stop" => {
                let name = args.next().ok_or_else(usage)?;
                return Event::open(&name)?.set();
            }
            "--stop-event" => stop_event = Some(args.next().ok_or_else(usage)?),
            "--header-timeout" => {
                let secs = args.next().and_then(|s| s.parse().ok()).ok_or_else(usage)?;
                header_timeout = Duration::from_secs_f64(secs);
            }
            "--max-connections" => {
                max_connections = args.next().and_then(|s| s.parse().ok()).filter(|&n| n > 0).ok_or_else(usage)?;
            }
            "--self-test" => self_test = true,
            "--stats" => stats.resources = Some(process::resources_line),
            flag if flag.starts_with("--") => return Err(usage()),
            _ if addr.is_none() => addr = Some(arg),
            _ => return Err(usage()),
        }
    }
    let name = stop_event.unwrap_or_else(|| format!("Local\\windows-threadpool-http-server-{}", std::process::id()));
    let stop = Event::named_manual_reset(&name)?;
    let default_addr = if self_test { "127.0.0.1:0" } else { "127.0.0.1:8080" };
    let listener = TcpListener::bind(addr.as_deref().unwrap_or(default_addr))?;
    let local = listener.local_addr()?;
    println!("stop event {name}");
    println!("listening on {local}");

    let stats = Arc::new(stats);
    let stopped = {
        let stop = stop.try_clone()?;
        async move {
            if let Err(e) = wait::signalled(&stop, Deadline::NEVER).await {
                eprintln!("http_server: waiting for the stop event: {e}");
            }
        }
    };
    let server = task::spawn(service::serve(
        listener,
        service::http1(header_timeout),
        max_connections,
        PoolExecutor::new(),
        stopped,
        stats.clone(),
    ));
    if !self_test {
        task::block_on(server).expect("the server panicked")?;
        println!("stopped after {} connections", service::Stats::get(&stats.accepted));
        return Ok(());
    }

    task::block_on(async {
        let checked = time::timeout(SELF_TEST_LIMIT, async {
            let exec = PoolExecutor::new();
            let t = Instant::now();
            let mut one = client::connect(local, &exec).await?;
            client::hellos(&mut one, 1).await?;
            client::echo(&mut one, 1 << 20).await?;
            println!("GET / and a 1 MiB POST /echo: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            client::hellos(&mut one, 1_000).await?;
            println!("1,000 requests on one connection: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let many: Vec<_> = (0..64)
                .map(|_| {
                    task::spawn(async move {
                        let mut sender = client::connect(local, &PoolExecutor::new()).await?;
                        client::hellos(&mut sender, 10).await
                    })
                })
                .collect();
            for c in many {
                c.await.expect("a client panicked")?;
            }
            println!("64 connections at once, 10 requests each: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
            drop(one);
            stop.set()?;
            server.await.expect("the server panicked")?;
            // Refused; or, if another process bound the freed port, not ours.
            drop(client::connect(local, &exec).await);
            let (accepted, ended) = (service::Stats::get(&stats.accepted), stats.ended());
            if accepted != 65 || ended != accepted {
                return Err(Error::other(format!("{accepted} connections accepted, {ended} ended (expected 65)")));
            }
            println!("stopped: {accepted} connections, all ended");
            Ok(())
        });
        checked
            .await
            .map_err(|_| Error::new(ErrorKind::TimedOut, format!("the self-test took over {SELF_TEST_LIMIT:?}")))?
    })
}

#[cfg(not(windows))]
fn main() {
    eprintln!("this example runs on Windows (or under Wine: `cargo xtask demo`)");
}
