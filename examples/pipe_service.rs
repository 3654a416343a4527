//! A Windows service on the pool: it answers requests on a named pipe and
//! serves HTTP, with no runtime thread, and stops cleanly when the service
//! control manager says so (or, run from a console, on Ctrl+C).
//!
//! ```text
//! sc create wtp-pipe-service binPath= "C:\path\pipe_service.exe --pipe \\.\pipe\wtp-pipe-service --addr 127.0.0.1:8087"
//! sc start wtp-pipe-service
//! pipe_service --client \\.\pipe\wtp-pipe-service hello     (prints "pong: hello")
//! curl http://127.0.0.1:8087/                                (prints "hello from the service")
//! sc stop wtp-pipe-service
//! sc delete wtp-pipe-service
//! ```
//!
//! `cargo run --example pipe_service --features hyper -- [--pipe NAME]
//! [--addr ADDR]` runs it from a console instead (Ctrl+C stops it), the
//! same binary. `--client NAME WORDS...` sends one request to a running
//! one and prints the answer. `cargo xtask test` installs it in the test
//! prefix with `sc`, starts it, talks to it both ways, stops it and checks
//! that `sc query` reports it stopped with exit code 0.
#[cfg(windows)]
fn main() -> std::io::Result<()> {
    use std::convert::Infallible;
    use std::pin::pin;

    use futures::future::{Either, select};
    use http_body_util::Full;
    use hyper::body::{Bytes, Incoming};
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper::{Request, Response};
    use windows_threadpool::hyper::PoolTimer;
    use windows_threadpool::io::Compat;
    use windows_threadpool::net::TcpListener;
    use windows_threadpool::pipe::{PipeListener, PipeStream};
    use windows_threadpool::service::{self, Control};
    use windows_threadpool::task;

    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str, default: &str| {
        args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.into())
    };
    if let Some(i) = args.iter().position(|a| a == "--client") {
        let name = args.get(i + 1).cloned().unwrap_or_default();
        let words = args[(i + 2).min(args.len())..].join(" ");
        let answer = task::block_on(async move {
            let stream = PipeStream::connect(&name).await?;
            let (sent, _) = stream.write_all(words.into_bytes()).await;
            sent?;
            let (n, buf) = stream.read(vec![0u8; 4096]).await;
            Ok::<_, std::io::Error>(String::from_utf8_lossy(&buf[..n?]).into_owned())
        })?;
        println!("{answer}");
        return Ok(());
    }
    let pipe_name = value("--pipe", r"\\.\pipe\wtp-pipe-service");
    let addr = value("--addr", "127.0.0.1:8087");

    /// Answers each request read from one client with `pong: ` and the request.
    async fn answer_pipe(stream: PipeStream) -> std::io::Result<()> {
        let mut buf = vec![0u8; 4096];
        loop {
            let (n, back) = stream.read(buf).await;
            let n = n?;
            if n == 0 {
                return Ok(());
            }
            let reply = [b"pong: ", &back[..n]].concat();
            let (sent, _) = stream.write_all(reply).await;
            sent?;
            buf = back;
        }
    }

    async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        Ok(Response::new(Full::new(Bytes::from_static(b"hello from the service\n"))))
    }

    service::run("wtp-pipe-service", move |ctl: Control| async move {
        let pipes = PipeListener::bind(&pipe_name)?;
        let http = TcpListener::bind(&addr)?;
        // Each accept races the stop; what is accepted is served by a task
        // of its own, and the loops end at the stop.
        let serve_pipes = async {
            loop {
                match select(pin!(pipes.accept()), pin!(ctl.stopping())).await {
                    Either::Left((Ok(stream), _)) => drop(task::spawn(answer_pipe(stream))),
                    Either::Left((Err(e), _)) => eprintln!("pipe accept: {e}"),
                    Either::Right(_) => return,
                }
            }
        };
        let serve_http = async {
            loop {
                match select(pin!(http.accept()), pin!(ctl.stopping())).await {
                    Either::Left((Ok((stream, _)), _)) => drop(task::spawn(async move {
                        let conn = http1::Builder::new()
                            .timer(PoolTimer::new())
                            .serve_connection(Compat::new(stream), service_fn(hello));
                        if let Err(e) = conn.await {
                            eprintln!("http connection: {e}");
                        }
                    })),
                    Either::Left((Err(e), _)) => eprintln!("http accept: {e}"),
                    Either::Right(_) => return,
                }
            }
        };
        futures::join!(serve_pipes, serve_http);
        Ok(())
    })
}

#[cfg(not(windows))]
fn main() {
    eprintln!("pipe_service runs on Windows (or under Wine)");
}
