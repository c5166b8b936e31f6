//! The one configuration struct, filled by the config file and then by the
//! command-line flags (flags win). Every file key `k` is also a flag `--k`.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cgi::scgi;
use crate::cgi::settings as cgi;
use crate::files::root::Symlinks;
use crate::limits;
use crate::logs::access_log::Destination;
use crate::net::client::OnLink;
use crate::policy::hosts::AllowedHosts;
use crate::policy::prefix::covers;
use crate::policy::rules::Rules;
use crate::policy::{access, auth, origin};
use crate::proxy::settings as proxy;
use crate::ubus::settings as ubus;
use crate::values::{parse_bool, parse_count, parse_path, parse_range, parse_secs};

pub mod cli;
pub mod tls;

pub const DEFAULT_CONFIG: &str = "/etc/marmoset/marmoset.conf";

#[derive(Debug)]
pub struct Config {
    pub listen: Vec<Listen>,
    /// `None`: any name in `Host` is answered.
    pub allowed_hosts: Option<AllowedHosts>,
    pub root: PathBuf,
    pub workers: usize,
    pub user: Option<Account>,
    pub group: Option<Account>,
    pub chroot: bool,
    pub daemon: bool,
    pub pidfile: Option<PathBuf>,
    pub syslog: bool,
    pub log_level: log::LevelFilter,
    pub access_log: Destination,
    /// `None` hides the Server header.
    pub server_name: Option<String>,
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub keepalive_timeout: Duration,
    pub send_timeout: Duration,
    pub max_requests: u32,
    pub grace: Duration,
    pub index: Vec<String>,
    pub symlinks: Symlinks,
    pub rules: Rules,
    pub cgi: cgi::Settings,
    /// Prefixes answered by SCGI handlers (`scgi PREFIX ADDRESS`).
    pub scgi: scgi::Settings,
    pub proxy: proxy::Settings,
    /// The ubus JSON-RPC endpoint (`ubus PREFIX`), off by default.
    pub ubus: ubus::Settings,
    /// Address rules, first match wins.
    pub access: Vec<access::Rule>,
    pub realms: Vec<auth::Realm>,
    /// Where cross-origin requests with unsafe methods are refused.
    pub cross_origin: origin::Settings,
    pub tls: tls::Settings,
    /// The networks of the server's own links, as they were when the
    /// configuration was read: who a client is (`net::client`).
    pub links: OnLink,
    /// What was accepted but is probably not what was meant, logged at
    /// start (the logger does not exist yet while the config is read).
    pub warnings: Vec<ConfigError>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: vec![
                Listen::plain(SocketAddr::from(([0, 0, 0, 0], 80))),
                Listen::plain(SocketAddr::from(([0u16; 8], 80))),
            ],
            allowed_hosts: None,
            root: PathBuf::from("/www"),
            workers: 1,
            user: None,
            group: None,
            chroot: false,
            daemon: false,
            pidfile: None,
            syslog: false,
            log_level: log::LevelFilter::Info,
            access_log: Destination::Off,
            server_name: Some("marmoset".into()),
            max_connections: limits::DEFAULT_MAX_CONNECTIONS,
            header_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(15),
            send_timeout: Duration::from_secs(30),
            max_requests: 1000,
            grace: Duration::from_secs(5),
            index: vec!["index.html".into()],
            symlinks: Symlinks::Inside,
            rules: Rules::default(),
            cgi: cgi::Settings::default(),
            scgi: scgi::Settings::default(),
            proxy: proxy::Settings::default(),
            ubus: ubus::Settings::default(),
            access: Vec::new(),
            realms: Vec::new(),
            cross_origin: origin::Settings::default(),
            tls: tls::Settings::default(),
            links: OnLink::default(),
            warnings: Vec::new(),
        }
    }
}

