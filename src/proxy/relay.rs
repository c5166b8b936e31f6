//! Bodies on their way through: the client's request body to the backend
//! (re-framed: its length, or decoded and chunked again), and the
//! backend's answer body to the client, each read sent on at once (an
//! event stream's events arrive one by one). One buffer's worth at a time
//! is held, whatever the body's size.

use std::time::{Duration, Instant};

use crate::http::chunked::{Decoder, Refused, push_chunk};
use crate::http::request::BodyKind;
use crate::limits::PROXY_CHUNK;
use crate::net::deadline::Deadlines;
use crate::net::input::Input;
use crate::net::pace::Pace;
use crate::net::sock::{End, Sock};
use crate::proxy::answer::Framing;
use crate::proxy::backend::{Failed, Stream};

/// Why a request body did not all reach the backend.
#[derive(Debug)]
pub enum BodyError {
    /// The client stopped sending or left.
    Client,
    /// Chunked framing that does not parse: 400.
    Malformed,
    /// Past `proxy-max-body`, or a trailer section past its limit: 413.
    TooLarge,
    /// The backend stopped taking it.
    Backend,
}

/// The timeouts of a relay: the client's (`header-timeout` for each wait
/// on a body, and the grace before its pace counts; `send-timeout` inside
/// `Sock`) and the backend's (`proxy-timeout`).
#[derive(Clone, Copy)]
pub struct Waits {
    pub deadlines: &'static Deadlines,
    pub client: Duration,
    pub backend: Duration,
}

impl Waits {
    pub fn backend_until(&self) -> Instant {
        Instant::now() + self.backend
    }
}

/// Sends the request body as the head announced it, each wait on the
/// client bounded by `pace`.
pub async fn request_body(
    sock: &Sock,
    input: &mut Input,
    body: BodyKind,
    max: Option<u64>,
    to: &Stream,
    waits: Waits,
    pace: &Pace,
) -> Result<(), BodyError> {
    let send = |bytes: Vec<u8>| async move {
        to.write_all(&bytes, waits.deadlines, waits.backend_until())
            .await
            .map_err(|_| BodyError::Backend)
    };
    match body {
        BodyKind::None => Ok(()),
        BodyKind::Length(n) => {
            let first = input.take(n);
            let mut left = n - first.len() as u64;
            send(first).await?;
            let mut buf = vec![0u8; left.min(PROXY_CHUNK as u64) as usize];
            while left > 0 {
                let want = left.min(buf.len() as u64) as usize;
                let from = Instant::now();
                let got = match sock.read_some(&mut buf[..want], pace.until()).await {
                    Ok(0) | Err(_) => return Err(BodyError::Client),
                    Ok(got) => got,
                };
                pace.waited(from, got);
                to.write_all(&buf[..got], waits.deadlines, waits.backend_until())
                    .await
                    .map_err(|_| BodyError::Backend)?;
                left -= got as u64;
            }
            Ok(())
        }
        BodyKind::Chunked => {
            let mut decoder = Decoder::default();
            let (mut data, mut chunk) = (Vec::new(), Vec::new());
            loop {
                data.clear();
                let used = decoder
                    .feed(input.bytes(), &mut data)
                    .map_err(|e| match e {
                        Refused::Malformed => BodyError::Malformed,
                        Refused::TrailersTooLarge => BodyError::TooLarge,
                    })?;
                input.consume(used);
                if max.is_some_and(|m| decoder.counted() > m) {
                    return Err(BodyError::TooLarge);
                }
                if !data.is_empty() {
                    chunk.clear();
                    push_chunk(&mut chunk, &data);
                    to.write_all(&chunk, waits.deadlines, waits.backend_until())
                        .await
                        .map_err(|_| BodyError::Backend)?;
                }
                if decoder.is_done() {
                    return send(b"0\r\n\r\n".to_vec()).await;
                }
                let from = Instant::now();
                match input.read_more(sock, pace.until()).await {
                    Ok(0) | Err(_) => return Err(BodyError::Client),
                    Ok(n) => pace.waited(from, n),
                }
            }
        }
    }
}

