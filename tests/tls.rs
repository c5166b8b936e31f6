//! HTTPS with real clients: curl and `openssl s_client` for what a user's
//! tools see (names, versions, ALPN, resumption), rustls as a client for
//! keep-alive and pipelining, raw sockets for broken and hostile
//! handshakes. Certificates come from `openssl req` or from the server's
//! own `tls-self-signed`.
#![cfg(feature = "tls")]

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::tls::*;
use common::*;
use rustls::pki_types::ServerName;

/// A server with a plain listener (found by the harness) and a TLS one.
struct Tls {
    server: Server,
    port: u16,
    ca: PathBuf,
}

impl Tls {
    fn start(pair: &Pair, extra: &[&str]) -> Tls {
        let root = TempDir::new("tlsroot");
        root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
        Tls::start_in(root, pair, extra)
    }

    fn start_in(root: TempDir, pair: &Pair, extra: &[&str]) -> Tls {
        let cert = pair.cert.to_str().unwrap();
        let key = pair.key.to_str().unwrap();
        let mut args = vec![
            "--listen",
            "127.0.0.1:0",
            "--listen",
            "127.0.0.1:0 tls",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ];
        args.extend_from_slice(extra);
        let server = Server::start_in(root, &args);
        let port = tls_port_on(&server, "127.0.0.1");
        Tls {
            server,
            port,
            ca: pair.cert.clone(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.port)
    }

    fn curl(&self, path: &str, extra: &[&str]) -> (u16, String, Vec<u8>) {
        let url = self.url(path);
        let mut args = vec!["--cacert", self.ca.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.push(&url);
        curl(&args)
    }

    /// A TLS client connection checked against the server's certificate.
    fn connect(&self) -> Stream {
        connect(self.port, client_config(&self.ca))
    }

    /// `openssl s_client` making one HTTP/1.0 request, so that it stays
    /// until the server has sent everything (TLS 1.3 tickets come last).
    fn s_client(&self, args: &[&str]) -> String {
        self.s_client_asking(b"HEAD / HTTP/1.0\r\n\r\n", args)
    }

    /// `s_client` sending `request`; what it printed.
    fn s_client_asking(&self, request: &[u8], args: &[&str]) -> String {
        let connect = format!("127.0.0.1:{}", self.port);
        let mut child = Command::new("openssl")
            .args(["s_client", "-connect", &connect, "-servername", "localhost"])
            .arg("-ign_eof")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("openssl is installed");
        let _ = child.stdin.take().unwrap().write_all(request);
        let out = child.wait_with_output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    fn assert_serves(&self) {
        let (code, _, body) = self.curl("/", &[]);
        assert_eq!(code, 200, "log:\n{}", self.server.log_text());
        assert!(String::from_utf8_lossy(&body).contains("hello"));
    }
}

/// The certificate a new handshake gets, as PEM.
fn served_certificate(t: &Tls) -> String {
    let out = t.s_client(&["-showcerts"]);
    let start = out
        .find("-----BEGIN CERTIFICATE-----")
        .expect("a certificate");
    let end = out.find("-----END CERTIFICATE-----").expect("its end");
    out[start..end].to_string()
}

fn pem_body(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let end = text.find("-----END").unwrap();
    text[..end].to_string()
}

#[test]
fn curl_gets_pages_over_https_and_the_plain_listener_still_answers() {
    let dir = TempDir::new("pair");
    let t = Tls::start(&make_pair(&dir, "device"), &[]);
    t.assert_serves();
    let (code, _, body) = t.curl("/", &["--tlsv1.2", "--tls-max", "1.2"]);
    assert_eq!((code, body.is_empty()), (200, false), "TLS 1.2");
    t.server.assert_healthy();
}

#[test]
fn rsa_keys_in_pkcs1_and_ec_keys_in_sec1_serve_too() {
    let dir = TempDir::new("rsa");
    let pair = Pair {
        cert: dir.path().join("rsa.crt"),
        key: dir.path().join("rsa.key"),
    };
    let pkcs8 = dir.path().join("rsa8.key");
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "30",
        "-subj",
        "/CN=rsa",
        "-addext",
        "subjectAltName=DNS:localhost",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-keyout",
        pkcs8.to_str().unwrap(),
        "-out",
        pair.cert.to_str().unwrap(),
    ]);
    openssl(&[
        "rsa",
        "-traditional",
        "-in",
        pkcs8.to_str().unwrap(),
        "-out",
        pair.key.to_str().unwrap(),
    ]);
    assert!(
        std::fs::read_to_string(&pair.key)
            .unwrap()
            .contains("BEGIN RSA PRIVATE KEY")
    );
    let t = Tls::start(&pair, &[]);
    t.assert_serves();
    let (code, _, _) = t.curl("/", &["--tlsv1.2", "--tls-max", "1.2"]);
    assert_eq!(code, 200, "TLS 1.2 with an RSA key");
    let only = "ECDHE-RSA-AES256-GCM-SHA384";
    let out = t.s_client(&["-tls1_2", "-cipher", only]);
    assert!(
        out.contains(&format!("Cipher is {only}")) && out.contains("HTTP/1.1 200"),
        "{only}:\n{out}"
    );
    drop(t);
    // An EC key as SEC1 (`BEGIN EC PRIVATE KEY`).
    let ec = make_pair(&dir, "ec");
    let sec1 = dir.path().join("sec1.key");
    openssl(&[
        "ec",
        "-in",
        ec.key.to_str().unwrap(),
        "-out",
        sec1.to_str().unwrap(),
    ]);
    assert!(
        std::fs::read_to_string(&sec1)
            .unwrap()
            .contains("BEGIN EC PRIVATE KEY")
    );
    let t = Tls::start(
        &Pair {
            cert: ec.cert,
            key: sec1,
        },
        &[],
    );
    t.assert_serves();
}

/// The suite the server picks among what OpenSSL offers (AES-GCM of both
/// sizes and ChaCha20-Poly1305, in OpenSSL's order): ChaCha20-Poly1305 on
/// the builds for CPUs without AES instructions (MIPS, 32-bit ARM: the
/// binary's ELF machine) while rustls makes the records, AES-128-GCM
/// everywhere else and whenever the kernel takes the records.
#[test]
fn the_cipher_suits_the_cpu_and_who_makes_the_records() {
    let dir = TempDir::new("pair");
    let t = Tls::start(&make_pair(&dir, "device"), &[]);
    t.assert_serves();
    let elf = std::fs::read(binary()).unwrap();
    let machine = if elf[5] == 1 {
        u16::from_le_bytes([elf[18], elf[19]])
    } else {
        u16::from_be_bytes([elf[18], elf[19]])
    };
    const EM_MIPS: u16 = 8;
    const EM_ARM: u16 = 40;
    let in_kernel = t.server.log_text().contains("records in the kernel");
    let chacha = matches!(machine, EM_MIPS | EM_ARM) && !in_kernel;
    for (version, aes, chacha20) in [
        (
            "-tls1_3",
            "TLS_AES_128_GCM_SHA256",
            "TLS_CHACHA20_POLY1305_SHA256",
        ),
        ("-tls1_2", "-AES128-GCM-SHA256", "-CHACHA20-POLY1305"),
    ] {
        let out = t.s_client(&[version]);
        let line = out
            .lines()
            .find(|l| l.contains("Cipher is"))
            .unwrap_or_else(|| panic!("{version}: no cipher:\n{out}"));
        let expected = if chacha { chacha20 } else { aes };
        assert!(
            line.contains(expected),
            "{version}, ELF machine {machine}, records in the kernel: {in_kernel}: {line}"
        );
    }
    t.server.assert_healthy();
}

#[test]
fn tls_1_0_and_1_1_are_refused_and_alpn_is_http_1_1() {
    let dir = TempDir::new("pair");
    let t = Tls::start(&make_pair(&dir, "device"), &[]);
    for old in ["-tls1", "-tls1_1"] {
        let out = t.s_client(&[old, "-cipher", "DEFAULT@SECLEVEL=0"]);
        assert!(
            out.contains("Cipher is (NONE)") && !out.contains("BEGIN CERTIFICATE"),
            "{old}:\n{out}"
        );
    }
    for (version, name) in [("-tls1_2", "TLSv1.2"), ("-tls1_3", "TLSv1.3")] {
        let out = t.s_client(&[version, "-alpn", "http/1.1"]);
        assert!(out.contains(&format!("New, {name}")), "{version}:\n{out}");
        assert!(out.contains("ALPN protocol: http/1.1"), "{version}:\n{out}");
    }
    t.assert_serves();
}

#[test]
fn a_client_that_allows_only_aes_256_gcm_connects() {
    let dir = TempDir::new("pair");
    let t = Tls::start(&make_pair(&dir, "device"), &[]);
    for (args, suite) in [
        (
            ["-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384"],
            "TLS_AES_256_GCM_SHA384",
        ),
        (
            ["-tls1_2", "-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384"],
            "ECDHE-ECDSA-AES256-GCM-SHA384",
        ),
    ] {
        let out = t.s_client(&args);
        assert!(
            out.contains(&format!("Cipher is {suite}")) && out.contains("HTTP/1.1 200"),
            "{suite}:\n{out}"
        );
    }
    // Offered both, in either order (OpenSSL's own puts AES-256 first), a
    // client gets AES-128, which the kernel's TLS can take.
    for (version, flag, offered, want) in [
        (
            "-tls1_3",
            "-ciphersuites",
            "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256",
            "TLS_AES_128_GCM_SHA256",
        ),
        (
            "-tls1_2",
            "-cipher",
            "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256",
            "ECDHE-ECDSA-AES128-GCM-SHA256",
        ),
    ] {
        let out = t.s_client(&[version, flag, offered]);
        assert!(out.contains(&format!("Cipher is {want}")), "{out}");
    }
    // OpenSSL's whole offer: `the_cipher_suits_the_cpu_and_who_makes_the_records`.
    t.assert_serves();
}

#[test]
fn sessions_resume_with_tickets_and_session_ids() {
    let dir = TempDir::new("pair");
    let t = Tls::start(&make_pair(&dir, "device"), &[]);
    let cases: [&[&str]; 3] = [&["-tls1_3"], &["-tls1_2"], &["-tls1_2", "-no_ticket"]];
    for (i, flags) in cases.iter().enumerate() {
        let sess = dir.path().join(format!("sess{i}.pem"));
        let sess = sess.to_str().unwrap();
        let first = t.s_client(&[flags, &["-sess_out", sess][..]].concat());
        assert!(first.contains("New, TLS"), "{flags:?}:\n{first}");
        let again = t.s_client(&[flags, &["-sess_in", sess][..]].concat());
        assert!(
            again.contains("Reused, TLS"),
            "{flags:?} not resumed:\n{again}"
        );
    }
}

/// Asks `/cgi-bin/pid` (the worker's pid: a script's parent) with
/// `s_client` and `args`; whether the session was resumed, and the pid.
fn resumed_on(t: &Tls, args: &[&str]) -> (bool, i32) {
    let out = t.s_client_asking(b"GET /cgi-bin/pid HTTP/1.0\r\n\r\n", args);
    let resumed = out.contains("Reused, TLS");
    assert!(resumed || out.contains("New, TLS"), "{args:?}:\n{out}");
    let pid = out
        .split("\r\n\r\n")
        .nth(1)
        .and_then(|b| b.split_whitespace().next())
        .and_then(|p| p.parse().ok());
    (resumed, pid.unwrap_or_else(|| panic!("no pid:\n{out}")))
}

fn kill(signal: &str, pid: i32) {
    let ok = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -s {signal} {pid}");
}

/// A root whose `/cgi-bin/pid` answers with the pid of the worker.
fn pid_root() -> TempDir {
    let root = TempDir::new("tlsroot");
    root.write("index.html", "hello\n");
    script(
        &root,
        "pid",
        "printf 'Content-Type: text/plain\\r\\n\\r\\n%s\\n' \"$PPID\"\n",
    );
    root
}

/// With two workers, a session one made resumes on the other, by TLS 1.3
/// and TLS 1.2 tickets: every worker has the server's ticket keys. The
/// worker that made it is stopped (SIGSTOP), so the other takes every
/// connection. A reload keeps the keys: the new workers resume it too.
#[test]
fn sessions_resume_on_another_worker_and_after_a_reload() {
    let dir = TempDir::new("pair");
    let t = Tls::start_in(pid_root(), &make_pair(&dir, "device"), &["--workers", "2"]);
    let two = || {
        wait_until(Duration::from_secs(10), || {
            children(t.server.pid()).len() == 2
        })
    };
    assert!(two());
    let workers = children(t.server.pid());
    let mut sessions = Vec::new();
    for version in ["-tls1_3", "-tls1_2"] {
        let sess = dir.path().join(format!("sess{version}.pem"));
        let sess = sess.to_str().unwrap().to_string();
        let (resumed, maker) = resumed_on(&t, &[version, "-sess_out", &sess]);
        assert!(!resumed && workers.contains(&maker), "{version}: {maker}");
        let other = *workers.iter().find(|&&w| w != maker).unwrap();
        kill("STOP", maker);
        let mut got = Vec::new();
        for _ in 0..10 {
            got.push(resumed_on(&t, &[version, "-sess_in", &sess]));
        }
        kill("CONT", maker);
        assert!(
            got.iter().all(|&g| g == (true, other)),
            "{version}: made on {maker}, (resumed, worker) on {other}: {got:?}"
        );
        sessions.push((version, sess));
    }
    t.server.signal("HUP");
    assert!(wait_until(Duration::from_secs(10), || {
        let now = children(t.server.pid());
        now.len() == 2 && now.iter().all(|p| !workers.contains(p))
    }));
    let new = children(t.server.pid());
    for (version, sess) in &sessions {
        let (resumed, on) = resumed_on(&t, &[version, "-sess_in", sess]);
        assert!(resumed && new.contains(&on), "{version} after the reload");
    }
}

/// One process: its reload makes new settings and keeps the ticket keys.
#[test]
fn a_reload_of_the_one_process_keeps_its_sessions() {
    let dir = TempDir::new("pair");
    let t = Tls::start_in(pid_root(), &make_pair(&dir, "device"), &[]);
    for version in ["-tls1_3", "-tls1_2"] {
        let sess = dir.path().join(format!("one{version}.pem"));
        let sess = sess.to_str().unwrap();
        let (resumed, _) = resumed_on(&t, &[version, "-sess_out", sess]);
        assert!(!resumed);
        t.server.reload();
        let (resumed, _) = resumed_on(&t, &[version, "-sess_in", sess]);
        assert!(resumed, "{version} after the reload");
    }
}

#[test]
fn keep_alive_pipelining_ranges_and_large_files_over_https() {
    let dir = TempDir::new("pair");
    let root = TempDir::new("tlsroot");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    root.write("big.bin", &big);
    let t = Tls::start_in(root, &make_pair(&dir, "device"), &[]);
    let mut c = t.connect();
    // Three requests in one write; the answers come in order.
    c.write_all(
        b"GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=1000-1999\r\n\r\n\
          HEAD /big.bin HTTP/1.1\r\nHost: t\r\n\r\n",
    )
    .unwrap();
    let a = read_response(&mut c, false).unwrap();
    assert_eq!((a.status, a.text().contains("hello")), (200, true));
    let b = read_response(&mut c, false).unwrap();
    assert_eq!(b.status, 206);
    assert_eq!(b.body, big[1000..2000]);
    let h = read_response(&mut c, true).unwrap();
    assert_eq!(h.header("content-length"), Some("300000"));
    // The same connection, again, for the whole file (read from disk and
    // encrypted record by record).
    c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let whole = read_response(&mut c, false).unwrap();
    assert_eq!(whole.body.len(), big.len());
    assert!(whole.body == big, "the file arrives intact");
    assert_eq!(
        c.conn.alpn_protocol(),
        Some(&b"http/1.1"[..]),
        "ALPN chosen"
    );
    // Unpadded, unlike over plain HTTP: the records decide where the body
    // lies. Two offsets of heads of one length: one at least would be padded.
    for from in [1, 2] {
        let mut c = t.connect();
        let ask = format!(
            "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes={from}-\r\nConnection: close\r\n\r\n"
        );
        c.write_all(ask.as_bytes()).unwrap();
        let mut raw = Vec::new();
        c.read_to_end(&mut raw).unwrap();
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&raw[..end]);
        assert!(!head.contains(" \r\n"), "{head:?}");
        assert!(raw[end..] == big[from..], "the range arrives intact");
    }
}

