//! The backend's answer head, checked before a byte of it reaches the
//! client: its framing must have one reading (RFC 9112 section 6.3), its
//! fields no control bytes. What passes is re-framed by Marmoset; the
//! hop-by-hop fields stay behind.

use crate::http::header::header;
use crate::http::request::{parse_length, trim};
use crate::limits::MAX_ANSWER_FIELDS;
use crate::proxy::outgoing::{connection_tokens, is_clean, is_hop_by_hop};

/// How the backend delimits its answer's body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Framing {
    /// No body (1xx, 204, 304, an answer to HEAD).
    None,
    Length(u64),
    Chunked,
    /// Until the backend closes.
    Close,
}

/// A checked answer head.
#[derive(Debug)]
pub struct Head {
    pub status: u16,
    /// `NNN Reason`, as the status line will carry it.
    pub status_text: String,
    pub framing: Framing,
    /// The Content-Length the backend named (kept for HEAD and 304).
    pub length: Option<u64>,
    /// The backend keeps the connection open after this answer.
    pub reusable: bool,
    /// An event stream (`Content-Type: text/event-stream`): long-lived.
    pub streaming: bool,
    /// The end-to-end fields, each as `\r\nName: value`.
    pub fields: Vec<u8>,
    pub head_len: usize,
}

/// Why an answer head is refused (502).
#[derive(Debug, PartialEq)]
pub struct Invalid(pub &'static str);

/// The hop's fields, and the Date and Server lines Marmoset writes itself.
fn is_dropped(name: &str) -> bool {
    is_hop_by_hop(name) || name.eq_ignore_ascii_case("date") || name.eq_ignore_ascii_case("server")
}

/// Parses a head at the start of `buf`; `Ok(None)`: not complete yet.
/// `head_only`: the request was HEAD; `upgrading`: the request asked to
/// switch protocols, so 101 is an answer and keeps its `Upgrade` field.
pub fn parse(buf: &[u8], head_only: bool, upgrading: bool) -> Result<Option<Head>, Invalid> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_ANSWER_FIELDS];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Invalid("too many header fields")),
        Err(_) => return Err(Invalid("malformed head")),
    };
    let (Some(status), Some(minor)) = (resp.code, resp.version) else {
        return Err(Invalid("malformed status line"));
    };
    let reason = resp.reason.unwrap_or("");
    if !is_clean(reason.as_bytes()) {
        return Err(Invalid("control byte in the reason phrase"));
    }
    let listed: Vec<&[u8]> = connection_tokens(resp.headers).collect();
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut te = false;
    let mut streaming = false;
    let mut fields = Vec::new();
    for h in resp.headers.iter() {
        if !is_clean(h.value) {
            return Err(Invalid("control byte in a header field"));
        }
        let value = trim(h.value);
        if h.name.eq_ignore_ascii_case("content-length") {
            if length.is_some() {
                return Err(Invalid("two Content-Length fields"));
            }
            length = Some(parse_length(value).ok_or(Invalid("bad Content-Length"))?);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if te {
                return Err(Invalid("two Transfer-Encoding fields"));
            }
            te = true;
            chunked = value.eq_ignore_ascii_case(b"chunked");
            if !chunked {
                return Err(Invalid("a transfer coding other than chunked"));
            }
        }
        if h.name.eq_ignore_ascii_case("content-type") {
            let media = value.split(|&b| b == b';').next().unwrap_or_default();
            streaming = trim(media).eq_ignore_ascii_case(b"text/event-stream");
        }
        let kept_upgrade = upgrading && status == 101 && h.name.eq_ignore_ascii_case("upgrade");
        if !kept_upgrade
            && (is_dropped(h.name)
                || listed
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case(h.name.as_bytes())))
        {
            continue;
        }
        header(&mut fields, h.name, value);
    }
    if chunked && length.is_some() {
        return Err(Invalid("Content-Length with Transfer-Encoding"));
    }
    let closes = listed.iter().any(|t| t.eq_ignore_ascii_case(b"close"));
    let keeps = listed.iter().any(|t| t.eq_ignore_ascii_case(b"keep-alive"));
    let framing = match status {
        100..=199 | 204 | 304 => Framing::None,
        _ if head_only => Framing::None,
        _ if chunked => Framing::Chunked,
        _ => length.map_or(Framing::Close, Framing::Length),
    };
    let persistent = if minor == 1 {
        !closes
    } else {
        keeps && !closes
    };
    Ok(Some(Head {
        status,
        status_text: format!("{status} {reason}"),
        framing,
        length,
        reusable: persistent && framing != Framing::Close,
        streaming,
        fields,
        head_len,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> Result<Option<Head>, Invalid> {
        parse(raw.as_bytes(), false, false)
    }

    #[test]
    fn framing_with_two_readings_is_refused() {
        for (raw, why) in [
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
                "two Content-Length fields",
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "Content-Length with Transfer-Encoding",
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                "a transfer coding other than chunked",
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n",
                "bad Content-Length",
            ),
        ] {
            assert_eq!(head(raw).unwrap_err(), Invalid(why), "{raw}");
        }
        assert!(head("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n").is_err());
    }

    #[test]
    fn hop_by_hop_fields_stay_behind() {
        let h = head("HTTP/1.1 200 OK\r\nConnection: x-hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.fields, b"\r\nContent-Type: text/plain");
        assert_eq!(h.framing, Framing::Length(5));
        assert!(h.reusable);
        let h = head("HTTP/1.0 200 OK\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.framing, Framing::Close);
        assert!(!h.reusable);
        assert!(head("HTTP/1.1 200 OK\r\n").unwrap().is_none());
        assert!(!h.streaming);
        let h = head("HTTP/1.1 200 OK\r\nContent-Type: Text/Event-Stream ; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.streaming);
    }
}
