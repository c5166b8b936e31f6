//! A backend for the reverse proxy's tests: a small HTTP/1.1 server in
//! the test's threads, on a unix socket or on 127.0.0.1, that records each
//! request it gets with the connection it came on, and answers through a
//! handler.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{Server, TempDir};

pub trait Duplex: Read + Write + Send {
    fn close_write(&self);
}
impl Duplex for TcpStream {
    fn close_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}
impl Duplex for UnixStream {
    fn close_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

/// One request as the backend received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub conn: usize,
    pub head: String,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Vec<String> {
        self.head
            .split("\r\n")
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
            .collect()
    }
}

/// Answers a request on the connection; false closes it.
pub type Handler = dyn Fn(&Seen, &mut dyn Duplex) -> bool + Send + Sync;

pub struct Backend {
    /// As the config names it.
    pub address: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Connections that Marmoset closed (end of stream between requests).
    pub closed: Arc<Mutex<Vec<usize>>>,
    _dir: Option<TempDir>,
}

impl Backend {
    pub fn tcp(
        handler: impl Fn(&Seen, &mut dyn Duplex) -> bool + Send + Sync + 'static,
    ) -> Backend {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = format!("http://{}", l.local_addr().unwrap());
        Backend::serve(address, None, handler, move || {
            l.accept().ok().map(|(s, _)| s)
        })
    }

    pub fn unix(
        handler: impl Fn(&Seen, &mut dyn Duplex) -> bool + Send + Sync + 'static,
    ) -> Backend {
        let dir = TempDir::new("backend");
        let path = dir.path().join("b.sock");
        let l = UnixListener::bind(&path).unwrap();
        let address = format!("unix:{}", path.display());
        Backend::serve(address, Some(dir), handler, move || {
            l.accept().ok().map(|(s, _)| s)
        })
    }

    /// Accepts on a thread of its own, one more thread per connection.
    fn serve<S: Duplex + 'static>(
        address: String,
        dir: Option<TempDir>,
        handler: impl Fn(&Seen, &mut dyn Duplex) -> bool + Send + Sync + 'static,
        next: impl FnMut() -> Option<S> + Send + 'static,
    ) -> Backend {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(Mutex::new(Vec::new()));
        let h: Arc<Handler> = Arc::new(handler);
        let (s, c) = (seen.clone(), closed.clone());
        std::thread::spawn(move || accept(std::iter::from_fn(next), h, s, c));
        Backend {
            address,
            seen,
            closed,
            _dir: dir,
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// A server proxying `/api/` here, with more flags.
    pub fn server(&self, more: &[&str]) -> Server {
        let route = format!("/api/ {}", self.address);
        let mut args = vec!["--proxy", route.as_str()];
        args.extend_from_slice(more);
        Server::start(&args)
    }
}

fn accept<S: Duplex + 'static>(
    incoming: impl Iterator<Item = S>,
    handler: Arc<Handler>,
    seen: Arc<Mutex<Vec<Seen>>>,
    closed: Arc<Mutex<Vec<usize>>>,
) {
    let conns = Arc::new(AtomicUsize::new(0));
    for stream in incoming {
        let conn = conns.fetch_add(1, Ordering::SeqCst);
        let (handler, seen, closed) = (handler.clone(), seen.clone(), closed.clone());
        std::thread::spawn(move || {
            let mut stream: Box<dyn Duplex> = Box::new(stream);
            loop {
                let Some(req) = read_request(&mut stream, conn) else {
                    closed.lock().unwrap().push(conn);
                    return;
                };
                seen.lock().unwrap().push(req.clone());
                if !handler(&req, &mut *stream) {
                    return;
                }
            }
        });
    }
}

/// Reads one request (head, and a body by Content-Length or chunked) a
/// byte at a time, so nothing after it is taken.
fn read_request(s: &mut Box<dyn Duplex>, conn: usize) -> Option<Seen> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).ok()? != 1 {
            return None;
        }
        head.push(b[0]);
    }
    let mut seen = Seen {
        conn,
        head: String::from_utf8_lossy(&head).into_owned(),
        body: Vec::new(),
    };
    if let Some(n) = seen.header("content-length").first() {
        let mut body = vec![0; n.parse().ok()?];
        s.read_exact(&mut body).ok()?;
        seen.body = body;
    } else if !seen.header("transfer-encoding").is_empty() {
        let mut r = BufReader::new(s);
        loop {
            let mut line = String::new();
            r.read_line(&mut line).ok()?;
            let size = usize::from_str_radix(line.trim(), 16).ok()?;
            let mut data = vec![0; size + 2];
            r.read_exact(&mut data).ok()?;
            if size == 0 {
                break;
            }
            seen.body.extend_from_slice(&data[..size]);
        }
    }
    Some(seen)
}

pub fn reply(s: &mut dyn Duplex, body: &str) -> bool {
    reply_to(s, body, false)
}

pub fn reply_to(s: &mut dyn Duplex, body: &str, head_only: bool) -> bool {
    let r = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{}",
        body.len(),
        if head_only { "" } else { body }
    );
    s.write_all(r.as_bytes()).is_ok()
}

/// Echoes the method, target and body.
pub fn echo(req: &Seen, s: &mut dyn Duplex) -> bool {
    let line = req.head.lines().next().unwrap_or("").to_string();
    let body = format!("{line}\n{}", String::from_utf8_lossy(&req.body));
    reply_to(s, &body, req.head.starts_with("HEAD "))
}
