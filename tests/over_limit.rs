//! The connection limit and the other per-process limits under clients
//! that ask for more than they are given: floods above `max-connections`
//! from one address and from several, the same beside reloads, and
//! `cgi-max` and the login failure counts across reloads. Each client of
//! a flood has its own loopback address (all of 127.0.0.0/8 is this
//! host's), and asks for many answers it never reads: a connection with a
//! request under way, which the limit used to leave alone.

mod common;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::time::Duration;

use common::*;

/// The connection limit of these tests: small, so that floods above it
/// stay small too. A client may hold a quarter of it, and never fewer
/// than 8 (`src/limits.rs`, `CLIENT_SHARE_MIN`).
const LIMIT: usize = 32;
const SHARE: usize = 8;

/// A server with `max-connections LIMIT`, one worker, and a 64 KiB file.
fn server(more: &[&str]) -> Server {
    let root = TempDir::new("over");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    root.write("big.bin", vec![b'x'; 64 * 1024]);
    let limit = LIMIT.to_string();
    let mut args = vec!["--max-connections", limit.as_str(), "--workers", "1"];
    args.extend_from_slice(more);
    Server::start_in(root, &args)
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

/// A connection from `source` that asks for the 64 KiB file 80 times in
/// one go and reads nothing (a 4 KiB receive window, set before it
/// connects): the server is soon stalled sending to it.
fn stalled(s: &Server, source: &str) -> Option<TcpStream> {
    use nix::sys::socket::{self as so, sockopt};
    use std::os::fd::AsRawFd;
    let fd = so::socket(
        so::AddressFamily::Inet,
        so::SockType::Stream,
        so::SockFlag::SOCK_CLOEXEC,
        None,
    )
    .ok()?;
    so::setsockopt(&fd, sockopt::RcvBuf, &4096).ok()?;
    let from: Ipv4Addr = source.parse().ok()?;
    so::bind(
        fd.as_raw_fd(),
        &so::SockaddrIn::from(SocketAddrV4::new(from, 0)),
    )
    .ok()?;
    let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, s.port);
    so::connect(fd.as_raw_fd(), &so::SockaddrIn::from(to)).ok()?;
    let mut c = TcpStream::from(fd);
    c.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
    let many = b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n".repeat(80);
    c.write_all(&many).ok()?;
    Some(c)
}

/// `per_address` stalled connections from each of `addresses`.
fn flood(s: &Server, addresses: &[String], per_address: usize) -> Vec<TcpStream> {
    addresses
        .iter()
        .flat_map(|a| (0..per_address).filter_map(move |_| stalled(s, a)))
        .collect()
}

/// Addresses 127.0.N.1 to 127.0.N.count: one hostile host's.
fn addresses(n: u8, count: u8) -> Vec<String> {
    (1..=count).map(|i| format!("127.0.{n}.{i}")).collect()
}

/// The owner, from an address of its own: one GET answered 200 within
/// 2 s.
fn owner_served(s: &Server) -> bool {
    let mut c = s.connect_from("127.0.0.2");
    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .is_ok()
        && read_response(&mut c, false).is_some_and(|r| r.status == 200)
}

/// The owner is served within 5 s while the flood holds; then, as
/// connections are accepted in order, every flood connection that came
/// before has been taken or refused: the server holds at most the limit
/// (and the listener, and the owner's last connection closing).
fn assert_owner_served_within_the_limit(s: &Server, what: &str, held: usize) {
    assert!(
        wait_until(Duration::from_secs(5), || owner_served(s)),
        "{what}: the owner was not served within 5 s"
    );
    let open = sockets(s.pid());
    eprintln!("{what}: {held} connections made, {open} sockets open in the server");
    assert!(
        open <= LIMIT + 2,
        "{what}: {open} sockets open, over the limit of {LIMIT}"
    );
}

/// One address's stalled connections, as many as the limit and more:
/// it keeps its share, and the owner is served.
#[test]
fn one_address_holds_only_its_share_of_the_connections() {
    let s = server(&[]);
    let held = flood(&s, &addresses(1, 1), LIMIT + 8);
    assert!(
        wait_until(Duration::from_secs(5), || owner_served(&s)),
        "the owner was not served within 5 s"
    );
    // The owner's connection, closing, and the listener besides.
    let open = sockets(s.pid());
    assert!(
        open <= SHARE + 2,
        "one address holds {} connections, over its share of {SHARE}",
        open - 1
    );
    drop(held);
    s.assert_healthy();
}

/// The device's own address (127.0.0.1) holds more than a client's
/// share: a tunnel or a local front end speaks for many users. Each
/// connection is answered twice, so none was closed at its accept.
#[test]
fn the_device_itself_holds_more_than_a_share() {
    let s = server(&[]);
    let ask = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut held: Vec<TcpStream> = (0..SHARE * 2 + 4).map(|_| s.connect()).collect();
    for round in 0..2 {
        for (i, c) in held.iter_mut().enumerate() {
            c.write_all(ask).unwrap();
            let answer = read_response(c, false).map(|r| r.status);
            assert_eq!(answer, Some(200), "connection {i}, request {round}");
        }
    }
    s.assert_healthy();
}

/// Addresses that together ask for more than the limit, each within its
/// share, every connection busy: at the limit the server closes one of
/// the busiest client's, and the owner is served.
#[test]
fn a_flood_above_the_limit_from_many_addresses_leaves_the_owner_room() {
    let s = server(&[]);
    let held = flood(&s, &addresses(1, 6), SHARE);
    assert_owner_served_within_the_limit(&s, "6 addresses", held.len());
    drop(held);
    s.assert_healthy();
}

