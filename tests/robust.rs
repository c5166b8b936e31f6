//! Robustness against hostile and unlucky clients: request
//! smuggling, header injection, files changing under a transfer, floods of
//! connections, and stopping or reloading under load.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;

// ---------------------------------------------------------------------------
// Shared helpers

const MARKER: &str = "MARKER-CONTENT-7d1c";
const SMUGGLED: &str = "SMUGGLED-CONTENT-93ab";
const INDEX: &str = "<!DOCTYPE html><title>t</title>hello\n";

/// A request that must never be answered: it hides in a body.
const SMUGGLE: &str = "GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n";
/// The normal request sent after every probe, in the same write.
const MARKER_REQ: &str = "GET /marker HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

/// A root with the marker, the smuggled target and a CGI echo script.
fn probe_root() -> TempDir {
    let root = TempDir::new("robust");
    root.write("index.html", INDEX);
    root.write("marker", MARKER);
    root.write("smuggled", SMUGGLED);
    script(
        &root,
        "echo",
        "printf 'Content-Type: text/plain\\n\\n'; cat\n",
    );
    root
}

/// One response cut out of a byte stream.
#[derive(Debug)]
struct Parsed {
    status: u16,
    head: String,
    body: Vec<u8>,
    /// The body ended where its framing said (not cut by the close).
    complete: bool,
}

impl Parsed {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.split("\r\n").skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then_some(v.trim())
        })
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Splits everything a connection received into responses (1xx skipped).
fn parse_stream(mut rest: &[u8]) -> Vec<Parsed> {
    let mut out = Vec::new();
    while !rest.is_empty() {
        let Some(end) = find(rest, b"\r\n\r\n") else {
            out.push(Parsed {
                status: 0,
                head: String::from_utf8_lossy(rest).into_owned(),
                body: Vec::new(),
                complete: false,
            });
            break;
        };
        let head = String::from_utf8_lossy(&rest[..end + 4]).into_owned();
        rest = &rest[end + 4..];
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut p = Parsed {
            status,
            head,
            body: Vec::new(),
            complete: true,
        };
        if (100..200).contains(&status) {
            continue;
        }
        if status == 204 || status == 304 {
            out.push(p);
            continue;
        }
        if p.header("transfer-encoding").is_some() {
            let (body, used, ok) = dechunk(rest);
            p.body = body;
            p.complete = ok;
            rest = &rest[used..];
        } else if let Some(n) = p
            .header("content-length")
            .and_then(|v| v.parse::<usize>().ok())
        {
            let take = n.min(rest.len());
            p.body = rest[..take].to_vec();
            p.complete = take == n;
            rest = &rest[take..];
        } else {
            p.body = rest.to_vec();
            rest = &[];
        }
        out.push(p);
    }
    out
}

/// Decodes a chunked response body: (data, bytes used, well-formed and complete).
fn dechunk(s: &[u8]) -> (Vec<u8>, usize, bool) {
    let mut body = Vec::new();
    let mut i = 0;
    loop {
        let Some(eol) = find(&s[i..], b"\r\n") else {
            return (body, s.len(), false);
        };
        let line = String::from_utf8_lossy(&s[i..i + eol]).into_owned();
        let Ok(size) = usize::from_str_radix(line.split(';').next().unwrap_or(""), 16) else {
            return (body, s.len(), false);
        };
        i += eol + 2;
        if size == 0 {
            // Trailers up to the empty line.
            loop {
                let Some(eol) = find(&s[i..], b"\r\n") else {
                    return (body, s.len(), false);
                };
                i += eol + 2;
                if eol == 0 {
                    return (body, i, true);
                }
            }
        }
        if s.len() < i + size + 2 || &s[i + size..i + size + 2] != b"\r\n" {
            return (body, s.len(), false);
        }
        body.extend_from_slice(&s[i..i + size]);
        i += size + 2;
    }
}

/// Sends `bytes` in one write and reads until the server closes. The flag
/// says whether it did close (false: still open after `wait`).
fn exchange(port: u16, bytes: &[u8], wait: Duration) -> (Vec<u8>, bool) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(wait)).unwrap();
    c.write_all(bytes).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match read_some(&mut c, &mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            // A reset after the answer still ends the connection.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (got, true),
            Err(_) => return (got, false),
        }
    }
}

/// Closes with RST (SO_LINGER 0), as a client that crashes does.
fn socket_reset(c: &TcpStream) {
    #[repr(C)]
    struct Linger {
        onoff: i32,
        linger: i32,
    }
    let l = Linger {
        onoff: 1,
        linger: 0,
    };
    setsockopt(c, 1, 13, &l); // SOL_SOCKET, SO_LINGER
}

/// Keeps the client's receive buffer small, so a stalled reader stalls the
/// server after a few hundred KiB instead of after the kernel's 32 MiB.
fn small_receive_buffer(c: &TcpStream) {
    setsockopt(c, 1, 8, &(64 * 1024i32)); // SOL_SOCKET, SO_RCVBUF
}

fn setsockopt<T>(c: &TcpStream, level: i32, name: i32, val: &T) {
    use std::os::fd::AsRawFd;
    unsafe extern "C" {
        fn setsockopt(fd: i32, level: i32, name: i32, val: *const u8, len: u32) -> i32;
    }
    // SAFETY: a valid socket, and `val` points to `size_of::<T>()` readable bytes.
    let rc = unsafe {
        setsockopt(
            c.as_raw_fd(),
            level,
            name,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        )
    };
    assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

/// With one worker (the default) the server is one process.
fn the_worker(s: &Server) -> i32 {
    assert!(children(s.pid()).is_empty(), "no supervisor: one process");
    s.pid()
}

fn assert_no_worker_crash(s: &Server, worker: i32) {
    let log = s.log_text();
    let state = proc_status(worker, "State").unwrap_or_default();
    assert!(
        !state.is_empty() && !state.starts_with('Z'),
        "the server died:\n{log}"
    );
}

/// CPU time (user + system, in clock ticks) of one process.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(close) = stat.rfind(')') else {
        return 0;
    };
    let f: Vec<&str> = stat[close + 2..].split(' ').collect();
    f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0)
}

