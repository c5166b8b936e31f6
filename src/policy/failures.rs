//! Basic auth's failure limiter: password checks that may be guesses,
//! counted per client and per client network (`net::client`), so that a
//! client past its share, or a network past its own, is held back for the
//! rest of a window, whatever it sends. An address that logged in lately
//! is held back only by its own count: a host taking many addresses of the
//! owner's network spends the network's budget, not the owner's.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use crate::limits::{
    AUTH_FAIL_CLIENTS, AUTH_FAIL_NETS, AUTH_FAIL_WINDOW, AUTH_NET_FAIL_WINDOW, AUTH_TRUSTED,
    AUTH_TRUSTED_FOR, AUTH_TRUSTED_PER_USER,
};
use crate::net::client::{Client, Net};

/// A check counted against a client and its network, to be taken back if
/// it was good.
#[derive(Debug, Clone, Copy)]
pub struct Counted {
    client: Client,
    /// The windows it was counted in: a later window owes it nothing.
    window: Instant,
    net_window: Instant,
}

struct Entry {
    key: Net,
    /// Checks started in this window and not found good.
    checks: u32,
    since: Instant,
}

/// Counts per key within a window, in a table of bounded size.
struct Table {
    entries: Vec<Entry>,
    limit: u32,
    window: Duration,
    capacity: usize,
}

impl Table {
    fn new(limit: u32, window: Duration, capacity: usize) -> Table {
        Table {
            entries: Vec::new(),
            limit: limit.max(1),
            window,
            capacity,
        }
    }

    fn held(&self, key: Net) -> bool {
        self.entries
            .iter()
            .any(|e| e.key == key && e.checks >= self.limit && e.since.elapsed() < self.window)
    }

    /// Counts one check for `key`; the window it went into.
    fn count(&mut self, key: Net) -> Instant {
        let window = self.window;
        self.entries.retain(|e| e.since.elapsed() < window);
        if let Some(e) = self.entries.iter_mut().find(|e| e.key == key) {
            e.checks += 1;
            return e.since;
        }
        // Full: drop the key with the fewest checks (the oldest of
        // those), so that a flood of new addresses does not free a held one.
        if self.entries.len() >= self.capacity {
            let fewest = (0..self.entries.len())
                .min_by_key(|&j| (self.entries[j].checks, self.entries[j].since));
            if let Some(j) = fewest {
                self.entries.swap_remove(j);
            }
        }
        let since = Instant::now();
        self.entries.push(Entry {
            key,
            checks: 1,
            since,
        });
        since
    }

    fn refund(&mut self, key: Net, window: Instant) {
        if let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| e.key == key && e.since == window)
        {
            e.checks = e.checks.saturating_sub(1);
        }
    }
}

/// An address that logged in: its network's count does not hold it back.
struct Trusted {
    id: Net,
    /// Which user (a hash of the name): each user keeps only its latest
    /// few addresses, so one account cannot exempt a host's every address.
    user: u64,
    until: Instant,
}

/// One worker's counts.
pub struct Failures {
    clients: Table,
    nets: Table,
    trusted: Vec<Trusted>,
}

/// This worker's shares of the limits: a client's and a network's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub client: u32,
    pub net: u32,
}

impl Failures {
    pub fn new(limits: Limits) -> Failures {
        Failures {
            clients: Table::new(limits.client, AUTH_FAIL_WINDOW, AUTH_FAIL_CLIENTS),
            nets: Table::new(limits.net, AUTH_NET_FAIL_WINDOW, AUTH_FAIL_NETS),
            trusted: Vec::new(),
        }
    }

    /// Whether `client` has used up its share in the current window, or
    /// its network has and it has not logged in lately.
    pub fn held(&self, client: Client) -> bool {
        self.clients.held(client.id()) || self.net_holds(client)
    }

    /// Whether `client` is held back by its network's count alone.
    pub fn net_holds(&self, client: Client) -> bool {
        self.nets.held(client.net()) && !self.is_trusted(client)
    }

    fn is_trusted(&self, client: Client) -> bool {
        let now = Instant::now();
        self.trusted
            .iter()
            .any(|t| t.id == client.id() && t.until > now)
    }

    /// Counts a check starting for `client`, in its network too.
    pub fn count(&mut self, client: Client) -> Counted {
        Counted {
            client,
            window: self.clients.count(client.id()),
            net_window: self.nets.count(client.net()),
        }
    }

