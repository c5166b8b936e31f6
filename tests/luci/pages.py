#!/usr/bin/env python3
"""Loads the same LuCI pages through uhttpd (LuCI in its in-process ucode) and through marmoset (LuCI
in luci-scgi.uc over SCGI), step by step, and prints one line per step: "ok   - NAME" when the answers
match, else "FAIL - NAME" and both answers.

    pages.py REFERENCE_URL MARMOSET_URL PASSWORD [LOADS]

The steps: the login page, a login with a wrong password, a login with the right one (each server gets
its own session), then with that session's cookie the admin pages this LuCI has (Status -> Overview,
System -> System, System -> Administration, Network -> Interfaces, and the index), then
the logout, and a page after it. Matching means the same status, the same body and the same header
fields, with the session id and CSRF token of each server's own login (32 hex digits) masked, and
these fields left out: Date, Server, Connection, Keep-Alive, and the framing (Transfer-Encoding,
Content-Length), in which the servers may differ. Fields compare as a set: their order is not
compared. Both get the same Host.

With LOADS above 0, each admin page is then loaded LOADS times through each server, one request after
the other with curl (uhttpd, marmoset, uhttpd, ...), and a "time - " line gives each server's median
(a figure, not a check). Last line:
"N passed, M failed".
"""
import http.client
import json
import re
import statistics
import subprocess
import sys
import urllib.parse

SID = re.compile(r"[0-9a-f]{32}")
FRAMING = {"date", "server", "connection", "keep-alive", "transfer-encoding", "content-length"}
HOST = "openwrt.lan"
LUCI = "/cgi-bin/luci"
PAGES = [
    ("Status -> Overview", "/admin/status/overview"),
    ("System -> System", "/admin/system/system"),
    ("System -> Administration", "/admin/system/admin"),
    ("Network -> Interfaces", "/admin/network/network"),
]


def fetch(base, path, form=None, cookie=None):
    u = urllib.parse.urlparse(base)
    headers = {"Host": HOST}
    if cookie:
        headers["Cookie"] = cookie
    body = None
    if form is not None:
        body = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        c.request("POST" if form is not None else "GET", path, body=body, headers=headers)
        r = c.getresponse()
        text = r.read()
        fields = r.getheaders()
        status = r.status
    except (OSError, http.client.HTTPException) as e:
        return {"error": f"{type(e).__name__}: {e}"}, None
    finally:
        c.close()
    cookie = None
    for k, v in fields:
        if k.lower() == "set-cookie" and v.startswith("sysauth_http="):
            cookie = v.split(";", 1)[0]
    kept = sorted((k.lower(), SID.sub("<sid>", v)) for k, v in fields if k.lower() not in FRAMING)
    return {"status": status, "fields": kept, "body": SID.sub("<sid>", text.decode("utf-8", "replace"))}, cookie


def differences(a, b):
    """the parts of two answers that differ, each side's value cut short"""
    out = []
    for key in ("error", "status", "fields"):
        if a.get(key) != b.get(key):
            out.append(f"{key}: uhttpd {json.dumps(a.get(key))[:600]}\n       marmoset {json.dumps(b.get(key))[:600]}")
    ta, tb = a.get("body", ""), b.get("body", "")
    if ta != tb:
        i = next((n for n, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
        out.append(f"body ({len(ta)} and {len(tb)} characters) differs at {i}:\n       uhttpd   "
                   f"{json.dumps(ta[max(0, i - 80):i + 160])}\n       marmoset {json.dumps(tb[max(0, i - 80):i + 160])}")
    return out


def load_time(base, path, cookie):
    """milliseconds of one curl load of PATH; None unless it answered 200"""
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", "-H",
                        f"Host: {HOST}", "-b", cookie, base + path], capture_output=True, text=True)
    code, _, seconds = r.stdout.partition(" ")
    return float(seconds) * 1000 if code == "200" else None


def main():
    ref, mar, password = sys.argv[1], sys.argv[2], sys.argv[3]
    loads = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    passed = failed = 0

    def same(name, a, b):
        nonlocal passed, failed
        diff = differences(a, b)
        if not diff:
            passed += 1
            print(f"ok   - LuCI page: {name} ({a['status']})")
        else:
            failed += 1
            print(f"FAIL - LuCI page: {name}\n       " + "\n       ".join(diff))

    def both(name, path, form=None, cookies=(None, None)):
        a, ca = fetch(ref, LUCI + path, form, cookies[0])
        b, cb = fetch(mar, LUCI + path, form, cookies[1])
        same(name, a, b)
        return ca, cb

    both("login page", "/")
    both("login, wrong password", "/", {"luci_username": "root", "luci_password": password + "-"})
    cookies = both("login", "/", {"luci_username": "root", "luci_password": password})
    if None in cookies:
        print(f"FAIL - LuCI page: a session cookie from each login (uhttpd {cookies[0]}, marmoset {cookies[1]})")
        print(f"{passed} passed, {failed + 1} failed")
        return 1
    both("index, logged in", "/", cookies=cookies)
    for name, path in PAGES:
        both(name, path, cookies=cookies)

    for name, path in PAGES if loads > 0 else []:
        # One load through each in turn, so that the other users of the machine weigh on both alike.
        ta, tb = [], []
        for _ in range(loads):
            ta.append(load_time(ref, LUCI + path, cookies[0]))
            tb.append(load_time(mar, LUCI + path, cookies[1]))
        if None in ta or None in tb:
            print(f"time - {name}: a load did not answer 200")
            continue
        print(f"time - {name}: uhttpd {statistics.median(ta):.1f} ms, marmoset {statistics.median(tb):.1f} ms"
              f" (median of {loads} loads each)")

    both("logout", "/admin/logout", cookies=cookies)
    both("a page after the logout", PAGES[0][1], cookies=cookies)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
