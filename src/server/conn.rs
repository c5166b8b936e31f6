//! One client connection: read a head (keeping pipelined bytes), let the
//! router answer, write the answer, and decide whether to go on. Every wait
//! has a deadline: the head timeout for a request being received, the
//! keep-alive timeout between requests, the send timeout for a stalled client.

use std::net::{Shutdown, SocketAddr};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use futures_lite::future;

use crate::cgi::exchange as cgi;
use crate::http::chunked;
use crate::http::clock::Clock;
use crate::http::gunzip::Gunzip;
use crate::http::request::{self, Body as RequestBody, Field, Reject, Version};
use crate::http::response::{self, Body, Response};
use crate::http::status::Status;
use crate::limits::{HEAD_BUF, MAX_DISCARDED_BODY};
use crate::logs::access_log;
use crate::net::buffers::OUT_BUF;
use crate::net::sock::{End, Sock, within};
use crate::policy::auth;
use crate::server::router::{self, Routed};
use crate::server::worker::{Stream, Worker};

pub async fn serve(w: &'static Worker, stream: Stream, peer: SocketAddr) {
    let local = stream.get_ref().local_addr().unwrap_or(peer);
    let mut conn = Conn {
        w,
        stream,
        peer,
        local,
        buf: None,
        len: 0,
        served: 0,
    };
    let _ = conn.run().await;
    if let Some(b) = conn.buf.take() {
        w.pool.give_head(b);
    }
    w.release_slot();
}

struct Conn {
    w: &'static Worker,
    stream: Stream,
    peer: SocketAddr,
    local: SocketAddr,
    /// Head buffer, held only while bytes are pending; `len` bytes are valid.
    buf: Option<Box<[u8; HEAD_BUF]>>,
    len: usize,
    served: u32,
}

/// What every kind of answer needs to know about its request.
struct Meta {
    version: Version,
    keep_alive: bool,
    head_only: bool,
    head_len: usize,
    body: RequestBody,
    /// The request has `Expect: 100-continue`.
    expects_continue: bool,
    request_line: Option<Vec<u8>>,
}

/// An answer ready to send: what `send_exchange` needs, and nothing more.
struct Prepared {
    out: Vec<u8>,
    body: Body,
    /// Request body bytes to read past first.
    discard: u64,
    meta: Meta,
    status: u16,
    bytes: u64,
}

/// The part of a plan that has to wait for the socket.
enum Step {
    Send(Prepared),
    Script(Box<cgi::Job>, Meta),
}

enum Next {
    Step(Step),
    /// Check a password off the worker thread, then decide again.
    Verify(auth::Pending),
}

impl Conn {
    async fn run(&mut self) -> Result<(), End> {
        loop {
            if self.len == 0 {
                self.return_buffer();
                let limit = if self.served == 0 {
                    self.w.config.header_timeout
                } else {
                    self.w.config.keepalive_timeout
                };
                if !self.wait_for_request(limit).await {
                    return Ok(());
                }
            }
            // One request's work is boxed: an idle connection's task then holds
            // only the small wait above (784 bytes, against 2,952 unboxed),
            // for one allocation per request.
            if !Box::pin(self.serve_one()).await? {
                self.linger().await;
                return Ok(());
            }
        }
    }

    /// Reads one request head and answers it; whether the connection goes on.
    async fn serve_one(&mut self) -> Result<bool, End> {
        let deadline = Instant::now() + self.w.config.header_timeout;
        let mut verdict = None;
        let step = loop {
            match self.decide(verdict.take()) {
                Ok(Some(Next::Verify(pending))) => verdict = Some(pending.run().await),
                Ok(Some(Next::Step(step))) => break step,
                Ok(None) => match self.read_more(deadline).await {
                    Ok(0) => return Ok(false),
                    Ok(_) => {}
                    Err(End::Timeout) if self.len > 0 => {
                        return self.refuse(Status::RequestTimeout).await.map(|()| false);
                    }
                    Err(e) => return Err(e),
                },
                Err(Reject(status)) => return self.refuse(status).await.map(|()| false),
            }
        };
        self.served += 1;
        match step {
            Step::Send(prepared) => self.send_exchange(prepared).await,
            Step::Script(job, meta) => self.run_script(*job, meta).await,
        }
    }

