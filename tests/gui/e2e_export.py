#!/usr/bin/env python3
"""End-to-end test of the Export dialog, driven with xdotool (run under Xvfb).

1. Ctrl+E opens File → Export… (the real key, through GLFW).
2. "Export figure" writes <session>_weights.pdf next to the session file (the default path): a PDF.
3. Window screenshot tab → "Save window screenshot (PNG)" writes <session>_window.png: a PNG of the whole
   window (1280×800) taken without the dialog, i.e. the pixels where the dialog was equal those of a frame
   with the dialog closed.
4. SIGTERM: the window closes normally.

Helpers (layout.json rectangles, pointer moves held over frames) as in e2e_edit.py.
"""
import argparse
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib

import numpy as np


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def wait_for(pred, what, timeout=30.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    fail("timed out waiting for " + what)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_ppm(path):
    with open(path, "rb") as f:
        data = f.read()
    parts = data.split(maxsplit=4)
    w, h = int(parts[1]), int(parts[2])
    return np.frombuffer(parts[4][: w * h * 3], dtype=np.uint8).reshape(h, w, 3)


def read_png_rgb(path):
    """Decodes the 8-bit RGB/RGBA, non-interlaced PNGs attnscope writes (stb_image_write): zlib + filters."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + ": not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                fail("%s: expected 8-bit RGB or RGBA, got depth %d colour type %d" % (path, depth, color))
            ch = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * ch
    out = bytearray(h * stride)
    prev = bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)]
        cur = bytearray(line)
        if f == 1:
            for x in range(ch, stride):
                cur[x] = (cur[x] + cur[x - ch]) & 255
        elif f == 2:
            for x in range(stride):
                cur[x] = (cur[x] + prev[x]) & 255
        elif f == 3:
            for x in range(stride):
                cur[x] = (cur[x] + ((cur[x - ch] if x >= ch else 0) + prev[x]) // 2) & 255
        elif f == 4:
            for x in range(stride):
                a_ = cur[x - ch] if x >= ch else 0
                b_ = prev[x]
                c_ = prev[x - ch] if x >= ch else 0
                pa, pb, pc = abs(b_ - c_), abs(a_ - c_), abs(a_ + b_ - 2 * c_)
                cur[x] = (cur[x] + (a_ if pa <= pb and pa <= pc else (b_ if pb <= pc else c_))) & 255
        out[y * stride:(y + 1) * stride] = cur
        prev = cur
    return np.frombuffer(bytes(out), dtype=np.uint8).reshape(h, w, ch)[:, :, :3]


def xdo(*args):
    subprocess.run(["xdotool", *map(str, args)], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--session", required=True)
    a = ap.parse_args()

    shutil.rmtree(a.work, ignore_errors=True)
    hooks = os.path.join(a.work, "hooks")
    os.makedirs(hooks)
    session = os.path.join(a.work, "translation.json")  # not a preset: files go next to it
    shutil.copy(a.session, session)
    layout_path, frame_path = os.path.join(hooks, "layout.json"), os.path.join(hooks, "frame.ppm")
    proc = subprocess.Popen([a.exe, session, "--size", "1280x800", "--no-autosave", "--no-restore", "--test-hooks", hooks])
    try:
        run(a, hooks, layout_path, frame_path)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                fail("the window did not close on SIGTERM")
    if proc.returncode != 0:
        fail("attnscope exited with %s" % proc.returncode)
    print("PASS")


def run(a, hooks, layout_path, frame_path):
    wait_for(lambda: (l := read_json(layout_path)) and l.get("generation", 0) >= 1, "the first frame")
    wid = wait_for(lambda: subprocess.run(["xdotool", "search", "--name", "^attnscope$"], capture_output=True,
                                          text=True).stdout.split(), "the window")[0]
    time.sleep(0.5)
    xdo("windowfocus", "--sync", wid)

    def rect(name):
        return wait_for(lambda: (l := read_json(layout_path)) and l["rects"].get(name), "widget " + name)

    def move(x, y):
        def arrived():
            xdo("windowfocus", "--sync", wid)
            xdo("mousemove", "--window", wid, x, y)
            time.sleep(0.25)
            mx, my = read_json(layout_path).get("mouse", [-1, -1])
            return abs(mx - x) <= 1 and abs(my - y) <= 1
        wait_for(arrived, "the pointer at (%d, %d)" % (x, y))

    def click(name):
        x0, y0, x1, y1 = rect(name)
        move(int((x0 + x1) / 2), int((y0 + y1) / 2))
        xdo("mousedown", "1")
        time.sleep(0.15)  # ImGui 1.86 polls the button once per frame
        xdo("mouseup", "1")
        time.sleep(0.3)

    def capture():
        n = read_json(layout_path)["captures"]
        open(os.path.join(hooks, "capture.request"), "w").close()
        wait_for(lambda: (l := read_json(layout_path)) and l["captures"] > n, "a capture")
        return read_ppm(frame_path)

    # ---- 1. Ctrl+E ----------------------------------------------------------------------------------------------
    move(1200, 790)  # over the status bar: nothing hovered
    without_dialog = capture()
    xdo("keydown", "ctrl+e")
    time.sleep(0.15)  # held over a few frames: ImGui 1.86 polls key state once per frame
    xdo("keyup", "ctrl+e")
    rect("export/figure")
    print("Ctrl+E opened the Export dialog")

    # ---- 2. the figure ------------------------------------------------------------------------------------------
    pdf = os.path.join(a.work, "translation_weights.pdf")
    click("export/figure")
    wait_for(lambda: os.path.exists(pdf), pdf)
    with open(pdf, "rb") as f:
        head = f.read(5)
    if head != b"%PDF-":
        fail("%s: expected a PDF, starts with %r" % (pdf, head))
    print("Export figure wrote " + pdf)

    # ---- 3. the window screenshot -------------------------------------------------------------------------------
    png = os.path.join(a.work, "translation_window.png")
    click("export/tab/Window screenshot")
    dialog = read_json(layout_path)["rects"]["export/window"]
    click("export/screenshot")
    wait_for(lambda: os.path.exists(png), png)
    shot = read_png_rgb(png)
    if shot.shape != (800, 1280, 3):
        fail("%s: expected 1280×800 RGB, got %s" % (png, shot.shape))
    # Where the dialog is, the screenshot shows the chain under it, as in the frame before it opened (the
    # pointer and the status bar's compute time aside, which lie outside the dialog).
    x0, y0, x1, y1 = (int(v) for v in dialog)
    diff = np.abs(shot[y0:y1, x0:x1].astype(int) - without_dialog[y0:y1, x0:x1].astype(int)).max(axis=2)
    # Same tolerance as the screenshot tests (app::kPixelTolerance): anti-aliased edges move by a few levels.
    changed = float((diff > 24).mean())
    if changed > 0.001:
        fail("the screenshot differs from the window without the dialog in %.2f%% of the dialog's area" % (changed * 100))
    print("Save window screenshot wrote %s without the dialog (%.4f%% of its area differs)" % (png, changed * 100))


if __name__ == "__main__":
    main()
