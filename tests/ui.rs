//! Device UI serving: precompressed variants and negotiation, gzip-only
//! trees, SPA routes, redirects, cache and header rules, error pages,
//! listing. Variants are checked over HTTPS too, in a `tls` build.

mod common;

use std::io::Write;
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::*;

const APP_JS: &str = "console.log('the device UI');\n";

/// Makes `path.gz` next to `path` with the real gzip.
fn gzip_beside(path: &std::path::Path) {
    assert!(
        Command::new("gzip")
            .args(["-k", "-f", "-9", "-n"])
            .arg(path)
            .status()
            .unwrap()
            .success()
    );
}

/// Writes `name` and its .gz and .br variants (made by the real tools).
fn with_variants(root: &TempDir, name: &str, content: &[u8]) {
    let p = root.write(name, content);
    gzip_beside(&p);
    assert!(
        Command::new("brotli")
            .args(["-f", "-k", "-q", "11"])
            .arg(&p)
            .status()
            .unwrap()
            .success()
    );
}

fn variants_root() -> TempDir {
    let root = TempDir::new("ui");
    root.write("index.html", "<!DOCTYPE html><title>ui</title>");
    with_variants(&root, "app.3f2a9c1b.js", APP_JS.as_bytes());
    root
}

fn set_mtime(path: &std::path::Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// A file without variants is remembered as such (for a second, to skip the
/// probes); a `.gz` made later is served once that second has passed.
#[test]
fn a_variant_made_later_is_found() {
    let root = TempDir::new("late");
    let js = root.write("late.js", APP_JS);
    let s = Server::start_in(root, &[]);
    let gzip = ["Accept-Encoding: gzip"];
    let first = s.get("/late.js", &gzip);
    assert_eq!(first.status, 200);
    assert_eq!(first.header("content-encoding"), None);
    assert_eq!(first.header("vary"), None, "no variants, nothing to vary");
    gzip_beside(&js);
    let gz = std::fs::read(js.with_extension("js.gz")).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || {
            s.get("/late.js", &gzip).header("content-encoding") == Some("gzip")
        }),
        "the new .gz is served"
    );
    let r = s.get("/late.js", &gzip);
    assert_eq!(r.body, gz);
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
}

#[test]
fn the_best_variant_is_served_with_one_encoding_and_vary() {
    for t in Transport::all() {
        the_best_variant_is_served_over(t);
    }
}

fn the_best_variant_is_served_over(t: Transport) {
    let root = variants_root();
    let br = std::fs::read(root.path().join("app.3f2a9c1b.js.br")).unwrap();
    let gz = std::fs::read(root.path().join("app.3f2a9c1b.js.gz")).unwrap();
    let s = Server::start_in_over(t, root, &[]);
    let get = |ae: Option<&str>| {
        let h = ae.map(|v| format!("Accept-Encoding: {v}"));
        s.get(
            "/app.3f2a9c1b.js",
            &h.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    };
    // (Accept-Encoding, expected Content-Encoding)
    let rows: &[(Option<&str>, Option<&str>)] = &[
        (Some("gzip, deflate, br"), Some("br")),
        (Some("br;q=0.1, gzip;q=1"), Some("br")),
        (Some("gzip"), Some("gzip")),
        (Some("GZIP"), Some("gzip")),
        (Some("x-gzip"), Some("gzip")),
        (Some("br;q=0, gzip"), Some("gzip")),
        (Some("gzip;q=0"), None),
        (Some("gzip;q=0, br;q=0"), None),
        (Some("*"), Some("br")),
        (Some("*;q=0, gzip"), Some("gzip")),
        (Some("identity"), None),
        (Some("identity;q=0"), None),
        (Some("deflate"), None),
        (Some(""), None),
        (None, None),
    ];
    let mut etags = std::collections::HashSet::new();
    for (ae, want) in rows {
        let r = get(*ae);
        assert_eq!(r.status, 200, "{ae:?} over {t:?}");
        assert_eq!(r.header("content-encoding"), *want, "{ae:?} over {t:?}");
        assert_eq!(
            r.headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("content-encoding"))
                .count(),
            usize::from(want.is_some())
        );
        assert_eq!(
            r.header("vary"),
            Some("Accept-Encoding"),
            "{ae:?} over {t:?}: Vary on every variant, identity too"
        );
        assert_eq!(
            r.header("content-type"),
            Some("text/javascript; charset=utf-8"),
            "{ae:?}"
        );
        let expected: &[u8] = match want {
            Some("br") => &br,
            Some("gzip") => &gz,
            _ => APP_JS.as_bytes(),
        };
        assert_eq!(r.body, expected, "{ae:?} over {t:?}");
        assert_eq!(
            r.header("content-length"),
            Some(expected.len().to_string().as_str()),
            "{ae:?} over {t:?}"
        );
        etags.insert((
            want.map(str::to_string),
            r.header("etag").unwrap().to_string(),
        ));
    }
    let distinct: std::collections::HashSet<_> = etags.iter().map(|(_, e)| e.clone()).collect();
    assert_eq!(
        distinct.len(),
        3,
        "each representation has its own ETag: {etags:?}"
    );
    // curl decodes what it asked for.
    let (code, headers, body) = s.curl(&["--compressed", &s.url("/app.3f2a9c1b.js")]);
    assert_eq!(code, 200);
    assert!(headers.to_ascii_lowercase().contains("content-encoding:"));
    assert_eq!(body, APP_JS.as_bytes());
}

