#!/usr/bin/env python3
"""A stand-in for ubusd, for the tests of the native ubus endpoint.

It speaks ubus's wire protocol on a unix socket, written from the published
format (the message header, blob and blobmsg attributes, the message and
attribute numbers): every integer big-endian, every attribute padded to 4
bytes, blobmsg attributes with their name header. It answers as ubusd does:
HELLO to each new client (its `peer` the client's id), LOOKUP (no path: every
object; an exact path; `prefix*`) with one DATA {OBJPATH, OBJID, OBJTYPE,
SIGNATURE} per object then STATUS, INVOKE with DATA {OBJID, DATA} then STATUS
{STATUS, OBJID} (replies carry the request's seq and the object's id as
peer), PING, ADD_OBJECT / REMOVE_OBJECT (a client's own objects, called
through the daemon as ubusd forwards them), SUBSCRIBE / UNSUBSCRIBE and a
client's NOTIFY. Notifications reach subscribers as INVOKEs, with NO_REPLY
unless the emitter asked for replies. Messages whose blob exceeds 1 MiB
(ubusd's UBUS_MAX_MSGLEN) end the client's connection, as ubusd does.

Its own objects, hosted as if by another client of the bus (rpcd):

  session   access {ubus_rpc_session, scope="ubus", object, function}
                -> {"access": bool}, from the table below (fnmatch patterns,
                as rpcd's ACLs); unknown session -> status 4 (not found)
            login {username, password} -> a new session with ADMIN's rights
                (root / secret; else status 6, permission denied, after
                --login-delay seconds: rpcd hashing on a slow device)
            destroy {ubus_rpc_session} -> removes the session
  system    board {} -> a board description as rpcd's system plugin gives
            info {}  -> uptime, load and memory (memory as int64)
  test      echo ANY      -> its arguments back, byte for byte (so the caller
                             sees what the endpoint sent, ubus_rpc_session
                             included)
            describe ANY  -> each argument's blobmsg type and payload in hex
                             ("int32 fffffffe"; tables and arrays nested), to
                             check the endpoint's JSON -> blobmsg encoding
            types {}      -> one value of every blobmsg type (int8/bool,
                             int16, int32, int64, double, string with
                             escapes, nested table and array, null), values
                             whose bytes differ when read in the wrong order
            slow {seconds=5} -> answers {"slept": seconds} after that long
            fail {code=9, data=false} -> status `code` (with a DATA first if
                             `data`)
            big {size}    -> {"data": "xxx..."}; by default the largest answer
                             ubus carries (its blob exactly 1 MiB)
            malformed {kind="overrun"} -> a DATA whose payload has a broken
                             attribute: overrun (length past its container),
                             short (length under the header), name (name
                             length past the attribute), int (an int32 of 2
                             bytes), nostring (a string without its NUL)
            oversized {}  -> a DATA message over 1 MiB
            instance {}   -> {"pid", "generation", "client"} (the caller's
                             client id: a reconnect shows a new one)
  test.events  emit {event="tick", data={}, reply=false} -> sends `event`
                  with `data` to every subscriber; {"subscribers": N}
               subscribers {} -> {"count": N}

Sessions (rpcd's anonymous session and two made-up ones):

  00000000000000000000000000000000  session.access, session.login,
                                    system.board
  aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa  everything (every scope, object and
                                    function, ":subscribe" included)
  bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb  system.*, test.echo, test.types,
                                    test.events.emit (no ":subscribe")

Object, type and client ids are drawn from a generator seeded by
--generation, so a restart with another generation gives other ids (ubusd's
are random), and the same generation the same ones.

It prints one line per event on stdout (the tests wait on them):
  ready PATH generation=N pid=P
  object PATH id=0xID
  client ID connected / client ID gone
  lookup PATH from ID
  invoke OBJECT METHOD from ID seq S args JSON
  reply OBJECT METHOD to ID seq S status N
  subscribe OBJECT by 0xSUBSCRIBER from ID / unsubscribe ...
  notify OBJECT EVENT to N subscribers
  add PATH id=0xID from ID / remove 0xID from ID (a client's own objects)
  notification answered by ID status N
  drop ID REASON (a client's connection ended by the daemon)

Usage:
  standin.py SOCKET [--generation N] [--login-delay SECONDS]
                                       serve until killed
  standin.py --self-test               a server and a client of this file
                                       against each other
  standin.py --client SOCKET list [PATH] | call OBJECT METHOD [JSON]
                                       this file's client side, e.g. against
                                       the real ubusd

Python 3 standard library only.
"""

import asyncio
import fnmatch
import json
import os
import random
import socket
import struct
import sys
import tempfile
import threading

# Message types.
HELLO, STATUS, DATA, PING, LOOKUP, INVOKE = 0, 1, 2, 3, 4, 5
ADD_OBJECT, REMOVE_OBJECT, SUBSCRIBE, UNSUBSCRIBE, NOTIFY, MONITOR = 6, 7, 8, 9, 10, 11

# Message attributes.
A_STATUS, A_OBJPATH, A_OBJID, A_METHOD, A_OBJTYPE, A_SIGNATURE = 1, 2, 3, 4, 5, 6
A_DATA, A_TARGET, A_ACTIVE, A_NO_REPLY, A_SUBSCRIBERS, A_USER, A_GROUP = 7, 8, 9, 10, 11, 12, 13

