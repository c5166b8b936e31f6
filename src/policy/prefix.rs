//! What a rule's path prefix covers. Rules that protect (`deny`, `auth`,
//! the cross-origin guard) cover generously: a backend may route a path
//! the rule did not spell the same way to the handler it guards. Rules
//! that open (`allow`, `cross-origin PREFIX allow`) cover only what they
//! name, so that a loose match never lets a request past a protecting rule.

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
    use super::covers;

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
