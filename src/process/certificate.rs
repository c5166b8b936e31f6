//! The certificate and key `tls-self-signed` makes: at start, before
//! privileges are dropped (the certificate is then given to the user, the
//! key stays root's), and at a reload when both files were removed. A key
//! found alone (a first start cut short between writing the two) gets a
//! certificate made for it.

use crate::config::tls::ToMake;
use crate::config::{Config, ConfigError};

/// `tls-self-signed`: makes what the configuration found missing (before
/// privileges are dropped, giving the certificate to the user), then
/// loads the pair. A failure names the setting's line.
pub fn make_if_absent(config: &mut Config, owner: Option<(u32, u32)>) -> Result<(), String> {
    let tls = &mut config.tls;
    let (true, Some(to_make), Some(cert), Some(key), Some(origin)) = (
        tls.enabled(),
        tls.to_make,
        &tls.cert,
        &tls.key,
        &tls.self_signed,
    ) else {
        return Ok(());
    };
    let at = |problem: String| {
        ConfigError {
            origin: origin.clone(),
            key: "tls-self-signed".into(),
            problem,
        }
        .to_string()
    };
    let (cert, key) = (&cert.path, &key.path);
    match to_make {
        ToMake::Pair => {
            let names = crate::tls::self_signed::make(cert, key, &tls.names, owner).map_err(at)?;
            log::info!(
                "TLS: made a key ({}) and a self-signed certificate ({}) for {}",
                key.display(),
                cert.display(),
                names.join(" ")
            );
        }
        ToMake::Certificate => {
            let names =
                crate::tls::self_signed::certify(cert, key, &tls.names, owner).map_err(at)?;
            log::warn!(
                "TLS: made a self-signed certificate ({}, for {}) for the key found alone in {}",
                cert.display(),
                names.join(" "),
                key.display()
            );
        }
    }
    let pair = crate::tls::keys::load(cert, key).map_err(|(_, e)| at(e))?;
    tls.pair = Some(pair);
    tls.to_make = None;
    Ok(())
}