impl Config {
    /// Error pages and the SPA fallback are served to anyone who meets an
    /// error or asks for an app route, as files: none may live where a rule
    /// restricts who sees it, nor where a script's source would be served.
    fn check_public_pages(&self) -> Result<(), String> {
        let rules = &self.rules;
        let pages = rules
            .error_pages
            .iter()
            .map(|(_, p)| p)
            .chain(&rules.spa_fallback);
        for page in pages {
            let realms = self
                .realms
                .iter()
                .map(|r| (r.prefix.as_str(), "an auth realm"));
            let access = self.access.iter().map(|r| (r.prefix(), "an address rule"));
            let handlers = self.scgi.handlers.iter();
            let mut scripts = self
                .cgi
                .prefixes
                .iter()
                .map(|p| (p.as_str(), "the CGI prefix"))
                .chain(handlers.map(|h| (h.prefix.as_str(), "an SCGI prefix")));
            // Realms and address rules cover their prefix's tails and case
            // variants too; scripts live under their prefix as written.
            let guarded = realms
                .chain(access)
                .find(|(prefix, _)| covers(page, prefix))
                .or_else(|| scripts.find(|(prefix, _)| access::under(page, prefix)));
            if let Some((prefix, what)) = guarded {
                return Err(format!(
                    "`{page}` is under `{prefix}` ({what}); error pages and the SPA fallback are served to everyone as files: keep them outside it"
                ));
            }
        }
        Ok(())
    }
}

/// An address to listen on, and whether it speaks TLS.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Listen {
    pub addr: SocketAddr,
    pub tls: bool,
}

impl Listen {
    pub fn plain(addr: SocketAddr) -> Listen {
        Listen { addr, tls: false }
    }
}

/// A user or group name, with where it was set: names are looked up only
/// at start, and an unknown one is reported at its line.
#[derive(Debug, Clone)]
pub struct Account {
    pub name: String,
    pub origin: Origin,
}

/// Where a setting came from, so an error can point at it.
#[derive(Debug, Clone)]
pub enum Origin {
    File {
        path: PathBuf,
        line: usize,
    },
    Flag,
    /// A command-line argument that is not a `--flag`, named as typed.
    Argument,
}

#[derive(Debug)]
pub struct ConfigError {
    pub origin: Origin,
    pub key: String,
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Origin::File { path, line: 0 } => write!(f, "{}: {}", path.display(), self.problem),
            Origin::File { path, line } => {
                write!(
                    f,
                    "{}:{}: {}: {}",
                    path.display(),
                    line,
                    self.key,
                    self.problem
                )
            }
            Origin::Flag => write!(f, "--{}: {}", self.key, self.problem),
            Origin::Argument => write!(f, "{}: {}", self.key, self.problem),
        }
    }
}

/// Every setting, in the order `--help` lists them. The Applier refuses
/// any key not listed here, and a test checks `--help` names each one.
pub const KEYS: &[&str] = &[
    "listen",
    "allowed-hosts",
    "root",
    "index",
    "symlinks",
    "listing",
    "workers",
    "max-connections",
    "header-timeout",
    "keepalive-timeout",
    "send-timeout",
    "max-requests",
    "grace",
    "user",
    "group",
    "chroot",
    "daemon",
    "pidfile",
    "syslog",
    "log-level",
    "access-log",
    "server-name",
    "cache",
    "header",
    "redirect",
    "error-page",
    "spa-fallback",
    "cgi-prefix",
    "cgi-interpreter",
    "cgi-timeout",
    "cgi-max",
    "cgi-max-body",
    "cgi-body-rate",
    "scgi",
    "proxy",
    "proxy-timeout",
    "proxy-max",
    "proxy-max-body",
    "proxy-tunnel-timeout",
    "proxy-max-per-client",
    "proxy-max-streams",
    "proxy-auth-reserve",
    "proxy-body-rate",
    "ubus",
    "ubus-timeout",
    "ubus-cors",
    "ubus-auth",
    "auth",
    "allow",
    "deny",
    "cross-origin",
    "tls-cert",
    "tls-key",
    "tls-self-signed",
    "tls-names",
    "redirect-https",
];

fn is_setting(key: &str) -> bool {
    KEYS.contains(&key)
}

