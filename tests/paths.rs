//! Paths: nothing outside the root is ever served, whatever the encoding;
//! dotfiles are hidden; directories redirect and use their index.

mod common;

use std::os::unix::fs::symlink;

use common::*;

/// A root inside a parent that holds a secret the server must never show.
fn fenced() -> (TempDir, Server) {
    let outer = TempDir::new("outer");
    outer.write("secret.txt", "TOP-SECRET");
    let root = TempDir(outer.path().join("www"));
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    root.write("sub/index.html", "sub index");
    root.write("sub/page.txt", "page");
    root.write(".hidden", "HIDDEN");
    root.write(".git/config", "HIDDEN");
    root.write(".well-known/security.txt", "Contact: x");
    let s = Server::start_in(root, &[]);
    (outer, s)
}

#[test]
fn traversal_in_any_encoding_is_refused() {
    let (_outer, s) = fenced();
    let attempts = [
        "/../secret.txt",
        "/sub/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/..%2fsecret.txt",
        "/%2e%2e%2fsecret.txt",
        "/sub/%2e%2e/%2e%2e/secret.txt",
        "/..%5csecret.txt",
        "/%5c..%5csecret.txt",
        "/%252e%252e/secret.txt",
        "/%252e%252e%252fsecret.txt",
        "/.%2e/secret.txt",
        "/%c0%ae%c0%ae/secret.txt",
        "/secret.txt%00.html",
        "/index.html%00",
        "/%ff%fe",
        "/sub/..",
        "//../secret.txt",
    ];
    for a in attempts {
        let out =
            s.raw(format!("GET {a} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
        let status: u16 = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
        assert!(status == 400 || status == 404, "{a} gave {status}: {out}");
        assert!(!out.contains("TOP-SECRET"), "{a} leaked the secret");
    }
    // curl normalises dot segments itself: send them as they are.
    let (code, _, body) = curl(&["--path-as-is", &s.url("/../secret.txt")]);
    assert!(code == 400 || code == 404, "{code}");
    assert!(!String::from_utf8_lossy(&body).contains("TOP-SECRET"));
    s.assert_healthy();
}

#[test]
fn raw_bytes_that_are_not_a_path_are_refused() {
    let (_outer, s) = fenced();
    for raw in [
        &b"GET /a\x00b HTTP/1.1\r\nHost: t\r\n\r\n"[..],
        b"GET /\xff HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET * HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET sub HTTP/1.1\r\nHost: t\r\n\r\n",
    ] {
        let out = s.raw(raw);
        assert!(
            out.starts_with("HTTP/1.1 400 "),
            "{:?}: {out}",
            String::from_utf8_lossy(raw)
        );
    }
    s.assert_healthy();
}

#[test]
fn dotfiles_are_hidden_except_well_known() {
    let (_outer, s) = fenced();
    for p in ["/.hidden", "/.git/config", "/%2ehidden", "/sub/../.hidden"] {
        let r = s.get(p, &[]);
        assert!(r.status == 404 || r.status == 400, "{p}: {}", r.status);
        assert!(!r.text().contains("HIDDEN"));
    }
    let r = s.get("/.well-known/security.txt", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "Contact: x"));
}

#[test]
fn directories_redirect_to_the_slash_form_and_serve_their_index() {
    let (_outer, s) = fenced();
    let r = s.get("/sub?tab=2", &[]);
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/sub/?tab=2"));
    let r = s.get("/sub/", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "sub index"));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let r = s.get("/", &[]);
    assert!(r.text().contains("hello"));
    // A file is no directory: `/sub/index.html/` names nothing.
    assert_eq!(s.get("/sub/index.html", &[]).status, 200);
    assert_eq!(s.get("/sub/index.html/", &[]).status, 404);
    // curl follows the redirect to the index.
    let (code, _, body) = curl(&["-L", &s.url("/sub")]);
    assert_eq!((code, body.as_slice()), (200, &b"sub index"[..]));
}

