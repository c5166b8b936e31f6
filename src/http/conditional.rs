//! Validators and conditional requests (RFC 9110 section 13).

use std::fmt::Write;
use std::rc::Rc;

use crate::http::httpdate;
use crate::http::request::trim;

/// What identifies one version of a file: a strong ETag from inode, size and
/// modification time, and the modification time in whole seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Validators {
    /// `\r\nLast-Modified: DATE\r\nETag: "TAG"`: both headers as a response
    /// head carries them, in one piece (each piece copied costs a memcpy
    /// call). Shared: a response takes a reference, not a copy.
    lines: Rc<str>,
    pub mtime: u64,
}

const MODIFIED: &str = "\r\nLast-Modified: ";
const ETAG: &str = "\r\nETag: ";
const ETAG_AT: usize = MODIFIED.len() + httpdate::LEN + ETAG.len();
/// Three u64 in hex and the punctuation fit in 56 bytes.
const LINES_MAX: usize = ETAG_AT + 56;

impl Validators {
    pub fn new(inode: u64, size: u64, mtime: u64, mtime_nsec: u64) -> Self {
        let mut lines = heapless::String::<LINES_MAX>::new();
        let date = httpdate::format(mtime);
        // The lengths are bounded as LINES_MAX says, so none of this can fail.
        let _ = lines.push_str(MODIFIED);
        let _ = lines.push_str(std::str::from_utf8(&date).unwrap_or_default());
        let _ = lines.push_str(ETAG);
        let _ = write!(lines, "\"{inode:x}-{size:x}-{mtime:x}.{mtime_nsec:x}\"");
        Validators {
            lines: Rc::from(lines.as_str()),
            mtime,
        }
    }

    /// The entity tag, quotes included.
    pub fn etag(&self) -> &str {
        self.lines.get(ETAG_AT..).unwrap_or_default()
    }

    /// The Last-Modified and ETag header lines, each preceded by CRLF.
    pub fn head_lines(&self) -> &[u8] {
        self.lines.as_bytes()
    }

