//! hyper's HTTP/1 client over `net::TcpStream`, and the checks that
//! `examples/http_server --self-test` and `tests/hyper.rs` run against the
//! service.
#![allow(dead_code)]

use std::io;
use std::net::SocketAddr;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, StatusCode};
use windows_threadpool::io::Compat;
use windows_threadpool::net::TcpStream;

use super::service::{Connection, HELLO};

/// A client connection to `addr`; its connection task runs on `exec`.
pub async fn connect(
    addr: SocketAddr,
    exec: &impl hyper::rt::Executor<Connection>,
) -> io::Result<SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = http1::handshake(Compat::new(stream)).await.map_err(io::Error::other)?;
    exec.execute(Box::pin(async move {
        // It ends with an error when the server closes first.
        let _ = conn.await;
    }));
    Ok(sender)
}

/// Sends one request; the status and the whole body.
pub async fn send(
    sender: &mut SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
    body: Bytes,
) -> io::Result<(StatusCode, Bytes)> {
    sender.ready().await.map_err(io::Error::other)?;
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "localhost")
        .body(Full::new(body))
        .map_err(io::Error::other)?;
    let response = sender.send_request(request).await.map_err(io::Error::other)?;
    let status = response.status();
    let body = response.into_body().collect().await.map_err(io::Error::other)?.to_bytes();
    Ok((status, body))
}

fn check(what: &str, ok: bool) -> io::Result<()> {
    if ok { Ok(()) } else { Err(io::Error::other(format!("{what}: unexpected answer"))) }
}

/// `GET /` `times` times over `sender`, each answered with [`HELLO`].
pub async fn hellos(sender: &mut SendRequest<Full<Bytes>>, times: usize) -> io::Result<()> {
    for _ in 0..times {
        let (status, body) = send(sender, "GET", "/", Bytes::new()).await?;
        check("GET /", status == StatusCode::OK && body == HELLO)?;
    }
    Ok(())
}

/// Bytes that differ from their neighbours, so a lost or repeated chunk shows.
pub fn pattern(len: usize) -> Bytes {
    (0..len).map(|i| (i % 251) as u8 ^ (i / 251) as u8).collect::<Vec<u8>>().into()
}

/// `POST /echo` of `len` bytes, answered with the same bytes.
pub async fn echo(sender: &mut SendRequest<Full<Bytes>>, len: usize) -> io::Result<()> {
    let data = pattern(len);
    let (status, body) = send(sender, "POST", "/echo", data.clone()).await?;
    check("POST /echo", status == StatusCode::OK && body == data)
}
