//! One TLS connection's records, driven through rustls's unbuffered API so
//! that the connection owns its buffers: received bytes are kept only
//! while a record is incomplete, decrypted bytes only until they are read,
//! encrypted bytes only until they are written. An idle keep-alive
//! connection holds none of them, only the session's keys.
//!
//! Nothing here waits: `Sock` calls these between waits for the socket.

use std::fs::File;
use std::io::{self, Write};
use std::net::TcpStream;
use std::rc::Rc;
use std::sync::Arc;

use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, InsufficientSizeError};
use rustls::{ExtractedSecrets, ServerConfig};

use crate::limits::{TLS_HANDSHAKE_HELD, TLS_HELD, TLS_READ};
use crate::net::buffers::{self, Pool};
use crate::sys;

/// The connection cannot go on: the client broke the protocol, or the
/// handshake failed (logged at debug level).
#[derive(Debug)]
pub struct Broken;

/// The first byte of a TLS handshake record.
const HANDSHAKE: u8 = 0x16;

/// Room for what a record adds to its plaintext: header, content type,
/// AEAD tag and TLS 1.2's explicit nonce, with slack.
const RECORD_OVERHEAD: usize = 64;

/// Room first offered for handshake messages; rustls asks for more when a
/// flight needs it (a certificate chain).
const HANDSHAKE_ROOM: usize = 4096;

pub struct Tls {
    conn: UnbufferedServerConnection,
    pool: Rc<Pool>,
    /// Received, not yet decrypted: part of a record.
    incoming: Vec<u8>,
    /// Decrypted and not yet read, from `read_at`.
    plain: Vec<u8>,
    read_at: usize,
    /// Encrypted and not yet written (an output buffer of the pool).
    out: Option<Vec<u8>>,
    /// The client sent close_notify.
    peer_closed: bool,
    /// Nothing received has been processed yet.
    fresh: bool,
}

/// What the record layer can do next without the socket.
enum Reached {
    /// Everything received is processed; more must be read to go on.
    NeedInput,
    /// The handshake is done and nothing is left to process.
    Traffic,
    Closed,
}

/// What to do once traffic may flow.
#[derive(Clone, Copy)]
enum Job<'a> {
    Read,
    Encrypt(&'a [u8]),
    CloseNotify,
}

impl Tls {
    pub fn new(config: Arc<ServerConfig>, pool: Rc<Pool>) -> Result<Tls, Broken> {
        let conn = UnbufferedServerConnection::new(config).map_err(|e| {
            log::warn!("TLS: {}", why(&e));
            Broken
        })?;
        Ok(Tls {
            conn,
            pool,
            incoming: Vec::new(),
            plain: Vec::new(),
            read_at: 0,
            out: None,
            peer_closed: false,
            fresh: true,
        })
    }

    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// The version agreed on, once the handshake is done.
    pub fn version(&self) -> Option<rustls::ProtocolVersion> {
        (!self.conn.is_handshaking())
            .then(|| self.conn.protocol_version())
            .flatten()
    }

    /// The cipher suite agreed on, once the handshake is done.
    pub fn suite(&self) -> Option<rustls::CipherSuite> {
        (!self.conn.is_handshaking())
            .then(|| self.conn.negotiated_cipher_suite())
            .flatten()
            .map(|s| s.suite())
    }

    /// The handshake is over, everything rustls made has been written and
    /// no record is half received: the kernel could go on from here.
    pub fn settled(&self) -> bool {
        !self.conn.is_handshaking()
            && self.incoming.is_empty()
            && self.pending_out() == 0
            && !self.peer_closed
    }

    /// Gives up the session's keys (for the kernel, `net/ktls.rs`) with
    /// what rustls decrypted and was not read yet: a pipelined request.
    pub fn into_kernel(self) -> Result<(ExtractedSecrets, Vec<u8>), Broken> {
        let Tls {
            conn,
            pool,
            mut plain,
            read_at,
            out,
            ..
        } = self;
        if let Some(out) = out {
            pool.give_out(out);
        }
        let (secrets, _) = conn.dangerous_into_kernel_connection().map_err(|e| {
            log::debug!("TLS: {}", why(&e));
            Broken
        })?;
        plain.drain(..read_at);
        Ok((secrets, plain))
    }

