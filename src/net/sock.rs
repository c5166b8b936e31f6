//! Nonblocking socket I/O with deadlines, shared by static responses and
//! CGI: each write waits at most the send timeout for the client to take
//! more, each read waits until its deadline.

use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use async_io::Async;

use crate::limits::LINGER_BYTES;
use crate::net::deadline::{Deadlines, within};
#[cfg(feature = "tls")]
use crate::net::ktls;
#[cfg(feature = "tls")]
use crate::net::tls::Tls;
use crate::sys;

/// A client socket registered with the reactor.
pub type Stream = Async<TcpStream>;

/// Why a connection ended early; all of them simply close it.
#[derive(Debug)]
pub enum End {
    Timeout,
    Closed,
    Io,
    /// What arrived is not the listener's protocol (plain HTTP on a TLS
    /// port, a broken handshake): close cleanly, answering nothing.
    #[cfg(feature = "tls")]
    Refused,
}

impl From<io::Error> for End {
    fn from(_: io::Error) -> End {
        End::Io
    }
}

/// A connection's socket with its send timeout. Every byte a connection
/// sends or receives goes through here.
pub struct Sock {
    pub stream: Stream,
    pub send_timeout: Duration,
    pub peer: SocketAddr,
    pub deadlines: &'static Deadlines,
    /// Who makes the TLS records, on a connection to a TLS listener.
    #[cfg(feature = "tls")]
    pub records: Records,
}

/// Who encrypts and decrypts a connection's bytes.
#[cfg(feature = "tls")]
pub enum Records {
    /// None: a plain listener's connection, or a TLS session that ended.
    Plain,
    /// rustls (`net/tls.rs`); every method of `Sock` goes through it.
    /// `to_kernel`: the versions the kernel may take over once the
    /// handshake is done.
    User {
        tls: Box<std::cell::RefCell<Tls>>,
        to_kernel: ktls::Support,
    },
    /// The kernel (kTLS, `net/ktls.rs`): `Sock` reads and writes as on a
    /// plain connection.
    Kernel(Box<Kernel>),
}

/// A connection whose records the kernel makes.
#[cfg(feature = "tls")]
pub struct Kernel {
    /// What rustls decrypted before the handover and was not read yet.
    early: std::cell::RefCell<Vec<u8>>,
    /// Records sent, counted from above (`KTLS_RECORDS`).
    records: std::cell::Cell<u64>,
}

