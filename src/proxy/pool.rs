//! A worker's connections to its backends: at most `proxy-max` open, and
//! a few idle ones per route kept for the next request. A kept connection
//! the backend has closed (readable with end of stream) is never used.

use std::cell::RefCell;
use std::time::Instant;

use crate::limits::{PROXY_IDLE, PROXY_IDLE_FOR};
use crate::net::deadline::Deadlines;
use crate::net::slots::{Slot, Slots};
use crate::proxy::backend::{Failed, Stream};
use crate::proxy::settings::Address;

pub struct Pool {
    open: Slots,
    idle: RefCell<Vec<Kept>>,
}

struct Kept {
    route: usize,
    since: Instant,
    lease: Lease,
}

/// A backend connection in use; its slot is given back when it is dropped.
pub struct Lease {
    pub stream: Stream,
    /// It carried an earlier request.
    pub reused: bool,
    _slot: Slot,
}

/// Why no connection could be had.
pub enum Unavailable {
    /// This worker has `proxy-max` connections open.
    Busy,
    Failed(Failed),
}

impl Pool {
    pub fn new(max: usize) -> Pool {
        Pool {
            open: Slots::new(max),
            idle: RefCell::new(Vec::new()),
        }
    }

    /// A kept connection to route `route`'s backend, else a new one.
    pub async fn take(
        &self,
        route: usize,
        address: &Address,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Lease, Unavailable> {
        loop {
            let kept = {
                let mut idle = self.idle.borrow_mut();
                let i = idle.iter().rposition(|k| k.route == route);
                i.map(|i| idle.remove(i))
            };
            let Some(kept) = kept else { break };
            if kept.since.elapsed() < PROXY_IDLE_FOR && kept.lease.stream.is_fresh() {
                let mut lease = kept.lease;
                lease.reused = true;
                return Ok(lease);
            }
        }
        self.connect(address, deadlines, until).await
    }

    /// A new connection, closing an idle one (to any backend) when the
    /// limit is reached.
    pub async fn connect(
        &self,
        address: &Address,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Lease, Unavailable> {
        let slot = match self.open.take() {
            Some(s) => s,
            None => {
                let oldest = {
                    let mut idle = self.idle.borrow_mut();
                    (!idle.is_empty()).then(|| idle.remove(0))
                };
                drop(oldest);
                self.open.take().ok_or(Unavailable::Busy)?
            }
        };
        let stream = Stream::connect(address, deadlines, until)
            .await
            .map_err(Unavailable::Failed)?;
        Ok(Lease {
            stream,
            reused: false,
            _slot: slot,
        })
    }

    /// Closes the kept connections (a generation replaced by a reload).
    pub fn close_idle(&self) {
        self.idle.borrow_mut().clear();
    }

    /// Keeps a connection whose last exchange ended cleanly.
    pub fn give_back(&self, route: usize, lease: Lease) {
        let mut idle = self.idle.borrow_mut();
        if idle.iter().filter(|k| k.route == route).count() >= PROXY_IDLE {
            if let Some(i) = idle.iter().position(|k| k.route == route) {
                idle.remove(i);
            }
        }
        idle.push(Kept {
            route,
            since: Instant::now(),
            lease,
        });
    }
}
