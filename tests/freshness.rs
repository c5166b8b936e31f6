//! A file changed on the device is served as it now is at the very next
//! request, whether the file cache learns of it from inotify or, without
//! inotify or past its watch limit, from a stat per request.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use common::{Response, Server, TempDir, read_response};

/// One request on a kept-alive connection.
fn get(c: &mut TcpStream, path: &str, headers: &[&str]) -> Response {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    c.write_all(req.as_bytes()).unwrap();
    read_response(c, false).expect("a response")
}

fn site() -> TempDir {
    let root = TempDir::new("fresh");
    root.write("index.html", "home\n");
    root.write("a.txt", "version 1\n");
    root.write("css/app.css", "body{}\n");
    root.write("page.html", "plain page\n");
    root
}

/// Every way a device changes its files, each checked at the next request,
/// on a kept-alive connection and on a new one. `watched`: inotify is on,
/// so even a rewrite that keeps the size and the timestamp (two writes in
/// one clock tick) is seen.
fn every_change_is_served_at_once(s: &Server, watched: bool) {
    let root = s.root.path().to_path_buf();
    let mut c = s.connect();
    assert_eq!(get(&mut c, "/a.txt", &[]).text(), "version 1\n");

    // Rewritten in place, many times within a second.
    for i in 0..20 {
        let body = if watched {
            format!("version {}\n", i % 10)
        } else {
            format!("version {}\n", "x".repeat(i))
        };
        std::fs::write(root.join("a.txt"), &body).unwrap();
        assert_eq!(get(&mut c, "/a.txt", &[]).text(), body, "rewrite {i}");
    }
    // Replaced by a rename, as firmware updates do.
    std::fs::write(root.join("a.tmp"), "replaced\n").unwrap();
    std::fs::rename(root.join("a.tmp"), root.join("a.txt")).unwrap();
    assert_eq!(get(&mut c, "/a.txt", &[]).text(), "replaced\n");
    // Truncated.
    std::fs::File::create(root.join("a.txt")).unwrap();
    let r = get(&mut c, "/a.txt", &[]);
    assert_eq!((r.status, r.body.len()), (200, 0));
    // Renamed away, then back.
    std::fs::rename(root.join("a.txt"), root.join("b.txt")).unwrap();
    assert_eq!(get(&mut c, "/a.txt", &[]).status, 404);
    assert_eq!(get(&mut c, "/b.txt", &[]).status, 200);
    std::fs::write(root.join("b.txt"), "back\n").unwrap();
    std::fs::rename(root.join("b.txt"), root.join("a.txt")).unwrap();
    assert_eq!(get(&mut c, "/a.txt", &[]).text(), "back\n");
    // Deleted.
    std::fs::remove_file(root.join("a.txt")).unwrap();
    assert_eq!(get(&mut c, "/a.txt", &[]).status, 404);
    assert_eq!(s.get("/a.txt", &[]).status, 404);

    // A precompressed variant added, then removed: used, then not, at once.
    let gz = ["Accept-Encoding: gzip"];
    assert_eq!(
        get(&mut c, "/page.html", &gz).header("content-encoding"),
        None
    );
    let packed = Command::new("gzip")
        .args(["-9", "-n", "-k"])
        .arg(root.join("page.html"))
        .status()
        .unwrap();
    assert!(packed.success());
    if watched {
        let r = get(&mut c, "/page.html", &gz);
        assert_eq!(r.header("content-encoding"), Some("gzip"));
    } else {
        // Without a watch, "no variant" is believed for a second.
        let found = common::wait_until(Duration::from_secs(3), || {
            get(&mut c, "/page.html", &gz).header("content-encoding") == Some("gzip")
        });
        assert!(found, "the new variant is used within a second");
    }
    std::fs::remove_file(root.join("page.html.gz")).unwrap();
    let r = get(&mut c, "/page.html", &gz);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.text(), "plain page\n");

    // A directory switched for another (the old one renamed away).
    assert_eq!(get(&mut c, "/css/app.css", &[]).text(), "body{}\n");
    std::fs::rename(root.join("css"), root.join("css.old")).unwrap();
    assert_eq!(get(&mut c, "/css/app.css", &[]).status, 404);
    std::fs::create_dir(root.join("css")).unwrap();
    std::fs::write(root.join("css/app.css"), "body{color:red}\n").unwrap();
    assert_eq!(get(&mut c, "/css/app.css", &[]).text(), "body{color:red}\n");
    // The new directory is watched too.
    std::fs::write(root.join("css/app.css"), "body{color:blue}\n").unwrap();
    assert_eq!(
        get(&mut c, "/css/app.css", &[]).text(),
        "body{color:blue}\n"
    );
    // And the old one, still on disk under another name, no longer counts.
    std::fs::write(root.join("css.old/app.css"), "old\n").unwrap();
    assert_eq!(
        get(&mut c, "/css/app.css", &[]).text(),
        "body{color:blue}\n"
    );

    // Permissions taken away: a file the server may no longer read is not
    // served from memory (the server runs as nobody when the tests are root).
    if watched && common::is_root() {
        std::fs::write(root.join("secret.txt"), "s\n").unwrap();
        assert_eq!(get(&mut c, "/secret.txt", &[]).status, 200);
        std::fs::set_permissions(root.join("secret.txt"), PermissionsExt::from_mode(0o600))
            .unwrap();
        assert_eq!(get(&mut c, "/secret.txt", &[]).status, 403);
    }
}