// ---------------------------------------------------------------------------
// 1. Request smuggling

/// What RFC 9112 makes of a probe, when it does not refuse it.
#[derive(Debug, Clone)]
enum Rfc {
    /// No valid reading: 400 (501 for an unknown transfer coding), then close.
    Reject,
    /// The body is these bytes and the connection goes on: the marker is answered.
    Body(Vec<u8>),
    /// Transfer-Encoding overrides Content-Length (section 6.3 item 3): the
    /// body is these decoded bytes and the connection MUST close after.
    BodyThenClose(Vec<u8>),
    /// A valid body of these bytes (chunked, or held back for 100-continue);
    /// a static path may answer without reading it, and then must close.
    Chunked(Vec<u8>),
    /// A valid head with a malformed chunked body: a script's body cannot be
    /// read (400); a static path may answer without reading it, then close.
    BadChunks,
}

struct Probe {
    name: &'static str,
    /// Everything after the request target and version: the end of the request
    /// line, the fields (Host included) and the empty line. `{len}` is the body length.
    head: String,
    body: Vec<u8>,
    rfc: Rfc,
    /// Refusing is also right (the RFC allows it, or the input is dubious).
    may_refuse: bool,
    /// A server bug this row once found, on static paths and on CGI paths.
    bugs: (Option<&'static str>, Option<&'static str>),
}

/// Bugs these rows found (fixed; `formerly_failing_probes_stay_fixed` keeps them so).
const BUG_CLOSE: &str = "static path answers `Connection: close` but parses the unread body";
const BUG_EXT: &str = "chunk extensions are not checked";

fn zero_then_smuggle() -> Vec<u8> {
    format!("0\r\n\r\n{SMUGGLE}").into_bytes()
}

/// The smuggled request as one chunk: chunked framing covers it all.
fn chunk_smuggle(size_line: &str) -> Vec<u8> {
    format!("{size_line}\r\n{SMUGGLE}\r\n0\r\n\r\n").into_bytes()
}

fn hello_smuggle() -> Vec<u8> {
    format!("hello{SMUGGLE}").into_bytes()
}

fn row(name: &'static str, head: &str, body: Vec<u8>, rfc: Rfc, may_refuse: bool) -> Probe {
    Probe {
        name,
        head: head.to_string(),
        body,
        rfc,
        may_refuse,
        bugs: (None, None),
    }
}

