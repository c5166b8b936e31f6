//! The connections of a worker, which client holds each and what each is
//! doing, so that one client cannot hold them all: a client (an IPv4
//! address, or an IPv6 /64) holds at most its share of them (the device
//! itself excepted, at 127.0.0.1 or ::1: a tunnel or a local front end
//! speaks for many users), and at the connection limit a new client makes
//! room by asking one to close:
//!
//! 1. the connection waiting longest with no request under way (still in
//!    its TLS handshake, waiting for a request or receiving its head), as
//!    nginx does for idle ones: a client that sends nothing, or its head a
//!    byte at a time, holds a slot only until newer clients need it;
//! 2. else, one sending a static answer, of the client holding the most
//!    connections (if it holds more than one): a client that asks for
//!    answers it does not read holds its slots only until others need
//!    them;
//! 3. else (every client holds one: a host using many addresses), the one
//!    that has been sending its answer longest: a reader that reads is
//!    done sooner than one that stalls.
//!
//! A connection running a script, a proxied exchange or a ubus call is
//! never asked: those pools are bounded, and each has its own share.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use crate::net::client::Client;
use crate::net::notify::Notify;

/// The table; a place in it holds the table, not a borrow of it, so it
/// can live in a connection that holds its worker (as a slot does). A
/// clone is the same table: every generation of a process puts its
/// connections in one.
#[derive(Clone)]
pub struct Reclaim(Rc<Table>);

struct Table {
    next: Cell<u64>,
    /// Counts the answers started, to order the connections sending them.
    started: Cell<u64>,
    /// Every connection, at the slot its place holds: a change (several
    /// per request) finds its entry without a search.
    entries: RefCell<Vec<Option<Entry>>>,
    /// Slots given back, for the next connections.
    free: RefCell<Vec<usize>>,
    /// The slots of connections with no request under way, oldest first.
    idle: RefCell<VecDeque<usize>>,
    /// Clients with connections, those asked to close left out.
    held: RefCell<Vec<Held>>,
    /// The most connections one client holds.
    share: Cell<usize>,
    wake: Notify,
    /// Woken when a connection becomes idle or starts sending an answer.
    entered: Notify,
    /// Woken when a connection asked to close leaves: it is closing, or
    /// its request came first and it goes on (then another must be asked).
    left: Notify,
}

/// A client's connections, and how many of them are sending an answer.
struct Held {
    client: Client,
    /// Never 0 while the client is in the table.
    all: usize,
    sending: usize,
}

struct Entry {
    /// The order connections came in.
    id: u64,
    client: Client,
    doing: Doing,
    asked: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Doing {
    /// No request under way.
    Idle,
    /// Sending a static answer (and reading past its request's body),
    /// since this count of `Table::started`.
    Sending(u64),
    /// Anything else a request does.
    Busy,
}

impl Entry {
    /// How its client's counts hold it: not at all once it is asked to
    /// close, else whether it is sending an answer.
    fn counted(&self) -> Option<bool> {
        (!self.asked).then_some(self.sending().is_some())
    }

    /// Since when it sends an answer, if it does.
    fn sending(&self) -> Option<u64> {
        match self.doing {
            Doing::Sending(since) => Some(since),
            _ => None,
        }
    }
}

/// A connection's place in the table, from its accept to its close.
pub struct Place(Watch);

/// What a connection waits on to learn it was asked to close, apart from
/// its place so that a wait can go beside a borrow of the connection.
#[derive(Clone)]
pub struct Watch {
    table: Rc<Table>,
    slot: usize,
}

/// The client already holds its share.
#[derive(Debug)]
pub struct AtShare;

impl Reclaim {
    pub fn new(share: usize) -> Reclaim {
        Reclaim(Rc::new(Table {
            next: Cell::new(0),
            started: Cell::new(0),
            entries: RefCell::default(),
            free: RefCell::default(),
            idle: RefCell::default(),
            held: RefCell::default(),
            share: Cell::new(share.max(1)),
            wake: Notify::default(),
            entered: Notify::default(),
            left: Notify::default(),
        }))
    }