/// Keys that take no value on the command line (`--syslog` means `syslog on`).
pub fn is_switch(key: &str) -> bool {
    matches!(
        key,
        "chroot" | "daemon" | "syslog" | "listing" | "tls-self-signed" | "redirect-https"
    )
}

/// Keys that may repeat; each source's first use replaces the earlier list.
fn is_list(key: &str) -> bool {
    key == "listen"
}

/// Applies settings from one source (the file, or the flags) in order.
pub struct Applier<'a> {
    config: &'a mut Config,
    lists_seen: Vec<&'static str>,
}

impl<'a> Applier<'a> {
    pub fn new(config: &'a mut Config) -> Self {
        Applier {
            config,
            lists_seen: Vec::new(),
        }
    }

    pub fn apply(&mut self, key: &str, value: &str, origin: &Origin) -> Result<(), ConfigError> {
        let err = |problem: String| ConfigError {
            origin: origin.clone(),
            key: key.to_string(),
            problem,
        };
        if !is_setting(key) {
            return Err(err("unknown setting".into()));
        }
        if is_list(key) && !self.lists_seen.contains(&"listen") {
            self.lists_seen.push("listen");
            self.config.listen.clear();
            self.config.tls.listener = None;
        }
        // One endpoint: a second `ubus` in the same source is a mistake.
        if key == "ubus" {
            if self.lists_seen.contains(&"ubus") {
                return Err(err(
                    "a second `ubus`: there is one endpoint, already configured".into(),
                ));
            }
            self.lists_seen.push("ubus");
        }
        let mut warning = None;
        set(self.config, key, value, origin, &mut warning).map_err(err)?;
        self.config.warnings.extend(warning.map(err));
        Ok(())
    }
}

/// Applies one setting; `warning` gets what is applied with a caveat.
fn set(
    c: &mut Config,
    key: &str,
    value: &str,
    origin: &Origin,
    warning_out: &mut Option<String>,
) -> Result<(), String> {
    match key {
        "listen" => {
            let listen = parse_listen(value)?;
            if listen.tls && c.tls.listener.is_none() {
                c.tls.listener = Some(origin.clone());
            }
            c.listen.push(listen);
        }
        k if tls::is_key(k) => c.tls.apply(key, value, origin)?,
        "allowed-hosts" => {
            c.allowed_hosts = match value {
                "off" => None,
                names => Some(AllowedHosts::parse(names)?),
            }
        }
        "root" => c.root = parse_path(value)?,
        "workers" => c.workers = parse_count(value, 1, 64)?,
        "user" => {
            c.user = Some(parse_account(value, origin)?);
        }
        "group" => {
            c.group = Some(parse_account(value, origin)?);
        }
        "chroot" => c.chroot = parse_bool(value)?,
        "daemon" => c.daemon = parse_bool(value)?,
        "pidfile" => c.pidfile = Some(parse_path(value)?),
        "syslog" => c.syslog = parse_bool(value)?,
        "log-level" => c.log_level = parse_level(value)?,
        "access-log" => {
            c.access_log = match value {
                "off" => Destination::Off,
                "syslog" => Destination::Syslog,
                _ => Destination::File(parse_path(value)?),
            }
        }
        "server-name" => {
            c.server_name = match value {
                "off" => None,
                v if v.bytes().all(|b| b.is_ascii_graphic()) && !v.is_empty() => {
                    Some(v.to_string())
                }
                _ => return Err("expected a token without spaces, or `off`".into()),
            }
        }
        "max-connections" => c.max_connections = parse_count(value, 1, 1 << 20)?,
        "header-timeout" => c.header_timeout = parse_secs(value, 1)?,
        "keepalive-timeout" => c.keepalive_timeout = parse_secs(value, 1)?,
        "send-timeout" => c.send_timeout = parse_secs(value, 1)?,
        "max-requests" => c.max_requests = parse_range(value, 1, u32::MAX.into())? as u32,
        "grace" => c.grace = parse_secs(value, 1)?,
        "index" => {
            let names: Vec<String> = value.split_whitespace().map(str::to_string).collect();
            if names.is_empty() || names.iter().any(|n| n.contains('/') || n.starts_with('.')) {
                return Err("expected file names without `/`, e.g. `index.html index.htm`".into());
            }
            c.index = names;
        }
        "symlinks" => {
            c.symlinks = match value {
                "inside" => Symlinks::Inside,
                "anywhere" => Symlinks::Anywhere,
                _ => return Err("expected `inside` or `anywhere`".into()),
            }
        }
        "allow" | "deny" => {
            let verdict = match key {
                "allow" => access::Verdict::Allow,
                _ => access::Verdict::Deny,
            };
            let (rule, warning) = access::parse_rule(verdict, value)?;
            c.access.push(rule);
            *warning_out = warning;
        }
        "auth" => {
            let realm = auth::parse_realm(value)?;
            auth::check_file(&realm.file)?;
            c.realms.push(realm);
        }
        _ => {
            if !c.rules.apply(key, value)?
                && !c.cgi.apply(key, value)?
                && !c.scgi.apply(key, value)?
                && !c.proxy.apply(key, value)?
                && !c.cross_origin.apply(key, value)?
                && !c.ubus.apply(key, value)?
            {
                return Err("unknown setting".into());
            }
            if key == "ubus-auth" && !c.ubus.auth {
                *warning_out =
                    Some("ubus calls go to the bus without rpcd's session.access check".into());
            }
        }
    }
    if matches!(
        key,
        "error-page" | "spa-fallback" | "auth" | "allow" | "deny" | "cgi-prefix" | "scgi"
    ) {
        c.check_public_pages()?;
    }
    Ok(())
}

