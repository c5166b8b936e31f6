//! The pair a device makes at its first start, as routers do: an ECDSA
//! P-256 key and a self-signed X.509 v3 certificate for the host name,
//! `localhost` and the `tls-names` entries. Both files are written whole
//! under temporary names with mode 0600 and synced before either is
//! renamed into place, the key first: a full filesystem leaves neither,
//! and a power cut between the renames leaves the key alone, for which
//! the next start makes a certificate (`certify`). Later starts find the
//! pair and reuse it.

use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use rustls::pki_types::PrivateKeyDer;

use crate::tls::der::{self, OCTET_STRING, SEQUENCE, SET, UTF8_STRING};

/// 9999-12-31T23:59:59Z: "no well-defined expiration date" (RFC 5280
/// 4.1.2.5). The certificate is trusted by hand, not by an authority's
/// rules, and a device must not stop being reachable on a date.
const NOT_AFTER: u64 = 253_402_300_799;

/// Makes the key and certificate and writes them to `key` and `cert`.
/// The certificate is given to `owner` (uid, gid) when one is named; the
/// key stays with whoever runs this (root, at start), so that scripts
/// running as the server's user cannot read it.
pub fn make(
    cert: &Path,
    key: &Path,
    extra_names: &[String],
    owner: Option<(u32, u32)>,
) -> Result<Vec<String>, String> {
    let rng = SystemRandom::new();
    let no_random = |_| "no random numbers from the kernel".to_string();
    let pkcs8 =
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).map_err(no_random)?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|_| "the key just made does not load".to_string())?;
    let names = subject_names(extra_names);
    let der = certificate(&pair, &rng, &names, now())?;
    if crate::tls::damage::may_hold_key(cert) {
        return Err(format!(
            "{} may hold a private key; it is not replaced by a certificate",
            cert.display()
        ));
    }
    let key_tmp = Staged::write(key, &pem("PRIVATE KEY", pkcs8.as_ref()), None)?;
    let cert_tmp = Staged::write(cert, &pem("CERTIFICATE", &der), owner)?;
    set_aside(key)?;
    key_tmp.rename()?;
    cert_tmp.rename()?;
    Ok(names)
}

/// Where `set_aside` would keep what is in `path`: `PATH.damaged`, or
/// `PATH.damaged.N` beside earlier ones.
pub fn aside_name(path: &Path) -> PathBuf {
    (1..)
        .map(|n| {
            let mut name = path.as_os_str().to_owned();
            name.push(if n == 1 {
                ".damaged".to_string()
            } else {
                format!(".damaged.{n}")
            });
            PathBuf::from(name)
        })
        .find(|p| matches!(std::fs::symlink_metadata(p), Err(e) if e.kind() == std::io::ErrorKind::NotFound))
        .unwrap_or_else(|| path.to_path_buf())
}

