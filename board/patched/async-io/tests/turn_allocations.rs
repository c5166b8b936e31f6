//! Patched: a turn of the reactor that wakes tasks allocates nothing once its lists have
//! grown, as a server's every request passes through one.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_io::{block_on, Async};
use futures_lite::future;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Only the thread under test counts: the harness's and async-io's own thread allocate
    /// when they please.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTED.get() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr came from System.alloc with this layout, through alloc above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Sends one byte back and forth `rounds` times: each side waits for the other's byte, so
/// each round takes a turn of the reactor that wakes a task.
async fn ping_pong(a: &Async<UnixStream>, b: &Async<UnixStream>, rounds: usize) {
    let ping = async {
        let mut byte = [0u8];
        for _ in 0..rounds {
            a.write_with(|s| (&*s).write(b"p")).await.unwrap();
            a.read_with(|s| (&*s).read(&mut byte)).await.unwrap();
        }
    };
    let pong = async {
        let mut byte = [0u8];
        for _ in 0..rounds {
            b.read_with(|s| (&*s).read(&mut byte)).await.unwrap();
            b.write_with(|s| (&*s).write(b"q")).await.unwrap();
        }
    };
    future::zip(ping, pong).await;
}

#[test]
fn a_turn_that_wakes_allocates_nothing() {
    block_on(async {
        let (a, b) = Async::<UnixStream>::pair().unwrap();
        ping_pong(&a, &b, 10).await;
        COUNTED.set(true);
        ping_pong(&a, &b, 1000).await;
        COUNTED.set(false);
        let made = ALLOCATIONS.load(Ordering::Relaxed);
        assert_eq!(made, 0, "{made} allocations in 1000 rounds");
    });
}
