#!/usr/bin/env python3
"""Draws assets/images/desk_cup_notebook.png, the sample image of the image-patch lesson (issue 6).

A 64×64 synthetic scene after seed 004's intuition: a red cup of coffee and a notebook on a desk, under a
wall. 64 is divisible by the patch sizes 2, 4, 8, 16 (4×4 patches give 16×16 = 256 tokens of 48 values,
the seed's Swin example). Pure Python (zlib + struct), deterministic: `python3 scripts/make_sample_image.py`.
"""
import os
import struct
import zlib

W = H = 64
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "assets", "images", "desk_cup_notebook.png")


def pixel(x, y):
    # Wall: a soft vertical gradient; desk: warm wood with grain stripes.
    if y < 34:
        t = y / 34
        c = (int(200 - 40 * t), int(215 - 35 * t), int(235 - 25 * t))
    else:
        grain = 12 if (y * 3 + x // 9) % 7 == 0 else 0
        c = (150 - grain, 100 - grain, 60 - grain // 2)
    # Notebook: white page with blue ruled lines and a red margin, lying on the desk.
    if 34 <= x < 58 and 30 <= y < 54:
        c = (245, 245, 240)
        if (y - 30) % 4 == 3:
            c = (120, 150, 220)
        if x == 38:
            c = (220, 90, 90)
    # Cup: a red body (disc clipped to a rectangle), a darker rim of coffee, and a handle.
    if 8 <= x < 25 and 28 <= y < 50:
        c = (200, 30, 35)
        if y < 31:
            c = (90, 50, 30)  # coffee seen over the rim
    if 25 <= x < 29 and 33 <= y < 44 and not (25 <= x < 27 and 35 <= y < 42):
        c = (170, 25, 30)
    # Saucer under the cup.
    if 5 <= x < 28 and 50 <= y < 53:
        c = (235, 235, 235)
    return c


def main():
    raw = bytearray()
    for y in range(H):
        raw.append(0)  # filter type 0 (None) for each scanline
        for x in range(W):
            raw.extend(pixel(x, y))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n"
    png += chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0))  # 8-bit RGB, no interlace
    png += chunk(b"IDAT", zlib.compress(bytes(raw), 9))
    png += chunk(b"IEND", b"")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "wb") as f:
        f.write(png)
    print("wrote", os.path.relpath(OUT, ROOT), len(png), "bytes")


if __name__ == "__main__":
    main()
