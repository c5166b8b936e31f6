//! The timer and the notifier are re-armed only when needed: waits that
//! reuse an armed deadline (or one within a millisecond of it), or follow
//! a wait that was not notified, must still time out and wake as before.

use std::io::{self, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use polling::{Event, Events, Poller};

#[test]
fn a_deadline_reused_after_an_io_event_still_expires() -> io::Result<()> {
    let poller = Poller::new()?;
    let mut events = Events::new();
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let mut client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    unsafe { poller.add(&server, Event::readable(1))? };
    client.write_all(b"x")?;

    let deadline = Instant::now() + Duration::from_millis(300);
    assert_eq!(poller.wait_deadline(&mut events, deadline)?, 1);
    assert!(Instant::now() < deadline);
    // The same deadline again, with nothing else to report: the timer armed
    // by the first wait must end this one.
    events.clear();
    assert_eq!(poller.wait_deadline(&mut events, deadline)?, 0);
    assert!(Instant::now() >= deadline);

    // After it fired, a later deadline is armed anew.
    let later = Instant::now() + Duration::from_millis(100);
    assert_eq!(poller.wait_deadline(&mut events, later)?, 0);
    assert!(Instant::now() >= later);
    Ok(())
}

#[test]
fn a_notification_after_a_wait_without_one_still_wakes() -> io::Result<()> {
    let poller = Poller::new()?;
    let mut events = Events::new();
    poller.wait(&mut events, Some(Duration::from_millis(10)))?;
    poller.notify()?;
    let start = Instant::now();
    poller.wait(&mut events, Some(Duration::from_secs(10)))?;
    assert!(start.elapsed() < Duration::from_secs(5));
    // And once more, after a notified wait re-armed the notifier.
    poller.notify()?;
    let start = Instant::now();
    poller.wait(&mut events, Some(Duration::from_secs(10)))?;
    assert!(start.elapsed() < Duration::from_secs(5));
    Ok(())
}

#[test]
fn a_wait_without_deadline_after_an_armed_one_is_not_cut_short() -> io::Result<()> {
    let poller = Poller::new()?;
    let mut events = Events::new();
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let mut client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    unsafe { poller.add(&server, Event::readable(1))? };
    client.write_all(b"x")?;
    // Arms the timer for 100 ms, returns at once with the byte.
    poller.wait(&mut events, Some(Duration::from_millis(100)))?;
    // No deadline now: the old timer is disarmed, and the notification sent
    // after 300 ms is what ends the wait, not the timer.
    let start = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            poller.notify()
        });
        poller.wait(&mut events, None)
    })?;
    assert!(start.elapsed() >= Duration::from_millis(300));
    Ok(())
}

#[test]
fn a_timeout_asked_again_and_again_still_expires() -> io::Result<()> {
    // A timer that was never armed would make a wait below last for ever:
    // the test fails instead.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(timeout_asked_again_and_again()));
    finished
        .recv_timeout(Duration::from_secs(10))
        .expect("a wait outlived its deadline by seconds")
}

fn timeout_asked_again_and_again() -> io::Result<()> {
    // A far timer asked as a timeout at every wait, as async-io asks it:
    // each deadline is a little off the armed one, which serves them all.
    let poller = Poller::new()?;
    let mut events = Events::new();
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let mut client = TcpStream::connect(listener.local_addr()?)?;
    let (mut server, _) = listener.accept()?;
    unsafe { poller.add(&server, Event::readable(1))? };
    let deadline = Instant::now() + Duration::from_millis(400);
    for _ in 0..50 {
        client.write_all(b"x")?;
        events.clear();
        let timeout = deadline.saturating_duration_since(Instant::now());
        assert_eq!(poller.wait(&mut events, Some(timeout))?, 1);
        std::io::Read::read(&mut server, &mut [0; 8])?;
        poller.modify(&server, Event::readable(1))?;
    }
    // Nothing more to read: the timer set by the first wait ends this one,
    // within the slack of the deadline.
    events.clear();
    let timeout = deadline.saturating_duration_since(Instant::now());
    assert_eq!(poller.wait(&mut events, Some(timeout))?, 0);
    assert!(Instant::now() + Duration::from_millis(1) >= deadline);
    // A deadline moved by more than the slack is armed anew.
    let later = Instant::now() + Duration::from_millis(100);
    assert_eq!(poller.wait_deadline(&mut events, later)?, 0);
    assert!(Instant::now() >= later);
    Ok(())
}
