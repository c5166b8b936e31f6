//! Per-path rules from the config: Cache-Control and extra headers by
//! pattern, redirects, error pages, the SPA fallback and directory listing.
//! Built-in defaults suit a device UI; the config adds to or overrides them.

use crate::http::header::{RuleLine, RuleLines};
use crate::http::status::Status;

/// Which paths a rule applies to.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// `*` globs over the whole path (`/assets/*`) when it contains `/`,
    /// else over the last segment (`*.html`).
    Glob(String),
    /// `@hashed`: names carrying a content hash, like `app.3f2a9c1b.js`.
    Hashed,
    /// `*` alone: everything (the default header rules; no matching per request).
    Any,
}

impl Pattern {
    fn parse(s: &str) -> Pattern {
        if s == "@hashed" {
            Pattern::Hashed
        } else if s == "*" || s == "/*" {
            Pattern::Any
        } else {
            Pattern::Glob(s.trim_start_matches('/').to_string())
        }
    }

    /// Matches a path relative to the root (a leading `/` is ignored).
    pub fn matches(&self, path: &str) -> bool {
        let path = path.trim_start_matches('/');
        let name = path.rsplit('/').next().unwrap_or(path);
        match self {
            Pattern::Any => true,
            Pattern::Hashed => has_content_hash(name),
            Pattern::Glob(g) if g.contains('/') => glob(g.as_bytes(), path.as_bytes()),
            Pattern::Glob(g) => glob(g.as_bytes(), name.as_bytes()),
        }
    }
}

/// `*` matches any run of bytes; everything else matches itself.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|i| glob(rest, &text[i..])),
        Some((&c, rest)) => text.first() == Some(&c) && glob(rest, &text[1..]),
    }
}

/// A name carries a content hash when a dot- or dash-separated part of its
/// stem (the name without its extension) is 8 to 64 letters, digits or `_`, with both a digit and a
/// letter (a date like `20240101` is not a hash).
pub fn has_content_hash(name: &str) -> bool {
    let Some((stem, _ext)) = name.rsplit_once('.') else {
        return false;
    };
    stem.split(['.', '-']).any(is_hash)
}

fn is_hash(part: &str) -> bool {
    (8..=64).contains(&part.len())
        && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && part.bytes().any(|b| b.is_ascii_digit())
        && part.bytes().any(|b| b.is_ascii_alphabetic())
}

#[derive(Debug, Clone, PartialEq)]
pub enum HeaderAction {
    /// Replace any header of the line's name with the line.
    Set(RuleLine),
    Remove(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Redirect {
    /// Exact path, or a prefix when `prefix` is set (`/docs/*` in the config).
    pub from: String,
    pub prefix: bool,
    /// Target; with a prefix rule, a trailing `*` takes the rest of the path.
    pub to: String,
    pub status: Status,
}

/// The built-in header rules, applied before the config's.
const DEFAULT_HEADERS: [(&str, &str); 3] = [
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),
];

/// Header rules a config may add: `Matched` keeps one bit for every rule,
/// the built-in ones included, in a u64.
pub const MAX_HEADER_RULES: usize = 64 - DEFAULT_HEADERS.len();

/// Which rules one path matches: the first cache rule (by index) and a bit
/// per header rule. Paths that match the same rules get the same head
/// lines, so this is what `RuleLines` are kept by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Matched {
    cache: Option<usize>,
    headers: u64,
}

#[derive(Debug)]
pub struct Rules {
    /// First match wins: the config's rules, then the defaults. Each value
    /// is kept as its Cache-Control line.
    pub cache: Vec<(Pattern, Option<RuleLine>)>,
    /// All matching rules apply in order: the defaults, then the config's.
    pub headers: Vec<(Pattern, HeaderAction)>,
    pub redirects: Vec<Redirect>,
    pub error_pages: Vec<(Status, String)>,
    pub spa_fallback: Option<String>,
    pub listing: bool,
    /// Where the built-in cache defaults start in `cache`.
    defaults_from: usize,
}

