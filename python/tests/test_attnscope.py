"""The attnscope Python package (python/attnscope): bundles written from NumPy and read back with safetensors,
the ValueErrors for what a bundle cannot hold, and (marker needs_program, ATTNSCOPE_BIN set) the program opening
them: render to PNG, export a head to .npy and compare, and its one-line refusals of bad bundles."""

import json
import os
import struct
import subprocess

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import attnscope


def softmax_maps(L, H, T, S, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((L, H, T, S)).astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def tokens(n, stem="t"):
    return [f"{stem}{i}" for i in range(n)]


def metadata(path):
    with safe_open(str(path), framework="np") as f:
        return f.metadata()


# Round trips ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, np_dtype", [("float32", np.float32), ("float16", np.float16)])
def test_stacked_array_round_trip(tmp_path, dtype, np_dtype):
    a = softmax_maps(3, 4, 5, 5)
    p = tmp_path / "b.safetensors"
    attnscope.save(p, a, tokens(5), model="tiny", layer_labels=["a", "b", "c"], head_labels=tokens(4, "h"), dtype=dtype)
    t = load_file(str(p))
    assert sorted(t) == ["attn.0", "attn.1", "attn.2"]
    for l in range(3):
        assert t[f"attn.{l}"].dtype == np_dtype
        assert t[f"attn.{l}"].shape == (4, 5, 5)
        np.testing.assert_array_equal(t[f"attn.{l}"], a[l].astype(np_dtype))
    m = metadata(p)
    assert m["attnscope_bundle"] == "1"
    assert json.loads(m["tokens"]) == tokens(5)
    assert "key_tokens" not in m
    assert m["model"] == "tiny"
    assert json.loads(m["layer_labels"]) == ["a", "b", "c"]
    assert json.loads(m["head_labels"]) == tokens(4, "h")
    back, meta = attnscope.load(p)
    np.testing.assert_array_equal(back, a.astype(np_dtype).astype(np.float32))
    assert meta["tokens"] == tokens(5)


def test_hugging_face_tuple_with_batch_and_key_tokens(tmp_path):
    a = softmax_maps(2, 3, 4, 6)
    hf = tuple(a[l][None] for l in range(2))  # outputs.attentions: one 1 × H × T × S per layer
    p = tmp_path / "hf.safetensors"
    attnscope.save(p, hf, tokens(4), key_tokens=tokens(6, "k"), dtype="float32")
    t = load_file(str(p))
    np.testing.assert_array_equal(t["attn.1"], a[1])
    assert json.loads(metadata(p)["key_tokens"]) == tokens(6, "k")


def test_layers_batch_heads_array_and_lists(tmp_path):
    a = softmax_maps(2, 2, 3, 3)
    attnscope.save(tmp_path / "five.safetensors", a[:, None], tokens(3), dtype="float32")  # L × 1 × H × T × S
    np.testing.assert_array_equal(load_file(str(tmp_path / "five.safetensors"))["attn.1"], a[1])
    attnscope.save(tmp_path / "list.safetensors", [x.tolist() for x in a], tokens(3), dtype="float32")
    np.testing.assert_array_equal(load_file(str(tmp_path / "list.safetensors"))["attn.0"], a[0])


def test_unicode_tokens_survive(tmp_path):
    p = tmp_path / "u.safetensors"
    toks = ["Ġthe", "猫", "\"q\"", "\n"]
    attnscope.save(p, softmax_maps(1, 1, 4, 4), toks)
    assert json.loads(metadata(p)["tokens"]) == toks


class FakeTorch:
    """Enough of a torch.Tensor for save(): .detach().float().cpu().numpy(), each step recorded."""

    def __init__(self, a, calls):
        self.a, self.calls = a, calls

    def detach(self):
        self.calls.append("detach")
        return self

    def float(self):
        self.calls.append("float")
        return FakeTorch(self.a.astype(np.float32), self.calls)

    def cpu(self):
        self.calls.append("cpu")
        return self

    def numpy(self):
        self.calls.append("numpy")
        return self.a


def test_torch_like_tensors_convert_without_torch(tmp_path):
    a = softmax_maps(2, 2, 3, 3)
    calls = []
    p = tmp_path / "t.safetensors"
    attnscope.save(p, tuple(FakeTorch(a[l][None].astype(np.float16), calls) for l in range(2)), tokens(3), dtype="float32")
    assert calls[:4] == ["detach", "float", "cpu", "numpy"]
    np.testing.assert_array_equal(load_file(str(p))["attn.1"], a[1].astype(np.float16).astype(np.float32))


# Refusals -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("attentions, kwargs, message", [
    (np.zeros((4, 4)), {}, "attentions: expected layers × heads × queries × keys (rank 4), got rank 2"),
    (np.zeros((2, 3, 1, 4, 4)), {}, "attentions: a batch of 3"),
    ((np.zeros((2, 1, 4, 4)),), {}, "attentions[0]: a batch of 2"),
    ((np.zeros((1, 4, 4)), np.zeros((4, 4))), {}, "attentions[1]: expected heads × queries × keys or 1 × heads × "
                                                 "queries × keys, got rank 2"),
    ((np.zeros((2, 4, 4)), np.zeros((2, 4, 5))), {}, "attentions[1]: shape (2, 4, 5) (heads × queries × keys), "
                                                    "expected (2, 4, 4) as layer 0"),
    ((), {}, "attentions: empty"),
    (np.zeros((1, 2, 5, 5)), {}, "tokens: 4 strings, expected 5 (one per query; the attention is 1 layers × 2 heads "
                                 "× 5 queries × 5 keys)"),
    (np.zeros((1, 2, 4, 6)), {}, "key_tokens: required when keys differ from queries"),
    (np.zeros((1, 2, 4, 6)), {"key_tokens": tokens(5)}, "key_tokens: 5 strings, expected 6"),
    (np.zeros((1, 2, 4, 4)), {"layer_labels": ["a", "b"]}, "layer_labels: 2 strings, expected 1"),
    (np.zeros((1, 2, 4, 4)), {"head_labels": ["a"]}, "head_labels: 1 strings, expected 2"),
    (np.zeros((1, 2, 4, 4)), {"dtype": "bfloat16"}, "dtype: expected one of float16, float32"),
    (np.full((1, 1, 4, 4), 1e6), {}, "beyond float16's ±65504"),
])
def test_refusals(tmp_path, attentions, kwargs, message):
    p = tmp_path / "bad.safetensors"
    with pytest.raises(ValueError) as e:
        attnscope.save(p, attentions, tokens(4), **kwargs)
    assert message in str(e.value)
    assert not p.exists()