#[test]
fn scripts_know_they_run_over_https() {
    let dir = TempDir::new("pair");
    let root = TempDir::new("tlsroot");
    root.write("index.html", "hello\n");
    script(
        &root,
        "env",
        "printf 'Content-Type: text/plain\\r\\n\\r\\n'\n\
         echo \"HTTPS=$HTTPS SCHEME=$REQUEST_SCHEME PORT=$SERVER_PORT LEN=$CONTENT_LENGTH\"\n\
         cat >/dev/null\n",
    );
    let t = Tls::start_in(root, &make_pair(&dir, "device"), &[]);
    let (code, _, body) = t.curl("/cgi-bin/env", &["--data-binary", "0123456789"]);
    assert_eq!(code, 200);
    assert_eq!(
        String::from_utf8_lossy(&body).trim(),
        format!("HTTPS=on SCHEME=https PORT={} LEN=10", t.port)
    );
    let r = t.server.get("/cgi-bin/env", &[]);
    assert_eq!(
        r.text().trim(),
        format!("HTTPS= SCHEME=http PORT={} LEN=", t.server.port)
    );
}

#[test]
fn plain_requests_are_redirected_to_https_except_acme_challenges() {
    let dir = TempDir::new("pair");
    let root = TempDir::new("tlsroot");
    root.write("index.html", "hello\n");
    root.write(".well-known/acme-challenge/tok3n", "tok3n.thumbprint");
    let t = Tls::start_in(root, &make_pair(&dir, "device"), &["--redirect-https"]);
    let raw = t
        .server
        .raw(b"GET /a%20b/c?x=1&y HTTP/1.1\r\nHost: device.lan:8080\r\nConnection: close\r\n\r\n");
    assert!(raw.starts_with("HTTP/1.1 308 "), "{raw}");
    assert!(
        raw.contains(&format!(
            "Location: https://device.lan:{}/a%20b/c?x=1&y\r\n",
            t.port
        )),
        "{raw}"
    );
    // A Host a URI allows but that is no DNS name is not echoed; one no
    // URI allows is refused.
    let raw = t
        .server
        .raw(b"GET / HTTP/1.1\r\nHost: evil.example%2fx\r\nConnection: close\r\n\r\n");
    assert!(
        raw.contains(&format!("Location: https://127.0.0.1:{}/\r\n", t.port)),
        "{raw}"
    );
    let raw = t
        .server
        .raw(b"GET / HTTP/1.1\r\nHost: evil.example/x\r\nConnection: close\r\n\r\n");
    assert!(raw.starts_with("HTTP/1.1 400 "), "{raw}");
    let acme = t.server.get("/.well-known/acme-challenge/tok3n", &[]);
    assert_eq!(
        (acme.status, acme.text().as_str()),
        (200, "tok3n.thumbprint")
    );
    // Over HTTPS everything is served.
    t.assert_serves();
}