impl Default for Rules {
    fn default() -> Self {
        let line = |v: &str| Some(RuleLine::new("Cache-Control", v));
        let cache = vec![
            (Pattern::Hashed, line("public, max-age=31536000, immutable")),
            (Pattern::Glob("*.html".into()), line("no-cache")),
            (Pattern::Glob("*.htm".into()), line("no-cache")),
            (Pattern::Any, line("max-age=300")),
        ];
        let set = |(n, v): (&str, &str)| (Pattern::Any, HeaderAction::Set(RuleLine::new(n, v)));
        Rules {
            cache,
            headers: DEFAULT_HEADERS.into_iter().map(set).collect(),
            redirects: Vec::new(),
            error_pages: Vec::new(),
            spa_fallback: None,
            listing: false,
            defaults_from: 0,
        }
    }
}

impl Rules {
    /// Takes a setting this module owns; `Ok(false)` if the key is not one of them.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "cache" => self.add_cache(value)?,
            "header" => self.add_header(value)?,
            "redirect" => self.add_redirect(value)?,
            "error-page" => {
                let (code, path) =
                    split2(value).ok_or("expected STATUS /path, e.g. `404 /404.html`")?;
                let status = code
                    .parse()
                    .ok()
                    .and_then(Status::from_code)
                    .filter(|s| s.code() >= 400)
                    .ok_or(format!("`{code}` is not an error status Marmoset sends"))?;
                self.error_pages.retain(|(s, _)| *s != status);
                self.error_pages.push((status, site_path(path)?));
            }
            "spa-fallback" => {
                self.spa_fallback = if value == "off" {
                    None
                } else {
                    Some(site_path(value)?)
                };
            }
            "listing" => self.listing = crate::values::parse_bool(value)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn add_cache(&mut self, value: &str) -> Result<(), String> {
        let (pattern, directive) =
            split2(value).ok_or("expected PATTERN VALUE, e.g. `*.css max-age=600`")?;
        let pattern = Pattern::parse(pattern);
        let immutable = directive
            .split(',')
            .any(|d| d.trim().eq_ignore_ascii_case("immutable"));
        if immutable && pattern != Pattern::Hashed {
            return Err("`immutable` only with the @hashed pattern: a name without a content hash must be revalidated".into());
        }
        if directive.bytes().any(|b| b.is_ascii_control()) {
            return Err("control characters in a header value".into());
        }
        let directive = (directive != "off").then(|| RuleLine::new("Cache-Control", directive));
        self.cache.insert(self.defaults_from, (pattern, directive));
        self.defaults_from += 1;
        Ok(())
    }

    fn add_header(&mut self, value: &str) -> Result<(), String> {
        let (pattern, rest) =
            split2(value).ok_or("expected PATTERN Name: value, or PATTERN -Name")?;
        let action = if let Some(name) = rest.strip_prefix('-') {
            HeaderAction::Remove(rule_name(name)?)
        } else {
            let (name, v) = rest.split_once(':').ok_or("expected `Name: value`")?;
            let v = v.trim();
            if v.is_empty() || v.bytes().any(|b| b.is_ascii_control()) {
                return Err("a header value must be non-empty, without control characters".into());
            }
            HeaderAction::Set(RuleLine::new(&rule_name(name)?, v))
        };
        if self.headers.len() >= DEFAULT_HEADERS.len() + MAX_HEADER_RULES {
            return Err(format!("at most {MAX_HEADER_RULES} header rules"));
        }
        self.headers.push((Pattern::parse(pattern), action));
        Ok(())
    }

