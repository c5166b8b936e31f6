#!/usr/bin/env python3
"""Writes fuzz/seeds/<target>/: requests, paths, header values, config lines
script output and backend answers taken from the repo's tests (tests/*.rs and the unit tests
in src/), plus a few framing cases. Run from anywhere; it rewrites seeds/
but keeps the `regress-*` files: inputs that once found a bug."""

import hashlib
import pathlib
import re
import struct

FUZZ = pathlib.Path(__file__).resolve().parent
REPO = FUZZ.parent
SOURCES = sorted(REPO.glob("tests/*.rs")) + sorted(REPO.glob("src/*.rs"))
LITERAL = re.compile(rb'b?"((?:[^"\\]|\\.)*)"', re.S)
ESCAPES = {b"r": b"\r", b"n": b"\n", b"t": b"\t", b"0": b"\0", b"\\": b"\\", b'"': b'"', b"'": b"'"}


def unescape(raw):
    """A Rust string literal's bytes; None for a format string or a line continuation."""
    if b"{" in raw or b"\\\n" in raw:
        return None
    out, i = bytearray(), 0
    while i < len(raw):
        if raw[i : i + 1] == b"\\":
            c = raw[i + 1 : i + 2]
            if c == b"x":
                out += bytes([int(raw[i + 2 : i + 4], 16)])
                i += 4
                continue
            if c not in ESCAPES:
                return None
            out += ESCAPES[c]
            i += 2
            continue
        out += raw[i : i + 1]
        i += 1
    return bytes(out)


def literals():
    seen = []
    for f in SOURCES:
        for m in LITERAL.finditer(f.read_bytes()):
            s = unescape(m.group(1))
            if s is not None and s not in seen:
                seen.append(s)
    return seen


def write(target, items, limit=48):
    d = FUZZ / "seeds" / target
    d.mkdir(parents=True, exist_ok=True)
    unique = list(dict.fromkeys(items))[:limit]
    for item in unique:
        (d / hashlib.sha1(item).hexdigest()[:16]).write_bytes(item)
    return len(unique)


