//! The stand-in ubusd (`tests/ubus/standin.py`) run for a test: started on a
//! unix socket in the test's directory, its event lines collected, killed
//! and started again on the same socket as procd restarts ubusd, killed on
//! drop. Plus what the ubus endpoint's tests send and read: JSON-RPC posts
//! and a server-sent event stream.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::json::Json;
use super::{
    Conn, Response, Server, TempDir, read_response, read_some, start_deadline, wait_until,
};

/// rpcd's anonymous session; the stand-in lets it call session.access,
/// session.login and system.board.
pub const ANONYMOUS: &str = "00000000000000000000000000000000";
/// A session the stand-in allows everything.
pub const ADMIN: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
/// A session allowed system.*, test.echo, test.types and test.events.emit
/// only (no `:subscribe`).
pub const READER: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

pub struct UbusStandin {
    /// The socket ubusd listens on.
    pub socket: PathBuf,
    child: Option<Child>,
    generation: u32,
    /// Seconds a wrong password takes to be refused.
    login_delay: f64,
    lines: Arc<Mutex<Vec<String>>>,
}

impl UbusStandin {
    /// A stand-in on `dir/ubus.sock`, once it listens.
    pub fn start(dir: &TempDir) -> UbusStandin {
        UbusStandin::start_slow_logins(dir, 0.0)
    }

    /// A stand-in that refuses a wrong password after `seconds`, as rpcd
    /// hashing it on a slow device.
    pub fn start_slow_logins(dir: &TempDir, seconds: f64) -> UbusStandin {
        let mut s = UbusStandin {
            socket: dir.path().join("ubus.sock"),
            child: None,
            generation: 0,
            login_delay: seconds,
            lines: Arc::new(Mutex::new(Vec::new())),
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        self.generation += 1;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ubus/standin.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(&self.socket)
            .args(["--generation", &self.generation.to_string()])
            .args(["--login-delay", &self.login_delay.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the stand-in ubusd");
        let out = child.stdout.take().unwrap();
        let lines = self.lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        self.child = Some(child);
        let ready = format!("generation={} ", self.generation);
        let up = wait_until(start_deadline(), || {
            self.lines()
                .iter()
                .any(|l| l.starts_with("ready ") && l.contains(&ready))
        });
        assert!(up, "the stand-in ubusd did not start:\n{}", self.log());
    }

    /// Kills it (SIGKILL, as a crash), and waits until it is gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills it if it runs, and starts it again on the same socket with new
    /// object ids (the next generation).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Every line it printed, all generations.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    pub fn log(&self) -> String {
        self.lines().join("\n")
    }

    /// How many lines start with `prefix`.
    pub fn count(&self, prefix: &str) -> usize {
        self.lines()
            .iter()
            .filter(|l| l.starts_with(prefix))
            .count()
    }

    /// Waits until a line starts with `prefix`.
    pub fn wait_line(&self, prefix: &str, within: Duration) -> bool {
        wait_until(within, || self.count(prefix) > 0)
    }

    /// Waits until `n` lines start with `prefix`.
    pub fn wait_lines(&self, prefix: &str, n: usize, within: Duration) -> bool {
        wait_until(within, || self.count(prefix) >= n)
    }

    /// Waits until a line satisfies `cond`.
    pub fn wait_for(&self, within: Duration, cond: impl Fn(&str) -> bool) -> bool {
        wait_until(within, || self.lines().iter().any(|l| cond(l)))
    }

    /// Waits until every line the stand-in printed for what `s` sent it so
    /// far has been read: a `list` of a path of its own, whose lookup line
    /// comes after them. Checks that a line is absent come after this.
    pub fn settle(&self, s: &Server) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let mark = format!(
            "settle-{}",
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        rpc(
            s,
            &format!(r#"{{"jsonrpc":"2.0","id":0,"method":"list","params":["{mark}"]}}"#),
        );
        let seen = self.wait_line(&format!("lookup {mark} "), start_deadline());
        assert!(
            seen,
            "the stand-in never saw the list of {mark}:\n{}",
            self.log()
        );
    }

    /// The id of `object` in the current generation, from its startup line.
    pub fn object_id(&self, object: &str) -> String {
        let prefix = format!("object {object} id=");
        let lines = self.lines();
        let start = lines
            .iter()
            .rposition(|l| l.starts_with("ready "))
            .unwrap_or(0);
        lines[..start]
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix(&prefix))
            .expect("the object's line")
            .to_string()
    }
}

impl Drop for UbusStandin {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A config serving the endpoint at /ubus on `bus`, with more lines.
pub fn ubus_config(dir: &TempDir, bus: &UbusStandin, more: &str) -> PathBuf {
    dir.write(
        "m.conf",
        format!("ubus /ubus {}\n{more}", bus.socket.display()),
    )
}

/// A server over `t` with the endpoint at /ubus on `bus`.
pub fn ubus_server(t: super::Transport, dir: &TempDir, bus: &UbusStandin, more: &str) -> Server {
    let conf = ubus_config(dir, bus, more);
    let root = TempDir::new("ubusroot");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    Server::start_with_config_over(t, &conf, root, &[])
}

/// A POST of `body` to `path` with more header lines, on `c`.
pub fn send_post(c: &mut Conn, path: &str, body: &[u8], headers: &[&str]) {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    c.write_all(&bytes).unwrap();
}

/// One POST on a fresh connection; the response.
pub fn post(s: &Server, path: &str, body: &str, headers: &[&str]) -> Response {
    let mut c = s.open();
    send_post(&mut c, path, body.as_bytes(), headers);
    read_response(&mut c, false).expect("an answer")
}

/// A JSON-RPC request to /ubus: 200, application/json, its JSON.
pub fn rpc(s: &Server, body: &str) -> Json {
    json_of(&post(s, "/ubus", body, &[]), s)
}

/// The JSON of a 200 application/json answer.
pub fn json_of(r: &Response, s: &Server) -> Json {
    assert_eq!(r.status, 200, "{}\nlog:\n{}", r.text(), s.log_text());
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.starts_with("application/json")),
        "{:?}",
        r.headers
    );
    Json::parse(&r.text()).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.text()))
}

