//! Command line: finds the config file, applies it, then the flags on top.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::config::{self, Applier, Config, ConfigError, Origin};
use crate::net::client::OnLink;

pub enum Action {
    Run(Config),
    CheckConfig(Config),
    /// Text for stdout (help, version), then exit 0.
    Print(String),
}

/// The configuration again, for a reload (SIGHUP): what needs the sockets
/// or root privileges again (addresses, workers, user, chroot) stays as in
/// `old`. `None` (logged) when it does not parse: the running one stays.
pub fn reread(old: &Config) -> Option<Config> {
    log::info!("reloading configuration");
    let mut new = match parse_with(std::env::args_os(), Some(old)) {
        Ok(Action::Run(c)) => c,
        Ok(_) => return None,
        Err(e) => {
            log::error!("reload failed, keeping the running configuration: {e}");
            return None;
        }
    };
    for w in &new.warnings {
        log::warn!("{w}");
    }
    // The listeners stay as they are, and with them whether any speaks TLS:
    // the rest of a new configuration could not serve them as they are.
    if new.tls.enabled() != old.tls.enabled() {
        log::error!(
            "reload failed, keeping the running configuration: adding or removing a TLS listener takes effect at the next restart"
        );
        return None;
    }
    if new.listen != old.listen
        || new.workers != old.workers
        || new.user.as_ref().map(|u| &u.name) != old.user.as_ref().map(|u| &u.name)
        || new.chroot != old.chroot
    {
        log::warn!("listen, workers, user and chroot changes take effect at the next restart");
    }
    new.listen.clone_from(&old.listen);
    new.workers = old.workers;
    new.user.clone_from(&old.user);
    new.group.clone_from(&old.group);
    new.chroot = old.chroot;
    if old.chroot {
        new.root.clone_from(&old.root);
    }
    Some(new)
}

/// The usage text: every setting of `config::KEYS`, by group.
pub const HELP: &str = "\
Usage: marmoset [OPTIONS]

Serves a directory over HTTP/1.1: a small, static server for device web UIs.

Every setting of the config file is also a flag: `key value` in the file is
`--key value` here, and flags win over the file. Switches (chroot, daemon,
listing, syslog, tls-self-signed, redirect-https) need no value on the
command line.

  --config FILE                config file (default /etc/marmoset/marmoset.conf, if it exists)
  --check-config               validate the configuration and exit
  --help, -h / --version, -V

Listening and files:
  --listen ADDR:PORT           address to listen on; repeatable (default 0.0.0.0:80, [::]:80);
                               \"ADDR:PORT tls\" for HTTPS
  --allowed-hosts NAMES        the device's names (also its host name and tls-names);
                               other Host names get 421 (default off)
  --root DIR                   document root (default /www)
  --index NAMES                directory index files (default index.html)
  --symlinks inside|anywhere   where symlinks may lead (default inside)
  --listing                    HTML directory listings (default off)

