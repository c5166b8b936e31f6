//! Logging through `log`: to stderr in the foreground, or to the local
//! syslog socket (facility daemon). The syslog client is a few lines of our
//! own: RFC 3164 without a timestamp, which every syslogd stamps on arrival.

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::sync::Mutex;

use log::{Level, LevelFilter, Log, Metadata, Record};

enum Sink {
    Stderr,
    Syslog(Option<UnixDatagram>),
}

struct Logger {
    sink: Mutex<Sink>,
}

static LOGGER: Logger = Logger {
    sink: Mutex::new(Sink::Stderr),
};

/// Installs the logger. Safe to call again (after fork, or to switch to syslog).
pub fn init(syslog: bool, level: LevelFilter) {
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
    if let Ok(mut sink) = LOGGER.sink.lock() {
        *sink = if syslog {
            Sink::Syslog(connect())
        } else {
            Sink::Stderr
        };
    }
}

fn connect() -> Option<UnixDatagram> {
    let sock = UnixDatagram::unbound().ok()?;
    ["/dev/log", "/var/run/syslog"]
        .iter()
        .find_map(|p| sock.connect(p).ok())?;
    Some(sock)
}

/// Syslog severity in the daemon facility (3 << 3).
fn priority(level: Level) -> u8 {
    24 + match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let Ok(mut sink) = self.sink.lock() else {
            return;
        };
        match &mut *sink {
            Sink::Stderr => {
                let level = record.level().as_str().to_ascii_lowercase();
                let _ = writeln!(
                    std::io::stderr(),
                    "marmoset[{}]: {level}: {}",
                    std::process::id(),
                    record.args()
                );
            }
            Sink::Syslog(sock) => {
                let line = format!(
                    "<{}>marmoset[{}]: {}",
                    priority(record.level()),
                    std::process::id(),
                    record.args()
                );
                // syslogd restarted: reconnect once, else drop the line rather than block.
                let sent = sock
                    .as_ref()
                    .is_some_and(|s| s.send(line.as_bytes()).is_ok());
                if !sent {
                    *sock = connect();
                    if let Some(s) = sock.as_ref() {
                        let _ = s.send(line.as_bytes());
                    }
                }
            }
        }
    }

    fn flush(&self) {}
}
