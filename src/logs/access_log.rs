//! The access log in Common Log Format, to a file or to syslog.

use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::http::httpdate;

/// Where the access log goes (the `access-log` setting).
#[derive(Debug, Clone, PartialEq)]
pub enum Destination {
    Off,
    Syslog,
    File(PathBuf),
}

/// The open access log.
pub enum AccessLog {
    Off,
    Syslog,
    File(File),
}

impl AccessLog {
    pub fn open(setting: &Destination) -> AccessLog {
        match setting {
            Destination::Off => AccessLog::Off,
            Destination::Syslog => AccessLog::Syslog,
            Destination::File(path) => match std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
            {
                Ok(f) => AccessLog::File(f),
                Err(e) => {
                    log::error!("access log {}: {e}; access logging is off", path.display());
                    AccessLog::Off
                }
            },
        }
    }

    /// After logrotate moved the file away (SIGHUP).
    pub fn reopen(&mut self, setting: &Destination) {
        *self = AccessLog::open(setting);
    }

    pub fn enabled(&self) -> bool {
        !matches!(self, AccessLog::Off)
    }

    pub fn write(&mut self, line: &str) {
        match self {
            AccessLog::Off => {}
            AccessLog::Syslog => log::info!(target: "access", "{line}"),
            AccessLog::File(f) => {
                if let Err(e) = writeln!(f, "{line}") {
                    log::warn!("access log: {e}");
                }
            }
        }
    }
}

/// `host - - [10/Oct/2000:13:55:36 +0000] "GET /x HTTP/1.1" 200 2326`.
pub fn line(peer: SocketAddr, request_line: &[u8], status: u16, bytes: u64, now: u64) -> String {
    let date = httpdate::format(now);
    // IMF-fixdate `Tue, 10 Oct 2000 13:55:36 GMT` rearranged to CLF's order.
    let d = |r: std::ops::Range<usize>| String::from_utf8_lossy(&date[r]).into_owned();
    let mut quoted = String::with_capacity(request_line.len());
    for &b in request_line {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            quoted.push_str(&format!("\\x{b:02x}"));
        } else {
            quoted.push(b as char);
        }
    }
    format!(
        "{} - - [{}/{}/{}:{} +0000] \"{quoted}\" {status} {bytes}",
        peer.ip(),
        d(5..7),
        d(8..11),
        d(12..16),
        d(17..25)
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn common_log_format() {
        let l = super::line(
            "10.0.0.2:5555".parse().unwrap(),
            b"GET /a\"b HTTP/1.1",
            200,
            12,
            971_186_136,
        );
        assert_eq!(
            l,
            "10.0.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET /a\\x22b HTTP/1.1\" 200 12"
        );
    }
}
