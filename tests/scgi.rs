//! SCGI handlers: a handler in this test listens on a unix socket (one
//! test on TCP) and answers as its request's PATH_INFO asks; the real
//! binary sends it requests under its prefix. Framing, bodies, headers and
//! Status, a handler that dies mid-answer, one that stays silent, a body
//! below the pace, the script slots it shares with CGI, a missing socket,
//! config errors.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::AsFd;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use common::*;

/// One request as the handler received it.
#[derive(Clone, Debug)]
struct Got {
    /// The netstring as it came, length and comma included.
    raw_head: Vec<u8>,
    vars: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Got {
    fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Seen {
    requests: Mutex<Vec<Got>>,
    accepted: AtomicUsize,
    /// Requests holding their answer until `release`.
    held: AtomicUsize,
    released: Mutex<bool>,
    wake: Condvar,
    /// Connections the server closed before the handler answered.
    closed_on_us: AtomicUsize,
    /// Connections that ended before their whole body came.
    body_cut: AtomicUsize,
}

/// A handler thread serving a unix socket in `dir`.
struct Handler {
    seen: Arc<Seen>,
    socket: PathBuf,
    _dir: TempDir,
}

impl Handler {
    fn start() -> Handler {
        let dir = TempDir::new("scgi");
        let socket = dir.path().join("h.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let seen = Arc::new(Seen::default());
        let s = seen.clone();
        std::thread::spawn(move || {
            for c in listener.incoming().map_while(Result::ok) {
                s.accepted.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                std::thread::spawn(move || answer(c, &s));
            }
        });
        Handler {
            seen,
            socket,
            _dir: dir,
        }
    }

    /// `unix:/path/to/h.sock`.
    fn address(&self) -> String {
        format!("unix:{}", self.socket.display())
    }

    fn last(&self) -> Got {
        self.seen.requests.lock().unwrap().last().unwrap().clone()
    }

    fn release(&self) {
        *self.seen.released.lock().unwrap() = true;
        self.seen.wake.notify_all();
    }
}

/// Reads the netstring strictly: digits, `:`, exactly that many bytes, `,`.
/// The request, its body still to read.
fn read_head(c: &mut impl Read) -> Option<Got> {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        c.read_exact(&mut byte).ok()?;
        raw.push(byte[0]);
        match byte[0] {
            b':' => break,
            b'0'..=b'9' if raw.len() <= 10 => {}
            _ => return None,
        }
    }
    let len: usize = std::str::from_utf8(&raw[..raw.len() - 1])
        .ok()?
        .parse()
        .ok()?;
    let mut vars = vec![0u8; len + 1];
    c.read_exact(&mut vars).ok()?;
    raw.extend_from_slice(&vars);
    if vars.pop() != Some(b',') || vars.last() != Some(&0) {
        return None;
    }
    let fields: Vec<String> = vars[..vars.len() - 1]
        .split(|&b| b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    if fields.len() % 2 != 0 {
        return None;
    }
    let vars = fields
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    Some(Got {
        raw_head: raw,
        vars,
        body: Vec::new(),
    })
}

fn answer<S: Read + Write + AsFd>(mut c: S, seen: &Seen) {
    let Some(mut got) = read_head(&mut c) else {
        let _ = c.write_all(
            b"Status: 500 Internal Server Error\r\nContent-Type: text/plain\r\n\r\nbad framing",
        );
        return;
    };
    let path = got.var("PATH_INFO").unwrap_or("").to_string();
    let length: usize = got
        .var("CONTENT_LENGTH")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if path == "/die" {
        // Waits until the body is there and leaves it unread: the close
        // below is then a reset, as when a handler dies with its request
        // half read.
        let mut one = [0u8; 1];
        let _ = nix::sys::socket::recv(
            std::os::fd::AsRawFd::as_raw_fd(&c.as_fd()),
            &mut one,
            nix::sys::socket::MsgFlags::MSG_PEEK,
        );
        seen.requests.lock().unwrap().push(got);
        let _ = c.write_all(b"Content-Type: text/plain\r\n\r\npartial");
        return;
    }
    got.body.resize(length, 0);
    if c.read_exact(&mut got.body).is_err() {
        seen.body_cut.fetch_add(1, Ordering::SeqCst);
        return;
    }
    seen.requests.lock().unwrap().push(got.clone());
    let first = path.split('/').nth(1).unwrap_or("");
    let reply: Vec<u8> = match format!("/{first}").as_str() {
        "/env" => {
            let mut r = b"Content-Type: text/plain\r\n\r\n".to_vec();
            for (k, v) in &got.vars {
                r.extend_from_slice(format!("{k}={v}\n").as_bytes());
            }
            r
        }
        "/count" => format!("Content-Type: text/plain\r\n\r\n{}", got.body.len()).into_bytes(),
        "/sized" => b"Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello".to_vec(),
        "/status" => {
            b"Status: 404 Not Found\r\nContent-Type: text/plain\r\nX-From: handler\r\n\r\nnope"
                .to_vec()
        }
        "/local" => b"Location: /index.html\r\n\r\n".to_vec(),
        "/bad" => b"this is not a header\r\n\r\nbody".to_vec(),
        "/short" => b"Content-Type: text/plain\r\nContent-Length: 100\r\n\r\npartial".to_vec(),
        "/big" => {
            let mut r = b"Content-Type: text/plain\r\n\r\n".to_vec();
            for i in 0..20000 {
                r.extend_from_slice(format!("line {i} of a long streamed answer\n").as_bytes());
            }
            r
        }
        "/slow" => {
            // Silent until the server gives up and closes.
            let mut rest = [0u8; 16];
            if matches!(c.read(&mut rest), Ok(0)) {
                seen.closed_on_us.fetch_add(1, Ordering::SeqCst);
            }
            return;
        }
        "/hold" => {
            seen.held.fetch_add(1, Ordering::SeqCst);
            let mut released = seen.released.lock().unwrap();
            while !*released {
                released = seen.wake.wait(released).unwrap();
            }
            b"Content-Type: text/plain\r\n\r\nheld".to_vec()
        }
        _ => b"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nunknown path".to_vec(),
    };
    let _ = c.write_all(&reply);
}

fn root() -> TempDir {
    let root = TempDir::new("scgi-root");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    script(
        &root,
        "sized",
        "printf 'Content-Type: text/plain\\nContent-Length: 5\\n\\nhello'\n",
    );
    root
}

fn start(h: &Handler, args: &[&str]) -> Server {
    let route = format!("/app {}", h.address());
    let mut all = vec!["--scgi", &route];
    all.extend_from_slice(args);
    Server::start_in(root(), &all)
}

/// Sends `request` on a fresh connection and reads one response.
fn exchange(s: &Server, request: &[u8]) -> Option<Response> {
    let mut c = s.connect();
    c.write_all(request).unwrap();
    read_response(&mut c, false)
}

#[test]
fn the_request_is_a_netstring_with_content_length_first_and_the_cgi_environment() {
    let h = Handler::start();
    let s = start(&h, &[]);
    let r = s.get(
        "/app/env/more?a=1&b=%20",
        &["X-Custom: yes", "Authorization: Basic eDp5"],
    );
    assert_eq!(r.status, 200);
    let got = h.last();
    let colon = got.raw_head.iter().position(|&b| b == b':').unwrap();
    assert!(
        got.raw_head[colon..].starts_with(b":CONTENT_LENGTH\x000\x00SCGI\x001\x00"),
        "{:?}",
        String::from_utf8_lossy(&got.raw_head)
    );
    assert_eq!(got.vars[0], ("CONTENT_LENGTH".into(), "0".into()));
    assert_eq!(got.vars[1], ("SCGI".into(), "1".into()));
    assert_eq!(got.var("SCRIPT_NAME"), Some("/app"));
    assert_eq!(got.var("PATH_INFO"), Some("/env/more"));
    assert_eq!(got.var("QUERY_STRING"), Some("a=1&b=%20"));
    assert_eq!(got.var("REQUEST_URI"), Some("/app/env/more?a=1&b=%20"));
    assert_eq!(got.var("REQUEST_METHOD"), Some("GET"));
    assert_eq!(got.var("GATEWAY_INTERFACE"), Some("CGI/1.1"));
    assert_eq!(got.var("SERVER_PROTOCOL"), Some("HTTP/1.1"));
    assert_eq!(got.var("REMOTE_ADDR"), Some("127.0.0.1"));
    assert_eq!(got.var("HTTP_X_CUSTOM"), Some("yes"));
    assert_eq!(got.var("HTTP_AUTHORIZATION"), None, "credentials stay");
    assert_eq!(got.var("SCRIPT_FILENAME"), None, "a handler is no file");
    let names: Vec<&str> = got.vars.iter().map(|(k, _)| k.as_str()).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "each variable once: {names:?}");
    assert!(r.text().contains("SCRIPT_NAME=/app\n"));
    // The prefix alone: PATH_INFO empty.
    assert_eq!(
        s.get("/app", &[]).status,
        404,
        "unknown path to the handler"
    );
    assert_eq!(h.last().var("PATH_INFO"), Some(""));
    assert_eq!(h.last().var("SCRIPT_NAME"), Some("/app"));
    // Not under the prefix: the handler is not asked.
    let before = h.seen.accepted.load(Ordering::SeqCst);
    assert_eq!(s.get("/appx/env", &[]).status, 404);
    assert_eq!(h.seen.accepted.load(Ordering::SeqCst), before);
}

#[test]
fn post_bodies_fixed_and_chunked_reach_the_handler_with_their_length() {
    let h = Handler::start();
    let s = start(&h, &["--cgi-max-body", "4194304"]);
    let r = exchange(
        &s,
        b"POST /app/env HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello world",
    )
    .unwrap();
    assert_eq!(r.status, 200);
    let got = h.last();
    assert_eq!(got.vars[0], ("CONTENT_LENGTH".into(), "11".into()));
    assert_eq!(got.body, b"hello world");
    assert_eq!(got.var("CONTENT_TYPE"), Some("text/plain"));
    assert_eq!(got.var("REQUEST_METHOD"), Some("POST"));

    let r = exchange(
        &s,
        b"POST /app/env HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    )
    .unwrap();
    assert_eq!(r.status, 200);
    let got = h.last();
    assert_eq!(got.vars[0], ("CONTENT_LENGTH".into(), "11".into()));
    assert_eq!(got.body, b"hello world");

    // A body larger than the socket's buffers streams through.
    const SIZE: usize = 3 << 20;
    let mut req = format!(
        "POST /app/count HTTP/1.1\r\nHost: t\r\nContent-Length: {SIZE}\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    req.resize(req.len() + SIZE, b'x');
    let r = exchange(&s, &req).unwrap();
    assert_eq!(r.text(), SIZE.to_string());

    // Over cgi-max-body: 413, and the handler is not reached.
    let before = h.seen.accepted.load(Ordering::SeqCst);
    let mut req =
        b"POST /app/count HTTP/1.1\r\nHost: t\r\nContent-Length: 4194305\r\nConnection: close\r\n\r\n"
            .to_vec();
    req.extend_from_slice(b"x");
    let r = exchange(&s, &req).unwrap();
    assert_eq!(r.status, 413);
    assert_eq!(h.seen.accepted.load(Ordering::SeqCst), before);
    s.assert_healthy();
}

#[test]
fn answers_are_parsed_and_framed_as_cgi_output() {
    let h = Handler::start();
    let s = start(&h, &[]);
    let r = s.get("/app/status", &[]);
    assert_eq!(r.status, 404);
    assert_eq!(r.header("x-from"), Some("handler"));
    assert_eq!(r.text(), "nope");
    let r = s.get("/app/local", &[]);
    assert_eq!(r.status, 200);
    assert!(r.text().contains("hello"), "the local redirect's target");
    let r = s.get("/app/bad", &[]);
    assert_eq!(r.status, 502, "a malformed head");
    assert!(!r.text().contains("body"));

    // Chunked (no Content-Length) and sized answers on one connection.
    let mut c = s.connect();
    c.write_all(b"GET /app/big HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let r = read_response(&mut c, false).unwrap();
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert!(r.text().ends_with("line 19999 of a long streamed answer\n"));
    c.write_all(b"GET /app/sized HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let r = read_response(&mut c, false).unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    // HTTP/1.0: to the close.
    let out = s.raw(b"GET /app/big HTTP/1.0\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 200 "));
    assert!(!out.contains("Transfer-Encoding"));
    assert!(out.ends_with("line 19999 of a long streamed answer\n"));
}

#[test]
fn a_handler_that_dies_mid_answer_cuts_the_clients_answer() {
    let h = Handler::start();
    let s = start(&h, &[]);
    // Reset with its request unread: the chunked answer has no last chunk.
    let out = s.raw(b"POST /app/die HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nabcdef");
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    assert!(out.contains("\r\n7\r\npartial\r\n"), "{out}");
    assert!(
        !out.ends_with("0\r\n\r\n"),
        "an answer cut is not ended: {out}"
    );
    assert!(s.wait_log("answer cut after 7 bytes", Duration::from_secs(5)));
    // Closed short of its Content-Length: the connection closes.
    let mut c = s.connect();
    c.write_all(b"GET /app/short HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert!(read_response(&mut c, false).is_none(), "cut, not completed");
    assert!(s.wait_log("answer cut after 7 of 100 bytes", Duration::from_secs(5)));
    s.assert_healthy();
}

#[test]
fn a_silent_handler_gets_504_at_cgi_timeout_and_its_connection_closed() {
    let h = Handler::start();
    let s = start(&h, &["--cgi-timeout", "1"]);
    let r = s.get("/app/slow", &[]);
    assert_eq!(r.status, 504);
    assert!(
        wait_until(Duration::from_secs(5), || h
            .seen
            .closed_on_us
            .load(Ordering::SeqCst)
            == 1),
        "the handler's connection was closed"
    );
    assert!(
        wait_until(Duration::from_secs(5), || s
            .log_text()
            .contains("no answer within 1s")),
        "{}",
        s.log_text()
    );
    s.assert_healthy();
}

#[test]
fn a_body_trickled_below_cgi_body_rate_gets_408_and_frees_the_slot() {
    let h = Handler::start();
    let s = start(
        &h,
        &[
            "--header-timeout",
            "2",
            "--cgi-max",
            "1",
            "--cgi-timeout",
            "60",
        ],
    );
    let mut c = s.connect();
    // The body's start comes at once (the handler is reached), the rest
    // trickles.
    c.write_all(b"POST /app/count HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n")
        .unwrap();
    c.write_all(&[b'x'; 9000]).unwrap();
    let first = trickle_until_answered(&mut c, 20);
    assert_eq!(first.as_ref(), Some(b"HTTP/1.1 408"), "{}", s.log_text());
    assert!(
        wait_until(Duration::from_secs(5), || h
            .seen
            .body_cut
            .load(Ordering::SeqCst)
            == 1),
        "the handler's connection ended before its body"
    );
    assert_eq!(s.get("/app/sized", &[]).status, 200, "the slot is free");
}

#[test]
fn handlers_and_scripts_share_the_script_slots() {
    let h = Handler::start();
    let s = start(&h, &["--cgi-max", "2"]);
    let port = s.port;
    // From two clients: one client runs at most half of the slots.
    let held: Vec<_> = (0..2)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = connect_from_to(&format!("127.0.0.{}", i + 2), port);
                c.write_all(b"GET /app/hold HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    .unwrap();
                read_to_close(&mut c)
            })
        })
        .collect();
    assert!(wait_until(Duration::from_secs(10), || h
        .seen
        .held
        .load(Ordering::SeqCst)
        == 2));
    let r = s.get("/app/sized", &[]);
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("5"));
    assert_eq!(s.get("/cgi-bin/sized", &[]).status, 503, "a script too");
    s.assert_healthy();
    h.release();
    for t in held {
        assert!(t.join().unwrap().contains("held"));
    }
    assert_eq!(s.get("/app/sized", &[]).status, 200, "slots free again");
    assert_eq!(s.get("/cgi-bin/sized", &[]).status, 200);
}

#[test]
fn a_missing_or_refusing_handler_gets_502() {
    let dir = TempDir::new("scgi-gone");
    let missing = format!("/gone unix:{}", dir.path().join("none.sock").display());
    let refusing_path = dir.path().join("refusing.sock");
    drop(UnixListener::bind(&refusing_path).unwrap());
    let refusing = format!("/refusing unix:{}", refusing_path.display());
    let s = Server::start_in(root(), &["--scgi", &missing, "--scgi", &refusing]);
    for path in ["/gone/x", "/refusing"] {
        let r = s.get(path, &[]);
        assert_eq!(r.status, 502, "{path}");
    }
    assert!(
        wait_until(Duration::from_secs(5), || s
            .log_text()
            .contains("cannot reach unix:")),
        "{}",
        s.log_text()
    );
    s.assert_healthy();
}

#[test]
fn a_handler_on_tcp() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Seen::default());
    let s2 = seen.clone();
    std::thread::spawn(move || {
        for c in listener.incoming().map_while(Result::ok) {
            let s = s2.clone();
            std::thread::spawn(move || answer(c, &s));
        }
    });
    let s = Server::start_in(root(), &["--scgi", &format!("/tcp/ {addr}")]);
    let r = s.get("/tcp/sized", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    let got = seen.requests.lock().unwrap().last().unwrap().clone();
    assert_eq!(got.var("SCRIPT_NAME"), Some("/tcp"));
}

#[test]
fn config_errors_name_their_line() {
    for (line, problem) in [
        ("scgi /x", "expected PREFIX ADDRESS"),
        ("scgi /x example.com:80", "expected unix:/path, or IP:PORT"),
        ("scgi /x unix:relative", "expected unix:/absolute/path"),
        ("scgi x unix:/s", "must be a path below the root"),
        ("scgi / unix:/s", "must be a path below the root"),
    ] {
        let (code, err) = check_conf(&format!("# handlers\n{line}\n"));
        assert_ne!(code, Some(0), "{line}");
        assert!(err.contains("m.conf:2: scgi: "), "{line}: {err}");
        assert!(err.contains(problem), "{line}: {err}");
    }
    let (code, err) = check_conf("scgi /cgi-bin/luci unix:/var/run/luci.sock\n");
    assert_eq!(code, Some(0), "{err}");
}
