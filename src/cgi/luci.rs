//! What the server reads of LuCI's login around a script: the sessions a
//! request's login cookies name, whether a request without a known
//! session may carry a login, and whether the script's answer refused or
//! granted one. With these a LuCI login counts against the client's
//! budget of password checks as a Basic auth check does (SECURITY.md).

use crate::cgi::output::ScriptHead;
#[cfg(feature = "ubus")]
use crate::http::request::{Method, Request};
use crate::http::status::Status;

/// LuCI's login cookies: `sysauth_http` and `sysauth_https`, `sysauth`
/// in older versions. The session is rpcd's, the one its pages call ubus
/// with.
fn is_login_cookie(name: &[u8]) -> bool {
    matches!(name, b"sysauth" | b"sysauth_http" | b"sysauth_https")
}

/// The session ids in a request's LuCI login cookies.
#[cfg(feature = "ubus")]
pub fn sessions<'a>(headers: &'a [httparse::Header<'a>]) -> impl Iterator<Item = &'a [u8]> + 'a {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("cookie"))
        .flat_map(|h| h.value.split(|&b| b == b';'))
        .filter_map(|pair| {
            let pair = pair.trim_ascii();
            let eq = pair.iter().position(|&b| b == b'=')?;
            is_login_cookie(&pair[..eq]).then(|| pair[eq + 1..].trim_ascii())
        })
}

/// Whether a request may carry a login. LuCI takes the user and password
/// from the form (a POST body, or the query) or from `AUTH_USER` and
/// `AUTH_PASS` meta-variables, which a client's `Auth-User` and
/// `Auth-Pass` fields become.
#[cfg(feature = "ubus")]
pub fn may_log_in(req: &Request<'_>) -> bool {
    let (_, query) = crate::http::path::split_query(req.target);
    req.method == Method::Post
        || query.is_some_and(|q| !q.is_empty())
        || req.headers.iter().any(|h| {
            h.name.eq_ignore_ascii_case("auth-user") || h.name.eq_ignore_ascii_case("auth-pass")
        })
}

/// What a script's answer says of a login its request may have carried.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Login {
    #[default]
    Unsaid,
    /// 403 with `X-LuCI-Login-Required: yes`: the login page again.
    Refused,
    /// A LuCI login cookie set to a session.
    Granted,
}

impl Login {
    pub fn of(head: &ScriptHead) -> Login {
        let fields = |name: &'static str| {
            head.other
                .iter()
                .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let sets_session = |cookie: &str| {
            let pair = cookie.split(';').next().unwrap_or("");
            pair.split_once('=').is_some_and(|(name, value)| {
                is_login_cookie(name.trim().as_bytes()) && !value.trim().is_empty()
            })
        };
        if head.status == Status::Forbidden
            && fields("x-luci-login-required").any(|v| v.eq_ignore_ascii_case("yes"))
        {
            Login::Refused
        } else if fields("set-cookie").any(sets_session) {
            Login::Granted
        } else {
            Login::Unsaid
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgi::output;

    #[test]
    #[cfg(feature = "ubus")]
    fn luci_cookies_name_their_sessions() {
        let headers = [
            httparse::Header {
                name: "Cookie",
                value: b"a=1; sysauth_https=0123abcd ;x=sysauth",
            },
            httparse::Header {
                name: "cookie",
                value: b"sysauth=feed",
            },
            httparse::Header {
                name: "X-Cookie",
                value: b"sysauth=nope",
            },
        ];
        let found: Vec<&[u8]> = sessions(&headers).collect();
        assert_eq!(found, [&b"0123abcd"[..], b"feed"]);
    }

    fn login(head: &str) -> Login {
        Login::of(&output::parse(head.as_bytes()).unwrap())
    }

    #[test]
    fn answers_say_whether_a_login_was_refused_or_granted() {
        let refused =
            "Status: 403 Forbidden\r\nX-LuCI-Login-Required: yes\r\nContent-Type: text/html\r\n";
        assert_eq!(login(refused), Login::Refused);
        let granted = "Status: 302 Found\r\nSet-Cookie: sysauth_http=8f2e; path=/cgi-bin/luci/; SameSite=strict; HttpOnly\r\nLocation: /cgi-bin/luci/admin\r\n";
        assert_eq!(login(granted), Login::Granted);
        // A logout clears the cookie; a denied page is not a login.
        let cleared = "Status: 302 Found\r\nSet-Cookie: sysauth_http=; expires=Thu, 01 Jan 1970 00:00:00 GMT\r\nLocation: /x\r\n";
        assert_eq!(login(cleared), Login::Unsaid);
        assert_eq!(
            login("Status: 403 Forbidden\r\nContent-Type: text/plain\r\n"),
            Login::Unsaid
        );
        assert_eq!(
            login("Status: 200 OK\r\nX-LuCI-Login-Required: yes\r\nContent-Type: text/plain\r\n"),
            Login::Unsaid
        );
    }

    #[test]
    #[cfg(feature = "ubus")]
    fn posts_queries_and_auth_fields_may_carry_a_login() {
        let may = |head: &str| {
            let mut headers = crate::http::request::empty_headers();
            let req = crate::http::request::parse(head.as_bytes(), &mut headers)
                .unwrap()
                .unwrap();
            may_log_in(&req)
        };
        assert!(!may("GET /cgi-bin/luci/ HTTP/1.1\r\nHost: r\r\n\r\n"));
        assert!(!may("GET /cgi-bin/luci/? HTTP/1.1\r\nHost: r\r\n\r\n"));
        assert!(may(
            "POST /cgi-bin/luci/ HTTP/1.1\r\nHost: r\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(may(
            "GET /cgi-bin/luci/?luci_username=root&luci_password=x HTTP/1.1\r\nHost: r\r\n\r\n"
        ));
        assert!(may(
            "GET /cgi-bin/luci/ HTTP/1.1\r\nHost: r\r\nAuth-Pass: x\r\n\r\n"
        ));
    }
}
