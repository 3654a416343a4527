//! HTTP over TLS on the pool: rustls (its `ring` provider) through
//! tokio-rustls over `io::Compat`'s tokio traits, wrapped for hyper by
//! hyper-util's `TokioIo`; ALPN picks HTTP/2 or HTTP/1.1.

use std::convert::Infallible;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use windows_threadpool::hyper::PoolExecutor;
use windows_threadpool::io::Compat;
use windows_threadpool::net::{TcpListener, TcpStream};
use windows_threadpool::task;

use super::http2::{body, ended_by_client, h1_client, h1_get, h2_client, h2_get, listen, run};
use crate::tls::{self, H2, HTTP1};

/// The ALPN name `alpn` in text, "-" for none.
fn name(alpn: Option<&[u8]>) -> String {
    alpn.map_or("-".to_owned(), |p| String::from_utf8_lossy(p).into_owned())
}

/// The rustls error inside `e` (tokio-rustls passes it on as `InvalidData`).
fn rustls_error(e: &std::io::Error) -> &rustls::Error {
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e:?}");
    e.get_ref().and_then(|inner| inner.downcast_ref()).unwrap_or_else(|| panic!("not rustls': {e:?}"))
}

/// Serves one TLS connection from `listener` with the `auto` builder,
/// answering "{version} {path} alpn={negotiated}"; the handshake's error,
/// if it failed.
async fn serve_one(listener: &TcpListener, acceptor: &TlsAcceptor) -> std::io::Result<()> {
    let (stream, _) = listener.accept().await?;
    let stream = match acceptor.accept(Compat::new(stream)).into_fallible().await {
        Ok(stream) => stream,
        Err((e, mut stream)) => {
            // tokio-rustls writes the alert without a flush: flushed here,
            // so the client reads the alert and not just the close.
            let _ = stream.shutdown().await;
            return Err(e);
        }
    };
    let alpn = name(stream.get_ref().1.alpn_protocol());
    let service = service_fn(move |req: Request<Incoming>| {
        let answer = format!("{:?} {} alpn={alpn}", req.version(), req.uri().path());
        async move { Ok::<_, Infallible>(Response::new(answer)) }
    });
    auto::Builder::new(PoolExecutor::new())
        .serve_connection(TokioIo::new(stream), service)
        .await
        .map_err(std::io::Error::other)
}

/// A TLS client connection to `addr`, and the ALPN name it negotiated.
async fn tls_connect(
    addr: std::net::SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<(TokioIo<tokio_rustls::client::TlsStream<Compat<TcpStream>>>, String)> {
    let stream = Compat::new(TcpStream::connect(addr).await?);
    let stream = TlsConnector::from(config).connect(tls::server_name(), stream).await?;
    let alpn = name(stream.get_ref().1.alpn_protocol());
    Ok((TokioIo::new(stream), alpn))
}

/// Both sides offer `h2` and `http/1.1`: ALPN settles on `h2`, on both
/// sides, and hyper's HTTP/2 client is answered over HTTP/2. A client
/// offering only `http/1.1` gets HTTP/1.1 from the same server.
#[test]
fn tls_with_alpn_negotiates_h2_and_serves_http2() {
    let (server_config, h2_config) = tls::configs(&[H2, HTTP1], &[H2, HTTP1]);
    let mut h1_config = (*h2_config).clone();
    h1_config.alpn_protocols = vec![HTTP1.to_vec()];
    run(async move {
        let listener = listen();
        let addr = listener.local_addr().unwrap();
        let acceptor = TlsAcceptor::from(server_config);
        let server = task::spawn(async move {
            for _ in 0..2 {
                ended_by_client(serve_one(&listener, &acceptor).await);
            }
        });

        let (io, alpn) = tls_connect(addr, h2_config).await.unwrap();
        assert_eq!(alpn, "h2");
        let (mut sender, connection) = h2_client(io).await;
        for path in ["/a", "/b"] {
            assert_eq!(h2_get(&mut sender, "https", path).await.unwrap(), format!("HTTP/2.0 {path} alpn=h2"));
        }
        drop(sender);
        connection.await.unwrap().unwrap();

        let (io, alpn) = tls_connect(addr, Arc::new(h1_config)).await.unwrap();
        assert_eq!(alpn, "http/1.1");
        let (mut sender, connection) = h1_client(io).await;
        let response = h1_get(&mut sender, "/c").await.unwrap();
        assert_eq!(body(response).await.unwrap(), "HTTP/1.1 /c alpn=http/1.1");
        drop(sender);
        connection.await.unwrap().unwrap();
        server.await.unwrap();
    });
}

/// Handshakes that fail end their connection with an error, and the same
/// server task goes on to serve the next client: first bytes that are no
/// ClientHello, then a client offering only an ALPN name the server does
/// not have, then a good client.
#[test]
fn a_failed_tls_handshake_ends_its_connection_and_the_server_serves_the_next() {
    let (server_config, client_config) = tls::configs(&[H2, HTTP1], &[H2]);
    let mut stranger = (*client_config).clone();
    stranger.alpn_protocols = vec![b"spdy/3.1".to_vec()];
    run(async move {
        let listener = listen();
        let addr = listener.local_addr().unwrap();
        let acceptor = TlsAcceptor::from(server_config);
        let (told, mut outcomes) = tokio::sync::mpsc::unbounded_channel();
        let server = task::spawn(async move {
            for _ in 0..3 {
                told.send(serve_one(&listener, &acceptor).await).unwrap();
            }
        });

        let mut garbage = Compat::new(TcpStream::connect(addr).await.unwrap());
        garbage.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
        // The server's alert, if any, then its close (or a reset).
        let mut alert = Vec::new();
        let _ = garbage.read_to_end(&mut alert).await;
        let failed = outcomes.recv().await.unwrap().unwrap_err();
        assert!(matches!(rustls_error(&failed), rustls::Error::InvalidMessage(_)), "{failed:?}");

        let refused = tls_connect(addr, Arc::new(stranger)).await.unwrap_err();
        let alert = rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol);
        assert_eq!(rustls_error(&refused), &alert);
        let failed = outcomes.recv().await.unwrap().unwrap_err();
        assert_eq!(rustls_error(&failed), &rustls::Error::NoApplicationProtocol);

        let (io, alpn) = tls_connect(addr, client_config).await.unwrap();
        assert_eq!(alpn, "h2");
        let (mut sender, connection) = h2_client(io).await;
        assert_eq!(h2_get(&mut sender, "https", "/next").await.unwrap(), "HTTP/2.0 /next alpn=h2");
        drop(sender);
        connection.await.unwrap().unwrap();
        ended_by_client(outcomes.recv().await.unwrap());
        server.await.unwrap();
    });
}
