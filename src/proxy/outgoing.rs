//! The request head sent to a backend: the client's method, target and
//! end-to-end fields, without hop-by-hop fields, without field names
//! with an underscore, and without the forwarding fields a backend may
//! trust (`X-Forwarded-*`, `Forwarded`, `X-Real-IP`, `X-Remote-User`,
//! `X-HTTP-Method-Override`, ...) as the client sent them; then Marmoset's own `X-Forwarded-For`, `-Proto`, `-Host` and
//! `X-Real-IP`, and the framing of the body as it will be sent.

use std::fmt::Write as _;
use std::net::IpAddr;

use crate::http::claims;
use crate::http::header::{header, push_num};
use crate::http::request::{self, BodyKind, Field, Method, Request, Version};
use crate::http::status::Status;

/// A request ready to go to the backend of route `route`.
pub struct Forward {
    pub route: usize,
    pub head: Vec<u8>,
    /// Sent again on a new connection if a kept one failed before any
    /// byte of answer (RFC 9110 section 9.2.2; only without a body).
    pub retry_safe: bool,
    /// The client asked to switch protocols (WebSocket), in a request
    /// without a body.
    pub upgrade: bool,
    pub head_only: bool,
    pub body: BodyKind,
    /// It passed an `auth` realm: it may take the connections kept for
    /// such requests, and its long-lived answer is never cut for another.
    pub logged_in: bool,
}

/// What the backend learns about the client.
pub struct Origin {
    pub peer: IpAddr,
    pub tls: bool,
}

/// Fields that describe one hop, not the message (RFC 9110 section
/// 7.6.1), and the framing Marmoset writes itself: dropped both ways.
pub fn is_hop_by_hop(name: &str) -> bool {
    const NAMES: [&str; 7] = [
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "content-length",
        "upgrade",
    ];
    NAMES.iter().any(|n| n.eq_ignore_ascii_case(name))
        || name
            .get(..6)
            .is_some_and(|p| p.eq_ignore_ascii_case("proxy-"))
}

/// What a client may not tell the backend: who the user is, the client's
/// address, the original URL or another method are Marmoset's to set (or
/// leave out), and Marmoset answers `Expect` itself. A name with an
/// underscore goes too, as nginx drops it: a CGI-style backend reads
/// `X_Forwarded_For` as `HTTP_X_FORWARDED_FOR`.
fn is_dropped(name: &str) -> bool {
    is_hop_by_hop(name)
        || name.contains('_')
        || name.eq_ignore_ascii_case("expect")
        || claims::names_origin(name)
        || claims::names_user(name)
        || claims::overrides_method(name)
}

/// The tokens of every `Connection` field, which name more hop-by-hop fields.
pub fn connection_tokens<'a>(
    headers: &'a [httparse::Header<'a>],
) -> impl Iterator<Item = &'a [u8]> + 'a {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| h.value.split(|&b| b == b','))
        .map(request::trim)
        .filter(|t| !t.is_empty())
}

/// A value that can go on as it came: no control byte but HTAB.
pub fn is_clean(value: &[u8]) -> bool {
    value
        .iter()
        .all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

impl Forward {
    pub fn new(route: usize, req: &Request<'_>, origin: &Origin) -> Result<Forward, Status> {
        if req.method_token == "CONNECT" {
            return Err(Status::MethodNotAllowed);
        }
        let listed: Vec<&[u8]> = connection_tokens(req.headers).collect();
        let upgrade_value = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("upgrade"))
            .map(|h| request::trim(h.value));
        // A request with a body goes on as a plain request: the bytes after
        // its head are its body, and cannot also be the tunnel's (an h2c
        // upgrade from `curl --http2 -d`). Its Upgrade field is hop-by-hop
        // and stays behind.
        let upgrade = upgrade_value.is_some()
            && req.version == Version::Http11
            && req.body == BodyKind::None
            && listed.iter().any(|t| t.eq_ignore_ascii_case(b"upgrade"));
        let mut head = Vec::with_capacity(req.head_len + 128);
        head.extend_from_slice(req.method_token.as_bytes());
        head.push(b' ');
        head.extend_from_slice(req.target);
        head.extend_from_slice(b" HTTP/1.1");
        // The target's authority, when it has one, is the host (RFC 9112
        // 3.2.2); an HTTP/1.0 client may send none, and HTTP/1.1 needs one.
        let host = req.authority.or(req.get(Field::Host));
        header(&mut head, "Host", host.unwrap_or(b"localhost"));
        for h in req.headers {
            if !is_clean(h.value) {
                return Err(Status::BadRequest);
            }
            if h.name.eq_ignore_ascii_case("host") {
                continue;
            }
            if is_dropped(h.name)
                || listed
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case(h.name.as_bytes()))
            {
                continue;
            }
            header(&mut head, h.name, request::trim(h.value));
        }
        let mut peer = String::new();
        let _ = write!(peer, "{}", origin.peer.to_canonical());
        header(&mut head, "X-Forwarded-For", peer.as_bytes());
        header(&mut head, "X-Real-IP", peer.as_bytes());
        let proto: &[u8] = if origin.tls { b"https" } else { b"http" };
        header(&mut head, "X-Forwarded-Proto", proto);
        if let Some(host) = host {
            header(&mut head, "X-Forwarded-Host", host);
        }
        match req.body {
            BodyKind::Length(n) => {
                head.extend_from_slice(b"\r\nContent-Length: ");
                push_num(&mut head, n);
            }
            BodyKind::Chunked => head.extend_from_slice(b"\r\nTransfer-Encoding: chunked"),
            BodyKind::None if !matches!(req.method, Method::Get | Method::Head) => {
                head.extend_from_slice(b"\r\nContent-Length: 0");
            }
            BodyKind::None => {}
        }
        if let (true, Some(u)) = (upgrade, upgrade_value) {
            header(&mut head, "Upgrade", u);
            head.extend_from_slice(b"\r\nConnection: upgrade");
        }
        head.extend_from_slice(b"\r\n\r\n");
        let idempotent = matches!(
            req.method_token,
            "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS" | "TRACE"
        );
        Ok(Forward {
            route,
            head,
            retry_safe: idempotent && req.body == BodyKind::None && !upgrade,
            upgrade,
            head_only: req.method == Method::Head,
            body: req.body,
            logged_in: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forward(raw: &str) -> String {
        let mut headers = request::empty_headers();
        let req = request::parse(raw.as_bytes(), &mut headers)
            .unwrap()
            .unwrap();
        let origin = Origin {
            peer: "::ffff:10.0.0.2".parse().unwrap(),
            tls: false,
        };
        String::from_utf8(Forward::new(0, &req, &origin).unwrap().head).unwrap()
    }

    #[test]
    fn hop_by_hop_fields_go_and_forwarding_fields_are_ours() {
        let head = forward(
            "POST /api/x?y HTTP/1.1\r\nHost: dev\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nProxy-Authorization: a\r\nX-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Host: evil\r\nX_Forwarded_For: 1.2.3.4\r\nX-Forwarded-Port: 1\r\nX-Real-IP: 1.2.3.4\r\nAccept: */*\r\nContent-Length: 3\r\n\r\nabc",
        );
        assert_eq!(
            head,
            "POST /api/x?y HTTP/1.1\r\nHost: dev\r\nAccept: */*\r\nX-Forwarded-For: 10.0.0.2\r\nX-Real-IP: 10.0.0.2\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: dev\r\nContent-Length: 3\r\n\r\n"
        );
        let ws = forward(
            "GET /ws HTTP/1.1\r\nHost: d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        );
        assert!(
            ws.ends_with("\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"),
            "{ws}"
        );
    }
}
