//! Slow, idle, greedy and broken clients: timeouts, limits, descriptor
//! exhaustion, and one client never disturbing another.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn a_slow_head_gets_408_and_is_closed() {
    let s = Server::start(&["--header-timeout", "1"]);
    let mut c = s.connect();
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        .unwrap();
    let started = Instant::now();
    let out = read_to_close(&mut c);
    assert!(out.starts_with("HTTP/1.1 408 "), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "closed by the header timeout"
    );
    s.assert_healthy();
}

#[test]
fn a_silent_connection_is_closed_by_the_header_timeout() {
    let s = Server::start(&["--header-timeout", "1"]);
    let mut c = s.connect();
    assert_eq!(read_to_close(&mut c), "", "closed without an answer");
}

/// The kernel hands a connection to the server with its first bytes
/// (TCP_DEFER_ACCEPT): until the client speaks, the server's end is still
/// half-open in the kernel's table, not a connection the worker woke for.
#[test]
fn a_connection_is_handed_over_with_its_first_bytes() {
    let s = Server::start(&[]);
    let mut c = s.connect();
    let client_port = c.local_addr().unwrap().port();
    assert_eq!(
        server_end_state(s.port, client_port),
        Some(SYN_RECV),
        "the server's end before the client spoke"
    );
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let out = read_to_close(&mut c);
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
}

const SYN_RECV: u8 = 3;

/// The TCP state of the server's end of a connection from `client_port`,
/// as /proc/net/tcp lists it (request sockets included).
fn server_end_state(server_port: u16, client_port: u16) -> Option<u8> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port = |addr: &str| u16::from_str_radix(addr.rsplit(':').next()?, 16).ok();
    table.lines().skip(1).find_map(|row| {
        let f: Vec<&str> = row.split_whitespace().collect();
        (port(f[1]) == Some(server_port) && port(f[2]) == Some(client_port))
            .then(|| u8::from_str_radix(f[3], 16).ok())
            .flatten()
    })
}

#[test]
fn an_idle_keep_alive_connection_is_closed() {
    let s = Server::start(&["--keepalive-timeout", "1"]);
    let mut c = s.connect();
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut c, false).unwrap().status, 200);
    assert_eq!(
        read_to_close(&mut c),
        "",
        "closed by the keep-alive timeout"
    );
}

#[test]
fn max_requests_per_connection() {
    let s = Server::start(&["--max-requests", "2"]);
    let mut c = s.connect();
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let first = read_response(&mut c, false).unwrap();
    assert_eq!(first.header("connection"), None);
    let second = read_response(&mut c, false).unwrap();
    assert_eq!(second.header("connection"), Some("close"));
    assert_eq!(
        read_to_close(&mut c),
        "",
        "the third request is not answered on this connection"
    );
}

