//! One proxied request: a backend connection from the pool, the head and
//! body sent, the answer head read within `proxy-timeout` and checked,
//! then the answer streamed to the client (or the connection tunnelled
//! after a 101). What happens to the client connection afterwards is the
//! caller's.

use std::time::Duration;

use futures_lite::future;

use crate::http::clock::Clock;
use crate::http::header::push_num;
use crate::http::request::{BodyKind, Version};
use crate::http::status::Status;
use crate::limits::HEAD_BUF;
use crate::net::buffers;
use crate::net::input::Input;
use crate::net::sock::{End, Sock};
use crate::proxy::answer::{self, Framing, Head};
use crate::proxy::backend::{Failed, Stream};
use crate::proxy::outgoing::Forward;
use crate::proxy::pool::{Lease, Pool, Unavailable};
use crate::proxy::relay::{self, BodyError, Cut, ToClient, Waits};
use crate::proxy::settings::Settings;
use crate::proxy::tunnel;

pub struct Exchange<'a> {
    pub sock: &'a Sock,
    pub input: &'a mut Input,
    pub pool: &'static Pool,
    pub buffers: &'a buffers::Pool,
    pub clock: &'a Clock,
    pub settings: &'a Settings,
    pub waits: Waits,
    /// A tunnel's idle limit (`keepalive-timeout`).
    pub idle: Duration,
    pub version: Version,
    /// The client's request allows keep-alive.
    pub keep_alive: bool,
    pub expects_continue: bool,
}

pub enum Outcome {
    /// The backend's answer went out.
    Sent {
        status: u16,
        bytes: u64,
        /// The client connection may carry another request.
        reusable: bool,
    },
    /// Nothing went out: the connection answers with this status.
    Failed {
        status: Status,
        /// The request body was read to its end.
        body_read: bool,
    },
}

