//! Hosts of one LAN on this machine: IPv6 addresses of one /64 added to
//! `lo` for a test (as root), so that clients bound to them are different
//! hosts of the same network to the server, as a router's LAN clients are.
//! IPv4 needs none: all of 127.0.0.0/8 is `lo`'s.

use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6, TcpStream};
use std::process::Command;
use std::time::Duration;

/// The /64 the tests' LAN hosts live in.
pub const LAN: &str = "fd00:18:5";

/// Addresses added to `lo`, removed when dropped.
pub struct LanAddrs(Vec<Ipv6Addr>);

impl LanAddrs {
    /// `fd00:18:5::HOST/64` on `lo` for each host; `None`, with the reason
    /// printed, when the test cannot add them (not root, no `ip`). Host
    /// parts should be the test's own: other tests run at the same time.
    pub fn add(hosts: &[u16]) -> Option<LanAddrs> {
        if !super::is_root() {
            eprintln!("skipped: adding addresses to lo needs root");
            return None;
        }
        let mut added = LanAddrs(Vec::new());
        for h in hosts {
            let a: Ipv6Addr = format!("{LAN}::{h:x}").parse().unwrap();
            let ok = Command::new("ip")
                .args([
                    "-6",
                    "addr",
                    "add",
                    &format!("{a}/64"),
                    "dev",
                    "lo",
                    "nodad",
                ])
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("skipped: `ip -6 addr add {a}/64 dev lo` failed");
                return None;
            }
            added.0.push(a);
        }
        Some(added)
    }

    /// Address `i` of those added.
    pub fn at(&self, i: usize) -> Ipv6Addr {
        self.0[i]
    }
}

impl Drop for LanAddrs {
    fn drop(&mut self) {
        for a in &self.0 {
            let _ = Command::new("ip")
                .args(["-6", "addr", "del", &format!("{a}/64"), "dev", "lo"])
                .status();
        }
    }
}

/// A TCP connection from `from` (a local address) to `to`.
pub fn connect_from(from: std::net::IpAddr, to: SocketAddr) -> TcpStream {
    try_connect_from(from, to).unwrap()
}

/// `connect_from`, or why not (a server that is gone refuses).
pub fn try_connect_from(from: std::net::IpAddr, to: SocketAddr) -> nix::Result<TcpStream> {
    use nix::sys::socket::{
        AddressFamily, SockFlag, SockType, SockaddrIn, SockaddrIn6, bind, connect, socket,
    };
    use std::os::fd::AsRawFd;
    let family = if to.is_ipv6() {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)?;
    match (from, to) {
        (std::net::IpAddr::V6(f), SocketAddr::V6(t)) => {
            let f = SockaddrIn6::from(SocketAddrV6::new(f, 0, 0, 0));
            bind(fd.as_raw_fd(), &f)?;
            connect(fd.as_raw_fd(), &SockaddrIn6::from(t))?;
        }
        (std::net::IpAddr::V4(f), SocketAddr::V4(t)) => {
            let f = SockaddrIn::from(std::net::SocketAddrV4::new(f, 0));
            bind(fd.as_raw_fd(), &f)?;
            connect(fd.as_raw_fd(), &SockaddrIn::from(t))?;
        }
        _ => panic!("{from} and {to} are not of one family"),
    }
    let c = TcpStream::from(fd);
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    Ok(c)
}