#[test]
fn a_stalled_reader_is_dropped_by_the_send_timeout() {
    let s = Server::start(&["--send-timeout", "1", "--log-level", "debug"]);
    s.root.write("big.bin", vec![b'z'; 32 << 20]);
    let mut c = s.connect();
    // Ask for 32 MiB and never read: the server's send stalls.
    c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert!(
        s.wait_log("send stalled", Duration::from_secs(10)),
        "{}",
        s.log_text()
    );
    // The server gave up: draining the socket ends in a close before all 32 MiB.
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match read_some(&mut c, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    assert!(got < 32 << 20, "the server kept a stalled send going");
    s.assert_healthy();
}

/// At the limit, a new client is served at once by closing the connection
/// that has waited longest without a whole request (here: in the middle of
/// its head), not after the head timeout; one with a request under way
/// (here: a download it reads slowly) is left to finish.
#[test]
fn at_the_connection_limit_a_connection_without_a_whole_head_makes_room() {
    let s = Server::start(&["--max-connections", "2", "--header-timeout", "60"]);
    let big = vec![b'z'; 8 << 20];
    s.root.write("big.bin", &big);
    let mut busy = s.connect();
    busy.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    // Its answer has begun: its request is under way.
    let mut first = [0u8; 5];
    busy.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/");
    let mut slow = s.connect();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n").unwrap();
    let mut newcomer = s.connect();
    newcomer
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let r = read_response(&mut newcomer, false).expect("served at the limit");
    assert_eq!(r.status, 200);
    let mut byte = [0u8; 1];
    assert_eq!(
        read_some(&mut slow, &mut byte).ok(),
        Some(0),
        "the slow head was closed"
    );
    let mut rest = Vec::new();
    busy.read_to_end(&mut rest).ok();
    let (head, body) = rest.split_at(find_end_of_head(&rest));
    assert!(
        head.starts_with(b"1.1 200 "),
        "{}",
        String::from_utf8_lossy(head)
    );
    assert_eq!(body.len(), big.len(), "the download was finished");
}

/// Where a response's body starts, after its head's blank line.
fn find_end_of_head(bytes: &[u8]) -> usize {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(bytes.len(), |i| i + 4)
}

/// CPU time (user + system, in clock ticks) of a process and its children.
fn cpu_ticks(pid: i32) -> u64 {
    let mut pids = children(pid);
    pids.push(pid);
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .map(|stat| {
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            let f: Vec<&str> = after.split(' ').collect();
            f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
        })
        .sum()
}

#[test]
fn running_out_of_descriptors_does_not_spin_and_recovers() {
    let root = TempDir::new("emfile");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    let mut cmd = Command::new("prlimit");
    cmd.arg("--nofile=32:32").arg("--");
    let base = command();
    cmd.arg(base.get_program()).args(base.get_args());
    cmd.args([
        "--config",
        "/dev/null",
        "--listen",
        "127.0.0.1:0",
        "--max-connections",
        "1000",
        "--root",
    ])
    .arg(root.path());
    let s = Server::spawn(cmd, root);
    // One worker: the server's own process.
    let worker = s.pid();
    // Far more connections than descriptors.
    let hogs: Vec<TcpStream> = (0..60).map(|_| s.connect()).collect();
    assert!(
        s.wait_log("accept:", Duration::from_secs(10)),
        "EMFILE was reached: {}",
        s.log_text()
    );
    let before = cpu_ticks(worker);
    std::thread::sleep(Duration::from_secs(2)); // the window in which a busy loop would burn CPU
    let used = cpu_ticks(worker) - before;
    assert!(
        used < 50,
        "the worker used {used} ticks in 2 s at EMFILE: it spins"
    );
    drop(hogs);
    // Descriptors free: new clients are served again.
    assert!(wait_until(Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", s.port)).is_ok_and(|mut c| {
            let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
            c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .is_ok()
                && read_to_close(&mut c).starts_with("HTTP/1.1 200")
        })
    }));
}

use std::process::Command;

#[test]
fn garbage_stalls_and_drops_do_not_disturb_other_clients() {
    let s = Server::start(&["--header-timeout", "5"]);
    s.root.write("big.bin", vec![b'q'; 4 << 20]);
    let port = s.port;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut hostile = Vec::new();
    for kind in 0..3 {
        let stop = stop.clone();
        hostile.push(std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 200 {
                n += 1;
                // Another client than the one checked below: one address
                // holding its share of the connections is refused more.
                let mut c = connect_from_to("127.0.0.2", port);
                match kind {
                    // Garbage.
                    0 => {
                        let _ =
                            c.write_all(b"\x00\xff\r\n\r\nGARBAGE / HTTP/9\r\n\x01\x02\r\n\r\n");
                    }
                    // A head that never ends.
                    1 => {
                        let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nX: ");
                    }
                    // A download dropped mid-transfer.
                    _ => {
                        let _ = c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
                        let mut b = [0u8; 4096];
                        let _ = c.read(&mut b);
                        let _ = socket_reset(&c);
                    }
                }
            }
        }));
    }
    for _ in 0..200 {
        let r = s.get("/index.html", &[]);
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), 37);
    }
    let (code, _, body) = curl(&[&s.url("/big.bin")]);
    assert_eq!((code, body.len()), (200, 4 << 20));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in hostile {
        h.join().unwrap();
    }
    s.assert_healthy();
}

/// Closes with RST (SO_LINGER 0), as a client that crashes does.
fn socket_reset(c: &TcpStream) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct Linger {
        onoff: i32,
        linger: i32,
    }
    unsafe extern "C" {
        fn setsockopt(fd: i32, level: i32, name: i32, val: *const Linger, len: u32) -> i32;
    }
    let l = Linger {
        onoff: 1,
        linger: 0,
    };
    // SAFETY: a valid socket and a properly sized linger struct (SOL_SOCKET=1, SO_LINGER=13).
    let rc = unsafe {
        setsockopt(
            c.as_raw_fd(),
            1,
            13,
            &l,
            std::mem::size_of::<Linger>() as u32,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
