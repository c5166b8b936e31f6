//! What a client has sent and the server has not used yet: the bytes of a
//! head, the start of a body, a pipelined request. The head buffer is held
//! only while bytes are pending, so an idle connection holds none.

use std::rc::Rc;
use std::time::Instant;

use crate::limits::HEAD_BUF;
use crate::net::buffers::Pool;
use crate::net::sock::{End, Sock};

pub struct Input {
    pool: Rc<Pool>,
    buf: Option<Box<[u8; HEAD_BUF]>>,
    /// Bytes of `buf` that are valid.
    len: usize,
}

impl Input {
    pub fn new(pool: Rc<Pool>) -> Input {
        Input {
            pool,
            buf: None,
            len: 0,
        }
    }

    /// The bytes received and not yet consumed.
    pub fn bytes(&self) -> &[u8] {
        self.buf.as_deref().map_or(&[], |b| &b[..self.len])
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads more into the buffer, waiting until `deadline`; `Ok(0)` at the
    /// end of the stream, or when the buffer is full (a head too large).
    pub async fn read_more(&mut self, sock: &Sock, deadline: Instant) -> Result<usize, End> {
        let buf = self.buf.get_or_insert_with(|| self.pool.head());
        if self.len == buf.len() {
            return Ok(0);
        }
        let n = sock.read_some(&mut buf[self.len..], deadline).await?;
        self.len += n;
        Ok(n)
    }

    /// Takes what the client has sent already, without waiting. The
    /// buffer goes back to the pool if there was nothing.
    pub fn take_ready(&mut self, sock: &Sock) {
        let buf = self.buf.get_or_insert_with(|| self.pool.head());
        match sock.read_ready(&mut buf[self.len..]) {
            Some(n) => self.len += n,
            None => self.release(),
        }
    }

    /// Drops `n` bytes from the front, keeping what follows.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        // Usually the whole buffer is one request: nothing to move.
        if let (Some(buf), true) = (self.buf.as_deref_mut(), n < self.len) {
            buf.copy_within(n..self.len, 0);
        }
        self.len -= n;
    }

    /// Takes up to `n` buffered bytes (the start of a request body).
    pub fn take(&mut self, n: u64) -> Vec<u8> {
        let n = (self.len as u64).min(n) as usize;
        let taken = self.bytes()[..n].to_vec();
        self.consume(n);
        taken
    }

    /// Reads past `left` bytes of a body, so the next request can be parsed.
    pub async fn discard(
        &mut self,
        sock: &Sock,
        mut left: u64,
        deadline: Instant,
    ) -> Result<(), End> {
        loop {
            let buffered = (self.len as u64).min(left);
            self.consume(buffered as usize);
            left -= buffered;
            if left == 0 {
                return Ok(());
            }
            if self.read_more(sock, deadline).await? == 0 {
                return Err(End::Closed);
            }
        }
    }

    /// Forgets what is buffered (after an answer that closes).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Gives the buffer back to the pool when nothing is pending.
    pub fn release(&mut self) {
        if self.len == 0 {
            if let Some(b) = self.buf.take() {
                self.pool.give_head(b);
            }
        }
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        self.len = 0;
        self.release();
    }
}
