#!/usr/bin/env python3
"""End-to-end test of issue 11's document semantics, driven with xdotool (run under Xvfb).

1. Preset, then undo: check "causal" (an unsaved edit), choose Presets → "Seed 004: translation as
   cross-attention" (the menu lists the presets by the names in their files). The window asks first (unsaved
   changes); "Discard, then open" opens seed 004. Ctrl+Z brings the edited seed 000 back (causal still on),
   Ctrl+Y seed 004 again.
2. Heads 1 → 2 → 3 → 1 typed into the controls' heads field ("keep d_model×d_model" is shown and off): each
   step keeps d_k, head 0 keeps its weights, new heads are not zeros, and back at 1 head W^Q, W^K and W^V
   are the original ones exactly.
3. Presets → the causal decoder with the edits still unsaved: the prompt's "Save as, then open" writes the
   edited seed 000 to the path typed in it, then opens the preset.

The document is read from the autosave file (written half a second after each change); widgets are found
by the --test-hooks rectangles only.
"""

import os

from e2e_common import Session, parse_args, fail, key, read_json, wait_for, wait_frames, xdo

SEED000 = "Seed 000: the worked example"
SEED004 = "Seed 004: translation as cross-attention"


def main():
    a = parse_args()
    state = os.path.join(a.work, "state")
    os.makedirs(state)
    autosave = os.path.join(state, "autosave.json")
    app = Session([a.exe, a.session, "--size", "1280x800", "--state-dir", state, "--no-restore"], a.work)
    try:
        app.wait_window()

        def autosaved(pred, what):
            return wait_for(lambda: (s := read_json(autosave)) and pred(s) and s, "autosave with " + what)

        # ---- 1. preset, then undo -----------------------------------------------------------------------
        app.click("control/causal")
        autosaved(lambda s: s["name"] == SEED000 and s["mask"].get("causal"), "seed 000 and causal on")
        app.click("menu/presets")
        app.click("preset/seed004_translation_cross.json")
        app.rect("unsaved/discard")  # the window asks before replacing the edited session
        if "unsaved/path" not in app.layout()["rects"]:
            fail("an untitled session's prompt should offer a path to save it to")
        s = read_json(autosave)
        if s["name"] != SEED000:
            fail("the preset was opened before the user answered")
        app.click("unsaved/discard")
        autosaved(lambda s: s["name"] == SEED004, "seed 004 opened")
        print("preset: seed 004 opened after the prompt")
        key("ctrl+z")
        autosaved(lambda s: s["name"] == SEED000 and s["mask"].get("causal"), "seed 000 back, causal on")
        print("undo: the edited seed 000 is back")
        key("ctrl+y")
        autosaved(lambda s: s["name"] == SEED004, "seed 004 again")
        print("redo: seed 004 again")
        key("ctrl+z")
        original = autosaved(lambda s: s["name"] == SEED000, "seed 000 for the heads test")

        # ---- 2. heads 1 → 2 → 3 → 1 ---------------------------------------------------------------------
        app.rect("control/keep_dmodel")  # the choice is visible next to heads
        dk = len(original["Wq"][0])
        if original["heads"] != 1:
            fail("seed 000 should have 1 head, got %s" % original["heads"])

        def set_heads(h):
            x0, y0, x1, y1 = app.rect("control/heads")
            app.move(int(x0 + 20), int((y0 + y1) / 2))  # the number field, left of the -/+ buttons
            xdo("mousedown", "1")
            xdo("sleep", "0.15")
            wait_frames()
            xdo("mouseup", "1")
            wait_frames()
            key("ctrl+a")
            xdo("type", "--delay", "50", str(h))
            key("Return")
            return autosaved(lambda s: s["heads"] == h, "%d heads" % h)

        for h in (2, 3):
            s = set_heads(h)
            width = len(s["Wq"][0])
            if width != h * dk:
                fail("%d heads: W^Q should be %d wide (d_k = %d kept), got %d" % (h, h * dk, dk, width))
            for name in ("Wq", "Wk", "Wv"):
                if [r[:dk] for r in s[name]] != original[name]:
                    fail("%d heads: head 0 of %s changed" % (h, name))
                if all(v == 0 for r in s[name] for v in r[(h - 1) * dk:]):
                    fail("%d heads: the new head of %s is all zeros" % (h, name))
            print("%d heads: d_k = %d kept, head 0 unchanged, the new head seeded" % (h, dk))
        s = set_heads(1)
        for name in ("Wq", "Wk", "Wv", "X"):
            if s[name] != original[name]:
                fail("1 → 2 → 3 → 1 heads: %s differs from the original" % name)
        print("1 -> 2 -> 3 -> 1 heads: W^Q, W^K, W^V and X are the original ones")

        # ---- 3. "Save as, then open" from the prompt ----------------------------------------------------
        saved = os.path.join(a.work, "my_session.json")
        app.click("menu/presets")
        app.click("preset/causal_decoder_2heads.json")
        app.click("unsaved/path")
        key("ctrl+a")
        xdo("type", "--delay", "20", saved)
        app.click("unsaved/save")
        autosaved(lambda s: s["name"] == "Causal decoder, 2 heads", "the causal decoder opened after saving")
        mine = read_json(saved)
        if not mine or mine["name"] != SEED000 or not mine["mask"].get("causal"):
            fail("%s should hold the edited seed 000 (causal on), got %s" % (saved, mine and mine.get("name")))
        print("save from the prompt: %s written, then the preset opened" % saved)
    finally:
        app.stop()
    print("PASS")


if __name__ == "__main__":
    main()
