#!/usr/bin/env python3
"""End-to-end test of the matrix selection and of file drops (issue 11), driven with xdotool under Xvfb.

1. Clicking W^Q's title selects it: it is outlined (hook rect outline/W^Q, and the accent-blue frame is on
   screen); Ctrl+C copies it.
2. A session dropped on the window opens (through openSession, as File → Open) and clears the selection:
   no outline any more.
3. Clicking W^K's title selects W^K; Ctrl+V pastes into W^K (which now holds W^Q's values), W^Q is unchanged.
4. Escape restores a cell being typed: a word + Enter is refused with red text (hook rect cell_error) that wraps
   at the matrix's width;
   Escape closes the field, the red text goes and the cell keeps its value; a digit typed then Escape
   leaves the value too.
5. Drops of arrays: a .npy of W^V's shape dropped onto W^V's editor replaces W^V (one undo step: Ctrl+Z
   brings it back); one of the wrong shape is refused with a message naming expected and actual; an array
   dropped beside the editors and a file of an unknown type get a message saying what to do.

xdotool cannot drag files, so drops go through the test hook the app documents for it (state/file_drop.h):
the test writes hooks/drop.request {"paths": [...], "x": X, "y": Y}, and the frame loop hands it to the same
handler GLFW's drop callback calls, as a drop at (X, Y). Values are read back from the autosaved session.
"""

import json
import os

import numpy as np

from e2e_common import Session, parse_args, fail, key, read_json, wait_for, xdo


def drop(app, paths, x, y):
    req = os.path.join(app.hooks, "drop.request")
    with open(req + ".tmp", "w") as f:
        json.dump({"paths": paths, "x": x, "y": y}, f)
    os.replace(req + ".tmp", req)  # the app never reads half a request
    wait_for(lambda: not os.path.exists(req), "the app to take the drop request")


def centre(r):
    return (r[0] + r[2]) / 2, (r[1] + r[3]) / 2


def main():
    a = parse_args()
    state, stderr_path = os.path.join(a.work, "state"), os.path.join(a.work, "stderr.txt")
    os.makedirs(state)
    with open(stderr_path, "w") as err:  # the autosave (state folder) is where values are read back
        app = Session([a.exe, a.session, "--size", "1280x800", "--state-dir", state, "--no-restore"], a.work, stderr=err)
    try:
        run(app, a, os.path.join(state, "autosave.json"), stderr_path)
    finally:
        app.stop()
    print("PASS")


