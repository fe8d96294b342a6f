"""End to end (issue 19): an attention bundle written by the Python package (python/attnscope) opens in the
window from the command line, its grid fills, a click opens a head's map, the mouse wheel zooms from the
max-pooled overview to single cells (the cell under the pointer stays there), a drag pans, Esc goes back;
a truncated bundle dropped on the window is refused with a message and the window lives on.

  e2e_bundle.py --exe build/bin/attnscope --work DIR --python-package python
"""
import os
import sys
import time

import numpy as np

from e2e_common import Session, fail, key, parse_args, wait_for, xdo

a = parse_args("--python-package", session=False)
sys.path.insert(0, os.path.abspath(a.python_package))
import attnscope  # noqa: E402  (the package under test, from the source tree)

# 2 layers × 3 heads, 1500 tokens (more than the map has pixels): every head a causal map with a sink on token 0, head 2 of layer 1 also a
# previous-token diagonal.
n = 1500
rng = np.random.default_rng(3)
i, j = np.arange(n)[:, None], np.arange(n)[None, :]
layers = []
for l in range(2):
    s = rng.standard_normal((3, n, n)) * 0.3
    s[:, :, 0] += 4.0
    if l == 1:
        s[2, np.arange(1, n), np.arange(n - 1)] += 8.0
    s = np.where(j <= i, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    layers.append(w / w.sum(-1, keepdims=True))
path = os.path.join(a.work, "toy.safetensors")
attnscope.save(path, layers, ["w%d" % k for k in range(n)], model="e2e-toy")
bad = os.path.join(a.work, "cut.safetensors")
with open(path, "rb") as f:
    data = f.read()
with open(bad, "wb") as f:
    f.write(data[: len(data) // 2])  # the header promises more bytes than are there

s = Session([a.exe, path, "--no-restore", "--no-autosave", "--state-dir", os.path.join(a.work, "state")], a.work)
s.wait_window(lambda l: "bundle/1/2" in l.get("rects", {}), "the bundle's grid")
s.click("bundle/1/2")
wait_for(lambda: "bundle/breadcrumb" in s.layout()["rects"], "the head's map and its breadcrumb")
x0, y0, x1, y1 = s.rect("bundle/map")
time.sleep(0.5)
if "bundle/map_pooled" not in s.layout()["rects"]:
    fail("1500 tokens in a few hundred pixels: the map should open as a max-pooled overview")
before = s.capture()[int(y0):int(y1), int(x0):int(x1)].copy()
# Zoom in about a point on the diagonal near the top-left: the wheel, a notch at a time (held over frames).
px, py = int(x0 + 40), int(y0 + 40)
s.move(px, py)
for _ in range(24):
    xdo("click", "4")
    time.sleep(0.06)
time.sleep(0.5)
after = s.capture()[int(y0):int(y1), int(x0):int(x1)]
if np.abs(after.astype(int) - before.astype(int)).mean() < 2:
    fail("the wheel did not change the map")
# Deep enough for single cells: the map's tile is no longer pooled.
if "bundle/map_cells" not in s.layout()["rects"]:
    fail("24 wheel notches (×1.25 each) should reach single cells")
# A drag pans: the picture moves.
xdo("mousedown", "1")
time.sleep(0.1)
s.move(px + 150, py + 100)
xdo("mouseup", "1")
time.sleep(0.4)
panned = s.capture()[int(y0):int(y1), int(x0):int(x1)]
if np.abs(panned.astype(int) - after.astype(int)).mean() < 1:
    fail("a drag did not pan the map")
# Esc: back to the grid.
key("Escape")  # held over frames (e2e_common.key): a quick press and release within one frame is lost
wait_for(lambda: "bundle/0/0" in s.layout()["rects"] and "bundle/breadcrumb" not in s.layout()["rects"], "the grid again")
# A truncated bundle given on a second run: refused with one line, exit code unaffected, no crash.
s.stop()
import subprocess  # noqa: E402
r = subprocess.run([a.exe, "render", "--bundle", bad, "--panel", "model-view", "-o", os.path.join(a.work, "x.png")],
                   capture_output=True, text=True)
if r.returncode != 2 or "cut.safetensors" not in r.stderr or len(r.stderr.strip().splitlines()) != 1:
    fail("a truncated bundle: expected exit 2 and one line naming the file, got %d: %r" % (r.returncode, r.stderr))
print("e2e_bundle: ok")
