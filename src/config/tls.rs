//! The HTTPS settings: where the certificate and key are, whether to make
//! them, the names they are made for, and whether plain HTTP redirects.
//! A binary built without the `tls` feature refuses every one of them.

use std::path::PathBuf;

use crate::config::{ConfigError, Origin};
use crate::values::{parse_bool, parse_path};

/// What a build without TLS says to a TLS setting.
pub const NOT_BUILT: &str =
    "this binary was built without TLS (cargo feature `tls`); use a TLS build of marmoset";

/// A file setting with the line it was set on, for errors found later.
#[derive(Debug, Clone)]
pub struct FileSetting {
    pub path: PathBuf,
    pub origin: Origin,
}

#[derive(Debug, Default)]
pub struct Settings {
    pub cert: Option<FileSetting>,
    pub key: Option<FileSetting>,
    /// Where `tls-self-signed on` was set.
    pub self_signed: Option<Origin>,
    /// Extra names and addresses for a certificate the server makes.
    pub names: Vec<String>,
    /// Where `redirect-https on` was set: plain listeners then answer 308
    /// to the same URL over HTTPS.
    pub redirect_https: Option<Origin>,
    /// Where the first `listen ... tls` was set.
    pub listener: Option<Origin>,
    /// The pair loaded while the configuration was read; `None` when there
    /// is no TLS listener or the pair is still to be made.
    #[cfg(feature = "tls")]
    pub pair: Option<std::sync::Arc<rustls::sign::CertifiedKey>>,
    /// What `tls-self-signed` is to make at start, from the files found
    /// when the configuration was read.
    pub to_make: Option<ToMake>,
}

/// What `tls-self-signed` makes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ToMake {
    /// Neither file exists: a key and its certificate.
    Pair,
    /// The key exists alone (a first start cut short between writing the
    /// two): a certificate for it.
    Certificate,
}

/// Whether `key` is one of these settings.
pub fn is_key(key: &str) -> bool {
    key.starts_with("tls-") || key == "redirect-https"
}

impl Settings {
    pub fn apply(&mut self, key: &str, value: &str, origin: &Origin) -> Result<(), String> {
        if !cfg!(feature = "tls") {
            return Err(NOT_BUILT.into());
        }
        let file = |v: &str| {
            Ok::<_, String>(FileSetting {
                path: parse_path(v)?,
                origin: origin.clone(),
            })
        };
        match key {
            "tls-cert" => self.cert = Some(file(value)?),
            "tls-key" => self.key = Some(file(value)?),
            "tls-self-signed" => {
                self.self_signed = parse_bool(value)?.then(|| origin.clone());
            }
            "tls-names" => {
                let names: Vec<String> = value.split_whitespace().map(str::to_string).collect();
                if let Some(bad) = names.iter().find(|n| !is_name(n)) {
                    return Err(format!("`{bad}` is not a host name or IP address"));
                }
                self.names = names;
            }
            "redirect-https" => self.redirect_https = parse_bool(value)?.then(|| origin.clone()),
            _ => return Err("unknown setting".into()),
        }
        Ok(())
    }

    /// Whether any listener speaks TLS.
    pub fn enabled(&self) -> bool {
        self.listener.is_some()
    }

    /// Checks the settings together once every source is applied and, for
    /// TLS listeners, loads the pair, unless it is to be made at start;
    /// what is accepted with a caveat is returned as a warning. At a
    /// reload, `running` are the settings in use: a key only root may read
    /// (read at start, before privileges were dropped) keeps their pair.
    #[cfg(feature = "tls")]
    pub fn finish(
        &mut self,
        running: Option<&Settings>,
    ) -> Result<Option<ConfigError>, ConfigError> {
        let error = |origin: &Origin, key: &str, problem: String| ConfigError {
            origin: origin.clone(),
            key: key.into(),
            problem,
        };
        let Some(listener) = &self.listener else {
            return match &self.redirect_https {
                Some(origin) => Err(error(
                    origin,
                    "redirect-https",
                    "needs a TLS listener (`listen ADDR:PORT tls`)".into(),
                )),
                None => Ok(None),
            };
        };
        let (Some(cert), Some(key)) = (&self.cert, &self.key) else {
            return Err(error(
                listener,
                "listen",
                "a TLS listener needs `tls-cert FILE` and `tls-key FILE`".into(),
            ));
        };
        if self.self_signed.is_some() {
            if let Some((what, warning)) = to_make(cert, key)? {
                self.to_make = Some(what);
                return Ok(warning);
            }
        }
        let pair = match crate::tls::keys::load(&cert.path, &key.path) {
            Ok(pair) => pair,
            Err((crate::tls::keys::File::Key, problem)) => {
                let Some(kept) = running.and_then(|r| r.pair_for(cert, key)) else {
                    return Err(error(&key.origin, "tls-key", problem));
                };
                self.pair = Some(kept);
                return Ok(Some(error(
                    &key.origin,
                    "tls-key",
                    format!(
                        "{} cannot be read by the user the server runs as; the pair read at start is kept (a new one takes a restart)",
                        key.path.display()
                    ),
                )));
            }
            Err((crate::tls::keys::File::Cert, problem)) => {
                return Err(error(&cert.origin, "tls-cert", problem));
            }
        };
        self.pair = Some(pair);
        Ok(None)
    }

