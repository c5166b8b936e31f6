//! Nonblocking socket I/O with deadlines, shared by static responses and
//! CGI: each write waits at most the send timeout for the client to take
//! more, each read waits until its deadline.

use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use async_io::Async;
use futures_lite::future;

use crate::net::deadline::Deadlines;
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
    /// The record layer of a connection to a TLS listener; every method
    /// below goes through it then.
    #[cfg(feature = "tls")]
    pub tls: Option<Box<std::cell::RefCell<Tls>>>,
}

impl Sock {
    pub async fn send_all(&self, mut bytes: &[u8]) -> Result<(), End> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
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

    /// Sends the head, telling the kernel more follows (sendfile).
    pub async fn send_head_more(&self, mut bytes: &[u8]) -> Result<(), End> {
        // Encrypted now, written with the body's first record.
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return self.encrypt(tls, bytes).await;
        }
        while !bytes.is_empty() {
            let n = self
                .retry(|| sys::send_more(self.stream.get_ref(), bytes))
                .await?;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// Sends `len` bytes of `file` from `offset` with sendfile(2).
    pub async fn send_file(&self, file: &std::fs::File, offset: u64, len: u64) -> Result<(), End> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return self.send_file_encrypted(tls, file, offset, len).await;
        }
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
            match op() {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    async fn writable(&self) -> Result<(), End> {
        let at = Instant::now() + self.send_timeout;
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

    /// Reads what is there into `buf`, waiting until `deadline`; `Ok(0)` at end of stream.
    pub async fn read_some(&self, buf: &mut [u8], deadline: Instant) -> Result<usize, End> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return self.read_decrypted(tls, buf, deadline).await;
        }
        loop {
            match self.stream.get_ref().read(buf) {
                Ok(n) => return Ok(n),
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
        if let Some(tls) = &self.tls {
            if tls.borrow().has_plaintext() {
                return Ok(());
            }
        }
        self.stream.readable().await
    }

    /// Sends close_notify (when the handshake got that far) and drops the
    /// record layer: what the client still sends is read as it comes.
    pub async fn end_tls(&mut self) {
        if let Some(tls) = self.tls.take() {
            tls.borrow_mut().close_notify();
            let _ = self.flush(&tls).await;
        }
    }

    /// Encrypts `bytes` a record at a time, writing whenever a buffer's
    /// worth is waiting.
    async fn encrypt(&self, tls: &std::cell::RefCell<Tls>, bytes: &[u8]) -> Result<(), End> {
        for chunk in bytes.chunks(crate::limits::TLS_CHUNK) {
            if tls.borrow().pending_out() + chunk.len() > crate::limits::OUT_BUF {
                self.flush(tls).await?;
            }
            // Before the handshake is done there is nothing to send on.
            if !tls.borrow_mut().encrypt(chunk).map_err(|_| End::Io)? {
                return Err(End::Io);
            }
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

    /// A file body over TLS: read a record's worth, encrypt, write.
    async fn send_file_encrypted(
        &self,
        tls: &std::cell::RefCell<Tls>,
        file: &std::fs::File,
        mut offset: u64,
        len: u64,
    ) -> Result<(), End> {
        use std::os::unix::fs::FileExt;
        let mut chunk = vec![0u8; crate::limits::TLS_CHUNK.min(len as usize)];
        let end = offset + len;
        while offset < end {
            let want = chunk.len().min((end - offset) as usize);
            // 0: the file shrank under us. Stop short; the close tells the client.
            let n = match file.read_at(&mut chunk[..want], offset)? {
                0 => return Err(End::Io),
                n => n,
            };
            self.encrypt(tls, &chunk[..n]).await?;
            offset += n as u64;
        }
        self.flush(tls).await
    }

    /// Completes the handshake of a TLS connection before its first
    /// request is read, so that a handshaking client holds its record
    /// layer and nothing more (no head buffer, no request frame). Its
    /// tickets go out before it returns.
    pub async fn handshake(&self, deadline: Instant) -> Result<(), End> {
        let Some(tls) = &self.tls else {
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

/// Runs `fut` until `at` at most.
pub async fn within<T>(
    deadlines: &Deadlines,
    at: Instant,
    fut: impl Future<Output = T>,
) -> Option<T> {
    future::or(async { Some(fut.await) }, async {
        deadlines.until(at).await;
        None
    })
    .await
}
