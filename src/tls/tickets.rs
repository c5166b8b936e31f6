//! TLS session tickets, sealed with AES-128-GCM under a random key that
//! rotates (rustls's ring ticketer uses ChaCha20-Poly1305, which this
//! build leaves out for size: see `provider`). A ticket is the key's name,
//! a random nonce and the sealed session state with its tag.

use std::sync::Arc;

use ring::aead::{AES_128_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use rustls::crypto::GetRandomFailed;
use rustls::server::ProducesTickets;

use crate::limits::TLS_TICKET_KEY_LIFE;

const NAME_LEN: usize = 16;

/// A ticketer whose key changes every `TLS_TICKET_KEY_LIFE`; tickets
/// sealed under the previous key are still accepted.
pub fn ticketer() -> Result<Arc<dyn ProducesTickets>, String> {
    rustls::TicketRotator::new(TLS_TICKET_KEY_LIFE, Sealer::fresh)
        .map(|r| Arc::new(r) as Arc<dyn ProducesTickets>)
        .map_err(|_| "TLS tickets: no random numbers from the kernel".to_string())
}

#[derive(Debug)]
struct Sealer {
    key: LessSafeKey,
    name: [u8; NAME_LEN],
}

impl Sealer {
    fn fresh() -> Result<Box<dyn ProducesTickets>, GetRandomFailed> {
        let rng = SystemRandom::new();
        let mut key = [0u8; 16];
        let mut name = [0u8; NAME_LEN];
        rng.fill(&mut key).map_err(|_| GetRandomFailed)?;
        rng.fill(&mut name).map_err(|_| GetRandomFailed)?;
        let key = UnboundKey::new(&AES_128_GCM, &key).map_err(|_| GetRandomFailed)?;
        Ok(Box::new(Sealer {
            key: LessSafeKey::new(key),
            name,
        }))
    }
}

impl ProducesTickets for Sealer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        TLS_TICKET_KEY_LIFE
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
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

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
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

    #[test]
    fn a_ticket_opens_only_under_its_own_key_and_unaltered() {
        let a = Sealer::fresh().unwrap();
        let b = Sealer::fresh().unwrap();
        let ticket = a.encrypt(b"session state").unwrap();
        assert_eq!(a.decrypt(&ticket).as_deref(), Some(&b"session state"[..]));
        assert_eq!(b.decrypt(&ticket), None);
        let mut bent = ticket.clone();
        *bent.last_mut().unwrap() ^= 1;
        assert_eq!(a.decrypt(&bent), None);
        assert_eq!(a.decrypt(&ticket[..20]), None);
    }
}
