"""Makes tests/model/goldens/llamacpp_parity.json, the golden of test_llamacpp_golden.cpp: what llama.cpp itself makes
of the two GGUF files scripts/setup.sh installs (SmolLM2-135M-Instruct Q4_1, gemma-3-270m Q4_K_M).

The other decoder goldens come from Hugging Face transformers on the files' weights dequantized to float32: they
check attnscope's math against another implementation of each family. This one checks the files as the program most
people run them with reads them:
- its tokenizer on hard texts, special tokens parsed as llama.cpp's programs (llama-cli, llama-server) parse a
  prompt's: the ids must be equal, token for token;
- `f32`: its forward on the file's weights dequantized to float32 (a GGUF written here by gguf-py, every tensor
  F32) with a float32 KV cache and no flash attention: the same arithmetic attnscope does (float32 activations
  against the file's dequantized blocks), so the logits at every position must agree as closely as the
  transformers goldens do;
- `shipped`: its forward on the file as shipped with its defaults (the blocks multiplied with activations
  quantized to 8 bits, a float16 KV cache): what a llama.cpp user sees. Its distance from `f32` at each position
  (`deviation`) is llama.cpp's own spread between two ways of computing the same model; attnscope's prediction
  must be llama.cpp's wherever llama.cpp's margin between its first two tokens is wider than that spread.

The file (JSON):
  format, version, llama_cpp   "attnscope-llamacpp-golden", 1, the llama-cpp-python version that made it
  models.<key>                 file (the GGUF's name), sha256 (of the file), tokenize (per text: text, ids with the
                               BOS the file asks for; the last text is 20 kB of docs/model.md and C++ as they were), runs (per text: text, ids, and for `f32` and `shipped` per
                               position the 8 largest logits' ids and values, largest first, and the log-sum-exp of
                               the row; `deviation` per position: the largest |shipped − f32| over the whole row), generate (`f32`'s greedy
                               continuation of a prompt, a token at a time through its KV cache: each token, its
                               logit, its margin over the second, the row's largest |logit|)

Regenerate (a throwaway venv; llama-cpp-python builds llama.cpp from its sources, about 25 minutes on 2 cores; the
float32 copies are written to --scratch, 0.5 and 1.1 GB, and removed):
  python3 -m venv /tmp/llama-venv && CMAKE_ARGS="-DGGML_NATIVE=ON" /tmp/llama-venv/bin/pip install \\
      llama-cpp-python==0.3.36 gguf==0.17.1 numpy
  /tmp/llama-venv/bin/python tests/model/make_llamacpp_goldens.py --models build/models --scratch /tmp
"""
import argparse
import hashlib
import json
import pathlib
import re

import gguf
import llama_cpp
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent
TOP = 8

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m/gemma-3-270m-q4_k_m.gguf",
}

# The tokenizers' hard cases: spaces and their runs, newlines and tabs, digits, contractions, case, punctuation,
# accents, scripts without spaces, emoji (multi-byte and joined), byte fallback, code, a special token's text typed
# as plain text.
TOKENIZE = [
    "The capital of France is",
    "When Mary and John went to the store, John gave a drink to",
    "  two leading spaces",
    "trailing spaces   ",
    "a\n\nb\tc\r\nd",
    "    def f(x):\n        return x ** 2  # square\n",
    "1234567 + 89 = 1234656; 3.14159, 1e-5, 0x1F",
    "I'm sure they'll say it's JOHN's, we've seen",
    "HELLO World hELLo",
    "Ünïcödé façade naïve coöperate résumé",
    "日本語のテキストと中文文本",
    "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم",
    "emoji 🙂🎉 and 👩‍👩‍👧 family",
    "<start_of_turn>user not a special token here",
    "a" * 40,
    "naïve\u00a0no-break\u2003em space",
    "",
]


def long_text():
    """About 20 kB of our own prose and code as it stood when the golden was made (stored with its ids): markdown,
    tables, maths symbols, subscripts, C++."""
    top = ROOT.parent.parent
    doc = (top / "docs" / "model.md").read_text(encoding="utf-8")[:16000]
    code = (top / "core" / "model" / "spm_tokenizer.cpp").read_text(encoding="utf-8")[:4000]
    return doc + "\n" + code


