//! The hello server of `examples/http_server` on tokio + hyper, which
//! `cargo xtask bench` loads with wrk beside the example: the same hyper,
//! the same handler and settings (`service::answer`, `service::MAX_HEADER_SIZE`,
//! a header read timeout, half-closed connections answered, keep-alive,
//! `TCP_NODELAY`), on tokio's
//! multi-thread runtime, its sockets and its timer.
//!
//! `tokio-http [ADDR] --stop-event NAME [--header-timeout SECS]` serves on
//! `ADDR` (default `127.0.0.1:0`), prints `listening on ADDR`, and exits
//! when the named event is set (`http_server --stop NAME`), as the example
//! does. Under hyper 1.x the header read timeout is also how long an idle
//! keep-alive connection lives (default 10 s, as the example's).
#[cfg(windows)]
#[path = "../../examples/http_server/service.rs"]
mod service;

#[cfg(windows)]
fn main() -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    use std::time::Duration;

    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::{TokioIo, TokioTimer};
    use windows_threadpool::{Deadline, Event, wait};

    let usage =
        || Error::new(ErrorKind::InvalidInput, "usage: tokio-http [ADDR] --stop-event NAME [--header-timeout SECS]");
    let (mut addr, mut stop_event, mut header_timeout) = ("127.0.0.1:0".to_string(), None, Duration::from_secs(10));
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--stop-event" => stop_event = Some(args.next().ok_or_else(usage)?),
            "--header-timeout" => {
                let secs = args.next().and_then(|s| s.parse().ok()).ok_or_else(usage)?;
                header_timeout = Duration::from_secs_f64(secs);
            }
            flag if flag.starts_with("--") => return Err(usage()),
            _ => addr = arg,
        }
    }
    let stop = Event::named_manual_reset(&stop_event.ok_or_else(usage)?)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!("listening on {}", listener.local_addr()?);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let _ = stream.set_nodelay(true);
                tokio::spawn(async move {
                    let mut builder = http1::Builder::new();
                    builder
                        .timer(TokioTimer::new())
                        .header_read_timeout(header_timeout)
                        .max_header_size(service::MAX_HEADER_SIZE)
                        .half_close(true);
                    let _ = builder.serve_connection(TokioIo::new(stream), service_fn(service::answer)).await;
                });
            }
        });
        // Runtime-agnostic: the crate's wait future under tokio.
        wait::signalled(&stop, Deadline::NEVER).await.map(drop)
    })
}

#[cfg(not(windows))]
fn main() {
    eprintln!("tokio-http runs on Windows (or under Wine: `cargo xtask bench`)");
}