#[test]
fn the_self_signed_certificate_is_made_once_with_the_names_and_reused() {
    let dir = TempDir::new("made");
    let pair = Pair {
        cert: dir.path().join("tls/cert.pem"),
        key: dir.path().join("tls/key.pem"),
    };
    let extra = [
        "--tls-self-signed",
        "--tls-names",
        "device.lan 192.0.2.7 fd00::7",
        "--allowed-hosts",
        "localhost",
    ];
    let first = Tls::start(&pair, &extra);
    assert!(first.server.log_text().contains("self-signed certificate"));
    use std::os::unix::fs::PermissionsExt;
    for f in [&pair.cert, &pair.key] {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
    let text = openssl(&[
        "x509",
        "-in",
        pair.cert.to_str().unwrap(),
        "-noout",
        "-text",
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    for name in [
        "DNS:localhost",
        "DNS:device.lan",
        "IP Address:192.0.2.7",
        "IP Address:FD00:0:0:0:0:0:0:7",
        "ASN1 OID: prime256v1",
        "ecdsa-with-SHA256",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    first.assert_serves();
    let (code, _, _) = curl(&[
        "--cacert",
        pair.cert.to_str().unwrap(),
        "--resolve",
        &format!("device.lan:{}:127.0.0.1", first.port),
        &format!("https://device.lan:{}/", first.port),
    ]);
    assert_eq!(
        code, 200,
        "the name from tls-names is in the certificate, and allowed"
    );
    // So is the host name (when it is a DNS name), the certificate's
    // first: also allowed.
    let own = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let own = own.trim().to_ascii_lowercase();
    let dns = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.';
    if !own.is_empty() && own.bytes().all(dns) {
        assert!(text.contains(&format!("DNS:{own}")), "{own}:\n{text}");
        let (code, _, _) = curl(&[
            "--cacert",
            pair.cert.to_str().unwrap(),
            "--resolve",
            &format!("{own}:{}:127.0.0.1", first.port),
            &format!("https://{own}:{}/", first.port),
        ]);
        assert_eq!(code, 200, "the host name {own}");
    }
    let (code, _, _) = curl(&[
        "--cacert",
        pair.cert.to_str().unwrap(),
        "-H",
        "Host: other.lan",
        &first.url("/"),
    ]);
    assert_eq!(code, 421, "a name neither listed nor the device's");
    let made = (
        std::fs::read(&pair.cert).unwrap(),
        std::fs::read(&pair.key).unwrap(),
    );
    drop(first);
    let second = Tls::start(&pair, &extra);
    assert!(!second.server.log_text().contains("self-signed certificate"));
    let kept = (
        std::fs::read(&pair.cert).unwrap(),
        std::fs::read(&pair.key).unwrap(),
    );
    assert!(made == kept, "the pair is reused at the next start");
    second.assert_serves();
}

/// `--check-config` with these flags: its exit status and stderr.
fn check_config(args: &[&str]) -> (Option<i32>, String) {
    let out = command()
        .args(["--config", "/dev/null"])
        .args(args)
        .arg("--check-config")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_key_left_without_its_certificate_gets_one_at_the_next_start() {
    let dir = TempDir::new("lone");
    let pair = Pair {
        cert: dir.path().join("tls/cert.pem"),
        key: dir.path().join("tls/key.pem"),
    };
    let flags = |pair: &Pair| {
        [
            "--listen".to_string(),
            "127.0.0.1:0 tls".into(),
            "--tls-cert".into(),
            pair.cert.to_str().unwrap().into(),
            "--tls-key".into(),
            pair.key.to_str().unwrap().into(),
            "--tls-self-signed".into(),
        ]
    };
    drop(Tls::start(&pair, &["--tls-self-signed"]));
    // What a power cut between the two files' renames leaves.
    std::fs::remove_file(&pair.cert).unwrap();
    let key = std::fs::read(&pair.key).unwrap();
    let args = flags(&pair);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (status, err) = check_config(&args);
    assert_eq!(status, Some(0), "{err}");
    assert!(
        err.contains("warning: --tls-cert: ") && err.contains("a self-signed certificate is made"),
        "{err}"
    );
    let t = Tls::start(&pair, &["--tls-self-signed"]);
    assert!(
        t.server.log_text().contains("for the key found alone in"),
        "{}",
        t.server.log_text()
    );
    assert_eq!(std::fs::read(&pair.key).unwrap(), key, "the key is kept");
    t.assert_serves();
    assert_eq!(served_certificate(&t), pem_body(&pair.cert));
    drop(t);

    // A certificate without its key: no key can be made for it, and
    // `--check-config` says so as start does.
    std::fs::remove_file(&pair.key).unwrap();
    let (status, err) = check_config(&args);
    assert_eq!(status, Some(2), "{err}");
    assert!(
        err.contains("no key can be made for a certificate"),
        "{err}"
    );
    let conf = format!(
        "listen 127.0.0.1:0\nlisten 127.0.0.1:0 tls\ntls-cert {}\ntls-key {}\ntls-self-signed on\n",
        pair.cert.display(),
        pair.key.display()
    );
    let (status, err) = start_failure(&conf);
    assert_eq!(status, Some(2), "{err}");
    assert!(
        err.contains("m.conf:4: tls-key: ") && err.contains("no key can be made"),
        "{err}"
    );
}

/// Flash damage: an empty or cut certificate beside its key gets a new
/// certificate for that key, as a key left alone does; an empty key gets a
/// new pair; a cut key is kept aside, never overwritten (it may be all
/// that is left of the key), and a new pair is made.
#[test]
fn an_empty_or_cut_file_of_the_pair_is_made_again_and_no_key_is_lost() {
    let dir = TempDir::new("damaged");
    let pair = Pair {
        cert: dir.path().join("tls/cert.pem"),
        key: dir.path().join("tls/key.pem"),
    };
    drop(Tls::start(&pair, &["--tls-self-signed"]));
    let key = std::fs::read(&pair.key).unwrap();
    let cert = std::fs::read(&pair.cert).unwrap();
    for damaged in [&b""[..], &cert[..cert.len() / 2]] {
        std::fs::write(&pair.cert, damaged).unwrap();
        let t = Tls::start(&pair, &["--tls-self-signed"]);
        assert_eq!(std::fs::read(&pair.key).unwrap(), key, "the key is kept");
        t.assert_serves();
        assert_eq!(served_certificate(&t), pem_body(&pair.cert));
    }
    std::fs::write(&pair.key, b"").unwrap();
    let t = Tls::start(&pair, &["--tls-self-signed"]);
    t.assert_serves();
    assert_eq!(served_certificate(&t), pem_body(&pair.cert));
    drop(t);
    let key = std::fs::read(&pair.key).unwrap();
    let cut = &key[..key.len() / 2];
    std::fs::write(&pair.key, cut).unwrap();
    let t = Tls::start(&pair, &["--tls-self-signed"]);
    t.assert_serves();
    assert_eq!(served_certificate(&t), pem_body(&pair.cert));
    let aside = dir.path().join("tls/key.pem.damaged");
    assert_eq!(
        std::fs::read(&aside).unwrap(),
        cut,
        "the cut key is kept aside"
    );
    assert_ne!(std::fs::read(&pair.key).unwrap(), cut);
    drop(t);
    // Cut again: the first one kept aside stays as it is.
    std::fs::write(&pair.key, b"-----BEGIN PRIVATE KEY-----\nMIGH").unwrap();
    Tls::start(&pair, &["--tls-self-signed"]).assert_serves();
    assert_eq!(std::fs::read(&aside).unwrap(), cut);
    assert_eq!(
        std::fs::read(dir.path().join("tls/key.pem.damaged.2")).unwrap(),
        b"-----BEGIN PRIVATE KEY-----\nMIGH"
    );
    // A certificate file that holds a key section is never replaced.
    std::fs::write(&pair.cert, b"-----BEGIN PRIVATE KEY-----\nMIGH").unwrap();
    let conf = format!(
        "listen 127.0.0.1:0\nlisten 127.0.0.1:0 tls\ntls-cert {}\ntls-key {}\ntls-self-signed on\n",
        pair.cert.display(),
        pair.key.display()
    );
    let (status, err) = start_failure(&conf);
    assert_eq!(status, Some(2), "{err}");
    assert!(err.contains("m.conf:3: tls-cert: "), "{err}");
    assert_eq!(
        std::fs::read(&pair.cert).unwrap(),
        b"-----BEGIN PRIVATE KEY-----\nMIGH"
    );
}

/// A tmpfs of `size` bytes on a new directory, unmounted when dropped.
struct SmallFs {
    dir: TempDir,
}

impl SmallFs {
    fn mount(size: &str) -> Option<SmallFs> {
        let dir = TempDir::new("smallfs");
        let opts = format!("size={size}");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &opts, "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(SmallFs { dir })
    }

    fn resize(&self, size: &str) {
        let opts = format!("remount,size={size}");
        let ok = Command::new("mount")
            .args(["-o", &opts])
            .arg(self.dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount -o {opts}");
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_full_filesystem_at_first_start_leaves_no_lone_key() {
    if !is_root() {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return;
    }
    // One page: room for the key, not for the certificate too.
    let fs = SmallFs::mount("4k").expect("mount -t tmpfs");
    let pair = Pair {
        cert: fs.dir.path().join("cert.pem"),
        key: fs.dir.path().join("key.pem"),
    };
    let conf = format!(
        "listen 127.0.0.1:0\nlisten 127.0.0.1:0 tls\ntls-cert {}\ntls-key {}\ntls-self-signed on\n",
        pair.cert.display(),
        pair.key.display()
    );
    let (status, err) = start_failure(&conf);
    assert_eq!(status, Some(1), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let left: Vec<_> = std::fs::read_dir(fs.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "neither file, nor a temporary one: {left:?}"
    );
    // Once there is room, the next start makes the pair and serves.
    fs.resize("1m");
    let t = Tls::start(&pair, &["--tls-self-signed"]);
    t.assert_serves();
}

#[test]
fn scripts_cannot_read_the_key_made_as_root_and_a_reload_keeps_it() {
    if !is_root() {
        eprintln!("skipped: dropping to `nobody` needs root");
        return;
    }
    let dir = TempDir::new("keyowner");
    let pair = Pair {
        cert: dir.path().join("tls/cert.pem"),
        key: dir.path().join("tls/key.pem"),
    };
    let root = TempDir::new("tlsroot");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    let can_read = |f: &Path| {
        format!(
            "if cat {} >/dev/null 2>&1; then echo readable; else echo denied; fi\n",
            f.display()
        )
    };
    script(
        &root,
        "files",
        &format!(
            "printf 'Content-Type: text/plain\\n\\n'\nid -un\n{}{}{}",
            can_read(&pair.key),
            can_read(&pair.cert),
            // The server's memory, which holds the key: it changed user
            // from root, so the kernel keeps others of that user out.
            can_read(Path::new("/proc/$PPID/environ")),
        ),
    );
    let t = Tls::start_in(root, &pair, &["--tls-self-signed", "--user", "nobody"]);
    let (code, _, body) = t.curl("/cgi-bin/files", &[]);
    assert_eq!(code, 200, "{}", t.server.log_text());
    assert_eq!(
        String::from_utf8_lossy(&body),
        "nobody\ndenied\nreadable\ndenied\n",
        "a script reads the certificate, not the key nor the server's memory"
    );
    // The server, as `nobody` now too, keeps the pair it read at start.
    t.server.signal("HUP");
    assert!(
        t.server
            .wait_log("the pair read at start is kept", Duration::from_secs(10)),
        "{}",
        t.server.log_text()
    );
    assert!(
        !t.server.log_text().contains("reload failed"),
        "{}",
        t.server.log_text()
    );
    t.assert_serves();
    assert_eq!(served_certificate(&t), pem_body(&pair.cert));
}

#[test]
fn a_reload_keeps_a_root_only_key_only_from_the_same_files() {
    if !is_root() {
        eprintln!("skipped: dropping to `nobody` needs root");
        return;
    }
    let dir = TempDir::new("rootkeys");
    let a = make_pair(&dir, "a");
    let b = make_pair(&dir, "b");
    use std::os::unix::fs::PermissionsExt;
    for key in [&a.key, &b.key] {
        std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let conf_for = |p: &Pair| {
        format!(
            "tls-cert {}\ntls-key {}\nuser nobody\n",
            p.cert.display(),
            p.key.display()
        )
    };
    let conf = dir.write("m.conf", conf_for(&a));
    let root = TempDir::new("tlsroot");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    let listen = ["--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0 tls"];
    let server = Server::start_with_config(&conf, root, &listen);
    let t = Tls {
        port: tls_port_on(&server, "127.0.0.1"),
        server,
        ca: a.cert.clone(),
    };
    t.server.signal("HUP");
    assert!(
        t.server
            .wait_log("the pair read at start is kept", Duration::from_secs(10)),
        "{}",
        t.server.log_text()
    );
    // Other files the user cannot read: the reload fails, the pair stays.
    std::fs::write(&conf, conf_for(&b)).unwrap();
    t.server.signal("HUP");
    assert!(
        t.server.wait_log("reload failed", Duration::from_secs(10)),
        "{}",
        t.server.log_text()
    );
    assert!(
        t.server.log_text().contains("Permission denied"),
        "{}",
        t.server.log_text()
    );
    assert_eq!(served_certificate(&t), pem_body(&a.cert));
    t.assert_serves();
}

#[test]
fn sighup_loads_a_new_pair_and_keeps_the_old_one_when_the_new_is_broken() {
    let dir = TempDir::new("pair");
    let a = make_pair(&dir, "first");
    let b = make_pair(&dir, "second");
    let live = Pair {
        cert: dir.path().join("live.crt"),
        key: dir.path().join("live.key"),
    };
    std::fs::copy(&a.cert, &live.cert).unwrap();
    std::fs::copy(&a.key, &live.key).unwrap();
    let t = Tls::start(&live, &[]);
    assert_eq!(served_certificate(&t), pem_body(&a.cert));
    // A connection open across the reload gets its next answer.
    let mut open = t.connect();
    open.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut open, false).unwrap().status, 200);

    std::fs::copy(&b.cert, &live.cert).unwrap();
    std::fs::copy(&b.key, &live.key).unwrap();
    t.server.signal("HUP");
    let renewed = wait_until(Duration::from_secs(10), || {
        served_certificate(&t) == pem_body(&b.cert)
    });
    assert!(
        renewed,
        "new handshakes get the new pair; log:\n{}",
        t.server.log_text()
    );
    open.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut open, false).unwrap().status, 200);

    // A key that does not match: logged, and the pair in use stays.
    std::fs::copy(&a.key, &live.key).unwrap();
    t.server.signal("HUP");
    assert!(t.server.wait_log("reload failed", Duration::from_secs(10)));
    assert!(
        t.server
            .log_text()
            .contains("is not the key of the certificate")
    );
    assert_eq!(served_certificate(&t), pem_body(&b.cert));
    t.assert_serves();
}

/// Listeners change only at a restart: a reload whose configuration adds a
/// TLS listener, or drops the only one, is refused and the running one
/// serves on, in every worker.
#[test]
fn a_reload_that_adds_or_removes_tls_listeners_is_refused() {
    let dir = TempDir::new("pair");
    let pair = make_pair(&dir, "server");
    let tls_lines = format!(
        "listen 127.0.0.1:0 tls\ntls-cert {}\ntls-key {}\n",
        pair.cert.display(),
        pair.key.display()
    );
    let conf = dir.path().join("marmoset.conf");
    for (first, then) in [("", tls_lines.as_str()), (tls_lines.as_str(), "")] {
        std::fs::write(&conf, format!("listen 127.0.0.1:0\n{first}")).unwrap();
        let root = TempDir::new("tlsroot");
        root.write("index.html", "hello\n");
        // No --listen flag: the file's listeners are the ones a reload rereads.
        let mut cmd = command();
        cmd.arg("--config").arg(&conf).arg("--workers").arg("2");
        cmd.arg("--root").arg(root.path());
        let s = Server::spawn(cmd, root);
        std::fs::write(&conf, format!("listen 127.0.0.1:0\n{then}")).unwrap();
        s.signal("HUP");
        assert!(
            s.wait_log("takes effect at the next restart", Duration::from_secs(10)),
            "{}",
            s.log_text()
        );
        for _ in 0..20 {
            s.assert_healthy();
        }
        let log = s.log_text();
        assert!(
            !log.contains("restarting it") && !log.contains("cannot start worker"),
            "{log}"
        );
    }
}

/// With several workers, a SIGHUP that reaches the workers themselves (sent
/// to the process group) reloads the pair in each, in place.
#[test]
fn workers_given_sighup_reload_the_pair_in_place() {
    let dir = TempDir::new("pair");
    let a = make_pair(&dir, "first");
    let b = make_pair(&dir, "second");
    let live = Pair {
        cert: dir.path().join("live.crt"),
        key: dir.path().join("live.key"),
    };
    std::fs::copy(&a.cert, &live.cert).unwrap();
    std::fs::copy(&a.key, &live.key).unwrap();
    let t = Tls::start(&live, &["--workers", "2"]);
    assert!(wait_until(Duration::from_secs(10), || children(
        t.server.pid()
    )
    .len()
        == 2));
    let workers = children(t.server.pid());
    let hup = |pid: i32| {
        let ok = Command::new("kill")
            .args(["-s", "HUP", &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    let logged = |needle: &str| {
        wait_until(Duration::from_secs(10), || {
            t.server.log_text().matches(needle).count() == workers.len()
        })
    };
    std::fs::copy(&b.cert, &live.cert).unwrap();
    std::fs::copy(&b.key, &live.key).unwrap();
    workers.iter().for_each(|&w| hup(w));
    assert!(logged("TLS: certificate"), "{}", t.server.log_text());
    for _ in 0..4 {
        assert_eq!(served_certificate(&t), pem_body(&b.cert));
    }
    assert_eq!(children(t.server.pid()), workers, "the same workers");
    std::fs::write(&live.key, "").unwrap();
    workers.iter().for_each(|&w| hup(w));
    assert!(
        logged("keeping the certificate in use"),
        "{}",
        t.server.log_text()
    );
    for _ in 0..4 {
        assert_eq!(served_certificate(&t), pem_body(&b.cert));
    }
    t.assert_serves();
}

/// Starts the server on a config file; its exit status and stderr.
fn start_failure(conf: &str) -> (Option<i32>, String) {
    let dir = TempDir::new("badconf");
    let path = dir.write("m.conf", conf);
    let mut child = command()
        .arg("--config")
        .arg(&path)
        .args(["--root", dir.path().to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + start_deadline();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    (
        status,
        err.replace(&format!("{}/", dir.path().display()), ""),
    )
}

#[test]
fn a_bad_certificate_or_key_is_a_config_error_at_its_line() {
    let dir = TempDir::new("pairs");
    let a = make_pair(&dir, "a");
    let b = make_pair(&dir, "b");
    let encrypted = dir.path().join("enc.key");
    openssl(&[
        "pkcs8",
        "-topk8",
        "-in",
        a.key.to_str().unwrap(),
        "-out",
        encrypted.to_str().unwrap(),
        "-passout",
        "pass:secret",
    ]);
    let empty = dir.write("empty.pem", "");
    let unreadable = dir.path().join("a-directory");
    std::fs::create_dir(&unreadable).unwrap();
    let p = |x: &Path| x.to_str().unwrap().to_string();
    let cases = [
        (
            p(&a.cert),
            p(&b.key),
            4,
            "tls-key",
            "is not the key of the certificate",
        ),
        (p(&a.cert), p(&encrypted), 4, "tls-key", "is encrypted"),
        (p(&a.cert), p(&empty), 4, "tls-key", "is empty"),
        (p(&empty), p(&a.key), 3, "tls-cert", "is empty"),
        (p(&unreadable), p(&a.key), 3, "tls-cert", "cannot read"),
        (p(&a.cert), p(&unreadable), 4, "tls-key", "cannot read"),
        (
            p(&a.key),
            p(&a.key),
            3,
            "tls-cert",
            "no `BEGIN CERTIFICATE` section",
        ),
    ];
    for (cert, key, line, setting, problem) in cases {
        let conf =
            format!("listen 127.0.0.1:0\nlisten 127.0.0.1:0 tls\ntls-cert {cert}\ntls-key {key}\n");
        let (status, err) = start_failure(&conf);
        assert_eq!(status, Some(2), "{err}");
        assert!(
            err.contains(&format!("m.conf:{line}: {setting}: ")) && err.contains(problem),
            "expected `{problem}` at line {line}:\n{err}"
        );
    }
    let (status, err) = start_failure("listen 127.0.0.1:0 tls\n");
    assert_eq!(status, Some(2));
    assert!(
        err.contains("m.conf:1: listen: a TLS listener needs"),
        "{err}"
    );
    let (status, err) = start_failure("listen 127.0.0.1:0\nredirect-https on\n");
    assert_eq!(status, Some(2));
    assert!(
        err.contains("m.conf:2: redirect-https: needs a TLS listener"),
        "{err}"
    );
}

/// Reads until the server closes; `Err` if it reset the connection.
fn until_closed(c: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut got = Vec::new();
    c.read_to_end(&mut got)?;
    Ok(got)
}

#[test]
fn plain_http_garbage_and_truncated_hellos_get_a_clean_close() {
    let dir = TempDir::new("pair");
    let t = Tls::start(&make_pair(&dir, "device"), &["--header-timeout", "3"]);
    let open = || {
        let c = TcpStream::connect(("127.0.0.1", t.port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c
    };
    // Plain HTTP on the TLS port: no bytes back, a close without a reset.
    let mut c = open();
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let started = Instant::now();
    assert_eq!(until_closed(&mut c).unwrap(), b"");
    assert!(started.elapsed() < Duration::from_secs(3), "closed at once");

    // A handshake record of garbage: an alert, then the close.
    let mut c = open();
    c.write_all(b"\x16\x03\x01\x00\x10garbage-garbage!")
        .unwrap();
    let got = until_closed(&mut c).unwrap();
    assert!(
        got.is_empty() || got[0] == 0x15,
        "an alert or nothing: {got:?}"
    );

    // The first half of a real ClientHello, then the end of the stream.
    let name = ServerName::try_from("localhost").unwrap();
    let mut hello = Vec::new();
    rustls::ClientConnection::new(client_config(&t.ca), name)
        .unwrap()
        .write_tls(&mut hello)
        .unwrap();
    let mut c = open();
    c.write_all(&hello[..hello.len() / 2]).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(until_closed(&mut c).unwrap(), b"");

    // Half of it and then silence: closed at the head timeout.
    let mut c = open();
    c.write_all(&hello[..hello.len() / 2]).unwrap();
    let started = Instant::now();
    assert_eq!(until_closed(&mut c).unwrap(), b"");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(8),
        "a slow handshake counts against the head timeout: {waited:?}"
    );
    t.assert_serves();
}

#[test]
fn the_handshake_and_the_first_request_share_one_head_timeout() {
    let dir = TempDir::new("pair");
    let t = Tls::start(&make_pair(&dir, "device"), &["--header-timeout", "3"]);
    let mut c = TcpStream::connect(("127.0.0.1", t.port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let connected = Instant::now();
    // A client that takes 2 of its 3 seconds to handshake, then sends nothing.
    std::thread::sleep(Duration::from_secs(2));
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = rustls::ClientConnection::new(client_config(&t.ca), name).unwrap();
    while tls.is_handshaking() {
        tls.complete_io(&mut c).unwrap();
    }
    until_closed(&mut c).unwrap();
    let waited = connected.elapsed();
    // One timeout from the connect: about 3 s; a fresh one after the
    // handshake would be 5 s or more.
    assert!(
        waited >= Duration::from_millis(2500) && waited < Duration::from_millis(4500),
        "closed {waited:?} after the connect"
    );
    t.assert_serves();
}

#[test]
fn a_thousand_half_open_handshakes_do_not_stop_a_normal_client() {
    let dir = TempDir::new("pair");
    let t = Tls::start(&make_pair(&dir, "device"), &["--max-connections", "2000"]);
    let name = ServerName::try_from("localhost").unwrap();
    let mut hello = Vec::new();
    rustls::ClientConnection::new(client_config(&t.ca), name)
        .unwrap()
        .write_tls(&mut hello)
        .unwrap();
    let mut held = Vec::new();
    // From 4 addresses: one client holds at most a quarter of the limit.
    for i in 0..1000 {
        let mut c = connect_from_to(&format!("127.0.1.{}", i / 250 + 1), t.port);
        c.write_all(&hello[..hello.len() - 10]).unwrap();
        held.push(c);
    }
    // Every one has been taken up by the server (it answers none).
    // One worker: the server's own process.
    let taken = wait_until(Duration::from_secs(20), || fd_count(t.server.pid()) >= 1000);
    assert!(taken, "the worker holds the half-open connections");
    t.assert_serves();
    let mut c = t.connect();
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut c, false).unwrap().status, 200);
    drop(held);
}

/// Whether the kernel takes the records (kTLS) is found once at start,
/// before privileges are dropped and workers forked, and said in one line:
/// not per worker, not per connection. Where the kernel has no TLS layer
/// once the server runs (none in tcp_available_ulp: the probe would have
/// loaded the module) the records stay in user space, and every test in
/// this file runs there.
#[test]
fn the_kernel_tls_mode_is_logged_once_at_start() {
    let dir = TempDir::new("pair");
    let t = Tls::start(&make_pair(&dir, "device"), &["--workers", "2"]);
    for _ in 0..3 {
        t.assert_serves();
    }
    let (code, _, _) = t.curl("/", &["--tlsv1.2", "--tls-max", "1.2"]);
    assert_eq!(code, 200);
    let log = t.server.log_text();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("TLS: records in"))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "one line saying where the records are:\n{log}"
    );
    let ulps = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp").unwrap_or_default();
    if !ulps.split_whitespace().any(|u| u == "tls") {
        assert!(
            lines[0].contains("records in user space: no kernel TLS"),
            "{log}"
        );
    }
    let started = log.find("started").expect("a started line");
    assert!(
        log.find("TLS: records in").is_some_and(|at| at < started),
        "{log}"
    );
}

/// Counts the TLS records that arrive on a connection, by content type.
struct Records {
    tcp: TcpStream,
    /// Bytes of the current record's header seen, and of its payload left.
    header: Vec<u8>,
    left: usize,
    application_data: usize,
}

impl Read for Records {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.tcp.read(buf)?;
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            if self.left > 0 {
                let skip = self.left.min(rest.len());
                self.left -= skip;
                rest = &rest[skip..];
                continue;
            }
            self.header.push(rest[0]);
            rest = &rest[1..];
            if self.header.len() == 5 {
                if self.header[0] == 23 {
                    self.application_data += 1;
                }
                self.left = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                self.header.clear();
            }
        }
        Ok(n)
    }
}

impl Write for Records {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tcp.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.tcp.flush()
    }
}

/// A small file kept in memory is sent with its head in one write: one
/// record, whether rustls or the kernel makes it (TLS 1.2, whose tickets
/// come within the handshake, so every record after it is the answer's).
#[test]
fn a_small_file_and_its_head_go_out_in_one_record() {
    let dir = TempDir::new("pair");
    let root = TempDir::new("tlsroot");
    root.write("index.html", "hello\n");
    root.write("page.html", "x".repeat(1400));
    let t = Tls::start_in(root, &make_pair(&dir, "device"), &[]);
    let config = client_config_for(&t.ca, &[&rustls::version::TLS12]);
    let tcp = TcpStream::connect(("127.0.0.1", t.port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let counted = Records {
        tcp,
        header: Vec::new(),
        left: 0,
        application_data: 0,
    };
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let mut c = rustls::StreamOwned::new(conn, counted);
    while c.conn.is_handshaking() {
        c.conn.complete_io(&mut c.sock).unwrap();
    }
    assert_eq!(c.sock.application_data, 0, "no data before the request");
    c.write_all(b"GET /page.html HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let r = read_response(&mut c, false).unwrap();
    assert_eq!((r.status, r.body.len()), (200, 1400));
    assert_eq!(c.sock.application_data, 1, "records of the answer");
    t.server.assert_healthy();
}
