#!/usr/bin/env python3
"""Goldens for attnscope's SentencePiece-style BPE tokenizer (core/model/spm_tokenizer.cpp).

Reference: Google's sentencepiece library (the oracle of the merges), gguf-py, and transformers' slow→fast
converters with Hugging Face `tokenizers` (the oracle of tokenizer.json files), run in a throwaway venv; CI never
runs this script, it only reads what it wrote.

What attnscope follows for a GGUF file is llama.cpp's SPM path (src/llama-vocab.cpp): control, user-defined and
unknown tokens are cut out of the raw text first (longest token first), each remaining fragment gets " " in front
when add_space_prefix and it starts the text or follows a cut-out token, spaces become "▁", then BPE by piece score
with byte fallback. sentencepiece itself never cuts out control tokens and matches user-defined pieces only after
escaping spaces (so Gemma's space runs, stored as user-defined "  ", "   ", …, would never match), so the oracle
here is `llama_cpp_spm()` below: that special split and space prefix written in Python, and sentencepiece for each
fragment (a ModelProto built from the GGUF's own arrays: model_type BPE, the pieces with their scores and types,
normalizer "identity", add_dummy_prefix false — the prefix is added per fragment here —, no whitespace removal,
byte_fallback true).

Where Hugging Face differs: with legacy Llama 2 tokenizer.json files (normalizer Prepend("▁") + Replace), text right
after a special token also gets "▁" (llama.cpp #7094 is about the non-legacy Metaspace(prepend_scheme "first"),
which does not); our tokenizer.json path does what the file says, our GGUF path does what llama.cpp does. The
script records, for each text, whether Hugging Face's tokenizer converted from the same vocabulary agrees with the
llama.cpp-style golden ("hf_agrees").

Vocabularies:
  * gemma3: the real Gemma 3 vocabulary (262 144 pieces, add_space_prefix false, bos 2, eos 1, unk 3, pad 0) read
    from build/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf (scripts/setup.sh installs it); cross-checked against
    the tokenizer.json transformers' GemmaConverter writes (built here with the `tokenizers` API).
  * tiny: a SentencePiece BPE trained here on /work/shared/seeds/*.txt (vocab 1000, byte_fallback, Llama-2 style
    add_dummy_prefix, user-defined and control symbols), written as tests/model/data/spm_tiny/tiny.gguf (a
    vocabulary-only GGUF, gguf-py) and tests/model/data/spm_tiny/tokenizer.json (what transformers' LlamaConverter
    writes with legacy=True, built here with the `tokenizers` API), with goldens for both paths.

Regenerate (from the repository root):
  /tmp/ref-venv/bin/python tests/model/make_spm_goldens.py
Writes tests/model/goldens/spm_goldens.json and tests/model/data/spm_tiny/{tiny.gguf,tokenizer.json}.
"""
import argparse
import glob
import json
import os
import tempfile

import gguf
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SPACE = "\u2581"
TYPES = {1: pb.ModelProto.SentencePiece.NORMAL, 2: pb.ModelProto.SentencePiece.UNKNOWN,
         3: pb.ModelProto.SentencePiece.CONTROL, 4: pb.ModelProto.SentencePiece.USER_DEFINED,
         5: pb.ModelProto.SentencePiece.UNUSED, 6: pb.ModelProto.SentencePiece.BYTE}

# Texts that hit the pitfalls (families.md §3): text right after special tokens, runs of spaces and tabs,
# indentation, newlines, CJK, emoji, characters with no piece (byte fallback), empty, leading space, a long paragraph.
COMMON_TEXTS = [
    "",
    "Hello world",
    " leading space",
    "  two leading spaces",
    "trailing space ",
    "a  b   c    d",
    "tabs\there\t\tand\t\t\tthere",
    "def f(x):\n    return x\n        # deeper\n",
    "line one\nline two\n\nafter a blank line\n\n\n",
    "日本語のテキストと中文",
    "emoji 🎉🚀 and ZWJ 👩\u200d💻",
    "rare: \u0d9e \U0001d54f \u2603 \u00e9\u0301",
    "\x01control\x7f bytes",
    "The quick brown fox jumps over the lazy dog. " * 6,
    "numbers 1234567890 and 3.14159",
    "\u2581already metaspace",
]


