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
    /// TLS listeners, loads the pair, unless it is to be made at start.
    #[cfg(feature = "tls")]
    pub fn finish(&mut self) -> Result<(), ConfigError> {
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
                None => Ok(()),
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
            let absent = |f: &FileSetting| matches!(std::fs::metadata(&f.path), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
            match (absent(cert), absent(key)) {
                (true, true) => return Ok(()),
                (true, false) | (false, true) => {
                    let (missing, name) = if absent(cert) {
                        (cert, "tls-cert")
                    } else {
                        (key, "tls-key")
                    };
                    return Err(error(
                        &missing.origin,
                        name,
                        format!(
                            "{} is missing but its partner exists; `tls-self-signed` makes a new pair only when both are absent",
                            missing.path.display()
                        ),
                    ));
                }
                (false, false) => {}
            }
        }
        let pair =
            crate::tls::keys::load(&cert.path, &key.path).map_err(
                |(file, problem)| match file {
                    crate::tls::keys::File::Cert => error(&cert.origin, "tls-cert", problem),
                    crate::tls::keys::File::Key => error(&key.origin, "tls-key", problem),
                },
            )?;
        self.pair = Some(pair);
        Ok(())
    }

    /// Without TLS no setting is accepted: nothing to check.
    #[cfg(not(feature = "tls"))]
    pub fn finish(&mut self) -> Result<(), ConfigError> {
        Ok(())
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
