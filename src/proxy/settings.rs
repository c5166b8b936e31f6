//! The proxy settings: which path prefixes go to which backend, and the
//! limits of the exchanges with them.

use std::time::Duration;

use crate::limits::DEFAULT_BODY_RATE;
pub use crate::net::local::Address;
use crate::net::local::{self, Unparsed};
use crate::values::{parse_count, parse_range, parse_secs};

/// A route's backend, shown as the config names it (`http://` for TCP).
#[derive(Debug, Clone, PartialEq)]
pub struct Backend(pub Address);

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Address::Tcp(a) => write!(f, "http://{a}"),
            unix => write!(f, "{unix}"),
        }
    }
}

/// `proxy PREFIX BACKEND`.
#[derive(Debug)]
pub struct Route {
    pub prefix: String,
    pub backend: Backend,
}

#[derive(Debug)]
pub struct Settings {
    /// First match wins.
    pub routes: Vec<Route>,
    /// The backend's time to start answering (504 beyond).
    pub timeout: Duration,
    /// Backend connections open at once, per worker (503 beyond).
    pub max: usize,
    /// Largest request body forwarded (413 beyond); `None`: no limit.
    pub max_body: Option<u64>,
    /// How long an upgraded connection (WebSocket) may carry nothing
    /// either way before it is closed.
    pub tunnel_timeout: Duration,
    /// Backend connections one client address holds at once (503
    /// beyond); `None`: a quarter of `max`.
    pub max_per_client: Option<usize>,
    /// Long-lived answers (tunnels, event streams) at once (503 beyond);
    /// `None`: half of `max`.
    pub max_streams: Option<usize>,
    /// Of `max`, connections only requests that passed an `auth` realm
    /// may take; `None`: a quarter of `max`. Always below `max`.
    pub auth_reserve: Option<usize>,
    /// Least average pace of a request body, bytes per second of waiting
    /// on the client, after the head timeout's worth of grace (408
    /// beyond); `None`: no minimum.
    pub body_rate: Option<u64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            routes: Vec::new(),
            timeout: Duration::from_secs(30),
            max: 64,
            max_body: None,
            // WebSocket apps ping every 25 to 60 s (Socket.IO 25 s, MQTT
            // keep-alive 60 s): two minutes lets one ping go missing.
            tunnel_timeout: Duration::from_secs(120),
            max_per_client: None,
            max_streams: None,
            auth_reserve: None,
            body_rate: Some(DEFAULT_BODY_RATE),
        }
    }
}