fn probes() -> Vec<Probe> {
    use Rfc::*;
    let smug = SMUGGLE.as_bytes().to_vec();
    let hex = format!("{:x}", SMUGGLE.len());
    let cl_te = "\r\nHost: t\r\nContent-Length: {len}\r\n";
    let mut rows = vec![
        // CL.TE and TE.CL: both framings at once.
        row(
            "CL.TE",
            &format!("{cl_te}Transfer-Encoding: chunked\r\n\r\n"),
            zero_then_smuggle(),
            BodyThenClose(vec![]),
            true,
        ),
        row(
            "TE.CL",
            "\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n",
            chunk_smuggle(&hex),
            BodyThenClose(smug.clone()),
            true,
        ),
        // TE.TE: obfuscated Transfer-Encoding, with a Content-Length covering it all.
        row(
            "TE xchunked + CL",
            &format!("{cl_te}Transfer-Encoding: xchunked\r\n\r\n"),
            zero_then_smuggle(),
            Reject,
            true,
        ),
        row(
            "TE xchunked alone",
            "\r\nHost: t\r\nTransfer-Encoding: xchunked\r\n\r\n",
            zero_then_smuggle(),
            Reject,
            true,
        ),
        row(
            "TE with two spaces before chunked + CL",
            &format!("{cl_te}Transfer-Encoding:  chunked\r\n\r\n"),
            zero_then_smuggle(),
            BodyThenClose(vec![]),
            true,
        ),
        row(
            "TE with a tab before chunked + CL",
            &format!("{cl_te}Transfer-Encoding:\tchunked\r\n\r\n"),
            zero_then_smuggle(),
            BodyThenClose(vec![]),
            true,
        ),
        row(
            "TE line folded into the previous field + CL",
            "\r\nHost: t\r\nX-A: a\r\n Transfer-Encoding: chunked\r\nContent-Length: {len}\r\n\r\n",
            zero_then_smuggle(),
            Body(zero_then_smuggle()),
            true,
        ),
        row(
            "TE line folded right after the request line + CL",
            "\r\n Transfer-Encoding: chunked\r\nHost: t\r\nContent-Length: {len}\r\n\r\n",
            zero_then_smuggle(),
            Body(zero_then_smuggle()),
            true,
        ),
        row(
            "TE chunked, identity",
            "\r\nHost: t\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
            chunk_smuggle(&hex),
            Reject,
            true,
        ),
        row(
            "TE identity, chunked",
            "\r\nHost: t\r\nTransfer-Encoding: identity, chunked\r\n\r\n",
            chunk_smuggle(&hex),
            Reject,
            true,
        ),
        row(
            "TE chunked twice",
            "\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            chunk_smuggle(&hex),
            Reject,
            true,
        ),
        row(
            "TE chunked + Transfer-encoding: x",
            "\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-encoding: x\r\n\r\n",
            chunk_smuggle(&hex),
            Reject,
            true,
        ),
        row(
            "TE x + TE chunked + CL",
            &format!("{cl_te}Transfer-Encoding: x\r\nTransfer-Encoding: chunked\r\n\r\n"),
            zero_then_smuggle(),
            Reject,
            true,
        ),
        row(
            "TE CHUNKED (case-insensitive coding)",
            "\r\nHost: t\r\nTransfer-Encoding: CHUNKED\r\n\r\n",
            chunk_smuggle(&hex),
            Chunked(smug.clone()),
            false,
        ),
        row(
            "TE \"chunked\" (quoted)",
            "\r\nHost: t\r\nTransfer-Encoding: \"chunked\"\r\n\r\n",
            chunk_smuggle(&hex),
            Reject,
            true,
        ),
        row(
            "Transfer_Encoding is another field + CL",
            &format!("{cl_te}Transfer_Encoding: chunked\r\n\r\n"),
            zero_then_smuggle(),
            Body(zero_then_smuggle()),
            true,
        ),
        row(
            "TE with space before the colon + CL",
            &format!("{cl_te}Transfer-Encoding : chunked\r\n\r\n"),
            zero_then_smuggle(),
            Reject,
            false,
        ),
        // Content-Length variants.
        row(
            "CL with space before the colon",
            "\r\nHost: t\r\nContent-Length : {len}\r\n\r\n",
            hello_smuggle(),
            Reject,
            false,
        ),
        row(
            "duplicate equal CL",
            "\r\nHost: t\r\nContent-Length: {len}\r\nContent-Length: {len}\r\n\r\n",
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ),
        row(
            "duplicate different CL (short first)",
            "\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: {len}\r\n\r\n",
            hello_smuggle(),
            Reject,
            true,
        ),
        row(
            "duplicate different CL (short last)",
            "\r\nHost: t\r\nContent-Length: {len}\r\nContent-Length: 5\r\n\r\n",
            hello_smuggle(),
            Reject,
            true,
        ),
        row(
            "comma-joined equal CL",
            "\r\nHost: t\r\nContent-Length: {len}, {len}\r\n\r\n",
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ),
        row(
            "comma-joined different CL",
            "\r\nHost: t\r\nContent-Length: 5, {len}\r\n\r\n",
            hello_smuggle(),
            Reject,
            true,
        ),
        row(
            "CL with a plus sign",
            "\r\nHost: t\r\nContent-Length: +{len}\r\n\r\n",
            hello_smuggle(),
            Reject,
            true,
        ),
        row(
            "CL value on an obs-fold line",
            "\r\nHost: t\r\nContent-Length:\r\n {len}\r\n\r\n",
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ),
        row(
            "CL after an obs-fold continuation",
            "\r\nHost: t\r\nX-A: a\r\n b\r\nContent-Length: {len}\r\n\r\n",
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ),
        row(
            "CL with form feed before the value",
            "\r\nHost: t\r\nContent-Length: \x0c{len}\r\n\r\n",
            hello_smuggle(),
            Reject,
            true,
        ),
        row(
            "CL with form feed after the value",
            "\r\nHost: t\r\nContent-Length: {len}\x0c\r\n\r\n",
            hello_smuggle(),
            Reject,
            true,
        ),
        row(
            "CL with vertical tab after the value",
            "\r\nHost: t\r\nContent-Length: {len}\x0b\r\n\r\n",
            hello_smuggle(),
            Reject,
            true,
        ),
        // Line endings.
        row(
            "bare LF everywhere",
            "\nHost: t\nContent-Length: {len}\n\n",
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ),
        row(
            "bare LF after one field",
            "\r\nHost: t\nContent-Length: {len}\r\n\r\n",
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ),
        row(
            "bare LF ends the head",
            "\r\nHost: t\r\nContent-Length: {len}\r\n\n",
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ),
        row(
            "bare CR hides a TE in a field value + CL",
            "\r\nHost: t\r\nContent-Length: {len}\r\nX-A: a\rTransfer-Encoding: chunked\r\n\r\n",
            zero_then_smuggle(),
            Body(zero_then_smuggle()),
            true,
        ),
        row(
            "bare CR hides a short CL",
            "\r\nHost: t\r\nX-A: a\rContent-Length: 5\r\nContent-Length: {len}\r\n\r\n",
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ),
        row(
            "bare CR ends the request line",
            "\rHost: t\r\nContent-Length: {len}\r\n\r\n",
            hello_smuggle(),
            Reject,
            true,
        ),
        // NUL and other control bytes in field values.
        row(
            "NUL in a field value",
            "\r\nHost: t\r\nX-A: a\x00b\r\nContent-Length: {len}\r\n\r\n",
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ),
        row(
            "NUL after the CL value",
            "\r\nHost: t\r\nContent-Length: {len}\x00\r\n\r\n",
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ),
        row(
            "NUL then a short CL in a field value",
            "\r\nHost: t\r\nX-A: a\x00Content-Length: 5\r\nContent-Length: {len}\r\n\r\n",
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ),
        row(
            "NUL in the TE value",
            "\r\nHost: t\r\nTransfer-Encoding: chunked\x00\r\n\r\n",
            chunk_smuggle(&hex),
            Chunked(smug.clone()),
            true,
        ),
    ];
    for (name, c) in [
        ("SOH in a field value", '\x01'),
        ("VT in a field value", '\x0b'),
        ("FF in a field value", '\x0c'),
        ("ESC in a field value", '\x1b'),
        ("DEL in a field value", '\x7f'),
    ] {
        rows.push(row(
            name,
            &format!("\r\nHost: t\r\nX-A: a{c}b\r\nContent-Length: {{len}}\r\n\r\n"),
            hello_smuggle(),
            Body(hello_smuggle()),
            true,
        ));
    }
    // Chunk sizes and extensions.
    let te = "\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    let bad = [
        ("chunk size overflowing 64 bits", format!("1{:0>16}", hex)),
        ("chunk size of 20 f", "f".repeat(20)),
        ("chunk size with 0x", format!("0x{hex}")),
        ("chunk size with +", format!("+{hex}")),
        ("chunk size with -", format!("-{hex}")),
        ("chunk size with a leading space", format!(" {hex}")),
        ("chunk size with a trailing space", format!("{hex} ")),
        ("chunk extension without a name", format!("{hex};")),
        ("chunk extension with a bare LF", format!("{hex};a\nb")),
        ("chunk extension with a NUL", format!("{hex};a\x00b")),
        ("chunk extension with an open quote", format!("{hex};a=\"b")),
        ("chunk size line ended by bare LF", format!("{hex}\n")),
    ];
    for (name, size) in bad {
        rows.push(row(name, te, chunk_smuggle(&size), BadChunks, true));
    }
    // Size lines a server may accept; the last field: whether it may also refuse.
    let good = [
        (
            "chunk size with leading zeros",
            format!("{:0>20}", hex),
            true,
        ),
        ("chunk extension a=b", format!("{hex};a=b"), false),
        (
            "chunk extension with a quoted value",
            format!("{hex};a=\"b c\""),
            false,
        ),
        ("chunk extension after BWS", format!("{hex} ;a=b"), true),
    ];
    for (name, size, may_refuse) in good {
        rows.push(row(
            name,
            te,
            chunk_smuggle(&size),
            Chunked(smug.clone()),
            may_refuse,
        ));
    }
    rows.push(row(
        "chunk data longer than its size",
        te,
        format!("3\r\nabc{SMUGGLE}\r\n0\r\n\r\n").into_bytes(),
        BadChunks,
        true,
    ));
    rows.push(row(
        "chunked body that is a bare request",
        te,
        SMUGGLE.as_bytes().to_vec(),
        BadChunks,
        true,
    ));
    rows.push(row(
        "Expect: 100-continue with a body",
        "\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: {len}\r\n\r\n",
        hello_smuggle(),
        Chunked(hello_smuggle()),
        false,
    ));
    rows.push(row(
        "Expect: 100-continue with a body that is a request",
        "\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: {len}\r\n\r\n",
        SMUGGLE.as_bytes().to_vec(),
        Chunked(SMUGGLE.as_bytes().to_vec()),
        false,
    ));
    rows.push(row(
        "chunked body with a trailer",
        te,
        format!("{hex}\r\n{SMUGGLE}\r\n0\r\nX-T: 1\r\n\r\n").into_bytes(),
        Chunked(smug),
        false,
    ));
    // Today's failures, by bug: on a static path every accepted head with an
    // unread body; on CGI paths the unchecked extensions.
    for p in &mut rows {
        let on_static = matches!(p.rfc, Chunked(_) | BadChunks) && !p.head.contains('\0');
        let on_cgi = [
            "chunk extension without a name",
            "chunk extension with an open quote",
        ]
        .contains(&p.name);
        p.bugs = (on_static.then_some(BUG_CLOSE), on_cgi.then_some(BUG_EXT));
    }
    rows
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Target {
    Static,
    Cgi,
    /// The reverse proxy, to a backend that echoes the body it gets.
    Proxy,
}

