#!/usr/bin/env python3
"""Write the benchmark docroot: index.html (exactly 1364 bytes) and linux.jpg
(a real baseline JPEG padded with COM segments to exactly 204800 bytes).

Deterministic: the picture is computed from a formula, no randomness.
Needs Pillow (Debian: python3-pil).  Usage: mkdocroot.py DIR
"""
import io
import os
import sys

HTML_SIZE = 1364
JPEG_SIZE = 204800


def make_html():
    head = (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<title>Device status</title>\n"
        "<style>body{font-family:sans-serif;margin:2em;color:#222}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em}</style>\n"
        "</head>\n<body>\n<h1>Device status</h1>\n"
        "<p>This page is the small-file test of the Marmoset benchmark.</p>\n"
        "<table>\n<tr><th>Item</th><th>Value</th></tr>\n"
        "<tr><td>Uplink</td><td>connected</td></tr>\n"
        "<tr><td>Firmware</td><td>1.0.0</td></tr>\n"
        "<tr><td>Uptime</td><td>12 days</td></tr>\n"
        "</table>\n<p><img src=\"linux.jpg\" alt=\"Tux\" width=\"320\"></p>\n<p>"
    )
    tail = "</p>\n</body>\n</html>\n"
    filler_words = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do "
                    "eiusmod tempor incididunt ut labore et dolore magna aliqua ")
    room = HTML_SIZE - len(head) - len(tail)
    if room < 0:
        raise SystemExit("html template too long")
    filler = (filler_words * (room // len(filler_words) + 1))[:room]
    if filler.endswith(" "):
        filler = filler[:-1] + "."
    page = (head + filler + tail).encode("ascii")
    assert len(page) == HTML_SIZE, len(page)
    return page


def make_jpeg():
    from PIL import Image  # Debian python3-pil

    w, h = 640, 480
    px = bytearray(w * h * 3)
    i = 0
    for y in range(h):
        for x in range(w):
            # smooth gradients plus a fine deterministic texture
            t = (x * 7919 + y * 104729 + (x * y) % 251) & 0xFF
            px[i] = (x * 255 // w + (t >> 4)) & 0xFF
            px[i + 1] = (y * 255 // h + (t >> 5)) & 0xFF
            px[i + 2] = ((x + y) * 255 // (w + h) ^ (t >> 3)) & 0xFF
            i += 3
    img = Image.frombytes("RGB", (w, h), bytes(px))
    for quality in (90, 80, 70, 60, 50, 40, 30):
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=quality, optimize=False, progressive=False)
        data = buf.getvalue()
        if len(data) + 8 <= JPEG_SIZE:
            break
    else:
        raise SystemExit("could not make a JPEG small enough")
    assert data[:2] == b"\xff\xd8"
    pad = JPEG_SIZE - len(data)
    segs = []
    # COM segment: FF FE, 2-byte length (includes itself), payload <= 65533
    while pad > 0:
        total = min(pad, 65535 + 2)
        if pad - total in (1, 2, 3):  # leave room for one more full segment header
            total -= 4
        payload = total - 4
        text = (b"marmoset benchmark padding " * (payload // 27 + 1))[:payload]
        segs.append(b"\xff\xfe" + (payload + 2).to_bytes(2, "big") + text)
        pad -= total
    out = data[:2] + b"".join(segs) + data[2:]
    assert len(out) == JPEG_SIZE, len(out)
    return out


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: mkdocroot.py DIR")
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "index.html"), "wb") as f:
        f.write(make_html())
    with open(os.path.join(root, "linux.jpg"), "wb") as f:
        f.write(make_jpeg())


if __name__ == "__main__":
    main()
