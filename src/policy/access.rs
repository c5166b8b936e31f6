//! Address rules: allow and deny lists per path prefix, by IPv4 or IPv6
//! address or CIDR block; the first rule that matches decides, and a request
//! no rule matches is allowed. A deny rule's prefix covers generously, an
//! allow rule's only what it names (see `policy::prefix`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::policy::prefix;

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
    /// The block, and a warning when the address had bits set past the
    /// prefix length (`10.1.2.3/8`): likely a typo for a narrower block,
    /// so it is said, as nginx does, and the masked block applies.
    fn parse(s: &str) -> Result<(Block, Option<String>), String> {
        if s == "all" {
            return Ok((Block::All, None));
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
        let addr = addr
            .parse::<IpAddr>()
            .map_err(|_| format!("`{s}` is not an address, a CIDR block or `all`"))?;
        let block = match addr {
            IpAddr::V4(a) => {
                let bits = bits.unwrap_or(32);
                if bits > 32 {
                    return Err(format!("`{s}`: an IPv4 prefix is at most 32 bits"));
                }
                Block::V4(u32::from(a), bits)
            }
            IpAddr::V6(a) => {
                let bits = bits.unwrap_or(128);
                if bits > 128 {
                    return Err(format!("`{s}`: an IPv6 prefix is at most 128 bits"));
                }
                match a.to_ipv4_mapped() {
                    // Clients are matched as IPv4 once unmapped (see
                    // `contains`), so `::ffff:10.0.0.0/104` is 10.0.0.0/8.
                    Some(v4) if bits >= 96 => Block::V4(u32::from(v4), bits - 96),
                    _ => Block::V6(u128::from(a), bits),
                }
            }
        };
        let masked = block.masked();
        let warning = (masked != block)
            .then(|| format!("`{s}` has bits set beyond its prefix length: applied as {masked}"));
        Ok((masked, warning))
    }

    /// The block with the bits past its prefix length cleared.
    fn masked(self) -> Block {
        match self {
            Block::All => Block::All,
            Block::V4(net, bits) => Block::V4(net & mask32(bits), bits),
            Block::V6(net, bits) => Block::V6(net & mask128(bits), bits),
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

impl std::fmt::Display for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Block::All => write!(f, "all"),
            Block::V4(net, bits) => write!(f, "{}/{bits}", Ipv4Addr::from(net)),
            Block::V6(net, bits) => write!(f, "{}/{bits}", Ipv6Addr::from(net)),
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

/// Parses `allow PREFIX BLOCK` / `deny PREFIX BLOCK` values; with a
/// warning for the log when the block had host bits set.
pub fn parse_rule(verdict: Verdict, value: &str) -> Result<(Rule, Option<String>), String> {
    let mut parts = value.split_whitespace();
    let (Some(prefix), Some(block), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(
            "expected PREFIX ADDRESS[/BITS] or PREFIX all, e.g. `/cgi-bin/ 192.168.0.0/16`".into(),
        );
    };
    if !prefix.starts_with('/') {
        return Err(format!("`{prefix}` must be a path prefix starting with /"));
    }
    let (block, warning) = Block::parse(block)?;
    Ok((
        Rule {
            prefix: prefix.to_string(),
            verdict,
            block,
        },
        warning,
    ))
}

/// The verdict for a client asking for `path` (with its leading `/`).
pub fn check(rules: &[Rule], path: &str, client: IpAddr) -> Verdict {
    rules
        .iter()
        .find(|r| r.covers(path) && r.block.contains(client))
        .map_or(Verdict::Allow, |r| r.verdict)
}

impl Rule {
    /// Whether the rule's prefix covers `path`: an allow rule that matched
    /// more than it names (`/Admin`, `/admin.json`) would open paths a later
    /// deny rule is there to close.
    fn covers(&self, path: &str) -> bool {
        match self.verdict {
            Verdict::Allow => under(path, &self.prefix),
            Verdict::Deny => prefix::covers(path, &self.prefix),
        }
    }
}

/// Whether `path` is under `prefix` (`/admin` covers `/admin` and `/admin/x`,
/// not `/administrator`), both as decoded and as a backend that drops `;...`
/// routes it: an opening rule must not reach, through `/admin/;/x`, a
/// handler it does not name.
pub fn under(path: &str, prefix: &str) -> bool {
    under_spelled(path, prefix) && prefix::routed(path).is_none_or(|r| under_spelled(&r, prefix))
}

fn under_spelled(path: &str, prefix: &str) -> bool {
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
                .0
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
    fn deny_covers_tails_and_case_and_allow_only_what_it_names() {
        let r = rules(&[("allow", "/admin/ 10.0.0.0/8"), ("deny", "/admin/ all")]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for path in ["/admin/x", "/admin"] {
            assert_eq!(check(&r, path, ip("10.1.1.1")), Verdict::Allow, "{path}");
        }
        for path in ["/Admin/x", "/admin;x", "/admin.json"] {
            assert_eq!(check(&r, path, ip("10.1.1.1")), Verdict::Deny, "{path}");
            assert_eq!(check(&r, path, ip("8.8.8.8")), Verdict::Deny, "{path}");
        }
        let r = rules(&[("deny", "/api/admin all")]);
        for path in [
            "/api/admin;x",
            "/api/admin.json",
            "/api/Admin",
            "/api/admin ",
        ] {
            assert_eq!(check(&r, path, ip("8.8.8.8")), Verdict::Deny, "{path}");
        }
        assert_eq!(check(&r, "/api/status", ip("8.8.8.8")), Verdict::Allow);
    }

    #[test]
    fn blocks() {
        assert!(
            Block::parse("10.0.0.0/8")
                .unwrap()
                .0
                .contains("10.200.1.1".parse().unwrap())
        );
        assert!(
            !Block::parse("10.0.0.0/8")
                .unwrap()
                .0
                .contains("11.0.0.1".parse().unwrap())
        );
        assert!(
            Block::parse("127.0.0.1")
                .unwrap()
                .0
                .contains("127.0.0.1".parse().unwrap())
        );
        assert!(
            Block::parse("::1")
                .unwrap()
                .0
                .contains("::1".parse().unwrap())
        );
        assert!(
            !Block::parse("::1")
                .unwrap()
                .0
                .contains("127.0.0.1".parse().unwrap())
        );
        assert!(
            Block::parse("0.0.0.0/0")
                .unwrap()
                .0
                .contains("1.2.3.4".parse().unwrap())
        );
        assert!(Block::parse("10.0.0.0/33").is_err());
        assert!(Block::parse("nonsense").is_err());
        assert!(parse_rule(Verdict::Deny, "admin all").is_err());
    }

    #[test]
    fn an_ipv4_mapped_block_is_the_ipv4_block() {
        let (block, warning) = Block::parse("::ffff:10.0.0.0/104").unwrap();
        assert_eq!((block, warning), (Block::V4(0x0a00_0000, 8), None));
        assert!(block.contains("10.9.8.7".parse().unwrap()));
        assert!(block.contains("::ffff:10.9.8.7".parse().unwrap()));
        assert!(!block.contains("11.0.0.1".parse().unwrap()));
        let (block, _) = Block::parse("::ffff:192.168.1.2").unwrap();
        assert_eq!(block, Block::V4(0xc0a8_0102, 32));
        // Shorter than the mapped prefix: an IPv6 block, as written.
        let (block, _) = Block::parse("::/64").unwrap();
        assert_eq!(block, Block::V6(0, 64));
    }

    #[test]
    fn host_bits_are_masked_with_a_warning() {
        let (block, warning) = Block::parse("10.1.2.3/8").unwrap();
        assert_eq!(block, Block::V4(0x0a00_0000, 8));
        assert_eq!(
            warning.as_deref(),
            Some("`10.1.2.3/8` has bits set beyond its prefix length: applied as 10.0.0.0/8")
        );
        let (block, warning) = Block::parse("127.0.0.1/0").unwrap();
        assert_eq!(block, Block::V4(0, 0));
        assert!(warning.is_some_and(|w| w.ends_with("applied as 0.0.0.0/0")));
        let (block, warning) = Block::parse("fd00::1/8").unwrap();
        assert_eq!(block, Block::V6(0xfd << 120, 8));
        assert!(warning.is_some_and(|w| w.ends_with("applied as fd00::/8")));
        let (_, warning) = Block::parse("::ffff:10.1.0.0/104").unwrap();
        assert!(warning.is_some_and(|w| w.ends_with("applied as 10.0.0.0/8")));
        for exact in [
            "10.0.0.0/8",
            "127.0.0.1",
            "0.0.0.0/0",
            "::1",
            "fd00::/8",
            "all",
        ] {
            assert_eq!(Block::parse(exact).unwrap().1, None, "{exact}");
        }
    }
}
