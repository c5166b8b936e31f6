//! Content negotiation: which codings a client takes (Accept-Encoding) and
//! whether it wants HTML (Accept), with q-values (RFC 9110 section 12).

use crate::http::request::trim;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Encodings {
    pub br: bool,
    pub gzip: bool,
    pub identity: bool,
}

/// Reads Accept-Encoding. Without the header a client gets identity: that is
/// what curl and scripts expect, and RFC 9110 allows it.
pub fn accept_encoding(header: Option<&[u8]>) -> Encodings {
    let Some(header) = header else {
        return Encodings {
            br: false,
            gzip: false,
            identity: true,
        };
    };
    let (mut br, mut gzip, mut identity, mut star) = (None, None, None, None);
    for (coding, q) in elements(header) {
        let slot = if coding.eq_ignore_ascii_case(b"br") {
            &mut br
        } else if coding.eq_ignore_ascii_case(b"gzip") || coding.eq_ignore_ascii_case(b"x-gzip") {
            &mut gzip
        } else if coding.eq_ignore_ascii_case(b"identity") {
            &mut identity
        } else if coding == b"*" {
            &mut star
        } else {
            continue;
        };
        *slot = Some(q);
    }
    let ok = |explicit: Option<bool>| explicit.or(star).unwrap_or(false);
    Encodings {
        br: ok(br),
        gzip: ok(gzip),
        identity: identity.or(star).unwrap_or(true),
    }
}

/// Whether Accept allows text/html (no header allows everything).
pub fn accepts_html(header: Option<&[u8]>) -> bool {
    let Some(header) = header else {
        return true;
    };
    elements(header).any(|(range, q)| {
        q && (range.eq_ignore_ascii_case(b"text/html")
            || range.eq_ignore_ascii_case(b"text/*")
            || range == b"*/*")
    })
}

/// The list's elements as (value, q > 0); an element with a malformed q is skipped.
fn elements(header: &[u8]) -> impl Iterator<Item = (&[u8], bool)> {
    header.split(|&b| b == b',').filter_map(|element| {
        let mut parts = element.split(|&b| b == b';');
        let value = trim(parts.next()?);
        if value.is_empty() {
            return None;
        }
        let mut positive = true;
        for param in parts {
            let param = trim(param);
            if param.len() >= 2 && param[..2].eq_ignore_ascii_case(b"q=") {
                positive = qvalue(trim(&param[2..]))?;
            }
        }
        Some((value, positive))
    })
}

/// `Some(q > 0)` for a valid qvalue (`0`, `0.5`, `1.000`), else `None`.
fn qvalue(v: &[u8]) -> Option<bool> {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(i) => (&v[..i], &v[i + 1..]),
        None => (v, &b""[..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    match int {
        b"0" => Some(frac.iter().any(|&d| d != b'0')),
        b"1" if frac.iter().all(|&d| d == b'0') => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(h: &str) -> (bool, bool, bool) {
        let r = accept_encoding(Some(h.as_bytes()));
        (r.br, r.gzip, r.identity)
    }

    #[test]
    fn accept_encoding_table() {
        assert_eq!(e("gzip, deflate, br"), (true, true, true));
        assert_eq!(e("gzip"), (false, true, true));
        assert_eq!(e("GZIP;Q=1.0, BR;q=0.5"), (true, true, true));
        assert_eq!(e("br;q=0, gzip"), (false, true, true));
        assert_eq!(e("gzip;q=0"), (false, false, true));
        assert_eq!(e("gzip;q=0.000"), (false, false, true));
        assert_eq!(e("gzip;q=0.001"), (false, true, true));
        assert_eq!(e("*"), (true, true, true));
        assert_eq!(e("*;q=0"), (false, false, false));
        assert_eq!(e("*;q=0, identity"), (false, false, true));
        assert_eq!(e("identity;q=0"), (false, false, false));
        assert_eq!(e("br, *;q=0"), (true, false, false));
        assert_eq!(e("x-gzip"), (false, true, true));
        assert_eq!(e("gzip;q=2"), (false, false, true));
        assert_eq!(e("gzip;q=abc"), (false, false, true));
        assert_eq!(e(""), (false, false, true));
        assert_eq!(e("deflate"), (false, false, true));
        assert_eq!(
            accept_encoding(None),
            Encodings {
                br: false,
                gzip: false,
                identity: true
            }
        );
    }

    #[test]
    fn accept_html() {
        assert!(accepts_html(None));
        assert!(accepts_html(Some(
            b"text/html,application/xhtml+xml,*/*;q=0.8"
        )));
        assert!(accepts_html(Some(b"*/*")));
        assert!(accepts_html(Some(b"text/*")));
        assert!(!accepts_html(Some(b"application/json")));
        assert!(!accepts_html(Some(b"text/html;q=0, application/json")));
        assert!(!accepts_html(Some(b"image/avif,image/webp")));
    }
}
