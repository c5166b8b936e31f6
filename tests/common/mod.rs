//! Test harness: starts the real `marmoset` binary on port 0 with a
//! temporary root, reads the bound port from its log, and kills it on drop.
//! `MARMOSET_BIN` and `MARMOSET_RUNNER` (e.g. `qemu-aarch64-static`) let the
//! same tests drive a cross-built binary under qemu-user. A server started
//! `over` a [`Transport`] is reached by `get`, `raw`, `open`, `url` and
//! `curl` through it, so one test body checks plain HTTP and HTTPS.
#![allow(dead_code)]

pub mod backend;
pub mod json;
pub mod lan;
#[cfg(feature = "tls")]
pub mod tls;
pub mod ubus;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How soon the owner's requests are answered while a hostile client
/// floods: 2 s, the bound the server is held to; under qemu-user (a cross
/// build's binary, emulated) ten times that.
pub fn owner_bound() -> Duration {
    if runner().is_empty() {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(20)
    }
}

/// How long the server may take to start (qemu-user is slow).
pub fn start_deadline() -> Duration {
    if runner().is_empty() {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(60)
    }
}

fn runner() -> Vec<String> {
    std::env::var("MARMOSET_RUNNER")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect()
}

pub fn binary() -> PathBuf {
    std::env::var_os("MARMOSET_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_marmoset")),
        PathBuf::from,
    )
}

/// The binary, through the runner if there is one.
pub fn command() -> Command {
    let mut r = runner();
    if r.is_empty() {
        Command::new(binary())
    } else {
        let mut c = Command::new(r.remove(0));
        c.args(r).arg(binary());
        c
    }
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "marmoset-test-{}-{}-{tag}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }

    /// Writes an executable file (a script with its `#!` line).
    pub fn write_executable(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.write(rel, content);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }
}

/// `--check-config` on `conf`, written to `m.conf` in a directory of its
/// own: the exit status and stderr.
pub fn check_conf(conf: &str) -> (Option<i32>, String) {
    let dir = TempDir::new("conf");
    let path = dir.write("m.conf", conf);
    let out = command()
        .arg("--config")
        .arg(&path)
        .arg("--check-config")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A shell script `cgi-bin/NAME` under `root`.
pub fn script(root: &TempDir, name: &str, body: &str) {
    root.write_executable(&format!("cgi-bin/{name}"), format!("#!/bin/sh\n{body}"));
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How a test reaches the server: plain TCP, or (in a `tls` build) TLS to
/// a TLS listener beside the plain one the harness waits on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Transport {
    Plain,
    #[cfg(feature = "tls")]
    Tls,
}

impl Transport {
    /// Every transport this build serves.
    pub fn all() -> Vec<Transport> {
        #[allow(unused_mut)]
        let mut all = vec![Transport::Plain];
        #[cfg(feature = "tls")]
        all.push(Transport::Tls);
        all
    }

    pub fn scheme(self) -> &'static str {
        match self {
            Transport::Plain => "http",
            #[cfg(feature = "tls")]
            Transport::Tls => "https",
        }
    }

    /// The `--listen` value for a listener of this transport on `addr`.
    pub fn listen(self, addr: &str) -> String {
        match self {
            Transport::Plain => addr.to_string(),
            #[cfg(feature = "tls")]
            Transport::Tls => format!("{addr} tls"),
        }
    }
}

/// The TLS side of a server started over [`Transport::Tls`].
#[cfg(feature = "tls")]
pub struct TlsEnd {
    pub port: u16,
    /// The server's certificate, the only one its clients trust.
    pub ca: PathBuf,
    pub client: Arc<rustls::ClientConfig>,
    _pair: TempDir,
}

pub struct Server {
    pub child: Child,
    /// The plain listener's port (the first one logged).
    pub port: u16,
    pub log: Arc<Mutex<String>>,
    pub root: TempDir,
    pub transport: Transport,
    #[cfg(feature = "tls")]
    pub tls: Option<TlsEnd>,
}

/// A connection to the server over its transport.
pub enum Conn {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<tls::Stream>),
}

