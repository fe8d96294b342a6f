"""Save transformer attention weights as an attnscope bundle and open them in attnscope.

A bundle (docs/bundle.md) is one safetensors file: a tensor ``attn.<layer>`` of shape heads × queries × keys per
layer, and the tokens in the header's ``__metadata__``. Safetensors metadata is a string → string map, so lists are
stored as JSON text::

    __metadata__ = {"attnscope_bundle": "1", "tokens": '["[CLS]", "hello", "[SEP]"]', "model": "bert-base-uncased"}

``save`` writes one, ``show`` writes one to a temporary file and starts the program on it, ``load`` reads one back.
Depends on numpy and safetensors only; a torch tensor is converted with ``x.detach().float().cpu().numpy()``
without importing torch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from typing import Any, Optional, Sequence

import numpy as np
from safetensors.numpy import save_file

__all__ = ["save", "show", "load", "FORMAT_VERSION"]
__version__ = "0.1.0"

FORMAT_VERSION = "1"  # metadata "attnscope_bundle"; the program refuses newer versions with a hint
_DTYPES = {"float16": np.float16, "float32": np.float32}


def _to_numpy(x: Any, where: str) -> np.ndarray:
    """An array of float32 from a NumPy array, a torch tensor (anything with .detach()) or nested lists."""
    if hasattr(x, "detach"):  # torch.Tensor (also on a GPU, or bfloat16): no torch import needed
        x = x.detach().float().cpu().numpy()
    try:
        a = np.asarray(x, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: expected an array of numbers, got {type(x).__name__} ({e})") from None
    return a


def _layers(attentions: Any) -> list[np.ndarray]:
    """The per-layer heads × queries × keys arrays of any accepted input, checked to agree."""
    if isinstance(attentions, (list, tuple)):
        if len(attentions) == 0:
            raise ValueError("attentions: empty; expected one array per layer (e.g. outputs.attentions)")
        out = []
        for i, x in enumerate(attentions):
            a = _to_numpy(x, f"attentions[{i}]")
            if a.ndim == 4:
                if a.shape[0] != 1:
                    raise ValueError(
                        f"attentions[{i}]: a batch of {a.shape[0]} (shape {tuple(a.shape)}); a bundle holds one "
                        f"sequence: pass [a[j:j+1] for a in attentions] for sequence j")
                a = a[0]
            elif a.ndim != 3:
                raise ValueError(
                    f"attentions[{i}]: expected heads × queries × keys or 1 × heads × queries × keys, "
                    f"got rank {a.ndim} (shape {tuple(a.shape)})")
            out.append(a)
    else:
        a = _to_numpy(attentions, "attentions")
        if a.ndim == 5:
            if a.shape[1] != 1:
                raise ValueError(
                    f"attentions: a batch of {a.shape[1]} (shape {tuple(a.shape)}, layers × batch × heads × queries "
                    f"× keys); a bundle holds one sequence: pass attentions[:, j] for sequence j")
            a = a[:, 0]
        elif a.ndim == 3:
            a = a[None]  # one layer
        elif a.ndim != 4:
            raise ValueError(
                f"attentions: expected layers × heads × queries × keys (rank 4), got rank {a.ndim} "
                f"(shape {tuple(a.shape)})")
        out = list(a)
    first = out[0].shape
    for i, a in enumerate(out):
        if a.shape != first:
            raise ValueError(
                f"attentions[{i}]: shape {tuple(a.shape)} (heads × queries × keys), expected {tuple(first)} as layer 0")
        if 0 in a.shape:
            raise ValueError(f"attentions[{i}]: shape {tuple(a.shape)} has an empty dimension")
    return out


def _strings(values: Any, name: str, expected: int, what: str) -> list[str]:
    if isinstance(values, str) or not hasattr(values, "__len__"):
        raise ValueError(f"{name}: expected a list of {expected} strings ({what}), got {type(values).__name__}")
    out = list(values)
    for i, v in enumerate(out):
        if not isinstance(v, str):
            raise ValueError(f"{name}[{i}]: expected a string, got {type(v).__name__} {v!r}")
    if len(out) != expected:
        raise ValueError(f"{name}: {len(out)} strings, expected {expected} ({what})")
    return out


def save(path: str | os.PathLike, attentions: Any, tokens: Sequence[str], key_tokens: Optional[Sequence[str]] = None,
         model: Optional[str] = None, layer_labels: Optional[Sequence[str]] = None,
         head_labels: Optional[Sequence[str]] = None, dtype: str = "float16") -> None:
    """Write an attnscope bundle.

    attentions: Hugging Face's ``outputs.attentions`` (a tuple of 1 × H × T × S tensors, one per layer), a list of
        H × T × S arrays, or one stacked array: L × H × T × S (TransformerLens style) or L × 1 × H × T × S.
        NumPy arrays, torch tensors (any device or dtype) or nested lists.
    tokens: the T query tokens. key_tokens: the S key tokens, required when S ≠ T.
    model: the model's name. layer_labels / head_labels: L / H strings shown instead of the numbers.
    dtype: "float16" (default; half the size) or "float32".

    Raises ValueError naming what disagrees (rank, batch > 1, layer shapes, token counts, NaN or Inf, a value
    that float16 cannot hold).
    """
    if dtype not in _DTYPES:
        raise ValueError(f"dtype: expected one of {', '.join(_DTYPES)}, got {dtype!r}")
    layers = _layers(attentions)
    H, T, S = layers[0].shape
    shape = f"attention is {len(layers)} layers × {H} heads × {T} queries × {S} keys"
    meta = {"attnscope_bundle": FORMAT_VERSION,
            "tokens": json.dumps(_strings(tokens, "tokens", T, f"one per query; the {shape}"), ensure_ascii=False)}
    if key_tokens is not None:
        meta["key_tokens"] = json.dumps(_strings(key_tokens, "key_tokens", S, f"one per key; the {shape}"),
                                        ensure_ascii=False)
    elif S != T:
        raise ValueError(f"key_tokens: required when keys differ from queries (the {shape})")
    if model is not None:
        if not isinstance(model, str):
            raise ValueError(f"model: expected a string, got {type(model).__name__}")
        meta["model"] = model
    if layer_labels is not None:
        meta["layer_labels"] = json.dumps(_strings(layer_labels, "layer_labels", len(layers), "one per layer"),
                                          ensure_ascii=False)
    if head_labels is not None:
        meta["head_labels"] = json.dumps(_strings(head_labels, "head_labels", H, "one per head"), ensure_ascii=False)
    tensors = {}
    for l, a in enumerate(layers):
        bad = ~np.isfinite(a)
        if bad.any():
            h, q, k = (int(v) for v in np.argwhere(bad)[0])
            raise ValueError(f"attentions: layer {l} head {h} query {q} key {k} is {a[h, q, k]} "
                             f"(attention weights must be finite)")
        if dtype == "float16" and np.abs(a).max() > np.finfo(np.float16).max:
            raise ValueError(f"attentions: layer {l} has values beyond float16's ±65504; save with dtype='float32'")
        tensors[f"attn.{l}"] = np.ascontiguousarray(a, dtype=_DTYPES[dtype])
    save_file(tensors, os.fspath(path), metadata=meta)


def load(path: str | os.PathLike) -> tuple[np.ndarray, dict]:
    """Read a bundle back: (L × H × T × S float32 array, metadata with the JSON lists decoded)."""
    from safetensors import safe_open

    with safe_open(os.fspath(path), framework="np") as f:
        raw = f.metadata() or {}
        names = sorted(f.keys(), key=lambda n: int(n.split(".", 1)[1]))
        arrays = [f.get_tensor(n).astype(np.float32) for n in names]
    arrays = [a[0] if a.ndim == 4 else a for a in arrays]
    meta = dict(raw)
    for key in ("tokens", "key_tokens", "layer_labels", "head_labels"):
        if key in meta:
            meta[key] = json.loads(meta[key])
    return np.stack(arrays), meta


def _program() -> str:
    exe = os.environ.get("ATTNSCOPE_BIN") or shutil.which("attnscope")
    if not exe:
        raise FileNotFoundError("attnscope: the program was not found; put it on PATH or set ATTNSCOPE_BIN to its path")
    return exe


def show(attentions: Any, tokens: Sequence[str], key_tokens: Optional[Sequence[str]] = None,
         model: Optional[str] = None, layer_labels: Optional[Sequence[str]] = None,
         head_labels: Optional[Sequence[str]] = None, dtype: str = "float16", wait: bool = False) -> subprocess.Popen:
    """Save to a temporary bundle and open it in attnscope (ATTNSCOPE_BIN, else `attnscope` on PATH).

    Takes what save() takes. Returns the program's Popen at once (wait=True waits for the window to close). The
    bundle stays in the temporary folder (the program reads it while it runs); its path is the Popen's args[1].
    """
    exe = _program()
    fd, path = tempfile.mkstemp(prefix="attnscope-", suffix=".attn.safetensors")
    os.close(fd)
    try:
        save(path, attentions, tokens, key_tokens=key_tokens, model=model, layer_labels=layer_labels,
             head_labels=head_labels, dtype=dtype)
    except BaseException:
        os.unlink(path)
        raise
    proc = subprocess.Popen([exe, path])
    if wait:
        proc.wait()
    return proc
