//! Request target to a clean relative path: percent-decoded, normalised, and
//! unable to name anything outside the root. An encoded slash (`%2F`) is
//! refused, not decoded.

use crate::limits::MAX_PATH;

/// A decoded path relative to the root: segments joined by `/`, no leading
/// slash, no empty, `.` or `..` segments, no NUL, no control bytes, valid UTF-8.
/// Empty means the root itself.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CleanPath {
    /// The path as the client sees it: `/a/b`, or `/a/b/` when asked as a
    /// directory; `/` for the root. The relative path is a slice of it.
    shown: heapless::String<{ MAX_PATH + 2 }>,
    /// The request asked for a directory (`/docs/`).
    pub trailing_slash: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PathError {
    /// Malformed or hostile: 400.
    BadRequest,
    /// Well-formed but hidden (a dotfile): 404.
    Hidden,
    /// Longer than the server can name: 414.
    TooLong,
}

impl CleanPath {
    pub fn as_str(&self) -> &str {
        let rel = self.shown.get(1..).unwrap_or_default();
        match rel.len().checked_sub(1) {
            Some(last) if self.trailing_slash && rel.as_bytes()[last] == b'/' => &rel[..last],
            _ => rel,
        }
    }

    pub fn is_root(&self) -> bool {
        self.shown.len() == 1
    }

    /// The path as the client sees it: `/a/b`, or `/a/b/` when asked as a directory.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The last segment, where the extension and the hidden-file rules look.
    pub fn file_name(&self) -> &str {
        self.as_str().rsplit('/').next().unwrap_or("")
    }
}

/// Splits `path?query` and returns the path part and the query (without `?`).
pub fn split_query(target: &[u8]) -> (&[u8], Option<&[u8]>) {
    match target.iter().position(|&b| b == b'?') {
        Some(i) => (&target[..i], Some(&target[i + 1..])),
        None => (target, None),
    }
}

/// Decodes and normalises an origin-form path (without its query).
pub fn clean(raw: &[u8]) -> Result<CleanPath, PathError> {
    let mut path = CleanPath::default();
    clean_into(raw, &mut path)?;
    Ok(path)
}

/// `clean`, written into `out`: a CleanPath is over 2 KiB, and the request
/// path should not pay for copies of it.
pub fn clean_into(raw: &[u8], out: &mut CleanPath) -> Result<(), PathError> {
    if clean_plain(raw, out) {
        return Ok(());
    }
    clean_general(raw, out)
}

/// The common case: a path with nothing to decode or normalise (printable
/// ASCII without `%`, `#` or `\`, no empty segment, none starting with a
/// dot) is its own clean form. False: leave it to `clean_general`, which
/// would give the same answer for any path accepted here.
fn clean_plain(raw: &[u8], out: &mut CleanPath) -> bool {
    // The general decoder takes at most MAX_PATH bytes, the leading slash included.
    if raw.first() != Some(&b'/') || raw.len() > MAX_PATH {
        return false;
    }
    let mut prev = 0;
    for &b in raw {
        let odd = !(0x21..=0x7e).contains(&b) || matches!(b, b'%' | b'#' | b'\\');
        if odd || (prev == b'/' && matches!(b, b'/' | b'.')) {
            return false;
        }
        prev = b;
    }
    // SAFETY: every byte was checked above to be printable ASCII, which is
    // valid UTF-8 (this runs on every request: a second scan costs).
    let text = unsafe { std::str::from_utf8_unchecked(raw) };
    out.shown.clear();
    if out.shown.push_str(text).is_err() {
        return false;
    }
    out.trailing_slash = raw.ends_with(b"/");
    true
}

