//! The Date header, formatted once a second rather than per request.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::httpdate;

pub struct Clock {
    cached: Cell<(u64, [u8; httpdate::LEN])>,
}

impl Default for Clock {
    fn default() -> Clock {
        Clock {
            cached: Cell::new((u64::MAX, [b' '; httpdate::LEN])),
        }
    }
}

impl Clock {
    pub fn now_secs() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// Today's IMF-fixdate, reformatted only when the second changes.
    pub fn date(&self) -> [u8; httpdate::LEN] {
        let now = Self::now_secs();
        let (secs, text) = self.cached.get();
        if secs == now {
            return text;
        }
        let text = httpdate::format(now);
        self.cached.set((now, text));
        text
    }
}
