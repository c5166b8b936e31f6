//! What a request on the endpoint asks, decided from its head alone (no
//! I/O): the form (as uhttpd tells them apart), the session of its
//! bearer token and the CORS lines its answer carries.

use crate::http::request::{Field, Method, Request};
use crate::ubus::rpc::DEFAULT_SID;
use crate::ubus::settings::Settings;

#[derive(Debug, PartialEq)]
pub enum Kind {
    /// `POST PREFIX` (or `PREFIX/`): JSON-RPC `call` and `list`, batched or not.
    Rpc,
    /// `POST PREFIX/call/OBJECT`.
    Call(String),
    /// `GET PREFIX/list` (`None`) or `GET PREFIX/list/OBJECT`.
    List(Option<String>),
    /// `GET PREFIX/subscribe/OBJECT`: an event stream.
    Subscribe(String),
    /// `OPTIONS` with `ubus-cors on`.
    Preflight,
}

#[derive(Debug)]
pub struct Asked {
    pub kind: Kind,
    /// The bearer token's session, else uhttpd's anonymous one.
    pub sid: Vec<u8>,
    /// `\r\nAccess-Control-...` lines for the answer (with `ubus-cors on`).
    pub cors: String,
}

/// What the endpoint answers without the bus.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    NotFound,
    /// 405, with the methods the endpoint takes.
    NotAllowed(&'static str),
}

/// Decides a request for the endpoint's path; `rest` is what follows the
/// prefix.
pub fn decide(settings: &Settings, req: &Request<'_>, rest: &str) -> Result<Asked, Refusal> {
    let kind = match (req.method, req.method_token) {
        (Method::Post, _) if rest.len() <= 1 => Kind::Rpc,
        (Method::Post, _) => match rest.strip_prefix("/call/") {
            Some(object) => Kind::Call(object.to_string()),
            None => return Err(Refusal::NotFound),
        },
        (Method::Get, _) if rest == "/list" => Kind::List(None),
        (Method::Get, _) => {
            if let Some(object) = rest.strip_prefix("/list/") {
                Kind::List(Some(object.to_string()))
            } else if let Some(object) = rest.strip_prefix("/subscribe/") {
                Kind::Subscribe(object.to_string())
            } else {
                return Err(Refusal::NotFound);
            }
        }
        (_, "OPTIONS") if settings.cors => Kind::Preflight,
        _ if settings.cors => return Err(Refusal::NotAllowed("GET, POST, OPTIONS")),
        _ => return Err(Refusal::NotAllowed("GET, POST")),
    };
    let sid = match req.get(Field::Authorization) {
        Some(v) if v.len() >= 7 && v[..7].eq_ignore_ascii_case(b"Bearer ") => v[7..].to_vec(),
        _ => DEFAULT_SID.to_vec(),
    };
    let cors = if settings.cors {
        cors_lines(req)
    } else {
        String::new()
    };
    Ok(Asked { kind, sid, cors })
}

/// A request header the server does not read for itself.
fn header<'a>(req: &Request<'a>, name: &str) -> Option<&'a str> {
    req.headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .and_then(|h| std::str::from_utf8(h.value).ok())
        .map(str::trim)
}

/// uhttpd's CORS answer: for a request with an `Origin` (and, in a
/// preflight, a method among GET, POST and OPTIONS), that origin echoed,
/// the asked headers echoed, the methods and credentials allowed. A value
/// that is not plain visible text is not echoed at all.
fn cors_lines(req: &Request<'_>) -> String {
    let printable = |v: &str| {
        v.bytes()
            .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
    };
    let Some(origin) = header(req, "origin").filter(|v| printable(v)) else {
        return String::new();
    };
    if header(req, "access-control-request-method")
        .is_some_and(|m| !matches!(m, "GET" | "POST" | "OPTIONS"))
    {
        return String::new();
    }
    let mut lines = format!("\r\nAccess-Control-Allow-Origin: {origin}");
    if let Some(h) = header(req, "access-control-request-headers").filter(|v| printable(v)) {
        lines.push_str("\r\nAccess-Control-Allow-Headers: ");
        lines.push_str(h);
    }
    lines.push_str(
        "\r\nAccess-Control-Allow-Methods: GET, POST, OPTIONS\r\nAccess-Control-Allow-Credentials: true",
    );
    lines
}
