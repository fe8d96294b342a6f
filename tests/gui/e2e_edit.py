#!/usr/bin/env python3
"""End-to-end test of the attnscope window, driven as a person would with xdotool (run under Xvfb).

1. Click the cell X[0][0], type 5, press Enter: the scores, weights and output heatmaps change on screen and
   the autosaved session holds X[0][0] = 5.
   Typing "abc" into X[1][0] is refused in place: stderr names the cell and the reason, nothing recomputes.
2. Click the "causal" checkbox: the upper-right cell of the scores is drawn masked (grey hatching), and the
   autosave says causal.
3. Ctrl+Z: the causal mask is off again.
4. SIGTERM: the window closes normally (exit 0).
5. Start again with the same state folder and no session: the autosaved session is offered back; clicking
   "Restore it" brings back X[0][0] = 5.

The app's --test-hooks folder gives the widget rectangles (layout.json) and the frames (frame.ppm).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np


HOOKS = None


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    if HOOKS:  # keep the last picture for the post-mortem
        try:
            open(os.path.join(HOOKS, "capture.request"), "w").close()
            time.sleep(1.0)
            shutil.copy(os.path.join(HOOKS, "frame.ppm"), os.path.join(HOOKS, "failure.ppm"))
            print("last frame: " + os.path.join(HOOKS, "failure.ppm"), file=sys.stderr)
        except OSError:
            pass
    sys.exit(1)


def wait_for(pred, what, timeout=20.0):
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
    parts = data.split(maxsplit=4)  # P6, width, height, maxval, pixels
    assert parts[0] == b"P6", "not a binary PPM"
    w, h = int(parts[1]), int(parts[2])
    pixels = np.frombuffer(parts[4][: w * h * 3], dtype=np.uint8)
    return pixels.reshape(h, w, 3)


def xdo(*args):
    subprocess.run(["xdotool", *map(str, args)], check=True)


def key(combo):
    """Presses a key long enough for ImGui 1.86 to see it: it polls key state once per frame (no event queue
    before 1.87), so xdotool's instant press+release can fall between two frames."""
    xdo("keydown", combo)
    time.sleep(0.15)
    xdo("keyup", combo)
    time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--session", required=True)
    a = ap.parse_args()

    shutil.rmtree(a.work, ignore_errors=True)
    hooks, state = os.path.join(a.work, "hooks"), os.path.join(a.work, "state")
    os.makedirs(hooks)
    global HOOKS
    HOOKS = hooks
    os.makedirs(state)
    layout_path, frame_path = os.path.join(hooks, "layout.json"), os.path.join(hooks, "frame.ppm")
    autosave = os.path.join(state, "autosave.json")
    stderr_path = os.path.join(a.work, "stderr.txt")
    with open(stderr_path, "w") as err:
        proc = subprocess.Popen([a.exe, a.session, "--size", "1280x800", "--state-dir", state, "--no-restore",
                                 "--test-hooks", hooks], stderr=err)
    run_session(proc, a, hooks, layout_path, frame_path, autosave, stderr_path)
    stop(proc)

    # ---- 5. the autosave is offered back on the next start ---------------------------------------------------
    os.remove(layout_path)
    proc = subprocess.Popen([a.exe, "--size", "1280x800", "--state-dir", state, "--test-hooks", hooks])
    try:
        wait_for(lambda: (l := read_json(layout_path)) and l.get("restore_offer") and "restore/yes" in l["rects"],
                 "the restore offer")
        time.sleep(0.5)
        if read_json(layout_path)["X00"] != 1:
            fail("before restoring, the default preset should be shown")
        wid = subprocess.run(["xdotool", "search", "--name", "^attnscope$"], capture_output=True, text=True).stdout.split()[0]
        x0, y0, x1, y1 = read_json(layout_path)["rects"]["restore/yes"]
        x, y = int((x0 + x1) / 2), int((y0 + y1) / 2)

        def pointer_arrived():
            xdo("windowfocus", "--sync", wid)
            xdo("mousemove", "--window", wid, x, y)
            time.sleep(0.25)
            mx, my = read_json(layout_path).get("mouse", [-1, -1])
            return abs(mx - x) <= 1 and abs(my - y) <= 1
        wait_for(pointer_arrived, "the pointer on 'Restore it'")
        xdo("mousedown", "1")
        time.sleep(0.15)
        xdo("mouseup", "1")
        wait_for(lambda: (l := read_json(layout_path)) and not l["restore_offer"] and l["X00"] == 5,
                 "the restored session with X[0][0] = 5")
        print("restore: the autosaved session came back")
    finally:
        stop(proc)
    print("PASS")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("the window did not close on SIGTERM")
    if proc.returncode != 0:
        fail("attnscope exited with %s" % proc.returncode)