    /// Parses the buffered bytes and, if a whole head is there, routes it,
    /// down to what has to wait for the socket: the large routed response
    /// is written into bytes here, and never lives in a future or moves
    /// through wrappers.
    fn decide(&mut self, verdict: Option<auth::Verdict>) -> Result<Option<Next>, Reject> {
        let Some(buf) = self.buf.as_deref() else {
            return Ok(None);
        };
        let mut headers = request::empty_headers();
        let Some(req) = request::parse(&buf[..self.len], &mut headers)? else {
            return Ok(None);
        };
        let client = router::Client {
            peer: self.peer,
            local: self.local,
        };
        let routed = match req.body {
            RequestBody::Length(n) if n > MAX_DISCARDED_BODY.max(self.w.config.cgi.max_body) => {
                Routed::Respond(Response::fatal(Status::ContentTooLarge))
            }
            _ => router::respond(&self.w.site, &req, &client, verdict),
        };
        let last = self.served + 1 >= self.w.config.max_requests;
        let meta = Meta {
            keep_alive: req.keep_alive && !last && !self.w.is_winding_down(),
            version: req.version,
            head_only: req.method == request::Method::Head,
            head_len: req.head_len,
            body: req.body,
            expects_continue: req
                .get(Field::Expect)
                .is_some_and(|e| e.eq_ignore_ascii_case(b"100-continue")),
            request_line: self.w.access_log.borrow().enabled().then(|| {
                let end = buf
                    .iter()
                    .position(|&b| b == b'\r' || b == b'\n')
                    .unwrap_or(0);
                buf[..end].to_vec()
            }),
        };
        Ok(Some(match routed {
            Routed::Respond(response) => {
                Next::Step(Step::Send(self.prepare_exchange(response, meta)))
            }
            Routed::Cgi(job) => Next::Step(Step::Script(job, meta)),
            Routed::Verify(pending) => Next::Verify(pending),
        }))
    }

    /// Turns a routed answer into bytes to send (the head, and the body when
    /// the server made it or keeps it in memory).
    fn prepare_exchange(&mut self, mut response: Response, mut meta: Meta) -> Prepared {
        // A chunked body, or one the client holds back for 100-continue,
        // is not worth reading on a static path: answer, then close.
        if meta.body == RequestBody::Chunked
            || (meta.expects_continue && meta.body != RequestBody::None)
        {
            response.close = true;
        }
        self.consume(meta.head_len);
        let discard = match meta.body {
            RequestBody::Length(n) if !response.close => n,
            _ => 0,
        };
        meta.keep_alive &= !response.close;
        let status = response.status.code();
        let bytes = if meta.head_only {
            0
        } else {
            response.body_len()
        };
        let (out, body) = self.prepare(response, meta.version, meta.keep_alive, meta.head_only);
        Prepared {
            out,
            body,
            discard,
            meta,
            status,
            bytes,
        }
    }

    /// Reads past the request body, sends the answer; whether the connection goes on.
    async fn send_exchange(&mut self, p: Prepared) -> Result<bool, End> {
        let Prepared {
            mut out,
            body,
            discard,
            meta,
            status,
            bytes,
        } = p;
        let sent = async {
            self.discard_body(discard).await?;
            self.send_body(&mut out, body).await
        }
        .await;
        self.w.pool.give_out(out);
        sent?;
        self.log_access(&meta, status, bytes);
        Ok(meta.keep_alive)
    }

    fn log_access(&self, meta: &Meta, status: u16, bytes: u64) {
        if let Some(line) = &meta.request_line {
            let entry = access_log::line(self.peer, line, status, bytes, Clock::now_secs());
            self.w.access_log.borrow_mut().write(&entry);
        }
    }

    /// Runs a CGI script: its body (streamed, or decoded first when chunked),
    /// its answer, its end. Returns whether the connection can go on.
    async fn run_script(&mut self, job: cgi::Job, mut meta: Meta) -> Result<bool, End> {
        self.consume(meta.head_len);
        let limits = &self.w.config.cgi;
        let has_body = meta.body != RequestBody::None;
        let early = match meta.body {
            RequestBody::Length(n) if n > limits.max_body => {
                Some(Response::fatal(Status::ContentTooLarge))
            }
            _ if !self.w.cgi_slot() => {
                let mut r = Response::fatal(Status::ServiceUnavailable);
                r.add_header(response::RETRY_SOON);
                Some(r)
            }
            _ => None,
        };
        if let Some(r) = early {
            let status = r.status.code();
            self.respond(r, meta.version, false, meta.head_only).await?;
            self.log_access(&meta, status, 0);
            return Ok(false);
        }
        let result = self.run_script_in_slot(job, &mut meta, has_body).await;
        self.w.release_cgi_slot();
        result
    }

