//! `redirect-https`: where a request on a plain listener is sent, the
//! same URL over HTTPS. Nothing of the request goes into `Location`
//! unchecked: the host is kept only if it is a name or an address, the
//! path is percent-encoded again.

use std::net::{IpAddr, Ipv6Addr};

use crate::http::path;

/// ACME HTTP-01 challenges are still answered over plain HTTP: a
/// certificate authority fetches them there before any certificate exists.
pub fn is_acme_challenge(shown: &str) -> bool {
    shown.starts_with("/.well-known/acme-challenge/")
}

/// `https://` + the host the client named (without its port; the local
/// address when it named none or nothing usable) + `:port` unless 443 +
/// the decoded path `shown`, encoded again. The query is the caller's.
pub fn location(host: Option<&[u8]>, local: IpAddr, port: u16, shown: &str) -> String {
    let mut out = String::with_capacity(shown.len() + 40);
    out.push_str("https://");
    match host.and_then(name_of) {
        Some(name) => out.push_str(name),
        None => match local {
            IpAddr::V6(v6) => {
                out.push('[');
                out.push_str(&v6.to_string());
                out.push(']');
            }
            v4 => out.push_str(&v4.to_string()),
        },
    }
    if port != 443 {
        out.push(':');
        out.push_str(&port.to_string());
    }
    path::encode_into(&mut out, shown);
    out
}

/// The host part of a `Host` value (`name`, `name:port`, `[v6]:port`), if
/// it is a DNS name, an IPv4 address or a bracketed IPv6 address.
fn name_of(host: &[u8]) -> Option<&str> {
    let host = std::str::from_utf8(host).ok()?;
    if let Some(rest) = host.strip_prefix('[') {
        let (ip, _) = rest.split_once(']')?;
        ip.parse::<Ipv6Addr>().ok()?;
        return host.get(..ip.len() + 2);
    }
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    let usable = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    usable.then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 168, 1, 1));

    #[test]
    fn the_same_url_over_https_with_the_port_when_not_443() {
        let at = |host: &str, port| location(Some(host.as_bytes()), LOCAL, port, "/a b/c");
        assert_eq!(at("device.lan", 443), "https://device.lan/a%20b/c");
        assert_eq!(
            at("device.lan:8080", 8443),
            "https://device.lan:8443/a%20b/c"
        );
        assert_eq!(at("[fd00::1]:80", 443), "https://[fd00::1]/a%20b/c");
        assert_eq!(at("10.0.0.1", 443), "https://10.0.0.1/a%20b/c");
    }

    #[test]
    fn a_host_that_is_not_a_name_is_replaced_by_the_local_address() {
        for bad in [
            "evil.example/x",
            "a@b",
            "[::1",
            "[nope]:1",
            "",
            "\u{e9}.lan",
        ] {
            assert_eq!(
                location(Some(bad.as_bytes()), LOCAL, 443, "/"),
                "https://192.168.1.1/",
                "{bad}"
            );
        }
        let v6 = "fd00::2".parse().unwrap();
        assert_eq!(location(None, v6, 8443, "/x"), "https://[fd00::2]:8443/x");
    }

    #[test]
    fn acme_challenges_are_recognised() {
        assert!(is_acme_challenge("/.well-known/acme-challenge/token"));
        assert!(!is_acme_challenge("/.well-known/other"));
        assert!(!is_acme_challenge("/acme-challenge/x"));
    }
}
