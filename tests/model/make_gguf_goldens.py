#!/usr/bin/env python3
"""Goldens for the GGUF reader and the GGML dequantizers (tests/model/test_gguf.cpp), made with gguf-py.

Writes, all small and committed:
  goldens/gguf_quants.json + .bin   for each supported type, a few blocks of random bytes (the half-float scale
                                    fields set to finite values of sane size) and gguf-py's dequantization of them
  data/gguf/tiny.gguf               a GGUF v3 file written by gguf-py's GGUFWriter: metadata of every value type
                                    (arrays of strings, typed arrays, a nested array) and tensors of several types
                                    and ranks, with general.alignment 64
  goldens/gguf_tiny.json            what gguf-py says that file holds, key by key and tensor by tensor
  goldens/smollm2_rows.json + .bin  when the SmolLM2 GGUF is given: its metadata facts the model code relies on, and
                                    a few rows of token_embd.weight (Q8_0) and blk.0.attn_q.weight (Q4_1) as
                                    gguf-py dequantizes them (the rows only, not the tensors)

Every supported type has a dequantizer in gguf-py 0.17.1 (gguf.quants.dequantize: F32/F16 directly, the others
through their classes), so no reference is reimplemented here.

Regenerate (reference venv with numpy and gguf; CI never runs this):
  /tmp/ref-venv/bin/python tests/model/make_gguf_goldens.py [--smollm2 PATH/SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import argparse
import json
import pathlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

HERE = pathlib.Path(__file__).resolve().parent
GOLD = HERE / "goldens"
DATA = HERE / "data" / "gguf"

# Byte offsets of the half-float scale fields in each block (ggml-common.h block_*).
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.IQ4_NL: [0], T.IQ4_XS: [0], T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
TYPES = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]
# Types supported later, whose blocks come from a generator of their own: the earlier types' random blocks and
# tiny.gguf stay byte for byte what they were.
LATER_TYPES = [T.IQ4_NL, T.IQ4_XS]


def random_blocks(rng, qtype, n_blocks):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    if qtype == T.F32:
        vals = (rng.standard_normal(n_blocks) * 10).astype(np.float32)
        vals[:4] = [0.0, -0.0, 1e-40, -3.0e38]  # a zero of each sign, a subnormal, a large value
        return vals.view(np.uint8).reshape(n_blocks, 4)
    if qtype in (T.F16, T.BF16):
        bits = raw.view(np.uint16).reshape(-1)
        exp_all_ones = 0x7C00 if qtype == T.F16 else 0x7F80
        # Finite values only (Inf/NaN are checked by hand in the C++ test): clear one exponent bit where all are set.
        bits = np.where((bits & exp_all_ones) == exp_all_ones, bits & ~np.uint16(exp_all_ones & -exp_all_ones), bits)
        return bits.astype(np.uint16).view(np.uint8).reshape(n_blocks, 2)
    for off in HALF_FIELDS[qtype]:
        scale = (rng.standard_normal(n_blocks) * 0.05).astype(np.float16)
        raw[:, off:off + 2] = scale.view(np.uint8).reshape(n_blocks, 2)
    return raw


def make_quant_goldens(rng, later_rng):
    entries, blob = [], bytearray()
    for qtype in TYPES + LATER_TYPES:
        block, _ = gguf.GGML_QUANT_SIZES[qtype]
        n_blocks = 4 if block == 256 else (8 if block == 32 else 64)
        src = random_blocks(rng if qtype in TYPES else later_rng, qtype, n_blocks)
        out = dequantize(src.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert out.size == n_blocks * block and np.all(np.isfinite(out)), qtype.name
        src_off = len(blob)
        blob += src.tobytes()
        out_off = len(blob)
        blob += out.astype("<f4").tobytes()
        entries.append({"type": qtype.name, "id": int(qtype), "n": int(out.size), "src_offset": src_off,
                        "src_bytes": int(src.size), "out_offset": out_off})
    (GOLD / "gguf_quants.bin").write_bytes(bytes(blob))
    (GOLD / "gguf_quants.json").write_text(json.dumps({"gguf_py": gguf_version(), "types": entries}, indent=1) + "\n")


def gguf_version():
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:  # noqa: BLE001
        return "unknown"


def make_tiny(rng):
    V = gguf.GGUFValueType
    path = DATA / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "tinyarch")
    w.add_custom_alignment(64)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 18000000000000000000)
    w.add_int64("t.i64", -9000000000000000000)
    w.add_float64("t.f64", 2.718281828459045)
    w.add_bool("t.true", True)
    w.add_bool("t.false", False)
    w.add_string("t.str", "h\u00e9llo \u2713 \u65e5\u672c \U0001F600")
    w.add_array("t.strs", ["a", "", "b c", "\u00fc"])
    w.add_array("t.ints", [1, -2, 3])  # int32
    w.add_key_value("t.u8s", [0, 255, 7], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("t.i64s", [-(2 ** 62), 5], V.ARRAY, sub_type=V.INT64)
    w.add_key_value("t.u64s", [2 ** 63 + 1], V.ARRAY, sub_type=V.UINT64)
    w.add_array("t.floats", [0.5, -1.25, 3.0])  # float32
    w.add_key_value("t.f64s", [1e-300, 2.5], V.ARRAY, sub_type=V.FLOAT64)
    w.add_array("t.bools", [True, False, True])
    nested = [[1, 2], [3, 4, 5]]
    w.add_array("t.nested", nested)

    tensors = {}

    def add_float(name, arr):  # F32 / F16 straight from NumPy (shape reversed in the file: ne0 = last axis)
        w.add_tensor(name, arr)
        tensors[name] = arr.astype(np.float32)

    def add_quant(name, qtype, shape):  # shape as NumPy sees it, last axis = ne0
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        n_blocks = int(np.prod(shape)) // block
        raw = random_blocks(rng, qtype, n_blocks).reshape(*shape[:-1], shape[-1] // block * size)
        w.add_tensor(name, raw, raw_dtype=qtype)
        tensors[name] = dequantize(raw, qtype).astype(np.float32) if qtype in TYPES + LATER_TYPES else None

    add_float("f32.2d", (rng.standard_normal((3, 4))).astype(np.float32))
    add_float("f32.4d", (rng.standard_normal((2, 3, 2, 2))).astype(np.float32))
    add_float("f16.2d", (rng.standard_normal((2, 8))).astype(np.float16))
    add_quant("bf16.1d", T.BF16, (5,))
    add_quant("q8_0.2d", T.Q8_0, (2, 64))
    add_quant("q4_0.2d", T.Q4_0, (3, 32))
    add_quant("q4_1.2d", T.Q4_1, (2, 32))
    add_quant("q5_0.1d", T.Q5_0, (64,))
    add_quant("q5_1.3d", T.Q5_1, (2, 2, 32))
    add_quant("q2_k.1d", T.Q2_K, (256,))
    add_quant("q3_k.1d", T.Q3_K, (256,))
    add_quant("q4_k.2d", T.Q4_K, (2, 256))
    add_quant("q5_k.1d", T.Q5_K, (256,))
    add_quant("q6_k.1d", T.Q6_K, (256,))
    add_quant("iq4_nl.1d", T.IQ4_NL, (32,))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # What gguf-py reads back: every field except the reader's own GGUF.* pseudo-fields.
    r = gguf.GGUFReader(str(path))
    meta = []
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        entry = {"key": key, "type": V(f.types[0]).name.lower()}
        if f.types[0] == V.ARRAY:
            entry["element_type"] = V(f.types[1]).name.lower()
        # gguf-py's reader flattens arrays of arrays ([1, 2, 3, 4, 5]); the golden keeps the structure written.
        entry["value"] = nested if key == "t.nested" else f.contents()
        meta.append(entry)
    infos = []
    for t in r.tensors:
        values = tensors[t.name].reshape(-1) if tensors[t.name] is not None else None
        infos.append({"name": t.name, "type": t.tensor_type.name, "dims": [int(d) for d in t.shape],
                      "offset": int(t.data_offset), "bytes": int(t.n_bytes),
                      "values": None if values is None else [float(v) for v in values]})
    (GOLD / "gguf_tiny.json").write_text(json.dumps({"gguf_py": gguf_version(), "version": 3, "alignment": 64,
                                                     "metadata": meta, "tensors": infos}, indent=1) + "\n")


def make_smollm2(path):
    r = gguf.GGUFReader(str(path))
    facts = {}
    for key in ["general.architecture", "llama.block_count", "llama.attention.head_count",
                "llama.attention.head_count_kv", "llama.embedding_length", "llama.feed_forward_length",
                "llama.rope.freq_base", "llama.attention.layer_norm_rms_epsilon", "llama.context_length",
                "tokenizer.ggml.model", "tokenizer.ggml.pre"]:
        facts[key] = r.fields[key].contents()
    facts["tokenizer.ggml.tokens.count"] = len(r.fields["tokenizer.ggml.tokens"].data)
    facts["tokenizer.ggml.token_type.count"] = len(r.fields["tokenizer.ggml.token_type"].data)
    facts["tokenizer.ggml.tokens[0..3]"] = r.fields["tokenizer.ggml.tokens"].contents()[:3]
    by_name = {t.name: t for t in r.tensors}
    rows, blob = [], bytearray()
    for name, picks in [("token_embd.weight", [0, 1, 504, 49151]), ("blk.0.attn_q.weight", [0, 1, 288, 575])]:
        t = by_name[name]
        for row in picks:
            vals = dequantize(np.ascontiguousarray(t.data[row]), t.tensor_type).astype("<f4").reshape(-1)
            rows.append({"tensor": name, "type": t.tensor_type.name, "dims": [int(d) for d in t.shape],
                         "row": row, "offset": len(blob), "n": int(vals.size)})
            blob += vals.tobytes()
    (GOLD / "smollm2_rows.bin").write_bytes(bytes(blob))
    (GOLD / "smollm2_rows.json").write_text(json.dumps({"gguf_py": gguf_version(), "facts": facts, "rows": rows},
                                                       indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2", type=pathlib.Path, help="SmolLM2-135M-Instruct.Q4_1.gguf (for smollm2_rows.*)")
    args = ap.parse_args()
    GOLD.mkdir(exist_ok=True)
    DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20250117)
    make_quant_goldens(rng, np.random.default_rng(20261128))
    make_tiny(rng)
    if args.smollm2:
        make_smollm2(args.smollm2)


if __name__ == "__main__":
    main()