def read_gguf_vocab(path):
    r = gguf.GGUFReader(path)
    f = r.fields

    def arr(key, conv):
        fld = f[key]
        return [conv(fld.parts[i]) for i in fld.data]

    def scalar(key, default):
        if key not in f:
            return default
        v = f[key].parts[f[key].data[0]]
        return v.tolist()[0] if hasattr(v, "tolist") else v

    tokens = arr("tokenizer.ggml.tokens", lambda p: bytes(p).decode("utf-8"))
    scores = arr("tokenizer.ggml.scores", lambda p: float(p[0])) if "tokenizer.ggml.scores" in f else [0.0] * len(tokens)
    types = arr("tokenizer.ggml.token_type", lambda p: int(p[0])) if "tokenizer.ggml.token_type" in f else [1] * len(tokens)
    return dict(tokens=tokens, scores=scores, types=types,
                bos=scalar("tokenizer.ggml.bos_token_id", 1), eos=scalar("tokenizer.ggml.eos_token_id", 2),
                unk=scalar("tokenizer.ggml.unknown_token_id", 0), pad=scalar("tokenizer.ggml.padding_token_id", -1),
                add_bos=bool(scalar("tokenizer.ggml.add_bos_token", True)),
                add_eos=bool(scalar("tokenizer.ggml.add_eos_token", False)),
                add_space_prefix=bool(scalar("tokenizer.ggml.add_space_prefix", True)))


def oracle_model(v, path):
    """A sentencepiece BPE ModelProto from a GGUF vocabulary (the prefix is added per fragment by the caller)."""
    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id = v["unk"]
    m.trainer_spec.bos_id = v["bos"]
    m.trainer_spec.eos_id = v["eos"]
    m.trainer_spec.pad_id = v["pad"]
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = False
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    for i, (p, ty, sc) in enumerate(zip(v["tokens"], v["types"], v["scores"])):
        sp = m.pieces.add()
        sp.piece = p
        sp.score = sc
        sp.type = TYPES[ty]
        if i == v["unk"]:
            sp.type = pb.ModelProto.SentencePiece.UNKNOWN
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return spm.SentencePieceProcessor(model_file=path)


def special_split(text, v):
    """llama.cpp's tokenizer_st_partition: control / user-defined / unknown tokens, longest first (lower id first
    among equals), each cutting its leftmost non-overlapping occurrences out of the still-raw fragments."""
    specials = [(len(t.encode()), i) for i, (t, ty) in enumerate(zip(v["tokens"], v["types"])) if ty in (2, 3, 4)]
    specials = [i for _, i in sorted(specials, key=lambda x: (-x[0], x[1])) if v["tokens"][i] in text]
    frags = [("raw", text)] if text else []
    for i in specials:
        tok = v["tokens"][i]
        out = []
        for kind, s in frags:
            if kind != "raw":
                out.append((kind, s))
                continue
            while True:
                at = s.find(tok)
                if at < 0:
                    break
                if at:
                    out.append(("raw", s[:at]))
                out.append(("tok", i))
                s = s[at + len(tok):]
            if s:
                out.append(("raw", s))
        frags = out
    return frags


def llama_cpp_spm(sp, v, text, add_special):
    ids = [v["bos"]] if add_special and v["add_bos"] else []
    prev_special = True
    for kind, s in special_split(text, v):
        if kind == "tok":
            ids.append(s)
            prev_special = True
            continue
        if v["add_space_prefix"] and prev_special:
            s = " " + s
        ids += sp.encode(s)
        prev_special = False
    if add_special and v["add_eos"]:
        ids.append(v["eos"])
    return ids


def merges_by_score(v):
    """Hugging Face's merges for a SentencePiece BPE vocabulary, as transformers' converters derive them: every
    split of a normal piece into two pieces of the vocabulary, ordered by the merged piece's score (higher first),
    then by the ids of the two sides."""
    ids = {}
    for i, t in enumerate(v["tokens"]):
        ids.setdefault(t, i)
    out = []
    for i, (t, ty, sc) in enumerate(zip(v["tokens"], v["types"], v["scores"])):
        if ty != 1 or ids[t] != i:
            continue
        for k in range(1, len(t)):
            l, r = t[:k], t[k:]
            if l in ids and r in ids:
                out.append((-sc, ids[l], ids[r], l, r))
    out.sort()
    return [(l, r) for _, _, _, l, r in out]


