"""Helpers shared by the xdotool end-to-end tests (e2e_*.py), run under Xvfb.

The app's --test-hooks folder gives the widget rectangles, the pointer and counters (layout.json) and
frames on request (frame.ppm). ImGui 1.86 polls the keyboard and mouse once per frame (no event queue), so
presses are held over a few frames, and a pointer move counts only once the app reports it where we put it.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
from PIL import Image


def parse_args(*extra, session=True):
    """--exe (attnscope), --work (a folder the test owns; emptied first), --session (a session file, unless
    session=False), and the further required options named in `extra` (e.g. "--model-dir")."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--work", required=True)
    if session:
        ap.add_argument("--session", required=True)
    for name in extra:
        ap.add_argument(name, required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    return a


class Session:
    """One running attnscope window with --test-hooks, and the person driving it."""

    def __init__(self, args, work, cwd=None, stderr=None):
        self.hooks = os.path.join(work, "hooks")
        shutil.rmtree(self.hooks, ignore_errors=True)
        os.makedirs(self.hooks)
        self.layout_path = os.path.join(self.hooks, "layout.json")
        self.frame_path = os.path.join(self.hooks, "frame.ppm")
        self.proc = subprocess.Popen(list(args) + ["--test-hooks", self.hooks], cwd=cwd, stderr=stderr)
        self.wid = None
        self.stopping = False  # stop() closes it: its exit is no longer news to wait_for
        global _POSTMORTEM, _LIVE
        _POSTMORTEM = self.hooks
        _LIVE = self

    # -- reading the app's state ---------------------------------------------------------------------------
    def layout(self):
        return read_json(self.layout_path)

    def rect(self, name):
        """The rectangle of widget `name`, revealing it first when the fit layout keeps it collapsed: the
        controls (control/...) behind the sidebar's strip, a matrix's cells or title behind its button in the
        inputs strip (strip/<matrix>)."""
        tried = set()

        def find():
            l = self.layout()
            if not l:
                return None
            rects = l["rects"]
            if name in rects:
                return rects[name]
            opener = None
            if name.startswith("control/"):
                opener = "sidebar/expand"
            elif name.startswith("cell/") or name.startswith("title/"):
                opener = "strip/" + name.split("/")[1]
            if opener in rects and opener not in tried:
                tried.add(opener)
                x0, y0, x1, y1 = rects[opener]
                self.press_at(int((x0 + x1) / 2), int((y0 + y1) / 2))
            return None
        return wait_for(find, "widget " + name)

    def wait_window(self, pred=lambda l: l.get("generation", 0) >= 1, what="the first frame"):
        """Waits for the first frame (or `pred`), finds the X window and gives it the input focus (there is no
        window manager under Xvfb, and ImGui's GLFW backend reads the pointer only while focused)."""
        wait_for(lambda: (l := self.layout()) and pred(l), what)
        self.wid = wait_for(lambda: subprocess.run(["xdotool", "search", "--name", "^attnscope$"], capture_output=True,
                                                   text=True).stdout.split(), "the window")[0]
        # The first frames lay out before the menu bar has claimed its height: let the layout settle.
        time.sleep(0.5)
        xdo("windowfocus", "--sync", self.wid)

    def capture(self):
        """The next frame, as an h×w×3 array."""
        n = self.layout()["captures"]
        open(os.path.join(self.hooks, "capture.request"), "w").close()
        wait_for(lambda: (l := self.layout()) and l["captures"] > n, "a capture")
        return read_ppm(self.frame_path)

    # -- acting ------------------------------------------------------------------------------------------------
    def move(self, x, y):
        def arrived():
            xdo("windowfocus", "--sync", self.wid)
            xdo("mousemove", "--window", self.wid, x, y)
            time.sleep(0.25)
            mx, my = self.layout().get("mouse", [-1, -1])
            return abs(mx - x) <= 1 and abs(my - y) <= 1
        wait_for(arrived, "the pointer at (%d, %d)" % (x, y))

    def click(self, name):
        x0, y0, x1, y1 = self.rect(name)
        self.press_at(int((x0 + x1) / 2), int((y0 + y1) / 2))

    def press_at(self, x, y):
        self.move(x, y)
        xdo("mousedown", "1")
        time.sleep(0.05)  # held like a finger, over frames (ImGui 1.86 polls the button once a frame): wait_frames
        wait_frames()
        xdo("mouseup", "1")
        time.sleep(0.3)
        wait_frames()

    def double_click(self, name):
        """Two presses at the centre of `name`, within ImGui's double-click time (0.30 s)."""
        x0, y0, x1, y1 = self.rect(name)
        self.move(int((x0 + x1) / 2), int((y0 + y1) / 2))
        double_click_here()
        time.sleep(0.3)

    def stop(self):
        """SIGTERM, which closes the window the normal way; fails unless it exits 0."""
        self.stopping = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                fail("the window did not close on SIGTERM")
        if self.proc.returncode != 0:
            fail("attnscope exited with %s" % self.proc.returncode)


_POSTMORTEM = None  # the hooks folder of the newest Session: fail() keeps its last frame there
_LIVE = None  # the newest Session: wait_for stops waiting when its window is gone


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    if _POSTMORTEM:  # ask the window for one more picture, for the post-mortem
        try:
            open(os.path.join(_POSTMORTEM, "capture.request"), "w").close()
            time.sleep(1.0)
            shutil.copy(os.path.join(_POSTMORTEM, "frame.ppm"), os.path.join(_POSTMORTEM, "failure.ppm"))
            print("last frame: " + os.path.join(_POSTMORTEM, "failure.ppm"), file=sys.stderr)
        except OSError:
            pass
    sys.exit(1)


def drive(exe, args, work, run, size="1280x800"):
    """Opens a window (attnscope ARGS at SIZE, no autosave, no restore offer), calls run(app), closes it the
    normal way (stop() fails unless it exits 0) and prints PASS: the set-up the window-driving tests share."""
    app = Session([exe, *args, "--size", size, "--no-autosave", "--no-restore"], work)
    try:
        run(app)
    finally:
        app.stop()
    print("PASS")


def frame_of(app):
    """The window's frame counter (its hooks' `frame` file, written every frame), or None."""
    if app is None or app.stopping or app.proc.poll() is not None:
        return None
    try:
        with open(os.path.join(app.hooks, "frame")) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def wait_for(pred, what, timeout=30.0, poll=0.05):
    """pred()'s first true value, polled every `poll` seconds. Fails at once when the window exits meanwhile, naming its
    exit code. Otherwise fails once `timeout` has passed both in seconds and in the window's frames (10 a second): a
    window slowed by a busy machine has drawn fewer, and is given the longer; at 4 × `timeout` seconds whatever the
    frames (a window that stopped drawing). A passing wait returns as soon as its state is reached."""
    t0 = time.time()
    app = _LIVE
    f0 = frame_of(app)
    while True:
        v = pred()
        if v:
            return v
        if app is not None and not app.stopping and app.proc.poll() is not None:
            v = pred()  # the state may have been written just before it exited
            if v:
                return v
            fail("attnscope exited with %s while the test waited for %s" % (app.proc.returncode, what))
        waited = time.time() - t0
        f = frame_of(app)
        frames = f - f0 if f is not None and f0 is not None else None
        if waited >= 4 * timeout or (waited >= timeout and (frames is None or frames >= timeout * 10)):
            break
        time.sleep(poll)
    fail("timed out waiting for %s (%.0f s, %s frames; load average %.1f on %d cores)"
         % (what, time.time() - t0, frames if frames is not None else "?", os.getloadavg()[0], os.cpu_count() or 1))


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_ppm(path):
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def read_png_rgb(path):
    """A PNG as an h×w×3 array; fails the test when the file is not a PNG."""
    try:
        with Image.open(path) as im:
            if im.format != "PNG":
                fail("%s: expected a PNG, got %s" % (path, im.format))
            return np.asarray(im.convert("RGB"))
    except OSError as e:
        fail("%s: cannot read the image (%s)" % (path, e))


def xdo(*args):
    subprocess.run(["xdotool", *map(str, args)], check=True)


def double_click_here():
    """Two presses where the pointer is, each down and up for two frames (wait_frames): within ImGui's double-click
    time (0.30 s of frames) while the window draws at least 14 frames a second; fixed 60 ms holds were lost within
    one frame under load."""
    for _ in range(2):
        xdo("mousedown", "1")
        wait_frames()
        xdo("mouseup", "1")
        wait_frames()


def wait_frames(n=2):
    """Waits until the window has drawn n frames after this call (its hooks' frame counter, written every frame).
    An input sent before it has been polled by at least n − 1 whole frames: ImGui 1.86 reads key and button state once
    a frame, so a press released before a frame polled it is lost (a fixed 150 ms hold was, in CI at a load of 2.9 on
    2 cores: the Return of e2e_model_text's Open text dialog). Two frames, not more: a key held past io.KeyRepeatDelay
    (0.275 s of frames) repeats (a Ctrl+Z held over slow frames undid twice)."""
    app = _LIVE
    start = frame_of(app)
    if start is None:
        return
    wait_for(lambda: (f := frame_of(app)) is None or f >= start + n, "%d frames (after frame %d)" % (n, start), poll=0.005)


def key(combo):
    """Presses a key as a person does, for ImGui 1.86 (key state polled once a frame): held 50 ms and two frames (seen,
    not repeated: wait_frames), then released for 100 ms and two frames."""
    xdo("keydown", combo)
    time.sleep(0.05)
    wait_frames()
    xdo("keyup", combo)
    time.sleep(0.1)
    wait_frames()


def type_into(app, field, text):
    """Clicks the text field `field` (its name in the layout), replaces its text with `text` and presses Return."""
    app.click(field)
    key("ctrl+a")
    xdo("type", "--delay", "10", text)
    key("Return")
