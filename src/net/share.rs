//! Each client's share of a counted resource (backend connections,
//! running scripts, ubus calls), so that one client holding all it can
//! leaves room for the others; and each client network's, so that a host
//! taking many addresses of its network leaves room for the other
//! networks (`net::client` says who a client is).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::net::client::Net;

/// A clone is the same count (see `Slots`).
#[derive(Clone)]
pub struct Shares(Rc<Held>);

struct Held {
    /// The clients (or networks) holding connections, each with how many
    /// (never 0).
    by_client: RefCell<Vec<(Net, usize)>>,
    per_client: Cell<usize>,
}

/// One place counted for a client; dropping it gives it back. It
/// holds the count, not a borrow of it, as a slot does (`net/slots.rs`).
pub struct Share {
    held: Rc<Held>,
    client: Net,
}

impl Shares {
    pub fn new(per_client: usize) -> Shares {
        Shares(Rc::new(Held {
            by_client: RefCell::new(Vec::new()),
            per_client: Cell::new(per_client.max(1)),
        }))
    }

    /// The same count under a new share per client.
    pub fn limited(&self, per_client: usize) -> Shares {
        self.0.per_client.set(per_client.max(1));
        self.clone()
    }

    /// A share for `client`, or `None` when it holds all its own.
    pub fn take(&self, client: Net) -> Option<Share> {
        let mut held = self.0.by_client.borrow_mut();
        match held.iter_mut().find(|(c, _)| *c == client) {
            Some((_, n)) if *n >= self.0.per_client.get() => return None,
            Some((_, n)) => *n += 1,
            None => held.push((client, 1)),
        }
        Some(Share {
            held: self.0.clone(),
            client,
        })
    }
}

impl Shares {
    /// How many `client` holds (the ubus endpoint's turns go by it).
    #[cfg_attr(not(feature = "ubus"), allow(dead_code))]
    pub fn held(&self, client: Net) -> usize {
        let held = self.0.by_client.borrow();
        held.iter()
            .find(|(c, _)| *c == client)
            .map_or(0, |(_, n)| *n)
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.held.by_client.borrow_mut();
        if let Some(i) = held.iter().position(|(c, _)| *c == self.client) {
            held[i].1 -= 1;
            if held[i].1 == 0 {
                held.swap_remove(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(ip: &str) -> Net {
        crate::net::client::OnLink::default()
            .client(ip.parse().unwrap())
            .id()
    }

    #[test]
    fn an_address_holds_its_share_and_others_theirs() {
        let shares = Shares::new(2);
        let a = client("192.0.2.1");
        let held = [shares.take(a), shares.take(a)];
        assert!(held.iter().all(Option::is_some));
        assert!(shares.take(a).is_none());
        assert!(shares.take(client("192.0.2.2")).is_some());
        drop(held);
        assert!(shares.take(a).is_some(), "given back");
        assert!(
            shares.0.by_client.borrow().is_empty(),
            "no entry left behind"
        );
    }
}
