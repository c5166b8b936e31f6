//! The harness's own client against the real server: what else happens in
//! the test process meanwhile does not make an answer look missing. Alone
//! in its file: the signal handler it installs is the whole process's.

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use nix::libc;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

/// The handler has run: the call it interrupted has returned.
static HANDLED: AtomicBool = AtomicBool::new(false);

extern "C" fn note(_: libc::c_int) {
    HANDLED.store(true, Ordering::SeqCst);
}

/// The state letter of thread `tid` of this process (`S`: asleep in a call).
fn thread_state(tid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // "tid (name) S ...": the name may hold spaces and parentheses.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// A signal reaches a thread while it waits for an answer. In the suite it
/// is the SIGCHLD of another test's child (`read_some`); here a signal with
/// a handler, sent to that thread once it sleeps in its read. The answer
/// that comes after it is read, not taken for a close.
#[test]
fn a_signal_while_an_answer_is_awaited_does_not_lose_it() {
    let restartable = SigAction::new(
        SigHandler::Handler(note),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic, which is safe at any point.
    unsafe { sigaction(Signal::SIGUSR1, &restartable) }.unwrap();
    let s = Server::start(&[]);
    let mut c = s.connect();
    // A head without its end: nothing is answered until it comes.
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n")
        .unwrap();
    let mut reading = c.try_clone().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        // SAFETY: pthread_self has no preconditions.
        tx.send((unsafe { libc::pthread_self() }, nix::unistd::gettid()))
            .unwrap();
        read_response(&mut reading, false)
    });
    let (thread, tid) = rx.recv().unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || thread_state(tid.as_raw())
            == Some('S')),
        "the reader never waited"
    );
    // SAFETY: `thread` is running until it is joined below.
    assert_eq!(unsafe { libc::pthread_kill(thread, libc::SIGUSR1) }, 0);
    // The rest of the head only once the read is over: an answer already
    // there would be read before the signal is seen.
    assert!(
        wait_until(Duration::from_secs(10), || HANDLED.load(Ordering::SeqCst)),
        "the signal never arrived"
    );
    c.write_all(b"\r\n").unwrap();
    let r = reader.join().unwrap().expect("the answer");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("hello"), "{}", r.text());
}