def hf_tokenizer(v, kind):
    """The tokenizer.json transformers' converters write for a SentencePiece BPE (LlamaConverter with legacy=True,
    or GemmaConverter), built with the `tokenizers` API from the same vocabulary (transformers 5's converters need
    a checkpoint's slow tokenizer, which a GGUF does not carry)."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE
    vocab = {}
    for i, t in enumerate(v["tokens"]):
        vocab.setdefault(t, i)
    tok = Tokenizer(BPE(vocab=vocab, merges=merges_by_score(v), unk_token=v["tokens"][v["unk"]], fuse_unk=True,
                        byte_fallback=True))
    bos = v["tokens"][v["bos"]]
    if kind == "llama":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(content=" ", left=1)])
    else:
        tok.normalizer = normalizers.Replace(" ", "\u2581")
        tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                       special_tokens=[(bos, v["bos"])])
    added = [AddedToken(t, normalized=False, special=ty != 4)
             for t, ty in zip(v["tokens"], v["types"]) if ty in (2, 3, 4)]
    tok.add_tokens(added)
    return tok


def cases(sp, v, texts, hf=None, hf_name=None):
    out = []
    for t in texts:
        c = {"text": t, "ids": llama_cpp_spm(sp, v, t, False), "ids_special": llama_cpp_spm(sp, v, t, True)}
        if hf is not None:
            h = hf.encode(t, add_special_tokens=False)
            c["hf_ids"] = h
            c["hf_agrees"] = h == c["ids"]
        out.append(c)
    return out


def gemma_cases(gguf_path, tmp):
    v = read_gguf_vocab(gguf_path)
    sp = oracle_model(v, os.path.join(tmp, "gemma.model"))
    texts = COMMON_TEXTS + [
        "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
        "<bos><start_of_turn>user\n  indented after a turn<end_of_turn>",
        "<start_of_turn>user",
        "text<pad>after pad",
        "<table><tr><td>cell</td></tr></table>",
        "[multimodal] <unused0> <mask>",
        "    four\n        eight\n\t\tnested tabs",
        "x" + " " * 40 + "y",
        "\n" * 35,
        "<0x41> is not a byte token in text",
    ]
    hf = hf_tokenizer(v, "gemma")

    class Enc:
        def encode(self, t, add_special_tokens=False):
            return hf.encode(t, add_special_tokens=add_special_tokens).ids
    hf_enc = Enc()
    return {"vocab_size": len(v["tokens"]), "bos": v["bos"], "eos": v["eos"], "unk": v["unk"], "pad": v["pad"],
            "add_space_prefix": v["add_space_prefix"],
            "token_ids": {t: v["tokens"].index(t) for t in ["<start_of_turn>", "<end_of_turn>", "  ", "\n", "<0x0A>"]},
            "cases": cases(sp, v, texts, hf_enc)}


def tiny_model(out_dir, tmp):
    seeds = sorted(glob.glob("/work/shared/seeds/*.txt"))
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        for s in seeds:
            f.write(open(s, encoding="utf-8").read() + "\n")
    prefix = os.path.join(tmp, "tiny")
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, model_type="bpe", vocab_size=1000, byte_fallback=True,
        character_coverage=0.9995, add_dummy_prefix=True, remove_extra_whitespaces=False,
        normalization_rule_name="identity", split_digits=True, num_threads=1, minloglevel=2,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        user_defined_symbols=["<|sep|>", "[toxicity=0]"], control_symbols=["<start_of_turn>", "<end_of_turn>"])
    model_path = prefix + ".model"
    m = pb.ModelProto()
    m.ParseFromString(open(model_path, "rb").read())
    rev = {v: k for k, v in TYPES.items()}
    v = dict(tokens=[p.piece for p in m.pieces], scores=[p.score for p in m.pieces],
             types=[rev[p.type] for p in m.pieces], bos=1, eos=2, unk=0, pad=-1, add_bos=True, add_eos=False,
             add_space_prefix=True)
    os.makedirs(out_dir, exist_ok=True)
    w = gguf.GGUFWriter(os.path.join(out_dir, "tiny.gguf"), "llama")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(v["tokens"])
    w.add_token_scores(v["scores"])
    w.add_token_types(v["types"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    fast = hf_tokenizer(v, "llama")
    fast.save(os.path.join(out_dir, "tokenizer.json"))
    return v, fast


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=os.path.join(ROOT, "build/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf"))
    args = ap.parse_args()
    out = {"version": 1, "generator": "tests/model/make_spm_goldens.py",
           "sentencepiece": spm.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        out["gemma3"] = gemma_cases(args.gguf, tmp)
        v, fast = tiny_model(os.path.join(HERE, "data/spm_tiny"), tmp)
        sp = oracle_model(v, os.path.join(tmp, "tiny_oracle.model"))
        texts = COMMON_TEXTS + [
            "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
            "<start_of_turn> space after special",
            "before<|sep|>after",
            "flagged [toxicity=0] text",
            "<s>literal bos text</s>",
        ]

        class Enc:
            def encode(self, t, add_special_tokens=False):
                return fast.encode(t, add_special_tokens=add_special_tokens).ids
        out["tiny_gguf"] = {"vocab_size": len(v["tokens"]), "cases": cases(sp, v, texts, Enc())}
        # The tokenizer.json path: Hugging Face's own ids are the goldens (legacy Llama: "▁" after every special).
        out["tiny_json"] = {"cases": [{"text": t, "ids": fast.encode(t, add_special_tokens=False).ids,
                                       "ids_special": fast.encode(t, add_special_tokens=True).ids} for t in texts]}
    path = os.path.join(HERE, "goldens/spm_goldens.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for name in ("gemma3", "tiny_gguf"):
        bad = [c["text"][:40] for c in out[name]["cases"] if "hf_agrees" in c and not c["hf_agrees"]]
        print(f"{name}: {len(out[name]['cases'])} texts; Hugging Face disagrees on {len(bad)}: {bad}")
    print("wrote", path)


if __name__ == "__main__":
    main()
