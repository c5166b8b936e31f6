//! The worker's script slots and each client's share of them, and the
//! places for chunked bodies decoded before their script starts. A
//! client runs at most half of the slots (at least one), so one client,
//! however many requests it sends, always leaves room for others; a
//! chunked body holds a place of its own while it comes, not a slot.
//! With the ubus endpoint on, one slot is kept for requests carrying a
//! LuCI session the endpoint knows (`ubus/sessions.rs`), and they are
//! not counted in a client's share: however many addresses a flood comes
//! from, the owner's pages find it. And a script whose body is still
//! coming when it starts (an upload) takes at most all but one of the
//! slots open to it: uploads kept at their pace, from however many
//! addresses, leave one slot to requests that come whole, a login form
//! among them.

use std::time::Instant;

use crate::net::client::Client;
use crate::net::deadline::{Deadlines, within};
use crate::net::share::{Share, Shares};
use crate::net::slots::{Slot, Slots};

pub struct Scripts {
    slots: Slots,
    /// What requests without a known session may hold: all the slots
    /// but the kept one.
    anonymous: Slots,
    /// What such requests may hold while their bodies still come: one
    /// slot fewer again (at least one).
    streaming: Slots,
    shares: Shares,
    bodies: Slots,
    body_shares: Shares,
    per_client: usize,
}

/// A running script's slot; dropping it gives it back. The share goes
/// first, so a waiter woken by the slot finds it free too.
pub struct Running {
    _anonymous: Option<(Share, Slot)>,
    _streaming: Option<Slot>,
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
    /// `max` slots (and as many body places), half of them for one
    /// client; `keep`: one of them for requests with a known session.
    pub fn new(max: usize, keep: bool) -> Scripts {
        let per_client = (max / 2).max(1);
        let kept = usize::from(keep && max > 1);
        Scripts {
            slots: Slots::new(max),
            anonymous: Slots::new(max - kept),
            streaming: Slots::new(streaming_limit(max, kept)),
            shares: Shares::new(per_client),
            bodies: Slots::new(max),
            body_shares: Shares::new(per_client),
            per_client,
        }
    }

    /// The scripts of a reload's new generation: the counts of `before`
    /// (whose scripts still run) under the limits `new` would set.
    pub fn after(&self, max: usize, keep: bool) -> Scripts {
        let per_client = (max / 2).max(1);
        let kept = usize::from(keep && max > 1);
        Scripts {
            slots: self.slots.limited(max),
            anonymous: self.anonymous.limited(max - kept),
            streaming: self.streaming.limited(streaming_limit(max, kept)),
            shares: self.shares.limited(per_client),
            bodies: self.bodies.limited(max),
            body_shares: self.body_shares.limited(per_client),
            per_client,
        }
    }

    /// Slots one client may hold at once.
    pub fn per_client(&self) -> usize {
        self.per_client
    }

    /// A slot for `client`; `session`: the request carries a session the
    /// ubus endpoint knows. Such a request is the owner's, not counted in
    /// a client's share: a host that shares his client (his IPv6 /64)
    /// cannot hold his pages back.
    /// `streaming`: its body is still coming.
    pub fn take(&self, client: Client, session: bool, streaming: bool) -> Result<Running, Refused> {
        let anonymous = match session {
            true => None,
            false => Some((
                self.shares.take(client.id()).ok_or(Refused::Share)?,
                self.anonymous.take().ok_or(Refused::Full)?,
            )),
        };
        let streaming = match streaming && !session {
            true => Some(self.streaming.take().ok_or(Refused::Full)?),
            false => None,
        };
        Ok(Running {
            _anonymous: anonymous,
            _streaming: streaming,
            _slot: self.slots.take().ok_or(Refused::Full)?,
        })
    }