    /// The running pair, when it was read from these same files and the
    /// key is one this process may not open now (privileges were dropped).
    #[cfg(feature = "tls")]
    fn pair_for(
        &self,
        cert: &FileSetting,
        key: &FileSetting,
    ) -> Option<std::sync::Arc<rustls::sign::CertifiedKey>> {
        let same =
            |a: &Option<FileSetting>, b: &FileSetting| a.as_ref().map(|a| &a.path) == Some(&b.path);
        let denied = matches!(std::fs::File::open(&key.path), Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied);
        (same(&self.cert, cert) && same(&self.key, key) && denied)
            .then(|| self.pair.clone())
            .flatten()
    }

    /// Without TLS no setting is accepted: nothing to check.
    #[cfg(not(feature = "tls"))]
    pub fn finish(&mut self, _: Option<&Settings>) -> Result<Option<ConfigError>, ConfigError> {
        Ok(None)
    }
}

/// A DNS name (letters, digits, `-`, `.`, `*` for a wildcard label) or an
/// IP address.
fn is_name(n: &str) -> bool {
    n.parse::<std::net::IpAddr>().is_ok()
        || (n.len() <= 253
            && n.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'*')
            }))
}

/// What `tls-self-signed` makes: a pair when there is no key, or a
/// certificate for a key found alone (a first start cut short between
/// writing the two). A file that flash damage emptied or cut counts as
/// missing, but a certificate file that may hold a key is never
/// replaced (a cut key is kept aside when the pair is made). None:
/// nothing to make, the pair is read as given. Some: what to make, with
/// a warning for the log.
#[cfg(feature = "tls")]
fn to_make(
    cert: &FileSetting,
    key: &FileSetting,
) -> Result<Option<(ToMake, Option<ConfigError>)>, ConfigError> {
    use crate::tls::damage::{self, State};
    let error = |f: &FileSetting, name: &str, problem: String| ConfigError {
        origin: f.origin.clone(),
        key: name.into(),
        problem,
    };
    let (c, k) = (damage::of_cert(&cert.path), damage::of_key(&key.path));
    let (cp, kp) = (cert.path.display(), key.path.display());
    // A certificate may be made again only when its file holds no key.
    let cert_free = c == State::Absent || !damage::may_hold_key(&cert.path);
    match (c, k) {
        (State::Absent, State::Absent) => Ok(Some((ToMake::Pair, None))),
        (State::Absent, State::Good) => {
            crate::tls::self_signed::read_key(&key.path).map_err(|e| error(key, "tls-key", e))?;
            Ok(Some((
                ToMake::Certificate,
                Some(error(
                    cert,
                    "tls-cert",
                    format!(
                        "{cp} is missing beside its key {kp} (a first start cut short while making them); a self-signed certificate is made for that key"
                    ),
                )),
            )))
        }
        (State::Good, State::Absent) => Err(error(
            key,
            "tls-key",
            format!(
                "{kp} is missing but its certificate {cp} exists, and no key can be made for a certificate; put the key back, or remove the certificate to have a new pair made"
            ),
        )),
        (c, State::Good) if c.is_damaged() && cert_free => {
            crate::tls::self_signed::read_key(&key.path).map_err(|e| error(key, "tls-key", e))?;
            Ok(Some((
                ToMake::Certificate,
                Some(error(
                    cert,
                    "tls-cert",
                    format!(
                        "{cp} {} (flash damage?); a self-signed certificate is made for its key {kp}",
                        c.describe()
                    ),
                )),
            )))
        }
        (c, k)
            if (k.is_damaged() || c.is_damaged())
                && matches!(k, State::Absent | State::Empty | State::Cut)
                && matches!(c, State::Absent | State::Empty | State::Cut | State::Good)
                && cert_free =>
        {
            let aside = if k == State::Cut {
                format!(
                    " ({kp} kept aside as {})",
                    crate::tls::self_signed::aside_name(&key.path).display()
                )
            } else {
                String::new()
            };
            Ok(Some((
                ToMake::Pair,
                Some(error(
                    if k.is_damaged() { key } else { cert },
                    if k.is_damaged() {
                        "tls-key"
                    } else {
                        "tls-cert"
                    },
                    format!(
                        "the key {kp} {} and the certificate {cp} {} (flash damage?); a new pair is made{aside}",
                        k.describe(),
                        c.describe()
                    ),
                )),
            )))
        }
        (c, _) if c.is_damaged() => Err(error(
            cert,
            "tls-cert",
            format!(
                "{cp} {} and may hold a private key, so it is not replaced; move it away to have a new certificate made",
                c.describe()
            ),
        )),
        _ => Ok(None),
    }
}
