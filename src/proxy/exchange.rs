//! One proxied request: a backend connection from the pool, the head and
//! body sent, the answer head read within `proxy-timeout` and checked,
//! then the answer streamed to the client (or the connection tunnelled
//! after a 101). What happens to the client connection afterwards is the
//! caller's.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::time::{Duration, Instant};

use futures_lite::future;

use crate::http::clock::Clock;
use crate::http::header::push_num;
use crate::http::request::{BodyKind, Version};
use crate::http::status::Status;
use crate::limits::{HEAD_BUF, PROXY_GONE_GRACE, PROXY_LONG_AFTER};
use crate::net::buffers;
use crate::net::client::Client;
use crate::net::hangup;
use crate::net::input::Input;
use crate::net::pace::Pace;
use crate::net::sock::{End, Sock};
use crate::proxy::answer::{self, Framing, Head};
use crate::proxy::backend::{Failed, Stream};
use crate::proxy::outgoing::Forward;
use crate::proxy::pool::{Lease, Pool, Unavailable};
use crate::proxy::relay::{self, BodyError, Cut, ToClient, Waits};
use crate::proxy::settings::{Backend, Settings};
use crate::proxy::tunnel;

#[derive(Clone, Copy)]
pub struct Exchange<'a> {
    pub sock: &'a Sock,
    pub pool: &'a Pool,
    pub buffers: &'a buffers::Pool,
    pub clock: &'a Clock,
    pub settings: &'a Settings,
    /// Who the request is from, for the per-client share.
    pub client: Client,
    pub waits: Waits,
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
    /// The backend failed; whether any byte of answer had come.
    Backend(Failed, bool),
    Invalid(&'static str),
    Body(BodyError),
}

/// The client left while its request waited on the backend.
struct ClientGone;

/// Why a long-lived answer was ended early.
enum Stop {
    /// It outgrew the short requests' room and the long-lived budget is full.
    NoRoom,
    /// It passed no login, was the oldest such, and a newcomer needed its place.
    CutForAnother,
    ClientGone,
}

/// How one try on a backend connection ended.
enum Attempt {
    Done(Outcome),
    /// A kept connection failed before any byte of answer: once more on a new one.
    Again,
}

