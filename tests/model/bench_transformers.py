#!/usr/bin/env python3
"""Times Hugging Face transformers' BertModel forward on the inputs `attnscope model --bench` uses.

Same model, same token sequences ([CLS] + (n-2) × "a" + [SEP], n = 128 and 512), every layer's attention
weights returned (output_attentions=True, as attnscope keeps them), torch's default threads, median of
--repeats runs. Prints JSON like the attnscope bench. Run by scripts/bench_model_peers.sh; needs a venv with
transformers over Debian's torch (see make_goldens.py).
"""
import argparse
import json
import statistics
import time

import torch
import transformers
from transformers import AutoTokenizer, BertModel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(args.model_dir)
    model = BertModel.from_pretrained(args.model_dir, add_pooling_layer=False).eval()
    rows = []
    for n in (128, 512):
        enc = tok("a " * (n - 2), return_tensors="pt", truncation=True, max_length=512)
        assert enc["input_ids"].shape[1] == n
        times = []
        with torch.no_grad():
            model(**enc, output_attentions=True)  # warm-up
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                model(**enc, output_attentions=True)
                times.append((time.perf_counter() - t0) * 1000)
        rows.append({"tokens": n, "forward_ms_median": statistics.median(times), "forward_ms_min": min(times),
                     "repeats": args.repeats})
    print(json.dumps({"peer": f"transformers {transformers.__version__} over torch {torch.__version__}",
                      "threads": torch.get_num_threads(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
