//! Finding the script a request names, and the environment it runs with
//! (RFC 3875 section 4.1). No I/O beyond looking the script up in the root.

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::cgi::scgi::{self, Address};
use crate::cgi::settings::Settings;
use crate::files::root::Root;
use crate::http::claims;
use crate::http::path::CleanPath;
use crate::http::request::{Field, Request, Version};
use crate::http::status::Status;

/// The PATH scripts get: fixed, so the client cannot choose what runs.
const SCRIPT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A script found for a request.
#[derive(Debug)]
pub struct Script {
    /// Relative to the root, e.g. `cgi-bin/status`.
    pub rel: String,
    /// What follows the script in the path, e.g. `/extra`.
    pub path_info: String,
    runner: Runner,
}

/// What answers for a script.
#[derive(Debug)]
enum Runner {
    /// A file run for each request, by its interpreter if it has one.
    Exec { interpreter: Option<PathBuf> },
    /// An SCGI handler already running there.
    Scgi(Address),
}

/// What the exchange starts or reaches for a job.
pub enum Target<'a> {
    Exec {
        program: &'a Path,
        arg: Option<&'a OsStr>,
        dir: &'a Path,
    },
    Scgi(&'a Address),
}

/// If `shown` is under an SCGI prefix: its handler, as the script the
/// prefix names (`SCRIPT_NAME` the prefix, `PATH_INFO` the rest).
pub fn find_handler(settings: &scgi::Settings, shown: &str) -> Option<Script> {
    let (handler, rest) = settings.handler_for(shown)?;
    Some(Script {
        rel: handler.prefix.trim_start_matches('/').to_string(),
        path_info: rest.to_string(),
        runner: Runner::Scgi(handler.address.clone()),
    })
}

/// If `path` is under a CGI prefix: the script it names, or why not (404/403).
pub fn find(
    settings: &Settings,
    root: &Root,
    path: &CleanPath,
    shown: &str,
) -> Option<Result<Script, Status>> {
    find_with(settings, path, shown, |rel| {
        let meta = root.entry_meta(rel)?;
        if meta.is_file() {
            Ok(Entry::File {
                executable: meta.permissions().mode() & 0o111 != 0,
            })
        } else if meta.is_dir() {
            Ok(Entry::Dir)
        } else {
            Err(Status::NotFound)
        }
    })
}

/// What a name under the root is, as the script lookup needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Entry {
    File { executable: bool },
    Dir,
}

/// `find`, with `look` telling what a relative name is: the search itself
/// does no I/O, so that its lookups can be counted.
fn find_with(
    settings: &Settings,
    path: &CleanPath,
    shown: &str,
    mut look: impl FnMut(&str) -> Result<Entry, Status>,
) -> Option<Result<Script, Status>> {
    settings
        .prefixes
        .iter()
        .find(|p| crate::policy::access::under(shown, p))?;
    let full = path.as_str();
    // Each prefix of the path, shortest first, ending at a segment's end.
    let ends = full
        .match_indices('/')
        .map(|(i, _)| i)
        .chain(std::iter::once(full.len()));
    for end in ends {
        let rel = &full[..end];
        match look(rel) {
            // Only a directory can hold the script: a missing name (or a
            // file that is not one) ends the search, so a path a thousand
            // segments deep costs as many lookups as the tree is deep.
            Ok(Entry::Dir) => continue,
            Err(status) => return Some(Err(status)),
            Ok(Entry::File { executable }) => {
                let mut path_info = full[end..].to_string();
                if path.trailing_slash && !path_info.is_empty() {
                    path_info.push('/');
                }
                let interpreter = settings.interpreter(rel).map(Path::to_path_buf);
                if interpreter.is_none() && !executable {
                    return Some(Err(Status::Forbidden));
                }
                return Some(Ok(Script {
                    rel: rel.to_string(),
                    path_info,
                    runner: Runner::Exec { interpreter },
                }));
            }
        }
    }
    Some(Err(Status::NotFound))
}

/// Everything needed to run a script once the request head is gone.
#[derive(Debug)]
pub struct Job {
    pub script: Script,
    env: Vec<(String, String)>,
    program: PathBuf,
    dir: PathBuf,
}

/// Who asked, as the CGI meta-variables describe it.
pub struct Caller<'a> {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub remote_user: Option<&'a str>,
    /// The request came over TLS.
    #[cfg(feature = "tls")]
    pub tls: bool,
}

