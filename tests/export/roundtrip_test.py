#!/usr/bin/env python3
"""Round trips between attnscope and NumPy, run by CTest with the venv python (numpy only).

usage: roundtrip_test.py ATTNSCOPE_EXE SOURCE_DIR

Checks, for every preset (and a column-layout copy of one):
  * `attnscope export -o X.npz` / `-o DIR/ --format npy|csv`: NumPy reads every array back, bit-equal to
    `attnscope compute` and to the session's inputs;
  * `attnscope import` from .npy / .npz / .safetensors (F32, F16, BF16, F64; written here by hand, following
    the safetensors format) with transpose, ranges and head slices;
  * `attnscope code --lang numpy`: the generated program reproduces `attnscope compute`;
  * `attnscope render -o F.svg`: the SVG parses and holds the token labels as text;
  * bad files and paths: exit code, one clear message, and no output file.
Exits non-zero with the first mismatches listed.
"""
import json
import os
import runpy
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import numpy as np

EXE, SRC = sys.argv[1], sys.argv[2]
PRESETS = os.path.join(SRC, "assets", "presets")
FAILURES = []


def check(ok, what):
    if not ok:
        FAILURES.append(what)
        print("FAIL:", what)


def run(*args, rc=0):
    p = subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120)
    check(p.returncode == rc, f"attnscope {' '.join(args)}: exit {p.returncode}, expected {rc}\n{p.stderr}")
    return p


def f32(x):
    return np.asarray(x, dtype=np.float32)


