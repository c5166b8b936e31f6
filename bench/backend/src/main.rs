//! The proxy benchmark's backend: `bench-backend unix:/path.sock` or
//! `bench-backend 127.0.0.1:PORT`. Every request gets the same small JSON
//! answer, on a connection kept open until the client closes it or sends
//! `Connection: close`. One thread per connection: the proxies under test
//! hold a handful (a pool, or one per request). Each answer names its
//! connection (`X-Backend-Connection: N`, counted from 1), so the benchmark
//! can tell whether a proxy keeps its backend connections.

use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

const BODY: &[u8] =
    b"{\"status\":\"ok\",\"uptime\":12345.6,\"load\":[0.1,0.2,0.3],\"counter\":42}\n";
/// A head larger than this is not one the proxies send.
const MAX_HEAD: usize = 16 * 1024;
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

fn main() {
    let Some(addr) = std::env::args().nth(1) else {
        eprintln!("usage: bench-backend unix:/path.sock | HOST:PORT");
        std::process::exit(2);
    };
    let result = match addr.strip_prefix("unix:") {
        Some(path) => {
            let _ = std::fs::remove_file(path);
            UnixListener::bind(path).and_then(|l| {
                eprintln!("bench-backend: listening on unix:{path}");
                for conn in l.incoming() {
                    let conn = conn?;
                    thread::spawn(move || serve(conn));
                }
                Ok(())
            })
        }
        None => TcpListener::bind(&addr).and_then(|l| {
            eprintln!("bench-backend: listening on {}", l.local_addr()?);
            for conn in l.incoming() {
                let conn = conn?;
                let _ = conn.set_nodelay(true);
                thread::spawn(move || serve(conn));
            }
            Ok(())
        }),
    };
    if let Err(e) = result {
        eprintln!("bench-backend: {addr}: {e}");
        std::process::exit(1);
    }
}

fn serve<S: Read + Write>(mut conn: S) {
    let id = CONNECTIONS.fetch_add(1, Ordering::Relaxed) + 1;
    let _ = requests(&mut conn, id);
}

/// Answers each complete head in the buffer; request bodies (Content-Length
/// only) are skipped.
fn requests<S: Read + Write>(conn: &mut S, id: u64) -> io::Result<()> {
    let mut buf = vec![0u8; MAX_HEAD];
    let mut have = 0;
    let mut out = Vec::with_capacity(4096);
    loop {
        let n = conn.read(&mut buf[have..])?;
        if n == 0 {
            return Ok(());
        }
        have += n;
        let mut used = 0;
        let mut close = false;
        while let Some(end) = find(&buf[used..have], b"\r\n\r\n") {
            let head = &buf[used..used + end];
            let body = header(head, b"content-length")
                .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if used + end + 4 + body > have {
                break;
            }
            close |= header(head, b"connection").is_some_and(|v| v.eq_ignore_ascii_case(b"close"));
            let _ = write!(out, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nX-Backend-Connection: {id}\r\n{}\r\n", BODY.len(), if close { "Connection: close\r\n" } else { "" });
            out.extend_from_slice(BODY);
            used += end + 4 + body;
            if close {
                break;
            }
        }
        if !out.is_empty() {
            conn.write_all(&out)?;
            out.clear();
        }
        if close {
            return Ok(());
        }
        buf.copy_within(used..have, 0);
        have -= used;
        if have == buf.len() {
            return Ok(());
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn header<'a>(head: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    head.split(|&b| b == b'\n').skip(1).find_map(|line| {
        let colon = line.iter().position(|&b| b == b':')?;
        line[..colon]
            .eq_ignore_ascii_case(name)
            .then(|| line[colon + 1..].trim_ascii())
    })
}
