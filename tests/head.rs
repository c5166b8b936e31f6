//! A HEAD answer never has a body, whatever made it: files, redirects,
//! errors, auth, CGI answers and CGI failures. Each HEAD is followed on
//! the same connection by a pipelined GET, which must be read as the next
//! response, not as part of the first.

mod common;

use std::io::Write;
use std::time::Duration;

use common::*;

fn server() -> Server {
    let root = TempDir::new("head");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    root.write("big.bin", vec![b'x'; 300_000]);
    root.write("docs/readme.txt", "text\n");
    root.write("private/secret.txt", "secret\n");
    root.write("admin/index.html", "admin\n");
    let gz = TempDir::new("gz");
    gz.write("only.txt", "decompressed text\n".repeat(100));
    let status = std::process::Command::new("gzip")
        .args(["-k", "-9"])
        .arg(gz.path().join("only.txt"))
        .status()
        .expect("gzip");
    assert!(status.success());
    std::fs::copy(
        gz.path().join("only.txt.gz"),
        root.path().join("only.txt.gz"),
    )
    .unwrap();
    script(
        &root,
        "ok",
        "printf 'Content-Type: text/plain\\n\\nfrom the script\\n'\n",
    );
    script(&root, "oops", "echo oops\n");
    script(&root, "silent", "exit 0\n");
    root.write_executable("cgi-bin/nostart", "#!/nonexistent/interpreter\n");
    script(&root, "hang", "exec sleep 30419\n");
    script(&root, "local", "printf 'Location: /index.html\\n\\n'\n");
    script(
        &root,
        "missing",
        "printf 'Status: 404 Not Found\\nContent-Type: text/plain\\n\\nnot here\\n'\n",
    );
    // In the root (a dotfile, never served): a file beside it would be
    // shared with other tests.
    let htpasswd = root.write(".htpasswd", "owner:$1$abcdefgh$0123456789012345678901\n");
    let config = root.write(
        "../marmoset.conf",
        format!(
            "deny /private/ 0.0.0.0/0\ndeny /private/ ::/0\n\
             auth /admin/ \"Device\" {}\n\
             redirect /old /index.html 301\n\
             cgi-timeout 1\n",
            htpasswd.display()
        ),
    );
    Server::start_with_config(&config, root, &[])
}

/// Sends `head` then a pipelined GET; returns the first status and whether
/// the bytes after the first head are exactly the next response (or nothing,
/// when the first answer closed the connection).
fn head_then_get(s: &Server, head: &str) -> (u16, String) {
    let mut c = s.connect();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request =
        format!("{head}\r\n\r\nGET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    c.write_all(request.as_bytes()).unwrap();
    let all = read_to_close(&mut c);
    let (first, rest) = all
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in answer to {head:?}: {all:?}"));
    let status = first
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {first:?}"));
    let closes = first.to_ascii_lowercase().contains("\r\nconnection: close");
    if closes {
        assert_eq!(
            rest, "",
            "{head:?} -> {status}: bytes after a closing HEAD answer"
        );
    } else {
        assert!(
            rest.starts_with("HTTP/1.1 200 OK\r\n") && rest.ends_with("hello\n"),
            "{head:?} -> {status}: the next response is not read as one: {rest:?}"
        );
    }
    (status, first.to_string())
}

#[test]
fn no_head_answer_carries_a_body() {
    let s = server();
    let h = |target: &str, more: &str| format!("HEAD {target} HTTP/1.1\r\nHost: t{more}");
    let long = format!("/{}", "a".repeat(5000));
    let many: String = (0..60).map(|i| format!("\r\nX-{i}: v")).collect();
    let cases: Vec<(String, u16)> = vec![
        (h("/index.html", ""), 200),
        (h("/big.bin", ""), 200),
        (h("/only.txt", ""), 200),
        (h("/index.html", "\r\nIf-None-Match: *"), 304),
        (h("/index.html", "\r\nIf-Match: \"nope\""), 412),
        (h("/docs", ""), 301),
        (h("/old", ""), 301),
        (h("/nothing.html", ""), 404),
        (h("/private/secret.txt", ""), 403),
        (h("/admin/", ""), 401),
        (h("/.hidden", ""), 404),
        (h(&long, ""), 414),
        (h("/index.html", &many), 431),
        (h("/index.html", "\r\nContent-Length: 99999999999"), 413),
        (
            "HEAD / HTTP/1.1\r\nHost: t\r\nBad header line".to_string(),
            400,
        ),
        ("HEAD / HTTP/3.0\r\nHost: t".to_string(), 505),
        (h("/cgi-bin/ok", ""), 200),
        (h("/cgi-bin/missing", ""), 404),
        (h("/cgi-bin/local", ""), 200),
        (h("/cgi-bin/oops", ""), 502),
        (h("/cgi-bin/silent", ""), 502),
        (h("/cgi-bin/nostart", ""), 500),
        (h("/cgi-bin/nowhere", ""), 404),
        (h("/cgi-bin/hang", ""), 504),
    ];
    for (head, want) in &cases {
        let (status, first) = head_then_get(&s, head);
        assert_eq!(status, *want, "{head:?}: {first}");
        // A script's own answer carries the headers the script chose.
        let from_script = first.contains("\r\nContent-Type: text/plain");
        if status >= 400 && !from_script {
            assert!(
                first.contains("\r\nX-Content-Type-Options: nosniff"),
                "{head:?} -> {status}: an error answer without the security headers: {first}"
            );
        }
    }
    s.assert_healthy();
}
