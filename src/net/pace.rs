//! The least pace of a request body: after a grace, the client must have
//! sent at least `rate` bytes for each second the server waited on it.
//! Time spent waiting on where the body goes (a backend or a script
//! writing slowly to flash) is not the client's and is not counted. Each single wait stays bounded by the
//! client timeout as well.

use std::cell::Cell;
use std::time::{Duration, Instant};

pub struct Pace {
    /// Bytes per second; `None`: only the per-wait bound.
    rate: Option<u64>,
    /// The time the client gets before the pace counts, and for each wait.
    grace: Duration,
    waited: Cell<Duration>,
    got: Cell<u64>,
}

impl Pace {
    pub fn new(rate: Option<u64>, grace: Duration) -> Pace {
        Pace {
            rate,
            grace,
            waited: Cell::new(Duration::ZERO),
            got: Cell::new(0),
        }
    }

    /// When the wait for the client's next bytes, starting now, ends.
    pub fn until(&self) -> Instant {
        let now = Instant::now();
        let stall = now + self.grace;
        let Some(rate) = self.rate else {
            return stall;
        };
        let earned = Duration::from_millis(self.got.get().saturating_mul(1000) / rate);
        let left = (self.grace + earned).saturating_sub(self.waited.get());
        stall.min(now + left)
    }

    /// A wait on the client that began at `from` brought `n` bytes.
    pub fn waited(&self, from: Instant, n: usize) {
        self.waited.set(self.waited.get() + from.elapsed());
        self.got.set(self.got.get() + n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trickle_runs_out_of_time_and_a_steady_body_does_not() {
        let grace = Duration::from_secs(10);
        let pace = Pace::new(Some(1000), grace);
        let start = Instant::now();
        assert!(pace.until() <= start + grace + Duration::from_millis(50));
        // 1 byte after 9 s of waiting: 1 s and 1 ms left.
        pace.waited.set(Duration::from_secs(9));
        pace.got.set(1);
        let left = pace.until().duration_since(Instant::now());
        assert!(left <= Duration::from_millis(1001), "{left:?}");
        // 1 MB in 100 s is ten times the pace: the wait is the grace.
        pace.waited.set(Duration::from_secs(100));
        pace.got.set(1_000_000);
        let left = pace.until().duration_since(Instant::now());
        assert!(left > Duration::from_secs(9), "{left:?}");
        let unpaced = Pace::new(None, grace);
        unpaced.waited.set(Duration::from_secs(1000));
        assert!(unpaced.until() > Instant::now() + Duration::from_secs(9));
    }
}
