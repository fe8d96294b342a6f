#!/usr/bin/env python3
"""End-to-end test of "Why here?" (issue 35), driven with xdotool under Xvfb on SmolLM2.

The Dursley induction prompt of issue 35's "Done when": the induction head L18 H6 at query 23 (the second
" Privet"'s "et") puts its weight on key 11 (" Drive", the token after the first "et").
1. The grid's thumbnail L18 H6 opens layer 18 in the chain view at head 6; a right-click on the weights map's cell
   (23, 11) offers "Why here?", which opens the panel.
2. The panel's score, weight and top key-side component (from the test hooks' layout.json) are the command line's
   (`attnscope model --qk-attribution 18:6:23:11`): the same core on the same run. The row mode decomposes the
   query's whole row (24 keys) and compares the cell's key with the runner-up.
3. "remove from keys" on that component shows the patched pattern: the cell's weight falls (the stripe breaks).
4. Back in the model view, ablating that head (the × of its thumbnail) updates the open panel: the head's part of
   the key is then 0, and the top key-side component is another one.
   Save .npy under the matrix writes the whole component matrix (C×C float32, summing to the score) and its names.
5. Close closes it.
6. With --capped-model (the tiny Gemma 2: post-norms, a sliding window and a score soft-cap), the panel decomposes
   the cell too: its score is the one before the soft-cap, and the capped score the softmax read is given beside it
   (cap·tanh(score / cap)).
--shots DIR also saves the frames (PNG) at each step, for a person to look at.

Every wait is on the app's state (layout.json), never on time alone.
"""
import argparse
import json
import os
import shutil
import subprocess
import time

import numpy as np
from PIL import Image

from e2e_common import Session, fail, wait_for, wait_frames, xdo

TEXT = "Mr and Mrs Dursley of number four Privet Drive. Mr and Mrs Dursley of number four Privet"
LAYER, HEAD, QUERY, KEY = 18, 6, 23, 11


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--size", default="1280x800")
    ap.add_argument("--shots", default="")
    ap.add_argument("--capped-model", default="")
    a = ap.parse_args()
    if not os.path.isfile(a.model):
        print("SmolLM2 not installed (scripts/setup.sh installs it): skipped")
        raise SystemExit(77)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    a.exe, a.model = os.path.abspath(a.exe), os.path.abspath(a.model)
    if a.capped_model:
        a.capped_model = os.path.abspath(a.capped_model)
    cli = cli_cell(a)
    # Run in the work folder: Save .npy writes its default name there.
    app = Session([a.exe, "--model", a.model, "--model-text", TEXT, "--size", a.size, "--no-autosave", "--no-restore"],
                  a.work, cwd=a.work)
    try:
        run(app, a, cli)
    finally:
        app.stop()
    if a.capped_model:
        app = Session([a.exe, "--model", a.capped_model, "--model-text", "the cat sat on the mat", "--size", a.size,
                       "--no-autosave", "--no-restore"], os.path.join(a.work, "capped"))
        try:
            capped(app, a)
        finally:
            app.stop()
    print("PASS")


def capped(app, a):
    app.wait_window(lambda l: l.get("model", {}).get("has_run"), "the first run")
    app.click("model/1/0")
    wait_for(lambda: (l := app.layout()) and "model/breadcrumb" in l["rects"], "layer 1 in the chain view")
    x0, y0, x1, y1 = app.rect("heatmap/weights/0")
    n = app.layout()["model"]["tokens"]
    # Query 3, key 1: near the map's top-left corner, in view even where the map scrolls in its box (900×600).
    right_click_at(app, int(x0 + (x1 - x0) * 1.5 / n), int(y0 + (y1 - y0) * 3.5 / n))
    app.click("qk/menu/why")
    q = wait_for(lambda: (q := qk(app)) and q["current"] and not q["computing"] and q, "the panel", timeout=60.0)
    shot(app, a, "6_capped")
    if q["error"]:
        fail("Gemma 2 (post-norms, a soft-cap): expected the decomposition, got %r" % q["error"])
    if "capped_score" not in q:
        fail("a soft-capped layer: expected the capped score beside the score before the cap, got %r" % q)
    cap = 5.0  # tiny_gemma2's attn_logit_softcapping
    want = cap * np.tanh(q["score"] / cap)
    if abs(q["capped_score"] - want) > 1e-4 * (1 + abs(want)):
        fail("capped score %.6f, expected cap·tanh(score/cap) = %.6f" % (q["capped_score"], want))
    print("capped family: score before the cap %.4f, capped %.4f" % (q["score"], q["capped_score"]))


