//! One script's exchange with its client: start it, feed it the request
//! body, parse its head, stream its body, and reap it. Its pipes are
//! registered with async-io, so a slow or hung script never holds up other
//! clients. What happens to the connection afterwards is the caller's.

use std::cell::Cell;
use std::fs::File;
use std::pin::pin;
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use futures_lite::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, future, io::BufReader};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::cgi::luci::Login;
use crate::cgi::output::{self, ScriptHead};
use crate::cgi::scgi::{self, Address, Unreached};
use crate::cgi::script::{Job, Target};
use crate::cgi::spawn::{self, Spawned};
use crate::http::clock::Clock;
use crate::http::header;
use crate::http::request::Version;
use crate::http::response::{self, HeadContext, Response, StatusHeader};
use crate::http::status::Status;
use crate::limits::{HEAD_BUF, PIPE_CHUNK, REAP_BACKSTOP, STDERR_LINE};
use crate::net::buffers::{self, Pool};
use crate::net::deadline::within;
use crate::net::notify::Notify;
use crate::net::pace::Pace;
use crate::net::sock::{End, Sock};

/// The request body for the script: bytes already read and what is still
/// on the socket.
#[derive(Default)]
pub struct ScriptInput {
    pub buffered: Vec<u8>,
    pub on_socket: u64,
}

/// Everything one exchange uses, in one place.
pub struct Exchange<'a> {
    pub sock: &'a Sock,
    pub pool: &'a Pool,
    pub clock: &'a Clock,
    /// Woken by SIGCHLD.
    pub child_exited: &'a Notify,
    /// The script's time once it has its whole body, and its time to
    /// take each piece of it.
    pub timeout: Duration,
    pub version: Version,
    /// The client's request allows keep-alive.
    pub keep_alive: bool,
    pub head_only: bool,
}

/// What the exchange did.
pub enum Answer {
    /// The script's answer went out.
    Sent {
        status: u16,
        bytes: u64,
        /// Its framing lets the connection carry another request.
        reusable: bool,
        /// What it said of a LuCI login.
        login: Login,
    },
    /// Nothing went out: the connection answers with this status.
    Failed(Status),
    /// The script asked for a local redirect (`Location: /path`).
    LocalRedirect(String),
}

/// How feeding the request body ended.
enum Fed {
    Whole,
    /// Fell below the least pace, or left.
    ClientStopped,
    /// The script took none of its input for `cgi-timeout`.
    ScriptStalled,
}

/// What ends an exchange before the script's answer does.
enum Stop {
    /// `cgi-timeout` after the body: 504.
    Timeout,
    /// `cgi-timeout` with the script taking none of its body: 504.
    Stalled,
    /// The client did not send its body: 408.
    Client,
}

struct Stalled;

/// How an exchange ended.
pub struct Outcome {
    pub answer: Answer,
    /// The whole request body was taken off the socket. If not, the next
    /// bytes are not a request and the connection must close.
    pub body_read: bool,
}

