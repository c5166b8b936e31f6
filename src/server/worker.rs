//! One worker: a single-threaded executor over async-io that accepts on the
//! shared listening sockets, serves connections up to its share of the
//! connection limit, and stops gracefully on SIGTERM. With `workers 1` it is
//! the whole server in one process and reloads in place: a SIGHUP starts a
//! new generation (configuration, root, file cache, access log) for new
//! connections while the old one finishes its own.

use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::rc::Rc;

use async_executor::LocalExecutor;
use async_io::{Async, Timer};
use futures_lite::future;
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::config::{Config, cli};
use crate::limits::{ACCEPT_BACKOFF, ACCEPT_WARNING_EVERY, RECLAIM_AFTER};
use crate::net::deadline::Deadlines;
use crate::server::conn;
use crate::server::state::Worker;
use crate::sys;

/// Whether a supervisor forked this worker, or it is the whole server.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    Forked,
    Alone,
}

/// Runs a forked worker until it is told to stop; never returns.
pub fn run(config: &'static Config, listeners: Vec<OwnedFd>, slot: usize, workers: usize) -> ! {
    sys::die_with_parent();
    std::process::exit(serve(config, listeners, slot, workers, Role::Forked))
}

/// Runs the whole server in this process (`workers 1`); the exit status.
pub fn run_alone(config: Config, listeners: Vec<OwnedFd>) -> i32 {
    serve(Box::leak(Box::new(config)), listeners, 0, 1, Role::Alone)
}

fn serve(
    config: &'static Config,
    listeners: Vec<OwnedFd>,
    slot: usize,
    workers: usize,
    role: Role,
) -> i32 {
    let deadlines: &'static Deadlines = Box::leak(Box::default());
    let worker: &'static Worker =
        Box::leak(Box::new(Worker::new(config, slot, workers, deadlines)));
    let ex = Rc::new(LocalExecutor::new());
    async_io::block_on(ex.run(run_until_stopped(worker, ex.clone(), listeners, role)))
}

async fn run_until_stopped(
    first: &'static Worker,
    ex: Rc<LocalExecutor<'static>>,
    listeners: Vec<OwnedFd>,
    role: Role,
) -> i32 {
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
    let mut sockets = Vec::new();
    for fd in listeners {
        match Async::new(TcpListener::from(fd)) {
            Ok(l) => sockets.push(Rc::new(l)),
            Err(e) => {
                log::error!("listener: {e}");
                return 1;
            }
        }
    }
    let mut w = first;
    start(w, &ex, &sockets, role);
    // Generations replaced by a reload, finishing their connections.
    let mut old: Vec<&'static Worker> = Vec::new();
    loop {
        // Not `read_with`: this future is `run`'s own, polled again on every
        // turn of the executor, and `read_with` reads again on every poll.
        let signal = match signals.readable().await {
            Ok(()) => match signals.get_ref().read_signal() {
                Ok(Some(s)) => Ok(s),
                Ok(None) => continue,
                Err(e) => Err(e),
            },
            Err(e) => Err(Errno::from_raw(e.raw_os_error().unwrap_or(0))),
        };
        old.retain(|g| g.connections.in_use() > 0);
        match signal.map(|s| Signal::try_from(s.ssi_signo as i32)) {
            Ok(Ok(Signal::SIGTERM | Signal::SIGINT)) => break,
            Ok(Ok(Signal::SIGHUP)) if role == Role::Alone => {
                if let Some(config) = cli::reread(w.config) {
                    let config: &'static Config = Box::leak(Box::new(config));
                    let next = Box::leak(Box::new(Worker::new(config, 0, 1, w.deadlines)));
                    w.set_retiring();
                    old.push(w);
                    w = next;
                    start(w, &ex, &sockets, role);
                }
            }
            Ok(Ok(Signal::SIGHUP)) => w.access_log.borrow_mut().reopen(&w.config.access_log),
            Ok(Ok(Signal::SIGCHLD)) => {
                old.iter()
                    .chain([&w])
                    .for_each(|g| g.child_exited.notify_all());
            }
            Ok(Ok(Signal::SIGALRM)) => w.deadlines.alarmed(),
            // The supervisor replaced this worker: finish, then exit.
            Ok(Ok(Signal::SIGUSR2)) if role == Role::Forked => w.set_retiring(),
            Ok(_) => {}
            Err(e) => log::warn!("reading signals: {e}"),
        }
    }
    if role == Role::Alone {
        log::info!("stopping: finishing in-flight responses");
    }
    old.push(w);
    drain(&old).await;
    0
}

