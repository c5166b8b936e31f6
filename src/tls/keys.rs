//! Reading a certificate chain and its private key from PEM files into
//! the pair rustls signs handshakes with, with errors that say which file
//! is wrong and how.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use crate::tls::provider;

/// Which of the two files a problem is in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum File {
    Cert,
    Key,
}

/// Loads the chain from `cert` (end entity first) and the key from `key`
/// (PKCS#8, SEC1 or PKCS#1) and checks that they belong together.
pub fn load(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, (File, String)> {
    let chain = read_chain(cert).map_err(|e| (File::Cert, e))?;
    let der = read_key(key).map_err(|e| (File::Key, e))?;
    let signer = provider::load(&der).map_err(|_| {
        (
            File::Key,
            format!("{}: not an RSA or ECDSA (P-256, P-384) key", key.display()),
        )
    })?;
    let pair = CertifiedKey::new(chain, signer);
    match pair.keys_match() {
        Ok(()) => Ok(Arc::new(pair)),
        Err(rustls::Error::InconsistentKeys(_)) => Err((
            File::Key,
            format!(
                "{} is not the key of the certificate in {}",
                key.display(),
                cert.display()
            ),
        )),
        // rustls's errors are not formatted: their text costs kilobytes of
        // flash, and what went wrong is clear enough from here.
        Err(_) => Err((
            File::Cert,
            format!("{}: not a valid X.509 certificate", cert.display()),
        )),
    }
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(format!(
            "{} is empty; expected a PEM {what}",
            path.display()
        ));
    }
    Ok(bytes)
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = read(path, "certificate")?;
    let chain = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| {
            format!(
                "{}: a `CERTIFICATE` section is not valid PEM",
                path.display()
            )
        })?;
    if chain.is_empty() {
        return Err(format!(
            "{}: no `BEGIN CERTIFICATE` section",
            path.display()
        ));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let text = read(path, "private key")?;
    // PKCS#8 encrypted, or OpenSSL's older encrypted PEM: no passphrase
    // can be typed at boot.
    if contains(&text, b"ENCRYPTED") {
        return Err(format!(
            "{} is encrypted; give the key without a passphrase (`openssl pkey -in KEY -out PLAIN`)",
            path.display()
        ));
    }
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => format!(
            "{}: no `BEGIN PRIVATE KEY`, `BEGIN EC PRIVATE KEY` or `BEGIN RSA PRIVATE KEY` section",
            path.display()
        ),
        _ => format!("{}: the key's section is not valid PEM", path.display()),
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