    fn add_redirect(&mut self, value: &str) -> Result<(), String> {
        let mut parts = value.split_whitespace();
        let (Some(from), Some(to)) = (parts.next(), parts.next()) else {
            return Err("expected FROM TO [STATUS], e.g. `/old /new 301`".into());
        };
        let status = match parts.next() {
            None => Status::Found,
            Some(code) => code
                .parse()
                .ok()
                .and_then(Status::from_code)
                .filter(|s| matches!(s.code(), 301 | 302 | 307 | 308))
                .ok_or(format!("`{code}` is not 301, 302, 307 or 308"))?,
        };
        if parts.next().is_some() {
            return Err("too many words".into());
        }
        let (from, prefix) = match from.strip_suffix('*') {
            Some(p) => (p, true),
            None => (from, false),
        };
        if !from.starts_with('/') || from.contains('*') {
            return Err(format!(
                "`{from}` must be a path starting with /, with `*` only at the end"
            ));
        }
        if !to.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(
                "the target must be a URL or path without spaces or control characters".into(),
            );
        }
        self.redirects.push(Redirect {
            from: from.to_string(),
            prefix,
            to: to.to_string(),
            status,
        });
        Ok(())
    }

    /// Which rules `path` matches.
    pub fn matched(&self, path: &str) -> Matched {
        let mut headers = 0;
        for (i, (pattern, _)) in self.headers.iter().enumerate() {
            if pattern.matches(path) {
                headers |= 1 << i;
            }
        }
        Matched {
            cache: self.cache.iter().position(|(p, _)| p.matches(path)),
            headers,
        }
    }

    /// What the rules a path matched do to a response for it.
    pub fn lines_for(&self, m: Matched) -> RuleLines {
        let mut cache_control = self.cache_line(m);
        let mut names: Vec<&str> = Vec::new();
        let mut lines: Vec<&RuleLine> = Vec::new();
        let actions = self.headers.iter().enumerate();
        for (_, (_, action)) in actions.filter(|(i, _)| m.headers & (1 << i) != 0) {
            let (name, line) = match action {
                HeaderAction::Set(line) => (line.name(), Some(line)),
                HeaderAction::Remove(name) => (name.as_str(), None),
            };
            // A later rule for the same name replaces or removes an earlier one's line.
            lines.retain(|l| !l.name().eq_ignore_ascii_case(name));
            if name.eq_ignore_ascii_case("cache-control") {
                cache_control = None;
            }
            if !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                names.push(name);
            }
            lines.extend(line);
        }
        RuleLines::new(names, cache_control, &lines)
    }

    /// The Cache-Control value for a path, if any (what the tests read; the
    /// server uses the whole line through `lines_for`).
    #[cfg(test)]
    fn cache_control(&self, path: &str) -> Option<&str> {
        self.cache_line(self.matched(path)).map(RuleLine::value)
    }

    /// The Cache-Control line of the cache rule a path matched, if it sets one.
    fn cache_line(&self, m: Matched) -> Option<&RuleLine> {
        m.cache
            .and_then(|i| self.cache.get(i))
            .and_then(|(_, line)| line.as_ref())
    }

    /// The redirect for a path (decoded, as `CleanPath::shown` gives it):
    /// its Location and status.
    pub fn redirect(&self, path: &str) -> Option<(String, Status)> {
        self.redirects.iter().find_map(|r| {
            if r.prefix {
                let rest = path.strip_prefix(&r.from)?;
                let location = match r.to.strip_suffix('*') {
                    Some(base) => {
                        // `/old*` to `/*` would make `/old/host` into
                        // `//host`, a link to another site: one slash is enough.
                        let rest = if base.ends_with('/') {
                            rest.strip_prefix('/').unwrap_or(rest)
                        } else {
                            rest
                        };
                        // The path was decoded: encoded again, a `%3F` or
                        // `%23` cannot turn into a query or a fragment, nor
                        // a space or `"` into a broken header value.
                        let mut location = String::with_capacity(base.len() + rest.len() * 3);
                        location.push_str(base);
                        crate::http::path::encode_into(&mut location, rest);
                        location
                    }
                    None => r.to.clone(),
                };
                Some((location, r.status))
            } else {
                (path == r.from).then(|| (r.to.clone(), r.status))
            }
        })
    }

    pub fn error_page(&self, status: Status) -> Option<&str> {
        self.error_pages
            .iter()
            .find(|(s, _)| *s == status)
            .map(|(_, p)| p.as_str())
    }
}

