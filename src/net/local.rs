//! Where a backend on the device listens (a proxied server, an SCGI
//! handler), as the config names it, and connecting to it within a
//! deadline. Only addresses: no name is looked up, so a worker never
//! waits on DNS.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Instant;

use async_io::Async;

use crate::net::deadline::{Deadlines, within};

#[derive(Debug, Clone, PartialEq)]
pub enum Address {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
            Address::Tcp(a) => write!(f, "{a}"),
        }
    }
}

/// Why `parse` refused a value.
#[derive(Debug, PartialEq)]
pub enum Unparsed {
    /// `unix:` and not an absolute path: the message says so.
    Unix(String),
    /// Neither form: the caller says which forms it takes.
    Form,
}

/// `unix:/absolute/path`, or `IP:PORT` (`[v6]:PORT`) or `localhost:PORT`.
pub fn parse(v: &str) -> Result<Address, Unparsed> {
    if let Some(path) = v.strip_prefix("unix:") {
        if !path.starts_with('/') || path.contains('\0') {
            return Err(Unparsed::Unix(format!(
                "`{v}`: expected unix:/absolute/path"
            )));
        }
        return Ok(Address::Unix(PathBuf::from(path)));
    }
    if let Ok(addr) = v.parse::<SocketAddr>() {
        return Ok(Address::Tcp(addr));
    }
    let (host, port) = v.rsplit_once(':').ok_or(Unparsed::Form)?;
    let port: u16 = port.parse().map_err(|_| Unparsed::Form)?;
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(Address::Tcp(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            port,
        )));
    }
    Err(Unparsed::Form)
}

pub enum Connected {
    /// With TCP_NODELAY: the exchanges write whole messages.
    Tcp(Async<TcpStream>),
    Unix(Async<UnixStream>),
}

/// Why a backend could not be reached.
pub enum Unreached {
    /// No socket there, or nobody accepting on it.
    Refused(io::Error),
    /// The connection was not taken by `until`.
    Timeout,
}

impl Address {
    /// Connects without blocking the worker (a backend on the device
    /// answers at once; `until` bounds one on the LAN that does not).
    pub async fn connect(
        &self,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Connected, Unreached> {
        let connecting = async {
            match self {
                Address::Tcp(a) => Async::<TcpStream>::connect(*a).await.map(|s| {
                    let _ = s.get_ref().set_nodelay(true);
                    Connected::Tcp(s)
                }),
                Address::Unix(p) => Async::<UnixStream>::connect(p).await.map(Connected::Unix),
            }
        };
        match within(deadlines, until, connecting).await {
            Some(Ok(c)) => Ok(c),
            Some(Err(e)) => Err(Unreached::Refused(e)),
            None => Err(Unreached::Timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_a_socket_path_an_ip_or_localhost() {
        assert_eq!(
            parse("unix:/run/x.sock"),
            Ok(Address::Unix("/run/x.sock".into()))
        );
        assert_eq!(
            parse("[::1]:9000").map(|a| a.to_string()),
            Ok("[::1]:9000".into())
        );
        assert_eq!(
            parse("LOCALHOST:81").map(|a| a.to_string()),
            Ok("127.0.0.1:81".into())
        );
        assert!(matches!(parse("unix:rel.sock"), Err(Unparsed::Unix(_))));
        for bad in ["example.com:80", "127.0.0.1", "localhost:http", ""] {
            assert_eq!(parse(bad), Err(Unparsed::Form), "{bad}");
        }
    }
}