/// Why no answer head came.
enum NoHead {
    Backend(Failed, bool),
    Invalid(&'static str),
    Body(BodyError),
}

impl Exchange<'_> {
    pub async fn run(&mut self, fwd: &Forward) -> Result<Outcome, End> {
        let Some(route) = self.settings.routes.get(fwd.route) else {
            return Ok(self.failed(Status::BadGateway, fwd));
        };
        let name = &route.backend;
        if let (BodyKind::Length(n), Some(max)) = (fwd.body, self.settings.max_body) {
            if n > max {
                return Ok(self.failed(Status::ContentTooLarge, fwd));
            }
        }
        let until = self.waits.backend_until();
        let deadlines = self.waits.deadlines;
        let mut lease = match self.pool.take(fwd.route, name, deadlines, until).await {
            Ok(l) => l,
            Err(Unavailable::Busy) => {
                log::warn!("proxy {name}: {} connections open; 503", self.settings.max);
                return Ok(self.failed(Status::ServiceUnavailable, fwd));
            }
            Err(Unavailable::Failed(f)) => return Ok(self.unreachable(name, f, fwd)),
        };
        if fwd.body != BodyKind::None && self.expects_continue && self.version == Version::Http11 {
            self.sock.send_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        let mut buf = self.buffers.out();
        let mut retried = false;
        let result = loop {
            let got = self.send_and_read_head(fwd, &lease.stream, &mut buf).await;
            match got {
                Err(NoHead::Backend(Failed::Closed, false))
                    if lease.reused && fwd.retry_safe && !retried =>
                {
                    log::debug!("proxy {name}: kept connection closed under a request; again");
                    retried = true;
                    lease = match self.pool.connect(name, deadlines, until).await {
                        Ok(l) => l,
                        Err(Unavailable::Busy) => {
                            break Ok(self.failed(Status::ServiceUnavailable, fwd));
                        }
                        Err(Unavailable::Failed(f)) => break Ok(self.unreachable(name, f, fwd)),
                    };
                }
                Err(NoHead::Backend(Failed::Timeout, _)) => {
                    log::warn!(
                        "proxy {name}: no answer within {}s; 504",
                        self.waits.backend.as_secs()
                    );
                    break Ok(self.failed(Status::GatewayTimeout, fwd));
                }
                Err(NoHead::Backend(_, _)) => {
                    log::warn!("proxy {name}: closed the connection before answering; 502");
                    break Ok(self.failed(Status::BadGateway, fwd));
                }
                Err(NoHead::Invalid(why)) => {
                    log::warn!("proxy {name}: invalid answer: {why}; 502");
                    break Ok(self.failed(Status::BadGateway, fwd));
                }
                Err(NoHead::Body(BodyError::Client)) => {
                    log::info!("proxy {name}: the client stopped sending its body");
                    break Err(End::Closed);
                }
                Err(NoHead::Body(BodyError::Malformed)) => {
                    break Ok(self.failed(Status::BadRequest, fwd));
                }
                Err(NoHead::Body(BodyError::TooLarge)) => {
                    break Ok(self.failed(Status::ContentTooLarge, fwd));
                }
                Err(NoHead::Body(BodyError::Backend)) => {
                    log::warn!("proxy {name}: stopped taking the request body; 502");
                    break Ok(self.failed(Status::BadGateway, fwd));
                }
                Ok((head, got, body_sent)) => {
                    break self.answer(fwd, lease, head, &buf[..got], body_sent).await;
                }
            }
        };
        self.buffers.give_out(buf);
        result
    }

    /// Sends the request and reads the answer head, the request body
    /// going out meanwhile. An answer before the whole body is taken ends
    /// the sending: the rest stays unread. Interim 1xx answers are passed
    /// over. Gives the head, the bytes read, and whether the body all went.
    async fn send_and_read_head(
        &mut self,
        fwd: &Forward,
        stream: &Stream,
        buf: &mut Vec<u8>,
    ) -> Result<(Head, usize, bool), NoHead> {
        let deadlines = self.waits.deadlines;
        let until = self.waits.backend_until();
        stream
            .write_all(&fwd.head, deadlines, until)
            .await
            .map_err(|f| NoHead::Backend(f, false))?;
        let waits = self.waits;
        let max = self.settings.max_body;
        let sending = relay::request_body(self.sock, self.input, fwd.body, max, stream, waits);
        let reading = read_head(stream, buf, fwd, waits);
        let body_sent = std::cell::Cell::new(fwd.body == BodyKind::None);
        let sending = async {
            match sending.await {
                Ok(()) => {
                    body_sent.set(true);
                    future::pending().await
                }
                Err(e) => Err(NoHead::Body(e)),
            }
        };
        let (head, got) = future::or(reading, sending).await?;
        Ok((head, got, body_sent.get()))
    }

    /// Sends the checked answer on: head, then body or tunnel.
    async fn answer(
        &mut self,
        fwd: &Forward,
        lease: Lease,
        head: Head,
        got: &[u8],
        body_sent: bool,
    ) -> Result<Outcome, End> {
        let name = &self.settings.routes[fwd.route].backend;
        let first = &got[head.head_len..];
        let upgrading = head.status == 101;
        let to_client = match head.framing {
            Framing::Length(n) => ToClient::Length(n),
            Framing::None => ToClient::Length(0),
            _ if self.version == Version::Http11 => ToClient::Chunked,
            _ => ToClient::Close,
        };
        let keep_alive = self.keep_alive && to_client != ToClient::Close && body_sent;
        let mut out = self.buffers.out();
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(head.status_text.as_bytes());
        {
            let start = self.clock.head_start();
            let ok_line = Status::Ok.line().len();
            out.extend_from_slice(start.get(ok_line..).unwrap_or_default());
        }
        out.extend_from_slice(&head.fields);
        match (head.framing, to_client) {
            (Framing::None, _) => {
                if let (Some(n), false) = (head.length, head.status == 204) {
                    out.extend_from_slice(b"\r\nContent-Length: ");
                    push_num(&mut out, n);
                }
            }
            (_, ToClient::Length(n)) => {
                out.extend_from_slice(b"\r\nContent-Length: ");
                push_num(&mut out, n);
            }
            (_, ToClient::Chunked) => out.extend_from_slice(b"\r\nTransfer-Encoding: chunked"),
            (_, ToClient::Close) => {}
        }
        let end: &[u8] = match (upgrading, keep_alive, self.version) {
            (true, _, _) => b"\r\nConnection: upgrade\r\n\r\n",
            (_, false, Version::Http11) => b"\r\nConnection: close\r\n\r\n",
            (_, true, Version::Http10) => b"\r\nConnection: keep-alive\r\n\r\n",
            _ => b"\r\n\r\n",
        };
        out.extend_from_slice(end);
        let status = head.status;
        if upgrading {
            let sent = self.sock.send_all(&out).await;
            let sent = match sent {
                Ok(()) => self.sock.send_all(first).await,
                e => e,
            };
            self.buffers.give_out(out);
            sent?;
            let from_client = self.input.take(u64::MAX);
            let carried = tunnel::run(
                self.sock,
                &lease.stream,
                from_client,
                self.waits.deadlines,
                self.idle,
            )
            .await;
            return Ok(Outcome::Sent {
                status,
                bytes: carried.to_client,
                reusable: false,
            });
        }
        let body = relay::answer_body(
            self.sock,
            &lease.stream,
            first,
            head.framing,
            to_client,
            &mut out,
            self.waits,
        );
        // The head goes out with the first piece of body.
        let relayed = body.await;
        self.buffers.give_out(out);
        match relayed {
            Ok(r) => {
                if r.clean && head.reusable && body_sent {
                    self.pool.give_back(fwd.route, lease);
                }
                Ok(Outcome::Sent {
                    status,
                    bytes: r.bytes,
                    reusable: keep_alive,
                })
            }
            Err(Cut::Client(e)) => {
                log::info!("proxy {name}: the client left mid-answer; connection dropped");
                Err(e)
            }
            Err(Cut::BeforeHead(why)) => {
                log::warn!("proxy {name}: invalid answer: {why}; 502");
                Ok(self.failed(Status::BadGateway, fwd))
            }
            Err(Cut::Backend(why)) => {
                log::warn!("proxy {name}: answer {why}; cut");
                Err(End::Io)
            }
        }
    }

    fn unreachable(
        &self,
        name: &crate::proxy::settings::Address,
        f: Failed,
        fwd: &Forward,
    ) -> Outcome {
        if f == Failed::Timeout {
            log::warn!("proxy {name}: connect timed out; 504");
            return self.failed(Status::GatewayTimeout, fwd);
        }
        log::warn!("proxy {name}: cannot connect; 502");
        self.failed(Status::BadGateway, fwd)
    }

    fn failed(&self, status: Status, fwd: &Forward) -> Outcome {
        Outcome::Failed {
            status,
            body_read: fwd.body == BodyKind::None,
        }
    }
}

/// Reads until a whole final answer head is in `buf` (1xx other than 101
/// passed over); gives the head and the bytes in `buf`.
async fn read_head(
    stream: &Stream,
    buf: &mut Vec<u8>,
    fwd: &Forward,
    waits: Waits,
) -> Result<(Head, usize), NoHead> {
    let until = waits.backend_until();
    buf.clear();
    buf.resize(HEAD_BUF, 0);
    let mut got = 0;
    let mut any = false;
    loop {
        if got > 0 {
            match answer::parse(&buf[..got], fwd.head_only, fwd.upgrade) {
                Ok(Some(h)) if h.status == 101 && !fwd.upgrade => {
                    return Err(NoHead::Invalid("101 to a request without Upgrade"));
                }
                Ok(Some(h)) if (100..200).contains(&h.status) && h.status != 101 => {
                    buf.copy_within(h.head_len..got, 0);
                    got -= h.head_len;
                    continue;
                }
                Ok(Some(h)) => return Ok((h, got)),
                Ok(None) if got == buf.len() => {
                    return Err(NoHead::Invalid("head larger than the limit"));
                }
                Ok(None) => {}
                Err(answer::Invalid(why)) => return Err(NoHead::Invalid(why)),
            }
        }
        match stream
            .read_some(&mut buf[got..], waits.deadlines, until)
            .await
        {
            Ok(0) => return Err(NoHead::Backend(Failed::Closed, any)),
            Ok(n) => {
                got += n;
                any = true;
            }
            Err(f) => return Err(NoHead::Backend(f, any)),
        }
    }
}
