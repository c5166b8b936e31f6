//! The Unix calls: listening sockets, privileges, daemonising, signals,
//! sendfile, the deadline ticker's alarm. Everything here goes through `nix`.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::ptr;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::socket::{
    self, AddressFamily, SockFlag, SockType, SockaddrLike, SockaddrStorage, sockopt,
};
use nix::unistd::{Gid, Group, Uid, User};

/// Opens a listening TCP socket. IP_FREEBIND lets a device bind an address
/// its interface does not have yet (a known uhttpd complaint at boot). Its
/// connections have TCP_NODELAY.
pub fn listen(addr: SocketAddr) -> io::Result<OwnedFd> {
    let family = if addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd = socket::socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )?;
    socket::setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    if addr.is_ipv6() {
        // Lets `[::]:80` and `0.0.0.0:80` both be listed, as the defaults do.
        socket::setsockopt(&fd, sockopt::Ipv6V6Only, &true)?;
    }
    // Linux honours IP_FREEBIND on IPv6 sockets too.
    let _ = socket::setsockopt(&fd, sockopt::IpFreebind, &true);
    // Linux copies TCP_NODELAY to each connection accepted: set before the
    // first can come, it costs no system call per connection.
    set_nodelay(&fd);
    defer_accept(&fd);
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr))?;
    // 511 as nginx does; the kernel caps it at net.core.somaxconn. Not through
    // nix's Backlog: it refuses values above the libc's SOMAXCONN constant,
    // which is 128 in musl, and a flood of clients beyond the connection
    // limit must queue, not have its SYNs dropped.
    // SAFETY: listen(2) on a socket we own; no pointers are involved.
    if unsafe { nix::libc::listen(fd.as_raw_fd(), 511) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// The address a socket is bound to (the real port when 0 was asked).
pub fn local_addr(fd: &OwnedFd) -> io::Result<SocketAddr> {
    let addr: SockaddrStorage = socket::getsockname(fd.as_raw_fd())?;
    socket_addr(&addr).ok_or_else(|| io::Error::other("not an IP socket"))
}

/// Blocks the signals the server handles, so that they arrive through a
/// signalfd in whichever process waits for them, and ignores SIGPIPE.
pub fn block_signals() -> nix::Result<SigSet> {
    let set = handled_signals();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None)?;
    // SAFETY: SIG_IGN installs no handler code, so nothing can run at signal time.
    unsafe { nix::sys::signal::signal(Signal::SIGPIPE, nix::sys::signal::SigHandler::SigIgn) }?;
    Ok(set)
}

pub fn handled_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGCHLD,
        // The supervisor's request to a worker replaced by a reload: finish, then exit.
        Signal::SIGUSR2,
        // The deadline ticker (`set_alarm`).
        Signal::SIGALRM,
    ] {
        set.add(s);
    }
    set
}

/// Who to become after binding.
pub struct Identity {
    uid: Uid,
    gid: Gid,
    name: String,
}

impl Identity {
    /// Who files made now should belong to, so that they can still be
    /// read after the drop: the user's ids, when running as root.
    #[cfg(feature = "tls")]
    pub fn owner_after_drop(&self) -> Option<(u32, u32)> {
        Uid::effective()
            .is_root()
            .then(|| (self.uid.as_raw(), self.gid.as_raw()))
    }
}

/// Which of the two names a lookup failed on.
#[derive(Debug, PartialEq)]
pub enum Name {
    User,
    Group,
}

/// Looks the user and group up now, while /etc/passwd is still reachable.
pub fn resolve_identity(
    user: Option<&str>,
    group: Option<&str>,
) -> Result<Option<Identity>, (Name, String)> {
    let Some(user) = user else {
        if group.is_some() {
            return Err((Name::Group, "needs `user` as well".into()));
        }
        return Ok(None);
    };
    let u = User::from_name(user)
        .map_err(|e| (Name::User, format!("cannot look up `{user}`: {e}")))?
        .ok_or_else(|| (Name::User, format!("no such user `{user}`")))?;
    let gid = match group {
        Some(g) => {
            Group::from_name(g)
                .map_err(|e| (Name::Group, format!("cannot look up `{g}`: {e}")))?
                .ok_or_else(|| (Name::Group, format!("no such group `{g}`")))?
                .gid
        }
        None => u.gid,
    };
    Ok(Some(Identity {
        uid: u.uid,
        gid,
        name: user.to_string(),
    }))
}

