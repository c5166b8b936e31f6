//! Byte ranges (RFC 9110 section 14): one range is served as 206; a request
//! for several is answered with the whole file (200), which the RFC allows
//! and which keeps multipart bodies out of a small server.

use crate::http::conditional::{Validators, tag_matches};
use crate::http::httpdate;
use crate::http::request::trim;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ranged {
    Full,
    /// First and last byte, inclusive.
    Part(u64, u64),
    Unsatisfiable,
}

/// Decides what part of a `len`-byte file a GET gets.
pub fn evaluate(range: Option<&[u8]>, if_range: Option<&[u8]>, v: &Validators, len: u64) -> Ranged {
    let Some(range) = range else {
        return Ranged::Full;
    };
    if let Some(cond) = if_range {
        if !if_range_holds(trim(cond), v) {
            return Ranged::Full;
        }
    }
    parse(range, len)
}

fn if_range_holds(cond: &[u8], v: &Validators) -> bool {
    if cond.starts_with(b"\"") || cond.starts_with(b"W/") {
        tag_matches(cond, v.etag(), true)
    } else {
        httpdate::parse(cond) == Some(v.mtime)
    }
}

/// Parses `bytes=a-b`, `bytes=a-` or `bytes=-n`; anything unparsable is ignored.
pub fn parse(value: &[u8], len: u64) -> Ranged {
    let value = trim(value);
    let Some(eq) = value.iter().position(|&b| b == b'=') else {
        return Ranged::Full;
    };
    if !trim(&value[..eq]).eq_ignore_ascii_case(b"bytes") {
        return Ranged::Full;
    }
    let spec = trim(&value[eq + 1..]);
    if spec.contains(&b',') {
        return Ranged::Full;
    }
    let Some(dash) = spec.iter().position(|&b| b == b'-') else {
        return Ranged::Full;
    };
    let (first, last) = (trim(&spec[..dash]), trim(&spec[dash + 1..]));
    match (number(first), number(last)) {
        (Some(a), Some(b)) if a <= b => {
            if a >= len {
                Ranged::Unsatisfiable
            } else {
                Ranged::Part(a, b.min(len - 1))
            }
        }
        (Some(a), None) if last.is_empty() => {
            if a >= len {
                Ranged::Unsatisfiable
            } else {
                Ranged::Part(a, len - 1)
            }
        }
        (None, Some(n)) if first.is_empty() => {
            if n == 0 || len == 0 {
                Ranged::Unsatisfiable
            } else {
                Ranged::Part(len - n.min(len), len - 1)
            }
        }
        _ => Ranged::Full,
    }
}

fn number(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ranged::*;

    #[test]
    fn single_ranges() {
        let rows: &[(&str, Ranged)] = &[
            ("bytes=0-9", Part(0, 9)),
            ("bytes=5-", Part(5, 99)),
            ("bytes=-10", Part(90, 99)),
            ("bytes=-500", Part(0, 99)),
            ("bytes=90-200", Part(90, 99)),
            ("Bytes = 1-1", Part(1, 1)),
            ("bytes=100-", Unsatisfiable),
            ("bytes=100-200", Unsatisfiable),
            ("bytes=-0", Unsatisfiable),
            ("bytes=9-5", Full),
            ("bytes=0-1,5-6", Full),
            ("items=0-1", Full),
            ("bytes=a-b", Full),
            ("bytes=-", Full),
            ("bytes=+1-2", Full),
            ("bytes", Full),
        ];
        for (h, want) in rows {
            assert_eq!(parse(h.as_bytes(), 100), *want, "{h}");
        }
        assert_eq!(parse(b"bytes=0-", 0), Unsatisfiable);
        assert_eq!(parse(b"bytes=-1", 0), Unsatisfiable);
    }

    #[test]
    fn if_range() {
        let v = Validators::new(1, 100, 5000, 0);
        let date = httpdate::format(5000);
        let old = httpdate::format(4000);
        let r = Some(&b"bytes=0-0"[..]);
        assert_eq!(evaluate(r, Some(v.etag().as_bytes()), &v, 100), Part(0, 0));
        assert_eq!(evaluate(r, Some(b"\"stale\""), &v, 100), Full);
        assert_eq!(
            evaluate(r, Some(format!("W/{}", v.etag()).as_bytes()), &v, 100),
            Full
        );
        assert_eq!(evaluate(r, Some(&date), &v, 100), Part(0, 0));
        assert_eq!(evaluate(r, Some(&old), &v, 100), Full);
        assert_eq!(evaluate(None, None, &v, 100), Full);
    }
}
