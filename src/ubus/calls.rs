//! The endpoint's calls in flight per worker and who may hold them. Each
//! client holds at most its share of them; requests without a session the
//! endpoint knows (`ubus/sessions.rs`: a login, `list`, a guessed or
//! anonymous session) share a smaller pool, with a smaller share each.
//! So a flood of password guesses from one client leaves room for other
//! clients' logins, and anonymous requests, however many, leave the rest
//! of the calls to sessions. When that pool is full, a request waits a
//! little, and a freed place goes to the waiting client that holds the
//! fewest: a login from a client with none goes before a flood's, from
//! however many addresses.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use crate::limits::{
    UBUS_ANONYMOUS_CALLS, UBUS_ANONYMOUS_PER_CLIENT, UBUS_CALLS_PER_CLIENT, UBUS_MAX_CALLS,
};
use crate::net::client::Client;
use crate::net::deadline::{Deadlines, within};
use crate::net::share::{Share, Shares};
use crate::net::slots::{Slot, Slots};

pub struct Calls {
    all: Slots,
    shares: Shares,
    anonymous: Slots,
    /// Counts the requests in flight and those waiting for a place.
    anonymous_shares: Shares,
    /// The requests waiting for a place, at most as many as the places.
    waiting: RefCell<Vec<Waiter>>,
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
            waiting: RefCell::new(Vec::new()),
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
                    .take(client.id())
                    .ok_or(Refused::AnonymousShare)?,
                self.anonymous.take().ok_or(Refused::AnonymousFull)?,
            )),
        };
        self.call(client, anonymous)
    }

    fn call(&self, client: Client, anonymous: Option<(Share, Slot)>) -> Result<Call, Refused> {
        Ok(Call {
            _share: self.shares.take(client.id()).ok_or(Refused::Share)?,
            _slot: self.all.take().ok_or(Refused::Full)?,
            _anonymous: anonymous,
        })
    }

    /// `take`, but a request without a known session that finds every
    /// place for such requests taken waits until `until` for one, in
    /// turn: a freed place goes to the waiting client holding the fewest.
    /// Beyond its share a client is refused at once.
    pub async fn take_waiting(
        &self,
        client: Client,
        session: bool,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Call, Refused> {
        if session {
            return self.take(client, true);
        }
        let share = self
            .anonymous_shares
            .take(client.id())
            .ok_or(Refused::AnonymousShare)?;
        let Some(in_line) = InLine::new(self, client) else {
            return Err(Refused::AnonymousFull);
        };
        loop {
            let freed = self.anonymous.freed().notified();
            if in_line.waiter.evicted.get() {
                return Err(Refused::AnonymousFull);
            }
            if self.first_in_line(client) {
                if let Some(slot) = self.anonymous.take() {
                    return self.call(client, Some((share, slot)));
                }
            }
            if within(deadlines, until, freed).await.is_none() {
                return Err(Refused::AnonymousFull);
            }
        }
    }

    /// No waiting client holds fewer requests than `client`.
    fn first_in_line(&self, client: Client) -> bool {
        let mine = self.anonymous_shares.held(client.id());
        let waiting = self.waiting.borrow();
        waiting
            .iter()
            .all(|other| self.anonymous_shares.held(other.client.id()) >= mine)
    }
}

/// One waiting request: its client, and whether a client holding fewer
/// took its place in the full line.
struct Waiter {
    client: Client,
    evicted: Rc<Cell<bool>>,
}

/// A request's entry among the waiting; leaving the line lets the next
/// in turn look again (it may leave a free place behind).
struct InLine<'a> {
    calls: &'a Calls,
    waiter: Waiter,
}

impl<'a> InLine<'a> {
    /// In line, or `None` when the line is full of clients holding no
    /// more than `client`. Otherwise a full line's waiter whose client
    /// holds the most leaves it (refused): the line stays short, and a
    /// flood from however many addresses cannot fill it against a client
    /// holding fewer.
    fn new(calls: &'a Calls, client: Client) -> Option<InLine<'a>> {
        let held = |c: Client| calls.anonymous_shares.held(c.id());
        let mut waiting = calls.waiting.borrow_mut();
        if waiting.len() >= UBUS_ANONYMOUS_CALLS {
            let (i, most) = waiting
                .iter()
                .enumerate()
                .map(|(i, w)| (i, held(w.client)))
                .max_by_key(|&(_, n)| n)?;
            if most <= held(client) {
                return None;
            }
            waiting.swap_remove(i).evicted.set(true);
            calls.anonymous.freed().notify_all();
        }
        let evicted = Rc::new(Cell::new(false));
        waiting.push(Waiter {
            client,
            evicted: evicted.clone(),
        });
        Some(InLine {
            calls,
            waiter: Waiter { client, evicted },
        })
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        let mut waiting = self.calls.waiting.borrow_mut();
        let mine = &self.waiter.evicted;
        if let Some(i) = waiting.iter().position(|w| Rc::ptr_eq(&w.evicted, mine)) {
            waiting.swap_remove(i);
        }
        drop(waiting);
        self.calls.anonymous.freed().notify_all();
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
        crate::net::client::OnLink::default().client(std::net::IpAddr::from([192, 0, 2, i]))
    }

    #[test]
    fn a_freed_place_goes_to_the_waiting_client_holding_the_fewest() {
        let calls = Calls::default();
        let (flood, owner) = (client(1), client(2));
        let _line = [InLine::new(&calls, flood), InLine::new(&calls, owner)];
        assert!(_line.iter().all(Option::is_some));
        let held: Vec<_> = (0..3)
            .map(|_| calls.anonymous_shares.take(flood.id()))
            .collect();
        assert_eq!(held.len(), 3);
        let _mine = calls.anonymous_shares.take(owner.id());
        assert!(calls.first_in_line(owner));
        assert!(!calls.first_in_line(flood));
    }

    #[test]
    fn a_full_line_makes_room_for_a_client_holding_fewer() {
        let calls = Calls::default();
        let flood = client(1);
        let shares: Vec<_> = (0..UBUS_ANONYMOUS_PER_CLIENT)
            .map(|_| calls.anonymous_shares.take(flood.id()))
            .collect();
        assert!(shares.iter().all(Option::is_some));
        let line: Vec<_> = (0..UBUS_ANONYMOUS_CALLS)
            .map(|_| InLine::new(&calls, flood).expect("room"))
            .collect();
        assert!(InLine::new(&calls, flood).is_none(), "full for its equals");
        let _share = calls.anonymous_shares.take(client(2).id());
        let owner = InLine::new(&calls, client(2));
        assert!(owner.is_some(), "a client holding fewer gets in");
        let evicted = line.iter().filter(|w| w.waiter.evicted.get()).count();
        assert_eq!(evicted, 1);
        assert_eq!(calls.waiting.borrow().len(), UBUS_ANONYMOUS_CALLS);
        drop(line);
        assert_eq!(calls.waiting.borrow().len(), 1, "the owner's entry stays");
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