/// How the client gets the answer body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ToClient {
    Length(u64),
    Chunked,
    /// Until the connection closes (an HTTP/1.0 client).
    Close,
}

/// Why an answer body was cut.
#[derive(Debug)]
pub enum Cut {
    /// The client left or stopped reading.
    Client(End),
    /// The backend closed, stalled or broke its framing mid-body.
    Backend(&'static str),
    /// What came with the head breaks its framing: nothing was sent, so
    /// the client can still get a 502.
    BeforeHead(&'static str),
}

/// What went through.
pub struct Relayed {
    pub bytes: u64,
    /// The backend ended its body where its framing said, with nothing after.
    pub clean: bool,
}

/// Relays the answer body: `first` is what came with the head, `out`
/// holds the client's head, sent with the first piece of body.
pub async fn answer_body(
    sock: &Sock,
    from: &Stream,
    first: &[u8],
    framing: Framing,
    to_client: ToClient,
    out: &mut Vec<u8>,
    waits: Waits,
) -> Result<Relayed, Cut> {
    let mut buf = vec![0u8; PROXY_CHUNK];
    let mut decoder = (framing == Framing::Chunked).then(Decoder::default);
    let mut left = match framing {
        Framing::Length(n) => n,
        Framing::None => 0,
        _ => u64::MAX,
    };
    let mut sent = 0u64;
    let mut pending: &[u8] = first;
    let mut owned_len;
    loop {
        let mut clean_end = framing == Framing::None && pending.is_empty();
        match &mut decoder {
            Some(d) => {
                let mut data = Vec::new();
                let used = d.feed(pending, &mut data).map_err(|e| {
                    let why = match e {
                        Refused::Malformed => "malformed chunked body",
                        Refused::TrailersTooLarge => "trailer section over the limit",
                    };
                    if sent == 0 && pending.as_ptr() == first.as_ptr() {
                        Cut::BeforeHead(why)
                    } else {
                        Cut::Backend(why)
                    }
                })?;
                if d.is_done() {
                    clean_end = used == pending.len();
                    left = 0;
                }
                frame(out, &data, to_client);
                sent += data.len() as u64;
            }
            None => {
                let take = (pending.len() as u64).min(left) as usize;
                frame(out, &pending[..take], to_client);
                sent += take as u64;
                left -= take as u64;
                if framing == Framing::Length(sent) {
                    clean_end = take == pending.len();
                }
            }
        }
        if left == 0 && to_client == ToClient::Chunked {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        if !out.is_empty() {
            sock.send_all(out).await.map_err(Cut::Client)?;
            out.clear();
        }
        if left == 0 {
            return Ok(Relayed {
                bytes: sent,
                clean: clean_end,
            });
        }
        let until = waits.backend_until();
        owned_len = match from.read_some(&mut buf, waits.deadlines, until).await {
            Ok(0) if framing == Framing::Close => {
                if to_client == ToClient::Chunked {
                    sock.send_all(b"0\r\n\r\n").await.map_err(Cut::Client)?;
                }
                return Ok(Relayed {
                    bytes: sent,
                    clean: false,
                });
            }
            Ok(0) | Err(Failed::Closed) | Err(Failed::Refused) => {
                return Err(Cut::Backend("closed mid-body"));
            }
            Err(Failed::Timeout) => return Err(Cut::Backend("stalled mid-body")),
            Ok(n) => n,
        };
        pending = &buf[..owned_len];
    }
}

/// Appends body data framed for the client.
fn frame(out: &mut Vec<u8>, data: &[u8], to_client: ToClient) {
    match to_client {
        ToClient::Chunked => push_chunk(out, data),
        _ => out.extend_from_slice(data),
    }
}
