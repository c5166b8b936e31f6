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
use crate::sys;

/// A client socket registered with the reactor.
pub type Stream = Async<TcpStream>;

/// Why a connection ended early; all of them simply close it.
#[derive(Debug)]
pub enum End {
    Timeout,
    Closed,
    Io,
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
}

impl Sock {
    pub async fn send_all(&self, mut bytes: &[u8]) -> Result<(), End> {
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