    /// `take`; when the client holds its share, waits until `until` for
    /// one of its own scripts to end. A full worker refuses at once.
    pub async fn take_waiting(
        &self,
        client: Client,
        session: bool,
        streaming: bool,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Running, Refused> {
        loop {
            let freed = self.slots.freed().notified();
            match self.take(client, session, streaming) {
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

/// Slots uploads without a known session may hold: all those open to
/// them but one, at least one.
fn streaming_limit(max: usize, kept: usize) -> usize {
    (max - kept).saturating_sub(1).max(1)
}

fn take(slots: &Slots, shares: &Shares, client: Client) -> Result<(Share, Slot), Refused> {
    let share = shares.take(client.id()).ok_or(Refused::Share)?;
    let slot = slots.take().ok_or(Refused::Full)?;
    Ok((share, slot))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(ip: &str) -> Client {
        crate::net::client::OnLink::default().client(ip.parse::<std::net::IpAddr>().unwrap())
    }

    #[test]
    fn one_client_holds_at_most_half_and_others_find_the_rest() {
        let scripts = Scripts::new(3, false);
        let (a, b, c) = (
            client("192.0.2.1"),
            client("192.0.2.2"),
            client("192.0.2.3"),
        );
        let held = scripts.take(a, false, false).ok();
        assert!(held.is_some());
        assert_eq!(scripts.take(a, false, false).err(), Some(Refused::Share));
        let others = [
            scripts.take(b, false, false).ok(),
            scripts.take(c, false, false).ok(),
        ];
        assert!(others.iter().all(Option::is_some));
        assert_eq!(
            scripts.take(client("192.0.2.4"), false, false).err(),
            Some(Refused::Full)
        );
        drop(held);
        assert!(scripts.take(a, false, false).is_ok(), "given back");
        assert_eq!(Scripts::new(1, false).per_client(), 1);
        assert_eq!(Scripts::new(8, false).per_client(), 4);
    }

    #[test]
    fn bodies_have_places_of_their_own() {
        let scripts = Scripts::new(2, false);
        let a = client("192.0.2.1");
        let body = scripts.body(a).ok();
        assert!(body.is_some());
        assert_eq!(scripts.body(a).err(), Some(Refused::Share));
        assert!(
            scripts.take(a, false, false).is_ok(),
            "a body place holds no slot"
        );
    }

    #[test]
    fn a_slot_is_kept_for_a_known_session() {
        let scripts = Scripts::new(3, true);
        let held = [
            scripts.take(client("192.0.2.1"), false, false).ok(),
            scripts.take(client("192.0.2.2"), false, false).ok(),
        ];
        assert!(held.iter().all(Option::is_some));
        assert_eq!(
            scripts.take(client("192.0.2.3"), false, false).err(),
            Some(Refused::Full)
        );
        assert!(scripts.take(client("192.0.2.3"), true, false).is_ok());
        // Nor does a client's share hold it back.
        let scripts = Scripts::new(3, true);
        let a = client("192.0.2.1");
        let held = scripts.take(a, false, false).ok();
        assert_eq!(scripts.take(a, false, false).err(), Some(Refused::Share));
        assert!(held.is_some() && scripts.take(a, true, false).is_ok());
        // One slot: nothing to keep.
        assert!(
            Scripts::new(1, true)
                .take(client("192.0.2.1"), false, false)
                .is_ok()
        );
    }

    #[test]
    fn uploads_leave_one_slot_to_requests_that_come_whole() {
        let scripts = Scripts::new(3, false);
        let uploads: Vec<_> = (1..=3)
            .map(|i| scripts.take(client(&format!("192.0.2.{i}")), false, true))
            .collect();
        assert!(uploads[0].is_ok() && uploads[1].is_ok());
        assert_eq!(uploads[2].as_ref().err(), Some(&Refused::Full));
        assert!(
            scripts.take(client("192.0.2.9"), false, false).is_ok(),
            "a login form finds the last slot"
        );
        // A known session's upload is not held to it.
        let with_ubus = Scripts::new(3, true);
        let one = with_ubus.take(client("192.0.2.1"), false, true);
        assert!(one.is_ok());
        assert_eq!(
            with_ubus.take(client("192.0.2.2"), false, true).err(),
            Some(Refused::Full)
        );
        assert!(with_ubus.take(client("192.0.2.2"), true, true).is_ok());
    }
}
