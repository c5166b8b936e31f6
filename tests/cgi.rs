//! CGI/1.1 with real shell scripts: environment, bodies, streaming,
//! redirects, timeouts, crashes, limits, disconnects; nothing leaks.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::*;

fn cgi_root() -> TempDir {
    let root = TempDir::new("cgi");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    script(
        &root,
        "env",
        "printf 'Content-Type: text/plain\\n\\n'; env | sort\n",
    );
    script(
        &root,
        "echo",
        "printf 'Content-Type: application/octet-stream\\n\\n'; cat\n",
    );
    script(
        &root,
        "big",
        "printf 'Content-Type: text/plain\\n\\n'; i=0; while [ $i -lt 20000 ]; do echo \"line $i of a long streamed answer\"; i=$((i+1)); done\n",
    );
    script(
        &root,
        "sized",
        "printf 'Content-Type: text/plain\\nContent-Length: 5\\n\\nhello'\n",
    );
    script(&root, "local", "printf 'Location: /index.html\\n\\n'\n");
    script(
        &root,
        "away",
        "printf 'Location: https://example.com/x\\n\\n'\n",
    );
    script(
        &root,
        "status",
        "printf 'Status: 404 Not Found\\nContent-Type: text/plain\\nX-From: script\\n\\nnope'\n",
    );
    script(&root, "silent", "exit 0\n");
    script(&root, "crash", "kill -SEGV $$\n");
    script(&root, "bad", "printf 'this is not a header\\n\\nbody'\n");
    script(
        &root,
        "inject",
        "printf 'Content-Type: text/plain\\nX-A: a\\rX-Injected: 1\\n\\nbody'\n",
    );
    script(
        &root,
        "stderr",
        "echo 'something went sideways' >&2; printf 'Content-Type: text/plain\\n\\nok'\n",
    );
    script(
        &root,
        "slow",
        "sleep 2; printf 'Content-Type: text/plain\\n\\nslow'\n",
    );
    script(
        &root,
        "hang",
        // Durations no other process on the machine is likely to use: the
        // test looks for them among all processes.
        "sleep 30417 & sleep 30418; printf 'Content-Type: text/plain\\n\\nnever'\n",
    );
    script(
        &root,
        "forever",
        "printf 'Content-Type: text/plain\\n\\n'; while :; do echo marmoset-forever-output; done\n",
    );
    script(
        &root,
        "count",
        // The whole body first: its head tells the client it was all read.
        "n=$(wc -c | tr -d ' '); printf 'Content-Type: text/plain\\n\\n%s\\n' \"$n\"\n",
    );
    script(
        &root,
        "readhang",
        "cat >/dev/null; sleep 30419; printf 'Content-Type: text/plain\\n\\nnever'\n",
    );
    script(
        &root,
        "ignore",
        "sleep 30420 & sleep 30421; printf 'Content-Type: text/plain\\n\\nnever'\n",
    );
    root.write("cgi-bin/plain.txt", "not executable");
    root.write(
        "cgi-bin/hello.sh",
        "printf 'Content-Type: text/plain\\n\\nfrom sh'\n",
    );
    root
}

fn start(args: &[&str]) -> Server {
    Server::start_in(cgi_root(), args)
}

fn env_of(s: &Server, raw: &str) -> String {
    let out = s.raw(raw.as_bytes());
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    out
}

#[test]
fn the_meta_variables() {
    let s = start(&[]);
    let out = env_of(
        &s,
        &format!(
            "GET /cgi-bin/env/extra/path?a=1&b=%20 HTTP/1.1\r\nHost: device.local:{}\r\nX-Custom: yes\r\nAuthorization: Basic c2VjcmV0OnNlY3JldA==\r\nProxy: http://evil/\r\nConnection: close\r\n\r\n",
            s.port
        ),
    );
    for want in [
        "GATEWAY_INTERFACE=CGI/1.1",
        "SERVER_SOFTWARE=marmoset/",
        "SERVER_NAME=device.local",
        &format!("SERVER_PORT={}", s.port),
        "SERVER_PROTOCOL=HTTP/1.1",
        "REQUEST_METHOD=GET",
        "SCRIPT_NAME=/cgi-bin/env",
        "PATH_INFO=/extra/path",
        "PATH_TRANSLATED=",
        "QUERY_STRING=a=1&b=%20",
        "REMOTE_ADDR=127.0.0.1",
        "REMOTE_PORT=",
        "HTTP_X_CUSTOM=yes",
        "HTTP_HOST=device.local",
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ] {
        assert!(out.contains(&format!("\n{want}")), "missing {want}:\n{out}");
    }
    for absent in [
        "HTTP_AUTHORIZATION",
        "HTTP_PROXY=",
        "c2VjcmV0",
        "CONTENT_LENGTH",
        "REMOTE_USER",
    ] {
        assert!(
            !out.contains(absent),
            "{absent} must not reach the script:\n{out}"
        );
    }
}

