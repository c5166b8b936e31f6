//! Request head parsing and message framing (RFC 9112): httparse for the
//! syntax, then the rules that decide how long the message is and whether
//! the connection can carry another one. Pure: no I/O.

use crate::http::status::Status;
use crate::limits::{HEAD_BUF, MAX_HEADERS, MAX_REQUEST_LINE};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    Get,
    Head,
    Post,
    /// Defined by RFC 9110 or 5789 but not served on static paths: 405.
    OtherKnown,
    /// Anything else: 501.
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Version {
    Http10,
    Http11,
}

/// How the request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BodyKind {
    None,
    Length(u64),
    Chunked,
}

/// A parsed request head. Borrows the connection buffer.
#[derive(Debug)]
pub struct Request<'a> {
    pub method: Method,
    /// The method as sent, for a proxied request.
    pub method_token: &'a str,
    /// Origin-form `path?query` (an absolute-form target is reduced to it).
    pub target: &'a [u8],
    /// The host (and port) of an absolute-form target, without userinfo:
    /// RFC 9112 section 3.2.2 makes it win over the Host field.
    pub authority: Option<&'a [u8]>,
    pub version: Version,
    /// Bytes of the head, including the final empty line.
    pub head_len: usize,
    pub body: BodyKind,
    pub keep_alive: bool,
    pub headers: &'a [httparse::Header<'a>],
    /// Where each field the server reads is in `headers`, found in the one
    /// pass the framing rules make (a lookup by name per use cost about 700
    /// instructions per request).
    fields: Fields,
}

/// The request header fields the server reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Field {
    Accept,
    AcceptEncoding,
    Authorization,
    Connection,
    ContentLength,
    ContentType,
    Expect,
    Host,
    IfMatch,
    IfModifiedSince,
    IfNoneMatch,
    IfRange,
    IfUnmodifiedSince,
    Range,
    TransferEncoding,
}

const FIELDS: usize = Field::TransferEncoding as usize + 1;

/// Each field's name, lowercase.
const BY_NAME: [(&str, Field); FIELDS] = [
    ("accept", Field::Accept),
    ("accept-encoding", Field::AcceptEncoding),
    ("authorization", Field::Authorization),
    ("connection", Field::Connection),
    ("content-length", Field::ContentLength),
    ("content-type", Field::ContentType),
    ("expect", Field::Expect),
    ("host", Field::Host),
    ("if-match", Field::IfMatch),
    ("if-modified-since", Field::IfModifiedSince),
    ("if-none-match", Field::IfNoneMatch),
    ("if-range", Field::IfRange),
    ("if-unmodified-since", Field::IfUnmodifiedSince),
    ("range", Field::Range),
    ("transfer-encoding", Field::TransferEncoding),
];

impl Field {
    /// The field `name` is, if the server reads it (ASCII case ignored).
    fn of(name: &str) -> Option<Field> {
        // Lengths first: most names cost at most one byte-wise compare.
        // The table's names are lowercase letters and `-`, and a token
        // (what httparse lets through) has no byte that `| 0x20` turns
        // into either but its own upper case: one OR a byte, not a
        // lowercasing of both sides.
        BY_NAME
            .iter()
            .find(|(n, _)| {
                n.len() == name.len() && n.bytes().zip(name.bytes()).all(|(t, b)| b | 0x20 == t)
            })
            .map(|&(_, f)| f)
    }
}

/// The index in `headers` of each field's first occurrence.
#[derive(Debug, Clone, Copy)]
struct Fields([Option<u8>; FIELDS]);

const _: () = assert!(MAX_HEADERS <= u8::MAX as usize);

impl<'a> Request<'a> {
    /// The request a script's local redirect (`Location: /path`) stands
    /// for: a GET of `target` (a HEAD stays a HEAD) with this request's
    /// header fields and no body (RFC 3875 section 6.2.2).
    pub fn redirected<'b>(&self, target: &'b [u8]) -> Request<'b>
    where
        'a: 'b,
    {
        Request {
            method: if self.method == Method::Head {
                Method::Head
            } else {
                Method::Get
            },
            method_token: if self.method == Method::Head {
                "HEAD"
            } else {
                "GET"
            },
            target,
            authority: None,
            body: BodyKind::None,
            head_len: 0,
            ..*self
        }
    }

    /// The method as sent (only known methods get this far on CGI paths).
    pub fn method_name(&self) -> &'static str {
        match self.method {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::OtherKnown | Method::Unknown => "OTHER",
        }
    }

    /// The value of a field, trimmed; the first one wins.
    pub fn get(&self, field: Field) -> Option<&'a [u8]> {
        let i = self.fields.0[field as usize]?;
        self.headers.get(usize::from(i)).map(|h| trim(h.value))
    }
}