/// A host with an address for each of its connections (each within its
/// share), more of them than the limit: at the limit the server closes
/// the one that has been sending longest, and the owner is served.
#[test]
fn a_host_with_an_address_for_each_stalled_connection_leaves_the_owner_room() {
    let s = server(&[]);
    let held = flood(&s, &addresses(1, 40), 1);
    assert_owner_served_within_the_limit(&s, "40 addresses, one each", held.len());
    drop(held);
    s.assert_healthy();
}

/// The same flood, a wave at a time with a reload between waves: a
/// reload's new configuration counts the connections the one it replaced
/// still holds.
#[test]
fn a_flood_above_the_limit_beside_reloads_stays_within_it() {
    let s = server(&[]);
    let mut held = Vec::new();
    for wave in 1..=3u8 {
        held.extend(flood(&s, &addresses(wave, 4), SHARE));
        s.reload();
    }
    assert_owner_served_within_the_limit(&s, "3 waves and 3 reloads", held.len());
    drop(held);
    s.assert_healthy();
}

/// A script that says it started (a file in `dir`), then waits until
/// `dir/go` exists.
fn held_script(root: &TempDir, dir: &TempDir) {
    let d = dir.path().display();
    script(
        root,
        "hold",
        &format!(
            "touch {d}/started.$$\nwhile [ ! -e {d}/go ]; do sleep 0.05; done\n\
             printf 'Content-Type: text/plain\\n\\nran\\n'\n"
        ),
    );
}

fn started(dir: &TempDir) -> usize {
    std::fs::read_dir(dir.path())
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("started."))
                .count()
        })
        .unwrap_or(0)
}

/// `cgi-max 2` with two scripts running (from two clients: one client
/// runs at most half), then a reload: a third request is still one too
/// many.
#[test]
fn cgi_max_holds_across_reloads() {
    let root = TempDir::new("overcgi");
    root.write("index.html", "x");
    let dir = TempDir::new("overcgidir");
    held_script(&root, &dir);
    let s = Server::start_in(
        root,
        &[
            "--workers",
            "1",
            "--cgi-prefix",
            "/cgi-bin/",
            "--cgi-max",
            "2",
        ],
    );
    let ask = |from: &str| {
        let mut c = s.connect_from(from);
        c.write_all(b"GET /cgi-bin/hold HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        c
    };
    let mut running = vec![ask("127.0.0.2"), ask("127.0.0.3")];
    assert!(wait_until(Duration::from_secs(10), || started(&dir) == 2));
    for _ in 0..2 {
        s.reload();
    }
    let mut third = ask("127.0.0.4");
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let r = read_response(&mut third, false);
    let status = r.as_ref().map(|r| r.status);
    std::fs::write(dir.path().join("go"), "").unwrap();
    assert_eq!(status, Some(503), "{} scripts started", started(&dir));
    assert!(r.unwrap().header("retry-after").is_some());
    for c in &mut running {
        let r = read_response(c, false).expect("an answer");
        assert_eq!((r.status, r.text().as_str()), (200, "ran\n"));
    }
    s.assert_healthy();
}

/// A client held back after its failed logins is still held back after a
/// reload, even with the right password.
#[test]
fn login_failures_are_kept_across_a_reload() {
    let root = TempDir::new("overauth");
    root.write("index.html", "x");
    root.write("admin/index.html", "admin page");
    let hash = std::process::Command::new("openssl")
        .args(["passwd", "-1", "right"])
        .output()
        .expect("openssl is installed");
    let hash = String::from_utf8_lossy(&hash.stdout).trim().to_string();
    let file = root.write(".htpasswd", format!("owner:{hash}\n"));
    let realm = format!("/admin/ \"Device\" {}", file.display());
    let s = Server::start_in(root, &["--workers", "1", "--auth", &realm]);
    // owner:right and owner:wrong.
    let right = "Authorization: Basic b3duZXI6cmlnaHQ=";
    let wrong = "Authorization: Basic b3duZXI6d3Jvbmc=";
    assert_eq!(s.get("/admin/", &[right]).status, 200);
    for i in 0..5 {
        assert_eq!(s.get("/admin/", &[wrong]).status, 401, "guess {i}");
    }
    assert_eq!(s.get("/admin/", &[right]).status, 429, "held back");
    s.reload();
    assert_eq!(
        s.get("/admin/", &[right]).status,
        429,
        "still held back after the reload"
    );
}

/// A reload that lowers `max-connections` applies the new limit to the
/// connections the old configuration still holds: none is taken past it.
#[test]
fn a_lower_limit_applies_to_the_connections_held_before_the_reload() {
    let dir = TempDir::new("overconf");
    let conf = dir.write("m.conf", format!("max-connections {LIMIT}\nworkers 1\n"));
    let root = TempDir::new("overconfroot");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    root.write("big.bin", vec![b'x'; 64 * 1024]);
    let s = Server::start_with_config(&conf, root, &[]);
    let held = flood(&s, &addresses(1, 3), SHARE);
    let lower = LIMIT / 2;
    std::fs::write(&conf, format!("max-connections {lower}\nworkers 1\n")).unwrap();
    s.reload();
    assert!(
        wait_until(Duration::from_secs(5), || owner_served(&s)),
        "the owner was not served within 5 s"
    );
    let open = sockets(s.pid());
    eprintln!("{} connections made, {open} sockets open", held.len());
    assert!(
        open <= lower + 2,
        "{open} sockets open, over the new limit of {lower}; the server's log:\n{}",
        s.log_text()
    );
    drop(held);
    s.assert_healthy();
}
