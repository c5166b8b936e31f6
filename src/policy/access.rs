//! Address rules: allow and deny lists per path prefix, by IPv4 or IPv6
//! address or CIDR block; the first rule that matches decides, and a request
//! no rule matches is allowed.

use std::net::IpAddr;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    Allow,
    Deny,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    prefix: String,
    verdict: Verdict,
    block: Block,
}

impl Rule {
    /// The path prefix the rule guards.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// An address block; `All` matches every client.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Block {
    All,
    V4(u32, u8),
    V6(u128, u8),
}

impl Block {
    fn parse(s: &str) -> Result<Block, String> {
        if s == "all" {
            return Ok(Block::All);
        }
        let (addr, bits) = match s.split_once('/') {
            Some((a, b)) => (
                a,
                Some(
                    b.parse::<u8>()
                        .map_err(|_| format!("bad prefix length in `{s}`"))?,
                ),
            ),
            None => (s, None),
        };
        match addr
            .parse::<IpAddr>()
            .map_err(|_| format!("`{s}` is not an address, a CIDR block or `all`"))?
        {
            IpAddr::V4(a) => {
                let bits = bits.unwrap_or(32);
                if bits > 32 {
                    return Err(format!("`{s}`: an IPv4 prefix is at most 32 bits"));
                }
                Ok(Block::V4(u32::from(a) & mask32(bits), bits))
            }
            IpAddr::V6(a) => {
                let bits = bits.unwrap_or(128);
                if bits > 128 {
                    return Err(format!("`{s}`: an IPv6 prefix is at most 128 bits"));
                }
                Ok(Block::V6(u128::from(a) & mask128(bits), bits))
            }
        }
    }

    fn contains(self, ip: IpAddr) -> bool {
        // A client on an IPv6 socket may be IPv4-mapped (::ffff:192.168.1.2).
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self, ip) {
            (Block::All, _) => true,
            (Block::V4(net, bits), IpAddr::V4(a)) => u32::from(a) & mask32(bits) == net,
            (Block::V6(net, bits), IpAddr::V6(a)) => u128::from(a) & mask128(bits) == net,
            _ => false,
        }
    }
}

fn mask32(bits: u8) -> u32 {
    if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    }
}

fn mask128(bits: u8) -> u128 {
    if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits)
    }
}

/// Parses `allow PREFIX BLOCK` / `deny PREFIX BLOCK` values.
pub fn parse_rule(verdict: Verdict, value: &str) -> Result<Rule, String> {
    let mut parts = value.split_whitespace();
    let (Some(prefix), Some(block), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(
            "expected PREFIX ADDRESS[/BITS] or PREFIX all, e.g. `/cgi-bin/ 192.168.0.0/16`".into(),
        );
    };
    if !prefix.starts_with('/') {
        return Err(format!("`{prefix}` must be a path prefix starting with /"));
    }
    Ok(Rule {
        prefix: prefix.to_string(),
        verdict,
        block: Block::parse(block)?,
    })
}

/// The verdict for a client asking for `path` (with its leading `/`).
pub fn check(rules: &[Rule], path: &str, client: IpAddr) -> Verdict {
    rules
        .iter()
        .find(|r| under(path, &r.prefix) && r.block.contains(client))
        .map_or(Verdict::Allow, |r| r.verdict)
}

/// Whether `path` is under `prefix` (`/admin` covers `/admin` and `/admin/x`, not `/administrator`).
pub fn under(path: &str, prefix: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/'),
        None => prefix.strip_suffix('/').is_some_and(|p| path == p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(lines: &[(&str, &str)]) -> Vec<Rule> {
        lines
            .iter()
            .map(|(v, r)| {
                parse_rule(
                    if *v == "allow" {
                        Verdict::Allow
                    } else {
                        Verdict::Deny
                    },
                    r,
                )
                .unwrap()
            })
            .collect()
    }

    #[test]
    fn first_match_wins_default_allow() {
        let r = rules(&[
            ("allow", "/admin/ 192.168.0.0/16"),
            ("allow", "/admin/ fd00::/8"),
            ("deny", "/admin/ all"),
        ]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(check(&r, "/admin/x", ip("192.168.1.20")), Verdict::Allow);
        assert_eq!(
            check(&r, "/admin/x", ip("::ffff:192.168.1.20")),
            Verdict::Allow
        );
        assert_eq!(check(&r, "/admin/x", ip("fd12::1")), Verdict::Allow);
        assert_eq!(check(&r, "/admin/x", ip("8.8.8.8")), Verdict::Deny);
        assert_eq!(check(&r, "/admin", ip("8.8.8.8")), Verdict::Deny);
        assert_eq!(check(&r, "/admin/x", ip("2001:db8::1")), Verdict::Deny);
        assert_eq!(check(&r, "/index.html", ip("8.8.8.8")), Verdict::Allow);
        assert_eq!(check(&r, "/administrator", ip("8.8.8.8")), Verdict::Allow);
    }

    #[test]
    fn blocks() {
        assert!(
            Block::parse("10.0.0.0/8")
                .unwrap()
                .contains("10.200.1.1".parse().unwrap())
        );
        assert!(
            !Block::parse("10.0.0.0/8")
                .unwrap()
                .contains("11.0.0.1".parse().unwrap())
        );
        assert!(
            Block::parse("127.0.0.1")
                .unwrap()
                .contains("127.0.0.1".parse().unwrap())
        );
        assert!(
            Block::parse("::1")
                .unwrap()
                .contains("::1".parse().unwrap())
        );
        assert!(
            !Block::parse("::1")
                .unwrap()
                .contains("127.0.0.1".parse().unwrap())
        );
        assert!(
            Block::parse("0.0.0.0/0")
                .unwrap()
                .contains("1.2.3.4".parse().unwrap())
        );
        assert!(Block::parse("10.0.0.0/33").is_err());
        assert!(Block::parse("nonsense").is_err());
        assert!(parse_rule(Verdict::Deny, "admin all").is_err());
    }
}
