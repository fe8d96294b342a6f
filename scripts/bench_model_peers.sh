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
