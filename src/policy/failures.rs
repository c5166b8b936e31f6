//! Basic auth's failure limiter: password checks that may be guesses,
//! counted per client, so that a client past its share is held back for
//! the rest of a window, whatever it sends.

use std::time::Instant;

use crate::limits::{AUTH_FAIL_CLIENTS, AUTH_FAIL_WINDOW};
use crate::net::client::Client;

/// A check counted against a client, to be taken back if it was good.
#[derive(Debug, Clone, Copy)]
pub struct Counted {
    client: Client,
    /// The window it was counted in: a later window owes it nothing.
    window: Instant,
}

struct Entry {
    client: Client,
    /// Checks started in this window and not found good.
    checks: u32,
    since: Instant,
}

/// One worker's counts.
pub struct Failures {
    entries: Vec<Entry>,
    /// This worker's share of `AUTH_FAIL_LIMIT`.
    limit: u32,
}

impl Failures {
    pub fn new(limit: u32) -> Failures {
        Failures {
            entries: Vec::new(),
            limit,
        }
    }

    /// Whether `client` has used up its share in the current window.
    pub fn held(&self, client: Client) -> bool {
        self.entries.iter().any(|e| {
            e.client == client && e.checks >= self.limit && e.since.elapsed() < AUTH_FAIL_WINDOW
        })
    }

    /// Counts a check starting for `client`.
    pub fn count(&mut self, client: Client) -> Counted {
        self.entries
            .retain(|e| e.since.elapsed() < AUTH_FAIL_WINDOW);
        if let Some(e) = self.entries.iter_mut().find(|e| e.client == client) {
            e.checks += 1;
            return Counted {
                client,
                window: e.since,
            };
        }
        // Full: drop the client with the fewest checks (the oldest of
        // those), so that a flood of new addresses does not free a held one.
        if self.entries.len() >= AUTH_FAIL_CLIENTS {
            let fewest = (0..self.entries.len())
                .min_by_key(|&j| (self.entries[j].checks, self.entries[j].since));
            if let Some(j) = fewest {
                self.entries.swap_remove(j);
            }
        }
        let since = Instant::now();
        self.entries.push(Entry {
            client,
            checks: 1,
            since,
        });
        Counted {
            client,
            window: since,
        }
    }

    /// Takes back a check that found a good password. Only that one check:
    /// a good login does not wipe the client's failures, or a guesser with
    /// an account of its own could log in between guesses to start afresh.
    pub fn refund(&mut self, counted: Counted) {
        let same = |e: &&mut Entry| e.client == counted.client && e.since == counted.window;
        if let Some(e) = self.entries.iter_mut().find(same) {
            e.checks = e.checks.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(s: &str) -> Client {
        Client::from(s.parse::<std::net::IpAddr>().unwrap())
    }

    #[test]
    fn a_client_is_held_at_its_share_and_others_are_not() {
        let mut f = Failures::new(3);
        let a = client("2001:db8::1");
        for _ in 0..3 {
            assert!(!f.held(a));
            f.count(client("2001:db8::2"));
        }
        assert!(f.held(a), "another address of the same /64");
        assert!(!f.held(client("2001:db8:0:1::1")));
        assert!(!f.held(client("127.0.0.1")));
    }

    #[test]
    fn a_good_check_takes_back_only_itself() {
        let mut f = Failures::new(3);
        let a = client("10.0.0.1");
        f.count(a);
        f.count(a);
        let good = f.count(a);
        assert!(f.held(a), "counted when it starts");
        f.refund(good);
        assert!(!f.held(a));
        f.count(a);
        assert!(f.held(a), "the earlier failures still count");
    }
}
