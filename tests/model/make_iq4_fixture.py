#!/usr/bin/env python3
"""Writes tests/model/data/tiny_llama_iq4nl.gguf: tiny_llama.gguf with every 2-D weight as IQ4_NL (the model-level
fixture of the IQ4 formats; test_weight_matrix.cpp runs it on the quantized views and on their float32 copy).

IQ4_NL has no quantizer in gguf-py 0.17.1, so this one is plain: per block of 32, the scale puts the largest |w|
on the level −127, and each weight takes its nearest level. The file only has to be a valid IQ4_NL file (gguf-py
reads it back, and its dequantization is checked against the weights it came from); llama.cpp's quantizer
searches scales for a smaller error, which does not matter here.

Regenerate (reference venv with numpy and gguf==0.17.1; CI never runs this):
  /tmp/ref-venv/bin/python tests/model/make_iq4_fixture.py
"""
import pathlib

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

DATA = pathlib.Path(__file__).resolve().parent / "data"
LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32)


def iq4_nl(x):
    """(rows, cols) float32, cols a multiple of 32 → (rows, cols / 32 · 18) uint8 blocks: half d, 16 bytes of
    nibbles (element j in the low nibble of byte j, element j + 16 in the high one)."""
    b = x.reshape(-1, 32)
    big = np.take_along_axis(b, np.abs(b).argmax(-1)[:, None], -1)[:, 0]
    d = (big / -127.0).astype(np.float16)
    df = d.astype(np.float32)
    scaled = np.where(df[:, None] != 0, b / np.where(df == 0, 1, df)[:, None], 0)
    idx = np.abs(scaled[..., None] - LEVELS).argmin(-1).astype(np.uint8)
    packed = (idx[:, :16] | (idx[:, 16:] << 4)).astype(np.uint8)
    return np.concatenate([d.view(np.uint8).reshape(-1, 2), packed], 1).reshape(x.shape[0], -1)


def main():
    r = gguf.GGUFReader(str(DATA / "tiny_llama.gguf"))
    w = gguf.GGUFWriter(str(DATA / "tiny_llama_iq4nl.gguf"), r.fields["general.architecture"].contents())
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, f.contents(), f.types[0], sub_type=f.types[1])
        else:
            w.add_key_value(key, f.contents(), f.types[0])
    for t in r.tensors:
        shape = [int(s) for s in reversed(t.shape)]  # NumPy order: the last axis is ne0
        x = np.array(t.data, dtype=np.float32).reshape(shape)
        if len(shape) != 2 or shape[-1] % 32:
            w.add_tensor(t.name, x)
            continue
        raw = iq4_nl(x)
        back = dequantize(raw, T.IQ4_NL).reshape(shape)
        assert np.linalg.norm(back - x) <= 0.2 * np.linalg.norm(x), t.name  # a 4-bit code's error, not garbage
        w.add_tensor(t.name, raw, raw_dtype=T.IQ4_NL)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
