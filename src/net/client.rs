//! Who a client is, for the limits that count per client (login failures,
//! shares of the backend connections), and the network it is counted in
//! with others.
//!
//! A peer on one of the server's own links (in the same /64 as one of its
//! IPv6 addresses, any link-local address, or in the subnet of one of its
//! IPv4 addresses) is one client per address: on a router's LAN every host
//! is in the same /64, so a /64 would make the whole LAN one client. Such
//! a host may take as many addresses as it likes, so the limits also count
//! its network as a whole (`Client::net`), with a larger budget. Off the
//! link, an IPv6 client is its /64 (what one site is given) counted in its
//! /48; an IPv4 client is its address, counted in its /24.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address block: the upper `len` bits of an IPv6 address, an IPv4
/// block written as its IPv4-mapped form (`::ffff:a.b.c.d`, `len` 96 and
/// more). Bytes, not a `u128`, so that a table entry is not padded to 16.
#[derive(Debug, Clone, Copy, Eq)]
pub struct Net {
    bits: [u8; 16],
    len: u8,
}

/// Compared as one number: the connection table compares clients on every
/// change of its counts, and a compare of bytes is a loop over them on
/// targets where the compiler does not widen it (MIPS).
impl PartialEq for Net {
    fn eq(&self, other: &Net) -> bool {
        u128::from_ne_bytes(self.bits) == u128::from_ne_bytes(other.bits) && self.len == other.len
    }
}

impl Net {
    fn new(addr: u128, len: u8) -> Net {
        let len = len.min(128);
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        Net {
            bits: (addr & mask).to_be_bytes(),
            len,
        }
    }

    fn contains(&self, addr: u128) -> bool {
        Net::new(addr, self.len) == *self
    }

    fn is_v4(&self) -> bool {
        self.len >= 96 && Ipv6Addr::from(self.bits).to_ipv4_mapped().is_some()
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = Ipv6Addr::from(self.bits);
        match (a.to_ipv4_mapped().filter(|_| self.is_v4()), self.len) {
            (Some(v4), 128) => write!(f, "{v4}"),
            (Some(v4), len) => write!(f, "{v4}/{}", len - 96),
            (None, 128) => write!(f, "{a}"),
            (None, len) => write!(f, "{a}/{len}"),
        }
    }
}

/// A client as per-client limits count it, and the network whose
/// aggregate budget it shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client {
    id: Net,
    net: Net,
}

impl Client {
    /// What its own budget is kept under: an address, or an IPv6 /64.
    pub fn id(&self) -> Net {
        self.id
    }

    /// The network counted as a whole above it.
    pub fn net(&self) -> Net {
        self.net
    }

    /// The device itself, at the address its programs connect from
    /// unless told otherwise (127.0.0.1, ::1): a tunnel, a local front end
    /// or a load test, each speaking for many users.
    pub fn is_this_host(&self) -> bool {
        self.id == THIS_HOST_V4 || self.id == THIS_HOST_V6
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.id.fmt(f)
    }
}

/// IPv6 networks a site is given (RFC 6177): an off-link IPv6 client's
/// own budget is kept per /64, its network's per /48.
const SITE_V6: u8 = 64;
const PROVIDER_V6: u8 = 48;
/// An off-link IPv4 client's network: its /24.
const NET_V4: u8 = 96 + 24;
/// fe80::/10: every link-local peer is on a link of the server's.
const LINK_LOCAL: Net = Net {
    bits: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    len: 10,
};

const THIS_HOST_V4: Net = Net {
    bits: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1],
    len: 128,
};
const THIS_HOST_V6: Net = Net {
    bits: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    len: 128,
};

/// The networks of the server's own links, read from its interfaces at
/// start and at each reload.
#[derive(Debug, Clone, Default)]
pub struct OnLink {
    nets: Vec<Net>,
}

impl OnLink {
    /// The server's interfaces' networks as they are now; none (every
    /// peer off-link) when they cannot be read.
    pub fn read() -> OnLink {
        let addrs = match crate::sys::interface_addresses() {
            Ok(a) => a,
            Err(e) => {
                log::warn!(
                    "cannot read the interfaces' addresses ({e}): every client is counted as off-link"
                );
                return OnLink::default();
            }
        };
        let mut nets = Vec::new();
        for (ip, prefix) in addrs {
            let net = match ip {
                // The /64 whatever the interface's prefix length: an
                // address given by DHCPv6 is a /128, its link a /64.
                IpAddr::V6(v6) => Net::new(u128::from(v6), SITE_V6),
                IpAddr::V4(v4) => Net::new(mapped(v4), 96 + prefix.unwrap_or(32).min(32)),
            };
            if !nets.contains(&net) {
                nets.push(net);
            }
        }
        OnLink { nets }
    }

    #[cfg(test)]
    fn of(nets: &[(&str, u8)]) -> OnLink {
        let nets = nets
            .iter()
            .map(|(a, len)| match a.parse::<IpAddr>().unwrap() {
                IpAddr::V4(v4) => Net::new(mapped(v4), 96 + len),
                IpAddr::V6(v6) => Net::new(u128::from(v6), *len),
            })
            .collect();
        OnLink { nets }
    }

