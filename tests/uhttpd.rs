//! Scripts as LuCI and cgi-io get them under uhttpd, with the settings
//! init/uhttpd.init writes for OpenWrt's default /etc/config/uhttpd
//! (tests/init/uhttpd.sh checks that the script writes exactly these):
//! the environment, a firmware image uploaded to a script that lives
//! outside the root behind a symlink (as /www/cgi-bin/cgi-upload points to
//! /usr/libexec/cgi-io), and the bound on chunked bodies.

mod common;

use std::io::Write;

use common::*;

/// What the mapping writes for OpenWrt's default file, less the listen,
/// root, TLS, host and ubus lines the harness or other tests cover.
const MAPPED: &str = "workers 1
syslog off
cgi-prefix /cgi-bin/
cgi-timeout 60
cgi-max 3
cgi-max-body 1073741824
header-timeout 30
send-timeout 30
keepalive-timeout 20
max-connections 100
index index.html index.htm default.html default.htm
symlinks anywhere
listing on
";

/// A program outside the root and a symlink to it in cgi-bin, as cgi-io
/// is installed; it reports the name it was run as (cgi-io dispatches on
/// it), then its environment or the size of its body.
fn start() -> (Server, TempDir, TempDir) {
    let outside = TempDir::new("libexec");
    let io = outside.write_executable(
        "cgi-io",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\n\
         case $0 in\n*cgi-upload) wc -c | tr -d ' ' ;;\n*) echo \"argv0=$0\"; env | sort ;;\nesac\n",
    );
    let root = TempDir::new("www");
    root.write("index.html", "hello\n");
    std::fs::create_dir_all(root.path().join("cgi-bin")).unwrap();
    for name in ["cgi-upload", "cgi-exec"] {
        std::os::unix::fs::symlink(&io, root.path().join("cgi-bin").join(name)).unwrap();
    }
    let conf = TempDir::new("conf");
    let file = conf.write("uhttpd-main.conf", MAPPED);
    let s = Server::start_with_config(&file, root, &[]);
    (s, outside, conf)
}

fn var<'a>(env: &'a str, name: &str) -> Option<&'a str> {
    env.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
}

#[test]
fn scripts_get_the_environment_luci_and_cgi_io_read() {
    let (s, _outside, _conf) = start();
    let origin = format!("Origin: http://127.0.0.1:{}", s.port);
    let (code, _, body) = s.curl(&[
        "-H",
        &origin,
        "-H",
        "Accept-Language: de,en;q=0.5",
        "-H",
        "Cookie: sysauth_http=0123",
        "-H",
        "Auth-User: root",
        "-H",
        "Auth-Pass: secret",
        "-H",
        "Accept: text/html",
        "--data-binary",
        "sessionid=0123",
        &s.url("/cgi-bin/cgi-exec/admin/status?x=1"),
    ]);
    let env = String::from_utf8_lossy(&body);
    assert_eq!(code, 200, "{env}");
    let port = s.port.to_string();
    let origin = format!("http://127.0.0.1:{port}");
    for (name, want) in [
        (
            "argv0",
            s.root.path().join("cgi-bin/cgi-exec").to_str().unwrap(),
        ),
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("REQUEST_METHOD", "POST"),
        ("SCRIPT_NAME", "/cgi-bin/cgi-exec"),
        ("PATH_INFO", "/admin/status"),
        ("QUERY_STRING", "x=1"),
        ("REQUEST_URI", "/cgi-bin/cgi-exec/admin/status?x=1"),
        ("CONTENT_LENGTH", "14"),
        ("CONTENT_TYPE", "application/x-www-form-urlencoded"),
        ("HTTP_COOKIE", "sysauth_http=0123"),
        ("HTTP_AUTH_USER", "root"),
        ("HTTP_AUTH_PASS", "secret"),
        ("HTTP_ACCEPT", "text/html"),
        ("HTTP_ACCEPT_LANGUAGE", "de,en;q=0.5"),
        ("HTTP_ORIGIN", origin.as_str()),
        ("SERVER_NAME", "127.0.0.1"),
        ("SERVER_PORT", port.as_str()),
        ("SERVER_ADDR", "127.0.0.1"),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("REMOTE_HOST", "127.0.0.1"),
        ("REDIRECT_STATUS", "200"),
        ("DOCUMENT_ROOT", s.root.path().to_str().unwrap()),
    ] {
        assert_eq!(var(&env, name), Some(want), "{name} in\n{env}");
    }
    // `#!/usr/bin/env ucode` and cgi-io's helpers are found where
    // OpenWrt has them.
    let path = var(&env, "PATH").unwrap_or_default();
    for dir in ["/sbin", "/usr/sbin", "/bin", "/usr/bin"] {
        assert!(path.split(':').any(|d| d == dir), "{dir} in PATH {path}");
    }
    s.assert_healthy();
}