impl Conn {
    /// Ends what the client sends (close_notify first over TLS).
    pub fn shutdown_write(&mut self) {
        match self {
            Conn::Plain(c) => {
                let _ = c.shutdown(Shutdown::Write);
            }
            #[cfg(feature = "tls")]
            Conn::Tls(c) => {
                c.conn.send_close_notify();
                let _ = c.flush();
                let _ = c.sock.shutdown(Shutdown::Write);
            }
        }
    }

    pub fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(c) => c,
            #[cfg(feature = "tls")]
            Conn::Tls(c) => &c.sock,
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(c) => c.read(buf),
            #[cfg(feature = "tls")]
            Conn::Tls(c) => c.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(c) => c.write(buf),
            #[cfg(feature = "tls")]
            Conn::Tls(c) => c.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(c) => c.flush(),
            #[cfg(feature = "tls")]
            Conn::Tls(c) => c.flush(),
        }
    }
}

impl Server {
    /// A server on 127.0.0.1:0 over a root with an index.html.
    pub fn start(args: &[&str]) -> Server {
        let root = TempDir::new("root");
        root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
        Server::start_in(root, args)
    }

    pub fn start_in(root: TempDir, args: &[&str]) -> Server {
        Server::start_with_config(Path::new("/dev/null"), root, args)
    }

    /// A server reading `config`, over `root`, with `args` on top.
    pub fn start_with_config(config: &Path, root: TempDir, args: &[&str]) -> Server {
        Server::start_with_config_over(Transport::Plain, config, root, args)
    }

    /// `start`, reached over `t`.
    pub fn start_over(t: Transport, args: &[&str]) -> Server {
        let root = TempDir::new("root");
        root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
        Server::start_in_over(t, root, args)
    }

    /// `start_in`, reached over `t`.
    pub fn start_in_over(t: Transport, root: TempDir, args: &[&str]) -> Server {
        Server::start_with_config_over(t, Path::new("/dev/null"), root, args)
    }

