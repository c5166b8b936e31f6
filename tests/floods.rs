//! Floods of hostile clients against the TLS build with the default
//! configuration (one worker, `max-connections 1024`): the server's memory
//! stays under the ceiling the README states, computed here from the same
//! bounds (`src/limits.rs`), and a normal client is still served while the
//! flood holds. Each flood is bounded in count and ends with its test.
#![cfg(feature = "tls")]

mod common;
#[allow(dead_code)]
#[path = "../src/limits.rs"]
mod limits;

use std::io::Write;
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use limits::*;

/// The default connection limit: the floods fill it.
const LIMIT: usize = DEFAULT_MAX_CONNECTIONS;

/// Floods that hold connections the limit does not reclaim (a request under
/// way) leave room below it for the normal client.
const BUSY: usize = 900;

/// What a connection holds besides its buffers: its task, the rustls
/// session and the reactor's entry (measured: 7 to 10 KiB).
const CONN_STATE: usize = 12 * 1024;

/// The most a TLS connection holds while its handshake runs: the
/// client's records and the server's flight not yet taken by the client.
const HANDSHAKING: usize = CONN_STATE + TLS_HANDSHAKE_HELD + OUT_BUF;

/// The most a TLS connection holds once its handshake is done: a head
/// buffer, received records not yet decrypted and the plaintext decrypted
/// from them, the answer being made and the records encrypted from it,
/// and a body on its way each way (proxy, tunnel or script).
const PER_CONNECTION: usize = CONN_STATE + HEAD_BUF + 2 * TLS_HELD + 2 * OUT_BUF + 2 * PROXY_CHUNK;

/// What a worker keeps whatever its connections: the file cache's bodies,
/// the pool's spare buffers, request frames, TLS sessions, and the chunked
/// bodies of running scripts (`cgi-max` of `cgi-max-body`, defaults 8 and
/// 1 MiB, each in a buffer that may have doubled).
const PER_WORKER: usize = BODY_BUDGET
    + POOL_KEEP * (HEAD_BUF + OUT_BUF + 2 * TLS_READ)
    + FRAMES_KEEP * 6 * 1024
    + TLS_SESSIONS * 1024
    + 8 * 2 * 1024 * 1024;

/// The README's ceiling in KiB for `n` connections over a server that was
/// `base` KiB when idle (one worker).
fn ceiling_kib(base: u64, n: usize) -> u64 {
    base + ((PER_WORKER + n * PER_CONNECTION) / 1024) as u64
}

/// A flood's own bound: what its `n` connections may hold in the state
/// the flood keeps them in, `each`, on top of the idle server. Tighter
/// than the ceiling, so a state that holds more than its share shows.
fn bound_kib(base: u64, n: usize, each: usize) -> u64 {
    base + ((POOL_KEEP * (HEAD_BUF + OUT_BUF + 2 * TLS_READ) + n * each) / 1024) as u64
}

/// One flood at a time: each measures its own server's memory, and the
/// normal client's wait should not depend on another flood's load.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A TLS server with the default configuration and a file of 64 KiB,
/// but for a head timeout long enough that every flood is still held
/// once it is all set up on a slow machine (1024 handshakes may take
/// longer than the default 10 s).
fn server() -> Server {
    let root = TempDir::new("flood");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    root.write("big.bin", vec![b'x'; 64 * 1024]);
    Server::start_in_over(Transport::Tls, root, &["--header-timeout", "60"])
}

fn tls_port(s: &Server) -> u16 {
    s.tls.as_ref().expect("a TLS listener").port
}

