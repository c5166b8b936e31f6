//! One request on the endpoint, from its body to the answer on the
//! client's socket: JSON answers leave in one write (head and body
//! together, so a small answer never waits on the client's delayed ACK);
//! an event stream sends each notification as it comes.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use futures_lite::future;

use crate::http::chunked;
use crate::http::clock::Clock;
use crate::http::header::{RETRY_AFTER_LOGINS, push_num};
use crate::http::request::{BodyKind, Version};
use crate::http::response::{self, Body, HeadContext, Response};
use crate::http::status::Status;
use crate::limits::{UBUS_ANONYMOUS_WAIT, UBUS_MAX_BODY};
use crate::net::buffers;
use crate::net::client::Client;
use crate::net::hangup::client_gone;
use crate::net::input::Input;
use crate::net::notify::Notify;
use crate::net::sock::{End, Sock};
use crate::policy::failures::Failures;
use crate::ubus::asked::{Asked, Kind};
use crate::ubus::bus::Bus;
use crate::ubus::rpc::{self, Rpc};
use crate::ubus::settings::Settings;

const JSON: &str = "application/json";

pub struct Exchange<'a> {
    pub sock: &'a Sock,
    /// Who the client is, for its share of the calls.
    pub client: Client,
    pub bus: &'a Bus,
    /// Login failures, counted for `session.login` as for Basic auth.
    pub failures: &'a RefCell<Failures>,
    pub settings: &'a Settings,
    pub clock: &'a Clock,
    /// How long the request body may take to arrive.
    pub body_timeout: Duration,
    pub version: Version,
    pub keep_alive: bool,
    /// The client waits for `100 Continue` before its body (curl does
    /// for bodies over 1 KiB).
    pub expects_continue: bool,
    /// Woken when the worker stops; `stopping` says whether it does.
    pub stop: &'a Notify,
    pub stopping: &'a dyn Fn() -> bool,
}

/// What went out, for the access log.
pub struct Outcome {
    pub status: u16,
    pub bytes: u64,
    pub keep_alive: bool,
}

/// An answer before it is written.
struct Answer {
    status: Status,
    content_type: &'static str,
    body: Vec<u8>,
    keep_alive: bool,
}

impl Answer {
    fn json(body: Vec<u8>) -> Answer {
        Answer {
            status: Status::Ok,
            content_type: JSON,
            body,
            keep_alive: true,
        }
    }
}

