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
6. Start with the masks lesson open and click its "Save this view as PNG": a PNG of the panel's size appears;
   "Save as figure (PDF)" writes the lesson's vector figure beside it.

The app's --test-hooks folder gives the widget rectangles (layout.json) and the frames (frame.ppm); the
helpers are in e2e_common.py.
"""

import os
import time

import numpy as np

from e2e_common import Session, parse_args, fail, key, read_json, read_png_rgb, wait_for, xdo


def main():
    a = parse_args()
    state = os.path.join(a.work, "state")
    os.makedirs(state)
    autosave = os.path.join(state, "autosave.json")
    stderr_path = os.path.join(a.work, "stderr.txt")
    with open(stderr_path, "w") as err:
        app = Session([a.exe, a.session, "--size", "1280x800", "--state-dir", state, "--no-restore"], a.work, stderr=err)
    try:
        edit_session(app, autosave, stderr_path)
    finally:
        app.stop()

    # ---- 5. the autosave is offered back on the next start ---------------------------------------------------
    app = Session([a.exe, "--size", "1280x800", "--state-dir", state], a.work)
    try:
        app.wait_window(lambda l: l.get("restore_offer") and "restore/yes" in l["rects"], "the restore offer")
        if app.layout()["X00"] != 1:
            fail("before restoring, the default preset should be shown")
        app.click("restore/yes")
        wait_for(lambda: (l := app.layout()) and not l["restore_offer"] and l["X00"] == 5,
                 "the restored session with X[0][0] = 5")
        print("restore: the autosaved session came back")
    finally:
        app.stop()

    # ---- 6. a lesson panel saved as PNG with its button ---------------------------------------------------
    png = os.path.join(a.work, "attnscope_masks.png")  # the default name, in the current folder
    app = Session([a.exe, "--size", "1280x800", "--no-autosave", "--no-restore", "--lesson", "masks"], a.work, cwd=a.work)
    try:
        app.wait_window(lambda l: "lesson/save/masks" in l["rects"], "the lesson's save button")
        app.click("lesson/save/masks")
        wait_for(lambda: os.path.exists(png), png)
        h, w, _ = read_png_rgb(png).shape
        px0, py0, px1, py1 = app.layout()["rects"]["lesson/masks"]
        if abs(w - (px1 - px0)) > 1 or abs(h - (py1 - py0)) > 1:
            fail("the saved view is %dx%d, the panel %gx%g" % (w, h, px1 - px0, py1 - py0))
        print("lesson view: %s, %dx%d, the size of the panel" % (png, w, h))
        pdf = os.path.join(a.work, "attnscope_masks.pdf")  # "Save as figure": the same name as a PDF
        app.click("lesson/figure/masks")
        wait_for(lambda: os.path.exists(pdf), pdf)
        with open(pdf, "rb") as f:
            if f.read(5) != b"%PDF-":
                fail(pdf + " is not a PDF")
        print("lesson figure: " + pdf)
    finally:
        app.stop()
    print("PASS")


def edit_session(app, autosave, stderr_path):
    app.wait_window()
    rects = app.layout()["rects"]

    def park_mouse():
        app.move(1200, 790)  # over the status bar: no hover highlight or tooltip on the heatmaps
        rects.update(app.layout()["rects"])  # the newest rectangles for region() and cell()

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

    def generation():
        return app.layout()["generation"]

    # ---- 1. edit a cell -----------------------------------------------------------------------------
    app.rect("cell/X/0/0")  # opens X's editor first when the fit layout keeps the inputs in a strip
    park_mouse()
    before = app.capture()
    gen = generation()
    fills_before = app.layout()["heatmap_fills"]
    app.click("cell/X/0/0")
    wait_for(lambda: "editing" in app.layout()["rects"], "the cell's text field to open")
    xdo("type", "--delay", "50", "5")
    key("Return")
    wait_for(lambda: generation() > gen, "a recompute after the edit")
    park_mouse()
    after = app.capture()
    for name in ("heatmap/scores/0", "heatmap/weights/0", "heatmap/headout/0", "heatmap/Q"):
        d = np.abs(region(after, name) - region(before, name)).max(axis=2)
        changed = float((d > 30).mean())
        print("%s: %.1f%% of pixels changed" % (name, changed * 100))
        if changed < 0.05:
            fail(name + " did not change after editing X[0][0]")
    # The CPU backend's result is only in host memory: every changed heatmap is uploaded from there (at
    # least head 0's scores, weights and output), none is filled from a device (CUDA-OpenGL interop).
    fills = app.layout()["heatmap_fills"]
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
    gen = generation()
    app.click("cell/X/1/0")
    wait_for(lambda: "editing" in app.layout()["rects"], "the cell's text field to open")
    xdo("type", "--delay", "50", "abc")
    key("Return")
    wait_for(lambda: "X[1][0]: 'abc' is not a number" in open(stderr_path).read(), "the refusal on stderr")
    time.sleep(0.5)
    if generation() != gen:
        fail("a refused value recomputed")
    if "editing" not in app.layout()["rects"]:
        fail("the refused text should stay in its field")
    key("Escape")
    wait_for(lambda: "editing" not in app.layout()["rects"], "Escape to close the field")
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
    gen = generation()
    app.click("control/causal")
    wait_for(lambda: generation() > gen, "a recompute after the causal toggle")
    park_mouse()
    masked = app.capture()
    f1 = masked_fraction(masked)
    print("scores[0][3]: %.0f%% grey before, %.0f%% after the causal toggle" % (f0 * 100, f1 * 100))
    if f1 < 0.9:
        fail("scores[0][3] is not drawn masked after the causal toggle")
    f_diag = float(np.abs(cell(masked, "heatmap/scores/0", 3, 3, 4, 4) - grey).max(axis=2).mean())
    if f_diag < 20:
        fail("scores[3][3] (not masked by causal) is drawn grey")
    autosaved(lambda s: s.get("mask", {}).get("causal") is True, "causal = true")

    # ---- 3. undo --------------------------------------------------------------------------------------
    gen = generation()
    key("ctrl+z")
    wait_for(lambda: generation() > gen, "a recompute after Ctrl+Z")
    autosaved(lambda s: not s.get("mask", {}).get("causal", False) and s["X"][0][0] == 5, "causal undone, edit kept")
    print("undo: causal off, X[0][0] still 5")


if __name__ == "__main__":
    main()
