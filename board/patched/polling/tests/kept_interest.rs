//! Oneshot interest is kept in the kernel level-triggered and used up in
//! the poller: a source must still get exactly one event per arming, see
//! what arrived while it was not armed, and not be reported when it waits
//! for nothing, hang-ups included.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use polling::{Event, Events, Poller};

fn pair() -> io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    server.set_nonblocking(true)?;
    Ok((client, server))
}

fn wait(poller: &Poller, ms: u64) -> io::Result<Vec<Event>> {
    let mut events = Events::new();
    poller.wait(&mut events, Some(Duration::from_millis(ms)))?;
    Ok(events.iter().collect())
}

fn drain(mut s: &TcpStream) {
    let mut buf = [0; 64];
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
}

#[test]
fn one_event_per_arming_and_what_came_meanwhile_is_seen() -> io::Result<()> {
    let poller = Poller::new()?;
    let (mut client, server) = pair()?;
    unsafe { poller.add(&server, Event::readable(7))? };
    client.write_all(b"a")?;
    let got = wait(&poller, 2000)?;
    assert_eq!(got.len(), 1);
    assert!(got[0].key == 7 && got[0].readable);
    // Used up: unread data is not reported again until re-armed.
    assert!(wait(&poller, 50)?.is_empty());
    assert!(wait(&poller, 50)?.is_empty());
    // Re-armed with the byte still unread, and again after more came with
    // no wait between: each time one event.
    poller.modify(&server, Event::readable(7))?;
    assert_eq!(wait(&poller, 2000)?.len(), 1);
    drain(&server);
    client.write_all(b"b")?;
    std::thread::sleep(Duration::from_millis(50));
    poller.modify(&server, Event::readable(7))?;
    assert_eq!(wait(&poller, 2000)?.len(), 1);
    Ok(())
}

/// This thread's CPU time (user and system) in clock ticks.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn a_source_waiting_for_nothing_is_not_reported_even_after_a_hang_up() -> io::Result<()> {
    let poller = Poller::new()?;
    let (client, server) = pair()?;
    unsafe { poller.add(&server, Event::readable(1))? };
    poller.modify(&server, Event::none(1))?;
    // Both ways shut: EPOLLHUP, which epoll reports whatever was asked.
    server.shutdown(std::net::Shutdown::Write)?;
    drop(client);
    // Not handed out, and not reported to the poller again and again
    // either: waiting 300 ms then costs next to no CPU.
    let before = cpu_ticks();
    for _ in 0..3 {
        assert!(wait(&poller, 100)?.is_empty());
    }
    let used = cpu_ticks() - before;
    assert!(used < 10, "{used} ticks in 300 ms of waiting: the hang-up spins");
    // Armed again, the hang-up is there to read.
    poller.modify(&server, Event::readable(1))?;
    let got = wait(&poller, 2000)?;
    assert!(got.len() == 1 && got[0].readable);
    Ok(())
}

#[test]
fn waits_that_cannot_block_drop_unwanted_reports_and_a_blocking_one_still_sleeps() -> io::Result<()> {
    let poller = Poller::new()?;
    let (mut client, server) = pair()?;
    // SAFETY: epoll drops a closed descriptor's registration itself.
    unsafe { poller.add(&server, Event::readable(2))? };
    client.write_all(b"a")?;
    assert_eq!(wait(&poller, 2000)?.len(), 1);
    // Used up, the byte unread (its task not run yet): not handed out by
    // waits that return at once.
    for _ in 0..3 {
        assert!(wait(&poller, 0)?.is_empty());
    }
    // Nor by one that blocks, which must sleep rather than be woken by
    // it again and again.
    let before = cpu_ticks();
    for _ in 0..3 {
        assert!(wait(&poller, 100)?.is_empty());
    }
    let used = cpu_ticks() - before;
    assert!(used < 10, "{used} ticks in 300 ms of waiting: the unread byte spins");
    // Armed again, in either order with a wait that returns at once.
    assert!(wait(&poller, 0)?.is_empty());
    poller.modify(&server, Event::readable(2))?;
    assert_eq!(wait(&poller, 0)?.len(), 1);
    poller.modify(&server, Event::readable(2))?;
    assert_eq!(wait(&poller, 0)?.len(), 1);
    Ok(())
}

