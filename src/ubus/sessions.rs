//! The sessions the endpoint knows: ids rpcd accepted in a
//! `session.access` check or made at a login, lately. A request carrying
//! one finds room among the calls in flight that anonymous requests
//! cannot take (`ubus/calls.rs`). rpcd still checks every call: being
//! known gives room, never access.

use std::cell::RefCell;
use std::time::Instant;

use crate::limits::{UBUS_SESSION_KEPT_FOR, UBUS_SESSIONS_KEPT};

/// uhttpd's anonymous session, for a missing bearer token.
pub const DEFAULT_SID: &[u8] = b"00000000000000000000000000000000";

/// rpcd's session ids: 32 hexadecimal digits.
type Sid = [u8; 32];

#[derive(Default)]
pub struct Sessions {
    /// Each id with the last time rpcd accepted it.
    kept: RefCell<Vec<(Sid, Instant)>>,
}

impl Sessions {
    /// rpcd accepted `sid` now. The anonymous session is never known.
    pub fn remember(&self, sid: &[u8]) {
        let Ok(sid) = Sid::try_from(sid) else {
            return;
        };
        if sid == *DEFAULT_SID {
            return;
        }
        let now = Instant::now();
        let mut kept = self.kept.borrow_mut();
        if let Some(entry) = kept.iter_mut().find(|(s, _)| *s == sid) {
            entry.1 = now;
        } else if kept.len() < UBUS_SESSIONS_KEPT {
            kept.push((sid, now));
        } else if let Some(oldest) = kept.iter_mut().min_by_key(|(_, at)| *at) {
            *oldest = (sid, now);
        }
    }

    /// The session ended (`session.destroy`, a logout).
    pub fn forget(&self, sid: &[u8]) {
        self.kept.borrow_mut().retain(|(s, _)| s.as_slice() != sid);
    }

    pub fn knows(&self, sid: &[u8]) -> bool {
        self.kept
            .borrow()
            .iter()
            .any(|(s, at)| s.as_slice() == sid && at.elapsed() < UBUS_SESSION_KEPT_FOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_sessions_are_known_until_forgotten_the_anonymous_never() {
        let s = Sessions::default();
        let a = [b'a'; 32];
        assert!(!s.knows(&a));
        s.remember(&a);
        assert!(s.knows(&a));
        s.remember(DEFAULT_SID);
        assert!(!s.knows(DEFAULT_SID));
        s.remember(b"short");
        assert!(!s.knows(b"short"));
        s.forget(&a);
        assert!(!s.knows(&a));
    }

    #[test]
    fn past_the_count_the_least_recent_goes() {
        let s = Sessions::default();
        let id = |i: usize| {
            let mut sid = [b'0'; 32];
            sid[..8].copy_from_slice(format!("{i:08x}").as_bytes());
            sid
        };
        for i in 1..=UBUS_SESSIONS_KEPT {
            s.remember(&id(i));
        }
        s.remember(&id(1));
        s.remember(&id(UBUS_SESSIONS_KEPT + 1));
        assert!(s.knows(&id(1)), "used again: kept");
        assert!(!s.knows(&id(2)), "the least recent went");
        assert!(s.knows(&id(UBUS_SESSIONS_KEPT + 1)));
    }
}
