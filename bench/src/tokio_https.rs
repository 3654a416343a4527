//! `examples/https_server` on tokio: the same axum application
//! (`app.rs`) and TLS configuration (`tls.rs`), served by the same
//! hyper-util `auto` server, on tokio's multi-thread runtime, its sockets
//! (`tokio::net`), executor and timer, for comparisons under one load.
//!
//! `tokio-https [ADDR] --stop-event NAME (--self-signed | --plain)` serves
//! on `ADDR` (default `127.0.0.1:0`), prints `listening on ADDR`, and exits
//! when the named event is set (`https_server --stop NAME`). Its limits
//! are the example's defaults: a 30 s TLS handshake and HTTP/1 head
//! timeout, 32 KiB of head, 100 HTTP/2 streams per connection; no
//! connection limit and no idle timeout beyond hyper's own.
#[cfg(windows)]
#[path = "../../examples/https_server/app.rs"]
mod app;
#[cfg(windows)]
#[path = "../../examples/https_server/tls.rs"]
mod tls;

#[cfg(windows)]
fn main() -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    use std::sync::Arc;
    use std::time::Duration;

    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto;
    use hyper_util::service::TowerToHyperService;
    use windows_threadpool::{Deadline, Event, wait};

    /// The example's defaults (`serve::Limits::DEFAULT`).
    const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
    const MAX_HEADER_BYTES: usize = 32 << 10;
    const MAX_STREAMS: u32 = 100;

    let usage =
        || Error::new(ErrorKind::InvalidInput, "usage: tokio-https [ADDR] --stop-event NAME (--self-signed | --plain)");
    let (mut addr, mut stop_event, mut self_signed, mut plain) = ("127.0.0.1:0".to_string(), None, false, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--stop-event" => stop_event = Some(args.next().ok_or_else(usage)?),
            "--self-signed" => self_signed = true,
            "--plain" => plain = true,
            flag if flag.starts_with("--") => return Err(usage()),
            _ => addr = arg,
        }
    }
    let acceptor = match (self_signed, plain) {
        (true, false) => Some(tokio_rustls::TlsAcceptor::from(tls::config(tls::self_signed()?)?)),
        (false, true) => None,
        _ => return Err(usage()),
    };
    let stop = Event::named_manual_reset(&stop_event.ok_or_else(usage)?)?;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES)
        .half_close(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(MAX_HEADER_BYTES as u32);
    let builder = Arc::new(builder);
    let app = app::router();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!("listening on {}", listener.local_addr()?);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let _ = stream.set_nodelay(true);
                let (builder, acceptor) = (builder.clone(), acceptor.clone());
                let service = TowerToHyperService::new(app.clone());
                tokio::spawn(async move {
                    match acceptor {
                        None => {
                            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                        }
                        Some(acceptor) => {
                            if let Ok(Ok(tls)) = tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)).await {
                                let _ = builder.serve_connection(TokioIo::new(tls), service).await;
                            }
                        }
                    }
                });
            }
        });
        // Runtime-agnostic: the crate's wait future under tokio.
        wait::signalled(&stop, Deadline::NEVER).await.map(drop)
    })
}

#[cfg(not(windows))]
fn main() {
    eprintln!("tokio-https runs on Windows (or under Wine)");
}