# blobmsg types.
T_UNSPEC, T_ARRAY, T_TABLE, T_STRING, T_INT64, T_INT32, T_INT16, T_BOOL, T_DOUBLE = range(9)
TYPE_NAMES = {
    T_UNSPEC: "unspec", T_ARRAY: "array", T_TABLE: "table", T_STRING: "string",
    T_INT64: "int64", T_INT32: "int32", T_INT16: "int16", T_BOOL: "bool",
    T_DOUBLE: "double",
}

# ubus statuses.
S_OK, S_INVALID_COMMAND, S_INVALID_ARGUMENT, S_METHOD_NOT_FOUND, S_NOT_FOUND = 0, 1, 2, 3, 4
S_NO_DATA, S_PERMISSION_DENIED, S_TIMEOUT, S_NOT_SUPPORTED, S_UNKNOWN_ERROR = 5, 6, 7, 8, 9

MAX_MSGLEN = 1 << 20
HEADER = struct.Struct(">BBHI")

ANONYMOUS = "0" * 32
ADMIN = "a" * 32
READER = "b" * 32


# ---- blob and blobmsg encoding --------------------------------------------


def pad4(n):
    return (n + 3) & ~3


def blob(aid, payload, extended=False):
    """One blob attribute: u32 header (extended<<31 | id<<24 | length), payload, padding."""
    n = 4 + len(payload)
    if n > 0xFFFFFF:
        raise ValueError("attribute too long")
    head = (0x80000000 if extended else 0) | (aid << 24) | n
    return struct.pack(">I", head) + payload + b"\0" * (pad4(n) - n)


def blob_u32(aid, v):
    return blob(aid, struct.pack(">I", v & 0xFFFFFFFF))


def blob_u8(aid, v):
    return blob(aid, bytes([v]))


def blob_str(aid, s):
    return blob(aid, s.encode() + b"\0")


def name_header(name):
    nb = name.encode()
    h = struct.pack(">H", len(nb)) + nb + b"\0"
    return h + b"\0" * (pad4(len(h)) - len(h))


def blobmsg(btype, name, payload):
    return blob(btype, name_header(name) + payload, extended=True)


class Int16(int):
    """An int sent as a blobmsg INT16."""


class Int64(int):
    """An int sent as a blobmsg INT64 even when it fits 32 bits."""


def encode(name, v):
    """A Python value as a blobmsg attribute, typed as libubox's JSON
    conversion does (bool -> BOOL, int -> INT32 when it fits else INT64,
    float -> DOUBLE, None -> UNSPEC)."""
    if isinstance(v, bool):
        return blobmsg(T_BOOL, name, bytes([1 if v else 0]))
    if isinstance(v, Int16):
        return blobmsg(T_INT16, name, struct.pack(">h", v))
    if isinstance(v, int) and not isinstance(v, Int64) and -(1 << 31) <= v < (1 << 31):
        return blobmsg(T_INT32, name, struct.pack(">i", v))
    if isinstance(v, int):
        return blobmsg(T_INT64, name, struct.pack(">Q", v & 0xFFFFFFFFFFFFFFFF))
    if isinstance(v, float):
        return blobmsg(T_DOUBLE, name, struct.pack(">d", v))
    if isinstance(v, str):
        return blobmsg(T_STRING, name, v.encode() + b"\0")
    if isinstance(v, dict):
        return blobmsg(T_TABLE, name, encode_table(v))
    if isinstance(v, list):
        return blobmsg(T_ARRAY, name, b"".join(encode("", x) for x in v))
    if v is None:
        return blobmsg(T_UNSPEC, name, b"")
    raise TypeError(type(v))


def encode_table(d):
    return b"".join(encode(k, v) for k, v in d.items())


class Malformed(ValueError):
    pass


def split_blobs(buf):
    """The attributes in `buf`: (id, extended, payload, raw attribute)."""
    out, off = [], 0
    while off < len(buf):
        if len(buf) - off < 4:
            raise Malformed("attribute header cut short")
        (head,) = struct.unpack_from(">I", buf, off)
        n = head & 0xFFFFFF
        if n < 4 or off + n > len(buf):
            raise Malformed("attribute length %d at %d of %d" % (n, off, len(buf)))
        out.append(((head >> 24) & 0x7F, bool(head >> 31), buf[off + 4:off + n], buf[off:off + n]))
        off += pad4(n)
    return out


class Node:
    """A decoded blobmsg attribute."""

    def __init__(self, btype, name, data, value):
        self.type, self.name, self.data, self.value = btype, name, data, value


FIXED = {T_INT64: 8, T_INT32: 4, T_INT16: 2, T_BOOL: 1, T_DOUBLE: 8}


def decode(buf):
    """A blobmsg table's or array's content as Nodes; Malformed if broken."""
    nodes = []
    for btype, ext, payload, _ in split_blobs(buf):
        if not ext:
            raise Malformed("blobmsg attribute without its extended bit")
        if len(payload) < 3:
            raise Malformed("name header cut short")
        (nlen,) = struct.unpack_from(">H", payload)
        hlen = pad4(2 + nlen + 1)
        if hlen > len(payload) or payload[2 + nlen] != 0:
            raise Malformed("name length past the attribute")
        name = payload[2:2 + nlen].decode("utf-8", "surrogateescape")
        data = payload[hlen:]
        if btype in FIXED and len(data) < FIXED[btype]:
            raise Malformed("%s of %d bytes" % (TYPE_NAMES[btype], len(data)))
        if btype == T_TABLE or btype == T_ARRAY:
            value = decode(data)
        elif btype == T_STRING:
            if not data.endswith(b"\0"):
                raise Malformed("string without its NUL")
            value = data[:-1].decode("utf-8", "surrogateescape")
        elif btype == T_INT64:
            (value,) = struct.unpack(">q", data[:8])
        elif btype == T_INT32:
            (value,) = struct.unpack(">i", data[:4])
        elif btype == T_INT16:
            (value,) = struct.unpack(">h", data[:2])
        elif btype == T_BOOL:
            value = data[0] != 0
        elif btype == T_DOUBLE:
            (value,) = struct.unpack(">d", data[:8])
        elif btype == T_UNSPEC:
            value = None
        else:
            raise Malformed("blobmsg type %d" % btype)
        nodes.append(Node(btype, name, data, value))
    return nodes


