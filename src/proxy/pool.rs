//! A worker's connections to its backends: at most `proxy-max` open, of
//! them at most `proxy-max-per-client` for one client, half of
//! `proxy-max` for one client network, and `proxy-max` less
//! `proxy-auth-reserve` for requests that passed no `auth` realm, so that
//! short requests from anyone else, and a logged-in owner's above all,
//! always find room (a request that passed a login is held to its own
//! client's share only); at most `proxy-max-streams` carry long-lived
//! answers (tunnels, event streams: `streams`); and a few idle ones per
//! route are kept for the next request. A kept connection the backend has
//! closed (readable with end of stream) is never used.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use crate::limits::{PROXY_IDLE, PROXY_IDLE_FOR};
use crate::net::client::Client;
use crate::net::deadline::Deadlines;
use crate::net::share::{Share, Shares};
use crate::net::slots::{Slot, Slots};
use crate::proxy::backend::{Failed, Stream};
use crate::proxy::settings::{Backend, Settings};
use crate::proxy::streams::{Cut, Place, Streams};

pub struct Pool {
    open: Slots,
    /// Connections in use by requests that passed no login.
    anonymous: Slots,
    /// Connections carrying a long-lived answer, counted in `open` too.
    long: Streams,
    shares: Shares,
    net_shares: Shares,
    idle: RefCell<Vec<Kept>>,
    /// Replaced by a reload's pool: keeps no connection, as the slots it
    /// would hold are the new pool's too.
    retired: Cell<bool>,
}

/// What a request holds while it uses a connection, beside the connection's
/// own slot; each part is given back when it is dropped.
enum Held {
    /// It passed an `auth` realm: its client's share only.
    LoggedIn { _share: Share },
    /// Its client's share, its network's, and a place among the
    /// connections requests without a login may take.
    Anonymous {
        _share: Share,
        _net_share: Share,
        _room: Slot,
    },
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
    /// The request's shares while it uses the connection; none while kept.
    held: Option<Held>,
    /// Its place among the long-lived answers, once it carries one.
    long: RefCell<Option<Place>>,
}

impl Lease {
    /// What tells a long-lived answer it has been cut for a newcomer.
    pub fn cut(&self) -> Option<Rc<Cut>> {
        self.long.borrow().as_ref().map(Place::cut)
    }
}

/// Why no connection could be had.
pub enum Unavailable {
    /// This worker has `proxy-max` connections open.
    Busy,
    /// The client holds its `proxy-max-per-client`.
    ClientShare,
    /// The client's network holds half of `proxy-max`.
    NetShare,
    /// Requests without a login hold all but `proxy-auth-reserve`.
    Anonymous,
    Failed(Failed),
}

impl Pool {
    pub fn new(settings: &Settings) -> Pool {
        Pool {
            open: Slots::new(settings.max),
            anonymous: Slots::new(settings.max - settings.auth_reserve()),
            long: Streams::new(settings.streams()),
            shares: Shares::new(settings.per_client()),
            net_shares: Shares::new(settings.per_net()),
            idle: RefCell::new(Vec::new()),
            retired: Cell::new(false),
        }
    }

    /// The pool of a reload's new generation: the counts of `before`'s
    /// (whose connections under way still hold their places) under the
    /// limits of `settings`; no kept connection, as routes may have
    /// changed.
    pub fn after(settings: &Settings, before: &Pool) -> Pool {
        Pool {
            open: before.open.limited(settings.max),
            anonymous: before
                .anonymous
                .limited(settings.max - settings.auth_reserve()),
            long: before.long.limited(settings.streams()),
            shares: before.shares.limited(settings.per_client()),
            net_shares: before.net_shares.limited(settings.per_net()),
            idle: RefCell::new(Vec::new()),
            retired: Cell::new(false),
        }
    }

    /// Counts `lease` among the long-lived answers, in the place of the
    /// oldest one without a login when they are at their limit; false
    /// when every place is held by one that passed a login.
    pub fn go_long(&self, lease: &Lease) -> bool {
        if lease.long.borrow().is_some() {
            return true;
        }
        let logged_in = matches!(lease.held, Some(Held::LoggedIn { .. }));
        let Some(place) = self.long.take(logged_in) else {
            return false;
        };
        *lease.long.borrow_mut() = Some(place);
        true
    }

    /// What a request from `client` holds while it uses a connection.
    fn hold(&self, client: Client, logged_in: bool) -> Result<Held, Unavailable> {
        let share = self
            .shares
            .take(client.id())
            .ok_or(Unavailable::ClientShare)?;
        if logged_in {
            return Ok(Held::LoggedIn { _share: share });
        }
        let net_share = self
            .net_shares
            .take(client.net())
            .ok_or(Unavailable::NetShare)?;
        let anonymous = self.anonymous.take().ok_or(Unavailable::Anonymous)?;
        Ok(Held::Anonymous {
            _share: share,
            _net_share: net_share,
            _room: anonymous,
        })
    }

    /// A kept connection to route `route`'s backend, else a new one.
    pub async fn take(
        &self,
        route: usize,
        address: &Backend,
        client: Client,
        logged_in: bool,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Lease, Unavailable> {
        let held = self.hold(client, logged_in)?;
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
                lease.held = Some(held);
                return Ok(lease);
            }
        }
        self.open_new(address, held, deadlines, until).await
    }

    /// A new connection, closing an idle one (to any backend) when the
    /// limit is reached.
    pub async fn connect(
        &self,
        address: &Backend,
        client: Client,
        logged_in: bool,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Lease, Unavailable> {
        let held = self.hold(client, logged_in)?;
        self.open_new(address, held, deadlines, until).await
    }

    async fn open_new(
        &self,
        address: &Backend,
        held: Held,
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
            held: Some(held),
            long: RefCell::new(None),
        })
    }

    /// Closes the kept connections and keeps none from now on (a
    /// generation replaced by a reload, whose new pool counts the same
    /// slots).
    pub fn retire(&self) {
        self.retired.set(true);
        self.close_idle();
    }

    /// Closes the kept connections.
    pub fn close_idle(&self) {
        self.idle.borrow_mut().clear();
    }

    /// Keeps a connection whose last exchange ended cleanly.
    pub fn give_back(&self, route: usize, mut lease: Lease) {
        if self.retired.get() {
            return;
        }
        lease.held = None;
        *lease.long.get_mut() = None;
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