impl Job {
    /// Builds the meta-variables (RFC 3875 section 4.1).
    pub fn new(root: &Path, script: Script, req: &Request<'_>, caller: &Caller<'_>) -> Job {
        let content_length = match req.body {
            crate::http::request::BodyKind::Length(n) => Some(n),
            _ => None,
        };
        let (_, query) = crate::http::path::split_query(req.target);
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        // An absolute-form target's authority wins over Host (RFC 9112
        // section 3.2.2): it is what the client asked for.
        let host = req
            .authority
            .or_else(|| req.get(Field::Host))
            .map(text)
            .unwrap_or_default();
        let server_name = host
            .rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(host.as_str(), |(h, _)| h)
            .to_string();
        let server_name = if server_name.is_empty() {
            caller.local.ip().to_string()
        } else {
            server_name
        };
        let script_name = format!("/{}", script.rel);
        let file = root.join(&script.rel);
        let mut env = vec![
            ("GATEWAY_INTERFACE".into(), "CGI/1.1".into()),
            (
                "SERVER_SOFTWARE".into(),
                format!("marmoset/{}", env!("CARGO_PKG_VERSION")),
            ),
            ("SERVER_NAME".into(), server_name),
            ("SERVER_PORT".into(), caller.local.port().to_string()),
            (
                "SERVER_PROTOCOL".into(),
                if req.version == Version::Http10 {
                    "HTTP/1.0"
                } else {
                    "HTTP/1.1"
                }
                .into(),
            ),
            ("REQUEST_METHOD".into(), req.method_name().into()),
            ("REQUEST_URI".into(), text(req.target)),
            ("SCRIPT_NAME".into(), script_name),
            ("DOCUMENT_ROOT".into(), root.to_string_lossy().into_owned()),
            ("PATH_INFO".into(), script.path_info.clone()),
            ("QUERY_STRING".into(), query.map(text).unwrap_or_default()),
            ("REMOTE_ADDR".into(), canonical_ip(caller.peer)),
            // No reverse lookup: RFC 3875 section 4.1.9 allows the address.
            ("REMOTE_HOST".into(), canonical_ip(caller.peer)),
            ("REMOTE_PORT".into(), caller.peer.port().to_string()),
            // Not in RFC 3875, but set by uhttpd, Apache and nginx alike.
            ("SERVER_ADDR".into(), canonical_ip(caller.local)),
            // php-cgi refuses to run without it (its force-cgi-redirect).
            ("REDIRECT_STATUS".into(), "200".into()),
            ("PATH".into(), SCRIPT_PATH.into()),
        ];
        // A handler is no file under the root.
        if let Runner::Exec { .. } = script.runner {
            env.push((
                "SCRIPT_FILENAME".into(),
                file.to_string_lossy().into_owned(),
            ));
        }
        if !script.path_info.is_empty() {
            env.push((
                "PATH_TRANSLATED".into(),
                root.join(script.path_info.trim_start_matches('/'))
                    .to_string_lossy()
                    .into_owned(),
            ));
        }
        // As Apache and nginx set them: scripts build absolute URLs from these.
        #[cfg(feature = "tls")]
        {
            let scheme = if caller.tls { "https" } else { "http" };
            env.push(("REQUEST_SCHEME".into(), scheme.into()));
            if caller.tls {
                env.push(("HTTPS".into(), "on".into()));
            }
        }
        if let Some(n) = content_length {
            env.push(("CONTENT_LENGTH".into(), n.to_string()));
        }
        if let Some(t) = req.get(Field::ContentType) {
            env.push(("CONTENT_TYPE".into(), text(t)));
        }
        if let Some(user) = caller.remote_user {
            env.push(("AUTH_TYPE".into(), "Basic".into()));
            env.push(("REMOTE_USER".into(), user.into()));
        }
        for h in req.headers {
            let name = h.name.to_ascii_uppercase().replace('-', "_");
            // Credentials stay with the server; `Proxy:` would become HTTP_PROXY (httpoxy).
            let skip = matches!(
                name.as_str(),
                "AUTHORIZATION"
                    | "PROXY_AUTHORIZATION"
                    | "PROXY"
                    | "CONTENT_TYPE"
                    | "CONTENT_LENGTH"
            );
            // `X_Forwarded_For` would pass for `X-Forwarded-For`: a name
            // with an underscore is dropped, as nginx and Apache do. A
            // script's user is `REMOTE_USER` and its method
            // `REQUEST_METHOD`: no `HTTP_X_REMOTE_USER` or
            // `HTTP_X_HTTP_METHOD_OVERRIDE` from the client may stand in.
            let claim = claims::names_user(h.name) || claims::overrides_method(h.name);
            let plain = !h.name.contains('_') && !claim;
            if !skip && plain && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                env.push((format!("HTTP_{name}"), text(h.value)));
            }
        }
        let (program, dir) = (
            file.clone(),
            file.parent()
                .map_or_else(|| root.to_path_buf(), Path::to_path_buf),
        );
        Job {
            env,
            program,
            dir,
            script,
        }
    }

    /// A chunked body's length, known once it is decoded.
    pub fn set_content_length(&mut self, n: u64) {
        self.env.retain(|(k, _)| k != "CONTENT_LENGTH");
        self.env.push(("CONTENT_LENGTH".into(), n.to_string()));
    }

    /// What to execute (the interpreter with the script as its argument,
    /// or the script itself, in its directory), or the handler to reach.
    pub fn target(&self) -> Target<'_> {
        let interpreter = match &self.script.runner {
            Runner::Scgi(address) => return Target::Scgi(address),
            Runner::Exec { interpreter } => interpreter,
        };
        let (program, arg) = match interpreter {
            Some(interp) => (interp.as_path(), Some(self.program.as_os_str())),
            None => (self.program.as_path(), None),
        };
        Target::Exec {
            program,
            arg,
            dir: &self.dir,
        }
    }

    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }
}

