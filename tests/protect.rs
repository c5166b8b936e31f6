//! Protected paths: Basic auth with hashes made by real tools, the failure
//! limit per client address, and address rules for IPv4 and IPv6 clients; the realm's answers
//! and the address rules over HTTPS too, in a `tls` build.

mod common;

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

use common::*;

fn tool(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(out.status.success(), "{cmd} {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A root with /admin/ protected by users whose hashes come from openssl
/// and htpasswd, reached over `t`.
fn protected(t: Transport, extra: &[&str]) -> Server {
    let root = TempDir::new("auth");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    root.write("admin/index.html", "admin page");
    root.write_executable(
        "admin/cgi/whoami",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n%s %s' \"$AUTH_TYPE\" \"$REMOTE_USER\"\n",
    );
    let htpasswd = format!(
        "# users\nmd5:{}\nsha256:{}\nsha512:{}\nbcrypt:{}\n{}\napr1-openssl:{}\n",
        tool("openssl", &["passwd", "-1", "pw-md5"]),
        tool("openssl", &["passwd", "-5", "pw-sha256"]),
        tool("openssl", &["passwd", "-6", "pw-sha512"]),
        tool("htpasswd", &["-nbB", "-C", "6", "x", "pw-bcrypt"])
            .split_once(':')
            .unwrap()
            .1,
        // htpasswd's default format, and openssl's spelling of it.
        tool("htpasswd", &["-nbm", "apr1", "pw-apr1"]),
        tool("openssl", &["passwd", "-apr1", "pw-apr1-openssl"]),
    );
    // In the root (a dotfile, never served): a file beside it would be
    // shared by the tests running in parallel.
    let file = root.write(".htpasswd", htpasswd);
    let realm = format!("/admin/ \"Device admin\" {}", file.display());
    let mut args = vec!["--auth", realm.as_str(), "--cgi-prefix", "/admin/cgi/"];
    args.extend_from_slice(extra);
    Server::start_in_over(t, root, &args)
}

fn basic(user: &str, password: &str) -> String {
    format!(
        "Authorization: Basic {}",
        tool(
            "sh",
            &[
                "-c",
                &format!("printf '%s' '{user}:{password}' | base64 -w0")
            ]
        )
    )
}

#[test]
fn every_hash_format_opens_the_realm() {
    for t in Transport::all() {
        every_hash_format_opens_the_realm_over(t);
    }
}

fn every_hash_format_opens_the_realm_over(t: Transport) {
    let s = protected(t, &[]);
    for (user, pw) in [
        ("md5", "pw-md5"),
        ("sha256", "pw-sha256"),
        ("sha512", "pw-sha512"),
        ("bcrypt", "pw-bcrypt"),
        ("apr1", "pw-apr1"),
        ("apr1-openssl", "pw-apr1-openssl"),
    ] {
        let r = s.get("/admin/", &[&basic(user, pw)]);
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "admin page"),
            "{user} over {t:?}"
        );
        // curl's own Basic auth, and the user reaches the script.
        let (code, _, body) = s.curl(&["-u", &format!("{user}:{pw}"), &s.url("/admin/cgi/whoami")]);
        assert_eq!(
            (code, String::from_utf8(body).unwrap()),
            (200, format!("Basic {user}")),
            "{user} over {t:?}"
        );
    }
    assert_eq!(s.get("/index.html", &[]).status, 200, "outside the realm");
}

#[test]
fn missing_wrong_and_malformed_credentials_get_401() {
    for t in Transport::all() {
        missing_wrong_and_malformed_credentials_get_401_over(t);
    }
}

fn missing_wrong_and_malformed_credentials_get_401_over(t: Transport) {
    let s = protected(t, &[]);
    let r = s.get("/admin/", &[]);
    assert_eq!(r.status, 401, "over {t:?}");
    assert_eq!(
        r.header("www-authenticate"),
        Some("Basic realm=\"Device admin\", charset=\"UTF-8\"")
    );
    for h in [
        basic("md5", "wrong"),
        basic("nobody", "pw-md5"),
        "Authorization: Basic !!!".into(),
        "Authorization: Bearer abc".into(),
        "Authorization: Basic".into(),
    ] {
        assert_eq!(s.get("/admin/", &[&h]).status, 401, "{h} over {t:?}");
    }
    assert!(
        s.wait_log(
            "wrong password for user \"md5\" from 127.0.0.1",
            Duration::from_secs(5)
        ),
        "{}",
        s.log_text()
    );
    assert!(s.log_text().contains("unknown user \"nobody\""));
    assert!(
        !s.log_text().contains("wrong\""),
        "a password reached the log"
    );
}

