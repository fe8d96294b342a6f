#!/usr/bin/env python3
"""The desktop's file chooser from the window (issue 11), under Xvfb and dbus-run-session with a stand-in
xdg-desktop-portal (fake_portal): the file panel shows "Browse…" beside the path field because a portal can
answer; clicking it asks the portal (OpenFile), and the chosen file opens (as typed + Enter).
Without a portal (every other GUI test) the button is absent: e2e_select_drop.py uses the field alone.
"""
import os
import shutil
import signal
import subprocess
import sys

from e2e_common import Session, fail, parse_args, wait_for


def main():
    a = parse_args("--fake-portal")
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        fail("run this under dbus-run-session")
    chosen = os.path.join(a.work, "chosen session.json")  # a space: the portal's URI is percent-encoded
    shutil.copy(a.session, chosen)
    ready = os.path.join(a.work, "portal.ready")
    uri = "file://" + chosen.replace(" ", "%20")
    portal = subprocess.Popen([a.fake_portal, uri, ready], stdout=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: os.path.exists(ready) or portal.poll() is not None, "the stand-in portal")
        if portal.poll() is not None:
            fail("the stand-in portal exited with %s" % portal.returncode)
        stderr_path = os.path.join(a.work, "stderr.txt")
        with open(stderr_path, "w") as err:
            app = Session([a.exe, "--size", "1280x800", "--no-autosave", "--no-restore", "--open", "file"], a.work, stderr=err)
        try:
            app.wait_window(lambda l: "file/path" in l["rects"], "the file panel")
            app.click("file/path/browse")
            wait_for(lambda: ("opened " + chosen) in open(stderr_path).read(), "the chosen file to open")
            wait_for(lambda: "file/path" not in app.layout()["rects"], "the file panel to close after opening")
            print("Browse…: the file chosen in the portal's Open dialog opened: " + chosen)
        finally:
            app.stop()
    finally:
        portal.send_signal(signal.SIGTERM)
        out, _ = portal.communicate(timeout=20)
        print(out.strip())
        if "OpenFile 'Open session'" not in out:
            fail("the portal was not asked through OpenFile")
    print("PASS")


if __name__ == "__main__":
    main()
