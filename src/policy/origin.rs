//! The cross-origin guard. A page on another site can make a browser send a
//! form or a fetch to the device with the credentials the browser holds for
//! it (Basic auth is sent again unasked), and `allowed-hosts` cannot tell,
//! since the page may name the device by its address. Browsers say where
//! such a request comes from (`Origin`, `Sec-Fetch-Site`): one with an
//! unsafe method, or a WebSocket handshake, from another origin is refused, unless a `cross-origin
//! PREFIX allow` rule opens its path.

use crate::http::request::{Field, Request};
use crate::policy::access::under;
use crate::policy::prefix;

/// What a `cross-origin` rule does to the paths it covers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stance {
    /// Cross-origin requests of every method are passed on.
    Allow,
    /// Cross-origin requests with an unsafe method get 403 (the default).
    Refuse,
}

#[derive(Debug, Clone, PartialEq)]
struct Rule {
    prefix: String,
    stance: Stance,
}

/// The `cross-origin PREFIX allow|refuse` rules; first match wins, and a
/// path no rule covers is guarded.
#[derive(Debug, Default)]
pub struct Settings {
    rules: Vec<Rule>,
}

impl Settings {
    /// Takes a setting this module owns; `Ok(false)` if the key is not one of them.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, String> {
        if key != "cross-origin" {
            return Ok(false);
        }
        let usage = "expected PREFIX allow or PREFIX refuse, e.g. `/api/webhook allow`";
        let mut parts = value.split_whitespace();
        let (Some(prefix), Some(stance), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(usage.into());
        };
        if !prefix.starts_with('/') {
            return Err(format!("`{prefix}` must be a path prefix starting with /"));
        }
        let stance = match stance {
            "allow" => Stance::Allow,
            "refuse" => Stance::Refuse,
            _ => return Err(usage.into()),
        };
        self.rules.push(Rule {
            prefix: prefix.to_string(),
            stance,
        });
        Ok(true)
    }

    /// Whether `req`, for `path` (decoded, normalised), came on a TLS
    /// listener or not (`tls`), is a cross-origin request to refuse.
    pub fn refuses(&self, req: &Request<'_>, path: &str, tls: bool) -> bool {
        (!is_safe(req.method_token) || upgrades(req)) && self.guards(path) && cross_origin(req, tls)
    }

    fn guards(&self, path: &str) -> bool {
        // An allow covers only what it names: a loose match would open
        // paths a refuse rule after it, or the default, is there to guard.
        let rule = self.rules.iter().find(|r| match r.stance {
            Stance::Allow => under(path, &r.prefix),
            Stance::Refuse => prefix::covers(path, &r.prefix),
        });
        rule.is_none_or(|r| r.stance == Stance::Refuse)
    }
}

/// The methods a browser sends across origins without asking, and that
/// change nothing by their definition (RFC 9110 section 9.2.1); an
/// `OPTIONS` preflight is one of them, and CORS is the backend's to answer.
fn is_safe(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS")
}

/// A WebSocket handshake is a GET, but it opens a channel both ways with
/// the credentials the browser holds for the device, and browsers always
/// send its `Origin`.
fn upgrades(req: &Request<'_>) -> bool {
    req.headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("upgrade"))
}

/// Whether a browser said the request comes from elsewhere: an `Origin`
/// other than the request's own scheme, host and port (`null`, the origin
/// of a sandboxed frame or a `data:` page, included), or `Sec-Fetch-Site:
/// cross-site`. A request with neither (curl, scripts) is not a browser's.
fn cross_origin(req: &Request<'_>, tls: bool) -> bool {
    let own = req.authority.or_else(|| req.get(Field::Host));
    req.headers.iter().any(|h| {
        let value = h.value.trim_ascii();
        if h.name.eq_ignore_ascii_case("origin") {
            own.is_none_or(|host| !same_origin(value, host, tls))
        } else {
            h.name.eq_ignore_ascii_case("sec-fetch-site")
                && value.eq_ignore_ascii_case(b"cross-site")
        }
    })
}

