#!/usr/bin/env bash
# attnscope next to its peers on the same problem, in one run: `attnscope bench --json` (the Eigen path),
# PyTorch's nn.MultiheadAttention(need_weights=True, average_attn_weights=False) and a NumPy forward that
# keeps every head's weights, all self-attention with W^Q/W^K/W^V/W^O, float32, every thread of the machine.
# Prints one table with each peer's median and its ratio to attnscope (--json: one JSON object with the same rows
# and attnscope's own bench JSON). Not a test: numbers depend on the machine and its load (run it when `uptime` is
# low).
#
# With a GPU (the python3 that runs the peers has a torch for which torch.cuda.is_available()), also times
# attnscope's CUDA path (`bench --backend cuda`: every map copied, and every map kept on the device) and torch's
# nn.MultiheadAttention on the GPU twice: its weights left on the GPU, and its weights and output copied into pinned
# host memory (non_blocking copies, then a synchronize). torch's need_weights gives the weights only (H·n² floats);
# attnscope's result also has the scores (2·H·n²): the table says so.
#
#   scripts/bench_peers.sh [--n N] [--d-model D] [--heads H] [--causal] [--repeat R] [--json]
#
# Uses the python3 on PATH when it imports torch and numpy (e.g. a GPU machine's own torch), else Debian's
# /usr/bin/python3, installing python3-torch, python3-numpy and libopenblas0 (NumPy's BLAS) when missing; uses
# build/bin/attnscope (set ATTNSCOPE_BIN to use another), building it with scripts/setup.sh if absent.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
n=1024 dmodel=512 heads=8 causal=0 repeat=7 json=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --n) n="$2"; shift 2 ;;
    --d-model) dmodel="$2"; shift 2 ;;
    --heads) heads="$2"; shift 2 ;;
    --causal) causal=1; shift ;;
    --repeat) repeat="$2"; shift 2 ;;
    --json) json=1; shift ;;
    -h|--help) sed -n 2,21p "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "bench_peers.sh: unknown argument '$1' (expected --n, --d-model, --heads, --causal, --repeat, --json)" >&2; exit 2 ;;
  esac
done
for v in "$n" "$dmodel" "$heads" "$repeat"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "bench_peers.sh: expected a positive integer, got '$v'" >&2; exit 2; }
done
(( dmodel % heads == 0 )) || { echo "bench_peers.sh: --heads $heads does not divide --d-model $dmodel" >&2; exit 2; }

# The interpreter of the peers: the python3 on PATH when it has torch and numpy (a GPU machine's torch build), else
# Debian's, for which python3-torch and python3-numpy are installed (a pyenv or venv python3 earlier on PATH would
# not see them).
py=/usr/bin/python3
missing=()
if command -v python3 >/dev/null && python3 -c 'import torch, numpy' >/dev/null 2>&1; then
  py="$(command -v python3)"
else
  for p in python3-torch python3-numpy libopenblas0; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
fi
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

gpu=0
"$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1 && gpu=1
causal_flag=()
[[ $causal -eq 1 ]] && causal_flag=(--causal)
backend_flag=()
[[ $gpu -eq 1 ]] && backend_flag=(--backend cuda)
ours="$("$bin" bench --json --n "$n" --d-model "$dmodel" --heads "$heads" --repeat "$repeat" --skip-reference \
  "${causal_flag[@]}" "${backend_flag[@]}")"

ATTNSCOPE_JSON="$ours" "$py" - "$n" "$dmodel" "$heads" "$causal" "$repeat" "$gpu" "$json" <<'EOF'
import copy, json, os, sys, time

import numpy as np
import torch

n, dm, h, causal, repeat, gpu, as_json = (int(a) for a in sys.argv[1:8])
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
    fn()  # warm-up: allocations, thread pools, CUDA kernels' first load
    ms = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # the GPU peers synchronise before they return
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