def test_nan_is_named(tmp_path):
    a = softmax_maps(2, 3, 4, 4)
    a[1, 2, 3, 0] = np.nan
    with pytest.raises(ValueError, match=r"attentions: layer 1 head 2 query 3 key 0 is nan"):
        attnscope.save(tmp_path / "nan.safetensors", a, tokens(4))


def test_tokens_must_be_strings(tmp_path):
    with pytest.raises(ValueError, match=r"tokens\[1\]: expected a string, got int 7"):
        attnscope.save(tmp_path / "x.safetensors", np.zeros((1, 1, 2, 2)), ["a", 7])
    with pytest.raises(ValueError, match=r"tokens: expected a list of 2 strings"):
        attnscope.save(tmp_path / "x.safetensors", np.zeros((1, 1, 2, 2)), "ab")


def test_show_without_a_program(monkeypatch):
    monkeypatch.delenv("ATTNSCOPE_BIN", raising=False)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(FileNotFoundError, match="ATTNSCOPE_BIN"):
        attnscope.show(np.zeros((1, 1, 2, 2)), ["a", "b"])


def test_show_starts_the_program_and_returns(tmp_path, monkeypatch):
    # A stand-in program that records its argument: show() must return the Popen with the bundle it wrote.
    fake = tmp_path / "fake-attnscope"
    fake.write_text(f"#!/bin/sh\necho \"$1\" > {tmp_path / 'arg'}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("ATTNSCOPE_BIN", str(fake))
    a = softmax_maps(1, 2, 3, 3)
    proc = attnscope.show(a, tokens(3), wait=True)
    assert proc.returncode == 0
    bundle = (tmp_path / "arg").read_text().strip()
    assert bundle == proc.args[1] and bundle.endswith(".safetensors")
    np.testing.assert_array_equal(load_file(bundle)["attn.0"], a[0].astype(np.float16))
    os.unlink(bundle)


# The program (ATTNSCOPE_BIN) --------------------------------------------------------------------------------------

def run(*args):
    return subprocess.run([os.environ["ATTNSCOPE_BIN"], *map(str, args)], capture_output=True, text=True, timeout=120)


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])  # IHDR width, height


