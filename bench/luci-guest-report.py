#!/usr/bin/env python3
"""bench/luci-guest.sh's rows -> a Markdown summary: medians over the rounds, Marmoset/uhttpd.

usage: luci-guest-report.py ROWS PEAK MODE LOGIN-MARMOSET-S LOGIN-UHTTPD-S
ROWS: "ROUND SCHEME SERVER JSON" lines (a page's, or the visit's with visit_s and cpu_ticks);
PEAK: the guest's "@@S SERVICE.INSTANCE pid=.. ticks=.. hwm_kb=.. rss_kb=.." lines at the end.
"""
import json
import re
import statistics
import sys

rows_file, peak_file, mode, login_m, login_u = sys.argv[1:6]
pages = {}   # (scheme, server, page) -> [ms]
parts = {}   # (scheme, server, page) -> [(ms to the first byte, ms first to last byte)]
visits = {}  # (scheme, server) -> [(visit_s, ticks)]
order = []
failed = []
for line in open(rows_file):
    rnd, scheme, server, js = line.split(' ', 3)
    d = json.loads(js)
    if 'visit_s' in d:
        visits.setdefault((scheme, server), []).append((d['visit_s'], d['cpu_ticks']))
        if d['driver_rc'] != 0:
            failed.append(f'round {rnd} {scheme} {server}')
        continue
    key = (scheme, server, d['page'])
    if d['page'] not in order:
        order.append(d['page'])
    if d['ms_last_ubus'] is not None:
        pages.setdefault(key, []).append(d['ms_last_ubus'])
        parts.setdefault(key, []).append((d['ubus_ms_to_first_byte'], d['ubus_ms_first_to_last_byte']))
    if d['failed']:
        failed.append(f"round {rnd} {scheme} {server} {d['page']}: {'; '.join(d['failed'][:3])}")


def med(xs):
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return f'{a / b:.2f}' if a is not None and b else 'n/a'


out = []
out.append(f'Mode: {mode}. Login page answering after QEMU start: Marmoset {login_m} s, uhttpd {login_u} s.')
out.append('')
out.append('Time to the last ubus answer of each page (ms, host wall clock, median over rounds [min-max]):')
out.append('')
out.append('| scheme | page | Marmoset | uhttpd | Marmoset/uhttpd |')
out.append('|---|---|---|---|---|')
for scheme in ('http', 'https-ec', 'https-rsa'):
    for p in order:
        m = pages.get((scheme, 'marmoset', p), [])
        u = pages.get((scheme, 'uhttpd', p), [])
        if not m and not u:
            continue
        fm = f'{med(m):.0f} [{min(m)}-{max(m)}]' if m else 'n/a'
        fu = f'{med(u):.0f} [{min(u)}-{max(u)}]' if u else 'n/a'
        out.append(f'| {scheme} | {p} | {fm} | {fu} | {ratio(med(m), med(u))} |')
out.append('')
out.append("The same pages' ubus answers, summed: from the request to the first byte + from the first byte "
           'to the last (ms, medians over rounds; a server that sends the head before the body waits out '
           "the browser's delayed ACK in the second part):")
out.append('')
out.append('| scheme | page | Marmoset | uhttpd |')
out.append('|---|---|---|---|')
for scheme in ('http', 'https-ec', 'https-rsa'):
    for p in order:
        cells = []
        for server in ('marmoset', 'uhttpd'):
            v = parts.get((scheme, server, p), [])
            cells.append(f'{med([a for a, _ in v]):.0f} + {med([b for _, b in v]):.0f}' if v else 'n/a')
        if cells != ['n/a', 'n/a']:
            out.append(f'| {scheme} | {p} | {cells[0]} | {cells[1]} |')
out.append('')
out.append('Whole visit (login and every page): host wall time and the server\'s CPU in the guest '
           '(its processes and their children, reaped or waiting, 10 ms ticks), median over rounds:')
out.append('')
out.append('| scheme | Marmoset s | uhttpd s | ratio | Marmoset CPU s | uhttpd CPU s | ratio |')
out.append('|---|---|---|---|---|---|---|')
for scheme in ('http', 'https-ec', 'https-rsa'):
    m = visits.get((scheme, 'marmoset'), [])
    u = visits.get((scheme, 'uhttpd'), [])
    mw, uw = med([v[0] for v in m]), med([v[0] for v in u])
    mc, uc = med([v[1] / 100 for v in m]), med([v[1] / 100 for v in u])
    out.append(f'| {scheme} | {mw:.1f} | {uw:.1f} | {ratio(mw, uw)} | {mc:.2f} | {uc:.2f} | {ratio(mc, uc)} |')
out.append('')
out.append('20 x luci.js (99,444 bytes) on one connection (curl): server CPU s, median over rounds:')
out.append('')
out.append('| over | Marmoset CPU s | uhttpd CPU s | ratio |')
out.append('|---|---|---|---|')
for c in ('plain', 'TLS_AES_128_GCM_SHA256', 'TLS_CHACHA20_POLY1305_SHA256'):
    m = visits.get((f'bulk-{c}', 'marmoset'), [])
    u = visits.get((f'bulk-{c}', 'uhttpd'), [])
    if not m and not u:
        continue
    mc, uc = med([v[1] / 100 for v in m]), med([v[1] / 100 for v in u])
    fm = f'{mc:.2f}' if mc is not None else 'not offered'
    out.append(f'| {c} | {fm} | {uc:.2f} | {ratio(mc, uc)} |')
out.append('')
out.append('Memory of each server process at the end (kB): VmHWM (peak RSS), VmRSS, and its private pages '
           '(smaps_rollup Private_Clean + Private_Dirty: what it alone costs, shared libraries aside):')
out.append('')
for line in open(peak_file):
    m = re.match(r'@@S (\S+) pid=\d+ ticks=(\d+) hwm_kb=(\d*) rss_kb=(\d*) priv_kb=(\d*)'
                 r'(?: kids=(\d+) kids_priv_kb=(\d+))?', line)
    if m:
        kids = f'; {m.group(6)} children waiting, private {m.group(7)}' if int(m.group(6) or 0) else ''
        out.append(f'- {m.group(1)}: peak {m.group(3)}, now {m.group(4)}, private {m.group(5)}{kids}; '
                   f'CPU {int(m.group(2)) / 100:.2f} s in all')
if failed:
    out.append('')
    out.append('Failures:')
    out.extend(f'- {f}' for f in failed)
print('\n'.join(out))