#[test]
fn an_absolute_form_target_names_the_server_to_scripts() {
    let s = start(&[]);
    let out = env_of(
        &s,
        "GET http://device.example/cgi-bin/env HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n",
    );
    assert!(out.contains("\nSERVER_NAME=device.example\n"), "{out}");
    assert!(out.contains("\nREQUEST_URI=/cgi-bin/env\n"), "{out}");
}

#[test]
fn post_bodies_reach_stdin() {
    let s = start(&[]);
    let body = "x".repeat(100_000);
    let (code, _, got) = curl(&[
        "--data-binary",
        &body,
        "-H",
        "Content-Type: text/plain",
        &s.url("/cgi-bin/echo"),
    ]);
    assert_eq!((code, got.len()), (200, body.len()));
    // Chunked, decoded, with CONTENT_LENGTH set for the script.
    let out = s.raw(b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    assert!(
        out.starts_with("HTTP/1.1 200 ") && out.contains("hello world"),
        "{out}"
    );
    let out = s.raw(b"POST /cgi-bin/env HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    assert!(
        out.contains("\nCONTENT_LENGTH=3\n") && out.contains("\nCONTENT_TYPE=text/plain\n"),
        "{out}"
    );
    // curl with 100-continue (it waits for the interim answer before a large body).
    let big = "y".repeat(900_000);
    let file = s.root.write("upload.bin", &big);
    let (code, _, got) = curl(&[
        "-H",
        "Expect: 100-continue",
        "--data-binary",
        &format!("@{}", file.display()),
        &s.url("/cgi-bin/echo"),
    ]);
    assert_eq!((code, got.len()), (200, big.len()), "the 100-continue flow");
    s.assert_healthy();
}

#[test]
fn a_64_mib_upload_streams_to_the_script_with_memory_flat() {
    const SIZE: usize = 64 << 20;
    let s = Server::start_in(cgi_root(), &["--cgi-max-body", &SIZE.to_string()]);
    let grew = rss_growth_during_upload(&s, "/cgi-bin/count", SIZE, &format!("{SIZE}\n"));
    // The body goes through one buffer to the script's stdin; 2 MiB leaves
    // room for the allocator's own growth, far below the 64 MiB.
    assert!(grew < 2048, "RSS grew by {grew} kB");
    s.assert_healthy();
}

#[test]
fn bodies_over_the_limit_get_413() {
    let s = start(&["--cgi-max-body", "1000"]);
    let (code, _, _) = curl(&["--data-binary", &"z".repeat(5000), &s.url("/cgi-bin/echo")]);
    assert_eq!(code, 413);
    let chunk = format!("{:x}\r\n{}\r\n0\r\n\r\n", 5000, "z".repeat(5000));
    let out = s.raw(
        format!(
            "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{chunk}"
        )
        .as_bytes(),
    );
    assert!(out.starts_with("HTTP/1.1 413 "), "{out}");
    s.assert_healthy();
}

/// A chunked body's extensions and trailer fields count toward
/// `cgi-max-body`, and its trailer section has a limit of its own.
#[test]
fn extensions_and_trailers_count_toward_the_body_limit() {
    let s = start(&["--cgi-max-body", "1000"]);
    let post = |body: &str| {
        s.raw(
            format!(
                "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{body}"
            )
            .as_bytes(),
        )
    };
    let out = post("5;e=v\r\nhello\r\n0\r\nX-T: 1\r\n\r\n");
    assert!(
        out.starts_with("HTTP/1.1 200 ") && out.contains("\r\nhello\r\n"),
        "{out}"
    );
    let ext = format!("1;e={}\r\nx\r\n", "v".repeat(200));
    let out = post(&format!("{}0\r\n\r\n", ext.repeat(10)));
    assert!(out.starts_with("HTTP/1.1 413 "), "extensions: {out}");
    let trailers = format!("X-Pad: {}\r\n", "p".repeat(80)).repeat(20);
    let out = post(&format!("5\r\nhello\r\n0\r\n{trailers}\r\n"));
    assert!(out.starts_with("HTTP/1.1 413 "), "trailers: {out}");
    // Under the default limit (1 MiB), the trailer section keeps its own.
    let s = start(&[]);
    let trailers = format!("X-Pad: {}\r\n", "p".repeat(80)).repeat(800);
    let out = s.raw(
        format!(
            "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n{trailers}\r\n"
        )
        .as_bytes(),
    );
    assert!(
        out.starts_with("HTTP/1.1 413 "),
        "a large trailer section: {out}"
    );
    // The same size in one field.
    let out = s.raw(
        format!(
            "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Pad: {}\r\n\r\n",
            "p".repeat(9 * 1024)
        )
        .as_bytes(),
    );
    assert!(
        out.starts_with("HTTP/1.1 413 "),
        "a large trailer section in one line: {out}"
    );
    s.assert_healthy();
}

/// A header name with an underscore never reaches a script: as
/// `HTTP_X_FORWARDED_FOR` it could not be told from `X-Forwarded-For`.
#[test]
fn header_names_with_underscores_are_dropped() {
    let s = start(&[]);
    let out = env_of(
        &s,
        "GET /cgi-bin/env HTTP/1.1\r\nHost: t\r\nX_Forwarded_For: 6.6.6.6\r\nX_Custom: 1\r\nX-Custom: yes\r\nConnection: close\r\n\r\n",
    );
    assert!(!out.contains("6.6.6.6"), "{out}");
    assert!(out.contains("\nHTTP_X_CUSTOM=yes\n"), "{out}");
    assert!(!out.contains("HTTP_X_CUSTOM=1"), "{out}");
}

/// A script's user is `REMOTE_USER`, set only by an `auth` realm, and its
/// method `REQUEST_METHOD`: the fields a framework could take for either
/// are never made `HTTP_*` variables.
#[test]
fn user_and_method_claims_never_reach_a_script() {
    let s = start(&[]);
    let out = env_of(
        &s,
        "GET /cgi-bin/env HTTP/1.1\r\nHost: t\r\nRemote-User: claimed-user\r\nX-Remote-User: claimed-user\r\nX-Auth-Request-User: claimed-user\r\nX-HTTP-Method-Override: DELETE\r\nX-Custom: yes\r\nConnection: close\r\n\r\n",
    );
    assert!(!out.contains("claimed-user"), "{out}");
    assert!(!out.contains("DELETE"), "{out}");
    assert!(out.contains("\nHTTP_X_CUSTOM=yes\n"), "{out}");
}

#[test]
fn output_is_streamed_and_framed_so_keep_alive_survives() {
    let s = start(&[]);
    let expected: String = (0..20000)
        .map(|i| format!("line {i} of a long streamed answer\n"))
        .collect();
    let mut c = s.connect();
    for _ in 0..2 {
        c.write_all(b"GET /cgi-bin/big HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let r = read_response(&mut c, false).unwrap();
        assert_eq!(r.header("transfer-encoding"), Some("chunked"));
        assert_eq!(r.text(), expected);
    }
    drop(c);
    let (code, headers, body) = curl(&[&s.url("/cgi-bin/big")]);
    assert_eq!(code, 200);
    assert!(headers.contains("chunked"));
    assert_eq!(String::from_utf8(body).unwrap(), expected);
    // Content-Length from the script, then more requests on the same connection.
    let mut c = s.connect();
    for path in ["/cgi-bin/sized", "/index.html", "/cgi-bin/sized"] {
        c.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
            .unwrap();
        let r = read_response(&mut c, false).unwrap();
        assert_eq!(r.status, 200, "{path}");
    }
    // HTTP/1.0: close-delimited.
    let out = s.raw(b"GET /cgi-bin/big HTTP/1.0\r\n\r\n");
    assert!(!out.contains("chunked") && out.ends_with("line 19999 of a long streamed answer\n"));
}

#[test]
fn curl_keeps_one_connection_across_chunked_cgi_answers() {
    let s = start(&[]);
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "-v",
            "--max-time",
            "20",
            &s.url("/cgi-bin/big"),
            &s.url("/cgi-bin/env"),
            &s.url("/index.html"),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("Connected to").count(), 1, "{err}");
    assert!(
        err.matches("Re-using existing connection").count() >= 2,
        "{err}"
    );
}

#[test]
fn status_redirects_and_headers() {
    let s = start(&[]);
    let r = s.get("/cgi-bin/status", &[]);
    assert_eq!((r.status, r.text().as_str()), (404, "nope"));
    assert_eq!(r.header("x-from"), Some("script"));
    let r = s.get("/cgi-bin/local", &[]);
    assert_eq!(r.status, 200);
    assert!(r.text().contains("hello"), "local redirect serves the file");
    let r = s.get("/cgi-bin/away", &[]);
    assert_eq!(
        (r.status, r.header("location")),
        (302, Some("https://example.com/x"))
    );
    let r = s.get("/cgi-bin/hello.sh", &[]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "from sh"),
        "interpreter by extension"
    );
    let mut c = s.connect();
    c.write_all(b"HEAD /cgi-bin/sized HTTP/1.1\r\nHost: t\r\n\r\nGET /index.html HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let head = read_response(&mut c, true).unwrap();
    assert_eq!(
        (head.status, head.header("content-length")),
        (200, Some("5"))
    );
    assert_eq!(read_response(&mut c, false).unwrap().status, 200);
}

#[test]
fn broken_scripts_get_502_and_nothing_is_injected() {
    let s = start(&[]);
    for name in ["silent", "crash", "bad", "inject"] {
        let r = s.get(&format!("/cgi-bin/{name}"), &[]);
        assert_eq!(r.status, 502, "{name}");
        assert_eq!(r.header("x-injected"), None);
    }
    assert!(
        s.wait_log(
            "cgi cgi-bin/silent: exited without output",
            Duration::from_secs(5)
        ),
        "{}",
        s.log_text()
    );
    s.assert_healthy();
}

#[test]
fn stderr_goes_to_the_log_with_the_script_name() {
    let s = start(&[]);
    assert_eq!(s.get("/cgi-bin/stderr", &[]).text(), "ok");
    assert!(
        s.wait_log(
            "cgi cgi-bin/stderr: something went sideways",
            Duration::from_secs(5)
        ),
        "{}",
        s.log_text()
    );
}

#[test]
fn paths_methods_and_permissions() {
    let s = start(&[]);
    assert_eq!(s.get("/cgi-bin/missing", &[]).status, 404);
    assert_eq!(
        s.get("/cgi-bin/plain.txt", &[]).status,
        403,
        "not executable, no interpreter"
    );
    let out = s.raw(
        b"PUT /cgi-bin/env HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(
        out.starts_with("HTTP/1.1 405 ") && out.contains("Allow: GET, HEAD, POST"),
        "{out}"
    );
    let out = s.raw(
        b"POST /index.html HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(
        out.starts_with("HTTP/1.1 405 ") && out.contains("Allow: GET, HEAD\r\n"),
        "{out}"
    );
    let s = Server::start_in(cgi_root(), &["--cgi-prefix", "off"]);
    let r = s.get("/cgi-bin/env", &[]);
    assert_eq!(r.status, 200);
    assert!(
        r.text().starts_with("#!/bin/sh"),
        "served as a file when CGI is off"
    );
}

#[test]
fn deep_paths_under_the_prefix_find_the_right_script_or_none() {
    let root = cgi_root();
    script(
        &root,
        "sub/dir/nested",
        "printf 'Content-Type: text/plain\\n\\nnested %s' \"$PATH_INFO\"\n",
    );
    let s = Server::start_in(root, &[]);
    let deep = "/a".repeat(1000);
    assert_eq!(s.get(&format!("/cgi-bin/missing{deep}"), &[]).status, 404);
    assert_eq!(s.get(&format!("/cgi-bin/sub/none{deep}"), &[]).status, 404);
    assert_eq!(s.get(&format!("/cgi-bin/plain.txt{deep}"), &[]).status, 403);
    let r = s.get(&format!("/cgi-bin/sub/dir/nested{deep}/"), &[]);
    assert_eq!((r.status, r.text()), (200, format!("nested {deep}/")));
    let r = s.get("/cgi-bin/sub/dir/nested", &[]);
    assert_eq!((r.status, r.text()), (200, "nested ".to_string()));
    assert_eq!(s.get("/cgi-bin/sub/dir/", &[]).status, 404);
}

/// Processes whose command line contains `needle`.
/// The command line of server `s`'s own `slow` script: tests running
/// beside it run theirs from other roots.
fn slow_of(s: &Server) -> String {
    format!("{}/cgi-bin/slow", s.root.path().display())
}

fn processes_with(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(needle)
                })
                .unwrap_or(false)
        })
        .collect()
}

