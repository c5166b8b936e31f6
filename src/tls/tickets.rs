//! TLS session tickets, sealed with AES-128-GCM (rustls's ring ticketer
//! uses ChaCha20-Poly1305, which most builds leave out for size: see
//! `provider`). A ticket is its key's name, a random nonce and the sealed
//! session state with its tag.
//!
//! Every worker of a server seals and opens with the same keys, so a
//! client resumes on whichever worker takes its next connection, and a
//! reload keeps them. They come from a random chain key made once, before
//! the workers are forked: each period of `TLS_TICKET_KEY_LIFE`, counted
//! from then on the monotonic clock all processes share, has its own chain
//! key, HMAC-SHA-256 of the one before, and its sealing key and name are
//! HMACs of that. Each process holds the chain key of the period it is in
//! and the sealing keys of that period and the one before; it moves on at
//! each period's end, so what is taken from its memory opens no ticket
//! sealed earlier.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use ring::aead::{AES_128_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;

use crate::limits::TLS_TICKET_KEY_LIFE;

const NAME_LEN: usize = 16;
const CHAIN_LEN: usize = 32;

/// The ticket keys of one server, for every process it forks.
pub struct Keys(Mutex<Chain>);

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys themselves.
        f.write_str("tickets::Keys")
    }
}

impl Keys {
    /// A new random chain, its first period starting now.
    pub fn new() -> Result<Keys, String> {
        let mut seed = [0u8; CHAIN_LEN];
        SystemRandom::new()
            .fill(&mut seed)
            .map_err(|_| "TLS tickets: no random numbers from the kernel".to_string())?;
        Ok(Keys(Mutex::new(Chain::new(&seed, Instant::now()))))
    }

    /// Moves to the period `now` is in (a process that seals no ticket
    /// still lets go of old keys).
    pub fn turn(&self, now: Instant) {
        if let Ok(mut chain) = self.0.lock() {
            chain.advance_to(now);
        }
    }

    /// When the next period starts.
    pub fn next_turn(&self) -> Instant {
        self.0
            .lock()
            .map_or_else(|_| Instant::now() + life(), |c| c.next_turn())
    }
}

impl ProducesTickets for Keys {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        TLS_TICKET_KEY_LIFE
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut chain = self.0.lock().ok()?;
        chain.advance_to(Instant::now());
        chain.current.seal(plain)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        let mut chain = self.0.lock().ok()?;
        chain.advance_to(Instant::now());
        let name = ticket.get(..NAME_LEN)?;
        [Some(&chain.current), chain.previous.as_ref()]
            .into_iter()
            .flatten()
            .find(|s| s.name == name)?
            .open(ticket)
    }
}

fn life() -> Duration {
    Duration::from_secs(u64::from(TLS_TICKET_KEY_LIFE))
}

/// The chain at one period: its key, and the sealers of this period and
/// the one before.
struct Chain {
    origin: Instant,
    period: u64,
    key: [u8; CHAIN_LEN],
    current: Sealer,
    previous: Option<Sealer>,
}

impl Chain {
    fn new(seed: &[u8; CHAIN_LEN], origin: Instant) -> Chain {
        Chain {
            origin,
            period: 0,
            key: *seed,
            current: Sealer::derive(seed),
            previous: None,
        }
    }

    fn period_at(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_secs() / life().as_secs()
    }

    fn next_turn(&self) -> Instant {
        let secs = (self.period + 1).saturating_mul(life().as_secs());
        self.origin + Duration::from_secs(secs)
    }

    fn advance_to(&mut self, now: Instant) {
        let period = self.period_at(now);
        while self.period < period {
            self.step();
        }
    }

    fn step(&mut self) {
        let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &self.key), b"next");
        self.key.copy_from_slice(tag.as_ref());
        let next = Sealer::derive(&self.key);
        self.previous = Some(std::mem::replace(&mut self.current, next));
        self.period += 1;
    }
}

/// Seals and opens the tickets of one period.
struct Sealer {
    key: LessSafeKey,
    name: [u8; NAME_LEN],
}