def path_row(name, key):
    p = ours["paths"][key]
    return (name, p["median_ms"], p["min_ms"])


rows = [path_row("attnscope (cpu eigen)", "cpu eigen")]
rows.append(("torch nn.MultiheadAttention",) + timed(torch_forward))
rows.append(("numpy (materialised)",) + timed(numpy_forward))

gpu_note = None
if gpu and "cuda" in ours["paths"]:
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 products, as attnscope's cuBLAS calls (TF32 off)
    torch.backends.cudnn.allow_tf32 = False
    mha_gpu = copy.deepcopy(mha).to(dev)
    xg = xt.to(dev)
    mask_g = tmask.to(dev) if tmask is not None else None
    # Pinned host buffers for the copied peer, allocated once (as attnscope's staging is).
    w_host = torch.empty((1, h, n, n), dtype=torch.float32, pin_memory=True)
    o_host = torch.empty((1, n, dm), dtype=torch.float32, pin_memory=True)

    def torch_gpu_kept():
        with torch.no_grad():
            o, w = mha_gpu(xg, xg, xg, need_weights=True, average_attn_weights=False, attn_mask=mask_g)
        torch.cuda.synchronize()
        return o, w

    def torch_gpu_copied():
        with torch.no_grad():
            o, w = mha_gpu(xg, xg, xg, need_weights=True, average_attn_weights=False, attn_mask=mask_g)
            w_host.copy_(w, non_blocking=True)
            o_host.copy_(o, non_blocking=True)
        torch.cuda.synchronize()
        return o_host, w_host

    o_g, _ = torch_gpu_kept()
    err = float(torch.max(torch.abs(o_g[0].cpu() - o_t[0])))
    assert err < 1e-3, f"torch on the GPU and on the CPU disagree by {err}"
    rows.append(path_row("attnscope cuda, maps copied", "cuda"))
    rows.append(path_row("attnscope cuda, maps on device", "cuda, maps on device"))
    rows.append(("torch cuda, weights on GPU",) + timed(torch_gpu_kept))
    rows.append(("torch cuda, weights to pinned",) + timed(torch_gpu_copied))
    gpu_note = (f"GPU {torch.cuda.get_device_name(0)}: torch returns the weights only ({h}·n² floats), attnscope the "
                f"scores and the weights (2·{h}·n²)")

header = (f"self-attention n={n} d_model={dm} heads={h} {'causal' if causal else 'no mask'}, float32, "
          f"weights of every head kept, {threads} threads; median/min of {repeat} runs")
versions = f"torch {torch.__version__} ({torch.get_num_threads()} threads), numpy {np.__version__}"
base = rows[0][1]
if as_json:
    print(json.dumps({"problem": {"n": n, "d_model": dm, "heads": h, "causal": bool(causal), "repeat": repeat},
                      "versions": versions, "gpu_note": gpu_note,
                      "rows": [{"path": name, "median_ms": med, "min_ms": mn, "over_attnscope_cpu": med / base}
                               for name, med, mn in rows],
                      "attnscope": ours}, indent=2))
    sys.exit(0)
print(header)
print(versions)
if gpu_note:
    print(gpu_note)
print(f"{'path':32s} {'median ms':>10s} {'min ms':>10s} {'x attnscope':>12s}")
for name, med, mn in rows:
    print(f"{name:32s} {med:10.2f} {mn:10.2f} {med / base:11.1f}x")
edit = ours.get("edit_x_cell")
if edit:
    print(f"attnscope, one X cell edited (incremental): median {edit['median_ms']:.2f} ms")
link = ours.get("gpu_copies")
if link and link.get("pinned_link_bound_ms"):
    print(f"attnscope cuda, maps copied: {link['copied_path_over_link_bound']:.2f} of the pinned link's bound "
          f"({link['pinned_link_bound_ms']:.2f} ms for {link['copied_mb']:.0f} MB)")
EOF
