#!/usr/bin/env python3
"""End-to-end test of File → Open model… (issue 10), driven with xdotool under Xvfb.

The model's files are read on a background thread while the window keeps drawing (app/state/model_state.h).
1. File → Open model… shows the dialog, its directory field filled in.
2. A directory that holds no model: the dialog stays open and shows the error, naming the directory.
3. The real model's directory: the model view's grid appears (layer 0 head 0 ... layer 5 head 11) and the
   dialog closes. (That the frame loop keeps drawing while the files are read is tested headless, in
   tests/model/test_model_state.cpp: here the read may end before any frame could show it.)

Helpers (layout.json rectangles, pointer moves held over frames) in e2e_common.py.
"""
import os

from e2e_common import drive, fail, parse_args, type_into, wait_for


def main():
    a = parse_args("--model-dir")
    if not os.path.isfile(os.path.join(a.model_dir, "model.safetensors")):
        fail("no model in %s (scripts/setup.sh installs it)" % a.model_dir)
    drive(a.exe, [a.session], a.work, lambda app: run(app, a))


def run(app, a):
    app.wait_window()
    app.click("menu/file")
    app.click("menu/open_model")
    wait_for(lambda: (l := app.layout()) and "model/open_dir" in l["rects"], "the Open model dialog")
    print("dialog: open")

    # ---- 2. a directory with no model in it ------------------------------------------------------------------
    missing = os.path.join(a.work, "no-model-here")
    os.makedirs(missing)
    type_into(app, "model/open_dir", missing)
    wait_for(lambda: (l := app.layout()) and "model/open_error" in l["rects"], "the error in the dialog")
    if any(k.startswith("model/0/") for k in app.layout()["rects"]):
        fail("a model view appeared after a failed open")
    print("bad directory: the dialog shows the error")

    # ---- 3. the real model ----------------------------------------------------------------------------------
    type_into(app, "model/open_dir", a.model_dir)
    done = wait_for(lambda: (l := app.layout()) and "model/0/0" in l["rects"] and "model/5/11" in l["rects"] and l,
                    "the model view's grid", timeout=120.0)
    if "model/open_dir" in done["rects"]:
        fail("the dialog is still open after the model was installed")
    print("model: installed, grid of 6 layers x 12 heads drawn, dialog closed")


if __name__ == "__main__":
    main()