/// Reads a config file: `key value` per line, `#` starts a comment line.
pub fn apply_file(config: &mut Config, path: &Path, text: &str) -> Result<(), ConfigError> {
    let mut applier = Applier::new(config);
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let origin = Origin::File {
            path: path.to_path_buf(),
            line: n + 1,
        };
        let (key, value) = match line.split_once(|c: char| c.is_ascii_whitespace()) {
            Some((k, v)) => (k, v.trim()),
            None if is_switch(line) => (line, "on"),
            None => {
                return Err(ConfigError {
                    origin,
                    key: line.into(),
                    problem: "missing value".into(),
                });
            }
        };
        applier.apply(key, value, &origin)?;
    }
    Ok(())
}

/// `ADDR:PORT`, or `ADDR:PORT tls` for HTTPS.
fn parse_listen(v: &str) -> Result<Listen, String> {
    let (addr, tls) = match v.split_once(|c: char| c.is_ascii_whitespace()) {
        Some((addr, "tls")) => (addr, true),
        Some((_, other)) => {
            return Err(format!(
                "expected `tls` after the address, got `{}`",
                other.trim()
            ));
        }
        None => (v, false),
    };
    if tls && !cfg!(feature = "tls") {
        return Err(tls::NOT_BUILT.into());
    }
    let addr = addr
        .parse()
        .map_err(|_| format!("`{addr}` is not ADDR:PORT (e.g. 0.0.0.0:80 or [::]:80)"))?;
    Ok(Listen { addr, tls })
}

fn parse_account(v: &str, origin: &Origin) -> Result<Account, String> {
    if v.is_empty()
        || !v
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
    {
        return Err(format!("`{v}` is not a user or group name"));
    }
    Ok(Account {
        name: v.to_string(),
        origin: origin.clone(),
    })
}

