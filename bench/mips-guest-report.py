#!/usr/bin/env python3
"""The report of bench/mips-guest.sh: the medians of its rows, every figure
also as a ratio to the best peer, written as the "MIPS guest" section of
bench/results.md (the section is replaced, the rest of the file kept) or, for
the smoke run, as a file of its own.

Rows (one a line): MODE ROUND SERVER TEST key=value ... as the guest's
driver printed them (bench/mips-guest-driver.sh).
"""
import argparse
import re
import statistics

HEADING = "## MIPS guest: QEMU Malta, 24Kc, one CPU"
MODE_NAMES = {"icount": "instruction count", "wall": "wall clock"}
# Marmoset's own builds and configurations: never a peer.
MARMOSET = ("marmoset", "marmoset-lean", "marmoset-tls")

# (label, test, key, the marmoset build, the peers' set, higher is better, format)
SUMMARY = [
    ("1.4 KB keep-alive (`ab -k -c 10`), requests/s", "small_ka", "rps", "marmoset", "http", True, "{:.1f}"),
    ("1.4 KB, a new connection each (`ab -c 10`), requests/s", "small_close", "rps", "marmoset", "http", True,
     "{:.1f}"),
    ("200 KB keep-alive (`ab -k -c 10`), requests/s", "big_ka", "rps", "marmoset", "http", True, "{:.1f}"),
    ("HTTPS 1.4 KB keep-alive (`ab -k -c 1`), requests/s", "tls_small_ka", "rps", "marmoset-tls", "https", True,
     "{:.1f}"),
    ("ECDSA P-256 handshakes/s (`openssl s_time -new`)", "handshake_ec", "rps", "marmoset-tls", "https", True,
     "{:.2f}"),
    ("RSA-2048 handshakes/s (`openssl s_time -new`)", "handshake_rsa", "rps", "marmoset-tls", "https", True,
     "{:.2f}"),
    ("server CPU per 1.4 KB keep-alive request, ms", "small_ka", "cpu_ms", "marmoset", "http", False, "{:.2f}"),
    ("server CPU per new connection (1.4 KB), ms", "small_close", "cpu_ms", "marmoset", "http", False, "{:.2f}"),
    ("server CPU per ECDSA handshake, ms", "handshake_ec", "cpu_ms", "marmoset-tls", "https", False, "{:.1f}"),
    ("server CPU per RSA handshake, ms", "handshake_rsa", "cpu_ms", "marmoset-tls", "https", False, "{:.1f}"),
    ("RSS idle, kB", "rss", "idle_kb", "marmoset", "http", False, "{:,.0f}"),
    ("RSS peak (HTTP tests), kB", "rss", "peak_kb", "marmoset", "http", False, "{:,.0f}"),
    ("RSS idle over HTTPS, kB", "rss_tls", "idle_kb", "marmoset-tls", "https", False, "{:,.0f}"),
    ("RSS peak (HTTPS tests), kB", "rss_tls", "peak_kb", "marmoset-tls", "https", False, "{:,.0f}"),
    ("bytes on disk: binary and every file it maps (HTTP)", "disk", "bytes", "marmoset", "http", False, "{:,.0f}"),
    ("bytes on disk: binary and every file it maps (HTTPS)", "disk_tls", "bytes", "marmoset-tls", "https", False,
     "{:,.0f}"),
]
LOAD_TESTS = ("small_ka", "small_close", "big_ka", "tls_small_ka", "handshake_ec", "handshake_rsa")
TEST_NAMES = {
    "small_ka": "1.4 KB keep-alive",
    "small_close": "1.4 KB new connection each",
    "big_ka": "200 KB keep-alive",
    "tls_small_ka": "HTTPS 1.4 KB keep-alive (one client)",
    "handshake_ec": "ECDSA P-256 handshakes",
    "handshake_rsa": "RSA-2048 handshakes",
}


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 4:
                continue
            kv = {}
            for p in parts[4:]:
                k, _, v = p.partition("=")
                kv[k] = v
            rows.append({"mode": parts[0], "round": int(parts[1]), "server": parts[2], "test": parts[3], "kv": kv})
    return rows


