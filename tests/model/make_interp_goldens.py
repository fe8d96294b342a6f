"""Makes tests/model/goldens/interp_smollm2.json, the goldens of test_interp.cpp's SmolLM2 case, with Hugging Face
transformers (the interpretability views of attnscope/interp.h, computed the way a notebook would, with hooks).

SmolLM2-135M-Instruct Q4_1 from its GGUF, dequantized into LlamaForCausalLM in float32 (make_decoder_goldens.py's
smollm2_from_gguf). For each prompt, the target is the most probable next token, and:
  head_importance  L×H: log p(target) with head (l, h) ablated (a forward pre-hook on o_proj zeroing the head's
                   slice of its input) minus log p(target), one forward per head
  dla              the target's direct logit attribution at the last position through the final RMSNorm frozen at
                   its scale: heads (from o_proj's input slices), mlp (each MLP's output), embed, in float64
  lens_top1        L×n: the top-1 token of each layer's residual stream through the final norm and the LM head;
                   lens_gap the difference of the top-2 probabilities (a near-tie may round either way)
  head_types       L×H previous / duplicate / induction / sink scores from transformers' attention weights
patching: the head contexts of the clean text patched one at a time into the corrupted one (a pre-hook on o_proj
replacing the head's slice of its input by the clean run's), (m − m_corrupted) / (m_clean − m_corrupted) with
m = logit(" Mary") − logit(" John").

Regenerate (the venv of make_decoder_goldens.py):
  /tmp/ref-venv/bin/python tests/model/make_interp_goldens.py --gguf PATH/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import json
import pathlib
import sys

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from make_decoder_goldens import o_proj_of, r8, smollm2_from_gguf  # noqa: E402

GOLD = ROOT / "goldens"
PROMPTS = ["When Mary and John went to the store, John gave a drink to", "The capital of France is"]
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"
TARGETS = [" Mary", " John"]


def forward(model, ids, edits=None, capture=False):
    """Last-position logits (float64); `edits` = {layer: fn(o_proj input) -> new input}; `capture` also returns
    o_proj inputs, MLP outputs, the final norm's input, hidden states and attentions."""
    hooks, grabbed = [], {"o_in": {}, "mlp": {}}
    for layer, fn in (edits or {}).items():
        hooks.append(o_proj_of(model, layer).register_forward_pre_hook(lambda mod, args, fn=fn: (fn(args[0].clone()),)))
    if capture:
        for l, blk in enumerate(model.model.layers):
            hooks.append(blk.self_attn.o_proj.register_forward_pre_hook(
                lambda mod, args, l=l: grabbed["o_in"].__setitem__(l, args[0][0].clone())))
            hooks.append(blk.mlp.register_forward_hook(lambda mod, args, out, l=l: grabbed["mlp"].__setitem__(l, out[0].clone())))
        hooks.append(model.model.norm.register_forward_pre_hook(lambda mod, args: grabbed.__setitem__("final_in", args[0][0].clone())))
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=capture, output_hidden_states=capture)
    for h in hooks:
        h.remove()
    return out.logits[0, -1].double(), out, grabbed


def head_types(attentions, ids):
    n = len(ids)
    dup = [[j for j in range(i) if ids[j] == ids[i]] for i in range(n)]
    ind = [[k for k in range(1, i) if ids[k - 1] == ids[i]] for i in range(n)]
    nd, ni = sum(1 for d in dup if d), sum(1 for d in ind if d)
    res = {k: [] for k in ("previous", "duplicate", "induction", "sink")}
    for a in attentions:
        w = a[0].double().numpy()  # H × n × n
        res["previous"].append([float(np.mean([w[h, i, i - 1] for i in range(1, n)])) for h in range(w.shape[0])])
        res["sink"].append([float(np.mean([w[h, i, 0] for i in range(1, n)])) for h in range(w.shape[0])])
        res["duplicate"].append([float(sum(w[h, i, j] for i in range(n) for j in dup[i]) / nd) if nd else 0.0
                                 for h in range(w.shape[0])])
        res["induction"].append([float(sum(w[h, i, k] for i in range(n) for k in ind[i]) / ni) if ni else 0.0
                                 for h in range(w.shape[0])])
    return {k: r8(v) for k, v in res.items()}


