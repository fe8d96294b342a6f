"""The fit layout serves the attention map (issue 11): at 900x600, 1280x800 and 1600x1000, with the seed 004
translation preset and the causal 2-head preset, the current head's weights and output maps lie whole inside
the window (no scrolling needed), and the weights' viridis covers at least 5% of the window's pixels.

Each case renders the window (--screenshot) with --test-hooks, whose layout.json names the maps' rectangles.
Viridis pixels: those within 8 levels (per channel) of the viridis polyline, the colormap core draws with
(core/src/colormap.cpp); text printed in cells is not counted, so the share is slightly underestimated.

usage: fit_coverage.py --exe attnscope --presets assets/presets --work DIR
"""
import json
import os
import subprocess
import sys

import numpy as np
from PIL import Image

from e2e_common import parse_args

VIRIDIS = [0x440154, 0x482878, 0x3E4989, 0x31688E, 0x26828E, 0x1F9E89, 0x35B779, 0x6ECE58, 0xB5DE2B, 0xFDE725]
SIZES = [(900, 600), (1280, 800), (1600, 1000)]
PRESETS = ["seed004_translation_cross", "causal_decoder_2heads"]
MIN_SHARE = 0.05


def viridis_lut(n=1024):
    stops = np.array([[(c >> 16) & 255, (c >> 8) & 255, c & 255] for c in VIRIDIS], dtype=float)
    t = np.linspace(0, len(stops) - 1, n)
    i = np.minimum(t.astype(int), len(stops) - 2)
    f = (t - i)[:, None]
    return np.round(stops[i] + (stops[i + 1] - stops[i]) * f).astype(int)


def viridis_mask(img, tol=8):
    """True where a pixel is a viridis colour (max channel difference <= tol to some LUT entry)."""
    lut = viridis_lut()
    px = img.reshape(-1, 3).astype(int)
    # Quantise to unique colours first: a screenshot has few thousand of them.
    uniq, inv = np.unique(px, axis=0, return_inverse=True)
    d = np.abs(uniq[:, None, :] - lut[None, :, :]).max(axis=2).min(axis=1)
    return (d <= tol)[inv.reshape(-1)].reshape(img.shape[:2])


def main():
    a = parse_args("--presets", session=False)
    failures = []
    for preset in PRESETS:
        for w, h in SIZES:
            name = "%s_%dx%d" % (preset, w, h)
            hooks = os.path.join(a.work, name)
            os.makedirs(hooks)
            png = os.path.join(a.work, name + ".png")
            # 8 frames: the hooks write layout.json every 3 frames.
            r = subprocess.run([a.exe, os.path.join(a.presets, preset + ".json"), "--size", "%dx%d" % (w, h),
                                "--frames", "8", "--no-autosave", "--no-restore", "--screenshot", png,
                                "--test-hooks", hooks], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append("%s: attnscope exited %d: %s" % (name, r.returncode, r.stderr))
                continue
            with open(os.path.join(hooks, "layout.json")) as f:
                rects = json.load(f)["rects"]
            with Image.open(png) as im:
                img = np.asarray(im.convert("RGB"))
            if img.shape[:2] != (h, w):
                failures.append("%s: screenshot is %dx%d" % (name, img.shape[1], img.shape[0]))
                continue
            heads = [k for k in rects if k.startswith("heatmap/weights/")]
            if len(heads) != 1:
                failures.append("%s: expected the current head's weights alone, got %s" % (name, heads))
                continue
            head = heads[0].rsplit("/", 1)[1]
            for m in ("heatmap/weights/" + head, "heatmap/headout/" + head):
                x0, y0, x1, y1 = rects.get(m, (0, 0, 0, 0))
                # Whole inside the window, above the status bar (24 px).
                if not (x1 > x0 and y1 > y0 and x0 >= 0 and y0 >= 0 and x1 <= w and y1 <= h - 24):
                    failures.append("%s: %s at %s is not whole in the %dx%d window" % (name, m, rects.get(m), w, h))
            share = float(viridis_mask(img).mean())
            x0, y0, x1, y1 = (int(round(v)) for v in rects["heatmap/weights/" + head])
            in_map = float(viridis_mask(img[y0:y1, x0:x1]).sum()) / (w * h)
            print("%-40s viridis %.1f%% of the window (%.1f%% inside the current weights map)"
                  % (name, share * 100, in_map * 100))
            if in_map < MIN_SHARE:
                failures.append("%s: the weights map's viridis covers %.2f%% of the window, expected >= %.0f%%"
                                % (name, in_map * 100, MIN_SHARE * 100))
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    if failures:
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
