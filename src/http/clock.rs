//! The start of every response head: the status line, then the Date and
//! Server lines, made once a second rather than per request.

use std::cell::{Cell, Ref, RefCell};

use crate::http::httpdate;
use crate::http::status::Status;

pub struct Clock {
    /// `\r\nServer: NAME`, unless the config turned it off.
    server_line: Option<String>,
    /// The second `start` was made for.
    secs: Cell<u64>,
    /// `HTTP/1.1 200 OK\r\nDate: DATE\r\nServer: NAME`: what a 200 head
    /// starts with, in one piece (each piece copied into a head is a memcpy
    /// call). Other statuses take the part after the status line.
    start: RefCell<Vec<u8>>,
}

impl Clock {
    pub fn new(server_name: Option<&str>) -> Clock {
        Clock {
            server_line: server_name.map(|name| format!("\r\nServer: {name}")),
            secs: Cell::new(u64::MAX),
            start: RefCell::new(Vec::new()),
        }
    }

    /// The head start for second `now` (see `start`), remade when the
    /// second changes. While an earlier start is still borrowed it is handed
    /// out again (a second late at worst) rather than remade under the borrow.
    pub fn head_start(&self, now: u64) -> Ref<'_, [u8]> {
        if self.secs.get() != now {
            if let Ok(mut start) = self.start.try_borrow_mut() {
                start.clear();
                start.extend_from_slice(Status::Ok.line().as_bytes());
                start.extend_from_slice(b"\r\nDate: ");
                start.extend_from_slice(&httpdate::format(now));
                if let Some(s) = &self.server_line {
                    start.extend_from_slice(s.as_bytes());
                }
                self.secs.set(now);
            }
        }
        Ref::map(self.start.borrow(), Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_still_borrowed_is_handed_out_again_not_remade() {
        let clock = Clock::new(Some("m"));
        let first = clock.head_start(1_796_400_000);
        assert!(first.starts_with(b"HTTP/1.1 200 OK\r\nDate: "));
        assert!(first.ends_with(b" GMT\r\nServer: m"));
        // The next second comes while `first` is still held.
        let again = clock.head_start(1_796_400_001);
        assert_eq!(*again, *first);
        drop((first, again));
        assert_eq!(
            clock.secs.get(),
            1_796_400_000,
            "not remade under the borrow"
        );
        let fresh = clock.head_start(1_796_400_001);
        assert_eq!(clock.secs.get(), 1_796_400_001, "remade once free");
        assert!(fresh.ends_with(b" GMT\r\nServer: m"));
    }
}
