//! What a test needs to talk HTTPS (`tls` builds): a certificate made by
//! openssl, a rustls client that checks the server against it, and the
//! TLS listener's port from the log.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use super::{Server, TempDir, start_deadline, wait_until};

/// A certificate and its key, in PEM files.
pub struct Pair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub fn openssl(args: &[&str]) -> std::process::Output {
    let out = Command::new("openssl")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("openssl is installed");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// An ECDSA P-256 pair made by openssl for `localhost`, 127.0.0.1 and ::1.
pub fn make_pair(dir: &TempDir, name: &str) -> Pair {
    let cert = dir.path().join(format!("{name}.crt"));
    let key = dir.path().join(format!("{name}.key"));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        "30",
        "-subj",
        &format!("/CN={name}"),
        "-addext",
        "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1",
        // An end-entity certificate, as a server's is (rustls refuses a CA).
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        cert.to_str().unwrap(),
    ]);
    Pair { cert, key }
}

/// A rustls client trusting only the certificates in `ca`, offering
/// `http/1.1`.
pub fn client_config(ca: &Path) -> Arc<rustls::ClientConfig> {
    client_config_for(ca, rustls::DEFAULT_VERSIONS)
}

/// `client_config`, offering only `versions`.
pub fn client_config_for(
    ca: &Path,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

pub type Stream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A TLS connection to 127.0.0.1:`port`, the server checked as `localhost`.
pub fn connect(port: u16, config: Arc<rustls::ClientConfig>) -> Stream {
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    over(tcp, config)
}

/// TLS over a connected `tcp`, the server checked as `localhost`.
pub fn over(tcp: TcpStream, config: Arc<rustls::ClientConfig>) -> Stream {
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    rustls::StreamOwned::new(conn, tcp)
}

/// The port of the first TLS listener on `host` (`127.0.0.1`, `[::1]`),
/// from the log line `listening on ADDR (TLS)`.
pub fn tls_port_on(s: &Server, host: &str) -> u16 {
    let prefix = format!("listening on {host}:");
    let find = || {
        s.log_text().lines().find_map(|l| {
            let addr = l.split(&prefix).nth(1)?.strip_suffix(" (TLS)")?;
            addr.parse().ok()
        })
    };
    let found = wait_until(start_deadline(), || find().is_some());
    assert!(found, "no TLS listener on {host}; log:\n{}", s.log_text());
    find().unwrap()
}