#[test]
fn a_64_mib_firmware_upload_reaches_cgi_upload_with_memory_flat() {
    const SIZE: usize = 64 << 20;
    let (s, _outside, _conf) = start();
    let grew = rss_growth_during_upload(&s, "/cgi-bin/cgi-upload", SIZE, &format!("{SIZE}\n"));
    // One buffer between the socket and the script; 2 MiB leaves room for
    // the allocator, far below the image's 64 MiB.
    assert!(grew < 2048, "RSS grew by {grew} kB");
    s.assert_healthy();
}

#[test]
fn a_chunked_body_past_1_mib_gets_413_whatever_cgi_max_body_allows() {
    let (s, _outside, _conf) = start();
    let rss = || data_rss_kib(s.pid());
    let before = rss();
    let mut c = s.connect();
    c.write_all(
        b"POST /cgi-bin/cgi-upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    let block = vec![b'c'; 64 << 10];
    let chunk = [format!("{:x}\r\n", block.len()).as_bytes(), &block, b"\r\n"].concat();
    // 4 MiB offered; the answer may come (and the socket close) before all
    // of it is written.
    for _ in 0..64 {
        if c.write_all(&chunk).is_err() {
            break;
        }
    }
    let _ = c.write_all(b"0\r\n\r\n");
    let r = read_response(&mut c, false).expect("an answer");
    assert_eq!(r.status, 413);
    let grew = rss().saturating_sub(before);
    assert!(grew < 3072, "RSS grew by {grew} kB");
    // A small chunked body is still decoded and given to the script.
    let out = s.raw(
        b"POST /cgi-bin/cgi-upload HTTP/1.1\r\nHost: t\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    );
    assert!(
        out.starts_with("HTTP/1.1 200 ") && out.ends_with("\r\n\r\n2\r\n5\n\r\n0\r\n\r\n"),
        "{out}"
    );
    s.assert_healthy();
}

/// uhttpd's init script has px5g write the certificate and key in DER; a
/// router switched to Marmoset keeps using them.
#[cfg(feature = "tls")]
#[test]
fn uhttpds_der_certificate_and_key_serve_https() {
    use common::tls::openssl;
    let dir = TempDir::new("der");
    let pair = tls::make_pair(&dir, "uhttpd");
    let (crt, key) = (
        dir.path().join("uhttpd.crt.der"),
        dir.path().join("uhttpd.key.der"),
    );
    let (crt_s, key_s) = (crt.to_str().unwrap(), key.to_str().unwrap());
    openssl(&[
        "x509",
        "-in",
        pair.cert.to_str().unwrap(),
        "-outform",
        "der",
        "-out",
        crt_s,
    ]);
    // SEC1, as px5g writes an EC key.
    openssl(&[
        "ec",
        "-in",
        pair.key.to_str().unwrap(),
        "-outform",
        "der",
        "-out",
        key_s,
    ]);
    let s = Server::start(&[
        "--listen",
        "127.0.0.1:0",
        "--listen",
        "127.0.0.1:0 tls",
        "--tls-cert",
        crt_s,
        "--tls-key",
        key_s,
    ]);
    let tls_port = tls::tls_port_on(&s, "127.0.0.1");
    let (code, _, body) = curl(&[
        "--cacert",
        pair.cert.to_str().unwrap(),
        &format!("https://localhost:{tls_port}/"),
    ]);
    assert_eq!(code, 200);
    assert!(String::from_utf8_lossy(&body).contains("hello"));
    s.assert_healthy();
}
