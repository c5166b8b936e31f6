//! What a power cut or worn flash leaves of the pair `tls-self-signed`
//! made: a file emptied or cut short. Told apart from a file that is only
//! unreadable to this process (a root-only key at a reload) or a good one,
//! so that the pair can be made again without a key ever being lost.

use std::io::ErrorKind;
use std::path::Path;

use crate::tls::keys;

/// The state of one file of the pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum State {
    Absent,
    /// Could not be read (permissions): nothing to say about its content.
    Unreadable,
    /// Nothing but whitespace: no byte of a key or certificate is lost by
    /// replacing it.
    Empty,
    /// Something, but not what it should be: cut short, or garbled.
    Cut,
    Good,
}

impl State {
    /// What flash damage leaves: remade (a cut key kept aside first).
    pub fn is_damaged(self) -> bool {
        matches!(self, State::Empty | State::Cut)
    }

    pub fn describe(self) -> &'static str {
        match self {
            State::Empty => "is empty",
            State::Cut => "is cut short or garbled",
            State::Absent => "is missing",
            State::Unreadable | State::Good => "is there",
        }
    }
}

/// The key file's state: good when it parses as a key of any kind.
pub fn of_key(path: &Path) -> State {
    of(path, |_| keys::read_key(path).is_ok())
}

/// The certificate file's state: good when its first certificate is one.
pub fn of_cert(path: &Path) -> State {
    of(path, |_| keys::has_certificate(path))
}

fn of(path: &Path, good: impl Fn(&[u8]) -> bool) -> State {
    match std::fs::read(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => State::Absent,
        Err(_) => State::Unreadable,
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => State::Empty,
        Ok(bytes) if good(&bytes) => State::Good,
        Ok(_) => State::Cut,
    }
}

/// Whether the file at `path` may hold a private key (or part of one): a
/// key section's label in it, or a file that could not be read. Such a
/// file is never replaced.
pub fn may_hold_key(path: &Path) -> bool {
    match std::fs::read(path) {
        Err(e) => e.kind() != ErrorKind::NotFound,
        Ok(bytes) => bytes.windows(11).any(|w| w == b"PRIVATE KEY") || keys::read_key(path).is_ok(),
    }
}