impl Sealer {
    fn derive(chain: &[u8; CHAIN_LEN]) -> Sealer {
        let chain = hmac::Key::new(hmac::HMAC_SHA256, chain);
        let sealing = hmac::sign(&chain, b"seal");
        let named = hmac::sign(&chain, b"name");
        let mut name = [0u8; NAME_LEN];
        name.copy_from_slice(&named.as_ref()[..NAME_LEN]);
        let key = UnboundKey::new(&AES_128_GCM, &sealing.as_ref()[..AES_128_GCM.key_len()])
            .map(LessSafeKey::new);
        Sealer {
            // 16 bytes are what AES-128 takes: this cannot fail.
            key: key.unwrap_or_else(|_| unreachable!()),
            name,
        }
    }

    fn seal(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).ok()?;
        let head = NAME_LEN + NONCE_LEN;
        let mut out = Vec::with_capacity(head + plain.len() + AES_128_GCM.tag_len());
        out.extend_from_slice(&self.name);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plain);
        let tag = self
            .key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&self.name),
                &mut out[head..],
            )
            .ok()?;
        out.extend_from_slice(tag.as_ref());
        Some(out)
    }

    fn open(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        let (name, rest) = ticket.split_at_checked(NAME_LEN)?;
        let (nonce, sealed) = rest.split_at_checked(NONCE_LEN)?;
        if name != self.name {
            return None;
        }
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let n = self
            .key
            .open_in_place(nonce, Aad::from(&self.name), &mut buf)
            .ok()?
            .len();
        buf.truncate(n);
        Some(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(chain: &mut Chain, period: u64) -> &Chain {
        chain.advance_to(chain.origin + life() * period as u32);
        chain
    }

    #[test]
    fn a_ticket_opens_only_under_its_own_key_and_unaltered() {
        let a = Sealer::derive(&[1; CHAIN_LEN]);
        let b = Sealer::derive(&[2; CHAIN_LEN]);
        let ticket = a.seal(b"session state").unwrap();
        assert_eq!(a.open(&ticket).as_deref(), Some(&b"session state"[..]));
        assert_eq!(b.open(&ticket), None);
        let mut bent = ticket.clone();
        *bent.last_mut().unwrap() ^= 1;
        assert_eq!(a.open(&bent), None);
        assert_eq!(a.open(&ticket[..20]), None);
    }

    /// Two processes forked with one chain agree in every period, however
    /// far each has moved on alone; another server's chain opens nothing.
    #[test]
    fn copies_of_a_chain_agree_and_keep_one_period_back() {
        let origin = Instant::now();
        let mut sealing = Chain::new(&[7; CHAIN_LEN], origin);
        let mut opening = Chain::new(&[7; CHAIN_LEN], origin);
        let mut stranger = Chain::new(&[8; CHAIN_LEN], origin);
        let ticket = at(&mut sealing, 3).current.seal(b"state").unwrap();
        assert_eq!(at(&mut stranger, 3).current.open(&ticket), None);
        // Period 3 of the copy, reached in one jump: the same key.
        let opened = at(&mut opening, 3).current.open(&ticket);
        assert_eq!(opened.as_deref(), Some(&b"state"[..]));
        // The next period still opens it with the previous key, not after.
        let next = at(&mut opening, 4);
        assert_eq!(next.current.open(&ticket), None);
        let previous = next.previous.as_ref().unwrap();
        assert_eq!(previous.open(&ticket).as_deref(), Some(&b"state"[..]));
        let later = at(&mut opening, 5);
        assert!(later.previous.as_ref().unwrap().open(&ticket).is_none());
        assert!(later.current.open(&ticket).is_none());
        assert_eq!(later.next_turn(), origin + life() * 6);
    }

    #[test]
    fn keys_seal_and_open_as_rustls_calls_them() {
        let keys = Keys::new().unwrap();
        let ticket = keys.encrypt(b"state").unwrap();
        assert_eq!(keys.decrypt(&ticket).as_deref(), Some(&b"state"[..]));
        assert_eq!(keys.decrypt(&ticket[..NAME_LEN - 1]), None);
        assert_eq!(Keys::new().unwrap().decrypt(&ticket), None);
    }
}
