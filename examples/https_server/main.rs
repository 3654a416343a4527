//! An HTTPS server on the pool: an axum `Router` served over HTTP/1.1 and
//! HTTP/2 on one port by hyper-util's `auto` server, TLS by rustls
//! (tokio-rustls over `io::Compat`, seen by hyper through hyper-util's
//! `TokioIo`), with Kestrel's limits, and no runtime thread: the
//! connections, the HTTP/2 streams (`hyper::PoolExecutor`) and the timers
//! (`hyper::PoolTimer`) are the pool's.
//!
//! ```text
//! https_server [ADDR] (--self-signed | --cert FILE --key FILE | --plain)
//!     [--stop-event NAME] [--max-connections N] [--header-timeout SECS]
//!     [--idle-timeout SECS] [--max-header-bytes N] [--max-streams N]
//!     [--shutdown-timeout SECS] [--buffered-reads] [--stats]
//! https_server --stop NAME
//! ```
//!
//! It serves on `ADDR` (default `127.0.0.1:8443`) the routes of `app.rs`:
//! `GET /`, `GET /users/{id}` (JSON), `GET /hits` (a count in shared state),
//! `POST /echo` (at most 1 MiB, 413 past it). Over TLS it offers `h2` and
//! `http/1.1` in ALPN, with the certificate and key of the PEM files, or
//! one made at start for `localhost` and `127.0.0.1` (`--self-signed`;
//! clients must not verify it: `curl -k`). `--plain` serves cleartext
//! instead: HTTP/1.1, and HTTP/2 to a client that starts with its preface
//! (h2c with prior knowledge; no `Upgrade: h2c`).
//!
//! It prints `stop event NAME` and `listening on ADDR`, and serves until the
//! named event is set (default `Local\windows-threadpool-https-server-PID`;
//! `https_server --stop NAME` sets it) or Ctrl+C arrives (the crate's
//! console control events): then it refuses new connections, asks each one
//! to shut down gracefully (HTTP/1: the request in flight is answered, then
//! the connection closes; HTTP/2: GOAWAY, the open streams are answered),
//! waits for them, at most the shutdown timeout each (a TLS handshake
//! under way: at most the header timeout), and exits. With
//! `--stats`, `GET /stats` answers one line of `key=value`:
//! `examples/http_server`'s (connections accepted, ended and over the
//! limit, threads, handles, private bytes and their slack) then requests,
//! TLS handshakes completed and failed (and of those, timed out), header
//! timeouts, idle connections closed, connections cut after the shutdown
//! timeout, other connection errors. A connection's error ends that
//! connection only.
//!
//! # Design
//!
//! - `main.rs`: the arguments, the stop (event or Ctrl+C).
//! - `app.rs`: the axum application, which knows nothing of what serves it
//!   (the tokio twin `bench/src/tokio_https.rs` serves the same one).
//! - `tls.rs`: the certificate and rustls' configuration (shared too).
//! - `serve.rs`: the accept loop and a connection's task: the connection
//!   limit, the TLS handshake under the header timeout, hyper-util's
//!   `auto::Builder` (it reads the first bytes: the HTTP/2 preface or
//!   HTTP/1), axum's `Router` through `TowerToHyperService`, wrapped to
//!   count the requests in flight; the idle timer; hyper-util's
//!   `GracefulShutdown` per connection, triggered by the idle timer or the
//!   server's stop.
//!
//! # Limits and what each costs
//!
//! Defaults are Kestrel's (`KestrelServerLimits`) where it has one.
//!
//! - `--max-connections N` (10,000; Kestrel: none): each open connection
//!   holds a socket, a task, rustls' state, hyper's (HTTP/2: its HPACK
//!   tables and flow windows) and a pending read: 500 idle TLS connections
//!   (handshake done, then one HTTP/1.1 request answered, or HTTP/2's
//!   SETTINGS exchanged) added about 32 KB of private bytes each (debug
//!   build under Wine 8), so 10,000 are about 320 MB. One accepted past the
//!   limit costs an accept and a close, and is counted (`over_limit`).
//! - `--header-timeout SECS` (30, Kestrel's `RequestHeadersTimeout`): how long
//!   the TLS handshake may take; then how long a connection may take to
//!   start its first request, either protocol (past it, it is closed and
//!   counted in `header_timeouts`: a client that sends nothing, or trickles
//!   HTTP/2's preface or first frames, which hyper's own timeout does not
//!   see); and an HTTP/1 request's head (hyper's header read timeout, which
//!   also runs while a kept-alive HTTP/1 connection waits for its next
//!   request: an idle HTTP/1 connection lasts the shorter of this and the
//!   idle timeout). A silent or slow client holds its socket, task and
//!   buffers that long.
//! - `--idle-timeout SECS` (130, Kestrel's `KeepAliveTimeout`): a connection
//!   with no request in flight that long is shut down gracefully, HTTP/1 and
//!   HTTP/2 alike (hyper has no idle timeout for HTTP/2). One timer
//!   per connection, woken once per period while requests are in flight.
//! - `--max-header-bytes N` (32 KiB, Kestrel's `MaxRequestHeadersTotalSize`;
//!   at least 8 KiB, hyper's least): HTTP/1's read buffer (a longer head is
//!   answered 431) and HTTP/2's `SETTINGS_MAX_HEADER_LIST_SIZE`; the memory
//!   a head may take, per connection (HTTP/1) or per stream being decoded.
//! - `--max-streams N` (100, Kestrel's `MaxStreamsPerConnection`): HTTP/2
//!   requests open at once on a connection, each a task with its own
//!   buffers: a connection costs up to N requests' worth.
//! - `--shutdown-timeout SECS` (30, .NET's host shutdown timeout): how long
//!   a connection asked to shut down may take before it is dropped (an
//!   HTTP/2 client that never answers the GOAWAY's PING would otherwise
//!   hold it).
//! - `--buffered-reads` (off; Kestrel's `WaitForDataBeforeAllocatingBuffer`
//!   set to false): each connection keeps a read of a 64 KiB buffer in
//!   flight, instead of waiting for data with a zero-byte receive first
//!   (`io::Compat`'s "Waiting for data"). One receive per read instead of
//!   two, for 64 KiB more per connection, idle or not (pinned on Windows).
//! - The body of `POST /echo` (1 MiB, `app::BODY_LIMIT`): gathered in memory.
#[cfg(windows)]
mod app;
#[cfg(windows)]
#[path = "../../tests/support/process.rs"]
mod process;
#[cfg(windows)]
mod serve;
#[cfg(windows)]
mod tls;