def main():
    for old in (FUZZ / "seeds").glob("*/*"):
        if not old.name.startswith("regress-"):
            old.unlink()
    lits = literals()
    methods = (b"GET ", b"HEAD ", b"POST ", b"PUT ", b"DELETE ", b"BREW ", b"OPTIONS ")
    requests = [s for s in lits if s.startswith(methods) and b"HTTP" in s and b"\r\n" in s]
    chunked_bodies = [s for s in lits if re.match(rb"^[0-9a-fA-F]+(;[^\r]*)?\r\n", s)]
    requests += [
        b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + b
        for b in chunked_bodies
    ]
    requests += [
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET / HTTP/1.1\nHost: t\n\n",
    ]
    paths = [s for s in lits if s.startswith(b"/") and len(s) < 200 and b" " not in s]
    paths += [b"/sub/page.txt?v=123&x=%2e%2e", b"/%2e", b"/.", b"/a/./b/", b"/a%5cb"]

    def range_input(length, mtime, t, flags, fields):
        return struct.pack("<QQQB", length, mtime, t, flags) + b"\n".join(fields)

    dates = [s for s in lits if re.search(rb"\d\d:\d\d:\d\d", s) and len(s) < 40]
    ranges = [s for s in lits if s.startswith((b"bytes", b"Bytes", b"items"))]
    tags = [b'"10-20-f4240.5"', b'W/"10-20-f4240.5"', b"*", b'"x", "y"', b""]
    range_seeds = []
    for i, r in enumerate(ranges):
        range_seeds.append(range_input(200 + i * 2, 884_000_000, 784_111_777, 0, [r]))
    for i, d in enumerate(dates):
        range_seeds.append(range_input(101, 884_000_000, i * 86_400, 0, [b"bytes=0-0", d, tags[i % 5], tags[(i + 1) % 5], d, d]))
    for flags in (0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x41, 0x80, 0xFF):
        range_seeds.append(range_input(100, 5000, 5000, flags, [b"bytes=0-0", b"", b"", b"", b"", b""]))

    encodings = [s[len(b"Accept-Encoding: ") :] for s in lits if s.startswith(b"Accept-Encoding: ")]
    encodings += [s[len(b"Accept: ") :] for s in lits if s.startswith(b"Accept: ")]
    encodings += [s for s in lits if re.match(rb"^(gzip|br|\*|identity|x-gzip|deflate|text/|GZIP)", s)]

    keys = (b"root ", b"listen ", b"workers ", b"user ", b"group ", b"chroot", b"daemon", b"pidfile ",
            b"syslog", b"log-level ", b"access-log ", b"server-name ", b"max-connections ",
            b"header-timeout ", b"keepalive-timeout ", b"send-timeout ", b"max-requests ", b"grace ",
            b"index ", b"symlinks ", b"allow ", b"deny ", b"auth ", b"cache ", b"header ",
            b"redirect ", b"error-page ", b"spa-fallback ", b"listing", b"cgi-")
    config = [s for s in lits if s.startswith(keys) and len(s) < 300]
    config += [
        b"# a comment\n\nroot /www\nlisten 0.0.0.0:80\nlisten [::]:80\nworkers 2\n",
        b"auth /admin/ \"Device\" /etc/marmoset/htpasswd\nallow /admin/ 192.168.0.0/16\ndeny /admin/ all\n",
        b"cgi-prefix /cgi-bin/\ncgi-interpreter .lua /usr/bin/lua\ncgi-timeout 30\ncgi-max 4\ncgi-max-body 65536\n",
        b"cache *.css max-age=600\ncache @hashed max-age=31536000, immutable\nerror-page 404 /404.html\nspa-fallback /index.html\n",
    ]
    args = [
        [b"--root", b"/tmp", b"--listen", b"127.0.0.1:0", b"--listen=[::1]:0", b"--syslog", b"--workers", b"3"],
        [b"--syslog", b"off"],
        [b"--workers"],
        [b"--bogus", b"1"],
        [b"--check-config", b"--server-name", b"x"],
        [b"--help"],
        [b"--version"],
        [b"--listen", b"nowhere"],
        [b"--chroot", b"--daemon", b"--pidfile", b"/run/m.pid", b"--index", b"index.html index.htm"],
        [b"root", b"/www"],
    ]
    config += [b"\0".join(a) for a in args]

    cgi = [s for s in lits if re.match(rb"^(Status|Content-Type|Location|Content-Length|X-)[^:\n]*:", s)]
    cgi += [s.replace(b"\\n", b"\n").replace(b"\\r", b"\r") for s in (
        m.group(1) for s in lits for m in [re.search(rb"printf '([^']*)'", s)] if m)]

    chunked = [struct.pack("<H", i * 3) + b for i, b in enumerate(chunked_bodies)]
    chunked += [struct.pack("<H", n) + b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n" for n in (0, 1, 4, 7, 12, 20)]

    answers = [bytes([i % 4]) + s for i, s in enumerate(lits) if s.startswith(b"HTTP/1.")]

    # ubus: JSON-RPC bodies, and bus messages built as the wire format lays
    # them out (big-endian, 4-byte padding, blobmsg name headers).
    rpc = [s for s in lits if s.lstrip().startswith((b'{"jsonrpc"', b'[{"jsonrpc"', b'{"id"'))]
    rpc += [
        b'{"jsonrpc":"2.0","id":1,"method":"call","params":["00000000000000000000000000000000","session","login",{"username":"root","password":"x"}]}',
        b'[{"jsonrpc":"2.0","id":1,"method":"list"},{"jsonrpc":"2.0","id":"a","method":"list","params":["session","uci*"]},1,[]]',
        b'{"a":[1,-2,2147483648,-2147483649,1.5e3,-0.25,true,false,null,"\u00e9\ud83d\ude00\n\"",{}],"":{"x":[[[]]]}}',
        b'"\u0000x"', b"99999999999999999999", b"-0", b"1E-400", b" [ ] ", b"{\"a\":1}",
    ]

    def attr(aid, payload, extended=False):
        head = struct.pack(">I", (0x80000000 if extended else 0) | aid << 24 | (4 + len(payload)))
        return head + payload + b"\0" * (-len(payload) % 4)

    def field(btype, name, payload):
        hdr = struct.pack(">H", len(name)) + name + b"\0"
        return attr(btype, hdr + b"\0" * (-len(hdr) % 4) + payload, True)

    def message(mtype, seq, peer, attrs):
        return struct.pack(">BBHI", 0, mtype, seq, peer) + attr(0, attrs)

    table = (field(3, b"s", b"text\n\0") + field(5, b"i", struct.pack(">i", -2))
             + field(4, b"l", struct.pack(">q", 1 << 40)) + field(6, b"h", struct.pack(">h", -3))
             + field(7, b"b", b"\1") + field(8, b"d", struct.pack(">d", 1.5)) + field(0, b"n", b"")
             + field(1, b"a", field(5, b"", struct.pack(">i", 1)) + field(2, b"", b""))
             + field(2, b"t", field(3, b"k", b"v\0")))
    signature = field(2, b"get", field(5, b"config", struct.pack(">i", 3)) + field(5, b"flag", struct.pack(">i", 7)))
    u32 = lambda aid, v: attr(aid, struct.pack(">I", v))
    messages = [
        message(0, 0, 0x12345678, b""),
        message(1, 7, 0, u32(1, 4)),
        message(2, 7, 0xABCD, u32(3, 0xABCD) + attr(7, table)),
        message(2, 9, 0, attr(2, b"uci\0") + u32(3, 5) + u32(5, 6) + attr(6, signature)),
        message(5, 3, 44, u32(3, 99) + attr(4, b"tick\0") + attr(7, table) + attr(10, b"\1")),
        message(9, 1, 0, u32(3, 99) + u32(8, 5)),
        message(2, 1, 0, u32(3, 1) + attr(7, b"\x83\0\0\x40\0\0")),
    ]
    messages.append(b"".join(messages))

    counts = {
        "request_head": write("request_head", requests),
        "path": write("path", paths),
        "range_conditional": write("range_conditional", range_seeds),
        "accept_encoding": write("accept_encoding", encodings),
        "config": write("config", config),
        "cgi_output": write("cgi_output", cgi),
        "chunked": write("chunked", chunked),
        "proxy_answer": write("proxy_answer", answers),
        "ubus_json": write("ubus_json", rpc),
        "ubus_message": write("ubus_message", messages),
    }
    for target, n in counts.items():
        print(f"{target}: {n} seeds")


if __name__ == "__main__":
    main()