#[test]
fn ranges_and_conditions_apply_to_the_variant_served() {
    for t in Transport::all() {
        ranges_and_conditions_apply_to_the_variant_served_over(t);
    }
}

fn ranges_and_conditions_apply_to_the_variant_served_over(t: Transport) {
    let root = variants_root();
    let br = std::fs::read(root.path().join("app.3f2a9c1b.js.br")).unwrap();
    let s = Server::start_in_over(t, root, &[]);
    let r = s.get(
        "/app.3f2a9c1b.js",
        &["Accept-Encoding: br", "Range: bytes=0-3"],
    );
    assert_eq!(r.status, 206, "over {t:?}");
    assert_eq!(r.body, &br[..4]);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 0-3/{}", br.len()).as_str())
    );
    let etag = s
        .get("/app.3f2a9c1b.js", &["Accept-Encoding: br"])
        .header("etag")
        .unwrap()
        .to_string();
    assert_eq!(
        s.get(
            "/app.3f2a9c1b.js",
            &["Accept-Encoding: br", &format!("If-None-Match: {etag}")]
        )
        .status,
        304
    );
    assert_eq!(
        s.get("/app.3f2a9c1b.js", &[&format!("If-None-Match: {etag}")])
            .status,
        200,
        "not the identity's ETag"
    );
}

#[test]
fn a_variant_older_than_its_original_is_ignored() {
    let root = variants_root();
    let old = SystemTime::now() - Duration::from_secs(3600);
    set_mtime(&root.path().join("app.3f2a9c1b.js.gz"), old);
    set_mtime(&root.path().join("app.3f2a9c1b.js.br"), old);
    let s = Server::start_in(root, &[]);
    let r = s.get("/app.3f2a9c1b.js", &["Accept-Encoding: gzip, br"]);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.text(), APP_JS);
}

#[test]
fn a_gzip_only_tree_serves_both_kinds_of_client() {
    for t in Transport::all() {
        a_gzip_only_tree_serves_both_kinds_of_client_over(t);
    }
}

fn a_gzip_only_tree_serves_both_kinds_of_client_over(t: Transport) {
    let root = TempDir::new("gzonly");
    root.write("index.html", "i");
    let big: String = (0..20_000)
        .map(|i| format!("row {i} of a table the UI needs\n"))
        .collect();
    for (name, content) in [
        ("data.json", "{\"ok\":true}\n".to_string()),
        ("big.txt", big.clone()),
    ] {
        let p = root.write(name, content);
        assert!(
            Command::new("gzip")
                .args(["-f", "-9", "-n"])
                .arg(&p)
                .status()
                .unwrap()
                .success()
        );
    }
    let gz = std::fs::read(root.path().join("big.txt.gz")).unwrap();
    let s = Server::start_in_over(t, root, &[]);
    // Accepts gzip: the file as is.
    let r = s.get("/big.txt", &["Accept-Encoding: gzip"]);
    assert_eq!(
        (r.status, r.header("content-encoding")),
        (200, Some("gzip")),
        "over {t:?}"
    );
    assert_eq!(r.body, gz);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    // Does not: decompressed on the fly, with the exact length, on a kept-alive connection.
    let mut c = s.open();
    for path in ["/big.txt", "/data.json", "/big.txt"] {
        c.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
            .unwrap();
        let r = read_response(&mut c, false).unwrap();
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-encoding"), None, "{path}");
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        let want = if path == "/data.json" {
            "{\"ok\":true}\n".to_string()
        } else {
            big.clone()
        };
        assert_eq!(r.text(), want, "{path} over {t:?}");
    }
    // Its own ETag and conditional requests.
    let e_identity = s.get("/data.json", &[]).header("etag").unwrap().to_string();
    let e_gzip = s
        .get("/data.json", &["Accept-Encoding: gzip"])
        .header("etag")
        .unwrap()
        .to_string();
    assert_ne!(e_identity, e_gzip);
    assert_eq!(
        s.get("/data.json", &[&format!("If-None-Match: {e_identity}")])
            .status,
        304
    );
    let (code, _, body) = s.curl(&[&s.url("/big.txt")]);
    assert_eq!((code, body), (200, big.into_bytes()), "over {t:?}");
    // A file is no directory, compressed or not.
    for enc in ["Accept-Encoding: gzip", "Accept-Encoding: identity"] {
        assert_eq!(s.get("/data.json/", &[enc]).status, 404, "{enc} over {t:?}");
    }
}

