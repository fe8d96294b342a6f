"""transformers' forward of SmolLM2 (the GGUF dequantized by gguf-py, as make_decoder_goldens.py builds it) with every
layer's attention weights returned (output_attentions=True, eager attention), timed at the thread count that is
fastest here, beside `attnscope model --bench` in scripts/bench_model_peers.sh. Needs torch, transformers and gguf
(the throwaway venv of make_decoder_goldens.py); prints one JSON object.
"""
import argparse
import json
import pathlib
import resource
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_decoder_goldens import smollm2_from_gguf  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--tokens", type=int, nargs="+", default=[128])
    ap.add_argument("--repeats", type=int, default=10)
    a = ap.parse_args()
    model, tok = smollm2_from_gguf(a.gguf)
    text = "The quick brown fox jumps over the lazy dog, and the capital of France is Paris. " * 400
    rows = []
    for n in a.tokens:
        ids = torch.tensor([tok(text, add_special_tokens=False).input_ids[:n]])
        best = None
        for threads in sorted({1, torch.get_num_threads()}):
            torch.set_num_threads(threads)
            times = []
            with torch.no_grad():
                model(ids, output_attentions=True)  # warm-up
                for _ in range(a.repeats):
                    t0 = time.perf_counter()
                    model(ids, output_attentions=True)
                    times.append((time.perf_counter() - t0) * 1e3)
            times.sort()
            med = times[len(times) // 2]
            if best is None or med < best[1]:
                best = (threads, med)
        rows.append({"tokens": n, "forward_ms": best[1], "threads": best[0],
                     "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    print(json.dumps({"transformers": __import__("transformers").__version__, "torch": torch.__version__,
                      "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
