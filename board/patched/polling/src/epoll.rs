//! Bindings to epoll (Linux, Android).

use std::io;
use std::os::unix::io::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[cfg(not(target_os = "redox"))]
use rustix::event::{eventfd, EventfdFlags};
#[cfg(not(target_os = "redox"))]
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
};

use rustix::buffer::spare_capacity;
use rustix::event::{epoll, Timespec};
use rustix::fd::OwnedFd;
use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
use rustix::io::{fcntl_getfd, fcntl_setfd, read, write, FdFlags};
use rustix::pipe::{pipe, pipe_with, PipeFlags};

use crate::{Event, PollMode};

/// Interface to epoll.
#[derive(Debug)]
pub struct Poller {
    /// File descriptor for the epoll instance.
    epoll_fd: OwnedFd,

    /// Notifier used to wake up epoll.
    notifier: Notifier,

    /// File descriptor for the timerfd that produces timeouts.
    ///
    /// Redox does not support timerfd.
    #[cfg(not(target_os = "redox"))]
    timer_fd: Option<OwnedFd>,

    /// The deadline the timerfd is set to while its oneshot interest is
    /// still armed: a wait for the same deadline needs no system call.
    #[cfg(not(target_os = "redox"))]
    timer_armed: Mutex<Option<Instant>>,

    /// The sources added, by file descriptor (their epoll data): what each
    /// asked for and what the kernel holds for it.
    sources: Mutex<Vec<Option<Source>>>,
}

/// A source's interest. A oneshot interest is kept in the kernel as a
/// level-triggered one and used up here: re-arming a socket for reading
/// after every event, as an event loop does once per request, then costs
/// no system call. The kernel's registration changes only when a wanted
/// direction is missing from it, or when a wait that may block is told
/// what nobody wants.
///
/// Unlike a oneshot registration, a level-triggered one that was reported
/// goes back on the kernel's ready list at once: a source reported in one
/// wait may come ahead of one that became ready before it in the next.
#[derive(Debug, Clone, Copy)]
struct Source {
    key: usize,
    /// `None`: another mode, or extra flags asked; passed to the kernel as it is.
    oneshot: Option<Want>,
    /// The flags last given to the kernel, or to give it.
    kernel: epoll::EventFlags,
    /// Whether the kernel holds the descriptor. A oneshot source added
    /// with no interest (as async-io adds every socket) reaches the kernel
    /// with its first interest: a connection answered and closed without
    /// ever waiting costs no `epoll_ctl` at all.
    in_kernel: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Want {
    read: bool,
    write: bool,
}

impl Want {
    fn of(ev: &Event) -> Want {
        Want {
            read: ev.readable,
            write: ev.writable,
        }
    }

    /// The reported flags that answer this interest.
    fn answered_by(self, flags: epoll::EventFlags) -> epoll::EventFlags {
        let mut wanted = epoll::EventFlags::empty();
        if self.read {
            wanted |= read_flags();
        }
        if self.write {
            wanted |= write_flags();
        }
        flags & wanted
    }

    /// What the kernel should hold: the wanted directions level-triggered,
    /// reading kept when `keep_read` (it is likely wanted again soon).
    /// With neither, a oneshot registration of nothing: a hang-up is then
    /// reported once, not at every wait.
    fn kernel_flags(self, keep_read: bool) -> epoll::EventFlags {
        let mut flags = epoll::EventFlags::empty();
        if self.read || keep_read {
            flags |= read_flags();
        }
        if self.write {
            flags |= write_flags();
        }
        if flags.is_empty() {
            epoll::EventFlags::ONESHOT
        } else {
            flags
        }
    }
}

impl Poller {
    /// Creates a new poller.
    pub fn new() -> io::Result<Poller> {
        // Create an epoll instance.
        //
        // Use `epoll_create1` with `EPOLL_CLOEXEC`.
        let epoll_fd = epoll::create(epoll::CreateFlags::CLOEXEC)?;

        // Set up notifier and timerfd.
        let notifier = Notifier::new()?;
        #[cfg(not(target_os = "redox"))]
        let timer_fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )
        .ok();