def to_py(nodes, table=True):
    def one(n):
        if n.type == T_TABLE:
            return to_py(n.value, True)
        if n.type == T_ARRAY:
            return to_py(n.value, False)
        return n.value

    if table:
        return {n.name: one(n) for n in nodes}
    return [one(n) for n in nodes]


def describe(nodes, table=True):
    def one(n):
        if n.type in (T_TABLE, T_ARRAY):
            return describe(n.value, n.type == T_TABLE)
        return "%s %s" % (TYPE_NAMES[n.type], n.data.hex())

    if table:
        return {n.name: one(n) for n in nodes}
    return [one(n) for n in nodes]


def message(mtype, seq, peer, attrs):
    return HEADER.pack(0, mtype, seq & 0xFFFF, peer & 0xFFFFFFFF) + blob(0, attrs)


def message_attrs(payload):
    """A message's attributes by id (the last of each wins, as blob_parse)."""
    return {aid: p for aid, _, p, _ in split_blobs(payload)}


def u32(p):
    return struct.unpack(">I", p[:4])[0] if p is not None and len(p) >= 4 else None


def cstr(p):
    if p is None or not p.endswith(b"\0"):
        return None
    return p[:-1].decode("utf-8", "surrogateescape")


# ---- the daemon ---------------------------------------------------------------


def log(*words):
    print(*words, flush=True)


class Obj:
    def __init__(self, oid, path, type_id, signature, owner, methods=None):
        self.id, self.path, self.type_id = oid, path, type_id
        self.signature = signature  # blobmsg tables, one per method
        self.owner = owner  # a Client, or None: hosted by this daemon
        self.methods = methods or {}
        self.subscribers = []  # subscriber objects' ids
        self.targets = []  # for a subscriber object: what it watches


class Client:
    def __init__(self, cid, writer):
        self.id, self.writer = cid, writer
        self.objects = []
        self.gone = False

    def send(self, raw):
        if not self.gone:
            self.writer.write(raw)


def sig(**args):
    return args