fn split2(value: &str) -> Option<(&str, &str)> {
    let (a, b) = value.split_once(|c: char| c.is_ascii_whitespace())?;
    let b = b.trim();
    (!b.is_empty()).then_some((a, b))
}

/// A header name a rule may set or remove: not one the server writes from
/// the answer itself, which a rule's line would contradict (a second
/// Content-Length breaks the framing, a second Content-Type or ETag leaves
/// the browser to pick one).
fn rule_name(name: &str) -> Result<String, String> {
    const OWN: [(&str, &str); 18] = [
        ("Content-Length", "the framing"),
        ("Transfer-Encoding", "the framing"),
        ("Trailer", "the framing"),
        ("Connection", "the connection"),
        ("Keep-Alive", "the connection"),
        ("Upgrade", "the connection"),
        ("Date", "its clock"),
        ("Server", "`server-name`"),
        ("Content-Type", "the file name's extension"),
        ("Content-Encoding", "the variant sent"),
        ("ETag", "the file"),
        ("Last-Modified", "the file"),
        ("Accept-Ranges", "the file"),
        ("Content-Range", "the range sent"),
        ("Location", "the status"),
        ("Allow", "the status"),
        ("WWW-Authenticate", "the status"),
        ("Retry-After", "the status"),
    ];
    let name = header_name(name)?;
    match OWN.iter().find(|(own, _)| own.eq_ignore_ascii_case(&name)) {
        Some((own, from)) => Err(format!(
            "`{own}` is the server's to write (from {from}); a rule cannot set or remove it"
        )),
        None => Ok(name),
    }
}

fn header_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    let token = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(format!("`{name}` is not a header name"));
    }
    Ok(name.to_string())
}