/// An IPv4 client on an IPv6 socket is shown as plain IPv4.
fn canonical_ip(peer: SocketAddr) -> String {
    match peer.ip() {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or_else(|| v6.to_string(), |v4| v4.to_string()),
        v4 => v4.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::{empty_headers, parse};

    /// The environment a script would get for `head` from `peer`.
    fn env_for(head: &str, peer: &str) -> Vec<(String, String)> {
        let mut headers = empty_headers();
        let req = parse(head.as_bytes(), &mut headers).unwrap().unwrap();
        let script = Script {
            rel: "cgi-bin/env".into(),
            path_info: "/extra/path".into(),
            runner: Runner::Exec { interpreter: None },
        };
        let caller = Caller {
            peer: peer.parse().unwrap(),
            local: "192.0.2.1:8080".parse().unwrap(),
            remote_user: None,
            #[cfg(feature = "tls")]
            tls: false,
        };
        Job::new(Path::new("/www"), script, &req, &caller).env
    }

    fn var<'e>(env: &'e [(String, String)], name: &str) -> Option<&'e str> {
        env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    const PEER: &str = "127.0.0.1:5000";

    #[test]
    fn server_name_comes_from_host_without_its_port() {
        let env = env_for(
            "GET /cgi-bin/env HTTP/1.1\r\nHost: device.local:8080\r\n\r\n",
            PEER,
        );
        assert_eq!(var(&env, "SERVER_NAME"), Some("device.local"));
        assert_eq!(var(&env, "SERVER_PORT"), Some("8080"));
        let env = env_for(
            "GET /cgi-bin/env HTTP/1.1\r\nHost: device.local\r\n\r\n",
            PEER,
        );
        assert_eq!(var(&env, "SERVER_NAME"), Some("device.local"));
        let env = env_for(
            "GET /cgi-bin/env HTTP/1.1\r\nHost: [fd00::1]:80\r\n\r\n",
            PEER,
        );
        assert_eq!(var(&env, "SERVER_NAME"), Some("[fd00::1]"));
        // HTTP/1.0 may send no Host: the address the client reached.
        let env = env_for("GET /cgi-bin/env HTTP/1.0\r\n\r\n", PEER);
        assert_eq!(var(&env, "SERVER_NAME"), Some("192.0.2.1"));
    }

    #[test]
    fn an_absolute_form_target_names_the_server_not_host() {
        let env = env_for(
            "GET http://device.example:8080/cgi-bin/env/extra/path?q=1 HTTP/1.1\r\nHost: other.example\r\n\r\n",
            PEER,
        );
        assert_eq!(var(&env, "SERVER_NAME"), Some("device.example"));
        assert_eq!(
            var(&env, "REQUEST_URI"),
            Some("/cgi-bin/env/extra/path?q=1")
        );
        assert_eq!(var(&env, "QUERY_STRING"), Some("q=1"));
        assert_eq!(var(&env, "HTTP_HOST"), Some("other.example"));
        let env = env_for(
            "GET http://user@device.example/cgi-bin/env HTTP/1.1\r\nHost: other.example\r\n\r\n",
            PEER,
        );
        assert_eq!(var(&env, "SERVER_NAME"), Some("device.example"));
    }

    #[test]
    fn path_info_and_its_translation() {
        let env = env_for(
            "GET /cgi-bin/env/extra/path HTTP/1.1\r\nHost: d\r\n\r\n",
            PEER,
        );
        assert_eq!(var(&env, "SCRIPT_NAME"), Some("/cgi-bin/env"));
        assert_eq!(var(&env, "PATH_INFO"), Some("/extra/path"));
        assert_eq!(var(&env, "PATH_TRANSLATED"), Some("/www/extra/path"));
        assert_eq!(var(&env, "SCRIPT_FILENAME"), Some("/www/cgi-bin/env"));
    }

    #[test]
    fn no_proxy_variable_and_no_credentials() {
        let env = env_for(
            "GET /cgi-bin/env HTTP/1.1\r\nHost: d\r\nProxy: http://evil/\r\nAuthorization: Basic eDp5\r\nProxy-Authorization: Basic eDp5\r\nX-Custom: yes\r\n\r\n",
            PEER,
        );
        assert_eq!(var(&env, "HTTP_PROXY"), None);
        assert_eq!(var(&env, "HTTP_AUTHORIZATION"), None);
        assert_eq!(var(&env, "HTTP_PROXY_AUTHORIZATION"), None);
        assert_eq!(var(&env, "HTTP_X_CUSTOM"), Some("yes"));
        assert_eq!(
            var(&env, "PATH"),
            Some("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        );
    }

    #[test]
    fn an_ipv4_client_on_an_ipv6_socket_is_shown_as_ipv4() {
        let env = env_for(
            "GET /cgi-bin/env HTTP/1.1\r\nHost: d\r\n\r\n",
            "[::ffff:192.168.1.20]:4000",
        );
        assert_eq!(var(&env, "REMOTE_ADDR"), Some("192.168.1.20"));
        assert_eq!(var(&env, "REMOTE_PORT"), Some("4000"));
        let env = env_for(
            "GET /cgi-bin/env HTTP/1.1\r\nHost: d\r\n\r\n",
            "[fd00::7]:4000",
        );
        assert_eq!(var(&env, "REMOTE_ADDR"), Some("fd00::7"));
    }

    /// Finds the script for `shown` in a tree holding `cgi-bin/env`
    /// (executable) and `cgi-bin/plain.txt`; also how many names it looked up.
    fn find_counting(shown: &str) -> (Option<Result<Script, Status>>, usize) {
        let path = crate::http::path::clean(shown.as_bytes()).unwrap();
        let mut lookups = 0;
        let found = find_with(&Settings::default(), &path, path.shown(), |rel| {
            lookups += 1;
            match rel {
                "cgi-bin" => Ok(Entry::Dir),
                "cgi-bin/env" => Ok(Entry::File { executable: true }),
                "cgi-bin/plain.txt" => Ok(Entry::File { executable: false }),
                _ => Err(Status::NotFound),
            }
        });
        (found, lookups)
    }

    #[test]
    fn a_deep_path_costs_lookups_only_as_deep_as_the_tree() {
        let deep = "/a".repeat(1000);
        let (found, lookups) = find_counting(&format!("/cgi-bin/missing{deep}"));
        assert_eq!(found.map(|r| r.err()), Some(Some(Status::NotFound)));
        assert_eq!(
            lookups, 2,
            "cgi-bin, then cgi-bin/missing: nothing deeper exists"
        );
        let (found, lookups) = find_counting(&format!("/cgi-bin/env{deep}/"));
        let script = found.unwrap().unwrap();
        assert_eq!(script.rel, "cgi-bin/env");
        assert_eq!(script.path_info, format!("{deep}/"));
        assert_eq!(lookups, 2);
    }

    #[test]
    fn scripts_are_found_with_their_path_info() {
        let (found, _) = find_counting("/cgi-bin/env/x/y");
        let script = found.unwrap().unwrap();
        assert_eq!(
            (script.rel.as_str(), script.path_info.as_str()),
            ("cgi-bin/env", "/x/y")
        );
        let (found, _) = find_counting("/cgi-bin/plain.txt");
        assert_eq!(found.map(|r| r.err()), Some(Some(Status::Forbidden)));
        let (found, _) = find_counting("/cgi-bin/");
        assert_eq!(found.map(|r| r.err()), Some(Some(Status::NotFound)));
        let (found, lookups) = find_counting("/elsewhere/x");
        assert!(found.is_none());
        assert_eq!(lookups, 0, "not under a CGI prefix: nothing looked up");
    }
}