class Daemon:
    def __init__(self, generation, login_delay=0.0):
        self.generation = generation
        self.login_delay = login_delay
        self.rng = random.Random("standin-%d" % generation)
        self.used = set()
        self.clients = {}
        self.objects = {}
        self.types = set()
        self.paths = {}
        self.host_id = self.new_id()  # the client id the own objects are hosted by
        self.host_seq = 0
        self.sessions = {
            ANONYMOUS: [("ubus", "session", "access"), ("ubus", "session", "login"),
                        ("ubus", "system", "board")],
            ADMIN: [("*", "*", "*")],
            READER: [("ubus", "system", "*"), ("ubus", "test", "echo"), ("ubus", "test", "types"),
                     ("ubus", "test.events", "emit")],
        }
        try:
            import grp
            import pwd
            self.user = pwd.getpwuid(os.getuid()).pw_name
            self.group = grp.getgrgid(os.getgid()).gr_name
        except (ImportError, KeyError):
            self.user = self.group = "root"
        S, I, B, A, T, L, D = T_STRING, T_INT32, T_BOOL, T_ARRAY, T_TABLE, T_INT64, T_DOUBLE
        self.own("session", {
            "access": (sig(ubus_rpc_session=S, scope=S, object=S, function=S), self.m_access),
            "login": (sig(username=S, password=S, timeout=I), self.m_login),
            "destroy": (sig(ubus_rpc_session=S), self.m_destroy),
        })
        self.own("system", {
            "board": (sig(), self.m_board),
            "info": (sig(), self.m_info),
        })
        self.own("test", {
            "echo": (sig(string=S, number=I, boolean=B, array=A, object=T, int64=L, double=D),
                     self.m_echo),
            "describe": (sig(), self.m_describe),
            "types": (sig(), self.m_types),
            "slow": (sig(seconds=I), self.m_slow),
            "fail": (sig(code=I, data=B), self.m_fail),
            "big": (sig(size=I), self.m_big),
            "malformed": (sig(kind=S), self.m_malformed),
            "oversized": (sig(), self.m_oversized),
            "instance": (sig(), self.m_instance),
        })
        self.own("test.events", {
            "emit": (sig(event=S, data=T, reply=B), self.m_emit),
            "subscribers": (sig(), self.m_subscribers),
        })

    def new_id(self):
        while True:
            i = self.rng.randrange(1024, 1 << 32)
            if i not in self.used:
                self.used.add(i)
                return i

    def own(self, path, methods):
        signature = b"".join(
            blobmsg(T_TABLE, m, b"".join(blobmsg(T_INT32, a, struct.pack(">i", t))
                                         for a, t in args.items()))
            for m, (args, _) in methods.items())
        type_id = self.new_id()
        self.types.add(type_id)
        o = Obj(self.new_id(), path, type_id, signature, None,
                {m: h for m, (_, h) in methods.items()})
        self.objects[o.id] = o
        self.paths[path] = o
        log("object %s id=0x%08x" % (path, o.id))

    # -- connections

    async def serve(self, reader, writer):
        cl = Client(self.new_id(), writer)
        self.clients[cl.id] = cl
        log("client %d connected" % cl.id)
        cl.send(message(HELLO, 0, cl.id, b""))
        try:
            while True:
                head = await reader.readexactly(12)
                _, mtype, seq, peer = HEADER.unpack_from(head)
                (bh,) = struct.unpack_from(">I", head, 8)
                n = bh & 0xFFFFFF
                if n < 4 or pad4(n) > MAX_MSGLEN:
                    log("drop %d blob length %d" % (cl.id, n))
                    break
                rest = await reader.readexactly(n - 4)
                try:
                    self.receive(cl, mtype, seq, peer, rest)
                except Malformed as e:
                    self.status(cl, seq, peer, S_INVALID_ARGUMENT)
                    log("malformed message from %d: %s" % (cl.id, e))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.forget(cl)
            writer.close()

    def forget(self, cl):
        cl.gone = True
        self.clients.pop(cl.id, None)
        for oid in list(cl.objects):
            self.remove_object(oid)
        log("client %d gone" % cl.id)

    def remove_object(self, oid):
        o = self.objects.pop(oid, None)
        if o is None:
            return
        if o.owner is not None and oid in o.owner.objects:
            o.owner.objects.remove(oid)
        if o.path is not None:
            self.paths.pop(o.path, None)
        for t in list(o.targets):
            target = self.objects.get(t)
            if target is not None and oid in target.subscribers:
                target.subscribers.remove(oid)
        for s in list(o.subscribers):
            sub = self.objects.get(s)
            if sub is not None and sub.owner is not None:
                sub.targets.remove(oid)
                sub.owner.send(message(UNSUBSCRIBE, 0, 0, blob_u32(A_OBJID, s) + blob_u32(A_TARGET, oid)))

    def status(self, cl, seq, peer, code, objid=None):
        attrs = blob_u32(A_STATUS, code)
        if objid is not None:
            attrs += blob_u32(A_OBJID, objid)
        cl.send(message(STATUS, seq, peer, attrs))

    def receive(self, cl, mtype, seq, peer, payload):
        attrs = message_attrs(payload)
        handler = {
            PING: self.h_ping, LOOKUP: self.h_lookup, INVOKE: self.h_invoke,
            ADD_OBJECT: self.h_add_object, REMOVE_OBJECT: self.h_remove_object,
            SUBSCRIBE: self.h_subscribe, UNSUBSCRIBE: self.h_unsubscribe,
            STATUS: self.h_response, DATA: self.h_response, NOTIFY: self.h_notify,
        }.get(mtype)
        ret = handler(cl, mtype, seq, peer, attrs, payload) if handler else S_INVALID_COMMAND
        if ret is not None:
            self.status(cl, seq, peer, ret)

    # -- the daemon's own commands (None: answered already, or not at all)

    def h_ping(self, cl, mtype, seq, peer, attrs, payload):
        cl.send(message(DATA, seq, peer, payload))
        return S_OK

    def send_obj(self, cl, seq, peer, o):
        if o.type_id is None:
            return
        cl.send(message(DATA, seq, peer,
                        blob_str(A_OBJPATH, o.path) + blob_u32(A_OBJID, o.id)
                        + blob_u32(A_OBJTYPE, o.type_id) + blob(A_SIGNATURE, o.signature)))

    def h_lookup(self, cl, mtype, seq, peer, attrs, payload):
        path = cstr(attrs.get(A_OBJPATH))
        log("lookup %s from %d" % (path if path is not None else "*", cl.id))
        if A_OBJPATH not in attrs:
            for p in sorted(self.paths, key=lambda s: s.encode()):
                self.send_obj(cl, seq, peer, self.paths[p])
            return S_OK
        if not path:
            return S_INVALID_ARGUMENT
        if not path.endswith("*"):
            o = self.paths.get(path)
            if o is None:
                return S_NOT_FOUND
            self.send_obj(cl, seq, peer, o)
            return S_OK
        found = [p for p in self.paths if p.startswith(path[:-1])]
        for p in sorted(found, key=lambda s: s.encode()):
            self.send_obj(cl, seq, peer, self.paths[p])
        return S_OK if found else S_NOT_FOUND

    def h_add_object(self, cl, mtype, seq, peer, attrs, payload):
        path = cstr(attrs.get(A_OBJPATH))
        type_id = u32(attrs.get(A_OBJTYPE))
        signature = attrs.get(A_SIGNATURE, b"")
        if type_id is not None and type_id not in self.types:
            return S_INVALID_ARGUMENT
        new_type = type_id is None and A_SIGNATURE in attrs
        if new_type:
            decode(signature)
            type_id = self.new_id()
            self.types.add(type_id)
        if path is not None and path in self.paths:
            return S_INVALID_ARGUMENT
        o = Obj(self.new_id(), path, type_id, signature, cl)
        self.objects[o.id] = o
        cl.objects.append(o.id)
        if path is not None:
            self.paths[path] = o
        reply = blob_u32(A_OBJID, o.id)
        if new_type:
            reply += blob_u32(A_OBJTYPE, type_id)
        cl.send(message(DATA, seq, peer, reply))
        log("add %s id=0x%08x from %d" % (path or "(subscriber)", o.id, cl.id))
        return S_OK

    def h_remove_object(self, cl, mtype, seq, peer, attrs, payload):
        oid = u32(attrs.get(A_OBJID))
        if oid is None:
            return S_INVALID_ARGUMENT
        o = self.objects.get(oid)
        if o is None:
            return S_NOT_FOUND
        if o.owner is not cl:
            return S_PERMISSION_DENIED
        cl.send(message(DATA, seq, peer, blob_u32(A_OBJID, oid)))
        self.remove_object(oid)
        log("remove 0x%08x from %d" % (oid, cl.id))
        return S_OK

    def h_subscribe(self, cl, mtype, seq, peer, attrs, payload):
        sub, target = self.watch_pair(cl, attrs)
        if isinstance(sub, int):
            return sub
        if target.owner is cl:
            return S_INVALID_ARGUMENT
        if sub.id not in target.subscribers:
            target.subscribers.append(sub.id)
            sub.targets.append(target.id)
            if len(target.subscribers) == 1 and target.owner is not None:
                target.owner.send(message(NOTIFY, 0, 0, blob_u32(A_OBJID, target.id) + blob_u8(A_ACTIVE, 1)))
        log("subscribe %s by 0x%08x from %d" % (target.path, sub.id, cl.id))
        return S_OK

    def h_unsubscribe(self, cl, mtype, seq, peer, attrs, payload):
        sub, target = self.watch_pair(cl, attrs)
        if isinstance(sub, int):
            return sub
        if sub.id not in target.subscribers:
            return S_NOT_FOUND
        target.subscribers.remove(sub.id)
        sub.targets.remove(target.id)
        log("unsubscribe %s by 0x%08x from %d" % (target.path, sub.id, cl.id))
        return S_OK

    def watch_pair(self, cl, attrs):
        oid, tid = u32(attrs.get(A_OBJID)), u32(attrs.get(A_TARGET))
        if oid is None or tid is None:
            return S_INVALID_ARGUMENT, None
        sub, target = self.objects.get(oid), self.objects.get(tid)
        if sub is None:
            return S_NOT_FOUND, None
        if sub.owner is not cl:
            return S_INVALID_ARGUMENT, None
        if target is None:
            return S_NOT_FOUND, None
        return sub, target

    def h_invoke(self, cl, mtype, seq, peer, attrs, payload):
        oid, method = u32(attrs.get(A_OBJID)), cstr(attrs.get(A_METHOD))
        if oid is None or method is None:
            return S_INVALID_ARGUMENT
        o = self.objects.get(oid)
        if o is None:
            log("invoke 0x%08x %s from %d seq %d: no such object" % (oid, method, cl.id, seq))
            return S_NOT_FOUND
        data = attrs.get(A_DATA)
        if o.owner is not None:
            fwd = blob_u32(A_OBJID, oid) + blob_str(A_METHOD, method) + self.user_group()
            if data is not None:
                fwd += blob(A_DATA, data)
            o.owner.send(message(INVOKE, seq, cl.id, fwd))
            return None
        try:
            args = to_py(decode(data or b""))
            shown = json.dumps(args, sort_keys=False)
        except Malformed as e:
            args, shown = None, "malformed (%s)" % e
        log("invoke %s %s from %d seq %d args %s" % (o.path, method, cl.id, seq, shown))
        handler = o.methods.get(method)
        if handler is None:
            return self.finish(cl, seq, o, method, S_METHOD_NOT_FOUND)
        if data is None or args is None:
            return self.finish(cl, seq, o, method, S_INVALID_ARGUMENT)
        call = Call(self, cl, seq, o, method, args, data)
        asyncio.get_running_loop().create_task(call.run(handler))
        return None

    def user_group(self):
        return blob_str(A_USER, self.user) + blob_str(A_GROUP, self.group)

    def finish(self, cl, seq, o, method, code):
        self.status(cl, seq, o.id, code, o.id)
        log("reply %s %s to %d seq %d status %d" % (o.path, method, cl.id, seq, code))
        return None

    def h_response(self, cl, mtype, seq, peer, attrs, payload):
        oid = u32(attrs.get(A_OBJID))
        if oid is None or (mtype == STATUS and A_STATUS not in attrs) or (mtype == DATA and A_DATA not in attrs):
            return None
        o = self.objects.get(oid)
        if o is None or o.owner is not cl:
            return None
        if peer == self.host_id:
            log("notification answered by %d status %s" % (cl.id, u32(attrs.get(A_STATUS))))
            return None
        to = self.clients.get(peer)
        if to is not None:
            to.send(message(mtype, seq, oid, payload))
        return None

    def h_notify(self, cl, mtype, seq, peer, attrs, payload):
        oid, method = u32(attrs.get(A_OBJID)), cstr(attrs.get(A_METHOD))
        if oid is None or method is None:
            return S_INVALID_ARGUMENT
        o = self.objects.get(oid)
        if o is None:
            return S_NOT_FOUND
        if o.owner is not cl:
            return S_PERMISSION_DENIED
        no_reply = attrs.get(A_NO_REPLY, b"\0")[:1] not in (b"", b"\0")
        if not no_reply:
            subs = b"".join(blob_u32(0, s) for s in o.subscribers)
            cl.send(message(STATUS, seq, peer, blob_u32(A_OBJID, oid) + blob(A_SUBSCRIBERS, subs)
                            + blob_u32(A_STATUS, 0)))
        self.notify(o, method, attrs.get(A_DATA), no_reply, seq, cl.id)
        return None

    def notify(self, o, event, data, no_reply, seq, sender):
        sent = 0
        for s in o.subscribers:
            sub = self.objects.get(s)
            if sub is None or sub.owner is None:
                continue
            attrs = blob_u8(A_NO_REPLY, 1) if no_reply else b""
            attrs += blob_u32(A_OBJID, s) + blob_str(A_METHOD, event) + self.user_group()
            attrs += blob(A_DATA, data if data is not None else b"")
            sub.owner.send(message(INVOKE, seq, sender, attrs))
            sent += 1
        log("notify %s %s to %d subscribers" % (o.path, event, sent))
        return sent

    # -- the own objects' methods: each returns (status, [DATA payloads]) or
    #    sends its replies itself and returns None

    def allowed(self, sid, scope, obj, fun):
        return any(fnmatch.fnmatchcase(scope, s) and fnmatch.fnmatchcase(obj, o) and fnmatch.fnmatchcase(fun, f)
                   for s, o, f in self.sessions[sid])

    async def m_access(self, call):
        a = call.args
        sid, obj, fun = a.get("ubus_rpc_session"), a.get("object"), a.get("function")
        scope = a.get("scope", "ubus")
        if not all(isinstance(x, str) for x in (sid, obj, fun, scope)):
            return S_INVALID_ARGUMENT, []
        if sid not in self.sessions:
            return S_NOT_FOUND, []
        return S_OK, [{"access": self.allowed(sid, scope, obj, fun)}]

    async def m_login(self, call):
        a = call.args
        if a.get("username") != "root" or a.get("password") != "secret":
            await asyncio.sleep(self.login_delay)
            return S_PERMISSION_DENIED, []
        sid = "%032x" % self.rng.getrandbits(128)
        self.sessions[sid] = list(self.sessions[ADMIN])
        return S_OK, [{"ubus_rpc_session": sid, "timeout": 300, "expires": 300,
                       "acls": {"ubus": {"*": ["*"]}}, "data": {"username": "root"}}]

    async def m_destroy(self, call):
        sid = call.args.get("ubus_rpc_session")
        if sid not in self.sessions or sid == ANONYMOUS:
            return S_NOT_FOUND, []
        del self.sessions[sid]
        return S_OK, []

    async def m_board(self, call):
        return S_OK, [{
            "kernel": "6.6.0", "hostname": "standin", "system": "Stand-in CPU",
            "model": "Marmoset stand-in board", "board_name": "marmoset,standin",
            "rootfs_type": "squashfs",
            "release": {"distribution": "OpenWrt", "version": "SNAPSHOT", "revision": "r0-standin",
                        "target": "x86/64", "description": "OpenWrt SNAPSHOT stand-in"},
        }]

    async def m_info(self, call):
        with open("/proc/uptime") as f:
            uptime = int(float(f.read().split()[0]))
        load = [int(x * 65536) for x in os.getloadavg()]
        return S_OK, [{"localtime": int(asyncio.get_running_loop().time()), "uptime": uptime, "load": load,
                       "memory": {"total": Int64(1 << 28), "free": Int64(1 << 27), "shared": Int64(0),
                                  "buffered": Int64(0), "available": Int64(1 << 27), "cached": Int64(0)}}]

    async def m_echo(self, call):
        return S_OK, [call.raw]

    async def m_describe(self, call):
        return S_OK, [describe(decode(call.raw))]

    async def m_types(self, call):
        return S_OK, [TYPED_VALUES]

    async def m_slow(self, call):
        secs = call.args.get("seconds", 5)
        if isinstance(secs, bool) or not isinstance(secs, (int, float)):
            return S_INVALID_ARGUMENT, []
        await asyncio.sleep(secs)
        return S_OK, [{"slept": secs}]

    async def m_fail(self, call):
        code = call.args.get("code", S_UNKNOWN_ERROR)
        if isinstance(code, bool) or not isinstance(code, int):
            return S_INVALID_ARGUMENT, []
        return code, [{"detail": "failed on request"}] if call.args.get("data") else []

    async def m_big(self, call):
        # The largest: blob header 4 + OBJID 8 + DATA header 4 + the string
        # attribute's headers 4 + 8 ("data") + the string and its NUL, padded.
        size = call.args.get("size", MAX_MSGLEN - 28 - 1)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            return S_INVALID_ARGUMENT, []
        return S_OK, [{"data": "x" * size}]

    async def m_malformed(self, call):
        kind = call.args.get("kind", "overrun")
        good = encode("ok", 1)
        bad = {
            "overrun": struct.pack(">I", 0x80000000 | (T_STRING << 24) | 64) + name_header("s") + b"abc\0",
            "short": struct.pack(">I", 0x80000000 | (T_INT32 << 24) | 2) + b"\0" * 4,
            "name": struct.pack(">I", 0x80000000 | (T_INT32 << 24) | 12) + struct.pack(">H", 200) + b"n\0\0" + b"\0" * 4,
            "int": blobmsg(T_INT32, "i", b"\0\1"),
            "nostring": blobmsg(T_STRING, "s", b"abcd"),
        }.get(kind)
        if bad is None:
            return S_INVALID_ARGUMENT, []
        return S_OK, [good + bad]

    async def m_oversized(self, call):
        return S_OK, [{"data": "y" * (MAX_MSGLEN + 4096)}]

    async def m_instance(self, call):
        return S_OK, [{"pid": os.getpid(), "generation": self.generation, "client": Int64(call.cl.id)}]

    async def m_emit(self, call):
        a = call.args
        event = a.get("event", "tick")
        data = a.get("data", {})
        if not isinstance(event, str) or not isinstance(data, dict):
            return S_INVALID_ARGUMENT, []
        raw = b""
        for n in decode(call.raw):
            if n.name == "data":
                raw = n.data
        self.host_seq += 1
        sent = self.notify(call.obj, event, raw, not a.get("reply", False), self.host_seq, self.host_id)
        return S_OK, [{"subscribers": sent}]

    async def m_subscribers(self, call):
        return S_OK, [{"count": len(call.obj.subscribers)}]