def fnum(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


class Figures:
    def __init__(self, rows):
        self.rows = rows

    def values(self, mode, server, test, key):
        return [x for x in (fnum(r["kv"].get(key)) for r in self.rows
                            if r["mode"] == mode and r["server"] == server and r["test"] == test
                            and r["round"] > 0) if x is not None]

    def median(self, mode, server, test, key):
        v = self.values(mode, server, test, key)
        return statistics.median(v) if v else None

    def failed(self, mode, server, test):
        """Failed requests over all rounds; "error" when a run gave no result."""
        total, error = 0, False
        for r in self.rows:
            if r["mode"] == mode and r["server"] == server and r["test"] == test and r["round"] > 0:
                f = r["kv"].get("failed", "0")
                if f.isdigit():
                    total += int(f)
                else:
                    error = True
        return "error" if error else total

    def start_errors(self, mode):
        return [f"{r['server']} round {r['round']}: {r['test']}" for r in self.rows
                if r["mode"] == mode and r["test"].startswith(("start", "counts")) and r["kv"].get("failed") == "error"]

    def servers(self, mode):
        seen = []
        for r in self.rows:
            if r["mode"] == mode and r["round"] > 0 and r["server"] not in seen:
                seen.append(r["server"])
        return seen


def fmt(v, f):
    return "–" if v is None else f.format(v)


def cell(fig, mode, server, test, key, f):
    v = fig.median(mode, server, test, key)
    s = fmt(v, f)
    failed = fig.failed(mode, server, test) if test in LOAD_TESTS else 0
    if failed == "error":
        s += " (a run gave no result)"
    elif failed:
        s += f" (**{failed} failed**)"
    return s


def best_peer(fig, mode, peers, test, key, higher):
    best = None
    for p in peers:
        v = fig.median(mode, p, test, key)
        if v is None:
            continue
        if best is None or (v > best[1] if higher else v < best[1]):
            best = (p, v)
    return best


def summary(fig, modes, http_peers, tls_peers):
    out = []
    head = "| test | " + " | ".join(
        f"Marmoset ({MODE_NAMES[m]}) | best peer ({MODE_NAMES[m]}) | ratio ({MODE_NAMES[m]})" for m in modes) + " |"
    out.append(head)
    out.append("|---|" + "---:|---|---:|" * len(modes))
    for label, test, key, me, peerset, higher, f in SUMMARY:
        peers = http_peers if peerset == "http" else tls_peers
        cells = [label + ("" if higher else " (lower is better)")]
        for m in modes:
            mine = fig.median(m, me, test, key)
            b = best_peer(fig, m, peers, test, key, higher)
            cells.append(cell(fig, m, me, test, key, f))
            if b:
                cells.append(f"{b[0]} {cell(fig, m, b[0], test, key, f)}")
                cells.append(f"{mine / b[1]:.2f}" if mine is not None and b[1] else "–")
            else:
                cells += ["–", "–"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def detail(fig, mode):
    servers = fig.servers(mode)
    out = ["| test | " + " | ".join(servers) + " |", "|---|" + "---:|" * len(servers)]

    def row(label, test, key, f):
        cells = []
        for s in servers:
            v = fig.values(mode, s, test, key)
            if not v:
                cells.append("")
                continue
            c = cell(fig, mode, s, test, key, f)
            if len(v) > 1:
                c += f" [{fmt(min(v), f)}–{fmt(max(v), f)}]"
            cells.append(c)
        out.append(f"| {label} | " + " | ".join(cells) + " |")

    for t in LOAD_TESTS:
        unit = "handshakes/s" if t.startswith("handshake") else "requests/s"
        row(f"{TEST_NAMES[t]}, {unit}", t, "rps", "{:.2f}" if t.startswith("handshake") else "{:.1f}")
        row(f"{TEST_NAMES[t]}, server CPU ms per {'handshake' if t.startswith('handshake') else 'request'}",
            t, "cpu_ms", "{:.2f}")
        if not t.startswith("handshake"):
            row(f"{TEST_NAMES[t]}, TCP segments per request (both ends)", t, "segs", "{:.1f}")
            row(f"{TEST_NAMES[t]}, TCP retransmissions per request (both ends)", t, "retrans", "{:.2f}")
    names = []
    for s in servers:
        got = [r["kv"].get("name") for r in fig.rows
               if r["mode"] == mode and r["server"] == s and r["test"] == "suite" and r["round"] > 0]
        names.append(f"`{got[0]}`" if got and got[0] else "")
    if any(names):
        out.append("| TLS suite chosen from OpenSSL's offer | " + " | ".join(names) + " |")
    row("RSS idle, kB", "rss", "idle_kb", "{:,.0f}")
    row("RSS peak (HTTP tests), kB", "rss", "peak_kb", "{:,.0f}")
    row("RSS idle over HTTPS, kB", "rss_tls", "idle_kb", "{:,.0f}")
    row("RSS peak (HTTPS tests), kB", "rss_tls", "peak_kb", "{:,.0f}")
    row("head of the 200 KB answer, bytes", "head", "bytes", "{:,.0f}")
    row("bytes on disk, HTTP (files mapped)", "disk", "bytes", "{:,.0f}")
    row("bytes on disk, HTTPS (files mapped)", "disk_tls", "bytes", "{:,.0f}")
    return out


def counts(fig, mode, n):
    rows = [r for r in fig.rows if r["mode"] == mode and r["round"] == 0]
    if not rows:
        return []
    out = []
    run = [r for r in rows if r["test"] == "switches_run"]
    if run:
        kv = run[0]["kv"]
        out.append(f"Context switches per request of each thread over `ab -k -c 1 -n {n}` "
                   f"({kv.get('complete')} complete, {kv.get('failed')} failed), from "
                   "/proc/PID/task/TID/status before and after:")
        out.append("")
        out.append("| process | thread | name | voluntary | involuntary |")
        out.append("|---:|---:|---|---:|---:|")
        for r in rows:
            if r["test"] == "switches":
                kv = r["kv"]
                out.append(f"| {kv.get('pid')} | {kv.get('tid')} | {kv.get('comm')} | {kv.get('voluntary')} | "
                           f"{kv.get('nonvoluntary')} |")
        out.append("")
    calls = [r["kv"] for r in rows if r["test"] == "syscalls"]
    if calls and calls[0].get("call") != "none":
        total = [c for c in calls if c.get("call") == "total"]
        by_call = sorted((c for c in calls if c.get("call") != "total"), key=lambda c: -float(c.get("per_req", 0)))
        req = total[0].get("requests") if total else "?"
        out.append(f"System calls per request under `strace -f -c` (every thread, attached during a second "
                   f"`ab -k -c 1`, {req} requests): **{total[0].get('per_req') if total else '?'}** in all; "
                   + ", ".join(f"{c['call']} {c['per_req']}" for c in by_call if float(c.get("per_req", 0)) >= 0.005)
                   + ".")
        out.append("")
    elif calls:
        out.append("No strace in the image: no system call counts.")
        out.append("")
    return out


def versions(path):
    v = {}
    qemu_cmd = {}
    with open(path) as f:
        for line in f:
            mode, _, rest = line.rstrip("\n").partition(" ")
            name, _, val = rest.partition(": ")
            if name.startswith("qemu-system"):
                qemu_cmd[mode] = rest
            elif name and val:
                v.setdefault(name, val)
    return v, qemu_cmd


def lighttpd_head(fig, mode):
    """Where lighttpd's 200 KB body starts, measured: the benchmark means to show it in its faster case."""
    n = fig.median(mode, "lighttpd", "head", "bytes")
    if n is None:
        return ""
    case = "a multiple of 4, its faster case" if n % 4 == 0 else \
        "**not a multiple of 4: its slower case, which flatters Marmoset's 200 KB ratio**"
    return f": {n:.0f} bytes for the 200 KB file, {case}"


def lean_note(fig, mode):
    """What the default head lines add, from the measured heads of both configurations."""
    full = fig.median(mode, "marmoset", "head", "bytes")
    lean = fig.median(mode, "marmoset-lean", "head", "bytes")
    if full is None or lean is None:
        return "."
    return (f", {full - lean:.0f} bytes of the 200 KB head; marmoset-lean, the same binary configured without "
            "them, shows what those lines cost in each test. The figures of record are the default "
            "configuration's.")


def main():
    ap = argparse.ArgumentParser()
    for a in ("rows", "versions", "results", "date", "command", "rounds", "seconds", "count-n", "qemu", "host",
              "elapsed", "marmoset", "marmoset-tls", "uhttpd"):
        ap.add_argument("--" + a)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    fig = Figures(parse(args.rows))
    modes = [m for m in ("icount", "wall") if any(r["mode"] == m for r in fig.rows)]
    ver, qemu_cmd = versions(args.versions)
    all_servers = []
    for m in modes:
        all_servers += [s for s in fig.servers(m) if s not in all_servers]
    http_peers = [s for s in all_servers if s not in MARMOSET and fig.values(modes[0], s, "small_ka", "rps")]
    tls_peers = [s for s in all_servers if s not in MARMOSET and fig.values(modes[0], s, "handshake_ec", "rps")]

    out = [HEADING, ""]
    out.append(f"- made by: `{args.command}` (as root, {int(args.elapsed) // 60} min {int(args.elapsed) % 60} s "
               "of guest runs after the builds)" + (" — a smoke run, not figures to quote" if args.smoke else ""))
    out.append(f"- date: {args.date}; host: {args.host}; {args.qemu}")
    for m in modes:
        if m in qemu_cmd:
            out.append(f"- {MODE_NAMES[m]}: `{qemu_cmd[m].split(': ', 1)[-1]}`")
    out.append(f"- guest: Debian kernel {ver.get('kernel', '?')}, CPU `{ver.get('cpu', '?')}`")
    names = [("marmoset", args.marmoset + ", mipsel-unknown-linux-musl, `board/build-std.sh`"),
             ("marmoset-tls", args.marmoset_tls + ", the same with `--features tls`")]
    out.append("- servers: " + "; ".join(
        [f"marmoset: `{ver.get('marmoset', '?')}` ({d})" if n == "marmoset" else
         f"marmoset-tls: `{ver.get('marmoset-tls', '?')}` ({d})" for n, d in names]
        + (["marmoset-lean: the marmoset build with `cache * off` and the three security header lines "
            "removed (`header * -Name`), so that it sends the head lines the peers send"]
           if "marmoset-lean" in all_servers else [])
        + [f"BusyBox httpd: `{ver.get('busybox', '?')}` (busybox-static)",
           f"lighttpd: `{ver.get('lighttpd', '?')}` with lighttpd-mod-openssl"]
        + ([f"uhttpd: {args.uhttpd}"] if args.uhttpd else ["uhttpd: not built (no `UHTTPD_DIR`)"])))
    out.append(f"- load: `{ver.get('ab', '?')}`, `{ver.get('openssl', '?')}` (`openssl s_time`)"
               + (f", `{ver['strace']}`" if "strace" in ver else "")
               + "; Debian bookworm's mipsel packages, in the guest, over 127.0.0.1")
    out.append(f"- method: {args.rounds} round(s), the servers one at a time and rotated each round; every test "
               f"runs {args.seconds} s of guest time (`ab -t`; `s_time -time` three times as long); figures are medians over rounds, "
               "[min–max] beside them, failed requests summed over rounds (ab's failed and non-2xx; for s_time a "
               "connection without the whole page); server CPU from /proc/PID/stat (utime+stime of its processes "
               "and their reaped children); RSS: VmRSS summed over its processes after one request (idle) and "
               "sampled each second during the tests plus VmHWM at the end (peak: BusyBox httpd's per-connection processes count only when a sample caught one); bytes on disk: every file in "
               "/proc/PID/maps (binary, libraries, modules). Marmoset runs `--workers 1`, lighttpd its single "
               "process, BusyBox httpd a process per connection; ab speaks HTTP/1.0, so BusyBox httpd and "
               "uhttpd close after each answer even with `-k`. Debian's mipsel userland uses hardware float, "
               "which the 24Kc lacks: the kernel emulates it, for the load tools and the peers alike. "
               "TCP retransmissions: RetransSegs of /proc/net/snmp; over loopback they are tail loss probes, "
               "sent when the ACK of an answer's end comes late. The head of the 200 KB answer is where its "
               "body starts in the stream: ab reads it 8 KiB at a time into a word-aligned buffer, and the "
               "kernel's copy on this CPU is slower when source and destination are not equally aligned, so "
               "a head whose length is not a multiple of 4 makes ab slower on that test (and its ACKs later), "
               "whichever server sent it; Marmoset pads the head of a large file's answer with spaces so that "
               "its body starts as aligned in the stream as in the file. The files' modification time is "
               "fixed (2023-01-01 00:00 UTC) and lighttpd's ETag leaves out the inode, so its head is as long "
               "in every run" + lighttpd_head(fig, modes[0]) + ". ab finds the "
               "end of a head with `strstr`, then `Keep-Alive` and `Content-Length:` in it with a search of "
               "its own, byte by byte and case-insensitive: a longer head costs the load generator, which "
               "shares the CPU, more. Marmoset's defaults add head lines the peers do not send "
               "(Cache-Control and three security headers)" + lean_note(fig, modes[0]))
    out.append("")
    out.append("### Marmoset / best peer")
    out.append("")
    out.append("The instruction-count run is the figure of record: its guest clock counts instructions, every "
               "instruction costs the same, whatever else the host runs. In the wall-clock run a guest "
               "instruction costs whatever TCG takes for it on the host, which differs by instruction (a "
               "multiply, a trap into the kernel's FPU emulator from the hard-float Debian binaries), and the "
               "host's load moves it: its ratios need not be a router's. Ratios are "
               "Marmoset's median over the best peer's: above 1 is better for rates, below 1 for CPU, memory "
               "and bytes.")
    out.append("")
    out += summary(fig, modes, http_peers, tls_peers)
    out.append("")
    for m in modes:
        out.append(f"### Every server, {MODE_NAMES[m]}")
        out.append("")
        errs = fig.start_errors(m)
        if errs:
            out.append("Did not start or gave no result: " + "; ".join(errs) + ".")
            out.append("")
        out += detail(fig, m)
        out.append("")
    for m in modes:
        c = counts(fig, m, args.count_n)
        if c:
            out.append(f"### Marmoset per keep-alive request, {MODE_NAMES[m]}")
            out.append("")
            out += c
    text = "\n".join(out).rstrip("\n") + "\n"

    if args.smoke:
        with open(args.results, "w") as f:
            f.write(text)
    else:
        try:
            with open(args.results) as f:
                old = f.read()
        except FileNotFoundError:
            old = ""
        # The section runs from its heading to the next "## " heading (or the end).
        m = re.search(r"^## MIPS guest.*?(?=^## |\Z)", old, flags=re.S | re.M)
        if m:
            new = old[:m.start()] + text + ("\n" if old[m.end():] else "") + old[m.end():]
        else:
            new = old.rstrip("\n") + ("\n\n" if old else "") + text
        with open(args.results, "w") as f:
            f.write(new)
    print(text)


if __name__ == "__main__":
    main()
