//! Start-up, top to bottom: configuration, logging, binding, detaching,
//! dropping privileges, then the one worker runs here or the supervisor
//! forks several.

use std::os::fd::OwnedFd;
use std::process::ExitCode;

use crate::config::cli;
use crate::config::cli::Action;
use crate::config::{Account, Config, ConfigError, Origin};
use crate::logs::logger as logging;
use crate::process::supervisor;
use crate::server::worker;
use crate::sys;

/// Exit status for a configuration error, before anything is bound.
const EXIT_CONFIG: u8 = 2;
/// Exit status for a failure while starting (a busy port, a missing user).
const EXIT_START: u8 = 1;

/// The whole program; `main.rs` only calls this.
pub fn main() -> ExitCode {
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
    for w in &config.warnings {
        log::warn!("{w}");
    }
    // Whoever started the server watches stderr for why it did not start,
    // whether syslog was set in the file or by a flag.
    let syslog = config.syslog;
    match start(config) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            log::error!("{e}");
            if syslog {
                eprintln!("marmoset: {e}");
            }
            ExitCode::from(EXIT_START)
        }
    }
}

/// Binds, detaches, drops privileges and hands over to the supervisor.
fn start(mut config: Config) -> Result<u8, String> {
    let identity = identity(&config).map_err(|e| e.to_string())?;
    #[cfg(feature = "tls")]
    crate::process::certificate::make_if_absent(
        &mut config,
        identity.as_ref().and_then(sys::Identity::owner_after_drop),
    )?;
    sys::block_signals().map_err(|e| format!("signals: {e}"))?;
    sys::raise_fd_limit(config.max_connections);
    let sockets = bind_all(&config)?;
    if !config.root.is_dir() {
        log::warn!(
            "document root {} is not a directory (yet); serving 404 until it is",
            config.root.display()
        );
    }
    let mut pidfile = match &config.pidfile {
        Some(p) => Some(sys::Pidfile::open(p)?),
        None => None,
    };
    if config.daemon {
        sys::daemonize()?;
    }
    if let Some(p) = &mut pidfile {
        p.write_pid()?;
    }
    // While still root, the kernel may load its TLS module for the probe;
    // workers (forked from here) inherit what it found.
    #[cfg(feature = "tls")]
    if config.tls.enabled() {
        crate::net::ktls::support();
    }
    let chroot = config.chroot.then(|| config.root.clone());
    if let Err(e) = sys::drop_privileges(identity.as_ref(), chroot.as_deref()) {
        if let Some(p) = pidfile {
            p.remove();
        }
        return Err(e);
    }
    if chroot.is_some() {
        config.root = "/".into();
    }
    log::info!("marmoset {} started", env!("CARGO_PKG_VERSION"));
    // Before any fork: every worker gets the same ticket keys.
    let shared = worker::Shared::new(&config)?;
    if config.workers > 1 {
        return Ok(supervisor::Supervisor::new(config, sockets, pidfile, shared).run() as u8);
    }
    // One worker is the whole server: no supervisor process. A crash is
    // init's to restart (procd respawn, systemd Restart=, inittab respawn).
    let listeners = sockets.into_iter().flatten().collect();
    let code = worker::run_alone(config, listeners, supervisor::prepare_reload, shared);
    if let Some(p) = pidfile {
        p.remove();
    }
    log::info!("marmoset stopped");
    Ok(code as u8)
}

/// One listening socket per address, shared by every worker (each holds a
/// duplicate). Not a socket per worker with SO_REUSEPORT: the kernel would
/// then hash clients to a worker whatever its load, and a worker at its share
/// of the connection limit would leave its queue waiting while the others
/// have room (measured: 1000 idle clients on two workers, 16 still served).
fn bind_all(config: &Config) -> Result<Vec<Vec<OwnedFd>>, String> {
    let mut per_worker: Vec<Vec<OwnedFd>> = (0..config.workers).map(|_| Vec::new()).collect();
    for listen in &config.listen {
        let asked = listen.addr;
        let socket = sys::listen(asked).map_err(|e| format!("cannot listen on {asked}: {e}"))?;
        // With port 0 the kernel picks one: log the real address.
        let addr = sys::local_addr(&socket).map_err(|e| format!("{asked}: {e}"))?;
        log::info!(
            "listening on {addr}{}",
            if listen.tls { " (TLS)" } else { "" }
        );
        for sockets in per_worker.iter_mut().skip(1) {
            sockets.push(socket.try_clone().map_err(|e| format!("{addr}: {e}"))?);
        }
        per_worker[0].push(socket);
    }
    Ok(per_worker)
}

fn name(account: &Option<Account>) -> Option<&str> {
    account.as_ref().map(|a| a.name.as_str())
}

/// Looks the user and group up; an error names where the name was set.
fn identity(config: &Config) -> Result<Option<sys::Identity>, ConfigError> {
    sys::resolve_identity(name(&config.user), name(&config.group)).map_err(|(which, problem)| {
        let (key, account) = match which {
            sys::Name::User => ("user", &config.user),
            sys::Name::Group => ("group", &config.group),
        };
        ConfigError {
            origin: account.as_ref().map_or(Origin::Flag, |a| a.origin.clone()),
            key: key.into(),
            problem,
        }
    })
}

fn check_config(config: &Config) -> ExitCode {
    for w in &config.warnings {
        eprintln!("marmoset: warning: {w}");
    }
    if let Err(e) = identity(config) {
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
