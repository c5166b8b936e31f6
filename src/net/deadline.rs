//! Coarse deadlines for a worker's waits (head, keep-alive, send, CGI).
//!
//! An async-io `Timer` per wait costs a reactor notification (an eventfd
//! write, a futex wake and a timerfd update: four system calls) on every
//! request. Here a wait only takes a slot in a table, and a periodic
//! SIGALRM, read from the worker's signalfd and on while anything waits,
//! wakes the waits whose deadline has passed. A deadline fires up to two
//! `TICK`s late (see `after`), which is nothing next to timeouts counted in
//! seconds. No reactor timer is involved: with none pending, the reactor's
//! wait sets no timeout and re-arms nothing.
//!
//! The table is also the worker's clock. While the alarm rings, the time
//! read at its last tick serves every deadline made and the Date header, so
//! a request reads no clock of its own (a system call where the C library
//! has no vDSO path for it, as on MIPS); with the alarm off, each look reads
//! the clock afresh.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::limits::TICK;
use crate::sys;

struct Slot {
    at: Instant,
    waker: Option<Waker>,
}

#[derive(Default)]
pub struct Deadlines {
    slots: RefCell<Vec<Option<Slot>>>,
    free: RefCell<Vec<usize>>,
    waiting: Cell<usize>,
    /// The alarm is on.
    ringing: Cell<bool>,
    /// The monotonic clock and the wall clock's second as last read.
    seen: Cell<Option<(Instant, u64)>>,
}

impl Deadlines {
    /// The time now, as of the alarm's last tick (at most `TICK` ago) while
    /// it rings.
    pub fn now(&self) -> Instant {
        self.clock().0
    }

    /// The wall clock's second now (for the Date header and the access
    /// log), as `now` reads it.
    pub fn wall_secs(&self) -> u64 {
        self.clock().1
    }

    /// The deadline `d` from now. Counted from the last tick, which may be
    /// up to `TICK` ago, plus that `TICK`: a wait is never cut short.
    pub fn after(&self, d: Duration) -> Instant {
        let slack = if self.ringing.get() {
            TICK
        } else {
            Duration::ZERO
        };
        self.now() + d + slack
    }

    fn clock(&self) -> (Instant, u64) {
        match self.seen.get() {
            Some(seen) if self.ringing.get() => seen,
            _ => self.read_clock(),
        }
    }

    fn read_clock(&self) -> (Instant, u64) {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let seen = (Instant::now(), wall);
        self.seen.set(Some(seen));
        seen
    }

    /// Resolves once `at` has passed.
    pub fn until(&self, at: Instant) -> Expiry<'_> {
        Expiry {
            table: self,
            at,
            slot: None,
        }
    }

    /// SIGALRM arrived: wakes the expired waits, or turns the alarm off
    /// when nothing waits.
    pub fn alarmed(&self) {
        if self.waiting.get() == 0 {
            sys::set_alarm(None);
            self.ringing.set(false);
            return;
        }
        let (now, _) = self.read_clock();
        let due: Vec<Waker> = self
            .slots
            .borrow_mut()
            .iter_mut()
            .flatten()
            .filter(|s| s.at <= now)
            .filter_map(|s| s.waker.take())
            .collect();
        due.into_iter().for_each(Waker::wake);
    }

    fn register(&self, at: Instant, waker: &Waker) -> usize {
        self.waiting.set(self.waiting.get() + 1);
        if !self.ringing.get() {
            // The clock is read at each tick from here on: read it once now.
            self.read_clock();
            self.ringing.set(true);
            sys::set_alarm(Some(TICK));
        }
        let slot = Some(Slot {
            at,
            waker: Some(waker.clone()),
        });
        let mut slots = self.slots.borrow_mut();
        match self.free.borrow_mut().pop() {
            Some(i) => {
                slots[i] = slot;
                i
            }
            None => {
                slots.push(slot);
                slots.len() - 1
            }
        }
    }

    fn release(&self, i: usize) {
        if let Some(s) = self.slots.borrow_mut().get_mut(i) {
            *s = None;
        }
        self.free.borrow_mut().push(i);
        self.waiting.set(self.waiting.get() - 1);
    }
}

pub struct Expiry<'a> {
    table: &'a Deadlines,
    at: Instant,
    slot: Option<usize>,
}

impl Future for Expiry<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.slot {
            // The first poll only takes a slot: the clock is read when the
            // ticker (or the raced future) wakes us, not on every wait. A
            // deadline already past fires at the next tick.
            None => self.slot = Some(self.table.register(self.at, cx.waker())),
            Some(_) if self.table.now() >= self.at => return Poll::Ready(()),
            Some(i) => {
                if let Some(Some(s)) = self.table.slots.borrow_mut().get_mut(i) {
                    s.waker = Some(cx.waker().clone());
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for Expiry<'_> {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            self.table.release(i);
        }
    }
}

/// Runs `fut` until `at` at most: `None` once `at` has passed.
///
/// A plain struct rather than an `async fn` over `future::or`: every wait
/// of every connection is one of these, and the async version's state was
/// three times the size of the two futures it races.
pub fn within<F: Future>(deadlines: &Deadlines, at: Instant, fut: F) -> Within<'_, F> {
    Within {
        fut,
        expiry: deadlines.until(at),
    }
}

pub struct Within<'a, F> {
    fut: F,
    expiry: Expiry<'a>,
}

impl<F: Future> Future for Within<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: nothing is moved out of `this`; `expiry` is Unpin.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: `fut` lives pinned inside the pinned `Within`, never moved.
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        if let Poll::Ready(out) = fut.poll(cx) {
            return Poll::Ready(Some(out));
        }
        Pin::new(&mut this.expiry).poll(cx).map(|()| None)
    }
}