fn parse_level(v: &str) -> Result<log::LevelFilter, String> {
    match v {
        "error" => Ok(log::LevelFilter::Error),
        "warn" => Ok(log::LevelFilter::Warn),
        "info" => Ok(log::LevelFilter::Info),
        "debug" => Ok(log::LevelFilter::Debug),
        _ => Err(format!("expected error, warn, info or debug, got `{v}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, String> {
        let mut c = Config::default();
        apply_file(&mut c, Path::new("t.conf"), text).map_err(|e| e.to_string())?;
        Ok(c)
    }

    #[test]
    fn reads_settings_and_comments() {
        let c = load("# device\nlisten 127.0.0.1:8080\nlisten [::1]:8080\n\nroot /srv/www\nworkers 2\nserver-name off\nsyslog\n").unwrap();
        assert_eq!(c.listen.len(), 2);
        assert_eq!(c.root, PathBuf::from("/srv/www"));
        assert_eq!(c.workers, 2);
        assert_eq!(c.server_name, None);
        assert!(c.syslog);
    }

    #[test]
    fn errors_name_file_line_and_problem() {
        let e = load("root /www\nworkers lots\n").unwrap_err();
        assert_eq!(
            e,
            "t.conf:2: workers: expected a number from 1 to 64, got `lots`"
        );
        let e = load("\n\nfrobnicate yes\n").unwrap_err();
        assert_eq!(e, "t.conf:3: frobnicate: unknown setting");
        let e = load("listen 80\n").unwrap_err();
        assert!(
            e.starts_with("t.conf:1: listen: `80` is not ADDR:PORT"),
            "{e}"
        );
        let e = load("root\n").unwrap_err();
        assert_eq!(e, "t.conf:1: root: missing value");
    }

    #[test]
    fn the_header_rule_past_the_limit_is_named_by_its_line() {
        let text: String = (0..62).map(|i| format!("header * X-R{i}: v\n")).collect();
        let e = load(&text).unwrap_err();
        assert_eq!(e, "t.conf:62: header: at most 61 header rules");
    }

    #[test]
    fn error_pages_and_the_fallback_stay_out_of_guarded_paths() {
        let e = load("deny /private/ all\nerror-page 403 /private/e.html\n").unwrap_err();
        assert!(
            e.starts_with("t.conf:2: error-page: `/private/e.html` is under `/private/`"),
            "{e}"
        );
        let e = load("spa-fallback /app/index.html\nallow /app/ 10.0.0.0/8\n").unwrap_err();
        assert!(
            e.starts_with("t.conf:2: allow: `/app/index.html` is under `/app/`"),
            "{e}"
        );
        let e = load("error-page 404 /cgi-bin/404.html\n").unwrap_err();
        assert!(e.contains("(the CGI prefix)"), "{e}");
        assert!(load("deny /private/ all\nerror-page 404 /404.html\n").is_ok());
    }

    #[test]
    fn listeners_may_speak_tls() {
        let e = load("listen 127.0.0.1:443 tcp\n").unwrap_err();
        assert_eq!(
            e,
            "t.conf:1: listen: expected `tls` after the address, got `tcp`"
        );
        if cfg!(feature = "tls") {
            let c = load("listen 127.0.0.1:80\nlisten 127.0.0.1:443 tls\n").unwrap();
            assert_eq!(
                c.listen.iter().map(|l| l.tls).collect::<Vec<_>>(),
                [false, true]
            );
            assert!(c.tls.enabled());
            let e = load("tls-names ok.example bad/name\n").unwrap_err();
            assert_eq!(
                e,
                "t.conf:1: tls-names: `bad/name` is not a host name or IP address"
            );
        }
    }

    #[test]
    #[cfg(not(feature = "tls"))]
    fn a_build_without_tls_refuses_every_tls_setting() {
        for (line, key) in [
            ("listen 0.0.0.0:443 tls", "listen"),
            ("tls-cert /etc/marmoset/cert.pem", "tls-cert"),
            ("tls-key /etc/marmoset/key.pem", "tls-key"),
            ("tls-self-signed on", "tls-self-signed"),
            ("tls-names device.lan", "tls-names"),
            ("redirect-https on", "redirect-https"),
        ] {
            let e = load(&format!("root /www\n{line}\n")).unwrap_err();
            assert_eq!(e, format!("t.conf:2: {key}: {}", tls::NOT_BUILT));
        }
    }

    #[test]
    fn a_list_from_a_new_source_replaces_the_default() {
        let c = load("listen 127.0.0.1:1\n").unwrap();
        assert_eq!(
            c.listen,
            vec![Listen::plain("127.0.0.1:1".parse().unwrap())]
        );
    }
}
