//! A wake-up for many waiters on one thread: "a connection slot is free",
//! "the server is stopping". Waiters re-check their condition after waking.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Notify {
    /// Slots of registered wakers; freed slots are reused so the table never
    /// grows past the number of waiters at one time.
    slots: RefCell<Vec<Option<Waker>>>,
    free: RefCell<Vec<usize>>,
}

impl Notify {
    /// Resolves after the next `notify_all` (or a spurious wake-up).
    pub fn notified(&self) -> Notified<'_> {
        Notified {
            notify: self,
            slot: None,
        }
    }

    pub fn notify_all(&self) {
        let wakers: Vec<Waker> = self
            .slots
            .borrow_mut()
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        wakers.into_iter().for_each(Waker::wake);
    }

    fn register(&self, waker: &Waker) -> usize {
        let mut slots = self.slots.borrow_mut();
        match self.free.borrow_mut().pop() {
            Some(i) => {
                slots[i] = Some(waker.clone());
                i
            }
            None => {
                slots.push(Some(waker.clone()));
                slots.len() - 1
            }
        }
    }

    fn release(&self, slot: usize) {
        if let Some(s) = self.slots.borrow_mut().get_mut(slot) {
            *s = None;
        }
        self.free.borrow_mut().push(slot);
    }
}

pub struct Notified<'a> {
    notify: &'a Notify,
    slot: Option<usize>,
}

impl Future for Notified<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.slot {
            None => {
                self.slot = Some(self.notify.register(cx.waker()));
                Poll::Pending
            }
            Some(i) => {
                // Woken (our waker was taken) or polled again for another reason.
                let taken = self
                    .notify
                    .slots
                    .borrow()
                    .get(i)
                    .is_none_or(Option::is_none);
                if taken {
                    Poll::Ready(())
                } else {
                    self.notify.slots.borrow_mut()[i] = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        }
    }
}

impl Drop for Notified<'_> {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            self.notify.release(i);
        }
    }
}