    /// Decrypted bytes are waiting to be read.
    pub fn has_plaintext(&self) -> bool {
        self.read_at < self.plain.len()
    }

    /// Copies decrypted bytes into `buf`, processing what was received;
    /// `None` when more must come from the socket first, `Some(0)` at the
    /// client's close_notify.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, Broken> {
        if !self.has_plaintext() && !self.peer_closed {
            if let Reached::Closed = self.pump(Job::Read)? {
                self.peer_closed = true;
            }
        }
        if self.has_plaintext() {
            let n = buf.len().min(self.plain.len() - self.read_at);
            buf[..n].copy_from_slice(&self.plain[self.read_at..self.read_at + n]);
            self.read_at += n;
            if self.read_at == self.plain.len() {
                self.pool.give_record(std::mem::take(&mut self.plain));
                self.read_at = 0;
            }
            return Ok(Some(n));
        }
        Ok(self.peer_closed.then_some(0))
    }

    /// Processes what was received (handshake records, and data kept for
    /// `read`).
    pub fn advance(&mut self) -> Result<(), Broken> {
        if let Reached::Closed = self.pump(Job::Read)? {
            self.peer_closed = true;
        }
        Ok(())
    }

    /// Encrypts `data` for sending; `false` if the handshake is not done
    /// (nothing to send on yet).
    pub fn encrypt(&mut self, data: &[u8]) -> Result<bool, Broken> {
        Ok(matches!(self.pump(Job::Encrypt(data))?, Reached::Traffic))
    }

    /// Encrypts up to `want` bytes of `file` from `offset`, read into a
    /// buffer of the pool that goes back before this returns; how many
    /// were read, 0 where the file ends.
    pub fn encrypt_from(&mut self, file: &File, offset: u64, want: usize) -> io::Result<usize> {
        let mut plain = self.pool.out();
        let result = match sys::read_onto(file, &mut plain, want, Some(offset)) {
            Ok(0) => Ok(0),
            Ok(n) => match self.encrypt(&plain) {
                Ok(true) => Ok(n),
                // Only called once traffic flows, so `false` is as broken.
                Ok(false) | Err(Broken) => Err(io::Error::other("TLS record layer failed")),
            },
            Err(e) => Err(e),
        };
        self.pool.give_out(plain);
        result
    }

    /// Queues close_notify, if the handshake got that far.
    pub fn close_notify(&mut self) {
        if !self.conn.is_handshaking() {
            let _ = self.pump(Job::CloseNotify);
        }
    }

    /// Encrypted bytes waiting to be written.
    pub fn pending_out(&self) -> usize {
        self.out.as_ref().map_or(0, Vec::len)
    }

    /// Writes what is encrypted; `Ok(0)` only when nothing is pending.
    pub fn write_to(&mut self, stream: &TcpStream) -> io::Result<usize> {
        let Some(out) = self.out.as_mut().filter(|o| !o.is_empty()) else {
            return Ok(0);
        };
        let n = (&*stream).write(out)?;
        out.drain(..n);
        if out.is_empty() {
            if let Some(out) = self.out.take() {
                self.pool.give_out(out);
            }
        }
        Ok(n)
    }

    /// Reads what the client sent into the record buffer; `Ok(0)` at the
    /// end of the stream. Bytes that are not TLS end the connection at once.
    pub fn read_from(&mut self, stream: &TcpStream) -> Result<usize, io::Error> {
        let held = self.incoming.len();
        let most = if self.conn.is_handshaking() {
            TLS_HANDSHAKE_HELD
        } else {
            TLS_HELD
        };
        if held >= most {
            return Err(io::Error::other("record too large"));
        }
        if self.incoming.capacity() == 0 {
            self.incoming = self.pool.record();
        }
        // Exact: the buffer never grows past `most`.
        let want = TLS_READ.min(most - held);
        self.incoming.reserve_exact(want);
        let read = sys::read_onto(stream, &mut self.incoming, want, None);
        // Nothing came (the client has not sent yet): a connection that
        // waits for its client holds no record buffer.
        if self.incoming.is_empty() {
            self.pool.give_record(std::mem::take(&mut self.incoming));
        }
        read
    }

    /// The first bytes received are not a TLS handshake: a plain HTTP
    /// request sent to the TLS port, or noise.
    pub fn not_tls(&self) -> bool {
        self.fresh && self.incoming.first().is_some_and(|&b| b != HANDSHAKE)
    }

    /// Runs the record layer until it needs the socket: handshake records
    /// go to `out`, decrypted data to `plain`; once traffic may flow, does
    /// `job`.
    fn pump(&mut self, job: Job<'_>) -> Result<Reached, Broken> {
        self.fresh &= self.incoming.is_empty();
        let mut job = Some(job);
        loop {
            let pool = &*self.pool;
            let Tls {
                conn,
                incoming,
                plain,
                out: out_slot,
                ..
            } = self;
            let status = conn.process_tls_records(incoming);
            let mut discard = status.discard;
            let state = match status.state {
                Ok(state) => state,
                Err(e) => {
                    log::debug!("TLS: {}", why(&e));
                    self.queue_alert();
                    return Err(Broken);
                }
            };
            let out = out_slot.get_or_insert_with(|| pool.out());
            let reached = match state {
                ConnectionState::ReadTraffic(mut records) => {
                    while let Some(record) = records.next_record() {
                        let record = record.map_err(|e| {
                            log::debug!("TLS: {}", why(&e));
                            Broken
                        })?;
                        discard += record.discard;
                        if plain.capacity() == 0 {
                            *plain = pool.record();
                        }
                        // Exact: what is held never exceeds what was received.
                        plain.reserve_exact(record.payload.len());
                        plain.extend_from_slice(record.payload);
                    }
                    None
                }
                ConnectionState::EncodeTlsData(mut encoder) => {
                    grow_while_short(out, HANDSHAKE_ROOM, |spare| match encoder.encode(spare) {
                        Ok(n) => Ok(n),
                        Err(EncodeError::InsufficientSize(InsufficientSizeError {
                            required_size,
                        })) => Err(Some(required_size)),
                        Err(EncodeError::AlreadyEncoded) => Err(None),
                    })?;
                    None
                }
                // Written before the next wait for the client: see `Sock`.
                ConnectionState::TransmitTlsData(sent) => {
                    sent.done();
                    None
                }
                ConnectionState::BlockedHandshake => Some(Reached::NeedInput),
                ConnectionState::WriteTraffic(mut traffic) => {
                    match job.take() {
                        Some(Job::Encrypt(data)) => {
                            let room = data.len() + RECORD_OVERHEAD;
                            grow_while_short(out, room, |spare| {
                                match traffic.encrypt(data, spare) {
                                    Ok(n) => Ok(n),
                                    Err(EncryptError::InsufficientSize(
                                        InsufficientSizeError { required_size },
                                    )) => Err(Some(required_size)),
                                    Err(_) => Err(None),
                                }
                            })?;
                        }
                        Some(Job::CloseNotify) => {
                            grow_while_short(out, RECORD_OVERHEAD, |spare| {
                                traffic.queue_close_notify(spare).map_err(|e| match e {
                                    EncryptError::InsufficientSize(s) => Some(s.required_size),
                                    _ => None,
                                })
                            })?;
                        }
                        Some(Job::Read) | None => {}
                    }
                    Some(Reached::Traffic)
                }
                ConnectionState::PeerClosed | ConnectionState::Closed => Some(Reached::Closed),
                // Early data is never accepted (max_early_data_size is 0).
                _ => return Err(Broken),
            };
            incoming.drain(..discard);
            if incoming.is_empty() && incoming.capacity() > 0 {
                pool.give_record(std::mem::take(incoming));
            }
            if out.is_empty() {
                if let Some(o) = out_slot.take() {
                    pool.give_out(o);
                }
            }
            if let Some(r) = reached {
                return Ok(r);
            }
        }
    }
}