def cli_cell(a):
    """The command line's decomposition of the cell (the numbers the panel must show)."""
    out = os.path.join(a.work, "cli.json")
    r = subprocess.run([a.exe, "model", "--model", a.model, "--text", TEXT, "--qk-attribution",
                        "%d:%d:%d:%d" % (LAYER, HEAD, QUERY, KEY), "--qk-top", "5", "--layers", "0", "-o", out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("attnscope model --qk-attribution: exit %d: %s" % (r.returncode, r.stderr))
    with open(out) as f:
        j = json.load(f)
    q = find_key(j, "qk_attribution")
    if q is None:
        fail("no qk_attribution in the command line's JSON")
    top = max(q["key_components"], key=lambda c: abs(c["value"]))
    print("command line: score %.4f, weight %.4f, top key-side component %s (%+.3f)" %
          (q["score"], q["weight"], top["name"], top["value"]))
    return {"score": q["score"], "weight": q["weight"], "top_key": top["name"]}


def find_key(j, name):
    if isinstance(j, dict):
        if name in j:
            return j[name]
        for v in j.values():
            r = find_key(v, name)
            if r is not None:
                return r
    elif isinstance(j, list):
        for v in j:
            r = find_key(v, name)
            if r is not None:
                return r
    return None


def qk(app):
    l = app.layout()
    return l and l.get("model", {}).get("qk")


def settled(app, pred=lambda q: True):
    """The panel's results once they are of the cell asked and nothing is computing (and `pred` holds)."""
    q = wait_for(lambda: (q := qk(app)) and q["current"] and not q["computing"] and (pred(q) or q["error"]) and q,
                 "the panel's results", timeout=120.0)
    if q["error"]:
        fail("the panel shows an error: %s" % q["error"])
    return q


def shot(app, a, name):
    if not a.shots:
        return
    os.makedirs(a.shots, exist_ok=True)
    Image.fromarray(app.capture()).save(os.path.join(a.shots, name + ".png"))


def right_click_at(app, x, y):
    app.move(x, y)
    xdo("mousedown", "3")
    time.sleep(0.15)  # held over frames: ImGui 1.86 polls the buttons once per frame
    wait_frames()
    xdo("mouseup", "3")
    time.sleep(0.3)
    wait_frames()


def scroll_into_grid(app, name):
    """Scrolls the grid (the wheel over it) until thumbnail `name` lies wholly inside its visible box."""
    def inside():
        l = app.layout()
        g, r = l["rects"].get("model/grid"), l["rects"].get(name)
        if not g or not r:
            return None
        if r[1] >= g[1] and r[3] <= g[3] - 14:  # above the horizontal scrollbar
            return True
        x, y = int((g[0] + g[2]) / 2), int((g[1] + g[3]) / 2)
        app.move(min(x, int(g[0]) + 60), y)
        xdo("click", "5" if r[3] > g[3] - 14 else "4")
        time.sleep(0.2)
        return None
    wait_for(inside, "thumbnail %s in the grid's view" % name, timeout=60.0)


def scroll_into(app, name, container):
    """Scrolls `container` (the wheel over it) until widget `name` lies wholly inside it."""
    def inside():
        l = app.layout()
        g, r = l["rects"].get(container), l["rects"].get(name)
        if not g:
            return None
        if r and r[1] >= g[1] + 20 and r[3] <= g[3] - 4:
            return True
        app.move(int(g[0]) + 30, int((g[1] + g[3]) / 2))
        xdo("click", "4" if r and r[1] < g[1] + 20 else "5")
        time.sleep(0.2)
        return None
    wait_for(inside, "%s in view" % name, timeout=60.0)


def run(app, a, cli):
    app.wait_window(lambda l: l.get("model", {}).get("has_run"), "the first run")
    shot(app, a, "1_model_view")
    # 1. The head in the chain view, then its cell.
    scroll_into_grid(app, "model/%d/%d" % (LAYER, HEAD))
    app.click("model/%d/%d" % (LAYER, HEAD))
    wait_for(lambda: (l := app.layout()) and "model/breadcrumb" in l["rects"], "layer %d in the chain view" % LAYER)
    name = "heatmap/weights/%d" % HEAD
    x0, y0, x1, y1 = app.rect(name)
    n = app.layout()["model"]["tokens"]
    cw, ch = (x1 - x0) / n, (y1 - y0) / n
    # Rows are queries unless the layout is in columns (then the hover rectangle names (key, query)).
    for row, col in ((QUERY, KEY), (KEY, QUERY)):
        x, y = int(x0 + cw * (col + 0.5)), int(y0 + ch * (row + 0.5))
        app.move(x, y)
        hover = "hover/weights/%d/%d/%d" % (HEAD, row, col)
        if wait_for(lambda: (l := app.layout()) and any(k.startswith("hover/weights/") for k in l["rects"]) and l,
                    "the hovered cell")["rects"].get(hover):
            break
    else:
        fail("the pointer over the weights map did not hover cell (%d, %d)" % (QUERY, KEY))
    right_click_at(app, x, y)
    shot(app, a, "2_menu")
    app.click("qk/menu/why")
    q = settled(app, lambda q: "score" in q)
    shot(app, a, "3_panel")
    if (q["layer"], q["head"], q["query"], q["key"]) != (LAYER, HEAD, QUERY, KEY):
        fail("the panel explains another cell: %s" % q)
    # 2. The command line's numbers.
    if q["error"]:
        fail("the panel shows an error: %s" % q["error"])
    if abs(q["score"] - cli["score"]) > 1e-4 * abs(cli["score"]) + 1e-4 or abs(q["weight"] - cli["weight"]) > 1e-5:
        fail("the panel's score/weight %.5f/%.5f differ from the command line's %.5f/%.5f" %
             (q["score"], q["weight"], cli["score"], cli["weight"]))
    if q["top_key"] != cli["top_key"]:
        fail("the panel's top key-side component is %s, the command line's %s" % (q["top_key"], cli["top_key"]))
    print("panel: score %.4f, weight %.4f, top key-side component %s, as the command line" %
          (q["score"], q["weight"], q["top_key"]))
    # 2b. The row mode: the query's whole row (every key it sees), the cell's key against the runner-up. Then off
    # again (the later steps read the cell's own sections).
    app.click("qk/row/toggle")
    q = settled(app, lambda q: q.get("row") and q.get("row_keys") == QUERY + 1)
    if not (0 <= q["row_other"] <= QUERY) or q["row_other"] == KEY:
        fail("row mode: the key compared should be another key of the row, got %r" % q["row_other"])
    shot(app, a, "3b_row")
    print("row mode: %d keys, key %d compared with the runner-up key %d" % (q["row_keys"], KEY, q["row_other"]))
    app.click("qk/row/toggle")
    q = settled(app, lambda q: not q.get("row"))
    # 3. Remove it from the keys: the pattern changes, the cell's weight falls.
    top = q["top_key"]
    app.click("qk/remove/key/" + top)
    q = settled(app, lambda q: q.get("patch_component") == top)
    shot(app, a, "4_patched")
    before, after = q["patch_weight_original"], q["patch_weight_patched"]
    if q["patch_side"] != "key" or not after < before - 0.1:
        fail("removing %s from the keys did not break the cell: %.4f -> %.4f" % (top, before, after))
    print("remove %s from keys: the cell's weight %.4f -> %.4f" % (top, before, after))
    # 4. Live: ablate that head in the model view; the panel follows.
    app.click("model/back")
    wait_for(lambda: (l := app.layout()) and "model/%d/%d" % (LAYER, HEAD) in l["rects"], "the model view")
    layer, head = int(top.split(".")[0][1:]), int(top.split(".")[1][1:]) if ".H" in top else -1
    if head >= 0:
        app.click("model/ablate/%d/%d" % (layer, head))
        q = settled(app, lambda q: q.get("top_key") not in (None, top))
        shot(app, a, "5_ablated")
        print("ablating %s: the panel updated (top key-side component now %s, score %.4f)" % (top, q["top_key"], q["score"]))
    # The matrix's numbers as .npy (the panel scrolled to them).
    scroll_into(app, "qk/matrix_header", "qk/window")
    app.click("qk/matrix_header")
    scroll_into(app, "qk/save", "qk/window")
    shot(app, a, "5b_matrix")
    app.click("qk/save")
    path = os.path.join(a.work, "qk_matrix.npy")
    wait_for(lambda: os.path.isfile(path) and os.path.isfile(os.path.join(a.work, "qk_matrix.names.txt")), "qk_matrix.npy")
    m = np.load(path)
    with open(os.path.join(a.work, "qk_matrix.names.txt")) as f:
        names = f.read().split()
    if m.dtype != np.float32 or m.shape != (len(names), len(names)) or names[0] != "embed":
        fail("qk_matrix.npy: expected C×C float32 with C names, got %s %s and %d names" % (m.dtype, m.shape, len(names)))
    if abs(float(m.sum(dtype=np.float64)) - q["score"]) > 1e-3 * abs(q["score"]) + 1e-3:
        fail("qk_matrix.npy sums to %.5f, the score is %.5f" % (m.sum(), q["score"]))
    print("Save .npy: %d×%d components, summing to the score %.4f" % (m.shape[0], m.shape[1], q["score"]))
    # 5. Close (at the panel's top).
    scroll_into(app, "qk/close", "qk/window")
    app.click("qk/close")
    wait_for(lambda: (l := app.layout()) and "qk" not in l.get("model", {}) and "qk/window" not in l["rects"], "the panel to close")
    print("Close: the panel closed")


if __name__ == "__main__":
    main()
