//! One worker's connection to ubusd, on the worker's reactor: opened on
//! first use (ubusd's HELLO names us), shared by every request of the
//! worker, reopened by the next call after ubusd closes it.
//!
//! No task owns the socket: every waiting call or event stream pumps it
//! (writes what is queued, reads what arrived and hands each reply to the
//! call it answers, matched by sequence number and peer) and then waits
//! for the socket or for another waiter's progress, within its own
//! deadline. A call that times out leaves the table, so its late reply
//! is dropped; a slow object holds only its own callers. When the socket
//! ends, every call in flight fails and every stream ends; object ids
//! (they change when ubusd restarts) are kept per connection only.

use std::cell::{Cell, RefCell};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use async_io::Async;
use futures_lite::future;

use crate::limits::{UBUS_EVENT_QUEUE, UBUS_IDS_KEPT, UBUS_MAX_REPLY, UBUS_REPLY_DEPTH};
use crate::net::deadline::{Deadlines, within};
use crate::net::notify::Notify;
use crate::net::slots::{Slot, Slots};
use crate::ubus::blob::{self, Builder, Message};
use crate::ubus::calls::Calls;
use crate::ubus::json;
use crate::ubus::sessions::Sessions;

/// Why a bus exchange gave no answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Failure {
    /// No answer within the call's deadline.
    Timeout,
    /// No connection to ubusd, or it went away during the call.
    Lost,
    /// The reply was larger than a call may collect, or malformed.
    TooLarge,
}

/// The end of one exchange: ubusd's or the object's status, and each DATA
/// message's attributes, one plain attribute per message.
pub struct Reply {
    pub status: i32,
    pub data: Vec<u8>,
}

impl Reply {
    /// The attribute lists of the DATA messages, in order.
    pub fn messages(&self) -> impl Iterator<Item = Message<'_>> {
        blob::attrs(&self.data).map(|a| Message::parse(a.data))
    }

    /// The blobmsg fields of every DATA message's data, one list.
    pub fn merged_data(&self) -> Vec<u8> {
        let mut b = Builder::default();
        for d in self.messages().filter_map(|m| m.data) {
            blob::raw_attrs(d).for_each(|a| b.copy(a));
        }
        b.buf
    }
}

pub struct Bus {
    path: PathBuf,
    deadlines: &'static Deadlines,
    link: RefCell<Option<Rc<Link>>>,
    subscribers: Slots,
    /// Endpoint requests under way, each client's share (503 beyond);
    /// shared by the generations of a process.
    pub calls: Rc<Calls>,
    /// The sessions rpcd accepted lately, likewise shared.
    pub sessions: Rc<Sessions>,
}

impl Bus {
    pub fn new(path: PathBuf, deadlines: &'static Deadlines, subscribers: usize) -> Bus {
        Bus {
            path,
            deadlines,
            link: RefCell::new(None),
            subscribers: Slots::new(subscribers),
            calls: Rc::default(),
            sessions: Rc::default(),
        }
    }

    /// The bus of a reload's new generation: a connection of its own to
    /// `path`, and the calls and event streams of `before`, still under
    /// way, counted against the same limits.
    pub fn after(path: PathBuf, before: &Bus) -> Bus {
        Bus {
            path,
            deadlines: before.deadlines,
            link: RefCell::new(None),
            subscribers: before.subscribers.clone(),
            calls: before.calls.clone(),
            sessions: before.sessions.clone(),
        }
    }

    /// The open connection, or a new one once ubusd has said HELLO.
    async fn link(&self, until: Instant) -> Result<Rc<Link>, Failure> {
        if let Some(l) = self.live() {
            // An idle connection ubusd has closed (it restarted) shows its
            // end now, so this call opens a new one rather than failing.
            l.pump();
            if !l.dead.get() {
                return Ok(l);
            }
        }
        let stream = match within(
            self.deadlines,
            until,
            Async::<UnixStream>::connect(&self.path),
        )
        .await
        {
            None => return Err(Failure::Timeout),
            Some(Err(e)) => {
                log::warn!("ubus {}: {e}", self.path.display());
                return Err(Failure::Lost);
            }
            Some(Ok(s)) => s,
        };
        let link = Rc::new(Link::new(stream));
        link.wait(self.deadlines, Some(until), || {
            link.hello.get().then_some(())
        })
        .await?;
        // Another call may have connected meanwhile: one connection is kept.
        if let Some(l) = self.live() {
            return Ok(l);
        }
        log::debug!("ubus {}: connected", self.path.display());
        *self.link.borrow_mut() = Some(link.clone());
        Ok(link)
    }

    fn live(&self) -> Option<Rc<Link>> {
        self.link
            .borrow()
            .as_ref()
            .filter(|l| !l.dead.get())
            .cloned()
    }