    /// Who `ip` is.
    pub fn client(&self, ip: IpAddr) -> Client {
        // On an IPv6 socket an IPv4 client is ::ffff:a.b.c.d: the same client.
        let ip = match ip {
            IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match ip {
            IpAddr::V4(a) => {
                let a = mapped(a);
                let net = self.on_link(a, true).unwrap_or(Net::new(a, NET_V4));
                Client {
                    id: Net::new(a, 128),
                    net,
                }
            }
            IpAddr::V6(a) => {
                let a = u128::from(a);
                // Link-local, or ::1 (which is never off-link).
                if LINK_LOCAL.contains(a) || a == 1 {
                    return Client {
                        id: Net::new(a, 128),
                        net: Net::new(a, SITE_V6),
                    };
                }
                match self.on_link(a, false) {
                    Some(net) => Client {
                        id: Net::new(a, 128),
                        net,
                    },
                    None => Client {
                        id: Net::new(a, SITE_V6),
                        net: Net::new(a, PROVIDER_V6),
                    },
                }
            }
        }
    }

    /// The on-link network of `a`, among the IPv4 ones (`v4`) or the IPv6
    /// ones: an IPv4 address written IPv4-mapped lies inside `::/64`, the
    /// /64 of the loopback's `::1`, and must not be counted there.
    fn on_link(&self, a: u128, v4: bool) -> Option<Net> {
        self.nets
            .iter()
            .find(|n| n.is_v4() == v4 && n.contains(a))
            .copied()
    }
}

fn mapped(a: Ipv4Addr) -> u128 {
    u128::from(a.to_ipv6_mapped())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lan() -> OnLink {
        OnLink::of(&[("fd00:18:5::1", 64), ("192.168.1.1", 24)])
    }

    fn client(s: &str) -> Client {
        lan().client(s.parse::<IpAddr>().unwrap())
    }

    #[test]
    fn on_link_peers_are_one_client_per_address_counted_in_their_link() {
        let (guest, admin) = (client("fd00:18:5::2"), client("fd00:18:5::3"));
        assert_ne!(guest, admin);
        assert_eq!(guest.net(), admin.net());
        assert_eq!(guest.to_string(), "fd00:18:5::2");
        assert_eq!(guest.net().to_string(), "fd00:18:5::/64");
        let (a, b) = (client("fe80::1"), client("fe80::2"));
        assert_ne!(a, b, "link-local peers are always on-link");
        assert_eq!(a.net(), b.net());
        let (a, b) = (client("192.168.1.2"), client("192.168.1.3"));
        assert_ne!(a, b);
        assert_eq!(a.net().to_string(), "192.168.1.0/24");
        assert_eq!(a.net(), b.net());
    }

    #[test]
    fn ipv4_peers_are_never_counted_in_the_loopbacks_64() {
        // The loopback's ::1 listed before 127.0.0.1, as musl's getifaddrs
        // lists them: ::/64 holds every IPv4-mapped address.
        let links = OnLink::of(&[("::1", 64), ("127.0.0.1", 8)]);
        let c = links.client("127.0.0.3".parse().unwrap());
        assert_eq!(c.net().to_string(), "127.0.0.0/8");
        let c = links.client("::ffff:127.0.0.3".parse().unwrap());
        assert_eq!(c.net().to_string(), "127.0.0.0/8");
        let only_v6 = OnLink::of(&[("::1", 64)]);
        let c = only_v6.client("192.0.2.7".parse().unwrap());
        assert_eq!(c.net().to_string(), "192.0.2.0/24", "off-link");
    }

    #[test]
    fn off_link_ipv6_clients_are_their_64_counted_in_their_48() {
        assert_eq!(
            client("2001:db8:1:2::1"),
            client("2001:db8:1:2:ffff:ffff:ffff:ffff")
        );
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db8:1:3::1"));
        assert_eq!(
            client("2001:db8:1:2::1").net(),
            client("2001:db8:1:3::1").net()
        );
        assert_ne!(
            client("2001:db8:1:2::1").net(),
            client("2001:db8:2:2::1").net()
        );
        assert_eq!(
            client("2001:db8:1:2:3:4:5:6").to_string(),
            "2001:db8:1:2::/64"
        );
        assert_eq!(
            client("fd00:18:6::2"),
            client("fd00:18:6::3"),
            "another /64 of the same ULA prefix is off-link"
        );
    }

    #[test]
    fn ipv4_mapped_clients_are_their_ipv4_address() {
        assert_eq!(client("::ffff:192.168.1.2"), client("192.168.1.2"));
        assert_eq!(client("::ffff:192.168.1.2").to_string(), "192.168.1.2");
        assert_ne!(client("::ffff:192.168.1.2"), client("::ffff:192.168.1.3"));
        // IPv4 addresses are whole: neighbours are other clients.
        assert_ne!(client("10.0.0.2"), client("10.0.0.3"));
        assert_eq!(client("10.0.0.2").net().to_string(), "10.0.0.0/24");
    }

    #[test]
    fn only_the_hosts_own_loopback_addresses_are_this_host() {
        let links = OnLink::default();
        let at = |s: &str| links.client(s.parse().unwrap()).is_this_host();
        assert!(at("127.0.0.1") && at("::ffff:127.0.0.1") && at("::1"));
        assert!(!at("127.0.0.2") && !at("::2") && !at("192.168.1.1"));
        assert_eq!(links.client("::1".parse().unwrap()).to_string(), "::1");
    }

    #[test]
    fn the_interfaces_are_read() {
        // Every Linux host has a loopback interface.
        let links = OnLink::read();
        let c = links.client("127.0.0.9".parse().unwrap());
        assert_eq!(c.net().to_string(), "127.0.0.0/8", "{links:?}");
    }
}