/// Changes the directory's watch cannot see: through another hard link, or
/// to the target of a symlink in another directory.
fn changes_elsewhere_are_served_at_once(s: &Server) {
    let root = s.root.path().to_path_buf();
    let mut c = s.connect();
    std::fs::create_dir_all(root.join("data")).unwrap();
    std::fs::write(root.join("data/status.json"), "{\"n\":1}").unwrap();
    std::fs::write(root.join("data/count.txt"), "1").unwrap();
    std::os::unix::fs::symlink("data/status.json", root.join("status.json")).unwrap();
    std::fs::hard_link(root.join("data/count.txt"), root.join("count.txt")).unwrap();
    assert_eq!(get(&mut c, "/status.json", &[]).text(), "{\"n\":1}");
    assert_eq!(get(&mut c, "/count.txt", &[]).text(), "1");
    // Written in place through the names in data/ (a longer body each, so
    // the stat catches it whatever the timestamps' resolution).
    for (name, body) in [("status.json", "{\"n\":22}"), ("count.txt", "22")] {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(root.join("data").join(name))
            .unwrap();
        f.write_all(body.as_bytes()).unwrap();
        drop(f);
        assert_eq!(get(&mut c, &format!("/{name}"), &[]).text(), body);
    }
}

fn user_args() -> Vec<&'static str> {
    if common::is_root() {
        vec!["--user", "nobody"]
    } else {
        vec![]
    }
}

fn chmod_for_nobody(root: &TempDir) {
    if common::is_root() {
        // The temp root must be reachable by the unprivileged user.
        let _ = std::fs::set_permissions(root.path(), PermissionsExt::from_mode(0o777));
    }
}

#[test]
fn with_inotify() {
    let root = site();
    chmod_for_nobody(&root);
    let s = Server::start_in(root, &user_args());
    every_change_is_served_at_once(&s, true);
    changes_elsewhere_are_served_at_once(&s);
    s.assert_healthy();
    assert!(!s.log_text().contains("inotify"), "{}", s.log_text());
}

/// The server in a user namespace whose inotify limits are set by `limits`
/// (see user_namespaces(7): each namespace has its own).
fn start_limited(limits: &str) -> Option<Server> {
    let probe = Command::new("unshare")
        .args(["--user", "--map-root-user", "true"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no unprivileged user namespaces here");
        return None;
    }
    let root = site();
    // The binary as the other tests run it (through qemu-user for a cross build).
    let server = common::command();
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "sh", "-c"])
        .arg(format!("{limits} && exec \"$0\" \"$@\""))
        .arg(server.get_program())
        .args(server.get_args())
        .args(["--config", "/dev/null", "--listen", "127.0.0.1:0", "--root"])
        .arg(root.path());
    Some(Server::spawn(cmd, root))
}

#[test]
fn without_inotify() {
    let Some(s) = start_limited("echo 0 > /proc/sys/user/max_inotify_instances") else {
        return;
    };
    every_change_is_served_at_once(&s, false);
    let log = s.log_text();
    assert_eq!(
        log.matches("checked with a stat per request").count(),
        1,
        "{log}"
    );
}

#[test]
fn past_the_watch_limit() {
    // One watch: the root's. css/ and data/ are past the limit.
    let Some(s) = start_limited("echo 1 > /proc/sys/user/max_inotify_watches") else {
        return;
    };
    every_change_is_served_at_once(&s, false);
    changes_elsewhere_are_served_at_once(&s);
    assert!(s.wait_log("watch limit reached", Duration::from_secs(1)));
    let log = s.log_text();
    assert_eq!(log.matches("watch limit reached").count(), 1, "{log}");
}
