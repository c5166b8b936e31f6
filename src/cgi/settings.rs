//! The CGI settings: where scripts live, their interpreters and limits.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::limits::DEFAULT_BODY_RATE;
use crate::values::{parse_count, parse_range};

#[derive(Debug)]
pub struct Settings {
    pub prefixes: Vec<String>,
    /// Extension (with its dot) to interpreter.
    pub interpreters: Vec<(String, PathBuf)>,
    /// How long a script may run once it has its whole request body
    /// (504 and killed after), and take none of it while it streams.
    pub timeout: Duration,
    /// Scripts running at once, for the whole server.
    pub max: usize,
    /// Largest request body a script is given (413 beyond).
    pub max_body: u64,
    /// Least average pace of a request body, bytes per second of waiting
    /// on the client, after the head timeout's worth of grace (408
    /// beyond); `None`: no minimum.
    pub body_rate: Option<u64>,
    prefixes_set: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            prefixes: vec!["/cgi-bin/".into()],
            interpreters: vec![(".sh".into(), PathBuf::from("/bin/sh"))],
            timeout: Duration::from_secs(30),
            max: 8,
            max_body: 1 << 20,
            body_rate: Some(DEFAULT_BODY_RATE),
            prefixes_set: false,
        }
    }
}

impl Settings {
    /// Takes a setting this module owns; `Ok(false)` if the key is not one of them.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "cgi-prefix" => {
                if !self.prefixes_set {
                    self.prefixes.clear();
                    self.prefixes_set = true;
                }
                if value != "off" {
                    if !value.starts_with('/') || crate::http::path::has_dot_dot(value) {
                        return Err(format!(
                            "`{value}` must be a path prefix like /cgi-bin/, or `off`"
                        ));
                    }
                    self.prefixes.push(value.to_string());
                }
            }
            "cgi-interpreter" => {
                let mut parts = value.split_whitespace();
                let (Some(ext), Some(prog), None) = (parts.next(), parts.next(), parts.next())
                else {
                    return Err(
                        "expected .EXT /path/to/interpreter, e.g. `.lua /usr/bin/lua`".into(),
                    );
                };
                if !ext.starts_with('.') || !prog.starts_with('/') {
                    return Err(
                        "expected .EXT /path/to/interpreter, e.g. `.lua /usr/bin/lua`".into(),
                    );
                }
                self.interpreters.retain(|(e, _)| e != ext);
                self.interpreters
                    .push((ext.to_string(), PathBuf::from(prog)));
            }
            "cgi-timeout" => self.timeout = Duration::from_secs(parse_range(value, 1, 3600)?),
            "cgi-max" => self.max = parse_count(value, 1, 1024)?,
            "cgi-max-body" => self.max_body = parse_range(value, 0, 1 << 30)?,
            "cgi-body-rate" => {
                self.body_rate = match value {
                    "off" => None,
                    v => Some(parse_range(v, 1, 1 << 30)?),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    pub fn interpreter(&self, name: &str) -> Option<&Path> {
        self.interpreters
            .iter()
            .find(|(ext, _)| name.ends_with(ext.as_str()))
            .map(|(_, p)| p.as_path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_rate_is_a_count_or_off() {
        let mut s = Settings::default();
        assert_eq!(s.body_rate, Some(DEFAULT_BODY_RATE));
        assert!(s.apply("cgi-body-rate", "512").unwrap());
        assert_eq!(s.body_rate, Some(512));
        assert!(s.apply("cgi-body-rate", "off").unwrap());
        assert_eq!(s.body_rate, None);
        assert!(s.apply("cgi-body-rate", "0").is_err());
        assert!(s.apply("cgi-body-rate", "fast").is_err());
    }
}