impl Settings {
    /// Takes a setting this module owns; `Ok(false)` if the key is not one of them.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "proxy" => self.routes.push(parse_route(value)?),
            "proxy-timeout" => self.timeout = parse_secs(value, 1)?,
            "proxy-max" => {
                let max = parse_count(value, 1, 4096)?;
                if let Some(r) = self.auth_reserve.filter(|&r| r >= max) {
                    return Err(format!(
                        "{max} leaves no connection for requests without a login beside `proxy-auth-reserve {r}`: make it more than {r}"
                    ));
                }
                self.max = max;
            }
            "proxy-tunnel-timeout" => self.tunnel_timeout = parse_secs(value, 1)?,
            "proxy-max-body" => {
                self.max_body = match value {
                    "off" => None,
                    v => Some(parse_range(v, 0, u64::MAX >> 4)?),
                }
            }
            "proxy-max-per-client" => self.max_per_client = Some(parse_count(value, 1, 4096)?),
            "proxy-max-streams" => self.max_streams = Some(parse_count(value, 1, 4096)?),
            "proxy-auth-reserve" => {
                let r = parse_count(value, 0, 4095)?;
                if r >= self.max {
                    return Err(format!(
                        "{r} leaves no connection for requests without a login: below `proxy-max` ({})",
                        self.max
                    ));
                }
                self.auth_reserve = Some(r);
            }
            "proxy-body-rate" => {
                self.body_rate = match value {
                    "off" => None,
                    v => Some(parse_range(v, 1, 1 << 30)?),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// One client address's share of the backend connections, at most all of them.
    pub fn per_client(&self) -> usize {
        self.max_per_client
            .unwrap_or(self.max / 4)
            .clamp(1, self.max)
    }

    /// One client network's share of the backend connections, for
    /// requests that passed no login: half of them, at least one client's.
    pub fn per_net(&self) -> usize {
        (self.max / 2).max(self.per_client()).min(self.max)
    }

    /// The connections only requests that passed a login may take.
    pub fn auth_reserve(&self) -> usize {
        self.auth_reserve.unwrap_or(self.max / 4).min(self.max - 1)
    }

    /// The long-lived answers' budget, within `max`.
    pub fn streams(&self) -> usize {
        self.max_streams.unwrap_or(self.max / 2).clamp(1, self.max)
    }

    /// The route for a (cleaned) path, and its index.
    pub fn route_for(&self, path: &str) -> Option<(usize, &Route)> {
        self.routes
            .iter()
            .enumerate()
            .find(|(_, r)| crate::policy::access::under(path, &r.prefix))
    }
}

fn parse_route(value: &str) -> Result<Route, String> {
    let mut parts = value.split_whitespace();
    let (Some(prefix), Some(backend), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err("expected PREFIX BACKEND, e.g. `/api/ unix:/run/api.sock`".into());
    };
    if !prefix.starts_with('/') || crate::http::path::has_dot_dot(prefix) {
        return Err(format!("`{prefix}` must be a path prefix like /api/"));
    }
    Ok(Route {
        prefix: prefix.to_string(),
        backend: parse_backend(backend)?,
    })
}

/// `unix:/path` or `http://HOST:PORT`, HOST an IP address or `localhost`.
fn parse_backend(v: &str) -> Result<Backend, String> {
    let bad = || {
        format!("`{v}`: expected unix:/path or http://HOST:PORT with an IP address or localhost")
    };
    let spec = match v.strip_prefix("http://") {
        Some(authority) => authority.strip_suffix('/').unwrap_or(authority),
        None if v.starts_with("unix:") => v,
        None => return Err(bad()),
    };
    match local::parse(spec) {
        Ok(Address::Unix(_)) if spec != v => Err(bad()),
        Ok(a) => Ok(Backend(a)),
        Err(Unparsed::Unix(why)) => Err(why),
        Err(Unparsed::Form) => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_are_a_socket_path_or_an_address() {
        let mut s = Settings::default();
        assert!(s.apply("proxy", "/api/ unix:/run/api.sock").unwrap());
        assert!(s.apply("proxy", "/b/ http://127.0.0.1:9000").unwrap());
        assert!(s.apply("proxy", "/c/ http://[::1]:9000/").unwrap());
        assert!(s.apply("proxy", "/d/ http://localhost:81").unwrap());
        assert_eq!(
            s.routes[0].backend,
            Backend(Address::Unix("/run/api.sock".into()))
        );
        assert_eq!(s.routes[3].backend.to_string(), "http://127.0.0.1:81");
        for bad in [
            "/api/ http://example.com:80",
            "/api/ https://127.0.0.1:1",
            "/api/ unix:relative.sock",
            "/api/ http://127.0.0.1",
            "api/ unix:/x",
            "/api/",
            "/a/../b/ unix:/x",
        ] {
            assert!(s.apply("proxy", bad).is_err(), "{bad}");
        }
        assert_eq!(s.route_for("/b/x").map(|(i, _)| i), Some(1));
        assert_eq!(s.route_for("/b").map(|(i, _)| i), Some(1));
        assert!(s.route_for("/bx").is_none());
    }

    #[test]
    fn shares_default_to_parts_of_proxy_max_and_never_exceed_it() {
        let mut s = Settings::default();
        assert_eq!((s.per_client(), s.streams()), (16, 32));
        assert_eq!((s.per_net(), s.auth_reserve()), (32, 16));
        s.apply("proxy-max", "2").unwrap();
        assert_eq!((s.per_client(), s.streams()), (1, 1));
        assert_eq!((s.per_net(), s.auth_reserve()), (1, 0));
        s.apply("proxy-max-per-client", "9").unwrap();
        s.apply("proxy-max-streams", "9").unwrap();
        assert_eq!((s.per_client(), s.streams()), (2, 2));
        assert!(s.apply("proxy-max-streams", "0").is_err());
        assert!(s.apply("proxy-body-rate", "off").unwrap());
        assert_eq!(s.body_rate, None);
        assert!(s.apply("proxy-body-rate", "fast").is_err());
        assert!(
            s.apply("proxy-auth-reserve", "2").is_err(),
            "all of proxy-max"
        );
        s.apply("proxy-auth-reserve", "1").unwrap();
        assert!(s.apply("proxy-max", "1").is_err(), "below the reserve");
        s.apply("proxy-max", "3").unwrap();
        assert_eq!(s.auth_reserve(), 1);
    }
}
