//! CGI/1.1 (RFC 3875): scripts under the configured prefixes run as child
//! processes in their own process group. Their pipes are registered with
//! async-io, so a slow or hung script never holds up other clients; the
//! output is parsed (`cgi_output`) and streamed to the client as it comes.

use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use futures_lite::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, future, io::BufReader};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::cgi::output::{self, ScriptHead};
use crate::cgi::spawn::{self, Spawned};
use crate::files::root::Root;
use crate::http::path::CleanPath;
use crate::http::request::{Field, Request, Version};
use crate::http::response::{self, Response, StatusHeader};
use crate::http::status::Status;
use crate::limits::HEAD_BUF;
use crate::net::sock::{End, Sock};
use crate::server::worker::Worker;

/// The PATH scripts get: fixed, so the client cannot choose what runs.
const SCRIPT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Debug)]
pub struct Settings {
    pub prefixes: Vec<String>,
    /// Extension (with its dot) to interpreter.
    pub interpreters: Vec<(String, PathBuf)>,
    pub timeout: Duration,
    /// Scripts running at once, for the whole server.
    pub max: usize,
    /// Largest request body a script is given (413 beyond).
    pub max_body: u64,
    prefixes_set: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            prefixes: vec!["/cgi-bin/".into()],
            interpreters: vec![(".sh".into(), PathBuf::from("/bin/sh"))],
            timeout: Duration::from_secs(30),
            max: 8,
            max_body: 1 << 20,
            prefixes_set: false,
        }
    }
}

impl Settings {
    /// Takes a setting this module owns; `Ok(false)` if the key is not one of them.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "cgi-prefix" => {
                if !self.prefixes_set {
                    self.prefixes.clear();
                    self.prefixes_set = true;
                }
                if value != "off" {
                    if !value.starts_with('/') || crate::http::path::has_dot_dot(value) {
                        return Err(format!(
                            "`{value}` must be a path prefix like /cgi-bin/, or `off`"
                        ));
                    }
                    self.prefixes.push(value.to_string());
                }
            }
            "cgi-interpreter" => {
                let mut parts = value.split_whitespace();
                let (Some(ext), Some(prog), None) = (parts.next(), parts.next(), parts.next())
                else {
                    return Err(
                        "expected .EXT /path/to/interpreter, e.g. `.lua /usr/bin/lua`".into(),
                    );
                };
                if !ext.starts_with('.') || !prog.starts_with('/') {
                    return Err(
                        "expected .EXT /path/to/interpreter, e.g. `.lua /usr/bin/lua`".into(),
                    );
                }
                self.interpreters.retain(|(e, _)| e != ext);
                self.interpreters
                    .push((ext.to_string(), PathBuf::from(prog)));
            }
            "cgi-timeout" => self.timeout = Duration::from_secs(number(value, 1, 3600)?),
            "cgi-max" => self.max = number(value, 1, 1024)? as usize,
            "cgi-max-body" => self.max_body = number(value, 0, 1 << 30)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn interpreter(&self, name: &str) -> Option<&Path> {
        self.interpreters
            .iter()
            .find(|(ext, _)| name.ends_with(ext.as_str()))
            .map(|(_, p)| p.as_path())
    }
}

fn number(v: &str, min: u64, max: u64) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a number from {min} to {max}, got `{v}`")),
    }
}

/// A script found for a request.
#[derive(Debug)]
pub struct Script {
    /// Relative to the root, e.g. `cgi-bin/status`.
    pub rel: String,
    /// What follows the script in the path, e.g. `/extra`.
    pub path_info: String,
    interpreter: Option<PathBuf>,
}

