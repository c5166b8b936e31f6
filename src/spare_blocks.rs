//! The allocator of the static musl builds: the C library's, with a few
//! freed small blocks of each size kept for the next allocation of that
//! size. musl's allocator gives a group of blocks back when its last one
//! is freed and builds a new group at the next allocation, so the few
//! short-lived blocks of every request (a TLS record being sealed, the
//! reactor's lists) cost it hundreds of instructions each; taken from a
//! shelf here they cost a dozen. glibc keeps such blocks itself.
//!
//! Sizes up to `MAX_SMALL` are rounded up to one of four classes per
//! doubling (as the C allocator rounds too), so that a block freed by one
//! allocation fits the next of its class. What is kept is bounded by
//! `SPARE_BYTES` for the whole process; the rest goes back at once.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

/// Largest size kept: a full TLS record's sealing buffer fits.
const MAX_SMALL: usize = 32 * 1024;
/// Classes up to 64 bytes in steps of 16, then four per doubling.
const CLASSES: usize = 4 + 4 * (MAX_SMALL.trailing_zeros() as usize - 6);
/// Blocks kept of one class.
const KEEP: u8 = 8;
/// Bytes kept in all classes together.
const SPARE_BYTES: usize = 64 * 1024;
/// Blocks of a larger alignment are not kept: every kept block comes from
/// `malloc`, which aligns to at least this.
const KEPT_ALIGN: usize = 8;

pub struct SpareBlocks {
    /// Held by the thread using `shelves`; another thread that finds it
    /// held goes straight to the C allocator rather than wait.
    busy: AtomicBool,
    shelves: UnsafeCell<Shelves>,
}

// SAFETY: `shelves` is only touched by the one thread that set `busy`.
unsafe impl Sync for SpareBlocks {}

struct Shelves {
    /// Kept blocks of each class, linked through their first word.
    heads: [*mut Kept; CLASSES],
    counts: [u8; CLASSES],
    bytes: usize,
}

struct Kept {
    next: *mut Kept,
}

impl SpareBlocks {
    pub const fn new() -> SpareBlocks {
        SpareBlocks {
            busy: AtomicBool::new(false),
            shelves: UnsafeCell::new(Shelves {
                heads: [ptr::null_mut(); CLASSES],
                counts: [0; CLASSES],
                bytes: 0,
            }),
        }
    }

    /// Runs `f` on the shelves, or returns `None` when another thread has them.
    fn with<T>(&self, f: impl FnOnce(&mut Shelves) -> T) -> Option<T> {
        if self.busy.swap(true, Ordering::Acquire) {
            return None;
        }
        // SAFETY: `busy` was clear and is now set by this thread, so no
        // other reference to the shelves exists until it is cleared below.
        let out = f(unsafe { &mut *self.shelves.get() });
        self.busy.store(false, Ordering::Release);
        Some(out)
    }

    fn take(&self, class: usize) -> *mut u8 {
        self.with(|s| {
            let head = s.heads[class];
            if !head.is_null() {
                // SAFETY: a kept block is at least `Kept`-sized and aligned
                // (classes start at 16 bytes, blocks come from malloc) and
                // its first word was written by `keep`.
                s.heads[class] = unsafe { (*head).next };
                s.counts[class] -= 1;
                s.bytes -= class_size(class);
            }
            head.cast::<u8>()
        })
        .unwrap_or(ptr::null_mut())
    }

    /// Keeps `block` of `class` if there is room; `false` when it must be freed.
    fn keep(&self, class: usize, block: *mut u8) -> bool {
        self.with(|s| {
            let size = class_size(class);
            if s.counts[class] >= KEEP || s.bytes + size > SPARE_BYTES {
                return false;
            }
            let kept = block.cast::<Kept>();
            // SAFETY: the caller gave up `block`, a block of `class` (at least
            // 16 bytes, malloc-aligned), so writing its first word is ours.
            unsafe {
                kept.write(Kept {
                    next: s.heads[class],
                })
            };
            s.heads[class] = kept;
            s.counts[class] += 1;
            s.bytes += size;
            true
        })
        .unwrap_or(false)
    }
}

/// The class of a block that may be kept, or `None`.
fn class_of(layout: Layout) -> Option<usize> {
    let size = layout.size();
    if size == 0 || size > MAX_SMALL || layout.align() > KEPT_ALIGN {
        return None;
    }
    if size <= 64 {
        return Some((size - 1) / 16);
    }
    // The highest bit of `size - 1` picks the doubling, the next two the quarter.
    let top = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize;
    let quarter = ((size - 1) >> (top - 2)) & 3;
    Some(4 + (top - 6) * 4 + quarter)
}

fn class_size(class: usize) -> usize {
    if class < 4 {
        return 16 * (class + 1);
    }
    let top = 6 + (class - 4) / 4;
    (1 << top) + ((class - 4) % 4 + 1) * (1 << (top - 2))
}

/// The layout a block of `class` was asked of the C allocator with.
fn class_layout(class: usize, align: usize) -> Layout {
    // SAFETY: class sizes are at most `MAX_SMALL` and a multiple of 16,
    // and `align` came from a valid layout and is at most `KEPT_ALIGN`.
    unsafe { Layout::from_size_align_unchecked(class_size(class), align) }
}