#[test]
fn repeated_failures_are_limited_per_address() {
    for t in Transport::all() {
        repeated_failures_are_limited_per_address_over(t);
    }
}

fn repeated_failures_are_limited_per_address_over(t: Transport) {
    let s = protected(t, &[]);
    for _ in 0..5 {
        let status = s.get("/admin/", &[&basic("sha256", "guess")]).status;
        assert_eq!(status, 401, "over {t:?}");
    }
    let r = s.get("/admin/", &[&basic("sha256", "pw-sha256")]);
    assert_eq!(
        r.status, 429,
        "even the right password waits once the limit is hit, over {t:?}"
    );
    assert_eq!(
        r.header("retry-after"),
        Some("60"),
        "the limit lasts a window"
    );
    assert_eq!(
        s.get("/index.html", &[]).status,
        200,
        "other paths are not affected"
    );
}

#[test]
fn success_is_cached_and_the_file_reread() {
    let s = protected(Transport::Plain, &[]);
    let good = basic("bcrypt", "pw-bcrypt");
    for _ in 0..20 {
        assert_eq!(s.get("/admin/", &[&good]).status, 200);
    }
    // A changed password file takes effect.
    let file = s.root.path().join(".htpasswd");
    let md5 = tool("openssl", &["passwd", "-1", "new-pw"]);
    std::fs::write(&file, format!("bcrypt:{md5}\n")).unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(2);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(s.get("/admin/", &[&good]).status, 401);
    assert_eq!(s.get("/admin/", &[&basic("bcrypt", "new-pw")]).status, 200);
}

/// A server on both loopbacks (over TLS: a plain listener on 127.0.0.1
/// for the harness, and TLS ones on both), over a root with `/` and
/// `/admin/`, with address rules; also returns the URL of its `[::1]`
/// listener for the transport.
fn dual_stack_with(t: Transport, rules: &[&str]) -> (Server, String) {
    let root = TempDir::new("access");
    root.write("index.html", "x");
    root.write("admin/index.html", "admin");
    let v4 = t.listen("127.0.0.1:0");
    let v6 = t.listen("[::1]:0");
    let mut args = vec!["--listen", "127.0.0.1:0"];
    if t != Transport::Plain {
        args.extend(["--listen", &v4]);
    }
    args.extend(["--listen", &v6]);
    args.extend_from_slice(rules);
    let s = Server::start_in_over(t, root, &args);
    let v6 = format!("{}://[::1]:{}", t.scheme(), s.ipv6_port());
    (s, v6)
}

#[test]
fn address_rules_for_ipv4_and_ipv6_clients() {
    for t in Transport::all() {
        address_rules_for_ipv4_and_ipv6_clients_over(t);
    }
}

fn address_rules_for_ipv4_and_ipv6_clients_over(t: Transport) {
    let rules = ["--allow", "/admin/ 127.0.0.0/8", "--deny", "/admin/ all"];
    let (s, v6) = dual_stack_with(t, &rules);
    let (code, _, _) = s.curl(&[&s.url("/admin/")]);
    assert_eq!(code, 200, "IPv4 loopback is allowed over {t:?}");
    let (code, _, body) = s.curl(&["-g", &format!("{v6}/admin/")]);
    assert_eq!(code, 403, "IPv6 loopback is denied over {t:?}");
    assert_ne!(body, b"admin");
    let (code, _, _) = s.curl(&["-g", &format!("{v6}/")]);
    assert_eq!(code, 200, "outside the prefix: allowed over {t:?}");

    let rules = ["--deny", "/admin 127.0.0.1", "--allow", "/admin ::1/128"];
    let (s, v6) = dual_stack_with(t, &rules);
    assert_eq!(s.get("/admin/", &[]).status, 403, "over {t:?}");
    assert_eq!(
        s.curl(&["-g", &format!("{v6}/admin/")]).0,
        200,
        "over {t:?}"
    );
}

#[test]
fn an_ipv4_mapped_block_matches_ipv4_clients() {
    let (s, v6) = dual_stack_with(
        Transport::Plain,
        &["--deny", "/admin/ ::ffff:127.0.0.0/104"],
    );
    assert_eq!(
        s.get("/admin/", &[]).status,
        403,
        "127.0.0.1 is in the block"
    );
    assert_eq!(s.get("/", &[]).status, 200);
    let (code, _, _) = curl(&["-g", &format!("{v6}/admin/")]);
    assert_eq!(code, 200, "::1 is not");
}

