//! One client connection: read a head (keeping pipelined bytes), let the
//! router answer, write the answer, and decide whether to go on. Every wait
//! has a deadline: the head timeout for a request being received, the
//! keep-alive timeout between requests, the send timeout for a stalled client.

use std::net::{Shutdown, SocketAddr};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use futures_lite::future;

use crate::access_log;
use crate::buffers::OUT_BUF;
use crate::clock::Clock;
use crate::gunzip::Gunzip;
use crate::limits::{HEAD_BUF, MAX_DISCARDED_BODY};
use crate::request::{self, Body as RequestBody, Reject, Version};
use crate::response::{self, Body, HeadContext, Response};
use crate::router;
use crate::sock::{End, Sock, within};
use crate::status::Status;
use crate::worker::{Stream, Worker};

pub async fn serve(w: &'static Worker, stream: Stream, peer: SocketAddr) {
    let mut conn = Conn {
        w,
        stream,
        peer,
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
    /// Head buffer, held only while bytes are pending; `len` bytes are valid.
    buf: Option<Box<[u8; HEAD_BUF]>>,
    len: usize,
    served: u32,
}

/// What a parsed request needs once the buffer it was parsed from moves on.
struct Exchange {
    response: Response,
    version: Version,
    keep_alive: bool,
    head_only: bool,
    head_len: usize,
    body: RequestBody,
    request_line: Option<Vec<u8>>,
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
            let deadline = Instant::now() + self.w.config.header_timeout;
            let exchange = loop {
                match self.decide() {
                    Ok(Some(x)) => break x,
                    Ok(None) => {}
                    Err(Reject(status)) => return self.refuse(status).await,
                }
                match self.read_more(deadline).await {
                    Ok(0) => return Ok(()),
                    Ok(_) => {}
                    Err(End::Timeout) if self.len > 0 => {
                        return self.refuse(Status::RequestTimeout).await;
                    }
                    Err(e) => return Err(e),
                }
            };
            self.served += 1;
            let keep_alive = exchange.keep_alive;
            self.exchange(exchange).await?;
            if !keep_alive {
                self.linger().await;
                return Ok(());
            }
        }
    }

    /// Parses the buffered bytes and, if a whole head is there, routes it.
    fn decide(&mut self) -> Result<Option<Exchange>, Reject> {
        let Some(buf) = self.buf.as_deref() else {
            return Ok(None);
        };
        let mut headers = request::empty_headers();
        let Some(req) = request::parse(&buf[..self.len], &mut headers)? else {
            return Ok(None);
        };
        let mut response = match req.body {
            RequestBody::Length(n) if n > MAX_DISCARDED_BODY => {
                Response::fatal(Status::ContentTooLarge)
            }
            _ => router::respond(&self.w.site, &req),
        };
        // A chunked body, or one the client holds back for 100-continue, is not
        // worth reading on a static path: answer, then close.
        let expects = req.header("expect").is_some();
        if req.body == RequestBody::Chunked || (expects && req.body != RequestBody::None) {
            response.close = true;
        }
        let last = self.served + 1 >= self.w.config.max_requests;
        let request_line = self.w.access_log.borrow().enabled().then(|| {
            let end = buf
                .iter()
                .position(|&b| b == b'\r' || b == b'\n')
                .unwrap_or(0);
            buf[..end].to_vec()
        });
        Ok(Some(Exchange {
            keep_alive: req.keep_alive && !response.close && !last && !self.w.is_stopping(),
            version: req.version,
            head_only: req.method == request::Method::Head,
            head_len: req.head_len,
            body: req.body,
            response,
            request_line,
        }))
    }

    async fn exchange(&mut self, x: Exchange) -> Result<(), End> {
        self.consume(x.head_len);
        if let RequestBody::Length(n) = x.body {
            if !x.response.close {
                self.discard_body(n).await?;
            }
        }
        let status = x.response.status.code();
        let bytes = if x.head_only {
            0
        } else {
            x.response.body_len()
        };
        self.respond(x.response, x.version, x.keep_alive, x.head_only)
            .await?;
        if let Some(line) = x.request_line {
            let entry = access_log::line(self.peer, &line, status, bytes, Clock::now_secs());
            self.w.access_log.borrow_mut().write(&entry);
        }
        Ok(())
    }

    /// Answers a head that cannot be served and closes.
    async fn refuse(&mut self, status: Status) -> Result<(), End> {
        self.len = 0;
        self.respond(Response::fatal(status), Version::Http11, false, false)
            .await?;
        self.linger().await;
        Ok(())
    }

    async fn respond(
        &mut self,
        r: Response,
        version: Version,
        keep_alive: bool,
        head_only: bool,
    ) -> Result<(), End> {
        let mut out = self.w.pool.out();
        let date = self.w.clock.date();
        let cx = HeadContext {
            version,
            keep_alive,
            date: &date,
            server: self.w.config.server_name.as_deref(),
        };
        response::write_head(&mut out, &r, &cx);
        let result = self.send_body(&mut out, r, head_only).await;
        self.w.pool.give_out(out);
        result
    }

    async fn send_body(
        &mut self,
        out: &mut Vec<u8>,
        r: Response,
        head_only: bool,
    ) -> Result<(), End> {
        if head_only || !r.status.has_body() {
            return self.sock().send_all(out).await;
        }
        match r.body {
            Body::Empty => self.sock().send_all(out).await,
            Body::StatusPage => {
                response::write_status_page(out, r.status);
                self.sock().send_all(out).await
            }
            Body::Owned(bytes) => {
                out.extend_from_slice(&bytes);
                self.sock().send_all(out).await
            }
            Body::File { file, offset, len } if out.len() as u64 + len <= OUT_BUF as u64 => {
                let head = out.len();
                out.resize(head + len as usize, 0);
                // A file cut short since it was opened: close rather than send a wrong length.
                file.read_exact_at(&mut out[head..], offset)?;
                self.sock().send_all(out).await
            }
            Body::File { file, offset, len } => {
                self.sock().send_head_more(out).await?;
                self.sock().send_file(&file, offset, len).await
            }
            Body::Gunzip { mut stream, len } => self.send_gunzipped(out, &mut stream, len).await,
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
            within(limit, self.stream.readable())
                .await
                .is_some_and(|r| r.is_ok())
        };
        let stopped = async {
            self.w.stop.notified().await;
            false
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
        };
        let n = sock.read_some(&mut buf[self.len..], deadline).await?;
        self.len += n;
        Ok(n)
    }

    /// Drops `n` bytes from the front of the buffer, keeping what follows.
    fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        if let Some(buf) = self.buf.as_deref_mut() {
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
        }
    }

    fn return_buffer(&mut self) {
        if let Some(b) = self.buf.take() {
            self.w.pool.give_head(b);
        }
    }
}