/// Keeps a key file that is not empty under `aside_name` before a new key
/// takes its place: what flash damage cut may be all that is left of a key.
/// Linked, then unlinked: an existing file of that name is never replaced.
fn set_aside(key: &Path) -> Result<(), String> {
    match std::fs::read(key) {
        Ok(bytes) if !bytes.iter().all(u8::is_ascii_whitespace) => {}
        _ => return Ok(()),
    }
    loop {
        let aside = aside_name(key);
        match std::fs::hard_link(key, &aside) {
            Ok(()) => {
                std::fs::remove_file(key).map_err(|e| failed(key, e))?;
                log::warn!(
                    "TLS: {} held no usable key; kept as {}",
                    key.display(),
                    aside.display()
                );
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(failed(&aside, e)),
        }
    }
}

/// Makes a certificate for the key already in `key` (one whose
/// certificate was never written) and writes it to `cert`.
pub fn certify(
    cert: &Path,
    key: &Path,
    extra_names: &[String],
    owner: Option<(u32, u32)>,
) -> Result<Vec<String>, String> {
    let rng = SystemRandom::new();
    let pair = read_key(key)?;
    let names = subject_names(extra_names);
    let der = certificate(&pair, &rng, &names, now())?;
    Staged::write(cert, &pem("CERTIFICATE", &der), owner)?.rename()?;
    Ok(names)
}

/// The key in `path` if it is one `make` could have written: PKCS#8,
/// ECDSA P-256. Only such a key gets a certificate made for it.
pub fn read_key(path: &Path) -> Result<EcdsaKeyPair, String> {
    let not_ours = || {
        format!(
            "{}: not a PKCS#8 ECDSA P-256 key, as `tls-self-signed` makes; give its certificate too",
            path.display()
        )
    };
    let PrivateKeyDer::Pkcs8(der) = crate::tls::keys::read_key(path)? else {
        return Err(not_ours());
    };
    EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_ASN1_SIGNING,
        der.secret_pkcs8_der(),
        &SystemRandom::new(),
    )
    .map_err(|_| not_ours())
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The host name (when it is a DNS name), `localhost`, then `extra`,
/// each once.
fn subject_names(extra: &[String]) -> Vec<String> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_ascii_lowercase())
        .ok()
        .filter(|h| is_dns_name(h));
    let mut names: Vec<String> = Vec::new();
    for n in host
        .into_iter()
        .chain(["localhost".to_string()])
        .chain(extra.iter().cloned())
    {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

fn is_dns_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// The DER certificate: subject and issuer `CN=<first name>`, valid from a
/// day before `now`, for digital signatures by a TLS server, the names as
/// DNS names or IP addresses.
fn certificate(
    pair: &EcdsaKeyPair,
    rng: &SystemRandom,
    names: &[String],
    now: u64,
) -> Result<Vec<u8>, String> {
    let ecdsa_sha256 = der::nest(SEQUENCE, &[&der::oid(&[1, 2, 840, 10045, 4, 3, 2])]);
    let mut serial = [0u8; 16];
    rng.fill(&mut serial)
        .map_err(|_| "no random numbers from the kernel".to_string())?;
    // Positive and 16 bytes long (RFC 5280 4.1.2.2).
    serial[0] = (serial[0] & 0x7f) | 0x40;
    let common_name = names.first().map_or("localhost", String::as_str);
    let cn = der::nest(
        SEQUENCE,
        &[
            &der::oid(&[2, 5, 4, 3]),
            &der::tlv(UTF8_STRING, common_name.as_bytes()),
        ],
    );
    let name = der::nest(SEQUENCE, &[&der::nest(SET, &[&cn])]);
    let validity = der::nest(
        SEQUENCE,
        &[
            &der::time(now.saturating_sub(86_400)),
            &der::time(NOT_AFTER),
        ],
    );
    let algorithm = der::nest(
        SEQUENCE,
        &[
            &der::oid(&[1, 2, 840, 10045, 2, 1]),
            &der::oid(&[1, 2, 840, 10045, 3, 1, 7]),
        ],
    );
    let public_key = der::nest(
        SEQUENCE,
        &[&algorithm, &der::bits(pair.public_key().as_ref())],
    );
    let alt_names: Vec<u8> = names
        .iter()
        .flat_map(|n| match n.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) => der::implicit(7, &a.octets()),
            Ok(IpAddr::V6(a)) => der::implicit(7, &a.octets()),
            Err(_) => der::implicit(2, n.as_bytes()),
        })
        .collect();
    let extension = |arcs: &[u32], critical: bool, value: Vec<u8>| {
        let flag: &[u8] = if critical { &[0x01, 0x01, 0xff] } else { &[] };
        der::nest(
            SEQUENCE,
            &[&der::oid(arcs), flag, &der::tlv(OCTET_STRING, &value)],
        )
    };
    let extensions = der::explicit(
        3,
        &der::nest(
            SEQUENCE,
            &[
                // basicConstraints: not a CA.
                &extension(&[2, 5, 29, 19], true, der::tlv(SEQUENCE, &[])),
                // keyUsage: digitalSignature.
                &extension(&[2, 5, 29, 15], true, der::tlv(der::BIT_STRING, &[7, 0x80])),
                // extKeyUsage: serverAuth.
                &extension(
                    &[2, 5, 29, 37],
                    false,
                    der::nest(SEQUENCE, &[&der::oid(&[1, 3, 6, 1, 5, 5, 7, 3, 1])]),
                ),
                // subjectAltName.
                &extension(&[2, 5, 29, 17], false, der::tlv(SEQUENCE, &alt_names)),
            ],
        ),
    );
    let tbs = der::nest(
        SEQUENCE,
        &[
            &der::explicit(0, &der::tlv(der::INTEGER, &[2])),
            &der::unsigned(&serial),
            &ecdsa_sha256,
            &name,
            &validity,
            &name,
            &public_key,
            &extensions,
        ],
    );
    let signature = pair
        .sign(rng, &tbs)
        .map_err(|_| "cannot sign the certificate".to_string())?;
    Ok(der::nest(
        SEQUENCE,
        &[&tbs, &ecdsa_sha256, &der::bits(signature.as_ref())],
    ))
}

