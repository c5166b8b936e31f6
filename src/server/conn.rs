//! One client connection: read a head (keeping pipelined bytes), let the
//! router answer, write the answer, and decide whether to go on. Every wait
//! has a deadline: the head timeout for a request being received, the
//! keep-alive timeout between requests, the send timeout for a stalled
//! client. Bytes come in through `Input` and go out through `Sock`; each
//! answered request ends in one `Sent` record, logged in one place.

use std::net::{Shutdown, SocketAddr};
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::time::Instant;

use futures_lite::future;

use crate::cgi::exchange::{self, Answer, Exchange};
#[cfg(feature = "ubus")]
use crate::cgi::luci;
use crate::cgi::luci::Login;
use crate::cgi::running::{Caller, Refused};
use crate::cgi::script::Job;
use crate::http::chunked;
use crate::http::gunzip::Gunzip;
use crate::http::header;
use crate::http::request::{self, BodyKind, Field, Reject, Version};
use crate::http::response::{self, Body, HeadContext, Response};
use crate::http::status::Status;
use crate::limits::{CGI_SHARE_WAIT, HEAD_BUF, OUT_BUF};
use crate::limits::{
    LINGER_BYTES, LINGER_TIME, MAX_CGI_CHUNKED_BODY, MAX_DISCARDED_BODY, MAX_LOCAL_REDIRECTS,
};
use crate::logs::access_log;
use crate::net::buffers;
use crate::net::deadline::within;
use crate::net::input::Input;
use crate::net::pace::Pace;
use crate::net::reclaim::Place;
use crate::net::slots::Slot;
#[cfg(feature = "tls")]
use crate::net::sock::Records;
use crate::net::sock::{End, Sock, Stream};
use crate::policy::auth;
use crate::proxy::exchange::{self as proxied, Outcome};
use crate::proxy::outgoing::Forward;
use crate::proxy::relay::Waits;
use crate::server::router::{self, Routed};
use crate::server::state::Worker;
#[cfg(feature = "ubus")]
use crate::ubus::asked::Asked;
#[cfg(feature = "ubus")]
use crate::ubus::exchange as ubus;

/// Serves one connection until it closes; `held` is its places in the
/// worker's connection limit and its generation's count, given back when
/// it does, and its place among the connections the worker may ask to
/// close. The connection is
/// set up before the future is made and used in place, so the task holds
/// it once, not also the arguments it was made from.
pub fn serve(
    w: Rc<Worker>,
    stream: Stream,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    held: ([Slot; 2], Place),
    #[cfg(feature = "tls")] tls: Option<std::sync::Arc<rustls::ServerConfig>>,
) -> impl Future<Output = ()> + 'static {
    let mut conn = Conn::open(
        w,
        stream,
        peer,
        local,
        held,
        #[cfg(feature = "tls")]
        tls,
    );
    async move {
        if let Some(conn) = conn.as_mut() {
            conn.run().await;
        }
    }
}

struct Conn {
    sock: Sock,
    local: SocketAddr,
    input: Input,
    served: u32,
    /// The client sends nothing more (the last request asked for the close
    /// and had no body, or the client closed its end), so the close needs no
    /// linger.
    client_done: bool,
    /// The current request's first line, kept when there is an access log.
    request_line: Option<Vec<u8>>,
    /// Its place among the connections the worker may ask to close at
    /// the limit: idle from the accept (through a TLS handshake) or the
    /// end of an answer until a whole head has come, then busy, or
    /// sending while a static answer goes out.
    place: Place,
    /// The generation that accepted it, kept until the connection ends.
    w: Rc<Worker>,
    /// Last, so that it is given back after the socket is closed.
    _slots: [Slot; 2],
}

/// What a script request is to LuCI's login (`cgi/luci.rs`). Without
/// the ubus endpoint every request is `Neither`.
#[derive(Clone, Copy, PartialEq)]
#[cfg_attr(not(feature = "ubus"), allow(dead_code))]
enum LuciCaller {
    /// Its login cookie names a session the ubus endpoint knows.
    Session,
    /// Without such a session, it may carry a login: counted as a
    /// password check unless its answer says it was none.
    MayLogIn,
    Neither,
}

/// What went out for one request: the record the access log gets.
#[derive(Clone, Copy)]
struct Sent {
    status: u16,
    bytes: u64,
    /// The connection goes on to the next request.
    keep_alive: bool,
}

/// How an answer to this request is framed.
#[derive(Clone, Copy)]
struct Reply {
    version: Version,
    keep_alive: bool,
    head_only: bool,
}

