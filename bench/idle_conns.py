#!/usr/bin/env python3
"""Open N keep-alive connections to 127.0.0.1:PORT, send one GET on each,
read each full response, then hold them all open for HOLD seconds.

Prints on stdout:
  READY ok=<n> failed=<n>          once every connection has had its response
  DONE still_open=<n>              after the hold (connections the server kept)
The caller samples the server's memory between READY and DONE.
Each connection gets 5 s; opening stops after DEADLINE seconds (default 60),
the connections not tried by then count as failed.
With --tls the connections speak TLS (the certificate is not checked).
Usage: idle_conns.py [--tls] PORT N HOLD_SECONDS [PATH [DEADLINE]]
"""
import resource
import socket
import ssl
import sys
import time


def read_response(sock):
    """Read one HTTP/1.1 response with a Content-Length body; True if complete."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return False
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    if len(status) < 2 or not status[1].startswith(b"2"):
        return False
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length is None:
        return False
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return False
        body += chunk
    return len(body) == length


def main():
    tls = "--tls" in sys.argv
    argv = [a for a in sys.argv if a != "--tls"]
    port, n, hold = int(argv[1]), int(argv[2]), float(argv[3])
    path = argv[4] if len(argv) > 4 else "/index.html"
    ctx = None
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    # One descriptor per connection, beyond the usual 1024.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
    req = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
           "Connection: keep-alive\r\nUser-Agent: marmoset-bench-idle\r\n\r\n").encode()
    deadline = time.monotonic() + (float(argv[5]) if len(argv) > 5 else 60)
    socks, failed = [], 0
    for _ in range(n):
        if time.monotonic() > deadline:
            failed += 1
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            if ctx:
                s = ctx.wrap_socket(s)
            s.sendall(req)
            if read_response(s):
                socks.append(s)
                continue
        except OSError:
            pass
        failed += 1
        s.close()
    print(f"READY ok={len(socks)} failed={failed}", flush=True)
    time.sleep(hold)
    still = 0
    for s in socks:
        s.setblocking(False)
        try:
            still += 0 if s.recv(1) == b"" else 1  # data would be unexpected; count as open
        except (BlockingIOError, ssl.SSLWantReadError):
            still += 1
        except OSError:
            pass
    print(f"DONE still_open={still}", flush=True)
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
