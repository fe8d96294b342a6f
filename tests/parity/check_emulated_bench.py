"""The command line's GPU benches over the emulated runtime (attnscope_emulated, tests/parity/CMakeLists.txt).

    check_emulated_bench.py EXE model CONFIG TOKENS   model --synthetic CONFIG --backend cuda --bench --tokens TOKENS
    check_emulated_bench.py EXE core                  bench --backend cuda --json (a small problem)

Runs the bench, parses its JSON and checks what scripts/gpu_check.sh and gpu_summary.py read from it on a lent GPU:
every section present and without an error, the device's results equal to the host's within the parity suite's
tolerances, and the structure that says which path ran (the fused attention allocates no scores; Auto timed the
shapes a forward and an append have). The times are the emulation's (its CUDA events report 1 µs) and are only
checked to be there.
"""
import json
import os
import subprocess
import sys
import tempfile

SUMMARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "gpu_summary.py")

# tests/parity/test_decoder_device.cpp's tolerances: hidden states 1e-4 (relative to max(1, |value|)), logits and the
# surprise 1e-3, the weights (probabilities) 1e-5 absolute.
HIDDEN_TOL = 1e-4
LOGIT_TOL = 1e-3
WEIGHT_TOL = 1e-5

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(args):
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("FAIL: %s exited %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()[-2000:]))
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        sys.exit("FAIL: %s: its output is not JSON (%s): %s" % (" ".join(args), e, p.stdout[:400]))


def positive(j, *keys):
    for k in keys:
        v = j.get(k)
        check(isinstance(v, (int, float)) and v > 0, "%s: expected a positive number, got %r" % (k, v))


def no_error(j, name):
    s = j.get(name)
    check(isinstance(s, dict), "%s: missing" % name)
    if isinstance(s, dict):
        check("error" not in s, "%s: error %r" % (name, s.get("error")))
    return s if isinstance(s, dict) else {}


def check_bounds(j):
    check("gpu_bounds_error" not in j, "gpu_bounds_error: %r" % j.get("gpu_bounds_error"))
    b = j.get("gpu_bounds", {})
    positive(b, "sgemm_gflops", "device_memory_gbs", "pinned_host_to_device_gbs", "pinned_device_to_host_gbs")


def summary_lines(outputs, prefix):
    """scripts/gpu_summary.py's lines starting with `prefix`, over `outputs` ({step name: JSON}) written as gpu_check.sh
    writes its steps' outputs: the summary must find every figure of the bench's JSON it prints (no "n/a" where the
    bench wrote it)."""
    with tempfile.TemporaryDirectory() as d:
        for name, j in outputs.items():
            with open(os.path.join(d, name + ".out"), "w", encoding="utf-8") as f:
                json.dump(j, f)
        p = subprocess.run([sys.executable, SUMMARY, d], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "gpu_summary.py exited %d: %s" % (p.returncode, p.stderr))
    lines = [l for l in p.stdout.splitlines() if l.startswith(prefix)]
    check(lines, "gpu_summary.py: no line starting with %r in %r" % (prefix, p.stdout))
    return lines


def check_model(exe, config, tokens):
    j = run([exe, "model", "--synthetic", config, "--backend", "cuda", "--bench", "--json", "--tokens", str(tokens),
             "--repeats", "1"])
    check(j.get("backend", "").startswith("CUDA"), "backend: expected CUDA, got %r" % j.get("backend"))
    check(j.get("tokens") == tokens, "tokens: expected %d, got %r" % (tokens, j.get("tokens")))
    check(j.get("lazy") is True, "lazy: expected a lazy forward at %d tokens, got %r" % (tokens, j.get("lazy")))
    positive(j, "forward_ms", "first_forward_ms", "forward_bound_ms", "append_token_ms", "append_token_uploaded_ms",
             "ablation_toggle_ms")
    products = j.get("forward_phases", {})
    positive(products, "bytes_back_mb", "device_activations_mb")

    fused = no_error(j, "fused_attention")
    positive(fused, "forward_ms", "layers_ms", "append_token_ms")
    diff = fused.get("max_abs_diff", {})
    for key, tol in (("last_layer_lse", HIDDEN_TOL), ("final_norm", HIDDEN_TOL), ("last_logits", LOGIT_TOL)):
        v = diff.get(key)
        check(isinstance(v, (int, float)) and 0 <= v <= tol,
              "fused_attention.max_abs_diff.%s: expected at most %g against the products, got %r" % (key, tol, v))
    # The fused forward allocates no scores: fewer device bytes than the products' forward.
    fused_mb = fused.get("forward_phases", {}).get("device_activations_mb", 0)
    check(0 < fused_mb < products.get("device_activations_mb", 0),
          "fused_attention: expected fewer device bytes than the products' %r MB (no scores), got %r MB"
          % (products.get("device_activations_mb"), fused_mb))

    auto = no_error(j, "auto_attention")
    positive(auto, "first_forward_ms", "forward_ms", "append_token_ms")
    choices = auto.get("choices", [])
    pow2 = 1 << (tokens - 1).bit_length()
    queries = sorted({c.get("queries") for c in choices})
    # The forward's shape (tokens queries, rounded up to a power of two) and the append's (one query).
    check(1 in queries and pow2 in queries, "auto_attention.choices: expected shapes of 1 and %d queries, got %r"
          % (pow2, choices))
    for c in choices:
        positive(c, "products_ms", "fused_ms")
        check(isinstance(c.get("fused"), bool), "auto_attention.choices: 'fused' is not a bool in %r" % c)

    maps = no_error(j, "lazy_maps_pooled")
    check(maps.get("device_reads", 0) == maps.get("heads", -1),
          "lazy_maps_pooled: expected every head read on the device, got %r of %r" % (maps.get("device_reads"),
                                                                                     maps.get("heads")))
    v = maps.get("max_abs_diff")
    check(isinstance(v, (int, float)) and 0 <= v <= WEIGHT_TOL,
          "lazy_maps_pooled.max_abs_diff: expected at most %g (device against host), got %r" % (WEIGHT_TOL, v))
    scan = j.get("head_scan", {})
    positive(scan, "total_ms", "heads")
    parity = no_error(j, "cpu_parity")
    check(parity.get("tokens") == min(tokens, 128), "cpu_parity.tokens: expected %d, got %r" % (min(tokens, 128),
                                                                                              parity.get("tokens")))
    for key, tol in (("final_norm_rel", HIDDEN_TOL), ("last_logits_rel", LOGIT_TOL), ("weights_abs", WEIGHT_TOL),
                     ("surprise_abs", LOGIT_TOL)):
        v = parity.get(key)
        check(isinstance(v, (int, float)) and 0 <= v <= tol,
              "cpu_parity.%s: expected at most %g (the device's dense run against the CPU's), got %r" % (key, tol, v))
    check_bounds(j)
    # As the summary reads a long run and a short one (SmolLM2's step names; the JSON is this shape's).
    for line in summary_lines({"model.smollm2.cuda.8192": j, "model.smollm2.cuda.128": j}, "  smollm2"):
        check("n/a" not in line and "error" not in line, "gpu_summary.py: %r" % line)


def check_core(exe):
    j = run([exe, "bench", "--backend", "cuda", "--json", "--n", "64", "--d-model", "32", "--heads", "4", "--repeat", "2",
             "--causal"])
    paths = j.get("paths", {})
    for name in ("cuda", "cuda, maps on device", "cpu eigen"):
        check(name in paths, "paths: %r missing (has %r)" % (name, sorted(paths)))
    for name in ("cuda", "cuda, maps on device"):
        p = paths.get(name, {})
        positive(p, "median_ms", "kernels_ms")
        check(isinstance(p.get("copies_parts_ms"), dict), "%s: copies_parts_ms missing" % name)
    check(paths.get("cuda, maps on device", {}).get("maps_on_device") is True,
          "cuda, maps on device: expected maps_on_device true")
    copies = j.get("gpu_copies", {})
    positive(copies, "copied_mb", "pinned_link_bound_ms", "copied_path_ms", "maps_on_device_ms")
    check_bounds(j)
    # The summary's core line: torch's side is n/a here (no peers step), attnscope's copied path and parts are not.
    for line in summary_lines({"bench.n4096": j}, "  core n=4096"):
        check("of the pinned link" in line and "copied path at n/a" not in line and "parts n/a" not in line,
              "gpu_summary.py: %r" % line)


def main():
    exe, kind = sys.argv[1], sys.argv[2]
    if kind == "model":
        check_model(exe, sys.argv[3], int(sys.argv[4]))
    elif kind == "core":
        check_core(exe)
    else:
        sys.exit("FAIL: unknown kind %r (expected model or core)" % kind)
    if failures:
        for f in failures:
            print("FAIL: " + f, file=sys.stderr)
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