/// What a script's run needs to know about its request.
struct Meta {
    reply: Reply,
    head_len: usize,
    body: BodyKind,
    /// The request has `Expect: 100-continue`.
    expects_continue: bool,
}

/// An answer in bytes, ready to send once the request body is read past.
struct Prepared {
    out: Vec<u8>,
    body: Body,
    /// Request body bytes to read past first.
    discard: u64,
    sent: Sent,
}

/// The part of a plan that has to wait for the socket.
enum Step {
    Send(Prepared),
    Script(Box<Job>, Meta),
    Proxy(Box<Forward>, Meta),
    #[cfg(feature = "ubus")]
    Ubus(Box<Asked>, Meta),
}

enum Next {
    Step(Step),
    /// Check a password off the worker thread, then decide again.
    Verify(auth::Pending),
}

impl Conn {
    fn open(
        w: Rc<Worker>,
        stream: Stream,
        peer: SocketAddr,
        local: Option<SocketAddr>,
        (slots, place): ([Slot; 2], Place),
        #[cfg(feature = "tls")] tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    ) -> Option<Conn> {
        let local = local.unwrap_or_else(|| stream.get_ref().local_addr().unwrap_or(peer));
        #[cfg(feature = "tls")]
        let records = match tls {
            None => Records::Plain,
            Some(config) => Records::User {
                tls: Box::new(
                    crate::net::tls::Tls::new(config, w.pool.clone())
                        .ok()?
                        .into(),
                ),
                to_kernel: crate::net::ktls::support(),
            },
        };
        Some(Conn {
            sock: Sock {
                stream,
                send_timeout: w.config.send_timeout,
                peer,
                deadlines: w.deadlines,
                #[cfg(feature = "tls")]
                records,
            },
            local,
            input: Input::new(w.pool.clone()),
            served: 0,
            client_done: false,
            request_line: None,
            place,
            w,
            _slots: slots,
        })
    }

    async fn run(&mut self) {
        // The handshake and the wait for the first request share one head
        // timeout: a client cannot take it once for each.
        let first = self.w.deadlines.after(self.w.config.header_timeout);
        #[cfg(feature = "tls")]
        let handshake = {
            let (sock, place) = (&self.sock, &self.place);
            future::or(async { Some(sock.handshake(first).await) }, async {
                place.asked().await;
                sock.discard_unread();
                None
            })
            .await
        };
        #[cfg(feature = "tls")]
        match handshake {
            None => return,
            // The kernel takes the records from here on, if it can.
            Some(Ok(())) => {
                if self.sock.offload().await.is_err() {
                    return;
                }
            }
            Some(Err(End::Refused)) => return self.close_gently().await,
            Some(Err(_)) => return,
        }
        loop {
            // No request under way until a whole head is in (a pipelined
            // one too): the first to be asked to close.
            self.place.idle();
            // A new connection's first request has usually come by the time
            // it is accepted: read at once, it needs no wait for it (two
            // system calls and a turn of the loop).
            if self.served == 0 && self.input.is_empty() {
                self.input.take_ready(&self.sock);
            }
            if self.input.is_empty() {
                self.input.release();
                let until = if self.served == 0 {
                    first
                } else {
                    self.w.deadlines.after(self.w.config.keepalive_timeout)
                };
                if !self.wait_for_request(until).await {
                    // Idle, timed out or stopping: over TLS still a
                    // close_notify (RFC 8446 6.1), so the client can tell
                    // the last response was not cut off.
                    #[cfg(feature = "tls")]
                    self.sock.end_tls().await;
                    return;
                }
            }
            // One request's work is placed apart: an idle connection's task
            // then holds only the small wait above.
            let w = self.w.clone();
            match w.frames.place(self.serve_one()).await {
                Ok(Some(sent)) => {
                    self.log(&sent);
                    if !sent.keep_alive {
                        break;
                    }
                }
                Ok(None) => {
                    // The client closed its end: nothing more comes.
                    self.client_done = true;
                    break;
                }
                #[cfg(feature = "tls")]
                Err(End::Refused) => break,
                Err(_) => return,
            }
        }
        self.close_gently().await;
    }

    /// Closes at once when the client has nothing coming, else after the
    /// linger. `linger` is the largest of this task's waits and runs once,
    /// at the end: boxed, it does not size every connection's task.
    async fn close_gently(&mut self) {
        if self.client_done && self.input.is_empty() {
            // Nothing unread, and nothing more coming: closed at once, the
            // answer still goes out whole (no reset).
            #[cfg(feature = "tls")]
            self.sock.end_tls().await;
            return;
        }
        Box::pin(self.linger()).await
    }