    async fn run_script_in_slot(
        &mut self,
        mut job: cgi::Job,
        meta: &mut Meta,
        has_body: bool,
    ) -> Result<bool, End> {
        if has_body && meta.expects_continue && meta.version == Version::Http11 {
            self.sock()
                .send_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await?;
        }
        let body = match meta.body {
            RequestBody::None => cgi::Body {
                buffered: Vec::new(),
                on_socket: 0,
            },
            RequestBody::Length(n) => {
                let take = (self.len as u64).min(n) as usize;
                let buffered = self
                    .buf
                    .as_deref()
                    .map_or_else(Vec::new, |b| b[..take].to_vec());
                self.consume(take);
                cgi::Body {
                    buffered,
                    on_socket: n - take as u64,
                }
            }
            RequestBody::Chunked => match self.read_chunked().await {
                Ok(decoded) => {
                    job.set_content_length(decoded.len() as u64);
                    cgi::Body {
                        buffered: decoded,
                        on_socket: 0,
                    }
                }
                Err(status) => {
                    self.respond(Response::fatal(status), meta.version, false, false)
                        .await?;
                    self.log_access(meta, status.code(), 0);
                    return Ok(false);
                }
            },
        };
        let head_only = meta.head_only;
        let sock = self.sock();
        let outcome = cgi::run(self.w, sock, job, body, meta.version, meta.keep_alive).await?;
        if let Some(path) = outcome.local_redirect {
            let r = router::local(&self.w.site, &path, head_only);
            let (status, bytes) = (r.status.code(), if head_only { 0 } else { r.body_len() });
            self.respond(r, meta.version, meta.keep_alive, head_only)
                .await?;
            self.log_access(meta, status, bytes);
            return Ok(meta.keep_alive);
        }
        self.log_access(meta, outcome.status, outcome.bytes);
        Ok(meta.keep_alive && outcome.reusable)
    }

    /// Reads and decodes a chunked request body, up to the CGI body limit.
    async fn read_chunked(&mut self) -> Result<Vec<u8>, Status> {
        let deadline = Instant::now() + self.w.config.header_timeout;
        let max = self.w.config.cgi.max_body;
        let mut decoder = chunked::Decoder::default();
        let mut body = Vec::new();
        loop {
            if let Some(buf) = self.buf.as_deref() {
                let used = decoder
                    .feed(&buf[..self.len], &mut body)
                    .map_err(|_| Status::BadRequest)?;
                self.consume(used);
            }
            if body.len() as u64 > max {
                return Err(Status::ContentTooLarge);
            }
            if decoder.is_done() {
                return Ok(body);
            }
            match self.read_more(deadline).await {
                Ok(0) | Err(_) => return Err(Status::BadRequest),
                Ok(_) => {}
            }
        }
    }

    /// Answers a head that cannot be served. The caller then closes the connection (with `linger`).
    async fn refuse(&mut self, status: Status) -> Result<(), End> {
        self.len = 0;
        self.respond(Response::fatal(status), Version::Http11, false, false)
            .await
    }