        let poller = Poller {
            epoll_fd,
            notifier,
            #[cfg(not(target_os = "redox"))]
            timer_fd,
            #[cfg(not(target_os = "redox"))]
            timer_armed: Mutex::new(None),
            sources: Mutex::new(Vec::new()),
        };

        #[cfg(not(target_os = "redox"))]
        if let Some(ref timer_fd) = poller.timer_fd {
            poller.add_own(timer_fd.as_fd(), Event::none(crate::NOTIFY_KEY))?;
        }
        poller.add_own(poller.notifier.as_fd(), Event::readable(crate::NOTIFY_KEY))?;

        #[cfg(feature = "tracing")]
        tracing::trace!(
            epoll_fd = ?poller.epoll_fd.as_raw_fd(),
            notifier = ?poller.notifier,
            "new",
        );
        Ok(poller)
    }

    /// Whether this poller supports level-triggered events.
    pub fn supports_level(&self) -> bool {
        true
    }

    /// Whether the poller supports edge-triggered events.
    pub fn supports_edge(&self) -> bool {
        true
    }

    /// Adds a new file descriptor.
    ///
    /// # Safety
    ///
    /// The `fd` must be a valid file descriptor. The usual condition of remaining registered in
    /// the `Poller` doesn't apply to `epoll`.
    pub unsafe fn add(&self, fd: RawFd, ev: Event, mode: PollMode) -> io::Result<()> {
        #[cfg(feature = "tracing")]
        let span = tracing::trace_span!(
            "add",
            epoll_fd = ?self.epoll_fd.as_raw_fd(),
            ?fd,
            ?ev,
        );
        #[cfg(feature = "tracing")]
        let _enter = span.enter();

        let mut source = Source::new(&ev, mode);
        source.in_kernel = source.oneshot != Some(Want::default());
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        if source.in_kernel {
            epoll::add(
                &self.epoll_fd,
                unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) },
                epoll::EventData::new_u64(fd as u64),
                source.kernel,
            )?;
        }
        let slot = fd as usize;
        if sources.len() <= slot {
            sources.resize(slot + 1, None);
        }
        sources[slot] = Some(source);

        Ok(())
    }

    /// Registers the poller's own notifier or timer, under its key.
    fn add_own(&self, fd: BorrowedFd<'_>, ev: Event) -> io::Result<()> {
        epoll::add(
            &self.epoll_fd,
            fd,
            epoll::EventData::new_u64(ev.key as u64),
            epoll_flags(&ev, PollMode::Oneshot),
        )?;
        Ok(())
    }

    /// Re-arms the poller's own notifier or timer.
    fn modify_own(&self, fd: BorrowedFd<'_>, ev: Event) -> io::Result<()> {
        epoll::modify(
            &self.epoll_fd,
            fd,
            epoll::EventData::new_u64(ev.key as u64),
            epoll_flags(&ev, PollMode::Oneshot),
        )?;
        Ok(())
    }

    /// Modifies an existing file descriptor.
    pub fn modify(&self, fd: BorrowedFd<'_>, ev: Event, mode: PollMode) -> io::Result<()> {
        #[cfg(feature = "tracing")]
        let span = tracing::trace_span!(
            "modify",
            epoll_fd = ?self.epoll_fd.as_raw_fd(),
            ?fd,
            ?ev,
        );
        #[cfg(feature = "tracing")]
        let _enter = span.enter();

        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        let slot = fd.as_raw_fd() as usize;
        let kept = sources.get(slot).copied().flatten();
        let in_kernel = kept.map_or(true, |k| k.in_kernel);
        let mut source = Source::new(&ev, mode);
        if let (Some(want), Some(kept)) = (source.oneshot, kept.filter(|k| k.oneshot.is_some())) {
            let keep_read = kept.kernel.contains(epoll::EventFlags::IN);
            source.kernel = want.kernel_flags(keep_read);
            if source.kernel == kept.kernel {
                source.in_kernel = in_kernel;
                sources[slot] = Some(source);
                return Ok(());
            }
        }
        let data = epoll::EventData::new_u64(slot as u64);
        if in_kernel {
            epoll::modify(&self.epoll_fd, fd, data, source.kernel)?;
        } else {
            epoll::add(&self.epoll_fd, fd, data, source.kernel)?;
        }
        if sources.len() <= slot {
            sources.resize(slot + 1, None);
        }
        sources[slot] = Some(source);

        Ok(())
    }

    /// Deletes a file descriptor.
    #[cfg_attr(not(feature = "tracing"), inline(always))]
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        #[cfg(feature = "tracing")]
        let span = tracing::trace_span!(
            "delete",
            epoll_fd = ?self.epoll_fd.as_raw_fd(),
            ?fd,
        );
        #[cfg(feature = "tracing")]
        let _enter = span.enter();

        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        let slot = fd.as_raw_fd() as usize;
        if sources.get(slot).copied().flatten().map_or(true, |s| s.in_kernel) {
            epoll::delete(&self.epoll_fd, fd)?;
        }
        if let Some(slot) = sources.get_mut(slot) {
            *slot = None;
        }

        Ok(())
    }

    /// Waits for I/O events with an optional deadline.
    #[allow(clippy::needless_update)]
    pub fn wait_deadline(&self, events: &mut Events, deadline: Option<Instant>) -> io::Result<()> {
        #[cfg(feature = "tracing")]
        let span = tracing::trace_span!(
            "wait",
            epoll_fd = ?self.epoll_fd.as_raw_fd(),
            ?deadline,
        );
        #[cfg(feature = "tracing")]
        let _enter = span.enter();

        let timeout = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));

        // A zero timeout is epoll's own; the timer is left as it is.
        #[cfg(not(target_os = "redox"))]
        let mut armed = self.timer_armed.lock().unwrap_or_else(|e| e.into_inner());
        #[cfg(not(target_os = "redox"))]
        if let Some(timer_fd) = self
            .timer_fd
            .as_ref()
            .filter(|_| timeout != Some(Duration::ZERO) && !same_deadline(*armed, deadline))
        {
            // Configure the timeout using timerfd.
            let new_val = Itimerspec {
                it_interval: TS_ZERO,
                it_value: match timeout {
                    None => TS_ZERO,
                    Some(t) => {
                        let mut ts = TS_ZERO;
                        ts.tv_sec = t.as_secs() as _;
                        ts.tv_nsec = t.subsec_nanos() as _;
                        ts
                    }
                },
                ..unsafe { std::mem::zeroed() }
            };

            timerfd_settime(timer_fd, TimerfdTimerFlags::empty(), &new_val)?;

            // Set interest in timerfd, unless it is still armed: a timer
            // set before and not reported since.
            if armed.is_none() {
                self.modify_own(timer_fd.as_fd(), Event::readable(crate::NOTIFY_KEY))?;
            }
            *armed = deadline;
        }

        #[cfg(not(target_os = "redox"))]
        let timer_fd = &self.timer_fd;
        #[cfg(target_os = "redox")]
        let timer_fd: Option<core::convert::Infallible> = None;

        // Timeout for epoll. In case of overflow, use no timeout.
        let timeout = match (timer_fd, timeout) {
            (_, Some(t)) if t == Duration::from_secs(0) => Some(Timespec::default()),
            (None, Some(t)) => Timespec::try_from(t).ok(),
            _ => None,
        };

        // Wait for I/O events, appended to those in the list. When every
        // report was for what nobody waits for (now cut from the kernel's
        // registrations), a wait that has no timeout of its own or ends by
        // the timer waits again rather than return empty early.
        let appended_from = events.list.len();
        let may_block = timeout != Some(Timespec::default());
        loop {
            epoll::wait(
                &self.epoll_fd,
                spare_capacity(&mut events.list),
                timeout.as_ref(),
            )?;
            #[cfg(feature = "tracing")]
            tracing::trace!(
                epoll_fd = ?self.epoll_fd.as_raw_fd(),
                res = ?events.list.len(),
                "new events",
            );
            let reported = events.list.len() > appended_from;
            self.answer_sources(&mut events.list, appended_from, may_block);
            if !reported || events.list.len() > appended_from || timeout.is_some() {
                break;
            }
        }

        // The notifier and the timer share NOTIFY_KEY, and their oneshot
        // interest is used up only when one of them was reported: re-arm
        // both then, and nothing otherwise.
        if !events.list.iter().any(|ev| ev.data.u64() == crate::NOTIFY_KEY as u64) {
            return Ok(());
        }
        #[cfg(not(target_os = "redox"))]
        {
            *armed = None;
        }

        // Clear the notification (if received) and re-register interest in it.
        self.notifier.clear();
        self.modify_own(self.notifier.as_fd(), Event::readable(crate::NOTIFY_KEY))?;
        Ok(())
    }

    /// Turns the kernel's reports from `from` on into the sources' events:
    /// each under its key, a oneshot source's only for what it waits for,
    /// which is then used up. A report nobody waits for is dropped, and,
    /// when `cut`, the kernel's registration cut down to what is still
    /// wanted. A wait that cannot block leaves it: its reports are mostly
    /// of sockets whose tasks were woken and have not run yet, which will
    /// want reading again once they have, and only a wait that blocks
    /// would be cut short by them.
    fn answer_sources(&self, list: &mut Vec<epoll::Event>, from: usize, cut: bool) {
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        let mut kept = from;
        for i in from..list.len() {
            let mut ev = list[i];
            if self.answer(&mut sources, &mut ev, cut) {
                list[kept] = ev;
                kept += 1;
            }
        }
        list.truncate(kept);
    }

    /// One report: `false` when it is dropped.
    fn answer(&self, sources: &mut [Option<Source>], ev: &mut epoll::Event, cut: bool) -> bool {
        let data = ev.data.u64();
        if data == crate::NOTIFY_KEY as u64 {
            return true;
        }
        let Some(source) = sources.get_mut(data as usize).and_then(Option::as_mut) else {
            return false;
        };
        ev.data = epoll::EventData::new_u64(source.key as u64);
        let Some(want) = source.oneshot else {
            return true;
        };
        let answered = want.answered_by(ev.flags);
        if answered.is_empty() {
            let kernel = want.kernel_flags(false);
            // Left for a wait that may block; or already so: a oneshot
            // registration of nothing reporting a hang-up, now spent.
            // Arming it again would report it again.
            if !cut || kernel == source.kernel {
                return false;
            }
            // SAFETY: the descriptor is registered, hence open.
            let fd = unsafe { BorrowedFd::borrow_raw(data as RawFd) };
            // On failure the registration is gone with its descriptor.
            if epoll::modify(&self.epoll_fd, fd, epoll::EventData::new_u64(data), kernel).is_ok() {
                source.kernel = kernel;
            }
            return false;
        }
        ev.flags = answered;
        source.oneshot = Some(Want::default());
        true
    }

    /// Sends a notification to wake up the current or next `wait()` call.
    pub fn notify(&self) -> io::Result<()> {
        #[cfg(feature = "tracing")]
        let span = tracing::trace_span!(
            "notify",
            epoll_fd = ?self.epoll_fd.as_raw_fd(),
            notifier = ?self.notifier,
        );
        #[cfg(feature = "tracing")]
        let _enter = span.enter();

        self.notifier.notify();
        Ok(())
    }
}