    fn log(&mut self, sent: &Sent) {
        if let Some(line) = self.request_line.take() {
            let peer = self.sock.peer;
            let entry = access_log::line(
                peer,
                &line,
                sent.status,
                sent.bytes,
                self.w.deadlines.wall_secs(),
            );
            self.w.access_log.borrow_mut().write(&entry);
        }
    }

    /// Reads one request head and answers it; `None` if the client closed first.
    async fn serve_one(&mut self) -> Result<Option<Sent>, End> {
        let deadline = self.w.deadlines.after(self.w.config.header_timeout);
        self.client_done = false;
        let mut verdict = None;
        let mut step = loop {
            let decided = self.decide(verdict.take());
            if let Ok(Some(_)) | Err(_) = decided {
                self.place.busy();
            }
            match decided {
                Ok(Some(Next::Verify(pending))) => verdict = Some(pending.run().await),
                Ok(Some(Next::Step(step))) => break step,
                Ok(None) => match self.read_head(deadline).await {
                    Ok(0) => return Ok(None),
                    Ok(_) => {}
                    Err(End::Timeout) if !self.input.is_empty() => {
                        self.place.busy();
                        return self.refuse(Status::RequestTimeout).await.map(Some);
                    }
                    Err(e) => return Err(e),
                },
                Err(Reject(status)) => return self.refuse(status).await.map(Some),
            }
        };
        self.served += 1;
        // Not taken after the handshake (a record was half received then):
        // from this answer on, if the kernel can now.
        #[cfg(feature = "tls")]
        self.sock.offload().await?;
        // The answer is sent from where `decide` left it: each move of it
        // into a future is a copy, on MIPS a call of `memcpy`.
        match step {
            Step::Send(ref mut prepared) => {
                // At the limit, a client holding the most connections may
                // be asked to close one that sends (to it, as it reads).
                let asked = self.place.watch();
                self.place.sending();
                let sent = future::or(async { Some(self.send_prepared(prepared).await) }, async {
                    asked.asked().await;
                    None
                })
                .await;
                self.place.busy();
                let Some(sent) = sent else {
                    self.sock.discard_unread();
                    return Err(End::Closed);
                };
                sent.map(Some)
            }
            Step::Script(job, meta) => self.run_script(*job, meta).await.map(Some),
            Step::Proxy(forward, meta) => self.run_proxy(*forward, meta).await.map(Some),
            #[cfg(feature = "ubus")]
            Step::Ubus(asked, meta) => self.run_ubus(&asked, meta).await.map(Some),
        }
    }

    /// Reads more of a head; at the connection limit the worker may close
    /// the connection meanwhile (a client that sends its head slowly holds
    /// its slot no longer than one that sends nothing).
    async fn read_head(&mut self, deadline: Instant) -> Result<usize, End> {
        let (input, sock, place) = (&mut self.input, &self.sock, &self.place);
        future::or(input.read_more(sock, deadline), async {
            place.asked().await;
            sock.discard_unread();
            Err(End::Closed)
        })
        .await
    }

    /// Parses the buffered bytes and, if a whole head is there, routes it,
    /// down to what has to wait for the socket: the large routed response
    /// is written into bytes here, and never lives in a future or moves
    /// through wrappers.
    fn decide(&mut self, verdict: Option<auth::Checked>) -> Result<Option<Next>, Reject> {
        // Between keep-alive requests: nothing to parse yet.
        if self.input.is_empty() {
            return Ok(None);
        }
        let mut headers = request::empty_headers();
        let Some(req) = request::parse(self.input.bytes(), &mut headers)? else {
            return Ok(None);
        };
        let client = router::Client {
            peer: self.sock.peer,
            local: self.local,
            #[cfg(feature = "tls")]
            tls: self.sock.is_tls(),
        };
        let mut routed = router::route(&self.w.site, &req, &client, verdict);
        // A proxied body has its own limit, checked as it is forwarded.
        // Replaced in place: a routed answer is large, and a move of it
        // is a copy.
        if let (Routed::Respond(_) | Routed::Cgi(_), BodyKind::Length(n)) = (&routed, req.body) {
            if n > MAX_DISCARDED_BODY.max(self.w.config.cgi.max_body) {
                let mut r = router::failure(&self.w.site, Status::ContentTooLarge, "");
                r.close = true;
                routed = Routed::Respond(r);
            }
        }
        self.client_done = !req.keep_alive && req.body == BodyKind::None;
        let last = self.served + 1 >= self.w.config.max_requests;
        let meta = Meta {
            reply: Reply {
                keep_alive: req.keep_alive && !last && !self.w.is_winding_down(),
                version: req.version,
                head_only: req.method == request::Method::Head,
            },
            head_len: req.head_len,
            body: req.body,
            expects_continue: req
                .get(Field::Expect)
                .is_some_and(|e| e.eq_ignore_ascii_case(b"100-continue")),
        };
        let step = match routed {
            Routed::Verify(pending) => return Ok(Some(Next::Verify(pending))),
            Routed::Respond(ref mut response) => {
                self.keep_request_line();
                Step::Send(self.prepare_answer(response, meta))
            }
            Routed::Cgi(job) => {
                self.keep_request_line();
                Step::Script(job, meta)
            }
            Routed::Proxy(forward) => {
                self.keep_request_line();
                Step::Proxy(forward, meta)
            }
            #[cfg(feature = "ubus")]
            Routed::Ubus(asked) => {
                self.keep_request_line();
                Step::Ubus(asked, meta)
            }
        };
        Ok(Some(Next::Step(step)))
    }

