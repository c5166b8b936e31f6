//! Reusable buffers. An idle connection holds none, so a thousand idle
//! keep-alive clients cost their sockets and little else.

use std::cell::RefCell;

use crate::limits::{HEAD_BUF, OUT_BUF, POOL_KEEP};

#[derive(Default)]
pub struct Pool {
    heads: RefCell<Vec<Box<[u8; HEAD_BUF]>>>,
    outs: RefCell<Vec<Vec<u8>>>,
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
        self.outs
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(OUT_BUF))
    }

    pub fn give_out(&self, mut b: Vec<u8>) {
        let mut outs = self.outs.borrow_mut();
        // A listing may have grown it: keep only buffers of the usual size.
        if outs.len() < POOL_KEEP && b.capacity() <= OUT_BUF * 2 {
            b.clear();
            outs.push(b);
        }
    }
}