/// Chroots if asked, then drops to the user and group (real, effective and
/// saved ids; supplementary groups cleared). Any failure is fatal: better
/// not to run than to serve as root by mistake.
pub fn drop_privileges(id: Option<&Identity>, chroot: Option<&Path>) -> Result<(), String> {
    if let Some(dir) = chroot {
        nix::unistd::chroot(dir).map_err(|e| format!("chroot {}: {e}", dir.display()))?;
        nix::unistd::chdir("/").map_err(|e| format!("chdir / after chroot: {e}"))?;
    }
    let Some(id) = id else {
        return Ok(());
    };
    if !Uid::effective().is_root() {
        // Started unprivileged (a systemd unit with User=): already not root.
        if Uid::effective() != id.uid {
            log::warn!(
                "not started as root: `user {}` ignored, running as uid {}",
                id.name,
                Uid::effective()
            );
        }
        return Ok(());
    }
    nix::unistd::setgroups(&[]).map_err(|e| format!("setgroups: {e}"))?;
    nix::unistd::setresgid(id.gid, id.gid, id.gid)
        .map_err(|e| format!("setresgid {}: {e}", id.gid))?;
    nix::unistd::setresuid(id.uid, id.uid, id.uid)
        .map_err(|e| format!("setresuid {}: {e}", id.uid))?;
    if id.uid.as_raw() != 0
        && (nix::unistd::setuid(Uid::from_raw(0)).is_ok() || Uid::effective().is_root())
    {
        return Err(format!(
            "still able to regain root after switching to {}",
            id.name
        ));
    }
    Ok(())
}

/// Detaches from the terminal: fork, new session, stdio to /dev/null.
/// The parent exits 0 once the child exists.
pub fn daemonize() -> Result<(), String> {
    use nix::unistd::{ForkResult, fork, setsid};
    // SAFETY: called before any thread is started, so the child is a full copy.
    match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Parent { .. } => std::process::exit(0),
        ForkResult::Child => {}
    }
    setsid().map_err(|e| format!("setsid: {e}"))?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("/dev/null: {e}"))?;
    nix::unistd::dup2_stdin(&null).map_err(|e| format!("dup2: {e}"))?;
    nix::unistd::dup2_stdout(&null).map_err(|e| format!("dup2: {e}"))?;
    nix::unistd::dup2_stderr(&null).map_err(|e| format!("dup2: {e}"))?;
    Ok(())
}

/// Sends up to `len` bytes of `file` from `offset`; returns the bytes sent.
pub fn sendfile(
    sock: &impl AsFd,
    file: &impl AsFd,
    offset: &mut i64,
    len: usize,
) -> io::Result<usize> {
    Ok(nix::sys::sendfile::sendfile64(
        sock,
        file,
        Some(offset),
        len,
    )?)
}

