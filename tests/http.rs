//! HTTP/1.1 behaviour over real TCP: methods, versions, persistence,
//! framing, headers, conditional requests and ranges.

mod common;

use std::io::{Read, Write};

use common::*;

#[test]
fn get_has_the_standard_headers() {
    let s = Server::start(&[]);
    let r = s.get("/index.html", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "<!DOCTYPE html><title>t</title>hello\n");
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.header("content-length"), Some("37"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert_eq!(r.header("server"), Some("marmoset"));
    let etag = r.header("etag").unwrap();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && !etag.starts_with("W/"),
        "{etag}"
    );
    assert!(r.header("last-modified").unwrap().ends_with(" GMT"));
    assert!(r.header("date").unwrap().ends_with(" GMT"));
}

/// A file's plain 200 head is kept after the first one; what differs per
/// request (ranges, conditions, versions, HEAD) must still be answered
/// in full, and the kept head must equal the one made fresh.
#[test]
fn a_kept_head_is_the_fresh_one_and_only_plain_answers_use_it() {
    let s = Server::start(&[]);
    let mut c = s.connect();
    let get = |c: &mut std::net::TcpStream, extra: &str, head_only: bool| {
        let method = if head_only { "HEAD" } else { "GET" };
        write!(c, "{method} /index.html HTTP/1.1\r\nHost: t\r\n{extra}\r\n").unwrap();
        let mut r = read_response(c, head_only).unwrap();
        r.headers.retain(|(n, _)| n != "Date");
        r
    };
    let fresh = get(&mut c, "", false);
    let kept = get(&mut c, "", false);
    assert_eq!(fresh.headers, kept.headers);
    assert_eq!(fresh.body, kept.body);
    assert_eq!(get(&mut c, "", true).headers, fresh.headers);

    let part = get(&mut c, "Range: bytes=1-3\r\n", false);
    assert_eq!(part.status, 206);
    assert_eq!(part.header("content-range"), Some("bytes 1-3/37"));
    assert_eq!(part.header("content-length"), Some("3"));

    let etag = fresh.header("etag").unwrap();
    let not_modified = get(&mut c, &format!("If-None-Match: {etag}\r\n"), false);
    assert_eq!(not_modified.status, 304);
    assert_eq!(not_modified.header("content-length"), None);
    assert_eq!(not_modified.header("etag"), Some(etag));

    // HTTP/1.0 keep-alive: the same lines and a Connection header.
    c.write_all(b"GET /index.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let mut old = read_response(&mut c, false).unwrap();
    old.headers
        .retain(|(n, _)| n != "Date" && n != "Connection");
    assert_eq!(old.headers, fresh.headers);
    assert_eq!(get(&mut c, "", false).headers, fresh.headers);
}

#[test]
fn server_header_can_be_renamed_or_hidden() {
    let s = Server::start(&["--server-name", "devbox"]);
    assert_eq!(s.get("/", &[]).header("server"), Some("devbox"));
    let s = Server::start(&["--server-name", "off"]);
    assert_eq!(s.get("/", &[]).header("server"), None);
}

#[test]
fn head_has_headers_and_no_body() {
    let s = Server::start(&[]);
    let mut c = s.connect();
    c.write_all(
        b"HEAD /index.html HTTP/1.1\r\nHost: t\r\n\r\nGET /index.html HTTP/1.1\r\nHost: t\r\n\r\n",
    )
    .unwrap();
    let head = read_response(&mut c, true).unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("37"));
    // The next response starts right after the HEAD's head: no body bytes in between.
    let get = read_response(&mut c, false).unwrap();
    assert_eq!(get.status, 200);
    assert_eq!(get.body.len(), 37);
}