#[cfg(windows)]
fn main() -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    use axum::routing::get;
    use windows_threadpool::net::TcpListener;
    use windows_threadpool::{Deadline, Event, signal, task, wait};

    use serve::{Limits, Server, Stats};

    const USAGE: &str = "usage: https_server [ADDR] (--self-signed | --cert FILE --key FILE | --plain) \
                         [--stop-event NAME] [--max-connections N] [--header-timeout SECS] [--idle-timeout SECS] \
                         [--max-header-bytes N] [--max-streams N] [--shutdown-timeout SECS] [--buffered-reads] [--stats] \
                         | https_server --stop NAME";
    let usage = || Error::new(ErrorKind::InvalidInput, USAGE);
    let (mut addr, mut stop_event, mut cert, mut key) = (None, None, None::<PathBuf>, None::<PathBuf>);
    let (mut self_signed, mut plain) = (false, false);
    let mut limits = Limits::DEFAULT;
    let mut stats = Stats::default();
    let mut args = std::env::args().skip(1);
    let value = |args: &mut std::iter::Skip<std::env::Args>| args.next().ok_or_else(usage);
    let secs = |text: String| {
        text.parse().ok().and_then(|s| Duration::try_from_secs_f64(s).ok()).filter(|d| !d.is_zero()).ok_or_else(usage)
    };
    let positive = |text: String| text.parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(usage);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--stop" => return Event::open(&value(&mut args)?)?.set(),
            "--stop-event" => stop_event = Some(value(&mut args)?),
            "--self-signed" => self_signed = true,
            "--plain" => plain = true,
            "--cert" => cert = Some(value(&mut args)?.into()),
            "--key" => key = Some(value(&mut args)?.into()),
            "--max-connections" => limits.max_connections = positive(value(&mut args)?)?,
            "--header-timeout" => limits.header_timeout = secs(value(&mut args)?)?,
            "--idle-timeout" => limits.idle_timeout = secs(value(&mut args)?)?,
            "--shutdown-timeout" => limits.shutdown_timeout = secs(value(&mut args)?)?,
            "--max-header-bytes" => {
                limits.max_header_bytes = usize::try_from(positive(value(&mut args)?)?)
                    .ok()
                    .filter(|&n| n >= Limits::MIN_HEADER_BYTES && u32::try_from(n).is_ok())
                    .ok_or_else(usage)?;
            }
            "--max-streams" => limits.max_streams = u32::try_from(positive(value(&mut args)?)?).map_err(|_| usage())?,
            "--buffered-reads" => limits.wait_for_data = false,
            "--stats" => stats.resources = Some(process::resources_line),
            flag if flag.starts_with("--") => return Err(usage()),
            _ if addr.is_none() => addr = Some(arg),
            _ => return Err(usage()),
        }
    }
    let identity = match (self_signed, plain, cert, key) {
        (true, false, None, None) => Some(tls::self_signed()?),
        (false, false, Some(cert), Some(key)) => Some(tls::from_pem(&cert, &key)?),
        (false, true, None, None) => None,
        _ => return Err(usage()),
    };
    let acceptor = identity.map(tls::config).transpose()?.map(tokio_rustls::TlsAcceptor::from);

    let name = stop_event.unwrap_or_else(|| format!("Local\\windows-threadpool-https-server-{}", std::process::id()));
    let stop = Event::named_manual_reset(&name)?;
    let listener = TcpListener::bind(addr.as_deref().unwrap_or("127.0.0.1:8443"))?;
    println!("stop event {name}");
    println!("listening on {}", listener.local_addr()?);

    let stats = Arc::new(stats);
    let mut app = app::router();
    if stats.resources.is_some() {
        let reported = stats.clone();
        app = app.route("/stats", get(move || std::future::ready(reported.report())));
    }
    let stopped = async move {
        let event = async {
            if let Err(e) = wait::signalled(&stop, Deadline::NEVER).await {
                eprintln!("https_server: waiting for the stop event: {e}");
            }
        };
        let ctrl_c = async {
            match signal::ctrl_c().await {
                Ok(_) => println!("Ctrl+C: stopping"),
                // No console events (no console): the event alone stops it.
                Err(e) => {
                    eprintln!("https_server: no Ctrl+C: {e}");
                    std::future::pending::<()>().await;
                }
            }
        };
        futures::future::select(std::pin::pin!(event), std::pin::pin!(ctrl_c)).await;
    };
    let server = Server::new(app, acceptor, limits, stats.clone());
    task::block_on(serve::serve(listener, server, stopped))?;
    println!("stopped after {} connections", Stats::get(&stats.accepted));
    Ok(())
}

#[cfg(not(windows))]
fn main() {
    eprintln!("this example runs on Windows (or under Wine)");
}
