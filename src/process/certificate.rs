//! The certificate and key `tls-self-signed` makes: at start, before
//! privileges are dropped (the files are then given to the user), and at a
//! reload when both files were removed.

use crate::config::{Config, ConfigError};

/// `tls-self-signed`: makes the key and certificate when both files are
/// absent (before privileges are dropped, giving them to the user), then
/// loads them. A failure names the setting's line.
pub fn make_if_absent(config: &mut Config, owner: Option<(u32, u32)>) -> Result<(), String> {
    let tls = &mut config.tls;
    let (true, None, Some(cert), Some(key), Some(origin)) = (
        tls.enabled(),
        &tls.pair,
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
    let names =
        crate::tls::self_signed::make(&cert.path, &key.path, &tls.names, owner).map_err(at)?;
    log::info!(
        "TLS: made a key ({}) and a self-signed certificate ({}) for {}",
        key.path.display(),
        cert.path.display(),
        names.join(" ")
    );
    let pair = crate::tls::keys::load(&cert.path, &key.path).map_err(|(_, e)| at(e))?;
    tls.pair = Some(pair);
    Ok(())
}