    /// The same table under a new share: clients holding more keep their
    /// connections, and get no new one meanwhile.
    pub fn limited(&self, share: usize) -> Reclaim {
        self.0.share.set(share.max(1));
        self.clone()
    }

    /// A place for a new connection of `client`, idle; none if the client
    /// holds its share.
    pub fn enter(&self, client: Client) -> Result<Place, AtShare> {
        let t = &self.0;
        if !client.is_this_host() && t.holding(client) >= t.share.get() {
            return Err(AtShare);
        }
        let id = t.next.get();
        t.next.set(id + 1);
        let entry = Entry {
            id,
            client,
            doing: Doing::Idle,
            asked: false,
        };
        t.tally(&entry, true);
        let mut entries = t.entries.borrow_mut();
        let slot = match t.free.borrow_mut().pop() {
            Some(slot) => {
                entries[slot] = Some(entry);
                slot
            }
            None => {
                entries.push(Some(entry));
                entries.len() - 1
            }
        };
        drop(entries);
        t.idle.borrow_mut().push_back(slot);
        t.entered.notify_all();
        Ok(Place(Watch {
            table: t.clone(),
            slot,
        }))
    }

    /// Woken when a connection becomes one that may be asked to close.
    pub fn entered(&self) -> &Notify {
        &self.0.entered
    }

    /// Woken when a connection asked to close leaves.
    pub fn left(&self) -> &Notify {
        &self.0.left
    }

    /// Asks a connection to close, as the module says which; false if
    /// none may be asked.
    pub fn ask_one(&self) -> bool {
        let t = &self.0;
        let slot = t
            .idle
            .borrow_mut()
            .pop_front()
            .or_else(|| t.busiest_sender())
            .or_else(|| t.longest_sender());
        let Some(slot) = slot else {
            return false;
        };
        t.change(slot, |e| e.asked = true);
        t.wake.notify_all();
        true
    }
}

impl Table {
    fn holding(&self, client: Client) -> usize {
        let held = self.held.borrow();
        held.iter()
            .find(|h| h.client == client)
            .map_or(0, |h| h.all)
    }

    /// Counts `e` for its client (`up`), or stops counting it; one asked
    /// to close is not counted.
    fn tally(&self, e: &Entry, up: bool) {
        if let Some(sending) = e.counted() {
            self.count(e.client, usize::from(sending), up);
        }
    }

    /// One of `client`'s counted connections started (or stopped) sending.
    fn resend(&self, client: Client, sending: bool) {
        let mut held = self.held.borrow_mut();
        if let Some(h) = held.iter_mut().find(|h| h.client == client) {
            if sending {
                h.sending += 1;
            } else {
                h.sending -= 1;
            }
        }
    }

    fn count(&self, client: Client, sending: usize, up: bool) {
        let mut held = self.held.borrow_mut();
        match held.iter().position(|h| h.client == client) {
            Some(i) if up => {
                held[i].all += 1;
                held[i].sending += sending;
            }
            Some(i) => {
                held[i].all -= 1;
                held[i].sending -= sending;
                if held[i].all == 0 {
                    held.swap_remove(i);
                }
            }
            None if up => held.push(Held {
                client,
                all: 1,
                sending,
            }),
            None => {}
        }
    }

    /// Changes the entry at `slot`, keeping the counts true; what `f` returns.
    /// Most changes (a request starting, an answer ending) leave the
    /// counts as they are: those cost no search of the clients.
    fn change<R>(&self, slot: usize, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        self.with(slot, |e| {
            let before = e.counted();
            let r = f(e);
            let after = e.counted();
            match (before, after) {
                _ if after == before => {}
                // Still counted, only sending or not: one search, and the
                // client's entry is neither removed nor pushed again.
                (Some(_), Some(sending)) => self.resend(e.client, sending),
                _ => {
                    if let Some(sending) = before {
                        self.count(e.client, usize::from(sending), false);
                    }
                    if let Some(sending) = after {
                        self.count(e.client, usize::from(sending), true);
                    }
                }
            }
            r
        })
    }