#[test]
fn a_gzip_only_index_is_found() {
    let root = TempDir::new("gzindex");
    let p = root.write("app/index.html", "<p>compressed index</p>");
    assert!(
        Command::new("gzip")
            .args(["-f", "-9", "-n"])
            .arg(&p)
            .status()
            .unwrap()
            .success()
    );
    root.write("index.html", "x");
    let s = Server::start_in(root, &[]);
    let r = s.get("/app/", &[]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "<p>compressed index</p>")
    );
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
}

#[test]
fn spa_routes_get_the_fallback_and_missing_assets_404() {
    let s = Server::start(&["--spa-fallback", "/index.html"]);
    let r = s.get(
        "/settings/network",
        &["Accept: text/html,application/xhtml+xml,*/*;q=0.8"],
    );
    assert_eq!(r.status, 200);
    assert!(r.text().contains("hello"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(
        s.get("/settings/network", &[]).status,
        200,
        "no Accept allows HTML"
    );
    assert_eq!(s.get("/app.3f2a.js", &["Accept: */*"]).status, 404);
    assert_eq!(
        s.get("/settings/network", &["Accept: application/json"])
            .status,
        404
    );
    assert_eq!(
        s.get(
            "/settings/network",
            &["Accept: text/html;q=0, application/json"]
        )
        .status,
        404
    );
    let s = Server::start(&[]);
    assert_eq!(
        s.get("/settings/network", &["Accept: text/html"]).status,
        404,
        "off by default"
    );
}

#[test]
fn redirect_rules() {
    let s = Server::start(&[
        "--redirect",
        "/old /new.html 301",
        "--redirect",
        "/docs/* /manual/* 308",
        "--redirect",
        "/help https://example.com/help",
    ]);
    let r = s.get("/old?x=1", &[]);
    assert_eq!(
        (r.status, r.header("location")),
        (301, Some("/new.html?x=1"))
    );
    let r = s.get("/docs/a/b.html", &[]);
    assert_eq!(
        (r.status, r.header("location")),
        (308, Some("/manual/a/b.html"))
    );
    let r = s.get("/help", &[]);
    assert_eq!(
        (r.status, r.header("location")),
        (302, Some("https://example.com/help"))
    );
    assert_eq!(s.get("/older", &[]).status, 404);
}

#[test]
fn what_a_prefix_redirect_substitutes_is_re_encoded() {
    let s = Server::start(&["--redirect", "/old/* /new/* 301", "--redirect", "/flat* /*"]);
    let location = |path: &str| {
        let r = s.get(path, &[]);
        assert_eq!(r.status, 301, "{path}");
        r.header("location").map(str::to_string)
    };
    for (asked, want) in [
        ("/old/a%20b", "/new/a%20b"),
        ("/old/a%23b", "/new/a%23b"),
        ("/old/%22%3C%3E%60", "/new/%22%3C%3E%60"),
        ("/old/%C3%A9t%C3%A9", "/new/%C3%A9t%C3%A9"),
        ("/old/a%25b", "/new/a%25b"),
        // A decoded `?` stays in the path; the real query is kept.
        (
            "/old/a%3Fnext=http://evil.example",
            "/new/a%3Fnext=http:/evil.example",
        ),
        ("/old/a%3Fx?y=1", "/new/a%3Fx?y=1"),
        ("/old/a/b.html", "/new/a/b.html"),
    ] {
        assert_eq!(location(asked).as_deref(), Some(want), "{asked}");
    }
    // `/flat/evil.example` must not become `//evil.example`, another host.
    let r = s.get("/flat/evil.example", &[]);
    assert_eq!(
        (r.status, r.header("location")),
        (302, Some("/evil.example"))
    );
}

#[test]
fn cache_control_defaults_and_rules() {
    let root = variants_root();
    root.write("logo.png", "png");
    root.write("app.js", "plain");
    let s = Server::start_in(root, &[]);
    assert_eq!(
        s.get("/app.3f2a9c1b.js", &[]).header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    assert_eq!(
        s.get("/app.3f2a9c1b.js", &["Accept-Encoding: br"])
            .header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    assert_eq!(s.get("/", &[]).header("cache-control"), Some("no-cache"));
    assert_eq!(
        s.get("/index.html", &[]).header("cache-control"),
        Some("no-cache")
    );
    assert_eq!(
        s.get("/app.js", &[]).header("cache-control"),
        Some("max-age=300"),
        "never immutable without a hash"
    );
    let etag = s.get("/app.js", &[]).header("etag").unwrap().to_string();
    assert_eq!(
        s.get("/app.js", &[&format!("If-None-Match: {etag}")])
            .header("cache-control"),
        Some("max-age=300")
    );

    let root = variants_root();
    root.write("logo.png", "png");
    let s = Server::start_in(
        root,
        &[
            "--cache",
            "*.png max-age=86400",
            "--cache",
            "/api/* no-store",
        ],
    );
    assert_eq!(
        s.get("/logo.png", &[]).header("cache-control"),
        Some("max-age=86400")
    );
    assert_eq!(
        s.get("/index.html", &[]).header("cache-control"),
        Some("no-cache")
    );

    let out = command()
        .args([
            "--config",
            "/dev/null",
            "--cache",
            "*.js public, max-age=31536000, immutable",
            "--check-config",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("@hashed"));
}

#[test]
fn security_headers_by_default_overridable_and_removable() {
    let s = Server::start(&[]);
    for path in ["/", "/missing"] {
        let r = s.get(path, &[]);
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(r.header("referrer-policy"), Some("same-origin"), "{path}");
    }
    let s = Server::start(&[
        "--header",
        "* -X-Frame-Options",
        "--header",
        "* Referrer-Policy: no-referrer",
        "--header",
        "*.html Content-Security-Policy: frame-ancestors 'none'",
    ]);
    let r = s.get("/index.html", &[]);
    assert_eq!(r.header("x-frame-options"), None);
    assert_eq!(r.header("referrer-policy"), Some("no-referrer"));
    assert_eq!(
        r.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("referrer-policy"))
            .count(),
        1
    );
    assert_eq!(
        r.header("content-security-policy"),
        Some("frame-ancestors 'none'")
    );
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
}

#[test]
fn custom_error_pages_keep_the_status_and_are_not_cached() {
    let root = TempDir::new("errpages");
    root.write("index.html", "x");
    root.write("404.html", "<h1>Nothing here</h1>");
    let s = Server::start_in(root, &["--error-page", "404 /404.html"]);
    let r = s.get("/nope", &[]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (404, "<h1>Nothing here</h1>")
    );
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let mut c = s.connect();
    c.write_all(b"HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut c, true).unwrap().status, 404);
    assert_eq!(read_response(&mut c, false).unwrap().status, 200);
}

#[test]
fn directory_listing_is_off_by_default_and_safe_when_on() {
    let make = || {
        let root = TempDir::new("listing");
        root.write("index.html", "x");
        root.write("files/b.txt", "bb");
        root.write("files/a <&> \"q\".txt", "a");
        root.write("files/.secret", "s");
        root.write("files/sub/x", "x");
        root
    };
    let s = Server::start_in(make(), &[]);
    assert_eq!(s.get("/files/", &[]).status, 404);
    let s = Server::start_in(make(), &["--listing", "on"]);
    let r = s.get("/files/", &[]);
    assert_eq!(r.status, 200);
    let html = r.text();
    assert!(!html.contains(".secret"));
    assert!(
        html.contains(">a &lt;&amp;&gt; &quot;q&quot;.txt</a>"),
        "{html}"
    );
    assert!(
        html.contains("href=\"a%20%3C&amp;%3E%20%22q%22.txt\""),
        "{html}"
    );
    let (sub, a, b) = (
        html.find("sub/").unwrap(),
        html.find(">a &lt;").unwrap(),
        html.find(">b.txt").unwrap(),
    );
    assert!(sub < a && a < b, "directories first, then by name");
    assert!(html.contains("<td>2</td>"), "sizes");
    assert!(html.contains(" GMT</td>"), "dates");
}

#[test]
fn the_bundled_demo_ui_is_served_precompressed() {
    let www = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rootfs-overlay/www");
    let root = TempDir::new("demo");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", www.display()))
            .arg(root.path())
            .status()
            .unwrap()
            .success()
    );
    let s = Server::start_in(root, &[]);
    let index = s.get("/", &["Accept-Encoding: gzip, deflate, br"]);
    assert_eq!(index.status, 200);
    assert_eq!(index.header("content-encoding"), Some("br"));
    assert_eq!(index.header("cache-control"), Some("no-cache"));
    let html = String::from_utf8(s.get("/", &[]).body).unwrap();
    let assets: Vec<&str> = html
        .split(['"', '\''])
        .filter(|p| p.ends_with(".js") || p.ends_with(".css"))
        .collect();
    assert!(assets.len() >= 2, "{html}");
    for a in assets {
        let path = format!("/{}", a.trim_start_matches('/'));
        let r = s.get(&path, &["Accept-Encoding: gzip, deflate, br"]);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-encoding"), Some("br"), "{path}");
        assert_eq!(
            r.header("cache-control"),
            Some("public, max-age=31536000, immutable"),
            "{path}"
        );
    }
}