impl Exchange<'_> {
    pub async fn run(&self, input: &mut Input, fwd: &Forward) -> Result<Outcome, End> {
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
        let client = self.client;
        let mut lease = match self
            .pool
            .take(fwd.route, name, client, fwd.logged_in, deadlines, until)
            .await
        {
            Ok(l) => l,
            Err(e) => return Ok(self.unavailable(name, e, fwd)),
        };
        if fwd.body != BodyKind::None && self.expects_continue && self.version == Version::Http11 {
            self.sock.send_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        let mut buf = self.buffers.out();
        let mut may_retry = true;
        let result = loop {
            match self.attempt(input, fwd, lease, &mut buf, may_retry).await {
                Ok(Attempt::Again) => {
                    log::debug!("proxy {name}: kept connection closed under a request; again");
                    may_retry = false;
                    let again = self
                        .pool
                        .connect(name, client, fwd.logged_in, deadlines, until);
                    lease = match again.await {
                        Ok(l) => l,
                        Err(e) => break Ok(self.unavailable(name, e, fwd)),
                    };
                }
                Ok(Attempt::Done(outcome)) => break Ok(outcome),
                Err(e) => break Err(e),
            }
        };
        self.buffers.give_out(buf);
        result
    }

    /// Sends the request on `lease` and relays the answer. The request
    /// body goes out while the answer head is awaited, and on while the
    /// answer streams if the backend answers before taking all of it.
    async fn attempt(
        &self,
        input: &mut Input,
        fwd: &Forward,
        lease: Lease,
        buf: &mut Vec<u8>,
        may_retry: bool,
    ) -> Result<Attempt, End> {
        let retry = may_retry && lease.reused && fwd.retry_safe;
        let name = &self.settings.routes[fwd.route].backend;
        let stream = &lease.stream;
        let until = self.waits.backend_until();
        if let Err(f) = stream
            .write_all(&fwd.head, self.waits.deadlines, until)
            .await
        {
            return Ok(self.no_head(fwd, NoHead::Backend(f, false), retry));
        }
        let relayed = {
            let body_done = Cell::new(fwd.body == BodyKind::None);
            let body_failed = Cell::new(None);
            let max = self.settings.max_body;
            let pace = Pace::new(self.settings.body_rate, self.waits.client);
            let sending = pin!(async {
                let waits = self.waits;
                match relay::request_body(self.sock, input, fwd.body, max, stream, waits, &pace)
                    .await
                {
                    Ok(()) => body_done.set(true),
                    Err(e) => body_failed.set(Some(e)),
                }
            });
            let mut sending = sending;
            let finished = Cell::new(false);
            // The backend's time to answer runs from the end of the body:
            // a large upload on a slow link may take longer than that.
            let head = future::or(
                async { Ok(read_head(stream, buf, fwd, self.waits).await) },
                async {
                    (&mut sending).await;
                    finished.set(true);
                    match body_failed.take() {
                        Some(e) => Ok(Err(NoHead::Body(e))),
                        None => self.no_answer_yet().await,
                    }
                },
            )
            .await;
            let (head, got) = match head {
                Ok(Ok(h)) => h,
                Ok(Err(e)) => return Ok(self.no_head(fwd, e, retry)),
                Err(ClientGone) => {
                    log::info!("proxy {name}: the client left before the answer; dropped");
                    return Err(End::Closed);
                }
            };
            let long_now = head.status == 101 || head.streaming;
            if long_now && !self.pool.go_long(&lease) {
                let n = self.settings.streams();
                log::warn!("proxy {name}: {n} long-lived answers open, all logged in; 503");
                return Ok(Attempt::Done(self.failed(Status::ServiceUnavailable, fwd)));
            }
            let unframed = !long_now && matches!(head.framing, Framing::Chunked | Framing::Close);
            let streaming = head.streaming && head.status != 101;
            let rest_of_body = async {
                if !finished.get() {
                    sending.await;
                }
            };
            let answered = Answered {
                head,
                got: &buf[..got],
                body_done: &body_done,
            };
            let answering = self.answer(fwd, stream, answered, rest_of_body);
            let watch = self.watch_long(&lease, unframed, streaming, &body_done);
            match future::or(async { Ok(answering.await) }, async { Err(watch.await) }).await {
                Ok(answered) => answered?,
                Err(Stop::NoRoom) => {
                    let n = self.settings.streams();
                    log::warn!(
                        "proxy {name}: {n} long-lived answers open, all logged in; a stream cut"
                    );
                    return Err(End::Closed);
                }
                Err(Stop::CutForAnother) => {
                    log::info!("proxy {name}: a stream without a login cut for a newcomer");
                    return Err(End::Closed);
                }
                Err(Stop::ClientGone) => {
                    log::info!("proxy {name}: the client of a stream left; dropped");
                    return Err(End::Closed);
                }
            }
        };
        let (outcome, reuse) = match relayed {
            Relayed::Answered(outcome, reuse) => (outcome, reuse),
            Relayed::Switched(status) => {
                // Only now, after the 101, are the bytes the client sent
                // after its head the tunnel's; any other answer leaves them
                // to be the connection's next request.
                let early = input.take(u64::MAX);
                let idle = self.settings.tunnel_timeout;
                let carried = tunnel::run(self.sock, stream, early, self.waits.deadlines, idle);
                let cut = lease.cut();
                let cut = async {
                    match cut {
                        Some(c) => c.wait().await,
                        None => future::pending().await,
                    }
                };
                let Some(carried) = future::or(async { Some(carried.await) }, async {
                    cut.await;
                    None
                })
                .await
                else {
                    log::info!("proxy {name}: a tunnel without a login cut for a newcomer");
                    return Err(End::Closed);
                };
                let sent = Outcome::Sent {
                    status,
                    bytes: carried.to_client,
                    reusable: false,
                };
                (sent, false)
            }
        };
        if reuse {
            self.pool.give_back(fwd.route, lease);
        }
        Ok(Attempt::Done(outcome))
    }

    /// Sends the checked answer on: head, then body, or only the head of a 101.
    async fn answer(
        &self,
        fwd: &Forward,
        stream: &Stream,
        answered: Answered<'_>,
        rest_of_body: impl Future<Output = ()>,
    ) -> Result<Relayed, End> {
        let Answered {
            head,
            got,
            body_done,
        } = answered;
        let name = &self.settings.routes[fwd.route].backend;
        let first = &got[head.head_len..];
        let upgrading = head.status == 101;
        let to_client = match head.framing {
            Framing::Length(n) => ToClient::Length(n),
            Framing::None => ToClient::Length(0),
            _ if self.version == Version::Http11 => ToClient::Chunked,
            _ => ToClient::Close,
        };
        // A body still coming leaves the connection unusable after.
        let keep_alive = self.keep_alive && to_client != ToClient::Close && body_done.get();
        let mut out = self.buffers.out();
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(head.status_text.as_bytes());
        {
            let start = self.clock.head_start(self.sock.deadlines.wall_secs());
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
            return Ok(Relayed::Switched(status));
        }
        // The head goes out with the first piece of body.
        let body = relay::answer_body(
            self.sock,
            stream,
            first,
            head.framing,
            to_client,
            &mut out,
            self.waits,
        );
        let relayed = future::or(body, async {
            rest_of_body.await;
            future::pending().await
        })
        .await;
        self.buffers.give_out(out);
        match relayed {
            Ok(r) => {
                let sent = Outcome::Sent {
                    status,
                    bytes: r.bytes,
                    reusable: keep_alive,
                };
                let reuse = r.clean && head.reusable && body_done.get();
                Ok(Relayed::Answered(sent, reuse))
            }
            Err(Cut::Client(e)) => {
                log::info!("proxy {name}: the client left mid-answer; connection dropped");
                Err(e)
            }
            Err(Cut::BeforeHead(why)) => {
                log::warn!("proxy {name}: invalid answer: {why}; 502");
                Ok(Relayed::Answered(
                    self.failed(Status::BadGateway, fwd),
                    false,
                ))
            }
            Err(Cut::Backend(why)) => {
                log::warn!("proxy {name}: answer {why}; cut");
                Err(End::Io)
            }
        }
    }

    /// Ends a long-lived answer early: one without a length still coming
    /// after `PROXY_LONG_AFTER` when the long-lived answers are at their
    /// limit, or one whose client has left (watched once the request body
    /// is in: a stream may go quiet for minutes).
    async fn watch_long(
        &self,
        lease: &Lease,
        unframed: bool,
        streaming: bool,
        body_done: &Cell<bool>,
    ) -> Stop {
        if unframed {
            let at = Instant::now() + PROXY_LONG_AFTER;
            self.waits.deadlines.until(at).await;
            if !self.pool.go_long(lease) {
                return Stop::NoRoom;
            }
        }
        let cut = lease.cut();
        let cut = async {
            match cut {
                Some(c) => c.wait().await,
                None => future::pending().await,
            }
            Stop::CutForAnother
        };
        let gone = async {
            if !(unframed || streaming) || !body_done.get() {
                return future::pending().await;
            }
            hangup::client_gone(self.sock).await;
            let at = Instant::now() + PROXY_GONE_GRACE;
            self.waits.deadlines.until(at).await;
            Stop::ClientGone
        };
        future::or(cut, gone).await
    }

    /// Waits out the backend's time to answer once the request is all
    /// sent; a client that leaves meanwhile frees the connection after a
    /// short grace instead.
    async fn no_answer_yet<T>(&self) -> Result<Result<T, NoHead>, ClientGone> {
        let timeout = async {
            self.waits.deadlines.until(self.waits.backend_until()).await;
            Ok(Err(NoHead::Backend(Failed::Timeout, false)))
        };
        let gone = async {
            hangup::client_gone(self.sock).await;
            let at = Instant::now() + PROXY_GONE_GRACE;
            self.waits.deadlines.until(at).await;
            Err(ClientGone)
        };
        future::or(timeout, gone).await
    }

    /// What a request that got no answer head comes to, logged once.
    fn no_head(&self, fwd: &Forward, why: NoHead, retry: bool) -> Attempt {
        let name = &self.settings.routes[fwd.route].backend;
        let status = match why {
            NoHead::Backend(Failed::Closed, false) if retry => return Attempt::Again,
            NoHead::Backend(Failed::Timeout, _) => {
                let secs = self.waits.backend.as_secs();
                log::warn!("proxy {name}: no answer within {secs}s; 504");
                Status::GatewayTimeout
            }
            NoHead::Backend(_, _) => {
                log::warn!("proxy {name}: closed the connection before answering; 502");
                Status::BadGateway
            }
            NoHead::Invalid(why) => {
                log::warn!("proxy {name}: invalid answer: {why}; 502");
                Status::BadGateway
            }
            NoHead::Body(BodyError::Client) => {
                log::info!("proxy {name}: the client stopped sending its body");
                Status::RequestTimeout
            }
            NoHead::Body(BodyError::Malformed) => Status::BadRequest,
            NoHead::Body(BodyError::TooLarge) => Status::ContentTooLarge,
            NoHead::Body(BodyError::Backend) => {
                log::warn!("proxy {name}: stopped taking the request body; 502");
                Status::BadGateway
            }
        };
        Attempt::Done(self.failed(status, fwd))
    }

    /// No connection to the backend: 503 at `proxy-max`, else 502 (504 if
    /// connecting timed out).
    fn unavailable(&self, name: &Backend, e: Unavailable, fwd: &Forward) -> Outcome {
        let status = match e {
            Unavailable::Busy => {
                log::warn!("proxy {name}: {} connections open; 503", self.settings.max);
                Status::ServiceUnavailable
            }
            Unavailable::ClientShare => {
                let (ip, n) = (self.sock.peer.ip(), self.settings.per_client());
                log::warn!("proxy {name}: {ip} holds {n} connections; 503");
                Status::ServiceUnavailable
            }
            Unavailable::NetShare => {
                let (net, n) = (self.client.net(), self.settings.per_net());
                log::warn!("proxy {name}: {net} holds {n} connections without a login; 503");
                Status::ServiceUnavailable
            }
            Unavailable::Anonymous => {
                let n = self.settings.max - self.settings.auth_reserve();
                log::warn!(
                    "proxy {name}: {n} connections held without a login, the rest kept for logged-in requests; 503"
                );
                Status::ServiceUnavailable
            }
            Unavailable::Failed(Failed::Timeout) => {
                log::warn!("proxy {name}: connect timed out; 504");
                Status::GatewayTimeout
            }
            Unavailable::Failed(_) => {
                log::warn!("proxy {name}: cannot connect; 502");
                Status::BadGateway
            }
        };
        self.failed(status, fwd)
    }

    fn failed(&self, status: Status, fwd: &Forward) -> Outcome {
        Outcome::Failed {
            status,
            body_read: fwd.body == BodyKind::None,
        }
    }
}

/// How the backend's answer went on to the client.
enum Relayed {
    /// The outcome, and whether the backend connection can be kept.
    Answered(Outcome, bool),
    /// A 101 went out: the connection is a tunnel from here.
    Switched(u16),
}

/// A checked answer head, the bytes read with it, and whether the request
/// body had all gone when it came.
struct Answered<'a> {
    head: Head,
    got: &'a [u8],
    body_done: &'a Cell<bool>,
}

/// Far enough to be no limit: a wait another future bounds.
const NO_LIMIT: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// Reads until a whole final answer head is in `buf` (1xx other than 101
/// passed over); gives the head and the bytes in `buf`. It sets no time
/// limit of its own: the caller's, from the end of the request body, does.
async fn read_head(
    stream: &Stream,
    buf: &mut Vec<u8>,
    fwd: &Forward,
    waits: Waits,
) -> Result<(Head, usize), NoHead> {
    let until = Instant::now() + NO_LIMIT;
    buf.clear();
    buffers::zeroed_to(buf, HEAD_BUF);
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