TYPED_VALUES = {
    "int8": True,
    "false": False,
    "int16": Int16(-12345),
    "int32": -19088744,  # 0xfedcba98
    "int64": -81985529216486896,  # 0xfedcba9876543210
    "int64_small": Int64(7),
    "uint_like": 0x01020304,
    "double": -1234.5678,
    "string": "tab\there \"quoted\" back\\slash\nnew line \x01 caf\u00e9 \U0001f600",
    "table": {"array": [1, "two", {"three": Int16(3)}, [Int64(4)]], "empty_table": {}, "empty_array": []},
    "null": None,
}


class Call:
    def __init__(self, daemon, cl, seq, obj, method, args, raw):
        self.daemon, self.cl, self.seq, self.obj = daemon, cl, seq, obj
        self.method, self.args, self.raw = method, args, raw

    async def run(self, handler):
        code, datas = await handler(self)
        for d in datas:
            self.send_raw_data(d if isinstance(d, bytes) else encode_table(d))
        self.daemon.finish(self.cl, self.seq, self.obj, self.method, code)

    def send_raw_data(self, payload):
        attrs = blob_u32(A_OBJID, self.obj.id) + blob(A_DATA, payload)
        self.cl.send(message(DATA, self.seq, self.obj.id, attrs))


async def run_daemon(path, generation, started=None, login_delay=0.0):
    if os.path.exists(path) or os.path.islink(path):
        os.unlink(path)
    d = Daemon(generation, login_delay)
    server = await asyncio.start_unix_server(d.serve, path=path, limit=MAX_MSGLEN)
    log("ready %s generation=%d pid=%d" % (path, generation, os.getpid()))
    if started is not None:
        started.set()
    async with server:
        await server.serve_forever()


