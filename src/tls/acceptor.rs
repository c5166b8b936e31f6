//! What a worker's TLS connections share: the rustls server settings
//! (TLS 1.2 and 1.3, ALPN `http/1.1`, a bounded session cache, the
//! server's ticket keys) and the certificate and key, which a reload
//! replaces for the handshakes that follow while open connections go on.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rustls::server::{ClientHello, ResolvesServerCert, ServerConfig, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;

use crate::limits::{TLS_SESSIONS, TLS_TICKETS};
use crate::tls::{keys, provider, tickets};

pub struct Acceptor {
    pub config: Arc<ServerConfig>,
    current: Arc<Current>,
}

/// The pair new handshakes get.
#[derive(Debug)]
struct Current(Mutex<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.lock().ok().map(|pair| pair.clone())
    }
}

impl Acceptor {
    /// `to_kernel`: the session keys may be handed to the kernel after the
    /// handshake (rustls keeps them for that only when asked).
    pub fn new(
        pair: Arc<CertifiedKey>,
        tickets: Arc<tickets::Keys>,
        to_kernel: bool,
    ) -> Result<Acceptor, String> {
        let current = Arc::new(Current(Mutex::new(pair)));
        let provider = Arc::new(provider::provider(to_kernel));
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|_| "TLS: no protocol version left to offer".to_string())?
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        // The server's order, whatever the client prefers (OpenSSL puts
        // AES-256 first): AES-128, which the kernel's TLS takes and which
        // costs less than AES-256 without AES instructions, or, where
        // those are missing and the records stay in user space,
        // ChaCha20-Poly1305 (`provider`).
        config.ignore_client_order = true;
        config.session_storage = ServerSessionMemoryCache::new(TLS_SESSIONS);
        config.ticketer = tickets;
        config.send_tls13_tickets = TLS_TICKETS;
        config.enable_secret_extraction = to_kernel;
        Ok(Acceptor {
            config: Arc::new(config),
            current,
        })
    }

    /// Reads the pair again (SIGHUP, after a renewal): handshakes from now
    /// on use it. A pair that does not load is logged and the one in use kept.
    pub fn reload(&self, cert: &Path, key: &Path) {
        match keys::load(cert, key) {
            Ok(pair) => {
                if let Ok(mut current) = self.current.0.lock() {
                    *current = pair;
                    log::info!("TLS: certificate {} loaded", cert.display());
                }
            }
            Err((_, e)) => log::error!("TLS: {e}; keeping the certificate in use"),
        }
    }
}
