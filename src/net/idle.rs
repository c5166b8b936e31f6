//! Connections with no request under way (still in their TLS handshake,
//! waiting for a request or receiving its head), oldest first, so that at
//! the connection limit the one waiting longest can be asked to close and
//! make room for a new client (nginx does the same for idle ones). A
//! client that sends nothing, or its head a byte at a time, then holds a
//! slot only until newer clients need it.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use crate::net::notify::Notify;

/// The queue; a place in it holds the queue, not a borrow of it, so it
/// can live in a connection that holds its worker (as a slot does).
/// A clone is the same queue: every generation of a process puts its
/// idle connections in one.
#[derive(Clone, Default)]
pub struct IdleQueue(Rc<Queue>);

#[derive(Default)]
struct Queue {
    next: Cell<u64>,
    waiting: RefCell<VecDeque<u64>>,
    evicted: RefCell<Vec<u64>>,
    wake: Notify,
    /// Woken when a connection becomes idle.
    entered: Notify,
    /// Woken when a connection asked to close leaves the queue: it is
    /// closing, or its request came first and it goes on (then another
    /// must be asked).
    left: Notify,
}

/// A connection's place in the queue while it is idle; dropped when its
/// next request comes (or it closes).
pub struct Idle {
    queue: Rc<Queue>,
    id: u64,
}

impl IdleQueue {
    pub fn enter(&self) -> Idle {
        let q = &self.0;
        let id = q.next.get();
        q.next.set(id + 1);
        q.waiting.borrow_mut().push_back(id);
        q.entered.notify_all();
        Idle {
            queue: q.clone(),
            id,
        }
    }

    /// Woken when a connection becomes idle.
    pub fn entered(&self) -> &Notify {
        &self.0.entered
    }

    /// Woken when a connection asked to close leaves the queue.
    pub fn left(&self) -> &Notify {
        &self.0.left
    }

    /// Asks the connection idle longest to close; false if none is idle.
    pub fn evict_oldest(&self) -> bool {
        let q = &self.0;
        let Some(id) = q.waiting.borrow_mut().pop_front() else {
            return false;
        };
        q.evicted.borrow_mut().push(id);
        q.wake.notify_all();
        true
    }
}

impl Idle {
    /// Resolves when this connection is asked to close.
    pub async fn evicted(&self) {
        loop {
            let woken = self.queue.wake.notified();
            if self.queue.evicted.borrow().contains(&self.id) {
                return;
            }
            woken.await;
        }
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        // From the back: a connection busy again was usually idle briefly.
        let mut waiting = self.queue.waiting.borrow_mut();
        if let Some(i) = waiting.iter().rposition(|&id| id == self.id) {
            waiting.remove(i);
        }
        drop(waiting);
        let mut evicted = self.queue.evicted.borrow_mut();
        let asked = evicted.iter().position(|&id| id == self.id);
        if let Some(i) = asked {
            evicted.swap_remove(i);
        }
        drop(evicted);
        if asked.is_some() {
            self.queue.left.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_is_evicted_first_and_leavers_are_forgotten() {
        let q = IdleQueue::default();
        let a = q.enter();
        let b = q.enter();
        let c = q.enter();
        drop(a);
        assert!(q.evict_oldest());
        assert_eq!(*q.0.evicted.borrow(), vec![b.id]);
        drop(b);
        assert!(q.0.evicted.borrow().is_empty());
        assert!(q.evict_oldest());
        drop(c);
        assert!(!q.evict_oldest(), "nobody is idle");
    }

    #[test]
    fn one_asked_to_close_wakes_the_asker_when_it_leaves() {
        use futures_lite::future::{block_on, poll_once};
        let q = IdleQueue::default();
        let (a, b) = (q.enter(), q.enter());
        let mut left = Box::pin(q.left().notified());
        assert!(block_on(poll_once(&mut left)).is_none());
        drop(b);
        assert!(block_on(poll_once(&mut left)).is_none(), "b was not asked");
        assert!(q.evict_oldest());
        drop(a);
        assert!(block_on(poll_once(&mut left)).is_some());
    }
}