#[test]
fn writable_is_reported_once_per_arming_and_reading_still_works() -> io::Result<()> {
    let poller = Poller::new()?;
    let (mut client, server) = pair()?;
    unsafe { poller.add(&server, Event::writable(3))? };
    let got = wait(&poller, 2000)?;
    assert!(got.len() == 1 && got[0].writable && !got[0].readable);
    // Always writable, but no longer wanted: not reported.
    assert!(wait(&poller, 50)?.is_empty());
    poller.modify(&server, Event::readable(3))?;
    assert!(wait(&poller, 50)?.is_empty());
    client.write_all(b"x")?;
    let got = wait(&poller, 2000)?;
    assert!(got.len() == 1 && got[0].readable && !got[0].writable);
    // Both asked, both ready: one event with both.
    poller.modify(&server, Event::all(3))?;
    let got = wait(&poller, 2000)?;
    assert!(got.len() == 1 && got[0].readable && got[0].writable);
    Ok(())
}

#[test]
fn a_deleted_source_is_silent_and_its_descriptor_can_come_back() -> io::Result<()> {
    let poller = Poller::new()?;
    let (mut client, server) = pair()?;
    unsafe { poller.add(&server, Event::readable(5))? };
    poller.delete(&server)?;
    client.write_all(b"x")?;
    assert!(wait(&poller, 50)?.is_empty());
    unsafe { poller.add(&server, Event::readable(6))? };
    let got = wait(&poller, 2000)?;
    assert!(got.len() == 1 && got[0].key == 6);
    Ok(())
}

#[test]
fn many_sources_each_get_their_own_key() -> io::Result<()> {
    let poller = Poller::new()?;
    let pairs: Vec<_> = (0..20).map(|_| pair()).collect::<io::Result<_>>()?;
    for (i, (_, server)) in pairs.iter().enumerate() {
        unsafe { poller.add(server, Event::readable(100 + i))? };
    }
    for (_, (client, _)) in pairs.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        (&*client).write_all(b"x")?;
    }
    let mut seen = Vec::new();
    while seen.len() < 10 {
        let got = wait(&poller, 2000)?;
        assert!(!got.is_empty(), "only {seen:?}");
        seen.extend(got.iter().map(|e| e.key));
    }
    seen.sort();
    assert_eq!(seen, (0..20).step_by(2).map(|i| 100 + i).collect::<Vec<_>>());
    assert!(wait(&poller, 50)?.is_empty());
    Ok(())
}

/// Whether the kernel's epoll set holds `fd` (its `tfd:` lines in fdinfo).
fn kernel_holds(poller: &Poller, fd: &impl std::os::fd::AsRawFd) -> bool {
    use std::os::fd::AsRawFd;
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", poller.as_raw_fd()))
        .unwrap();
    let wanted = fd.as_raw_fd().to_string();
    info.lines()
        .filter_map(|l| l.strip_prefix("tfd:"))
        .any(|l| l.split_whitespace().next() == Some(wanted.as_str()))
}

#[test]
fn a_source_added_with_no_interest_reaches_the_kernel_with_its_first() -> io::Result<()> {
    let poller = Poller::new()?;
    let (mut client, server) = pair()?;
    // Added and deleted without ever waiting: the kernel never sees it.
    unsafe { poller.add(&server, Event::none(8))? };
    assert!(!kernel_holds(&poller, &server));
    poller.modify(&server, Event::none(8))?;
    assert!(!kernel_holds(&poller, &server));
    poller.delete(&server)?;
    // Added again; what arrived before the first interest is reported.
    unsafe { poller.add(&server, Event::none(9))? };
    client.write_all(b"x")?;
    assert!(wait(&poller, 50)?.is_empty());
    poller.modify(&server, Event::readable(9))?;
    assert!(kernel_holds(&poller, &server));
    let got = wait(&poller, 2000)?;
    assert!(got.len() == 1 && got[0].key == 9 && got[0].readable);
    poller.delete(&server)?;
    assert!(!kernel_holds(&poller, &server));
    // An interest given at once still goes straight to the kernel.
    unsafe { poller.add(&server, Event::readable(10))? };
    assert!(kernel_holds(&poller, &server));
    Ok(())
}
