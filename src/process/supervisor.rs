//! The parent process: forks the workers after binding, restarts one that
//! crashes, forwards stop requests, and on SIGHUP re-reads the configuration
//! and replaces the workers (old ones finish their responses first).

use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

use crate::config::Config;
use crate::config::cli;
use crate::limits::{KILL_AGAIN, RESPAWN_DELAY};
use crate::server::worker;
use crate::sys;

pub struct Supervisor {
    config: Config,
    /// Listening sockets per worker slot.
    sockets: Vec<Vec<OwnedFd>>,
    /// Live worker per slot.
    workers: Vec<(Pid, usize)>,
    /// Workers replaced by a reload, finishing their last responses.
    retiring: Vec<Pid>,
    /// Slots waiting to be restarted, with when.
    respawn: Vec<(usize, Instant)>,
    /// Removed (or emptied) when the supervisor returns.
    pidfile: Option<sys::Pidfile>,
    /// Given to every worker forked, whatever the generation.
    shared: worker::Shared,
}

impl Supervisor {
    pub fn new(
        config: Config,
        sockets: Vec<Vec<OwnedFd>>,
        pidfile: Option<sys::Pidfile>,
        shared: worker::Shared,
    ) -> Supervisor {
        Supervisor {
            config,
            sockets,
            workers: Vec::new(),
            retiring: Vec::new(),
            respawn: Vec::new(),
            pidfile,
            shared,
        }
    }

    /// Runs until stopped; returns the process exit status.
    pub fn run(mut self) -> i32 {
        let code = self.serve();
        if let Some(p) = self.pidfile.take() {
            p.remove();
        }
        code
    }

    fn serve(&mut self) -> i32 {
        let signals = match SignalFd::with_flags(&sys::handled_signals(), SfdFlags::SFD_CLOEXEC) {
            Ok(s) => s,
            Err(e) => {
                log::error!("signalfd: {e}");
                return 1;
            }
        };
        for slot in 0..self.sockets.len() {
            if let Err(e) = self.spawn(slot) {
                log::error!("cannot start worker: {e}");
                self.signal_all(Signal::SIGKILL);
                return 1;
            }
        }
        let mut stop_deadline: Option<Instant> = None;
        // SIGKILL is sent again while a worker lingers; the warning once.
        let mut killed = false;
        loop {
            let now = Instant::now();
            let next = self
                .respawn
                .iter()
                .map(|(_, at)| *at)
                .chain(stop_deadline)
                .chain(self.shared.next_turn())
                .min();
            let wait = next.map_or(PollTimeout::NONE, |at| {
                PollTimeout::try_from(
                    at.saturating_duration_since(now)
                        .max(Duration::from_millis(1)),
                )
                .unwrap_or(PollTimeout::MAX)
            });
            let mut fds = [PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
            let ready = matches!(poll(&mut fds, wait), Ok(n) if n > 0);
            if ready {
                match signals
                    .read_signal()
                    .ok()
                    .flatten()
                    .map(|s| Signal::try_from(s.ssi_signo as i32))
                {
                    Some(Ok(Signal::SIGCHLD)) => self.reap(stop_deadline.is_some()),
                    Some(Ok(Signal::SIGTERM | Signal::SIGINT)) if stop_deadline.is_none() => {
                        log::info!("stopping: finishing in-flight responses");
                        self.respawn.clear();
                        self.signal_all(Signal::SIGTERM);
                        stop_deadline =
                            Some(Instant::now() + self.config.grace + Duration::from_secs(1));
                    }
                    Some(Ok(Signal::SIGHUP)) if stop_deadline.is_none() => self.reload(),
                    _ => {}
                }
            }
            if let Some(deadline) = stop_deadline {
                if self.workers.is_empty() && self.retiring.is_empty() {
                    log::info!("marmoset stopped");
                    return 0;
                }
                if Instant::now() >= deadline {
                    if !killed {
                        log::warn!("workers still running after the grace period; killing them");
                        killed = true;
                    }
                    self.signal_all(Signal::SIGKILL);
                    stop_deadline = Some(Instant::now() + KILL_AGAIN);
                }
            }
            self.respawn_due();
            // Old ticket keys go here too: workers forked later derive
            // theirs from what the supervisor holds.
            self.shared.turn();
        }
    }

    fn spawn(&mut self, slot: usize) -> nix::Result<()> {
        let workers = self.sockets.len();
        // SAFETY: the supervisor is single-threaded, so the child starts from a
        // consistent copy of the process.
        match unsafe { fork() }? {
            ForkResult::Child => {
                // The child's copy of the supervisor is not used again: take its config.
                let config = std::mem::take(&mut self.config);
                let mine = std::mem::take(&mut self.sockets[slot]);
                // The other slots' sockets belong to the other workers.
                self.sockets.clear();
                worker::run(config, mine, slot, workers, self.shared.clone())
            }
            ForkResult::Parent { child } => {
                self.workers.push((child, slot));
                Ok(())
            }
        }
    }

    fn reap(&mut self, stopping: bool) {
        while let Ok(status) = waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            let (pid, how) = match status {
                WaitStatus::Exited(pid, code) => (pid, format!("exited with status {code}")),
                WaitStatus::Signaled(pid, sig, _) => (pid, format!("was killed by {sig}")),
                _ => break,
            };
            if let Some(i) = self.retiring.iter().position(|p| *p == pid) {
                self.retiring.swap_remove(i);
                continue;
            }
            let Some(i) = self.workers.iter().position(|(p, _)| *p == pid) else {
                continue;
            };
            let (_, slot) = self.workers.swap_remove(i);
            if !stopping {
                log::error!("worker {pid} {how}; restarting it");
                self.respawn.push((slot, Instant::now() + RESPAWN_DELAY));
            }
        }
    }

    fn respawn_due(&mut self) {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = self.respawn.drain(..).partition(|(_, at)| *at <= now);
        self.respawn = later;
        for (slot, _) in due {
            if let Err(e) = self.spawn(slot) {
                log::error!("cannot restart worker: {e}");
                self.respawn.push((slot, now + RESPAWN_DELAY));
            }
        }
    }

    /// Re-reads the config and replaces the workers.
    fn reload(&mut self) {
        let Some(mut new) = cli::reread(&self.config) else {
            return;
        };
        if let Err(e) = prepare_reload(&mut new) {
            log::error!("reload failed, keeping the running configuration: {e}");
            return;
        }
        self.config = new;
        let old_workers = std::mem::take(&mut self.workers);
        for (pid, slot) in old_workers {
            self.retiring.push(pid);
            // Not SIGTERM: a retiring worker lets its clients finish their
            // connections rather than closing idle ones under them.
            let _ = kill(pid, Signal::SIGUSR2);
            if let Err(e) = self.spawn(slot) {
                log::error!("cannot start worker: {e}");
                self.respawn.push((slot, Instant::now() + RESPAWN_DELAY));
            }
        }
        log::info!("configuration reloaded");
    }

    fn signal_all(&self, sig: Signal) {
        for pid in self
            .workers
            .iter()
            .map(|(p, _)| p)
            .chain(self.retiring.iter())
        {
            let _ = kill(*pid, sig);
        }
    }
}

/// What a configuration re-read on SIGHUP needs before it is used: both
/// files of a made pair were removed, so a new one is made (as the user
/// the server runs as).
pub fn prepare_reload(config: &mut Config) -> Result<(), String> {
    #[cfg(feature = "tls")]
    crate::process::certificate::make_if_absent(config, None)?;
    #[cfg(not(feature = "tls"))]
    let _ = config;
    Ok(())
}