    fn with<R>(&self, slot: usize, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut entries = self.entries.borrow_mut();
        entries.get_mut(slot)?.as_mut().map(f)
    }

    /// The slots in use, with their entries.
    fn each(entries: &[Option<Entry>]) -> impl Iterator<Item = (usize, &Entry)> {
        entries
            .iter()
            .enumerate()
            .filter_map(|(slot, e)| Some((slot, e.as_ref()?)))
    }

    /// The oldest connection sending an answer of the client that holds
    /// the most connections, if it holds more than one.
    fn busiest_sender(&self) -> Option<usize> {
        let client = {
            let held = self.held.borrow();
            let most = held
                .iter()
                .filter(|h| h.sending > 0 && h.all > 1)
                .max_by_key(|h| h.all)?;
            most.client
        };
        let entries = self.entries.borrow();
        Table::each(&entries)
            .filter(|(_, e)| e.client == client && e.sending().is_some() && !e.asked)
            .min_by_key(|(_, e)| e.id)
            .map(|(slot, _)| slot)
    }
}

impl Table {
    /// The connection sending its answer longest, whoever holds it.
    fn longest_sender(&self) -> Option<usize> {
        let entries = self.entries.borrow();
        Table::each(&entries)
            .filter(|(_, e)| !e.asked)
            .filter_map(|(slot, e)| Some((slot, e.sending()?)))
            .min_by_key(|&(_, since)| since)
            .map(|(slot, _)| slot)
    }
}

impl Place {
    /// No request under way: the first to be asked to close.
    pub fn idle(&self) {
        let t = &self.0.table;
        let was = t.change(self.0.slot, |e| {
            std::mem::replace(&mut e.doing, Doing::Idle)
        });
        if was != Some(Doing::Idle) {
            t.idle.borrow_mut().push_back(self.0.slot);
            t.entered.notify_all();
        }
    }

    /// A request under way; one asked to close while idle goes on.
    pub fn busy(&self) {
        self.start(Doing::Busy);
    }

    /// Sending a static answer: may be asked to close if the client holds
    /// the most connections.
    pub fn sending(&self) {
        let t = &self.0.table;
        let since = t.started.get() + 1;
        t.started.set(since);
        self.start(Doing::Sending(since));
        t.entered.notify_all();
    }

    /// One change of the entry per request, as this runs on every one.
    fn start(&self, now: Doing) {
        let t = &self.0.table;
        let Some((was, unasked)) = t.change(self.0.slot, |e| {
            let was = std::mem::replace(&mut e.doing, now);
            (was, std::mem::replace(&mut e.asked, false))
        }) else {
            return;
        };
        if was == Doing::Idle {
            // From the back: a connection busy again was usually idle briefly.
            let mut idle = t.idle.borrow_mut();
            if let Some(i) = idle.iter().rposition(|&s| s == self.0.slot) {
                idle.remove(i);
            }
        }
        if unasked {
            t.left.notify_all();
        }
    }

    /// For use while this place lives: its slot goes to another
    /// connection after.
    pub fn watch(&self) -> Watch {
        self.0.clone()
    }

