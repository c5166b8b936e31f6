//! What a worker's connections share: one generation of the server. Each
//! connection and task of the generation holds it, and the last one to end
//! frees it, the configuration with it. The counts its limits apply to
//! (connections, running scripts, backend connections, login failures)
//! are the process's: a reload's generation takes them over from the one
//! it replaces, whose connections under way still count, and applies its
//! own limits to them.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::cgi::running::Scripts;
use crate::config::Config;
use crate::http::clock::Clock;
#[cfg(feature = "ubus")]
use crate::limits::UBUS_MAX_SUBSCRIBERS;
use crate::limits::{CLIENT_SHARE_MIN, CLIENT_SHARE_PART};
use crate::logs::access_log::AccessLog;
use crate::net::buffers::Pool;
use crate::net::deadline::Deadlines;
use crate::net::notify::Notify;
use crate::net::reclaim::Reclaim;
use crate::net::slots::Slots;
use crate::policy::auth;
use crate::policy::failures::Failures;
use crate::proxy::pool::Pool as ProxyPool;
use crate::server::frames::Frames;
use crate::server::router::Site;
#[cfg(feature = "ubus")]
use crate::ubus::bus::Bus;

pub struct Worker {
    pub config: Rc<Config>,
    pub site: Site,
    pub clock: Clock,
    /// Shared by every generation of a process (one alarm drives it).
    pub deadlines: &'static Deadlines,
    pub pool: Rc<Pool>,
    /// Memory for the future serving one request, reused.
    pub frames: Frames,
    pub access_log: RefCell<AccessLog>,
    /// This worker's share of the connection limit, over every generation.
    pub connections: Slots,
    /// The connections of this generation, counted in `connections` too.
    pub generation_connections: Slots,
    /// Which client holds each connection and which may be asked to
    /// close at the limit, over every generation.
    pub reclaim: Reclaim,
    /// Other workers accept on the same sockets.
    pub shares_listeners: bool,
    /// This worker's share of the scripts that may run at once, and each
    /// client's share of those, over every generation.
    pub scripts: Scripts,
    /// Login failures per client, over every generation.
    pub failures: Rc<RefCell<Failures>>,
    /// Connections to proxy backends, open and kept.
    pub proxy: ProxyPool,
    /// The connection to ubusd, when the ubus endpoint is on.
    #[cfg(feature = "ubus")]
    pub ubus: Option<Bus>,
    stopping: Cell<bool>,
    /// Replaced by a reload: no new connections, none kept alive, exit when idle.
    retiring: Cell<bool>,
    /// Wakes accept loops and idle connections on stop or retirement.
    pub stop: Notify,
    /// SIGCHLD arrived: CGI tasks check whether their script has exited.
    pub child_exited: Notify,
    /// What TLS connections share, when a listener speaks TLS.
    #[cfg(feature = "tls")]
    pub tls: Option<crate::tls::acceptor::Acceptor>,
    /// Which configuration of the process this is: 1 at the start, one
    /// more at each reload (named in the log when it is freed).
    pub generation: u32,
}

/// The most connections one client holds of a worker's `connections`.
fn client_share(connections: usize) -> usize {
    (connections / CLIENT_SHARE_PART).max(CLIENT_SHARE_MIN)
}

impl Worker {
    /// Worker `slot` of `workers`, each with its share of the limits;
    /// with the counts of generation `before`, if it replaces one.
    pub fn new(
        config: Rc<Config>,
        slot: usize,
        workers: usize,
        deadlines: &'static Deadlines,
        before: Option<&Worker>,
    ) -> Worker {
        let connections = config.max_connections.div_ceil(workers);
        let failures = match before {
            Some(b) => b.failures.clone(),
            None => Rc::new(RefCell::new(Failures::new(auth::fail_share(slot, workers)))),
        };
        Worker {
            site: Site::new(config.clone(), failures.clone(), deadlines),
            failures,
            clock: Clock::new(config.server_name.as_deref()),
            deadlines,
            pool: Rc::default(),
            frames: Frames::default(),
            access_log: RefCell::new(AccessLog::open(&config.access_log)),
            connections: match before {
                Some(b) => b.connections.limited(connections),
                None => Slots::new(connections),
            },
            generation_connections: Slots::new(usize::MAX),
            reclaim: match before {
                Some(b) => b.reclaim.limited(client_share(connections)),
                None => Reclaim::new(client_share(connections)),
            },
            shares_listeners: workers > 1,
            scripts: {
                let (max, keep) = (
                    config.cgi.max.div_ceil(workers),
                    config.ubus.prefix.is_some(),
                );
                match before {
                    Some(b) => b.scripts.after(max, keep),
                    None => Scripts::new(max, keep),
                }
            },
            proxy: match before {
                Some(b) => ProxyPool::after(&config.proxy, &b.proxy),
                None => ProxyPool::new(&config.proxy),
            },
            #[cfg(feature = "ubus")]
            ubus: config.ubus.prefix.as_ref().map(|_| {
                let path = config.ubus.socket.clone();
                match before.and_then(|b| b.ubus.as_ref()) {
                    Some(b) => Bus::after(path, b),
                    None => Bus::new(path, deadlines, UBUS_MAX_SUBSCRIBERS),
                }
            }),
            stopping: Cell::new(false),
            retiring: Cell::new(false),
            stop: Notify::default(),
            child_exited: Notify::default(),
            #[cfg(feature = "tls")]
            tls: None,
            generation: 1,
            config,
        }
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.get()
    }

    pub fn is_retiring(&self) -> bool {
        self.retiring.get()
    }

    /// Whether connections should close after their current request.
    pub fn is_winding_down(&self) -> bool {
        self.stopping.get() || self.retiring.get()
    }

    pub fn set_stopping(&self) {
        self.stopping.set(true);
        self.stop.notify_all();
    }

    pub fn set_retiring(&self) {
        self.retiring.set(true);
        self.stop.notify_all();
    }

    /// Waits until every connection of this generation has ended.
    pub async fn all_connections_closed(&self) {
        while self.generation_connections.in_use() > 0 {
            self.generation_connections.freed().notified().await;
        }
    }

    /// Closes what a generation replaced by a reload still holds open once
    /// its last connection has ended, kept backend connections included;
    /// its memory goes with the last task that holds it.
    pub fn release(&self) {
        self.site.root.close();
        self.proxy.close_idle();
        *self.access_log.borrow_mut() = AccessLog::Off;
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        log::debug!("generation {} freed", self.generation);
    }
}