fn zombies_under(pid: i32) -> usize {
    let mut all = children(pid);
    for w in children(pid) {
        all.extend(children(w));
    }
    all.iter()
        .filter(|p| proc_status(**p, "State").is_some_and(|s| s.starts_with('Z')))
        .count()
}

#[test]
fn a_hung_script_is_killed_with_its_children_and_gets_504() {
    let s = start(&["--cgi-timeout", "1"]);
    let r = s.get("/cgi-bin/hang", &[]);
    assert_eq!(r.status, 504);
    assert!(
        wait_until(Duration::from_secs(10), || processes_with("sleep 30417")
            .is_empty()
            && processes_with("sleep 30418").is_empty()),
        "the script's children were killed"
    );
    assert!(
        wait_until(Duration::from_secs(5), || zombies_under(s.pid()) == 0),
        "no zombies"
    );
    s.assert_healthy();
}

/// `cgi-timeout` is the script's time once it has its input: an upload
/// that takes longer than that on a slow link is not cut while it keeps
/// its pace.
#[test]
fn an_upload_longer_than_the_script_timeout_reaches_the_script_whole() {
    const PIECE: usize = 75_000;
    const PIECES: usize = 40;
    let s = start(&["--cgi-timeout", "2", "--cgi-max-body", "4000000"]);
    let mut c = s.connect();
    let head = format!(
        "POST /cgi-bin/count HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        PIECE * PIECES
    );
    c.write_all(head.as_bytes()).unwrap();
    // 3 MB in 40 pieces, one each 100 ms: over 4 s, at 750 kB/s.
    let mut sent = 0;
    for _ in 0..PIECES {
        if c.write_all(&[b'f'; PIECE]).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let r = read_response(&mut c, false);
    let got = r.as_ref().map(|r| (r.status, r.text()));
    assert_eq!(
        got,
        Some((200, format!("{}\n", PIECE * PIECES))),
        "{sent} pieces sent; {}",
        s.log_text()
    );
    s.assert_healthy();
}

/// A body trickled below the least pace cannot hold a script slot for
/// `cgi-timeout`: 408 after the grace, the script killed, the slot free.
#[test]
fn a_body_trickled_below_the_pace_gets_408_and_frees_the_script_slot() {
    let s = start(&[
        "--header-timeout",
        "2",
        "--cgi-max",
        "1",
        "--cgi-timeout",
        "60",
    ]);
    let mut c = s.connect();
    c.write_all(b"POST /cgi-bin/count HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n")
        .unwrap();
    let first = trickle_until_answered(&mut c, 20);
    assert_eq!(first.as_ref(), Some(b"HTTP/1.1 408"), "{}", s.log_text());
    assert!(
        wait_until(Duration::from_secs(10), || processes_with(&format!(
            "{}/cgi-bin/count",
            s.root.path().display()
        ))
        .is_empty()),
        "the script was killed"
    );
    assert!(
        wait_until(Duration::from_secs(5), || s
            .get("/cgi-bin/sized", &[])
            .status
            == 200),
        "another client's script is answered: {}",
        s.log_text()
    );
    assert!(
        wait_until(Duration::from_secs(5), || zombies_under(s.pid()) == 0),
        "no zombies"
    );
    s.assert_healthy();
}

/// Once the script has its whole body, `cgi-timeout` runs: a script that
/// reads it and hangs is killed with a 504.
#[test]
fn a_script_that_hangs_after_reading_its_body_gets_504() {
    let s = start(&["--cgi-timeout", "1"]);
    let file = s.root.write("body.bin", "b".repeat(200_000));
    let (code, _, _) = curl(&[
        "--data-binary",
        &format!("@{}", file.display()),
        &s.url("/cgi-bin/readhang"),
    ]);
    assert_eq!(code, 504);
    assert!(
        wait_until(Duration::from_secs(10), || processes_with("sleep 30419")
            .is_empty()),
        "the script was killed"
    );
    s.assert_healthy();
}

/// A script that takes none of a large body (its stdin pipe full) is
/// timed out as well: the upload cannot hold its slot past `cgi-timeout`.
#[test]
fn a_script_that_takes_none_of_its_body_is_killed_and_frees_its_slot() {
    let size = 4 << 20;
    let s = start(&[
        "--cgi-timeout",
        "1",
        "--cgi-max",
        "1",
        "--cgi-max-body",
        &size.to_string(),
    ]);
    let mut c = s.connect();
    c.write_all(
        format!("POST /cgi-bin/ignore HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    // Far more than the pipe and the socket buffers hold: the writes
    // block until the server gives up on the script and closes.
    let writer = std::thread::spawn(move || {
        let _ = c.write_all(&vec![b'h'; size]);
        c
    });
    assert!(
        s.wait_log(
            "cgi-bin/ignore: took none of its body for 1s",
            Duration::from_secs(10)
        ),
        "{}",
        s.log_text()
    );
    assert!(
        wait_until(Duration::from_secs(10), || processes_with("sleep 30420")
            .is_empty()
            && processes_with("sleep 30421").is_empty()),
        "the script's children were killed"
    );
    assert!(
        wait_until(Duration::from_secs(5), || s
            .get("/cgi-bin/sized", &[])
            .status
            == 200),
        "the slot is free: {}",
        s.log_text()
    );
    drop(writer.join());
    s.assert_healthy();
}

#[test]
fn a_client_leaving_mid_output_kills_the_script() {
    let s = start(&[]);
    // One worker: the server's own process.
    let worker = s.pid();
    let fds_before = fd_count(worker);
    for _ in 0..5 {
        let mut c = s.connect();
        c.write_all(b"GET /cgi-bin/forever HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 4096];
        c.read_exact(&mut buf).unwrap();
        drop(c);
    }
    assert!(
        wait_until(Duration::from_secs(10), || processes_with(
            "cgi-bin/forever"
        )
        .is_empty()),
        "scripts still running"
    );
    assert!(
        wait_until(Duration::from_secs(5), || zombies_under(s.pid()) == 0),
        "no zombies"
    );
    assert!(
        wait_until(Duration::from_secs(5), || fd_count(worker) <= fds_before),
        "descriptors leaked: {} -> {}",
        fds_before,
        fd_count(worker)
    );
    s.assert_healthy();
}

/// Two clients hold both slots: a third gets 503 at once. One client
/// holds at most half of them: its next request waits for its own.
#[test]
fn beyond_the_script_limit_clients_get_503_and_the_rest_are_served() {
    let s = start(&["--cgi-max", "2"]);
    std::thread::scope(|scope| {
        let slow: Vec<_> = ["127.0.0.2", "127.0.0.3"]
            .map(|from| {
                let mut c = s.connect_from(from);
                scope.spawn(move || {
                    c.write_all(
                        b"GET /cgi-bin/slow HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                    )
                    .unwrap();
                    read_to_close(&mut c)
                })
            })
            .into_iter()
            .collect();
        assert!(wait_until(Duration::from_secs(10), || processes_with(
            &slow_of(&s)
        )
        .len()
            >= 2));
        let r = s.get("/cgi-bin/sized", &[]);
        assert_eq!(r.status, 503);
        assert_eq!(r.header("retry-after"), Some("5"));
        s.assert_healthy();
        // The same client again: its turn comes when its script ends.
        let mut c = s.connect_from("127.0.0.2");
        c.write_all(b"GET /cgi-bin/sized HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let turn = read_response(&mut c, false).map(|r| r.status);
        assert_eq!(turn, Some(200), "{}", s.log_text());
        for t in slow {
            assert!(t.join().unwrap().contains("\r\nslow\r\n"));
        }
    });
    assert_eq!(s.get("/cgi-bin/sized", &[]).status, 200, "slots free again");
}

#[test]
fn a_slow_script_does_not_hold_up_other_clients() {
    let s = start(&[]);
    let port = s.port;
    let slow = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"GET /cgi-bin/slow HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        read_to_close(&mut c)
    });
    assert!(wait_until(Duration::from_secs(10), || !processes_with(
        &slow_of(&s)
    )
    .is_empty()));
    // While the script sleeps, the same single worker answers everyone else.
    for _ in 0..50 {
        s.assert_healthy();
    }
    assert!(
        !processes_with(&slow_of(&s)).is_empty(),
        "the script was still running meanwhile"
    );
    assert!(slow.join().unwrap().contains("\r\nslow\r\n"));
}

/// The README's first command names the root relative to the current
/// directory; a script must still start (it runs in its own directory).
#[test]
fn a_relative_root_runs_scripts() {
    let root = cgi_root();
    let parent = root.path().parent().unwrap().to_path_buf();
    let name = root.path().file_name().unwrap().to_owned();
    let mut cmd = command();
    cmd.current_dir(&parent)
        .args(["--config", "/dev/null", "--listen", "127.0.0.1:0", "--root"])
        .arg(&name);
    let s = Server::spawn(cmd, root);
    let r = s.get("/cgi-bin/env", &[]);
    assert_eq!(r.status, 200, "{}", s.log_text());
    let env = r.text();
    let want = format!("DOCUMENT_ROOT={}\n", parent.join(&name).display());
    assert!(env.contains(&want), "{env}");
}

/// A POST whose body stops short while its script answers with a local
/// redirect: the rest of the body, arriving later, is never taken for a
/// request of its own.
#[test]
fn a_body_left_unread_after_a_local_redirect_closes_the_connection() {
    let root = cgi_root();
    script(
        &root,
        "mark",
        "printf 'Content-Type: text/plain\\n\\nmarked-by-smuggled-request'\n",
    );
    let s = Server::start_in(root, &["--cgi-timeout", "2"]);
    let mut c = s.connect();
    c.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let smuggled = "GET /cgi-bin/mark?SMUGGLED HTTP/1.1\r\nHost: t\r\n\r\n";
    let body_rest = format!("{smuggled}{}", " ".repeat(190 - smuggled.len()));
    c.write_all(
        b"POST /cgi-bin/local HTTP/1.1\r\nHost: t\r\nContent-Length: 200\r\n\r\n0123456789",
    )
    .unwrap();
    let first = read_response(&mut c, false);
    let _ = c.write_all(body_rest.as_bytes());
    let rest = read_to_close(&mut c);
    assert!(
        !rest.contains("marked-by-smuggled-request"),
        "first: {:?}, then: {rest}",
        first.map(|r| r.status)
    );
    s.assert_healthy();
}

/// A failing script answers in the request's version: an HTTP/1.0
/// keep-alive request is told the connection stays open, and it does.
#[test]
fn a_failing_script_answers_http10_keep_alive_in_kind() {
    let s = start(&[]);
    let mut c = s.connect();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /cgi-bin/bad HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let r = read_response(&mut c, false).expect("an answer");
    assert_eq!(r.status, 502);
    assert_eq!(
        r.header("connection"),
        Some("keep-alive"),
        "{:?}",
        r.headers
    );
    c.write_all(b"GET /index.html HTTP/1.0\r\n\r\n").unwrap();
    let again = read_response(&mut c, false).expect("the connection went on");
    assert_eq!(again.status, 200);
}

/// A script's local redirect is routed like a request for its target:
/// auth and address rules apply, a script there runs (as a GET), and a
/// loop of redirects ends.
#[test]
fn a_local_redirect_goes_through_the_whole_pipeline() {
    let root = cgi_root();
    root.write("admin/secret.html", "admin secret\n");
    root.write("private/secret.html", "private secret\n");
    for (name, to) in [
        ("to-admin", "/admin/secret.html"),
        ("to-private", "/private/secret.html"),
        ("to-env", "/cgi-bin/env?from=redirect"),
        ("loop", "/cgi-bin/loop"),
    ] {
        script(&root, name, &format!("printf 'Location: {to}\\n\\n'\n"));
    }
    let htpasswd = root.write(".htpasswd", "owner:$1$abcdefgh$0123456789012345678901\n");
    let realm = format!("/admin/ \"Device\" {}", htpasswd.display());
    let s = Server::start_in(root, &["--auth", &realm, "--deny", "/private/ all"]);
    let r = s.get("/cgi-bin/to-admin", &[]);
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(!r.text().contains("admin secret"));
    let r = s.get("/cgi-bin/to-private", &[]);
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(!r.text().contains("private secret"));
    let out = s.raw(b"POST /cgi-bin/to-env HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc");
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    assert!(
        out.contains("REQUEST_METHOD=GET\n"),
        "the script ran as a GET: {out}"
    );
    assert!(out.contains("QUERY_STRING=from=redirect\n"), "{out}");
    assert!(!out.contains("CONTENT_LENGTH="), "{out}");
    let r = s.get("/cgi-bin/loop", &[]);
    assert_eq!(r.status, 500);
    s.assert_healthy();
}

/// The uhttpd mapping's CGI limits (`cgi-max 3`, `header-timeout 30`,
/// `cgi-max-body` 1 GiB) under one hostile client: uploads to a script
/// reading its stdin, and chunked heads with no body. The owner, at
/// another address, still gets his pages and his login POST, each
/// answered within 2 s.
#[test]
fn one_client_holding_script_slots_leaves_the_owner_his_pages() {
    for t in Transport::all() {
        let s = Server::start_in_over(
            t,
            cgi_root(),
            &[
                "--cgi-max",
                "3",
                "--header-timeout",
                "30",
                "--cgi-max-body",
                "1073741824",
            ],
        );
        let (hostile, owner) = ("127.0.0.2", "127.0.0.3");
        let count = format!("{}/cgi-bin/count", s.root.path().display());
        let mut held = Vec::new();
        // Uploads: the start of a large body, the rest well within its pace.
        for _ in 0..2 {
            let mut c = s.open_from(hostile);
            c.write_all(
                b"POST /cgi-bin/count HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000\r\n\r\n",
            )
            .unwrap();
            c.write_all(&[b'x'; 9000]).unwrap();
            held.push(c);
        }
        assert!(
            wait_until(Duration::from_secs(10), || !processes_with(&count)
                .is_empty()),
            "{t:?}: an upload's script runs: {}",
            s.log_text()
        );
        // Chunked heads without a body, until the server refuses one.
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..6 {
            let mut c = s.open_from(hostile);
            c.write_all(
                b"POST /cgi-bin/count HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
            )
            .unwrap();
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = c.tcp().set_read_timeout(Some(Duration::from_secs(40)));
                let status = read_response(&mut c, false).map(|r| r.status);
                let _ = tx.send(status);
                // Held open until the test ends.
                let _ = read_to_close(&mut c);
            });
        }
        let refused = rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(refused, Ok(Some(503)), "{t:?}: {}", s.log_text());
        for _ in 0..3 {
            let mut c = s.open_from(owner);
            let _ = c.tcp().set_read_timeout(Some(owner_bound()));
            c.write_all(b"GET /cgi-bin/sized HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
            let page = read_response(&mut c, false).map(|r| (r.status, r.text()));
            assert_eq!(
                page,
                Some((200, "hello".into())),
                "{t:?}: the owner's page: {}",
                s.log_text()
            );
            assert_owner_logs_in(&mut c, &s);
        }
        drop(held);
    }
}

/// The same settings under uploads from as many addresses as there are
/// slots (a host with many addresses): they keep their pace, and each
/// address holds no more than its share, yet the owner's page and login
/// POST, which come whole, still find a slot within 2 s.
#[test]
fn uploads_from_many_addresses_leave_the_owner_his_login() {
    let s = start(&[
        "--cgi-max",
        "3",
        "--header-timeout",
        "30",
        "--cgi-max-body",
        "1073741824",
    ]);
    let count = format!("{}/cgi-bin/count", s.root.path().display());
    let mut held = Vec::new();
    for i in 4..8 {
        let mut c = s.open_from(&format!("127.0.0.{i}"));
        c.write_all(
            b"POST /cgi-bin/count HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000\r\n\r\n",
        )
        .unwrap();
        c.write_all(&[b'x'; 9000]).unwrap();
        held.push(c);
    }
    assert!(
        wait_until(Duration::from_secs(10), || processes_with(&count).len()
            >= 2),
        "the uploads' scripts run: {}",
        s.log_text()
    );
    let mut c = s.open_from("127.0.0.3");
    let _ = c.tcp().set_read_timeout(Some(owner_bound()));
    c.write_all(b"GET /cgi-bin/sized HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let page = read_response(&mut c, false).map(|r| (r.status, r.text()));
    assert_eq!(page, Some((200, "hello".into())), "{}", s.log_text());
    assert_owner_logs_in(&mut c, &s);
    drop(held);
}

/// The owner's login form, posted on `c` to the script that answers with
/// its body's length: 200 within the connection's read timeout.
fn assert_owner_logs_in(c: &mut Conn, s: &Server) {
    let login = "luci_username=root&luci_password=secret";
    c.write_all(
        format!(
            "POST /cgi-bin/count HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{login}",
            login.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let answer = read_response(c, false).map(|r| (r.status, r.text()));
    assert_eq!(
        answer,
        Some((200, format!("{}\n", login.len()))),
        "the owner's login POST ({:?}): {}",
        s.transport,
        s.log_text()
    );
}

/// A chunked body is read at the least pace (`cgi-body-rate`), as a body
/// with a length is: a steady upload longer than `header-timeout` reaches
/// the script whole, a trickle below the pace gets 408.
#[test]
fn a_chunked_body_is_read_at_its_pace_not_by_one_deadline() {
    let s = start(&["--header-timeout", "2"]);
    let mut c = s.connect();
    c.write_all(b"POST /cgi-bin/count HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    // 4 KB/s, four times the least pace, for twice the head timeout.
    for _ in 0..16 {
        c.write_all(format!("3e8\r\n{}\r\n", "u".repeat(1000)).as_bytes())
            .unwrap();
        std::thread::sleep(Duration::from_millis(250));
    }
    c.write_all(b"0\r\n\r\n").unwrap();
    let r = read_response(&mut c, false).expect("an answer");
    assert_eq!(
        (r.status, r.text()),
        (200, "16000\n".into()),
        "{}",
        s.log_text()
    );
    // A byte of body every half second: cut once the grace is spent.
    let mut c = s.connect();
    c.write_all(b"POST /cgi-bin/count HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    c.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut first = [0u8; 12];
    let mut answered = false;
    for _ in 0..20 {
        let _ = c.write_all(b"1\r\nx\r\n");
        if c.read_exact(&mut first).is_ok() {
            answered = true;
            break;
        }
    }
    assert!(answered, "a trickle went on: {}", s.log_text());
    assert_eq!(&first, b"HTTP/1.1 408");
    s.assert_healthy();
}
