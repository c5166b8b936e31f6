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
//! addresses, leave one slot to requests that come whole. With the
//! endpoint on, that last slot is open only to requests that come whole
//! and may carry a login (`cgi/luci.rs`): each of those counts against
//! the password budgets, so no flood holds it for long, and a login form
//! finds it whatever other requests fill the rest.

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
    /// What such requests may hold unless they come whole and may carry
    /// a login: with a slot kept for sessions, one fewer than
    /// `anonymous` (at least one); else all of them.
    unproven: Slots,
    shares: Shares,
    bodies: Slots,
    body_shares: Shares,
    per_client: usize,
}

/// A running script's slot; dropping it gives it back. The share goes
/// first, so a waiter woken by the slot finds it free too.
pub struct Running {
    _anonymous: Option<(Share, Slot)>,
    _unproven: Option<Slot>,
    _streaming: Option<Slot>,
    _slot: Slot,
}

/// What a script request is to the slots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Caller {
    /// It carries a session the ubus endpoint knows: the owner's.
    Session,
    /// It comes whole and may carry a login (counted as a password check).
    Login,
    /// Its body is still coming when its script starts.
    Upload,
    Other,
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
            unproven: Slots::new(unproven_limit(max, kept)),
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
            unproven: self.unproven.limited(unproven_limit(max, kept)),
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

    /// A slot for `client`'s request. The owner's (`Caller::Session`) is
    /// not counted in a client's share: a host that shares his client
    /// (his IPv6 /64) cannot hold his pages back.
    pub fn take(&self, client: Client, caller: Caller) -> Result<Running, Refused> {
        let anonymous = match caller {
            Caller::Session => None,
            _ => Some((
                self.shares.take(client.id()).ok_or(Refused::Share)?,
                self.anonymous.take().ok_or(Refused::Full)?,
            )),
        };
        let unproven = match caller {
            Caller::Upload | Caller::Other => Some(self.unproven.take().ok_or(Refused::Full)?),
            _ => None,
        };
        let streaming = match caller {
            Caller::Upload => Some(self.streaming.take().ok_or(Refused::Full)?),
            _ => None,
        };
        Ok(Running {
            _anonymous: anonymous,
            _unproven: unproven,
            _streaming: streaming,
            _slot: self.slots.take().ok_or(Refused::Full)?,
        })
    }

    /// `take`; when the client holds its share, waits until `until` for
    /// one of its own scripts to end. A full worker refuses at once.
    pub async fn take_waiting(
        &self,
        client: Client,
        caller: Caller,
        deadlines: &Deadlines,
        until: Instant,
    ) -> Result<Running, Refused> {
        loop {
            let freed = self.slots.freed().notified();
            match self.take(client, caller) {
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

/// Slots requests without a known session may hold unless they come
/// whole and may carry a login: with a slot kept for sessions (the ubus
/// endpoint on, where logins are counted), all but one of those open to
/// them; else all.
fn unproven_limit(max: usize, kept: usize) -> usize {
    match kept {
        0 => max,
        _ => streaming_limit(max, kept),
    }
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
        let held = scripts.take(a, Caller::Other).ok();
        assert!(held.is_some());
        assert_eq!(scripts.take(a, Caller::Other).err(), Some(Refused::Share));
        let others = [
            scripts.take(b, Caller::Other).ok(),
            scripts.take(c, Caller::Other).ok(),
        ];
        assert!(others.iter().all(Option::is_some));
        assert_eq!(
            scripts.take(client("192.0.2.4"), Caller::Other).err(),
            Some(Refused::Full)
        );
        drop(held);
        assert!(scripts.take(a, Caller::Other).is_ok(), "given back");
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
            scripts.take(a, Caller::Other).is_ok(),
            "a body place holds no slot"
        );
    }

    #[test]
    fn a_slot_is_kept_for_a_known_session() {
        let scripts = Scripts::new(3, true);
        let held = [
            scripts.take(client("192.0.2.1"), Caller::Other).ok(),
            scripts.take(client("192.0.2.2"), Caller::Login).ok(),
        ];
        assert!(held.iter().all(Option::is_some));
        assert_eq!(
            scripts.take(client("192.0.2.3"), Caller::Other).err(),
            Some(Refused::Full)
        );
        assert!(scripts.take(client("192.0.2.3"), Caller::Session).is_ok());
        // Nor does a client's share hold it back.
        let scripts = Scripts::new(3, true);
        let a = client("192.0.2.1");
        let held = scripts.take(a, Caller::Other).ok();
        assert_eq!(scripts.take(a, Caller::Other).err(), Some(Refused::Share));
        assert!(held.is_some() && scripts.take(a, Caller::Session).is_ok());
        // One slot: nothing to keep.
        assert!(
            Scripts::new(1, true)
                .take(client("192.0.2.1"), Caller::Other)
                .is_ok()
        );
    }

    #[test]
    fn uploads_leave_one_slot_to_requests_that_come_whole() {
        let scripts = Scripts::new(3, false);
        let uploads: Vec<_> = (1..=3)
            .map(|i| scripts.take(client(&format!("192.0.2.{i}")), Caller::Upload))
            .collect();
        assert!(uploads[0].is_ok() && uploads[1].is_ok());
        assert_eq!(uploads[2].as_ref().err(), Some(&Refused::Full));
        assert!(
            scripts.take(client("192.0.2.9"), Caller::Other).is_ok(),
            "a request that comes whole finds the last slot"
        );
        // A known session's upload is not held to it.
        let with_ubus = Scripts::new(3, true);
        let one = with_ubus.take(client("192.0.2.1"), Caller::Upload);
        assert!(one.is_ok());
        assert_eq!(
            with_ubus.take(client("192.0.2.2"), Caller::Upload).err(),
            Some(Refused::Full)
        );
        assert!(with_ubus.take(client("192.0.2.2"), Caller::Session).is_ok());
    }

    #[test]
    fn with_the_endpoint_the_last_open_slot_waits_for_a_login() {
        let scripts = Scripts::new(3, true);
        let pages = scripts.take(client("192.0.2.1"), Caller::Other);
        assert!(pages.is_ok());
        for caller in [Caller::Other, Caller::Upload] {
            assert_eq!(
                scripts.take(client("192.0.2.2"), caller).err(),
                Some(Refused::Full)
            );
        }
        let login = scripts.take(client("192.0.2.3"), Caller::Login);
        assert!(login.is_ok(), "a login form finds the last slot open to it");
        assert!(scripts.take(client("192.0.2.4"), Caller::Session).is_ok());
        // Without the endpoint nothing is kept: every slot is open to all.
        let plain = Scripts::new(3, false);
        let taken: Vec<_> = (1..=3)
            .map(|i| plain.take(client(&format!("192.0.2.{i}")), Caller::Other))
            .collect();
        assert!(taken.iter().all(Result::is_ok));
    }
}