    /// Resolves when this connection is asked to close.
    pub async fn asked(&self) {
        self.0.asked().await
    }
}

impl Watch {
    /// Resolves when the connection is asked to close.
    pub async fn asked(&self) {
        loop {
            let woken = self.table.wake.notified();
            if self.table.with(self.slot, |e| e.asked) != Some(false) {
                return;
            }
            woken.await;
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let t = &self.0.table;
        let mut idle = t.idle.borrow_mut();
        if let Some(i) = idle.iter().rposition(|&s| s == self.0.slot) {
            idle.remove(i);
        }
        drop(idle);
        let gone = t
            .entries
            .borrow_mut()
            .get_mut(self.0.slot)
            .and_then(Option::take);
        t.free.borrow_mut().push(self.0.slot);
        if let Some(e) = gone {
            t.tally(&e, false);
            if e.asked {
                t.left.notify_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(s: &str) -> Client {
        crate::net::client::OnLink::default().client(s.parse::<std::net::IpAddr>().unwrap())
    }

    fn asked(p: &Place) -> bool {
        p.0.table.with(p.0.slot, |e| e.asked).unwrap_or(false)
    }

    #[test]
    fn the_oldest_idle_is_asked_first_and_leavers_are_forgotten() {
        let q = Reclaim::new(8);
        let a = q.enter(client("10.0.0.1")).unwrap();
        let b = q.enter(client("10.0.0.2")).unwrap();
        let c = q.enter(client("10.0.0.3")).unwrap();
        drop(a);
        assert!(q.ask_one());
        assert!(asked(&b) && !asked(&c));
        drop(b);
        assert!(q.ask_one());
        assert!(asked(&c));
        drop(c);
        assert!(!q.ask_one(), "nobody is left");
    }

    #[test]
    fn a_client_holds_at_most_its_share() {
        let q = Reclaim::new(2);
        let a = client("10.0.0.1");
        let held = [q.enter(a).unwrap(), q.enter(a).unwrap()];
        assert!(q.enter(a).is_err());
        assert!(q.enter(client("10.0.0.2")).is_ok());
        drop(held);
        assert!(q.enter(a).is_ok(), "given back");
        let q = q.limited(1);
        let one = q.enter(a).unwrap();
        assert!(q.enter(a).is_err(), "the new share");
        drop(one);
        let device = client("127.0.0.1");
        let held: Vec<_> = (0..3).filter_map(|_| q.enter(device).ok()).collect();
        assert_eq!(held.len(), 3, "the device itself has no share");
    }

    #[test]
    fn with_none_idle_the_busiest_clients_sender_is_asked() {
        let q = Reclaim::new(8);
        let (a, b) = (client("10.0.0.1"), client("10.0.0.2"));
        let own = q.enter(b).unwrap();
        own.busy();
        let many: Vec<Place> = (0..3).map(|_| q.enter(a).unwrap()).collect();
        many.iter().for_each(|p| p.busy());
        assert!(!q.ask_one(), "none is idle or sending");
        own.sending();
        many[1].sending();
        many[2].sending();
        assert!(q.ask_one());
        assert!(asked(&many[1]) && !asked(&many[2]) && !asked(&own));
        // The asked one no longer counts: 2 against 1.
        assert!(q.ask_one());
        assert!(asked(&many[2]) && !asked(&own));
        // One connection each: the one sending longest.
        assert!(q.ask_one());
        assert!(asked(&own));
        assert!(!q.ask_one(), "none left sending");
        many[0].idle();
        drop((own, many));
        assert!(q.0.held.borrow().is_empty(), "every count given back");
        assert!(Table::each(&q.0.entries.borrow()).next().is_none());
        assert!(q.0.idle.borrow().is_empty());
    }

    #[test]
    fn one_asked_while_idle_goes_on_if_its_request_came_first() {
        use futures_lite::future::{block_on, poll_once};
        let q = Reclaim::new(8);
        let (a, b) = (
            q.enter(client("10.0.0.1")).unwrap(),
            q.enter(client("10.0.0.1")).unwrap(),
        );
        let mut left = Box::pin(q.left().notified());
        assert!(block_on(poll_once(&mut left)).is_none());
        assert!(q.ask_one());
        assert!(block_on(poll_once(Box::pin(a.asked()))).is_some());
        a.busy();
        assert!(block_on(poll_once(&mut left)).is_some());
        assert!(block_on(poll_once(Box::pin(a.asked()))).is_none());
        drop(b);
        assert!(q.enter(client("10.0.0.1")).is_ok());
    }
}