#[test]
fn a_directory_without_index_is_404_and_the_index_list_is_configurable() {
    let root = TempDir::new("idx");
    root.write("index.html", "x");
    root.write("empty/readme.txt", "r");
    root.write("alt/home.htm", "home");
    let s = Server::start_in(root, &["--index", "index.html home.htm"]);
    assert_eq!(s.get("/empty/", &[]).status, 404);
    let r = s.get("/alt/", &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "home"));
}

#[test]
fn query_strings_do_not_change_static_files() {
    let (_outer, s) = fenced();
    let plain = s.get("/sub/page.txt", &[]);
    let queried = s.get("/sub/page.txt?v=123&x=%2e%2e", &[]);
    assert_eq!(plain.body, queried.body);
    assert_eq!(plain.header("etag"), queried.header("etag"));
}

/// A root with links: one inside it, two leading out to its parent.
fn linked_root() -> (TempDir, TempDir) {
    let outer = TempDir::new("links");
    outer.write("secret.txt", "TOP-SECRET");
    outer.write("shared/asset.txt", "shared");
    let root = TempDir(outer.path().join("www"));
    root.write("index.html", "x");
    root.write("real.txt", "real");
    symlink(
        outer.path().join("secret.txt"),
        root.path().join("leak.txt"),
    )
    .unwrap();
    symlink(outer.path().join("shared"), root.path().join("shared")).unwrap();
    symlink("real.txt", root.path().join("alias.txt")).unwrap();
    (outer, root)
}

#[test]
fn symlinks_leaving_the_root_are_refused_unless_allowed() {
    let (_outer, root) = linked_root();
    let s = Server::start_in(root, &[]);
    assert_eq!(
        s.get("/alias.txt", &[]).text(),
        "real",
        "a link inside the root is fine"
    );
    for p in ["/leak.txt", "/shared/asset.txt"] {
        let r = s.get(p, &[]);
        assert_eq!(r.status, 403, "{p}");
        assert!(!r.text().contains("TOP-SECRET"));
    }
    let (_outer, root) = linked_root();
    let s = Server::start_in(root, &["--symlinks", "anywhere"]);
    assert_eq!(s.get("/shared/asset.txt", &[]).text(), "shared");
}

#[test]
fn unreadable_files_get_403_and_fifos_do_not_hang() {
    let root = TempDir::new("perm");
    root.write("index.html", "x");
    let locked = root.write("locked.txt", "nope");
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let fifo = root.path().join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // Root bypasses permissions: drop to nobody so the file is really unreadable.
    let args: &[&str] = if is_root() {
        &["--user", "nobody"]
    } else {
        &[]
    };
    std::fs::set_permissions(
        root.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let s = Server::start_in(root, args);
    assert_eq!(s.get("/locked.txt", &[]).status, 403);
    assert_eq!(s.get("/pipe", &[]).status, 404);
    s.assert_healthy();
}

#[test]
fn a_root_that_disappears_and_comes_back_is_served_again() {
    let outer = TempDir::new("vanish");
    let root = TempDir(outer.path().join("www"));
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    let root_path = root.path().to_path_buf();
    let s = Server::start_in(root, &[]);
    std::fs::remove_dir_all(&root_path).unwrap();
    assert!(wait_until(std::time::Duration::from_secs(5), || s
        .get("/", &[])
        .status
        == 404));
    std::fs::create_dir_all(&root_path).unwrap();
    std::fs::write(root_path.join("index.html"), "back").unwrap();
    assert!(wait_until(std::time::Duration::from_secs(5), || s
        .get("/", &[])
        .text()
        == "back"));
}

/// An encoded slash is refused, not decoded: a backend given the target as
/// sent may or may not split there, so no rule could be sure what it names.
#[test]
fn encoded_slashes_are_refused() {
    let (_outer, s) = fenced();
    for path in ["/sub%2Fpage.txt", "/sub%2fpage.txt", "/%2Fsub/page.txt"] {
        let r = s.get(path, &[]);
        assert_eq!(
            (r.status, r.text().contains("page")),
            (400, false),
            "{path}"
        );
    }
    assert_eq!(s.get("/sub/page.txt", &[]).text(), "page");
    // Encoded twice: a `%2F` in a name, which is not there.
    assert_eq!(s.get("/sub%252Fpage.txt", &[]).status, 404);
    s.assert_healthy();
}
