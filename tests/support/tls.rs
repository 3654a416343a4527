//! A TLS server and client that trust each other: rustls with its `ring`
//! provider, and a certificate for `localhost` that rcgen makes and signs
//! itself, which the client's configuration takes as its only root.
//! Include it with `#[path = "support/tls.rs"] mod tls;`.
#![allow(dead_code)]

use std::sync::Arc;

use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// The name the certificate is for.
pub const NAME: &str = "localhost";
/// The ALPN names of HTTP/2 and HTTP/1.1.
pub const H2: &[u8] = b"h2";
pub const HTTP1: &[u8] = b"http/1.1";

/// A server configuration offering `server_alpn` and a client's
/// offering `client_alpn`, over one fresh self-signed certificate.
pub fn configs(server_alpn: &[&[u8]], client_alpn: &[&[u8]]) -> (Arc<ServerConfig>, Arc<ClientConfig>) {
    let rcgen::CertifiedKey { cert, key_pair } = rcgen::generate_simple_self_signed(vec![NAME.to_owned()]).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_pair.serialize_der()));
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .unwrap();
    server.alpn_protocols = server_alpn.iter().map(|p| p.to_vec()).collect();
    let mut roots = RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let mut client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = client_alpn.iter().map(|p| p.to_vec()).collect();
    (Arc::new(server), Arc::new(client))
}

/// The server name the client asks for.
pub fn server_name() -> ServerName<'static> {
    ServerName::try_from(NAME).unwrap()
}