@pytest.mark.needs_program
def test_program_renders_the_model_view(tmp_path):
    p = tmp_path / "b.safetensors"
    attnscope.save(p, softmax_maps(3, 4, 6, 6), tokens(6))
    out = tmp_path / "mv.png"
    r = run("render", "--bundle", p, "--panel", "model-view", "-o", out)
    assert r.returncode == 0, r.stderr
    w, h = png_size(out)
    assert w > 0 and h > 0


@pytest.mark.needs_program
def test_program_exports_the_values_written(tmp_path):
    a = softmax_maps(2, 3, 5, 7, seed=3)
    p = tmp_path / "b.safetensors"
    attnscope.save(p, a, tokens(5), key_tokens=tokens(7, "k"), dtype="float32")
    out = tmp_path / "h.npy"
    r = run("export", "--bundle", p, "--layer", 0, "--head", 1, "-o", out)
    assert r.returncode == 0, r.stderr
    got = np.load(out)
    assert got.shape == (5, 7)
    np.testing.assert_allclose(got, a[0, 1], rtol=0, atol=1e-7)


def write_raw(path, tensors, meta):
    """A bundle save() would refuse, written straight with safetensors."""
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path), metadata=meta)


@pytest.mark.needs_program
@pytest.mark.parametrize("tensors, meta, message", [
    ({"attn.0": np.zeros((4, 4), np.float32)}, {"tokens": json.dumps(tokens(4))},
     "attn.0: expected rank 3 (heads × queries × keys) or 4 (1 × heads × queries × keys), got rank 2 (4 × 4)"),
    ({"attn.0": np.zeros((2, 5, 5), np.float32)}, {"tokens": json.dumps(tokens(4))},
     "__metadata__.tokens: 4 strings, expected 5"),
    ({"attn.0": np.zeros((2, 4, 4), np.float32), "attn.1": np.zeros((2, 4, 3), np.float32)},
     {"tokens": json.dumps(tokens(4))}, "attn.1: expected 2 × 4 × 4 (heads × queries × keys, as attn.0), got 2 × 4 × 3"),
    ({"attn.0": np.zeros((2, 4, 4), np.float32), "attn.2": np.zeros((2, 4, 4), np.float32)},
     {"tokens": json.dumps(tokens(4))}, "attn.1 is missing"),
    ({"attn.0": np.zeros((2, 4, 4), np.float32)}, {"tokens": "t0 t1 t2 t3"}, "__metadata__.tokens: not valid JSON"),
])
def test_program_refuses_bad_bundles(tmp_path, tensors, meta, message):
    p = tmp_path / "bad.safetensors"
    write_raw(p, tensors, meta)
    r = run("render", "--bundle", p, "--panel", "model-view", "-o", tmp_path / "x.png")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr
    assert str(p) in r.stderr
    assert not (tmp_path / "x.png").exists()


@pytest.mark.needs_program
def test_program_refuses_a_truncated_bundle(tmp_path):
    p = tmp_path / "cut.safetensors"
    attnscope.save(p, softmax_maps(1, 2, 4, 4), tokens(4))
    p.write_bytes(p.read_bytes()[:-3])
    r = run("export", "--bundle", p, "--layer", 0, "--head", 0, "-o", tmp_path / "x.npy")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "outside the data" in r.stderr
