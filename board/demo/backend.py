#!/usr/bin/env python3
"""The demo device's backend, for marmoset's `proxy /api/ unix:...` (Python 3 stdlib only).

    python3 board/demo/backend.py [--socket PATH] [--listen HOST:PORT] [--state-dir DIR]

It owns "the device" the demo UI shows:
  GET  /api/status/stream   Server-Sent Events: the status (uptime, load, memory, a counter) every second
  GET  /api/settings        the settings as JSON
  POST /api/settings        JSON only (hostname, timezone, ntp_server): validated, saved, answered
  POST /api/firmware        the body (Content-Length or chunked) streamed through SHA-256: {size, sha256}
  GET  /api/health          {"status": "ok"}
Paths are answered with or without the /api prefix, so a proxy may pass or strip it.

Listens on a unix socket (default /tmp/marmoset-demo.sock, made 0666 so that a server running as
another user can connect) and, with --listen, on TCP too. The settings are kept in a file in a
temporary directory (--state-dir to keep them elsewhere), removed at exit. HTTP/1.1 with keep-alive;
errors are JSON {"error": ...}: 400 bad JSON or framing, 404, 405, 411, 413 past the limits
below, 415, 431, 501.
"""
import argparse
import asyncio
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import urllib.parse

MAX_HEAD = 16 * 1024                 # request line and headers, as a browser sends them with room to spare
MAX_SETTINGS_BODY = 16 * 1024        # a settings document is a few hundred bytes
MAX_FIRMWARE = 256 * 1024 * 1024     # larger than any image of a small board
READ_CHUNK = 64 * 1024               # what one read of a body takes: memory per upload stays this size
IDLE_TIMEOUT = 60                    # seconds a connection may wait for its next head
BODY_STALL = 30                      # seconds a body may pause between reads
STATUS_PERIOD = 1.0                  # seconds between two status events

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           411: "Length Required", 413: "Content Too Large", 415: "Unsupported Media Type",
           431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented"}

HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z")
TIMEZONE = re.compile(r"(UTC|[A-Z][A-Za-z_]+(/[A-Z][A-Za-z0-9_+-]+){1,2})\Z")
NTP_SERVER = re.compile(r"([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\Z")


def log(msg):
    print(f"backend: {msg}", file=sys.stderr, flush=True)


class HttpError(Exception):
    """An answer that ends the request; the connection is closed after it when
    the request's body may not have been read to its end."""

    def __init__(self, status, message, close=True, allow=None):
        super().__init__(message)
        self.status, self.message, self.close, self.allow = status, message, close, allow


class Request:
    def __init__(self, method, target, version, headers):
        self.method, self.target, self.version, self.headers = method, target, version, headers
        self.path = urllib.parse.urlsplit(target).path
        self.chunked = False
        self.length = 0
        te = headers.get("transfer-encoding")
        cl = headers.get("content-length")
        if te is not None:
            if cl is not None:
                raise HttpError(400, "Transfer-Encoding with Content-Length")
            if te.strip().lower() != "chunked":
                raise HttpError(501, f"transfer coding {te!r} not supported")
            self.chunked = True
        elif cl is not None:
            if not re.fullmatch(r"[0-9]{1,18}", cl.strip()):
                raise HttpError(400, "bad Content-Length")
            self.length = int(cl)
        conn = headers.get("connection", "").lower()
        if version == "HTTP/1.0":
            self.keep_alive = "keep-alive" in conn
        else:
            self.keep_alive = "close" not in conn

    @property
    def has_body(self):
        return self.chunked or self.length > 0


def parse_head(head):
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.0", "HTTP/1.1") or not parts[1].startswith("/"):
        raise HttpError(400, "bad request line")
    headers = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise HttpError(400, "bad header line")
        name, value = name.lower(), value.strip()
        if name in headers:
            if name in ("content-length", "transfer-encoding", "host") and headers[name] != value:
                raise HttpError(400, f"conflicting {name}")
            if name not in ("content-length", "host"):
                headers[name] += ", " + value
            continue
        headers[name] = value
    return Request(parts[0], parts[1], parts[2], headers)


async def stalled(awaitable):
    try:
        return await asyncio.wait_for(awaitable, BODY_STALL)
    except asyncio.TimeoutError:
        raise HttpError(400, f"request body stalled for {BODY_STALL} s") from None


async def exactly(reader, size, short):
    """`size` bytes of the body, READ_CHUNK at most at once; 400 saying `short` if they end early."""
    left = size
    while left:
        data = await stalled(reader.read(min(left, READ_CHUNK)))
        if not data:
            raise HttpError(400, short)
        left -= len(data)
        yield data