    /// The id of object `path` and whether it was known already (kept per
    /// connection); `Ok(None)` when the bus has no such object.
    pub async fn lookup_id(
        &self,
        path: &[u8],
        until: Instant,
    ) -> Result<Option<(u32, bool)>, Failure> {
        let link = self.link(until).await?;
        if let Some((_, id)) = link.ids.borrow().iter().find(|(p, _)| **p == *path) {
            return Ok(Some((*id, true)));
        }
        let mut b = Builder::default();
        b.put_str(blob::A_OBJPATH, path);
        let reply = link
            .request(self.deadlines, blob::LOOKUP, 0, &b.buf, until)
            .await?;
        let id = reply.messages().find_map(|m| m.objid);
        if let (0, Some(id)) = (reply.status, id) {
            let mut ids = link.ids.borrow_mut();
            if ids.len() >= UBUS_IDS_KEPT {
                ids.clear();
            }
            ids.push((path.into(), id));
            return Ok(Some((id, false)));
        }
        Ok(None)
    }

    /// Forgets a kept object id (the object has gone or changed).
    pub fn forget(&self, path: &[u8]) {
        if let Some(l) = self.live() {
            l.ids.borrow_mut().retain(|(p, _)| **p != *path);
        }
    }

    /// The objects matching `path` (all for `None`; a trailing `*` matches
    /// a prefix): each a DATA message with path, id and signature.
    pub async fn lookup(&self, path: Option<&[u8]>, until: Instant) -> Result<Reply, Failure> {
        let link = self.link(until).await?;
        let mut b = Builder::default();
        if let Some(p) = path {
            b.put_str(blob::A_OBJPATH, p);
        }
        link.request(self.deadlines, blob::LOOKUP, 0, &b.buf, until)
            .await
    }

    /// Calls `method` of object `id` with the blobmsg fields `args`.
    pub async fn invoke(
        &self,
        id: u32,
        method: &[u8],
        args: &[u8],
        until: Instant,
    ) -> Result<Reply, Failure> {
        let link = self.link(until).await?;
        let mut b = Builder::default();
        b.put_u32(blob::A_OBJID, id);
        b.put_str(blob::A_METHOD, method);
        let d = b.open(blob::A_DATA);
        b.copy(args);
        b.close(d);
        link.request(self.deadlines, blob::INVOKE, id, &b.buf, until)
            .await
    }

    /// Subscribes to object `target`: a subscriber object of ours on the
    /// bus, whose notifications the stream yields. `Ok(Err(status))` when
    /// ubusd refuses; `None` when the worker has its most streams.
    pub async fn subscribe(
        &self,
        target: u32,
        until: Instant,
    ) -> Option<Result<Result<Subscription, i32>, Failure>> {
        let slot = self.subscribers.take()?;
        Some(self.subscribe_with(slot, target, until).await)
    }

    async fn subscribe_with(
        &self,
        slot: Slot,
        target: u32,
        until: Instant,
    ) -> Result<Result<Subscription, i32>, Failure> {
        let link = self.link(until).await?;
        let added = link
            .request(self.deadlines, blob::ADD_OBJECT, 0, &[], until)
            .await?;
        let Some(objid) = added.messages().find_map(|m| m.objid) else {
            return Ok(Err(added.status));
        };
        // Registered before SUBSCRIBE: a notification may follow its reply at once.
        link.subs.borrow_mut().push(Sub {
            objid,
            events: Vec::new(),
            ended: false,
        });
        let sub = Subscription {
            link: link.clone(),
            deadlines: self.deadlines,
            objid,
            _slot: slot,
        };
        let mut b = Builder::default();
        b.put_u32(blob::A_OBJID, objid);
        b.put_u32(blob::A_TARGET, target);
        let r = link
            .request(self.deadlines, blob::SUBSCRIBE, 0, &b.buf, until)
            .await?;
        if r.status != 0 {
            return Ok(Err(r.status));
        }
        Ok(Ok(sub))
    }
}

struct Pending {
    seq: u16,
    peer: u32,
    data: Vec<u8>,
    status: Option<i32>,
    too_large: bool,
}

struct Sub {
    objid: u32,
    /// Event-stream text not yet taken by the stream's client.
    events: Vec<u8>,
    ended: bool,
}

struct Link {
    stream: Async<UnixStream>,
    hello: Cell<bool>,
    dead: Cell<bool>,
    seq: Cell<u16>,
    /// Bytes of a message still being received.
    input: RefCell<Vec<u8>>,
    /// Messages not yet written in full.
    output: RefCell<Vec<u8>>,
    pending: RefCell<Vec<Pending>>,
    subs: RefCell<Vec<Sub>>,
    ids: RefCell<Vec<(Box<[u8]>, u32)>>,
    /// Woken when a reply completes, an event arrives or the link ends.
    progress: Notify,
}

