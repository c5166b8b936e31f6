//! A worker's connections to its backends: at most `proxy-max` open, of
//! them at most `proxy-max-per-client` for one client address and at most
//! `proxy-max-streams` carrying long-lived answers (tunnels, event
//! streams), so that short requests from anyone else always find room;
//! and a few idle ones per route kept for the next request. A kept
//! connection the backend has closed (readable with end of stream) is
//! never used.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use crate::limits::{PROXY_IDLE, PROXY_IDLE_FOR};
use crate::net::client::Client;
use crate::net::deadline::Deadlines;
use crate::net::share::{Share, Shares};
use crate::net::slots::{Slot, Slots};
use crate::proxy::backend::{Failed, Stream};
use crate::proxy::settings::{Address, Settings};

pub struct Pool {
    open: Slots,
    /// Connections carrying a long-lived answer, counted in `open` too.
    long: Slots,
    shares: Shares,
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
    /// The client's share while it uses the connection; none while kept.
    share: Option<Share>,
    /// Its place among the long-lived answers, once it carries one.
    long: Cell<Option<Slot>>,
}

/// Why no connection could be had.
pub enum Unavailable {
    /// This worker has `proxy-max` connections open.
    Busy,
    /// The client's address holds its `proxy-max-per-client`.
    ClientShare,
    Failed(Failed),
}

impl Pool {
    pub fn new(settings: &Settings) -> Pool {
        Pool {
            open: Slots::new(settings.max),
            long: Slots::new(settings.streams()),
            shares: Shares::new(settings.per_client()),
            idle: RefCell::new(Vec::new()),
        }
    }

    /// Counts `lease` among the long-lived answers; false when they are
    /// at their limit.
    pub fn go_long(&self, lease: &Lease) -> bool {
        let slot = match lease.long.take() {
            Some(s) => s,
            None => match self.long.take() {
                Some(s) => s,
                None => return false,
            },
        };
        lease.long.set(Some(slot));
        true
    }

    /// A kept connection to route `route`'s backend, else a new one.
    pub async fn take(
        &self,
        route: usize,
        address: &Address,
        client: Client,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Lease, Unavailable> {
        let share = self.shares.take(client).ok_or(Unavailable::ClientShare)?;
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
                lease.share = Some(share);
                return Ok(lease);
            }
        }
        self.open_new(address, share, deadlines, until).await
    }

    /// A new connection, closing an idle one (to any backend) when the
    /// limit is reached.
    pub async fn connect(
        &self,
        address: &Address,
        client: Client,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Lease, Unavailable> {
        let share = self.shares.take(client).ok_or(Unavailable::ClientShare)?;
        self.open_new(address, share, deadlines, until).await
    }

    async fn open_new(
        &self,
        address: &Address,
        share: Share,
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
            share: Some(share),
            long: Cell::new(None),
        })
    }

    /// Closes the kept connections (a generation replaced by a reload).
    pub fn close_idle(&self) {
        self.idle.borrow_mut().clear();
    }

    /// Keeps a connection whose last exchange ended cleanly.
    pub fn give_back(&self, route: usize, mut lease: Lease) {
        lease.share = None;
        lease.long.set(None);
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