/// `{"jsonrpc":"2.0","id":ID,"method":"call","params":[SID,OBJECT,METHOD,ARGS]}`.
pub fn call_body(id: u32, sid: &str, object: &str, method: &str, args: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"call","params":["{sid}","{object}","{method}",{args}]}}"#
    )
}

/// A call through /ubus; its JSON answer.
pub fn call(s: &Server, sid: &str, object: &str, method: &str, args: &str) -> Json {
    rpc(s, &call_body(1, sid, object, method, args))
}

/// The JSON-RPC error code of an answer, if it is an error.
pub fn error_code(j: &Json) -> Option<i64> {
    j.get("error").get("code").i64()
}

/// `{"jsonrpc":"2.0","id":ID,"error":{"code":C,"message":M}}`, uhttpd's
/// error answer, as text.
pub fn error_text(id: &str, code: i64, message: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":"{message}"}}}}"#)
}

/// A server-sent event stream: reads its head, then the body (chunked or
/// not) as it comes.
pub struct EventStream {
    conn: Conn,
    pub head: Response,
    chunked: bool,
    raw: Vec<u8>,
    pub text: String,
    ended: bool,
}

impl EventStream {
    /// GET `path` with more header lines; the stream once its head came.
    pub fn open(s: &Server, path: &str, headers: &[&str]) -> EventStream {
        let mut c = s.open();
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n");
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        c.write_all(req.as_bytes()).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match read_some(&mut c, &mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => panic!("no answer head: {}", String::from_utf8_lossy(&head)),
            }
        }
        let mut parsed = read_response(&mut &head[..], true).expect("a head");
        parsed.body.clear();
        let chunked = parsed
            .header("transfer-encoding")
            .is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
        EventStream {
            conn: c,
            head: parsed,
            chunked,
            raw: Vec::new(),
            text: String::new(),
            ended: false,
        }
    }

    /// Whether the server ended the stream (closed the connection, or sent
    /// the last chunk), as far as read.
    pub fn closed(&self) -> bool {
        self.ended
    }

    /// Reads until the body holds `needle` or `within` passes.
    pub fn wait_for(&mut self, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let _ = self
            .conn
            .tcp()
            .set_read_timeout(Some(Duration::from_millis(200)));
        while !self.text.contains(needle) {
            if Instant::now() >= deadline {
                return false;
            }
            let mut buf = [0u8; 4096];
            match self.conn.read(&mut buf) {
                Ok(0) => {
                    self.ended = true;
                    return self.text.contains(needle);
                }
                Ok(n) => {
                    self.raw.extend_from_slice(&buf[..n]);
                    self.decode();
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => {
                    self.ended = true;
                    return self.text.contains(needle);
                }
            }
        }
        true
    }

    /// Moves whole chunks (or everything, unchunked) from raw to text.
    fn decode(&mut self) {
        if !self.chunked {
            self.text.push_str(&String::from_utf8_lossy(&self.raw));
            self.raw.clear();
            return;
        }
        loop {
            let Some(eol) = self.raw.windows(2).position(|w| w == b"\r\n") else {
                return;
            };
            let line = String::from_utf8_lossy(&self.raw[..eol]).into_owned();
            let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                .unwrap_or_else(|_| panic!("bad chunk size line {line:?}"));
            if self.raw.len() < eol + 2 + size + 2 {
                return;
            }
            let data = self.raw[eol + 2..eol + 2 + size].to_vec();
            self.text.push_str(&String::from_utf8_lossy(&data));
            self.raw.drain(..eol + 2 + size + 2);
            if size == 0 {
                self.ended = true;
                return;
            }
        }
    }
}