#[test]
fn a_block_with_host_bits_is_applied_masked_with_a_warning_naming_its_line() {
    let conf_dir = TempDir::new("access-conf");
    let conf = conf_dir.write(
        "m.conf",
        "# address rules\nallow /admin/ 10.1.2.3/8\ndeny /admin/ 127.0.0.5/8\n",
    );
    let root = TempDir::new("access-root");
    root.write("index.html", "x");
    root.write("admin/index.html", "admin");
    let s = Server::start_with_config(&conf, root, &[]);
    assert_eq!(s.get("/admin/", &[]).status, 403, "127.0.0.0/8 applies");
    let line = format!("{}:3: deny: ", conf.display());
    assert!(
        s.wait_log(&line, Duration::from_secs(5)),
        "no warning naming the line:\n{}",
        s.log_text()
    );
    let log = s.log_text();
    let warning = log.lines().find(|l| l.contains(&line)).unwrap_or_default();
    assert!(
        warning.contains("warn")
            && warning.contains("127.0.0.5/8")
            && warning.contains("127.0.0.0/8"),
        "{warning}"
    );
    assert!(
        log.contains(&format!("{}:2: allow: ", conf.display())),
        "{log}"
    );

    let out = command()
        .arg("--config")
        .arg(&conf)
        .arg("--check-config")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&line) && stderr.contains("10.1.2.3/8"),
        "--check-config shows the warnings: {stderr}"
    );
}