/// If `path` is under a CGI prefix: the script it names, or why not (404/403).
pub fn find(
    settings: &Settings,
    root: &Root,
    path: &CleanPath,
    shown: &str,
) -> Option<Result<Script, Status>> {
    settings
        .prefixes
        .iter()
        .find(|p| crate::policy::access::under(shown, p))?;
    let trailing_slash = path.trailing_slash;
    let segments: Vec<&str> = path.as_str().split('/').collect();
    for n in 1..=segments.len() {
        let rel = segments[..n].join("/");
        match root.file_meta(&rel) {
            Ok(meta) => {
                let rest = &segments[n..];
                let mut path_info = if rest.is_empty() {
                    String::new()
                } else {
                    format!("/{}", rest.join("/"))
                };
                if trailing_slash && !rest.is_empty() {
                    path_info.push('/');
                }
                let interpreter = settings.interpreter(&rel).map(Path::to_path_buf);
                let executable = meta.permissions().mode() & 0o111 != 0;
                if interpreter.is_none() && !executable {
                    return Some(Err(Status::Forbidden));
                }
                return Some(Ok(Script {
                    rel,
                    path_info,
                    interpreter,
                }));
            }
            Err(Status::NotFound) => continue,
            Err(status) => return Some(Err(status)),
        }
    }
    Some(Err(Status::NotFound))
}

/// Everything needed to run a script once the request head is gone.
#[derive(Debug)]
pub struct Job {
    pub script: Script,
    env: Vec<(String, String)>,
    program: PathBuf,
    dir: PathBuf,
    pub head_only: bool,
}

/// Who asked, as the CGI meta-variables describe it.
pub struct Caller<'a> {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub remote_user: Option<&'a str>,
}

impl Job {
    /// Builds the meta-variables (RFC 3875 section 4.1).
    pub fn new(root: &Path, script: Script, req: &Request<'_>, caller: &Caller<'_>) -> Job {
        let content_length = match req.body {
            crate::http::request::Body::Length(n) => Some(n),
            _ => None,
        };
        let (_, query) = crate::http::path::split_query(req.target);
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let host = req.get(Field::Host).map(text).unwrap_or_default();
        let server_name = host
            .rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(host.as_str(), |(h, _)| h)
            .to_string();
        let server_name = if server_name.is_empty() {
            caller.local.ip().to_string()
        } else {
            server_name
        };
        let script_name = format!("/{}", script.rel);
        let file = root.join(&script.rel);
        let mut env = vec![
            ("GATEWAY_INTERFACE".into(), "CGI/1.1".into()),
            (
                "SERVER_SOFTWARE".into(),
                format!("marmoset/{}", env!("CARGO_PKG_VERSION")),
            ),
            ("SERVER_NAME".into(), server_name),
            ("SERVER_PORT".into(), caller.local.port().to_string()),
            (
                "SERVER_PROTOCOL".into(),
                if req.version == Version::Http10 {
                    "HTTP/1.0"
                } else {
                    "HTTP/1.1"
                }
                .into(),
            ),
            ("REQUEST_METHOD".into(), req.method_name().into()),
            ("REQUEST_URI".into(), text(req.target)),
            ("SCRIPT_NAME".into(), script_name),
            (
                "SCRIPT_FILENAME".into(),
                file.to_string_lossy().into_owned(),
            ),
            ("DOCUMENT_ROOT".into(), root.to_string_lossy().into_owned()),
            ("PATH_INFO".into(), script.path_info.clone()),
            ("QUERY_STRING".into(), query.map(text).unwrap_or_default()),
            ("REMOTE_ADDR".into(), canonical_ip(caller.peer)),
            ("REMOTE_PORT".into(), caller.peer.port().to_string()),
            ("PATH".into(), SCRIPT_PATH.into()),
        ];
        if !script.path_info.is_empty() {
            env.push((
                "PATH_TRANSLATED".into(),
                root.join(script.path_info.trim_start_matches('/'))
                    .to_string_lossy()
                    .into_owned(),
            ));
        }
        if let Some(n) = content_length {
            env.push(("CONTENT_LENGTH".into(), n.to_string()));
        }
        if let Some(t) = req.get(Field::ContentType) {
            env.push(("CONTENT_TYPE".into(), text(t)));
        }
        if let Some(user) = caller.remote_user {
            env.push(("AUTH_TYPE".into(), "Basic".into()));
            env.push(("REMOTE_USER".into(), user.into()));
        }
        for h in req.headers {
            let name = h.name.to_ascii_uppercase().replace('-', "_");
            // Credentials stay with the server; `Proxy:` would become HTTP_PROXY (httpoxy).
            let skip = matches!(
                name.as_str(),
                "AUTHORIZATION"
                    | "PROXY_AUTHORIZATION"
                    | "PROXY"
                    | "CONTENT_TYPE"
                    | "CONTENT_LENGTH"
            );
            if !skip && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                env.push((format!("HTTP_{name}"), text(h.value)));
            }
        }
        let (program, dir) = (
            file.clone(),
            file.parent()
                .map_or_else(|| root.to_path_buf(), Path::to_path_buf),
        );
        Job {
            env,
            program,
            dir,
            head_only: req.method == crate::http::request::Method::Head,
            script,
        }
    }

    /// A chunked body's length, known once it is decoded.
    pub fn set_content_length(&mut self, n: u64) {
        self.env.retain(|(k, _)| k != "CONTENT_LENGTH");
        self.env.push(("CONTENT_LENGTH".into(), n.to_string()));
    }

    /// Starts the script (through its interpreter, if it has one).
    fn spawn(&self) -> std::io::Result<Spawned> {
        match &self.script.interpreter {
            Some(interp) => spawn::spawn(interp, &[self.program.as_os_str()], &self.env, &self.dir),
            None => spawn::spawn(&self.program, &[], &self.env, &self.dir),
        }
    }
}