impl Tls {
    /// After a failure rustls has queued an alert saying why (a protocol
    /// version it does not speak, a message it cannot decode): send it.
    /// rustls is given the same received bytes again: it counts its
    /// progress through them, and slicing a shorter buffer panics.
    fn queue_alert(&mut self) {
        let pool = &*self.pool;
        let Tls {
            conn,
            out,
            incoming,
            ..
        } = self;
        if let Ok(ConnectionState::EncodeTlsData(mut encoder)) =
            conn.process_tls_records(incoming).state
        {
            let out = out.get_or_insert_with(|| pool.out());
            let _ = grow_while_short(out, RECORD_OVERHEAD, |spare| {
                encoder.encode(spare).map_err(|_| None)
            });
        }
    }
}

/// What went wrong, in a few words: rustls's own messages are not
/// formatted, their text and the formatting of the values in them cost
/// kilobytes of flash.
fn why(e: &rustls::Error) -> &'static str {
    use rustls::Error as E;
    match e {
        E::InvalidMessage(_) => "a message that does not parse",
        E::PeerIncompatible(_) => "the client offers nothing the server speaks",
        E::PeerMisbehaved(_) => "the client broke the protocol",
        E::AlertReceived(_) => "the client sent an alert",
        E::DecryptError => "a record that does not decrypt",
        E::NoApplicationProtocol => "the client does not offer http/1.1",
        _ => "handshake failed",
    }
}

