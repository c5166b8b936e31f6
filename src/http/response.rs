//! A response as the router decides it, and how its head is written.

use std::fs::File;
use std::rc::Rc;

use crate::http::clock::Clock;
use crate::http::conditional::Validators;
use crate::http::gunzip::Gunzip;
use crate::http::header::{HeaderLine, RuleLines, push_num};
use crate::http::request::Version;
use crate::http::status::Status;

/// What follows the head.
pub enum Body {
    /// No body: 304, redirects, HEAD answers are cut by the connection.
    Empty,
    /// The built-in page for the status (`<h1>404 Not Found</h1>`).
    StatusPage,
    /// `len` bytes of `file` from `offset`; `bytes` is the whole file when
    /// the cache keeps it in memory.
    File {
        file: Rc<File>,
        bytes: Option<Rc<[u8]>>,
        offset: u64,
        len: u64,
    },
    /// A page the server made, shared with other responses (directory
    /// listings).
    Shared(Rc<[u8]>),
    /// A CGI script's output, framed by the CGI code itself.
    Script,
    /// A `.gz` file decompressed on the way out; `len` is the decompressed size.
    Gunzip { stream: Box<Gunzip>, len: u64 },
}

impl Body {
    /// A file (or its decompression) rather than a page made by the server.
    pub fn is_file(&self) -> bool {
        matches!(self, Body::File { .. } | Body::Gunzip { .. })
    }
}

/// An answer as the router decides it. Header values are trusted text
/// (never raw request bytes).
pub struct Response {
    pub status: Status,
    pub content_type: Option<&'static str>,
    /// Last-Modified and ETag.
    pub validators: Option<Validators>,
    /// The header its status calls for, if any.
    pub status_header: Option<StatusHeader>,
    pub accept_ranges: bool,
    /// Header lines the server sets for this response (Content-Encoding,
    /// Vary, Retry-After and the like; at most three today).
    pub extra: heapless::Vec<HeaderLine, 4>,
    /// What the config's rules do to the head, shared with the cached file.
    pub rules: Option<Rc<RuleLines>>,
    /// What `write_fields` writes for this response, kept by its cached
    /// file (a plain 200 of it), so the head is copied in three pieces.
    pub fields: Option<Rc<[u8]>>,
    pub body: Body,
    /// The connection closes after this response (bad framing, for one).
    pub close: bool,
}