/// A generation's accept loops, and the task that keeps its file cache
/// current until a reload replaces it (it stops accepting, and each
/// connection ends after its next response or its keep-alive timeout):
/// then, once its last connection has ended, a forked worker exits and a
/// generation of the one process closes its files. SIGTERM still drains.
fn start(
    w: &'static Worker,
    ex: &Rc<LocalExecutor<'static>>,
    sockets: &[Rc<Async<TcpListener>>],
    role: Role,
) {
    ex.spawn(async move {
        let replaced = async {
            while !(w.is_retiring() && w.connections.in_use() == 0) {
                future::or(w.stop.notified(), w.connections.freed.notified()).await;
            }
        };
        future::or(w.site.root.keep_current(), replaced).await;
        match role {
            Role::Forked => std::process::exit(0),
            Role::Alone => w.release(),
        }
    })
    .detach();
    for l in sockets {
        ex.spawn(accept_loop(w, ex.clone(), l.clone())).detach();
    }
}

/// Stops accepting, closes idle connections and gives busy ones the grace period.
async fn drain(generations: &[&'static Worker]) {
    generations.iter().for_each(|g| g.set_stopping());
    let Some(w) = generations.last() else {
        return;
    };
    let deadline = Timer::after(w.config.grace);
    let all_closed = async {
        for g in generations {
            g.all_connections_closed().await;
        }
        true
    };
    if future::or(all_closed, async {
        deadline.await;
        false
    })
    .await
    {
        return;
    }
    let busy: usize = generations.iter().map(|g| g.connections.in_use()).sum();
    log::warn!("{busy} connection(s) still busy after the grace period; closing them");
}

async fn accept_loop(
    w: &'static Worker,
    ex: Rc<LocalExecutor<'static>>,
    listener: Rc<Async<TcpListener>>,
) {
    let mut last_warning: Option<std::time::Instant> = None;
    loop {
        let slot = loop {
            if w.is_winding_down() {
                return;
            }
            if let Some(slot) = w.connections.take() {
                break slot;
            }
            wait_for_room(w, &listener).await;
        };
        let accepted = future::or(async { Some(listener.accept().await) }, async {
            w.stop.notified().await;
            None
        })
        .await;
        match accepted {
            None => return,
            Some(Ok((stream, peer))) => {
                sys::set_nodelay(stream.get_ref());
                ex.spawn(conn::serve(w, stream, peer, slot)).detach();
            }
            // A client gone before we took it (ECONNABORTED and the like): next.
            Some(Err(e)) if !out_of_resources(&e) => log::debug!("accept: {e}"),
            Some(Err(e)) => {
                // EMFILE and friends: wait instead of spinning on a socket that stays readable.
                if last_warning.is_none_or(|t| t.elapsed() > ACCEPT_WARNING_EVERY) {
                    log::warn!("accept: {e}; pausing accepts briefly");
                    last_warning = Some(std::time::Instant::now());
                }
                Timer::after(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// At the connection limit: waits until a slot frees or, once a client is
/// waiting to be accepted, asks the connection idle longest to close.
async fn wait_for_room(w: &Worker, listener: &Async<TcpListener>) {
    let arrived = future::or(async { listener.readable().await.is_ok() }, async {
        future::or(w.connections.freed.notified(), w.stop.notified()).await;
        false
    })
    .await;
    if !arrived {
        return;
    }
    if w.shares_listeners {
        // Another worker with room takes the client meanwhile.
        Timer::after(RECLAIM_AFTER).await;
        // A slot freed meanwhile has left no wake-up to wait for.
        if !w.connections.is_full() {
            return;
        }
    }
    // Readiness may be spurious: a client must really be waiting.
    if !sys::is_readable(listener.get_ref()) {
        return;
    }
    let evicted = w.idle.evict_oldest();
    let freed = future::or(w.connections.freed.notified(), w.stop.notified());
    if evicted {
        freed.await;
    } else {
        // None is idle yet: wait until one is, or a slot frees.
        future::or(freed, w.idle.entered.notified()).await;
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