impl AsRawFd for Poller {
    fn as_raw_fd(&self) -> RawFd {
        self.epoll_fd.as_raw_fd()
    }
}

impl AsFd for Poller {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll_fd.as_fd()
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        #[cfg(feature = "tracing")]
        let span = tracing::trace_span!(
            "drop",
            epoll_fd = ?self.epoll_fd.as_raw_fd(),
            notifier = ?self.notifier,
        );
        #[cfg(feature = "tracing")]
        let _enter = span.enter();

        #[cfg(not(target_os = "redox"))]
        if let Some(timer_fd) = self.timer_fd.take() {
            let _ = self.delete(timer_fd.as_fd());
        }
        let _ = self.delete(self.notifier.as_fd());
    }
}

/// How far a deadline may be from the armed one and still use it. A
/// caller holding one far timer (async-io) asks for it as a timeout, which
/// becomes a deadline a few microseconds off the last at every wait.
#[cfg(not(target_os = "redox"))]
const DEADLINE_SLACK: Duration = Duration::from_millis(1);

/// Whether the timer armed for `armed` serves a wait until `asked`.
#[cfg(not(target_os = "redox"))]
fn same_deadline(armed: Option<Instant>, asked: Option<Instant>) -> bool {
    match (armed, asked) {
        (None, None) => true,
        (Some(a), Some(b)) => a.max(b) - a.min(b) < DEADLINE_SLACK,
        _ => false,
    }
}

