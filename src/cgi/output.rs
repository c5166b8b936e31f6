//! The header block a CGI script prints before its body (RFC 3875 section
//! 6): parsed and checked so nothing a script prints can split or forge a
//! response header. Pure: bytes in, a decision out.

use crate::http::status::Status;
use crate::limits::HEAD_BUF;

/// Where the header block ends in a script's output, and the body starts.
pub fn head_end(out: &[u8]) -> Option<(usize, usize)> {
    let mut line_start = 0;
    for (i, &b) in out.iter().enumerate() {
        if b == b'\n' {
            let line = &out[line_start..i];
            if line.is_empty() || line == b"\r" {
                return Some((line_start, i + 1));
            }
            line_start = i + 1;
        }
    }
    None
}

/// What the script's headers ask for.
#[derive(Debug, PartialEq)]
pub struct ScriptHead {
    pub status: Status,
    /// `Location:` with a path on this server and no Status: serve that path instead.
    pub local_redirect: Option<String>,
    pub content_type: Option<String>,
    pub location: Option<String>,
    pub content_length: Option<u64>,
    /// Other headers, passed through.
    pub other: Vec<(String, String)>,
}

/// Why a script's output is refused: 502.
#[derive(Debug, PartialEq)]
pub struct Invalid(pub &'static str);

/// Headers a script may not set: the server owns the framing and the connection.
const OWNED_BY_SERVER: [&str; 6] = [
    "connection",
    "transfer-encoding",
    "keep-alive",
    "date",
    "server",
    "upgrade",
];

/// Parses the header block (`head` is everything before the empty line).
pub fn parse(head: &[u8]) -> Result<ScriptHead, Invalid> {
    if head.len() > HEAD_BUF {
        return Err(Invalid("header block too large"));
    }
    let mut h = ScriptHead {
        status: Status::Ok,
        local_redirect: None,
        content_type: None,
        location: None,
        content_length: None,
        other: Vec::new(),
    };
    let mut status_given = false;
    for raw in head.split(|&b| b == b'\n') {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            continue;
        }
        let line = std::str::from_utf8(line).map_err(|_| Invalid("header not UTF-8"))?;
        let (name, value) = line
            .split_once(':')
            .ok_or(Invalid("header line without a colon"))?;
        let value = value.trim_matches([' ', '\t']);
        let token = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(Invalid("bad header name"));
        }
        if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(Invalid("control character in a header value"));
        }
        match name.to_ascii_lowercase().as_str() {
            "status" => {
                let code = value.split(' ').next().and_then(|c| c.parse::<u16>().ok());
                h.status = code
                    .and_then(Status::from_code)
                    .ok_or(Invalid("unsupported Status"))?;
                status_given = true;
            }
            "content-type" => h.content_type = Some(value.to_string()),
            "location" => h.location = Some(value.to_string()),
            "content-length" => {
                if value.is_empty()
                    || value.len() > 19
                    || !value.bytes().all(|b| b.is_ascii_digit())
                {
                    return Err(Invalid("bad Content-Length"));
                }
                h.content_length = value.parse().ok();
            }
            n if OWNED_BY_SERVER.contains(&n) => {}
            _ => h.other.push((name.to_string(), value.to_string())),
        }
    }
    if let Some(loc) = h.location.take() {
        if loc.starts_with('/') && !loc.starts_with("//") && !status_given {
            h.local_redirect = Some(loc);
        } else {
            if !status_given {
                h.status = Status::Found;
            }
            h.location = Some(loc);
        }
    } else if h.content_type.is_none() && h.status.has_body() {
        return Err(Invalid("no Content-Type, Location or body-less Status"));
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_end_of_the_head() {
        assert_eq!(
            head_end(b"Content-Type: text/plain\n\nbody"),
            Some((25, 26))
        );
        assert_eq!(
            head_end(b"Content-Type: text/plain\r\n\r\nbody"),
            Some((26, 28))
        );
        assert_eq!(head_end(b"Content-Type: text/plain\n"), None);
    }

    #[test]
    fn parses_status_type_and_others() {
        let h = parse(
            b"Status: 404 Not Found\nContent-Type: text/plain\nX-Thing: a b\nConnection: close\n",
        )
        .unwrap();
        assert_eq!(h.status, Status::NotFound);
        assert_eq!(h.content_type.as_deref(), Some("text/plain"));
        assert_eq!(h.other, vec![("X-Thing".to_string(), "a b".to_string())]);
    }

    #[test]
    fn redirects() {
        let h = parse(b"Location: /index.html\n").unwrap();
        assert_eq!(h.local_redirect.as_deref(), Some("/index.html"));
        let h = parse(b"Location: http://example.com/\n").unwrap();
        assert_eq!(
            (h.status, h.location.as_deref()),
            (Status::Found, Some("http://example.com/"))
        );
        let h = parse(b"Status: 303 See Other\nLocation: /x\n").unwrap();
        assert_eq!(
            (h.status, h.location.as_deref()),
            (Status::SeeOther, Some("/x"))
        );
        let h = parse(b"Status: 301\nLocation: /moved\n").unwrap();
        assert_eq!(
            (h.status, h.location.as_deref(), h.local_redirect),
            (Status::MovedPermanently, Some("/moved"), None)
        );
        let h = parse(b"Location: //evil.example/\n").unwrap();
        assert_eq!(h.local_redirect, None);
    }

    #[test]
    fn refuses_invalid_heads() {
        for bad in [
            &b"no colon here\n"[..],
            b"Content-Type: text/plain\nBad Name: x\n",
            b"Content-Type: text/plain\nX: a\x01b\n",
            b"Content-Type: text/plain\nX: a\rInjected: yes\n",
            b"Status: abc\nContent-Type: text/plain\n",
            b"Status: 299\nContent-Type: text/plain\n",
            b"Content-Length: -1\nContent-Type: text/plain\n",
            b"X-Only: 1\n",
            b"Content-Type: text/\xffplain\n",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(parse(b"Status: 204 No Content\n").is_ok());
    }
}
