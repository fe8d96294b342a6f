#!/usr/bin/env python3
"""End-to-end test of File → Open text… (issue 18), driven with xdotool under Xvfb.

A decoder (the tiny llama GGUF, a context of 128 tokens) opened with a short text:
1. File → Open text… shows the dialog.
2. Files that are not a model's text: a Latin-1 file, a binary file, a missing path. Each time the dialog
   stays open and names what is wrong; the text and its run stay.
3. A text of more than 128 tokens: it becomes the text, cut at the context, and the sidebar says so while the
   run is shown; the dialog closes.
4. The sidebar's line of the weights' storage shows each type on hover.

Helpers (layout.json rectangles, pointer moves held over frames) in e2e_common.py.
"""
import os

from e2e_common import Session, fail, parse_args, type_into, wait_for


def main():
    a = parse_args("--model", session=False)
    app = Session([a.exe, "--model", a.model, "--model-text", "the cat sat on", "--size", "1280x800", "--no-autosave",
                   "--no-restore"], a.work)
    try:
        run(app, a)
    finally:
        app.stop()
    print("PASS")


def model(app):
    l = app.layout()
    return l.get("model") if l else None


def run(app, a):
    app.wait_window()
    first = wait_for(lambda: (m := model(app)) and m["has_run"] and not m["computing"] and m, "the first run")
    print("first run: %d tokens" % first["tokens"])

    app.click("menu/file")
    app.click("menu/open_text")
    wait_for(lambda: (l := app.layout()) and "model/open_text_path" in l["rects"], "the Open text dialog")
    print("dialog: open")

    # ---- 2. files that are not a text ---------------------------------------------------------------------
    latin1 = os.path.join(a.work, "latin1.txt")
    with open(latin1, "wb") as f:
        f.write(b"caf\xe9 au lait")
    binary = os.path.join(a.work, "weights.bin")
    with open(binary, "wb") as f:
        f.write(b"GGUF\x00\x00\x03\x00")
    missing = os.path.join(a.work, "no_such.txt")
    for path, why in [(latin1, "not UTF-8 (byte 0xe9 at offset 3"), (binary, "a binary file (a NUL byte at offset 4)"),
                      (missing, "cannot open")]:
        type_into(app, "model/open_text_path", path)
        wait_for(lambda: (l := app.layout()) and "model/open_text_error" in l["rects"]
                 and why in l["model"]["text_open_error"] and path in l["model"]["text_open_error"],
                 "the error for " + os.path.basename(path) + " naming the file and '" + why + "'")
        m = model(app)
        if m["text_bytes"] != len("the cat sat on") or m["tokens"] != first["tokens"] or m["text_path"]:
            fail("a refused file changed the text or its run: %s" % m)
        print("refused %s (%s): the text and its run stay" % (os.path.basename(path), why))

    # ---- 3. a text past the context -----------------------------------------------------------------------
    long_text = os.path.join(a.work, "long.txt")
    with open(long_text, "w", encoding="utf-8") as f:
        f.write("the cat sat on the mat. " * 100)
    type_into(app, "model/open_text_path", long_text)
    done = wait_for(lambda: (m := model(app)) and m["has_run"] and not m["computing"] and m["text_path"] and m,
                    "the long text's run", timeout=60.0)
    if done["tokens"] != 128:
        fail("expected the text cut at the context of 128 tokens, got %d" % done["tokens"])
    if not any("truncated to the first 128" in w for w in done["warnings"]):
        fail("no truncation warning with the run: %s" % done["warnings"])
    l = wait_for(lambda: (l := app.layout()) and "model/run_warning" in l["rects"] and l, "the warning in the sidebar")
    if "model/open_text_path" in l["rects"]:
        fail("the dialog is still open after the text was opened")
    print("long text: cut at 128 tokens, the sidebar says so, the dialog closed")

    # ---- 4. the sidebar's weights line, each type on hover -------------------------------------------------
    x0, y0, x1, y1 = app.rect("control/model_weights")
    app.move(int((x0 + x1) / 2), int((y0 + y1) / 2))
    wait_for(lambda: (l := app.layout()) and "model/weights_tooltip" in l["rects"], "the weights' tooltip on hover")
    print("sidebar: the weights' storage, its types on hover")


if __name__ == "__main__":
    main()