#[test]
fn other_methods_get_405_or_501() {
    let s = Server::start(&[]);
    for m in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"] {
        let out = s.raw(
            format!("{m} /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        assert!(out.starts_with("HTTP/1.1 405 "), "{m}: {out}");
        assert!(out.contains("\r\nAllow: GET, HEAD\r\n"), "{m}: {out}");
    }
    for m in ["BREW", "get", "PROPFIND"] {
        let out =
            s.raw(format!("{m} / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
        assert!(out.starts_with("HTTP/1.1 501 "), "{m}: {out}");
    }
    s.assert_healthy();
}

#[test]
fn http10_closes_unless_keep_alive() {
    let s = Server::start(&[]);
    let out = s.raw(b"GET / HTTP/1.0\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    assert!(!out.contains("Connection: keep-alive"));
    // With keep-alive the connection stays open for a second request.
    let mut c = s.connect();
    c.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let r = read_response(&mut c, false).unwrap();
    assert_eq!(r.header("connection"), Some("keep-alive"));
    c.write_all(b"GET /index.html HTTP/1.0\r\n\r\n").unwrap();
    let r = read_response(&mut c, false).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        read_to_close(&mut c),
        "",
        "1.0 without keep-alive closes after the response"
    );
}

/// A close the client asked for (no body, nothing after the request)
/// comes without the linger: an answer larger than the socket's buffers,
/// which the server must wait to send, still arrives whole, then the end.
#[test]
fn a_close_the_client_asked_for_still_ends_a_large_answer_whole() {
    let s = Server::start(&[]);
    let big: Vec<u8> = (0..8 << 20).map(|i| b'a' + (i % 26) as u8).collect();
    s.root.write("big.bin", &big);
    for version in ["HTTP/1.1\r\nHost: t\r\nConnection: close", "HTTP/1.0"] {
        let mut c = s.connect();
        write!(c, "GET /big.bin {version}\r\n\r\n").unwrap();
        let r = read_response(&mut c, false).unwrap();
        assert_eq!(r.status, 200, "{version}");
        assert!(
            r.body == big,
            "{version}: {} of {} bytes",
            r.body.len(),
            big.len()
        );
        assert_eq!(read_to_close(&mut c), "", "{version}");
    }
    s.assert_healthy();
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let s = Server::start(&[]);
    s.root.write("a.txt", "A");
    s.root.write("b.txt", "BB");
    let mut c = s.connect();
    c.write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\nGET /missing HTTP/1.1\r\nHost: t\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: t\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    let a = read_response(&mut c, false).unwrap();
    let missing = read_response(&mut c, false).unwrap();
    let b = read_response(&mut c, false).unwrap();
    let last = read_response(&mut c, false).unwrap();
    assert_eq!((a.status, a.text().as_str()), (200, "A"));
    assert_eq!(missing.status, 404);
    assert_eq!((b.status, b.text().as_str()), (200, "BB"));
    assert_eq!(last.header("connection"), Some("close"));
    assert_eq!(read_to_close(&mut c), "", "closed after Connection: close");
}

#[test]
fn host_is_required_on_1_1_and_absolute_form_works() {
    let s = Server::start(&[]);
    let out = s.raw(b"GET / HTTP/1.1\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 400 "), "{out}");
    // A Host no URI could hold is refused, on 1.0 too, and the connection closed.
    for head in [
        "GET / HTTP/1.1\r\nHost: a b\r\n",
        "GET / HTTP/1.0\r\nHost: dev.local:80:81\r\nConnection: keep-alive\r\n",
        "GET http://[::1/ HTTP/1.1\r\nHost: t\r\n",
    ] {
        let out = s.raw(format!("{head}\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        assert!(out.starts_with("HTTP/1.1 400 "), "{head}: {out}");
        assert_eq!(out.matches("HTTP/1.1 ").count(), 1, "{head}: {out}");
    }
    let out = s.raw(b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    let out = s.raw(b"GET http://device.local/index.html HTTP/1.1\r\nHost: device.local\r\nConnection: close\r\n\r\n");
    assert!(
        out.starts_with("HTTP/1.1 200 ") && out.ends_with("hello\n"),
        "{out}"
    );
    s.assert_healthy();
}

#[test]
fn other_versions_get_505_and_bad_request_lines_400() {
    let s = Server::start(&[]);
    for v in ["HTTP/2.0", "HTTP/1.2", "HTTP/3.0"] {
        let out = s.raw(format!("GET / {v}\r\nHost: t\r\n\r\n").as_bytes());
        assert!(out.starts_with("HTTP/1.1 505 "), "{v}: {out}");
    }
    // A space in the target is a bad request line, not a version.
    for line in ["GET / JUNK/1.1", "GET /a?b c HTTP/1.1", "GET /  HTTP/1.1"] {
        let out = s.raw(format!("{line}\r\nHost: t\r\n\r\n").as_bytes());
        assert!(out.starts_with("HTTP/1.1 400 "), "{line}: {out}");
    }
    s.assert_healthy();
}

#[test]
fn a_get_body_is_read_and_the_next_request_parsed() {
    let s = Server::start(&[]);
    s.root.write("b.txt", "B");
    let mut c = s.connect();
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 22\r\n\r\nGET /b.txt HTTP/1.1\r\nXGET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let first = read_response(&mut c, false).unwrap();
    assert_eq!(first.status, 200);
    let second = read_response(&mut c, false).unwrap();
    assert_eq!(
        (second.status, second.text().as_str()),
        (200, "B"),
        "the body was not taken for a request"
    );
}

#[test]
fn bad_framing_gets_400_and_close() {
    let s = Server::start(&[]);
    let rows: &[&[u8]] = &[
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 5\r\n\r\nhello",
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 0x10\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: \r\n\r\n",
    ];
    for raw in rows {
        let mut c = s.connect();
        c.write_all(raw).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let out = read_to_close(&mut c);
        assert!(
            out.starts_with("HTTP/1.1 400 "),
            "{}: {out}",
            String::from_utf8_lossy(raw)
        );
        assert_eq!(
            out.matches("HTTP/1.1").count(),
            1,
            "one answer, then close: {out}"
        );
        assert!(out.contains("Connection: close"));
    }
    s.assert_healthy();
}

#[test]
fn oversized_heads_get_414_and_431() {
    let s = Server::start(&[]);
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(5000));
    let out = s.raw(long_target.as_bytes());
    assert!(out.starts_with("HTTP/1.1 414 "), "{out}");
    let big_header = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "b".repeat(9000)
    );
    let out = s.raw(big_header.as_bytes());
    assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
    let many: String = (0..100).map(|i| format!("X-H{i}: v\r\n")).collect();
    let out = s.raw(format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n").as_bytes());
    assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
    s.assert_healthy();
}

#[test]
fn content_types_come_from_the_table() {
    let root = TempDir::new("mime");
    root.write("index.html", "x");
    let names = [
        ("a.html", "text/html; charset=utf-8"),
        ("a.css", "text/css; charset=utf-8"),
        ("a.js", "text/javascript; charset=utf-8"),
        ("a.mjs", "text/javascript; charset=utf-8"),
        ("a.json", "application/json"),
        ("a.js.map", "application/json"),
        ("a.svg", "image/svg+xml"),
        ("a.png", "image/png"),
        ("a.jpg", "image/jpeg"),
        ("a.gif", "image/gif"),
        ("a.ico", "image/x-icon"),
        ("a.webp", "image/webp"),
        ("a.avif", "image/avif"),
        ("a.woff", "font/woff"),
        ("a.woff2", "font/woff2"),
        ("a.ttf", "font/ttf"),
        ("a.wasm", "application/wasm"),
        ("a.txt", "text/plain; charset=utf-8"),
        ("a.xml", "text/xml; charset=utf-8"),
        ("a.pdf", "application/pdf"),
        ("site.webmanifest", "application/manifest+json"),
        ("noext", "application/octet-stream"),
    ];
    for (n, _) in names {
        root.write(n, "x");
    }
    let s = Server::start_in(root, &[]);
    for (n, t) in names {
        assert_eq!(
            s.get(&format!("/{n}"), &[]).header("content-type"),
            Some(t),
            "{n}"
        );
    }
}

#[test]
fn conditional_requests() {
    let s = Server::start(&[]);
    let first = s.get("/index.html", &[]);
    let etag = first.header("etag").unwrap().to_string();
    let lm = first.header("last-modified").unwrap().to_string();

    let r = s.get("/index.html", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    assert_eq!(r.header("content-length"), None);
    assert_eq!(
        s.get(
            "/index.html",
            &[&format!("If-None-Match: \"nope\", W/{etag}")]
        )
        .status,
        304
    );
    assert_eq!(s.get("/index.html", &["If-None-Match: *"]).status, 304);
    assert_eq!(
        s.get("/index.html", &["If-None-Match: \"nope\""]).status,
        200
    );
    assert_eq!(
        s.get("/index.html", &[&format!("If-Modified-Since: {lm}")])
            .status,
        304
    );
    assert_eq!(
        s.get(
            "/index.html",
            &["If-Modified-Since: Thu, 01 Jan 1998 00:00:00 GMT"]
        )
        .status,
        200
    );
    // If-None-Match takes precedence over If-Modified-Since.
    assert_eq!(
        s.get(
            "/index.html",
            &[
                "If-None-Match: \"nope\"",
                &format!("If-Modified-Since: {lm}")
            ]
        )
        .status,
        200
    );

    assert_eq!(s.get("/index.html", &["If-Match: \"nope\""]).status, 412);
    assert_eq!(
        s.get("/index.html", &[&format!("If-Match: {etag}")]).status,
        200
    );
    assert_eq!(
        s.get(
            "/index.html",
            &["If-Unmodified-Since: Thu, 01 Jan 1998 00:00:00 GMT"]
        )
        .status,
        412
    );
    assert_eq!(
        s.get("/index.html", &[&format!("If-Unmodified-Since: {lm}")])
            .status,
        200
    );

    // curl's own conditional request.
    let (code, _, body) = curl(&[
        "-H",
        &format!("If-None-Match: {etag}"),
        &s.url("/index.html"),
    ]);
    assert_eq!((code, body.len()), (304, 0));
}

#[test]
fn the_etag_changes_with_the_file() {
    let s = Server::start(&[]);
    let before = s
        .get("/index.html", &[])
        .header("etag")
        .unwrap()
        .to_string();
    s.root
        .write("index.html", "changed, and longer than before");
    let after = s.get("/index.html", &[]);
    assert_ne!(after.header("etag").unwrap(), before);
    assert_eq!(
        s.get("/index.html", &[&format!("If-None-Match: {before}")])
            .status,
        200
    );
}

/// A large file's body starts as far from an 8-byte boundary of the
/// stream as from one of the file (whole, or a range of it): the head is
/// padded with spaces after its last value. A small body's head is not,
/// nor the head of a HEAD answer, which no body follows.
#[test]
fn a_large_body_starts_aligned_as_in_its_file() {
    let s = Server::start(&[]);
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    s.root.write("big.bin", &big);
    s.root.write("small.txt", "0123456789");
    for (method, path, range, offset) in [
        ("GET", "/big.bin", "", 0usize),
        ("GET", "/big.bin", "Range: bytes=5-\r\n", 5),
        ("GET", "/big.bin", "Range: bytes=3-199990\r\n", 3),
        ("GET", "/small.txt", "", 0),
        // Two offsets of heads of one length: one at least would be padded.
        ("HEAD", "/big.bin", "Range: bytes=1-\r\n", 1),
        ("HEAD", "/big.bin", "Range: bytes=2-\r\n", 2),
    ] {
        let mut c = s.open();
        let request =
            format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{range}Connection: close\r\n\r\n");
        c.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        c.read_to_end(&mut raw).unwrap();
        let head_len = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&raw[..head_len]);
        let body = &raw[head_len..];
        if path == "/small.txt" {
            assert!(!head.contains(" \r\n"), "{head}");
            assert_eq!(body, b"0123456789");
            continue;
        }
        if method == "HEAD" {
            assert!(!head.contains(" \r\n"), "{head}");
            assert!(body.is_empty());
            continue;
        }
        assert_eq!((head_len + 8 - offset % 8) % 8, 0, "{range}: {head:?}");
        assert!(!head.contains("        \r\n"), "at most 7 spaces: {head:?}");
        assert_eq!(body, &big[offset..offset + body.len()], "{range}");
        let expected = if range.contains("199990") {
            199_988
        } else {
            big.len() - offset
        };
        assert_eq!(body.len(), expected, "{range}");
    }
}

#[test]
fn ranges() {
    let s = Server::start(&[]);
    s.root.write("digits.txt", "0123456789");
    let r = s.get("/digits.txt", &["Range: bytes=2-4"]);
    assert_eq!((r.status, r.text().as_str()), (206, "234"));
    assert_eq!(r.header("content-range"), Some("bytes 2-4/10"));
    let r = s.get("/digits.txt", &["Range: bytes=7-"]);
    assert_eq!((r.status, r.text().as_str()), (206, "789"));
    let r = s.get("/digits.txt", &["Range: bytes=-2"]);
    assert_eq!((r.status, r.text().as_str()), (206, "89"));
    let r = s.get("/digits.txt", &["Range: bytes=5-100"]);
    assert_eq!((r.status, r.text().as_str()), (206, "56789"));
    let r = s.get("/digits.txt", &["Range: bytes=10-"]);
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */10"));
    // Several ranges: the whole file, as documented.
    let r = s.get("/digits.txt", &["Range: bytes=0-1,4-5"]);
    assert_eq!((r.status, r.text().as_str()), (200, "0123456789"));
    // If-Range with the current ETag or date: 206; stale: 200.
    let etag = r.header("etag").unwrap().to_string();
    let lm = r.header("last-modified").unwrap().to_string();
    assert_eq!(
        s.get(
            "/digits.txt",
            &["Range: bytes=0-0", &format!("If-Range: {etag}")]
        )
        .status,
        206
    );
    assert_eq!(
        s.get(
            "/digits.txt",
            &["Range: bytes=0-0", &format!("If-Range: {lm}")]
        )
        .status,
        206
    );
    assert_eq!(
        s.get("/digits.txt", &["Range: bytes=0-0", "If-Range: \"old\""])
            .status,
        200
    );
    assert_eq!(
        s.get(
            "/digits.txt",
            &[
                "Range: bytes=0-0",
                "If-Range: Thu, 01 Jan 1998 00:00:00 GMT"
            ]
        )
        .status,
        200
    );
    // curl resuming a download.
    let (code, _, body) = curl(&["-r", "3-5", &s.url("/digits.txt")]);
    assert_eq!((code, body.as_slice()), (206, &b"345"[..]));
}

#[test]
fn large_files_arrive_whole_and_ranged() {
    let s = Server::start(&[]);
    let data: Vec<u8> = (0..204_800u32).map(|i| (i * 7 % 251) as u8).collect();
    s.root.write("linux.jpg", &data);
    let (code, headers, body) = curl(&[&s.url("/linux.jpg")]);
    assert_eq!(code, 200);
    assert!(headers.contains("image/jpeg"));
    assert_eq!(body, data);
    let r = s.get("/linux.jpg", &["Range: bytes=100000-100099"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &data[100_000..100_100]);
    // Several large responses on one connection stay framed.
    let mut c = s.connect();
    for _ in 0..3 {
        c.write_all(b"GET /linux.jpg HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut c, false).unwrap().body, data);
    }
}

#[test]
fn ipv6_and_several_listeners() {
    let s = Server::start(&["--listen", "127.0.0.1:0", "--listen", "[::1]:0"]);
    let v6_port = s.ipv6_port();
    let (code, _, body) = curl(&["-g", &format!("http://[::1]:{v6_port}/")]);
    assert_eq!(code, 200);
    assert!(String::from_utf8_lossy(&body).contains("hello"));
    s.assert_healthy();
}

/// Seconds since the epoch of an IMF-fixdate ("Sun, 13 Sep 2020 12:26:40 GMT").
fn imf_fixdate_secs(date: &str) -> Option<u64> {
    let f: Vec<&str> = date.split([' ', ':']).collect();
    let [_, day, month, year, h, m, s, "GMT"] = f[..] else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|&n| n == month)? as i64 + 1;
    let (year, day): (i64, i64) = (year.parse().ok()?, day.parse().ok()?);
    // Days from the civil date, with March as the year's first month.
    let (y, mp) = if month > 2 {
        (year, month - 3)
    } else {
        (year - 1, month + 9)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60;
    u64::try_from(secs + s.parse::<i64>().ok()?).ok()
}

/// Last-Modified, If-Modified-Since, the ETag and a listing's date come from
/// the file's mtime, to the nanosecond: a stat structure read with another
/// layout than the C library wrote (32-bit targets have two time_t ABIs)
/// shows here, under qemu-user for every cross target.
#[test]
fn the_validators_are_the_files_own_mtime() {
    let root = TempDir::new("mtime");
    let file = root.write("dated.txt", "dated\n");
    // 2020-09-13 12:26:40.123456789 UTC, a Sunday.
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::new(1_600_000_000, 123_456_789);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let s = Server::start_in(root, &["--listing", "on"]);

    let r = s.get("/dated.txt", &[]);
    assert_eq!(r.status, 200);
    let date = "Sun, 13 Sep 2020 12:26:40 GMT";
    assert_eq!(r.header("last-modified"), Some(date));
    let etag = r.header("etag").unwrap();
    assert!(etag.ends_with("-5f5e1000.75bcd15\""), "{etag}");
    let since = |d: &str| {
        s.get("/dated.txt", &[&format!("If-Modified-Since: {d}")])
            .status
    };
    assert_eq!(since(date), 304);
    assert_eq!(since("Sun, 13 Sep 2020 12:26:39 GMT"), 200);
    let listing = s.get("/", &[]);
    assert_eq!(listing.status, 200);
    assert!(listing.text().contains(date), "{}", listing.text());
}

/// The Date header is the clock's time (a second's rounding either side).
#[test]
fn the_date_header_is_now() {
    let s = Server::start(&[]);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let before = now();
    let r = s.get("/index.html", &[]);
    let after = now();
    let date = r.header("date").unwrap();
    let secs = imf_fixdate_secs(date).unwrap_or_else(|| panic!("not an IMF-fixdate: {date}"));
    assert!(
        before - 1 <= secs && secs <= after + 1,
        "{date}: not between {before} and {after}"
    );
    assert_eq!(
        imf_fixdate_secs("Sun, 13 Sep 2020 12:26:40 GMT"),
        Some(1_600_000_000)
    );
}

/// A small file is kept in memory and sent with its head in one write. A
/// client with a 4 KiB receive window asks for more answers than the
/// server's send buffer holds (the kernel's largest, `tcp_wmem`), so the
/// writes stop part way through heads and bodies alike: every answer must
/// still arrive whole and in order.
#[test]
fn answers_of_a_file_kept_in_memory_arrive_whole_through_a_small_window() {
    // Just under the largest file kept in memory (12 KiB).
    arrive_whole_through_a_small_window(12_000, 100);
}

/// A large file is sent corked, its head then sendfile; the same client
/// makes sendfile stop part way and go on when the window opens.
#[test]
fn answers_of_a_large_file_arrive_whole_through_a_small_window() {
    arrive_whole_through_a_small_window(100_000, 20);
}

/// Asks for a file of `len` bytes, pipelined through a 4 KiB window, as
/// many times as the send buffer holds and `more` times beyond.
fn arrive_whole_through_a_small_window(len: usize, more: usize) {
    use nix::sys::socket::{self as so, sockopt};
    use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
    use std::os::fd::AsRawFd;
    let s = Server::start(&[]);
    let page: String = (0..len)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let most_queued: usize = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|t| t.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(4 << 20);
    let count = most_queued / page.len() + more;
    s.root.write("page.txt", &page);
    let fd = so::socket(
        so::AddressFamily::Inet,
        so::SockType::Stream,
        so::SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    so::setsockopt(&fd, sockopt::RcvBuf, &4096).unwrap();
    let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, s.port);
    so::connect(fd.as_raw_fd(), &so::SockaddrIn::from(to)).unwrap();
    let mut c = TcpStream::from(fd);
    c.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut asked = b"GET /page.txt HTTP/1.1\r\nHost: t\r\n\r\n".repeat(count - 1);
    asked.extend_from_slice(b"GET /page.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    // Written from another thread: the server answers while the requests arrive.
    let mut writer = c.try_clone().unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&asked));
    for n in 0..count {
        let r = read_response(&mut c, false).unwrap_or_else(|| panic!("answer {n} cut short"));
        assert_eq!(r.status, 200, "answer {n}");
        assert!(r.body == page.as_bytes(), "answer {n}: body differs");
    }
    assert_eq!(read_to_close(&mut c), "", "closed after the last answer");
    sender.join().unwrap().unwrap();
    s.assert_healthy();
}