/// Headers that go with one kind of status each, so a response has at most one.
pub enum StatusHeader {
    /// A redirect (or a script's answer that names a place).
    Location(String),
    /// 405: the methods the path takes.
    Allow(&'static str),
    /// 401: the realm of the Basic challenge.
    Challenge(Rc<str>),
    /// 206 and 416.
    ContentRange(ContentRange),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ContentRange {
    Part { first: u64, last: u64, total: u64 },
    Unsatisfied { total: u64 },
}

impl Response {
    pub fn new(status: Status, body: Body) -> Self {
        Response {
            status,
            content_type: None,
            validators: None,
            status_header: None,
            accept_ranges: false,
            extra: heapless::Vec::new(),
            rules: None,
            fields: None,
            body,
            close: false,
        }
    }

    /// The standard answer for an error or other body-less status.
    pub fn status(status: Status) -> Self {
        let mut r = Response::new(status, Body::StatusPage);
        r.content_type = Some("text/html; charset=utf-8");
        r
    }

    pub fn add_header(&mut self, line: HeaderLine) {
        if self.extra.push(line).is_err() {
            log::warn!(
                "more than {} extra headers on one response; dropped {}",
                self.extra.capacity(),
                line.as_str().trim_start()
            );
        }
    }

    /// A file's content (or its 304): what the Cache-Control rules are for.
    pub fn is_file_answer(&self) -> bool {
        self.body.is_file() || self.status == Status::NotModified
    }

    pub fn body_len(&self) -> u64 {
        match &self.body {
            Body::Empty | Body::Script => 0,
            Body::StatusPage => status_page_len(self.status),
            Body::File { len, .. } => *len,
            Body::Shared(v) => v.len() as u64,
            Body::Gunzip { len, .. } => *len,
        }
    }
}

/// What the connection knows that the router does not.
#[derive(Clone, Copy)]
pub struct HeadContext {
    pub version: Version,
    pub keep_alive: bool,
    /// The Date header's second (since the epoch).
    pub date: u64,
    /// A body follows on a plain socket, where its place in the stream is
    /// where the client's reads find it (`body_pad` pads for large files).
    pub plain_body: bool,
}

/// Writes the status line and headers, with the clock's Date and Server
/// lines, ending with the empty line; `more` adds headers the response does
/// not carry itself (a CGI script's). A `Body::Script` response gets no
/// Content-Length here.
pub fn write_head(
    out: &mut Vec<u8>,
    r: &Response,
    clock: &Clock,
    cx: HeadContext,
    more: &dyn Fn(&mut Vec<u8>),
) {
    write_head_after(out, r, &clock.head_start(cx.date), cx, more);
}

/// `write_head` with the head start given: `HTTP/1.1 200 OK\r\nDate:
/// ...\r\nServer: ...` (see `Clock::head_start`).
fn write_head_after(
    out: &mut Vec<u8>,
    r: &Response,
    ok_start: &[u8],
    cx: HeadContext,
    more: &dyn Fn(&mut Vec<u8>),
) {
    let start = out.len();
    if r.status == Status::Ok {
        out.extend_from_slice(ok_start);
    } else {
        out.extend_from_slice(r.status.line().as_bytes());
        let date_and_server = ok_start.get(Status::Ok.line().len()..);
        out.extend_from_slice(date_and_server.unwrap_or_default());
    }
    match &r.fields {
        Some(fields) => out.extend_from_slice(fields),
        None => write_fields(out, r),
    }
    more(out);
    let end: &[u8] = match (cx.keep_alive, cx.version) {
        (false, Version::Http11) => b"\r\nConnection: close\r\n\r\n",
        (true, Version::Http10) => b"\r\nConnection: keep-alive\r\n\r\n",
        _ => b"\r\n\r\n",
    };
    if cx.plain_body {
        let pad = body_pad(&r.body, out.len() - start + end.len());
        out.extend(std::iter::repeat_n(b' ', pad));
    }
    out.extend_from_slice(end);
}

/// A file body this long is read by the client in more than one call.
const PAD_FROM: u64 = 16 * 1024;

/// The spaces that put a large file's body as far from an 8-byte boundary
/// of the stream as its first byte is from one in the file. The client
/// reads it into aligned buffers and the file's pages are aligned, so every
/// copy of it into the client's buffer is then aligned too, which on a
/// router's CPU the kernel copies much faster (bench/results.md, the MIPS
/// guest's 200 KB test). They go after the last line's value, where a
/// field's trailing whitespace (RFC 9110 5.6.3) or a reason phrase's
/// (RFC 9112 4) is allowed and ignored.
fn body_pad(body: &Body, head_len: usize) -> usize {
    match *body {
        Body::File { offset, len, .. } if len >= PAD_FROM => {
            // Modulo a power of two, so truncation and wrapping keep it.
            (offset as usize).wrapping_sub(head_len) % 8
        }
        _ => 0,
    }
}

/// The header lines a response carries itself: from Content-Type to the
/// rules' lines, between the Server and Connection lines.
pub fn write_fields(out: &mut Vec<u8>, r: &Response) {
    if let Some(t) = r.content_type {
        field(out, b"\r\nContent-Type: ", t.as_bytes());
    }
    if r.status.has_body() && !matches!(r.body, Body::Script) {
        out.extend_from_slice(b"\r\nContent-Length: ");
        push_num(out, r.body_len());
    }
    if let Some(v) = &r.validators {
        out.extend_from_slice(v.head_lines());
    }
    if r.accept_ranges {
        out.extend_from_slice(b"\r\nAccept-Ranges: bytes");
    }
    match &r.status_header {
        None => {}
        Some(StatusHeader::Location(l)) => field(out, b"\r\nLocation: ", l.as_bytes()),
        Some(StatusHeader::Allow(a)) => field(out, b"\r\nAllow: ", a.as_bytes()),
        Some(StatusHeader::Challenge(realm)) => {
            out.extend_from_slice(b"\r\nWWW-Authenticate: Basic realm=\"");
            out.extend_from_slice(realm.as_bytes());
            out.extend_from_slice(b"\", charset=\"UTF-8\"");
        }
        Some(StatusHeader::ContentRange(ContentRange::Part { first, last, total })) => {
            out.extend_from_slice(b"\r\nContent-Range: bytes ");
            push_num(out, *first);
            out.push(b'-');
            push_num(out, *last);
            out.push(b'/');
            push_num(out, *total);
        }
        Some(StatusHeader::ContentRange(ContentRange::Unsatisfied { total })) => {
            out.extend_from_slice(b"\r\nContent-Range: bytes */");
            push_num(out, *total);
        }
    }
    match &r.rules {
        Some(rules) => rules.write(out, &r.extra, r.is_file_answer()),
        None => {
            for line in &r.extra {
                out.extend_from_slice(line.as_str().as_bytes());
            }
        }
    }
}

/// A header whose name is known here: `prefix` is `\r\nName: `. Each copy
/// into the buffer is a libc memcpy call, so the fewer pieces the better.
fn field(out: &mut Vec<u8>, prefix: &[u8], value: &[u8]) {
    out.extend_from_slice(prefix);
    out.extend_from_slice(value);
}

const PAGE_START: &str = "<!DOCTYPE html>\n<title>";
const PAGE_MIDDLE: &str = "</title>\n<h1>";
const PAGE_END: &str = "</h1>\n";

fn status_page_len(s: Status) -> u64 {
    // "NNN Reason" appears twice.
    let text = 4 + s.reason().len();
    (PAGE_START.len() + PAGE_MIDDLE.len() + PAGE_END.len() + 2 * text) as u64
}

/// Appends the built-in page for a status.
pub fn write_status_page(out: &mut Vec<u8>, s: Status) {
    for part in [PAGE_START, "", PAGE_MIDDLE, "", PAGE_END] {
        if part.is_empty() {
            push_num(out, u64::from(s.code()));
            out.push(b' ');
            out.extend_from_slice(s.reason().as_bytes());
        } else {
            out.extend_from_slice(part.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::header::NO_CACHE;

    #[test]
    fn status_page_length_matches_its_text() {
        for s in [
            Status::NotFound,
            Status::BadRequest,
            Status::VersionNotSupported,
        ] {
            let mut out = Vec::new();
            write_status_page(&mut out, s);
            assert_eq!(out.len() as u64, status_page_len(s));
        }
    }

    #[test]
    fn head_shape() {
        let mut r = Response::status(Status::NotFound);
        r.add_header(NO_CACHE);
        assert!(NO_CACHE.is_named("cache-control"));
        assert!(!NO_CACHE.is_named("cache"));
        let mut out = Vec::new();
        let cx = HeadContext {
            version: Version::Http10,
            keep_alive: true,
            date: 0,
            plain_body: false,
        };
        let ok_start = b"HTTP/1.1 200 OK\r\nDate: D\r\nServer: m";
        write_head_after(&mut out, &r, ok_start, cx, &|_| {});
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            format!(
                "HTTP/1.1 404 Not Found\r\nDate: D\r\nServer: m\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-cache\r\nConnection: keep-alive\r\n\r\n",
                status_page_len(Status::NotFound)
            )
        );
    }
}