/// Checks one probe's answers; `Err` says what was wrong.
fn judge(p: &Probe, target: Target, raw: &[u8], closed: bool) -> Result<(), String> {
    let rs = parse_stream(raw);
    if find(raw, SMUGGLED.as_bytes()).is_some() {
        return Err("the request hidden in the body was answered".into());
    }
    if !closed {
        return Err("the connection was still open 5 s after the marker request".into());
    }
    if let Some(r) = rs.iter().find(|r| !r.complete) {
        return Err(format!("a response is cut short: {r:?}"));
    }
    let coding = p.head.to_ascii_lowercase().contains("transfer-encoding");
    if let Some(first) = rs.first() {
        if first.status == 400 || (first.status == 501 && coding) {
            let refusal_ok = p.may_refuse
                || matches!(p.rfc, Rfc::Reject)
                || (matches!(p.rfc, Rfc::BadChunks) && target != Target::Static);
            if !refusal_ok {
                return Err(format!("a valid request was refused with {}", first.status));
            }
            return if rs.len() == 1 {
                Ok(())
            } else {
                Err(format!("{} responses after a refusal", rs.len()))
            };
        }
    }
    let probe_ok = |r: &Parsed, echo: &[u8]| match target {
        Target::Static => r.status == 200 && r.body == INDEX.as_bytes(),
        Target::Cgi | Target::Proxy => r.status == 200 && r.body == echo,
    };
    let marker_ok = |r: &Parsed| r.status == 200 && r.body == MARKER.as_bytes();
    let ok = match (&p.rfc, target, rs.as_slice()) {
        (Rfc::Reject, ..) => false,
        (Rfc::Body(b), _, [a, m]) => probe_ok(a, b) && marker_ok(m),
        (Rfc::BodyThenClose(b), _, [a]) => probe_ok(a, b),
        (Rfc::Chunked(b), Target::Cgi | Target::Proxy, [a, m]) => probe_ok(a, b) && marker_ok(m),
        (Rfc::Chunked(b), Target::Static, [a]) => probe_ok(a, b),
        (Rfc::Chunked(b), Target::Static, [a, m]) => probe_ok(a, b) && marker_ok(m),
        (Rfc::BadChunks, Target::Static, [a]) => probe_ok(a, b""),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        let expected = match &p.rfc {
            Rfc::Reject => "a refusal".to_string(),
            Rfc::Body(b) => format!(
                "the probe's answer for body {:?}, then the marker",
                String::from_utf8_lossy(b)
            ),
            Rfc::BodyThenClose(b) => format!(
                "the probe's answer for body {:?}, then close",
                String::from_utf8_lossy(b)
            ),
            Rfc::Chunked(b) => format!(
                "the probe's answer for body {:?}, then the marker (or close on a static path)",
                String::from_utf8_lossy(b)
            ),
            Rfc::BadChunks => "400 (CGI, proxy) or the answer then close (static)".to_string(),
        };
        Err(format!("{} responses, expected {expected}", rs.len()))
    }
}

