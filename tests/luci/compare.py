#!/usr/bin/env python3
"""Sends the same JSON-RPC exchanges to uhttpd's /ubus and to marmoset's, both on one ubusd and rpcd,
and prints one line per exchange: "ok   - NAME" when the answers match, else "FAIL - NAME" and both.

    compare.py REFERENCE_URL MARMOSET_URL PASSWORD

Matching means the same HTTP status, Content-Type and JSON body once the values that change from call
to call are masked: session ids, expiry times, clocks. Each exchange goes to both servers back to back.
The exchanges: rpcd's login, the calls LuCI's Status page makes of rpcd and LuCI's own rpcd plugins,
`list` in its forms, every JSON-RPC error (bad JSON, invalid request, unknown method or object, access
denied, `ubus_rpc_session` in the arguments), ids of every JSON type, batches, a body over 64 KiB,
and the REST forms (/ubus/call, /ubus/list, /ubus/subscribe). Last line: "N passed, M failed".
"""
import http.client
import json
import re
import socket
import sys
import urllib.parse

ANON = "0" * 32
SID = re.compile(r"[0-9a-f]{32}")
VOLATILE = {"ubus_rpc_session", "expires", "localtime", "uptime", "atime", "mtime", "ctime", "timeout"}


def mask(v, key=None):
    if key in VOLATILE and not isinstance(v, (dict, list)):
        return "<volatile>"
    if isinstance(v, dict):
        return {k: mask(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [mask(x, key) for x in v]
    if isinstance(v, str) and v != ANON:
        return SID.sub("<sid>", v)
    return v


def post(base, path, data, headers):
    u = urllib.parse.urlparse(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=15)
    try:
        c.request("POST" if data is not None else "GET", path, body=data, headers=headers)
        r = c.getresponse()
        text = r.read()
        ctype = r.getheader("Content-Type")
        status = r.status
    except (OSError, http.client.HTTPException) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        c.close()
    try:
        body = json.loads(text)
    except ValueError:
        body = text.decode("utf-8", "replace")
    return {"status": status, "content-type": ctype, "body": mask(body)}


def stream_start(base, path, headers):
    """status line, Content-Type and the first event (or error) of an event stream, chunk framing removed"""
    u = urllib.parse.urlparse(base)
    s = socket.create_connection((u.hostname, u.port), timeout=1.5)
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {u.hostname}\r\n{extra}\r\n".encode())
    data = b""
    try:
        while len(data) < 4096:
            b = s.recv(4096)
            if not b:
                break
            data += b
    except OSError:
        pass
    s.close()
    head, _, rest = data.decode("utf-8", "replace").partition("\r\n\r\n")
    lines = head.split("\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    if fields.get("transfer-encoding") == "chunked":
        rest = re.sub(r"(?m)^[0-9A-Fa-f]+\r\n|\r\n", "", rest)
    return {"status": lines[0][9:12], "content-type": fields.get("content-type"), "body": SID.sub("<sid>", rest)}


def rpc(id_, method, params=None):
    m = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        m["params"] = params
    return m


def call(sid, obj, meth, args=None, id_=1):
    return rpc(id_, "call", [sid, obj, meth, {} if args is None else args])


def main():
    ref, mar, password = sys.argv[1], sys.argv[2], sys.argv[3]
    passed = failed = 0

    def same(name, a, b):
        nonlocal passed, failed
        if a == b and "error" not in a:
            passed += 1
            print(f"ok   - {name}")
        else:
            failed += 1
            print(f"FAIL - {name}\n       uhttpd:   {json.dumps(a)[:700]}\n       marmoset: {json.dumps(b)[:700]}")

    def both(name, body=None, raw=None, path="/ubus", headers=None):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        data = raw if raw is not None else json.dumps(body).encode()
        same(name, post(ref, path, data, h), post(mar, path, data, h))

    def get(name, path):
        same(name, post(ref, path, None, {}), post(mar, path, None, {}))

    # a session from rpcd, through uhttpd's endpoint
    u = urllib.parse.urlparse(ref)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=15)
    try:
        c.request("POST", "/ubus", headers={"Content-Type": "application/json"},
                  body=json.dumps(call(ANON, "session", "login", {"username": "root", "password": password})))
        answer = c.getresponse().read()
        sid = json.loads(answer)["result"][1]["ubus_rpc_session"]
    except (OSError, http.client.HTTPException, ValueError, KeyError, IndexError, TypeError) as e:
        print(f"FAIL - session.login through uhttpd: {e}")
        print("0 passed, 1 failed")
        return 1
    finally:
        c.close()

    both("session.login", call(ANON, "session", "login", {"username": "root", "password": password}))
    both("session.login, wrong password", call(ANON, "session", "login", {"username": "root", "password": "-"}))
    for obj, meth, args in [
        ("session", "access", {"scope": "ubus", "object": "uci", "function": "get"}),
        ("session", "access", {"scope": "uci", "object": "luci", "function": "read"}),
        ("uci", "get", {"config": "luci"}),
        ("uci", "get", {"config": "luci", "section": "main"}),
        ("uci", "get", {"config": "no-such-config"}),
        ("uci", "changes", {}),
        ("luci", "getVersion", {}),
        ("luci", "getFeatures", {}),
        ("luci", "getBuiltinEthernetPorts", {}),
        ("luci-rpc", "getBoardJSON", {}),
        ("luci-rpc", "getDHCPLeases", {}),
        ("file", "read", {"path": "/etc/board.json"}),
        ("file", "read", {"path": "/etc/shadow"}),
        ("file", "list", {"path": "/www/luci-static/resources/view/status/include"}),
    ]:
        both(f"call {obj}.{meth} {json.dumps(args)}", call(sid, obj, meth, args))
    both("call uci.get anonymous (access denied)", call(ANON, "uci", "get", {"config": "luci"}))
    both("call with an unknown session (access denied)", call("0123456789abcdef0123456789abcdef", "uci", "get",
                                                              {"config": "luci"}))
    both("call of an unknown object", call(sid, "no.such.object", "x"))
    both("call of an unknown method", call(sid, "session", "no-such-method"))
    both("call with ubus_rpc_session in the args", call(sid, "session", "access",
                                                        {"ubus_rpc_session": sid, "scope": "ubus",
                                                         "object": "uci", "function": "get"}))
    both("list", rpc(1, "list"))
    both("list [session, uci]", rpc(2, "list", ["session", "uci"]))
    both("list [an unknown object]", rpc(3, "list", ["no.such.object"]))
    both("list [a pattern]", rpc(4, "list", ["sess*"]))
    both("bad JSON", raw=b'{"jsonrpc":"2.0","id":1,"method":')
    both("empty body", raw=b"")
    both("a JSON number", raw=b"42")
    both("no jsonrpc member", {"id": 1, "method": "list"})
    both("jsonrpc 1.0", {"jsonrpc": "1.0", "id": 1, "method": "list"})
    both("method not a string", {"jsonrpc": "2.0", "id": 1, "method": 5})
    both("no method", {"jsonrpc": "2.0", "id": 1})
    both("unknown method", rpc(1, "frobnicate", []))
    both("params not an array", {"jsonrpc": "2.0", "id": 1, "method": "call", "params": {"a": 1}})
    both("call with 3 params", rpc(1, "call", [sid, "session", "access"]))
    both("call with a sid not a string", rpc(1, "call", [1, "session", "access", {}]))
    both("call with args not an object", rpc(1, "call", [sid, "session", "access", [1]]))
    for id_ in ("abc", None, {"x": 1}, [1], 1.5, True):
        both(f"id {json.dumps(id_)}", call(sid, "luci", "getVersion", None, id_))
    no_id = call(sid, "luci", "getVersion")
    del no_id["id"]
    both("no id", no_id)
    both("batch of two", [call(sid, "luci", "getVersion", None, 1),
                          call(sid, "session", "access", {"scope": "uci", "object": "luci", "function": "read"}, 2)])
    both("batch: valid, not an object, unknown method, denied, no id",
         [call(sid, "luci", "getVersion", None, 1), 42, rpc(3, "nope"),
          call(ANON, "uci", "get", {"config": "luci"}, 4), {"jsonrpc": "2.0", "method": "list"}])
    both("empty batch", [])
    both("body over 64 KiB", raw=json.dumps(call(sid, "luci", "getVersion", {"pad": "x" * 70000})).encode())
    both("POST /ubus/ (LuCI's ubuspath)", call(sid, "luci", "getVersion"), path="/ubus/")
    both("text/plain body", raw=json.dumps(call(sid, "luci", "getVersion")).encode(),
         headers={"Content-Type": "text/plain"})
    both("POST /ubus/call/luci with a bearer", {"jsonrpc": "2.0", "id": 1, "method": "getVersion", "params": {}},
         path="/ubus/call/luci", headers={"Authorization": f"Bearer {sid}"})
    both("POST /ubus/call/uci without a bearer", {"jsonrpc": "2.0", "id": 1, "method": "get",
                                                   "params": {"config": "luci"}}, path="/ubus/call/uci")
    both("POST /ubus/call of an unknown object", {"jsonrpc": "2.0", "id": 1, "method": "x", "params": {}},
         path="/ubus/call/no.such.object", headers={"Authorization": f"Bearer {sid}"})
    get("GET /ubus/list", "/ubus/list")
    get("GET /ubus/list/session", "/ubus/list/session")
    get("GET /ubus/list of an unknown object", "/ubus/list/no.such.object")
    for who, h in (("with a bearer", {"Authorization": f"Bearer {sid}"}), ("anonymous", {})):
        same(f"GET /ubus/subscribe/session {who}", stream_start(ref, "/ubus/subscribe/session", h),
             stream_start(mar, "/ubus/subscribe/session", h))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