# ---- a client, for the self-test and for checks against the real ubusd --------


class BusClient:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(path)
        self.seq = 0
        mtype, _, peer, _ = self.read()
        if mtype != HELLO:
            raise Malformed("no HELLO")
        self.id = peer
        self.pending = []

    def read_exact(self, n):
        out = b""
        while len(out) < n:
            b = self.sock.recv(n - len(out))
            if not b:
                raise ConnectionError("bus closed")
            out += b
        return out

    def read(self):
        if getattr(self, "pending", None):
            return self.pending.pop(0)
        head = self.read_exact(12)
        _, mtype, seq, peer = HEADER.unpack_from(head)
        n = struct.unpack_from(">I", head, 8)[0] & 0xFFFFFF
        if pad4(n) > MAX_MSGLEN:
            raise Malformed("message over 1 MiB")
        return mtype, seq, peer, message_attrs(self.read_exact(n - 4))

    def request(self, mtype, peer, attrs):
        self.seq = (self.seq + 1) & 0xFFFF
        self.sock.sendall(message(mtype, self.seq, peer, attrs))
        seq, datas, aside = self.seq, [], []
        while True:
            m = self.read()
            if m[1] != seq or m[2] != peer or m[0] not in (DATA, STATUS):
                aside.append(m)
                continue
            if m[0] == DATA:
                datas.append(m[3])
                continue
            self.pending = aside + self.pending
            return u32(m[3].get(A_STATUS)), datas

    def lookup(self, path=None):
        status, datas = self.request(LOOKUP, 0, b"" if path is None else blob_str(A_OBJPATH, path))
        objs = []
        for d in datas:
            signature = {n.name: {a.name: a.value for a in n.value} for n in decode(d.get(A_SIGNATURE, b""))}
            objs.append((cstr(d[A_OBJPATH]), u32(d[A_OBJID]), signature))
        return status, objs

    def call(self, path, method, args=None, raw=None):
        status, objs = self.lookup(path)
        if status != 0:
            return status, []
        oid = objs[0][1]
        payload = raw if raw is not None else encode_table(args or {})
        status, datas = self.request(INVOKE, oid, blob_u32(A_OBJID, oid) + blob_str(A_METHOD, method)
                                     + blob(A_DATA, payload))
        return status, [d[A_DATA] for d in datas]

    def subscribe(self, path):
        status, datas = self.request(ADD_OBJECT, 0, b"")
        sub = u32(datas[0][A_OBJID])
        _, objs = self.lookup(path)
        status, _ = self.request(SUBSCRIBE, 0, blob_u32(A_OBJID, sub) + blob_u32(A_TARGET, objs[0][1]))
        return status, sub