async def body_chunks(reader, req, limit):
    """The request body piece by piece (never more than READ_CHUNK at once); 413 past limit."""
    if not req.chunked:
        if req.length > limit:
            raise HttpError(413, f"body of {req.length} bytes, the limit is {limit}")
        async for data in exactly(reader, req.length, "body shorter than its Content-Length"):
            yield data
        return
    total = 0
    while True:
        try:
            line = await stalled(reader.readuntil(b"\r\n"))
        except (asyncio.LimitOverrunError, asyncio.IncompleteReadError):
            raise HttpError(400, "bad chunk size line") from None
        size = line.split(b";", 1)[0].strip()
        if not re.fullmatch(rb"[0-9A-Fa-f]{1,15}", size):
            raise HttpError(400, "bad chunk size")
        size = int(size, 16)
        if size == 0:
            break
        total += size
        if total > limit:
            raise HttpError(413, f"body past the limit of {limit} bytes")
        async for data in exactly(reader, size, "body ends inside a chunk"):
            yield data
        try:
            if await stalled(reader.readexactly(2)) != b"\r\n":
                raise HttpError(400, "chunk without its CRLF")
        except asyncio.IncompleteReadError:
            raise HttpError(400, "body ends inside a chunk") from None
    while True:  # trailer fields, ignored
        try:
            if await stalled(reader.readuntil(b"\r\n")) == b"\r\n":
                return
        except (asyncio.LimitOverrunError, asyncio.IncompleteReadError):
            raise HttpError(400, "bad trailer") from None


async def read_body(reader, req, limit):
    parts = [data async for data in body_chunks(reader, req, limit)]
    return b"".join(parts)


def response_head(status, headers, version="HTTP/1.1"):
    lines = [f"{version} {status} {REASONS.get(status, 'Unknown')}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def send(writer, req, status, doc, close=False, allow=None):
    body = (json.dumps(doc, separators=(",", ":")) + "\n").encode()
    headers = [("Content-Type", "application/json"), ("Cache-Control", "no-store"),
               ("Content-Length", str(len(body)))]
    if allow:
        headers.append(("Allow", allow))
    if close or not req.keep_alive:
        headers.append(("Connection", "close"))
    elif req.version == "HTTP/1.0":
        headers.append(("Connection", "keep-alive"))
    writer.write(response_head(status, headers) + (b"" if req.method == "HEAD" else body))
    await writer.drain()


def os_release_name():
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("PRETTY_NAME="):
                        return line.split("=", 1)[1].strip().strip("\"'")
        except OSError:
            continue
        break
    return "unknown"


def meminfo():
    out = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "MemFree", "MemAvailable"):
                    out[key] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


def uptime_s():
    try:
        with open("/proc/uptime") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class Device:
    """The demo device: its settings (in a JSON file) and its status."""

    FIELDS = ("hostname", "timezone", "ntp_server")

    def __init__(self, state_dir):
        self.path = os.path.join(state_dir, "settings.json")
        self.kernel = os.uname().release
        self.firmware = os_release_name()
        try:
            with open(self.path) as f:
                self.settings = self.validate(json.load(f), {})
        except (OSError, ValueError, HttpError):
            host = socket.gethostname().split(".")[0]
            self.settings = {"hostname": host if HOSTNAME.match(host) else "marmoset",
                             "timezone": "UTC", "ntp_server": "pool.ntp.org"}

    def validate(self, doc, current):
        if not isinstance(doc, dict):
            raise HttpError(400, "settings must be a JSON object", close=False)
        unknown = sorted(set(doc) - set(self.FIELDS))
        if unknown:
            raise HttpError(400, f"unknown field: {unknown[0]}", close=False)
        new = dict(current)
        for key, value in doc.items():
            if not isinstance(value, str):
                raise HttpError(400, f"{key}: must be a string", close=False)
            new[key] = value.strip()
        checks = {
            "hostname": (HOSTNAME, "1 to 63 letters, digits or '-', not starting or ending with '-'"),
            "timezone": (TIMEZONE, "UTC or an Area/City name such as Europe/Paris"),
            "ntp_server": (NTP_SERVER, "a host name such as pool.ntp.org"),
        }
        for key, (pattern, what) in checks.items():
            value = new.get(key, "")
            if len(value) > 253 or not pattern.match(value):
                raise HttpError(400, f"{key}: {what}", close=False)
        return new

    def save(self, doc):
        new = self.validate(doc, self.settings)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(new, f)
        os.replace(tmp, self.path)
        self.settings = new
        return new

    def status(self, seq):
        mem = meminfo()
        return {
            "hostname": self.settings["hostname"], "kernel": self.kernel, "firmware": self.firmware,
            "uptime": uptime_s(), "load": [round(x, 2) for x in os.getloadavg()],
            "mem_total_kb": mem.get("MemTotal"), "mem_free_kb": mem.get("MemFree"),
            "mem_available_kb": mem.get("MemAvailable"), "counter": seq,
        }


def parse_settings(req, body):
    # JSON only: a page on another site can make a browser post a form here without asking first,
    # but not a JSON document (that takes a CORS preflight, which this backend never grants).
    ctype = req.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise HttpError(415, "send the settings as application/json", close=False)
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise HttpError(400, f"bad JSON: {e}", close=False) from None