/// Reads up to `max` bytes from `fd` onto the end of `buf`, without
/// zeroing the room first (TLS record buffers are filled on every
/// request): from the stream, or with `at` from that offset of a file.
/// Returns the bytes read.
#[cfg(feature = "tls")]
pub fn read_onto(
    fd: &impl AsRawFd,
    buf: &mut Vec<u8>,
    max: usize,
    at: Option<u64>,
) -> io::Result<usize> {
    use nix::libc;
    buf.reserve(max);
    let room = &mut buf.spare_capacity_mut()[..max];
    let (fd, to, len) = (fd.as_raw_fd(), room.as_mut_ptr().cast(), room.len());
    let n = match at {
        // SAFETY: read(2) writes at most `len` bytes into `room`, which the
        // Vec owns and nothing else borrows.
        None => unsafe { libc::read(fd, to, len) },
        Some(at) => {
            // 32-bit glibc's off_t is 32 bits; its pread64 takes any offset.
            #[cfg(not(all(target_env = "gnu", target_pointer_width = "32")))]
            use libc::{off_t, pread};
            #[cfg(all(target_env = "gnu", target_pointer_width = "32"))]
            use libc::{off64_t as off_t, pread64 as pread};
            let at = off_t::try_from(at).map_err(|_| io::ErrorKind::InvalidInput)?;
            // SAFETY: as for read(2) above.
            unsafe { pread(fd, to, len, at) }
        }
    };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    // SAFETY: the first `n` bytes of the spare room were just written.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// The kernel's host name (uname's nodename) as it is now: an admin may
/// change it while the server runs.
pub fn host_name() -> Option<String> {
    nix::unistd::gethostname().ok()?.into_string().ok()
}

/// Sends `payload` as one record of `content_type` through the kernel's
/// TLS layer (a TLS_SET_RECORD_TYPE control message: without it the
/// kernel sends application data). nix has no such control message.
#[cfg(feature = "tls")]
pub fn send_tls_record(sock: &impl AsRawFd, content_type: u8, payload: &[u8]) -> io::Result<usize> {
    use nix::libc;
    // Aligned for cmsghdr and larger than CMSG_SPACE(1) on every target.
    let mut space = [0usize; 8];
    let iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    // SAFETY: msghdr is plain data (zero is a valid value of each field:
    // null pointers, zero lengths); the fields set below point into `iov`
    // and `space`, which outlive the sendmsg call, and CMSG_FIRSTHDR finds
    // a header within `space` because msg_controllen is at least its size.
    let sent = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &iov as *const libc::iovec as *mut libc::iovec;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(1) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_TLS;
        (*cmsg).cmsg_type = libc::TLS_SET_RECORD_TYPE;
        (*cmsg).cmsg_len = libc::CMSG_LEN(1) as _;
        *libc::CMSG_DATA(cmsg) = content_type;
        libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

fn set_nodelay(sock: &impl AsFd) {
    let _ = socket::setsockopt(sock, sockopt::TcpNoDelay, &true);
}

/// TCP_DEFER_ACCEPT: a connection is handed to accept(2) when its first
/// bytes come (an HTTP or TLS client always speaks first), not at the
/// handshake's end: the worker wakes once per client, and its read finds
/// the request there. One that stays silent comes after about a second
/// (the kernel's first SYN-ACK retransmission), and then waits as before.
fn defer_accept(sock: &impl AsFd) {
    let seconds: nix::libc::c_int = 1;
    // SAFETY: setsockopt(2) on a socket we borrow, with a c_int it reads
    // and the size of that c_int.
    unsafe {
        nix::libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            nix::libc::IPPROTO_TCP,
            nix::libc::TCP_DEFER_ACCEPT,
            (&seconds as *const nix::libc::c_int).cast(),
            std::mem::size_of::<nix::libc::c_int>() as nix::libc::socklen_t,
        );
    }
}

/// TCP_CORK: while set, only full segments leave; clearing it sends the
/// rest at once.
pub fn set_cork(sock: &impl AsFd, on: bool) {
    let _ = socket::setsockopt(sock, sockopt::TcpCork, &on);
}

/// The IP addresses of this host's interfaces, each with its IPv4 prefix
/// length (`None` for IPv6, or where none is given): from the kernel's
/// text in /proc (the same bytes whatever the byte order), else from
/// getifaddrs(3) (a chroot without /proc). Under qemu-user a big-endian
/// guest's getifaddrs never returned (its netlink replies are
/// little-endian).
pub fn interface_addresses() -> io::Result<Vec<(std::net::IpAddr, Option<u8>)>> {
    match (
        std::fs::read_to_string("/proc/net/fib_trie"),
        std::fs::read_to_string("/proc/net/if_inet6"),
    ) {
        (Ok(v4), v6) => Ok(proc_networks(&v4, &v6.unwrap_or_default())),
        _ => interfaces_from_libc(),
    }
}

/// The networks of /proc/net/fib_trie's connected routes (a node's
/// address followed by `/N link UNICAST` or `/N host LOCAL`) and the
/// addresses of /proc/net/if_inet6 (32 hexadecimal digits first on a line).
fn proc_networks(fib_trie: &str, if_inet6: &str) -> Vec<(std::net::IpAddr, Option<u8>)> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut found = Vec::new();
    let mut node: Option<Ipv4Addr> = None;
    for line in fib_trie.lines() {
        let line = line.trim_start_matches([' ', '|', '+', '-']);
        if let Ok(a) = line.trim().parse::<Ipv4Addr>() {
            node = Some(a);
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(len), Some(scope), Some(kind)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        let Some(len) = len.strip_prefix('/').and_then(|l| l.parse::<u8>().ok()) else {
            continue;
        };
        let connected = matches!((scope, kind), ("link", "UNICAST") | ("host", "LOCAL"));
        if let (Some(a), true) = (node, connected && len <= 32) {
            let entry = (IpAddr::V4(a), Some(len));
            if !found.contains(&entry) {
                found.push(entry);
            }
        }
    }
    for line in if_inet6.lines() {
        let hex = line.split_whitespace().next().unwrap_or("");
        if let (32, Ok(bits)) = (hex.len(), u128::from_str_radix(hex, 16)) {
            found.push((IpAddr::V6(Ipv6Addr::from(bits)), None));
        }
    }
    found
}

fn interfaces_from_libc() -> io::Result<Vec<(std::net::IpAddr, Option<u8>)>> {
    use nix::libc;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut list: *mut libc::ifaddrs = ptr::null_mut();
    // SAFETY: getifaddrs writes a list it allocated into `list`, freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = Vec::new();
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is an element of the list getifaddrs made, alive until freeifaddrs.
        let ifa = unsafe { &*at };
        at = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: a non-null ifa_addr points at a socket address whose
        // family says its type; each arm reads only that type's bytes.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        match family {
            libc::AF_INET => {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { ptr::read_unaligned(ifa.ifa_addr.cast::<libc::sockaddr_in>()) };
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                let mask = ifa.ifa_netmask;
                // SAFETY: a non-null netmask is a socket address like
                // ifa_addr (some C libraries leave its family unset).
                let prefix = if !mask.is_null()
                    && matches!(
                        i32::from(unsafe { (*mask).sa_family }),
                        libc::AF_INET | libc::AF_UNSPEC
                    ) {
                    // SAFETY: an IPv4 address's netmask is a sockaddr_in.
                    let m = unsafe { ptr::read_unaligned(mask.cast::<libc::sockaddr_in>()) };
                    Some(u32::from_be(m.sin_addr.s_addr).leading_ones() as u8)
                } else {
                    None
                };
                found.push((IpAddr::V4(ip), prefix));
            }
            libc::AF_INET6 => {
                // SAFETY: an AF_INET6 address is a sockaddr_in6.
                let sin6 =
                    unsafe { ptr::read_unaligned(ifa.ifa_addr.cast::<libc::sockaddr_in6>()) };
                found.push((IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)), None));
            }
            _ => {}
        }
    }
    // SAFETY: the list getifaddrs made, no longer used.
    unsafe { libc::freeifaddrs(list) };
    Ok(found)
}