impl Exchange<'_> {
    pub async fn run(
        &self,
        input: &mut Input,
        asked: &Asked,
        body: BodyKind,
    ) -> Result<Outcome, End> {
        let rpc = Rpc {
            bus: self.bus,
            timeout: self.settings.timeout,
            auth: self.settings.auth,
            client: self.client,
            failures: self.failures,
            held_login: Cell::new(false),
        };
        let mut keep_alive = self.keep_alive;
        let text = match asked.kind {
            Kind::Rpc | Kind::Call(_) => match self.read_body(input, body).await {
                Some(text) => text,
                // Too large or malformed: -32700 as uhttpd, and the rest of
                // the body is not read.
                None => {
                    let mut a = Answer::json(rpc::parse_error());
                    a.keep_alive = false;
                    return self.send(asked, a).await;
                }
            },
            _ => {
                // A body no form reads would be taken for the next request.
                keep_alive &= body == BodyKind::None;
                Vec::new()
            }
        };
        // Streams have their own bound (subscribers per worker).
        let call = match asked.kind {
            Kind::Subscribe(_) => None,
            _ => match self
                .bus
                .calls
                .take_waiting(
                    self.client(),
                    self.with_session(asked, &text),
                    self.sock.deadlines,
                    Instant::now() + UBUS_ANONYMOUS_WAIT,
                )
                .await
            {
                Ok(call) => Some(call),
                Err(refused) => {
                    log::warn!("ubus: {} {}; 503", self.sock.peer.ip(), refused.reason());
                    let a = Answer {
                        status: Status::ServiceUnavailable,
                        content_type: JSON,
                        body: Vec::new(),
                        keep_alive,
                    };
                    return self.send(asked, a).await;
                }
            },
        };
        let work = async {
            match &asked.kind {
                Kind::Rpc => Ok(Answer::json(rpc.post(&text).await)),
                Kind::Call(object) => Ok(Answer::json(
                    rpc.call(object.as_bytes(), &asked.sid, &text).await,
                )),
                Kind::List(object) => Ok(
                    match rpc.get_list(object.as_deref().map(str::as_bytes)).await {
                        Ok(body) => Answer::json(body),
                        Err(body) => Answer {
                            status: Status::InternalServerError,
                            ..Answer::json(body)
                        },
                    },
                ),
                Kind::Subscribe(object) => self.subscribe(&rpc, asked, object).await,
                Kind::Preflight => Ok(Answer::json(Vec::new())),
            }
        };
        // A client that leaves ends its calls: their replies are dropped.
        let answer = future::or(async { Some(work.await) }, async {
            client_gone(self.sock).await;
            None
        })
        .await;
        match answer {
            Some(Ok(mut a)) => {
                a.keep_alive &= keep_alive;
                if rpc.held_login.get() {
                    // Its logins were not tried (their results say so):
                    // the status tells the client why.
                    a.status = Status::TooManyRequests;
                }
                self.send(asked, a).await
            }
            Some(Err(outcome)) => outcome,
            None => Err(End::Closed),
        }
        .inspect(|_| drop(call))
    }

    fn client(&self) -> Client {
        self.client
    }

    /// Whether the request carries sessions the endpoint knows. Without
    /// the ACL check (`ubus-auth off`) every session is as good as any.
    fn with_session(&self, asked: &Asked, text: &[u8]) -> bool {
        let known = |sid: &[u8]| !self.settings.auth || self.bus.sessions.knows(sid);
        match &asked.kind {
            Kind::Call(_) => known(&asked.sid),
            Kind::Rpc => rpc::calls_with_sessions(text, known),
            _ => false,
        }
    }

    /// The request body, at most uhttpd's 64 KiB; `None` beyond that or
    /// when it does not arrive whole in time.
    async fn read_body(&self, input: &mut Input, body: BodyKind) -> Option<Vec<u8>> {
        let deadline = Instant::now() + self.body_timeout;
        match body {
            BodyKind::None => Some(Vec::new()),
            BodyKind::Length(n) if n > UBUS_MAX_BODY as u64 => None,
            _ if self.expects_continue && self.version == Version::Http11 && input.is_empty() => {
                let sent = self.sock.send_all(b"HTTP/1.1 100 Continue\r\n\r\n").await;
                self.read_sent_body(input, body, deadline, sent.is_ok())
                    .await
            }
            _ => self.read_sent_body(input, body, deadline, true).await,
        }
    }

    async fn read_sent_body(
        &self,
        input: &mut Input,
        body: BodyKind,
        deadline: Instant,
        sent: bool,
    ) -> Option<Vec<u8>> {
        if !sent {
            return None;
        }
        match body {
            BodyKind::None => Some(Vec::new()),
            BodyKind::Length(n) => {
                // Past what came with the head, straight into the body:
                // the head buffer is smaller than a body may be.
                let n = usize::try_from(n).ok()?;
                let mut text = input.take(n as u64);
                let mut got = text.len();
                buffers::zeroed_to(&mut text, n);
                while got < n {
                    match self.sock.read_some(&mut text[got..], deadline).await {
                        Ok(0) | Err(_) => return None,
                        Ok(more) => got += more,
                    }
                }
                Some(text)
            }
            BodyKind::Chunked => {
                let mut decoder = chunked::Decoder::default();
                let mut text = Vec::new();
                loop {
                    let used = decoder.feed(input.bytes(), &mut text).ok()?;
                    input.consume(used);
                    if decoder.counted() > UBUS_MAX_BODY as u64 {
                        return None;
                    }
                    if decoder.is_done() {
                        return Some(text);
                    }
                    match input.read_more(self.sock, deadline).await {
                        Ok(0) | Err(_) => return None,
                        Ok(_) => {}
                    }
                }
            }
        }
    }

    /// `GET PREFIX/subscribe/OBJECT`: after the access check for
    /// `:subscribe` and the subscription, each notification as
    /// `event: METHOD` / `data: JSON` until the object goes, the bus
    /// connection ends or the client leaves. Refusals are JSON, as uhttpd.
    async fn subscribe(
        &self,
        rpc: &Rpc<'_>,
        asked: &Asked,
        object: &str,
    ) -> Result<Answer, Result<Outcome, End>> {
        let target = match rpc.subscribe_target(&asked.sid, object.as_bytes()).await {
            Ok(id) => id,
            Err(body) => return Ok(Answer::json(body)),
        };
        let until = Instant::now() + self.settings.timeout;
        let sub = match self.bus.subscribe(target, until).await {
            None => {
                return Ok(Answer {
                    status: Status::ServiceUnavailable,
                    ..Answer::json(Vec::new())
                });
            }
            Some(Err(f)) => return Ok(Answer::json(rpc::failure_body(f))),
            Some(Ok(Err(status))) => {
                let text = rpc::ubus_strerror(status);
                return Ok(Answer::json(rpc::bare_error(status, &text)));
            }
            Some(Ok(Ok(sub))) => sub,
        };
        let head = self.head(asked, Status::Ok, "text/event-stream", None, false);
        let mut bytes = 0u64;
        let streamed = async {
            self.sock.send_all(&head).await?;
            // A stopping worker ends its streams (a client reconnects).
            let stopped = || async {
                while !(self.stopping)() {
                    self.stop.notified().await;
                }
                None
            };
            while let Some(events) = future::or(sub.next(), stopped()).await {
                self.sock.send_all(&events).await?;
                bytes += events.len() as u64;
            }
            Ok(())
        };
        let result = future::or(streamed, async {
            client_gone(self.sock).await;
            Err(End::Closed)
        })
        .await;
        Err(result.map(|()| Outcome {
            status: 200,
            bytes,
            keep_alive: false,
        }))
    }

    /// The head of an answer: `length` is its body's, `None` for a stream.
    fn head(
        &self,
        asked: &Asked,
        status: Status,
        content_type: &'static str,
        length: Option<usize>,
        keep_alive: bool,
    ) -> Vec<u8> {
        let mut r = Response::new(status, Body::Script);
        r.content_type = Some(content_type);
        let mut out = Vec::with_capacity(256 + length.unwrap_or(0));
        let cx = HeadContext {
            version: self.version,
            keep_alive,
            date: self.sock.deadlines.wall_secs(),
            plain_body: false,
        };
        response::write_head(&mut out, &r, self.clock, cx, &|out| {
            if let Some(n) = length {
                out.extend_from_slice(b"\r\nContent-Length: ");
                push_num(out, n as u64);
            }
            match status {
                Status::ServiceUnavailable => out.extend_from_slice(b"\r\nRetry-After: 1"),
                Status::TooManyRequests => {
                    out.extend_from_slice(RETRY_AFTER_LOGINS.as_str().as_bytes())
                }
                _ => {}
            }
            out.extend_from_slice(asked.cors.as_bytes());
        });
        out
    }

    /// Writes the head and body in one piece.
    async fn send(&self, asked: &Asked, a: Answer) -> Result<Outcome, End> {
        let keep_alive = a.keep_alive && self.keep_alive;
        let mut out = self.head(
            asked,
            a.status,
            a.content_type,
            Some(a.body.len()),
            keep_alive,
        );
        out.extend_from_slice(&a.body);
        self.sock.send_all(&out).await?;
        Ok(Outcome {
            status: a.status.code(),
            bytes: a.body.len() as u64,
            keep_alive,
        })
    }
}
