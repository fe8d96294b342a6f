#!/usr/bin/env python3
"""End-to-end test of the model mode's start (issue 18), driven with xdotool under Xvfb.

The window opens at once and the first forward runs on the model worker, as later ones do
(app/state/model_state.h, ModelStartup::async):
0. A --model-text that is not UTF-8 is refused before the window opens (the text field needs UTF-8).
1. The tiny llama GGUF with --model-layer 1: the window draws, and once the first run is shown the layer opens
   in the chain view (the start-up's rest is applied then).
2. With --smollm2 FILE (when installed) and a long text (--long-text FILE): the window shows the run's
   progress bar and Cancel before the run is whole; Cancel stops it, and the panel says so and offers Run.
   On a machine fast enough to finish the forward before the click, that part is reported and skipped.
3. A text in other scripts (Cyrillic, Hangul, a rare ideograph): the window's font atlas is built again with the
   characters it lacked, each from an installed font that has it (app/panels/glyph_atlas.h; the test hooks'
   glyph_atlas), and only characters no installed font has are left to the replacement mark.

Helpers (layout.json rectangles, pointer moves held over frames) in e2e_common.py.
"""
import argparse
import os
import shutil
import subprocess

from e2e_common import Session, fail, wait_for


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--smollm2", default="")
    ap.add_argument("--long-text", default="")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    common = ["--size", "1280x800", "--no-autosave", "--no-restore"]
    r = subprocess.run([a.exe.encode(), b"--model", a.model.encode(), b"--model-text", b"caf\xe9"], capture_output=True)
    if r.returncode != 2 or b"--model-text: not UTF-8 (byte 0xe9 at offset 3); expected UTF-8 text" not in r.stderr:
        fail("a --model-text that is not UTF-8: expected exit 2 and the message, got %d: %s" % (r.returncode, r.stderr))
    print("--model-text not UTF-8: refused before the window opens")
    app = Session([a.exe, "--model", a.model, "--model-text", "the cat sat on", "--model-layer", "1"] + common,
                  os.path.join(a.work, "layer"))
    try:
        layer_when_shown(app)
    finally:
        app.stop()
    app = Session([a.exe, "--model", a.model, "--model-text", SCRIPTS_TEXT] + common, os.path.join(a.work, "scripts"))
    try:
        glyphs_of_other_scripts(app)
    finally:
        app.stop()
    if a.smollm2 and os.path.isfile(a.smollm2):
        app = Session([a.exe, "--model", a.smollm2, "--model-text-file", a.long_text] + common, os.path.join(a.work, "long"))
        try:
            progress_and_cancel(app)
        finally:
            app.stop()
    else:
        print("SmolLM2 not installed: the long text's progress is not tested (scripts/setup.sh installs it)")
    print("PASS")


def model(app):
    l = app.layout()
    return l.get("model") if l else None


def layer_when_shown(app):
    app.wait_window()
    l = wait_for(lambda: (l := app.layout()) and "model/breadcrumb" in l["rects"] and l,
                 "layer 1 opened in the chain view after the first run")
    if not l["model"]["has_run"] or l["model"]["error"]:
        fail("the layer opened without a good run: %s" % l["model"])
    print("--model-layer 1: opened once the first run (%d tokens) was shown" % l["model"]["tokens"])


# Cyrillic (in DejaVu Sans from the start), Hangul (in neither DejaVu Sans nor Droid Sans Fallback: Unifont, which
# scripts/setup.sh installs, or another installed font) and 峠 (Droid Sans Fallback, past the common ideographs).
SCRIPTS_TEXT = "Привет 한국어 峠"
ADDED = "한국어峠"


def outline_font_has(ch):
    """Whether fontconfig lists an outline font that is not a colour font with character ch (fc-list)."""
    r = subprocess.run(["fc-list", ":charset=%x" % ord(ch), "file", "color"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        path = line.split(":")[0].strip()
        if os.path.splitext(path)[1].lower() in (".ttf", ".otf", ".ttc", ".otc") and "color=True" not in line:
            return True
    return False


def glyphs_of_other_scripts(app):
    app.wait_window()
    wait_for(lambda: (l := app.layout()) and l["model"]["has_run"] and l, "the first run of the text in other scripts")
    have = [c for c in ADDED if outline_font_has(c)]
    g = wait_for(lambda: (l := app.layout()) and (g := l["glyph_atlas"])["added"] + g["unavailable"] >= len(ADDED) and g,
                 "the atlas built again with the text's characters")
    if g["rebuilds"] < 2:
        fail("the atlas was not built again: %s" % g)
    if g["added"] < len(have) or g["unavailable"] > len(ADDED) - len(have):
        fail("%d of %s have an installed font, but the atlas added %d and found %d unavailable: %s"
             % (len(have), ADDED, g["added"], g["unavailable"], g))
    print("text in other scripts: %d characters added to the atlas from %s; %d without a font; %d glyphs built in %.0f ms"
          % (g["added"], ", ".join(g["fonts"]), g["unavailable"], g["glyphs"], g["last_build_ms"]))


def progress_and_cancel(app):
    app.wait_window()
    l = app.layout()
    if l["model"]["has_run"]:
        print("the long run finished before the first frame was read: progress not seen (a fast machine)")
        return
    l = wait_for(lambda: (l := app.layout()) and ("model/cancel" in l["rects"] or l["model"]["has_run"]) and l,
                 "the progress bar and Cancel")
    if l["model"]["has_run"]:
        print("the long run finished before Cancel was drawn: Cancel not tested (a fast machine)")
        return
    if "model/progress" not in l["rects"] or "model/first_run" not in l["rects"]:
        fail("no progress bar in the first-run panel: %s" % sorted(k for k in l["rects"] if k.startswith("model/")))
    print("long text: the window shows the first run's progress and Cancel")
    app.click("model/cancel")
    l = wait_for(lambda: (l := app.layout()) and not l["model"]["computing"] and l, "the run to stop", timeout=120.0)
    if l["model"]["has_run"]:
        print("the long run finished before Cancel took effect (a fast machine)")
        return
    l = wait_for(lambda: (l := app.layout()) and "model/run" in l["rects"] and l, "Run after Cancel")
    if "cancelled" not in l["model"]["error"]:
        fail("the panel does not say the run was cancelled: %s" % l["model"]["error"])
    print("Cancel: the run stopped; the panel says so (%s) and offers Run" % l["model"]["error"])


if __name__ == "__main__":
    main()