impl Source {
    fn new(ev: &Event, mode: PollMode) -> Source {
        let emulated = mode == PollMode::Oneshot && ev.extra.flags.is_empty();
        let oneshot = emulated.then(|| Want::of(ev));
        Source {
            key: ev.key,
            oneshot,
            kernel: match oneshot {
                Some(want) => want.kernel_flags(false),
                None => epoll_flags(ev, mode) | ev.extra.flags,
            },
            in_kernel: true,
        }
    }
}

/// `timespec` value that equals zero.
#[cfg(not(target_os = "redox"))]
const TS_ZERO: Timespec = unsafe { std::mem::transmute([0u8; std::mem::size_of::<Timespec>()]) };

/// Get the EPOLL flags for the interest.
fn epoll_flags(interest: &Event, mode: PollMode) -> epoll::EventFlags {
    let mut flags = match mode {
        PollMode::Oneshot => epoll::EventFlags::ONESHOT,
        PollMode::Level => epoll::EventFlags::empty(),
        PollMode::Edge => epoll::EventFlags::ET,
        PollMode::EdgeOneshot => epoll::EventFlags::ET | epoll::EventFlags::ONESHOT,
    };
    if interest.readable {
        flags |= read_flags();
    }
    if interest.writable {
        flags |= write_flags();
    }
    flags
}