def run(app, a, autosave, stderr_path):
    app.wait_window()
    original = json.load(open(a.session))

    def autosaved(pred, what):
        return wait_for(lambda: (s := read_json(autosave)) and pred(s) and s, "autosave with " + what)

    def rects():
        return app.layout()["rects"]

    def stderr_has(text):
        return text in open(stderr_path).read()

    # ---- 1. the title selects; the selected matrix is outlined -------------------------------------------
    app.click("title/W^Q")
    wait_for(lambda: "outline/W^Q" in rects(), "W^Q outlined after a click on its title")
    app.move(1200, 790)  # no hover highlight over the editors
    img = app.capture()
    x0, y0, x1, y1 = (int(round(v)) for v in rects()["outline/W^Q"])
    top = img[y0 - 1:y0 + 3, x0 + 4:x1 - 4].astype(int)  # the 2-pixel line, wherever it is rounded to
    blue = (np.abs(top - np.array([66, 150, 250])).max(axis=2) <= 40).any(axis=0).mean()
    print("outline of W^Q: %.0f%% of its top edge is the accent blue" % (blue * 100))
    if blue < 0.5:
        fail("the selected matrix W^Q is not framed on screen")
    key("ctrl+c")

    # ---- 2. a dropped session opens and ends the selection ----------------------------------------------
    gen = app.layout()["generation"]
    drop(app, [a.session], *centre(rects()["heatmap/weights/0"]))
    wait_for(lambda: stderr_has("opened preset " + a.session) or stderr_has("opened " + a.session), "the dropped session to open")
    wait_for(lambda: "outline/W^Q" not in rects() and app.layout()["generation"] > gen, "the selection cleared by the load")
    print("drop session: opened, selection cleared")

    # ---- 3. paste goes to the matrix whose title was clicked last ------------------------------------------
    app.click("title/W^K")
    wait_for(lambda: "outline/W^K" in rects(), "W^K outlined")
    if "outline/W^Q" in rects():
        fail("W^Q is still outlined after clicking W^K's title")
    key("ctrl+v")
    s = autosaved(lambda s: s["Wk"] == original["Wq"], "W^K = the copied W^Q")
    if s["Wq"] != original["Wq"]:
        fail("the paste changed W^Q: %s" % s["Wq"])
    print("paste: W^K now holds W^Q's values, W^Q unchanged")

    # ---- 4. Escape restores a cell being typed ---------------------------------------------------------
    x00 = app.layout()["X00"]
    app.click("cell/X/0/0")
    wait_for(lambda: "editing" in rects(), "the cell's text field to open")
    # A long refused text: its message wraps at the matrix's width instead of widening the panel (issue 21).
    xdo("type", "--delay", "30", "abcdefghijklmnopqrstuvwxyz")
    key("Return")
    wait_for(lambda: "cell_error" in rects(), "the red text under the editor")
    cols = sorted(k for k in rects() if k.startswith("cell/X/0/"))
    right = max(rects()[k][2] for k in cols)
    if rects()["cell_error"][2] > right + 2:
        fail("the error under X reaches x=%.0f, past the matrix's right edge %.0f" % (rects()["cell_error"][2], right))
    key("Escape")
    wait_for(lambda: "cell_error" not in rects() and "editing" not in rects(), "Escape to close the field and its red text")
    if app.layout()["X00"] != x00:
        fail("Escape changed X[0][0]")
    app.click("cell/X/0/0")
    wait_for(lambda: "editing" in rects(), "the cell's text field to open again")
    xdo("type", "--delay", "50", "9")
    key("Escape")
    wait_for(lambda: "editing" not in rects(), "Escape to close the field")
    app.move(1200, 790)
    autosaved(lambda s: s["Wk"] == original["Wq"], "the paste")  # the autosave is current
    if app.layout()["X00"] != x00 or read_json(autosave)["X"][0][0] != x00:
        fail("typing 9 then Escape changed X[0][0]")
    print("escape: the red text went, X[0][0] kept %g" % x00)

    # ---- 5. arrays dropped onto a matrix --------------------------------------------------------------
    wv = np.array(original["Wv"], dtype=np.float32)
    good = os.path.join(a.work, "wv.npy")
    np.save(good, np.full(wv.shape, 0.5, dtype=np.float32))
    target = centre(rects()["title/W^V"])
    drop(app, [good], *target)
    autosaved(lambda s: np.allclose(np.array(s["Wv"]), 0.5), "W^V = 0.5 from the dropped .npy")
    print("drop .npy onto W^V: imported")
    key("ctrl+z")
    autosaved(lambda s: np.array_equal(np.array(s["Wv"]), wv), "W^V back after Ctrl+Z")
    print("Ctrl+Z: W^V back")

    bad = os.path.join(a.work, "wrong.npy")
    np.save(bad, np.zeros((wv.shape[0] + 1, wv.shape[1] + 2), dtype=np.float32))
    drop(app, [bad], *centre(rects()["title/W^V"]))
    wait_for(lambda: stderr_has("cannot import " + bad + " into W^V: "), "the wrong shape refused")
    line = [l for l in open(stderr_path) if "cannot import " + bad in l][0]
    want = "expected %d×%d (W^V as the session holds it), got %d×%d" % (wv.shape + (wv.shape[0] + 1, wv.shape[1] + 2))
    if want not in line:
        fail("the wrong-shape message should name what was expected and what was dropped: " + line)
    print("wrong shape:", line.strip())

    drop(app, [good], *centre(rects()["heatmap/weights/0"]))
    wait_for(lambda: stderr_has("dropped " + good + " outside the matrix editors"), "the message for a drop beside the editors")
    txt = os.path.join(a.work, "notes.txt")
    open(txt, "w").write("hello\n")
    drop(app, [txt], *target)
    wait_for(lambda: stderr_has("cannot open " + txt + ": expected a session (.json)"), "the message for an unknown type")
    if not np.array_equal(np.array(read_json(autosave)["Wv"]), wv):
        fail("a refused drop changed W^V")
    print("refused drops: messages shown, W^V unchanged")

    # ---- 6. the in-app path field completes folders and files (no portal under Xvfb) ----------------------
    key("ctrl+o")
    app.click("file/path")
    presets = os.path.dirname(a.session)
    xdo("type", "--delay", "30", presets + "/causal_d")
    wait_for(lambda: "file/path/choice/0" in rects(), "the completion list under the path field")
    if "file/path/choice/1" in rects():
        fail("one preset starts with causal_d, the list shows more")
    key("Tab")
    key("Return")
    want = presets + "/causal_decoder_2heads.json"
    # The session was edited above (paste, import), so the window asks before the preset replaces it.
    app.rect("unsaved/discard")
    app.click("unsaved/discard")
    wait_for(lambda: stderr_has("opened preset " + want), "Tab to complete the path and Enter to open " + want)
    print("path field: Tab completed the preset's name, Enter opened it")


if __name__ == "__main__":
    main()