def same(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        check(False, f"{what}: shape {a.shape} vs {b.shape}")
        return
    if a.dtype == bool or b.dtype == bool:
        check(np.array_equal(a.astype(bool), b.astype(bool)), f"{what}: masks differ")
        return
    eq = np.array_equal(f32(a), f32(b))
    if not eq:
        d = np.abs(f32(a) - f32(b))
        check(False, f"{what}: not bit-equal, max diff {d.max()} at {np.unravel_index(d.argmax(), d.shape)}")


def close(a, b, what, atol, rtol):
    a, b = f32(a), f32(b)
    if a.shape != b.shape:
        check(False, f"{what}: shape {a.shape} vs {b.shape}")
        return
    bad = np.abs(a - b) > atol + rtol * np.abs(b)
    if bad.any():
        idx = np.argwhere(bad)[:3]
        check(False, f"{what}: {bad.sum()} mismatches, max diff {np.abs(a - b).max()}, first at {idx.tolist()}")


def column_copy(session_path, out_path):
    """The same session in column layout: every matrix transposed, vectors unchanged."""
    s = json.load(open(session_path))
    s["layout"] = "column"
    for k in ("X", "X_kv", "Wq", "Wk", "Wv", "Wo", "Q", "K", "V"):
        if k in s:
            s[k] = np.array(s[k]).T.tolist()
    if "additive" in s:
        for k in ("Wq", "Wk"):
            s["additive"][k] = np.array(s["additive"][k]).T.tolist()
    if "mask" in s and "custom" in s["mask"]:
        s["mask"]["custom"] = np.array(s["mask"]["custom"]).T.tolist()
    s["name"] = s.get("name", "") + " (column layout)"
    json.dump(s, open(out_path, "w"))


def grouped_copy(session_path, out_path, heads, kv_heads):
    """A row-layout session re-read as grouped-query attention: its projections split into `heads` query heads,
    and only the first `kv_heads` heads' worth of W^K / W^V (and biases) kept, shared by groups of query heads."""
    s = json.load(open(session_path))
    assert s.get("layout", "row") == "row" and s.get("mode", "self") != "direct"
    s["heads"], s["kv_heads"] = heads, kv_heads
    for w, b in (("Wk", "bk"), ("Wv", "bv")):
        width = np.array(s[w]).shape[1] // heads * kv_heads
        s[w] = np.array(s[w])[:, :width].tolist()
        if b in s:
            s[b] = s[b][:width]
    s["name"] = s.get("name", "") + f" ({heads} query heads, {kv_heads} KV heads)"
    json.dump(s, open(out_path, "w"))


# ---- export: npz / npy / csv against compute --------------------------------------------------------------
def check_export(session, tmp):
    name = os.path.basename(session)
    result = json.loads(run("compute", session).stdout)
    sess = json.load(open(session))
    npz = os.path.join(tmp, "all.npz")
    run("export", session, "-o", npz)
    data = np.load(npz)  # no pickle: plain numeric arrays only
    for h, head in enumerate(result["heads"]):
        for key in ("Q", "K", "V", "scores", "weights", "output", "masked"):
            same(data[f"h{h}_{key}"], head[key], f"{name}: npz h{h}_{key}")
        check(data[f"h{h}_weights"].dtype == np.float32, f"{name}: weights dtype {data[f'h{h}_weights'].dtype}")
        check(data[f"h{h}_masked"].dtype == bool, f"{name}: masked dtype {data[f'h{h}_masked'].dtype}")
    same(data["concat"], result["concat"], f"{name}: npz concat")
    same(data["output"], result["output"], f"{name}: npz output")
    for key in ("X", "X_kv", "Wq", "Wk", "Wv", "Wo", "Q", "K", "V", "bq", "bk", "bv", "bo"):
        if key in sess:
            same(data[key], f32(sess[key]), f"{name}: npz input {key}")
    for fmt in ("npy", "csv"):
        d = os.path.join(tmp, fmt) + "/"
        run("export", session, "-o", d, "--format", fmt)
        for key in data.files:
            path = os.path.join(d, key + "." + fmt)
            if fmt == "npy":
                arr = np.load(path)
            else:
                arr = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
                if data[key].ndim == 1:
                    arr = arr.reshape(-1)
            same(arr, data[key], f"{name}: {fmt} {key}")


# ---- import: npy / npz / safetensors -----------------------------------------------------------------------
def write_safetensors(path, tensors):
    """tensors: name -> (dtype string, numpy array); written per the safetensors format by hand."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        if dtype == "BF16":
            raw = (np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            raw = np.ascontiguousarray(arr, dtype={"F32": "<f4", "F16": "<f2", "F64": "<f8"}[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def imported(path, slot):
    return f32(json.load(open(path))[slot])


def check_import(tmp):
    session = os.path.join(PRESETS, "seed004_translation_cross.json")  # 1 head, d_model = d_k = 8
    rng = np.random.default_rng(4)
    E = 8
    out = os.path.join(tmp, "new.json")

    w = rng.standard_normal((E, E)).astype(np.float32)
    np.save(os.path.join(tmp, "w.npy"), w)
    run("import", session, "--slot", "Wq", "--from", os.path.join(tmp, "w.npy"), "-o", out)
    same(imported(out, "Wq"), w, "import .npy Wq")

    np.savez(os.path.join(tmp, "m.npz"), first=w * 2, second=w * 3)
    run("import", session, "--slot", "Wk", "--from", os.path.join(tmp, "m.npz"), "--tensor", "second", "-o", out)
    same(imported(out, "Wk"), w * 3, "import .npz Wk (by name)")
    np.savez_compressed(os.path.join(tmp, "c.npz"), x=w)
    run("import", session, "--slot", "Wq", "--from", os.path.join(tmp, "c.npz"), "--tensor", "x", "-o", out)
    same(imported(out, "Wq"), w, "import compressed .npz")

    # A PyTorch-style fused in_proj weight of a 2-head layer with head width 8: (3·16)×8, out×in.
    wq2, wk2, wv2 = (rng.standard_normal((E, 2 * E)).astype(np.float32) for _ in range(3))
    fused = np.concatenate([wq2.T, wk2.T, wv2.T], axis=0)
    st = os.path.join(tmp, "model.safetensors")
    write_safetensors(st, {
        "attn.in_proj_weight": ("F32", fused),
        "half": ("F16", w.astype(np.float16)),
        "brain": ("BF16", w),
        "double": ("F64", w.astype(np.float64) / 3),
        "wide": ("F32", rng.standard_normal((E, 12)).astype(np.float32)),
    })
    run("import", session, "--slot", "Wq", "--from", st, "--tensor", "attn.in_proj_weight", "--transpose",
        "--cols", "0:16", "--head", "1", "--heads", "2", "-o", out)
    same(imported(out, "Wq"), wq2[:, 8:16], "safetensors: head 1 of W^Q out of a fused QKV weight")
    run("import", session, "--slot", "Wk", "--from", st, "--tensor", "attn.in_proj_weight", "--transpose",
        "--cols", "16:32", "--head", "0", "--heads", "2", "-o", out)
    same(imported(out, "Wk"), wk2[:, 0:8], "safetensors: head 0 of W^K")
    run("import", session, "--slot", "Wq", "--from", st, "--tensor", "half", "-o", out)
    same(imported(out, "Wq"), w.astype(np.float16).astype(np.float32), "safetensors F16")
    run("import", session, "--slot", "Wq", "--from", st, "--tensor", "brain", "-o", out)
    bf = ((w.view(np.uint32) >> 16) << 16).view(np.float32)
    same(imported(out, "Wq"), bf, "safetensors BF16")
    run("import", session, "--slot", "Wq", "--from", st, "--tensor", "double", "-o", out)
    same(imported(out, "Wq"), (w.astype(np.float64) / 3).astype(np.float32), "safetensors F64")
    run("import", session, "--slot", "Wq", "--from", st, "--tensor", "wide", "--cols", "2:10", "-o", out)
    same(imported(out, "Wq"), json.load(open(out))["Wq"], "safetensors column range (self-consistency)")
    lst = run("import", "--list", st).stdout
    check("attn.in_proj_weight  float32  (48, 8)" in lst and "brain  bfloat16  (8, 8)" in lst, f"--list output:\n{lst}")

    # Bad input: one clear line, exit 2, and the output file is not created.
    def bad(args, message):
        target = os.path.join(tmp, "never.json")
        p = run("import", session, *args, "-o", target, rc=2)
        check(message in p.stderr, f"import {args}: expected '{message}' in stderr, got: {p.stderr}")
        check(not os.path.exists(target), f"import {args}: wrote {target} despite the error")

    raw = open(os.path.join(tmp, "w.npy"), "rb").read()
    open(os.path.join(tmp, "cut.npy"), "wb").write(raw[:-10])
    bad(["--slot", "Wq", "--from", os.path.join(tmp, "cut.npy")], "needs 256 (file truncated?)")
    bad(["--slot", "Wq", "--from", st, "--tensor", "wide"], "after importing Wq (8×12): Wk: expected width H·d_k = 12")
    bad(["--slot", "Wq", "--from", st, "--tensor", "nope"], "no tensor 'nope' (it has: attn.in_proj_weight, half, brain, double, wide)")
    bad(["--slot", "Wq", "--from", os.path.join(tmp, "m.npz")], "--tensor NAME is required")
    bad(["--slot", "Wz", "--from", os.path.join(tmp, "w.npy")], "unknown slot 'Wz'")
    open(os.path.join(tmp, "junk.safetensors"), "wb").write(b"\xff" * 64)
    bad(["--slot", "Wq", "--from", os.path.join(tmp, "junk.safetensors"), "--tensor", "x"], "bytes is absurd")
    ints = np.arange(64, dtype=np.complex64).reshape(8, 8)
    np.save(os.path.join(tmp, "cplx.npy"), ints)
    bad(["--slot", "Wq", "--from", os.path.join(tmp, "cplx.npy")], "dtype '<c8' is not supported")


def check_export_errors(tmp):
    session = os.path.join(PRESETS, "seed000_worked_example.json")
    target = os.path.join(tmp, "no", "such", "dir", "x.npz")
    p = run("export", session, "-o", target, rc=3)  # exit code 3: the output could not be written
    check("cannot write" in p.stderr, f"export to a missing folder: {p.stderr}")
    # An existing file is left untouched when the export fails (here: an unknown extension).
    keep = os.path.join(tmp, "keep.bin")
    open(keep, "wb").write(b"precious")
    run("export", session, "-o", keep, rc=2)
    check(open(keep, "rb").read() == b"precious", "a failed export changed an existing file")
    left = [f for f in os.listdir(tmp) if ".tmp-" in f]
    check(not left, f"temporary files left behind: {left}")


# ---- code: the generated NumPy program against compute -----------------------------------------------------
def check_code(session, tmp):
    name = os.path.basename(session)
    result = json.loads(run("compute", session).stdout)
    prog = os.path.join(tmp, "snippet.py")
    run("code", session, "--lang", "numpy", "-o", prog)
    g = runpy.run_path(prog, run_name="attnscope_snippet")
    # float32 on both sides with different summation orders (BLAS vs Eigen); widths ≤ 16 here, so the
    # rounding differences stay near 1e-6 relative. 1e-5 abs + 1e-4 rel leaves margin for exp() in softmax.
    atol, rtol = 1e-5, 1e-4
    for h, head in enumerate(result["heads"]):
        for key in ("Q", "K", "V", "scores", "weights", "output"):
            close(g["per_head"][h][key], head[key], f"{name}: code h{h} {key}", atol, rtol)
        same(g["per_head"][h]["masked"], head["masked"], f"{name}: code h{h} masked")
    close(g["output"], result["output"], f"{name}: code output", atol, rtol)
    torch_src = run("code", session, "--lang", "torch").stdout
    try:
        compile(torch_src, name + " (torch)", "exec")
    except SyntaxError as e:
        check(False, f"{name}: the PyTorch program does not parse: {e}")
    check("torch.softmax" in torch_src, f"{name}: the PyTorch program does not use torch.softmax")


# ---- render: the SVG parses and has the labels as text ------------------------------------------------------
def check_svg(session, tmp):
    sess = json.load(open(session))
    svg = os.path.join(tmp, "f.svg")
    run("render", session, "-o", svg, "--panel", "weights", "--head", "all")
    root = ET.parse(svg).getroot()
    texts = {"".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")}
    tokens = sess.get("tokens", [])
    labels = tokens if isinstance(tokens, list) else tokens.get("query", []) + tokens.get("key", [])
    for t in labels:
        check(t in texts, f"{os.path.basename(session)}: token '{t}' not among the SVG's text elements")


def main():
    with tempfile.TemporaryDirectory(prefix="attnscope_roundtrip_") as tmp:
        sessions = sorted(os.path.join(PRESETS, f) for f in os.listdir(PRESETS) if f.endswith(".json"))
        col = os.path.join(tmp, "column_layout.json")
        column_copy(os.path.join(PRESETS, "causal_decoder_2heads.json"), col)
        sessions.append(col)
        # Grouped-query attention (kv_heads): 4 query heads over 2 KV heads and over 1 (multi-query), and the
        # first in column layout.
        for kv in (2, 1):
            gqa = os.path.join(tmp, f"grouped_kv{kv}.json")
            grouped_copy(os.path.join(PRESETS, "causal_decoder_2heads.json"), gqa, 4, kv)
            sessions.append(gqa)
        gqa_col = os.path.join(tmp, "grouped_kv2_column.json")
        column_copy(os.path.join(tmp, "grouped_kv2.json"), gqa_col)
        sessions.append(gqa_col)
        for s in sessions:
            check_export(s, tmp)
            check_code(s, tmp)
            check_svg(s, tmp)
        check_import(tmp)
        check_export_errors(tmp)
    print(f"{len(FAILURES)} failure(s)" if FAILURES else "all round trips passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
