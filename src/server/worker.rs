//! One worker process: a single-threaded executor over async-io that accepts
//! on the shared listening sockets, serves connections up to its share of the
//! connection limit, and stops gracefully on SIGTERM.

use std::cell::{Cell, RefCell};
use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::time::Duration;

use async_executor::LocalExecutor;
use async_io::{Async, Timer};
use futures_lite::future;
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::config::Config;
use crate::http::clock::Clock;
use crate::http::request::Version;
use crate::http::response::{self, HeadContext, Response};
use crate::limits::ACCEPT_BACKOFF;
use crate::logs::access_log::AccessLog;
use crate::net::buffers::Pool;
use crate::net::deadline::Deadlines;
use crate::net::notify::Notify;
use crate::server::conn;
use crate::server::router::Site;
use crate::sys;

/// Everything a worker's connections share. Lives for the whole process.
pub struct Worker {
    pub config: &'static Config,
    pub site: Site,
    pub clock: Clock,
    pub deadlines: Deadlines,
    pub pool: Pool,
    pub access_log: RefCell<AccessLog>,
    active: Cell<usize>,
    limit: usize,
    slot_freed: Notify,
    stopping: Cell<bool>,
    /// Replaced by a reload: no new connections, none kept alive, exit when idle.
    retiring: Cell<bool>,
    /// Wakes accept loops and idle connections on stop or retirement, and
    /// the drain when the last connection ends.
    pub stop: Notify,
    /// SIGCHLD arrived: CGI tasks check whether their script has exited.
    pub child_exited: Notify,
    cgi_running: Cell<usize>,
    cgi_limit: usize,
}

impl Worker {
    pub fn is_stopping(&self) -> bool {
        self.stopping.get()
    }

    /// Whether connections should close after their current request.
    pub fn is_winding_down(&self) -> bool {
        self.stopping.get() || self.retiring.get()
    }

    /// Writes the head of `r` with this worker's Date and Server lines;
    /// `more` adds headers the response does not carry itself (a CGI script's).
    pub fn write_head(
        &self,
        out: &mut Vec<u8>,
        r: &Response,
        version: Version,
        keep_alive: bool,
        more: &dyn Fn(&mut Vec<u8>),
    ) {
        let start = self.clock.head_start();
        let cx = HeadContext {
            version,
            keep_alive,
            ok_start: &start,
        };
        response::write_head_with(out, r, &cx, more);
    }

    /// Takes a slot for a CGI script; false at the limit.
    pub fn cgi_slot(&self) -> bool {
        let running = self.cgi_running.get();
        if running >= self.cgi_limit {
            return false;
        }
        self.cgi_running.set(running + 1);
        true
    }

    pub fn release_cgi_slot(&self) {
        self.cgi_running
            .set(self.cgi_running.get().saturating_sub(1));
    }

    /// Marks a connection as gone and wakes an accept loop waiting at the limit.
    pub fn release_slot(&self) {
        self.active.set(self.active.get() - 1);
        self.slot_freed.notify_all();
        if self.is_winding_down() && self.active.get() == 0 {
            self.stop.notify_all();
        }
    }
}

/// Runs a worker until it is told to stop; never returns.
pub fn run(config: &'static Config, listeners: Vec<OwnedFd>, workers: usize) -> ! {
    sys::die_with_parent();
    let worker: &'static Worker = Box::leak(Box::new(Worker {
        config,
        site: Site::new(config),
        clock: Clock::new(config.server_name.as_deref()),
        deadlines: Deadlines::default(),
        pool: Pool::default(),
        access_log: RefCell::new(AccessLog::open(&config.access_log)),
        active: Cell::new(0),
        limit: config.max_connections.div_ceil(workers).max(1),
        slot_freed: Notify::default(),
        stopping: Cell::new(false),
        retiring: Cell::new(false),
        stop: Notify::default(),
        child_exited: Notify::default(),
        cgi_running: Cell::new(0),
        cgi_limit: config.cgi.max.div_ceil(workers).max(1),
    }));
    let ex = Rc::new(LocalExecutor::new());
    let code = async_io::block_on(ex.run(serve(worker, ex.clone(), listeners)));
    std::process::exit(code)
}

