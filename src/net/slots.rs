//! A counted resource (connections, running scripts): a slot is taken as
//! a guard and given back when the guard is dropped, on every path. A slot
//! holds its count, not a borrow of it, so it can go into a task of its own.
//! A clone of `Slots` is the same count: a reload's new generation takes
//! from the count the one it replaced still holds slots of, under the
//! limit its configuration sets.

use std::cell::Cell;
use std::rc::Rc;

use crate::net::notify::Notify;

#[derive(Clone)]
pub struct Slots(Rc<Count>);

struct Count {
    taken: Cell<usize>,
    limit: Cell<usize>,
    /// Woken each time a slot is given back.
    freed: Notify,
}

/// One taken slot; dropping it gives it back.
pub struct Slot(Rc<Count>);

impl Slots {
    pub fn new(limit: usize) -> Slots {
        Slots(Rc::new(Count {
            taken: Cell::new(0),
            limit: Cell::new(limit.max(1)),
            freed: Notify::default(),
        }))
    }

    /// The same count under `limit`: slots taken beyond a lowered limit
    /// stay taken until given back, and none is taken meanwhile.
    pub fn limited(&self, limit: usize) -> Slots {
        self.0.limit.set(limit.max(1));
        self.0.freed.notify_all();
        self.clone()
    }

    /// A slot, or `None` when all are taken.
    pub fn take(&self) -> Option<Slot> {
        let taken = self.0.taken.get();
        if taken >= self.0.limit.get() {
            return None;
        }
        self.0.taken.set(taken + 1);
        Some(Slot(self.0.clone()))
    }

    /// Woken each time a slot is given back.
    pub fn freed(&self) -> &Notify {
        &self.0.freed
    }

    pub fn in_use(&self) -> usize {
        self.0.taken.get()
    }

    pub fn is_full(&self) -> bool {
        self.0.taken.get() >= self.0.limit.get()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.taken.set(self.0.taken.get() - 1);
        self.0.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_slot_is_given_back() {
        let slots = Slots::new(2);
        let a = slots.take();
        let b = slots.take();
        assert!(a.is_some() && b.is_some());
        assert!(slots.take().is_none() && slots.is_full());
        drop(a);
        assert_eq!(slots.in_use(), 1);
        assert!(slots.take().is_some(), "taken and given back at once");
        assert_eq!(slots.in_use(), 1);
    }

    #[test]
    fn a_new_limit_applies_to_the_slots_already_taken() {
        let first = Slots::new(3);
        let held = [first.take(), first.take()];
        let second = first.limited(2);
        assert!(second.take().is_none() && first.is_full(), "one count");
        let second = second.limited(3);
        let third = second.take();
        assert!(third.is_some() && first.in_use() == 3);
        drop(held);
        assert_eq!(second.in_use(), 1);
    }
}