/// The full decoder: percent-decoding, normalising and every refusal.
/// Public for the fuzz target, which checks it against `clean_into`.
pub fn clean_general(raw: &[u8], out: &mut CleanPath) -> Result<(), PathError> {
    if raw.first() != Some(&b'/') {
        return Err(PathError::BadRequest);
    }
    let mut decoded = heapless::Vec::<u8, MAX_PATH>::new();
    let mut i = 0;
    while i < raw.len() {
        let b = match raw[i] {
            b'%' => {
                let hi = raw.get(i + 1).and_then(|&c| hex(c));
                let lo = raw.get(i + 2).and_then(|&c| hex(c));
                i += 2;
                match (hi, lo) {
                    // An encoded slash: a backend given the target as sent
                    // may or may not split there, so no rule could be sure
                    // which path it names.
                    (Some(h), Some(l)) if h << 4 | l == b'/' => return Err(PathError::BadRequest),
                    (Some(h), Some(l)) => h << 4 | l,
                    _ => return Err(PathError::BadRequest),
                }
            }
            b'#' => return Err(PathError::BadRequest),
            c => c,
        };
        if b < 0x20 || b == 0x7f || b == b'\\' {
            return Err(PathError::BadRequest);
        }
        decoded.push(b).map_err(|_| PathError::TooLong)?;
        i += 1;
    }
    let text = std::str::from_utf8(&decoded).map_err(|_| PathError::BadRequest)?;
    let shown = &mut out.shown;
    shown.clear();
    let _ = shown.push('/');
    for (n, segment) in text
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .enumerate()
    {
        if segment == ".." {
            return Err(PathError::BadRequest);
        }
        if segment.starts_with('.') && !(n == 0 && segment == ".well-known") {
            return Err(PathError::Hidden);
        }
        if n > 0 {
            shown.push('/').map_err(|_| PathError::TooLong)?;
        }
        shown.push_str(segment).map_err(|_| PathError::TooLong)?;
    }
    // The relative part (without the leading slash) is what must fit MAX_PATH.
    if shown.len() - 1 > MAX_PATH {
        return Err(PathError::TooLong);
    }
    out.trailing_slash = text.ends_with('/');
    if out.trailing_slash && shown.len() > 1 {
        let _ = shown.push('/');
    }
    Ok(())
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Whether `..` appears anywhere in `s`: config paths refuse it outright.
pub fn has_dot_dot(s: &str) -> bool {
    s.as_bytes().windows(2).any(|w| w == b"..")
}

/// Appends `s` percent-encoded for use in a path (keeps unreserved and `/`).
pub fn encode_into(out: &mut String, s: &str) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(char::from(b"0123456789ABCDEF"[(b >> 4) as usize]));
            out.push(char::from(b"0123456789ABCDEF"[(b & 15) as usize]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PathError::*;

    fn ok(raw: &str) -> String {
        clean(raw.as_bytes()).unwrap().as_str().to_string()
    }

    #[test]
    fn normalises() {
        assert_eq!(ok("/"), "");
        assert_eq!(ok("/index.html"), "index.html");
        assert_eq!(ok("//a///b/./c"), "a/b/c");
        assert_eq!(ok("/a%20b/%C3%A9.txt"), "a b/é.txt");
        assert_eq!(ok("/.well-known/security.txt"), ".well-known/security.txt");
        assert_eq!(ok("/%252e%252e/x"), "%2e%2e/x");
        assert!(clean(b"/docs/").unwrap().trailing_slash);
        assert!(!clean(b"/docs").unwrap().trailing_slash);
    }

    #[test]
    fn the_plain_path_agrees_with_the_general_one() {
        let fits = format!("/{}", "a".repeat(MAX_PATH - 1));
        let long = format!("/{}", "a".repeat(MAX_PATH));
        let longer = format!("{long}/");
        let cases = [
            "/",
            "/index.html",
            "/a/b/",
            "/a/b",
            "/docs/",
            "/a.b.c",
            "/a/b.c/d~e!$&'()*+,;=:@",
            "//a",
            "/a//b",
            "/./a",
            "/a/.",
            "/a/..",
            "/.well-known/x",
            "/.env",
            "/a b",
            "/a%41",
            "/a#b",
            "/a\\b",
            "/é",
            "a",
            "",
            "/a?b",
            &fits,
            &long,
            &longer,
        ];
        for raw in cases {
            let mut general = CleanPath::default();
            let expected = clean_general(raw.as_bytes(), &mut general).map(|()| general);
            let mut plain = CleanPath::default();
            if clean_plain(raw.as_bytes(), &mut plain) {
                assert_eq!(Ok(plain), expected, "{raw:?}");
            }
            assert_eq!(clean(raw.as_bytes()), expected, "{raw:?}");
        }
        let mut p = CleanPath::default();
        assert!(
            clean_plain(b"/index.html", &mut p),
            "the common case takes the plain path"
        );
    }

    #[test]
    fn refuses_traversal_in_any_encoding() {
        for raw in [
            "/..",
            "/../etc/passwd",
            "/a/../../b",
            "/%2e%2e/x",
            "/%2E%2E%2Fetc",
            "/a/%2e%2e%2f%2e%2e/b",
            "/..%2f..%2fetc",
            "/a%2fb",
            "/a%2Fb",
            "/api%2Fsettings",
            "/a\\..\\b",
            "/%5c..%5cb",
            "/a%00b",
            "/%00",
            "/a%0d%0aX",
            "/%ff",
            "/%c0%ae%c0%ae/",
            "/%zz",
            "/%2",
            "relative",
            "",
            "/a#b",
        ] {
            let r = clean(raw.as_bytes());
            assert!(matches!(r, Err(BadRequest)), "{raw:?} gave {r:?}");
        }
    }

    #[test]
    fn hides_dotfiles() {
        for raw in [
            "/.git/config",
            "/.htpasswd",
            "/a/.env",
            "/%2eenv",
            "/a/.well-known/x",
        ] {
            assert_eq!(clean(raw.as_bytes()), Err(Hidden), "{raw}");
        }
    }

    #[test]
    fn too_long_is_414() {
        let long = format!("/{}", "a".repeat(MAX_PATH + 1));
        assert_eq!(clean(long.as_bytes()), Err(TooLong));
    }

    #[test]
    fn encodes_for_links() {
        let mut s = String::new();
        encode_into(&mut s, "a b/<é>?#%");
        assert_eq!(s, "a%20b/%3C%C3%A9%3E%3F%23%25");
    }
}