async fn serve(w: &'static Worker, ex: Rc<LocalExecutor<'static>>, listeners: Vec<OwnedFd>) -> i32 {
    let signals = match SignalFd::with_flags(
        &sys::handled_signals(),
        SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC,
    )
    .and_then(|fd| Async::new(fd).map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0))))
    {
        Ok(s) => s,
        Err(e) => {
            log::error!("signalfd: {e}");
            return 1;
        }
    };
    ex.spawn(w.deadlines.tick()).detach();
    for fd in listeners {
        match Async::new(TcpListener::from(fd)) {
            Ok(l) => ex.spawn(accept_loop(w, ex.clone(), l)).detach(),
            Err(e) => {
                log::error!("listener: {e}");
                return 1;
            }
        }
    }
    loop {
        let signal = signals
            .read_with(|s| s.read_signal()?.ok_or(Errno::EAGAIN.into()))
            .await;
        match signal.map(|s| Signal::try_from(s.ssi_signo as i32)) {
            Ok(Ok(Signal::SIGTERM | Signal::SIGINT)) => break,
            Ok(Ok(Signal::SIGHUP)) => w.access_log.borrow_mut().reopen(&w.config.access_log),
            Ok(Ok(Signal::SIGCHLD)) => w.child_exited.notify_all(),
            Ok(Ok(Signal::SIGUSR2)) if !w.retiring.get() => retire(w, &ex),
            Ok(_) => {}
            Err(e) => log::warn!("reading signals: {e}"),
        }
    }
    drain(w).await;
    0
}

/// After a reload: stop accepting, let every connection end after its next
/// response (or its keep-alive timeout), then exit. SIGTERM still drains.
fn retire(w: &'static Worker, ex: &LocalExecutor<'static>) {
    w.retiring.set(true);
    w.stop.notify_all();
    ex.spawn(async move {
        while w.active.get() > 0 {
            w.stop.notified().await;
        }
        std::process::exit(0);
    })
    .detach();
}

/// Stops accepting, closes idle connections and gives busy ones the grace period.
async fn drain(w: &'static Worker) {
    w.stopping.set(true);
    w.stop.notify_all();
    let deadline = Timer::after(w.config.grace);
    let all_done = async {
        while w.active.get() > 0 {
            w.stop.notified().await;
        }
    };
    if future::or(
        async {
            all_done.await;
            true
        },
        async {
            deadline.await;
            false
        },
    )
    .await
    {
        return;
    }
    log::warn!(
        "{} connection(s) still busy after the grace period; closing them",
        w.active.get()
    );
}

async fn accept_loop(
    w: &'static Worker,
    ex: Rc<LocalExecutor<'static>>,
    listener: Async<TcpListener>,
) {
    let mut last_warning: Option<std::time::Instant> = None;
    loop {
        while w.active.get() >= w.limit && !w.is_winding_down() {
            future::or(w.slot_freed.notified(), w.stop.notified()).await;
        }
        if w.is_winding_down() {
            return;
        }
        let accepted = future::or(async { Some(listener.accept().await) }, async {
            w.stop.notified().await;
            None
        })
        .await;
        match accepted {
            None => return,
            Some(Ok((stream, peer))) => {
                sys::set_nodelay(stream.get_ref());
                w.active.set(w.active.get() + 1);
                ex.spawn(conn::serve(w, stream, peer)).detach();
            }
            // A client gone before we took it (ECONNABORTED and the like): next.
            Some(Err(e)) if !out_of_resources(&e) => log::debug!("accept: {e}"),
            Some(Err(e)) => {
                // EMFILE and friends: wait instead of spinning on a socket that stays readable.
                if last_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                    log::warn!("accept: {e}; pausing accepts briefly");
                    last_warning = Some(std::time::Instant::now());
                }
                Timer::after(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// Accept errors that stay until something is freed (descriptors, memory).
fn out_of_resources(e: &std::io::Error) -> bool {
    let code = e.raw_os_error().map(Errno::from_raw);
    matches!(
        code,
        Some(Errno::EMFILE | Errno::ENFILE | Errno::ENOBUFS | Errno::ENOMEM)
    )
}

/// Keeps `TcpStream` in the signature of this module's users.
pub type Stream = Async<TcpStream>;