def self_test():
    scratch = tempfile.TemporaryDirectory(prefix="standin-")
    path = os.path.join(scratch.name, "ubus.sock")
    started = threading.Event()
    threading.Thread(target=lambda: asyncio.run(run_daemon(path, 1, started)), daemon=True).start()
    started.wait(10)
    c = BusClient(path)
    status, objs = c.lookup()
    assert status == 0 and [o[0] for o in objs] == ["session", "system", "test", "test.events"], objs
    assert c.lookup("nosuch")[0] == S_NOT_FOUND
    assert [o[0] for o in c.lookup("test*")[1]] == ["test", "test.events"]
    assert c.lookup("")[0] == S_INVALID_ARGUMENT
    sig_echo = [o for o in objs if o[0] == "test"][0][2]["echo"]
    assert sig_echo == {"string": T_STRING, "number": T_INT32, "boolean": T_BOOL, "array": T_ARRAY,
                        "object": T_TABLE, "int64": T_INT64, "double": T_DOUBLE}, sig_echo
    args = {"i": -2, "l": 1 << 40, "b": True, "d": 0.5, "s": "a\"b", "t": {"x": [1, {"y": None}]}}
    status, datas = c.call("test", "echo", args)
    assert status == 0 and to_py(decode(datas[0])) == args, datas
    status, datas = c.call("test", "describe", {"i": -2, "l": Int64(1), "s": "hi", "a": [True]})
    assert to_py(decode(datas[0])) == {"i": "int32 fffffffe", "l": "int64 0000000000000001",
                                       "s": "string 686900", "a": ["bool 01"]}, datas
    status, datas = c.call("test", "types")
    assert to_py(decode(datas[0])) == {k: v for k, v in TYPED_VALUES.items()}, datas
    assert c.call("test", "fail", {"code": 7}) == (7, [])
    assert c.call("test", "nosuch")[0] == S_METHOD_NOT_FOUND
    status, datas = c.call("session", "access", {"ubus_rpc_session": READER, "object": "test",
                                                 "function": "echo"})
    assert to_py(decode(datas[0])) == {"access": True}
    status, datas = c.call("session", "access", {"ubus_rpc_session": READER, "object": "test.events",
                                                 "function": ":subscribe"})
    assert to_py(decode(datas[0])) == {"access": False}
    assert c.call("session", "access", {"ubus_rpc_session": "x", "object": "a", "function": "b"})[0] == 4
    status, datas = c.call("test", "big")
    assert status == 0 and len(to_py(decode(datas[0]))["data"]) == MAX_MSGLEN - 29
    for kind in ("overrun", "short", "name", "int", "nostring"):
        status, datas = c.call("test", "malformed", {"kind": kind})
        try:
            decode(datas[0])
            raise AssertionError("%s decoded" % kind)
        except Malformed:
            pass
    status, _ = c.call("system", "board")
    assert status == 0
    # A subscriber on another connection gets what test.events emits.
    s = BusClient(path)
    assert s.subscribe("test.events")[0] == 0
    status, datas = c.call("test.events", "emit", {"event": "ping", "data": {"n": 1}})
    assert to_py(decode(datas[0])) == {"subscribers": 1}, datas
    mtype, _, _, attrs = s.read()
    assert mtype == INVOKE and cstr(attrs[A_METHOD]) == "ping" and A_NO_REPLY in attrs
    assert to_py(decode(attrs[A_DATA])) == {"n": 1}
    # A slow call does not hold up another client's.
    c.sock.sendall(message(INVOKE, 900, objs[2][1], blob_u32(A_OBJID, objs[2][1]) + blob_str(A_METHOD, "slow")
                           + blob(A_DATA, encode_table({"seconds": 1}))))
    assert s.call("test", "echo", {"x": 1})[0] == 0
    # Oversized: the reading client refuses it.
    try:
        c.call("test", "oversized")
        raise AssertionError("an oversized message was read")
    except Malformed:
        pass
    c.sock.close()
    s.sock.close()
    scratch.cleanup()
    print("self-test passed")