/// Epoll flags for all possible readability events.
fn read_flags() -> epoll::EventFlags {
    use epoll::EventFlags as Epoll;
    Epoll::IN | Epoll::HUP | Epoll::ERR | Epoll::PRI
}

/// Epoll flags for all possible writability events.
fn write_flags() -> epoll::EventFlags {
    use epoll::EventFlags as Epoll;
    Epoll::OUT | Epoll::HUP | Epoll::ERR
}

/// A list of reported I/O events.
pub struct Events {
    list: Vec<epoll::Event>,
}

unsafe impl Send for Events {}

impl Events {
    /// Creates an empty list.
    pub fn with_capacity(cap: usize) -> Events {
        Events {
            list: Vec::with_capacity(cap),
        }
    }

    /// Iterates over I/O events.
    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        self.list.iter().map(|ev| {
            let flags = ev.flags;
            Event {
                key: ev.data.u64() as usize,
                readable: flags.intersects(read_flags()),
                writable: flags.intersects(write_flags()),
                extra: EventExtra { flags },
            }
        })
    }

    /// Clear the list.
    pub fn clear(&mut self) {
        self.list.clear();
    }

    /// Get the capacity of the list.
    pub fn capacity(&self) -> usize {
        self.list.capacity()
    }
}

/// Extra information about this event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventExtra {
    flags: epoll::EventFlags,
}

impl EventExtra {
    /// Create an empty version of the data.
    #[inline]
    pub const fn empty() -> EventExtra {
        EventExtra {
            flags: epoll::EventFlags::empty(),
        }
    }

    /// Add the interrupt flag to this event.
    #[inline]
    pub fn set_hup(&mut self, active: bool) {
        self.flags.set(epoll::EventFlags::HUP, active);
    }

