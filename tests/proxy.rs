//! The reverse proxy against real backends: `common::backend`, a small
//! HTTP/1.1 server in this test's threads (on a unix socket and on
//! 127.0.0.1) that records what it receives and on which connection, and
//! Python's `websockets` for the WebSocket tunnel.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use common::backend::*;
use common::*;

fn send(server: &Server, raw: &str) -> String {
    server.raw(raw.as_bytes())
}

#[test]
fn requests_and_bodies_go_both_ways_over_unix_and_tcp() {
    for backend in [Backend::unix(echo), Backend::tcp(echo)] {
        let server = backend.server(&[]);
        let (code, _, body) = curl(&[&server.url("/api/x?a=%41")]);
        assert_eq!(
            (code, String::from_utf8_lossy(&body).trim()),
            (200, "GET /api/x?a=%41 HTTP/1.1")
        );
        let out = send(
            &server,
            "HEAD /api/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        assert!(
            out.contains("Content-Length: 21\r\n") && out.ends_with("\r\n\r\n"),
            "{out}"
        );
        let (code, _, body) = curl(&["--data-binary", "hello", &server.url("/api/post")]);
        assert_eq!(
            (code, String::from_utf8_lossy(&body).as_ref()),
            (200, "POST /api/post HTTP/1.1\nhello")
        );
        // A chunked request body arrives decoded and chunked again.
        let out = send(
            &server,
            "PUT /api/c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n",
        );
        assert!(
            out.ends_with("PUT /api/c HTTP/1.1\nabcde"),
            "{out}{:?}{}",
            backend.seen(),
            server.log_text()
        );
        let last = backend.seen().pop().unwrap();
        assert_eq!(last.header("transfer-encoding"), ["chunked"]);
        // Static paths are still served beside.
        server.assert_healthy();
    }
}

/// A backend answering without a length: chunked body, or one delimited by its close.
fn unframed(req: &Seen, s: &mut dyn Duplex) -> bool {
    if req.head.starts_with("GET /api/chunked") {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n");
        return true;
    }
    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the close");
    false
}

#[test]
fn answers_without_a_length_are_chunked_or_closed() {
    let backend = Backend::unix(unframed);
    let server = backend.server(&[]);
    for path in ["/api/chunked", "/api/close"] {
        let out = send(
            &server,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        );
        assert!(out.contains("Transfer-Encoding: chunked\r\n"), "{out}");
        let body = out.split_once("\r\n\r\n").unwrap().1;
        let want = if path.ends_with("chunked") {
            "7\r\nabcdefg\r\n0\r\n\r\n"
        } else {
            "f\r\nuntil the close\r\n0\r\n\r\n"
        };
        assert!(
            body == want || body.replace("4\r\nabcd\r\n3\r\nefg", "7\r\nabcdefg") == want,
            "{body:?}"
        );
        let out = send(&server, &format!("GET {path} HTTP/1.0\r\n\r\n"));
        assert!(!out.contains("Transfer-Encoding"), "{out}");
        assert!(
            out.ends_with(if path.ends_with("chunked") {
                "\r\n\r\nabcdefg"
            } else {
                "\r\n\r\nuntil the close"
            }),
            "{out}"
        );
    }
}

#[test]
fn backend_connections_are_reused() {
    let backend = Backend::tcp(echo);
    let server = backend.server(&[]);
    for _ in 0..3 {
        assert_eq!(curl(&[&server.url("/api/a")]).0, 200);
    }
    let conns: Vec<usize> = backend.seen().iter().map(|s| s.conn).collect();
    assert_eq!(conns, [0, 0, 0], "one backend connection for all");
    // A backend that closes its kept connection: the next request goes on
    // a new one (a POST, which would not be sent again on a failure).
    let (closed, wait_closed) = mpsc::channel::<()>();
    let closed = Mutex::new(closed);
    let closing = Backend::unix(move |req, s| {
        echo(req, s);
        s.close_write();
        let _ = closed.lock().unwrap().send(());
        false
    });
    let server = closing.server(&[]);
    for _ in 0..3 {
        let mut c = server.connect();
        c.write_all(b"POST /api/a HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx")
            .unwrap();
        assert_eq!(read_response(&mut c, false).unwrap().status, 200);
        wait_closed.recv_timeout(Duration::from_secs(5)).unwrap();
    }
    let conns: Vec<usize> = closing.seen().iter().map(|s| s.conn).collect();
    assert_eq!(conns, [0, 1, 2]);
}