async def status_stream(writer, req, device):
    chunked = req.version == "HTTP/1.1"
    headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store")]
    headers.append(("Transfer-Encoding", "chunked") if chunked else ("Connection", "close"))
    writer.write(response_head(200, headers))
    seq = 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    while True:
        seq += 1
        event = "retry: 3000\n" if seq == 1 else ""
        event += f"id: {seq}\ndata: {json.dumps(device.status(seq), separators=(',', ':'))}\n\n"
        data = event.encode()
        writer.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        await writer.drain()
        # On the second, whatever the time the event took.
        await asyncio.sleep(max(0.0, start + seq * STATUS_PERIOD - loop.time()))


async def firmware(reader, writer, req):
    if not req.has_body and "content-length" not in req.headers:
        raise HttpError(411, "send the image with Content-Length or chunked", close=False)
    digest, size = hashlib.sha256(), 0
    async for data in body_chunks(reader, req, MAX_FIRMWARE):
        digest.update(data)
        size += len(data)
    log(f"firmware: {size} bytes, sha256 {digest.hexdigest()}")
    return {"size": size, "sha256": digest.hexdigest()}


ROUTES = {"/status/stream": "GET", "/settings": "GET, POST", "/firmware": "POST", "/health": "GET"}


async def answer(reader, writer, req, device):
    path = req.path[4:] if req.path.startswith("/api/") else req.path
    allowed = ROUTES.get(path)
    if allowed is None:
        raise HttpError(404, f"no {req.path} here", close=req.has_body)
    methods = [m.strip() for m in allowed.split(",")]
    if "GET" in methods:
        methods.append("HEAD")
    if req.method not in methods:
        raise HttpError(405, f"{req.method} not allowed", close=req.has_body, allow=", ".join(methods))
    if req.has_body and req.method in ("GET", "HEAD"):
        await read_body(reader, req, MAX_SETTINGS_BODY)
    if "100-continue" in req.headers.get("expect", "").lower() and req.method == "POST":
        limit = MAX_FIRMWARE if path == "/firmware" else MAX_SETTINGS_BODY
        if req.length > limit:
            raise HttpError(413, f"body of {req.length} bytes, the limit is {limit}")
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    if path == "/status/stream":
        if req.method == "HEAD":
            writer.write(response_head(200, [("Content-Type", "text/event-stream"), ("Content-Length", "0")]))
            return True
        await status_stream(writer, req, device)
        return False
    if path == "/health":
        await send(writer, req, 200, {"status": "ok"})
    elif path == "/settings" and req.method == "POST":
        body = await read_body(reader, req, MAX_SETTINGS_BODY)
        saved = device.save(parse_settings(req, body))
        log(f"settings saved: {saved}")
        await send(writer, req, 200, saved)
    elif path == "/settings":
        await send(writer, req, 200, device.settings)
    elif path == "/firmware":
        await send(writer, req, 200, await firmware(reader, writer, req))
    return req.keep_alive


async def connection(reader, writer, device):
    try:
        while True:
            req = None
            try:
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT)
                except (asyncio.IncompleteReadError, asyncio.TimeoutError):
                    return
                except asyncio.LimitOverrunError:
                    raise HttpError(431, f"request head over {MAX_HEAD} bytes") from None
                req = parse_head(head)
                if not await answer(reader, writer, req, device):
                    return
            except HttpError as e:
                req = req or Request("GET", "/", "HTTP/1.1", {"connection": "close"})
                await send(writer, req, e.status, {"error": e.message}, close=e.close, allow=e.allow)
                if e.close or not req.keep_alive:
                    return
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--socket", default="/tmp/marmoset-demo.sock", help="unix socket path ('' for none)")
    ap.add_argument("--listen", default="", help="also listen on TCP HOST:PORT (port 0: any free port)")
    ap.add_argument("--state-dir", default="", help="where settings.json is kept (default: a new temp dir)")
    args = ap.parse_args()
    made_dir = not args.state_dir
    state_dir = args.state_dir or tempfile.mkdtemp(prefix="marmoset-demo-")
    device = Device(state_dir)
    handler = lambda r, w: connection(r, w, device)  # noqa: E731
    servers = []
    try:
        if args.socket:
            try:
                if os.path.exists(args.socket) and not os.path.isdir(args.socket):
                    os.unlink(args.socket)  # a stale socket of an earlier run
            except OSError as e:
                sys.exit(f"backend: {args.socket}: {e}")
            srv = await asyncio.start_unix_server(handler, args.socket, limit=MAX_HEAD)
            os.chmod(args.socket, 0o666)
            servers.append(srv)
            log(f"listening on unix:{args.socket}")
        if args.listen:
            host, _, port = args.listen.rpartition(":")
            srv = await asyncio.start_server(handler, host.strip("[]") or "127.0.0.1", int(port), limit=MAX_HEAD)
            servers.append(srv)
            for s in srv.sockets:
                addr = s.getsockname()
                log(f"listening on http://{addr[0]}:{addr[1]}")
        if not servers:
            sys.exit("backend: nothing to listen on (--socket '' and no --listen)")
        log(f"settings in {device.path}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log("stopping")
    finally:
        for srv in servers:
            srv.close()
        if args.socket and servers:
            try:
                os.unlink(args.socket)
            except OSError:
                pass
        if made_dir:
            shutil.rmtree(state_dir, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