/// Why a head was refused. The connection closes after the answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reject(pub Status);

pub type Headers<'a> = [httparse::Header<'a>; MAX_HEADERS];

pub fn empty_headers<'a>() -> Headers<'a> {
    [httparse::EMPTY_HEADER; MAX_HEADERS]
}

/// Parses a head from the start of `buf`. `Ok(None)`: not complete yet.
pub fn parse<'a>(
    buf: &'a [u8],
    headers: &'a mut Headers<'a>,
) -> Result<Option<Request<'a>>, Reject> {
    let mut req = httparse::Request::new(headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return incomplete(buf),
        Err(httparse::Error::TooManyHeaders) => return Err(Reject(Status::HeaderFieldsTooLarge)),
        Err(httparse::Error::Version) => return Err(version_error(buf)),
        Err(_) => return Err(Reject(Status::BadRequest)),
    };
    // The request line is part of the head: only a longer head needs the scan.
    if head_len > MAX_REQUEST_LINE && line_len(buf).is_none_or(|n| n > MAX_REQUEST_LINE) {
        return Err(Reject(Status::UriTooLong));
    }
    let (Some(method_str), Some(path), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(Reject(Status::BadRequest));
    };
    let version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    let (target, authority) = origin_form(path.as_bytes()).ok_or(Reject(Status::BadRequest))?;
    let headers: &'a [httparse::Header<'a>] = req.headers;
    let (framing, fields) = Framing::read(headers, version)?;
    Ok(Some(Request {
        method: method(method_str),
        method_token: method_str,
        target,
        authority,
        version,
        head_len,
        body: framing.body,
        keep_alive: framing.keep_alive,
        headers,
        fields,
    }))
}

/// A partial head is fine until it outgrows the buffer.
fn incomplete(buf: &[u8]) -> Result<Option<Request<'_>>, Reject> {
    match line_len(buf) {
        None if buf.len() > MAX_REQUEST_LINE => Err(Reject(Status::UriTooLong)),
        Some(n) if n > MAX_REQUEST_LINE => Err(Reject(Status::UriTooLong)),
        _ if buf.len() >= HEAD_BUF => Err(Reject(Status::HeaderFieldsTooLarge)),
        _ => Ok(None),
    }
}

/// A version httparse refused: 505 if the request line is otherwise well
/// formed (method, target and an HTTP-version other than 1.0 and 1.1, one
/// space apart), else 400: `GET /a b HTTP/1.1` has a space in its target,
/// not a version this server lacks.
fn version_error(buf: &[u8]) -> Reject {
    // The request line after any leading empty lines (as `line_len` measures it).
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let rest = &buf[start..];
    let line = &rest[..line_len(rest).unwrap_or(rest.len()).min(rest.len())];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut parts = line.split(|&b| b == b' ');
    let well_formed = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(method), Some(target), Some(version), None) => {
            !method.is_empty()
                && !target.is_empty()
                && version.len() == 8
                && version.starts_with(b"HTTP/")
                && version[5].is_ascii_digit()
                && version[6] == b'.'
                && version[7].is_ascii_digit()
                && version != b"HTTP/1.0"
                && version != b"HTTP/1.1"
        }
        _ => false,
    };
    Reject(if well_formed {
        Status::VersionNotSupported
    } else {
        Status::BadRequest
    })
}

/// Length of the request line (after any leading empty lines), if complete.
fn line_len(buf: &[u8]) -> Option<usize> {
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    buf[start..].iter().position(|&b| b == b'\n')
}

fn method(m: &str) -> Method {
    match m {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" | "DELETE" | "OPTIONS" | "PATCH" | "TRACE" | "CONNECT" => Method::OtherKnown,
        _ => Method::Unknown,
    }
}

