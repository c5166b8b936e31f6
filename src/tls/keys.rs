//! Reading a certificate chain and its private key from PEM (or DER) files into
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
    let Some(in_cert) = chain.first().and_then(|c| public_key_of(c)) else {
        return Err((
            File::Cert,
            format!("{}: not a valid X.509 certificate", cert.display()),
        ));
    };
    // What rustls's `keys_match` does, without parsing the whole
    // certificate through webpki (kilobytes of flash for one comparison).
    if signer.public_key().as_ref().map(|k| k.as_ref()) != Some(in_cert) {
        return Err((
            File::Key,
            format!(
                "{} is not the key of the certificate in {}",
                key.display(),
                cert.display()
            ),
        ));
    }
    Ok(Arc::new(CertifiedKey::new(chain, signer)))
}

/// Whether `cert` holds a chain whose first certificate reads as one.
pub fn has_certificate(cert: &Path) -> bool {
    read_chain(cert).is_ok_and(|chain| chain.first().and_then(|c| public_key_of(c)).is_some())
}

/// The SubjectPublicKeyInfo (tag and all) of a DER certificate: the
/// seventh field of its tbsCertificate, after the optional `[0]` version,
/// the serial number, the signature algorithm, issuer, validity, subject.
fn public_key_of(cert: &[u8]) -> Option<&[u8]> {
    let (certificate, _) = element(cert, 0x30)?;
    let (mut tbs, _) = element(certificate, 0x30)?;
    if tbs.first() == Some(&0xa0) {
        tbs = element(tbs, 0xa0)?.1;
    }
    for _ in 0..5 {
        tbs = element(tbs, *tbs.first()?)?.1;
    }
    let (_, rest) = element(tbs, 0x30)?;
    Some(&tbs[..tbs.len() - rest.len()])
}

/// The content of the DER element at the start of `der` if its tag is
/// `tag`, and what follows it.
fn element(der: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&t, rest) = der.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    if t != tag {
        return None;
    }
    let len = match first {
        n if n < 0x80 => usize::from(n),
        0x81..=0x84 => {
            let (bytes, after) = rest.split_at_checked(usize::from(first & 0x7f))?;
            rest = after;
            bytes.iter().fold(0usize, |n, &b| n << 8 | usize::from(b))
        }
        _ => return None,
    };
    rest.split_at_checked(len)
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

/// A DER file (uhttpd's own certificate and key, as its init script has
/// px5g make them) rather than PEM: binary, starting with a SEQUENCE.
fn is_der(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0x30) && !contains(bytes, b"-----BEGIN")
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = read(path, "certificate")?;
    if is_der(&text) {
        return Ok(vec![CertificateDer::from(text)]);
    }
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

pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let text = read(path, "private key")?;
    // PKCS#8 encrypted, or OpenSSL's older encrypted PEM: no passphrase
    // can be typed at boot.
    if contains(&text, b"ENCRYPTED") {
        return Err(format!(
            "{} is encrypted; give the key without a passphrase (`openssl pkey -in KEY -out PLAIN`)",
            path.display()
        ));
    }
    if is_der(&text) {
        return PrivateKeyDer::try_from(text.as_slice())
            .map(|k| k.clone_key())
            .map_err(|_| {
                format!(
                    "{}: not a PKCS#8, SEC1 or PKCS#1 key in DER",
                    path.display()
                )
            });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_key_is_found_in_a_certificate_and_nothing_in_noise() {
        // SEQUENCE { SEQUENCE { [0] {INTEGER 2}, serial, alg, issuer,
        // validity, subject, SPKI }, ... }
        let spki = [0x30, 0x03, 0x02, 0x01, 0x07];
        let mut tbs = vec![0xa0, 0x03, 0x02, 0x01, 0x02];
        for _ in 0..5 {
            tbs.extend_from_slice(&[0x30, 0x00]);
        }
        tbs.extend_from_slice(&spki);
        let mut cert = vec![0x30, tbs.len() as u8 + 2, 0x30, tbs.len() as u8];
        cert.extend_from_slice(&tbs);
        assert_eq!(public_key_of(&cert), Some(&spki[..]));
        assert_eq!(public_key_of(&cert[..cert.len() - 1]), None);
        assert_eq!(public_key_of(b"\x30\x85garbage"), None);
        assert_eq!(public_key_of(b""), None);
    }
}