fn kib(pid: i32, field: &str) -> u64 {
    proc_status(pid, field)
        .and_then(|v| v.trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The sockets a process has open.
fn sockets(pid: i32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
}

/// A TCP connection to the TLS listener, with timeouts so that no write
/// or read of a flood can hang the test.
fn raw(s: &Server) -> Option<TcpStream> {
    let c = TcpStream::connect(("127.0.0.1", tls_port(s))).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    c.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
    Some(c)
}

/// A TLS connection whose handshake is done.
fn tls(s: &Server) -> Option<tls::Stream> {
    let end = s.tls.as_ref()?;
    let mut c = tls::connect(end.port, end.client.clone());
    handshake(&mut c)?;
    Some(c)
}

/// A TLS connection whose client takes in little at a time (a 4 KiB
/// receive buffer, set before it connects so the window stays small):
/// answers it does not read soon stall on the server.
fn tls_small_window(s: &Server) -> Option<tls::Stream> {
    use nix::sys::socket::{self as so, sockopt};
    let end = s.tls.as_ref()?;
    let fd = so::socket(
        so::AddressFamily::Inet,
        so::SockType::Stream,
        so::SockFlag::SOCK_CLOEXEC,
        None,
    )
    .ok()?;
    so::setsockopt(&fd, sockopt::RcvBuf, &4096).ok()?;
    let to = so::SockaddrIn::new(127, 0, 0, 1, end.port);
    so::connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &to).ok()?;
    let name = rustls::pki_types::ServerName::try_from("localhost").ok()?;
    let conn = rustls::ClientConnection::new(end.client.clone(), name).ok()?;
    let mut c = rustls::StreamOwned::new(conn, TcpStream::from(fd));
    handshake(&mut c)?;
    Some(c)
}

/// Completes a client's handshake, with timeouts so that it cannot hang.
fn handshake(c: &mut tls::Stream) -> Option<()> {
    c.sock
        .set_write_timeout(Some(Duration::from_secs(5)))
        .ok()?;
    c.sock.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    while c.conn.is_handshaking() {
        c.conn.complete_io(&mut c.sock).ok()?;
    }
    Some(())
}

/// One GET over a new TLS connection, answered 200 with the index.
fn normal_client(s: &Server) -> bool {
    let Some(mut c) = tls(s) else {
        return false;
    };
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .is_ok()
        && read_response(&mut c, false)
            .is_some_and(|r| r.status == 200 && r.text().contains("hello"))
}

/// Opens `n` connections made by `one` (each left as the client leaves
/// it), then checks that a normal client is served while they are held
/// and that the server's peak memory stayed under the ceiling.
fn flood<C>(kind: &str, n: usize, each: usize, one: impl Fn(&Server) -> Option<C>) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = server();
    let pid = s.pid();
    assert!(normal_client(&s), "served before the flood");
    // Its connection (and the harness's, which waited for the start) has
    // closed on the server's side too, leaving the two listeners: the
    // flood gets every slot.
    assert!(wait_until(Duration::from_secs(10), || sockets(pid) == 2));
    let base = kib(pid, "VmRSS");
    let started = Instant::now();
    let held: Vec<C> = (0..n).filter_map(|_| one(&s)).collect();
    let set_up = started.elapsed();
    // Served while the flood holds: the second is the README's figure on an
    // idle machine; the deadline stays far under the head timeout, after
    // which the flood would be gone by itself.
    let start = Instant::now();
    let served = wait_until(Duration::from_secs(5), || normal_client(&s));
    let took = start.elapsed();
    let peak = kib(pid, "VmHWM");
    let ceiling = ceiling_kib(base, LIMIT);
    let bound = bound_kib(base, n, each);
    eprintln!(
        "{kind}: {} of {n} held, base {base} KiB, peak {peak} KiB, bound {bound} KiB, \
         ceiling {ceiling} KiB, set up in {set_up:?}, normal client served in {took:?}",
        held.len()
    );
    assert!(served, "{kind}: a normal client was not served within 5 s");
    assert!(
        peak <= bound.min(ceiling),
        "{kind}: the server reached {peak} KiB, over its bound of {bound} KiB"
    );
    drop(held);
    s.assert_healthy();
}

/// A handshake record of `len` bytes: its header and `len` bytes of body.
fn handshake_record(len: usize) -> Vec<u8> {
    let mut r = vec![0x16, 0x03, 0x01, (len >> 8) as u8, len as u8];
    r.resize(5 + len, 0);
    r
}

/// Handshakes of 64 KiB each: a ClientHello that says it is 65,535 bytes
/// long, sent in four full records (3 bytes short of its end), which
/// rustls would join and wait to complete.
#[test]
fn big_handshakes_are_cut_off_and_stay_under_the_ceiling() {
    flood("big handshakes", LIMIT, HANDSHAKING, |s| {
        let mut c = raw(s)?;
        let mut first = handshake_record(16 * 1024);
        first[5..9].copy_from_slice(&[1, 0x00, 0xff, 0xff]);
        let _ = c.write_all(&first);
        for _ in 0..3 {
            let _ = c.write_all(&handshake_record(16 * 1024));
        }
        Some(c)
    });
}

/// Handshakes that never finish: a few bytes of a ClientHello, then
/// nothing, on every slot.
#[test]
fn slow_handshakes_on_every_slot_do_not_lock_clients_out() {
    flood("slow handshakes", LIMIT, HANDSHAKING, |s| {
        let mut c = raw(s)?;
        c.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).ok()?;
        Some(c)
    });
}

/// Heads sent a line at a time and never finished, on every slot, after
/// a full handshake.
#[test]
fn slow_heads_on_every_slot_do_not_lock_clients_out() {
    flood("slow heads", LIMIT, PER_CONNECTION, |s| {
        let mut c = tls(s)?;
        c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n").ok()?;
        c.flush().ok()?;
        Some(c)
    });
}

/// Request bodies announced at 1 MB, sent in part and then never.
#[test]
fn slow_bodies_stay_under_the_ceiling() {
    flood("slow bodies", BUSY, PER_CONNECTION, |s| {
        let mut c = tls(s)?;
        let head = b"POST /index.html HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n";
        c.write_all(head).ok()?;
        c.write_all(&[b'x'; 16 * 1024]).ok()?;
        c.flush().ok()?;
        Some(c)
    });
}

/// Many requests for a 64 KiB file in one go from clients that do not
/// read the answers.
#[test]
fn pipelined_floods_that_never_read_stay_under_the_ceiling() {
    flood("pipelined floods", BUSY, PER_CONNECTION, |s| {
        let mut c = tls_small_window(s)?;
        let many = b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n".repeat(40);
        c.write_all(&many).ok()?;
        c.flush().ok()?;
        Some(c)
    });
}
