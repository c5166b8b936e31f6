//! One worker: a single-threaded executor over async-io that accepts on the
//! shared listening sockets, serves connections up to its share of the
//! connection limit, and stops gracefully on SIGTERM. With `workers 1` it is
//! the whole server in one process and reloads in place: a SIGHUP starts a
//! new generation (configuration, root, file cache, access log) for new
//! connections while the old one finishes its own. A generation is shared
//! by the tasks that use it, and freed when the last of them ends.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::rc::{Rc, Weak};

use async_executor::LocalExecutor;
use async_io::{Async, Timer};
use futures_lite::future;
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::config::{Config, cli};
use crate::limits::{ACCEPT_BACKOFF, ACCEPT_WARNING_EVERY, FLOOD_CONNECTIONS, RECLAIM_AFTER};
use crate::net::deadline::Deadlines;
use crate::net::slots::Slots;
use crate::server::conn;
use crate::server::state::Worker;
use crate::sys;

/// Whether a supervisor forked this worker, or it is the whole server.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    Forked,
    Alone,
}

/// What a reload does to a configuration just read before it is used
/// (makes a missing self-signed pair); the process layer supplies it.
pub type Prepare = fn(&mut Config) -> Result<(), String>;

/// What every process of a server shares, made once before the workers
/// are forked and kept by reloads: the TLS session ticket keys, so that a
/// session one worker began resumes on any.
#[derive(Clone, Default)]
pub struct Shared {
    #[cfg(feature = "tls")]
    tickets: Option<std::sync::Arc<crate::tls::tickets::Keys>>,
}

impl Shared {
    pub fn new(config: &Config) -> Result<Shared, String> {
        #[cfg(feature = "tls")]
        let tickets = if config.tls.enabled() {
            Some(std::sync::Arc::new(crate::tls::tickets::Keys::new()?))
        } else {
            None
        };
        #[cfg(not(feature = "tls"))]
        let _ = config;
        Ok(Shared {
            #[cfg(feature = "tls")]
            tickets,
        })
    }

    /// When `turn` next has something to do.
    pub fn next_turn(&self) -> Option<std::time::Instant> {
        #[cfg(feature = "tls")]
        return self.tickets.as_ref().map(|k| k.next_turn());
        #[cfg(not(feature = "tls"))]
        None
    }

    /// Lets go of the ticket keys of periods past.
    pub fn turn(&self) {
        #[cfg(feature = "tls")]
        if let Some(keys) = &self.tickets {
            keys.turn(std::time::Instant::now());
        }
    }
}

/// Runs a forked worker until it is told to stop; never returns.
pub fn run(
    config: Config,
    listeners: Vec<OwnedFd>,
    slot: usize,
    workers: usize,
    shared: Shared,
) -> ! {
    sys::die_with_parent();
    let role = Role::Forked;
    let place = Place { slot, workers };
    let config = Rc::new(config);
    std::process::exit(serve(config, listeners, place, role, |_| Ok(()), shared))
}

/// Runs the whole server in this process (`workers 1`); the exit status.
pub fn run_alone(config: Config, listeners: Vec<OwnedFd>, prepare: Prepare, shared: Shared) -> i32 {
    let place = Place {
        slot: 0,
        workers: 1,
    };
    serve(
        Rc::new(config),
        listeners,
        place,
        Role::Alone,
        prepare,
        shared,
    )
}

/// Which worker of how many.
#[derive(Clone, Copy)]
struct Place {
    slot: usize,
    workers: usize,
}