/// Takes a client waiting on `listener`: its socket already nonblocking and
/// close-on-exec, and its address, in one system call (std's `accept` then
/// `set_nonblocking` make two).
pub fn accept(listener: &std::net::TcpListener) -> io::Result<(std::net::TcpStream, SocketAddr)> {
    use nix::libc;
    use std::os::fd::FromRawFd;
    // SAFETY: an all-zero sockaddr_storage is a valid (empty) address.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: accept4 writes at most `len` bytes into `storage`, which outlives the call.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            &mut len,
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: accept4 returned a new descriptor that nothing else owns.
    let stream = unsafe { std::net::TcpStream::from_raw_fd(fd) };
    // SAFETY: the kernel wrote `len` bytes of a socket address into `storage`.
    let peer = unsafe {
        SockaddrStorage::from_raw(
            (&storage as *const libc::sockaddr_storage).cast(),
            Some(len),
        )
    }
    .and_then(|a| socket_addr(&a))
    .ok_or_else(|| io::Error::other("accept: not an IP address"))?;
    Ok((stream, peer))
}

fn socket_addr(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::V4(std::net::SocketAddrV4::new(
            v4.ip(),
            v4.port(),
        )));
    }
    a.as_sockaddr_in6().map(|v6| {
        SocketAddr::V6(std::net::SocketAddrV6::new(
            v6.ip(),
            v6.port(),
            v6.flowinfo(),
            v6.scope_id(),
        ))
    })
}

/// Whether a socket has something to read (for a listener: a client
/// waiting to be accepted), without waiting.
pub fn is_readable(fd: &impl AsFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0)
}

/// Ends the worker when the supervisor dies, whatever killed it.
pub fn die_with_parent() {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM);
}

/// The pid file, with the descriptor it was written through (as root,
/// usually), kept to empty it at stop when it can no longer be removed.
pub struct Pidfile {
    path: PathBuf,
    file: std::fs::File,
}