impl Exchange<'_> {
    /// Runs the script (or reaches its handler) and, unless it fails
    /// before its head, answers the client. What is still on the socket
    /// of the body comes at `pace`.
    pub async fn run(&self, job: &Job, mut body: ScriptInput, pace: &Pace) -> Result<Outcome, End> {
        let name = job.script.rel.as_str();
        let started = match job.target() {
            Target::Exec { program, arg, dir } => {
                spawn::spawn(program, arg.as_slice(), job.env(), dir).map_err(|e| {
                    log::error!("cgi {name}: cannot start: {e}");
                    Status::InternalServerError
                })
            }
            Target::Scgi(address) => self.reach(name, address, job, &mut body).await,
        };
        let child = match started {
            Ok(c) => c,
            Err(status) => {
                return Ok(Outcome {
                    answer: Answer::Failed(status),
                    body_read: body.on_socket == 0,
                });
            }
        };
        let Spawned {
            pid,
            stdin,
            stdout,
            stderr,
        } = child;
        let mut sent_head = false;
        // Set once the answer went out with the body still coming.
        let draining = Cell::new(false);
        // The body, then the script's own time: `cgi-timeout` runs from
        // the end of its input, so a slow upload is the pace's to judge.
        let fed = Cell::new(false);
        let stop = async {
            match self.feed_stdin(stdin, body, pace).await {
                Fed::Whole => {
                    fed.set(true);
                    if !draining.get() {
                        Timer::after(self.timeout).await;
                    }
                    Stop::Timeout
                }
                Fed::ClientStopped => Stop::Client,
                Fed::ScriptStalled => Stop::Stalled,
            }
        };
        let mut stop = pin!(stop);
        let exchange = async {
            let log = async {
                if let Some(stderr) = stderr {
                    log_stderr(stderr, name).await;
                }
            };
            let answer = self.read_answer(stdout, name, &mut sent_head);
            future::zip(log, answer).await.1
        };
        let timed = future::or(async { Ok(exchange.await) }, async {
            Err((&mut stop).await)
        })
        .await;
        // Answered before its body was all read: the script is done with
        // it, and the rest is drained so the connection can carry another
        // request.
        let timed = match timed {
            Ok(Ok(answer)) if !fed.get() => {
                self.reap(pid).await;
                draining.set(true);
                let _ = stop.await;
                return Ok(Outcome {
                    answer,
                    body_read: fed.get(),
                });
            }
            other => other,
        };
        self.reap(pid).await;
        let status = match timed {
            Ok(answer) => {
                return Ok(Outcome {
                    answer: answer?,
                    body_read: fed.get(),
                });
            }
            Err(Stop::Timeout) => {
                log::warn!(
                    "cgi {name}: no answer within {}s; killed",
                    self.timeout.as_secs()
                );
                Status::GatewayTimeout
            }
            Err(Stop::Stalled) => {
                log::warn!(
                    "cgi {name}: took none of its body for {}s; killed",
                    self.timeout.as_secs()
                );
                Status::GatewayTimeout
            }
            Err(Stop::Client) => {
                log::info!("cgi {name}: the client stopped sending its body; killed");
                Status::RequestTimeout
            }
        };
        if sent_head {
            return Err(End::Timeout);
        }
        Ok(Outcome {
            answer: Answer::Failed(status),
            body_read: false,
        })
    }

    /// Connects to an SCGI handler, whose socket then stands for a
    /// script's stdin and stdout; the request head goes before the body.
    async fn reach(
        &self,
        name: &str,
        address: &Address,
        job: &Job,
        body: &mut ScriptInput,
    ) -> Result<Spawned, Status> {
        let Some(mut head) = scgi::request_head(job.env()) else {
            log::error!("scgi {name}: a NUL in a meta-variable");
            return Err(Status::InternalServerError);
        };
        let until = self.sock.deadlines.after(self.timeout);
        let socket = match scgi::connect(address, self.sock.deadlines, until).await {
            Ok(fd) => fd,
            Err(Unreached::Refused(e)) => {
                log::error!("scgi {name}: cannot reach {address}: {e}");
                return Err(Status::BadGateway);
            }
            Err(Unreached::Timeout) => {
                log::error!(
                    "scgi {name}: {address} took no connection within {}s",
                    self.timeout.as_secs()
                );
                return Err(Status::GatewayTimeout);
            }
        };
        // Two descriptors of one socket: closing the input side when the
        // body is written does not end the connection.
        let input = socket.try_clone().map_err(|e| {
            log::error!("scgi {name}: {e}");
            Status::InternalServerError
        })?;
        head.append(&mut body.buffered);
        body.buffered = head;
        Ok(Spawned {
            pid: None,
            stdin: File::from(input),
            stdout: File::from(socket),
            stderr: None,
        })
    }

    /// Kills the script's process group (whatever is left of it) and waits
    /// for the script itself, so no zombie stays behind. A handler's
    /// connection just closes.
    async fn reap(&self, pid: Option<Pid>) {
        let Some(pid) = pid else {
            return;
        };
        let _ = killpg(pid, Signal::SIGKILL);
        loop {
            let exited = self.child_exited.notified();
            if spawn::exited(pid) {
                return;
            }
            // SIGCHLD wakes us; the timer is a backstop for a lost wake-up.
            let backstop = async {
                Timer::after(REAP_BACKSTOP).await;
            };
            future::or(exited, backstop).await;
        }
    }

    /// Writes the request body to the script: each wait on the client
    /// bounded by `pace`, each wait on the script by `cgi-timeout`.
    async fn feed_stdin(&self, stdin: File, body: ScriptInput, pace: &Pace) -> Fed {
        let mut pipe = Async::new(stdin).ok();
        if self.give(&mut pipe, &body.buffered).await.is_err() {
            return Fed::ScriptStalled;
        }
        let mut left = body.on_socket;
        let mut chunk = vec![0u8; if left > 0 { PIPE_CHUNK } else { 0 }];
        while left > 0 {
            let want = left.min(chunk.len() as u64) as usize;
            let from = Instant::now();
            let n = match self.sock.read_some(&mut chunk[..want], pace.until()).await {
                Ok(0) | Err(_) => return Fed::ClientStopped,
                Ok(n) => n,
            };
            pace.waited(from, n);
            left -= n as u64;
            if self.give(&mut pipe, &chunk[..n]).await.is_err() {
                return Fed::ScriptStalled;
            }
        }
        // Dropping the pipe closes stdin: the script sees end of input.
        Fed::Whole
    }

    /// Writes to the script's stdin. A script that closed it gets no more
    /// (the rest of the body is drained); one that takes nothing for
    /// `cgi-timeout` has stalled.
    async fn give(&self, pipe: &mut Option<Async<File>>, bytes: &[u8]) -> Result<(), Stalled> {
        let Some(p) = pipe.as_mut() else {
            return Ok(());
        };
        // The worker's deadline table, not a timer per write: a large
        // upload makes thousands of them.
        let until = Instant::now() + self.timeout;
        match within(self.sock.deadlines, until, p.write_all(bytes)).await {
            Some(Ok(())) => Ok(()),
            Some(Err(_)) => {
                *pipe = None;
                Ok(())
            }
            None => Err(Stalled),
        }
    }

    /// Reads the script's output: parses its head, then streams the body.
    async fn read_answer(
        &self,
        stdout: File,
        name: &str,
        sent_head: &mut bool,
    ) -> Result<Answer, End> {
        let Ok(mut pipe) = Async::new(stdout) else {
            return Ok(Answer::Failed(Status::BadGateway));
        };
        let mut out = self.pool.out();
        let result = async {
            let mut got = 0;
            buffers::zeroed_to(&mut out, HEAD_BUF);
            let (head_len, body_start) = loop {
                if let Some(end) = output::head_end(&out[..got]) {
                    break end;
                }
                if got == HEAD_BUF {
                    log::warn!("cgi {name}: header block larger than {HEAD_BUF} bytes");
                    return Ok(Answer::Failed(Status::BadGateway));
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
                        return Ok(Answer::Failed(Status::BadGateway));
                    }
                    Ok(n) => got += n,
                }
            };
            let head = match output::parse(&out[..head_len]) {
                Ok(h) => h,
                Err(output::Invalid(why)) => {
                    log::warn!("cgi {name}: invalid headers: {why}");
                    return Ok(Answer::Failed(Status::BadGateway));
                }
            };
            if let Some(path) = head.local_redirect {
                return Ok(Answer::LocalRedirect(path));
            }
            let first_body = out[body_start..got].to_vec();
            out.clear();
            self.stream_body(&mut pipe, name, head, &first_body, &mut out, sent_head)
                .await
        }
        .await;
        self.pool.give_out(out);
        result
    }

    async fn stream_body(
        &self,
        pipe: &mut Async<File>,
        name: &str,
        head: ScriptHead,
        first: &[u8],
        out: &mut Vec<u8>,
        sent_head: &mut bool,
    ) -> Result<Answer, End> {
        let login = Login::of(&head);
        let has_body = head.status.has_body();
        let framing = match (head.content_length, self.version) {
            (Some(n), _) => Framing::Length(n),
            _ if !has_body => Framing::Length(0),
            (None, Version::Http11) => Framing::Chunked,
            (None, Version::Http10) => Framing::Close,
        };
        let keep_alive = self.keep_alive && framing != Framing::Close;
        let mut r = Response::new(head.status, response::Body::Script);
        r.status_header = head.location.map(StatusHeader::Location);
        let content_type = head.content_type;
        let cx = HeadContext {
            version: self.version,
            keep_alive,
            date: self.sock.deadlines.wall_secs(),
            plain_body: false,
        };
        response::write_head(out, &r, self.clock, cx, &|out| {
            if let Some(t) = &content_type {
                header::header(out, "Content-Type", t.as_bytes());
            }
            for (n, v) in &head.other {
                header::header(out, n, v.as_bytes());
            }
            match framing {
                Framing::Length(n) if has_body => {
                    out.extend_from_slice(b"\r\nContent-Length: ");
                    header::push_num(out, n);
                }
                Framing::Chunked => header::header(out, "Transfer-Encoding", b"chunked"),
                _ => {}
            }
        });
        *sent_head = true;
        let status = head.status.code();
        if self.head_only || !has_body {
            self.sock.send_all(out).await?;
            // The script may still be writing a body nobody will read: it is killed when reaped.
            return Ok(Answer::Sent {
                status,
                bytes: 0,
                reusable: keep_alive,
                login,
            });
        }
        let mut sent: u64 = 0;
        push_body(out, first, framing, &mut sent);
        let mut buf = vec![0u8; PIPE_CHUNK];
        loop {
            if !out.is_empty() {
                self.sock.send_all(out).await?;
                out.clear();
            }
            if matches!(framing, Framing::Length(n) if sent >= n) {
                break;
            }
            // An error is not the end of the answer (a handler that died
            // with its request unread): the client's answer is cut, not ended.
            let n = match pipe.read(&mut buf).await {
                Ok(n) => n,
                Err(e) => {
                    log::warn!("cgi {name}: answer cut after {sent} bytes: {e}");
                    return Err(End::Io);
                }
            };
            if n == 0 {
                break;
            }
            push_body(out, &buf[..n], framing, &mut sent);
        }
        match framing {
            Framing::Chunked => self.sock.send_all(b"0\r\n\r\n").await?,
            Framing::Length(n) if sent < n => {
                log::warn!("cgi {name}: answer cut after {sent} of {n} bytes");
                return Err(End::Io);
            }
            _ => {}
        }
        Ok(Answer::Sent {
            status,
            bytes: sent,
            reusable: keep_alive,
            login,
        })
    }
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
        match (&mut lines)
            .take(STDERR_LINE)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                log::warn!("cgi {name}: {}", text.trim_end());
            }
        }
    }
}

/// Framing for a script's body: its Content-Length, or chunked on HTTP/1.1,
/// or until the close on HTTP/1.0.
#[derive(Clone, Copy, PartialEq)]
enum Framing {
    Length(u64),
    Chunked,
    Close,
}

/// Appends script output, framed; a script's Content-Length is never exceeded.
fn push_body(out: &mut Vec<u8>, data: &[u8], framing: Framing, sent: &mut u64) {
    let data = match framing {
        Framing::Length(n) => &data[..n.saturating_sub(*sent).min(data.len() as u64) as usize],
        _ => data,
    };
    if data.is_empty() {
        return;
    }
    if framing == Framing::Chunked {
        crate::http::chunked::push_chunk(out, data);
    } else {
        out.extend_from_slice(data);
    }
    *sent += data.len() as u64;
}
