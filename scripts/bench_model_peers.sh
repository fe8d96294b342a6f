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

# Decoder: SmolLM2 Q4_1 at 128, 1024 and 2048 tokens (DECODER_TOKENS), attnscope and transformers (the GGUF
# dequantized by gguf-py, eager attention with output_attentions=True: every layer's n×n weights, as attnscope's
# views need them). Each transformers size runs in its own process, so its peak RSS is that size's alone. The second
# needs a venv with torch, transformers and gguf (DECODER_PY, default /tmp/ref-venv/bin/python;
# make_decoder_goldens.py's docstring says how to make it). Long sizes repeat fewer times (a forward takes seconds).
smol="$root/build/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
dpy="${DECODER_PY:-/tmp/ref-venv/bin/python}"
if [ -f "$smol" ]; then
  for n in ${DECODER_TOKENS:-128 1024 2048}; do
    r="$repeats"
    if [ "$n" -gt 128 ] && [ "$r" -gt 3 ]; then r=3; fi
    echo "== attnscope, SmolLM2 (decoder), $n tokens"
    "$root/build/bin/attnscope" model --model "$smol" --bench --tokens "$n" --repeats "$r" --json
    echo "== transformers, SmolLM2 (decoder), $n tokens"
    if "$dpy" -c "import transformers, gguf, torch" 2>/dev/null; then
      "$dpy" "$root/tests/model/bench_transformers_decoder.py" "$smol" --tokens "$n" --repeats "$r"
    else
      echo "(skipped: $dpy cannot import transformers, gguf and torch)"
    fi
  done
fi

# llama.cpp on the same file: one token at a time (`tg64`: the appended token's work without any map kept, its
# activations rounded to 8 bits) and a 128-token prompt (`pp128`), beside `append_token_ms` and `forward_ms` above.
# LLAMA_BENCH is a llama-bench binary (default /tmp/llama.cpp/build/bin/llama-bench). To make it, from the sources
# llama-cpp-python vendors (PyPI holds them; nothing of it is installed):
#   pip download llama-cpp-python==0.2.90 --no-deps --no-binary llama-cpp-python -d /tmp/llama-src
#   tar xzf /tmp/llama-src/llama_cpp_python-0.2.90.tar.gz -C /tmp/llama-src
#   cmake -S /tmp/llama-src/llama_cpp_python-0.2.90/vendor/llama.cpp -B /tmp/llama.cpp/build \
#     -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF
#   cmake --build /tmp/llama.cpp/build --target llama-bench -j"$(nproc)"
lb="${LLAMA_BENCH:-/tmp/llama.cpp/build/bin/llama-bench}"
if [ -f "$smol" ]; then
  echo "== llama.cpp, SmolLM2 (decoder), $(nproc) threads"
  if [ -x "$lb" ]; then
    "$lb" -m "$smol" -p 128 -n 64 -t "$(nproc)" -r 5
  else
    echo "(skipped: no llama-bench at $lb)"
  fi
fi