/// Reduces an absolute-form target (`http://host/x?y`) to its origin form,
/// with the authority it named, if any.
fn origin_form(target: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    if target.first() == Some(&b'/') {
        return Some((target, None));
    }
    let scheme_len = if starts_with_ignore_case(target, b"http://") {
        7
    } else if starts_with_ignore_case(target, b"https://") {
        8
    } else {
        return None;
    };
    let rest = &target[scheme_len..];
    let (path, authority) = match rest.iter().position(|&b| b == b'/' || b == b'?') {
        Some(i) if rest[i] == b'/' => (&rest[i..], &rest[..i]),
        Some(_) => return None,
        None => (&b"/"[..], rest),
    };
    // `user@host`: the userinfo names no server (and is deprecated in http URIs).
    let host = match authority.iter().rposition(|&b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    if !is_host(host) {
        return None;
    }
    Some((path, (!host.is_empty()).then_some(host)))
}

/// Whether `v` is a host RFC 9112 section 3.2 lets a request name (its
/// `Host`, or an absolute-form target's authority): empty, or RFC 3986's
/// `host [":" port]`, a bracketed IP literal or a name. Anything else gets
/// 400 there, and never reaches a script, a backend or a redirect.
fn is_host(v: &[u8]) -> bool {
    let rest = match v.strip_prefix(b"[") {
        Some(inner) => {
            let Some(end) = inner.iter().position(|&b| b == b']') else {
                return false;
            };
            if end == 0
                || !inner[..end]
                    .iter()
                    .all(|&b| b == b':' || NAME[usize::from(b)])
            {
                return false;
            }
            &inner[end + 1..]
        }
        // A name or an IPv4 address: up to the first byte no name has.
        None => {
            let end = v.iter().position(|&b| !NAME[usize::from(b)]);
            &v[end.unwrap_or(v.len())..]
        }
    };
    match rest {
        [] => true,
        [b':', port @ ..] => port.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// The bytes of RFC 3986's `reg-name` (unreserved, `%` and sub-delims),
/// which also spell IPv4 addresses and, with `:`, IP literals.
const NAME: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric()
            || matches!(c, b'-' | b'.' | b'_' | b'~' | b'%')
            || matches!(
                c,
                b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
            );
        b += 1;
    }
    t
};

struct Framing {
    body: BodyKind,
    keep_alive: bool,
}

impl Framing {
    /// Applies RFC 9112 sections 6 and 9.3 to the headers, noting where
    /// each field the server reads is.
    fn read(
        headers: &[httparse::Header<'_>],
        version: Version,
    ) -> Result<(Framing, Fields), Reject> {
        let bad = Reject(Status::BadRequest);
        let mut content_length: Option<u64> = None;
        let mut chunked = false;
        let (mut close, mut keep_alive) = (false, false);
        let mut fields = Fields([None; FIELDS]);
        for (i, h) in headers.iter().enumerate() {
            let Some(field) = Field::of(h.name) else {
                continue;
            };
            let slot = &mut fields.0[field as usize];
            let repeated = slot.is_some();
            // At most MAX_HEADERS, which fits (checked above).
            slot.get_or_insert(i as u8);
            let value = trim(h.value);
            match field {
                // Duplicates, lists and signs are where smuggling starts: refuse them all.
                Field::ContentLength | Field::TransferEncoding | Field::Host if repeated => {
                    return Err(bad);
                }
                Field::Host if !is_host(value) => return Err(bad),
                Field::ContentLength => content_length = Some(parse_length(value).ok_or(bad)?),
                Field::TransferEncoding => chunked = transfer_coding(value)?,
                Field::Connection => {
                    for token in value.split(|&b| b == b',').map(trim) {
                        close |= token.eq_ignore_ascii_case(b"close");
                        keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                    }
                }
                _ => {}
            }
        }
        let has = |f: Field| fields.0[f as usize].is_some();
        if !has(Field::Host) && version == Version::Http11 {
            return Err(bad);
        }
        if has(Field::TransferEncoding) && (content_length.is_some() || version == Version::Http10)
        {
            return Err(bad);
        }
        let body = match (chunked, content_length) {
            (true, _) => BodyKind::Chunked,
            (false, Some(0) | None) => BodyKind::None,
            (false, Some(n)) => BodyKind::Length(n),
        };
        let keep_alive = match version {
            Version::Http11 => !close,
            Version::Http10 => keep_alive && !close,
        };
        Ok((Framing { body, keep_alive }, fields))
    }
}

/// `chunked` is the only transfer coding a request may use here.
fn transfer_coding(value: &[u8]) -> Result<bool, Reject> {
    let mut codings = value.split(|&b| b == b',').map(trim);
    match (codings.next(), codings.next()) {
        (Some(c), None) if c.eq_ignore_ascii_case(b"chunked") => Ok(true),
        (Some(_), _)
            if value
                .split(|&b| b == b',')
                .map(trim)
                .next_back()
                .is_some_and(|c| c.eq_ignore_ascii_case(b"chunked")) =>
        {
            Err(Reject(Status::NotImplemented))
        }
        _ => Err(Reject(Status::BadRequest)),
    }
}

/// A Content-Length value: digits only (no sign, no list).
pub fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

pub fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &v[start..end]
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(raw: &str) -> Result<Option<(Method, BodyKind, bool, String)>, Status> {
        let mut headers = empty_headers();
        match parse(raw.as_bytes(), &mut headers) {
            Ok(Some(r)) => Ok(Some((
                r.method,
                r.body,
                r.keep_alive,
                String::from_utf8_lossy(r.target).into(),
            ))),
            Ok(None) => Ok(None),
            Err(Reject(s)) => Err(s),
        }
    }

    #[test]
    fn parses_a_plain_get() {
        let r = outcome("GET /a?b HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r, (Method::Get, BodyKind::None, true, "/a?b".into()));
    }

    #[test]
    fn fields_are_found_by_name_first_one_winning() {
        let raw = "GET / HTTP/1.1\r\nHOST: x\r\nX-Range: no\r\nIf-Range: \"a\"\r\nrange:  bytes=1-2 \r\nRange: bytes=3-4\r\nExpect: 100-continue\r\n\r\n";
        let mut headers = empty_headers();
        let r = parse(raw.as_bytes(), &mut headers).unwrap().unwrap();
        assert_eq!(r.get(Field::Host), Some(&b"x"[..]));
        assert_eq!(r.get(Field::Range), Some(&b"bytes=1-2"[..]));
        assert_eq!(r.get(Field::IfRange), Some(&b"\"a\""[..]));
        assert_eq!(r.get(Field::Expect), Some(&b"100-continue"[..]));
        assert_eq!(r.get(Field::IfMatch), None);
        assert_eq!(r.get(Field::Accept), None);
        for (name, field) in [
            ("Accept", Field::Accept),
            ("accept-encoding", Field::AcceptEncoding),
            ("Authorization", Field::Authorization),
            ("content-type", Field::ContentType),
            ("If-Modified-Since", Field::IfModifiedSince),
            ("if-none-match", Field::IfNoneMatch),
            ("If-Unmodified-Since", Field::IfUnmodifiedSince),
        ] {
            assert_eq!(Field::of(name), Some(field), "{name}");
        }
        for (i, (name, f)) in BY_NAME.into_iter().enumerate() {
            assert_eq!(f as usize, i, "BY_NAME names each field once, in order");
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'));
            assert_eq!(Field::of(&name.to_ascii_uppercase()), Some(f));
        }
        assert_eq!(Field::of("accepts"), None);
        // The length of a name the server reads, or of none.
        assert_eq!(Field::of("User-Agent"), None);
        assert_eq!(Field::of("X-Forwarded-For-Longer-Than-Any"), None);
        assert_eq!(Field::of(""), None);
        assert_eq!(Field::of("if-none-matcH"), Some(Field::IfNoneMatch));
        // Other token bytes are not taken for a letter or a `-`.
        for near in [
            "content_length",
            "Content.Length",
            "HOS^",
            "r~nge",
            "expect`",
        ] {
            assert_eq!(Field::of(near), None, "{near}");
        }
    }

    #[test]
    fn keep_alive_rules() {
        let ka = |raw: &str| outcome(raw).unwrap().unwrap().2;
        assert!(!ka("GET / HTTP/1.0\r\n\r\n"));
        assert!(ka("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
        assert!(!ka(
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        ));
        assert!(!ka(
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\n\r\n"
        ));
    }

    #[test]
    fn absolute_form_is_reduced() {
        let t = |raw: &str| outcome(raw).unwrap().unwrap().3;
        assert_eq!(
            t("GET http://dev.local/x/y?z HTTP/1.1\r\nHost: a\r\n\r\n"),
            "/x/y?z"
        );
        assert_eq!(t("GET HTTP://dev.local HTTP/1.1\r\nHost: a\r\n\r\n"), "/");
        assert_eq!(
            outcome("GET ftp://x/ HTTP/1.1\r\nHost: a\r\n\r\n"),
            Err(Status::BadRequest)
        );
    }

    #[test]
    fn absolute_form_keeps_its_authority() {
        let authority = |raw: &str| {
            let mut headers = empty_headers();
            let r = parse(raw.as_bytes(), &mut headers).unwrap().unwrap();
            r.authority.map(|a| String::from_utf8_lossy(a).into_owned())
        };
        let a = authority("GET http://dev.local:8080/x HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(a.as_deref(), Some("dev.local:8080"));
        let a = authority("GET http://u:p@dev.local HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(a.as_deref(), Some("dev.local"));
        assert_eq!(authority("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n"), None);
        assert_eq!(authority("GET /x HTTP/1.1\r\nHost: a\r\n\r\n"), None);
    }

    #[test]
    fn a_host_must_be_one_rfc_3986_allows() {
        for host in [
            "",
            "dev.local",
            "dev.local:8080",
            "dev.local:",
            "192.168.1.1:80",
            "[::1]",
            "[fe80::1%25eth0]:443",
            "[v1.x]",
            "a_b~c!$&'()*+,;=%41",
        ] {
            let raw = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
            assert!(outcome(&raw).unwrap().is_some(), "Host: {host}");
            let raw = format!("GET http://{host}/ HTTP/1.1\r\nHost: a\r\n\r\n");
            assert!(outcome(&raw).unwrap().is_some(), "authority {host}");
        }
        for host in [
            "a b", "a/b", "a\\b", "a\"b", "<a>", "a@b", "a:8o", "a:80:81", "[::1", "[]", "[::1]x",
            "[::1]:x", "[a]b]", "a{b}", "a|b", "é",
        ] {
            let raw = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
            assert_eq!(outcome(&raw), Err(Status::BadRequest), "Host: {host}");
        }
        for target in [
            "http://a:8o/",
            "http://[::1/",
            "http://a]b/",
            "http://u@a:80:81/",
        ] {
            let raw = format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n");
            assert_eq!(outcome(&raw), Err(Status::BadRequest), "{target}");
        }
    }

    #[test]
    fn framing_table() {
        use Status::{BadRequest, NotImplemented, VersionNotSupported};
        let rows: &[(&str, Result<BodyKind, Status>)] = &[
            (
                "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n",
                Ok(BodyKind::Length(5)),
            ),
            (
                "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
                Ok(BodyKind::None),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                Ok(BodyKind::Chunked),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                Err(NotImplemented),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "GET / HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n",
                Err(BadRequest),
            ),
            ("GET / HTTP/1.1\r\n\r\n", Err(BadRequest)),
            (
                "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                Err(BadRequest),
            ),
            (
                "GET / HTTP/2.0\r\nHost: x\r\n\r\n",
                Err(VersionNotSupported),
            ),
            (
                "GET / HTTP/1.2\r\nHost: x\r\n\r\n",
                Err(VersionNotSupported),
            ),
            (
                "\r\nGET / HTTP/2.0\r\nHost: x\r\n\r\n",
                Err(VersionNotSupported),
            ),
            ("GET / FOO/1.1\r\nHost: x\r\n\r\n", Err(BadRequest)),
            ("GET /\r\n\r\n", Err(BadRequest)),
            // A space in the target, or two between the parts: a bad
            // request line, whatever version ends it.
            ("GET /a?b c HTTP/1.1\r\nHost: x\r\n\r\n", Err(BadRequest)),
            ("GET /a b HTTP/2.0\r\nHost: x\r\n\r\n", Err(BadRequest)),
            ("GET /  HTTP/1.1\r\nHost: x\r\n\r\n", Err(BadRequest)),
            ("GET /  HTTP/1.2\r\nHost: x\r\n\r\n", Err(BadRequest)),
        ];
        for (raw, want) in rows {
            let got = outcome(raw).map(|r| r.unwrap().1);
            assert_eq!(&got, want, "{raw:?}");
        }
    }

    #[test]
    fn methods() {
        let m = |raw: &str| outcome(raw).unwrap().unwrap().0;
        assert_eq!(m("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"), Method::Head);
        assert_eq!(
            m("DELETE / HTTP/1.1\r\nHost: x\r\n\r\n"),
            Method::OtherKnown
        );
        assert_eq!(m("BREW / HTTP/1.1\r\nHost: x\r\n\r\n"), Method::Unknown);
        assert_eq!(m("get / HTTP/1.1\r\nHost: x\r\n\r\n"), Method::Unknown);
    }

    #[test]
    fn size_limits() {
        assert_eq!(outcome("GET /a"), Ok(None));
        let long_line = format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_REQUEST_LINE));
        assert_eq!(outcome(&long_line), Err(Status::UriTooLong));
        assert_eq!(
            outcome(&format!("{long_line}Host: x\r\n\r\n")),
            Err(Status::UriTooLong)
        );
        let big = format!(
            "GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n",
            "a".repeat(HEAD_BUF)
        );
        assert_eq!(outcome(&big), Err(Status::HeaderFieldsTooLarge));
        let many: String = (0..MAX_HEADERS + 1)
            .map(|i| format!("X-{i}: y\r\n"))
            .collect();
        assert_eq!(
            outcome(&format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n")),
            Err(Status::HeaderFieldsTooLarge)
        );
    }
}