    /// Keeps the first line of the buffered request for the access log.
    fn keep_request_line(&mut self) {
        self.request_line = self.w.access_log.borrow().enabled().then(|| {
            // Empty lines before a request line are allowed (RFC 9112 2.2).
            let bytes = self.input.bytes();
            let start = bytes
                .iter()
                .position(|&b| b != b'\r' && b != b'\n')
                .unwrap_or(bytes.len());
            let line = &bytes[start..];
            let end = line
                .iter()
                .position(|&b| b == b'\r' || b == b'\n')
                .unwrap_or(line.len());
            line[..end].to_vec()
        });
    }

    /// A routed answer on a static path, in bytes.
    fn prepare_answer(&mut self, response: &mut Response, meta: Meta) -> Prepared {
        // A chunked body, or one the client holds back for 100-continue,
        // is not worth reading on a static path: answer, then close.
        if meta.body == BodyKind::Chunked || (meta.expects_continue && meta.body != BodyKind::None)
        {
            response.close = true;
        }
        self.input.consume(meta.head_len);
        let discard = match meta.body {
            BodyKind::Length(n) if !response.close => n,
            _ => 0,
        };
        self.prepare(response, meta.reply, discard)
    }

    /// Runs a CGI script: its body (streamed, or decoded first when chunked),
    /// its answer, its end.
    async fn run_script(&mut self, mut job: Job, meta: Meta) -> Result<Sent, End> {
        // Kept for a local redirect, which is routed with the same fields.
        let head = self.input.bytes()[..meta.head_len].to_vec();
        self.input.consume(meta.head_len);
        let reply = meta.reply;
        // Answered before the body is read: only a request without one goes on.
        let unread = Reply {
            keep_alive: reply.keep_alive && meta.body == BodyKind::None,
            ..reply
        };
        let settings = &self.w.config.cgi;
        if matches!(meta.body, BodyKind::Length(n) if n > settings.max_body) {
            return self.fail(Status::ContentTooLarge, &job, unread).await;
        }
        let client = self.w.config.links.client(self.sock.peer.ip());
        let luci = self.luci_caller(&head);
        if luci == LuciCaller::MayLogIn && self.w.failures.borrow().held(client) {
            return self.fail(Status::TooManyRequests, &job, unread).await;
        }
        let pace = Pace::new(settings.body_rate, self.w.config.header_timeout);
        // A chunked body is decoded whole before its script starts: while
        // it comes it holds a place among the bodies, not a script slot.
        let _body_place = match meta.body {
            BodyKind::Chunked => match self.w.scripts.body(client) {
                Ok(place) => Some(place),
                Err(refused) => return self.refuse_script(refused, &job, unread).await,
            },
            _ => None,
        };
        let has_body = meta.body != BodyKind::None;
        if has_body && meta.expects_continue && reply.version == Version::Http11 {
            self.sock.send_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        let body = match meta.body {
            BodyKind::None => exchange::ScriptInput::default(),
            BodyKind::Length(n) => {
                // The script starts once its body does: a head alone
                // holds no slot. A body that stops short is answered as
                // one that stops mid-stream: 408.
                match self.body_start(n, &pace).await {
                    Ok(()) => {}
                    Err(End::Timeout | End::Closed) => {
                        return self.fail(Status::RequestTimeout, &job, unread).await;
                    }
                    Err(end) => return Err(end),
                }
                let buffered = self.input.take(n);
                exchange::ScriptInput {
                    on_socket: n - buffered.len() as u64,
                    buffered,
                }
            }
            BodyKind::Chunked => match self.read_chunked(&pace).await {
                Ok(decoded) => {
                    job.set_content_length(decoded.len() as u64);
                    exchange::ScriptInput {
                        buffered: decoded,
                        on_socket: 0,
                    }
                }
                Err(status) => return self.fail(status, &job, unread).await,
            },
        };
        let until = Instant::now() + CGI_SHARE_WAIT;
        let caller = match luci {
            LuciCaller::Session => Caller::Session,
            _ if body.on_socket > 0 => Caller::Upload,
            LuciCaller::MayLogIn => Caller::Login,
            LuciCaller::Neither => Caller::Other,
        };
        let _running = match self
            .w
            .scripts
            .take_waiting(client, caller, self.w.deadlines, until)
            .await
        {
            Ok(running) => running,
            Err(refused) => return self.refuse_script(refused, &job, unread).await,
        };
        // Counted when the script starts, as a password check is: parallel
        // guesses cannot all start before the first is counted.
        let counted = (luci == LuciCaller::MayLogIn).then(|| {
            self.w
                .failures
                .borrow_mut()
                .count_logged(client, "luci login")
        });
        let mut outcome = self.exchange(reply).run(&job, body, &pace).await?;
        if let Some(counted) = counted {
            let mut failures = self.w.failures.borrow_mut();
            match outcome.answer {
                Answer::Sent {
                    login: Login::Refused,
                    ..
                } => {}
                Answer::Sent {
                    login: Login::Granted,
                    ..
                } => {
                    failures.refund(counted);
                    // LuCI's user name is in the form: all its logins are one user's.
                    failures.trust(client, "luci");
                }
                _ => failures.refund(counted),
            }
        }
        let mut reply = reply;
        let mut redirects = 0;
        loop {
            // Bytes of an unread body would be taken for the next request.
            reply.keep_alive &= outcome.body_read;
            let target = match outcome.answer {
                Answer::Sent {
                    status,
                    bytes,
                    reusable,
                    ..
                } => {
                    return Ok(Sent {
                        status,
                        bytes,
                        keep_alive: reply.keep_alive && reusable,
                    });
                }
                Answer::Failed(status) => return self.fail(status, &job, reply).await,
                Answer::LocalRedirect(target) => target,
            };
            redirects += 1;
            if redirects > MAX_LOCAL_REDIRECTS {
                log::warn!(
                    "cgi {}: more than {MAX_LOCAL_REDIRECTS} local redirects",
                    job.script.rel
                );
                return self.fail(Status::InternalServerError, &job, reply).await;
            }
            job = match self.route_again(&head, &target).await {
                Ok(next) => *next,
                Err(response) => return self.send(response, reply).await,
            };
            outcome = self
                .exchange(reply)
                .run(&job, exchange::ScriptInput::default(), &pace)
                .await?;
        }
    }

    /// Forwards a request to its backend and relays the answer.
    async fn run_proxy(&mut self, forward: Forward, meta: Meta) -> Result<Sent, End> {
        self.input.consume(meta.head_len);
        let reply = meta.reply;
        let config = &self.w.config;
        let exchange = proxied::Exchange {
            sock: &self.sock,
            pool: &self.w.proxy,
            buffers: &self.w.pool,
            clock: &self.w.clock,
            settings: &config.proxy,
            client: config.links.client(self.sock.peer.ip()),
            waits: Waits {
                deadlines: self.w.deadlines,
                client: config.header_timeout,
                backend: config.proxy.timeout,
            },
            version: reply.version,
            keep_alive: reply.keep_alive,
            expects_continue: meta.expects_continue,
        };
        match exchange.run(&mut self.input, &forward).await? {
            Outcome::Sent {
                status,
                bytes,
                reusable,
            } => Ok(Sent {
                status,
                bytes,
                keep_alive: reply.keep_alive && reusable,
            }),
            Outcome::Failed { status, body_read } => {
                let mut r = router::failure(&self.w.site, status, "");
                if status == Status::ServiceUnavailable {
                    r.add_header(header::RETRY_SOON);
                }
                r.close = !body_read;
                self.send(r, reply).await
            }
        }
    }

    /// Answers a request for the ubus endpoint.
    #[cfg(feature = "ubus")]
    async fn run_ubus(&mut self, asked: &Asked, meta: Meta) -> Result<Sent, End> {
        self.input.consume(meta.head_len);
        let Some(bus) = self.w.ubus.as_ref() else {
            let r = router::failure(&self.w.site, Status::InternalServerError, "");
            return self.send(r, meta.reply).await;
        };
        let exchange = ubus::Exchange {
            sock: &self.sock,
            client: self.w.config.links.client(self.sock.peer.ip()),
            bus,
            failures: &self.w.failures,
            settings: &self.w.config.ubus,
            clock: &self.w.clock,
            body_timeout: self.w.config.header_timeout,
            version: meta.reply.version,
            keep_alive: meta.reply.keep_alive,
            expects_continue: meta.expects_continue,
            stop: &self.w.stop,
            stopping: &|| self.w.is_stopping(),
        };
        let outcome = exchange.run(&mut self.input, asked, meta.body).await?;
        Ok(Sent {
            status: outcome.status,
            bytes: outcome.bytes,
            keep_alive: outcome.keep_alive,
        })
    }

    /// Routes a script's local redirect as a GET of `target` with the
    /// original request's header fields: address rules, auth and scripts
    /// apply to it as to any request. `Ok` is another script to run.
    async fn route_again(&self, head: &[u8], target: &str) -> Result<Box<Job>, Response> {
        let client = router::Client {
            peer: self.sock.peer,
            local: self.local,
            #[cfg(feature = "tls")]
            tls: self.sock.is_tls(),
        };
        let mut verdict = None;
        loop {
            let mut headers = request::empty_headers();
            let Ok(Some(original)) = request::parse(head, &mut headers) else {
                return Err(router::failure(
                    &self.w.site,
                    Status::InternalServerError,
                    "",
                ));
            };
            let req = original.redirected(target.as_bytes());
            match router::route(&self.w.site, &req, &client, verdict.take()) {
                Routed::Respond(response) => return Err(response),
                Routed::Cgi(job) => return Ok(job),
                // A script's redirect is answered here, not by a backend.
                Routed::Proxy(_) => {
                    log::warn!("cgi redirect to {target}: a proxied path; 500");
                    return Err(router::failure(
                        &self.w.site,
                        Status::InternalServerError,
                        "",
                    ));
                }
                Routed::Verify(pending) => verdict = Some(pending.run().await),
                #[cfg(feature = "ubus")]
                Routed::Ubus(_) => {
                    log::warn!("cgi redirect to {target}: the ubus endpoint; 500");
                    return Err(router::failure(
                        &self.w.site,
                        Status::InternalServerError,
                        "",
                    ));
                }
            }
        }
    }

    /// The exchange with a script for a request answered with `reply`.
    fn exchange(&self, reply: Reply) -> Exchange<'_> {
        Exchange {
            sock: &self.sock,
            pool: &self.w.pool,
            clock: &self.w.clock,
            child_exited: &self.w.child_exited,
            timeout: self.w.config.cgi.timeout,
            version: reply.version,
            keep_alive: reply.keep_alive,
            head_only: reply.head_only,
        }
    }