/// `der` as PEM with the given label, 64 base64 characters a line.
fn pem(label: &str, der: &[u8]) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = Vec::new();
    for group in der.chunks(3) {
        let b = [
            group[0],
            *group.get(1).unwrap_or(&0),
            *group.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            text.push(if i <= group.len() {
                ALPHABET[(n >> (18 - 6 * i) & 63) as usize]
            } else {
                b'='
            });
        }
    }
    let mut out = format!("-----BEGIN {label}-----\n").into_bytes();
    for line in text.chunks(64) {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.extend_from_slice(format!("-----END {label}-----\n").as_bytes());
    out
}

/// A file written whole and synced under a temporary name beside its
/// place, removed if dropped before `rename`.
struct Staged<'a> {
    tmp: PathBuf,
    path: &'a Path,
}

impl<'a> Staged<'a> {
    /// Writes `bytes` to a new temporary file (mode 0600) beside `path`.
    fn write(path: &'a Path, bytes: &[u8], owner: Option<(u32, u32)>) -> Result<Self, String> {
        if let Some(dir) = parent(path) {
            std::fs::create_dir_all(dir).map_err(|e| failed(path, e))?;
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".new{}", std::process::id()));
        let mut f = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| failed(path, e))?;
        // From here on, dropping it removes the temporary file.
        let staged = Staged {
            tmp: tmp.into(),
            path,
        };
        (|| {
            f.write_all(bytes)?;
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::fchown(&f, Some(uid), Some(gid))?;
            }
            f.sync_all()
        })()
        .map_err(|e| failed(path, e))?;
        Ok(staged)
    }

    /// Renames the file into place and syncs the directory, so that the
    /// rename is on disk before anything written after it.
    fn rename(mut self) -> Result<(), String> {
        std::fs::rename(&self.tmp, self.path).map_err(|e| failed(self.path, e))?;
        // Renamed: nothing left to remove.
        self.tmp = PathBuf::new();
        let dir = parent(self.path).unwrap_or(Path::new("."));
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| failed(self.path, e))
    }
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn parent(path: &Path) -> Option<&Path> {
    path.parent().filter(|d| !d.as_os_str().is_empty())
}

fn failed(path: &Path, e: std::io::Error) -> String {
    format!("cannot write {}: {e}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_is_base64_in_lines_of_64() {
        let text = String::from_utf8(pem("X", &[0xff; 49])).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "-----BEGIN X-----");
        assert_eq!(lines[1].len(), 64);
        assert!(lines[2].ends_with("=="), "{}", lines[2]);
        assert_eq!(lines[3], "-----END X-----");
        assert_eq!(
            String::from_utf8(pem("Y", b"Man")).unwrap().lines().nth(1),
            Some("TWFu")
        );
        assert_eq!(
            String::from_utf8(pem("Y", b"Ma")).unwrap().lines().nth(1),
            Some("TWE=")
        );
    }

    #[test]
    fn names_are_kept_once_with_localhost() {
        let names = subject_names(&["localhost".into(), "192.168.1.1".into()]);
        assert_eq!(names.iter().filter(|n| *n == "localhost").count(), 1);
        assert_eq!(names.last().map(String::as_str), Some("192.168.1.1"));
    }
}