/// Whether `origin` (`scheme://host[:port]`) is the request's own: its
/// scheme, and the host and port of `host` (the `Host` field), with a
/// missing port taken as the scheme's default.
fn same_origin(origin: &[u8], host: &[u8], tls: bool) -> bool {
    let (scheme, default_port): (&[u8], u16) = if tls { (b"https", 443) } else { (b"http", 80) };
    let Some((given, rest)) = origin.split_at_checked(scheme.len()) else {
        return false;
    };
    let Some(rest) = rest
        .strip_prefix(b"://")
        .filter(|_| given.eq_ignore_ascii_case(scheme))
    else {
        return false;
    };
    match (
        host_port(rest, default_port),
        host_port(host.trim_ascii(), default_port),
    ) {
        (Some((a, p)), Some((b, q))) => p == q && a.eq_ignore_ascii_case(b),
        _ => false,
    }
}

/// `host[:port]` or `[v6]:port` split into the host and its port; `None`
/// for anything else (a path, userinfo, an empty host, a bad port).
fn host_port(s: &[u8], default_port: u16) -> Option<(&[u8], u16)> {
    let port_from = match s.first() {
        Some(b'[') => s.iter().position(|&b| b == b']')? + 1,
        _ => s.iter().position(|&b| b == b':').unwrap_or(s.len()),
    };
    let (host, port) = s.split_at(port_from);
    let port = match port {
        [] => default_port,
        [b':', digits @ ..] if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) => {
            std::str::from_utf8(digits).ok()?.parse().ok()?
        }
        _ => return None,
    };
    let plain = |b: &u8| b.is_ascii_alphanumeric() || b"-._~[]:!$&'()*+,;=%".contains(b);
    (!host.is_empty() && host.iter().all(plain)).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_by_scheme_host_and_port() {
        assert!(same_origin(b"http://192.168.1.1", b"192.168.1.1", false));
        assert!(same_origin(b"http://192.168.1.1", b"192.168.1.1:80", false));
        assert!(same_origin(
            b"http://Router.lan:8080",
            b"router.LAN:8080",
            false
        ));
        assert!(same_origin(b"https://[::1]:8443", b"[::1]:8443", true));
        assert!(same_origin(b"https://d", b"d:443", true));
        assert!(same_origin(b"HTTP://d", b"d", false));
        for (origin, host, tls) in [
            (&b"http://evil.example"[..], &b"192.168.1.1"[..], false),
            (b"null", b"192.168.1.1", false),
            (b"https://192.168.1.1", b"192.168.1.1", false),
            (b"http://192.168.1.1", b"192.168.1.1", true),
            (b"http://192.168.1.1:81", b"192.168.1.1", false),
            (b"http://192.168.1.1/", b"192.168.1.1", false),
            (b"http://a@192.168.1.1", b"192.168.1.1", false),
            (b"http://", b"", false),
            (b"http://[::1]:x", b"[::1]:x", false),
            (
                b"http://192.168.1.1 http://192.168.1.1",
                b"192.168.1.1",
                false,
            ),
        ] {
            assert!(
                !same_origin(origin, host, tls),
                "{:?}",
                std::str::from_utf8(origin)
            );
        }
    }

    #[test]
    fn an_allow_rule_opens_only_what_it_names() {
        let mut s = Settings::default();
        s.apply("cross-origin", "/api/admin/ refuse").unwrap();
        s.apply("cross-origin", "/api/ allow").unwrap();
        s.apply("cross-origin", "/hook allow").unwrap();
        assert!(!s.guards("/api/x"));
        assert!(!s.guards("/hook"));
        assert!(!s.guards("/hook/x"));
        for guarded in [
            "/api/admin",
            "/api/Admin;x",
            "/API/x",
            "/hooks",
            "/Hook",
            "/hook.json",
            "/x",
        ] {
            assert!(s.guards(guarded), "{guarded}");
        }
        assert!(s.apply("cross-origin", "/x maybe").is_err());
        assert!(s.apply("cross-origin", "x allow").is_err());
        assert!(s.apply("cross-origin", "/x").is_err());
        assert_eq!(s.apply("proxy", "/x y"), Ok(false));
    }
}