HTTPS (in a build with the `tls` feature):
  --tls-cert FILE              certificate chain, PEM, the server's first
  --tls-key FILE               its key, PEM (PKCS#8, SEC1 or PKCS#1), not encrypted
  --tls-self-signed            make a P-256 key and certificate if both files are absent
  --tls-names NAMES            names and addresses for that certificate, besides
                               the host name and localhost
  --redirect-https             plain listeners answer 308 to https:// (not ACME challenges)

Connections and timeouts:
  --workers N                  worker processes (default 1)
  --max-connections N          open connections, all workers (default 1024)
  --header-timeout S           seconds to receive a request head (default 10)
  --keepalive-timeout S        seconds an idle connection is kept (default 15)
  --send-timeout S             seconds a send may stall (default 30)
  --max-requests N             requests per connection (default 1000)
  --grace S                    seconds in-flight responses get at stop (default 5)

Process and logging:
  --user NAME                  drop privileges to this user after binding
  --group NAME                 ... and this group (default: the user's)
  --chroot                     chroot into the root after binding
  --daemon                     detach from the terminal (for SysV scripts)
  --pidfile FILE               write the server's pid here
  --syslog                     log to syslog (facility daemon), not stderr
  --log-level LEVEL            error, warn, info (default) or debug
  --access-log WHERE           off (default), syslog, or a file
  --server-name NAME           Server header, `off` for none (default marmoset)

Per-path rules (PATTERN: `*` wildcard; with a `/` the whole path; `@hashed`):
  --cache PATTERN VALUE        Cache-Control, `off` for none; first match wins
  --header PATTERN NAME: VALUE add or replace a header; `-NAME` removes
  --redirect FROM TO [STATUS]  path or /prefix/*; 301, 302 (default), 307, 308
  --error-page STATUS /PATH    custom page for an error status
  --spa-fallback /PATH         for missing paths without extension (default off)

CGI:
  --cgi-prefix /PREFIX/        where scripts live; repeatable; `off` (default /cgi-bin/)
  --cgi-interpreter .EXT PATH  interpreter by extension (default .sh /bin/sh)
  --cgi-timeout S              script's run once it has its request body,
                               504 after (default 30)
  --cgi-max N                  scripts at once, 503 beyond (default 8)
  --cgi-max-body BYTES         request body limit, 413 beyond (default 1048576)
  --cgi-body-rate BYTES        least request body pace per second after
                               --header-timeout, 408 below (default 1024; off)
  --scgi PREFIX ADDRESS        PREFIX answered by the SCGI handler at ADDRESS
                               (unix:/path or IP:PORT) under the CGI limits;
                               repeatable

Reverse proxy:
  --proxy PREFIX BACKEND       BACKEND unix:/path or http://IP:PORT; repeatable
  --proxy-timeout S            backend's time to start answering, 504 after (default 30)
  --proxy-max N                backend connections per worker, 503 beyond (default 64)
  --proxy-max-body BYTES       request body limit, 413 beyond (default off: none)
  --proxy-tunnel-timeout S     idle time before a WebSocket tunnel closes (default 120)
  --proxy-max-per-client N     of those, for one client (an address; IPv6
                               off the link: a /64); 503 beyond (default a
                               quarter of --proxy-max)
  --proxy-max-streams N        of those, for tunnels and event streams; 503
                               beyond (default half of --proxy-max)
  --proxy-auth-reserve N       of those, only for requests that passed an
                               auth realm (default a quarter of --proxy-max)
  --proxy-body-rate BYTES      least request body pace per second after
                               --header-timeout, 408 below (default 1024; off)

ubus JSON-RPC endpoint (uhttpd's /ubus, for LuCI):
  --ubus PREFIX [SOCKET]       serve it at PREFIX, ubusd at SOCKET
                               (default off; socket /var/run/ubus/ubus.sock)
  --ubus-timeout S             seconds a call may take, -32003 after (default 60)
  --ubus-cors on|off           CORS headers and preflights for it (default off)
  --ubus-auth on|off           rpcd's session.access check per call (default on)

Access control (first matching rule wins):
  --auth PREFIX \"REALM\" FILE   Basic auth, users from an htpasswd file
  --allow PREFIX BLOCK         by address or CIDR, or `all`
  --deny PREFIX BLOCK          by address or CIDR, or `all`
  --cross-origin PREFIX allow  take other sites' POST, PUT, DELETE... under PREFIX
                               (default: 403 when Origin or Sec-Fetch-Site says so)

Signals: TERM/INT stop gracefully, HUP reopens the access log and reloads the
config (and the TLS certificate and key).
";

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Action, ConfigError> {
    parse_with(args, None)
}

/// `parse`; at a reload, knowing the configuration in use (`running`).
fn parse_with(
    args: impl IntoIterator<Item = OsString>,
    running: Option<&Config>,
) -> Result<Action, ConfigError> {
    let flags = split_flags(args)?;
    let mut config_path: Option<PathBuf> = None;
    let mut check = false;
    let mut settings = Vec::new();
    for (key, value) in flags {
        match key.as_str() {
            "help" => return Ok(Action::Print(HELP.to_string())),
            "version" => {
                return Ok(Action::Print(format!(
                    "marmoset {}\n",
                    env!("CARGO_PKG_VERSION")
                )));
            }
            "check-config" => check = true,
            "config" => config_path = Some(PathBuf::from(value)),
            _ => settings.push((key, value)),
        }
    }
    let mut config = Config::default();
    load_file(&mut config, config_path.as_deref())?;
    let mut applier = Applier::new(&mut config);
    for (key, value) in &settings {
        applier.apply(key, value, &Origin::Flag)?;
    }
    config
        .warnings
        .extend(config.tls.finish(running.map(|r| &r.tls))?);
    // The names `tls-self-signed` makes the certificate for are the device's.
    if let (Some(hosts), Some(_)) = (&mut config.allowed_hosts, &config.tls.self_signed) {
        hosts.add(&config.tls.names);
    }
    // Scripts run in their own directory, and the root is named in their
    // environment: a relative root would point elsewhere from there.
    config.root = std::path::absolute(&config.root).map_err(|e| ConfigError {
        origin: Origin::Flag,
        key: "root".into(),
        problem: format!("cannot make `{}` absolute: {e}", config.root.display()),
    })?;
    config.links = OnLink::read();
    Ok(if check {
        Action::CheckConfig(config)
    } else {
        Action::Run(config)
    })
}

/// Reads the named config file, or the default one if it exists.
pub fn load_file(config: &mut Config, explicit: Option<&Path>) -> Result<(), ConfigError> {
    let path = explicit.unwrap_or(Path::new(config::DEFAULT_CONFIG));
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if explicit.is_none() && e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(ConfigError {
                origin: Origin::File {
                    path: path.to_path_buf(),
                    line: 0,
                },
                key: "config".into(),
                problem: format!("cannot read: {e}"),
            });
        }
    };
    config::apply_file(config, path, &text)
}

/// Turns `--key value`, `--key=value` and bare switches into pairs.
fn split_flags(
    args: impl IntoIterator<Item = OsString>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let flag_err = |key: &str, problem: &str| ConfigError {
        origin: Origin::Flag,
        key: key.to_string(),
        problem: problem.to_string(),
    };
    let mut out = Vec::new();
    let mut args = args.into_iter().skip(1).peekable();
    while let Some(arg) = args.next() {
        let arg = arg.into_string().map_err(|a| ConfigError {
            origin: Origin::Argument,
            key: a.to_string_lossy().into_owned(),
            problem: "argument is not UTF-8".into(),
        })?;
        // The short forms users try first.
        let flag = match arg.as_str() {
            "-h" => "help",
            "-V" => "version",
            _ => arg.strip_prefix("--").ok_or_else(|| ConfigError {
                origin: Origin::Argument,
                key: arg.clone(),
                problem: "unexpected argument (flags start with --; see marmoset --help)".into(),
            })?,
        };
        if let Some((k, v)) = flag.split_once('=') {
            out.push((k.to_string(), v.to_string()));
            continue;
        }
        let takes_no_value =
            matches!(flag, "help" | "version" | "check-config") || config::is_switch(flag);
        let next_is_value = args
            .peek()
            .is_some_and(|a| !a.to_string_lossy().starts_with("--"));
        if takes_no_value
            && !(config::is_switch(flag) && next_is_value && is_bool_word(args.peek()))
        {
            out.push((flag.to_string(), "on".to_string()));
            continue;
        }
        match args.next() {
            Some(v) => {
                let v = v
                    .into_string()
                    .map_err(|_| flag_err(flag, "value is not UTF-8"))?;
                out.push((flag.to_string(), v));
            }
            None => return Err(flag_err(flag, "missing value")),
        }
    }
    Ok(out)
}

fn is_bool_word(arg: Option<&OsString>) -> bool {
    arg.and_then(|a| a.to_str())
        .is_some_and(|a| crate::values::parse_bool(a).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Config, String> {
        let args = std::iter::once("marmoset")
            .chain(args.iter().copied())
            .map(OsString::from);
        match parse(args).map_err(|e| e.to_string())? {
            Action::Run(c) | Action::CheckConfig(c) => Ok(c),
            Action::Print(_) => Err("printed".into()),
        }
    }

    #[test]
    fn flags_fill_the_config() {
        let c = run(&[
            "--config",
            "/dev/null",
            "--root",
            "/tmp",
            "--listen",
            "127.0.0.1:0",
            "--listen=[::1]:0",
            "--syslog",
            "--workers",
            "3",
        ])
        .unwrap();
        assert_eq!(c.root, PathBuf::from("/tmp"));
        assert_eq!(c.listen.len(), 2);
        assert!(c.syslog);
        assert_eq!(c.workers, 3);
        let c = run(&["--config", "/dev/null", "--syslog", "off"]).unwrap();
        assert!(!c.syslog);
    }

    #[test]
    fn flag_errors_name_the_flag() {
        assert_eq!(
            run(&["--config", "/dev/null", "--workers"]).unwrap_err(),
            "--workers: missing value"
        );
        assert_eq!(
            run(&["--config", "/dev/null", "--bogus", "1"]).unwrap_err(),
            "--bogus: unknown setting"
        );
        assert!(
            run(&["--config", "/nonexistent/m.conf"])
                .unwrap_err()
                .starts_with("/nonexistent/m.conf: cannot read")
        );
    }

    #[test]
    fn help_lists_every_setting_the_applier_takes() {
        let mut c = Config::default();
        let mut applier = Applier::new(&mut c);
        for key in config::KEYS {
            assert!(
                HELP.contains(&format!("  --{key} ")),
                "--{key} not in --help"
            );
            // Any value: what matters is that the key is known.
            if let Err(e) = applier.apply(key, "", &Origin::Flag) {
                assert_ne!(e.problem, "unknown setting", "--{key}");
            }
        }
        let e = applier.apply("bogus", "1", &Origin::Flag).unwrap_err();
        assert_eq!(e.problem, "unknown setting");
    }
}