#[test]
fn hop_by_hop_fields_go_and_forwarded_fields_are_replaced() {
    let backend = Backend::unix(|_, s| {
        s.write_all(b"HTTP/1.1 200 OK\r\nConnection: X-Private\r\nX-Private: 1\r\nKeep-Alive: timeout=5\r\nProxy-Thing: a\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok")
            .is_ok()
    });
    let server = backend.server(&[]);
    let out = send(
        &server,
        "GET /api/h HTTP/1.1\r\nHost: device.lan\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 1\r\nTE: trailers\r\nProxy-Authorization: Basic eA==\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil\r\nForwarded: for=6.6.6.6\r\nX-End: kept\r\n\r\n",
    );
    let seen = backend.seen().pop().unwrap();
    for gone in [
        "x-hop",
        "keep-alive",
        "te",
        "proxy-authorization",
        "forwarded",
    ] {
        assert!(
            seen.header(gone).is_empty(),
            "{gone} reached the backend: {}",
            seen.head
        );
    }
    assert_eq!(seen.header("x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(seen.header("x-forwarded-proto"), ["http"]);
    assert_eq!(seen.header("x-forwarded-host"), ["device.lan"]);
    assert_eq!(seen.header("host"), ["device.lan"]);
    assert_eq!(seen.header("x-end"), ["kept"]);
    let head = out.split_once("\r\n\r\n").unwrap().0.to_ascii_lowercase();
    assert!(head.contains("x-kept: yes"), "{out}");
    for gone in ["x-private", "keep-alive", "proxy-thing"] {
        assert!(!head.contains(gone), "{gone} reached the client: {out}");
    }
    // An absolute-form target names the host (RFC 9112 3.2.2): the backend
    // gets one Host, the target's, also from an HTTP/1.0 client with none.
    for request in [
        "GET http://device.lan/api/h HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n",
        "GET http://device.lan/api/h HTTP/1.0\r\n\r\n",
    ] {
        send(&server, request);
        let seen = backend.seen().pop().unwrap();
        assert_eq!(seen.header("host"), ["device.lan"], "{request:?}");
        assert_eq!(
            seen.header("x-forwarded-host"),
            ["device.lan"],
            "{request:?}"
        );
    }
}

/// What a backend may take for the client's address or the request's
/// original URL is set by Marmoset or left out, never passed on as the
/// client sent it; a field name with an underscore (read by CGI-style
/// backends as `HTTP_X_FORWARDED_FOR`) does not reach the backend.
#[test]
fn client_forwarding_fields_and_underscored_names_never_reach_the_backend() {
    let backend = Backend::unix(echo);
    let server = backend.server(&[]);
    let out = send(
        &server,
        "GET /api/f HTTP/1.1\r\nHost: device.lan\r\nX_Forwarded_For: 6.6.6.6\r\nX-Real-IP: 6.6.6.6\r\nX-Forwarded-Port: 8443\r\nX-Forwarded-Prefix: /evil\r\nX-Original-URL: /admin\r\nX-Rewrite-URL: /admin\r\nX-Custom_Name: 1\r\nX-Custom-Name: kept\r\nConnection: close\r\n\r\n",
    );
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let seen = backend.seen().pop().unwrap();
    assert!(!seen.head.contains("6.6.6.6"), "{}", seen.head);
    for gone in [
        "x-forwarded-port",
        "x-forwarded-prefix",
        "x-original-url",
        "x-rewrite-url",
    ] {
        assert!(seen.header(gone).is_empty(), "{gone}: {}", seen.head);
    }
    let names: Vec<&str> = seen
        .head
        .split("\r\n")
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, _)| n)
        .collect();
    assert!(names.iter().all(|n| !n.contains('_')), "{}", seen.head);
    assert_eq!(seen.header("x-real-ip"), ["127.0.0.1"]);
    assert_eq!(seen.header("x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(seen.header("x-custom-name"), ["kept"]);
}

/// Fields an application behind an authenticating proxy takes for the
/// user, the client's address or the method never reach the backend as the
/// client sent them.
#[test]
fn client_identity_address_and_method_claims_never_reach_the_backend() {
    let backend = Backend::unix(echo);
    let server = backend.server(&[]);
    let claims = [
        "Remote-User",
        "X-Remote-User",
        "X-Auth-Request-User",
        "X-Cluster-Client-IP",
        "Client-IP",
        "X-ProxyUser-Ip",
        "X-HTTP-Method-Override",
    ];
    let mut req = String::from("GET /api/c HTTP/1.1\r\nHost: device.lan\r\n");
    for name in claims {
        req.push_str(&format!("{name}: claimed\r\n"));
    }
    req.push_str("X-Custom: kept\r\nConnection: close\r\n\r\n");
    let out = send(&server, &req);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let seen = backend.seen().pop().unwrap();
    assert!(!seen.head.contains("claimed"), "{}", seen.head);
    assert_eq!(seen.header("x-custom"), ["kept"]);
}

#[test]
fn a_missing_or_refusing_backend_is_a_502_at_once() {
    let dir = TempDir::new("nosock");
    let missing = format!("/api/ unix:{}", dir.path().join("none.sock").display());
    let refusing = format!("/b/ http://127.0.0.1:{}", free_port());
    let server = Server::start(&["--proxy", &missing, "--proxy", &refusing]);
    for path in ["/api/x", "/b/x"] {
        assert_eq!(curl(&[&server.url(path)]).0, 502, "{path}");
    }
    assert!(server.wait_log("proxy unix:", Duration::from_secs(5)));
    assert!(server.wait_log("proxy http://127.0.0.1:", Duration::from_secs(5)));
    server.assert_healthy();
}

#[test]
fn a_backend_that_does_not_answer_in_time_is_a_504() {
    let (hold, held) = mpsc::channel::<()>();
    let held = Mutex::new(held);
    let backend = Backend::tcp(move |_, _| {
        let _ = held.lock().unwrap().recv();
        false
    });
    let server = backend.server(&["--proxy-timeout", "1"]);
    assert_eq!(curl(&[&server.url("/api/slow")]).0, 504);
    assert!(server.wait_log("no answer within 1s", Duration::from_secs(5)));
    server.assert_healthy();
    drop(hold);
}

/// `proxy-timeout` is the backend's time to answer once it has the whole
/// request: an upload that takes longer than that on a slow link is not
/// a 504.
#[test]
fn an_upload_slower_than_the_proxy_timeout_is_answered() {
    let backend = Backend::tcp(|req, s| reply(s, &req.body.len().to_string()));
    let server = backend.server(&["--proxy-timeout", "1"]);
    let mut c = server.connect();
    c.write_all(b"POST /api/up HTTP/1.1\r\nHost: t\r\nContent-Length: 3000\r\n\r\n")
        .unwrap();
    // The client's pace, the case under test: 3 s of body for a 1 s limit.
    for _ in 0..3 {
        c.write_all(&[b'u'; 1000]).unwrap();
        std::thread::sleep(Duration::from_secs(1));
    }
    let r = read_response(&mut c, false).expect("an answer");
    assert_eq!((r.status, r.text()), (200, "3000".to_string()));
}

#[test]
fn a_backend_closing_mid_body_cuts_the_answer() {
    let backend = Backend::unix(|_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part");
        false
    });
    let server = backend.server(&[]);
    let out = send(&server, "GET /api/cut HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(
        out.starts_with("HTTP/1.1 200") && out.ends_with("\r\n\r\nonly part"),
        "{out}"
    );
    assert!(server.wait_log("closed mid-body", Duration::from_secs(5)));
    // A chunked answer cut short gets no last chunk.
    let chunked = Backend::unix(|_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n");
        false
    });
    let server = chunked.server(&[]);
    let out = send(&server, "GET /api/cut HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(out.ends_with("4\r\nabcd\r\n"), "{out:?}");
}

#[test]
fn a_client_leaving_abandons_the_backend_connection() {
    let (go, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let backend = Backend::tcp(move |req, s| {
        if req.head.starts_with("GET /api/big") {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\nstart");
            let _ = wait.lock().unwrap().recv();
            let block = vec![b'x'; 65536];
            // Marmoset stops reading once its client is gone: the writes fail.
            while s.write_all(&block).is_ok() {}
            return false;
        }
        echo(req, s)
    });
    let server = backend.server(&[]);
    let mut c = server.connect();
    c.write_all(b"GET /api/big HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut head = [0u8; 12];
    c.read_exact(&mut head).unwrap();
    drop(c);
    go.send(()).unwrap();
    assert!(
        server.wait_log("client left", Duration::from_secs(10)),
        "{}",
        server.log_text()
    );
    assert_eq!(curl(&[&server.url("/api/next")]).0, 200);
    let conns: Vec<usize> = backend.seen().iter().map(|s| s.conn).collect();
    assert_eq!(conns, [0, 1], "the abandoned connection is not reused");
}

#[test]
fn malformed_answers_are_a_502_and_never_forwarded() {
    let long = format!(
        "HTTP/1.1 200 OK\r\nX-Big: {}\r\nContent-Length: 2\r\n\r\nok",
        "a".repeat(9000)
    );
    let cases: Vec<(&str, String)> = vec![
        (
            "two lengths",
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nSECRET".into(),
        ),
        (
            "length and chunked",
            "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\nSECRET"
                .into(),
        ),
        (
            "bad chunk size",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nSECRET\r\n0\r\n\r\n".into(),
        ),
        (
            "control byte",
            "HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 6\r\n\r\nSECRET".into(),
        ),
        (
            "folded field",
            "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 6\r\n\r\nSECRET".into(),
        ),
        ("head over the limit", long),
    ];
    for (name, answer) in cases {
        let backend = Backend::unix(move |_, s| {
            let _ = s.write_all(answer.as_bytes());
            false
        });
        let server = backend.server(&[]);
        let out = send(
            &server,
            "GET /api/m HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert!(out.starts_with("HTTP/1.1 502"), "{name}: {out}");
        assert!(
            !out.contains("SECRET") && !out.contains("X-Big"),
            "{name}: {out}"
        );
    }
}

#[test]
fn smuggling_shapes_are_refused_before_the_backend() {
    let backend = Backend::unix(echo);
    let server = backend.server(&[]);
    let smuggle = "GET /api/smuggled HTTP/1.1\r\nHost: t\r\n\r\n";
    let probes = [
        format!(
            "POST /api/a HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{smuggle}",
            5 + smuggle.len()
        ),
        format!(
            "POST /api/a HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nContent-Length: {}\r\n\r\n{smuggle}",
            smuggle.len()
        ),
        format!(
            "POST /api/a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n{smuggle}"
        ),
        format!(
            "POST /api/a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n{smuggle}"
        ),
        format!(
            "POST /api/a HTTP/1.1\r\nHost: t\r\nX-A: a\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n{smuggle}"
        ),
        format!(
            "POST /api/a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n{smuggle}\r\n0\r\n\r\n"
        ),
        format!(
            "POST /api/a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\nhello\r\n0\r\n\r\n{smuggle}"
        ),
        format!("POST /api/a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{smuggle}"),
        format!("GET /api/a HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n{smuggle}"),
    ];
    for p in &probes {
        let out = send(&server, p);
        assert!(
            out.starts_with("HTTP/1.1 400") || out.starts_with("HTTP/1.1 501"),
            "{p:?}: {out}"
        );
    }
    let seen = backend.seen();
    assert!(
        seen.iter().all(|s| !s.head.contains("smuggled")
            && !String::from_utf8_lossy(&s.body).contains("smuggled")),
        "{seen:?}"
    );
}

#[test]
fn event_streams_arrive_event_by_event() {
    let (go, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let backend = Backend::unix(move |_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n");
        for i in 0..3 {
            // The test's go-ahead: it has read the event before.
            if wait.lock().unwrap().recv().is_err() {
                return false;
            }
            let _ = s.write_all(format!("data: event {i}\n\n").as_bytes());
        }
        false
    });
    let server = backend.server(&[]);
    let mut c = server.connect();
    c.write_all(b"GET /api/events HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(c);
    let mut head = String::new();
    while !head.ends_with("\r\n\r\n") {
        assert!(r.read_line(&mut head).unwrap() > 0, "{head}");
    }
    assert!(
        head.contains("text/event-stream") && head.contains("Transfer-Encoding: chunked"),
        "{head}"
    );
    for i in 0..3 {
        go.send(()).unwrap();
        let mut size = String::new();
        r.read_line(&mut size).unwrap();
        let mut data = vec![0; usize::from_str_radix(size.trim(), 16).unwrap() + 2];
        r.read_exact(&mut data).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&data),
            format!("data: event {i}\n\n\r\n")
        );
    }
}

#[test]
fn expect_continue_and_auth_come_before_the_body() {
    let root = TempDir::new("root");
    root.write("index.html", "hi");
    let users = root.path().join("users");
    std::fs::write(&users, "").unwrap();
    let out = Command::new("htpasswd")
        .args(["-b", "-B", "-C", "4"])
        .arg(&users)
        .args(["admin", "pw"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let backend = Backend::unix(echo);
    let route = format!("/api/ {}", backend.address);
    let auth = format!("/api/ \"dev\" {}", users.display());
    let server = Server::start_in(root, &["--proxy", &route, "--auth", &auth]);
    // Without credentials: 401 before a byte of the body, and no 100.
    let mut c = server.connect();
    c.write_all(
        b"POST /api/a HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
    )
    .unwrap();
    let r = read_response(&mut c, false).unwrap();
    assert_eq!(r.status, 401);
    assert!(backend.seen().is_empty());
    // With them: 100, then the body goes through.
    let mut c = server.connect();
    c.write_all(b"POST /api/a HTTP/1.1\r\nHost: t\r\nAuthorization: Basic YWRtaW46cHc=\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n").unwrap();
    let mut interim = [0u8; 25];
    c.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.write_all(b"hello").unwrap();
    let r = read_response(&mut c, false).unwrap();
    assert_eq!(
        (r.status, r.text()),
        (200, "POST /api/a HTTP/1.1\nhello".to_string())
    );
    let seen = backend.seen().pop().unwrap();
    assert!(seen.header("expect").is_empty());
}

#[test]
fn a_64_mib_upload_keeps_memory_flat() {
    const SIZE: usize = 64 << 20;
    let backend = Backend::tcp(|req, s| {
        let n = req.body.len();
        // Only the size is kept, not the body, in what the test looks at.
        reply(s, &n.to_string())
    });
    let server = backend.server(&[]);
    let grew = rss_growth_during_upload(&server, "/api/up", SIZE, &SIZE.to_string());
    // One body buffer (16 KiB) and the kernel's socket buffers are not RSS;
    // 2 MiB leaves room for the allocator's own growth.
    assert!(grew < 2048, "RSS grew by {grew} kB");
    // The backend's own copy of the body is dropped with its record.
    backend.seen.lock().unwrap().clear();
}

/// Python's `websockets` echo server on a unix socket; "bye" makes it close.
struct WsBackend {
    child: std::process::Child,
    route: String,
    _dir: TempDir,
}

impl WsBackend {
    fn start() -> WsBackend {
        let dir = TempDir::new("ws");
        let sock = dir.path().join("ws.sock");
        let script = r#"
import asyncio, sys, websockets
async def echo(ws, path=None):
    async for m in ws:
        if m == "bye":
            await ws.close()
            return
        await ws.send(m)
async def main():
    async with websockets.unix_serve(echo, sys.argv[1], max_size=None, ping_interval=None):
        print("ready", flush=True)
        await asyncio.Future()
asyncio.run(main())
"#;
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", script])
            .arg(&sock)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 with websockets");
        let mut ready = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready");
        WsBackend {
            child,
            route: format!("/api/ unix:{}", sock.display()),
            _dir: dir,
        }
    }
}

impl Drop for WsBackend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a websockets client script; `{url}` is replaced; it prints "ok".
fn ws_client(url: &str, body: &str, server: &Server) {
    let script = format!(
        "import asyncio, ssl, websockets\nctx = ssl.create_default_context()\nctx.check_hostname = False\nctx.verify_mode = ssl.CERT_NONE\nasync def main():\n{}\n    print('ok')\nasyncio.run(main())\n",
        body.replace("{url}", url)
    );
    let out = Command::new("/usr/bin/python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
}

const WS_ECHO: &str = r#"
    kw = {"ssl": ctx} if "{url}".startswith("wss") else {}
    async with websockets.connect("{url}", max_size=None, **kw) as ws:
        await ws.send("hello")
        assert await ws.recv() == "hello"
        big = "m" * (1 << 20)
        await ws.send(big)
        assert await ws.recv() == big
        await ws.send(b"\x00\x01binary")
        assert await ws.recv() == b"\x00\x01binary"
    # The client closed; now the backend closes.
    async with websockets.connect("{url}", **kw) as ws:
        await ws.send("bye")
        try:
            await ws.recv()
            raise SystemExit("no close from the backend")
        except websockets.ConnectionClosedOK:
            pass"#;

#[test]
fn websocket_messages_pass_both_ways() {
    let backend = WsBackend::start();
    let server = Server::start(&["--proxy", &backend.route]);
    let url = format!("ws://127.0.0.1:{}/api/ws", server.port);
    ws_client(&url, WS_ECHO, &server);
    server.assert_healthy();
}

/// A tunnel has its own idle limit, `proxy-tunnel-timeout`: quiet longer
/// than `keepalive-timeout` it stays, quiet longer than its own limit it
/// is closed.
#[test]
fn a_quiet_websocket_outlives_the_keepalive_timeout_but_not_the_tunnel_timeout() {
    let backend = WsBackend::start();
    let server = Server::start(&[
        "--proxy",
        &backend.route,
        "--keepalive-timeout",
        "1",
        "--proxy-tunnel-timeout",
        "5",
    ]);
    let url = format!("ws://127.0.0.1:{}/api/ws", server.port);
    // The pauses are the client's, the case under test: 3 s of silence,
    // past the 1 s keep-alive limit and its tick, within the tunnel's 5 s.
    let body = r#"
    import time
    async with websockets.connect("{url}", ping_interval=None) as ws:
        await ws.send("a")
        assert await ws.recv() == "a"
        await asyncio.sleep(3)
        await ws.send("b")
        assert await ws.recv() == "b"
        quiet = time.monotonic()
        await asyncio.wait_for(ws.wait_closed(), 30)
        assert time.monotonic() - quiet >= 4, "closed before the tunnel timeout""#;
    ws_client(&url, body, &server);
    server.assert_healthy();
}

/// Answered without a 101, an `Upgrade` request is a plain request: what
/// the client sent after it, a whole pipelined request or the start of
/// one, is the connection's next request.
#[test]
fn an_upgrade_answered_without_101_leaves_the_next_request_intact() {
    let backend = Backend::tcp(echo);
    let server = backend.server(&["--keepalive-timeout", "3"]);
    let mut c = server.connect();
    c.write_all(b"GET /api/first HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nGET /api/second HTTP/1.1\r\nHost: t\r\n\r\nGET /api/th")
        .unwrap();
    let r = read_response(&mut c, false).expect("the first answer");
    assert_eq!(
        (r.status, r.text()),
        (200, "GET /api/first HTTP/1.1\n".to_string())
    );
    let r = read_response(&mut c, false).expect("the pipelined request's answer");
    assert_eq!(
        (r.status, r.text()),
        (200, "GET /api/second HTTP/1.1\n".to_string())
    );
    c.write_all(b"ird HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let r = read_response(&mut c, false).expect("the split request's answer");
    assert_eq!(
        (r.status, r.text()),
        (200, "GET /api/third HTTP/1.1\n".to_string())
    );
    let first = &backend.seen()[0];
    assert_eq!(first.header("upgrade"), ["websocket"], "{}", first.head);
}

/// A request with a body and `Upgrade` (an h2c upgrade, as `curl --http2
/// -d` sends over http://) goes to the backend as a plain request with its
/// body and without the upgrade.
#[test]
fn an_upgrade_with_a_body_is_forwarded_as_a_plain_request() {
    let backend = Backend::tcp(echo);
    let server = backend.server(&["--header-timeout", "3"]);
    let (code, _, body) = curl(&["--http2", "-d", "hello", &server.url("/api/h2c")]);
    assert_eq!(
        (code, String::from_utf8_lossy(&body).as_ref()),
        (200, "POST /api/h2c HTTP/1.1\nhello"),
        "{}",
        server.log_text()
    );
    let seen = backend.seen().pop().unwrap();
    assert!(
        seen.header("upgrade").is_empty() && seen.header("http2-settings").is_empty(),
        "{}",
        seen.head
    );
    assert!(
        !seen
            .head
            .to_ascii_lowercase()
            .contains("connection: upgrade"),
        "{}",
        seen.head
    );
    // The same by hand, with a request pipelined behind the body.
    let out = send(
        &server,
        "POST /api/up HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: 4\r\n\r\nbodyGET /api/after HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(
        out.contains("POST /api/up HTTP/1.1\nbody") && out.ends_with("GET /api/after HTTP/1.1\n"),
        "{out}"
    );
}

#[test]
fn a_kept_connection_closed_under_a_request_is_retried_only_when_safe() {
    // Each backend connection answers one request, then closes on the next
    // one without answering: the race with a backend's keep-alive timeout.
    let answered = Mutex::new(std::collections::HashSet::new());
    let backend =
        Backend::unix(move |req, s| answered.lock().unwrap().insert(req.conn) && echo(req, s));
    let server = backend.server(&[]);
    assert_eq!(curl(&[&server.url("/api/one")]).0, 200);
    assert_eq!(
        curl(&[&server.url("/api/two")]).0,
        200,
        "{}",
        server.log_text()
    );
    let (code, _, _) = curl(&["--data-binary", "x", &server.url("/api/post")]);
    assert_eq!(code, 502, "a POST is not sent twice");
    let seen: Vec<(usize, String)> = backend
        .seen()
        .iter()
        .map(|s| (s.conn, s.head.lines().next().unwrap_or("").to_string()))
        .collect();
    assert_eq!(
        seen,
        [
            (0, "GET /api/one HTTP/1.1".into()),
            (0, "GET /api/two HTTP/1.1".into()),
            (1, "GET /api/two HTTP/1.1".into()),
            (1, "POST /api/post HTTP/1.1".into()),
        ]
    );
}

#[test]
fn proxy_max_body_refuses_larger_bodies_before_the_backend() {
    let backend = Backend::unix(echo);
    let server = backend.server(&["--proxy-max-body", "4"]);
    let (code, _, _) = curl(&["--data-binary", "12345", &server.url("/api/a")]);
    assert_eq!(code, 413);
    let out = send(
        &server,
        "POST /api/a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n12345\r\n0\r\n\r\n",
    );
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    assert_eq!(
        curl(&["--data-binary", "1234", &server.url("/api/a")]).0,
        200
    );
    // Beyond the static paths' limit, still forwarded without one.
    let big = vec![b'b'; 3 << 20];
    let backend = Backend::unix(|req, s| reply(s, &req.body.len().to_string()));
    let server = backend.server(&[]);
    let mut c = server.connect();
    c.write_all(
        format!(
            "POST /api/a HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            big.len()
        )
        .as_bytes(),
    )
    .unwrap();
    c.write_all(&big).unwrap();
    let r = read_response(&mut c, false).unwrap();
    assert_eq!((r.status, r.text()), (200, big.len().to_string()));
}

/// A chunked body of `data` bytes of data, each chunk with an
/// extension of `ext` bytes when `ext` > 0, then `trailers` bytes of
/// trailer fields.
fn chunked_body(data: usize, chunks: usize, ext: usize, trailers: usize) -> String {
    let mut body = String::new();
    for _ in 0..chunks {
        let n = data / chunks;
        body.push_str(&format!("{n:x}"));
        if ext > 0 {
            body.push_str(&format!(";e={}", "v".repeat(ext - 3)));
        }
        body.push_str(&format!("\r\n{}\r\n", "d".repeat(n)));
    }
    body.push_str("0\r\n");
    let mut i = 0;
    while trailers > 0 && body.len() < trailers {
        body.push_str(&format!("X-Pad-{i}: {}\r\n", "p".repeat(80)));
        i += 1;
    }
    body.push_str("\r\n");
    body
}

/// `proxy-max-body` counts what a chunked body carries: its data, its
/// chunk extensions and its trailer fields; a trailer section has a limit
/// of its own. A body past either is a 413, and the backend connection it
/// was going to is closed, not held.
#[test]
fn extensions_and_trailers_count_toward_the_body_limit() {
    let backend = Backend::tcp(|req, s| reply(s, &req.body.len().to_string()));
    let server = backend.server(&["--proxy-max-body", "1000", "--proxy-max", "1"]);
    let post = |body: &str| {
        send(
            &server,
            &format!("POST /api/a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{body}"),
        )
    };
    // At the limit with an empty trailer section: forwarded.
    let out = post(&chunked_body(1000, 1, 0, 0));
    assert!(
        out.starts_with("HTTP/1.1 200") && out.ends_with("1000"),
        "{out}"
    );
    for (what, body) in [
        (
            "1000 data bytes and 4 KB of trailers",
            chunked_body(1000, 1, 0, 5000),
        ),
        (
            "10 data bytes with 2 KB of extensions",
            chunked_body(10, 10, 200, 0),
        ),
    ] {
        let out = post(&body);
        assert!(out.starts_with("HTTP/1.1 413"), "{what}: {out}");
    }
    let closed = wait_until(Duration::from_secs(10), || {
        backend.closed.lock().unwrap().len() >= 2
    });
    assert!(closed, "backend connections kept: {}", server.log_text());
    assert_eq!(curl(&[&server.url("/api/next")]).0, 200);
    // Without a body limit, the trailer section still has one.
    let server = backend.server(&[]);
    let out = send(
        &server,
        &format!(
            "POST /api/a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{}",
            chunked_body(10, 1, 0, 64 << 10)
        ),
    );
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    server.assert_healthy();
}

#[cfg(feature = "tls")]
#[test]
fn the_proxy_serves_https_listeners_too() {
    let dir = TempDir::new("tlsproxy");
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    let backend = Backend::tcp(echo);
    let route = format!("/api/ {}", backend.address);
    let ws = WsBackend::start();
    let ws_route = ws.route.replace("/api/", "/ws/");
    let server = Server::start(&[
        "--listen",
        "127.0.0.1:0",
        "--listen",
        "127.0.0.1:0 tls",
        "--tls-self-signed",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--proxy",
        &route,
        "--proxy",
        &ws_route,
    ]);
    let found = wait_until(start_deadline(), || server.log_text().contains(" (TLS)"));
    assert!(found);
    let log = server.log_text();
    let port: u16 = log
        .lines()
        .find_map(|l| {
            l.split("listening on ")
                .nth(1)?
                .strip_suffix(" (TLS)")?
                .rsplit(':')
                .next()?
                .parse()
                .ok()
        })
        .unwrap();
    let url = format!("https://127.0.0.1:{port}/api/x");
    let (code, _, body) = curl(&["-k", &url]);
    assert_eq!(
        (code, String::from_utf8_lossy(&body).as_ref()),
        (200, "GET /api/x HTTP/1.1\n")
    );
    let upload = dir.write("up", vec![b'z'; 1 << 20]);
    let (code, _, body) = curl(&[
        "-k",
        "--data-binary",
        &format!("@{}", upload.display()),
        &url,
    ]);
    assert_eq!(
        (code, body.len()),
        (200, "POST /api/x HTTP/1.1\n".len() + (1 << 20))
    );
    assert_eq!(
        backend.seen().last().unwrap().header("x-forwarded-proto"),
        ["https"]
    );
    ws_client(&format!("wss://127.0.0.1:{port}/ws/ws"), WS_ECHO, &server);
}

#[test]
fn no_content_and_not_modified_have_no_body_and_keep_the_connection() {
    let backend = Backend::unix(|req, s| {
        let answer: &[u8] = if req.head.starts_with("GET /api/none") {
            b"HTTP/1.1 204 No Content\r\nX-N: 1\r\n\r\n"
        } else {
            b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 99\r\n\r\n"
        };
        s.write_all(answer).is_ok()
    });
    let server = backend.server(&[]);
    let mut c = server.connect();
    c.write_all(b"GET /api/none HTTP/1.1\r\nHost: t\r\n\r\nGET /api/same HTTP/1.1\r\nHost: t\r\n\r\nGET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let all = read_to_close(&mut c);
    let heads: Vec<&str> = all.split("\r\n\r\n").collect();
    assert!(
        heads[0].starts_with("HTTP/1.1 204") && !heads[0].contains("Content-Length"),
        "{all}"
    );
    assert!(
        heads[1].starts_with("HTTP/1.1 304") && heads[1].contains("ETag: \"v1\""),
        "{all}"
    );
    assert!(heads[2].starts_with("HTTP/1.1 200"), "{all}");
    assert!(all.ends_with("hello\n"), "{all}");
}

#[test]
fn past_proxy_max_the_answer_is_503() {
    let (go, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let backend = Backend::tcp(move |req, s| {
        if req.head.starts_with("GET /api/hold") {
            let _ = wait.lock().unwrap().recv();
        }
        echo(req, s)
    });
    let server = backend.server(&["--proxy-max", "1"]);
    let mut held = server.connect();
    held.write_all(b"GET /api/hold HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert!(wait_until(Duration::from_secs(5), || !backend
        .seen()
        .is_empty()));
    let (code, head, _) = curl(&[&server.url("/api/other")]);
    assert_eq!(code, 503);
    assert!(head.contains("Retry-After: 5"), "{head}");
    go.send(()).unwrap();
    assert_eq!(read_response(&mut held, false).unwrap().status, 200);
    assert_eq!(curl(&[&server.url("/api/other")]).0, 200);
}

#[test]
fn proxied_requests_are_in_the_access_log() {
    let backend = Backend::unix(echo);
    let dir = TempDir::new("alog");
    let log = dir.path().join("access.log");
    let server = backend.server(&["--access-log", log.to_str().unwrap()]);
    assert_eq!(curl(&[&server.url("/api/logged?q=1")]).0, 200);
    let logged = wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&log)
            .is_ok_and(|t| t.contains("\"GET /api/logged?q=1 HTTP/1.1\" 200 "))
    });
    assert!(logged, "{:?}", std::fs::read_to_string(&log));
}

#[test]
fn a_reload_closes_the_kept_backend_connections_of_the_old_configuration() {
    let backend = Backend::unix(echo);
    let server = backend.server(&[]);
    assert_eq!(curl(&[&server.url("/api/a")]).0, 200);
    assert!(
        backend.closed.lock().unwrap().is_empty(),
        "kept for the next request"
    );
    server.signal("HUP");
    let closed = wait_until(Duration::from_secs(10), || {
        *backend.closed.lock().unwrap() == [0]
    });
    assert!(closed, "{}", server.log_text());
    assert_eq!(curl(&[&server.url("/api/b")]).0, 200);
    assert_eq!(
        backend.seen().last().unwrap().conn,
        1,
        "the new configuration's own connection"
    );
}

#[test]
fn a_tunnel_holds_its_connection_slot_and_is_never_reclaimed_as_idle() {
    let backend = WsBackend::start();
    let server = Server::start(&["--proxy", &backend.route, "--max-connections", "2"]);
    let url = format!("ws://127.0.0.1:{}/api/ws", server.port);
    let body = format!(
        r#"
    import socket
    def get(s):
        s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        return s.recv(4096)
    async with websockets.connect("{{url}}", ping_interval=None) as ws:
        await ws.send("one")
        assert await ws.recv() == "one"
        idle = socket.create_connection(("127.0.0.1", {port}))
        idle.settimeout(10)
        assert get(idle).startswith(b"HTTP/1.1 200")
        # At the limit: the idle keep-alive connection makes room, not the tunnel.
        third = socket.create_connection(("127.0.0.1", {port}))
        third.settimeout(10)
        assert get(third).startswith(b"HTTP/1.1 200")
        assert idle.recv(1) == b""
        await ws.send("two")
        assert await ws.recv() == "two""#,
        port = server.port
    );
    ws_client(&url, &body, &server);
}

#[test]
fn a_backend_named_by_host_name_is_an_error_at_its_line() {
    let (code, err) = check_conf(
        "root /tmp\nproxy /api/ unix:/run/api.sock\nproxy /b/ http://backend.lan:8080\n",
    );
    assert_eq!(code, Some(2));
    assert!(
        err.contains("m.conf:3: proxy: `http://backend.lan:8080`"),
        "{err}"
    );
    let (code, err) = check_conf(
        "proxy /api/ http://localhost:8080\nproxy /b/ http://[::1]:81\nproxy-timeout 5\nproxy-max 8\nproxy-max-body 1048576\n",
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = check_conf("proxy-max-body lots\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("m.conf:1: proxy-max-body:"), "{err}");
}

#[test]
fn the_tunnel_timeout_is_a_setting_checked_at_its_line() {
    let (code, err) = check_conf("proxy /api/ unix:/run/api.sock\nproxy-tunnel-timeout 600\n");
    assert_eq!(code, Some(0), "{err}");
    for bad in ["0", "soon", "-1"] {
        let (code, err) = check_conf(&format!("root /tmp\nproxy-tunnel-timeout {bad}\n"));
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(err.contains("m.conf:2: proxy-tunnel-timeout: "), "{err}");
    }
}

#[test]
fn a_backend_may_answer_while_the_body_still_comes() {
    // It answers at once, then echoes each piece of the body as it reads it.
    let dir = TempDir::new("duplex");
    let path = dir.path().join("d.sock");
    let listener = UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut w = s;
        let mut line = String::new();
        while line != "\r\n" {
            line.clear();
            r.read_line(&mut line).unwrap();
        }
        w.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap();
        let mut left = 10;
        while left > 0 {
            let mut piece = [0u8; 5];
            let n = r.read(&mut piece[..left.min(5)]).unwrap();
            assert!(n > 0);
            left -= n;
            w.write_all(format!("{n:x}\r\n").as_bytes()).unwrap();
            w.write_all(&piece[..n]).unwrap();
            w.write_all(b"\r\n").unwrap();
        }
        w.write_all(b"0\r\n\r\n").unwrap();
    });
    let route = format!("/api/ unix:{}", path.display());
    let server = Server::start(&["--proxy", &route]);
    let mut c = BufReader::new(server.connect());
    c.get_mut()
        .write_all(b"POST /api/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n")
        .unwrap();
    let mut head = String::new();
    while !head.ends_with("\r\n\r\n") {
        assert!(c.read_line(&mut head).unwrap() > 0, "{head}");
    }
    assert!(
        head.starts_with("HTTP/1.1 200") && head.contains("Connection: close"),
        "{head}"
    );
    let mut echoed = Vec::new();
    for piece in [b"hello", b"world"] {
        c.get_mut().write_all(piece).unwrap();
        let mut got = 0;
        while got < 5 {
            let mut size = String::new();
            c.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap();
            let mut data = vec![0; n + 2];
            c.read_exact(&mut data).unwrap();
            echoed.extend_from_slice(&data[..n]);
            got += n;
        }
    }
    assert_eq!(echoed, b"helloworld");
}

/// An encoded slash never reaches a backend: the rules see decoded paths,
/// and the backend would get the target as sent.
#[test]
fn an_encoded_slash_is_refused_before_the_backend() {
    let backend = Backend::unix(echo);
    let server = backend.server(&[]);
    for path in ["/api%2Fx", "/api/a%2Fb", "/api/a%2fb"] {
        let out = send(
            &server,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        );
        assert!(out.starts_with("HTTP/1.1 400"), "{path}: {out}");
    }
    assert!(backend.seen().is_empty(), "{:?}", backend.seen());
    let (code, _, body) = curl(&[&server.url("/api/a%20b")]);
    assert_eq!(
        (code, String::from_utf8_lossy(&body).trim()),
        (200, "GET /api/a%20b HTTP/1.1")
    );
}

/// One request with a two-byte body and `headers` to `server`; its status.
fn status_with(server: &Server, method: &str, path: &str, headers: &[&str]) -> u16 {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 192.168.1.1\r\nConnection: close\r\nContent-Length: 2\r\n"
    );
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n{}");
    let out = send(server, &req);
    out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// A cross-site form or fetch with an unsafe method, or a cross-site
/// WebSocket handshake, never reaches the backend (the device named by its
/// address, which `allowed-hosts` lets through); the request's own origin,
/// requests no browser marked, and safe methods do.
#[test]
fn cross_origin_requests_with_unsafe_methods_are_refused_before_the_backend() {
    let backend = Backend::unix(echo);
    let server = backend.server(&[]);
    let evil = "Origin: http://evil.example";
    let refused: &[(&str, &[&str])] = &[
        ("POST", &[evil]),
        ("PUT", &[evil]),
        ("DELETE", &[evil]),
        ("PATCH", &[evil]),
        ("POST", &["Origin: null"]),
        ("POST", &["Origin: https://192.168.1.1"]),
        ("POST", &["Origin: http://192.168.1.1:8080"]),
        ("POST", &["Sec-Fetch-Site: cross-site"]),
        // A WebSocket handshake another site's page opens with the
        // device's credentials.
        ("GET", &[evil, "Upgrade: websocket", "Connection: Upgrade"]),
    ];
    let passed: &[(&str, &[&str])] = &[
        ("POST", &["Origin: http://192.168.1.1"]),
        ("POST", &["Origin: HTTP://192.168.1.1:80"]),
        ("POST", &["Sec-Fetch-Site: same-origin"]),
        ("POST", &["Sec-Fetch-Site: same-site"]),
        ("POST", &[]),
        ("GET", &[evil]),
        ("OPTIONS", &[evil, "Sec-Fetch-Site: cross-site"]),
        ("GET", &["Origin: http://192.168.1.1", "Upgrade: websocket"]),
    ];
    for (case, (method, headers)) in refused.iter().chain(passed).enumerate() {
        let want = if case < refused.len() { 403 } else { 200 };
        let tag = format!("X-Case: {case}");
        let headers: Vec<&str> = headers.iter().copied().chain([tag.as_str()]).collect();
        let got = status_with(&server, method, "/api/settings", &headers);
        assert_eq!(got, want, "{method} {headers:?}");
    }
    let seen: Vec<String> = backend
        .seen()
        .iter()
        .flat_map(|r| r.header("x-case"))
        .collect();
    let want: Vec<String> = (refused.len()..refused.len() + passed.len())
        .map(|c| c.to_string())
        .collect();
    assert_eq!(seen, want, "only the passed requests reach the backend");
}

/// `cross-origin PREFIX allow` opens what it names, and only that.
#[test]
fn cross_origin_allow_opens_only_its_prefix() {
    let backend = Backend::unix(echo);
    let server = backend.server(&["--cross-origin", "/api/hook allow"]);
    let evil = ["Origin: http://evil.example"];
    for path in ["/api/hook", "/api/hook/github"] {
        assert_eq!(status_with(&server, "POST", path, &evil), 200, "{path}");
    }
    for path in ["/api/hooks", "/api/Hook", "/api/hook.json", "/api/settings"] {
        assert_eq!(status_with(&server, "POST", path, &evil), 403, "{path}");
    }
    assert_eq!(backend.seen().len(), 2);
    let (code, stderr) = check_conf("cross-origin /api/ maybe\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("m.conf:1") && stderr.contains("PREFIX allow"),
        "{stderr}"
    );
}

/// board/demo/backend.py, killed when the test ends.
struct DemoBackend(std::process::Child);

impl Drop for DemoBackend {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The demo backend behind the demo's guard: a form (what a page on
/// another site can make a browser post without asking first) is 415 even
/// with no `Origin` to tell it apart; the settings go as JSON only.
#[test]
fn the_demo_backend_takes_settings_as_json_only() {
    let dir = TempDir::new("demo");
    let sock = dir.path().join("d.sock");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("board/demo/backend.py");
    let _backend = DemoBackend(
        Command::new("python3")
            .arg(&script)
            .arg("--socket")
            .arg(&sock)
            .arg("--state-dir")
            .arg(dir.path())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3"),
    );
    assert!(
        wait_until(start_deadline(), || {
            std::os::unix::net::UnixStream::connect(&sock).is_ok()
        }),
        "the demo backend did not listen on {}",
        sock.display()
    );
    let route = format!("/api/ unix:{}", sock.display());
    let server = Server::start(&["--proxy", &route]);
    let url = server.url("/api/settings");
    let (code, _, body) = curl(&["-d", "hostname=formed", &url]);
    assert_eq!(code, 415, "{}", String::from_utf8_lossy(&body));
    let (code, _, body) = curl(&[
        "-H",
        "Content-Type: text/plain",
        "-d",
        "{\"hostname\":\"plain\"}",
        &url,
    ]);
    assert_eq!(code, 415, "{}", String::from_utf8_lossy(&body));
    let (code, _, body) = curl(&[
        "-H",
        "Content-Type: application/json",
        "-d",
        "{\"hostname\":\"jsoned\"}",
        &url,
    ]);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let (_, _, body) = curl(&[&url]);
    assert!(String::from_utf8_lossy(&body).contains("\"hostname\":\"jsoned\""));
}
/// The demo device's backend: an event stream open until the proxy
/// closes it, and everything else echoed.
fn device(req: &Seen, s: &mut dyn Duplex) -> bool {
    if req.head.starts_with("GET /api/status/stream") {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\ne\r\ndata: status\n\n\r\n");
        let mut b = [0u8; 1];
        let _ = s.read(&mut b);
        return false;
    }
    echo(req, s)
}

/// The first bytes of an answer: `HTTP/1.1 NNN`.
fn status_line_start(c: &mut impl Read) -> String {
    let mut start = [0u8; 12];
    c.read_exact(&mut start).unwrap();
    String::from_utf8_lossy(&start).into_owned()
}

fn htpasswd(dir: &TempDir, user: &str, password: &str) -> std::path::PathBuf {
    let users = dir.path().join("users");
    std::fs::write(&users, "").unwrap();
    let out = Command::new("htpasswd")
        .args(["-b", "-B", "-C", "4"])
        .arg(&users)
        .args([user, password])
        .output()
        .unwrap();
    assert!(out.status.success());
    users
}

#[test]
fn one_address_holding_all_it_can_leaves_room_for_the_admin() {
    let root = TempDir::new("root");
    root.write("index.html", "hi");
    let users = htpasswd(&root, "admin", "pw");
    let backend = Backend::tcp(device);
    let route = format!("/api/ {}", backend.address);
    let auth = format!("/api/settings \"dev\" {}", users.display());
    // The shipped defaults (proxy-max 64, one worker).
    let server = Server::start_in(root, &["--proxy", &route, "--auth", &auth]);
    let hostile = "127.0.0.2";
    let mut held = Vec::new();
    let mut refused = 0;
    // Event streams, no password needed, until the server refuses one.
    for _ in 0..100 {
        let mut c = server.connect_from(hostile);
        c.write_all(b"GET /api/status/stream HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        match status_line_start(&mut c).as_str() {
            "HTTP/1.1 200" => held.push(c),
            "HTTP/1.1 503" => {
                refused += 1;
                break;
            }
            other => panic!("{other}"),
        }
    }
    let streams = held.len();
    // Then uploads trickled a byte at a time: a 100 Continue shows that
    // one has its backend connection.
    for _ in 0..100 {
        let mut c = server.connect_from(hostile);
        c.write_all(b"POST /api/upload HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 1000000\r\n\r\n").unwrap();
        match status_line_start(&mut c).as_str() {
            "HTTP/1.1 100" => {
                c.write_all(b"x").unwrap();
                held.push(c);
            }
            "HTTP/1.1 503" => {
                refused += 1;
                break;
            }
            other => panic!("{other}"),
        }
    }
    assert_eq!(refused, 2, "the hostile address was stopped each time");
    assert!(streams > 0, "{}", server.log_text());
    let (code, _, body) = curl(&[
        "-u",
        "admin:pw",
        "--data-binary",
        "wifi=on",
        &server.url("/api/settings"),
    ]);
    assert_eq!(
        (code, String::from_utf8_lossy(&body).as_ref()),
        (200, "POST /api/settings HTTP/1.1\nwifi=on"),
        "{} held by {hostile}: {}",
        held.len(),
        server.log_text()
    );
    assert!(server.wait_log(
        "127.0.0.2 holds 16 connections; 503",
        Duration::from_secs(5)
    ));
}

#[test]
fn long_lived_answers_leave_room_for_short_requests() {
    let backend = Backend::tcp(device);
    let server = backend.server(&["--proxy-max", "8", "--proxy-max-streams", "2"]);
    let open_stream = |from: &str| {
        let mut c = server.connect_from(from);
        c.write_all(b"GET /api/status/stream HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        (status_line_start(&mut c), c)
    };
    let mut streams = Vec::new();
    for from in ["127.0.0.2", "127.0.0.3"] {
        let (status, c) = open_stream(from);
        assert_eq!(status, "HTTP/1.1 200", "{from}: {}", server.log_text());
        streams.push(c);
    }
    for _ in 0..3 {
        assert_eq!(curl(&[&server.url("/api/short")]).0, 200);
    }
    // The budget is full: a newcomer takes the place of the oldest stream
    // that passed no login, rather than being refused.
    let (status, newcomer) = open_stream("127.0.0.4");
    assert_eq!(status, "HTTP/1.1 200", "{}", server.log_text());
    let mut oldest = Vec::new();
    let ended = streams.remove(0).read_to_end(&mut oldest);
    assert!(ended.is_ok(), "the oldest stream is closed: {ended:?}");
    assert!(server.wait_log(
        "2 long-lived answers open; the oldest without a login is cut",
        Duration::from_secs(5)
    ));
    assert!(server.wait_log(
        "a stream without a login cut for a newcomer",
        Duration::from_secs(5)
    ));
    // A stream whose client leaves gives its place back, though the
    // backend sends nothing more on it.
    drop(newcomer);
    assert!(server.wait_log("the client of a stream left", Duration::from_secs(5)));
    let (status, _c) = open_stream("127.0.0.5");
    assert_eq!(status, "HTTP/1.1 200");
    let log = server.log_text();
    assert_eq!(
        log.matches("cut for a newcomer").count(),
        2,
        "only one cut: {log}"
    );
}

#[test]
fn a_request_body_below_the_least_pace_is_cut_and_frees_its_slot() {
    let backend = Backend::tcp(|req, s| reply(s, &req.body.len().to_string()));
    // Two seconds of grace; each byte comes well within the head timeout.
    let server = backend.server(&["--header-timeout", "2", "--proxy-max", "1"]);
    let mut c = server.connect();
    c.write_all(b"POST /api/up HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n")
        .unwrap();
    c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut first = [0u8; 12];
    let mut answered = false;
    for _ in 0..30 {
        let _ = c.write_all(b"x");
        if c.read_exact(&mut first).is_ok() {
            answered = true;
            break;
        }
    }
    assert!(answered, "a byte a second went on: {}", server.log_text());
    assert_eq!(&first, b"HTTP/1.1 408");
    assert_eq!(curl(&[&server.url("/api/next")]).0, 200, "the slot is free");
    // At four times the least pace, well past the grace: a slow link's upload.
    let mut c = server.connect();
    c.write_all(b"POST /api/up HTTP/1.1\r\nHost: t\r\nContent-Length: 16384\r\n\r\n")
        .unwrap();
    for _ in 0..16 {
        c.write_all(&[b'u'; 1024]).unwrap();
        std::thread::sleep(Duration::from_millis(250));
    }
    let r = read_response(&mut c, false).expect("an answer");
    assert_eq!((r.status, r.text()), (200, "16384".to_string()));
}

#[test]
fn a_client_leaving_before_the_answer_frees_its_backend_connection() {
    let (closed, on_close) = mpsc::channel::<()>();
    let closed = Mutex::new(closed);
    let backend = Backend::tcp(move |req, s| {
        if req.head.starts_with("GET /api/slow") {
            // No answer; the read ends when the proxy drops the connection.
            let mut b = [0u8; 1];
            let _ = s.read(&mut b);
            let _ = closed.lock().unwrap().send(());
            return false;
        }
        echo(req, s)
    });
    // The default proxy-timeout (30 s) is what the client's slot was held for.
    let server = backend.server(&["--proxy-max", "1"]);
    let mut c = server.connect();
    c.write_all(b"GET /api/slow HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert!(wait_until(Duration::from_secs(5), || !backend
        .seen()
        .is_empty()));
    drop(c);
    assert!(
        on_close.recv_timeout(Duration::from_secs(10)).is_ok(),
        "{}",
        server.log_text()
    );
    assert_eq!(curl(&[&server.url("/api/next")]).0, 200);
    assert!(server.wait_log("the client left before the answer", Duration::from_secs(5)));
}

#[test]
fn the_share_settings_are_errors_at_their_line() {
    let good = "proxy-max 8\nproxy-max-per-client 2\nproxy-max-streams 4\nproxy-body-rate off\nproxy-body-rate 512\nproxy-auth-reserve 0\nproxy-auth-reserve 7\n";
    assert_eq!(check_conf(good).0, Some(0), "{}", check_conf(good).1);
    for (conf, at) in [
        (
            "proxy-max 8\nproxy-max-per-client 0\n",
            "m.conf:2: proxy-max-per-client:",
        ),
        ("proxy-max-streams many\n", "m.conf:1: proxy-max-streams:"),
        ("\nproxy-body-rate 0\n", "m.conf:2: proxy-body-rate:"),
        (
            "proxy-max 8\nproxy-auth-reserve 8\n",
            "m.conf:2: proxy-auth-reserve: 8 leaves no connection for requests without a login",
        ),
        (
            "proxy-auth-reserve 16\nproxy-max 16\n",
            "m.conf:2: proxy-max: 16 leaves no connection for requests without a login beside `proxy-auth-reserve 16`",
        ),
    ] {
        let (code, err) = check_conf(conf);
        assert_eq!(code, Some(2), "{conf}");
        assert!(err.contains(at), "{err}");
    }
}

/// Uploads held open against the server, each fed a little more than the
/// least body pace (`proxy-body-rate`, 1 KiB/s) by a thread of its own
/// until the flood is dropped, as a hostile client keeps them.
struct Uploads {
    held: std::sync::Arc<Mutex<Vec<std::net::TcpStream>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Uploads {
    fn new() -> Uploads {
        let held = std::sync::Arc::new(Mutex::new(Vec::<std::net::TcpStream>::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (h, s) = (held.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                for c in h.lock().unwrap().iter_mut() {
                    let _ = c.write_all(&[b'u'; 768]);
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        Uploads { held, stop }
    }

    /// Opens one more from `from` to the listener at `to`: true when it
    /// has its backend connection (a 100 Continue shows it), false when
    /// the server refused it with 503.
    fn open(&self, from: std::net::IpAddr, to: std::net::SocketAddr) -> bool {
        let mut c = common::lan::connect_from(from, to);
        c.write_all(b"POST /api/upload HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 100000000\r\n\r\n").unwrap();
        match status_line_start(&mut c).as_str() {
            "HTTP/1.1 100" => {
                self.held.lock().unwrap().push(c);
                true
            }
            "HTTP/1.1 503" => false,
            other => panic!("{other}"),
        }
    }

    fn count(&self) -> usize {
        self.held.lock().unwrap().len()
    }
}

impl Drop for Uploads {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn v4(last: u8) -> std::net::IpAddr {
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, last))
}

#[test]
fn requests_that_passed_a_login_find_room_beside_uploads_from_many_addresses() {
    let root = TempDir::new("root");
    root.write("index.html", "hi");
    let users = htpasswd(&root, "admin", "pw");
    let backend = Backend::tcp(device);
    let route = format!("/api/ {}", backend.address);
    let auth = format!("/api/settings \"dev\" {}", users.display());
    // The shipped defaults (proxy-max 64, a quarter of it per client).
    let server = Server::start_in(root, &["--proxy", &route, "--auth", &auth]);
    let to = std::net::SocketAddr::from(([127, 0, 0, 1], server.port));
    let uploads = Uploads::new();
    for a in 2..=5 {
        while uploads.open(v4(a), to) {}
    }
    let settings = |server: &Server| {
        let (code, _, body) = curl(&[
            "-u",
            "admin:pw",
            "--data-binary",
            "wifi=on",
            &server.url("/api/settings"),
        ]);
        (code, String::from_utf8_lossy(&body).into_owned())
    };
    assert_eq!(
        settings(&server),
        (200, "POST /api/settings HTTP/1.1\nwifi=on".to_string()),
        "{} uploads held: {}",
        uploads.count(),
        server.log_text()
    );
    // One network (all of 127/8 is lo's) holds half of proxy-max.
    assert_eq!(uploads.count(), 32, "{}", server.log_text());
    assert!(server.wait_log(
        "127.0.0.0/8 holds 32 connections without a login; 503",
        Duration::from_secs(5)
    ));
    drop((uploads, server));

    // Four addresses, two uploads each, a network's share as large as
    // proxy-max: what passed no login takes all but the reserved quarter.
    let root = TempDir::new("root");
    let users = htpasswd(&root, "admin", "pw");
    let auth = format!("/api/settings \"dev\" {}", users.display());
    let server = Server::start_in(
        root,
        &[
            "--proxy",
            &route,
            "--auth",
            &auth,
            "--proxy-max",
            "8",
            "--proxy-max-per-client",
            "8",
        ],
    );
    let to = std::net::SocketAddr::from(([127, 0, 0, 1], server.port));
    let uploads = Uploads::new();
    let opened: Vec<bool> = (2..=5)
        .flat_map(|a| [uploads.open(v4(a), to), uploads.open(v4(a), to)])
        .collect();
    assert_eq!(opened.iter().filter(|&&o| o).count(), 6, "{opened:?}");
    for _ in 0..3 {
        assert_eq!(settings(&server).0, 200, "{}", server.log_text());
    }
    assert!(server.wait_log(
        "6 connections held without a login, the rest kept for logged-in requests; 503",
        Duration::from_secs(5)
    ));
}

/// A backend with event streams (paths ending in `/stream`, open until the
/// proxy closes them) and a long download (`/download`: 12 chunks, one a
/// second, without a length); everything else echoed.
fn streams_and_downloads(req: &Seen, s: &mut dyn Duplex) -> bool {
    let target = req.head.split(' ').nth(1).unwrap_or("");
    if target.ends_with("/stream") {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\ne\r\ndata: status\n\n\r\n");
        let mut b = [0u8; 1];
        let _ = s.read(&mut b);
        return false;
    }
    if target.ends_with("/download") {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
        for i in 0..12 {
            if s.write_all(format!("9\r\nchunk {i:02}\n\r\n").as_bytes())
                .is_err()
            {
                return false;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        let _ = s.write_all(b"0\r\n\r\n");
        return true;
    }
    echo(req, s)
}

#[test]
fn a_logged_in_stream_takes_the_place_of_the_oldest_without_a_login() {
    let root = TempDir::new("root");
    let users = htpasswd(&root, "admin", "pw");
    let backend = Backend::tcp(streams_and_downloads);
    let route = format!("/api/ {}", backend.address);
    let auth = format!("/api/admin/ \"dev\" {}", users.display());
    let server = Server::start_in(
        root,
        &[
            "--proxy",
            &route,
            "--auth",
            &auth,
            "--proxy-max-streams",
            "2",
        ],
    );
    let open_stream = |from: &str, headers: &str| {
        let mut c = server.connect_from(from);
        let req = format!("GET /api/status/stream HTTP/1.1\r\nHost: t\r\n{headers}\r\n");
        c.write_all(req.as_bytes()).unwrap();
        (status_line_start(&mut c), c)
    };
    // Event streams without a login, from two addresses, fill the budget.
    let mut hostile = Vec::new();
    for from in ["127.0.0.2", "127.0.0.3"] {
        let (status, c) = open_stream(from, "");
        assert_eq!(status, "HTTP/1.1 200");
        hostile.push(c);
    }
    // The admin's download outlives the short requests' 10 s and becomes
    // long-lived: it must not be the one cut.
    let download = std::thread::spawn({
        let url = server.url("/api/admin/download");
        move || curl(&["-u", "admin:pw", "--max-time", "60", &url])
    });
    // So must the admin's own event stream.
    let mut admin = server.connect();
    admin
        .write_all(b"GET /api/admin/stream HTTP/1.1\r\nHost: t\r\nAuthorization: Basic YWRtaW46cHc=\r\n\r\n")
        .unwrap();
    assert_eq!(
        status_line_start(&mut admin),
        "HTTP/1.1 200",
        "{}",
        server.log_text()
    );
    let (code, _, body) = download.join().unwrap();
    let body = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(
        (code, body.lines().count()),
        (200, 12),
        "{body}: {}",
        server.log_text()
    );
    // Both streams without a login were cut to make room for them.
    for (i, mut c) in hostile.into_iter().enumerate() {
        let mut rest = Vec::new();
        assert!(c.read_to_end(&mut rest).is_ok(), "stream {i} closed");
    }
    let mut more = [0u8; 64];
    admin
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let still_open = admin.read(&mut more).map_or(true, |n| n > 0);
    assert!(still_open, "the admin's stream goes on");
}

#[test]
fn hosts_of_one_lan_64_have_their_own_proxy_shares() {
    // The server reads its links at start: the addresses come first.
    let Some(lan) = common::lan::LanAddrs::add(&[0xc401, 0xc402]) else {
        return;
    };
    let backend = Backend::tcp(echo);
    let server = backend.server(&[
        "--listen",
        "127.0.0.1:0",
        "--listen",
        "[::1]:0",
        "--proxy-max-per-client",
        "2",
    ]);
    let to = std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, server.ipv6_port()));
    let (guest, admin) = (lan.at(0).into(), lan.at(1).into());
    let uploads = Uploads::new();
    assert!(uploads.open(guest, to) && uploads.open(guest, to));
    assert!(!uploads.open(guest, to), "the guest's share is 2");
    let mut c = common::lan::connect_from(admin, to);
    c.write_all(b"GET /api/status HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let r = read_response(&mut c, false).expect("an answer");
    assert_eq!(
        (r.status, r.text()),
        (200, "GET /api/status HTTP/1.1\n".to_string()),
        "another host of the /64: {}",
        server.log_text()
    );
}

/// Standard base64, for Basic credentials.
fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The outcome the client rules are for: one hostile host of the LAN,
/// with many addresses of the owner's /64 and many IPv4 addresses, floods
/// password guesses and uploads; the owner, on another address of the same
/// /64 and over IPv4, has every request answered within 2 s and logs in.
#[test]
fn the_owner_is_served_and_logs_in_while_a_lan_host_floods() {
    use std::net::{IpAddr, SocketAddr};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    // The server reads its links at start: the addresses come first.
    let hosts: Vec<u16> = (0xc501..=0xc501 + 16).collect();
    let Some(lan) = common::lan::LanAddrs::add(&hosts) else {
        return;
    };
    let root = TempDir::new("root");
    root.write("index.html", "hello");
    let users = root.path().join("users");
    std::fs::write(&users, "").unwrap();
    let people: Vec<String> = (0..12).map(|i| format!("owner{i}")).collect();
    for user in &people {
        let ok = Command::new("htpasswd")
            .args(["-b", "-B", "-C", "5"])
            .arg(&users)
            .args([user, "right"])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
    let backend = Backend::tcp(echo);
    let route = format!("/api/ {}", backend.address);
    let auth = format!("/api/settings \"dev\" {}", users.display());
    let conf = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("rootfs-overlay/etc/marmoset/marmoset.conf");
    // The shipped device config, served from here by this user.
    let server = Server::start_with_config(
        &conf,
        root,
        &[
            "--user",
            "root",
            "--group",
            "root",
            "--syslog",
            "off",
            "--listen",
            "127.0.0.1:0",
            "--listen",
            "[::1]:0",
            "--proxy",
            &route,
            "--auth",
            &auth,
        ],
    );
    let v4_to = SocketAddr::from(([127, 0, 0, 1], server.port));
    let v6_to = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, server.ipv6_port()));
    let owner_v6 = lan.at(0).to_string();
    let hostile: Vec<(IpAddr, SocketAddr)> = (1..hosts.len())
        .map(|i| (IpAddr::V6(lan.at(i)), v6_to))
        .chain((10..30).map(|a| (v4(a), v4_to)))
        .collect();
    let owner_urls = [
        (
            "127.0.0.1".to_string(),
            format!("http://127.0.0.1:{}", v4_to.port()),
        ),
        (owner_v6.clone(), format!("http://[::1]:{}", v6_to.port())),
    ];
    // The owner used the device before: its addresses have logged in.
    for (from, base) in &owner_urls {
        let url = format!("{base}/api/settings");
        let (code, _, _) = curl(&["--interface", from, "-u", "owner0:right", &url]);
        assert_eq!(code, 200, "{from}: {}", server.log_text());
    }

    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicUsize::new(0));
    let held_back = Arc::new(AtomicUsize::new(0));
    let guessers: Vec<_> = (0..4)
        .map(|t| {
            let (stop, checked, held_back) = (stop.clone(), checked.clone(), held_back.clone());
            let hostile = hostile.clone();
            std::thread::spawn(move || {
                let mut n = t;
                while !stop.load(Ordering::Relaxed) {
                    let (from, to) = hostile[n % hostile.len()];
                    let guess = base64(format!("owner0:guess{n}").as_bytes());
                    let Ok(mut c) = common::lan::try_connect_from(from, to) else {
                        break;
                    };
                    let req = format!("GET /api/settings HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic {guess}\r\nConnection: close\r\n\r\n");
                    if c.write_all(req.as_bytes()).is_ok() {
                        match read_response(&mut c, false).map(|r| r.status) {
                            Some(401) => checked.fetch_add(1, Ordering::Relaxed),
                            Some(429) => held_back.fetch_add(1, Ordering::Relaxed),
                            _ => 0,
                        };
                    }
                    n += 4;
                }
            })
        })
        .collect();
    let uploads = Uploads::new();
    for &(from, to) in &hostile {
        while uploads.open(from, to) {}
    }
    assert!(uploads.count() > 0);

    // Every request the owner makes is answered within 2 s, the login
    // of a user not yet cached included.
    let mut user = people.iter().skip(1);
    let slowest = std::cell::Cell::new(Duration::ZERO);
    for round in 0..3 {
        for (from, base) in &owner_urls {
            let within = |args: &[&str]| {
                let mut all = vec!["--interface", from.as_str(), "--max-time", "2"];
                all.extend_from_slice(args);
                let start = std::time::Instant::now();
                let answer = curl(&all);
                slowest.set(slowest.get().max(start.elapsed()));
                answer
            };
            let settings = format!("{base}/api/settings");
            let (code, _, body) = within(&["-u", "owner0:right", "--data-binary", "x", &settings]);
            assert_eq!(
                (code, String::from_utf8_lossy(&body).as_ref()),
                (200, "POST /api/settings HTTP/1.1\nx"),
                "round {round}, the API from {from}: {}",
                server.log_text()
            );
            let (code, _, body) = within(&[&format!("{base}/index.html")]);
            assert_eq!(
                (code, body.as_slice()),
                (200, &b"hello"[..]),
                "a file from {from}"
            );
            let login = format!("{}:right", user.next().unwrap());
            let (code, _, _) = within(&["-u", &login, &settings]);
            assert_eq!(
                code,
                200,
                "round {round}, {login} from {from}: {}",
                server.log_text()
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    for g in guessers {
        g.join().unwrap();
    }
    // The hostile host's guesses: its two networks' 20 each in a window,
    // however many addresses it took.
    let (checked, held_back) = (
        checked.load(Ordering::Relaxed),
        held_back.load(Ordering::Relaxed),
    );
    eprintln!(
        "guesses checked {checked}, held back {held_back}; uploads held {}; the owner's slowest answer {:?}",
        uploads.count(),
        slowest.get()
    );
    assert!(checked <= 40, "{checked} guesses checked");
    assert!(held_back > 0, "{checked} checked, none held back");
    assert!(server.wait_log(
        "auth: fd00:18:5::/64 reached its network's limit",
        Duration::from_secs(5)
    ));
    assert!(server.wait_log(
        "auth: 127.0.0.0/8 reached its network's limit",
        Duration::from_secs(5)
    ));
}