RUNS = [
    "The capital of France is",
    "When Mary and John went to the store, John gave a drink to",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) +",
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dequantized_copy(src, dst, edit=lambda reader, key, value: value):
    """The GGUF `src` with every tensor dequantized to F32 (gguf-py's dequantizers), its metadata as it was, or as
    `edit` returns each value."""
    r = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = f.types[0]
        w.add_key_value(name, edit(r, name, f.contents()), vtype,
                        f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None)
    for t in r.tensors:
        w.add_tensor(t.name, np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def rows_of(llm, ids):
    llm.reset()
    llm.eval(ids)
    return np.asarray(llm.scores[: len(ids)], dtype=np.float64)


def top_of(rows):
    out = []
    for row in rows:
        top = np.argsort(-row, kind="stable")[:TOP]
        m = row.max()
        out.append({"top_ids": [int(i) for i in top], "top_logits": [round(float(row[i]), 5) for i in top],
                    "logsumexp": round(float(m + np.log(np.exp(row - m).sum())), 5)})
    return out


GENERATE_PROMPT = "The capital of France is"
GENERATE_TOKENS = 24


def greedy(llm, ids, steps):
    """llama.cpp's greedy continuation of `ids`, a token at a time through its KV cache: each step's token (the
    largest logit), that logit, its margin over the second and the row's largest |logit|."""
    llm.reset()
    llm.eval(ids)
    out = {"text": GENERATE_PROMPT, "ids": ids, "tokens": [], "logits": [], "margins": [], "scales": []}
    for _ in range(steps):
        row = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        first, second = np.argsort(-row, kind="stable")[:2]
        out["tokens"].append(int(first))
        out["logits"].append(round(float(row[first]), 5))
        out["margins"].append(round(float(row[first] - row[second]), 5))
        out["scales"].append(round(float(np.abs(row).max()), 5))
        llm.eval([int(first)])
    return out


def model_golden(path, scratch):
    common = dict(n_ctx=512, n_threads=2, logits_all=True, verbose=False)
    shipped = llama_cpp.Llama(model_path=str(path), **common)
    tok = lambda t: shipped.tokenize(t.encode("utf-8"), add_bos=True, special=True)
    out = {"file": path.name, "sha256": sha256(path),
           "tokenize": [{"text": t, "ids": tok(t)} for t in TOKENIZE + [long_text()]]}
    copy = pathlib.Path(scratch) / (path.stem + ".f32.gguf")
    dequantized_copy(path, copy)
    try:
        f32 = llama_cpp.Llama(model_path=str(copy), type_k=int(gguf.GGMLQuantizationType.F32),
                              type_v=int(gguf.GGMLQuantizationType.F32), flash_attn=False, **common)
        runs = []
        for text in RUNS:
            ids = tok(text)
            a, b = rows_of(f32, ids), rows_of(shipped, ids)
            runs.append({"text": text, "ids": ids, "f32": top_of(a), "shipped": top_of(b),
                         "deviation": [round(float(d), 5) for d in np.abs(a - b).max(axis=1)]})
        out["runs"] = runs
        out["generate"] = greedy(f32, tok(GENERATE_PROMPT), GENERATE_TOKENS)
        del f32
    finally:
        copy.unlink()
    return out


# The tiny fixtures of every family (tests/model/data/tiny_*.gguf, F32 or IQ4_NL, random weights, a 300-token
# byte-level BPE) as llama.cpp loads them, with each text's length: Phi-3's LongRoPE fixture (an original context
# of 32) only past 32 tokens, where transformers' rule (the long factors for a forward longer than the original
# context) and llama.cpp's (the long factors when the context it was given, rounded up to 256, is longer) agree.
FAMILY_RUNS = ["the cat sat on the mat", "the cat sat on the mat and the dog sat on the log"]
FAMILIES = ["gemma2", "gemma3", "gpt2", "gptneox", "llama", "llama_iq4nl", "olmo2", "phi3", "phi3_longrope", "qwen2",
            "qwen3"]


def llamacpp_loadable(reader, key, value):
    """What llama.cpp asks of a file that our fixtures do not do its way (the copy only; attnscope reads the
    fixture): its spelling of GPT-2's pre-tokenizer ("gpt-2"; ours "gpt2"); as many tokens as embedding rows
    (its converter pads with [PAD<id>] tokens of type UNUSED, 5); and a name that is not Phi-3's (llama.cpp keys
    Phi-3's special-token rules on general.name and then needs a "</s>" the tiny vocabulary lacks)."""
    rows = next(t for t in reader.tensors if t.name == "token_embd.weight").shape[1]
    if key == "tokenizer.ggml.pre" and value == "gpt2":
        return "gpt-2"
    if key == "tokenizer.ggml.tokens":
        return list(value) + ["[PAD%d]" % i for i in range(len(value), rows)]
    if key == "tokenizer.ggml.token_type":
        return list(value) + [5] * (rows - len(value))
    if key == "general.name":
        return "tiny"
    return value


def family_golden(path, scratch):
    copy = pathlib.Path(scratch) / (path.stem + ".llamacpp.gguf")
    dequantized_copy(path, copy, llamacpp_loadable)
    try:
        llm = llama_cpp.Llama(model_path=str(copy), n_ctx=256, n_threads=2, logits_all=True, verbose=False,
                              type_k=int(gguf.GGMLQuantizationType.F32), type_v=int(gguf.GGMLQuantizationType.F32),
                              flash_attn=False)
        runs = []
        for text in FAMILY_RUNS[1:] if path.stem == "tiny_phi3_longrope" else FAMILY_RUNS:
            ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
            runs.append({"text": text, "ids": ids, "f32": top_of(rows_of(llm, ids))})
        del llm
    finally:
        copy.unlink()
    return {"file": path.name, "sha256": sha256(path), "runs": runs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True, help="the folder scripts/setup.sh installs the models into")
    ap.add_argument("--scratch", required=True, help="a folder for the float32 copies (removed after)")
    a = ap.parse_args()
    g = {"format": "attnscope-llamacpp-golden", "version": 1, "llama_cpp": "llama-cpp-python " + llama_cpp.__version__,
         "models": {key: model_golden(pathlib.Path(a.models) / rel, a.scratch) for key, rel in MODELS.items()},
         "families": {f: family_golden(ROOT / "data" / ("tiny_%s.gguf" % f), a.scratch) for f in FAMILIES}}
    out = ROOT / "goldens" / "llamacpp_parity.json"
    text = json.dumps(g, ensure_ascii=False, indent=1)
    text = re.sub(r"\[\s+([-0-9.,\se]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)  # numbers on a line
    out.write_text(text + "\n", encoding="utf-8")
    print("wrote", out)


if __name__ == "__main__":
    main()
