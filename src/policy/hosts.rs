//! Protection against DNS rebinding: a page on another site can point its
//! own name at the device's address, and the browser then sends that name
//! as `Host`. Only the device's own names, IP literals and `localhost` are
//! answered; any other name gets 421 Misdirected Request (RFC 9110 section
//! 15.5.20: this server is not the one that name is for), so the page can
//! read nothing of the admin UI. The device's names are those listed, the
//! names its self-signed certificate is made for (`tls-names`), and the
//! kernel's host name: the name the device gives itself, which a page
//! elsewhere does not own.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::sys;

/// The `allowed-hosts` setting: the names the device answers to.
#[derive(Debug, Clone, PartialEq)]
pub struct AllowedHosts(Vec<String>);

impl AllowedHosts {
    /// `NAME...`, space-separated.
    pub fn parse(value: &str) -> Result<AllowedHosts, String> {
        let names: Vec<String> = value
            .split_whitespace()
            .map(|n| n.trim_end_matches('.').to_ascii_lowercase())
            .collect();
        match names.iter().find(|n| !is_host_name(n)) {
            _ if names.is_empty() => Err("expected host names, e.g. `router.lan`, or `off`".into()),
            Some(bad) => Err(format!("`{bad}` is not a host name")),
            None => Ok(AllowedHosts(names)),
        }
    }

    /// Also allows those of `names` that are host names (addresses pass
    /// anyway; a wildcard is not one name).
    pub fn add(&mut self, names: &[String]) {
        for n in names {
            let n = n.trim_end_matches('.').to_ascii_lowercase();
            let address = n.parse::<std::net::IpAddr>().is_ok();
            if !address && is_host_name(&n) && !self.0.contains(&n) {
                self.0.push(n);
            }
        }
    }

    /// Whether a request naming `host` (a `Host` value or a target's
    /// authority, with or without a port) is for this device.
    pub fn allows(&self, host: &[u8]) -> bool {
        let Ok(host) = std::str::from_utf8(host) else {
            return false;
        };
        let name = match host.strip_prefix('[') {
            // `[v6]` or `[v6]:port`.
            Some(rest) => {
                return rest.split_once(']').is_some_and(|(ip, port)| {
                    ip.parse::<Ipv6Addr>().is_ok()
                        && (port.is_empty() || port.strip_prefix(':').is_some_and(is_port))
                });
            }
            None => match host.rsplit_once(':') {
                Some((name, port)) if is_port(port) => name,
                _ => host,
            },
        };
        // Compared as it is, case ignored: no copy per request.
        let name = name.trim_end_matches('.');
        let b = name.as_bytes();
        let local = b".localhost";
        name.parse::<Ipv4Addr>().is_ok()
            || name.eq_ignore_ascii_case("localhost")
            || (b.len() > local.len() && b[b.len() - local.len()..].eq_ignore_ascii_case(local))
            || self.0.iter().any(|n| n.eq_ignore_ascii_case(name))
            || is_the_kernels(name)
    }
}

/// Whether `name` is the host name now (looked up only for a name not
/// otherwise allowed: one call that requests by the listed names skip).
fn is_the_kernels(name: &str) -> bool {
    !name.is_empty()
        && sys::host_name().is_some_and(|h| h.trim_end_matches('.').eq_ignore_ascii_case(name))
}

fn is_host_name(n: &str) -> bool {
    !n.is_empty()
        && n.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

fn is_port(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_names_addresses_and_localhost_pass() {
        let hosts = AllowedHosts::parse("Router.LAN router.").unwrap();
        for ok in [
            "router.lan",
            "ROUTER.lan:8080",
            "router.lan.",
            "router",
            "192.168.1.1",
            "192.168.1.1:80",
            "[fe80::1]",
            "[::1]:8443",
            "localhost:8080",
            "app.localhost",
            "App.LocalHost:80",
        ] {
            assert!(hosts.allows(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "evil.example",
            "router.lan.evil.example",
            "evil.example:80",
            "[::1",
            "[nothing]",
            "192.168.1.1.evil.example",
            "router.lan:x",
            "",
        ] {
            assert!(!hosts.allows(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn the_kernels_host_name_and_added_names_pass() {
        let mut hosts = AllowedHosts::parse("router.lan").unwrap();
        if let Some(own) = sys::host_name().filter(|h| is_host_name(h)) {
            assert!(hosts.allows(own.to_ascii_uppercase().as_bytes()), "{own}");
            assert!(!hosts.allows(format!("{own}.evil.example").as_bytes()));
        }
        assert!(!hosts.allows(b"device.lan"));
        let extra = ["Device.LAN".into(), "192.0.2.7".into(), "*.lan".into()];
        hosts.add(&extra);
        assert!(hosts.allows(b"device.lan:443"));
        assert!(!hosts.allows(b"other.lan"), "no wildcard");
        assert_eq!(hosts.0, ["router.lan", "device.lan"]);
    }

    #[test]
    fn only_host_names_are_taken() {
        assert!(AllowedHosts::parse("a.lan b").is_ok());
        assert!(AllowedHosts::parse("").is_err());
        assert!(AllowedHosts::parse("a..b").is_err());
        assert!(AllowedHosts::parse("a_b.lan").is_err());
    }
}