impl Link {
    fn new(stream: Async<UnixStream>) -> Link {
        Link {
            stream,
            hello: Cell::new(false),
            dead: Cell::new(false),
            seq: Cell::new(0),
            input: RefCell::new(Vec::new()),
            output: RefCell::new(Vec::new()),
            pending: RefCell::new(Vec::new()),
            subs: RefCell::new(Vec::new()),
            ids: RefCell::new(Vec::new()),
            progress: Notify::default(),
        }
    }

    /// Sends one request and collects its DATA replies until its STATUS.
    async fn request(
        &self,
        deadlines: &Deadlines,
        kind: u8,
        peer: u32,
        attrs: &[u8],
        until: Instant,
    ) -> Result<Reply, Failure> {
        let seq = self.next_seq(peer);
        self.pending.borrow_mut().push(Pending {
            seq,
            peer,
            data: Vec::new(),
            status: None,
            too_large: false,
        });
        let _entry = Entry {
            link: self,
            seq,
            peer,
        };
        self.output
            .borrow_mut()
            .extend_from_slice(&Builder::message(kind, seq, peer, attrs));
        self.wait(deadlines, Some(until), || {
            let mut pending = self.pending.borrow_mut();
            let i = pending
                .iter()
                .position(|p| p.seq == seq && p.peer == peer && p.status.is_some())?;
            let p = pending.swap_remove(i);
            Some(match (p.too_large, p.status) {
                (true, _) => Err(Failure::TooLarge),
                (false, status) => Ok(Reply {
                    status: status.unwrap_or(0),
                    data: p.data,
                }),
            })
        })
        .await?
    }

    /// A sequence number no call in flight to `peer` uses.
    fn next_seq(&self, peer: u32) -> u16 {
        let pending = self.pending.borrow();
        loop {
            let s = self.seq.get().wrapping_add(1);
            self.seq.set(s);
            if !pending.iter().any(|p| p.seq == s && p.peer == peer) {
                return s;
            }
        }
    }

    /// Pumps the socket until `done` gives a value, the link ends or
    /// `until` (if any) passes.
    async fn wait<T>(
        &self,
        deadlines: &Deadlines,
        until: Option<Instant>,
        mut done: impl FnMut() -> Option<T>,
    ) -> Result<T, Failure> {
        loop {
            self.pump();
            if let Some(v) = done() {
                return Ok(v);
            }
            if self.dead.get() {
                return Err(Failure::Lost);
            }
            let woke = future::or(self.ready(), self.progress.notified());
            match until {
                Some(at) => {
                    if within(deadlines, at, woke).await.is_none() {
                        return Err(Failure::Timeout);
                    }
                }
                None => woke.await,
            }
        }
    }

    /// Resolves when the socket can be read, or written while bytes wait.
    async fn ready(&self) {
        let readable = async {
            let _ = self.stream.readable().await;
        };
        if self.output.borrow().is_empty() {
            readable.await
        } else {
            future::or(readable, async {
                let _ = self.stream.writable().await;
            })
            .await
        }
    }

