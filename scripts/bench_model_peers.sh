#!/usr/bin/env bash
# The model forward side by side: `attnscope model --bench` and Hugging Face transformers on the same inputs
# (128 and 512 tokens, every layer's attention weights kept), one after the other in one run.
# Usage: scripts/bench_model_peers.sh [PYTHON_WITH_TRANSFORMERS]   (default /tmp/model-venv/bin/python; make it
# with: /usr/bin/python3 -m venv --system-site-packages /tmp/model-venv && /tmp/model-venv/bin/pip install
# transformers==4.36.2)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${1:-/tmp/model-venv/bin/python}"
model="$root/build/models/all-MiniLM-L6-v2"
repeats="${REPEATS:-20}"
echo "== attnscope ($(nproc) cores)"
"$root/build/bin/attnscope" model --bench --model-dir "$model" --repeats "$repeats"
echo "== transformers"
if "$py" -c "import transformers" 2>/dev/null; then
  "$py" "$root/tests/model/bench_transformers.py" "$model" --repeats "$repeats"
else
  echo "(skipped: $py cannot import transformers)"
fi

# Decoder: SmolLM2 Q4_1 at 128 tokens, attnscope and transformers (the GGUF dequantized by gguf-py, eager attention
# with output_attentions=True). The second needs a venv with torch, transformers and gguf
# (DECODER_PY, default /tmp/ref-venv/bin/python; make_decoder_goldens.py's docstring says how to make it).
smol="$root/build/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
dpy="${DECODER_PY:-/tmp/ref-venv/bin/python}"
if [ -f "$smol" ]; then
  echo "== attnscope, SmolLM2 (decoder)"
  "$root/build/bin/attnscope" model --model "$smol" --bench --tokens 128 --repeats "$repeats"
  echo "== transformers, SmolLM2 (decoder)"
  if "$dpy" -c "import transformers, gguf, torch" 2>/dev/null; then
    "$dpy" "$root/tests/model/bench_transformers_decoder.py" "$smol" --tokens 128 --repeats "$repeats"
  else
    echo "(skipped: $dpy cannot import transformers, gguf and torch)"
  fi
fi
