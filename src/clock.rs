//! The Date header, formatted once a second rather than per request.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::httpdate;

/// `\r\nDate: ` and an IMF-fixdate: the Date header as a head carries it.
pub const DATE_LINE: usize = PREFIX.len() + httpdate::LEN;
const PREFIX: &[u8] = b"\r\nDate: ";

pub struct Clock {
    cached: Cell<(u64, [u8; DATE_LINE])>,
}

impl Default for Clock {
    fn default() -> Clock {
        Clock {
            cached: Cell::new((u64::MAX, [b' '; DATE_LINE])),
        }
    }
}

impl Clock {
    pub fn now_secs() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// The Date header line for now, remade only when the second changes.
    pub fn date_line(&self) -> [u8; DATE_LINE] {
        let now = Self::now_secs();
        let (secs, line) = self.cached.get();
        if secs == now {
            return line;
        }
        let mut line = [0; DATE_LINE];
        line[..PREFIX.len()].copy_from_slice(PREFIX);
        line[PREFIX.len()..].copy_from_slice(&httpdate::format(now));
        self.cached.set((now, line));
        line
    }
}