    /// Sends a response. Not an `async fn`: the response is turned into bytes
    /// before the future exists, so the future does not carry it.
    fn respond(
        &mut self,
        r: Response,
        version: Version,
        keep_alive: bool,
        head_only: bool,
    ) -> impl std::future::Future<Output = Result<(), End>> + '_ {
        let (mut out, body) = self.prepare(r, version, keep_alive, head_only);
        async move {
            let result = self.send_body(&mut out, body).await;
            self.w.pool.give_out(out);
            result
        }
    }

    /// Writes the head (and a body the server made) into an output buffer,
    /// so that only the body to stream is kept across awaits: a connection's
    /// state stays small (it is what 1000 idle clients cost).
    fn prepare(
        &self,
        r: Response,
        version: Version,
        keep_alive: bool,
        head_only: bool,
    ) -> (Vec<u8>, Body) {
        let mut out = self.w.pool.out();
        self.w
            .write_head(&mut out, &r, version, keep_alive, &|_| {});
        if head_only || !r.status.has_body() {
            return (out, Body::Empty);
        }
        match r.body {
            Body::StatusPage => {
                response::write_status_page(&mut out, r.status);
                (out, Body::Empty)
            }
            Body::Owned(bytes) => {
                out.extend_from_slice(&bytes);
                (out, Body::Empty)
            }
            Body::File {
                bytes: Some(bytes),
                offset,
                len,
                ..
            } if out.len() as u64 + len <= OUT_BUF as u64 => {
                out.extend_from_slice(&bytes[offset as usize..(offset + len) as usize]);
                (out, Body::Empty)
            }
            body => (out, body),
        }
    }

    /// Sends the prepared head and then the body.
    async fn send_body(&mut self, out: &mut Vec<u8>, body: Body) -> Result<(), End> {
        match body {
            Body::File {
                file, offset, len, ..
            } if out.len() as u64 + len <= OUT_BUF as u64 => {
                let head = out.len();
                out.resize(head + len as usize, 0);
                // A file cut short since it was opened: close rather than send a wrong length.
                file.read_exact_at(&mut out[head..], offset)?;
                self.sock().send_all(out).await
            }
            Body::File {
                file, offset, len, ..
            } => {
                self.sock().send_head_more(out).await?;
                self.sock().send_file(&file, offset, len).await
            }
            Body::Gunzip { mut stream, len } => self.send_gunzipped(out, &mut stream, len).await,
            Body::Empty | Body::Script | Body::StatusPage | Body::Owned(_) => {
                self.sock().send_all(out).await
            }
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
            out.resize(OUT_BUF, 0);
            let n = stream.fill(&mut out[head..])?;
            out.truncate(head + n);
            sent += n as u64;
            if sent > len {
                return Err(End::Io);
            }
            self.sock().send_all(out).await?;
            out.clear();
            if n == 0 {
                return if sent == len { Ok(()) } else { Err(End::Io) };
            }
        }
    }

    /// Waits for the first byte of a request; false if the connection should close.
    async fn wait_for_request(&self, limit: Duration) -> bool {
        if self.w.is_stopping() {
            return false;
        }
        let readable = async {
            within(
                &self.w.deadlines,
                Instant::now() + limit,
                self.stream.readable(),
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
        future::or(readable, stopped).await
    }

    /// Reads more of a head into the buffer; `Ok(0)` at end of stream.
    async fn read_more(&mut self, deadline: Instant) -> Result<usize, End> {
        let buf = self.buf.get_or_insert_with(|| self.w.pool.head());
        let sock = Sock {
            stream: &self.stream,
            send_timeout: self.w.config.send_timeout,
            peer: self.peer,
            deadlines: &self.w.deadlines,
        };
        let n = sock.read_some(&mut buf[self.len..], deadline).await?;
        self.len += n;
        Ok(n)
    }

    /// Drops `n` bytes from the front of the buffer, keeping what follows.
    fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        // Usually the whole buffer is one request: nothing to move.
        if let (Some(buf), true) = (self.buf.as_deref_mut(), n < self.len) {
            buf.copy_within(n..self.len, 0);
        }
        self.len -= n;
    }

    /// Reads and throws away a request body so the next request can be parsed.
    async fn discard_body(&mut self, mut left: u64) -> Result<(), End> {
        let deadline = Instant::now() + self.w.config.header_timeout;
        loop {
            let take = (self.len as u64).min(left) as usize;
            self.consume(take);
            left -= take as u64;
            if left == 0 {
                return Ok(());
            }
            if self.read_more(deadline).await? == 0 {
                return Err(End::Closed);
            }
        }
    }

    /// Closes politely: stop sending, then read what the client still sends for
    /// a moment, so unread bytes do not turn our close into a reset that would
    /// destroy the response in flight.
    async fn linger(&mut self) {
        let _ = self.stream.get_ref().shutdown(Shutdown::Write);
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut budget = 64 * 1024;
        while budget > 0 {
            self.len = 0;
            match self.read_more(deadline).await {
                Ok(0) | Err(_) => break,
                Ok(n) => budget -= n.min(budget),
            }
        }
        self.len = 0;
    }

    fn sock(&self) -> Sock<'_> {
        Sock {
            stream: &self.stream,
            send_timeout: self.w.config.send_timeout,
            peer: self.peer,
            deadlines: &self.w.deadlines,
        }
    }

    fn return_buffer(&mut self) {
        if let Some(b) = self.buf.take() {
            self.w.pool.give_head(b);
        }
    }
}
