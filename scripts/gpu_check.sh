#!/usr/bin/env bash
# The checks of issue 34 on a machine with an NVIDIA GPU, from binaries built elsewhere by scripts/gpu_pack.sh
# (.gpu/attnscope-gpu.tar.xz): the gpu-labelled tests, then the benches with the GPU's measured bounds in their JSON:
#   attnscope bench --backend cuda --json                    (the attention core, n = 1024, 4096, 8192)
#   attnscope model --synthetic S --backend cuda --bench     (SmolLM2 and Gemma 3 270M shapes, 128 and 8192 tokens,
#                                                             the CPU's figures beside them at 128)
#   scripts/bench_peers.sh --json                            (torch on the same GPU, when python3 has torch with CUDA)
#   attnscope bench --gui --offscreen --backend cuda --json  (the window, n = 8192 among its cases: an EGL context on
#                                                             the GPU, no display; heatmaps through the CUDA-GL interop)
# Run from the checkout's root:  scripts/gpu_check.sh [OUT_DIR]   (default gpu-check/; $OUT when set)
# GPU_CHECK_PARTS (default "tests core gui models peers") chooses the parts, e.g. GPU_CHECK_PARTS="tests core";
# GPU_CHECK_DEADLINE=S skips what would run past S seconds (each step is cut to fit).
# Writes OUT_DIR/gpu_check.log (everything printed, ending with scripts/gpu_summary.py's lines: each goal's figures)
# and OUT_DIR/results.tar.gz (each step's JSON and log).
# Every step has a time limit, so a hung step costs minutes, not the machine's loan; the script goes on after a
# failed step and exits non-zero at the end if any failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"
out="${1:-${OUT:-$root/gpu-check}}"
mkdir -p "$out"
res="$(mktemp -d)"
exec > >(tee "$out/gpu_check.log") 2>&1
failed=()
deadline="${GPU_CHECK_DEADLINE:-0}"  # > 0: seconds after which the remaining steps are skipped (a loan's budget)
step() {  # step NAME SECONDS CMD...: runs CMD with a limit, its stdout into NAME.out, stderr into NAME.err
  local name="$1" limit="$2"; shift 2
  if [ "$deadline" -gt 0 ] && [ "$SECONDS" -ge "$deadline" ]; then
    printf '[gpu_check] %-32s skipped: past GPU_CHECK_DEADLINE=%ss\n' "$name" "$deadline"; failed+=("$name(skipped)"); return
  fi
  if [ "$deadline" -gt 0 ] && [ $((SECONDS + limit)) -gt "$deadline" ]; then limit=$((deadline - SECONDS)); fi
  local t0=$SECONDS rc
  timeout "$limit" "$@" >"$res/$name.out" 2>"$res/$name.err"; rc=$?
  printf '[gpu_check] %-32s rc %-3s %4ss\n' "$name" "$rc" "$((SECONDS - t0))"
  if [ "$rc" != 0 ]; then
    failed+=("$name(rc $rc)")
    tail -n 15 "$res/$name.err" "$res/$name.out" | sed 's/^/    /'
  fi
}

parts=" ${GPU_CHECK_PARTS:-tests core gui models peers} "
want() { [[ "$parts" == *" $1 "* ]]; }
pkg="$root/.gpu/attnscope-gpu.tar.xz"
[ -f "$pkg" ] || { echo "gpu_check: $pkg is missing: run scripts/gpu_pack.sh on the build machine first"; exit 2; }
dir="$(mktemp -d)"
tar -C "$dir" -xJf "$pkg" || { echo "gpu_check: cannot unpack $pkg"; exit 2; }
cat "$dir/BUILD"
# The packed libraries first, then CUDA's (cuBLAS) from this machine's toolkit.
export LD_LIBRARY_PATH="$dir/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin="$dir/bin"
# The test programs name their data by the build machine's checkout path (/work/main/tests/...): point it here.
if [ ! -e /work/main/tests ] && [ "$root" != /work/main ]; then mkdir -p /work && ln -sfn "$root" /work/main; fi

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
nproc; grep -m1 'model name' /proc/cpuinfo || true
missing="$(ldd "$bin/attnscope" | grep 'not found' || true)"
[ -z "$missing" ] || { echo "gpu_check: libraries not found:"; echo "$missing"; }

# 1. The gpu-labelled tests (77 = skipped: no device; counted as a failure here, where a device is the point).
# The EGL context of test_gl_interop: the packed libglvnd finds NVIDIA's EGL through the driver's vendor file.
nv_egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[ -f "$nv_egl" ] && export __EGL_VENDOR_LIBRARY_FILENAMES="$nv_egl"
want tests && for t in $(sed -n 's/^tests: //p' "$dir/BUILD"); do
  [ -x "$bin/$t" ] && step "test.$t" 300 "$bin/$t" --gtest_brief=1
done

# 2. The attention core: the problem of `attnscope bench` (d_model 512, 8 heads, causal).
want core && step bench.n1024 120 "$bin/attnscope" bench --backend cuda --n 1024 --causal --skip-reference --json
want core && step bench.n4096 180 "$bin/attnscope" bench --backend cuda --n 4096 --causal --skip-reference --repeat 3 --json
want core && step bench.n8192 180 "$bin/attnscope" bench --backend cuda --n 8192 --causal --skip-reference --skip-cpu --repeat 3 --json

# 3. Decoders: synthetic models of the real shapes (no model files here), on the GPU at 128 tokens, then torch on the
# same GPU, then 8192 tokens and the CPU's figures (the order of importance, in case the deadline comes first).
want models && for s in smollm2 gemma3-270m; do
  step "model.$s.cuda.128" 150 "$bin/attnscope" model --synthetic "$s" --backend cuda --bench --tokens 128 --repeats 5 --json
done

# 4. torch on the same GPU, when it is here (bench_peers.sh uses this python3 when it imports torch).
if want peers && python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  for n in 4096 8192 1024; do
    ATTNSCOPE_BIN="$bin/attnscope" step "peers.n$n" 150 bash scripts/bench_peers.sh --n "$n" --causal --json
  done
fi

want models && for s in smollm2 gemma3-270m; do
  step "model.$s.cuda.8192" 180 "$bin/attnscope" model --synthetic "$s" --backend cuda --bench --tokens 8192 --repeats 3 --json
done
# 5. The window on the GPU, off screen (an EGL context on the device: the same NVIDIA EGL as test_gl_interop), with
# the n = 8192 case of bench --gui (--gui-large-n defaults to it with --backend cuda). After the decoders: its time is
# the least known, and a loan's deadline should cut it rather than them.
want gui && step gui.bench 300 "$bin/attnscope" bench --gui --offscreen --backend cuda --gui-frames 60 --json

want models && for s in smollm2 gemma3-270m; do
  step "model.$s.cpu.128" 150 "$bin/attnscope" model --synthetic "$s" --backend cpu --bench --tokens 128 --repeats 3 --json
done

# The goals' figures, a line each (scripts/gpu_summary.py reads the steps' JSON above).
python3 scripts/gpu_summary.py "$res" || echo "[gpu_check] gpu_summary.py could not read the results"
tar -C "$res" -czf "$out/results.tar.gz" .
echo "[gpu_check] results in $out/results.tar.gz; failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