fn serve(
    config: Rc<Config>,
    listeners: Vec<OwnedFd>,
    place: Place,
    role: Role,
    prepare: Prepare,
    shared: Shared,
) -> i32 {
    let deadlines: &'static Deadlines = Box::leak(Box::default());
    #[cfg(feature = "tls")]
    let https_port = https_port(&config, &listeners);
    #[cfg(not(feature = "tls"))]
    let https_port = None;
    let worker = match generation(config, place, deadlines, https_port, &shared, 1, None) {
        Ok(w) => w,
        Err(e) => {
            log::error!("{e}");
            return 1;
        }
    };
    let ex = Rc::new(LocalExecutor::new());
    // Old ticket keys go at each period's end, whether or not this
    // process seals a ticket meanwhile.
    if let Some(first) = shared.next_turn() {
        let shared = shared.clone();
        ex.spawn(async move {
            let mut at = first;
            loop {
                Timer::at(at).await;
                shared.turn();
                at = shared.next_turn().unwrap_or(at);
            }
        })
        .detach();
    }
    ex.spawn(give_back_after_floods(worker.connections.clone()))
        .detach();
    async_io::block_on(ex.run(run_until_stopped(
        worker,
        ex.clone(),
        listeners,
        role,
        prepare,
        shared,
    )))
}

/// Once the connections have fallen to a quarter of a flood's peak, gives
/// the allocator's free pages back to the system. `connections` is the
/// process's count, whatever the generation.
async fn give_back_after_floods(connections: Slots) {
    let mut peak = 0;
    loop {
        connections.freed().notified().await;
        let now = connections.in_use();
        // Counted as each leaves: the one that just left was still there.
        peak = peak.max(now + 1);
        if peak >= FLOOD_CONNECTIONS && now <= peak / 4 {
            sys::return_free_memory();
            peak = now;
        }
    }
}

/// The state of one worker, or of generation `number` of the one process
/// (with the counts of the generation `before` it).
fn generation(
    config: Rc<Config>,
    place: Place,
    deadlines: &'static Deadlines,
    https_port: Option<u16>,
    shared: &Shared,
    number: u32,
    before: Option<&Worker>,
) -> Result<Rc<Worker>, String> {
    let mut worker = Worker::new(config, place.slot, place.workers, deadlines, before);
    worker.generation = number;
    #[cfg(feature = "tls")]
    {
        worker.tls = tls_acceptor(&worker.config, shared)?;
        worker.site.https_port = https_port;
    }
    #[cfg(not(feature = "tls"))]
    let _ = (https_port, shared);
    Ok(Rc::new(worker))
}