    /// `start_with_config`, reached over `t`. Over TLS the server gets a
    /// certificate made by openssl and, unless `args` has its own
    /// `--listen` (a plain one first, where the harness waits), a plain and
    /// a TLS listener on 127.0.0.1.
    pub fn start_with_config_over(
        t: Transport,
        config: &Path,
        root: TempDir,
        args: &[&str],
    ) -> Server {
        let mut cmd = command();
        cmd.arg("--config")
            .arg(config)
            .arg("--root")
            .arg(root.path());
        if !args.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
            if t != Transport::Plain {
                cmd.args(["--listen", &t.listen("127.0.0.1:0")]);
            }
        }
        #[cfg(feature = "tls")]
        let pair = (t == Transport::Tls).then(|| {
            let dir = TempDir::new("pair");
            let pair = tls::make_pair(&dir, "server");
            cmd.arg("--tls-cert")
                .arg(&pair.cert)
                .arg("--tls-key")
                .arg(&pair.key);
            (dir, pair)
        });
        cmd.args(args);
        #[allow(unused_mut)]
        let mut s = Server::spawn(cmd, root);
        s.transport = t;
        #[cfg(feature = "tls")]
        if let Some((dir, pair)) = pair {
            s.tls = Some(TlsEnd {
                port: tls::tls_port_on(&s, "127.0.0.1"),
                client: tls::client_config(&pair.cert),
                ca: pair.cert,
                _pair: dir,
            });
        }
        s
    }

    pub fn spawn(mut cmd: Command, root: TempDir) -> Server {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn marmoset");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(i) = line.find("listening on ") {
                    let addr = &line[i + "listening on ".len()..];
                    if let Some(port) = addr.rsplit(':').next().and_then(|p| p.parse::<u16>().ok())
                    {
                        let _ = tx.send(port);
                    }
                }
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let port = match rx.recv_timeout(start_deadline()) {
            Ok(p) => p,
            Err(_) => {
                let _ = child.kill();
                panic!("server did not start; log:\n{}", log.lock().unwrap());
            }
        };
        let s = Server {
            child,
            port,
            log,
            root,
            transport: Transport::Plain,
            #[cfg(feature = "tls")]
            tls: None,
        };
        s.wait_ready();
        s
    }

    /// Waits until a connection is accepted and answered.
    fn wait_ready(&self) {
        let deadline = Instant::now() + start_deadline();
        while Instant::now() < deadline {
            if let Ok(mut c) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                if c.write_all(b"HEAD / HTTP/1.0\r\n\r\n").is_ok() {
                    let mut b = [0u8; 12];
                    if c.read_exact(&mut b).is_ok() && b.starts_with(b"HTTP/1.1 ") {
                        return;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("server never answered; log:\n{}", self.log.lock().unwrap());
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the log contains `needle`.
    pub fn wait_log(&self, needle: &str, within: Duration) -> bool {
        wait_until(within, || self.log_text().contains(needle))
    }

    /// Sends SIGHUP and waits until the reload has ended: the new
    /// configuration is in force, or the log says why the old one stays.
    pub fn reload(&self) {
        let ended = || {
            let log = self.log_text();
            log.matches("configuration reloaded").count() + log.matches("reload failed").count()
        };
        let before = ended();
        self.signal("HUP");
        assert!(
            wait_until(Duration::from_secs(10), || ended() > before),
            "the reload did not end within 10 s"
        );
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args(["-s", sig, &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -s {sig}");
    }

    /// Waits for the process to exit; its status code.
    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The port of the `[::1]` listener of the server's transport, from the
    /// log. The server is ready as soon as its first listener is logged;
    /// this one may come a moment later.
    pub fn ipv6_port(&self) -> u16 {
        #[cfg(feature = "tls")]
        if self.transport == Transport::Tls {
            return tls::tls_port_on(self, "[::1]");
        }
        self.wait_log("listening on [::1]:", Duration::from_secs(5));
        self.log_text()
            .lines()
            .find_map(|l| {
                l.split("listening on [::1]:")
                    .nth(1)
                    .and_then(|p| p.trim().parse().ok())
            })
            .expect("an IPv6 listener")
    }

    /// The port of the listener the server's transport reaches.
    pub fn transport_port(&self) -> u16 {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return tls.port;
        }
        self.port
    }

    /// The URL of `path` over the server's transport.
    pub fn url(&self, path: &str) -> String {
        format!(
            "{}://127.0.0.1:{}{}",
            self.transport.scheme(),
            self.transport_port(),
            path
        )
    }

    /// curl with `args`, trusting the server's certificate over TLS.
    pub fn curl(&self, args: &[&str]) -> (u16, String, Vec<u8>) {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            let mut with_ca = vec!["--cacert", tls.ca.to_str().unwrap()];
            with_ca.extend_from_slice(args);
            return curl(&with_ca);
        }
        curl(args)
    }

    /// A plain TCP connection to the plain listener.
    pub fn connect(&self) -> TcpStream {
        let c = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c
    }

    /// A connection to 127.0.0.1 from `source`, another loopback address
    /// (all of 127.0.0.0/8 is this host's): another client, as the server
    /// sees it.
    pub fn connect_from(&self, source: &str) -> TcpStream {
        connect_from_to(source, self.port)
    }

    /// A connection over the server's transport from `source`, another
    /// loopback address: another client, as the server sees it.
    pub fn open_from(&self, source: &str) -> Conn {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            let tcp = connect_from_to(source, tls.port);
            return Conn::Tls(Box::new(tls::over(tcp, tls.client.clone())));
        }
        Conn::Plain(self.connect_from(source))
    }

    /// `open_from` an IPv6 `source`, to the server's `[::]` listener of
    /// its transport.
    pub fn open_from_v6(&self, source: &str) -> Conn {
        let tls = self.transport != Transport::Plain;
        let find = || {
            self.log_text().lines().find_map(|l| {
                let rest = l.split("listening on [::]:").nth(1)?;
                let port = match rest.strip_suffix(" (TLS)") {
                    Some(p) if tls => p,
                    None if !tls => rest,
                    _ => return None,
                };
                port.trim().parse::<u16>().ok()
            })
        };
        assert!(
            wait_until(start_deadline(), || find().is_some()),
            "no [::] listener: {}",
            self.log_text()
        );
        let tcp = connect_from_to(source, find().unwrap());
        #[cfg(feature = "tls")]
        if let Some(t) = &self.tls {
            return Conn::Tls(Box::new(tls::over(tcp, t.client.clone())));
        }
        Conn::Plain(tcp)
    }

    /// A connection over the server's transport (its handshake done on
    /// first use).
    pub fn open(&self) -> Conn {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return Conn::Tls(Box::new(tls::connect(tls.port, tls.client.clone())));
        }
        Conn::Plain(self.connect())
    }

    /// Sends raw bytes over the transport, reads until the server closes
    /// (or 10 s pass).
    pub fn raw(&self, request: &[u8]) -> String {
        let mut c = self.open();
        c.write_all(request).unwrap();
        c.shutdown_write();
        read_to_close(&mut c)
    }

    /// One request on a fresh connection; the parsed response.
    pub fn get(&self, path: &str, headers: &[&str]) -> Response {
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        let mut c = self.open();
        c.write_all(req.as_bytes()).unwrap();
        read_response(&mut c, false).expect("a response")
    }

    /// Checks the server still answers a normal request.
    pub fn assert_healthy(&self) {
        let r = self.get("/", &[]);
        assert_eq!(
            r.status,
            200,
            "server no longer serves /; log:\n{}",
            self.log_text()
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn read_to_close(c: &mut impl Read) -> String {
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One `read`, made again when a signal interrupted it. The harness's
/// sockets have a read timeout (SO_RCVTIMEO), and the kernel never restarts
/// such a read after a signal, whatever its handler's flags. A test process
/// gets signals routinely: the SIGCHLD of a child (gzip, curl) that ends
/// while the thread that started it still blocks signals (glibc's
/// posix_spawn blocks them until the child has exec'd and the thread runs
/// again) is queued for the whole process, and wakes another thread.
pub fn read_some(c: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match c.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Reads one response from a persistent connection (Content-Length framed,
/// or to close). `head_only`: a HEAD answer has no body whatever its length.
pub fn read_response(c: &mut impl Read, head_only: bool) -> Option<Response> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match read_some(c, &mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let status_line = lines.next()?;
    let status = status_line.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            l.split_once(':')
                .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    let mut r = Response {
        status,
        headers,
        body: Vec::new(),
    };
    let no_body = head_only || status == 304 || status == 204;
    if !no_body {
        if r.header("transfer-encoding")
            .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
        {
            r.body = read_chunked(c)?;
            return Some(r);
        }
        match r
            .header("content-length")
            .map(|v| v.parse::<usize>().unwrap())
        {
            Some(n) => {
                let mut body = vec![0; n];
                c.read_exact(&mut body).ok()?;
                r.body = body;
            }
            None => {
                c.read_to_end(&mut r.body).ok()?;
            }
        }
    }
    Some(r)
}

fn read_line(c: &mut impl Read) -> Option<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match read_some(c, &mut byte) {
            Ok(1) => line.push(byte[0]),
            _ => return None,
        }
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).ok()
}

/// Decodes a chunked body strictly (sizes, CRLFs, the final empty line).
fn read_chunked(c: &mut impl Read) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let size = usize::from_str_radix(read_line(c)?.split(';').next()?, 16).ok()?;
        if size == 0 {
            while !read_line(c)?.is_empty() {}
            return Some(body);
        }
        let start = body.len();
        body.resize(start + size, 0);
        c.read_exact(&mut body[start..]).ok()?;
        if !read_line(c)?.is_empty() {
            return None;
        }
    }
}

/// A plain TCP connection to 127.0.0.1:`port` from `source`, another
/// loopback address (all of 127.0.0.0/8 is this host's), or to [::1]:`port`
/// from an IPv6 `source` on `lo` (`add_ipv6_to_lo`).
pub fn connect_from_to(source: &str, port: u16) -> TcpStream {
    use nix::sys::socket::{
        AddressFamily, SockFlag, SockType, SockaddrIn, SockaddrIn6, bind, connect, socket,
    };
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    use std::os::fd::AsRawFd;
    let from: IpAddr = source.parse().unwrap();
    let family = match from {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).unwrap();
    match from {
        IpAddr::V4(from) => {
            bind(
                fd.as_raw_fd(),
                &SockaddrIn::from(SocketAddrV4::new(from, 0)),
            )
            .unwrap();
            let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
            connect(fd.as_raw_fd(), &SockaddrIn::from(to)).unwrap();
        }
        IpAddr::V6(from) => {
            let at = SockaddrIn6::from(SocketAddrV6::new(from, 0, 0, 0));
            bind(fd.as_raw_fd(), &at).unwrap();
            let to = SocketAddrV6::new(Ipv6Addr::LOCALHOST, port, 0, 0);
            connect(fd.as_raw_fd(), &SockaddrIn6::from(to)).unwrap();
        }
    }
    let c = TcpStream::from(fd);
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

/// Adds `addrs` (with their prefix length, `fd00:18:5::2/64`) to `lo`,
/// so that a test's clients can come from them; `false` when not root.
/// They stay: another test running beside this one may use them too.
pub fn add_ipv6_to_lo(addrs: &[&str]) -> bool {
    if !is_root() {
        return false;
    }
    for a in addrs {
        let out = Command::new("ip")
            .args(["-6", "addr", "add", a, "dev", "lo", "nodad"])
            .output()
            .expect("ip runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || err.contains("File exists") || err.contains("already assigned"),
            "ip -6 addr add {a} dev lo: {err}"
        );
    }
    true
}

/// A port nothing listens on now (bound, read, released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Sends a body byte a second on `c` (each well within the head timeout)
/// until the server answers, at most `seconds` bytes: the first 12 bytes
/// of the answer (its status line), if one came.
pub fn trickle_until_answered(c: &mut TcpStream, seconds: usize) -> Option<[u8; 12]> {
    c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut first = [0u8; 12];
    for _ in 0..seconds {
        let _ = c.write_all(b"x");
        if c.read_exact(&mut first).is_ok() {
            return Some(first);
        }
    }
    None
}

/// Polls `cond` until it holds or `within` passes.
pub fn wait_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs curl; returns (status code, headers text, body).
pub fn curl(args: &[&str]) -> (u16, String, Vec<u8>) {
    let dir = TempDir::new("curl");
    let headers = dir.path().join("h");
    let body = dir.path().join("b");
    let out = Command::new("curl")
        .args(["-s", "-S", "--max-time", "20", "-o"])
        .arg(&body)
        .arg("-D")
        .arg(&headers)
        .args(["-w", "%{http_code}"])
        .args(args)
        .output()
        .expect("curl is installed");
    let code = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    (
        code,
        std::fs::read_to_string(&headers).unwrap_or_default(),
        std::fs::read(&body).unwrap_or_default(),
    )
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc_geteuid() == 0 }
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// Children of a process (its workers).
pub fn children(pid: i32) -> Vec<i32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// A field of /proc/PID/status, e.g. "Uid".
pub fn proc_status(pid: i32, field: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|r| r.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    })
}

/// Resident memory of a process's data, in KiB: the Rss of its mappings
/// that are not executable. Code is left out because under qemu-user the
/// process is the emulator, whose translated code grows in huge pages as
/// new paths run; the server's own text is fixed in size anyway.
pub fn data_rss_kib(pid: i32) -> u64 {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut executable = false;
    let mut total = 0;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        match (fields.next(), fields.next()) {
            (Some("Rss:"), Some(kb)) if !executable => total += kb.parse::<u64>().unwrap_or(0),
            // A mapping's line: "start-end perms offset dev inode [path]".
            (Some(range), Some(perms)) if range.contains('-') && !range.ends_with(':') => {
                executable = perms.contains('x')
            }
            _ => {}
        }
    }
    total
}

/// How much the server's data grows (KiB, `data_rss_kib`) while it takes a
/// POST of `size` bytes to `path`, sent a MiB at a time and sampled after
/// each; `answer` is the body it must give.
pub fn rss_growth_during_upload(s: &Server, path: &str, size: usize, answer: &str) -> u64 {
    let rss = || data_rss_kib(s.pid());
    let before = rss();
    let mut c = s.connect();
    let head = format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n");
    c.write_all(head.as_bytes()).unwrap();
    let block = vec![b'u'; 1 << 20];
    let mut peak = before;
    for _ in 0..size / block.len() {
        c.write_all(&block).unwrap();
        peak = peak.max(rss());
    }
    let r = read_response(&mut c, false).expect("an answer");
    assert_eq!((r.status, r.text().as_str()), (200, answer));
    peak - before
}

/// Open file descriptors of a process.
pub fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}