def case(model, tok, text):
    cfg = model.config
    L, H = cfg.num_hidden_layers, cfg.num_attention_heads
    D = cfg.hidden_size // H
    ids = tok(text, add_special_tokens=False).input_ids
    logits, out, g = forward(model, ids, capture=True)
    target = int(torch.argmax(logits))
    base = float(torch.log_softmax(logits, -1)[target])
    importance = []
    for l in range(L):
        row = []
        for h in range(H):
            def zero(x, h=h):
                x[..., h * D:(h + 1) * D] = 0
                return x
            lg, _, _ = forward(model, ids, {l: zero})
            row.append(float(torch.log_softmax(lg, -1)[target]) - base)
        importance.append(row)
    # DLA through the final RMSNorm frozen at this run's scale, in float64.
    x = g["final_in"][-1].double()
    u = model.lm_head.weight[target].double()
    w = model.model.norm.weight.double() * u / torch.sqrt((x * x).mean() + cfg.rms_norm_eps)
    heads = []
    for l in range(L):
        Wo = model.model.layers[l].self_attn.o_proj.weight.double()  # M × H·D (PyTorch's out × in)
        ctx = g["o_in"][l][-1].double()
        heads.append([float(ctx[h * D:(h + 1) * D] @ (Wo[:, h * D:(h + 1) * D].T @ w)) for h in range(H)])
    mlp = [float(g["mlp"][l][-1].double() @ w) for l in range(L)]
    embed = float(out.hidden_states[0][0, -1].double() @ w)
    # Logit lens: hidden_states[l + 1] enters layer l + 1; transformers' last hidden state is already normed.
    lens_top1, lens_gap = [], []
    for l in range(L):
        hs = out.hidden_states[l + 1][0]
        normed = hs if l == L - 1 else model.model.norm(hs)
        p = torch.softmax(model.lm_head(normed).double(), -1)
        top = p.topk(2, dim=-1)
        lens_top1.append(top.indices[:, 0].tolist())
        lens_gap.append(r8((top.values[:, 0] - top.values[:, 1]).tolist()))
    return {"text": text, "ids": ids, "target": target, "logprob": r8(base), "head_importance": r8(importance),
            "dla": {"heads": r8(heads), "mlp": r8(mlp), "embed": r8(embed), "logit": r8(float(logits[target]))},
            "lens_top1": lens_top1, "lens_gap": lens_gap, "head_types": head_types(out.attentions, ids)}


def patching(model, tok):
    cfg = model.config
    L, H = cfg.num_hidden_layers, cfg.num_attention_heads
    D = cfg.hidden_size // H
    clean_ids = tok(CLEAN, add_special_tokens=False).input_ids
    bad_ids = tok(CORRUPTED, add_special_tokens=False).input_ids
    assert len(clean_ids) == len(bad_ids)
    a, b = (tok(t, add_special_tokens=False).input_ids for t in TARGETS)
    assert len(a) == 1 and len(b) == 1
    a, b = a[0], b[0]
    lc, _, g = forward(model, clean_ids, capture=True)
    lb, _, _ = forward(model, bad_ids)
    mc, mb = float(lc[a] - lc[b]), float(lb[a] - lb[b])
    rows = []
    for l in range(L):
        row = []
        for h in range(H):
            def patch(x, l=l, h=h):
                x[0, :, h * D:(h + 1) * D] = g["o_in"][l][:, h * D:(h + 1) * D]
                return x
            lg, _, _ = forward(model, bad_ids, {l: patch})
            row.append((float(lg[a] - lg[b]) - mb) / (mc - mb))
        rows.append(row)
    return {"clean_text": CLEAN, "corrupted_text": CORRUPTED, "targets": TARGETS, "target_ids": [a, b],
            "clean": r8(mc), "corrupted": r8(mb), "map": r8(rows)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True, help="SmolLM2-135M-Instruct.Q4_1.gguf")
    a = ap.parse_args()
    model, tok = smollm2_from_gguf(a.gguf)
    doc = {"model": "SmolLM2-135M-Instruct.Q4_1.gguf", "cases": [case(model, tok, t) for t in PROMPTS],
           "patching": patching(model, tok)}
    path = GOLD / "interp_smollm2.json"
    path.write_text(json.dumps(doc))
    print(path, path.stat().st_size, "bytes;", [(c["text"], tok.decode([c["target"]])) for c in doc["cases"]])


if __name__ == "__main__":
    main()
