//! Request fields through which a client could claim what only a server in
//! front of an application may say: who the user is, which address the
//! request came from, which URL or method it was. Applications behind an
//! authenticating proxy read these (Grafana's `X-WEBAUTH-USER`,
//! oauth2-proxy's `X-Auth-Request-User`, a framework's method override), so
//! a client's own copies never reach a backend or a script.

/// Names a backend may take as the user an authenticating proxy let in.
/// Marmoset passes its own `auth` user only to scripts, as `REMOTE_USER`.
pub fn names_user(name: &str) -> bool {
    const NAMES: [&str; 3] = ["remote-user", "x-remote-user", "x-webauth-user"];
    NAMES.iter().any(|n| n.eq_ignore_ascii_case(name)) || starts_with(name, "x-auth-request-")
}

/// Names a framework may take as the method instead of the request line's:
/// a GET that is a DELETE to the application would pass the cross-origin
/// guard as a safe method, and a proxied one would be retried.
pub fn overrides_method(name: &str) -> bool {
    const NAMES: [&str; 3] = [
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
    ];
    NAMES.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// Names a backend may take as the client's address or the request's
/// original URL: Marmoset sets `X-Forwarded-For`, `-Proto`, `-Host` and
/// `X-Real-IP` itself for a proxied request.
pub fn names_origin(name: &str) -> bool {
    const NAMES: [&str; 10] = [
        "forwarded",
        "x-real-ip",
        "x-client-ip",
        "true-client-ip",
        "x-cluster-client-ip",
        "client-ip",
        "x-proxyuser-ip",
        "x-original-url",
        "x-original-uri",
        "x-rewrite-url",
    ];
    NAMES.iter().any(|n| n.eq_ignore_ascii_case(name)) || starts_with(name, "x-forwarded-")
}

fn starts_with(name: &str, prefix: &str) -> bool {
    name.get(..prefix.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_by_name_in_any_case() {
        for user in [
            "Remote-User",
            "X-Remote-User",
            "X-Auth-Request-User",
            "x-auth-request-email",
            "X-WEBAUTH-USER",
        ] {
            assert!(names_user(user), "{user}");
        }
        for origin in [
            "X-Cluster-Client-IP",
            "Client-IP",
            "X-ProxyUser-Ip",
            "X-Forwarded-For",
            "x-forwarded-prefix",
            "Forwarded",
        ] {
            assert!(names_origin(origin), "{origin}");
        }
        assert!(overrides_method("X-HTTP-Method-Override"));
        for other in ["User-Agent", "X-Remote", "Client", "X-Forwarded", "Accept"] {
            assert!(
                !names_user(other) && !names_origin(other) && !overrides_method(other),
                "{other}"
            );
        }
    }
}
