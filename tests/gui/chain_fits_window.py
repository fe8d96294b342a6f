"""The chain's fit layout keeps every map in the window (issue 36's known layout bug): a decoder's head view
(SmolLM2 and Gemma 3 at ~150 tokens, nine and four heads, their concat and final output to the right of the heads
grid), a short decoder text, MiniLM at 56 tokens, a 1024-token session and the small presets, at 1280x800 and
900x600. Each case renders the window (--screenshot) with --test-hooks; its layout.json names the rectangles drawn:
  - every map's box (mapbox/..., else heatmap/...), colour bar (colorbar/...) and the heads grid (headsgrid/...)
    lies inside the chain panel (panel/chain): nothing runs off the right or bottom edge;
  - a map's colour bar starts right after the map's box (at most the item spacing, 8 px, from it) and level with
    its cells (its top within a pixel of theirs);
  - with several heads, the final column (concat, output) is drawn.
The decoders are skipped where their files are not installed (build/models), and the test says so.

usage: chain_fits_window.py --exe attnscope --repo SOURCE_DIR --models build/models --work DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

SIZES = ["1280x800", "900x600"]
SPACING = 8.0   # ImGui's ItemSpacing.x (panels/style.cpp keeps the default)
SLACK = 0.5     # rectangles are floats; half a pixel is rounding, not overflow

SMOLLM2 = "SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = "gemma-3-270m/gemma-3-270m-q4_k_m.gguf"
MINILM = "all-MiniLM-L6-v2"

# ~150 tokens of prose for the decoders (SmolLM2: 149 tokens, Gemma 3: 148).
LONG_TEXT = (
    "Mr and Mrs Dursley, of number four, Privet Drive, were proud to say that they were perfectly normal, thank you "
    "very much. They were the last people you'd expect to be involved in anything strange or mysterious, because "
    "they just didn't hold with such nonsense. Mr Dursley was the director of a firm called Grunnings, which made "
    "drills. He was a big, beefy man with hardly any neck, although he did have a very large moustache. Mrs Dursley "
    "was thin and blonde and had nearly twice the usual amount of neck. She spent much of her time craning over "
    "garden fences, spying on the neighbours. The Dursleys had a small son called Dudley.\n")
# 56 tokens for MiniLM (with [CLS] and [SEP]).
MINILM_TEXT = (
    "the quick brown fox jumps over the lazy dog while a small bird sings in the tall green tree near the old stone "
    "bridge that crosses the quiet river where children play every summer afternoon and their parents sit on wooden "
    "benches reading newspapers or talking softly under the warm sun until evening.")


def cases(a):
    """(name, arguments, needed file or None) for each case."""
    presets = os.path.join(a.repo, "assets", "presets")
    long_text = os.path.join(a.work, "long.txt")
    minilm_text = os.path.join(a.work, "minilm.txt")
    with open(long_text, "w") as f:
        f.write(LONG_TEXT)
    with open(minilm_text, "w") as f:
        f.write(MINILM_TEXT)
    large = os.path.join(a.work, "large1024.json")
    subprocess.run([sys.executable, os.path.join(a.repo, "tests", "gui", "make_large_session.py"), large, "1024"], check=True)
    smol, gemma, minilm = (os.path.join(a.models, p) for p in (SMOLLM2, GEMMA3, MINILM))
    return [
        ("smollm2_150", ["--model", smol, "--model-text-file", long_text, "--model-layer", "3"], smol),
        ("smollm2_short", ["--model", smol, "--model-text", "The cat sat on the mat.", "--model-layer", "3"], smol),
        ("gemma3_150", ["--model", gemma, "--model-text-file", long_text, "--model-layer", "3"], gemma),
        ("minilm_56", ["--model-dir", minilm, "--model-text-file", minilm_text, "--model-layer", "2"], minilm),
        ("large1024", [large], None),
        ("seed000", [os.path.join(presets, "seed000_worked_example.json")], None),
        ("seed003", [os.path.join(presets, "seed003_block_identity_heads.json")], None),
        ("causal_2heads", [os.path.join(presets, "causal_decoder_2heads.json")], None),
    ]


def inside(r, p):
    return r[0] >= p[0] - SLACK and r[1] >= p[1] - SLACK and r[2] <= p[2] + SLACK and r[3] <= p[3] + SLACK


def check(name, rects, heads_expected):
    """The failures of one window's layout, as lines."""
    bad = []
    panel = rects.get("panel/chain")
    if not panel:
        return ["no panel/chain rectangle"]
    maps = sorted({k.split("/", 1)[1] for k in rects if k.startswith("heatmap/")})
    if not maps:
        bad.append("no map drawn")
    for m in maps:
        box = rects.get("mapbox/" + m, rects["heatmap/" + m])
        if not inside(box, panel):
            bad.append("map %s %s runs out of the panel %s" % (m, fmt(box), fmt(panel)))
        cb = rects.get("colorbar/" + m)
        if cb is None:
            continue  # thumbnails have none
        if not inside(cb, panel):
            bad.append("colour bar of %s %s runs out of the panel %s" % (m, fmt(cb), fmt(panel)))
        gap = cb[0] - box[2]
        if gap < -SLACK or gap > SPACING + SLACK:
            bad.append("colour bar of %s starts %.0f px from its map's box (%s, bar %s): not next to it" % (m, gap, fmt(box), fmt(cb)))
        cells = rects["heatmap/" + m]
        if abs(cb[1] - cells[1]) > 1.0:
            bad.append("colour bar of %s starts at y %.0f, its cells at %.0f" % (m, cb[1], cells[1]))
    for k, r in rects.items():
        if k.startswith("headsgrid/") and not inside(r, panel):
            bad.append("%s %s runs out of the panel %s" % (k, fmt(r), fmt(panel)))
    if heads_expected and not ("heatmap/concat" in rects and "heatmap/output" in rects):
        bad.append("several heads, but no final column (concat, output) drawn")
    return bad


def fmt(r):
    return "[%.0f, %.0f, %.0f, %.0f]" % tuple(r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    failures, skipped, ran = [], [], 0
    for name, args, needed in cases(a):
        if needed and not os.path.exists(needed):
            skipped.append(name)
            continue
        for size in SIZES:
            tag = "%s_%s" % (name, size)
            hooks = os.path.join(a.work, tag + ".hooks")
            os.makedirs(hooks)
            cmd = [a.exe] + args + ["--size", size, "--frames", "8", "--no-autosave", "--no-restore",
                                    "--screenshot", os.path.join(a.work, tag + ".png"), "--test-hooks", hooks]
            p = subprocess.run(cmd, cwd=a.repo, capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                failures.append("%s: exit code %d: %s" % (tag, p.returncode, p.stderr.strip()[-400:]))
                continue
            with open(os.path.join(hooks, "layout.json")) as f:
                layout = json.load(f)
            rects = layout.get("rects", {})
            heads = sum(1 for k in rects if k.startswith("headsgrid/") and k[len("headsgrid/"):].isdigit())
            for line in check(tag, rects, heads > 1):
                failures.append("%s: %s" % (tag, line))
            ran += 1
    if skipped:
        print("skipped (model not installed under %s): %s" % (a.models, ", ".join(skipped)))
    for f in failures:
        print("FAIL " + f)
    print("%d windows checked, %d failures" % (ran, len(failures)))
    return 1 if failures or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