async fn run_until_stopped(
    first: Rc<Worker>,
    ex: Rc<LocalExecutor<'static>>,
    listeners: Vec<OwnedFd>,
    role: Role,
    prepare: Prepare,
    shared: Shared,
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
    for (fd, listen) in listeners.into_iter().zip(&first.config.listen) {
        #[cfg(feature = "tls")]
        let tls = listen.tls;
        #[cfg(not(feature = "tls"))]
        let (_, tls) = (listen, false);
        match Async::new(TcpListener::from(fd)) {
            Ok(l) => sockets.push((Rc::new(l), tls)),
            Err(e) => {
                log::error!("listener: {e}");
                return 1;
            }
        }
    }
    let mut w = first;
    start(&w, &ex, &sockets, role);
    // Generations replaced by a reload, finishing their connections: held
    // by those connections' tasks, not here, so each is freed when its
    // last task ends.
    let mut old: Vec<Weak<Worker>> = Vec::new();
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
        old.retain(|g| g.strong_count() > 0);
        match signal.map(|s| Signal::try_from(s.ssi_signo as i32)) {
            Ok(Ok(Signal::SIGTERM | Signal::SIGINT)) => break,
            Ok(Ok(Signal::SIGHUP)) if role == Role::Alone => {
                if let Some(next) = reload(&w, prepare, &shared) {
                    w.set_retiring();
                    w.proxy.retire();
                    old.push(Rc::downgrade(&w));
                    w = next;
                    start(&w, &ex, &sockets, role);
                    log::info!("configuration reloaded");
                }
            }
            // A forked worker is replaced by the supervisor; a SIGHUP sent to
            // it too (to the process group) reopens its log and TLS pair.
            Ok(Ok(Signal::SIGHUP)) => {
                w.access_log.borrow_mut().reopen(&w.config.access_log);
                #[cfg(feature = "tls")]
                reload_tls(&w);
            }
            Ok(Ok(Signal::SIGCHLD)) => {
                old.iter()
                    .filter_map(Weak::upgrade)
                    .chain([w.clone()])
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
    let mut generations: Vec<Rc<Worker>> = old.iter().filter_map(Weak::upgrade).collect();
    generations.push(w);
    drain(&generations).await;
    0
}

/// The next generation, from the configuration as it is now; `None`
/// (logged) keeps the running one.
fn reload(w: &Worker, prepare: Prepare, shared: &Shared) -> Option<Rc<Worker>> {
    let mut config = cli::reread(&w.config)?;
    #[cfg(feature = "tls")]
    let https_port = w.site.https_port;
    #[cfg(not(feature = "tls"))]
    let https_port = None;
    let made = prepare(&mut config).and_then(|()| {
        let place = Place {
            slot: 0,
            workers: 1,
        };
        let number = w.generation.wrapping_add(1);
        generation(
            Rc::new(config),
            place,
            w.deadlines,
            https_port,
            shared,
            number,
            Some(w),
        )
    });
    made.map_err(|e| log::error!("reload failed, keeping the running configuration: {e}"))
        .ok()
}

/// A generation's accept loops, and the task that keeps its file cache
/// current until a reload replaces it (it stops accepting, and each
/// connection ends after its next response or its keep-alive timeout):
/// then, once its last connection has ended, a forked worker exits and a
/// generation of the one process closes its files. SIGTERM still drains.
fn start(
    w: &Rc<Worker>,
    ex: &Rc<LocalExecutor<'static>>,
    sockets: &[(Rc<Async<TcpListener>>, bool)],
    role: Role,
) {
    // A task of its own, so that it runs when the kernel reports a change,
    // not each time a connection ends and wakes the task below (each run
    // reads the watch once: a system call per connection).
    let kept = w.clone();
    let keeping = ex.spawn(async move { kept.site.root.keep_current().await });
    let held = w.clone();
    ex.spawn(async move {
        let w = held;
        let replaced = async {
            let mine = &w.generation_connections;
            while !(w.is_retiring() && mine.in_use() == 0) {
                future::or(w.stop.notified(), mine.freed().notified()).await;
            }
        };
        // Dropping `keeping` cancels it.
        future::or(keeping, replaced).await;
        match role {
            Role::Forked => std::process::exit(0),
            Role::Alone => w.release(),
        }
    })
    .detach();
    for (l, tls) in sockets {
        ex.spawn(accept_loop(w.clone(), ex.clone(), l.clone(), *tls))
            .detach();
    }
}

/// Stops accepting, closes idle connections and gives busy ones the grace period.
async fn drain(generations: &[Rc<Worker>]) {
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
    let busy: usize = generations
        .iter()
        .map(|g| g.generation_connections.in_use())
        .sum();
    log::warn!("{busy} connection(s) still busy after the grace period; closing them");
}

async fn accept_loop(
    w: Rc<Worker>,
    ex: Rc<LocalExecutor<'static>>,
    listener: Rc<Async<TcpListener>>,
    tls: bool,
) {
    #[cfg(feature = "tls")]
    let tls = w.tls.as_ref().filter(|_| tls).map(|a| &a.config);
    #[cfg(not(feature = "tls"))]
    let _ = tls;
    let mut last_warning: Option<std::time::Instant> = None;
    // A listener on one address is every connection's local address: no
    // getsockname per connection (a wildcard one asks each).
    let local = listener
        .get_ref()
        .local_addr()
        .ok()
        .filter(|a| !a.ip().is_unspecified());
    loop {
        let slots = loop {
            if w.is_winding_down() {
                return;
            }
            // The generation's own count has no limit of its own.
            if let (Some(slot), Some(mine)) =
                (w.connections.take(), w.generation_connections.take())
            {
                break [slot, mine];
            }
            wait_for_room(&w, &listener).await;
        };
        // The stop first: woken by a reload or SIGTERM with a client
        // waiting, a generation that is done accepting must not take it
        // (with a slot taken under the limits it had).
        let accepted = future::or(
            async {
                w.stop.notified().await;
                None
            },
            async { Some(accept(&listener).await) },
        )
        .await;
        match accepted {
            None => return,
            Some(Ok((stream, peer))) => {
                let Ok(place) = w.reclaim.enter(w.config.links.client(peer.ip())) else {
                    // Closed at once, its slots with it.
                    log::debug!("{peer}: the client holds its share of the connections");
                    continue;
                };
                ex.spawn(conn::serve(
                    w.clone(),
                    stream,
                    peer,
                    local,
                    (slots, place),
                    #[cfg(feature = "tls")]
                    tls.cloned(),
                ))
                .detach();
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

/// The next client on `listener`, its socket registered with the reactor.
async fn accept(listener: &Async<TcpListener>) -> std::io::Result<(Async<TcpStream>, SocketAddr)> {
    let (stream, peer) = listener.read_with(sys::accept).await?;
    Ok((Async::new_nonblocking(stream)?, peer))
}

/// At the connection limit: waits until a slot frees or, once a client is
/// waiting to be accepted, asks a connection to close (`net/reclaim.rs`
/// says which).
async fn wait_for_room(w: &Worker, listener: &Async<TcpListener>) {
    let arrived = future::or(async { listener.readable().await.is_ok() }, async {
        future::or(w.connections.freed().notified(), w.stop.notified()).await;
        false
    })
    .await;
    // A slot freed as the client arrived has left no wake-up to wait for.
    if !arrived || !w.connections.is_full() {
        return;
    }
    if w.shares_listeners {
        // Another worker with room takes the client meanwhile.
        Timer::after(RECLAIM_AFTER).await;
        // Likewise for one freed meanwhile.
        if !w.connections.is_full() {
            return;
        }
    }
    // Readiness may be spurious: a client must really be waiting.
    if !sys::is_readable(listener.get_ref()) {
        return;
    }
    let asked = w.reclaim.ask_one();
    let freed = future::or(w.connections.freed().notified(), w.stop.notified());
    if asked {
        // Left without closing (its request came first): ask the next.
        future::or(freed, w.reclaim.left().notified()).await;
    } else {
        // None may be asked yet: wait until one may, or a slot frees.
        future::or(freed, w.reclaim.entered().notified()).await;
    }
}

/// The rustls settings for this worker's TLS listeners, if it has any.
#[cfg(feature = "tls")]
fn tls_acceptor(
    config: &Config,
    shared: &Shared,
) -> Result<Option<crate::tls::acceptor::Acceptor>, String> {
    match (&config.tls.pair, &shared.tickets) {
        (Some(pair), Some(tickets)) if config.tls.enabled() => {
            let to_kernel = crate::net::ktls::support().any();
            crate::tls::acceptor::Acceptor::new(pair.clone(), tickets.clone(), to_kernel).map(Some)
        }
        (None, _) if config.tls.enabled() => Err("TLS listener without a certificate".into()),
        (_, None) if config.tls.enabled() => Err("TLS listener without ticket keys".into()),
        _ => Ok(None),
    }
}

/// The bound port of the first TLS listener (the asked one may be 0).
#[cfg(feature = "tls")]
fn https_port(config: &Config, listeners: &[OwnedFd]) -> Option<u16> {
    let (fd, _) = listeners.iter().zip(&config.listen).find(|(_, l)| l.tls)?;
    sys::local_addr(fd).ok().map(|a| a.port())
}

/// SIGHUP in a forked worker: new handshakes get the certificate and key as
/// the files hold them now; a pair that does not load is logged and the old
/// one kept.
#[cfg(feature = "tls")]
pub fn reload_tls(w: &Worker) {
    let settings = &w.config.tls;
    if let (Some(acceptor), Some(cert), Some(key)) = (&w.tls, &settings.cert, &settings.key) {
        acceptor.reload(&cert.path, &key.path);
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