impl Pidfile {
    /// Opens (creating) the pid file for SysV scripts and start-stop-daemon,
    /// without writing it yet: opened before `--daemon` detaches, a pid file
    /// that cannot be written is reported on the stderr of whoever started
    /// the server, and the pid is only known after the fork.
    pub fn open(path: &Path) -> Result<Pidfile, String> {
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| format!("pidfile {}: {e}", path.display()))?;
        Ok(Pidfile {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Writes this process's pid, replacing what the file held.
    pub fn write_pid(&mut self) -> Result<(), String> {
        let failed = |e: io::Error| format!("pidfile {}: {e}", self.path.display());
        self.file.set_len(0).map_err(failed)?;
        std::os::unix::fs::FileExt::write_all_at(
            &self.file,
            format!("{}\n", std::process::id()).as_bytes(),
            0,
        )
        .map_err(failed)
    }

    /// Removes the file at stop. After dropping privileges its directory is
    /// often not writable any more: then it is emptied through the kept
    /// descriptor, so that it names no process (as lighttpd does).
    pub fn remove(self) {
        // Another instance may have written its own pid since (into the same
        // file: it truncates, not replaces): leave that.
        let mut buf = [0u8; 24];
        let n = std::os::unix::fs::FileExt::read_at(&self.file, &mut buf, 0).unwrap_or(0);
        let ours = buf[..n].trim_ascii() == std::process::id().to_string().as_bytes();
        if !ours {
            return;
        }
        if std::fs::remove_file(&self.path).is_err() {
            if let Err(e) = self.file.set_len(0) {
                log::warn!(
                    "pidfile {}: cannot remove or empty it: {e}",
                    self.path.display()
                );
            }
        }
    }
}

/// Raises the soft descriptor limit so the connection limit can be reached
/// (many systems start daemons with a soft limit of 1024).
pub fn raise_fd_limit(connections: usize) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let want = (connections as u64).saturating_mul(2).saturating_add(64);
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        // rlim_t is 32 bits on some targets (armv7 glibc).
        #[allow(clippy::unnecessary_cast)]
        let (soft64, hard64) = (soft as u64, hard as u64);
        if soft64 < want {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, want.min(hard64) as _, hard);
        }
    }
}

/// Starts (or with `None` stops) a periodic SIGALRM, which arrives through
/// the worker's signalfd like the other signals: the deadline ticker then
/// needs no timer of the reactor's, and no descriptor of its own.
pub fn set_alarm(period: Option<std::time::Duration>) {
    let every = period.map_or(
        nix::libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        |p| nix::libc::timeval {
            tv_sec: p.as_secs() as _,
            tv_usec: p.subsec_micros() as _,
        },
    );
    let timer = nix::libc::itimerval {
        it_interval: every,
        it_value: every,
    };
    // SAFETY: setitimer(2) reads the struct passed by reference; the old
    // value is not asked for. It cannot fail with ITIMER_REAL and these values.
    unsafe { nix::libc::setitimer(nix::libc::ITIMER_REAL, &timer, std::ptr::null_mut()) };
}

/// Gives the allocator's free pages back to the system. glibc keeps freed
/// heap pages resident until asked (a flood's buffers stayed at its peak).
/// musl's allocator (mallocng) has no such call, and keeps them too
/// (`tests/floods.rs`, `on_glibc`).
pub fn return_free_memory() {
    // SAFETY: malloc_trim(3) takes no pointer; it only walks and trims the
    // allocator's own free lists, under the allocator's lock.
    #[cfg(target_env = "gnu")]
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod interface_tests {
    use super::*;

    #[test]
    fn connected_networks_and_ipv6_addresses_are_read_from_proc() {
        let fib_trie = "Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.168.1.0/24 2 0 2
           |-- 192.168.1.0
              /24 link UNICAST
Local:
           |-- 127.0.0.0
              /8 host LOCAL
";
        let if_inet6 = "fd000018000500000000000000000003 01 40 00 82       lo\n";
        let got: Vec<String> = proc_networks(fib_trie, if_inet6)
            .iter()
            .map(|(a, l)| format!("{a} {l:?}"))
            .collect();
        assert_eq!(
            got,
            [
                "127.0.0.0 Some(8)",
                "192.168.1.0 Some(24)",
                "fd00:18:5::3 None"
            ]
        );
    }
}
