#!/usr/bin/env python3
"""Issue 34's goals, read from the JSON that scripts/gpu_check.sh's steps wrote (NAME.out files), a line each:
each figure beside its goal, "n/a" where a step did not run or its JSON lacks the figure.

    scripts/gpu_summary.py DIR     DIR: gpu_check's step outputs (results.tar.gz unpacked, or its working folder)

gpu_check.sh runs it at its end; it reads nothing else and changes nothing.
"""
import json
import os
import sys


def load(folder, name):
    """The JSON object that step `name` printed, or None (not run, failed, or no JSON in its output)."""
    path = os.path.join(folder, name + ".out")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.loads(text[start:])
    except ValueError:
        return None


def get(obj, *keys):
    for k in keys:
        if not isinstance(obj, dict) or k not in obj:
            return None
        obj = obj[k]
    return obj


def fmt(v, digits=2):
    return "n/a" if not isinstance(v, (int, float)) else f"{v:.{digits}f}"


def peer_row(peers, path):
    for row in (peers or {}).get("rows", []):
        if row.get("path") == path:
            return row.get("median_ms")
    return None


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("gpu_summary.py: expected one argument, the folder of gpu_check's step outputs", file=sys.stderr)
        return 2
    d = sys.argv[1]
    print("[gpu_summary] issue 34's goals (figures from this run's JSON)")
    for n in (4096, 8192):
        peers = load(d, f"peers.n{n}")
        ours, torch = peer_row(peers, "attnscope cuda, maps on device"), peer_row(peers, "torch cuda, weights on GPU")
        ratio = ours / torch if isinstance(ours, (int, float)) and isinstance(torch, (int, float)) and torch > 0 else None
        bench = load(d, f"bench.n{n}")
        kept = get(bench, "paths", "cuda, maps on device")
        times = f"{fmt(ratio)}x" if ratio is not None else "n/a"
        print(f"  core n={n}: maps on device {fmt(ours)} ms vs torch {fmt(torch)} ms = {times} (goal <= 2); "
              f"copied path at {fmt(get(bench, 'gpu_copies', 'copied_path_over_link_bound'))} of the pinned link "
              f"(goal >= 0.5); maps-kept parts {json.dumps(get(kept, 'copies_parts_ms')) if kept else 'n/a'}")
    for s in ("smollm2", "gemma3-270m"):
        long_run = load(d, f"model.{s}.cuda.8192")
        short = load(d, f"model.{s}.cuda.128")
        phases = get(long_run, "forward_phases") or {}
        print(f"  {s} 8192 tokens: forward {fmt(get(long_run, 'forward_ms'), 1)} ms, "
              f"{fmt(get(long_run, 'forward_over_bound'))} of the SGEMM bound (goal >= 0.5); layers "
              f"{fmt(phases.get('layers_ms'), 1)}, head {fmt(phases.get('head_ms'), 1)}, copies {fmt(phases.get('copies_ms'), 1)} ms; "
              f"buffers recycled {fmt(get(long_run, 'forward_buffers_recycled'), 0)}")
        fused = get(long_run, "fused_attention") or {}
        print(f"  {s} 8192 tokens, attention fused: forward {fmt(fused.get('forward_ms'), 1)} ms, "
              f"{fmt(fused.get('forward_over_bound'))} of the bound; layers {fmt(fused.get('layers_ms'), 1)} ms, "
              f"products / fused {fmt(fused.get('layers_products_over_fused'))} (> 1: fused faster); device activations "
              f"{fmt(phases.get('device_activations_mb'), 0)} -> {fmt(get(fused, 'forward_phases', 'device_activations_mb'), 0)} MB; "
              f"append a token {fmt(get(long_run, 'append_token_ms'), 1)} -> {fmt(fused.get('append_token_ms'), 1)} ms; "
              f"max |diff| {json.dumps(fused.get('max_abs_diff')) if fused else 'n/a'}"
              + (f"; error: {fused['error']}" if fused.get("error") else ""))
        auto = get(long_run, "auto_attention") or {}
        chosen = "; ".join(f"{c.get('queries')}x{c.get('keys')} window {c.get('window')}: products {fmt(c.get('products_ms'))} / "
                           f"fused {fmt(c.get('fused_ms'))} ms -> {'fused' if c.get('fused') else 'products'}"
                           for c in auto.get("choices", []))
        print(f"  {s} 8192 tokens, attention auto (the default): forward {fmt(auto.get('forward_ms'), 1)} ms "
              f"(first, timing both: {fmt(auto.get('first_forward_ms'), 1)}), {fmt(auto.get('forward_over_bound'))} of the bound; "
              f"append a token {fmt(auto.get('append_token_ms'), 1)} ms; chose {chosen or 'n/a'}"
              + (f"; error: {auto['error']}" if auto.get("error") else ""))
        print(f"  {s} 128 tokens: head-importance scan {fmt(get(short, 'head_scan', 'total_ms'), 1)} ms (goal < 1000)")
        parity = get(short, "cpu_parity") or {}
        print(f"  {s} {parity.get('tokens', 'n/a')} tokens, the device against the CPU (goal: the parity suite's tolerances): "
              f"final norm {fmt(parity.get('final_norm_rel'), 7)} (relative; 1e-4), last logits "
              f"{fmt(parity.get('last_logits_rel'), 7)} (relative; 1e-3), weights {fmt(parity.get('weights_abs'), 7)} (1e-5), "
              f"surprise {fmt(parity.get('surprise_abs'), 7)} (1e-3)" + (f"; error: {parity['error']}" if parity.get("error") else ""))
    gui = load(d, "gui.bench")
    large = get(gui, "large") or {}
    print(f"  window n={large.get('n', 'n/a')}: frames while computing p95 "
          f"{fmt(get(large, 'frame_ms_while_computing', 'p95'), 1)} ms (goal <= 50); the frame showing a result p95 "
          f"{fmt(get(large, 'frame_showing_result_ms', 'p95'), 1)} ms; zoomed: first frame "
          f"{fmt(get(large, 'zoomed', 'first_frame_ms'), 1)} ms, showing a result median "
          f"{fmt(get(large, 'zoomed', 'frame_showing_result_ms', 'median'), 1)} / max "
          f"{fmt(get(large, 'zoomed', 'frame_showing_result_ms', 'max'), 1)} ms (goal: within a frame); "
          f"device tile fills {large.get('heatmap_device_fills', 'n/a')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