    /// Answers a script request that did not get the script's answer.
    fn fail(
        &mut self,
        status: Status,
        job: &Job,
        reply: Reply,
    ) -> impl Future<Output = Result<Sent, End>> + '_ {
        let mut r = router::failure(&self.w.site, status, &job.script.rel);
        match status {
            // Script slots free up within seconds.
            Status::ServiceUnavailable => r.add_header(header::RETRY_SOON),
            Status::TooManyRequests => r.add_header(header::RETRY_AFTER_LOGINS),
            // The script was killed mid-exchange: what the client sent
            // after the head may not have been read.
            Status::GatewayTimeout => r.close = true,
            _ => {}
        }
        self.send(r, reply)
    }

    /// Answers a script request that found no slot (or body place) for it.
    fn refuse_script(
        &mut self,
        refused: Refused,
        job: &Job,
        reply: Reply,
    ) -> impl Future<Output = Result<Sent, End>> + '_ {
        if refused == Refused::Share {
            log::warn!(
                "cgi {}: {} runs {} scripts; 503",
                job.script.rel,
                self.sock.peer.ip(),
                self.w.scripts.per_client()
            );
        }
        self.fail(Status::ServiceUnavailable, job, reply)
    }

    /// What a script request (`head` is its head) is to LuCI's login,
    /// with the ubus endpoint on: without it, neither.
    fn luci_caller(&self, head: &[u8]) -> LuciCaller {
        #[cfg(feature = "ubus")]
        if let Some(bus) = self.w.ubus.as_ref() {
            let mut headers = request::empty_headers();
            if let Ok(Some(req)) = request::parse(head, &mut headers) {
                if luci::sessions(req.headers).any(|sid| bus.sessions.knows(sid)) {
                    return LuciCaller::Session;
                }
                if luci::may_log_in(&req) {
                    return LuciCaller::MayLogIn;
                }
            }
        }
        let _ = head;
        LuciCaller::Neither
    }

    /// Waits, at the body's pace, until the start of a body of `len` bytes
    /// is buffered: all of it, or as much as the head buffer holds.
    async fn body_start(&mut self, len: u64, pace: &Pace) -> Result<(), End> {
        let want = len.min(HEAD_BUF as u64) as usize;
        while self.input.bytes().len() < want {
            let from = Instant::now();
            match self.input.read_more(&self.sock, pace.until()).await? {
                0 => return Err(End::Closed),
                n => pace.waited(from, n),
            }
        }
        Ok(())
    }

    /// Reads and decodes a chunked request body at its pace, up to the
    /// CGI body limit (its extensions and trailer fields count too).
    async fn read_chunked(&mut self, pace: &Pace) -> Result<Vec<u8>, Status> {
        let max = self.w.config.cgi.max_body.min(MAX_CGI_CHUNKED_BODY);
        let mut decoder = chunked::Decoder::default();
        let mut body = Vec::new();
        loop {
            let used = decoder
                .feed(self.input.bytes(), &mut body)
                .map_err(|e| match e {
                    chunked::Refused::Malformed => Status::BadRequest,
                    chunked::Refused::TrailersTooLarge => Status::ContentTooLarge,
                })?;
            self.input.consume(used);
            if decoder.counted() > max {
                return Err(Status::ContentTooLarge);
            }
            if decoder.is_done() {
                return Ok(body);
            }
            let from = Instant::now();
            match self.input.read_more(&self.sock, pace.until()).await {
                Ok(0) | Err(End::Closed | End::Io) => return Err(Status::BadRequest),
                Ok(n) => pace.waited(from, n),
                Err(_) => return Err(Status::RequestTimeout),
            }
        }
    }

    /// Answers a head that cannot be served, then closes.
    async fn refuse(&mut self, status: Status) -> Result<Sent, End> {
        self.keep_request_line();
        let reply = Reply {
            version: Version::Http11,
            keep_alive: false,
            // The method is known even when the rest of the head is not.
            head_only: self.input.bytes().starts_with(b"HEAD "),
        };
        self.input.clear();
        let mut r = router::failure(&self.w.site, status, "");
        r.close = true;
        self.send(r, reply).await
    }

    /// Sends a response. Not an `async fn`: the response is turned into bytes
    /// before the future exists, so the future does not carry it.
    fn send(
        &mut self,
        mut r: Response,
        reply: Reply,
    ) -> impl Future<Output = Result<Sent, End>> + '_ {
        let mut prepared = self.prepare(&mut r, reply, 0);
        async move { self.send_prepared(&mut prepared).await }
    }

    /// Writes the head (and a body the server made) into an output buffer,
    /// so that only the body to stream is kept across awaits: a connection's
    /// state stays small (it is what 1000 idle clients cost). Every answer
    /// goes through here, so a HEAD answer never has a body.
    fn prepare(&self, r: &mut Response, reply: Reply, discard: u64) -> Prepared {
        let keep_alive = reply.keep_alive && !r.close;
        let head_only = reply.head_only || !r.status.has_body();
        let sent = Sent {
            status: r.status.code(),
            bytes: if head_only { 0 } else { r.body_len() },
            keep_alive,
        };
        let mut out = self.w.pool.out();
        let cx = HeadContext {
            version: reply.version,
            keep_alive,
            date: self.w.deadlines.wall_secs(),
            // Over TLS the records, not the head, decide where the body lies.
            plain_body: !self.sock.is_tls() && !head_only,
        };
        response::write_head(&mut out, r, &self.w.clock, cx, &|_| {});
        let body = match std::mem::replace(&mut r.body, Body::Empty) {
            _ if head_only => Body::Empty,
            Body::StatusPage => {
                response::write_status_page(&mut out, r.status);
                Body::Empty
            }
            body => body,
        };
        Prepared {
            out,
            body,
            discard,
            sent,
        }
    }

    /// Reads past the request body, then sends the answer.
    async fn send_prepared(&mut self, p: &mut Prepared) -> Result<Sent, End> {
        let result = async {
            // Most requests have no body: no clock read for its deadline.
            if p.discard > 0 {
                let deadline = self.w.deadlines.after(self.w.config.header_timeout);
                self.input.discard(&self.sock, p.discard, deadline).await?;
            }
            self.send_body(&mut p.out, &mut p.body).await
        }
        .await;
        self.w.pool.give_out(std::mem::take(&mut p.out));
        result.map(|()| p.sent)
    }

    /// Sends the prepared head and then the body.
    async fn send_body(&self, out: &mut Vec<u8>, body: &mut Body) -> Result<(), End> {
        match body {
            // Kept in memory: sent from there with the head, in one call.
            Body::File {
                bytes: Some(bytes),
                offset,
                len,
                ..
            } => {
                let (offset, len) = (*offset, *len);
                let part = usize::try_from(offset)
                    .ok()
                    .zip(
                        offset
                            .checked_add(len)
                            .and_then(|end| usize::try_from(end).ok()),
                    )
                    .and_then(|(from, to)| bytes.get(from..to))
                    .ok_or(End::Io)?;
                self.sock.send_both(out, part).await
            }
            Body::File {
                file, offset, len, ..
            } if out.len() as u64 + *len <= OUT_BUF as u64 => {
                let head = out.len();
                buffers::zeroed_to(out, head + *len as usize);
                // A file cut short since it was opened: close rather than send a wrong length.
                file.read_exact_at(&mut out[head..], *offset)?;
                self.sock.send_all(out).await
            }
            Body::File {
                file, offset, len, ..
            } => self.sock.send_head_and_file(out, file, *offset, *len).await,
            Body::Gunzip { stream, len } => self.send_gunzipped(out, stream, *len).await,
            // Sent from where it is kept: no copy per connection.
            Body::Shared(bytes) => self.sock.send_both(out, bytes).await,
            Body::Empty | Body::Script | Body::StatusPage => self.sock.send_all(out).await,
        }
    }

    /// Streams a decompressed `.gz`, one output buffer at a time. A stream
    /// that does not end at the announced length closes the connection.
    async fn send_gunzipped(
        &self,
        out: &mut Vec<u8>,
        stream: &mut Gunzip,
        len: u64,
    ) -> Result<(), End> {
        let mut sent = 0u64;
        loop {
            let head = out.len();
            buffers::zeroed_to(out, OUT_BUF);
            let n = stream.fill(&mut out[head..])?;
            out.truncate(head + n);
            sent += n as u64;
            if sent > len {
                return Err(End::Io);
            }
            self.sock.send_all(out).await?;
            out.clear();
            if n == 0 {
                return if sent == len { Ok(()) } else { Err(End::Io) };
            }
        }
    }

    /// Waits until `until` for the first byte of a request; false if the
    /// connection should close.
    async fn wait_for_request(&self, until: Instant) -> bool {
        if self.w.is_stopping() {
            return false;
        }
        let readable = async {
            within(
                self.w.deadlines,
                until,
                #[cfg(feature = "tls")]
                self.sock.readable(),
                #[cfg(not(feature = "tls"))]
                self.sock.stream.readable(),
            )
            .await
            .is_some_and(|r| r.is_ok())
        };
        // A retiring worker keeps idle connections: their next request is
        // answered with `Connection: close`. Only a stop closes them now.
        let stopped = async {
            loop {
                self.w.stop.notified().await;
                if self.w.is_stopping() {
                    return false;
                }
            }
        };
        // At the connection limit the worker may ask the connection that
        // has waited longest to close, to make room.
        let evicted = async {
            self.place.asked().await;
            self.sock.discard_unread();
            false
        };
        future::or(readable, future::or(stopped, evicted)).await
    }

    /// Closes politely: stop sending, then read what the client still sends for
    /// a moment, so unread bytes do not turn our close into a reset that would
    /// destroy the response in flight.
    async fn linger(&mut self) {
        #[cfg(feature = "tls")]
        self.sock.end_tls().await;
        let _ = self.sock.stream.get_ref().shutdown(Shutdown::Write);
        let deadline = self.w.deadlines.after(LINGER_TIME);
        let mut budget = LINGER_BYTES;
        while budget > 0 {
            self.input.clear();
            match self.input.read_more(&self.sock, deadline).await {
                Ok(0) | Err(_) => break,
                Ok(n) => budget -= n.min(budget),
            }
        }
        self.input.clear();
    }
}