#[test]
fn the_shipped_device_config_is_valid() {
    let conf = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("rootfs-overlay/etc/marmoset/marmoset.conf");
    let out = command()
        .args([
            "--config",
            conf.to_str().unwrap(),
            "--user",
            "root",
            "--group",
            "root",
            "--check-config",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// DNS rebinding: with `allowed-hosts`, a request naming another host (in
/// `Host` or an absolute-form target) gets 421 and nothing of the site;
/// the device's names, its host name, IP literals and localhost are served.
#[test]
fn names_other_than_the_devices_get_421() {
    let s = Server::start(&["--allowed-hosts", "router.lan"]);
    let get = |host: &str| {
        s.raw(
            format!("GET /index.html HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
    };
    for host in ["evil.example", "evil.example:80", "router.lan.evil.example"] {
        let out = get(host);
        assert!(
            out.starts_with("HTTP/1.1 421 Misdirected Request\r\n"),
            "{host}: {out}"
        );
        assert!(!out.contains("hello"), "{host}: {out}");
    }
    let port = s.port;
    let own = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let own = own.trim();
    assert!(!own.is_empty() && own != "router.lan");
    for host in [
        "router.lan",
        "ROUTER.LAN:80",
        "127.0.0.1",
        &format!("127.0.0.1:{port}"),
        "localhost",
        "[::1]:80",
        own,
        &format!("{own}:{port}"),
    ] {
        let out = get(host);
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{host}: {out}");
    }
    let out = s.raw(b"GET http://evil.example/index.html HTTP/1.1\r\nHost: router.lan\r\nConnection: close\r\n\r\n");
    assert!(
        out.starts_with("HTTP/1.1 421 "),
        "the target's authority wins: {out}"
    );
    let out = s.raw(b"GET /index.html HTTP/1.0\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 200 "), "no name at all: {out}");
    // Without the setting, any name is served.
    let open = Server::start(&[]);
    let out =
        open.raw(b"GET /index.html HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
}

/// A realm whose users have bcrypt hashes slow enough (cost 11, tens of ms)
/// that parallel requests overlap their verifications.
fn slow_realm(extra: &[&str]) -> Server {
    let root = TempDir::new("slow-auth");
    root.write("index.html", "x");
    root.write("admin/index.html", "admin page");
    let htpasswd = format!(
        "{}\n{}\n",
        tool("htpasswd", &["-nbB", "-C", "11", "owner", "pw-owner"]),
        tool("htpasswd", &["-nbB", "-C", "11", "other", "pw-other"]),
    );
    let file = root.write(".htpasswd", htpasswd);
    let realm = format!("/admin/ \"Device admin\" {}", file.display());
    let mut args = vec!["--auth", realm.as_str()];
    args.extend_from_slice(extra);
    Server::start_in(root, &args)
}

/// Sends `headers[i]` on connection `i`, from `source(i)`, all at once
/// (every connection is open before any request is written); the responses.
fn parallel(s: &Server, source: fn(usize) -> Ipv4Addr, headers: &[String]) -> Vec<Response> {
    let conns: Vec<_> = (0..headers.len())
        .map(|i| s.connect_from(&source(i).to_string()))
        .collect();
    let go = std::sync::Arc::new(std::sync::Barrier::new(headers.len()));
    let threads: Vec<_> = conns
        .into_iter()
        .zip(headers.iter().cloned())
        .map(|(mut c, h)| {
            let go = go.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                go.wait();
                let req =
                    format!("GET /admin/ HTTP/1.1\r\nHost: t\r\n{h}\r\nConnection: close\r\n\r\n");
                c.write_all(req.as_bytes()).unwrap();
                read_response(&mut c, false).expect("a response")
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn count(responses: &[Response], status: u16) -> usize {
    responses.iter().filter(|r| r.status == status).count()
}

/// A request for /admin/ from `source` (a loopback address: all of
/// 127/8 is this host's) to `url`, with `user:password` if given; the
/// status and the response's head.
fn from(s: &Server, source: &str, url: &str, credentials: Option<&str>) -> (u16, String) {
    let mut args = vec!["-g", "--interface", source, url];
    if let Some(c) = credentials {
        args.extend(["-u", c]);
    }
    let (code, head, _) = s.curl(&args);
    (code, head)
}

#[test]
fn a_held_address_gets_429_even_for_a_login_cached_for_its_owner() {
    for t in Transport::all() {
        a_held_address_gets_429_even_for_a_login_cached_for_its_owner_over(t);
    }
}

fn a_held_address_gets_429_even_for_a_login_cached_for_its_owner_over(t: Transport) {
    let s = protected(t, &[]);
    let url = s.url("/admin/");
    let owner = |c: &str| from(&s, "127.0.0.1", &url, Some(c)).0;
    let guesser = |c: Option<&str>| from(&s, "127.0.0.2", &url, c);
    // The owner's login is now cached, as a page polling every second keeps it.
    assert_eq!(owner("bcrypt:pw-bcrypt"), 200, "over {t:?}");
    for i in 0..5 {
        let (code, _) = guesser(Some(&format!("bcrypt:guess{i}")));
        assert_eq!(code, 401, "guess {i} over {t:?}");
    }
    // Held back: the same answer whatever it sends, so a right guess does
    // not show.
    for (what, credentials) in [
        ("the owner's cached login", Some("bcrypt:pw-bcrypt")),
        ("another user's right password", Some("md5:pw-md5")),
        ("a wrong password", Some("bcrypt:guess5")),
        ("no credentials", None),
    ] {
        let (code, head) = guesser(credentials);
        assert_eq!(code, 429, "{what} from the held address over {t:?}");
        assert!(
            head.to_ascii_lowercase().contains("retry-after: 60"),
            "{head}"
        );
    }
    assert!(
        s.wait_log("auth: 127.0.0.2 reached its limit", Duration::from_secs(5)),
        "{}",
        s.log_text()
    );
    assert_eq!(
        owner("bcrypt:pw-bcrypt"),
        200,
        "the owner, cached, over {t:?}"
    );
    assert_eq!(
        owner("md5:pw-md5"),
        200,
        "the owner, not cached, over {t:?}"
    );
    assert_eq!(owner("md5:typo"), 401, "the owner's typo over {t:?}");
}

#[test]
fn switching_user_names_buys_no_more_guesses() {
    let s = protected(Transport::Plain, &[]);
    let url = s.url("/admin/");
    let guesser = |c: &str| from(&s, "127.0.0.1", &url, Some(c)).0;
    for (i, user) in ["bcrypt", "md5", "sha256", "nobody", "apr1"]
        .iter()
        .enumerate()
    {
        assert_eq!(guesser(&format!("{user}:guess")), 401, "guess {i}");
    }
    for user in ["sha512", "someone-else"] {
        assert_eq!(guesser(&format!("{user}:guess")), 429, "{user}");
    }
    assert_eq!(guesser("sha512:pw-sha512"), 429);
    let other = |c: &str| from(&s, "127.0.0.2", &url, Some(c)).0;
    assert_eq!(other("sha512:guess"), 401, "another address");
    assert_eq!(other("sha512:pw-sha512"), 200, "another address");
}

#[test]
fn a_good_login_does_not_wipe_earlier_failures() {
    let s = protected(Transport::Plain, &[]);
    let url = s.url("/admin/");
    let client = |c: &str| from(&s, "127.0.0.1", &url, Some(c)).0;
    for i in 0..4 {
        assert_eq!(client(&format!("bcrypt:guess{i}")), 401, "guess {i}");
    }
    // Its own check is taken back, not the failures before it.
    assert_eq!(client("md5:pw-md5"), 200);
    assert_eq!(client("bcrypt:guess4"), 401);
    assert_eq!(client("bcrypt:guess5"), 429);
    assert_eq!(client("md5:pw-md5"), 429, "held, though cached");
}

#[test]
fn ipv6_clients_are_limited_apart_from_ipv4_ones() {
    for t in Transport::all() {
        ipv6_clients_are_limited_apart_from_ipv4_ones_over(t);
    }
}

fn ipv6_clients_are_limited_apart_from_ipv4_ones_over(t: Transport) {
    let v4 = t.listen("127.0.0.1:0");
    let v6 = t.listen("[::1]:0");
    let mut listen = vec!["--listen", "127.0.0.1:0"];
    if t != Transport::Plain {
        listen.extend(["--listen", &v4]);
    }
    listen.extend(["--listen", &v6]);
    let s = protected(t, &listen);
    let v6 = format!("{}://[::1]:{}/admin/", t.scheme(), s.ipv6_port());
    let client = |c: &str| from(&s, "::1", &v6, Some(c)).0;
    for user in ["bcrypt", "md5", "sha256", "nobody", "apr1"] {
        assert_eq!(client(&format!("{user}:guess")), 401, "{user} over {t:?}");
    }
    assert_eq!(client("sha512:pw-sha512"), 429, "over {t:?}");
    let url = s.url("/admin/");
    assert_eq!(
        from(&s, "127.0.0.1", &url, Some("sha512:pw-sha512")).0,
        200,
        "an IPv4 client over {t:?}"
    );
}

#[test]
fn parallel_guesses_are_counted_when_they_start() {
    let s = slow_realm(&["--log-level", "debug"]);
    let guesses: Vec<String> = (0..16)
        .map(|i| basic("owner", &format!("guess{i}")))
        .collect();
    let answers = parallel(&s, |_| Ipv4Addr::LOCALHOST, &guesses);
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    assert_eq!(count(&answers, 401), 5, "{statuses:?}");
    assert_eq!(count(&answers, 429), 11, "{statuses:?}");
    // The log arrives through a pipe: a line logged after every answer
    // (malformed credentials are not verified) marks its end. From another
    // address: this one is held back.
    let (code, _, _) = curl(&[
        "--interface",
        "127.0.0.2",
        "-H",
        "Authorization: Basic !!!",
        &s.url("/admin/"),
    ]);
    assert_eq!(code, 401);
    assert!(s.wait_log("malformed credentials", Duration::from_secs(10)));
    assert_eq!(
        s.log_text().matches("auth: verifying a password").count(),
        5,
        "hashes verified: {}",
        s.log_text()
    );
}

#[test]
fn hashing_runs_on_a_bounded_pool() {
    let s = slow_realm(&[]);
    // One worker: the server's own process.
    let worker = s.pid();
    // The worker's own threads (its main thread, async-io's), before any check.
    let before: u32 = proc_status(worker, "Threads").unwrap().parse().unwrap();
    // Distinct unknown users from distinct addresses: no limit applies,
    // each is a hash to verify.
    let guesses: Vec<String> = (0..40)
        .map(|i| basic(&format!("user{i}"), "guess"))
        .collect();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut most = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let threads = proc_status(worker, "Threads").and_then(|t| t.parse().ok());
                most = most.max(threads.unwrap_or(0));
                std::thread::sleep(Duration::from_millis(2));
            }
            most
        })
    };
    let answers = parallel(&s, |i| Ipv4Addr::new(127, 0, 1, i as u8 + 1), &guesses);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let most_threads: u32 = sampler.join().unwrap();
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    // The pool takes a few at once; a bcrypt-11 hash outlasts the burst's
    // arrival many times over, so most are turned away.
    assert!(
        most_threads <= before + 1,
        "worker threads: {most_threads}, {before} before"
    );
    assert!(count(&answers, 503) >= 20, "{statuses:?}");
    assert_eq!(
        count(&answers, 401) + count(&answers, 503),
        40,
        "{statuses:?}"
    );
    let busy = answers.iter().find(|r| r.status == 503).unwrap();
    assert_eq!(busy.header("retry-after"), Some("1"));
    // The pool is free again once the burst is over.
    assert_eq!(s.get("/admin/", &[&basic("other", "pw-other")]).status, 200);
}

/// A password or user name longer than anyone types (over 256 bytes) gets
/// 401 with no hash computed, as the sha-crypt formats cost time in
/// proportion to it; a password of 256 bytes is still checked.
#[test]
fn absurdly_long_credentials_get_401_without_hashing() {
    let root = TempDir::new("long-auth");
    root.write("admin/index.html", "admin page");
    let longest = "p".repeat(256);
    let file = root.write(
        ".htpasswd",
        format!(
            "owner:{}\n",
            tool("openssl", &["passwd", "-6", "-salt", "longsalt", &longest])
        ),
    );
    let realm = format!("/admin/ \"Device admin\" {}", file.display());
    let s = Server::start_in(root, &["--auth", &realm, "--log-level", "debug"]);
    let status = |user: &str, password: &str| s.get("/admin/", &[&basic(user, password)]).status;
    assert_eq!(status("owner", &"p".repeat(257)), 401);
    assert_eq!(status("owner", &"p".repeat(5400)), 401);
    assert_eq!(status(&"o".repeat(257), "pw"), 401);
    assert_eq!(status("owner", &longest), 200);
    // A line logged after every answer marks the log's end (malformed
    // credentials are not verified).
    assert_eq!(s.get("/admin/", &["Authorization: Basic !!!"]).status, 401);
    assert!(s.wait_log("malformed credentials", Duration::from_secs(10)));
    assert_eq!(
        s.log_text().matches("auth: verifying a password").count(),
        1,
        "{}",
        s.log_text()
    );
    // Counted as wrong guesses: two more reach the limit of five.
    assert_eq!(status("owner", "guess1"), 401);
    assert_eq!(status("owner", "guess2"), 401);
    assert_eq!(status("owner", "guess3"), 429);
}

/// One request on a kept-alive connection, reconnecting if the server closed it.
fn on(s: &Server, c: &mut std::net::TcpStream, header: &str) -> u16 {
    use std::io::Write;
    let req = format!("GET /admin/ HTTP/1.1\r\nHost: t\r\n{header}\r\n\r\n");
    let r = match c.write_all(req.as_bytes()) {
        Ok(()) => read_response(c, false),
        Err(_) => None,
    };
    let r = r.unwrap_or_else(|| {
        *c = s.connect();
        c.write_all(req.as_bytes()).unwrap();
        read_response(c, false).expect("a response")
    });
    if r.header("connection") == Some("close") {
        *c = s.connect();
    }
    r.status
}

#[test]
fn two_workers_give_the_configured_number_of_tries() {
    // One connection per worker: with a limit of two, each worker takes one.
    let s = protected(
        Transport::Plain,
        &["--workers", "2", "--max-connections", "2"],
    );
    let mut a = s.connect();
    let mut b = s.connect();
    let mut unauthorized = 0;
    for i in 0..8 {
        for c in [&mut a, &mut b] {
            let status = on(&s, c, &basic("sha256", &format!("guess{i}")));
            assert!(status == 401 || status == 429, "{status}");
            unauthorized += usize::from(status == 401);
        }
    }
    assert_eq!(unauthorized, 5, "tries across both workers");
}

fn check_htpasswd(lines: &str) -> (bool, String) {
    let dir = TempDir::new("htpasswd");
    let file = dir.write("htpasswd", lines);
    let conf = dir.write(
        "marmoset.conf",
        format!("auth /admin/ \"Admin\" {}\n", file.display()),
    );
    let out = command()
        .args(["--config", conf.to_str().unwrap(), "--check-config"])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn plain_text_and_sha1_entries_are_refused_at_start() {
    let apr1 = tool("htpasswd", &["-nbm", "ok", "pw"]);
    let (ok, err) = check_htpasswd(&format!("{apr1}\n"));
    assert!(ok, "{err}");
    // `htpasswd -p` writes the password itself.
    let (ok, err) = check_htpasswd(&format!("{apr1}\n# plain\nadmin:secret\n"));
    assert!(!ok);
    assert!(err.contains("htpasswd:3: user \"admin\""), "{err}");
    assert!(err.contains("plain-text"), "{err}");
    let sha = tool("htpasswd", &["-nbs", "admin", "secret"]);
    let (ok, err) = check_htpasswd(&format!("{sha}\n"));
    assert!(!ok);
    assert!(err.contains("htpasswd:1: user \"admin\""), "{err}");
    assert!(
        err.contains("{SHA}") && err.contains("htpasswd -B"),
        "{err}"
    );
    let (ok, err) = check_htpasswd("admin\n");
    assert!(!ok);
    assert!(err.contains("htpasswd:1: expected `user:hash`"), "{err}");
}

/// One request over the server's transport; its status (0 if none came).
fn status_of(s: &Server, method: &str, path: &str, host: &str, headers: &[&str]) -> u16 {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    if method != "GET" && method != "HEAD" {
        req.push_str("Content-Length: 2\r\n\r\n{}");
    } else {
        req.push_str("\r\n");
    }
    let out = s.raw(req.as_bytes());
    out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// An echo backend behind `auth /api/settings` (user `admin`, password
/// `pw`) and `deny /api/admin all`; the password file's directory last.
fn guarded_backend() -> (common::backend::Backend, Server, TempDir) {
    let users = TempDir::new("users");
    let hash = tool("openssl", &["passwd", "-6", "-salt", "rulesalt", "pw"]);
    let file = users.write("htpasswd", format!("admin:{hash}\n"));
    let backend = common::backend::Backend::unix(common::backend::echo);
    let realm = format!("/api/settings \"Device\" {}", file.display());
    let s = backend.server(&["--auth", &realm, "--deny", "/api/admin all"]);
    (backend, s, users)
}

/// `auth /api/settings` and `deny /api/admin all` in front of a backend:
/// the tails a backend strips or ignores (`;jsessionid=x`, `.json`, a
/// trailing space) and other letter cases (a case-insensitive router sends
/// `/api/Settings` to the same handler) are covered too, and never reach it
/// without a password.
#[test]
fn auth_and_deny_cover_the_forms_a_backend_routes_to_the_same_handler() {
    let (backend, s, _users) = guarded_backend();
    let get = |path: &str| status_of(&s, "GET", path, "t", &[]);
    for path in [
        "/api/settings",
        "/api/settings;jsessionid=x",
        "/api/settings.json",
        "/api/settings%20",
        "/api/settings/",
        "/api/Settings",
        "/API/SETTINGS;x",
        "/api/settings2",
    ] {
        assert_eq!(get(path), 401, "{path}");
    }
    for path in [
        "/api/admin",
        "/api/admin;x",
        "/api/admin.json",
        "/api/admin%20",
        "/api/Admin",
        "/api/ADMIN/users",
    ] {
        assert_eq!(get(path), 403, "{path}");
    }
    assert!(backend.seen().is_empty(), "{:?}", backend.seen());
    // The password opens every form; paths beside the rules stay open.
    let r = s.get("/api/settings.json", &[&basic("admin", "pw")]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "GET /api/settings.json HTTP/1.1\n")
    );
    assert_eq!(get("/api/status"), 200);
    assert_eq!(get("/api/setting"), 200);
    assert_eq!(backend.seen().len(), 3);
}

/// Tomcat and Jetty drop `;...` from every path segment and merge the empty
/// segments that leaves: `/api/;/settings` is `/api/settings` to them. The
/// rules cover that spelling too, and the backend never sees it without
/// the password or past the deny rule.
#[test]
fn auth_and_deny_cover_paths_with_empty_or_parameter_segments() {
    let (backend, s, _users) = guarded_backend();
    let get = |path: &str| status_of(&s, "GET", path, "t", &[]);
    for path in [
        "/api/;/settings",
        "/api/;jsessionid=1/settings",
        "/api;x/settings",
        "/;/api/%3B/settings",
        "/api/;a;b/;/Settings;c",
    ] {
        assert_eq!(get(path), 401, "{path}");
    }
    for path in ["/api/;/admin", "/api/;x/admin/users", "/api;/;/ADMIN;y"] {
        assert_eq!(get(path), 403, "{path}");
    }
    assert!(backend.seen().is_empty(), "{:?}", backend.seen());
    let r = s.get("/api/;x/settings", &[&basic("admin", "pw")]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "GET /api/;x/settings HTTP/1.1\n")
    );
    assert_eq!(get("/api/;/status"), 200);
}

/// A prefix with a trailing slash covers the name before it with any tail
/// that does not continue the name; an allow rule covers only what it names,
/// so a loose match cannot open what the deny rule after it closes.
#[test]
fn a_slash_prefix_covers_its_name_and_an_allow_rule_only_what_it_names() {
    let root = TempDir::new("slash");
    root.write("index.html", "x");
    root.write("admin/index.html", "admin");
    root.write("administrator.html", "other page");
    let s = Server::start_in(
        root,
        &["--allow", "/admin/ 127.0.0.1", "--deny", "/admin/ all"],
    );
    assert_eq!(s.get("/admin/", &[]).status, 200, "allowed as written");
    for path in ["/Admin/", "/ADMIN/index.html", "/admin;x", "/admin.json"] {
        assert_eq!(s.get(path, &[]).status, 403, "{path}");
    }
    assert_eq!(s.get("/administrator.html", &[]).text(), "other page");
}

/// A page on another site can make the browser send a form to the device
/// with its cached credentials: an unsafe method whose `Origin` is not the
/// request's own scheme, host and port, or with `Sec-Fetch-Site:
/// cross-site`, gets 403 before the script (or the password check).
#[test]
fn cross_origin_posts_to_scripts_are_refused() {
    for t in Transport::all() {
        cross_origin_posts_to_scripts_are_refused_over(t);
    }
}

fn cross_origin_posts_to_scripts_are_refused_over(t: Transport) {
    let root = TempDir::new("csrf");
    root.write("index.html", "x");
    let ran = root.path().join("ran");
    script(
        &root,
        "set",
        &format!(
            "echo \"$REQUEST_METHOD\" >> {}\nprintf 'Content-Type: text/plain\\n\\nok'",
            ran.display()
        ),
    );
    let s = Server::start_in_over(t, root, &[]);
    let host = format!("127.0.0.1:{}", s.transport_port());
    let own = format!("Origin: {}://{host}", t.scheme());
    let other_scheme = match t.scheme() {
        "http" => format!("Origin: https://{host}"),
        _ => format!("Origin: http://{host}"),
    };
    let post =
        |method: &str, headers: &[&str]| status_of(&s, method, "/cgi-bin/set", &host, headers);
    for headers in [
        &["Origin: http://evil.example"][..],
        &["Origin: null"],
        &[other_scheme.as_str()],
        &[&format!("Origin: {}://127.0.0.1:1", t.scheme())],
        &["Sec-Fetch-Site: cross-site"],
        &[own.as_str(), "Sec-Fetch-Site: cross-site"],
    ] {
        assert_eq!(post("POST", headers), 403, "{headers:?} over {t:?}");
    }
    assert!(!ran.exists(), "a refused request ran the script over {t:?}");
    for headers in [
        &[own.as_str()][..],
        &[own.as_str(), "Sec-Fetch-Site: same-origin"],
        &["Sec-Fetch-Site: same-site"],
        &[],
    ] {
        assert_eq!(post("POST", headers), 200, "{headers:?} over {t:?}");
    }
    // Safe methods pass from anywhere.
    assert_eq!(
        post("GET", &["Origin: http://evil.example"]),
        200,
        "over {t:?}"
    );
    let ran = std::fs::read_to_string(&ran).unwrap();
    assert_eq!(ran, "POST\nPOST\nPOST\nPOST\nGET\n", "over {t:?}");
}

#[test]
fn hosts_of_one_lan_64_are_limited_apart_and_their_network_as_a_whole() {
    // The server reads its links at start: the addresses come first.
    let Some(lan) =
        common::lan::LanAddrs::add(&[0xc301, 0xc302, 0xc303, 0xc304, 0xc305, 0xc306, 0xc307])
    else {
        return;
    };
    let s = protected(
        Transport::Plain,
        &["--listen", "127.0.0.1:0", "--listen", "[::1]:0"],
    );
    let url = format!("http://[::1]:{}/admin/", s.ipv6_port());
    let host = |i: usize| lan.at(i).to_string();
    let on = |i: usize, c: &str| from(&s, &host(i), &url, Some(c)).0;
    let (guest, admin) = (0, 1);
    assert_eq!(on(admin, "md5:pw-md5"), 200);
    for i in 0..5 {
        assert_eq!(on(guest, &format!("bcrypt:guess{i}")), 401, "guess {i}");
    }
    assert_eq!(on(guest, "bcrypt:pw-bcrypt"), 429, "the guest's own share");
    assert_eq!(
        on(admin, "sha512:pw-sha512"),
        200,
        "another host of the /64: {}",
        s.log_text()
    );
    // The guest takes more addresses of the /64: the network's 20 checks
    // in a window are all it gets, whatever addresses it takes.
    for a in 2..5 {
        for i in 0..5 {
            assert_eq!(on(a, &format!("bcrypt:guess{a}{i}")), 401, "{a}: {i}");
        }
    }
    assert_eq!(on(5, "bcrypt:guess"), 429, "a new address of the network");
    assert!(
        s.wait_log(
            "auth: fd00:18:5::/64 reached its network's limit",
            Duration::from_secs(5)
        ),
        "{}",
        s.log_text()
    );
    // What the owner gives up meanwhile: a first login from the network.
    assert_eq!(on(6, "md5:pw-md5"), 429, "no login yet from this address");
    // An address that logged in keeps its own share.
    assert_eq!(on(admin, "sha256:pw-sha256"), 200, "the admin, not cached");
    assert_eq!(on(admin, "md5:typo"), 401, "the admin's typo");
    // Over IPv4, another network.
    assert_eq!(
        from(&s, "127.0.0.3", &s.url("/admin/"), Some("md5:pw-md5")).0,
        200
    );
}
