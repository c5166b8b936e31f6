//! Reusable buffers. An idle connection holds none, so a thousand idle
//! keep-alive clients cost their sockets and little else.

use std::cell::RefCell;

#[cfg(feature = "tls")]
use crate::limits::TLS_READ;
use crate::limits::{HEAD_BUF, OUT_BUF, POOL_KEEP};

/// Lengthens `v` to `len` bytes with zeros (or shortens it): one fill of
/// memory. `Vec::resize` is shared with crates built for size, and there
/// stores a byte per turn, five instructions a byte on MIPS.
pub fn zeroed_to(v: &mut Vec<u8>, len: usize) {
    match len.checked_sub(v.len()) {
        Some(more) => v.extend(std::iter::repeat_n(0, more)),
        None => v.truncate(len),
    }
}

#[derive(Default)]
pub struct Pool {
    heads: RefCell<Vec<Box<[u8; HEAD_BUF]>>>,
    outs: Shelf<OUT_BUF>,
    /// TLS: received records and the requests decrypted from them.
    #[cfg(feature = "tls")]
    records: Shelf<TLS_READ>,
}

/// Emptied byte buffers made with room for `SIZE`.
#[derive(Default)]
struct Shelf<const SIZE: usize>(RefCell<Vec<Vec<u8>>>);

impl<const SIZE: usize> Shelf<SIZE> {
    fn take(&self) -> Vec<u8> {
        self.0
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(SIZE))
    }

    fn give(&self, mut b: Vec<u8>) {
        let mut kept = self.0.borrow_mut();
        // One that grew (a listing, a large record) is freed, not kept.
        if kept.len() < POOL_KEEP && b.capacity() <= SIZE * 2 {
            b.clear();
            kept.push(b);
        }
    }
}

impl Pool {
    pub fn head(&self) -> Box<[u8; HEAD_BUF]> {
        self.heads
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Box::new([0; HEAD_BUF]))
    }

    pub fn give_head(&self, b: Box<[u8; HEAD_BUF]>) {
        let mut heads = self.heads.borrow_mut();
        if heads.len() < POOL_KEEP {
            heads.push(b);
        }
    }

    pub fn out(&self) -> Vec<u8> {
        self.outs.take()
    }

    pub fn give_out(&self, b: Vec<u8>) {
        self.outs.give(b)
    }

    #[cfg(feature = "tls")]
    pub fn record(&self) -> Vec<u8> {
        self.records.take()
    }

    #[cfg(feature = "tls")]
    pub fn give_record(&self, b: Vec<u8>) {
        self.records.give(b)
    }
}

#[cfg(test)]
mod tests {
    use super::zeroed_to;

    #[test]
    fn zeroed_to_lengthens_with_zeros_and_shortens() {
        let mut v = vec![7u8; 3];
        zeroed_to(&mut v, 6);
        assert_eq!(v, [7, 7, 7, 0, 0, 0]);
        zeroed_to(&mut v, 2);
        assert_eq!(v, [7, 7]);
    }
}
