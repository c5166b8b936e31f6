//! One worker process: a single-threaded executor over async-io that accepts
//! on the shared listening sockets, serves connections up to its share of the
//! connection limit, and stops gracefully on SIGTERM.

use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::rc::Rc;

use async_executor::LocalExecutor;
use async_io::{Async, Timer};
use futures_lite::future;
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::config::Config;
use crate::limits::{ACCEPT_BACKOFF, ACCEPT_WARNING_EVERY, RECLAIM_AFTER};
use crate::server::conn;
use crate::server::state::Worker;
use crate::sys;

/// Runs a worker until it is told to stop; never returns.
pub fn run(config: &'static Config, listeners: Vec<OwnedFd>, slot: usize, workers: usize) -> ! {
    sys::die_with_parent();
    #[allow(unused_mut)]
    let mut worker = Worker::new(config, slot, workers);
    #[cfg(feature = "tls")]
    match tls_acceptor(config) {
        Ok(acceptor) => worker.tls = acceptor,
        Err(e) => {
            log::error!("{e}");
            std::process::exit(1)
        }
    }
    #[cfg(feature = "tls")]
    {
        worker.site.https_port = https_port(config, &listeners);
    }
    let worker: &'static Worker = Box::leak(Box::new(worker));
    let ex = Rc::new(LocalExecutor::new());
    let code = async_io::block_on(ex.run(run_until_stopped(worker, ex.clone(), listeners)));
    std::process::exit(code)
}

async fn run_until_stopped(
    w: &'static Worker,
    ex: Rc<LocalExecutor<'static>>,
    listeners: Vec<OwnedFd>,
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
    ex.spawn(w.deadlines.tick()).detach();
    for (fd, listen) in listeners.into_iter().zip(&w.config.listen) {
        #[cfg(not(feature = "tls"))]
        let _ = listen;
        match Async::new(TcpListener::from(fd)) {
            Ok(l) => ex
                .spawn(accept_loop(
                    w,
                    ex.clone(),
                    l,
                    #[cfg(feature = "tls")]
                    listen.tls,
                ))
                .detach(),
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
            Ok(Ok(Signal::SIGHUP)) => {
                w.access_log.borrow_mut().reopen(&w.config.access_log);
                #[cfg(feature = "tls")]
                reload_tls(w);
            }
            Ok(Ok(Signal::SIGCHLD)) => w.child_exited.notify_all(),
            Ok(Ok(Signal::SIGUSR2)) if !w.is_retiring() => retire(w, &ex),
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
    w.set_retiring();
    ex.spawn(async move {
        w.all_connections_closed().await;
        std::process::exit(0);
    })
    .detach();
}

/// Stops accepting, closes idle connections and gives busy ones the grace period.
async fn drain(w: &'static Worker) {
    w.set_stopping();
    let deadline = Timer::after(w.config.grace);
    if future::or(
        async {
            w.all_connections_closed().await;
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
        w.connections.in_use()
    );
}

async fn accept_loop(
    w: &'static Worker,
    ex: Rc<LocalExecutor<'static>>,
    listener: Async<TcpListener>,
    #[cfg(feature = "tls")] tls: bool,
) {
    #[cfg(feature = "tls")]
    let tls = w.tls.as_ref().filter(|_| tls).map(|a| &a.config);
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
                ex.spawn(conn::serve(
                    w,
                    stream,
                    peer,
                    slot,
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

/// The rustls settings for this worker's TLS listeners, if it has any.
#[cfg(feature = "tls")]
fn tls_acceptor(config: &Config) -> Result<Option<crate::tls::acceptor::Acceptor>, String> {
    match &config.tls.pair {
        Some(pair) if config.tls.enabled() => {
            crate::tls::acceptor::Acceptor::new(pair.clone()).map(Some)
        }
        _ if config.tls.enabled() => Err("TLS listener without a certificate".into()),
        _ => Ok(None),
    }
}

/// The bound port of the first TLS listener (the asked one may be 0).
#[cfg(feature = "tls")]
fn https_port(config: &Config, listeners: &[OwnedFd]) -> Option<u16> {
    let (fd, _) = listeners.iter().zip(&config.listen).find(|(_, l)| l.tls)?;
    sys::local_addr(fd).ok().map(|a| a.port())
}

/// SIGHUP: new handshakes get the certificate and key as the files hold
/// them now; a pair that does not load is logged and the old one kept.
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