// SAFETY: every block handed out is either one the C allocator made for a
// layout at least as large and as aligned as asked, or such a block that
// was freed and kept; a block is on a shelf only while nobody holds it.
//
// Not inlined: every allocation in the program calls these, and a copy at
// each call site costs several times their size in flash (ARCHITECTURE.md
// has the figures).
unsafe impl GlobalAlloc for SpareBlocks {
    #[inline(never)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some(class) => {
                let kept = self.take(class);
                if !kept.is_null() {
                    return kept;
                }
                // SAFETY: a valid, non-zero layout.
                unsafe { System.alloc(class_layout(class, layout.align())) }
            }
            // SAFETY: the caller's layout, as it gave it.
            None => unsafe { System.alloc(layout) },
        }
    }

    #[inline(never)]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some(class) => {
                let kept = self.take(class);
                if !kept.is_null() {
                    // SAFETY: the block holds at least `layout.size()` bytes.
                    unsafe { kept.write_bytes(0, layout.size()) };
                    return kept;
                }
                // SAFETY: a valid, non-zero layout.
                unsafe { System.alloc_zeroed(class_layout(class, layout.align())) }
            }
            // SAFETY: the caller's layout, as it gave it.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    #[inline(never)]
    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        match class_of(layout) {
            Some(class) => {
                if !self.keep(class, block) {
                    // SAFETY: made by `System` with this class's layout.
                    unsafe { System.dealloc(block, class_layout(class, layout.align())) }
                }
            }
            // SAFETY: made by `System` with the caller's layout.
            None => unsafe { System.dealloc(block, layout) },
        }
    }

    #[inline(never)]
    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size`, rounded up to the
        // alignment, does not overflow `isize`.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class_of(layout), class_of(new_layout)) {
            // The block already has its class's room.
            (Some(old), Some(new)) if old == new => block,
            // SAFETY: made by `System` with the caller's layout.
            (None, None) => unsafe { System.realloc(block, layout, new_size) },
            _ => {
                // SAFETY: a valid, non-zero layout.
                let moved = unsafe { self.alloc(new_layout) };
                if !moved.is_null() {
                    // SAFETY: both blocks hold at least the smaller size and
                    // are distinct: `block` is still held by the caller.
                    unsafe {
                        ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                }
                moved
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).unwrap()
    }

    #[test]
    fn every_size_fits_its_class_and_the_one_below_does_not() {
        let mut last = None;
        for size in 1..=MAX_SMALL {
            let class = class_of(layout(size)).unwrap();
            assert!(class < CLASSES, "{size}");
            assert!(class_size(class) >= size, "{size} in {class}");
            assert!(
                class == 0 || class_size(class - 1) < size,
                "{size} in {class}"
            );
            assert_eq!(class_size(class) % 16, 0);
            if let Some(prev) = last {
                assert!(class == prev || class == prev + 1, "{size}");
            }
            last = Some(class);
        }
        assert_eq!(last, Some(CLASSES - 1));
        assert_eq!(class_size(CLASSES - 1), MAX_SMALL);
        // Four classes per doubling past 64: 65..=80 is one, 129..=160 another.
        assert_eq!(class_size(class_of(layout(65)).unwrap()), 80);
        assert_eq!(class_size(class_of(layout(129)).unwrap()), 160);
        assert_eq!(class_size(class_of(layout(16_406)).unwrap()), 20_480);
    }

    #[test]
    fn large_or_strictly_aligned_blocks_are_not_kept() {
        assert_eq!(class_of(layout(MAX_SMALL + 1)), None);
        assert_eq!(class_of(Layout::from_size_align(64, 16).unwrap()), None);
    }

    #[test]
    fn a_freed_block_serves_the_next_allocation_of_its_class() {
        let spare = SpareBlocks::new();
        // SAFETY: blocks are used within their layouts and freed once.
        unsafe {
            let a = spare.alloc(layout(1000));
            a.write_bytes(7, 1000);
            spare.dealloc(a, layout(1000));
            // 1000 and 1024 share a class: the same block comes back.
            let b = spare.alloc_zeroed(layout(1024));
            assert_eq!(a, b);
            assert!((0..1024).all(|i| *b.add(i) == 0));
            // Growing within the class keeps the block; past it, moves it.
            b.write_bytes(9, 1024);
            let c = spare.realloc(b, layout(1024), 1020);
            assert_eq!(c, b);
            let d = spare.realloc(c, layout(1020), 5000);
            assert!((0..1020).all(|i| *d.add(i) == 9));
            spare.dealloc(d, layout(5000));
            let e = spare.alloc(layout(1000));
            assert_eq!(e, c, "the block moved from is kept");
            spare.dealloc(e, layout(1000));
        }
    }

    #[test]
    fn what_is_kept_stays_within_its_bounds() {
        let spare = SpareBlocks::new();
        let big = layout(MAX_SMALL);
        // SAFETY: blocks are used within their layouts and freed once.
        unsafe {
            let small: Vec<_> = (0..16).map(|_| spare.alloc(layout(16))).collect();
            let large: Vec<_> = (0..4).map(|_| spare.alloc(big)).collect();
            for &b in &small {
                spare.dealloc(b, layout(16));
            }
            for &b in &large {
                spare.dealloc(b, big);
            }
        }
        // Eight of one class; then as many large ones as the bytes allow.
        spare.with(|s| {
            assert_eq!(s.counts[0], KEEP);
            assert_eq!(s.counts[CLASSES - 1], 1);
            assert_eq!(s.bytes, 8 * 16 + MAX_SMALL);
        });
    }

    #[test]
    fn a_thread_that_finds_the_shelves_busy_uses_the_c_allocator() {
        let spare = SpareBlocks::new();
        spare.busy.store(true, Ordering::SeqCst);
        // SAFETY: the block is used within its layout and freed once.
        unsafe {
            let a = spare.alloc(layout(100));
            assert!(!a.is_null());
            spare.dealloc(a, layout(100));
        }
        spare.busy.store(false, Ordering::SeqCst);
        spare.with(|s| assert_eq!(s.bytes, 0));
    }
}
