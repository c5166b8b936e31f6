//! A connection to a backend, over TCP or a unix socket, with the reads
//! and writes an exchange needs, each bounded by a deadline.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Instant;

use async_io::Async;

use crate::net::deadline::Deadlines;
use crate::net::deadline::within;
use crate::net::local::{Connected, Unreached};
use crate::proxy::settings::Backend;

pub enum Stream {
    Tcp(Async<TcpStream>),
    Unix(Async<UnixStream>),
}

/// How a backend operation failed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Failed {
    /// No connection: the socket is missing or refuses.
    Refused,
    Timeout,
    /// The backend closed or reset the connection.
    Closed,
}

impl Stream {
    pub async fn connect(
        backend: &Backend,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Stream, Failed> {
        match backend.0.connect(deadlines, until).await {
            Ok(Connected::Tcp(s)) => Ok(Stream::Tcp(s)),
            Ok(Connected::Unix(s)) => Ok(Stream::Unix(s)),
            Err(Unreached::Refused(_)) => Err(Failed::Refused),
            Err(Unreached::Timeout) => Err(Failed::Timeout),
        }
    }

    fn read_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.get_ref().read(buf),
            Stream::Unix(s) => s.get_ref().read(buf),
        }
    }

    fn write_now(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.get_ref().write(buf),
            Stream::Unix(s) => s.get_ref().write(buf),
        }
    }

    async fn readable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable().await,
            Stream::Unix(s) => s.readable().await,
        }
    }

    async fn writable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.writable().await,
            Stream::Unix(s) => s.writable().await,
        }
    }

    /// Whether a kept connection is still usable: nothing to read and no
    /// end of stream (a backend that closed it makes it readable with EOF).
    pub fn is_fresh(&self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.read_now(&mut b), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Reads what is there, waiting until `until`; `Ok(0)` at end of stream.
    pub async fn read_some(
        &self,
        buf: &mut [u8],
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<usize, Failed> {
        loop {
            match self.read_now(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match within(deadlines, until, self.readable()).await {
                        Some(Ok(())) => {}
                        Some(Err(_)) => return Err(Failed::Closed),
                        None => return Err(Failed::Timeout),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Failed::Closed),
            }
        }
    }

    /// Writes all of `bytes`, each stall bounded by `until`.
    pub async fn write_all(
        &self,
        mut bytes: &[u8],
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<(), Failed> {
        while !bytes.is_empty() {
            match self.write_now(bytes) {
                Ok(0) => return Err(Failed::Closed),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match within(deadlines, until, self.writable()).await {
                        Some(Ok(())) => {}
                        Some(Err(_)) => return Err(Failed::Closed),
                        None => return Err(Failed::Timeout),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Failed::Closed),
            }
        }
        Ok(())
    }

    /// Ends our side of a tunnel: the backend reads end of stream.
    pub fn shutdown_write(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.get_ref().shutdown(std::net::Shutdown::Write),
            Stream::Unix(s) => s.get_ref().shutdown(std::net::Shutdown::Write),
        };
    }
}
