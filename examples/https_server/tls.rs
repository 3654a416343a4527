//! The TLS side of `examples/https_server`, shared with its tokio twin:
//! the certificate (PEM files, or a self-signed one made at start) and
//! rustls' server configuration with its ALPN protocols.
#![allow(dead_code)]

use std::io::{self, Error, ErrorKind};
use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// What the server offers in ALPN, preferred first: a client that offers
/// neither is refused the handshake (`no_application_protocol`); one that
/// offers no ALPN at all is served, its protocol found from its first bytes.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// A certificate chain and its key.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// A self-signed certificate for `localhost` and `127.0.0.1` (an ECDSA
/// P-256 key, rcgen's default), made now: clients must skip verification
/// (`curl -k`) or trust it by hand.
pub fn self_signed() -> io::Result<Identity> {
    let made = rcgen::generate_simple_self_signed(["localhost".to_string(), "127.0.0.1".to_string()])
        .map_err(|e| Error::other(format!("making a self-signed certificate: {e}")))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_pair.serialize_der()));
    Ok(Identity { chain: vec![made.cert.der().clone()], key })
}

/// The chain in the PEM file `cert` and the key in the PEM file `key`.
pub fn from_pem(cert: &Path, key: &Path) -> io::Result<Identity> {
    let bad = |what: &Path, e: rustls::pki_types::pem::Error| {
        Error::new(ErrorKind::InvalidInput, format!("{}: {e}", what.display()))
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| bad(cert, e))?;
    if chain.is_empty() {
        return Err(Error::new(ErrorKind::InvalidInput, format!("{}: no certificate", cert.display())));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, e))?;
    Ok(Identity { chain, key })
}

/// rustls' server configuration: the ring provider, TLS 1.2 and 1.3, no
/// client certificates, [`ALPN`].
pub fn config(identity: Identity) -> io::Result<Arc<ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(identity.chain, identity.key))
        .map_err(|e| Error::new(ErrorKind::InvalidInput, format!("TLS configuration: {e}")))?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}
