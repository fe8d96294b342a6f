#!/usr/bin/env python3
"""End-to-end test of the Export dialog, driven with xdotool (run under Xvfb).

1. Ctrl+E opens File → Export… (the real key, through GLFW).
2. "Export figure" writes <session>_weights.pdf next to the session file (the default path): a PDF.
3. Window screenshot tab → "Save window screenshot (PNG)" writes <session>_window.png: a PNG of the whole
   window (1280×800) taken without the dialog, i.e. the pixels where the dialog was equal those of a frame
   with the dialog closed.
4. SIGTERM: the window closes normally.

Helpers (layout.json rectangles, pointer moves held over frames) in e2e_common.py.
"""
import os
import shutil

import numpy as np

from e2e_common import drive, parse_args, fail, key, read_png_rgb, wait_for


def main():
    a = parse_args()
    session = os.path.join(a.work, "translation.json")  # not a preset: files go next to it
    shutil.copy(a.session, session)
    drive(a.exe, [session], a.work, lambda app: run(a, app))


def run(a, app):
    app.wait_window()

    # ---- 1. Ctrl+E ----------------------------------------------------------------------------------------------
    app.move(1200, 790)  # over the status bar: nothing hovered
    without_dialog = app.capture()
    key("ctrl+e")
    app.rect("export/figure")
    print("Ctrl+E opened the Export dialog")

    # ---- 2. the figure ------------------------------------------------------------------------------------------
    pdf = os.path.join(a.work, "translation_weights.pdf")
    app.click("export/figure")
    wait_for(lambda: os.path.exists(pdf), pdf)
    with open(pdf, "rb") as f:
        head = f.read(5)
    if head != b"%PDF-":
        fail("%s: expected a PDF, starts with %r" % (pdf, head))
    print("Export figure wrote " + pdf)

    # ---- 3. the window screenshot -------------------------------------------------------------------------------
    png = os.path.join(a.work, "translation_window.png")
    app.click("export/tab/Window screenshot")
    dialog = app.layout()["rects"]["export/window"]
    app.click("export/screenshot")
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