def client_main(argv):
    c = BusClient(argv[0])
    if argv[1] == "list":
        status, objs = c.lookup(argv[2] if len(argv) > 2 else None)
        for path, oid, signature in objs:
            print("'%s' @%08x" % (path, oid))
            for m, a in signature.items():
                print("\t\"%s\":%s" % (m, json.dumps({k: TYPE_NAMES.get(v, v) for k, v in a.items()})))
        return status
    if argv[1] == "call":
        args = json.loads(argv[4]) if len(argv) > 4 else {}
        status, datas = c.call(argv[2], argv[3], args)
        for d in datas:
            print(json.dumps(to_py(decode(d)), indent=1))
        return status
    raise SystemExit("usage: --client SOCKET list [PATH] | call OBJECT METHOD [JSON]")


def main(argv):
    if argv[:1] == ["--self-test"]:
        self_test()
        return 0
    if argv[:1] == ["--client"]:
        status = client_main(argv[1:])
        if status:
            print("status %d" % status, file=sys.stderr)
        return status
    if not argv or argv[0].startswith("-"):
        raise SystemExit(__doc__)
    options = {"--generation": "1", "--login-delay": "0"}
    rest = argv[1:]
    while rest:
        if len(rest) < 2 or rest[0] not in options:
            raise SystemExit(__doc__)
        options[rest[0]], rest = rest[1], rest[2:]
    generation = int(options["--generation"])
    login_delay = float(options["--login-delay"])
    try:
        asyncio.run(run_daemon(argv[0], generation, login_delay=login_delay))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
