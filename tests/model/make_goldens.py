#!/usr/bin/env python3
"""Writes tests/model/goldens/minilm_goldens.json: Hugging Face transformers' outputs for all-MiniLM-L6-v2.

The C++ tests (test_model_golden.cpp) compare attnscope's tokenizer and encoder against this file; they need no
torch. Regenerate (only when the cases below change) in a throwaway venv over Debian's python3-torch 1.13:

    /usr/bin/python3 -m venv --system-site-packages /tmp/model-venv
    /tmp/model-venv/bin/pip install transformers==4.36.2      # brings tokenizers 0.15
    /tmp/model-venv/bin/python tests/model/make_goldens.py build/models/all-MiniLM-L6-v2

Values are rounded (weights to 6 decimals, hidden states to 5) to keep the file small; that is far below the
tolerances the tests use (weights 1e-4, last hidden 2e-3, embedding cosine 0.99999, from issue 10).
"""
import json
import sys

import torch
import transformers
from transformers import AutoTokenizer, BertModel

# Full forward cases: short, so that every layer's and head's weights fit in a small file.
FORWARD_CASES = [
    {"name": "pair", "text": "The cat sat on the mat.", "pair": "A dog lay on the rug."},
    {"name": "accents_cjk", "text": "Café naïve résumé: 東京は美しい!"},
    {"name": "long_words", "text": "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism"},
    {"name": "ablation", "text": "The cat sat on the mat.", "pair": "A dog lay on the rug.",
     "ablate": [[0, 3], [2, 7], [2, 8], [5, 11]]},
]

# Tokenizer-only cases: the normaliser, pre-tokeniser and WordPiece on harder text.
TOKENIZER_CASES = [
    {"text": "Hello, world! It's 3.14 o'clock -- isn't it?"},
    {"text": "ÀÉÎÕÜ àéîõü Ñandú Ærøskøbing straße"},
    {"text": "Ελληνικά ΣΊΣΥΦΟΣ İstanbul ǅemal"},
    {"text": "日本語のテキスト 中文字符 한국어 텍스트"},
    {"text": "tabs\tand\nnewlines\r\nand\u00a0nbsp\u200bzero\u2009width \u0007bell \ufffd"},
    {"text": "emoji 🙂👍🏽 and symbols ©®™ €£¥ ½ ²"},
    {"text": "x" * 101 + " " + "y" * 100},
    {"text": "unbelievably uncharacteristically hyperparameterization"},
    {"text": "e\u0301 n\u0303 combining marks", "pair": "Ğ ğ ş Ş ı"},
    # Special tokens typed in the text stay one token each (case-sensitive: "[mask]" is split).
    {"text": "The [MASK] sat on the mat[SEP]then [mask] [UNK]x", "pair": "[CLS][PAD] a [MASK]"},
    {"text": "السلام عليكم ru: Привет, мир! hi: नमस्ते"},
    {"text": "", "pair": "empty first"},
    {"text": " ".join(["token"] * 600), "pair": "short pair"},
    {"text": " ".join(["word"] * 700)},
]


def rounded(values, digits):
    return [round(float(v), digits) for v in values]


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else "build/models/all-MiniLM-L6-v2"
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = BertModel.from_pretrained(model_dir, add_pooling_layer=False).eval()
    cfg = model.config
    out = {"format": "attnscope-model-goldens", "version": 1, "model": "all-MiniLM-L6-v2",
           "generator": f"transformers {transformers.__version__}, torch {torch.__version__}",
           "forward": [], "tokenizer": []}
    for case in FORWARD_CASES:
        enc = tok(case["text"], case.get("pair"), return_tensors="pt", truncation=True, max_length=512)
        head_mask = torch.ones(cfg.num_hidden_layers, cfg.num_attention_heads)
        for layer, head in case.get("ablate", []):
            head_mask[layer, head] = 0.0
        with torch.no_grad():
            res = model(**enc, head_mask=head_mask, output_attentions=True)
        last = res.last_hidden_state[0]
        emb = torch.nn.functional.normalize(last.mean(dim=0), dim=0)
        out["forward"].append({
            **case,
            "tokens": tok.convert_ids_to_tokens(enc["input_ids"][0]),
            "ids": enc["input_ids"][0].tolist(),
            "type_ids": enc["token_type_ids"][0].tolist(),
            # weights[layer][head]: n×n row-major (query i, key j)
            "weights": [[rounded(a[0, h].flatten().tolist(), 6) for h in range(a.shape[1])] for a in res.attentions],
            "last_hidden": rounded(last.flatten().tolist(), 5),
            "embedding": rounded(emb.tolist(), 7),
        })
    for case in TOKENIZER_CASES:
        enc = tok(case["text"], case.get("pair"), truncation=True, max_length=512)
        out["tokenizer"].append({**case, "tokens": tok.convert_ids_to_tokens(enc["input_ids"]),
                                 "ids": enc["input_ids"], "type_ids": enc["token_type_ids"]})
    path = "tests/model/goldens/minilm_goldens.json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
