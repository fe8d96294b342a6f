#!/usr/bin/env bash
# attnscope next to its peers on the same problem, in one run: `attnscope bench --json` (the Eigen path),
# PyTorch's nn.MultiheadAttention(need_weights=True, average_attn_weights=False) and a NumPy forward that
# keeps every head's weights, all self-attention with W^Q/W^K/W^V/W^O, float32, every thread of the machine.
# Prints one table with each peer's median and its ratio to attnscope. Not a test: numbers depend on the
# machine and its load (run it when `uptime` is low).
#
#   scripts/bench_peers.sh [--n N] [--d-model D] [--heads H] [--causal] [--repeat R]
#
# Installs Debian's python3-torch, python3-numpy and libopenblas0 (NumPy's BLAS) when missing; uses
# build/bin/attnscope (set ATTNSCOPE_BIN to use another), building it with scripts/setup.sh if absent.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
n=1024 dmodel=512 heads=8 causal=0 repeat=7
while [[ $# -gt 0 ]]; do
  case "$1" in
    --n) n="$2"; shift 2 ;;
    --d-model) dmodel="$2"; shift 2 ;;
    --heads) heads="$2"; shift 2 ;;
    --causal) causal=1; shift ;;
    --repeat) repeat="$2"; shift 2 ;;
    -h|--help) sed -n 2,11p "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "bench_peers.sh: unknown argument '$1' (expected --n, --d-model, --heads, --causal, --repeat)" >&2; exit 2 ;;
  esac
done
for v in "$n" "$dmodel" "$heads" "$repeat"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "bench_peers.sh: expected a positive integer, got '$v'" >&2; exit 2; }
done
(( dmodel % heads == 0 )) || { echo "bench_peers.sh: --heads $heads does not divide --d-model $dmodel" >&2; exit 2; }

missing=()
for p in python3-torch python3-numpy libopenblas0; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  sudo=()
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  echo "bench_peers.sh: installing ${missing[*]}" >&2
  "${sudo[@]}" apt-get update -q >&2 || true
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

bin="${ATTNSCOPE_BIN:-$root/build/bin/attnscope}"
if [[ ! -x "$bin" ]]; then
  # shellcheck source=setup.sh
  source "$root/scripts/setup.sh"
  attnscope_setup
fi

causal_flag=()
[[ $causal -eq 1 ]] && causal_flag=(--causal)
json="$("$bin" bench --json --n "$n" --d-model "$dmodel" --heads "$heads" --repeat "$repeat" --skip-reference "${causal_flag[@]}")"

# Debian's interpreter: python3-torch and python3-numpy are installed for it (a pyenv or venv python3 earlier
# on PATH would not see them).
ATTNSCOPE_JSON="$json" /usr/bin/python3 - "$n" "$dmodel" "$heads" "$causal" "$repeat" <<'EOF'
import json, os, sys, time

import numpy as np
import torch

n, dm, h, causal, repeat = (int(a) for a in sys.argv[1:6])
d = dm // h
ours = json.loads(os.environ["ATTNSCOPE_JSON"])
threads = os.cpu_count() or 1
torch.set_num_threads(threads)

rng = np.random.default_rng(1)
X = rng.standard_normal((n, dm), dtype=np.float32)
w = 1.0 / np.sqrt(dm)
Wq, Wk, Wv, Wo = (rng.standard_normal((dm, dm), dtype=np.float32) * np.float32(w) for _ in range(4))
mask = np.triu(np.ones((n, n), dtype=bool), 1) if causal else None  # True = masked (key j > query i)


def timed(fn):
    fn()  # warm-up: allocations, thread pools
    ms = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    return ms[len(ms) // 2], ms[0]


def numpy_forward():
    q = (X @ Wq).reshape(n, h, d).transpose(1, 0, 2)
    k = (X @ Wk).reshape(n, h, d).transpose(1, 0, 2)
    v = (X @ Wv).reshape(n, h, d).transpose(1, 0, 2)
    s = q @ k.transpose(0, 2, 1) * np.float32(1.0 / np.sqrt(d))  # h×n×n, kept (the weights are materialised)
    if mask is not None:
        s[:, mask] = -np.inf
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    o = (s @ v).transpose(1, 0, 2).reshape(n, dm)
    return o @ Wo, s


mha = torch.nn.MultiheadAttention(dm, h, bias=False, batch_first=True)
with torch.no_grad():
    mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([Wq.T, Wk.T, Wv.T])))
    mha.out_proj.weight.copy_(torch.from_numpy(Wo.T.copy()))
xt = torch.from_numpy(X).unsqueeze(0)
tmask = torch.from_numpy(mask) if mask is not None else None


def torch_forward():
    with torch.no_grad():
        return mha(xt, xt, xt, need_weights=True, average_attn_weights=False, attn_mask=tmask)


# The peers agree with each other (and so on the problem) before anyone is timed.
o_np, _ = numpy_forward()
o_t, w_t = torch_forward()
assert tuple(w_t.shape[-3:]) == (h, n, n), w_t.shape
err = float(np.max(np.abs(o_t[0].numpy() - o_np)))
assert err < 1e-3, f"torch and NumPy disagree by {err}"

rows = [("attnscope (cpu eigen)", ours["paths"]["cpu eigen"]["median_ms"], ours["paths"]["cpu eigen"]["min_ms"])]
rows.append(("torch nn.MultiheadAttention",) + timed(torch_forward))
rows.append(("numpy (materialised)",) + timed(numpy_forward))

print(f"self-attention n={n} d_model={dm} heads={h} {'causal' if causal else 'no mask'}, float32, "
      f"weights of every head kept, {threads} threads; median/min of {repeat} runs")
print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), numpy {np.__version__}")
print(f"{'path':30s} {'median ms':>10s} {'min ms':>10s} {'x attnscope':>12s}")
base = rows[0][1]
for name, med, mn in rows:
    print(f"{name:30s} {med:10.2f} {mn:10.2f} {med / base:11.1f}x")
edit = ours.get("edit_x_cell")
if edit:
    print(f"attnscope, one X cell edited (incremental): median {edit['median_ms']:.2f} ms")
EOF