/// Sends each probe (then the marker request, in the same write) to a static
/// path, to the CGI echo script and through the proxy to an echoing
/// backend; what went wrong, one line per probe.
fn run_probes(select: impl Fn(&Probe, Target) -> bool) -> (usize, Vec<String>) {
    let backend =
        backend::Backend::unix(|req, s| backend::reply(s, &String::from_utf8_lossy(&req.body)));
    let route = format!("/api/ {}", backend.address);
    let s = Server::start_in(probe_root(), &["--header-timeout", "3", "--proxy", &route]);
    let mut failures = Vec::new();
    let mut ran = 0;
    for p in probes() {
        for target in [Target::Static, Target::Cgi, Target::Proxy] {
            if !select(&p, target) {
                continue;
            }
            ran += 1;
            let line = match target {
                Target::Static => "GET /index.html HTTP/1.1",
                Target::Cgi => "POST /cgi-bin/echo HTTP/1.1",
                Target::Proxy => "POST /api/echo HTTP/1.1",
            };
            let head = p.head.replace("{len}", &p.body.len().to_string());
            let mut bytes = format!("{line}{head}").into_bytes();
            bytes.extend_from_slice(&p.body);
            bytes.extend_from_slice(MARKER_REQ.as_bytes());
            let (raw, closed) = exchange(s.port, &bytes, Duration::from_secs(5));
            if let Err(why) = judge(&p, target, &raw, closed) {
                failures.push(format!(
                    "{} ({target:?}): {why}\n  sent: {:?}\n  got: {:?}",
                    p.name,
                    String::from_utf8_lossy(&bytes),
                    String::from_utf8_lossy(&raw)
                ));
            }
            // After each probe the server still serves a normal request.
            let r = s.get("/marker", &[]);
            assert_eq!(
                (r.status, r.text().as_str()),
                (200, MARKER),
                "after {}: {}",
                p.name,
                s.log_text()
            );
        }
    }
    let smuggled = backend
        .seen()
        .into_iter()
        .filter(|r| !r.head.starts_with("POST /api/echo "));
    failures.extend(smuggled.map(|r| format!("the backend got another request: {:?}", r.head)));
    (ran, failures)
}

fn known_bug(p: &Probe, target: Target) -> Option<&'static str> {
    match target {
        Target::Static => p.bugs.0,
        Target::Cgi => p.bugs.1,
        Target::Proxy => None,
    }
}

