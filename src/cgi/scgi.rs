//! SCGI: a handler process that is already running answers requests under
//! its prefix, so nothing is forked or compiled per request. The request
//! goes out as a netstring of the CGI meta-variables (`CONTENT_LENGTH`
//! first, `SCGI` `1`), then the body; the answer is CGI output and is
//! parsed and streamed as a script's is.

use std::os::fd::OwnedFd;
use std::time::Instant;

use crate::net::deadline::Deadlines;
use crate::net::local::{self, Connected, Unparsed};
pub use crate::net::local::{Address, Unreached};

/// `scgi PREFIX ADDRESS`.
#[derive(Debug)]
pub struct Handler {
    /// Without a trailing slash: it is the handler's `SCRIPT_NAME`.
    pub prefix: String,
    pub address: Address,
}

#[derive(Debug, Default)]
pub struct Settings {
    /// First match wins.
    pub handlers: Vec<Handler>,
}

impl Settings {
    /// Takes a setting this module owns; `Ok(false)` if the key is not one of them.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, String> {
        if key != "scgi" {
            return Ok(false);
        }
        let mut parts = value.split_whitespace();
        let (Some(prefix), Some(address), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(
                "expected PREFIX ADDRESS, e.g. `/cgi-bin/luci unix:/var/run/luci.sock`".into(),
            );
        };
        let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        if !prefix.starts_with('/')
            || crate::http::path::has_dot_dot(prefix)
            || prefix.contains("//")
        {
            return Err(format!(
                "`{prefix}` must be a path below the root like /cgi-bin/luci"
            ));
        }
        self.handlers.push(Handler {
            prefix: prefix.to_string(),
            address: parse_address(address)?,
        });
        Ok(true)
    }

    /// The handler for a path the client sees, and what follows its
    /// prefix (empty, or from a `/`).
    pub fn handler_for<'p>(&self, shown: &'p str) -> Option<(&Handler, &'p str)> {
        self.handlers.iter().find_map(|h| {
            if !crate::policy::access::under(shown, &h.prefix) {
                return None;
            }
            Some((h, shown.get(h.prefix.len()..)?))
        })
    }
}

/// `unix:/path` or `IP:PORT` (`localhost:PORT` too): no name is looked up.
fn parse_address(v: &str) -> Result<Address, String> {
    local::parse(v).map_err(|e| match e {
        Unparsed::Unix(why) => why,
        Unparsed::Form => format!("`{v}`: expected unix:/path, or IP:PORT or localhost:PORT"),
    })
}

/// Connects to the handler; its socket, as a plain descriptor that the
/// exchange reads and writes as a script's pipes.
pub async fn connect(
    address: &Address,
    deadlines: &Deadlines,
    until: Instant,
) -> Result<OwnedFd, Unreached> {
    let fd = match address.connect(deadlines, until).await? {
        Connected::Tcp(s) => s.into_inner().map(OwnedFd::from),
        Connected::Unix(s) => s.into_inner().map(OwnedFd::from),
    };
    fd.map_err(Unreached::Refused)
}

/// The request head for the handler: a netstring of NUL-separated names
/// and values, `CONTENT_LENGTH` first (0 without a body) and `SCGI` `1`
/// next, as the SCGI specification asks. `None` if a value holds a NUL,
/// which would split it.
pub fn request_head(env: &[(String, String)]) -> Option<Vec<u8>> {
    let length = env
        .iter()
        .find(|(k, _)| k == "CONTENT_LENGTH")
        .map_or("0", |(_, v)| v.as_str());
    let rest = env.iter().filter(|(k, _)| k != "CONTENT_LENGTH");
    let pairs = [("CONTENT_LENGTH", length), ("SCGI", "1")]
        .into_iter()
        .chain(rest.map(|(k, v)| (k.as_str(), v.as_str())));
    let mut vars = Vec::with_capacity(1024);
    for (k, v) in pairs {
        if k.contains('\0') || v.contains('\0') {
            return None;
        }
        vars.extend_from_slice(k.as_bytes());
        vars.push(0);
        vars.extend_from_slice(v.as_bytes());
        vars.push(0);
    }
    let mut head = format!("{}:", vars.len()).into_bytes();
    head.extend_from_slice(&vars);
    head.push(b',');
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_a_netstring_with_the_length_first() {
        let env = vec![
            ("REQUEST_METHOD".to_string(), "POST".to_string()),
            ("CONTENT_LENGTH".to_string(), "5".to_string()),
        ];
        let head = request_head(&env).unwrap();
        assert_eq!(
            head,
            b"44:CONTENT_LENGTH\x005\x00SCGI\x001\x00REQUEST_METHOD\x00POST\x00,".to_vec()
        );
        let head = request_head(&[]).unwrap();
        assert_eq!(head, b"24:CONTENT_LENGTH\x000\x00SCGI\x001\x00,".to_vec());
        let nul = vec![("X".to_string(), "a\0b".to_string())];
        assert!(request_head(&nul).is_none());
    }

    #[test]
    fn prefixes_and_addresses() {
        let mut s = Settings::default();
        assert!(
            s.apply("scgi", "/cgi-bin/luci unix:/run/luci.sock")
                .unwrap()
        );
        assert!(s.apply("scgi", "/app/ 127.0.0.1:4000").unwrap());
        assert!(s.apply("scgi", "/b [::1]:4000").unwrap());
        assert!(s.apply("scgi", "/c localhost:4001").unwrap());
        assert!(!s.apply("cgi-max", "3").unwrap());
        assert_eq!(s.handlers[1].prefix, "/app");
        assert_eq!(s.handlers[3].address.to_string(), "127.0.0.1:4001");
        for bad in [
            "/x",
            "/x unix:relative.sock",
            "/x example.com:80",
            "/x 127.0.0.1",
            "x unix:/s",
            "/ unix:/s",
            "/a/../b unix:/s",
            "/x unix:/s extra",
        ] {
            assert!(s.apply("scgi", bad).is_err(), "{bad}");
        }
        let (h, rest) = s.handler_for("/cgi-bin/luci/admin/status").unwrap();
        assert_eq!(
            (h.prefix.as_str(), rest),
            ("/cgi-bin/luci", "/admin/status")
        );
        assert_eq!(s.handler_for("/cgi-bin/luci").unwrap().1, "");
        assert_eq!(s.handler_for("/app/").unwrap().1, "/");
        assert!(s.handler_for("/cgi-bin/luciX").is_none());
        assert!(s.handler_for("/elsewhere").is_none());
    }
}