def run_session(proc, a, hooks, layout_path, frame_path, autosave, stderr_path):
    try:
        layout = wait_for(lambda: (l := read_json(layout_path)) and l.get("generation", 0) >= 1 and l, "the first frame")
        wid = wait_for(lambda: subprocess.run(["xdotool", "search", "--name", "^attnscope$"], capture_output=True,
                                              text=True).stdout.split(), "the window")[0]
        # The first frame lays out before the menu bar has claimed its height: let the layout settle, then
        # always use the newest rectangles.
        time.sleep(0.5)
        rects = read_json(layout_path)["rects"]
        # No window manager under Xvfb: give the window the input focus ourselves (ImGui 1.86's GLFW backend
        # reads the pointer only while the window has the focus).
        xdo("windowfocus", "--sync", wid)

        def centre(name):
            rects.update(read_json(layout_path)["rects"])
            if name not in rects:
                fail("no widget '%s' in layout.json (have: %s)" % (name, ", ".join(sorted(rects)[:20])))
            x0, y0, x1, y1 = rects[name]
            return int((x0 + x1) / 2), int((y0 + y1) / 2)

        def click(name):
            x, y = centre(name)
            # Without a window manager, the first pointer motion can reach the window before it has the input
            # focus, and ImGui 1.86 then ignores it: move until the app reports the pointer where we put it.
            def pointer_arrived():
                xdo("windowfocus", "--sync", wid)
                xdo("mousemove", "--window", wid, x, y)
                time.sleep(0.25)
                mx, my = read_json(layout_path).get("mouse", [-1, -1])
                return abs(mx - x) <= 1 and abs(my - y) <= 1
            wait_for(pointer_arrived, "the pointer at %s (%d, %d)" % (name, x, y))
            # Held for a few frames, like a finger: ImGui 1.86 polls button state once per frame.
            xdo("mousedown", "1")
            time.sleep(0.15)
            xdo("mouseup", "1")
            time.sleep(0.3)

        def park_mouse():
            # Over the status bar: no hover highlight or tooltip on the heatmaps.
            def parked():
                xdo("mousemove", "--window", wid, 1200, 790)
                time.sleep(0.25)
                return read_json(layout_path).get("mouse", [0, 0])[1] == 790
            wait_for(parked, "the pointer on the status bar")

        def capture():
            n = read_json(layout_path)["captures"]
            open(os.path.join(hooks, "capture.request"), "w").close()
            wait_for(lambda: (l := read_json(layout_path)) and l["captures"] > n, "a capture")
            return read_ppm(frame_path)

        def region(img, name):
            x0, y0, x1, y1 = (int(round(v)) for v in rects[name])
            return img[y0:y1, x0:x1].astype(int)

        def cell(img, name, r, c, rows, cols):
            """Inner half of one cell of a heatmap (away from outlines and printed values' edges)."""
            x0, y0, x1, y1 = rects[name]
            cw, ch = (x1 - x0) / cols, (y1 - y0) / rows
            xa, ya = int(x0 + cw * (c + 0.25)), int(y0 + ch * (r + 0.25))
            return img[ya:int(ya + ch * 0.5), xa:int(xa + cw * 0.5)].astype(int)

        def autosaved(pred, what):
            return wait_for(lambda: (s := read_json(autosave)) and pred(s) and s, "autosave with " + what)

        # ---- 1. edit a cell -----------------------------------------------------------------------------
        park_mouse()
        before = capture()
        gen = read_json(layout_path)["generation"]
        fills_before = read_json(layout_path)["heatmap_fills"]
        click("cell/X/0/0")
        wait_for(lambda: "editing" in read_json(layout_path)["rects"], "the cell's text field to open")
        xdo("type", "--delay", "50", "5")
        key("Return")
        wait_for(lambda: read_json(layout_path)["generation"] > gen, "a recompute after the edit")
        park_mouse()
        after = capture()
        for name in ("heatmap/scores/0", "heatmap/weights/0", "heatmap/headout/0", "heatmap/Q"):
            d = np.abs(region(after, name) - region(before, name)).max(axis=2)
            changed = float((d > 30).mean())
            print("%s: %.1f%% of pixels changed" % (name, changed * 100))
            if changed < 0.05:
                fail(name + " did not change after editing X[0][0]")
        # The CPU backend's result is only in host memory: every changed heatmap is uploaded from there (at
        # least head 0's scores, weights and output), none is filled from a device (CUDA-OpenGL interop).
        fills = read_json(layout_path)["heatmap_fills"]
        print("heatmap texture fills before/after the edit:", fills_before, fills)
        if fills["host"] - fills_before["host"] < 3:
            fail("expected at least 3 heatmap uploads from host memory after the edit, got %d"
                 % (fills["host"] - fills_before["host"]))
        if fills["device"] != 0 or fills["device_fallbacks"] != 0:
            fail("a CPU result was treated as device-resident: %s" % fills)
        d = np.abs(region(after, "heatmap/K") - region(before, "heatmap/K")).max(axis=2)
        print("heatmap/K: %.1f%% of pixels changed (X row 0 feeds K row 0 too)" % (float((d > 30).mean()) * 100))
        s = autosaved(lambda s: s["X"][0][0] == 5, "X[0][0] = 5")
        print("autosave: X[0] =", s["X"][0])

        # ---- 1b. a bad value is refused in place ----------------------------------------------------------
        gen = read_json(layout_path)["generation"]
        click("cell/X/1/0")
        wait_for(lambda: "editing" in read_json(layout_path)["rects"], "the cell's text field to open")
        xdo("type", "--delay", "50", "abc")
        key("Return")
        wait_for(lambda: "X[1][0]: 'abc' is not a number" in open(stderr_path).read(), "the refusal on stderr")
        time.sleep(0.5)
        if read_json(layout_path)["generation"] != gen:
            fail("a refused value recomputed")
        if "editing" not in read_json(layout_path)["rects"]:
            fail("the refused text should stay in its field")
        key("Escape")
        wait_for(lambda: "editing" not in read_json(layout_path)["rects"], "Escape to close the field")
        if read_json(autosave)["X"][1][0] != 1:
            fail("the refused value reached the session")
        print("bad value: refused in place, session unchanged")

        # ---- 2. causal mask with the mouse --------------------------------------------------------------
        grey = np.array([150, 150, 150])  # attn::kMaskedColor (hatching draws it at 100% and 75%)

        def masked_fraction(img):
            px = cell(img, "heatmap/scores/0", 0, 3, 4, 4).reshape(-1, 3)
            is_grey = (np.abs(px - px.mean(axis=1, keepdims=True)).max(axis=1) <= 3) & (px[:, 0] >= 100) & (px[:, 0] <= 160)
            return float(is_grey.mean())

        f0 = masked_fraction(after)
        if f0 > 0.2:
            fail("scores[0][3] looks masked before the causal toggle (%.0f%% grey)" % (f0 * 100))
        gen = read_json(layout_path)["generation"]
        click("control/causal")
        wait_for(lambda: read_json(layout_path)["generation"] > gen, "a recompute after the causal toggle")
        park_mouse()
        masked = capture()
        f1 = masked_fraction(masked)
        print("scores[0][3]: %.0f%% grey before, %.0f%% after the causal toggle" % (f0 * 100, f1 * 100))
        if f1 < 0.9:
            fail("scores[0][3] is not drawn masked after the causal toggle")
        f_diag = float(np.abs(cell(masked, "heatmap/scores/0", 3, 3, 4, 4) - grey).max(axis=2).mean())
        if f_diag < 20:
            fail("scores[3][3] (not masked by causal) is drawn grey")
        autosaved(lambda s: s.get("mask", {}).get("causal") is True, "causal = true")

        # ---- 3. undo --------------------------------------------------------------------------------------
        gen = read_json(layout_path)["generation"]
        key("ctrl+z")
        wait_for(lambda: read_json(layout_path)["generation"] > gen, "a recompute after Ctrl+Z")
        autosaved(lambda s: not s.get("mask", {}).get("causal", False) and s["X"][0][0] == 5, "causal undone, edit kept")
        print("undo: causal off, X[0][0] still 5")
    except BaseException:
        stop(proc)
        raise


if __name__ == "__main__":
    main()
