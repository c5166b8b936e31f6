//! Memory for the future that serves one request, kept for the next one.
//! That future is about 5.5 KiB; musl's allocator gives a block of that size
//! a mapping of its own and unmaps it when it is freed, so a new box per
//! request cost an mmap and a munmap every few dozen requests.

use std::alloc::{self, Layout};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

use crate::limits::FRAMES_KEEP;

/// Blocks of one layout (the first one given back), free for reuse.
#[derive(Default)]
pub struct Frames {
    layout: Cell<Option<Layout>>,
    free: RefCell<Vec<NonNull<u8>>>,
}

/// A future placed in a block from `Frames`; the block goes back when it is dropped.
pub struct Framed<'a, F> {
    frames: &'a Frames,
    at: NonNull<F>,
}

impl Frames {
    pub fn place<F: Future>(&self, fut: F) -> Framed<'_, F> {
        let at = self.take::<F>();
        // SAFETY: `at` is a fresh or returned block with F's layout, not in use.
        unsafe { at.as_ptr().write(fut) };
        Framed { frames: self, at }
    }

    fn take<F>(&self) -> NonNull<F> {
        let layout = const {
            assert!(size_of::<F>() > 0, "a future with no state needs no block");
            Layout::new::<F>()
        };
        if self.layout.get() == Some(layout) {
            if let Some(block) = self.free.borrow_mut().pop() {
                return block.cast();
            }
        }
        // SAFETY: the layout's size is not zero (asserted above).
        let block = unsafe { alloc::alloc(layout) };
        NonNull::new(block.cast()).unwrap_or_else(|| alloc::handle_alloc_error(layout))
    }

    fn give_back(&self, block: NonNull<u8>, layout: Layout) {
        if self.layout.get().is_none() {
            self.layout.set(Some(layout));
        }
        let mut free = self.free.borrow_mut();
        if self.layout.get() == Some(layout) && free.len() < FRAMES_KEEP {
            free.push(block);
        } else {
            // SAFETY: `block` came from `take` with this same layout.
            unsafe { alloc::dealloc(block.as_ptr(), layout) };
        }
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        if let Some(layout) = self.layout.get() {
            for block in self.free.get_mut().drain(..) {
                // SAFETY: every kept block was allocated with `layout`.
                unsafe { alloc::dealloc(block.as_ptr(), layout) };
            }
        }
    }
}

impl<F: Future> Future for Framed<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the future stays at `at` until `Framed` is dropped and is
        // never moved out of it (`Framed` moves only the pointer): pinned.
        unsafe { Pin::new_unchecked(&mut *self.at.as_ptr()) }.poll(cx)
    }
}

impl<F> Drop for Framed<'_, F> {
    fn drop(&mut self) {
        // SAFETY: `at` holds the future written by `place`, dropped only here.
        unsafe { std::ptr::drop_in_place(self.at.as_ptr()) };
        self.frames.give_back(self.at.cast(), Layout::new::<F>());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_reused_and_its_future_dropped_once() {
        let frames = Frames::default();
        let dropped = std::rc::Rc::new(Cell::new(0));
        struct Counted(std::rc::Rc<Cell<u32>>, [u8; 64]);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
            }
        }
        let make = |d: std::rc::Rc<Cell<u32>>| {
            let c = Counted(d, [7; 64]);
            async move { c.1[63] }
        };
        let first = frames.place(make(dropped.clone()));
        let block = first.at.cast::<u8>();
        assert_eq!(futures_lite::future::block_on(first), 7);
        assert_eq!(dropped.get(), 1);
        let second = frames.place(make(dropped.clone()));
        assert_eq!(second.at.cast::<u8>(), block, "the same block again");
        drop(second);
        assert_eq!(dropped.get(), 2);
    }
}