    /// Add the priority flag to this event.
    #[inline]
    pub fn set_pri(&mut self, active: bool) {
        self.flags.set(epoll::EventFlags::PRI, active);
    }

    /// Tell if the interrupt flag is set.
    #[inline]
    pub fn is_hup(&self) -> bool {
        self.flags.contains(epoll::EventFlags::HUP)
    }

    /// Tell if the priority flag is set.
    #[inline]
    pub fn is_pri(&self) -> bool {
        self.flags.contains(epoll::EventFlags::PRI)
    }

    #[inline]
    pub fn is_connect_failed(&self) -> Option<bool> {
        Some(
            self.flags.contains(epoll::EventFlags::ERR)
                && self.flags.contains(epoll::EventFlags::HUP),
        )
    }

    #[inline]
    pub fn is_err(&self) -> Option<bool> {
        Some(self.flags.contains(epoll::EventFlags::ERR))
    }
}

/// The notifier for Linux.
///
/// Certain container runtimes do not expose eventfd to the client, as it relies on the host and
/// can be used to "escape" the container under certain conditions. Gramine is the prime example,
/// see [here](gramine). In this case, fall back to using a pipe.
///
/// [gramine]: https://gramine.readthedocs.io/en/stable/manifest-syntax.html#allowing-eventfd
#[derive(Debug)]
enum Notifier {
    /// The primary notifier, using eventfd.
    #[cfg(not(target_os = "redox"))]
    EventFd(OwnedFd),

    /// The fallback notifier, using a pipe.
    Pipe {
        /// The read end of the pipe.
        read_pipe: OwnedFd,

        /// The write end of the pipe.
        write_pipe: OwnedFd,
    },
}

impl Notifier {
    /// Create a new notifier.
    fn new() -> io::Result<Self> {
        // Skip eventfd for testing if necessary.
        #[cfg(not(target_os = "redox"))]
        {
            if !cfg!(polling_test_epoll_pipe) {
                // Try to create an eventfd.
                match eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK) {
                    Ok(fd) => {
                        #[cfg(feature = "tracing")]
                        tracing::trace!("created eventfd for notifier");
                        return Ok(Notifier::EventFd(fd));
                    }

                    Err(_err) => {
                        #[cfg(feature = "tracing")]
                        tracing::warn!(
                            "eventfd() failed with error ({}), falling back to pipe",
                            _err
                        );
                    }
                }
            }
        }

        let (read, write) = pipe_with(PipeFlags::CLOEXEC).or_else(|_| {
            let (read, write) = pipe()?;
            fcntl_setfd(&read, fcntl_getfd(&read)? | FdFlags::CLOEXEC)?;
            fcntl_setfd(&write, fcntl_getfd(&write)? | FdFlags::CLOEXEC)?;
            io::Result::Ok((read, write))
        })?;

        fcntl_setfl(&read, fcntl_getfl(&read)? | OFlags::NONBLOCK)?;
        Ok(Notifier::Pipe {
            read_pipe: read,
            write_pipe: write,
        })
    }

    /// The file descriptor to register in the poller.
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            #[cfg(not(target_os = "redox"))]
            Notifier::EventFd(fd) => fd.as_fd(),
            Notifier::Pipe {
                read_pipe: read, ..
            } => read.as_fd(),
        }
    }

    /// Notify the poller.
    fn notify(&self) {
        match self {
            #[cfg(not(target_os = "redox"))]
            Self::EventFd(fd) => {
                let buf: [u8; 8] = 1u64.to_ne_bytes();
                let _ = write(fd, &buf);
            }

            Self::Pipe { write_pipe, .. } => {
                write(write_pipe, &[0; 1]).ok();
            }
        }
    }

    /// Clear the notification.
    fn clear(&self) {
        match self {
            #[cfg(not(target_os = "redox"))]
            Self::EventFd(fd) => {
                let mut buf = [0u8; 8];
                let _ = read(fd, &mut buf);
            }

            Self::Pipe { read_pipe, .. } => while read(read_pipe, &mut [0u8; 1024]).is_ok() {},
        }
    }
}
