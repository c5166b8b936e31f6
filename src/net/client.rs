//! Who a client is, for the limits that count per client (login failures,
//! shares of the backend connections).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

/// A client as per-client limits count it: an IPv4 address, or an IPv6
/// /64. A host given a /64 picks among its addresses at will, so one IPv6
/// address would be no limit at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    V4(Ipv4Addr),
    /// The network's upper 64 bits.
    V6Net(u64),
}

impl From<IpAddr> for Client {
    fn from(ip: IpAddr) -> Client {
        match ip {
            IpAddr::V4(a) => Client::V4(a),
            // On an IPv6 socket an IPv4 client is ::ffff:a.b.c.d: the same client.
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => Client::V4(v4),
                None => Client::V6Net((u128::from(a) >> 64) as u64),
            },
        }
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Client::V4(a) => write!(f, "{a}"),
            Client::V6Net(net) => {
                let a = std::net::Ipv6Addr::from(u128::from(net) << 64);
                write!(f, "{a}/64")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(s: &str) -> Client {
        Client::from(s.parse::<IpAddr>().unwrap())
    }

    #[test]
    fn ipv6_clients_are_counted_per_64() {
        assert_eq!(
            client("2001:db8:1:2::1"),
            client("2001:db8:1:2:ffff:ffff:ffff:ffff")
        );
        assert_eq!(client("2001:db8:1:2::1"), client("2001:db8:1:2:a:b:c:d"));
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db8:1:3::1"));
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db9:1:2::1"));
        assert_eq!(
            client("2001:db8:1:2:3:4:5:6").to_string(),
            "2001:db8:1:2::/64"
        );
    }

    #[test]
    fn ipv4_mapped_clients_are_their_ipv4_address() {
        assert_eq!(client("::ffff:192.168.1.2"), client("192.168.1.2"));
        assert_eq!(
            client("::ffff:192.168.1.2"),
            Client::V4(Ipv4Addr::new(192, 168, 1, 2))
        );
        assert_ne!(client("::ffff:192.168.1.2"), client("::ffff:192.168.1.3"));
        // IPv4 addresses are whole: neighbours are other clients.
        assert_ne!(client("192.168.1.2"), client("192.168.1.3"));
    }
}