    /// Reads what has arrived and hands it out, then writes what is queued
    /// (replies to notifications included); never blocks.
    fn pump(&self) {
        let mut chunk = [0u8; 4096];
        while !self.dead.get() {
            match self.stream.get_ref().read(&mut chunk) {
                Ok(0) => return self.end("closed by ubusd"),
                Ok(n) => {
                    self.input.borrow_mut().extend_from_slice(&chunk[..n]);
                    self.dispatch_all();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.end("read failed"),
            }
        }
        let mut out = self.output.borrow_mut();
        while !out.is_empty() && !self.dead.get() {
            match self.stream.get_ref().write(&out) {
                Ok(0) => break,
                Ok(n) => {
                    out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    drop(out);
                    return self.end("write failed");
                }
            }
        }
    }

    fn dispatch_all(&self) {
        loop {
            let msg = {
                let mut input = self.input.borrow_mut();
                match blob::message_len(&input) {
                    Ok(Some(n)) if input.len() >= n => input.drain(..n).collect::<Vec<u8>>(),
                    Ok(_) => return,
                    Err(_) => {
                        drop(input);
                        return self.end("message over the size limit");
                    }
                }
            };
            if let Some((h, attrs)) = blob::split_message(&msg) {
                self.dispatch(h, attrs);
            }
        }
    }

    fn dispatch(&self, h: blob::Header, attrs: &[u8]) {
        match h.kind {
            blob::HELLO => self.hello.set(true),
            blob::STATUS | blob::DATA => {
                let mut pending = self.pending.borrow_mut();
                let Some(p) = pending
                    .iter_mut()
                    .find(|p| p.seq == h.seq && p.peer == h.peer && p.status.is_none())
                else {
                    // A late reply to a call that timed out or went away.
                    return;
                };
                if h.kind == blob::DATA {
                    let m = Message::parse(attrs);
                    let well_formed = [m.data, m.signature]
                        .into_iter()
                        .flatten()
                        .all(|l| blob::is_valid_list(l, UBUS_REPLY_DEPTH));
                    if !well_formed || p.data.len() + attrs.len() + 4 > UBUS_MAX_REPLY {
                        p.too_large = true;
                    } else {
                        let mut b = Builder {
                            buf: std::mem::take(&mut p.data),
                        };
                        let o = b.open(0);
                        b.copy(attrs);
                        b.close(o);
                        p.data = b.buf;
                    }
                    return;
                }
                // UBUS_STATUS_UNKNOWN_ERROR for a STATUS without one.
                p.status = Some(Message::parse(attrs).status.unwrap_or(9));
                drop(pending);
                self.progress.notify_all();
            }
            blob::INVOKE => self.notification(h, Message::parse(attrs)),
            blob::UNSUBSCRIBE => {
                let m = Message::parse(attrs);
                for s in self.subs.borrow_mut().iter_mut() {
                    if Some(s.objid) == m.objid {
                        s.ended = true;
                    }
                }
                self.progress.notify_all();
            }
            _ => {}
        }
    }

    /// A notification from an object we subscribed to, as an INVOKE of our
    /// subscriber object: queued as event-stream text, answered with STATUS.
    fn notification(&self, h: blob::Header, m: Message<'_>) {
        let mut status = blob::S_NOT_FOUND;
        if let Some(s) = self
            .subs
            .borrow_mut()
            .iter_mut()
            .find(|s| Some(s.objid) == m.objid && !s.ended)
        {
            status = 0;
            let method = m.method.unwrap_or_default();
            if !method.contains(&b'\n') && !method.contains(&b'\r') {
                let mut text = b"event: ".to_vec();
                text.extend_from_slice(method);
                text.extend_from_slice(b"\ndata: ");
                json::write_list(&mut text, m.data.unwrap_or_default(), false, 0);
                text.extend_from_slice(b"\n\n");
                if s.events.len() + text.len() > UBUS_EVENT_QUEUE {
                    s.ended = true;
                } else {
                    s.events.extend_from_slice(&text);
                }
            }
        }
        self.progress.notify_all();
        if m.no_reply {
            return;
        }
        let mut b = Builder::default();
        b.put_u32(blob::A_STATUS, status as u32);
        b.put_u32(blob::A_OBJID, m.objid.unwrap_or(0));
        self.output
            .borrow_mut()
            .extend_from_slice(&Builder::message(blob::STATUS, h.seq, h.peer, &b.buf));
    }

    fn end(&self, why: &str) {
        if !self.dead.replace(true) {
            log::warn!("ubus: connection ended ({why})");
        }
        self.progress.notify_all();
    }
}

/// A call's place in the table, left when the call ends in any way.
struct Entry<'a> {
    link: &'a Link,
    seq: u16,
    peer: u32,
}

impl Drop for Entry<'_> {
    fn drop(&mut self) {
        self.link
            .pending
            .borrow_mut()
            .retain(|p| !(p.seq == self.seq && p.peer == self.peer));
    }
}

/// An open subscription: our subscriber object and its notifications.
pub struct Subscription {
    link: Rc<Link>,
    deadlines: &'static Deadlines,
    objid: u32,
    _slot: Slot,
}

impl Subscription {
    /// The event text that has arrived, once some has; `None` once the
    /// object has gone, the bus connection ended or the client fell behind.
    pub async fn next(&self) -> Option<Vec<u8>> {
        self.link
            .wait(self.deadlines, None, || {
                let mut subs = self.link.subs.borrow_mut();
                let Some(s) = subs.iter_mut().find(|s| s.objid == self.objid) else {
                    return Some(None);
                };
                if !s.events.is_empty() {
                    return Some(Some(std::mem::take(&mut s.events)));
                }
                s.ended.then_some(None)
            })
            .await
            .ok()
            .flatten()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let link = &self.link;
        link.subs.borrow_mut().retain(|s| s.objid != self.objid);
        if link.dead.get() {
            return;
        }
        // Removing the object ends the subscription; its reply matches no
        // call and is dropped.
        let mut b = Builder::default();
        b.put_u32(blob::A_OBJID, self.objid);
        let seq = link.next_seq(0);
        link.output
            .borrow_mut()
            .extend_from_slice(&Builder::message(blob::REMOVE_OBJECT, seq, 0, &b.buf));
        link.pump();
    }
}