fn site_path(p: &str) -> Result<String, String> {
    if !p.starts_with('/')
        || crate::http::path::has_dot_dot(p)
        || p.bytes().any(|b| b.is_ascii_control() || b == b' ')
    {
        return Err(format!(
            "`{p}` must be a path under the root, starting with /"
        ));
    }
    Ok(p.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::header::HeaderLine;

    #[test]
    fn content_hashes() {
        for yes in [
            "app.3f2a9c1b.js",
            "index-BkxQ3ZfA.js",
            "chunk.a1b2c3d4e5f6.min.js",
            "style.0bbdcf8b.css",
            "x.deadbeef1.woff2",
            "3f2a9c1b.js",
        ] {
            assert!(has_content_hash(yes), "{yes}");
        }
        for no in [
            "app.js",
            "index.html",
            "polyfills-20231105.js",
            "jquery-3.6.0.min.js",
            "main-component.js",
            "deadbeef1",
        ] {
            assert!(!has_content_hash(no), "{no}");
        }
    }

    #[test]
    fn patterns() {
        assert!(Pattern::parse("*.html").matches("/a/b/index.html"));
        assert!(!Pattern::parse("*.html").matches("/a.html/x.js"));
        assert!(Pattern::parse("/assets/*").matches("/assets/x/y.png"));
        assert!(!Pattern::parse("/assets/*").matches("/x/assets/y.png"));
        assert!(Pattern::parse("*").matches("/anything"));
        assert!(Pattern::parse("@hashed").matches("/js/app.3f2a9c1b.js"));
    }

    #[test]
    fn default_cache_rules_suit_a_ui() {
        let r = Rules::default();
        assert_eq!(
            r.cache_control("/app.3f2a9c1b.js"),
            Some("public, max-age=31536000, immutable")
        );
        assert_eq!(r.cache_control("/index.html"), Some("no-cache"));
        assert_eq!(r.cache_control("/app.js"), Some("max-age=300"));
    }

    #[test]
    fn config_cache_rules_come_first_and_immutable_needs_a_hash() {
        let mut r = Rules::default();
        r.apply("cache", "/api/* no-store").unwrap();
        r.apply("cache", "*.png off").unwrap();
        assert_eq!(r.cache_control("/api/x.json"), Some("no-store"));
        assert_eq!(r.cache_control("/logo.png"), None);
        assert_eq!(r.cache_control("/index.html"), Some("no-cache"));
        assert!(
            r.apply("cache", "*.js public, immutable")
                .unwrap_err()
                .contains("@hashed")
        );
        // Directives are tokens, and case-insensitive (RFC 9111 section 5.2).
        assert!(r.apply("cache", "*.css max-age=9, Immutable").is_err());
        assert!(r.apply("cache", "*.css max-age=9").is_ok());
    }

    #[test]
    fn redirects() {
        let mut r = Rules::default();
        r.apply("redirect", "/old /new 301").unwrap();
        r.apply("redirect", "/docs/* /manual/* 308").unwrap();
        r.apply("redirect", "/gone/* https://example.com/").unwrap();
        assert_eq!(
            r.redirect("/old"),
            Some(("/new".into(), Status::MovedPermanently))
        );
        assert_eq!(r.redirect("/old/x"), None);
        assert_eq!(
            r.redirect("/docs/a/b.html"),
            Some(("/manual/a/b.html".into(), Status::PermanentRedirect))
        );
        assert_eq!(
            r.redirect("/gone/x"),
            Some(("https://example.com/".into(), Status::Found))
        );
        assert!(r.apply("redirect", "/a /b 303").is_err());
        assert!(r.apply("redirect", "a /b").is_err());
    }

    #[test]
    fn a_config_may_add_61_header_rules_and_every_one_applies() {
        let mut r = Rules::default();
        for i in 0..MAX_HEADER_RULES {
            r.apply("header", &format!("* X-Rule-{i}: {i}")).unwrap();
        }
        assert_eq!(
            r.apply("header", "* X-One-Too-Many: x"),
            Err("at most 61 header rules".into())
        );
        let rules = &r;
        let head = written(rules, "a.html", &[], false);
        assert_eq!(
            head.matches("\r\n").count(),
            64,
            "the built-in three and all 61"
        );
        assert!(head.ends_with("\r\nX-Rule-60: 60"));
    }

    /// The head lines `own` get for `path` under `rules`.
    fn written(rules: &Rules, path: &str, own: &[HeaderLine], is_file: bool) -> String {
        let mut out = Vec::new();
        rules
            .lines_for(rules.matched(path))
            .write(&mut out, own, is_file);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn rule_lines_replace_and_remove_and_come_after_the_response_lines() {
        let mut r = Rules::default();
        r.apply("header", "* -X-Frame-Options").unwrap();
        r.apply("header", "*.svg Vary: Origin").unwrap();
        r.apply("header", "*.svg X-A: 1").unwrap();
        r.apply("header", "*.svg x-a: 2").unwrap();
        let rules = &r;
        let vary = HeaderLine::new("\r\nVary: Accept-Encoding");
        let gzip = HeaderLine::new("\r\nContent-Encoding: gzip");
        let defaults = "\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: same-origin";
        assert_eq!(
            written(rules, "a.svg", &[gzip, vary], true),
            format!(
                "\r\nContent-Encoding: gzip\r\nCache-Control: max-age=300{defaults}\r\nVary: Origin\r\nx-a: 2"
            )
        );
        assert_eq!(
            written(rules, "a.html", &[vary], true),
            format!("\r\nVary: Accept-Encoding\r\nCache-Control: no-cache{defaults}")
        );
        // Not a file: no Cache-Control from the rules.
        assert_eq!(written(rules, "a.html", &[], false), defaults);
        // The response's own Cache-Control stands.
        let no_store = HeaderLine::new("\r\nCache-Control: no-store");
        assert_eq!(
            written(rules, "a.html", &[no_store], true),
            format!("\r\nCache-Control: no-store{defaults}")
        );
    }

    #[test]
    fn a_header_rule_for_cache_control_replaces_or_removes_the_cache_rule() {
        let mut r = Rules::default();
        r.apply("header", "*.js Cache-Control: private").unwrap();
        r.apply("header", "*.css -Cache-Control").unwrap();
        let rules = &r;
        let cc = |path| {
            written(rules, path, &[], true)
                .matches("Cache-Control")
                .count()
        };
        assert!(written(rules, "a.js", &[], true).ends_with("\r\nCache-Control: private"));
        assert_eq!(cc("a.js"), 1);
        assert_eq!(cc("a.css"), 0);
        assert_eq!(cc("a.png"), 1);
    }

    #[test]
    fn header_rules_parse() {
        let mut r = Rules::default();
        r.apply("header", "* -X-Frame-Options").unwrap();
        r.apply(
            "header",
            "*.svg Content-Security-Policy: default-src 'none'",
        )
        .unwrap();
        assert_eq!(r.headers.len(), 5);
        assert!(r.apply("header", "* Bad Name: x").is_err());
        assert!(r.apply("header", "* X-A:").is_err());
        // What the server writes from the answer itself is not a rule's.
        for rule in [
            "* Content-Length: 5",
            "* transfer-encoding: chunked",
            "* Connection: close",
            "*.mp4 Content-Type: video/mp4",
            "* -Content-Type",
            "* -ETag",
            "* Server: x",
            "* Date: x",
            "*.gz -Content-Encoding",
        ] {
            let e = r.apply("header", rule).unwrap_err();
            assert!(e.contains("is the server's to write"), "{rule}: {e}");
        }
        assert_eq!(
            r.apply("header", "* content-length: 5").unwrap_err(),
            "`Content-Length` is the server's to write (from the framing); a rule cannot set or remove it"
        );
        assert_eq!(r.headers.len(), 5);
    }

    #[test]
    fn redirects_encode_what_they_substitute() {
        let mut r = Rules::default();
        r.apply("redirect", "/old/* /new/*").unwrap();
        r.apply("redirect", "/x* https://example.com/*").unwrap();
        r.apply("redirect", "/exact /a%20b").unwrap();
        let loc = |p: &str| r.redirect(p).map(|(l, _)| l);
        assert_eq!(loc("/old/a b").as_deref(), Some("/new/a%20b"));
        assert_eq!(loc("/old/a?b#c").as_deref(), Some("/new/a%3Fb%23c"));
        assert_eq!(loc("/old/\"<é>").as_deref(), Some("/new/%22%3C%C3%A9%3E"));
        assert_eq!(loc("/old/a/b.html").as_deref(), Some("/new/a/b.html"));
        assert_eq!(loc("/x/y").as_deref(), Some("https://example.com/y"));
        assert_eq!(loc("/x").as_deref(), Some("https://example.com/"));
        // The config's own target is taken as written.
        assert_eq!(loc("/exact").as_deref(), Some("/a%20b"));
    }

    #[test]
    fn error_pages_and_fallback() {
        let mut r = Rules::default();
        r.apply("error-page", "404 /404.html").unwrap();
        r.apply("spa-fallback", "/index.html").unwrap();
        assert_eq!(r.error_page(Status::NotFound), Some("/404.html"));
        assert!(r.apply("error-page", "200 /ok.html").is_err());
        assert!(r.apply("error-page", "404 ../x").is_err());
        assert!(r.apply("error-page", "404 /a/../x").is_err());
    }
}
