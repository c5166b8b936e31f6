//! The worker's script slots and each client's share of them, and the
//! places for chunked bodies decoded before their script starts. A
//! client runs at most half of the slots (at least one), so one client,
//! however many requests it sends, always leaves room for others; a
//! chunked body holds a place of its own while it comes, not a slot.

use std::time::Instant;

use crate::net::client::Client;
use crate::net::deadline::{Deadlines, within};
use crate::net::share::{Share, Shares};
use crate::net::slots::{Slot, Slots};

pub struct Scripts {
    slots: Slots,
    shares: Shares,
    bodies: Slots,
    body_shares: Shares,
    per_client: usize,
}

/// A running script's slot; dropping it gives it back. The share goes
/// first, so a waiter woken by the slot finds it free too.
pub struct Running {
    _share: Share,
    _slot: Slot,
}

/// A place for one chunked body while it is read and its script runs.
pub struct BodyPlace {
    _share: Share,
    _slot: Slot,
}

/// Why a script cannot start now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refused {
    /// Every slot is taken.
    Full,
    /// The client holds its share.
    Share,
}

impl Scripts {
    /// `max` slots (and as many body places), half of them for one client.
    pub fn new(max: usize) -> Scripts {
        let per_client = (max / 2).max(1);
        Scripts {
            slots: Slots::new(max),
            shares: Shares::new(per_client),
            bodies: Slots::new(max),
            body_shares: Shares::new(per_client),
            per_client,
        }
    }

    /// Slots one client may hold at once.
    pub fn per_client(&self) -> usize {
        self.per_client
    }

    pub fn take(&self, client: Client) -> Result<Running, Refused> {
        take(&self.slots, &self.shares, client).map(|(_share, _slot)| Running { _share, _slot })
    }

    /// A slot for `client`; when it holds its share, waits until `until`
    /// for one of its own scripts to end. A full worker refuses at once.
    pub async fn take_waiting(
        &self,
        client: Client,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Running, Refused> {
        loop {
            let freed = self.slots.freed().notified();
            match self.take(client) {
                Err(Refused::Share) => {
                    if within(deadlines, until, freed).await.is_none() {
                        return Err(Refused::Share);
                    }
                }
                taken => return taken,
            }
        }
    }

    pub fn body(&self, client: Client) -> Result<BodyPlace, Refused> {
        take(&self.bodies, &self.body_shares, client)
            .map(|(_share, _slot)| BodyPlace { _share, _slot })
    }
}

fn take(slots: &Slots, shares: &Shares, client: Client) -> Result<(Share, Slot), Refused> {
    let share = shares.take(client).ok_or(Refused::Share)?;
    let slot = slots.take().ok_or(Refused::Full)?;
    Ok((share, slot))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(ip: &str) -> Client {
        ip.parse::<std::net::IpAddr>().unwrap().into()
    }

    #[test]
    fn one_client_holds_at_most_half_and_others_find_the_rest() {
        let scripts = Scripts::new(3);
        let (a, b, c) = (
            client("192.0.2.1"),
            client("192.0.2.2"),
            client("192.0.2.3"),
        );
        let held = scripts.take(a).ok();
        assert!(held.is_some());
        assert_eq!(scripts.take(a).err(), Some(Refused::Share));
        let others = [scripts.take(b).ok(), scripts.take(c).ok()];
        assert!(others.iter().all(Option::is_some));
        assert_eq!(scripts.take(client("192.0.2.4")).err(), Some(Refused::Full));
        drop(held);
        assert!(scripts.take(a).is_ok(), "given back");
        assert_eq!(Scripts::new(1).per_client(), 1);
        assert_eq!(Scripts::new(8).per_client(), 4);
    }

    #[test]
    fn bodies_have_places_of_their_own() {
        let scripts = Scripts::new(2);
        let a = client("192.0.2.1");
        let body = scripts.body(a).ok();
        assert!(body.is_some());
        assert_eq!(scripts.body(a).err(), Some(Refused::Share));
        assert!(scripts.take(a).is_ok(), "a body place holds no slot");
    }
}