#[test]
fn smuggling_probes_are_refused_or_read_as_rfc_9112_says() {
    let (ran, failures) = run_probes(|p, t| known_bug(p, t).is_none());
    assert!(
        failures.is_empty(),
        "{} of {ran} probes failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The rows that once failed (the bugs named in `bugs`, both fixed): they
/// must stay fixed.
#[test]
fn formerly_failing_probes_stay_fixed() {
    let (ran, failures) = run_probes(|p, t| known_bug(p, t).is_some());
    assert!(
        failures.is_empty(),
        "{} of {ran} probes failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------
// 2. No response header carries CR or LF from a request

/// Every problem with a response head: lines that are not `Name: value`,
/// CR or LF inside a line, or an injected field (an encoded `%0d%0a` left
/// in a value is harmless).
fn head_problems(head: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let body = head.strip_suffix("\r\n\r\n").unwrap_or(head);
    let mut lines = body.split("\r\n");
    let status = lines.next().unwrap_or("");
    if !status.starts_with("HTTP/1.1 ") || status.contains(['\r', '\n']) {
        problems.push(format!("status line {status:?}"));
    }
    for l in lines {
        let well_formed = l.split_once(": ").is_some_and(|(n, v)| {
            !n.is_empty()
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
                && v.bytes()
                    .all(|b| b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80)
        });
        if !well_formed {
            problems.push(format!("line {l:?}"));
        }
        if l.trim_start()
            .to_ascii_lowercase()
            .starts_with("x-injected")
        {
            problems.push(format!("injected {l:?}"));
        }
    }
    problems
}

#[test]
fn no_response_header_carries_cr_or_lf_from_a_request() {
    let root = probe_root();
    root.write("d/index.html", "d");
    // A directory whose name holds CR LF: its redirect must encode them.
    std::fs::create_dir_all(root.path().join("e\r\nX-Injected: 1")).unwrap();
    root.write("404.html", "<h1>Nothing here</h1>");
    script(
        &root,
        "cr",
        "printf 'Content-Type: text/plain\\nX-A: a\\rX-Injected: 1\\n\\nbody'\n",
    );
    script(
        &root,
        "crloc",
        "printf 'Location: /index.html\\rX-Injected: 1\\n\\n'\n",
    );
    script(
        &root,
        "crstatus",
        "printf 'Status: 200 OK\\rX-Injected: 1\\nContent-Type: text/plain\\n\\nx'\n",
    );
    script(
        &root,
        "fold",
        "printf 'Content-Type: text/plain\\nX-A: a\\n X-Injected: 1\\n\\nbody'\n",
    );
    script(
        &root,
        "pathinfo",
        "printf 'Content-Type: text/plain\\nX-P: %s\\n\\nx' \"$PATH_INFO\"\n",
    );
    script(
        &root,
        "query",
        "printf 'Content-Type: text/plain\\nX-Q: %s\\n\\nx' \"$QUERY_STRING\"\n",
    );
    script(
        &root,
        "relocate",
        "printf 'Location: /x/%s\\n\\n' \"$PATH_INFO\"\n",
    );
    let s = Server::start_in(
        root,
        &["--redirect", "/r/* /x/*", "--error-page", "404 /404.html"],
    );
    let crlf = "%0d%0aX-Injected:%201";
    let cr = "%0dX-Injected:%201";
    let lf = "%0aX-Injected:%201";
    let mut targets = Vec::new();
    for inj in [crlf, cr, lf] {
        targets.extend([
            format!("/d?{inj}"),
            format!("/d?a={inj}"),
            format!("/e{inj}"),
            format!("/e{inj}?q"),
            format!("/r/a{inj}"),
            format!("/r/{inj}/b"),
            format!("/r/a?{inj}"),
            format!("/nope{inj}"),
            format!("/nope?{inj}"),
            format!("/cgi-bin/missing?{inj}"),
            format!("/nope/{inj}.html"),
            format!("/cgi-bin/pathinfo/a{inj}"),
            format!("/cgi-bin/query?{inj}"),
            format!("/cgi-bin/relocate/a{inj}"),
        ]);
    }
    for name in ["cr", "crloc", "crstatus", "fold"] {
        targets.push(format!("/cgi-bin/{name}"));
    }
    let mut failures = Vec::new();
    let mut statuses = Vec::new();
    for t in &targets {
        for method in ["GET", "HEAD"] {
            let raw = s.raw(
                format!("{method} {t} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes(),
            );
            let head = match raw.find("\r\n\r\n") {
                Some(i) => &raw[..i + 4],
                None => {
                    failures.push(format!("{method} {t}: no response head: {raw:?}"));
                    continue;
                }
            };
            statuses.push(format!("{method} {t} -> {}", &head[9..12]));
            let problems = head_problems(head);
            if !problems.is_empty() {
                failures.push(format!("{method} {t}: {problems:?}\n  head: {head:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The directory redirects did happen (the probes reached the code that builds Location).
    let r = s.get("/d?a=%0d%0a", &[]);
    assert_eq!(r.status, 301, "{r:?}");
    let r = s.get("/r/a", &[]);
    assert_eq!(r.header("location"), Some("/x/a"));
    let r = s.get("/nope?%0d%0aX-Injected:%201", &[]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (404, "<h1>Nothing here</h1>")
    );
    s.assert_healthy();
    eprintln!("{}", statuses.join("\n"));
}

// ---------------------------------------------------------------------------
// 3. Faults mid-transfer

const BIG: usize = 64 << 20;

/// Content that differs at every offset pattern a framing bug could produce.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32 % 31) as u8
                ^ seed
        })
        .collect()
}

/// Connects with a small receive buffer, asks for `path` on a keep-alive
/// connection, reads the head and `first` bytes of the body.
fn start_download(port: u16, path: &str, first: usize) -> (TcpStream, Parsed, Vec<u8>) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    small_receive_buffer(&c);
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let head_end = loop {
        if let Some(i) = find(&got, b"\r\n\r\n") {
            break i + 4;
        }
        let n = read_some(&mut c, &mut buf).unwrap();
        assert!(n > 0, "closed before the head");
        got.extend_from_slice(&buf[..n]);
    };
    let head = parse_stream(&got[..head_end]).remove(0);
    let mut body = got[head_end..].to_vec();
    while body.len() < first {
        let n = read_some(&mut c, &mut buf).unwrap();
        assert!(n > 0, "closed early");
        body.extend_from_slice(&buf[..n]);
    }
    (c, head, body)
}

/// Reads until the server closes or `limit` body bytes are in; (body, closed).
fn finish_download(c: &mut TcpStream, mut body: Vec<u8>, limit: usize) -> (Vec<u8>, bool) {
    let mut buf = vec![0u8; 256 * 1024];
    while body.len() < limit {
        match read_some(c, &mut buf) {
            Ok(0) => return (body, true),
            Ok(n) => body.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (body, true),
            Err(_) => return (body, false),
        }
    }
    (body, false)
}

#[test]
fn clients_resetting_mid_sendfile_do_not_disturb_others() {
    let s = Server::start(&[]);
    let content = pattern(BIG, 1);
    s.root.write("big.bin", &content);
    let worker = the_worker(&s);
    for _ in 0..10 {
        let (c, head, _) = start_download(s.port, "/big.bin", 256 * 1024);
        assert_eq!(
            head.header("content-length"),
            Some(BIG.to_string().as_str())
        );
        socket_reset(&c);
        drop(c);
    }
    let (code, _, body) = curl(&[&s.url("/big.bin")]);
    assert_eq!(code, 200);
    assert!(body == content, "a later download is intact");
    s.assert_healthy();
    assert_no_worker_crash(&s, worker);
}

#[test]
fn a_file_truncated_during_a_transfer_ends_it_early_with_no_stale_bytes() {
    let s = Server::start(&[]);
    let content = pattern(BIG, 2);
    let path = s.root.write("big.bin", &content);
    let worker = the_worker(&s);
    let (mut c, head, body) = start_download(s.port, "/big.bin", 1 << 20);
    assert_eq!(
        head.header("content-length"),
        Some(BIG.to_string().as_str())
    );
    // The reader has stalled; cut the file to a quarter under the transfer.
    let new_len = BIG / 4;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(new_len as u64)
        .unwrap();
    let (body, closed) = finish_download(&mut c, body, BIG);
    assert!(closed, "the connection ends (got {} bytes)", body.len());
    assert!(
        body.len() < BIG,
        "the transfer stopped before the announced length"
    );
    assert!(
        body.len() <= new_len,
        "{} bytes received, beyond the new end {new_len}",
        body.len()
    );
    let now = std::fs::read(&path).unwrap();
    assert!(
        body[..] == now[..body.len()],
        "the bytes received are the file's"
    );
    eprintln!("received {} of {BIG} (new length {new_len})", body.len());
    let r = s.get("/big.bin", &[]);
    assert_eq!((r.status, r.body.len()), (200, new_len));
    assert!(r.body == now);
    assert_no_worker_crash(&s, worker);
}

#[test]
fn a_file_replaced_or_deleted_during_a_transfer_is_sent_whole() {
    let s = Server::start(&[]);
    let old = pattern(BIG, 3);
    let path = s.root.write("big.bin", &old);
    let worker = the_worker(&s);

    // Replaced: rename a new file over it mid-transfer.
    let (mut c, _, body) = start_download(s.port, "/big.bin", 1 << 20);
    let new = pattern(BIG / 2, 4);
    let tmp = s.root.write("big.bin.tmp", &new);
    std::fs::rename(&tmp, &path).unwrap();
    let (body, _) = finish_download(&mut c, body, BIG);
    assert_eq!(body.len(), BIG, "the old content in full");
    assert!(body == old, "the old content, unchanged");
    // The same connection goes on, and now gets the new file.
    c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let r = read_response(&mut c, false).expect("a second response");
    assert_eq!((r.status, r.body.len()), (200, new.len()));
    assert!(r.body == new);

    // Deleted mid-transfer.
    let (mut c, _, body) = start_download(s.port, "/big.bin", 1 << 20);
    std::fs::remove_file(&path).unwrap();
    let (body, _) = finish_download(&mut c, body, new.len());
    assert!(body == new, "the deleted file's content in full");
    assert_eq!(s.get("/big.bin", &[]).status, 404);
    assert_no_worker_crash(&s, worker);
}

// ---------------------------------------------------------------------------
// 4. Connection flood

fn served(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut c| {
        let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
        c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .is_ok()
            && read_to_close(&mut c).starts_with("HTTP/1.1 200")
    })
}

#[test]
fn a_connection_flood_beyond_the_limit_neither_crashes_nor_spins() {
    let s = Server::start(&[
        "--max-connections",
        "50",
        "--keepalive-timeout",
        "60",
        "--header-timeout",
        "60",
    ]);
    let worker = the_worker(&s);
    // Clients served before the flood, kept alive.
    let mut regulars: Vec<TcpStream> = (0..5).map(|_| s.connect()).collect();
    for c in &mut regulars {
        c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        assert_eq!(read_response(c, false).unwrap().status, 200);
    }
    // 300 at once: half silent, half with a request they never read.
    let mut flood = Vec::new();
    for i in 0..300 {
        let mut c = s.connect();
        if i % 2 == 1 {
            let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        }
        flood.push(c);
    }
    let before = cpu_ticks(worker);
    std::thread::sleep(Duration::from_secs(2)); // the window in which a busy loop would burn CPU
    let used = cpu_ticks(worker) - before;
    assert!(used < 50, "the worker used {used} ticks in 2 s: it spins");
    // An idle regular may have been closed to make room for the flood (the
    // limit reclaims idle connections, oldest first): then it got nothing,
    // not a broken answer. Any still open is still served.
    for c in &mut regulars {
        if c.write_all(b"GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
            .is_err()
        {
            continue;
        }
        let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
        let mut first = [0u8; 1];
        match c.peek(&mut first) {
            Ok(0) | Err(_) => continue,
            Ok(_) => {}
        }
        let r = read_response(c, false).expect("a whole answer");
        assert_eq!((r.status, r.text().as_str()), (200, INDEX));
    }
    drop(flood);
    assert!(
        wait_until(Duration::from_secs(30), || served(s.port)),
        "new clients are served after the flood: {}",
        s.log_text()
    );
    assert_no_worker_crash(&s, worker);
}

// ---------------------------------------------------------------------------
// 5. Stop and reload under load

/// What a keep-alive client saw for one request.
enum Got {
    /// A whole, correct response; whether it said `Connection: close`.
    Complete { close: bool },
    /// The connection ended before any byte of a response: not an error.
    Nothing,
    /// A response started and was cut or wrong.
    Broken(String),
}

fn one_request(c: &mut TcpStream, path: &str, want: &[u8]) -> Got {
    if c.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .is_err()
    {
        return Got::Nothing;
    }
    let mut first = [0u8; 1];
    match read_some(c, &mut first) {
        Ok(1) => {}
        _ => return Got::Nothing,
    }
    let mut head = vec![first[0]];
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match read_some(c, &mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return Got::Broken(format!("head cut: {:?}", String::from_utf8_lossy(&head))),
        }
    }
    let p = parse_stream(&head).remove(0);
    if p.status != 200 {
        return Got::Broken(format!("status {}", p.status));
    }
    let Some(n) = p
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    else {
        return Got::Broken(format!("no length: {}", p.head));
    };
    let mut body = vec![0u8; n];
    if let Err(e) = c.read_exact(&mut body) {
        return Got::Broken(format!("body cut ({e})"));
    }
    if body != want {
        return Got::Broken("wrong body".into());
    }
    Got::Complete {
        close: p.header("connection") == Some("close"),
    }
}

/// Totals of a keep-alive load.
#[derive(Default)]
struct Load {
    complete: usize,
    /// Requests sent on a connection that then closed without a byte of answer.
    unanswered: usize,
    broken: Vec<String>,
}

/// Ten keep-alive clients alternating a sendfile-sized file and a small one,
/// each checking every body, until `stop` or the server is gone (120 s at most).
fn keep_alive_load(
    port: u16,
    big: &Arc<Vec<u8>>,
    done: &Arc<AtomicUsize>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<Load>> {
    (0..10)
        .map(|i| {
            let (done, stop, big) = (done.clone(), stop.clone(), big.clone());
            std::thread::spawn(move || {
                let mut load = Load::default();
                let deadline = Instant::now() + Duration::from_secs(120);
                'conns: while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
                        break; // the server is gone
                    };
                    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    for n in 0..100_000 {
                        if stop.load(Ordering::Relaxed) {
                            break 'conns;
                        }
                        let (path, want) = if (i + n) % 2 == 0 {
                            ("/big.bin", &big[..])
                        } else {
                            ("/marker", MARKER.as_bytes())
                        };
                        match one_request(&mut c, path, want) {
                            Got::Complete { close } => {
                                load.complete += 1;
                                done.fetch_add(1, Ordering::Relaxed);
                                if close {
                                    continue 'conns;
                                }
                            }
                            Got::Nothing => {
                                load.unanswered += 1;
                                continue 'conns;
                            }
                            Got::Broken(why) => {
                                load.broken.push(why);
                                continue 'conns;
                            }
                        }
                    }
                }
                load
            })
        })
        .collect()
}

fn total(clients: Vec<std::thread::JoinHandle<Load>>) -> Load {
    let mut t = Load::default();
    for c in clients {
        let l = c.join().unwrap();
        t.complete += l.complete;
        t.unanswered += l.unanswered;
        t.broken.extend(l.broken);
    }
    t
}

#[test]
fn sigterm_under_keep_alive_load_completes_every_response_and_exits_0() {
    let root = probe_root();
    let big = pattern(40 * 1024, 5); // above the sendfile threshold
    root.write("big.bin", &big);
    let mut s = Server::start_in(root, &["--grace", "5"]);
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let clients = keep_alive_load(s.port, &Arc::new(big), &done, &stop);
    assert!(
        wait_until(Duration::from_secs(60), || done.load(Ordering::Relaxed)
            >= 3000),
        "the load started"
    );
    s.signal("TERM");
    // Grace is 5 s; 3 s more for scheduling on a loaded machine.
    let code = s.wait_exit(Duration::from_secs(8));
    stop.store(true, Ordering::Relaxed);
    let load = total(clients);
    eprintln!(
        "{} complete responses, {} requests unanswered at the stop",
        load.complete, load.unanswered
    );
    assert_eq!(code, Some(0), "exit status; log:\n{}", s.log_text());
    assert!(
        load.broken.is_empty(),
        "cut or wrong responses: {:?}",
        load.broken
    );
}

#[test]
fn sighup_under_keep_alive_load_leaves_no_request_unanswered() {
    let root = probe_root();
    let big = pattern(40 * 1024, 7);
    root.write("big.bin", &big);
    let s = Server::start_in(root, &["--workers", "2"]);
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let clients = keep_alive_load(s.port, &Arc::new(big), &done, &stop);
    for hup in 1..=5 {
        let target = hup * 1000;
        assert!(
            wait_until(Duration::from_secs(60), || done.load(Ordering::Relaxed)
                >= target),
            "the load goes on after {} HUPs",
            hup - 1
        );
        let before = children(s.pid());
        s.signal("HUP");
        assert!(
            wait_until(Duration::from_secs(30), || {
                children(s.pid())
                    .iter()
                    .filter(|p| !before.contains(p))
                    .count()
                    >= 2
            }),
            "HUP {hup} replaced the workers: {}",
            s.log_text()
        );
    }
    assert!(wait_until(Duration::from_secs(60), || done
        .load(Ordering::Relaxed)
        >= 6000));
    stop.store(true, Ordering::Relaxed);
    let load = total(clients);
    eprintln!(
        "{} complete responses, {} unanswered over 5 HUPs",
        load.complete, load.unanswered
    );
    assert!(
        load.broken.is_empty(),
        "cut or wrong responses: {:?}",
        load.broken
    );
    assert_eq!(
        load.unanswered, 0,
        "requests sent on a kept-alive connection that a reload then closed unanswered"
    );
    s.assert_healthy();
}

/// Runs ab; its stdout, or a panic if ab is missing or aborted.
fn ab_summary(out: &std::process::Output) -> (String, Option<usize>, Option<usize>, Option<usize>) {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l[name.len()..].split_whitespace().next())
            .and_then(|v| v.parse::<usize>().ok())
    };
    let complete = field("Complete requests:");
    let failed = field("Failed requests:");
    let non2xx = field("Non-2xx responses:").or(Some(0));
    (text, complete, failed, non2xx)
}

#[test]
fn sighup_under_keep_alive_load_fails_no_request() {
    let root = probe_root();
    root.write("big.bin", pattern(40 * 1024, 6));
    let s = Server::start_in(root, &["--workers", "2"]);
    let mut ab = Command::new("ab")
        .args(["-k", "-c", "10", "-n", "100000", "-s", "20"])
        .arg(s.url("/marker"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ab (apache2-utils) is installed");
    // ab prints "Completed N requests" every 10 %: reload at 10 %, 20 %, ... 50 %.
    let stderr = ab.stderr.take().unwrap();
    let (tx, progress) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for l in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            if l.starts_with("Completed") {
                let _ = tx.send(());
            }
            lines.push(l);
        }
        lines
    });
    let mut hups = 0;
    while hups < 5 && progress.recv_timeout(Duration::from_secs(120)).is_ok() {
        let before = children(s.pid());
        s.signal("HUP");
        hups += 1;
        // The reload is done when two new workers run.
        assert!(
            wait_until(Duration::from_secs(30), || {
                children(s.pid())
                    .iter()
                    .filter(|p| !before.contains(p))
                    .count()
                    >= 2
            }),
            "HUP {hups} replaced the workers: {}",
            s.log_text()
        );
    }
    let out = ab.wait_with_output().unwrap();
    let stderr = reader.join().unwrap().join("\n");
    let (text, complete, failed, non2xx) = ab_summary(&out);
    eprintln!("{hups} HUPs during the run\n{text}");
    assert!(
        out.status.success(),
        "ab aborted after {hups} HUPs: {stderr}\n{text}"
    );
    assert_eq!(complete, Some(100_000), "{text}");
    assert_eq!(failed, Some(0), "{text}");
    assert_eq!(non2xx, Some(0), "{text}");
    assert_eq!(hups, 5, "reloads during the run");
    s.assert_healthy();
}

/// At the connection limit, a new client is served by closing the
/// connection idle longest (not after a keep-alive timeout); the others
/// stay open.
#[test]
fn at_the_limit_the_oldest_idle_connection_makes_room() {
    let s = Server::start(&["--max-connections", "4", "--keepalive-timeout", "600"]);
    let ask = |c: &mut std::net::TcpStream| {
        c.write_all(b"GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        read_response(c, false).map(|r| r.status)
    };
    let mut idle: Vec<std::net::TcpStream> = (0..4).map(|_| s.connect()).collect();
    for c in idle.iter_mut() {
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        assert_eq!(ask(c), Some(200));
    }
    let mut newcomer = s.connect();
    newcomer
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    assert_eq!(
        ask(&mut newcomer),
        Some(200),
        "served while the others idle"
    );
    assert_eq!(read_to_close(&mut idle[0]), "", "the oldest was closed");
    assert_eq!(ask(&mut idle[3]), Some(200), "the newest idle one stayed");
}

/// A listing of a huge directory for many clients that do not read costs
/// one capped page, shared, not a whole page per connection.
#[test]
fn listings_of_a_huge_directory_for_clients_that_do_not_read_stay_small() {
    let root = TempDir::new("huge");
    root.write("index.html", INDEX);
    let dir = root.path().join("many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..30_000 {
        std::fs::write(dir.join(format!("a-file-with-a-long-name-{i:05}.txt")), "").unwrap();
    }
    let s = Server::start_in(root, &["--listing", "on", "--send-timeout", "120"]);
    let worker = the_worker(&s);
    let before = data_rss_kib(worker);
    let stalled: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut c = s.connect();
            c.write_all(b"GET /many/ HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
            c
        })
        .collect();
    // A client that reads gets the page once the others have been answered.
    let out = s.raw(b"GET /many/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(
        out.starts_with("HTTP/1.1 200 "),
        "{}",
        &out[..out.len().min(200)]
    );
    let grown = data_rss_kib(worker).saturating_sub(before);
    assert!(grown < 16 * 1024, "the worker grew by {grown} KiB");
    assert!(out.contains("a-file-with-a-long-name-00999.txt"));
    assert!(!out.contains("a-file-with-a-long-name-01000.txt"));
    assert!(out.contains("<p>29000 more not listed.</p>"));
    drop(stalled);
    s.assert_healthy();
}
