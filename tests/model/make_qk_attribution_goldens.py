"""Makes tests/model/goldens/qk_attribution_smollm2.json, the golden of test_qk_attribution.cpp's SmolLM2 induction
case: "why does the induction head attend from the second ' Privet' to ' Drive'?", computed independently of
attnscope in NumPy (float64) over gguf-py's dequantization of SmolLM2-135M-Instruct Q4_1.

  forward   a plain llama forward (RMSNorm, RoPE with Hugging Face's rotate-half pairing after undoing llama.cpp's Q/K
            row permutation, grouped-query attention, SwiGLU), keeping every layer's residual stream, each head's
            context (o_proj's input) and attention weights
  heads     previous-token score of a head = mean over queries i ≥ 1 of w[i][i−1]; induction score = mean over
            queries with an earlier copy of their token of the weight on the tokens after those copies (as
            attnscope's --head-types); the induction head is the one with the highest induction score
  cell      query = the last token (the second ' Privet''s last piece 'et'), key = the first
            ' Drive'; the components of the layer's
            residual stream (embed; per earlier layer its heads' context·W^O rows, and the MLP's output), each through
            the RMSNorm frozen at the position's 1/rms, γ, the head's W^Q / W^K columns and RoPE at its position;
            query_components[c] = scale·q^(c)·k, key_components[c] = scale·q·k^(c)

The tokenizer is transformers' reading of the GGUF (as make_decoder_goldens.py), without special tokens (the GGUF
adds no BOS). CI never runs this; regenerate with
  /tmp/ref-venv/bin/python tests/model/make_qk_attribution_goldens.py --gguf PATH/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import json
import pathlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent
TEXT = "Mr and Mrs Dursley of number four Privet Drive. Mr and Mrs Dursley of number four Privet"


def load(path):
    import gguf
    r = gguf.GGUFReader(path)

    def field(k):
        f = r.fields[k]
        return f.parts[f.data[0]].tolist()[0]
    cfg = {"L": field("llama.block_count"), "H": field("llama.attention.head_count"),
           "Hkv": field("llama.attention.head_count_kv"), "M": field("llama.embedding_length"),
           "theta": field("llama.rope.freq_base"), "eps": field("llama.attention.layer_norm_rms_epsilon")}
    cfg["D"] = cfg["M"] // cfg["H"]

    def unpermute(w, heads):
        # llama.cpp's converter put Hugging Face's row (h, half, i) at (h, i, half); undo it.
        return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    w = {}
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        a = a.reshape([int(x) for x in reversed(t.shape)]) if len(t.shape) > 1 else a.reshape(-1)
        if t.name.endswith("attn_q.weight"):
            a = unpermute(a, cfg["H"])
        if t.name.endswith("attn_k.weight"):
            a = unpermute(a, cfg["Hkv"])
        w[t.name] = a
    return cfg, w


def rope(x, pos, cfg):
    """x: (..., D) at positions pos (n,) as rows of x's leading axis."""
    D = cfg["D"]
    inv = (1.0 / cfg["theta"] ** (np.arange(0, D, 2, dtype=np.float64) / D))
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)
    a, b = x[..., : D // 2], x[..., D // 2:]
    shape = (len(pos),) + (1,) * (x.ndim - 2) + (D // 2,)
    cos, sin = cos.reshape(shape), sin.reshape(shape)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def forward(cfg, w, ids):
    L, H, Hkv, D, eps = cfg["L"], cfg["H"], cfg["Hkv"], cfg["D"], cfg["eps"]
    n = len(ids)
    pos = np.arange(n)
    x = w["token_embd.weight"][ids]
    hidden, ctxs, weights = [x.copy()], [], []
    for l in range(L):
        p = f"blk.{l}."
        h = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w[p + "attn_norm.weight"]
        q = (h @ w[p + "attn_q.weight"].T).reshape(n, H, D)
        k = (h @ w[p + "attn_k.weight"].T).reshape(n, Hkv, D)
        v = (h @ w[p + "attn_v.weight"].T).reshape(n, Hkv, D)
        q, k = rope(q, pos, cfg), rope(k, pos, cfg)
        ctx = np.zeros((n, H, D))
        ws = np.zeros((H, n, n))
        for hh in range(H):
            g = hh // (H // Hkv)
            s = q[:, hh] @ k[:, g].T / np.sqrt(D)
            s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
            e = np.exp(s - s.max(-1, keepdims=True))
            a = e / e.sum(-1, keepdims=True)
            ws[hh] = a
            ctx[:, hh] = a @ v[:, g]
        ctxs.append(ctx.reshape(n, H * D))
        weights.append(ws)
        x = x + ctx.reshape(n, H * D) @ w[p + "attn_output.weight"].T
        h2 = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w[p + "ffn_norm.weight"]
        gate, up = h2 @ w[p + "ffn_gate.weight"].T, h2 @ w[p + "ffn_up.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "ffn_down.weight"].T
        hidden.append(x.copy())
    return hidden, ctxs, weights


def head_scores(weights, ids):
    n = len(ids)
    prev = np.array([[np.mean([ws[hh][i, i - 1] for i in range(1, n)]) for hh in range(len(ws))] for ws in weights])
    ind_keys = [[k for k in range(1, i) if ids[k - 1] == ids[i]] for i in range(n)]
    queries = [i for i in range(n) if ind_keys[i]]
    ind = np.array([[np.mean([sum(ws[hh][i, k] for k in ind_keys[i]) for i in queries]) for hh in range(len(ws))]
                    for ws in weights])
    return prev, ind


def decompose(cfg, w, hidden, ctxs, l, h, i, j):
    H, Hkv, D, eps = cfg["H"], cfg["Hkv"], cfg["D"], cfg["eps"]
    names, comps = ["embed"], [hidden[0]]
    for k in range(l):
        wo = w[f"blk.{k}.attn_output.weight"].T  # H·D × M
        attn = np.zeros_like(hidden[0])
        for hh in range(H):
            c = ctxs[k][:, hh * D:(hh + 1) * D] @ wo[hh * D:(hh + 1) * D]
            names.append(f"L{k}.H{hh}")
            comps.append(c)
            attn = attn + c
        names.append(f"L{k}.mlp")
        comps.append(hidden[k + 1] - hidden[k] - attn)
    x = hidden[l]
    s = 1.0 / np.sqrt((x * x).mean(-1) + eps)
    gamma = w[f"blk.{l}.attn_norm.weight"]
    g = h // (H // Hkv)
    wq = w[f"blk.{l}.attn_q.weight"][h * D:(h + 1) * D].T
    wk = w[f"blk.{l}.attn_k.weight"][g * D:(g + 1) * D].T
    qs = np.stack([rope((s[i] * c[i] * gamma @ wq)[None], [i], cfg)[0] for c in comps])
    ks = np.stack([rope((s[j] * c[j] * gamma @ wk)[None], [j], cfg)[0] for c in comps])
    scale = 1.0 / np.sqrt(D)
    q, k = qs.sum(0), ks.sum(0)
    return names, scale * q @ k, scale * qs @ k, scale * ks @ q


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--out", default=str(ROOT / "goldens" / "qk_attribution_smollm2.json"))
    args = ap.parse_args()
    from transformers import AutoTokenizer
    p = pathlib.Path(args.gguf)
    tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
    ids = tok(TEXT, add_special_tokens=False).input_ids
    pieces = [tok.decode([t]) for t in ids]
    cfg, w = load(args.gguf)
    hidden, ctxs, weights = forward(cfg, w, ids)
    prev, ind = head_scores(weights, ids)
    l, h = np.unravel_index(np.argmax(ind), ind.shape)
    i = len(ids) - 1
    assert pieces[i - 1:] == [" Priv", "et"], pieces  # " Privet" is two tokens: the query is its last
    j = pieces.index(" Drive")
    names, score, qc, kc = decompose(cfg, w, hidden, ctxs, int(l), int(h), i, j)
    top = names[int(np.argmax(kc))]
    pl, ph = (int(v) for v in top[1:].split(".H"))
    print(f"induction head L{l}.H{h} (score {ind[l, h]:.3f}); cell ({i} '{pieces[i]}', {j} '{pieces[j]}') score {score:.4f} "
          f"weight {weights[l][h][i, j]:.4f}; top key component {top} ({kc.max():.4f}, previous-token score "
          f"{prev[pl, ph]:.3f}); top previous-token heads "
          + ", ".join(f"L{a}.H{b} {prev[a, b]:.2f}" for a, b in zip(*np.unravel_index(np.argsort(-prev, None)[:5], prev.shape))))
    assert abs(qc.sum() - score) < 1e-9 and abs(kc.sum() - score) < 1e-9
    r = lambda v: float(f"{v:.6g}")  # noqa: E731
    golden = {
        "about": "make_qk_attribution_goldens.py: NumPy float64 over gguf-py's dequantized SmolLM2-135M-Instruct Q4_1",
        "version": 1, "text": TEXT, "ids": [int(t) for t in ids], "tokens": pieces,
        "layer": int(l), "head": int(h), "induction_score": r(ind[l, h]), "query": i, "key": j,
        "score": r(score), "weight": r(weights[l][h][i, j]), "components": names,
        "query_components": [r(v) for v in qc], "key_components": [r(v) for v in kc],
        "top_key_component": top, "top_key_previous_score": r(prev[pl, ph]),
        # The test asks the head's previous-token score in attnscope's run to be at least this (a previous-token head).
        "previous_score_at_least": 0.3,
    }
    pathlib.Path(args.out).write_text(json.dumps(golden, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
