//! The endpoint's calls in flight per worker and who may hold them. Each
//! client holds at most its share of them; requests without a session the
//! endpoint knows (`ubus/sessions.rs`: a login, `list`, a guessed or
//! anonymous session) share a smaller pool, with a smaller share each.
//! So a flood of password guesses from one client leaves room for other
//! clients' logins, and anonymous requests, however many, leave the rest
//! of the calls to sessions.

use crate::limits::{
    UBUS_ANONYMOUS_CALLS, UBUS_ANONYMOUS_PER_CLIENT, UBUS_CALLS_PER_CLIENT, UBUS_MAX_CALLS,
};
use crate::net::client::Client;
use crate::net::share::{Share, Shares};
use crate::net::slots::{Slot, Slots};

pub struct Calls {
    all: Slots,
    shares: Shares,
    anonymous: Slots,
    anonymous_shares: Shares,
}

/// One request's place among the calls in flight; dropping it gives it back.
pub struct Call {
    _anonymous: Option<(Share, Slot)>,
    _share: Share,
    _slot: Slot,
}

/// Why a request finds no room.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refused {
    /// Every call of the worker is in flight.
    Full,
    /// The client holds its share.
    Share,
    /// As many anonymous requests as may be are in flight.
    AnonymousFull,
    /// The client holds its share of anonymous requests.
    AnonymousShare,
}

impl Default for Calls {
    fn default() -> Self {
        Calls {
            all: Slots::new(UBUS_MAX_CALLS),
            shares: Shares::new(UBUS_CALLS_PER_CLIENT),
            anonymous: Slots::new(UBUS_ANONYMOUS_CALLS),
            anonymous_shares: Shares::new(UBUS_ANONYMOUS_PER_CLIENT),
        }
    }
}

impl Calls {
    /// A place for a request of `client`; `session`: it carries a session
    /// the endpoint knows.
    pub fn take(&self, client: Client, session: bool) -> Result<Call, Refused> {
        let anonymous = match session {
            true => None,
            false => Some((
                self.anonymous_shares
                    .take(client)
                    .ok_or(Refused::AnonymousShare)?,
                self.anonymous.take().ok_or(Refused::AnonymousFull)?,
            )),
        };
        Ok(Call {
            _share: self.shares.take(client).ok_or(Refused::Share)?,
            _slot: self.all.take().ok_or(Refused::Full)?,
            _anonymous: anonymous,
        })
    }
}

impl Refused {
    /// What the log says of the client a request was refused to.
    pub fn reason(self) -> String {
        match self {
            Refused::Full => format!("{UBUS_MAX_CALLS} calls in flight"),
            Refused::Share => format!("holds {UBUS_CALLS_PER_CLIENT} calls"),
            Refused::AnonymousFull => {
                format!("{UBUS_ANONYMOUS_CALLS} calls without a known session in flight")
            }
            Refused::AnonymousShare => {
                format!("holds {UBUS_ANONYMOUS_PER_CLIENT} calls without a known session")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(i: u8) -> Client {
        std::net::IpAddr::from([192, 0, 2, i]).into()
    }

    #[test]
    fn anonymous_requests_leave_room_for_sessions() {
        let calls = Calls::default();
        let mut held = Vec::new();
        // One client's guesses: its anonymous share, then no more.
        for _ in 0..UBUS_ANONYMOUS_PER_CLIENT {
            held.push(calls.take(client(1), false).unwrap());
        }
        assert_eq!(
            calls.take(client(1), false).err(),
            Some(Refused::AnonymousShare)
        );
        // Another client still logs in.
        assert!(calls.take(client(2), false).is_ok());
        // Many clients' guesses fill the anonymous pool only.
        for i in 3.. {
            match calls.take(client(i), false) {
                Ok(c) => held.push(c),
                Err(e) => {
                    assert_eq!(e, Refused::AnonymousFull);
                    break;
                }
            }
        }
        assert_eq!(held.len(), UBUS_ANONYMOUS_CALLS);
        // A session's calls find the rest, up to the client's share.
        for _ in 0..UBUS_CALLS_PER_CLIENT {
            held.push(calls.take(client(200), true).unwrap());
        }
        assert_eq!(calls.take(client(200), true).err(), Some(Refused::Share));
        assert!(calls.take(client(201), true).is_ok());
        // The guessing client's calls with a session count toward its share.
        for _ in 0..UBUS_CALLS_PER_CLIENT - UBUS_ANONYMOUS_PER_CLIENT {
            held.push(calls.take(client(1), true).unwrap());
        }
        assert_eq!(calls.take(client(1), true).err(), Some(Refused::Share));
    }
}