    /// The validators of another representation of the same file (its
    /// decompression): the same date, the ETag marked with `-u`.
    pub fn other_representation(&self) -> Validators {
        let tag = self.lines.strip_suffix('"').unwrap_or(&self.lines);
        Validators {
            lines: Rc::from(format!("{tag}-u\"")),
            mtime: self.mtime,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    Proceed,
    NotModified,
    PreconditionFailed,
}

/// The request's conditional headers, as far as they are present.
#[derive(Debug, Default, Clone, Copy)]
pub struct Conditions<'a> {
    pub if_match: Option<&'a [u8]>,
    pub if_none_match: Option<&'a [u8]>,
    pub if_modified_since: Option<&'a [u8]>,
    pub if_unmodified_since: Option<&'a [u8]>,
}

/// Evaluates preconditions in the order of RFC 9110 section 13.2.2, for GET or HEAD.
pub fn evaluate(c: &Conditions<'_>, v: &Validators) -> Outcome {
    if let Some(im) = c.if_match {
        if !matches_list(im, v.etag(), true) {
            return Outcome::PreconditionFailed;
        }
    } else if let Some(date) = c.if_unmodified_since.and_then(httpdate::parse) {
        if v.mtime > date {
            return Outcome::PreconditionFailed;
        }
    }
    if let Some(inm) = c.if_none_match {
        if matches_list(inm, v.etag(), false) {
            return Outcome::NotModified;
        }
    } else if let Some(date) = c.if_modified_since.and_then(httpdate::parse) {
        if v.mtime <= date {
            return Outcome::NotModified;
        }
    }
    Outcome::Proceed
}

/// Whether `*` or any tag in a comma-separated list matches `etag`.
fn matches_list(list: &[u8], etag: &str, strong: bool) -> bool {
    let list = trim(list);
    if list == b"*" {
        return true;
    }
    list.split(|&b| b == b',')
        .map(trim)
        .any(|tag| tag_matches(tag, etag, strong))
}

/// Strong comparison needs both tags strong; weak comparison ignores `W/`.
pub fn tag_matches(tag: &[u8], etag: &str, strong: bool) -> bool {
    let (weak, opaque) = match tag.strip_prefix(b"W/") {
        Some(rest) => (true, rest),
        None => (false, tag),
    };
    !(strong && weak) && opaque == etag.as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Outcome::*;

    fn v() -> Validators {
        Validators::new(0x10, 0x20, 1_000_000, 5)
    }

    fn eval(c: Conditions<'_>) -> Outcome {
        evaluate(&c, &v())
    }

    #[test]
    fn etag_shape() {
        assert_eq!(v().etag(), "\"10-20-f4240.5\"");
        assert_eq!(
            v().head_lines(),
            b"\r\nLast-Modified: Mon, 12 Jan 1970 13:46:40 GMT\r\nETag: \"10-20-f4240.5\""
        );
        assert_eq!(v().other_representation().etag(), "\"10-20-f4240.5-u\"");
    }

    #[test]
    fn if_none_match() {
        let tag = v().etag().to_string();
        let weak = format!("W/{tag}");
        let list = format!("\"x\", {tag}");
        assert_eq!(
            eval(Conditions {
                if_none_match: Some(tag.as_bytes()),
                ..Default::default()
            }),
            NotModified
        );
        assert_eq!(
            eval(Conditions {
                if_none_match: Some(weak.as_bytes()),
                ..Default::default()
            }),
            NotModified
        );
        assert_eq!(
            eval(Conditions {
                if_none_match: Some(list.as_bytes()),
                ..Default::default()
            }),
            NotModified
        );
        assert_eq!(
            eval(Conditions {
                if_none_match: Some(b"*"),
                ..Default::default()
            }),
            NotModified
        );
        assert_eq!(
            eval(Conditions {
                if_none_match: Some(b"\"other\""),
                ..Default::default()
            }),
            Proceed
        );
    }

    #[test]
    fn if_none_match_wins_over_if_modified_since() {
        let date = httpdate::format(2_000_000);
        let c = Conditions {
            if_none_match: Some(b"\"other\""),
            if_modified_since: Some(&date),
            ..Default::default()
        };
        assert_eq!(eval(c), Proceed);
    }

    #[test]
    fn if_modified_since() {
        let later = httpdate::format(1_000_000);
        let earlier = httpdate::format(999_999);
        assert_eq!(
            eval(Conditions {
                if_modified_since: Some(&later),
                ..Default::default()
            }),
            NotModified
        );
        assert_eq!(
            eval(Conditions {
                if_modified_since: Some(&earlier),
                ..Default::default()
            }),
            Proceed
        );
        assert_eq!(
            eval(Conditions {
                if_modified_since: Some(b"garbage"),
                ..Default::default()
            }),
            Proceed
        );
    }

    #[test]
    fn if_match_and_if_unmodified_since() {
        let tag = v().etag().to_string();
        let weak = format!("W/{tag}");
        assert_eq!(
            eval(Conditions {
                if_match: Some(tag.as_bytes()),
                ..Default::default()
            }),
            Proceed
        );
        assert_eq!(
            eval(Conditions {
                if_match: Some(b"*"),
                ..Default::default()
            }),
            Proceed
        );
        assert_eq!(
            eval(Conditions {
                if_match: Some(weak.as_bytes()),
                ..Default::default()
            }),
            PreconditionFailed
        );
        assert_eq!(
            eval(Conditions {
                if_match: Some(b"\"x\""),
                ..Default::default()
            }),
            PreconditionFailed
        );
        let earlier = httpdate::format(999_999);
        assert_eq!(
            eval(Conditions {
                if_unmodified_since: Some(&earlier),
                ..Default::default()
            }),
            PreconditionFailed
        );
        let later = httpdate::format(1_000_000);
        assert_eq!(
            eval(Conditions {
                if_unmodified_since: Some(&later),
                ..Default::default()
            }),
            Proceed
        );
    }
}
