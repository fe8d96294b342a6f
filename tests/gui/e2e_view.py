#!/usr/bin/env python3
"""End-to-end test of the chain's views (issue 11), driven with xdotool under Xvfb, on the causal 2-head preset.

1. Heads grid: the fit layout shows head 1's maps; clicking head 2's thumbnail makes head 2 current (its
   weights and output are drawn, head 1's are not).
2. Focus mode: double-clicking the current weights map gives it the whole window (its cells grow several
   times and the other maps are gone); hovering a cell there still names it (a tooltip); Esc goes back.
3. Inputs strip: the fit layout keeps the inputs in a strip of buttons; clicking X opens its editor, clicking
   again closes it (the button is highlighted while open: its style push and pop must pair up even in the frame
   the click toggles it, or ImGui aborts).

Helpers (layout.json rectangles, pointer moves held over frames) in e2e_common.py.
"""
from e2e_common import drive, parse_args, fail, key, wait_for


def area(r):
    return (r[2] - r[0]) * (r[3] - r[1])


def main():
    a = parse_args()
    drive(a.exe, [a.session], a.work, run)


def run(app):
    app.wait_window(lambda l: "headsgrid/1" in l.get("rects", {}), "the heads grid")
    rects = app.layout()["rects"]
    if "heatmap/weights/0" not in rects or "heatmap/weights/1" in rects:
        fail("the fit layout should show head 1 alone, got %s" % sorted(k for k in rects if k.startswith("heatmap/weights")))

    # ---- 1. heads grid: click head 2 ------------------------------------------------------------------------
    app.click("headsgrid/1")
    wait_for(lambda: (l := app.layout()) and "heatmap/weights/1" in l["rects"] and "heatmap/weights/0" not in l["rects"],
             "head 2's weights as the current head")
    rects = app.layout()["rects"]
    for m in ("heatmap/headout/1", "heatmap/scores/1"):
        if m not in rects:
            fail(m + " is not drawn after choosing head 2")
    print("heads grid: head 2 is current")

    # ---- 2. focus: double-click the weights ---------------------------------------------------------------
    before = rects["heatmap/weights/1"]
    app.double_click("heatmap/weights/1")
    focused = wait_for(lambda: (l := app.layout()) and l["rects"].get("focus/weights/1"), "focus on weights/1")
    rects = app.layout()["rects"]
    big = rects["heatmap/weights/1"]
    print("focus: weights/1 from %dx%d to %dx%d px" % (before[2] - before[0], before[3] - before[1],
                                                      big[2] - big[0], big[3] - big[1]))
    if area(big) < 1.8 * area(before):
        fail("the focused map did not grow (from %s to %s)" % (before, big))
    others = [k for k in rects if k.startswith("heatmap/") and k != "heatmap/weights/1"]
    if others:
        fail("focus mode still draws other maps: %s" % others)
    # Hover names the exact cell: the pointer over cell (6, 0) (query 'mat', key '<s>'); the app records the
    # hovered cell as hover/<map>/<row>/<col>.
    x0, y0, x1, y1 = big
    cw, ch = (x1 - x0) / 7, (y1 - y0) / 7
    app.move(int(x0 + cw * 0.5), int(y0 + ch * 6.5))
    wait_for(lambda: (l := app.layout()) and "hover/weights/1/6/0" in l["rects"], "hover on query 6, key 0")
    print("focus: hover names query 6, key 0")

    key("Escape")
    wait_for(lambda: (l := app.layout()) and "focus/weights/1" not in l["rects"] and "heatmap/Q" in l["rects"],
             "Esc back to the chain")
    back = app.layout()["rects"]["heatmap/weights/1"]
    if abs(area(back) - area(before)) > 0.05 * area(before):
        fail("after Esc the weights map is %s, before focus %s" % (back, before))
    print("Esc: back to the chain")

    # ---- 3. the inputs strip: open and close X's editor ---------------------------------------------------
    if "strip/X" not in app.layout()["rects"]:
        fail("the fit layout at 1280x800 should keep the inputs in a strip, got %s"
             % sorted(k for k in app.layout()["rects"] if k.startswith(("strip/", "title/"))))
    app.click("strip/X")
    wait_for(lambda: (l := app.layout()) and "title/X" in l["rects"], "X's editor opened from the strip")
    app.click("strip/X")
    wait_for(lambda: (l := app.layout()) and "title/X" not in l["rects"], "X's editor closed from the strip")
    if app.proc.poll() is not None:
        fail("the window exited with %s after the strip clicks" % app.proc.returncode)
    print("strip: X's editor opens and closes")


if __name__ == "__main__":
    main()
