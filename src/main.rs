//! Marmoset: a small HTTP/1.1 server for the web UI of embedded Linux devices.
//!
//! Start-up reads top to bottom here: configuration, logging, binding,
//! detaching, dropping privileges, then the supervisor forks the workers.
//! The request path: `worker` (accept) → `conn` (one connection) →
//! `request` (parse, framing) → `router` (the pipeline) → `static_files`.

mod access;
mod access_log;
mod auth;
mod buffers;
mod cgi;
mod cgi_output;
mod chunked;
mod cli;
mod clock;
mod conditional;
mod config;
mod conn;
mod gunzip;
mod httpdate;
mod limits;
mod listing;
mod logging;
mod mime;
mod negotiate;
mod notify;
mod path;
mod range;
mod request;
mod response;
mod router;
mod rules;
mod sock;
mod static_files;
mod status;
mod supervisor;
mod sys;
mod worker;

use std::os::fd::OwnedFd;
use std::process::ExitCode;

use cli::Action;
use config::Config;

/// Exit status for a configuration error, before anything is bound.
const EXIT_CONFIG: u8 = 2;
/// Exit status for a failure while starting (a busy port, a missing user).
const EXIT_START: u8 = 1;

fn main() -> ExitCode {
    let config = match cli::parse(std::env::args_os()) {
        Ok(Action::Run(c)) => c,
        Ok(Action::CheckConfig(c)) => return check_config(&c),
        Ok(Action::Print(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("marmoset: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    logging::init(config.syslog, config.log_level);
    match start(config) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            log::error!("{e}");
            if config_logs_to_syslog() {
                eprintln!("marmoset: {e}");
            }
            ExitCode::from(EXIT_START)
        }
    }
}

fn config_logs_to_syslog() -> bool {
    std::env::args().any(|a| a == "--syslog")
}

/// Binds, detaches, drops privileges and hands over to the supervisor.
fn start(mut config: Config) -> Result<u8, String> {
    let identity = sys::resolve_identity(config.user.as_deref(), config.group.as_deref())?;
    sys::block_signals().map_err(|e| format!("signals: {e}"))?;
    sys::raise_fd_limit(config.max_connections);
    let sockets = bind_all(&config)?;
    if !config.root.is_dir() {
        log::warn!(
            "document root {} is not a directory (yet); serving 404 until it is",
            config.root.display()
        );
    }
    if config.daemon {
        sys::daemonize()?;
    }
    if let Some(p) = &config.pidfile {
        sys::write_pidfile(p)?;
    }
    let chroot = config.chroot.then(|| config.root.clone());
    sys::drop_privileges(identity.as_ref(), chroot.as_deref())?;
    if chroot.is_some() {
        config.root = "/".into();
    }
    log::info!("marmoset {} started", env!("CARGO_PKG_VERSION"));
    Ok(supervisor::Supervisor::new(config, sockets).run() as u8)
}

/// One socket per worker and address: each worker accepts on its own
/// (SO_REUSEPORT), so no two wake for the same connection.
fn bind_all(config: &Config) -> Result<Vec<Vec<OwnedFd>>, String> {
    let mut per_worker: Vec<Vec<OwnedFd>> = (0..config.workers).map(|_| Vec::new()).collect();
    for &asked in &config.listen {
        let first = sys::listen(asked).map_err(|e| format!("cannot listen on {asked}: {e}"))?;
        // With port 0 the kernel picks one; the other workers must share it.
        let addr = sys::local_addr(&first).map_err(|e| format!("{asked}: {e}"))?;
        log::info!("listening on {addr}");
        per_worker[0].push(first);
        for sockets in per_worker.iter_mut().skip(1) {
            sockets.push(sys::listen(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?);
        }
    }
    Ok(per_worker)
}

fn check_config(config: &Config) -> ExitCode {
    if let Err(e) = sys::resolve_identity(config.user.as_deref(), config.group.as_deref()) {
        eprintln!("marmoset: {e}");
        return ExitCode::from(EXIT_CONFIG);
    }
    if !config.root.is_dir() {
        eprintln!(
            "marmoset: warning: document root {} is not a directory",
            config.root.display()
        );
    }
    println!("marmoset: configuration OK");
    ExitCode::SUCCESS
}
