"""Writes the bundles the C++ tests and the fuzzer read (docs/bundle.md), with the Python package (python/) and
safetensors, so that the C++ reader is checked against the writer users run:

  tests/model/data/bundle/python_f16.safetensors   attnscope.save: 2 layers × 3 heads × 4 queries × 5 keys, F16,
                                                   key_tokens, model, labels; values cell(l, h, i, j) below, which
                                                   tests/model/test_bundle.cpp recomputes
  tests/fuzz/corpus/bundle/*.safetensors           tiny valid bundles (F32, F16, BF16 with a batch of 1) and
                                                   broken ones (token count, layer gap, NaN, truncated, lying header)

Run from the repository root with the build venv after `pip install --no-build-isolation ./python`:
  build/venv/bin/python3 tests/model/make_bundle_data.py
"""

import json
import pathlib
import struct

import numpy as np
from safetensors.numpy import save_file

import attnscope

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests/model/data/bundle"
CORPUS = ROOT / "tests/fuzz/corpus/bundle"


def cell(l, h, i, j):
    """As test_bundle.cpp's cell(): n/128 with n < 97, exact in F16 and BF16."""
    return ((l * 31 + h * 17 + i * 5 + j * 3) % 97) / 128.0


def maps(L, H, T, S):
    a = np.zeros((L, H, T, S), np.float32)
    for idx in np.ndindex(a.shape):
        a[idx] = cell(*idx)
    return a


def toks(n, stem="t"):
    return [f"{stem}{i}" for i in range(n)]


def bf16_bundle(path, a, meta):
    """safetensors.numpy has no bfloat16: the file laid out by hand (8-byte size, header padded to 8, data)."""
    header, data = {}, b""
    for l in range(a.shape[0]):
        raw = (a[l][None].view(np.uint32) >> 16).astype("<u2").tobytes()  # exact: the values fit in 8 bits
        header[f"attn.{l}"] = {"dtype": "BF16", "shape": [1, *a.shape[1:]], "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


def main():
    DATA.mkdir(parents=True, exist_ok=True)
    CORPUS.mkdir(parents=True, exist_ok=True)
    attnscope.save(DATA / "python_f16.safetensors", maps(2, 3, 4, 5), toks(4), key_tokens=toks(5, "k"),
                   model="tiny-model", layer_labels=["L0", "L1"], head_labels=["a", "b", "c"])

    attnscope.save(CORPUS / "valid_f32.safetensors", maps(2, 2, 3, 3), toks(3), dtype="float32")
    attnscope.save(CORPUS / "valid_f16_keys.safetensors", maps(1, 2, 2, 3), toks(2), key_tokens=toks(3, "k"),
                   model="m", head_labels=["x", "y"])
    bf16_bundle(CORPUS / "valid_bf16_batch.safetensors", maps(2, 1, 3, 3),
                {"tokens": json.dumps(toks(3)), "layer_labels": json.dumps(["p", "q"])})
    one = {"tokens": json.dumps(toks(3))}
    save_file({"attn.0": maps(1, 2, 3, 3)[0]}, str(CORPUS / "bad_token_count.safetensors"),
              metadata={"tokens": json.dumps(toks(2))})
    save_file({"attn.0": maps(1, 1, 3, 3)[0], "attn.2": maps(1, 1, 3, 3)[0]}, str(CORPUS / "bad_gap.safetensors"),
              metadata=one)
    nan = maps(1, 1, 3, 3)[0]
    nan[0, 2, 1] = np.nan
    save_file({"attn.0": nan}, str(CORPUS / "bad_nan.safetensors"), metadata=one)
    good = (CORPUS / "valid_f32.safetensors").read_bytes()
    (CORPUS / "bad_truncated.safetensors").write_bytes(good[:-5])
    n = struct.unpack("<Q", good[:8])[0]
    lying = good[8:8 + n].replace(b"[2,3,3]", b"[2,9,3]")
    assert lying != good[8:8 + n]
    (CORPUS / "bad_lying_header.safetensors").write_bytes(good[:8] + lying + good[8 + n:])


if __name__ == "__main__":
    main()