/// An IPv4 client on an IPv6 socket is shown as plain IPv4.
fn canonical_ip(peer: SocketAddr) -> String {
    match peer.ip() {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or_else(|| v6.to_string(), |v4| v4.to_string()),
        v4 => v4.to_string(),
    }
}

/// The request body for the script: bytes already read and what is still
/// on the socket.
pub struct Body {
    pub buffered: Vec<u8>,
    pub on_socket: u64,
}

/// How a CGI exchange ended, for the connection and the access log.
pub struct Outcome {
    pub status: u16,
    pub bytes: u64,
    /// The connection can carry another request.
    pub reusable: bool,
    /// The script asked for a local redirect: serve this path instead.
    pub local_redirect: Option<String>,
}

/// Runs the script and answers the client.
pub async fn run(
    w: &'static Worker,
    sock: Sock<'_>,
    job: Job,
    body: Body,
    version: Version,
    keep_alive: bool,
) -> Result<Outcome, End> {
    let name = job.script.rel.clone();
    let child = match job.spawn() {
        Ok(c) => c,
        Err(e) => {
            log::error!("cgi {name}: cannot start: {e}");
            return answer(w, sock, Status::InternalServerError, keep_alive).await;
        }
    };
    let deadline = Instant::now() + w.config.cgi.timeout;
    let Spawned {
        pid,
        stdin,
        stdout,
        stderr,
    } = child;
    let mut sent_head = false;
    let exchange = async {
        let feed = feed_stdin(stdin, body, sock, deadline);
        let log = log_stderr(stderr, &name);
        let respond = respond(
            w,
            sock,
            stdout,
            &job,
            &name,
            version,
            keep_alive,
            &mut sent_head,
        );
        let ((fed, ()), answered) = future::zip(future::zip(feed, log), respond).await;
        (fed, answered)
    };
    let timed = future::or(async { Some(exchange.await) }, async {
        Timer::at(deadline).await;
        None
    })
    .await;
    match timed {
        Some((fed, Ok(mut outcome))) => {
            outcome.reusable &= fed;
            reap(w, pid).await;
            Ok(outcome)
        }
        Some((_, Err(e))) => {
            reap(w, pid).await;
            Err(e)
        }
        None => {
            log::warn!(
                "cgi {name}: no answer within {}s; killed",
                w.config.cgi.timeout.as_secs()
            );
            reap(w, pid).await;
            if sent_head {
                Err(End::Timeout)
            } else {
                answer(w, sock, Status::GatewayTimeout, false).await
            }
        }
    }
}

