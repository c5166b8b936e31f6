//! What a rule's path prefix covers. Rules that protect (`deny`, `auth`,
//! the cross-origin guard) cover generously: a backend may route a path
//! the rule did not spell the same way to the handler it guards. Rules
//! that open (`allow`, `cross-origin PREFIX allow`) cover only what they
//! name, so that a loose match never lets a request past a protecting rule.
//!
//! Both kinds look at two spellings of a path: as decoded, and as a servlet
//! container routes it (`routed`). Tomcat and Jetty drop `;...` from every
//! segment and then merge the empty segments that leaves, so
//! `/api/;/settings` and `/api/;jsessionid=1/settings` reach the handler of
//! `/api/settings`. A protecting rule covers a path when it covers either
//! spelling; an opening rule only when it covers both. Such paths are
//! matched rather than refused: a servlet backend writes `;jsessionid=...`
//! into its own links, which must keep working behind the rules.

use std::borrow::Cow;

/// Whether a protecting rule for `prefix` covers `path` (decoded and
/// normalised, with its leading `/`). ASCII case is ignored (case-insensitive
/// routers, such as Express's default, send `/API/Settings` to `/api/settings`).
/// A prefix without a trailing `/` covers every path that starts with it,
/// as an nginx prefix location does (`/api/settings` covers
/// `/api/settings.json`, `/api/settings;jsessionid=x`, `/api/settings ` and
/// `/api/settings2`). One with a trailing `/` covers the paths under it, and
/// the name before it followed by anything that does not continue that name
/// (`/admin/` covers `/admin`, `/admin;x` and `/admin.json`, not `/administrator`).
pub fn covers(path: &str, prefix: &str) -> bool {
    covers_spelled(path, prefix) || routed(path).is_some_and(|r| covers_spelled(&r, prefix))
}

/// The path as a backend that drops path parameters routes it: `;` and
/// what follows it up to the next `/` removed from every segment, and the
/// segments left empty dropped (`/a;x/;/b;y/` is `/a/b/`). None when the
/// path has no `;`, so that it is its own routed spelling.
pub fn routed(path: &str) -> Option<Cow<'_, str>> {
    if !path.contains(';') {
        return None;
    }
    let mut out = String::with_capacity(path.len());
    for segment in path.split('/') {
        let name = segment.split(';').next().unwrap_or("");
        if !name.is_empty() {
            out.push('/');
            out.push_str(name);
        }
    }
    if out.is_empty() || path.ends_with('/') {
        out.push('/');
    }
    Some(Cow::Owned(out))
}

fn covers_spelled(path: &str, prefix: &str) -> bool {
    let (base, dir) = match prefix.strip_suffix('/') {
        Some(base) => (base.as_bytes(), true),
        None => (prefix.as_bytes(), false),
    };
    let path = path.as_bytes();
    let Some(head) = path.get(..base.len()) else {
        return false;
    };
    head.eq_ignore_ascii_case(base)
        && (!dir || path.get(base.len()).is_none_or(|&b| !continues_name(b)))
}

/// Whether `b`, after a name, makes it another name rather than that one
/// with a tail a backend may strip or ignore.
fn continues_name(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::{covers, routed};

    #[test]
    fn the_routed_spelling_drops_path_parameters_and_empty_segments() {
        let r = |p| routed(p).map(|r| r.into_owned());
        assert_eq!(r("/api/settings"), None);
        assert_eq!(r("/api/;/settings").as_deref(), Some("/api/settings"));
        assert_eq!(
            r("/api/;jsessionid=1/settings").as_deref(),
            Some("/api/settings")
        );
        assert_eq!(r("/api;x/admin;y/").as_deref(), Some("/api/admin/"));
        assert_eq!(r("/;/a;b;c/;").as_deref(), Some("/a"));
        assert_eq!(r("/;").as_deref(), Some("/"));
    }

    #[test]
    fn a_protecting_prefix_covers_the_routed_spelling_too() {
        for (path, prefix) in [
            ("/api/;/settings", "/api/settings"),
            ("/api/;jsessionid=1/settings", "/api/settings"),
            ("/api/;/admin", "/api/admin"),
            ("/;/api/;x/Admin;y/users", "/api/admin/"),
            ("/api;x/settings", "/api/settings"),
        ] {
            assert!(covers(path, prefix), "{path} {prefix}");
        }
        assert!(!covers("/api/;/status", "/api/settings"));
    }

    #[test]
    fn a_prefix_without_a_slash_covers_every_path_starting_with_it() {
        let p = "/api/settings";
        for yes in [
            "/api/settings",
            "/api/settings/",
            "/api/settings/x",
            "/api/settings.json",
            "/api/settings;jsessionid=x",
            "/api/settings ",
            "/api/settings2",
            "/API/Settings",
            "/api/SETTINGS.json",
        ] {
            assert!(covers(yes, p), "{yes}");
        }
        for no in [
            "/api/setting",
            "/api",
            "/api/",
            "/apix/settings",
            "/api/sett1ngs",
        ] {
            assert!(!covers(no, p), "{no}");
        }
    }

    #[test]
    fn a_prefix_with_a_slash_covers_its_name_and_tails_but_not_longer_names() {
        let p = "/admin/";
        for yes in [
            "/admin",
            "/admin/",
            "/admin/x",
            "/admin;x",
            "/admin.json",
            "/admin ",
            "/admin~",
            "/Admin/x",
            "/ADMIN;x",
        ] {
            assert!(covers(yes, p), "{yes}");
        }
        for no in [
            "/administrator",
            "/admin-old",
            "/admin_2",
            "/admin9",
            "/adm",
            "/",
        ] {
            assert!(!covers(no, p), "{no}");
        }
        assert!(covers("/anything", "/"));
        assert!(covers("/", "/"));
    }
}
