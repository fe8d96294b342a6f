#!/usr/bin/env python3
"""End-to-end test of a large map opening whole (issue 36), driven with xdotool under Xvfb, on a generated
1024-token session (make_large_session.py, one head, no saved zoom):

1. The weights open whole: the 1024 x 1024 cells lie inside their box ("mapbox/weights/0").
2. Zoom in: six wheel notches over a point of the map (2x a notch) reach cells large enough for their values,
   and the cell under the pointer stays under it (the hovered cell is the one the pointer was on).
3. Zoom out: two notches back make the cells a quarter of the size.
4. Fit: a double-click goes back to the whole map; zoomed in again, the "fit" button does too.
5. A thin map (Q, 1024 x 8) opens as a strip at least 48 px wide, its cells wider than tall; three notches over it
   make its rows 8x taller and leave its columns as wide, the pointer over the same column; a double-click fits it.

Helpers (layout.json rectangles, pointer moves held over frames) in e2e_common.py.
"""
import os
import subprocess
import sys
import time

from e2e_common import double_click_here, drive, parse_args, fail, wait_for, wait_frames, xdo

HERE = os.path.dirname(os.path.abspath(__file__))
N = 1024


def cell_of(rects):
    x0, y0, x1, y1 = rects["heatmap/weights/0"]
    return (x1 - x0) / N


def whole(rects):
    c, b = rects["heatmap/weights/0"], rects["mapbox/weights/0"]
    return c[0] >= b[0] - 1 and c[1] >= b[1] - 1 and c[2] <= b[2] + 1 and c[3] <= b[3] + 1


def wheel(button, notches):
    for _ in range(notches):
        xdo("click", button)
        wait_frames()  # one notch in a frame of its own: each is a zoom step of its own
    time.sleep(0.4)


def main():
    a = parse_args(session=False)
    os.makedirs(a.work, exist_ok=True)
    session = os.path.join(a.work, "large1024.json")
    subprocess.run([sys.executable, os.path.join(HERE, "make_large_session.py"), session, str(N)], check=True)
    drive(a.exe, [session], a.work, run)


def run(app):
    app.wait_window(lambda l: "mapbox/weights/0" in l.get("rects", {}), "the weights' box")
    rects = app.layout()["rects"]
    if not whole(rects):
        fail("1024 x 1024 weights should open whole in their box: cells %s, box %s"
             % (rects["heatmap/weights/0"], rects["mapbox/weights/0"]))
    fit = cell_of(rects)
    print("open: whole map, %.2f px a cell" % fit)

    # ---- 2. zoom in about the pointer -----------------------------------------------------------------------
    x0, y0, x1, y1 = rects["mapbox/weights/0"]
    px, py = int(x0 + 0.6 * (x1 - x0)), int(y0 + 0.4 * (y1 - y0))
    cx0, cy0 = rects["heatmap/weights/0"][:2]
    row, col = int((py - cy0) / fit), int((px - cx0) / fit)
    app.move(px, py)
    wheel(4, 6)
    rects = wait_for(lambda: (l := app.layout()) and cell_of(l["rects"]) >= 20 and l["rects"], "cells of 20 px or more")
    print("zoom in: %.1f px a cell after 6 notches" % cell_of(rects))
    if "fit/weights/0" not in rects:
        fail("a zoomed map should offer its fit button")
    hovered = [k for k in rects if k.startswith("hover/weights/0/")]
    if not hovered:
        fail("no hovered cell after zooming under the pointer")
    hr, hc = map(int, hovered[0].split("/")[3:5])
    if abs(hr - row) > 3 or abs(hc - col) > 3:
        fail("zoom about the pointer: it was over cell (%d, %d), now over (%d, %d)" % (row, col, hr, hc))
    print("zoom in: the pointer stays over cell (%d, %d) (was (%d, %d))" % (hr, hc, row, col))

    # ---- 3. zoom out ---------------------------------------------------------------------------------------
    big = cell_of(rects)
    wheel(5, 2)
    rects = wait_for(lambda: (l := app.layout()) and abs(cell_of(l["rects"]) - big / 4) < 0.05 * big and l["rects"],
                     "cells a quarter the size after two notches out")
    print("zoom out: %.1f px a cell" % cell_of(rects))

    # ---- 4. fit: double-click, then the button ---------------------------------------------------------------
    app.move(px, py)
    double_click_here()
    wait_for(lambda: (l := app.layout()) and whole(l["rects"]), "the whole map after a double-click")
    if "focus/weights/0" in app.layout()["rects"]:
        fail("the double-click on a zoomed map should fit it, not focus it")
    print("double-click: whole map again")
    app.move(px, py)
    wheel(4, 3)
    wait_for(lambda: (l := app.layout()) and "fit/weights/0" in l["rects"], "zoomed in again")
    app.click("fit/weights/0")
    wait_for(lambda: (l := app.layout()) and whole(l["rects"]) and "fit/weights/0" not in l["rects"],
             "the whole map after the fit button")
    print("fit button: whole map again")

    # ---- 5. a thin map: Q (1024 x 8) ---------------------------------------------------------------------------
    rects = app.layout()["rects"]
    qx0, qy0, qx1, qy1 = rects["heatmap/Q"]
    qw, qh = (qx1 - qx0) / 8, (qy1 - qy0) / N
    if qx1 - qx0 < 48 or qw <= 4 * qh:
        fail("Q should open as a strip at least 48 px wide with cells wider than tall: %s" % (rects["heatmap/Q"],))
    print("Q: a strip %.0f px wide, cells %.1f x %.2f px" % (qx1 - qx0, qw, qh))
    px, py = int(qx0 + 0.7 * (qx1 - qx0)), int(qy0 + 0.5 * (qy1 - qy0))
    col = int((px - qx0) / qw)
    app.move(px, py)
    wheel(4, 3)

    def q_zoomed(l):
        x0, y0, x1, y1 = l["rects"]["heatmap/Q"]
        return abs((y1 - y0) / N - 8 * qh) < 0.05 * qh and abs((x1 - x0) / 8 - qw) < 0.5 and l["rects"]

    rects = wait_for(lambda: (l := app.layout()) and q_zoomed(l), "Q's rows 8x taller, its columns as wide")
    hovered = [k for k in rects if k.startswith("hover/proj/Q/")]
    if not hovered or int(hovered[0].split("/")[4]) != col:
        fail("zooming Q under the pointer: it was over column %d, now over %s" % (col, hovered))
    print("Q zoomed in: rows %.2f px, the pointer still over column %d" % ((rects["heatmap/Q"][3] - rects["heatmap/Q"][1]) / N, col))
    double_click_here()
    wait_for(lambda: (l := app.layout()) and abs(l["rects"]["heatmap/Q"][3] - l["rects"]["heatmap/Q"][1] - (qy1 - qy0)) < 1,
             "Q whole again after a double-click")
    print("Q double-click: whole strip again")


if __name__ == "__main__":
    main()
