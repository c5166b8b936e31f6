//! The ubus endpoint's settings and which requests it takes.

use std::path::PathBuf;
use std::time::Duration;

use crate::values::{parse_bool, parse_path, parse_secs};

/// ubusd's socket on OpenWrt.
pub const DEFAULT_SOCKET: &str = "/var/run/ubus/ubus.sock";

#[derive(Debug)]
pub struct Settings {
    /// `ubus PREFIX [SOCKET]`: where the endpoint is, if anywhere.
    pub prefix: Option<String>,
    pub socket: PathBuf,
    /// `ubus-timeout`: how long a call may take (-32003 beyond).
    pub timeout: Duration,
    /// `ubus-cors`: answer preflights and add the CORS headers.
    pub cors: bool,
    /// `ubus-auth`: ask rpcd's `session.access` before each call.
    pub auth: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            prefix: None,
            socket: PathBuf::from(DEFAULT_SOCKET),
            // uhttpd's `script_timeout` default.
            timeout: Duration::from_secs(60),
            cors: false,
            auth: true,
        }
    }
}

impl Settings {
    /// Applies a `ubus*` setting; `Ok(false)` if `key` is not one.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "ubus" if !cfg!(feature = "ubus") => {
                return Err("this build has no ubus endpoint (the `ubus` feature)".into());
            }
            "ubus" => {
                let mut words = value.split_ascii_whitespace();
                let prefix = words.next().unwrap_or_default();
                if !prefix.starts_with('/') || prefix == "/" {
                    return Err(format!(
                        "expected a path prefix such as /ubus, then optionally ubusd's socket; got `{value}`"
                    ));
                }
                if let Some(socket) = words.next() {
                    self.socket = parse_path(socket)?;
                }
                if let Some(extra) = words.next() {
                    return Err(format!("unexpected `{extra}` after the socket"));
                }
                self.prefix = Some(prefix.trim_end_matches('/').to_string());
            }
            "ubus-timeout" => self.timeout = parse_secs(value, 1)?,
            "ubus-cors" => self.cors = parse_bool(value)?,
            "ubus-auth" => self.auth = parse_bool(value)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// What follows the prefix in `path` (empty, or from a `/`), when the
    /// path is the endpoint's: `PREFIX` and `PREFIX/...`, not `PREFIXx`.
    pub fn rest<'p>(&self, path: &'p str) -> Option<&'p str> {
        let rest = path.strip_prefix(self.prefix.as_deref()?)?;
        (rest.is_empty() || rest.starts_with('/')).then_some(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_matches_whole_segments_only() {
        let s = Settings {
            prefix: Some("/ubus".into()),
            ..Settings::default()
        };
        assert_eq!(s.rest("/ubus"), Some(""));
        assert_eq!(s.rest("/ubus/call/x"), Some("/call/x"));
        assert_eq!(s.rest("/ubusx"), None);
        assert_eq!(s.rest("/"), None);
        assert_eq!(Settings::default().rest("/ubus"), None);
    }
}