/// Appends to `out` what `write` puts in `room` bytes after its end,
/// growing the room to what `write` asks for when it is short. The room is
/// zeroed first, so it is sized for the record, not the whole buffer.
fn grow_while_short(
    out: &mut Vec<u8>,
    mut room: usize,
    mut write: impl FnMut(&mut [u8]) -> Result<usize, Option<usize>>,
) -> Result<(), Broken> {
    let start = out.len();
    loop {
        // Exact: a record that overflows the pool's buffer by its overhead
        // does not double it.
        out.reserve_exact((start + room).saturating_sub(out.len()));
        buffers::zeroed_to(out, start + room);
        match write(&mut out[start..]) {
            Ok(n) => {
                out.truncate(start + n);
                return Ok(());
            }
            Err(Some(needed)) if needed > room => room = needed,
            Err(_) => {
                out.truncate(start);
                return Err(Broken);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::{acceptor::Acceptor, keys, self_signed, tickets};
    use std::net::TcpListener;

    fn config() -> Arc<ServerConfig> {
        let dir = std::env::temp_dir().join(format!("marmoset-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        self_signed::make(&cert, &key, &[], None).unwrap();
        let pair = keys::load(&cert, &key).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let tickets = Arc::new(tickets::Keys::new().unwrap());
        Acceptor::new(pair, tickets, false).unwrap().config
    }

    #[test]
    fn waiting_for_the_client_holds_no_record_buffer() {
        let pool = Rc::new(Pool::default());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let mut tls = Tls::new(config(), pool).unwrap();

        let nothing = tls.read_from(&server).unwrap_err();
        assert_eq!(nothing.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(tls.incoming.capacity(), 0);

        client.write_all(&[HANDSHAKE]).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let got = loop {
            match tls.read_from(&server) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(std::time::Instant::now() < deadline, "the byte never came");
                    std::thread::yield_now();
                }
                other => break other.unwrap(),
            }
        };
        assert_eq!((got, tls.incoming.as_slice()), (1, &[HANDSHAKE][..]));
    }
}
