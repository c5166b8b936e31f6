//! The long-lived answers' budget (tunnels, event streams) of a worker's
//! backend connections. When it is full, a newcomer does not lose to a
//! stream that passed no login: the oldest such stream is cut for it.
//! Streams that passed an `auth` realm are never cut for another.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use crate::net::notify::Notify;

/// A clone is the same budget (see `Slots`).
#[derive(Clone)]
pub struct Streams(Rc<Open>);

struct Open {
    limit: Cell<usize>,
    entries: RefCell<Vec<Entry>>,
    next: Cell<u64>,
}

struct Entry {
    id: u64,
    logged_in: bool,
    since: Instant,
    cut: Rc<Cut>,
}

/// Set when a stream is cut for a newcomer.
#[derive(Default)]
pub struct Cut {
    done: Cell<bool>,
    notify: Notify,
}

impl Cut {
    /// Resolves once the stream has been cut.
    pub async fn wait(&self) {
        while !self.done.get() {
            self.notify.notified().await;
        }
    }
}

/// A long-lived answer's place in the budget; dropping it gives it back.
pub struct Place {
    open: Rc<Open>,
    id: u64,
    cut: Rc<Cut>,
}

impl Streams {
    pub fn new(limit: usize) -> Streams {
        Streams(Rc::new(Open {
            limit: Cell::new(limit.max(1)),
            entries: RefCell::new(Vec::new()),
            next: Cell::new(0),
        }))
    }

    /// The same budget under a new limit (a reload): places held beyond a
    /// lowered limit stay until given back.
    pub fn limited(&self, limit: usize) -> Streams {
        self.0.limit.set(limit.max(1));
        self.clone()
    }

    /// A place for a long-lived answer of a request that passed a login
    /// (`logged_in`) or not; `None` when every place is held by one that
    /// passed a login.
    pub fn take(&self, logged_in: bool) -> Option<Place> {
        let open = &self.0;
        let mut entries = open.entries.borrow_mut();
        if entries.len() >= open.limit.get() {
            let oldest = (0..entries.len())
                .filter(|&i| !entries[i].logged_in)
                .min_by_key(|&i| entries[i].since);
            let i = oldest?;
            let gone = entries.swap_remove(i);
            gone.cut.done.set(true);
            gone.cut.notify.notify_all();
            log::info!(
                "proxy: {} long-lived answers open; the oldest without a login is cut for a newcomer",
                open.limit.get()
            );
        }
        let id = open.next.get();
        open.next.set(id + 1);
        let cut = Rc::new(Cut::default());
        entries.push(Entry {
            id,
            logged_in,
            since: Instant::now(),
            cut: cut.clone(),
        });
        Some(Place {
            open: open.clone(),
            id,
            cut,
        })
    }
}

impl Place {
    /// What tells this stream it has been cut for a newcomer.
    pub fn cut(&self) -> Rc<Cut> {
        self.cut.clone()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut entries = self.open.entries.borrow_mut();
        if let Some(i) = entries.iter().position(|e| e.id == self.id) {
            entries.swap_remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A place, and whether another was cut for it.
    fn place(streams: &Streams, logged_in: bool) -> Option<(Place, bool)> {
        let before: Vec<_> = streams
            .0
            .entries
            .borrow()
            .iter()
            .map(|e| e.cut.clone())
            .collect();
        let p = streams.take(logged_in)?;
        Some((p, before.iter().any(|c| c.done.get())))
    }

    #[test]
    fn a_newcomer_takes_the_place_of_the_oldest_stream_without_a_login() {
        let streams = Streams::new(3);
        let (old, _) = place(&streams, false).unwrap();
        let (admin, _) = place(&streams, true).unwrap();
        let (newer, _) = place(&streams, false).unwrap();
        let (a, cut) = place(&streams, false).unwrap();
        assert!(cut && old.cut.done.get(), "the oldest without a login");
        assert!(!admin.cut.done.get() && !newer.cut.done.get());
        let (b, cut) = place(&streams, true).unwrap();
        assert!(cut && newer.cut.done.get());
        let (c, cut) = place(&streams, false).unwrap();
        assert!(cut && a.cut.done.get());
        drop(c);
        assert_eq!(streams.0.entries.borrow().len(), 2, "given back");
        let (c, cut) = place(&streams, false).unwrap();
        assert!(!cut);
        let (_d, cut) = place(&streams, true).unwrap();
        assert!(cut && c.cut.done.get());
        assert!(place(&streams, false).is_none(), "all logged in");
        drop((old, newer, a));
        assert_eq!(streams.0.entries.borrow().len(), 3);
        drop((admin, b));
    }
}
