#!/usr/bin/env python3
"""End-to-end test of the fit layout on a narrow window (issue 21), driven with xdotool under Xvfb.

At 900×600 the fit layout folds the controls sidebar and the inputs into strips. A person brings the sidebar back
(») and then opens X's editor from the inputs strip. The editor opened last wins the room: the sidebar folds
again, X's editor scrolls in a box of at most 30 % of the chain's width, and the current head's weights stay whole
on screen with readable cells (≥ 14 px) and the final column inside the window. Before, the weights were squeezed
into a scrolling box of 12-pixel cells and the output was drawn past the window's right edge.
"""
import time

from e2e_common import Session, fail, parse_args, wait_for

a = parse_args()
app = Session([a.exe, a.session, "--size", "900x600", "--no-autosave", "--no-restore"], a.work)
app.wait_window()


def rects():
    return app.layout()["rects"]


if "sidebar/expand" not in rects():
    fail("at 900x600 the sidebar should start folded into its strip, got %s" % sorted(rects())[:12])
app.click("sidebar/expand")
wait_for(lambda: "sidebar/expand" not in rects(), "the sidebar shown after »")
app.click("strip/X")
wait_for(lambda: "title/X" in rects(), "X's editor opened from the strip")
time.sleep(0.5)
r = rects()
x0, y0, x1, y1 = r["heatmap/weights/0"]
cells = 7  # the causal decoder preset: 7 tokens
if (x1 - x0) / cells < 14:
    fail("the weights' cells are %.1f px wide (the map %.0f px for %d cells); expected at least 14"
         % ((x1 - x0) / cells, x1 - x0, cells))
for name in ("heatmap/weights/0", "heatmap/headout/0", "heatmap/output"):
    if r[name][2] > 900:
        fail("%s ends at x=%.0f, past the 900-px window" % (name, r[name][2]))
print("900x600, sidebar shown, X opened: the weights have %.0f-px cells and the chain ends at x=%.0f"
      % ((x1 - x0) / cells, r["heatmap/output"][2]))
app.stop()