impl Sock {
    /// The connection came to a TLS listener and its session goes on
    /// (never, in a build without TLS).
    pub fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return !matches!(self.records, Records::Plain);
        #[cfg(not(feature = "tls"))]
        false
    }

    /// Drops, without waiting, what the client sent and was not read, then
    /// stops sending: closed now, the connection ends with a FIN, not a
    /// reset. For a connection closed to make room at the connection
    /// limit, whose client did nothing wrong.
    pub fn discard_unread(&self) {
        let mut scratch = [0u8; 2048];
        let mut budget = LINGER_BYTES;
        while budget > 0 {
            match (&mut self.stream.get_ref()).read(&mut scratch) {
                Ok(n) if n > 0 => budget = budget.saturating_sub(n),
                _ => break,
            }
        }
        let _ = self.stream.get_ref().shutdown(std::net::Shutdown::Write);
    }

    pub async fn send_all(&self, mut bytes: &[u8]) -> Result<(), End> {
        #[cfg(feature = "tls")]
        if let Records::User { tls, .. } = &self.records {
            self.encrypt(tls, bytes).await?;
            return self.flush(tls).await;
        }
        while !bytes.is_empty() {
            match self.retry(|| self.stream.get_ref().write(bytes)).await? {
                0 => return Err(End::Closed),
                n => bytes = &bytes[n..],
            }
        }
        Ok(())
    }

    /// Sends a head and a body kept elsewhere (a cached file, a shared page)
    /// in one system call, without copying the body next to the head: on a
    /// router's CPU a copy of a few KiB costs more than the call. Encrypted
    /// here (rustls), a body that fits goes into the head's record: a
    /// record costs more than the copy.
    // Only the TLS build grows the head.
    #[cfg_attr(not(feature = "tls"), allow(clippy::ptr_arg))]
    pub async fn send_both(&self, head: &mut Vec<u8>, mut body: &[u8]) -> Result<(), End> {
        #[cfg(feature = "tls")]
        if let Records::User { tls, .. } = &self.records {
            if head.len() + body.len() <= crate::limits::TLS_CHUNK {
                head.extend_from_slice(body);
                self.encrypt(tls, head).await?;
            } else {
                self.encrypt(tls, head).await?;
                self.encrypt(tls, body).await?;
            }
            return self.flush(tls).await;
        }
        let mut head = &head[..];
        while !head.is_empty() {
            let both = [IoSlice::new(head), IoSlice::new(body)];
            match self
                .retry(|| self.stream.get_ref().write_vectored(&both))
                .await?
            {
                0 => return Err(End::Closed),
                n if n < head.len() => head = &head[n..],
                n => {
                    body = &body[n - head.len()..];
                    head = &[];
                }
            }
        }
        self.send_all(body).await
    }

    /// Sends a head, then `len` bytes of `file` from `offset` with
    /// sendfile(2). Corked meanwhile: with TCP_NODELAY (every connection
    /// has it, for the small answers) a body the client's window holds
    /// back leaves in as many small segments as the window opens, each
    /// with its ACK, where corked it leaves in full ones.
    pub async fn send_head_and_file(
        &self,
        head: &[u8],
        file: &std::fs::File,
        offset: u64,
        len: u64,
    ) -> Result<(), End> {
        // The head encrypted now, written with the body's first record.
        #[cfg(feature = "tls")]
        if let Records::User { tls, .. } = &self.records {
            self.encrypt(tls, head).await?;
            return self.send_file_encrypted(tls, file, offset, len).await;
        }
        let sock = self.stream.get_ref();
        sys::set_cork(sock, true);
        let sent = async {
            self.send_all(head).await?;
            self.send_file(file, offset, len).await
        }
        .await;
        // The last partial segment leaves now.
        sys::set_cork(sock, false);
        sent
    }

    async fn send_file(&self, file: &std::fs::File, offset: u64, len: u64) -> Result<(), End> {
        let mut pos = offset as i64;
        let end = offset + len;
        while (pos as u64) < end {
            let chunk = (end - pos as u64).min(1 << 30) as usize;
            // 0: the file shrank under us. Stop short; the close tells the client.
            if self
                .retry(|| sys::sendfile(self.stream.get_ref(), file, &mut pos, chunk))
                .await?
                == 0
            {
                return Err(End::Io);
            }
        }
        Ok(())
    }

    /// Runs a nonblocking write until it does something, waiting for the
    /// socket to drain in between.
    async fn retry(&self, mut op: impl FnMut() -> io::Result<usize>) -> Result<usize, End> {
        loop {
            #[cfg(feature = "tls")]
            self.room_for_records()?;
            match op() {
                Ok(n) => {
                    #[cfg(feature = "tls")]
                    self.count_records(n);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    async fn writable(&self) -> Result<(), End> {
        let at = self.deadlines.after(self.send_timeout);
        match within(self.deadlines, at, self.stream.writable()).await {
            Some(ready) => ready.map_err(End::from),
            None => {
                log::debug!(
                    "{}: send stalled for {}s; closing",
                    self.peer,
                    self.send_timeout.as_secs()
                );
                Err(End::Timeout)
            }
        }
    }

    /// What the client of a plain connection has sent already, read without
    /// waiting; `None` when there is nothing (or an error the next read
    /// meets again), or the connection is TLS.
    pub fn read_ready(&self, buf: &mut [u8]) -> Option<usize> {
        #[cfg(feature = "tls")]
        if !matches!(self.records, Records::Plain) {
            return None;
        }
        match self.stream.get_ref().read(buf) {
            Ok(n) if n > 0 => Some(n),
            _ => None,
        }
    }

    /// Reads what is there into `buf`, waiting until `deadline`; `Ok(0)` at end of stream.
    pub async fn read_some(&self, buf: &mut [u8], deadline: Instant) -> Result<usize, End> {
        #[cfg(feature = "tls")]
        match &self.records {
            Records::User { tls, .. } => return self.read_decrypted(tls, buf, deadline).await,
            Records::Kernel(k) => {
                if let Some(n) = k.read_early(buf) {
                    return Ok(n);
                }
            }
            Records::Plain => {}
        }
        loop {
            match self.stream.get_ref().read(buf) {
                Ok(n) => return Ok(n),
                // A record that is not application data (the client's
                // close_notify, a key update): the end of the connection.
                #[cfg(feature = "tls")]
                Err(e)
                    if e.raw_os_error() == Some(nix::libc::EIO)
                        && matches!(self.records, Records::Kernel(_)) =>
                {
                    return Ok(0);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    within(self.deadlines, deadline, self.stream.readable())
                        .await
                        .ok_or(End::Timeout)??;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// TLS: the same operations through the record layer, which never holds
/// a borrow across a wait (a script's exchange reads and writes at once).
#[cfg(feature = "tls")]
impl Sock {
    /// Whether a request may be waiting: bytes on the socket, or decrypted
    /// bytes a pipelining client sent past what was read.
    pub async fn readable(&self) -> io::Result<()> {
        let waiting = match &self.records {
            Records::User { tls, .. } => tls.borrow().has_plaintext(),
            Records::Kernel(k) => !k.early.borrow().is_empty(),
            Records::Plain => false,
        };
        if waiting {
            return Ok(());
        }
        self.stream.readable().await
    }

    /// Sends close_notify (when the handshake got that far), once, as the
    /// connection closes. rustls's record layer is dropped then: what the
    /// client still sends is read as it comes. The kernel's stays.
    pub async fn end_tls(&mut self) {
        if let Records::Kernel(_) = self.records {
            let fd = self.stream.get_ref();
            let _ = self
                .retry(|| sys::send_tls_record(fd, ALERT, &CLOSE_NOTIFY))
                .await;
        } else if let Records::User { tls, .. } =
            std::mem::replace(&mut self.records, Records::Plain)
        {
            tls.borrow_mut().close_notify();
            let _ = self.flush(&tls).await;
        }
    }

    /// Hands the records to the kernel when it can take them: after the
    /// handshake, once rustls's last records are written and no record is
    /// half read. Tried when the handshake is done, then before each answer
    /// until it is; where the kernel refuses the TLS layer, rustls goes on.
    pub async fn offload(&mut self) -> Result<(), End> {
        let Records::User { tls, to_kernel } = &self.records else {
            return Ok(());
        };
        let Some(version) = tls.borrow().version().filter(|v| to_kernel.covers(*v)) else {
            return Ok(());
        };
        if !tls.borrow().suite().is_some_and(ktls::takes) {
            if let Records::User { to_kernel, .. } = &mut self.records {
                *to_kernel = ktls::Support::NONE;
            }
            return Ok(());
        }
        self.flush(tls).await?;
        if !tls.borrow().settled() {
            return Ok(());
        }
        let stream = self.stream.get_ref();
        if let Err(e) = ktls::attach(stream) {
            log::debug!(
                "{}: kernel TLS refused ({e}); staying in user space",
                self.peer
            );
            if let Records::User { to_kernel, .. } = &mut self.records {
                *to_kernel = ktls::Support::NONE;
            }
            return Ok(());
        }
        let Records::User { tls, .. } = std::mem::replace(&mut self.records, Records::Plain) else {
            return Ok(());
        };
        let (secrets, early) = tls.into_inner().into_kernel().map_err(|_| End::Io)?;
        ktls::give_keys(stream, version, secrets).map_err(|e| {
            log::warn!("{}: kernel TLS keys refused ({e}); closing", self.peer);
            End::Io
        })?;
        self.records = Records::Kernel(Box::new(Kernel {
            early: early.into(),
            records: 0.into(),
        }));
        Ok(())
    }

    /// Refuses to send more once the kernel may be near AES-GCM's limit
    /// for one key.
    fn room_for_records(&self) -> Result<(), End> {
        match &self.records {
            Records::Kernel(k) if k.records.get() >= crate::limits::KTLS_RECORDS => {
                log::debug!("{}: kernel TLS key worn out; closing", self.peer);
                Err(End::Io)
            }
            _ => Ok(()),
        }
    }

    /// Counts the records a write of `n` bytes may have closed.
    fn count_records(&self, n: usize) {
        if let Records::Kernel(k) = &self.records {
            let made = n.div_ceil(crate::limits::TLS_RECORD) as u64 + 1;
            k.records.set(k.records.get().saturating_add(made));
        }
    }

    /// Encrypts `bytes` a record at a time, writing whenever a buffer's
    /// worth is waiting.
    async fn encrypt(&self, tls: &std::cell::RefCell<Tls>, bytes: &[u8]) -> Result<(), End> {
        for chunk in bytes.chunks(crate::limits::TLS_CHUNK) {
            self.make_room(tls, chunk.len()).await?;
            // Before the handshake is done there is nothing to send on.
            if !tls.borrow_mut().encrypt(chunk).map_err(|_| End::Io)? {
                return Err(End::Io);
            }
        }
        Ok(())
    }

    /// Writes what is encrypted first when a record of `len` more bytes
    /// would overflow the output buffer.
    async fn make_room(&self, tls: &std::cell::RefCell<Tls>, len: usize) -> Result<(), End> {
        if tls.borrow().pending_out() + len > crate::limits::OUT_BUF {
            self.flush(tls).await?;
        }
        Ok(())
    }

    /// Writes every encrypted byte, waiting at most the send timeout for
    /// the client to take more.
    async fn flush(&self, tls: &std::cell::RefCell<Tls>) -> Result<(), End> {
        loop {
            let written = tls.borrow_mut().write_to(self.stream.get_ref());
            match written {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// A file body over TLS, a record at a time. The plaintext is needed
    /// only from the file's read to its encryption, with no wait between,
    /// so the worker's pool lends one buffer to every connection it serves:
    /// a client that reads slowly holds only its encrypted bytes.
    async fn send_file_encrypted(
        &self,
        tls: &std::cell::RefCell<Tls>,
        file: &std::fs::File,
        mut offset: u64,
        len: u64,
    ) -> Result<(), End> {
        let end = offset + len;
        while offset < end {
            let want = (end - offset).min(crate::limits::TLS_CHUNK as u64) as usize;
            self.make_room(tls, want).await?;
            // 0: the file shrank under us. Stop short; the close tells the client.
            match tls.borrow_mut().encrypt_from(file, offset, want)? {
                0 => return Err(End::Io),
                n => offset += n as u64,
            }
        }
        self.flush(tls).await
    }

    /// Completes the handshake of a TLS connection before its first
    /// request is read, so that a handshaking client holds its record
    /// layer and nothing more (no head buffer, no request frame). Its
    /// tickets go out before it returns.
    pub async fn handshake(&self, deadline: Instant) -> Result<(), End> {
        let Records::User { tls, .. } = &self.records else {
            return Ok(());
        };
        loop {
            let advanced = tls.borrow_mut().advance();
            if advanced.is_err() {
                return Err(self.broken(tls).await);
            }
            if !tls.borrow().is_handshaking() {
                return self.flush(tls).await;
            }
            if !self.receive(tls, deadline).await? {
                return Err(End::Closed);
            }
        }
    }

    /// Reads decrypted bytes into `buf`, reading records until `deadline`.
    /// Handshake records (and tickets) go out before each wait.
    async fn read_decrypted(
        &self,
        tls: &std::cell::RefCell<Tls>,
        buf: &mut [u8],
        deadline: Instant,
    ) -> Result<usize, End> {
        loop {
            let got = tls.borrow_mut().read(buf);
            match got {
                Ok(Some(n)) => return Ok(n),
                Ok(None) => {}
                Err(_) => return Err(self.broken(tls).await),
            }
            if !self.receive(tls, deadline).await? {
                return Ok(0);
            }
        }
    }

    /// Writes what is pending, then waits until `deadline` for the client
    /// to send more and reads it into the record layer; `false` at the end
    /// of the stream.
    async fn receive(&self, tls: &std::cell::RefCell<Tls>, deadline: Instant) -> Result<bool, End> {
        self.flush(tls).await?;
        loop {
            let received = tls.borrow_mut().read_from(self.stream.get_ref());
            match received {
                Ok(0) => return Ok(false),
                Ok(_) if tls.borrow().not_tls() => {
                    log::debug!("{}: not TLS on a TLS port; closing", self.peer);
                    return Err(End::Refused);
                }
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    within(self.deadlines, deadline, self.stream.readable())
                        .await
                        .ok_or(End::Timeout)??;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The record layer failed: the alert that says why, then a clean
    /// close. A failed handshake is not a request and gets no answer.
    async fn broken(&self, tls: &std::cell::RefCell<Tls>) -> End {
        let _ = self.flush(tls).await;
        if tls.borrow().is_handshaking() {
            End::Refused
        } else {
            End::Io
        }
    }
}

/// The TLS record type of an alert, and the close_notify alert (warning
/// level) it carries at the end of a session.
#[cfg(feature = "tls")]
const ALERT: u8 = 21;
#[cfg(feature = "tls")]
const CLOSE_NOTIFY: [u8; 2] = [1, 0];

#[cfg(feature = "tls")]
impl Kernel {
    /// Copies what rustls decrypted before the handover; `None` once it is all read.
    fn read_early(&self, buf: &mut [u8]) -> Option<usize> {
        let mut early = self.early.borrow_mut();
        if early.is_empty() {
            return None;
        }
        let n = buf.len().min(early.len());
        buf[..n].copy_from_slice(&early[..n]);
        early.drain(..n);
        if early.is_empty() {
            *early = Vec::new();
        }
        Some(n)
    }
}