/// Kills the script's process group (whatever is left of it) and waits for
/// the script itself, so no zombie stays behind.
async fn reap(w: &'static Worker, pid: Pid) {
    let _ = killpg(pid, Signal::SIGKILL);
    loop {
        let exited = w.child_exited.notified();
        if spawn::exited(pid) {
            return;
        }
        // SIGCHLD wakes us; the timer is a backstop for a lost wake-up.
        let backstop = async {
            Timer::after(Duration::from_millis(200)).await;
        };
        future::or(exited, backstop).await;
    }
}

/// Writes the request body to the script; false if the body could not all
/// be taken off the socket (the connection must then close).
async fn feed_stdin(stdin: File, body: Body, sock: Sock<'_>, deadline: Instant) -> bool {
    let mut pipe = Async::new(stdin).ok();
    if let Some(p) = pipe.as_mut() {
        if p.write_all(&body.buffered).await.is_err() {
            pipe = None;
        }
    }
    let mut left = body.on_socket;
    let mut chunk = vec![0u8; if left > 0 { 16 * 1024 } else { 0 }];
    while left > 0 {
        let want = (left as usize).min(chunk.len());
        let n = match sock.read_some(&mut chunk[..want], deadline).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        left -= n as u64;
        // A script that stops reading still gets the rest of the body drained.
        if let Some(p) = pipe.as_mut() {
            if p.write_all(&chunk[..n]).await.is_err() {
                pipe = None;
            }
        }
    }
    // Dropping the pipe closes stdin: the script sees end of input.
    true
}

/// Logs what the script writes to stderr, line by line, with its name.
async fn log_stderr(stderr: File, name: &str) {
    let Ok(pipe) = Async::new(stderr) else {
        return;
    };
    let mut lines = BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut lines).take(1024).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                log::warn!("cgi {name}: {}", text.trim_end());
            }
        }
    }
}

/// Reads the script's output: parses its head, then streams the body.
#[allow(clippy::too_many_arguments)]
async fn respond(
    w: &'static Worker,
    sock: Sock<'_>,
    stdout: File,
    job: &Job,
    name: &str,
    version: Version,
    keep_alive: bool,
    sent_head: &mut bool,
) -> Result<Outcome, End> {
    let Ok(mut pipe) = Async::new(stdout) else {
        return answer(w, sock, Status::BadGateway, keep_alive).await;
    };
    let mut out = w.pool.out();
    let result = async {
        let mut got = 0;
        out.resize(HEAD_BUF, 0);
        let (head_len, body_start) = loop {
            if let Some(end) = output::head_end(&out[..got]) {
                break end;
            }
            if got == HEAD_BUF {
                log::warn!("cgi {name}: header block larger than {HEAD_BUF} bytes");
                return answer(w, sock, Status::BadGateway, keep_alive).await;
            }
            match pipe.read(&mut out[got..]).await {
                Ok(0) | Err(_) => {
                    log::warn!(
                        "cgi {name}: {}",
                        if got == 0 {
                            "exited without output"
                        } else {
                            "output ended inside its headers"
                        }
                    );
                    return answer(w, sock, Status::BadGateway, keep_alive).await;
                }
                Ok(n) => got += n,
            }
        };
        let head = match output::parse(&out[..head_len]) {
            Ok(h) => h,
            Err(output::Invalid(why)) => {
                log::warn!("cgi {name}: invalid headers: {why}");
                return answer(w, sock, Status::BadGateway, keep_alive).await;
            }
        };
        if let Some(path) = head.local_redirect {
            return Ok(Outcome {
                status: 0,
                bytes: 0,
                reusable: keep_alive,
                local_redirect: Some(path),
            });
        }
        let first_body = out[body_start..got].to_vec();
        out.clear();
        stream_body(
            w,
            sock,
            &mut pipe,
            head,
            first_body,
            job.head_only,
            version,
            keep_alive,
            &mut out,
            sent_head,
        )
        .await
    }
    .await;
    w.pool.give_out(out);
    result
}