    /// Counts a check starting for `client`, as `count`, and logs when
    /// that holds it back (`what` names the login, for the log).
    pub fn count_logged(&mut self, client: Client, what: &str) -> Counted {
        let counted = self.count(client);
        if self.net_holds(client) {
            log::warn!(
                "{what}: {} reached its network's limit of login checks; 429 for up to {}s to its addresses without a login in the last day",
                client.net(),
                AUTH_NET_FAIL_WINDOW.as_secs()
            );
        } else if self.held(client) {
            log::warn!(
                "{what}: {client} reached its limit of login checks; 429 for up to {}s",
                AUTH_FAIL_WINDOW.as_secs()
            );
        }
        counted
    }

    /// Takes back a check that found a good password. Only that one check:
    /// a good login does not wipe the client's failures, or a guesser with
    /// an account of its own could log in between guesses to start afresh.
    pub fn refund(&mut self, counted: Counted) {
        let Counted {
            client,
            window,
            net_window,
        } = counted;
        self.clients.refund(client.id(), window);
        self.nets.refund(client.net(), net_window);
    }

    /// Remembers that `client` logged in as `user`.
    pub fn trust(&mut self, client: Client, user: &str) {
        let now = Instant::now();
        let user = {
            let mut h = DefaultHasher::new();
            user.hash(&mut h);
            h.finish()
        };
        self.trusted
            .retain(|t| t.until > now && t.id != client.id());
        let of_user = |t: &&Trusted| t.user == user;
        if self.trusted.iter().filter(of_user).count() >= AUTH_TRUSTED_PER_USER {
            self.drop_oldest(|t| t.user == user);
        }
        if self.trusted.len() >= AUTH_TRUSTED {
            self.drop_oldest(|_| true);
        }
        self.trusted.push(Trusted {
            id: client.id(),
            user,
            until: now + AUTH_TRUSTED_FOR,
        });
    }

    fn drop_oldest(&mut self, which: impl Fn(&Trusted) -> bool) {
        let oldest = (0..self.trusted.len())
            .filter(|&j| which(&self.trusted[j]))
            .min_by_key(|&j| self.trusted[j].until);
        if let Some(j) = oldest {
            self.trusted.swap_remove(j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::client::OnLink;

    fn client(s: &str) -> Client {
        OnLink::default().client(s.parse::<std::net::IpAddr>().unwrap())
    }

    const LIMITS: Limits = Limits { client: 3, net: 5 };

    #[test]
    fn a_client_is_held_at_its_share_and_others_are_not() {
        let mut f = Failures::new(LIMITS);
        let a = client("2001:db8::1");
        for _ in 0..3 {
            assert!(!f.held(a));
            f.count(client("2001:db8::2"));
        }
        assert!(f.held(a), "another address of the same off-link /64");
        assert!(!f.held(client("2001:db8:0:1::1")));
        assert!(!f.held(client("127.0.0.1")));
    }

    #[test]
    fn a_network_is_held_at_its_share_except_for_addresses_that_logged_in() {
        let mut f = Failures::new(LIMITS);
        let owner = client("10.0.0.1");
        f.trust(owner, "admin");
        let newcomer = client("10.0.0.200");
        for i in 2..7 {
            f.count(client(&format!("10.0.0.{i}")));
        }
        assert!(f.held(newcomer), "the network's share is spent");
        assert!(!f.held(client("10.0.1.1")), "another network");
        assert!(!f.held(owner), "logged in lately: its own share only");
        for _ in 0..3 {
            f.count(owner);
        }
        assert!(f.held(owner), "its own share still holds");
    }

    #[test]
    fn one_user_exempts_only_its_latest_addresses() {
        let mut f = Failures::new(LIMITS);
        let owner = client("10.0.0.1");
        f.trust(owner, "admin");
        for i in 0..AUTH_TRUSTED_PER_USER + 3 {
            f.trust(client(&format!("10.0.0.{}", 100 + i)), "guest");
        }
        for _ in 0..5 {
            f.count(client("10.0.0.2"));
        }
        assert!(!f.held(owner));
        assert!(
            f.held(client("10.0.0.100")),
            "pushed out by its user's later ones"
        );
        let last = client(&format!("10.0.0.{}", 100 + AUTH_TRUSTED_PER_USER + 2));
        assert!(!f.held(last));
        assert_eq!(f.trusted.len(), 1 + AUTH_TRUSTED_PER_USER);
    }

    #[test]
    fn entries_are_as_small_as_configuration_md_says() {
        assert_eq!(std::mem::size_of::<Entry>(), 40);
        assert_eq!(std::mem::size_of::<Trusted>(), 48);
    }

    #[test]
    fn a_good_check_takes_back_only_itself() {
        let mut f = Failures::new(LIMITS);
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