/// Framing for a script's body: its Content-Length, or chunked on HTTP/1.1,
/// or until the close on HTTP/1.0.
#[derive(Clone, Copy, PartialEq)]
enum Framing {
    Length(u64),
    Chunked,
    Close,
}

#[allow(clippy::too_many_arguments)]
async fn stream_body(
    w: &'static Worker,
    sock: Sock<'_>,
    pipe: &mut Async<File>,
    head: ScriptHead,
    first: Vec<u8>,
    head_only: bool,
    version: Version,
    keep_alive: bool,
    out: &mut Vec<u8>,
    sent_head: &mut bool,
) -> Result<Outcome, End> {
    let has_body = head.status.has_body();
    let framing = match (head.content_length, version) {
        (Some(n), _) => Framing::Length(n),
        _ if !has_body => Framing::Length(0),
        (None, Version::Http11) => Framing::Chunked,
        (None, Version::Http10) => Framing::Close,
    };
    let keep_alive = keep_alive && framing != Framing::Close;
    let mut r = Response::new(head.status, response::Body::Script);
    r.status_header = head.location.map(StatusHeader::Location);
    let content_type = head.content_type;
    w.write_head(out, &r, version, keep_alive, &|out| {
        if let Some(t) = &content_type {
            response::header(out, "Content-Type", t.as_bytes());
        }
        for (n, v) in &head.other {
            response::header(out, n, v.as_bytes());
        }
        match framing {
            Framing::Length(n) if has_body => {
                out.extend_from_slice(b"\r\nContent-Length: ");
                response::push_num(out, n);
            }
            Framing::Chunked => response::header(out, "Transfer-Encoding", b"chunked"),
            _ => {}
        }
    });
    *sent_head = true;
    let status = head.status.code();
    if head_only || !has_body {
        sock.send_all(out).await?;
        // The script may still be writing a body nobody will read: it is killed when reaped.
        return Ok(Outcome {
            status,
            bytes: 0,
            reusable: keep_alive,
            local_redirect: None,
        });
    }
    let mut sent: u64 = 0;
    push_body(out, &first, framing, &mut sent);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !out.is_empty() {
            sock.send_all(out).await?;
            out.clear();
        }
        if matches!(framing, Framing::Length(n) if sent >= n) {
            break;
        }
        let n = pipe.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        push_body(out, &buf[..n], framing, &mut sent);
    }
    match framing {
        Framing::Chunked => sock.send_all(b"0\r\n\r\n").await?,
        Framing::Length(n) if sent < n => return Err(End::Io),
        _ => {}
    }
    Ok(Outcome {
        status,
        bytes: sent,
        reusable: keep_alive,
        local_redirect: None,
    })
}

/// Appends script output, framed; a script's Content-Length is never exceeded.
fn push_body(out: &mut Vec<u8>, data: &[u8], framing: Framing, sent: &mut u64) {
    let data = match framing {
        Framing::Length(n) => &data[..data.len().min(n.saturating_sub(*sent) as usize)],
        _ => data,
    };
    if data.is_empty() {
        return;
    }
    if framing == Framing::Chunked {
        out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(data);
    }
    *sent += data.len() as u64;
}

/// A plain status answer from the CGI path.
async fn answer(
    w: &'static Worker,
    sock: Sock<'_>,
    status: Status,
    keep_alive: bool,
) -> Result<Outcome, End> {
    let mut r = Response::status(status);
    if status == Status::ServiceUnavailable {
        r.add_header(response::RETRY_SOON);
    }
    let mut out = w.pool.out();
    w.write_head(&mut out, &r, Version::Http11, keep_alive, &|_| {});
    response::write_status_page(&mut out, status);
    let sent = sock.send_all(&out).await;
    let bytes = out.len() as u64;
    w.pool.give_out(out);
    sent.map(|()| Outcome {
        status: status.code(),
        bytes,
        reusable: keep_alive,
        local_redirect: None,
    })
}
